"""Joint reaction forces of trees with flexible bodies: every joint's wrench, split into its
constraint force F_S and drive force F_T as :func:`partree.cfa` gives them, in O(N).

The wrench joint j transmits from its parent to body j is read off an inverse dynamics pass
(:func:`partree.algorithms.flexible_dynamics.flexible_rnea`) of the *cut model*: every joint j
followed by a free joint of zero motion, the joint's successor frame carried by a massless body
``j'`` and body j hanging from it by the free joint (``E_tree = 1``, ``r_tree = 0``, q at the
identity, no velocity, no acceleration).  The motion of every body is the model's, and the force
the free joint must carry is the whole wrench across joint j, in body j's frame: the drive part
``S_j F_T`` and the reaction ``W_j F_S``.  The cut model has 2n bodies and the same modes, so one
inverse dynamics pass over it is O(N), whatever the algorithm behind ``flexible_rnea``.

Conventions are the rigid :class:`~partree.CFAResult`'s (:mod:`partree.algorithms.cfa`):
``joint_wrench[j] = F_j = [n; f]`` in body j's frame (the joint's successor frame, whose origin
is the joint), ``constraint_force`` the stacked ``F_S,j = W_j^T F_j`` in the same constraint bases
W_j, ``drive_force`` ``F_T = (S_j^T S_j)^-1 tau_j``.  The constraint basis of a joint depends on
the joint only (its type, axes and, for a universal joint, its angle), not on the deformation of
the parent it hangs from, so it is the rigid skeleton's.  ``qdd`` holds the full accelerations
(nv + n_modal): the joints' then the modes'.  The modal entries of ``tau_full`` are forces on the
modes, not joints; they have no wrench.

External loads (``f_ext``: wrenches at the body origins and at the nodes of flexible bodies,
:func:`partree.algorithms.flexible_dynamics.flexible_loads`) act on body j in the cut model as in
the model, so the wrench across joint j is the one that balances them too, as in
:func:`partree.cfa` with f_ext.
"""
from __future__ import annotations

import weakref

import numpy as np

from .. import joints as J
from ..errors import PartreeInputError
from .cfa import constraint_bases
from .cfa.bases import constraint_layout
from .cfa.result import CFAResult
from .flexible_dynamics import (flexible_aba, flexible_hybrid_dynamics, flexible_loads, flexible_rnea,
                                flexible_state_size)

#: per model: (its parent array and flexible bodies when cached, the cut model, index maps, the
#: rigid skeleton)
_CUT = weakref.WeakKeyDictionary()

_FREE_IDENTITY = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])


