"""Constraint force algorithm (CFA, seed 000) for arbitrary trees: forward dynamics together with
every joint's reaction (constraint) force, in O(N).

Unknowns are the constraint forces F_S of all joints.  The wrench joint j transmits from its
parent l to body j (in body j's frame, [n; f]) splits as (seed eq. 5)

    F_j = S_j F_T,j + W_j F_S,j,     F_T,j = (S_j^T S_j)^-1 tau_j   (= tau_j: S orthonormal),

with S_j the motion subspace and W_j the constraint basis of the joint.  With the body equations
I_j a_j + p_j = F_j - sum_c X_c^T F_c (p_j = v_j x* I_j v_j - f_ext,j), the kinematics
a_j = X_j a_l + S_j qdd_j + c_j (a_{-1} = -g) and the constraints W_j^T (a_j - X_j a_l - c_j) = 0,
the constraint forces solve the sparse SPD system A F_S = rhs with A = W^T P^T Phi P W (seed eqs.
24-29, Phi = I^-1 block diagonal, P the connection matrix).

Four methods, one result:

``'leaf-first'`` (default)
    The serial fast path: eliminate the joints tip to base one at a time (block LDL^T along
    chains, leaf-first at nodes).  Written in inertia form, leaf-first elimination of the F_S
    system *is* the articulated-body algorithm (by the Woodbury identity
    W (W^T IA^-1 W)^-1 W^T = IA - IA S (S^T IA S)^-1 S^T IA), so this method runs ABA's kernel and
    then reads every joint's wrench as F_j = IA_j a_j + pA_j and F_S,j = W_j^T F_j.
``'odd-even'``
    The O(log N)-depth method: the tree is cut into chains, each chain is reduced by odd-even
    (cyclic) reduction, ceil(log2 L) levels of independent operations whose number halves from
    level to level, then collapses onto its parent body as an articulated inertia and bias, tips
    first; a base-first pass back-substitutes.  The reduction runs in scattering (Redheffer) form:
    a run of bodies is described by f_in = K a_in + T f_out + c, a_out = T^T a_in - Phi f_out + d
    (K an articulated inertia, Phi a compliance) and neighbouring runs compose with
    M = (1 + K2 Phi1)^-1, which is always well conditioned; no dense node system (seed eqs. 41-44)
    and no body's I^-1 is ever formed.  See ``partree.algorithms.cfa_scattering``.
``'odd-even-compliance'``
    The seed's form of the same reduction (seed eqs. 39-40) on the compliance-form system
    A F_S = rhs, A = W^T P^T I^-1 P W (5x5 blocks for revolute joints), kept for comparison.  Its
    pivots inherit A's conditioning, which grows like a power of the chain length on a planar chain
    loaded out of its plane: the wrenches lose digits (autoTree chain, skew 0: ~4e-3 relative at
    2*10^4 bodies, 0.2-0.5 at 10^5) and at 10^6 bodies a pivot goes non-positive.  See
    ``partree.algorithms.cfa_oddeven``.
``'general'``
    Assembles P, H = S, W and Phi with scipy.sparse and solves A F_S = rhs by a sparse direct
    solve, then a = Phi (P F - p) and qdd = S^+ (a_j - X_j a_l - c_j).  Small models only: a
    teaching aid and a cross-check.

Constraint bases W_j (6 x (6 - nv_j), orthonormal, W_j^T S_j = 0), deterministic per joint and
expressed in body j's frame (the joint's successor frame), columns [angular; linear]:

=========== =======================================================================================
revolute    about a: angular columns u1, u2, then the three linear unit vectors, where
            e = the coordinate axis least aligned with a (smallest |a_k|, first on ties),
            u1 = normalise(e - (e.a) a), u2 = a x u1 (so a = z gives u1 = x, u2 = y)
prismatic   along a: the three angular unit vectors, then linear u1, u2 (same rule)
universal   the unit normal n = normalise(s1 x s2) of both (angular) columns of S, then the
            three linear unit vectors; n depends on q (s1 is the first axis seen from the body)
spherical   the three linear unit vectors [0; I3]
free        none (a floating base carries no constraint force)
fixed       I6
=========== =======================================================================================

``CFAResult.constraint_force`` concatenates F_S of all joints in body order
(``CFAResult.constraint_slice(name)``), ``CFAResult.constraint_basis(name)`` returns W_j.

Accuracy and cost (one core, autoTree chain and binary tree at 10^5 and 10^6 bodies; see
scripts/bench_cfa.py and the README): 'leaf-first' is ABA plus one pass (~1.15-1.2x ABA) and as
accurate as ABA, on any tree: it is the default.  'odd-even' (scattering form) is as accurate as
leaf-first (wrenches to ~1e-13 of the largest on the planar 10^5 and 10^6 chains) but costs ~4.5x
ABA on long chains and ~1.9x on binary trees (one-body chains take ABA's step): its point is the
O(log N) depth, for a parallel engine, not the serial time.  'odd-even-compliance' costs ~4x ABA on
chains and loses digits on ill-conditioned chains (``wrenches='newton-euler'`` recomputes the
wrenches from its qdd, which stay accurate).  'general' is a teaching aid (scipy.sparse, ~ms per
call even for 10 bodies).
"""
from __future__ import annotations

