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
