"""The compiled flat root (``partree.parallel.root``) against one dense solve of the whole
coupled system of the parts' boundary relations, built independently here."""
import numpy as np
import pytest

from partree.errors import PartreeInputError
from partree.parallel import messages as msg
from partree.parallel import root as R


def _random_tree(rng, P):
    """A tree of P parts (parents numbered first); each child hangs from a random handle of its
    parent, several children may share one handle."""
    parent = np.full(P, -1, dtype=np.int64)
    nh = np.zeros(P, dtype=np.int64)
    hidx = np.full(P, -1, dtype=np.int64)
    for c in range(1, P):
        if rng.random() < 0.15:
            continue                       # another part hanging from the base
        p = int(rng.integers(0, c))
        if nh[p] == 0 or rng.random() < 0.5:
            nh[p] += 1
            hidx[c] = nh[p] - 1
        else:
            hidx[c] = int(rng.integers(0, nh[p]))
        parent[c] = p
    return R.PartsTree(part_parent=parent, hidx=hidx, nh=nh)


def _random_relations(rng, tree, scale=0.15):
    red = []
    for p in range(tree.nparts):
        H = int(tree.nh[p])
        A = rng.standard_normal((6, 6))
        M = A @ A.T + 6 * np.eye(6)
        m0 = rng.standard_normal(6)
        Kt = scale * rng.standard_normal((H, 6, 6))
        Lam = scale * rng.standard_normal((H, H, 6, 6))
        beta = rng.standard_normal((H, 6))
        red.append((M, m0, Kt, Kt.transpose(0, 2, 1), Lam, beta))
    return red


def _dense(tree, red, a0):
    """Unknowns a_in (P, 6) and every handle's wrench g; rows: a_in = a0 at the top, a_in of a
    child = its parent's handle acceleration Psi a_in + sum_k Lam g_k + beta, and each handle's
    g = the sum over its children of M a_in + m0 + sum_k Kt_k g_k."""
    P = tree.nparts
    hoff = np.concatenate(([0], np.cumsum(tree.nh)))
    n = 6 * (P + hoff[-1])
    A = np.zeros((n, n))
    b = np.zeros(n)
    ai = lambda p: slice(6 * p, 6 * p + 6)                               # noqa: E731
    gi = lambda p, k: slice(6 * (P + hoff[p] + k), 6 * (P + hoff[p] + k) + 6)   # noqa: E731
    for c in range(P):
        A[ai(c), ai(c)] = np.eye(6)
        p = tree.part_parent[c]
        if p < 0:
            b[ai(c)] = a0
            continue
        h = tree.hidx[c]
        M, m0, Kt, Psi, Lam, beta = red[p]
        A[ai(c), ai(p)] -= Psi[h]
        for k in range(int(tree.nh[p])):
            A[ai(c), gi(p, k)] -= Lam[h, k]
        b[ai(c)] += beta[h]
    for p in range(P):
        for k in range(int(tree.nh[p])):
            A[gi(p, k), gi(p, k)] += np.eye(6)
    for c in range(P):
        p = tree.part_parent[c]
        if p < 0:
            continue
        M, m0, Kt, Psi, Lam, beta = red[c]
        rows = gi(p, tree.hidx[c])
        A[rows, ai(c)] -= M
        for k in range(int(tree.nh[c])):
            A[rows, gi(c, k)] -= Kt[k]
        b[rows] += m0
    x = np.linalg.solve(A, b)
    a_in = x[:6 * P].reshape(P, 6)
    g = [x[6 * (P + hoff[p]):6 * (P + hoff[p + 1])].reshape(-1, 6) for p in range(P)]
    return a_in, g


@pytest.mark.parametrize("P,seed", [(1, 0), (2, 1), (7, 2), (40, 3)])
def test_root_solve_equals_the_dense_coupled_system(P, seed):
    rng = np.random.default_rng(seed)
    tree = _random_tree(rng, P)
    red = _random_relations(rng, tree)
    a0 = rng.standard_normal(6)
    a_in, g = R.solve(tree, red, a0)
    a_ref, g_ref = _dense(tree, red, a0)
    assert np.allclose(a_in, a_ref, rtol=1e-11, atol=1e-11)
    for p in range(P):
        assert g[p].shape == (int(tree.nh[p]), 6)
        assert np.allclose(g[p], g_ref[p], rtol=1e-11, atol=1e-11)