import weakref

import numpy as np
from numba import njit

from ..errors import PartreeInputError
from .. import checks
from .aba import aba_kernel
from .cfa_oddeven import (ERR_GRAM, ERR_MASSLESS, ERR_SINGULAR_A, ERR_SINGULAR_IA, ERR_SINGULAR_INERTIA,
                          ERR_UNIVERSAL, newton_euler_wrenches, oddeven_kernel, rows_kernel, setup_kernel)
from .cfa_scattering import scattering_kernel

METHODS = ("leaf-first", "odd-even", "odd-even-compliance", "general")
DEFAULT_METHOD = "leaf-first"


# ----------------------------------------------------------------------------------------------
# result
# ----------------------------------------------------------------------------------------------
class CFAResult:
    """Result of ``cfa``.

    Attributes
        qdd               (nv,) joint accelerations
        constraint_force  (ns,) F_S of every joint, concatenated in body order, each in its joint's
                          constraint basis W_j (see the module docstring); ns = sum(6 - nv_j)
        drive_force       (nv,) F_T = (S^T S)^-1 tau per joint (tau itself for orthonormal S)
        joint_wrench      (n, 6) F_j = S_j F_T,j + W_j F_S,j, the wrench the parent transmits to
                          body j across joint j, in body j's frame, [n; f] (what
                          ``rnea(..., return_wrenches=True)`` returns)
        levels            list: levels[ell] = number of joints eliminated at odd-even level ell+1
                          (summed over all chains); empty for the other methods
        idx_s, ns_j       offsets and sizes of each joint's block in ``constraint_force``
        method            the method used
    """

    def __init__(self, model, method, qdd, FS, FT, F, q, idx_s, ns_j, levels, Wt=None):
        self._model = model
        self.method = method
        self.qdd = qdd
        self.constraint_force = FS
        self.drive_force = FT
        self.joint_wrench = F
        self._q = q
        self._Wt = Wt
        self.idx_s = idx_s
        self.ns_j = ns_j
        self.levels = levels

    @property
    def constraint_rows(self):
        """(ns, 6): W_j^T of every joint stacked (rows idx_s[j] .. idx_s[j] + 6 - nv_j), computed
        on first use at the configuration of this result."""
        if self._Wt is None:
            self._Wt = constraint_bases(self._model, self._q)[0]
        return self._Wt

    def constraint_slice(self, name):
        j = self._model.joint_id(name)
        return slice(int(self.idx_s[j]), int(self.idx_s[j] + self.ns_j[j]))

    def constraint_force_of(self, name):
        """F_S of the joint ``name`` (or body index), in its basis ``constraint_basis(name)``."""
        return self.constraint_force[self.constraint_slice(name)].copy()

    def constraint_basis(self, name):
        """W_j (6 x (6 - nv_j)) of the joint ``name``, in body j's frame, at this configuration."""
        return self.constraint_rows[self.constraint_slice(name)].T.copy()

    def constraint_wrench_of(self, name):
        """W_j F_S,j: the reaction part of joint ``name``'s wrench, [n; f] in body j's frame."""
        return self.constraint_basis(name) @ self.constraint_force_of(name)

    def __repr__(self):
        return (f"<CFAResult {self.method}: nv={self.qdd.size}, ns={self.constraint_force.size}, "
                f"levels={len(self.levels)}>")


# ----------------------------------------------------------------------------------------------
# per-model topology and workspace (kept with the model, reused between calls)
# ----------------------------------------------------------------------------------------------
_CACHE = weakref.WeakKeyDictionary()


