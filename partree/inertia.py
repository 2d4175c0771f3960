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
from numba import njit

from . import joints as J
from .errors import PartreeInertiaWarning, PartreeInputError

#: the inertia policies, the default first for models read from robot descriptions
POLICIES = ("warn", "fix", "strict")
#: rounding noise of a principal moment, relative to the body's largest moment
NOISE_REL = 1e-12
#: rounding noise of a principal moment, relative to the model's largest moment
NOISE_MODEL = 1e-15
#: the triangle inequality A + B >= C holds to this relative tolerance (written data)
TRIANGLE_REL = 1e-9
#: a joint's motion is undetermined where the smallest eigenvalue of S^T I_c S, scaled by the
#: subtree's own inertia, is at most this
UNDETERMINED = 1e-12
#: at most this many bodies are listed in one warning or error
SHOWN = 20


def check_policy(inertia):
    """Return ``inertia`` if it is one of ``POLICIES``; raise PartreeInputError otherwise."""
    if not isinstance(inertia, str) or inertia not in POLICIES:
        raise PartreeInputError(f"inertia={inertia!r}: expected one of {', '.join(map(repr, POLICIES))}")
    return inertia


class Principal:
    """Principal moments of every body's rotational inertia, and what is wrong with them.

    Attributes (n bodies): ``ev`` (n, 3) the principal moments in ascending order, ``tol`` (n,)
    the rounding noise of a moment, ``negative`` a moment below -tol, ``triangle`` A + B < C
    beyond rounding (a body with no negative moment), ``noise`` a moment in [-tol, 0) and no
    other fault, ``clipped`` (n, 3) the moments with the noise set to zero.
    """

    def __init__(self, I_com, skip=None):
        n = I_com.shape[0]
        self.I_com = I_com
        self.ev = np.linalg.eigvalsh(I_com)
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


class labelled_warnings:
    """Context manager for readers: the ``PartreeInertiaWarning`` raised while a model is built
    inside is raised again on leaving, its message prefixed with ``label`` (the file), pointing
    ``up`` frames above the function that holds the ``with`` statement (1: its caller).  Other
    warnings pass through unchanged; nothing is raised again when an exception leaves."""

    def __init__(self, label, up=1):
        self.label, self.up = label, up

    def __enter__(self):
        self._cm = warnings.catch_warnings(record=True)
        self._caught = self._cm.__enter__()
        warnings.simplefilter("always", PartreeInertiaWarning)
        return self

    def __exit__(self, kind, exc, tb):
        self._cm.__exit__(kind, exc, tb)
        if kind is not None:
            return False
        for w in self._caught:
            if issubclass(w.category, PartreeInertiaWarning):
                warnings.warn(f"{self.label}: {w.message}", PartreeInertiaWarning, stacklevel=2 + self.up)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        return False


# ---------------------------------------------------------------------- composites
@njit(cache=True, inline="always")
def _add_to_parent(E, r, m, h, Ib, p, M, H, IB):
    """Add the inertia (m, h = m c, Ib about the origin) given in a child frame to the parent's
    (M, H, IB) at index p; (E, r) is X_up, parent to child."""
    g0 = E[0, 0] * h[0] + E[1, 0] * h[1] + E[2, 0] * h[2]
    g1 = E[0, 1] * h[0] + E[1, 1] * h[1] + E[2, 1] * h[2]
    g2 = E[0, 2] * h[0] + E[1, 2] * h[1] + E[2, 2] * h[2]
    g = (g0, g1, g2)
    rg = r[0] * g0 + r[1] * g1 + r[2] * g2
    rr = r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
    M[p] += m
    for a in range(3):
        H[p, a] += g[a] + m * r[a]
    for a in range(3):
        for b in range(3):
            # E^T Ib E
            x = 0.0
            for k in range(3):
                for l in range(3):
                    x += E[k, a] * Ib[k, l] * E[l, b]
            x += -m * r[a] * r[b] - r[a] * g[b] - g[a] * r[b]
            if a == b:
                x += m * rr + 2.0 * rg
            IB[p, a, b] += x


