"""Hybrid dynamics in O(N): the articulated-body algorithm with some joints' accelerations given.

Every joint is either *passive* (its force tau is given, its acceleration qdd is unknown: forward
dynamics) or *active* (its acceleration is given, the force that drives it is unknown: inverse
dynamics).  This is the articulated-body hybrid dynamics algorithm of Featherstone (*Rigid Body
Dynamics Algorithms*, 2008, ch. 9 "Hybrid Dynamics"): ABA's three passes with a per-joint flag.

1. ABA's pass 1 as it is (:func:`partree.algorithms.aba.aba_forward_pass1_in`): X_up, S, v, c,
   the rigid-body inertias IA = I and bias forces pA = v x* I v - f_ext;
2. :func:`partree.algorithms.aba.hybrid_backward_pass`, inward.  A passive joint is ABA's step:
   U = IA S, D = S^T U, u = tau - S^T pA, and the parent receives the articulated inertia IA - U D^-1 U^T and the bias
   pA + Ia c + U D^-1 u.  Across an active joint the child's acceleration relative to its parent
   is known, S qdd, so nothing is eliminated: the parent receives the child's full articulated
   inertia IA and the bias of the known motion, pA + IA (c + S qdd);
3. :func:`partree.algorithms.aba.hybrid_forward_pass2`, outward from a0 = [0; -g].  A passive
   joint is ABA's step, qdd = D^-1 (u - U^T a'), a = a' + S qdd with a' = X_up a_parent + c.  An active joint takes its
   given qdd, a = a' + S qdd, and its force is the projection of the wrench its articulated body
   needs, tau = S^T (IA a + pA) (RNEA's tau = S^T f with f = IA a + pA the joint wrench).

With every joint passive this is ABA; with every joint active the inward pass sums the rigid-body
inertias and forces of each subtree and the outward pass is RNEA's, so tau equals RNEA's.  The
joint wrench f_i = IA_i a_i + pA_i, in body i's frame as [n; f], is available for every body
after pass 3, for either kind of joint (the one RNEA returns for the resulting motion).

A fixed joint has no coordinates: both kinds pass the same thing to the parent.  Only a passive
joint's block D can be singular (a massless subtree moved along the joint): the kernels return
that body and :func:`hybrid_dynamics` names the joint.  The two passes are ABA's own
(``partree.algorithms.aba``: ABA runs them with no joint active), so the 1-DOF step is written out
in both passes and multi-DOF passive joints go through
:func:`partree.algorithms.aba.articulated_project`.

Kernel arguments are ABA's (``partree.algorithms.aba``), plus ``active`` (n,) bool: the flag of
each joint; ``qdd_in`` (nv,): the given accelerations (read for active joints); ``tau_out``
(nv,): the joint forces (given ones copied, active ones computed); ``W`` (n, 6) and
``want_w``: the joint wrenches, written when asked for.
"""
import numpy as np
from numba import njit

from .. import checks
from ..errors import PartreeInputError
from .aba import (BACKWARD_SCRATCH, NONE_ACTIVE, PASS1_SCRATCH, PASS2_SCRATCH, aba_forward_pass1_in,
                  hybrid_backward_pass_in, hybrid_forward_pass2_in)
from .cfa.leaf_first import result_from_articulated
from .packed import raw_view

#: scratch values of the whole algorithm
SCRATCH = 6 + max(PASS1_SCRATCH, BACKWARD_SCRATCH, PASS2_SCRATCH)