@njit(cache=True)
def _chain_heights(parent, cptr, cidx, chain_of_tip):
    """Height of every chain in the tree of chains (chains hanging from nothing: 0)."""
    nc = cptr.shape[0] - 1
    hgt = np.zeros(nc, dtype=np.int64)
    for ch in range(nc - 1, -1, -1):      # children chains start at larger body numbers
        top = cidx[cptr[ch]]
        pb = parent[top]
        if pb >= 0:
            pc = chain_of_tip[pb]
            if hgt[ch] + 1 > hgt[pc]:
                hgt[pc] = hgt[ch] + 1
    return hgt


def _first_singular_inertia(model):
    """(body, error kind) of the first body whose spatial inertia is singular, or None."""
    bad = np.flatnonzero(~(model.mass > 0))
    first = (int(bad[0]), ERR_MASSLESS) if bad.size else None
    Ic = model.I_com
    a, b, c = Ic[:, 0, 0], Ic[:, 0, 1], Ic[:, 0, 2]
    d, e, f = Ic[:, 1, 1], Ic[:, 1, 2], Ic[:, 2, 2]
    det = a * (d * f - e * e) + b * (c * e - b * f) + c * (b * e - c * d)
    tr = (a + d + f) / 3.0
    bad = np.flatnonzero(~((det > 1e-13 * tr ** 3) & (tr > 0)) & (model.mass > 0))
    if bad.size and (first is None or bad[0] < first[0]):
        first = (int(bad[0]), ERR_SINGULAR_INERTIA)
    return first


class _Topology:
    def __init__(self, model):
        n = model.n
        self.n = n
        self.parent_ref = model.parent
        self.cptr, self.cidx = model.chains()
        nc = self.cptr.size - 1
        nchild = model.num_children()
        self.tip_node = nchild >= 2
        tips = self.cidx[self.cptr[1:] - 1]
        chain_of_tip = -np.ones(n, dtype=np.int64)
        chain_of_tip[tips] = np.arange(nc)
        hgt = _chain_heights(model.parent, self.cptr, self.cidx, chain_of_tip)
        self.corder = np.argsort(hgt, kind="stable").astype(np.int64)
        self.gptr = np.zeros(int(hgt.max()) + 2, dtype=np.int64)
        np.cumsum(np.bincount(hgt), out=self.gptr[1:])
        lengths = np.diff(self.cptr)
        one = np.zeros(n, dtype=bool)
        one[self.cidx[self.cptr[:-1][lengths == 1]]] = True
        self.need_IA = self.tip_node | one
        self.need_IA_fs = self.tip_node.copy()
        self.ns_j, self.idx_s = constraint_layout(model.nv_j)
        self.ns = int(self.ns_j.sum())
        self.max_chain = int(lengths.max())
        self.bad_inertia = _first_singular_inertia(model)


def constraint_layout(nv_j):
    """(ns_j, idx_s): every joint's number of constraint rows 6 - nv_j and the offset of its block
    in the stacked F_S."""
    ns_j = (6 - np.asarray(nv_j)).astype(np.int64)
    return ns_j, np.concatenate(([0], np.cumsum(ns_j)[:-1])).astype(np.int64)


class _Workspace:
    def __init__(self, model, topo):
        n, nv = model.n, model.nv
        self.E = np.empty((n, 3, 3))
        self.r = np.empty((n, 3))
        self.v = np.empty((n, 6))
        self.c = np.empty((n, 6))
        self.p = np.empty((n, 6))
        self.IA = np.empty((n, 6, 6))
        self.S = np.zeros((nv, 6))
        self.FT = np.empty(nv)
        self.A = np.empty((n, 6, 6))
        self.Cup = np.empty((n, 6, 6))
        self.Y2 = np.empty((n, 6, 6))
        self.rr = np.empty((n, 6))
        self.a = np.empty((n, 6))
        self.U = np.empty((nv, 6))
        self.Dinv = np.empty((nv, 6))
        self.u = np.empty(nv)
        self.err = np.zeros(1, dtype=np.int64)
        ns = topo.ns
        self.Wt = np.empty((ns, 6))
        self.rows_ready = False     # constraint rows of the q-independent joints computed
        self._scat = None

    def scattering(self):
        """The scattering form's segment slots: Km, Tm, Pm (sharing the compliance form's A, Cup,
        Y2), Rm, cm (sharing rr), dm and fin; the extra arrays are allocated on first use."""
        if self._scat is None:
            n = self.A.shape[0]
            self._scat = (self.A, self.Cup, self.Y2, np.empty((n, 6, 6)), self.rr, np.empty((n, 6)),
                          np.empty((n, 6)))
        return self._scat


