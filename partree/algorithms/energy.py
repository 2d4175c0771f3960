"""Kinetic and potential energy, centre of mass and total spatial momentum."""
import numpy as np
from numba import njit

from .primitives import inertia_times
from .kinematics import forward_kinematics


@njit(cache=True)
def _kinetic(mass, com, I_com, v):
    h = np.empty(6)
    T = 0.0
    for i in range(v.shape[0]):
        inertia_times(mass[i], com[i], I_com[i], v[i], h)
        for k in range(6):
            T += v[i, k] * h[k]
    return 0.5 * T


@njit(cache=True)
def _momentum(mass, com, I_com, v, Rw, pw):
    """Sum of body momenta I v moved to world coordinates about the world origin."""
    h = np.empty(6)
    out = np.zeros(6)
    for i in range(v.shape[0]):
        inertia_times(mass[i], com[i], I_com[i], v[i], h)
        n0 = Rw[i, 0, 0] * h[0] + Rw[i, 0, 1] * h[1] + Rw[i, 0, 2] * h[2]
        n1 = Rw[i, 1, 0] * h[0] + Rw[i, 1, 1] * h[1] + Rw[i, 1, 2] * h[2]
        n2 = Rw[i, 2, 0] * h[0] + Rw[i, 2, 1] * h[1] + Rw[i, 2, 2] * h[2]
        f0 = Rw[i, 0, 0] * h[3] + Rw[i, 0, 1] * h[4] + Rw[i, 0, 2] * h[5]
        f1 = Rw[i, 1, 0] * h[3] + Rw[i, 1, 1] * h[4] + Rw[i, 1, 2] * h[5]
        f2 = Rw[i, 2, 0] * h[3] + Rw[i, 2, 1] * h[4] + Rw[i, 2, 2] * h[5]
        p = pw[i]
        out[0] += n0 + p[1] * f2 - p[2] * f1
        out[1] += n1 + p[2] * f0 - p[0] * f2
        out[2] += n2 + p[0] * f1 - p[1] * f0
        out[3] += f0
        out[4] += f1
        out[5] += f2
    return out


def kinetic_energy(model, q, qd, data=None):
    """T = 1/2 sum_i v_i^T I_i v_i."""
    kin = forward_kinematics(model, q, qd, data)
    return float(_kinetic(model.mass, model.com, model.I_com, kin.v))


def potential_energy(model, q, data=None):
    """V = -sum_i m_i g . c_i (zero at the base origin's height)."""
    kin = forward_kinematics(model, q, None, data)
    return float(-(model.mass @ kin.com_world(model)) @ model.gravity)


def energy(model, q, qd, data=None):
    """(kinetic, potential) from one kinematics pass."""
    kin = forward_kinematics(model, q, qd, data)
    T = float(_kinetic(model.mass, model.com, model.I_com, kin.v))
    V = float(-(model.mass @ kin.com_world(model)) @ model.gravity)
    return T, V


def center_of_mass(model, q, data=None):
    kin = forward_kinematics(model, q, None, data)
    return model.mass @ kin.com_world(model) / model.mass.sum()


def momentum(model, q, qd, data=None):
    """Total spatial momentum [angular about the world origin; linear], world coordinates."""
    kin = forward_kinematics(model, q, qd, data)
    return _momentum(model.mass, model.com, model.I_com, kin.v, kin.R, kin.p)
