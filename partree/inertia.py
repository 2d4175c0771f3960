"""The inertia policy: which body inertias a model accepts, what it reports and what it repairs.

The rotational inertia of a rigid body about its centre of mass is symmetric positive
semi-definite, and its principal moments A <= B <= C satisfy the triangle inequality A + B >= C
(a non-negative density).  Robot descriptions exported from CAD often miss this in harmless ways:
a moment that is 0 written as -1e-20 (rounding noise), a triangle inequality broken by a few
percent, a link whose own inertia is ~0 because its mass sits in a link welded to it by a fixed
joint.  The dynamics needs less than a rigid body per link: a positive semi-definite spatial
inertia, so that no motion has negative kinetic energy.

``Model(..., inertia=...)`` takes one of three policies:

* ``"strict"``: every body's inertia must be that of a rigid body (positive semi-definite and
  the triangle inequality); the first body that is not is refused, by name.
* ``"warn"``: accept every body whose inertia is physically usable (positive semi-definite);
  warn once (:class:`~partree.errors.PartreeInertiaWarning`) with every body that is not a rigid
  body and what is wrong with it.  The inertias are kept as given.
* ``"fix"``: balance the principal moments of the bodies that break the triangle inequality as
  MuJoCo's ``balanceinertia`` does (all three set to their mean, which makes the inertia
  isotropic) and clip rounding noise below zero to zero; warn once with the old and new
  principal moments.  The result passes ``"strict"``.

In every policy, a principal moment within rounding of zero is zero: ``|A| <= NOISE_REL * C +
NOISE_MODEL * C_max``, with C the body's largest principal moment and C_max the model's (a few
units in the last place of the model's largest moment: a number that small disappears when it is
added to it).  A moment below that is negative, and a negative moment is refused in every
policy: no policy turns an indefinite inertia into a usable one.
"""
from __future__ import annotations

import warnings

import numpy as np

from .errors import PartreeInertiaWarning, PartreeInputError

#: the inertia policies, the default first for models read from robot descriptions
POLICIES = ("warn", "fix", "strict")
#: rounding noise of a principal moment, relative to the body's largest moment
NOISE_REL = 1e-12
#: rounding noise of a principal moment, relative to the model's largest moment
NOISE_MODEL = 1e-15
#: the triangle inequality A + B >= C holds to this relative tolerance (written data)
TRIANGLE_REL = 1e-9
#: at most this many bodies are listed in one warning or error
SHOWN = 20


def check_policy(inertia):
    """Return ``inertia`` if it is one of ``POLICIES``; raise PartreeInputError otherwise."""
    if not isinstance(inertia, str) or inertia not in POLICIES:
        raise PartreeInputError(f"inertia={inertia!r}: expected one of {', '.join(map(repr, POLICIES))}")
    return inertia


class Principal:
    """Principal moments of every body's rotational inertia, and what is wrong with them.

    Attributes (n bodies): ``ev`` (n, 3) the principal moments in ascending order, ``V`` (n, 3, 3)
    the principal axes (columns), ``tol`` (n,) the rounding noise of a moment, ``negative`` a
    moment below -tol, ``triangle`` A + B < C beyond rounding (a body with no negative moment),
    ``noise`` a moment in [-tol, 0) and no other fault, ``clipped`` (n, 3) the moments with the
    noise set to zero.
    """

    def __init__(self, I_com, skip=None):
        n = I_com.shape[0]
        self.ev, self.V = np.linalg.eigh(I_com)
        top = np.maximum(self.ev[:, 2], 0.0)
        big = float(top.max()) if n else 0.0
        self.tol = NOISE_REL * top + NOISE_MODEL * big
        small = (self.ev < 0.0) & (self.ev >= -self.tol[:, None])
        self.clipped = np.where(small, 0.0, self.ev)
        self.negative = self.ev[:, 0] < -self.tol
        c = self.clipped
        self.triangle = ~self.negative & (c[:, 0] + c[:, 1] < c[:, 2] * (1.0 - TRIANGLE_REL) - self.tol)
        self.noise = small.any(axis=1) & ~self.negative & ~self.triangle
        if skip is not None:
            for a in (self.negative, self.triangle, self.noise):
                a[skip] = False

    def balanced(self, ids):
        """Principal moments of bodies ``ids`` after the repair: the mean of the three for the
        bodies that break the triangle inequality (MuJoCo's ``balanceinertia``), the noise
        clipped to zero for the others."""
        ids = np.asarray(ids, dtype=np.int64)
        out = self.clipped[ids].copy()
        bal = self.triangle[ids] | self.negative[ids]
        out[bal] = out[bal].mean(axis=1, keepdims=True)
        return out