def _state(model):
    st = _CACHE.get(model)
    if st is None or st[0].parent_ref is not model.parent or st[0].n != model.n:
        topo = _Topology(model)
        st = [topo, None]
        _CACHE[model] = st
    return st


def _topology(model):
    return _state(model)[0]


def _workspace(model):
    st = _state(model)
    if st[1] is None:
        st[1] = _Workspace(model, st[0])
    return st[0], st[1]


def _raise(model, j, kind, method):
    j = int(j)
    who = f"body {j} ({model.body_names[j]}, joint {model.joint_names[j]!r})"
    if kind == ERR_MASSLESS and method == "odd-even":
        msg = (f"{who} has mass {model.mass[j]!r}: its joint-space inertia S^T I S is singular, which the "
               f"scattering form of 'odd-even' needs for every body of a chain (it builds one segment per "
               f"body); give it a mass or weld it to its parent (a fixed joint), or use method='leaf-first'")
    elif kind == ERR_SINGULAR_IA and method == "odd-even":
        msg = (f"{who}: the joint-space inertia S^T I S of the body (or of its articulated subtree, for a node "
               f"body) along its joint is singular; 'odd-even' needs it positive definite for every body of a "
               f"chain; use method='leaf-first'")
    elif kind == ERR_MASSLESS:
        msg = (f"{who} has mass {model.mass[j]!r}: its spatial inertia is singular, so I^-1 (the "
               f"body's compliance, which the constraint force algorithm '{method}' needs) is undefined; "
               f"give it a mass or weld it to its parent (a fixed joint), or use method='leaf-first'")
    elif kind == ERR_SINGULAR_INERTIA:
        msg = (f"{who} has a singular rotational inertia (I_com = {model.I_com[j].tolist()}): its spatial "
               f"inertia cannot be inverted, so the constraint force algorithm '{method}' is undefined "
               f"for it; use method='leaf-first'")
    elif kind == ERR_SINGULAR_IA:
        msg = (f"{who}: the articulated inertia of its subtree is singular (massless subtree?); "
               f"forward dynamics is undefined")
    elif kind == ERR_SINGULAR_A and method == "odd-even":
        msg = (f"{who}: the scattering composition at this joint met a singular 1 + K Phi (not possible for "
               f"finite positive inertias: non-finite input?); use method='leaf-first'")
    elif kind == ERR_SINGULAR_A:
        msg = (f"{who}: the reduced constraint-force system met a non-positive pivot when eliminating this "
               f"joint: it is numerically singular.  Either bodies are degenerate (near-massless), or the "
               f"constraint system is too ill-conditioned for the compliance form (e.g. a very long planar "
               f"chain loaded out of its plane, whose condition number grows like a power of its length); "
               f"method='odd-even' (scattering form) and method='leaf-first' (inertia form) do not have this "
               f"problem")
    elif kind == ERR_UNIVERSAL:
        msg = f"{who}: universal joint with parallel axes (degenerate motion subspace)"
    elif kind == ERR_GRAM:
        msg = f"{who}: the motion subspace S has dependent columns"
    else:
        msg = f"{who}: CFA failed (code {kind})"
    raise PartreeInputError(msg)


def _a0(model):
    """The base acceleration a_0 = [0; -g] (fictitious, for gravity)."""
    a0 = np.empty(6)
    a0[:3] = 0.0
    a0[3:] = model.gravity
    np.negative(a0[3:], out=a0[3:])
    return a0


def _setup(model, ws, topo, q, qd, tau, F_ext, has_f, need_IA):
    ws.err[0] = 0
    bad = setup_kernel(*checks.model_args(model), topo.idx_s, q, qd, tau, F_ext, has_f, need_IA, ws.rows_ready,
                       ws.E, ws.r, ws.v, ws.c, ws.p, ws.IA, ws.S, ws.Wt, ws.FT, ws.err)
    if bad >= 0:
        ws.rows_ready = False
        _raise(model, bad, int(ws.err[0]), "setup")
    ws.rows_ready = True
    return ws.Wt