@njit(cache=True)
def hybrid_kernel(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity,
                  q, qd, tau, qdd_in, active, f_ext, has_fext, E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd,
                  tau_out, W, want_w):
    """The three passes (arguments: see the module docstring).  Returns -1 on success, else the
    body whose passive joint has a singular joint-space inertia D."""
    sc = np.empty(SCRATCH)
    a0 = raw_view(sc, 0, (6,))
    work = raw_view(sc, 6, (SCRATCH - 6,))
    none = True
    for i in range(active.shape[0]):
        if active[i]:
            none = False
            break
    if none:
        # no joint active: ABA's passes as they are (the 1-DOF steps written for a mix of both
        # kinds do a little more work per body), the given forces copied
        active = NONE_ACTIVE
        for k in range(tau.shape[0]):
            tau_out[k] = tau[k]
    aba_forward_pass1_in(parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, q, qd,
                         f_ext, has_fext, E, r, v, c, IA, pA, S, work)
    bad = hybrid_backward_pass_in(parent, idx_v, active, tau, qdd_in, E, r, c, IA, pA, S, U, Dinv, u, work)
    if bad >= 0:
        return bad
    a0[0] = 0.0
    a0[1] = 0.0
    a0[2] = 0.0
    a0[3] = -gravity[0]
    a0[4] = -gravity[1]
    a0[5] = -gravity[2]
    hybrid_forward_pass2_in(parent, idx_v, active, a0, tau, qdd_in, E, r, S, c, IA, pA, U, Dinv, u, a, qdd,
                            tau_out, W, want_w, work)
    return -1


def active_mask(model, active):
    """The (n,) boolean flags of ``active``: a boolean mask over the model's joints (one entry per
    body, fixed joints included) or joint names (a list, tuple or set of them, or one name)."""
    if isinstance(active, str):
        active = [active]
    if isinstance(active, (set, frozenset)):
        active = sorted(active, key=str)
    arr = np.asarray(active) if not isinstance(active, np.ndarray) else active
    if arr.ndim == 1 and arr.size == 0 and not isinstance(active, np.ndarray):
        return np.zeros(model.n, dtype=np.bool_)        # no names: every joint passive
    if arr.dtype == np.bool_:
        if arr.shape != (model.n,):
            raise PartreeInputError(f"active has shape {arr.shape}; model {model.name!r} needs a boolean mask of "
                                    f"({model.n},), one flag per joint (fixed joints included), or joint names")
        return np.ascontiguousarray(arr)
    if arr.ndim == 1 and arr.dtype.kind in "UO" and all(isinstance(x, str) for x in arr.tolist()):
        known = {name: i for i, name in enumerate(model.joint_names)}
        unknown = [x for x in arr.tolist() if x not in known]
        if unknown:
            raise PartreeInputError(f"active names joints that model {model.name!r} does not have: {unknown} "
                                    f"(its joints: {_few(model.joint_names)})")
        mask = np.zeros(model.n, dtype=np.bool_)
        mask[[known[x] for x in arr.tolist()]] = True
        return mask
    raise PartreeInputError(f"active must be a boolean mask of ({model.n},), one flag per joint, or a list of "
                            f"joint names; got {type(active).__name__} of dtype {arr.dtype}"
                            + (" (integers: joint indices are not accepted, pass a boolean mask)"
                               if arr.dtype.kind in "iu" else ""))


def _few(names, k=8):
    names = list(names)
    return ", ".join(repr(x) for x in names[:k]) + (f", ... ({len(names)} in all)" if len(names) > k else "")