@njit(cache=True)
def _composites(parent, jtype, axis, axis2, q, idx_q, E_tree, r_tree, mass, com, I_com):
    """Composite inertias at the configuration q, in one backward pass.

    Returns (M, H, IB, Mr, Hr, IBr, root, dmin): the composite of every body's subtree (mass,
    first moment, rotational inertia about the body origin, body coordinates); the same for its
    rigid composite (the body and the bodies welded to it by fixed joints; zero for a fixed body,
    whose inertia belongs to its ``root``, -1 for bodies welded to the base); and, for every
    moving joint, the smallest eigenvalue of S^T I_c S with I_c the subtree's composite, each row
    of S scaled by the subtree's own inertia of its kind (the trace of IB for an angular row, M
    for a linear one): 0 where the joint moves nothing with inertia along its motion, +inf for
    fixed joints.
    """
    n = parent.shape[0]
    E = np.empty((n, 3, 3))
    r = np.empty((n, 3))
    S = np.zeros((6, 6))
    cJ = np.zeros(6)
    R = np.empty((3, 3))
    R2 = np.empty((3, 3))
    qd = np.zeros(2)
    M = mass.copy()
    H = np.empty((n, 3))
    IB = np.empty((n, 3, 3))
    root = np.arange(n)
    for i in range(n):
        J.joint_kinematics(jtype[i], axis[i], axis2[i], q, idx_q[i], qd, 0, E_tree[i], r_tree[i], E[i], r[i],
                           S, cJ, R, R2)
        c = com[i]
        cc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2]
        for a in range(3):
            H[i, a] = mass[i] * c[a]
            for b in range(3):
                IB[i, a, b] = I_com[i, a, b] - mass[i] * c[a] * c[b] + (mass[i] * cc if a == b else 0.0)
        if jtype[i] == J.FIXED:
            root[i] = -1 if parent[i] < 0 else root[parent[i]]
    Mr = M.copy()
    Hr = H.copy()
    IBr = IB.copy()
    for i in range(n - 1, -1, -1):
        p = parent[i]
        if p < 0:
            continue
        _add_to_parent(E[i], r[i], M[i], H[i], IB[i], p, M, H, IB)
        if jtype[i] == J.FIXED:
            _add_to_parent(E[i], r[i], Mr[i], Hr[i], IBr[i], p, Mr, Hr, IBr)
    dmin = np.full(n, np.inf)
    I6 = np.zeros((6, 6))
    D = np.empty((6, 6))
    scale = np.empty(6)
    for i in range(n):
        if jtype[i] == J.FIXED:
            Mr[i] = 0.0
            Hr[i] = 0.0
            IBr[i] = 0.0
            continue
        nv = J.joint_kinematics(jtype[i], axis[i], axis2[i], q, idx_q[i], qd, 0, E_tree[i], r_tree[i], E[i],
                                r[i], S, cJ, R, R2)
        # I_c in [angular; linear] order
        h = H[i]
        for a in range(3):
            for b in range(3):
                I6[a, b] = IB[i, a, b]
                I6[3 + a, 3 + b] = M[i] if a == b else 0.0
        I6[0, 4] = -h[2]
        I6[0, 5] = h[1]
        I6[1, 3] = h[2]
        I6[1, 5] = -h[0]
        I6[2, 3] = -h[1]
        I6[2, 4] = h[0]
        for a in range(3):
            for b in range(3):
                I6[3 + b, a] = I6[a, 3 + b]
        tr = IB[i, 0, 0] + IB[i, 1, 1] + IB[i, 2, 2]
        zero = False
        for k in range(nv):
            ang = S[k, 0] * S[k, 0] + S[k, 1] * S[k, 1] + S[k, 2] * S[k, 2] > 0.0
            scale[k] = tr if ang else M[i]
            if not scale[k] > 0.0:
                zero = True
        if zero:
            dmin[i] = 0.0
            continue
        for k in range(nv):
            for l in range(nv):
                x = 0.0
                for a in range(6):
                    for b in range(6):
                        x += S[k, a] * I6[a, b] * S[l, b]
                D[k, l] = x / np.sqrt(scale[k] * scale[l])
        dmin[i] = D[0, 0] if nv == 1 else np.linalg.eigvalsh(D[:nv, :nv].copy())[0]
    return M, H, IB, Mr, Hr, IBr, root, dmin


def composites(model, q=None, I_com=None):
    """``_composites`` of ``model`` at q (default: the neutral configuration), with ``I_com`` in
    place of the model's if given."""
    q = model.neutral() if q is None else q
    return _composites(model.parent, model.jtype, model.axis, model.axis2, np.ascontiguousarray(q, dtype=float),
                       model.idx_q, model.E_tree, model.r_tree, model.mass, model.com,
                       model.I_com if I_com is None else I_com)


def _about_com(M, H, IB):
    """Rotational inertia about the centre of mass from (mass, first moment, inertia about the
    origin), and the scale of its rounding (the trace of IB)."""
    Mi = np.where(M > 0, M, 1.0)
    hh = np.einsum("ni,nj->nij", H, H)
    sq = np.einsum("ni,ni->n", H, H)
    Ic = IB - (sq[:, None, None] * np.eye(3) - hh) / Mi[:, None, None]
    return Ic, np.trace(IB, axis1=1, axis2=2)