def _fmt(ev):
    return np.array2string(np.asarray(ev), precision=6, separator=" ", floatmode="maxprec")


def _listing(lines):
    shown = lines[:SHOWN]
    more = len(lines) - len(shown)
    return "\n  " + "\n  ".join(shown) + (f"\n  ... and {more} more" if more > 0 else "")


def apply_policy(model, inertia, massless):
    """Check ``model.I_com`` under the policy ``inertia``: raise, warn, or repair in place.

    ``massless`` marks the bodies with zero mass and zero inertia (nothing to check).  Under
    ``"fix"`` ``model.I_com`` is replaced by a repaired copy (the caller's array is not touched).
    """
    P = Principal(model.I_com, skip=massless)
    name = model.body_names
    neg = np.flatnonzero(P.negative)
    if neg.size:
        i = int(neg[0])
        raise PartreeInputError(
            f"body {i} ({name[i]}) has a negative principal moment of inertia (principal moments "
            f"{_fmt(P.ev[i])}): not a physical body, in any inertia policy"
            + (f" ({neg.size - 1} more bodies have one)" if neg.size > 1 else ""))
    tri = np.flatnonzero(P.triangle)
    if inertia == "strict":
        if tri.size:
            i = int(tri[0])
            raise PartreeInputError(
                f"body {i} ({name[i]}) has an invalid rotational inertia (principal moments {_fmt(P.ev[i])}): "
                f"it must be positive semi-definite and satisfy the triangle inequality"
                + (f" ({tri.size - 1} more bodies do not)" if tri.size > 1 else "")
                + "; inertia='warn' accepts it, inertia='fix' balances it")
        return
    if inertia == "warn":
        if tri.size:
            lines = [f"body {int(i)} ({name[int(i)]}): principal moments {_fmt(P.ev[i])} break the triangle "
                     f"inequality A + B >= C" for i in tri]
            warnings.warn(
                f"model {model.name!r}: {tri.size} bodies have an inertia that is not a rigid body's; "
                f"accepted as given (inertia='warn'; inertia='fix' balances them, inertia='strict' refuses "
                f"them):" + _listing(lines), PartreeInertiaWarning, stacklevel=4)
        return
    # fix
    ids = np.flatnonzero(P.triangle | P.noise)
    if not ids.size:
        return
    new = P.balanced(ids)
    V = P.V[ids]
    I_new = np.einsum("nij,nj,nkj->nik", V, new, V)
    same = np.ptp(new, axis=1) == 0.0
    I_new[same] = new[same, :1, None] * np.eye(3)       # exactly isotropic where balanced
    I_com = model.I_com.copy()
    I_com[ids] = 0.5 * (I_new + I_new.transpose(0, 2, 1))
    model.I_com = I_com
    lines = []
    for k, i in enumerate(ids):
        i = int(i)
        how = "balanced (the mean of the three)" if P.triangle[i] else "rounding noise clipped to zero"
        lines.append(f"body {i} ({name[i]}): principal moments {_fmt(P.ev[i])} -> {_fmt(new[k])}, {how}")
    warnings.warn(f"model {model.name!r}: the inertias of {ids.size} bodies were changed (inertia='fix'):"
                  + _listing(lines), PartreeInertiaWarning, stacklevel=4)