def given_entries(model, x, name, ignored):
    """``x`` checked as an (nv,) vector whose ``ignored`` entries (the other kind of joint's) are
    set to zero first, so that only the entries that are read must be finite."""
    if x is not None and not np.iscomplexobj(x):
        try:
            arr = np.array(x, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.shape == (model.nv,):
            arr[ignored] = 0.0
            x = arr
    return checks.vector(model, x, model.nv, name, "nv")


def hybrid_dynamics(model, q, qd, tau, qdd, active, f_ext=None, data=None, return_wrenches=False,
                    return_forces=False):
    """Hybrid dynamics: accelerations of the passive joints and forces of the active ones, in O(N).

    Each joint is active (its acceleration is given, e.g. a motor following a trajectory, and the
    force that produces it is computed) or passive (its force is given and its acceleration is
    computed).  One call runs the articulated-body hybrid dynamics algorithm (Featherstone, ch. 9):
    ABA's passes with active joints passing their child's full articulated inertia and the bias
    of the known motion to the parent.  All joints passive gives ``partree.aba``, all active
    ``partree.rnea``.

    Parameters
    ----------
    model : Model
    q, qd : ndarray
        Configuration (nq,) and velocity (nv,).
    tau : ndarray
        Joint forces (nv,); read for the passive joints only (the other entries are ignored and
        may be anything, NaN included).
    qdd : ndarray
        Joint accelerations (nv,); read for the active joints only (likewise).
    active : array_like of bool, or list of str
        A boolean mask of (n,), one flag per joint (body), True for active; or the names of the
        active joints.  A fixed joint has no coordinates, so its flag changes nothing.
    f_ext : ndarray or dict, optional
        External wrenches [n; f] on the bodies, in body coordinates (see :func:`partree.aba`).
    data : Data, optional
        A reusable workspace (``model.create_data()``); the model's own when omitted.
    return_wrenches : bool
        Also return the (n, 6) joint wrenches [n; f], row i the wrench the parent transmits to
        body i across joint i in body i's frame: those of ``partree.rnea(q, qd, qdd_full,
        return_wrenches=True)``.
    return_forces : bool
        Also return the joint reaction forces as :func:`partree.cfa` gives them: a
        :class:`~partree.CFAResult` of the motion (its qdd the full accelerations, every joint's
        wrench split into its constraint force F_S = W^T F and its drive force F_T from the full
        joint forces, active joints' included).  O(N), no second dynamics pass.  On a model with
        flexible bodies this is
        :func:`partree.algorithms.flexible_cfa.flexible_hybrid_forces`: q, qd, tau, qdd full
        vectors (the joints' entries, then the modes'), f_ext may hold loads at nodes, the
        results are full vectors; without ``return_forces`` such a model is refused (the
        flexible functions compute its dynamics).

    Returns
    -------
    qdd_full, tau_full : ndarray
        (nv,) each: the given accelerations of the active joints and the computed ones of the
        passive joints; the given forces of the passive joints and the computed ones of the
        active joints.  With ``return_wrenches=True`` a third item, the (n, 6) joint wrenches;
        with ``return_forces=True`` then (last) the ``CFAResult``.

    Raises
    ------
    PartreeInputError
        For inputs of the wrong size or not finite where they are read, unknown joint names, and
        a passive joint whose subtree has no inertia along its motion (its acceleration is then
        undefined; making that joint active is one way out).
    """
    if return_forces and getattr(model, "flexible", None) is not None:
        from .flexible_cfa import hybrid_entry
        return hybrid_entry(model, q, qd, tau, qdd, active, f_ext, data, return_wrenches)
    mask = active_mask(model, active)
    q, qd = checks.state(model, q, qd)
    dof_active = np.repeat(mask, model.nv_j)
    tau = given_entries(model, tau, "tau", dof_active)
    qdd = given_entries(model, qdd, "qdd", ~dof_active)
    F, has_f = checks.external_forces(model, f_ext)
    d = checks.data_for(model, data)
    qdd_out = np.empty(model.nv)
    tau_out = np.empty(model.nv)
    W = np.empty((model.n, 6)) if return_wrenches else np.empty((1, 6))
    bad = hybrid_kernel(*checks.model_args(model), model.gravity, q, qd, tau, qdd, mask, F, has_f,
                        d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, qdd_out, tau_out,
                        W, return_wrenches)
    if bad >= 0:
        raise PartreeInputError(
            f"passive joint {model.joint_names[bad]!r} (body {bad}): its subtree has a singular inertia "
            f"along the joint's motion (massless subtree?); its acceleration is undefined (make the "
            f"joint active, or give the subtree inertia)")
    out = (qdd_out, tau_out, W) if return_wrenches else (qdd_out, tau_out)
    if return_forces:
        # the kernel leaves every body's articulated IA, pA and its acceleration a in the
        # workspace, and F_j = IA_j a_j + pA_j for either kind of joint
        out = out + (result_from_articulated(model, q, d, qdd_out.copy(), tau_out, "hybrid"),)
    return out