def undetermined_joints(model, I_com=None):
    """Moving joints whose subtree has no inertia along the joint's motion, in any configuration.

    A joint's motion is undetermined where S^T I_c S, the composite inertia of its subtree
    projected on its motion subspace, is singular: the mass matrix then has a zero eigenvalue.
    It is tested at the neutral configuration and, for the joints that fail there, at a second,
    generic one: a composite inertia is analytic in q, so singular at a generic q means singular
    almost everywhere, while a joint singular at the neutral configuration only (a mass that
    passes through the axis there) is accepted.  Returns (bodies, subtree masses, subtree
    rotational traces) of the joints that fail both.
    """
    M, _, IB, _, _, _, _, dmin = composites(model, I_com=I_com)
    bad = np.flatnonzero(dmin <= UNDETERMINED)
    if bad.size:
        q = model.random_configuration(np.random.default_rng(12345))
        d2 = composites(model, q, I_com=I_com)[-1]
        bad = bad[d2[bad] <= UNDETERMINED]
    return bad, M[bad], np.trace(IB[bad], axis1=1, axis2=2)


def _undetermined_message(model, bad, mass, trace):
    jn, bn = model.joint_names, model.body_names
    size = model.subtree_sizes()
    items = []
    for i, m, t in zip(bad[:SHOWN], mass[:SHOWN], trace[:SHOWN]):
        i = int(i)
        k = int(size[i])
        moved = f"the {k} bod{'y' if k == 1 else 'ies'} it moves ({bn[i]}{' ...' if k > 1 else ''})"
        if m == 0.0 and t == 0.0:
            why = "have no mass and no inertia" if k > 1 else "has no mass and no inertia"
        else:
            why = f"(mass {m:.6g} kg) have no inertia along its motion" if k > 1 else \
                f"(mass {m:.6g} kg) has no inertia along its motion"
        items.append(f"joint {jn[i]!r} (body {i}, {J.NAMES[int(model.jtype[i])]}): {moved} {why}")
    more = f"; ... and {bad.size - SHOWN} more" if bad.size > SHOWN else ""
    head = ("a moving joint moves no inertia along its motion, so its acceleration is undetermined"
            if bad.size == 1 else
            f"{bad.size} moving joints move no inertia along their motion, so their accelerations are undetermined")
    return (f"{head}: " + "; ".join(items) + more
            + "; give a link of the subtree a mass and inertia, or make the joint fixed")


# ---------------------------------------------------------------------- the policy
class _Rigid:
    """The rigid bodies (a moving body and the bodies welded to it) that some bodies belong to."""

    def __init__(self, model, P, ids):
        _, _, _, Mr, Hr, IBr, self.root, _ = composites(model)
        self.name = model.body_names
        roots = np.unique(self.root[ids])
        roots = roots[roots >= 0]
        Ic, tr = _about_com(Mr[roots], Hr[roots], IBr[roots])
        ev = np.linalg.eigvalsh(Ic)
        tol = NOISE_REL * (np.maximum(ev[:, 2], 0.0) + tr) + NOISE_MODEL * max(float(P.ev[:, 2].max()), 0.0)
        c = np.where(ev < 0.0, np.maximum(ev, 0.0), ev)
        n = model.n
        self.ev = np.zeros((n, 3))
        self.negative = np.zeros(n, dtype=bool)
        self.triangle = np.zeros(n, dtype=bool)
        self.ev[roots] = ev
        self.negative[roots] = ev[:, 0] < -tol
        self.triangle[roots] = c[:, 0] + c[:, 1] < c[:, 2] * (1.0 - TRIANGLE_REL) - tol
        fixed = np.flatnonzero(self.root != np.arange(n))
        self.parts = {int(j): [] for j in roots}
        for k in fixed:
            j = int(self.root[k])
            if j in self.parts:
                self.parts[j].append(int(k))

    def members(self, j, but=None):
        ids = [j] + self.parts[j]
        shown = [f"{k} ({self.name[k]})" for k in ids if k != but]
        return ", ".join(shown[:SHOWN]) + (", ..." if len(shown) > SHOWN else "")

    def context(self, i):
        """Where body i's inertia ends up, for a warning."""
        j = int(self.root[i])
        if j < 0:
            return "; it is welded to the base and does not move"
        if not self.parts[j]:
            return ""
        whole = "a rigid body's" if not self.triangle[j] else "positive semi-definite"
        k = len(self.parts[j])
        if i == j:
            what = f"the rigid body it forms with the {k} bod{'y' if k == 1 else 'ies'} fixed to it"
        else:
            what = (f"the rigid body it is part of (body {j} ({self.name[j]}) and the "
                    f"{k} bod{'y' if k == 1 else 'ies'} fixed to it)")
        return f"; {what} is {whole} (principal moments {_fmt(self.ev[j])})"


