"""Flexible bodies: the modal description of a body that deforms (floating frame of reference,
small deformation).

A flexible body keeps its body frame (the successor frame of its joint, as every body) as the
floating reference frame.  A material point at ``x`` (body coordinates) moves to
``y = x + Phi(x) eta`` where ``eta`` (m,) are the body's modal coordinates and ``Phi(x)`` (3, m)
the mode shapes' translations.  The kinetic energy of the body is the exact one of that
displacement field; it needs the mass distribution only through its first and second moments,
the *inertia invariants* held here:

=====================  =============  ========================================================
``first``              (3, m)         S = integral of rho Phi dV (first moments of the modes)
``xphi``               (m, 3, 3)      B_k = integral of rho x Phi_k^T dV
``phiphi``             (m, m, 3, 3)   C_kl = integral of rho Phi_k Phi_l^T dV
``stiffness``          (m, m)         K, symmetric positive semi-definite
``damping``            (m, m)         D, symmetric positive semi-definite (zero by default)
``stiffening``         (3, 3, m, m)   G, geometric stiffening (optional): the modal force
                                      ``(sum_ab omega_a omega_b G_ab) eta`` of the axial loads
                                      the frame's spin puts in the body
``nodes``              name -> node   where children attach or loads act: point (3,) in body
                                      coordinates, translation Phi (3, m) and rotation Psi (3, m)
                                      there
=====================  =============  ========================================================

The rigid part of the body (mass, centre of mass, inertia of the undeformed body) stays the
model's (``Model.mass``, ``com``, ``I_com``).  The modal mass is ``M_ee[k, l] = trace(C_kl)``;
it must be positive definite.  With these, the body's mass matrix over ``[omega; v; eta_dot]``
is the (6 + m) x (6 + m) matrix of :func:`body_mass_matrix`; its rigid 6 x 6 block at zero
deformation is the rigid body's spatial inertia.

A child of a flexible body attaches at one of its nodes, the one whose point is the child's
``r_tree`` (the joint placement): the child's joint frame moves with the node, translated by
``Phi_node eta`` and rotated by ``exp(Psi_node eta)`` (both in the parent's body coordinates).

Coordinates: the modal coordinates follow the joint coordinates, body by body:
``q_full = [q (model.nq); eta (n_modal)]`` and ``v_full = [qd (model.nv); eta_dot (n_modal)]``,
body i's modes at ``eta[idx_eta[i] : idx_eta[i] + nmodes[i]]``.  Per-body arrays are ragged with
offsets, as q and v are.
"""
from __future__ import annotations

import numpy as np

from .errors import PartreeInputError


