"""Small dense linear algebra for the compiled kernels: blocks of at most 6 x 6.

One SPD inverse for the package (:func:`spd_inverse`), and the Cholesky factor with its
triangular solves.  Everything works in caller-owned arrays; nothing allocates.
"""
import numpy as np
from numba import njit


@njit(cache=True)
def spd_inverse(D, n, out):
    """out = D^-1 for the symmetric positive-definite n x n block D (n <= 6; ``out`` may be D).

    Gauss-Jordan elimination in place, without pivoting, which is stable for SPD matrices: at
    step k row k is divided by its pivot and eliminated from the others, and column k takes the
    values the identity's column k would hold in [D | 1], so no second block is needed.  Returns
    False when a pivot is not positive (D not positive definite); ``out`` is then undefined."""
    for i in range(n):
        for j in range(n):
            out[i, j] = D[i, j]
    for k in range(n):
        piv = out[k, k]
        if not piv > 0.0:
            return False
        inv = 1.0 / piv
        out[k, k] = 1.0
        for j in range(n):
            out[k, j] *= inv
        for i in range(n):
            if i != k:
                f = out[i, k]
                if f != 0.0:
                    out[i, k] = 0.0
                    for j in range(n):
                        out[i, j] -= f * out[k, j]
    return True


@njit(cache=True, inline="always")
def cholesky(A, m):
    """In-place lower Cholesky factor L of the leading m x m block of A, with the *reciprocal*
    diagonal 1/L_kk stored on the diagonal (so that the solves multiply).  False if not SPD."""
    for k in range(m):
        s = A[k, k]
        for t in range(k):
            s -= A[k, t] * A[k, t]
        if not s > 0.0:
            return False
        inv = 1.0 / np.sqrt(s)
        A[k, k] = inv
        for i in range(k + 1, m):
            s = A[i, k]
            for t in range(k):
                s -= A[i, t] * A[k, t]
            A[i, k] = s * inv
    return True


@njit(cache=True, inline="always")
def spd_inverse_trace(D, n, work):
    """trace(D^-1) of the symmetric positive-definite n x n block D (lower triangle read), as
    |L^-1|_F^2 with D = L L^T (:func:`cholesky`): about a third of :func:`spd_inverse`'s work.
    ``work`` (n x n) holds the factor in its lower triangle and the columns of L^-1 in its upper
    one.  Returns -1.0 when D is not positive definite."""
    for i in range(n):
        for j in range(i + 1):
            work[i, j] = D[i, j]
    if not cholesky(work, n):
        return -1.0
    t = 0.0
    for j in range(n):          # column j of L^-1: x_j = 1 / L_jj, x_i (i > j) in work[j, i]
        xj = work[j, j]
        t += xj * xj
        for i in range(j + 1, n):
            s = -work[i, j] * xj
            for k in range(j + 1, i):
                s -= work[i, k] * work[j, k]
            x = s * work[i, i]
            work[j, i] = x
            t += x * x
    return t


@njit(cache=True, inline="always")
def lsolve_cols(Lf, m, B, nc):
    """B[:m, :nc] := L^-1 B (L from :func:`cholesky`)."""
    for col in range(nc):
        for i in range(m):
            s = B[i, col]
            for t in range(i):
                s -= Lf[i, t] * B[t, col]
            B[i, col] = s * Lf[i, i]


@njit(cache=True, inline="always")
def lsolve_vec(Lf, m, x):
    """x[:m] := L^-1 x (L from :func:`cholesky`)."""
    for i in range(m):
        s = x[i]
        for t in range(i):
            s -= Lf[i, t] * x[t]
        x[i] = s * Lf[i, i]


@njit(cache=True, inline="always")
def ltsolve_vec(Lf, m, x):
    """x[:m] := L^-T x (L from :func:`cholesky`)."""
    for i in range(m - 1, -1, -1):
        s = x[i]
        for t in range(i + 1, m):
            s -= Lf[t, i] * x[t]
        x[i] = s * Lf[i, i]