def test_packed_messages_give_the_same_solution():
    rng = np.random.default_rng(5)
    tree = _random_tree(rng, 25)
    red = _random_relations(rng, tree)
    a0 = rng.standard_normal(6)
    order = rng.permutation(tree.nparts)            # messages arrive in any order
    bufs, roff, o = [], np.zeros(tree.nparts, dtype=np.int64), 0
    for p in order:
        M, m0, Kt, _, Lam, beta = red[p]
        roff[p] = o
        bufs.append(msg.pack_reduction(M, m0, Kt, Lam, beta))
        o += msg.reduction_len(int(tree.nh[p]))
    a_in, g = R.solve_packed(tree, np.concatenate(bufs), roff, a0)
    a_ref, g_ref = R.solve(tree, red, a0)
    assert np.array_equal(a_in, a_ref)
    assert np.array_equal(g, np.concatenate(g_ref))
    soff = np.cumsum([0] + [msg.solution_len(int(tree.nh[p])) for p in range(tree.nparts)])
    sol = R.pack_solutions(tree, a_in, g, soff[:-1], soff[-1])
    for p in range(tree.nparts):
        a, gp = msg.unpack_solution(sol[soff[p]:], int(tree.nh[p]))
        assert np.array_equal(a, a_ref[p]) and np.array_equal(gp, g_ref[p])


def test_compose_equals_the_transforms_applied_down_the_tree():
    rng = np.random.default_rng(7)
    tree = _random_tree(rng, 30)
    vel = []
    for p in range(tree.nparts):
        H = int(tree.nh[p])
        E = np.linalg.qr(rng.standard_normal((H, 3, 3)))[0] if H else np.zeros((0, 3, 3))
        vel.append((E, rng.standard_normal((H, 3)), rng.standard_normal((H, 6))))
    v = R.compose_velocities(tree, vel)
    for c in range(tree.nparts):
        p = tree.part_parent[c]
        if p < 0:
            assert np.array_equal(v[c], np.zeros(6))
            continue
        E, r, vrel = (x[tree.hidx[c]] for x in vel[p])
        X = np.zeros((6, 6))                      # Plücker motion transform [E 0; -E rx E]
        X[:3, :3] = E
        X[3:, 3:] = E
        X[3:, :3] = -E @ np.array([[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]])
        assert np.allclose(v[c], X @ v[p] + vrel, atol=1e-12)


def test_a_singular_handle_system_names_its_part():
    tree = R.PartsTree(part_parent=np.array([-1, 0]), hidx=np.array([-1, 0]), nh=np.array([1, 0]))
    M1 = np.eye(6)
    red = [(np.eye(6), np.zeros(6), np.zeros((1, 6, 6)), np.zeros((1, 6, 6)), np.eye(6)[None, None], np.zeros((1, 6))),
           (M1, np.zeros(6), np.zeros((0, 6, 6)), np.zeros((0, 6, 6)), np.zeros((0, 0, 6, 6)), np.zeros((0, 6)))]
    with pytest.raises(PartreeInputError, match="part 0: singular handle system"):
        R.solve(tree, red, np.zeros(6))


def _star(H):
    """Part 0 with H handles, one leaf part on each."""
    return R.PartsTree(part_parent=np.r_[-1, np.zeros(H, dtype=np.int64)], hidx=np.r_[-1, np.arange(H)],
                       nh=np.r_[H, np.zeros(H, dtype=np.int64)])


@pytest.mark.parametrize("H", [R.LAPACK_HANDLES - 1, R.LAPACK_HANDLES, 40])
def test_parts_with_many_handles_equal_the_dense_coupled_system(H):
    """Both ways of solving a part's handle system (written out below ``LAPACK_HANDLES``, LAPACK
    from there on) against the dense solve, through the packed messages."""
    rng = np.random.default_rng(H)
    tree = _star(H)
    red = _random_relations(rng, tree, scale=0.3 / np.sqrt(H))
    a0 = rng.standard_normal(6)
    a_in, g = R.solve(tree, red, a0)
    a_ref, g_ref = _dense(tree, red, a0)
    assert np.allclose(a_in, a_ref, rtol=1e-11, atol=1e-11)
    assert np.allclose(np.concatenate(g), np.concatenate(g_ref), rtol=1e-10, atol=1e-10)


def test_a_singular_large_handle_system_names_its_part():
    H = R.LAPACK_HANDLES + 2
    tree = _star(H)
    Lam = np.zeros((H, H, 6, 6))
    Lam[0, 0] = np.eye(6)                  # with the leaf's M = 1: the rows of handle 0 vanish
    red = [(np.eye(6), np.zeros(6), np.zeros((H, 6, 6)), np.zeros((H, 6, 6)), Lam, np.zeros((H, 6)))]
    red += [(np.eye(6), np.zeros(6), np.zeros((0, 6, 6)), np.zeros((0, 6, 6)), np.zeros((0, 0, 6, 6)),
             np.zeros((0, 6)))] * H
    with pytest.raises(PartreeInputError, match="part 0: singular handle system"):
        R.solve(tree, red, np.zeros(6))