# ----------------------------------------------------------------------------------------------
# odd-even, scattering form
# ----------------------------------------------------------------------------------------------
def _cfa_scattering(model, q, qd, tau, F_ext, has_f, woodbury):
    topo, ws = _workspace(model)
    _setup(model, ws, topo, q, qd, tau, F_ext, has_f, topo.need_IA if woodbury else topo.need_IA_fs)
    Km, Tm, Pm, Rm, cm, dm, fin = ws.scattering()
    FS = np.empty(topo.ns)
    F = np.empty((model.n, 6))
    qdd = np.empty(model.nv)
    levels = np.zeros(64, dtype=np.int64)
    ws.err[0] = 0
    bad = scattering_kernel(model.parent, model.idx_v, topo.idx_s, topo.ns_j, model.mass, model.com, model.I_com,
                            _a0(model), tau, ws.E, ws.r, ws.c, ws.p, ws.IA, ws.S, ws.Wt, ws.FT,
                            topo.cptr, topo.cidx, topo.corder, topo.gptr, topo.tip_node, bool(woodbury),
                            Km, Tm, Pm, Rm, cm, dm, fin, ws.U, ws.Dinv, ws.u, FS, F, ws.a, qdd, levels, ws.err)
    if bad >= 0:
        _raise(model, bad, int(ws.err[0]), "odd-even")
    return CFAResult(model, "odd-even", qdd, FS, ws.FT.copy(), F, q.copy(), topo.idx_s, topo.ns_j,
                     _trim(levels))


def _trim(levels):
    lv = levels.tolist()
    while lv and lv[-1] == 0:
        lv.pop()
    return lv


# ----------------------------------------------------------------------------------------------
# odd-even, compliance form (the seed's)
# ----------------------------------------------------------------------------------------------
def _cfa_oddeven(model, q, qd, tau, F_ext, has_f, woodbury):
    _check_invertible(model, "odd-even-compliance")
    topo, ws = _workspace(model)
    _setup(model, ws, topo, q, qd, tau, F_ext, has_f, topo.need_IA if woodbury else topo.need_IA_fs)
    FS = np.empty(topo.ns)
    F = np.empty((model.n, 6))
    qdd = np.empty(model.nv)
    levels = np.zeros(64, dtype=np.int64)
    ws.err[0] = 0
    bad = oddeven_kernel(model.parent, model.idx_v, topo.idx_s, topo.ns_j, model.mass, model.com, model.I_com,
                         _a0(model), ws.E, ws.r, ws.c, ws.p, ws.IA, ws.S, ws.Wt, ws.FT,
                         topo.cptr, topo.cidx, topo.corder, topo.gptr, topo.tip_node, bool(woodbury),
                         ws.A, ws.Cup, ws.Y2, ws.rr, ws.U, ws.Dinv, ws.u, FS, F, ws.a, qdd, levels, ws.err)
    if bad >= 0:
        _raise(model, bad, int(ws.err[0]), "odd-even-compliance")
    return CFAResult(model, "odd-even-compliance", qdd, FS, ws.FT.copy(), F, q.copy(), topo.idx_s, topo.ns_j,
                     _trim(levels))


# ----------------------------------------------------------------------------------------------
# leaf-first (inertia form = ABA + one pass)
# ----------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def project_wrench(j, n, nvt, idx_v, idx_s, S, tau, Wt, F, FS, FT, G):
    """Joint j's split of its wrench F_j: F_S,j = W_j^T F_j and F_T,j = (S_j^T S_j)^-1 tau_j (G: a
    6x6 scratch)."""
    iv = idx_v[j]
    nv = (idx_v[j + 1] if j + 1 < n else nvt) - iv
    is_ = idx_s[j]
    for d in range(6 - nv):
        row = is_ + d
        FS[row] = (Wt[row, 0] * F[j, 0] + Wt[row, 1] * F[j, 1] + Wt[row, 2] * F[j, 2]
                   + Wt[row, 3] * F[j, 3] + Wt[row, 4] * F[j, 4] + Wt[row, 5] * F[j, 5])
    # F_T = (S^T S)^-1 S^T F  (= tau)
    for d in range(nv):
        for e in range(nv):
            s = 0.0
            for k in range(6):
                s += S[iv + d, k] * S[iv + e, k]
            G[d, e] = s
    if nv == 1:
        FT[iv] = tau[iv] / G[0, 0]
    elif nv > 1:
        # Gauss elimination on the small SPD Gram matrix (no pivoting needed)
        for d in range(nv):
            FT[iv + d] = tau[iv + d]
        for k in range(nv):
            for i in range(k + 1, nv):
                f = G[i, k] / G[k, k]
                for l in range(k, nv):
                    G[i, l] -= f * G[k, l]
                FT[iv + i] -= f * FT[iv + k]
        for i in range(nv - 1, -1, -1):
            s = FT[iv + i]
            for l in range(i + 1, nv):
                s -= G[i, l] * FT[iv + l]
            FT[iv + i] = s / G[i, i]


