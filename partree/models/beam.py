"""A uniform Euler-Bernoulli beam as a flexible link: clamped-free bending modes.

The beam lies along its body x axis from the body origin (the clamped end, the joint) to
``x = length`` (the free end, the node ``"tip"``).  Its bending modes are the clamped-free modes
of a uniform Euler-Bernoulli beam, in the x-y plane (``bending="y"``), the x-z plane
(``bending="z"``) or both (``"yz"``: the modes of the two planes by ascending frequency, y first
at equal frequency).  Axial and torsional deformation, shear and the sections' rotary inertia are
not modelled (the sections' polar inertia enters the rigid inertia only).

Mode k (by ascending frequency in its plane) has ``beta_k L`` the k-th root of
``cos(bL) cosh(bL) = -1`` (1.8751, 4.6941, 7.8548, 10.9955, ...), frequency
``omega_k = (beta_k L)^2 sqrt(EI / (rho A L^4))`` and shape
``phi(x) = cosh bx - cos bx - sigma (sinh bx - sin bx)``, written here in a form that keeps its
digits at high modes and scaled so that ``phi(L) = 1``: the modal coordinate is the tip
displacement of its mode.  The inertia invariants, the modal mass and the stiffness
``K_kl = integral EI phi_k'' phi_l''`` are computed by Gauss-Legendre quadrature (64 panels of 8
points), so the clamped frequencies of (K, M_ee) reproduce the analytic ones.
"""
from __future__ import annotations

import numpy as np

from ..errors import PartreeInputError
from ..flexible import FlexibleBody

#: quadrature: panels and Gauss points per panel
PANELS, POINTS = 64, 8


def clamped_free_roots(m):
    """The first ``m`` roots of cos(b) cosh(b) = -1 (beta L of the clamped-free modes)."""
    from scipy.optimize import brentq

    out = np.empty(m)
    for k in range(m):
        lo, hi = (k + 0.5) * np.pi - 0.5 * np.pi + 1e-9, (k + 0.5) * np.pi + 0.5 * np.pi - 1e-9
        f = lambda b: np.cos(b) + 1.0 / np.cosh(b)      # noqa: E731  (cos cosh + 1 over cosh)
        lo = max(lo, 1.0)
        out[k] = brentq(f, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=200)
    return out


def mode_shape(bL, xi, derivative=0):
    """The clamped-free shape (``derivative`` 0, 1, 2: phi, phi', phi'' per unit length of the
    dimensionless coordinate) of the mode with root ``bL`` at ``xi = x / L`` in [0, 1], scaled
    to 1 at the tip."""
    z = bL * np.asarray(xi, dtype=float)
    sh, ch = np.sinh(bL), np.cosh(bL)
    s, c = np.sin(bL), np.cos(bL)
    sigma = (ch + c) / (sh + s)
    one_minus = (-np.exp(-bL) + s - c) / (sh + s)          # 1 - sigma without cancellation
    em, ep = np.exp(-z), np.exp(z - bL)                   # e^z (1 - sigma) = e^(z - bL) (e^bL (1 - sigma))
    big = np.exp(bL) * one_minus

    def shape(z, zz_em, zz_ep, d):
        # cosh z - sigma sinh z = 0.5 (1 + sigma) e^-z + 0.5 (1 - sigma) e^z; derivatives alternate signs
        hyp = 0.5 * (1 + sigma) * zz_em * (-1) ** d + 0.5 * big * zz_ep
        trig = [-np.cos(z) + sigma * np.sin(z), np.sin(z) + sigma * np.cos(z),
                np.cos(z) - sigma * np.sin(z)][d]
        return hyp + trig

    tip = shape(bL, np.exp(-bL), 1.0, 0)
    return shape(z, em, ep, derivative) * bL ** derivative / tip


