"""The leaf-first constraint force method: ABA's inertia form plus one pass.

Leaf-first elimination of the F_S system, written in inertia form, *is* the articulated-body
algorithm (by the Woodbury identity W (W^T IA^-1 W)^-1 W^T = IA - IA S (S^T IA S)^-1 S^T IA), so
this method runs ABA's kernel and then reads every joint's wrench as F_j = IA_j a_j + pA_j and
F_S,j = W_j^T F_j.  It is the serial fast path and as accurate as ABA on any tree.
"""
import numpy as np
from numba import njit

from ... import checks
from ...errors import PartreeInputError
from ..aba import aba_kernel
from .bases import project_wrench, rows_kernel
from .result import CFAResult
from .common import ERR_UNIVERSAL, raise_error, topology, workspace


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


def cfa_leaf_first(model, q, qd, tau, F_ext, has_f, data=None):
    topo = topology(model)
    d = checks.data_for(model, data)
    bad = aba_kernel(*checks.model_args(model), model.gravity, q, qd, tau, F_ext, has_f,
                     d.E, d.r, d.v, d.c, d.IA, d.pA, d.a, d.S, d.U, d.Dinv, d.u, d.qdd)
    if bad >= 0:
        raise PartreeInputError(
            f"joint {model.joint_names[bad]!r} (body {bad}): its subtree has a singular inertia along "
            f"the joint's motion (massless subtree?); forward dynamics is undefined")
    ws = workspace(model)[1]
    bad = rows_kernel(model.jtype, model.idx_v, topo.idx_s, d.S, ws.rows_ready, ws.Wt)
    if bad >= 0:
        ws.rows_ready = False
        raise_error(model, bad, ERR_UNIVERSAL, "leaf-first")
    ws.rows_ready = True
    FS = np.empty(topo.ns)
    F = np.empty((model.n, 6))
    FT = np.empty(model.nv)
    _wrenches_from_articulated(model.idx_v, topo.idx_s, d.IA, d.pA, d.a, d.S, tau, ws.Wt, FS, F, FT)
    return CFAResult(model, "leaf-first", d.qdd.copy(), FS, FT, F, q.copy(), topo.idx_s, topo.ns_j, [])
