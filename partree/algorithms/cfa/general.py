"""The seed's general form of the constraint force algorithm (eqs. 16, 22-29), assembled with
scipy.sparse and solved by a sparse direct solve: small models, a teaching aid and a cross-check."""
import numpy as np

from .result import CFAResult
from .common import base_acceleration, check_invertible, setup, workspace


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


def cfa_general(model, q, qd, tau, F_ext, has_f):
    """The seed's general form (eqs. 16, 22-29) assembled with scipy.sparse: small models."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve

    check_invertible(model, "general")
    topo, ws = workspace(model)
    Wt = setup(model, ws, topo, q, qd, tau, F_ext, has_f, np.zeros(model.n, dtype=bool))
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
    delta[roots] = X[roots] @ base_acceleration(model)
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