@njit(cache=True)
def _wrenches_from_articulated(idx_v, idx_s, IA, pA, a, S, tau, Wt, FS, F, FT):
    """F_j = IA_j a_j + pA_j, F_S,j = W_j^T F_j, F_T = (S^T S)^-1 tau."""
    n = IA.shape[0]
    nvt = S.shape[0]
    G = np.empty((6, 6))
    for j in range(n):
        for k in range(6):
            s = pA[j, k]
            for l in range(6):
                s += IA[j, k, l] * a[j, l]
            F[j, k] = s
        project_wrench(j, n, nvt, idx_v, idx_s, S, tau, Wt, F, FS, FT, G)
    return -1


def _cfa_leaf_first(model, q, qd, tau, F_ext, has_f, data=None):
    topo = _topology(model)
    d = checks.data_for(model, data)
    bad = aba_kernel(*checks.model_args(model), model.gravity, q, qd, tau, F_ext, has_f,
                     d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, d.qdd)
    if bad >= 0:
        raise PartreeInputError(
            f"joint {model.joint_names[bad]!r} (body {bad}): its subtree has a singular inertia along "
            f"the joint's motion (massless subtree?); forward dynamics is undefined")
    ws = _workspace(model)[1]
    bad = rows_kernel(model.jtype, model.idx_v, topo.idx_s, d.S, ws.rows_ready, ws.Wt)
    if bad >= 0:
        ws.rows_ready = False
        _raise(model, bad, ERR_UNIVERSAL, "leaf-first")
    ws.rows_ready = True
    FS = np.empty(topo.ns)
    F = np.empty((model.n, 6))
    FT = np.empty(model.nv)
    _wrenches_from_articulated(model.idx_v, topo.idx_s, d.IA, d.pA, d.a, d.S, tau, ws.Wt, FS, F, FT)
    return CFAResult(model, "leaf-first", d.qdd.copy(), FS, FT, F, q.copy(), topo.idx_s, topo.ns_j, [])


# ----------------------------------------------------------------------------------------------
# general form (scipy.sparse assembly)
# ----------------------------------------------------------------------------------------------
def _motion_xforms(E, r):
    """(n, 6, 6) motion transforms [[E, 0], [-E rx, E]]."""
    n = E.shape[0]
    rx = np.zeros((n, 3, 3))
    rx[:, 0, 1], rx[:, 0, 2], rx[:, 1, 2] = -r[:, 2], r[:, 1], -r[:, 0]
    rx[:, 1, 0], rx[:, 2, 0], rx[:, 2, 1] = r[:, 2], -r[:, 1], r[:, 0]
    X = np.zeros((n, 6, 6))
    X[:, :3, :3] = E
    X[:, 3:, 3:] = E
    X[:, 3:, :3] = -E @ rx
    return X


def _check_invertible(model, method):
    """Raise unless every body's spatial inertia can be inverted (odd-even and general need
    Phi = I^-1 of every body; the check is done once per model)."""
    bad = _topology(model).bad_inertia
    if bad is not None:
        _raise(model, bad[0], bad[1], method)


def _inverse_inertias(model):
    """(n, 6, 6) Phi_j = I_j^-1 about each body's origin, in closed form:
    Phi = [[J, -J cx], [cx J, 1/m - cx J cx]] with J = Ic^-1 and cx = skew(com)."""
    n = model.n
    Jm = np.linalg.inv(model.I_com)
    c = model.com
    cx = np.zeros((n, 3, 3))
    cx[:, 0, 1], cx[:, 0, 2], cx[:, 1, 2] = -c[:, 2], c[:, 1], -c[:, 0]
    cx[:, 1, 0], cx[:, 2, 0], cx[:, 2, 1] = c[:, 2], -c[:, 1], c[:, 0]
    Phi = np.empty((n, 6, 6))
    B = -Jm @ cx
    Phi[:, :3, :3] = Jm
    Phi[:, :3, 3:] = B
    Phi[:, 3:, :3] = np.transpose(B, (0, 2, 1))
    Phi[:, 3:, 3:] = cx @ B + np.eye(3) / model.mass[:, None, None]
    return Phi


def _block_rows_cols(brow, bcol, nr, nc):
    """Row and column indices of dense blocks (nr x nc) at block positions (brow, bcol)."""
    rr = (nr * brow)[:, None, None] + np.arange(nr)[None, :, None]
    cc = (nc * bcol)[:, None, None] + np.arange(nc)[None, None, :]
    return np.broadcast_to(rr, (brow.size, nr, nc)).ravel(), np.broadcast_to(cc, (bcol.size, nr, nc)).ravel()