def euler_bernoulli_beam(length, EI, rhoA, modes, bending="y", polar=0.0, damping_ratio=0.0, EI_z=None,
                         name="beam", stiffening=False):
    """A uniform clamped-free beam link.

    Parameters
    ----------
    length, EI, rhoA : float
        Length (m), bending stiffness E I (N m^2) and mass per length rho A (kg/m).  ``EI_z``:
        the bending stiffness in the x-z plane where it differs from ``EI`` (x-y plane).
    modes : int
        Number of modes (in all planes together).
    bending : {'y', 'z', 'yz'}
        The planes of the modes.
    polar : float
        Polar mass moment of inertia per length (kg m), rho (I_y + I_z), for the rigid inertia
        about the beam's axis.
    damping_ratio : float
        Modal damping ratio of every mode.
    stiffening : bool
        Add the geometric stiffening of the centrifugal axial force: a spin omega about the
        axes across the beam pulls the section at x with N(x) = (omega_y^2 + omega_z^2) rho A
        (L^2 - x^2) / 2, and the modes feel ``integral N phi_k' phi_l' dx``.  Without it a
        linear modal beam spun past its first bending frequency diverges.

    Returns
    -------
    (FlexibleBody, mass, com, I_com)
        The modal data (node ``"tip"`` at (length, 0, 0)) and the rigid body data of the
        undeformed beam for the model's arrays.
    """
    L, EI, rhoA = float(length), float(EI), float(rhoA)
    EIz = EI if EI_z is None else float(EI_z)
    if not (L > 0 and EI > 0 and EIz > 0 and rhoA > 0):
        raise PartreeInputError(f"beam {name!r}: length, EI and rhoA must be positive "
                                f"(got {L}, {EI}, {rhoA})")
    modes = int(modes)
    if modes < 1:
        raise PartreeInputError(f"beam {name!r}: needs at least one mode, got {modes}")
    if bending not in ("y", "z", "yz"):
        raise PartreeInputError(f"beam {name!r}: bending must be 'y', 'z' or 'yz', got {bending!r}")
    roots = clamped_free_roots(modes)
    # (plane, root index, frequency) by ascending frequency
    cand = []
    for plane in bending:
        stiff = EI if plane == "y" else EIz
        for k in range(modes):
            cand.append((roots[k] ** 2 * np.sqrt(stiff / (rhoA * L ** 4)), plane, k, stiff))
    cand.sort(key=lambda t: (t[0], t[1]))
    cand = cand[:modes]
    # quadrature nodes on [0, 1]
    g, w = np.polynomial.legendre.leggauss(POINTS)
    edges = np.linspace(0.0, 1.0, PANELS + 1)
    xi = (0.5 * (edges[:-1, None] + edges[1:, None]) + 0.5 * np.diff(edges)[:, None] * g[None, :]).ravel()
    wq = (0.5 * np.diff(edges)[:, None] * w[None, :]).ravel()
    x = L * xi
    wx = L * wq
    m = len(cand)
    phi = np.empty((m, xi.size))
    curv = np.empty((m, xi.size))
    Phi = np.zeros((3, m))        # at the tip
    Psi = np.zeros((3, m))
    dirs = np.zeros((m, 3))
    EIk = np.empty(m)
    for j, (_, plane, k, stiff) in enumerate(cand):
        phi[j] = mode_shape(roots[k], xi)
        curv[j] = mode_shape(roots[k], xi, 2) / L ** 2
        slope = mode_shape(roots[k], 1.0, 1) / L
        EIk[j] = stiff
        if plane == "y":
            dirs[j] = (0.0, 1.0, 0.0)
            Psi[2, j] = slope          # v' rotates the section about z
        else:
            dirs[j] = (0.0, 0.0, 1.0)
            Psi[1, j] = -slope         # w' rotates the section about -y
        Phi[:, j] = dirs[j]
    first = (dirs.T * (phi @ wx) * rhoA)                                   # (3, m)
    xphi = np.zeros((m, 3, 3))
    xphi[:, 0, :] = (rhoA * (phi @ (wx * x)))[:, None] * dirs               # x Phi_k^T: row x, column dir
    pp = rhoA * (phi * wx) @ phi.T                                         # integral rhoA phi_k phi_l
    phiphi = np.einsum("kl,ki,lj->klij", pp, dirs, dirs)
    same = dirs @ dirs.T
    K = np.sqrt(EIk[:, None] * EIk[None, :]) * ((curv * wx) @ curv.T) * same
    K = 0.5 * (K + K.T)
    Mee = np.einsum("klii->kl", phiphi)
    omega = np.sqrt(np.maximum(np.diag(K) / np.diag(Mee), 0.0))
    D = np.diag(2.0 * float(damping_ratio) * omega * np.diag(Mee))
    G = None
    if stiffening:
        slopes = np.stack([mode_shape(roots[k], xi, 1) / L for (_, _, k, _) in cand])
        Ks = ((slopes * (wx * rhoA * 0.5 * (L ** 2 - x ** 2))) @ slopes.T) * same
        G = np.zeros((3, 3, m, m))
        G[1, 1] = Ks
        G[2, 2] = Ks
    body = FlexibleBody(first, xphi, phiphi, K, D, nodes={"tip": (np.array([L, 0.0, 0.0]), Phi, Psi)}, name=name,
                        stiffening=G)
    mass = rhoA * L
    com = np.array([0.5 * L, 0.0, 0.0])
    It = mass * L ** 2 / 12.0
    I_com = np.diag([float(polar) * L, It, It])
    return body, mass, com, I_com


def beam_frequencies(length, EI, rhoA, modes):
    """The analytic clamped-free bending frequencies (rad/s) of one plane."""
    return clamped_free_roots(modes) ** 2 * np.sqrt(EI / (rhoA * length ** 4))
