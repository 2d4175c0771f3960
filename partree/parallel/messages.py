"""The engine's messages: what a part sends to the root and gets back, as flat float64 buffers.

One evaluation exchanges three kinds of message per part, each a fixed number of doubles that
depends on the part's number of handles H only (never on its number of bodies):

=============  ========================  ==========================================  =====================
message        direction                 content                                     doubles
=============  ========================  ==========================================  =====================
velocity       part -> root              T_h (H, 3, 3), Tr_h (H, 3), vrel_h (H, 6)    18 H
(v_in)         root -> part              the part's incoming velocity                 6
reduction      part -> root              M (6, 6), m0 (6), Kt (H, 6, 6),              42 + 36 H + 36 H^2 + 6 H
                                         Lam (H, H, 6, 6), beta (H, 6)
solution       root -> part              a_in (6), g (H, 6)                           6 + 6 H
=============  ========================  ==========================================  =====================

The momentum form (seed 001, ``MPIEngine.momentum_local``) uses the same three rounds, at rest,
with two additions: the root sends each part the gravity field g_in (6) in place of its (zero)
incoming velocity, the reduction message ends with the part's total of gravity and external
wrenches (6 more), and the solution message with the child parts' totals at the handles (6 H
more).

(Psi, the transpose of Kt, does not travel: the root forms it from Kt.)  Every backend that moves
boundary data as buffers (the MPI engine and the distributed simulation) packs and unpacks them
here, so the layout is written once.
"""
from __future__ import annotations

import numpy as np


def velocity_len(H):
    """Doubles in a part's velocity message."""
    return 18 * H


def reduction_len(H):
    """Doubles in a part's reduction message."""
    return 42 + 36 * H + 36 * H * H + 6 * H


def solution_len(H):
    """Doubles in a part's solution message."""
    return 6 + 6 * H


def pack_velocity(TE, Tr, vrel):
    """The handle maps v_h = T_h v_in + vrel_h of a part (``PartKernel.velocity``) as one buffer."""
    return np.concatenate((TE.ravel(), Tr.ravel(), vrel.ravel()))


def unpack_velocity(b, H):
    """(TE (H, 3, 3), Tr (H, 3), vrel (H, 6)) from a velocity message (views of ``b``)."""
    return b[:9 * H].reshape(H, 3, 3), b[9 * H:12 * H].reshape(H, 3), b[12 * H:18 * H].reshape(H, 6)


def pack_reduction(M, m0, Kt, Lam, beta):
    """A part's boundary relation (``PartKernel.reduce``, without Psi) as one buffer."""
    return np.concatenate((M.ravel(), m0, Kt.ravel(), Lam.ravel(), beta.ravel()))


def unpack_reduction(b, H):
    """(M, m0, Kt, Psi, Lam, beta) from a reduction message, Psi = Kt^T (views of ``b``)."""
    o = 42
    Kt = b[o:o + 36 * H].reshape(H, 6, 6)
    o += 36 * H
    Lam = b[o:o + 36 * H * H].reshape(H, H, 6, 6)
    o += 36 * H * H
    return b[:36].reshape(6, 6), b[36:42], Kt, Kt.transpose(0, 2, 1), Lam, b[o:o + 6 * H].reshape(H, 6)


def pack_solution(a_in, g):
    """What the root sends a part: its incoming acceleration and its handles' wrenches."""
    return np.concatenate((a_in, np.ravel(g)))


def unpack_solution(b, H):
    """(a_in (6,), g (H, 6)) from a solution message (views of ``b``)."""
    return b[:6], b[6:6 + 6 * H].reshape(H, 6)


def momentum_reduction_len(H):
    """Doubles in a part's reduction message in the momentum form: the reduction and the part's
    total of gravity and external wrenches."""
    return reduction_len(H) + 6


def momentum_solution_len(H):
    """Doubles in a part's solution message in the momentum form: the solution and the child
    parts' totals at the handles."""
    return solution_len(H) + 6 * H


def pack_momentum_solution(a_in, g, Fh):
    """What the root sends a part in the momentum form."""
    return np.concatenate((a_in, np.ravel(g), np.ravel(Fh)))


def unpack_momentum_solution(b, H):
    """(a_in (6,), g (H, 6), Fh (H, 6)) from a momentum-form solution message."""
    return b[:6], b[6:6 + 6 * H].reshape(H, 6), b[6 + 6 * H:6 + 12 * H].reshape(H, 6)