class FlexibleBody:
    """The modal data of one flexible body (see the module's table).

    Parameters
    ----------
    first : float[3, m]
    xphi : float[m, 3, 3]
    phiphi : float[m, m, 3, 3]
    stiffness : float[m, m]
    damping : float[m, m], optional
    nodes : dict name -> (point (3,), Phi (3, m), Psi (3, m)), optional
    stiffening : float[3, 3, m, m], optional
        Geometric stiffening: with the body frame's angular velocity omega (body coordinates),
        the modes feel the stiffness ``sum_ab omega_a omega_b G[a, b]`` (the centrifugal
        stiffening of a spinning link).  A velocity-dependent force, not a potential one.
    name : str, optional
    """

    def __init__(self, first, xphi, phiphi, stiffness, damping=None, nodes=None, name="flexible",
                 stiffening=None):
        self.name = str(name)
        first = np.array(first, dtype=float)
        if first.ndim != 2 or first.shape[0] != 3 or first.shape[1] < 1:
            raise PartreeInputError(f"flexible body {self.name!r}: first moments must have shape (3, m) with "
                                    f"m >= 1 modes, got {first.shape}")
        m = first.shape[1]
        self.m = m

        def shaped(a, shape, what):
            a = np.array(a, dtype=float)
            if a.shape != shape:
                raise PartreeInputError(f"flexible body {self.name!r}: {what} has shape {a.shape}, expected "
                                        f"{shape} for {m} modes (from the first moments' (3, m))")
            if not np.all(np.isfinite(a)):
                raise PartreeInputError(f"flexible body {self.name!r}: {what} is not finite")
            return a

        self.first = shaped(first, (3, m), "first")
        self.xphi = shaped(xphi, (m, 3, 3), "xphi")
        self.phiphi = shaped(phiphi, (m, m, 3, 3), "phiphi")
        self.stiffness = shaped(stiffness, (m, m), "stiffness")
        self.damping = np.zeros((m, m)) if damping is None else shaped(damping, (m, m), "damping")
        self.stiffening = None if stiffening is None else shaped(stiffening, (3, 3, m, m), "stiffening")
        C = self.phiphi
        scale = max(1.0, float(np.abs(C).max()))
        if np.abs(C - C.transpose(1, 0, 3, 2)).max() > 1e-9 * scale:
            raise PartreeInputError(f"flexible body {self.name!r}: phiphi is not symmetric "
                                    f"(C_lk must be C_kl transposed)")
        for what, A in (("stiffness", self.stiffness), ("damping", self.damping)):
            s = max(1.0, float(np.abs(A).max()))
            if np.abs(A - A.T).max() > 1e-9 * s:
                raise PartreeInputError(f"flexible body {self.name!r}: {what} matrix is not symmetric")
            if np.linalg.eigvalsh(0.5 * (A + A.T)).min() < -1e-9 * s:
                raise PartreeInputError(f"flexible body {self.name!r}: {what} matrix is not positive "
                                        f"semi-definite")
        M = self.modal_mass
        w = np.linalg.eigvalsh(M)
        if not w.min() > 1e-12 * max(1.0, abs(w).max()):
            raise PartreeInputError(f"flexible body {self.name!r}: the modal mass (trace of phiphi) is not "
                                    f"positive definite (smallest eigenvalue {w.min():.3g}); every mode must "
                                    f"move some mass and no two modes the same")
        self.nodes = {}
        for key, node in (nodes or {}).items():
            try:
                point, Phi, Psi = node
            except (TypeError, ValueError):
                raise PartreeInputError(f"flexible body {self.name!r}: node {key!r} must be (point, Phi, Psi)") \
                    from None
            self.nodes[str(key)] = (shaped(point, (3,), f"node {key!r} point"),
                                    shaped(Phi, (3, m), f"node {key!r} Phi"),
                                    shaped(Psi, (3, m), f"node {key!r} Psi"))

    @property
    def modal_mass(self):
        """M_ee (m, m): trace of every C_kl."""
        return np.einsum("klii->kl", self.phiphi)

    def with_stiffness(self, K, damping=None):
        """The same body with another stiffness (and damping) matrix."""
        return FlexibleBody(self.first, self.xphi, self.phiphi, K, self.damping if damping is None else damping,
                            self.nodes, self.name, self.stiffening)

    def without_stiffening(self):
        """The same body without its geometric stiffening."""
        return FlexibleBody(self.first, self.xphi, self.phiphi, self.stiffness, self.damping, self.nodes, self.name)

    def frequencies(self):
        """Natural frequencies (rad/s) of the body clamped at its frame: sqrt of the generalized
        eigenvalues of (K, M_ee), ascending."""
        from scipy.linalg import eigh
        w = eigh(self.stiffness, self.modal_mass, eigvals_only=True)
        return np.sqrt(np.maximum(w, 0.0))


class FlexibleBodies:
    """The flexible bodies of a model, as ragged per-body arrays (built by :meth:`Model.with_flexible`).

    Attributes
    ----------
    nmodes : int[n]      number of modes of every body (0 for rigid bodies)
    idx_eta : int[n]     offset of every body's modes in eta
    n_modal : int        total number of modal coordinates
    bodies : dict        body index -> :class:`FlexibleBody`
    node_of : dict       child body index -> node name on its (flexible) parent
    """

    def __init__(self, model, bodies):
        n = model.n
        self.bodies = {}
        for i, body in dict(bodies).items():
            i = int(i)
            if not 0 <= i < n:
                raise PartreeInputError(f"flexible body index {i} is not a body of the model (n = {n})")
            if not isinstance(body, FlexibleBody):
                raise PartreeInputError(f"flexible body {i}: expected a partree.flexible.FlexibleBody, got "
                                        f"{type(body).__name__}")
            self.bodies[i] = body
        self.nmodes = np.zeros(n, dtype=np.int64)
        for i, body in self.bodies.items():
            self.nmodes[i] = body.m
        self.idx_eta = np.concatenate(([0], np.cumsum(self.nmodes)[:-1])).astype(np.int64)
        self.n_modal = int(self.nmodes.sum())
        self.node_of = {}
        self._parent = model.parent
        for c in range(n):
            p = int(model.parent[c])
            if p < 0 or p not in self.bodies:
                continue
            body = self.bodies[p]
            rt = model.r_tree[c]
            scale = max(1.0, float(np.abs(rt).max()))
            found = [k for k, (pt, _, _) in body.nodes.items() if np.abs(pt - rt).max() <= 1e-9 * scale]
            if not found:
                raise PartreeInputError(
                    f"body {c} ({model.body_names[c]}) is attached to flexible body {p} at {rt.tolist()}, "
                    f"where that body has no node (nodes: {', '.join(body.nodes) or 'none'}); a child "
                    f"attaches at a node whose point is its joint placement r_tree")
            self.node_of[c] = found[0]
        for i, body in self.bodies.items():
            Mb = body_mass_matrix(model.mass[i], model.com[i], model.I_com[i], body, np.zeros(body.m))
            w, V = np.linalg.eigh(Mb)
            tol = 1e-12 * max(1.0, w.max())
            # positive semi-definite, and positive along every motion of the modes (a rigid body
            # may have no inertia about an axis, a line beam about its own)
            null = V[:, w <= tol]
            if w.min() < -tol or (null.size and np.abs(null[6:]).max() > 1e-6):
                raise PartreeInputError(
                    f"flexible body {i} ({model.body_names[i]}): its (6 + m) x (6 + m) mass matrix is not "
                    f"positive definite along its modes (smallest eigenvalue {w.min():.3g}); the modal data does not fit "
                    f"the body's mass and inertia")

    def node(self, child):
        """(point, Phi, Psi) of the node where ``child`` attaches to its flexible parent, or None
        when its parent is rigid."""
        c = int(child)
        if c not in self.node_of:
            return None
        return self.bodies[self._parent[c]].nodes[self.node_of[c]]


