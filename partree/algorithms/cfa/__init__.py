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
    and no body's I^-1 is ever formed.  See :mod:`partree.algorithms.cfa.oddeven_scattering`.
``'odd-even-compliance'``
    The seed's form of the same reduction (seed eqs. 39-40) on the compliance-form system
    A F_S = rhs, A = W^T P^T I^-1 P W (5x5 blocks for revolute joints), kept for comparison.  Its
    pivots inherit A's conditioning, which grows like a power of the chain length on a planar chain
    loaded out of its plane: the wrenches lose digits (autoTree chain, skew 0: ~4e-3 relative at
    2*10^4 bodies, 0.2-0.5 at 10^5) and at 10^6 bodies a pivot goes non-positive.  See
    :mod:`partree.algorithms.cfa.oddeven_compliance`.
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

Accuracy and cost (``scripts/benchmarks/bench_cfa.py``; figures in docs/performance.md):
'leaf-first' is ABA plus one pass and as accurate as ABA, on any tree: it is the default.
'odd-even' (scattering form) is as accurate as leaf-first but costs several times ABA on one core
along long chains (one-body chains, the bodies of bushy trees, take ABA's step): its point is the
O(log N) depth, not the serial time.  'odd-even-compliance' loses digits on ill-conditioned chains
(``wrenches='newton-euler'`` recomputes the wrenches from its qdd, which stay accurate).
'general' is a teaching aid (scipy.sparse).
"""
from __future__ import annotations

from ... import checks
from ...errors import PartreeInputError
from .. import batch
from ..packed import NO_FORCES, OK, PACK_MAX_BODIES, model_buffer
from . import leaf_first
from .bases import constraint_layout, project_wrench
from .common import constraint_bases, newton_euler
from .general import cfa_general
from .leaf_first import (cfa_call, cfa_leaf_first, cfa_leaf_first_batch, cfa_leaf_first_packed, new_result,
                         result_buffer, rows_buffer)
from .oddeven_compliance import cfa_oddeven_compliance
from .oddeven_scattering import cfa_oddeven_scattering
from .result import CFAResult

METHODS = ("leaf-first", "odd-even", "odd-even-compliance", "general")
DEFAULT_METHOD = "leaf-first"


def cfa(model, q, qd, tau, f_ext=None, method=DEFAULT_METHOD, data=None, one_body_chains="inertia",
        wrenches="cfa", out=None, check=True, threads=None):
    """Constraint force algorithm: joint accelerations and every joint's constraint force.

    Parameters
    ----------
    model : Model
        The tree.
    q, qd, tau : ndarray
        Configuration (nq,), velocity (nv,) and joint forces (nv,).
    f_ext : ndarray or dict, optional
        External wrenches [n; f] per body in body coordinates: an (n, 6) array or
        ``{joint name: wrench}``.
    method : {'leaf-first', 'odd-even', 'odd-even-compliance', 'general'}
        'leaf-first' (default): the serial fast path, ABA's inertia form plus one pass; accurate
        on any tree.  'odd-even': O(N) work in O(log N) depth, the chains' cyclic reduction in
        scattering form; as accurate, several times slower on one core.  'odd-even-compliance':
        the seed's compliance form of the same reduction; loses digits on long ill-conditioned
        chains.  'general': sparse assembly of the seed's A = W^T P^T I^-1 P W; small models.
    data : Data, optional
        Workspace for 'leaf-first' (``model.create_data()``).
    one_body_chains : {'inertia', 'constraint'}
        For 'odd-even' and 'odd-even-compliance': 'inertia' collapses one-body chains with the
        equivalent articulated-body step (Woodbury; no 6x6 inverse), 'constraint' runs the chain
        code for them too (a cross-check).
    wrenches : {'cfa', 'newton-euler'}
        'cfa': F_S as the algorithm solves them.  'newton-euler': after the solve, recompute
        every joint wrench by the Newton-Euler inward pass from the computed qdd and project
        F_S = W^T F (O(N)).  For 'odd-even-compliance' and 'general' on long chains whose
        constraint system is ill-conditioned (a planar chain loaded out of its plane: cond(A)
        grows like a power of the length) the solved F_S lose digits while qdd stays accurate;
        the Newton-Euler wrenches are then as accurate as qdd.
    out : CFAResult, optional
        'leaf-first': a result of an earlier call on this model (one state) whose arrays this
        call overwrites and which it returns, so that a loop allocates no result.
    check : bool
        False skips the value checks of inputs that are already C-contiguous float64 arrays of the
        right sizes (see :func:`partree.aba`).
    threads : int, optional
        Threads for a batch (``partree.set_num_threads``).

    2-D q, qd, tau (one state per row) are a batch ('leaf-first'): every row is evaluated, spread
    over the cores, and the result's arrays have one row per state: qdd (B, nv),
    constraint_force (B, ns), drive_force (B, nv), joint_wrench (B, n, 6).

    A model with flexible bodies (``model.flexible``) goes to
    :func:`partree.algorithms.flexible_cfa.flexible_cfa`: q, qd, tau are then the full vectors
    (the joints' entries, then the modes'), f_ext may also hold loads at nodes, and the result's
    qdd has the modes' accelerations after the joints'; ``method`` must be the default, and
    ``data``, ``out`` and batches are refused.

    Returns
    -------
    CFAResult
        qdd, constraint_force, drive_force, joint_wrench, levels.

    Raises
    ------
    PartreeInputError
        For bodies whose spatial inertia cannot be inverted (zero mass, singular rotational
        inertia), naming the body, with 'odd-even-compliance' and 'general', which need I^-1;
        'odd-even' needs no I^-1 but S_j^T I_j S_j > 0 for every body of a chain of two or more
        bodies; 'leaf-first' accepts them wherever ABA does.
    """
    pk = model._packed
    if (pk is not None and leaf_first.CALL_READY and method == "leaf-first" and one_body_chains == "inertia"
            and wrenches == "cfa"):
        try:
            d = model._data if data is None else data
            cb = d._cfa_buf
            ob = result_buffer(model, pk, out)
            if cfa_call(pk.buf, d._buf, cb, q, qd, tau, NO_FORCES if f_ext is None else f_ext, ob, check) == OK:
                if out is None:
                    return new_result(model, pk, ob)
                out._Wt = None
                return out
        except (TypeError, AttributeError, PartreeInputError):
            pass        # not the compiled call's types: checked and converted below
    if getattr(model, "flexible", None) is not None:
        # a model with flexible bodies (never a compiled buffer): its reaction forces, full vectors
        from ..flexible_cfa import cfa_entry
        return cfa_entry(model, q, qd, tau, f_ext, method, data, out, DEFAULT_METHOD)
    if method not in METHODS:
        raise PartreeInputError(f"unknown CFA method {method!r}; choose one of {', '.join(METHODS)}")
    if one_body_chains not in ("inertia", "constraint"):
        raise PartreeInputError(f"one_body_chains must be 'inertia' or 'constraint', got {one_body_chains!r}")
    if wrenches not in ("cfa", "newton-euler"):
        raise PartreeInputError(f"wrenches must be 'cfa' or 'newton-euler', got {wrenches!r}")
    if batch.is_batch(q) or batch.is_batch(qd) or batch.is_batch(tau):
        if method != "leaf-first":
            raise PartreeInputError(f"a batch of states (2-D q, qd, tau) runs method='leaf-first'; "
                                    f"{method!r} takes one state at a time")
        if out is not None:
            raise PartreeInputError("out= takes a one-state result; a batch returns a new result")
        return cfa_leaf_first_batch(model, q, qd, tau, f_ext, threads)
    q, qd = checks.state(model, q, qd)
    tau = checks.vector(model, tau, model.nv, "tau", "nv")
    F_ext, has_f = checks.external_forces(model, f_ext)
    if method == "leaf-first":
        pk = model_buffer(model)
        if pk is not None:
            return cfa_leaf_first_packed(model, pk, q, qd, tau, F_ext, has_f, data, out)
        if out is not None:
            raise PartreeInputError(f"out= needs a model of at most {PACK_MAX_BODIES} bodies (the compiled call "
                                    f"path); model {model.name!r} has {model.n}")
        return cfa_leaf_first(model, q, qd, tau, F_ext, has_f, data)
    if out is not None:
        raise PartreeInputError(f"out= is for method='leaf-first', not {method!r}")
    if method == "general":
        res = cfa_general(model, q, qd, tau, F_ext, has_f)
    elif method == "odd-even":
        res = cfa_oddeven_scattering(model, q, qd, tau, F_ext, has_f, one_body_chains == "inertia")
    else:
        res = cfa_oddeven_compliance(model, q, qd, tau, F_ext, has_f, one_body_chains == "inertia")
    if wrenches == "newton-euler":
        newton_euler(model, res, F_ext, has_f)
    return res


__all__ = ["cfa", "CFAResult", "constraint_bases", "constraint_layout", "project_wrench", "METHODS", "DEFAULT_METHOD"]