class _Cut:
    """The cut model of one model and where the original coordinates sit in its vectors."""

    __slots__ = ("model", "skeleton", "q_of", "v_of", "free_q", "free_v", "nq", "nv", "gram")

    def __init__(self, model):
        n = model.n
        fl = model.flexible
        parent = np.asarray(model.parent, dtype=np.int64)
        p2 = np.empty(2 * n, dtype=np.int64)
        p2[0::2] = np.where(parent < 0, -1, 2 * parent + 1)
        p2[1::2] = 2 * np.arange(n)
        jt = np.empty(2 * n, dtype=np.int8)
        jt[0::2] = model.jtype
        jt[1::2] = J.FREE

        def pair(a, filler):
            out = np.empty((2 * n,) + a.shape[1:])
            out[0::2] = a
            out[1::2] = filler
            return out

        axis = pair(model.axis, [0.0, 0.0, 1.0])
        axis2 = pair(model.axis2, 0.0)
        E_tree = np.empty((2 * n, 3, 3))
        E_tree[0::2] = model.E_tree
        E_tree[1::2] = np.eye(3)
        r_tree = pair(model.r_tree, 0.0)
        mass = np.empty(2 * n)
        mass[0::2] = 0.0
        mass[1::2] = model.mass
        com = np.empty((2 * n, 3))
        com[0::2] = 0.0
        com[1::2] = model.com
        I_com = np.empty((2 * n, 3, 3))
        I_com[0::2] = 0.0
        I_com[1::2] = model.I_com
        bodies = {} if fl is None else {2 * i + 1: b for i, b in fl.bodies.items()}
        from ..model import Model

        # the massless successor frames and the model's own bodies, whose data the model has
        # checked already
        self.model = Model(p2, jt, axis, E_tree, r_tree, mass, com, I_com, axis2=axis2, gravity=model.gravity,
                           name=f"{model.name} (cut)", allow_massless=True, validate=False, flexible=bodies)
        cm = self.model
        self.nq, self.nv = flexible_state_size(cm)
        # the original joint coordinates in the cut model's vectors
        self.q_of = np.concatenate([cm.idx_q[2 * i] + np.arange(model.nq_j[i]) for i in range(n)]
                                   + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        self.v_of = np.concatenate([cm.idx_v[2 * i] + np.arange(model.nv_j[i]) for i in range(n)]
                                   + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        self.free_q = (cm.idx_q[1::2][:, None] + np.arange(7)).astype(np.int64)
        self.free_v = (cm.idx_v[1::2][:, None] + np.arange(6)).astype(np.int64)
        self.skeleton = model.with_flexible({})
        # S_j^T S_j of every joint: the identity but for universal joints, whose two unit columns
        # keep the angle between the axes (R2^T a1 . a2 = a1 . a2 at every angle)
        self.gram = {}
        for i in np.flatnonzero(model.jtype == J.UNIVERSAL):
            c = float(model.axis[i] @ model.axis2[i])
            self.gram[int(i)] = np.array([[1.0, c], [c, 1.0]])


def _cut(model):
    key = (model.parent, model.flexible, model.jtype, model.mass)
    hit = _CUT.get(model)
    if hit is not None and len(hit[0]) == len(key) and all(a is b for a, b in zip(hit[0], key)):
        return hit[1]
    cut = _Cut(model)
    _CUT[model] = (key, cut)
    return cut


def _check(model):
    if getattr(model, "flexible", None) is None:
        raise PartreeInputError(f"model {model.name!r} has no flexible bodies: use partree.cfa (or "
                                f"partree.hybrid_dynamics(..., return_forces=True)) for rigid trees")


def _vector(model, x, size, name):
    x = np.array(x, dtype=float)
    if x.shape != (size,):
        raise PartreeInputError(f"{name} has shape {x.shape}; a model with {model.flexible.n_modal} modal "
                                f"coordinates takes ({size},): the joints' entries then the modes'")
    if not np.all(np.isfinite(x)):
        raise PartreeInputError(f"{name} is not finite")
    return x


def flexible_joint_wrenches(model, q, qd, qdd, f_ext=None):
    """The (n, 6) wrenches [n; f] the joints transmit, row j the one from body j's parent to body
    j across joint j in body j's frame, for the motion (q_full, qd_full, qdd_full) of a model with
    flexible bodies under the external loads ``f_ext`` (the flexible counterpart of
    ``partree.rnea(..., f_ext, return_wrenches=True)``).  Also returns tau_full, the forces of that
    motion (``flexible_rnea``).  O(N)."""
    _check(model)
    loads = None if f_ext is None else flexible_loads(model, f_ext)
    nq, nv = flexible_state_size(model)
    q = _vector(model, q, nq, "q")
    qd = _vector(model, qd, nv, "qd")
    qdd = _vector(model, qdd, nv, "qdd")
    c = _cut(model)
    Q = np.zeros(c.nq)
    Q[c.free_q] = _FREE_IDENTITY
    Q[c.q_of] = q[:model.nq]
    Q[c.nq - (nq - model.nq):] = q[model.nq:]
    V = np.zeros(c.nv)
    V[c.v_of] = qd[:model.nv]
    V[c.nv - (nv - model.nv):] = qd[model.nv:]
    A = np.zeros(c.nv)
    A[c.v_of] = qdd[:model.nv]
    A[c.nv - (nv - model.nv):] = qdd[model.nv:]
    if loads is not None:
        loads = None if loads.empty else loads.on_bodies(2 * np.arange(model.n) + 1, c.model)
    tau_cut = flexible_rnea(c.model, Q, V, A, loads)
    tf = tau_cut[c.free_v]                  # the free joints' dofs: [f (linear), n (angular)]
    F = np.concatenate((tf[:, 3:6], tf[:, 0:3]), axis=1)
    tau = np.concatenate((tau_cut[c.v_of], tau_cut[c.nv - (nv - model.nv):]))
    return F, tau


def _result(model, q, qdd, tau, F, method):
    """The CFAResult of the joint wrenches F (n, 6) with the joints' forces tau (the first nv
    entries of tau_full)."""
    c = _cut(model)
    Wt, idx_s = constraint_bases(c.skeleton, q[:model.nq])
    ns_j, _ = constraint_layout(model.nv_j)
    FS = np.empty(int(ns_j.sum()))
    for j in range(model.n):
        s = slice(int(idx_s[j]), int(idx_s[j] + ns_j[j]))
        FS[s] = Wt[s] @ F[j]
    FT = np.array(tau[:model.nv], dtype=float)
    for j, G in c.gram.items():
        sl = slice(int(model.idx_v[j]), int(model.idx_v[j]) + 2)
        FT[sl] = np.linalg.solve(G, FT[sl])
    return CFAResult(model, method, qdd, FS, FT, F, np.array(q, dtype=float), idx_s, ns_j, [], Wt=Wt)


def flexible_cfa(model, q, qd, tau, f_ext=None):
    """Forward dynamics of a model with flexible bodies with every joint's reaction force: the
    flexible counterpart of :func:`partree.cfa` (O(N)).

    Parameters
    ----------
    model : Model
        A tree with flexible bodies (``model.flexible``).
    q, qd : ndarray
        q_full (nq + n_modal) and qd_full (nv + n_modal): the joints' then the modes'.
    tau : ndarray
        tau_full (nv + n_modal): joint forces, then forces applied to the modes (zeros in free
        motion; the elastic and damping forces are part of the dynamics).
    f_ext : ndarray or dict, optional
        External loads: wrenches [n; f] at the body origins in body coordinates, as
        :func:`partree.cfa` takes them, and at the nodes of flexible bodies
        (:func:`~partree.algorithms.flexible_dynamics.flexible_loads`).

    Returns
    -------
    CFAResult
        ``qdd`` (nv + n_modal, from :func:`flexible_aba`), ``joint_wrench`` (n, 6),
        ``constraint_force`` (ns), ``drive_force`` (nv), as the rigid result holds them; method
        ``'flexible'``.
    """
    _check(model)
    loads = None if f_ext is None else flexible_loads(model, f_ext)
    qdd = flexible_aba(model, q, qd, tau, loads)
    F, _ = flexible_joint_wrenches(model, q, qd, qdd, loads)
    return _result(model, np.asarray(q, dtype=float), qdd, np.asarray(tau, dtype=float), F, "flexible")


def flexible_hybrid_forces(model, q, qd, tau, qdd, active, f_ext=None):
    """Hybrid dynamics of a model with flexible bodies with every joint's reaction force: the
    flexible counterpart of ``partree.hybrid_dynamics(..., return_forces=True)`` (O(N)).

    The arguments are :func:`partree.algorithms.flexible_dynamics.flexible_hybrid_dynamics`'s
    (the joints flagged ``active`` follow ``qdd``, the others and every mode move under ``tau``
    and the external loads ``f_ext``, as :func:`flexible_cfa` takes them).

    Returns
    -------
    qdd_full, tau_full : ndarray
        (nv + n_modal) each, as ``flexible_hybrid_dynamics`` returns them.
    CFAResult
        The motion's joint wrenches, split into constraint forces F_S and drive forces F_T (from
        the full joint forces, the active joints' included); method ``'flexible-hybrid'``.
    """
    _check(model)
    loads = None if f_ext is None else flexible_loads(model, f_ext)
    qdd_full, tau_full = flexible_hybrid_dynamics(model, q, qd, tau, qdd, active, loads)
    F, _ = flexible_joint_wrenches(model, q, qd, qdd_full, loads)
    return qdd_full, tau_full, _result(model, np.asarray(q, dtype=float), qdd_full, tau_full, F, "flexible-hybrid")


def _rigid_only(model, entry, what):
    return PartreeInputError(f"model {model.name!r} has flexible bodies: {entry} gives its reaction forces by "
                             f"flexible_cfa, which takes no {what} (that is for rigid trees)")


def cfa_entry(model, q, qd, tau, f_ext, method, data, out, default_method):
    """:func:`partree.cfa` on a model with flexible bodies: :func:`flexible_cfa` with the same
    q_full, qd_full, tau_full and f_ext.  The rigid solvers' options that have no meaning here (a
    method other than the default, a workspace ``data``, ``out``, a batch) are refused."""
    if method != default_method:
        raise _rigid_only(model, "partree.cfa", f"method={method!r}")
    if data is not None:
        raise _rigid_only(model, "partree.cfa", "data (a rigid workspace)")
    if out is not None:
        raise _rigid_only(model, "partree.cfa", "out")
    if any(np.ndim(x) == 2 for x in (q, qd, tau)):
        raise _rigid_only(model, "partree.cfa", "batch of states")
    return flexible_cfa(model, q, qd, tau, f_ext)


def hybrid_entry(model, q, qd, tau, qdd, active, f_ext, data, return_wrenches):
    """``partree.hybrid_dynamics(..., return_forces=True)`` on a model with flexible bodies:
    :func:`flexible_hybrid_forces` with the same full-length vectors and f_ext; returns
    (qdd_full, tau_full[, joint wrenches], CFAResult) as the rigid call does."""
    if data is not None:
        raise _rigid_only(model, "partree.hybrid_dynamics", "data (a rigid workspace)")
    qdd_full, tau_full, res = flexible_hybrid_forces(model, q, qd, tau, qdd, active, f_ext)
    if return_wrenches:
        return qdd_full, tau_full, res.joint_wrench.copy(), res
    return qdd_full, tau_full, res


__all__ = ["flexible_cfa", "flexible_hybrid_forces", "flexible_joint_wrenches"]