def _negative_message(model, P, rigid, i, j):
    name = model.body_names
    if not rigid.parts[j]:
        return (f"body {i} ({name[i]}) has a negative principal moment of inertia (principal moments "
                f"{_fmt(P.ev[i])}): not a physical body, in any inertia policy")
    return (f"body {i} ({name[i]}) has a negative principal moment of inertia (principal moments {_fmt(P.ev[i])}), "
            f"and so has the rigid body it forms with the bodies fixed to it ({rigid.members(j, but=i)}: principal "
            f"moments {_fmt(rigid.ev[j])} about its centre of mass): not a physical body, in any inertia policy")


def apply_policy(model, inertia, massless):
    """Check the inertias of ``model`` under the policy ``inertia``: raise, warn, or repair.

    ``massless`` marks the bodies with zero mass and zero inertia (nothing to check per body).
    A body fixed to a moving one is judged with it: the rigid composite (a moving body and the
    bodies welded to it by fixed joints, in its frame) must be positive semi-definite; a part of
    it need not be, except under 'strict'.  Every moving joint must move some inertia along its
    motion (:func:`undetermined_joints`).  Under 'fix' ``model.I_com`` is replaced by a repaired
    copy (the caller's array is not touched).
    """
    P = Principal(model.I_com, skip=massless)
    name = model.body_names
    neg = np.flatnonzero(P.negative)
    tri = np.flatnonzero(P.triangle)
    faulty = np.union1d(neg, tri)
    if faulty.size:
        rigid = _Rigid(model, P, faulty)
        for i in neg:
            j = int(rigid.root[i])
            if j >= 0 and rigid.negative[j]:
                raise PartreeInputError(_negative_message(model, P, rigid, int(i), j))
    if inertia == "strict" and faulty.size:
        i = int(faulty[0])
        raise PartreeInputError(
            f"body {i} ({name[i]}) has an invalid rotational inertia (principal moments {_fmt(P.ev[i])}): "
            f"it must be positive semi-definite and satisfy the triangle inequality"
            + (f" ({faulty.size - 1} more bod{'y does' if faulty.size == 2 else 'ies do'} not)"
               if faulty.size > 1 else "")
            + "; inertia='warn' accepts it (a negative moment only as part of the rigid body it is fixed to), "
              "inertia='fix' balances it")
    lines = []
    for i in faulty:
        i = int(i)
        what = ("have a negative one" if P.negative[i] else "break the triangle inequality A + B >= C")
        lines.append(f"body {i} ({name[i]}): principal moments {_fmt(P.ev[i])} {what}{rigid.context(i)}")
    I_new = None
    if inertia == "fix":
        ids = np.flatnonzero(P.triangle | P.noise | P.negative)
        if ids.size:
            new = P.balanced(ids)
            low = np.flatnonzero(new[:, 0] < -P.tol[ids])
            if low.size:
                i = int(ids[low[0]])
                raise PartreeInputError(
                    f"body {i} ({name[i]}): principal moments {_fmt(P.ev[i])} have a negative sum, so no balancing "
                    f"makes them a rigid body's; inertia='warn' keeps them as part of their rigid composite")
            new = np.maximum(new, 0.0)
            V = np.linalg.eigh(P.I_com[ids])[1]
            Inew = np.einsum("nij,nj,nkj->nik", V, new, V)
            same = np.ptp(new, axis=1) == 0.0
            Inew[same] = new[same, :1, None] * np.eye(3)       # exactly isotropic where balanced
            I_new = model.I_com.copy()
            I_new[ids] = 0.5 * (Inew + Inew.transpose(0, 2, 1))
            lines = []
            for k, i in enumerate(ids):
                i = int(i)
                how = ("rounding noise clipped to zero" if P.noise[i] else "balanced (all three set to their mean)")
                lines.append(f"body {i} ({name[i]}): principal moments {_fmt(P.ev[i])} -> {_fmt(new[k])}, {how}")
    bad, mass, trace = undetermined_joints(model, I_new)
    if bad.size:
        raise PartreeInputError(_undetermined_message(model, bad, mass, trace))
    if I_new is not None:
        model.I_com = I_new
        if lines:
            k = len(lines)
            warnings.warn(f"model {model.name!r}: the inertia of {k} bod{'y was' if k == 1 else 'ies were'} changed "
                          f"(inertia='fix'):"
                          + _listing(lines), PartreeInertiaWarning, stacklevel=4)
    elif lines:
        warnings.warn(
            f"model {model.name!r}: {len(lines)} bod{'y has' if len(lines) == 1 else 'ies have'} an inertia that is "
            f"not a rigid body's; accepted as given (inertia='warn'; inertia='fix' balances them, "
            f"inertia='strict' refuses them):" + _listing(lines),
            PartreeInertiaWarning, stacklevel=4)