def _cfa_general(model, q, qd, tau, F_ext, has_f):
    """The seed's general form (eqs. 16, 22-29) assembled with scipy.sparse: small models."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve

    _check_invertible(model, "general")
    topo, ws = _workspace(model)
    Wt = _setup(model, ws, topo, q, qd, tau, F_ext, has_f, np.zeros(model.n, dtype=bool))
    n, nv, ns = model.n, model.nv, topo.ns
    c, p, S, FT = ws.c, ws.p, ws.S, ws.FT
    X = _motion_xforms(ws.E, ws.r)
    Phi = _inverse_inertias(model)
    body = np.arange(n)
    # connection matrix P (6n x 6n): (P F)_j = F_j - sum_{c child of j} X_c^T F_c
    ch = np.flatnonzero(model.parent >= 0)
    r1, c1 = _block_rows_cols(model.parent[ch], ch, 6, 6)
    P = sp.csr_matrix((np.concatenate([np.ones(6 * n), (-np.transpose(X[ch], (0, 2, 1))).ravel()]),
                       (np.concatenate([np.arange(6 * n), r1]), np.concatenate([np.arange(6 * n), c1]))),
                      shape=(6 * n, 6 * n))
    rp, cp = _block_rows_cols(body, body, 6, 6)
    PhiM = sp.csr_matrix((Phi.ravel(), (rp, cp)), shape=(6 * n, 6 * n))
    # H = diag(S_j) (6n x nv), W = diag(W_j) (6n x ns): column k of H is DOF k's row of S
    dof_body = np.repeat(body, model.nv_j)
    con_body = np.repeat(body, topo.ns_j)
    H = sp.csr_matrix((S.ravel(), (((6 * dof_body)[:, None] + np.arange(6)).ravel(), np.repeat(np.arange(nv), 6))),
                      shape=(6 * n, nv))
    W = sp.csr_matrix((Wt.ravel(), (((6 * con_body)[:, None] + np.arange(6)).ravel(), np.repeat(np.arange(ns), 6))),
                      shape=(6 * n, ns))
    # kinematics P^T a = H qdd + c + delta, delta_root = X_root a0 (the base's acceleration -g)
    delta = np.zeros((n, 6))
    roots = model.roots()
    delta[roots] = X[roots] @ _a0(model)
    kin = (c + delta).ravel()
    pvec = p.ravel()
    PW = P @ W
    A = (PW.T @ (PhiM @ PW)).tocsc()                     # A = W^T P^T Phi P W       (eq. 26)
    FTv = H @ FT
    rhs = W.T @ (kin - P.T @ (PhiM @ (P @ FTv - pvec)))  # -B F_T with the bias terms (eq. 29)
    if ns > 1:
        FS = spsolve(A, rhs)
    elif ns == 1:
        FS = rhs / A.toarray()[0, 0]
    else:
        FS = np.zeros(0)
    Fv = FTv + W @ FS                                    # eq. 22
    a = PhiM @ (P @ Fv - pvec)
    rel = (P.T @ a - kin).reshape(n, 6)                  # = S_j qdd_j   (eq. 23)
    qdd = np.empty(nv)
    for k in np.unique(model.nv_j[model.nv_j > 0]):
        ids = np.flatnonzero(model.nv_j == k)
        Sj = S[model.idx_v[ids][:, None] + np.arange(k)]              # (m, k, 6)
        G = Sj @ np.transpose(Sj, (0, 2, 1))
        qdd[model.idx_v[ids][:, None] + np.arange(k)] = np.linalg.solve(G, (Sj @ rel[ids][:, :, None]))[..., 0]
    return CFAResult(model, "general", qdd, np.asarray(FS, dtype=float), FT.copy(), Fv.reshape(n, 6).copy(), q.copy(),
                     topo.idx_s, topo.ns_j, [], Wt=Wt.copy())


# ----------------------------------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------------------------------
def cfa(model, q, qd, tau, f_ext=None, method=DEFAULT_METHOD, data=None, one_body_chains="inertia",
        wrenches="cfa"):
    """Constraint force algorithm: joint accelerations and every joint's constraint force.

    Parameters
        q, qd, tau    configuration (nq,), velocity (nv,), joint forces (nv,)
        f_ext         optional external wrenches [n; f] per body in body coordinates: (n, 6) array
                      or {joint name: wrench}
        method        'leaf-first' (default: the serial fast path, ABA's inertia form plus one
                      pass; accurate on any tree), 'odd-even' (O(N) work in O(log N) depth: the
                      chains' cyclic reduction in scattering form; as accurate, ~2-4.5x slower on
                      one core), 'odd-even-compliance' (the seed's compliance form of the same
                      reduction; loses digits on long ill-conditioned chains) or 'general' (sparse
                      assembly of the seed's A = W^T P^T I^-1 P W; small models)
        data          workspace for 'leaf-first' (``model.create_data()``)
        one_body_chains  'odd-even' and 'odd-even-compliance': 'inertia' collapses one-body
                      chains with the equivalent articulated-body step (Woodbury; no 6x6
                      inverse), 'constraint' runs the chain code for them too (the one-body
                      segment, or the compliance form W (W^T IA^-1 W)^-1 W^T; a cross-check)
        wrenches      'cfa' (default): F_S as the algorithm solves them; 'newton-euler': after the
                      solve, recompute every joint wrench by the Newton-Euler inward pass from the
                      computed qdd (F_j = I_j a_j + p_j + sum_c X_c^T F_c; O(N), a few percent) and
                      project F_S = W^T F.  For 'odd-even-compliance' and 'general' on long chains
                      whose constraint system is ill-conditioned (a planar chain loaded out of its plane:
                      cond(A) grows like a power of the length) the solved F_S lose digits while qdd
                      stays accurate; the Newton-Euler wrenches are then as accurate as qdd.
    Returns a ``CFAResult`` (qdd, constraint_force, joint_wrench, levels, ...).

    Bodies whose spatial inertia cannot be inverted (zero mass, singular rotational inertia) raise
    ``PartreeInputError`` naming the body for 'odd-even-compliance' and 'general', which need
    I^-1; 'odd-even' needs no I^-1 but S_j^T I_j S_j > 0 for every body of a chain of two or more
    bodies (a massless body there raises); 'leaf-first' accepts them wherever ABA does.
    """
    if method not in METHODS:
        raise PartreeInputError(f"unknown CFA method {method!r}; choose one of {', '.join(METHODS)}")
    if one_body_chains not in ("inertia", "constraint"):
        raise PartreeInputError(f"one_body_chains must be 'inertia' or 'constraint', got {one_body_chains!r}")
    if wrenches not in ("cfa", "newton-euler"):
        raise PartreeInputError(f"wrenches must be 'cfa' or 'newton-euler', got {wrenches!r}")
    q, qd = checks.state(model, q, qd)
    tau = checks.vector(model, tau, model.nv, "tau", "nv")
    F_ext, has_f = checks.external_forces(model, f_ext)
    if method == "leaf-first":
        return _cfa_leaf_first(model, q, qd, tau, F_ext, has_f, data)
    if method == "general":
        res = _cfa_general(model, q, qd, tau, F_ext, has_f)
    elif method == "odd-even":
        res = _cfa_scattering(model, q, qd, tau, F_ext, has_f, one_body_chains == "inertia")
    else:
        res = _cfa_oddeven(model, q, qd, tau, F_ext, has_f, one_body_chains == "inertia")
    if wrenches == "newton-euler":
        _newton_euler(model, res, F_ext, has_f)
    return res


def _newton_euler(model, res, F_ext, has_f):
    """Replace res.joint_wrench / constraint_force by the Newton-Euler inward pass from res.qdd
    (the workspace still holds this call's kinematics)."""
    topo, ws = _workspace(model)
    newton_euler_wrenches(model.parent, model.idx_v, topo.idx_s, topo.ns_j, model.mass, model.com, model.I_com,
                          _a0(model), ws.E, ws.r, ws.v, ws.c, ws.S, ws.Wt, res.qdd, F_ext, has_f, ws.a,
                          res.joint_wrench, res.constraint_force)


def constraint_bases(model, q):
    """(Wt, idx_s): the constraint rows W_j^T of every joint at configuration q, stacked ((ns, 6);
    joint j's rows are Wt[idx_s[j]:idx_s[j] + 6 - nv_j]), as used by ``cfa``."""
    q, _ = checks.state(model, q)
    topo, ws = _workspace(model)
    zero = np.zeros(model.nv)
    Wt = _setup(model, ws, topo, q, zero, zero, *checks.external_forces(model, None),
                np.zeros(model.n, dtype=bool))
    return Wt.copy(), topo.idx_s.copy()


__all__ = ["cfa", "CFAResult", "constraint_bases", "METHODS", "DEFAULT_METHOD"]
