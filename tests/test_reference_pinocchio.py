"""ABA, RNEA, CRBA and joint wrenches against Pinocchio, joint by joint by name, on chains and on
branched trees of every joint type (the random trees are not numbered depth first: to_pinocchio
adds their joints in depth-first order, a permutation of partree's)."""
import numpy as np
import pytest

import partree
from partree import joints as J
from partree.models import auto_tree, random_tree

pin = pytest.importorskip("pinocchio")
from partree.io.pinocchio import depth_first_order, pin_wrench, to_pinocchio  # noqa: E402

from conftest import rel_err  # noqa: E402


class PinPair:
    """A partree model, its Pinocchio twin and the index maps between them."""

    def __init__(self, model):
        self.m = model
        self.p, self.jid = to_pinocchio(model)
        self.d = self.p.createData()
        self.vmap = np.zeros(model.nv, dtype=int)
        self.qmap = []
        for i in range(model.n):
            if model.nv_j[i] == 0:
                continue
            j = self.p.getJointId(model.joint_names[i])
            jm = self.p.joints[j]
            self.vmap[model.v_slice(i)] = np.arange(jm.idx_v, jm.idx_v + jm.nv)
            self.qmap.append((model.q_slice(i), slice(jm.idx_q, jm.idx_q + jm.nq)))

    def q(self, q):
        out = np.zeros(self.p.nq)
        for a, b in self.qmap:
            out[b] = q[a]
        return out

    def v(self, x):
        out = np.zeros(self.p.nv)
        out[self.vmap] = x
        return out

    def fext(self, F):
        fp = [pin.Force.Zero() for _ in range(self.p.njoints)]
        for i in range(self.m.n):
            if self.m.jtype[i] != J.FIXED:
                fp[int(self.jid[i])] = pin.Force(F[i, 3:].copy(), F[i, :3].copy())
        return fp


#: every joint type, a free joint inside the tree too
EVERY_JOINT = ("revolute", "prismatic", "universal", "spherical", "fixed", "free")
MODELS = {
    "chain": lambda: auto_tree(12, 1, skew=0.3, taper=0.95),
    "binary": lambda: auto_tree(31, 2, skew=0.7, taper=0.9),
    "bushy": lambda: auto_tree(40, 3.5, skew=-0.4, taper=0.97),
    "random-mixed": lambda: random_tree(40, seed=1, joint_types=("revolute", "prismatic", "universal", "spherical")),
    "random-floating": lambda: random_tree(40, seed=2, floating_base=True,
                                           joint_types=("revolute", "prismatic", "universal", "spherical")),
    "random-fixed-joints": lambda: random_tree(40, seed=3, floating_base=True),
    "random-every-joint": lambda: random_tree(40, seed=8, joint_types=EVERY_JOINT),
    "random-every-joint-floating": lambda: random_tree(30, seed=9, floating_base=True, joint_types=EVERY_JOINT),
}


def test_random_trees_are_not_numbered_depth_first():
    """The branched cases permute the joints on their way to Pinocchio."""
    for name, make in MODELS.items():
        if name.startswith("random"):
            m = make()
            assert m.num_children().max() > 1
            assert not np.array_equal(depth_first_order(m), np.arange(m.n)), name


@pytest.mark.parametrize("name", list(MODELS))
def test_against_pinocchio(name, rng):
    m = MODELS[name]()
    pp = PinPair(m)
    has_fixed = bool((m.jtype == J.FIXED).any())
    for trial in range(3):
        q = m.random_configuration(rng)
        qd = m.random_velocity(rng, 2.0)
        qdd = rng.normal(size=m.nv)
        tau = rng.normal(size=m.nv) * 5
        F = rng.normal(size=(m.n, 6))
        F[m.jtype == J.FIXED] = 0.0   # Pinocchio attaches external forces to joints, not to welded links
        qp, fp = pp.q(q), pp.fext(F)
        a = partree.aba(m, q, qd, tau, f_ext=F)
        a_ref = pin.aba(pp.p, pp.d, qp, pp.v(qd), pp.v(tau), fp)[pp.vmap]
        assert rel_err(a, a_ref) < 1e-10
        t, W = partree.rnea(m, q, qd, qdd, f_ext=F, return_wrenches=True)
        t_ref = pin.rnea(pp.p, pp.d, qp, pp.v(qd), pp.v(qdd), fp)[pp.vmap]
        assert rel_err(t, t_ref) < 1e-10
        for i in range(m.n):           # joint wrenches, joint by joint by name
            if m.jtype[i] == J.FIXED:
                continue
            j = pp.p.getJointId(m.joint_names[i])
            assert rel_err(W[i], pin_wrench(pp.d.f[j])) < 1e-10, m.joint_names[i]
        M = partree.crba(m, q)
        M_pin = np.triu(pin.crba(pp.p, pp.d, qp))    # Pinocchio fills the upper triangle
        M_pin = M_pin + np.triu(M_pin, 1).T
        assert rel_err(M, M_pin[np.ix_(pp.vmap, pp.vmap)]) < 1e-12
        T, V = partree.energy(m, q, qd)
        pin.computeKineticEnergy(pp.p, pp.d, qp, pp.v(qd))
        assert abs(T - pp.d.kinetic_energy) < 1e-10 * max(1.0, abs(T))
        pin.computeCentroidalMomentum(pp.p, pp.d, qp, pp.v(qd))
        h = partree.momentum(m, q, qd)
        c = pp.d.com[0]
        assert rel_err(h[3:], pp.d.hg.linear) < 1e-10
        assert rel_err(h[:3], pp.d.hg.angular + np.cross(c, pp.d.hg.linear)) < 1e-10
        if not has_fixed:
            assert rel_err(partree.center_of_mass(m, q), c) < 1e-10
            assert abs(V - pin.computePotentialEnergy(pp.p, pp.d, qp)) < 1e-10 * max(1.0, abs(V))
        kin = partree.forward_kinematics(m, q)
        pin.forwardKinematics(pp.p, pp.d, qp)
        for i in range(m.n):
            if m.jtype[i] == J.FIXED:
                continue
            j = int(pp.jid[i])
            assert rel_err(kin.R[i], pp.d.oMi[j].rotation) < 1e-12
            assert rel_err(kin.p[i], pp.d.oMi[j].translation) < 1e-12
