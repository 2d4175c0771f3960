"""Run under mpiexec: evaluate_batch over the ranks against the batched serial algorithms.

Rank 0 holds the arrays (the others pass None); rows are scattered in blocks, evaluated and
gathered on rank 0 (a batch of fewer rows than ranks too).  Also a row-count mismatch raises on
every rank.  Prints 'OK <rows>' on rank 0 and exits 0."""
import numpy as np
from mpi4py import MPI

import partree
from partree.errors import PartreeInputError
from partree.models.generators import random_tree
from partree.parallel.batch import evaluate_batch

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
m = random_tree(15, seed=8, floating_base=True, joint_types=("revolute", "spherical", "prismatic"))
rng = np.random.default_rng(2)
for rows in (37, 1):
    Q = np.array([m.random_configuration(rng) for _ in range(rows)])
    QD, X = rng.standard_normal((rows, m.nv)), rng.standard_normal((rows, m.nv))
    args = (Q, QD, X) if rank == 0 else (None, None, None)
    for name, arrs, ref in (("aba", args, lambda: partree.aba(m, Q, QD, X)),
                            ("rnea", args, lambda: partree.rnea(m, Q, QD, X)),
                            ("crba", args[:1], lambda: partree.crba(m, Q))):
        got = evaluate_batch(name, m, *arrs, backend="mpi")
        if rank == 0:
            assert np.array_equal(got, ref()), name
        else:
            assert got is None
try:
    evaluate_batch("aba", m, *((Q, QD[:0], X) if rank == 0 else (None, None, None)), backend="mpi")
    raise SystemExit("a row-count mismatch was accepted")
except PartreeInputError as e:
    assert "different numbers of rows" in str(e), e
if rank == 0:
    print("OK", 37)