#: what refuses a model with flexible bodies (:func:`unsupported`)
RIGID_ALGORITHMS = ("partree's rigid-body algorithms (aba, rnea, crba, cfa, hybrid_dynamics, constrained_dynamics, "
                    "kinematics, energy, momentum, their batches)")

#: what handles a model with flexible bodies
FLEXIBLE_FUNCTIONS = ("partree.algorithms.flexible_dynamics: flexible_aba (forward dynamics), flexible_rnea "
                      "(inverse dynamics), flexible_crba (mass matrix), flexible_hybrid_dynamics, flexible_energy; "
                      "partree.algorithms.flexible_cfa: flexible_cfa, flexible_hybrid_forces (joint reaction forces)")


def unsupported(model, what):
    """The :class:`~partree.errors.PartreeInputError` of ``what`` (a function or engine that
    computes rigid bodies only) called on ``model``, which has flexible bodies."""
    fl = model.flexible
    return PartreeInputError(
        f"model {model.name!r} has {len(fl.bodies)} flexible {'body' if len(fl.bodies) == 1 else 'bodies'} "
        f"({fl.n_modal} modal coordinates), which {what} cannot take: it computes rigid bodies only and would "
        f"ignore the modes (the rigid skeleton's answer); use {FLEXIBLE_FUNCTIONS} (partree.simulate with "
        f"backend='serial' runs them), or model.with_flexible({{}}) for the rigid skeleton on purpose")


def refuse(model, what):
    """Raise :func:`unsupported` when ``model`` has flexible bodies; nothing otherwise."""
    if getattr(model, "flexible", None) is not None:
        raise unsupported(model, what)


def second_moment(mass, com, I_com):
    """A = integral of rho x x^T dV of a rigid body from its mass, centre of mass and inertia about it."""
    c = np.asarray(com, dtype=float)
    Io = np.asarray(I_com, dtype=float) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return 0.5 * np.trace(Io) * np.eye(3) - Io


def _skew(p):
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


def axial(M):
    """integral of a x b from M = integral of a b^T."""
    return np.array([M[1, 2] - M[2, 1], M[2, 0] - M[0, 2], M[0, 1] - M[1, 0]])


def deformed_moments(mass, com, I_com, body, eta):
    """(s, Y, N) of the deformed body: s = integral rho y (3,), Y = integral rho y y^T (3, 3),
    N[k] = integral rho y Phi_k^T (m, 3, 3), with y = x + Phi eta."""
    s = mass * np.asarray(com, dtype=float) + body.first @ eta
    N = body.xphi + np.einsum("l,lkij->kij", eta, body.phiphi)
    A = second_moment(mass, com, I_com)
    Bs = np.einsum("k,kij->ij", eta, body.xphi)
    Y = A + Bs + Bs.T + np.einsum("k,l,klij->ij", eta, eta, body.phiphi)
    return s, Y, N


def body_mass_matrix(mass, com, I_com, body, eta):
    """The (6 + m) x (6 + m) mass matrix of a flexible body over [omega; v; eta_dot] (body
    coordinates) at the deformation eta::

        [[J(eta),  s~,     G(eta)],
         [s~^T,    m 1,    S     ],
         [G^T,     S^T,    M_ee  ]]

    J = trace(Y) 1 - Y the rotational inertia about the body origin, s the first moment, G[:, k] =
    integral rho y x Phi_k, S the modes' first moments, M_ee the modal mass."""
    m = body.m
    s, Y, N = deformed_moments(mass, com, I_com, body, eta)
    M = np.zeros((6 + m, 6 + m))
    M[:3, :3] = np.trace(Y) * np.eye(3) - Y
    M[:3, 3:6] = _skew(s)
    M[3:6, :3] = _skew(s).T
    M[3:6, 3:6] = mass * np.eye(3)
    G = np.stack([axial(N[k]) for k in range(m)], axis=1)
    M[:3, 6:] = G
    M[6:, :3] = G.T
    M[3:6, 6:] = body.first
    M[6:, 3:6] = body.first.T
    M[6:, 6:] = body.modal_mass
    return M
