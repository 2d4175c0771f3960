"""partree.parallel.sockcomm: the TCP communicator's calls follow mpi4py's semantics (ranks as
threads of one process); reductions add in rank order (the same bits as a sum over the ranks'
values left to right); an aborted or vanished rank ends the others' calls with CommAborted; the
MPI engine and the MPI simulation backend run over it and equal the serial runs."""
import threading

import numpy as np
import pytest

from partree.parallel.sockcomm import MAX, MIN, CommAborted, SocketComm, listen, local_comms


def _spmd(size, fn, timeout=60):
    """fn(comm) on ``size`` ranks (threads); returns the per-rank results, raises the first error."""
    comms = local_comms(size)
    out, errs = [None] * size, [None] * size

    def run(r):
        try:
            out[r] = fn(comms[r])
        except BaseException as e:    # noqa: BLE001 -- reported below
            errs[r] = e
    ths = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(size)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(timeout)
        assert not t.is_alive(), "a rank hangs"
    for c in comms:
        c.close()
    for e in errs:
        if e is not None:
            raise e
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_object_collectives(size):
    def fn(comm):
        r = comm.Get_rank()
        assert comm.Get_size() == size
        got = {"bcast": comm.bcast({"x": 7} if r == 0 else None, root=0),
               "gather": comm.gather((r, "a" * r), root=0),
               "allgather": comm.allgather(r * 10),
               "allreduce": comm.allreduce(r + 1),
               "allreduce_max": comm.allreduce(float(r % 3), op=MAX),
               "allreduce_min": comm.allreduce(-r, op=MIN),
               "reduce": comm.reduce(np.array([r, 1.0]), root=0)}
        comm.Barrier()
        return got

    res = _spmd(size, fn)
    for r, g in enumerate(res):
        assert g["bcast"] == {"x": 7}
        assert g["gather"] == ([(k, "a" * k) for k in range(size)] if r == 0 else None)
        assert g["allgather"] == [10 * k for k in range(size)]
        assert g["allreduce"] == sum(range(1, size + 1))
        assert g["allreduce_max"] == max(float(k % 3) for k in range(size))
        assert g["allreduce_min"] == -(size - 1)
        if r == 0:
            assert np.array_equal(g["reduce"], [sum(range(size)), float(size)])
        else:
            assert g["reduce"] is None


def test_sums_are_in_rank_order():
    """allreduce and Allreduce add the ranks' values left to right (rank 0 first): the bits of
    the ordered sum, the same on every rank."""
    vals = [1e16, 1.0, -1e16, 1.0]

    def fn(comm):
        r = comm.Get_rank()
        out = np.empty(3)
        comm.Allreduce(np.full(3, vals[r]), out)
        return comm.allreduce(vals[r]), out

    expect = ((vals[0] + vals[1]) + vals[2]) + vals[3]
    for a, b in _spmd(4, fn):
        assert a == expect and np.all(b == expect)


def test_vector_collectives_mpi4py_buffer_forms():
    """Gatherv / Scatterv with [buf, (counts, displs)] and [buf, (counts, displs), type], an
    empty piece, Allreduce with MPI's MAX when mpi4py is there."""
    counts = [3, 0, 5]
    displs = [0, 3, 3]

    def fn(comm):
        r = comm.Get_rank()
        mine = np.arange(counts[r], dtype=float) + 100 * r
        recv = [np.empty(8), (counts, displs)] if r == 0 else None
        comm.Gatherv(mine, recv, root=0)
        out = np.empty(counts[r])
        send = [np.arange(8.0) * 2, (counts, displs), "double"] if r == 0 else None
        comm.Scatterv(send, out, root=0)
        mx = np.empty(2, dtype=np.int64)
        comm.Allreduce(np.array([r, -r], dtype=np.int64), mx, op=MAX)
        return (recv[0] if r == 0 else None), out, mx

    res = _spmd(3, fn)
    assert np.array_equal(res[0][0], np.concatenate([np.arange(3.0), np.arange(5.0) + 200]))
    full = np.arange(8.0) * 2
    for r, (_, out, mx) in enumerate(res):
        assert np.array_equal(out, full[displs[r]:displs[r] + counts[r]])
        assert mx.tolist() == [2, 0]


def test_point_to_point_tags_are_matched():
    """Messages from rank 0 received in another tag order than sent (they wait in a queue), and
    interleaved with a collective."""
    def fn(comm):
        if comm.Get_rank() == 0:
            comm.send("a", dest=1, tag=5)
            comm.send({"b": 2}, dest=1, tag=3)
            comm.bcast("c", root=0)
            return comm.recv(source=1, tag=9)
        b = comm.recv(source=0, tag=3)
        c = comm.bcast(None, root=0)
        a = comm.recv(source=0, tag=5)
        comm.send([a, b, c], dest=0, tag=9)
        return None

    assert _spmd(2, fn)[0] == ["a", {"b": 2}, "c"]


def test_mpi4py_operation_objects():
    MPI = pytest.importorskip("mpi4py.MPI")

    def fn(comm):
        out = np.empty(1)
        comm.Allreduce(np.array([float(comm.Get_rank())]), out, op=MPI.MAX)
        return comm.allreduce(comm.Get_rank() + 1.0, op=MPI.MAX), out[0], comm.allreduce(2, op=MPI.SUM)

    assert _spmd(3, fn) == [(3.0, 2.0, 6)] * 3


def test_abort_ends_the_other_ranks_calls():
    def fn(comm):
        if comm.Get_rank() == 1:
            comm.Abort(1)
            return "aborted"
        with pytest.raises(CommAborted):
            comm.allgather(1)
        return "raised"

    assert _spmd(3, fn) == ["raised", "aborted", "raised"]


def test_a_stranger_is_turned_away():
    """Rank 0 accepts only connections that present the group's token."""
    srv = listen("127.0.0.1")
    addr = ("127.0.0.1", srv.getsockname()[1])
    got = {}
    th = threading.Thread(target=lambda: got.setdefault("c", SocketComm.accept(srv, 2, "good", timeout=20)))
    th.start()
    SocketComm.connect(1, 2, addr, "bad")
    c1 = SocketComm.connect(1, 2, addr, "good")
    th.join(30)
    c0 = got["c"]
    c0.send(np.arange(3), dest=1, tag=0)
    assert np.array_equal(c1.recv(source=0, tag=0), np.arange(3))
    c0.close()
    c1.close()


def test_mpi_simulation_backend_over_sockets_equals_serial():
    """The MPI simulation backend over a SocketComm (3 ranks as threads, 4 parts): the serial
    run's trajectory (RK4 and DOPRI5), on rank 0."""
    from partree.models.generators import random_tree
    from partree.simulation import simulate

    m = random_tree(24, seed=3, joint_types=("revolute", "prismatic", "spherical"))
    rng = np.random.default_rng(2)
    kw = dict(q0=m.random_configuration(rng), qd0=m.random_velocity(rng, 0.5), torques=rng.normal(size=m.nv) * 0.1,
              progress=False, verbose=False, catch_signals=False)
    for integ, t_end, dt in [("rk4", 0.004, 1e-3), ("dopri5", 0.05, 0.025)]:
        ref = simulate(m, t_end, dt, integrator=integ, **kw)
        res = _spmd(3, lambda comm: simulate(m, t_end, dt, integrator=integ, backend="mpi", comm=comm, parts=4, **kw))
        assert res[1] is None and res[2] is None
        assert np.abs(res[0].q - ref.q).max() < 1e-12 and np.abs(res[0].qd - ref.qd).max() < 1e-12
        assert res[0].summary["steps"] == ref.summary["steps"]
