"""The example systems of the source papers (``/work/shared/seeds``).

- ``space_robot()``: seed 000's free-floating two-arm space robot (hexagonal-prism body);
- ``cardan_chain(n)``: seed 001's chain of n bodies joined by 2-DOF Cardan joints;
- ``three_arm_manipulator()``: seed 002's three-arm tree manipulator (10 links), with
  ``three_arm_inputs()`` for the paper's active/passive joint inputs.

Where a paper gives a number it is used as given; where it leaves one out, the value chosen here
is listed in the generator's docstring, marked "chosen", with the reason.  All three models are
small, so they are built by plain code and always validated.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import joints as J
from ..model import Model
from ..spatial import rotz
from .generators import chain, cylinder_inertia

_X, _Y, _Z = np.eye(3)


def hexagonal_prism_inertia(mass, edge, height):
    """Inertia about the centre of mass of a uniform solid regular hexagonal prism whose axis is z.

    For a regular hexagon of edge a the polar second moment per unit area is 5 a^2 / 12, so
    I_zz = 5 m a^2 / 12 and I_xx = I_yy = m (5 a^2 / 24 + h^2 / 12) (the hexagon's in-plane
    second moments are isotropic).  Returns a 3x3 array.
    """
    a2, h2 = float(edge) ** 2, float(height) ** 2
    return np.diag([mass * (5 * a2 / 24 + h2 / 12), mass * (5 * a2 / 24 + h2 / 12), 5 * mass * a2 / 12])


def hexagonal_prism_volume(edge, height):
    """Volume of a regular hexagonal prism: (3 sqrt(3) / 2) a^2 h."""
    return 1.5 * np.sqrt(3.0) * float(edge) ** 2 * float(height)


# -------------------------------------------------------------------------------------------------
# seed 000: floating two-arm space robot
# -------------------------------------------------------------------------------------------------
SPACE_ROBOT_BASE_HEIGHT = 1.2        # m, paper
SPACE_ROBOT_BASE_EDGE = 0.8          # m, paper
SPACE_ROBOT_BASE_DENSITY = 200.0     # kg/m^3, chosen (mean density of a spacecraft bus)


def space_robot(link_lengths=(0.5, 1.5, 1.5), link_masses=(10.0, 15.0, 15.0), link_radius=0.06,
                base_density=SPACE_ROBOT_BASE_DENSITY, base_mass=None, gravity=(0.0, 0.0, 0.0),
                name="space_robot"):
    """Seed 000's rigid, free-floating space robot: a hexagonal-prism body with two identical arms.

    Topology (regular numbering): body 0 is the base, on a free joint named ``'base'`` (q = base
    position and quaternion xyzw, base frame at the base's centre of mass); arm k (k = 1, 2) is a
    chain of revolute joints named ``'L<k>1'``, ``'L<k>2'``, ... after the paper's links: the joint
    named ``'L11'`` is where link L11 meets its inner body (the base), the one the paper reports the
    constraint force of.  Body names equal the joint names.  Arm 1 is bodies 1..m, arm 2 bodies
    m+1..2m (m links per arm); the base is the one node body.

    Each link lies along its own x axis (joint at the origin, CoM at mid-link, next joint at the
    far end).  At q = neutral both arms stretch straight out of the base, arm 1 along +x and arm 2
    along -x.

    ==================================  ====================================================  ======
    parameter                           value                                                 source
    ==================================  ====================================================  ======
    base shape                          regular hexagonal prism, axis z, height 1.2 m,        paper
                                        base edge 0.8 m
    base frame                          at the base's centre of mass                          paper
    base joint                          free (the system floats)                              paper
    arms                                two, identical, torque-driven revolute joints         paper
    link labels                         L11, L12, ... (arm 1), L21, L22, ... (arm 2)          paper
    base mass                           mean density 200 kg/m^3 x volume 1.995 m^3            chosen
                                        = 399.0 kg (a typical spacecraft-bus density;
                                        ``base_density`` or ``base_mass`` to change)
    base inertia                        uniform solid prism:                                  chosen
                                        diag(m(5a^2/24 + h^2/12), same, 5ma^2/12)
                                        = diag(101.1, 101.1, 106.4) kg m^2
    links per arm                       3 (shoulder link, upper arm, forearm)                 chosen
    joint axes (link frame)             L_k1 about z (shoulder yaw, parallel to the prism     chosen
                                        axis), L_k2 and L_k3 about y (shoulder and elbow
                                        pitch); further links (if more lengths are given)
                                        about y
    link lengths                        0.5, 1.5, 1.5 m                                       chosen
    link masses                         10, 15, 15 kg                                         chosen
    link shape                          uniform solid cylinders of radius 0.06 m              chosen
    arm mounts                          centres of two opposite side faces, at                chosen
                                        (+-0.6928, 0, 0) m (the apothem a sqrt(3)/2),
                                        arms pointing outward along the face normals
    gravity                             0 (orbit)                                             chosen
    ==================================  ====================================================  ======
    """
    lengths = np.asarray(link_lengths, dtype=float)
    masses = np.asarray(link_masses, dtype=float)
    if lengths.ndim != 1 or lengths.size < 1 or masses.shape != lengths.shape:
        raise ValueError("link_lengths and link_masses must be equal-length sequences (one per link of an arm)")
    m_links = lengths.size
    h, a = SPACE_ROBOT_BASE_HEIGHT, SPACE_ROBOT_BASE_EDGE
    mb = float(base_mass) if base_mass is not None else float(base_density) * hexagonal_prism_volume(a, h)
    apothem = a * np.sqrt(3.0) / 2.0

    n = 1 + 2 * m_links
    parent = np.empty(n, dtype=np.int64)
    jtype = np.full(n, J.REVOLUTE, dtype=np.int8)
    axis = np.zeros((n, 3))
    E_tree = np.tile(np.eye(3), (n, 1, 1))
    r_tree = np.zeros((n, 3))
    mass = np.empty(n)
    com = np.zeros((n, 3))
    I_com = np.empty((n, 3, 3))
    names = ["base"]

    parent[0] = -1
    jtype[0] = J.FREE
    mass[0] = mb
    I_com[0] = hexagonal_prism_inertia(mb, a, h)

    link_I = cylinder_inertia(masses, lengths, link_radius)
    for k, (sign, turn) in enumerate(((1.0, 0.0), (-1.0, np.pi))):
        first = 1 + k * m_links
        ids = np.arange(first, first + m_links)
        parent[ids] = np.concatenate(([0], ids[:-1]))
        axis[ids] = _Y
        axis[first] = _Z
        E_tree[first] = rotz(turn)                       # arm frame: x along the outward normal
        r_tree[first] = (sign * apothem, 0.0, 0.0)
        r_tree[ids[1:], 0] = lengths[:-1]
        mass[ids] = masses
        com[ids, 0] = 0.5 * lengths
        I_com[ids] = link_I
        names += [f"L{k + 1}{j + 1}" for j in range(m_links)]
    return Model(parent, jtype, axis, E_tree, r_tree, mass, com, I_com, gravity=gravity,
                 joint_names=names, body_names=names, name=name)


# -------------------------------------------------------------------------------------------------
# seed 001: chain of bodies with 2-DOF Cardan joints
# -------------------------------------------------------------------------------------------------
def cardan_chain(n=10, length=1.0, mass=1.0, radius=0.05, gravity=(0.0, 0.0, -9.81), name=None):
    """Seed 001's benchmark system: a chain of n rigid bodies joined by 2-DOF Cardan joints.

    The paper's body "0" (whose motion is given) is the fixed base here; body 1 of the paper is
    body 0 of the model, and the paper's joint i (between body i and body i - 1) is the joint
    named ``'j<i-1>'``.  Every joint is a ``universal`` joint (nq = nv = 2 per body, so
    nq = nv = 2 n).

    ========================  ==========================================================  ======
    parameter                 value                                                       source
    ========================  ==========================================================  ======
    topology                  a simple chain, body 1 on the given-motion body 0           paper
    joints                    2-DOF Cardan (universal) joints                             paper
    number of bodies          n (the benchmark uses 5 .. 50)                              paper
    body 0's motion           none (held fixed)                                           chosen
    bodies                    identical uniform solid cylinders along x, length 1 m,      chosen
                              mass 1 kg, radius 0.05 m
    Cardan axes               first about y, then about the rotated z (a Hooke joint      chosen
                              between shafts along x), joint at the body's inner end
    gravity                   (0, 0, -9.81) m/s^2 (the chain starts horizontal, along x)  chosen
    ========================  ==========================================================  ======
    """
    n = int(n)
    return chain(n, joint="universal", length=length, mass=mass, radius=radius, gravity=gravity,
                 name=name or f"cardan_chain(n={n})", validate=True)


# -------------------------------------------------------------------------------------------------
# seed 002: three-arm tree manipulator with active and passive joints
# -------------------------------------------------------------------------------------------------
THREE_ARM_LINK_MASS = 1.0                              # kg, paper
THREE_ARM_LINK_LENGTH = 0.4                            # m, paper
THREE_ARM_INERTIA_AT_JOINT = (0.1, 0.13, 0.13)         # kg m^2 about the inner joint, paper
THREE_ARM_ARMS = (4, 3, 3)                             # links per arm: joints 1-4, 5-7, 8-10 (inferred)
THREE_ARM_LINK_EI = 500.0                              # N m^2, bending stiffness of a flexible link (chosen)


def three_arm_link_inertia(mass=THREE_ARM_LINK_MASS, length=THREE_ARM_LINK_LENGTH,
                           inertia_at_joint=THREE_ARM_INERTIA_AT_JOINT):
    """(com, I_com) of the seed-002 link: the paper's inertia about the inner joint moved to the
    centre of mass at mid-link, I_com = I_joint - m (c.c 1 - c c^T) with c = (l/2, 0, 0)."""
    c = np.array([0.5 * length, 0.0, 0.0])
    I_joint = np.diag(np.asarray(inertia_at_joint, dtype=float))
    return c, I_joint - mass * (c @ c * np.eye(3) - np.outer(c, c))


def three_arm_manipulator(arms=THREE_ARM_ARMS, floating_base=False, base_mass=1.0,
                          base_inertia=THREE_ARM_INERTIA_AT_JOINT, mount_radius=0.2,
                          gravity=(0.0, 0.0, 0.0), name="three_arm_manipulator", flexible=False, modes=6,
                          EI=THREE_ARM_LINK_EI):
    """Seed 002's test model: a tree manipulator with three arms on a base, 10 rigid links.

    Joints are named after the paper's numbers, ``'J1'`` .. ``'J10'``; joint Jk is link k's inner
    joint (the paper: "joint k is the inner joint of arm link k").  Links are numbered arm by arm,
    base to tip, as the paper numbers bodies "in the order of the chains".  With the default
    ``arms=(4, 3, 3)``: arm 1 = J1-J4 (bodies 0-3), arm 2 = J5-J7 (bodies 4-6), arm 3 = J8-J10
    (bodies 7-9); body names are ``'arm<a>_link<j>'``.  ``three_arm_inputs()`` gives the paper's
    joint inputs.

    With ``floating_base=True`` the base is a body of its own (body 0, free joint ``'base'``; the
    links become bodies 1-10): the paper's count "16 rigid DOF" (6 + 10) suggests a floating base,
    while its later count "60 DOF with 5 modes per link" (10 + 50) suggests a fixed one, so both
    are offered and the fixed base (the 10 joints alone, every one with an input) is the default.

    Each link lies along its own x axis: joint at the origin, CoM at mid-link, next joint at the
    far end; at q = 0 the three arms stretch straight out of the base, horizontally, 120 deg apart.

    ================================  ======================================================  =======
    parameter                         value                                                   source
    ================================  ======================================================  =======
    links                             10, rigid by default; with ``flexible=True`` each       paper /
                                      link is a flexible body with ``modes`` (6) clamped-     brief
                                      free bending modes of a uniform Euler-Bernoulli beam
                                      (``partree.models.beam``; modes in both planes, 3 +
                                      3), its rigid mass and inertia the paper's
    link bending stiffness EI         500 N m^2 (flexible links; not in the paper)            chosen
    link mass per length              2.5 kg/m (1 kg over 0.4 m, uniform; flexible links)     derived
    joints                            1-DOF revolute, ideal and rigid                         paper
    link mass                         1 kg                                                    paper
    inertia about the inner joint     diag(0.1, 0.13, 0.13) kg m^2                            paper
    link length                       0.4 m                                                   paper
    link CoM                          mid-link, (0.2, 0, 0) m                                 chosen
    inertia about the CoM             diag(0.1, 0.09, 0.09) kg m^2 (parallel-axis shift)      derived
    topology                          three arms on the base, links numbered arm by arm:      chosen
                                      (4, 3, 3) links = J1-J4, J5-J7, J8-J10 (inferred from   (paper
                                      the paper's numbering rule and its plots of joints      numbering)
                                      3, 5, 8, one per arm)
    joint axes (link frame)           first joint of each arm about z (yaw), the others       chosen
                                      about y (pitch)
    arm mounts                        on the base at radius 0.2 m, 0/120/240 deg about z      chosen
    base                              fixed (default) or free-floating with mass 1 kg and     chosen
                                      I_com = diag(0.1, 0.13, 0.13) kg m^2 (the paper's
                                      "every body" values)
    gravity                           0 (a space manipulator)                                 chosen
    inputs                            torque 10 sin t N m on J2, J3, J4, J7, J8, J9, J10;     paper
                                      motion 3 sin t deg on J1, J5, J6; initial joint
                                      velocities 0 (``three_arm_inputs``)
    ================================  ======================================================  =======
    """
    arms = tuple(int(a) for a in arms)
    if len(arms) < 1 or min(arms) < 1:
        raise ValueError(f"arms must be positive link counts, got {arms}")
    n_links = sum(arms)
    off = 1 if floating_base else 0
    n = n_links + off
    parent = np.empty(n, dtype=np.int64)
    jtype = np.full(n, J.REVOLUTE, dtype=np.int8)
    axis = np.tile(_Y, (n, 1))
    E_tree = np.tile(np.eye(3), (n, 1, 1))
    r_tree = np.zeros((n, 3))
    mass = np.full(n, THREE_ARM_LINK_MASS)
    c, Ic = three_arm_link_inertia()
    com = np.tile(c, (n, 1))
    I_com = np.tile(Ic, (n, 1, 1))
    joint_names = [f"J{k + 1}" for k in range(n_links)]
    body_names = [f"arm{a + 1}_link{j + 1}" for a, m in enumerate(arms) for j in range(m)]
    root = -1
    if floating_base:
        parent[0] = -1
        jtype[0] = J.FREE
        axis[0] = 0.0
        mass[0] = float(base_mass)
        com[0] = 0.0
        I_com[0] = np.diag(np.asarray(base_inertia, dtype=float))
        joint_names.insert(0, "base")
        body_names.insert(0, "base")
        root = 0
    first = off
    for a, m in enumerate(arms):
        ids = np.arange(first, first + m)
        parent[ids] = np.concatenate(([root], ids[:-1]))
        phi = 2.0 * np.pi * a / len(arms)
        E_tree[first] = rotz(phi)
        r_tree[first] = (mount_radius * np.cos(phi), mount_radius * np.sin(phi), 0.0)
        axis[first] = _Z
        r_tree[ids[1:], 0] = THREE_ARM_LINK_LENGTH
        first += m
    model = Model(parent, jtype, axis, E_tree, r_tree, mass, com, I_com, gravity=gravity,
                  joint_names=joint_names, body_names=body_names, name=name)
    if flexible:
        from .beam import euler_bernoulli_beam
        body = euler_bernoulli_beam(THREE_ARM_LINK_LENGTH, float(EI), THREE_ARM_LINK_MASS / THREE_ARM_LINK_LENGTH,
                                    int(modes), bending="yz", name="link")[0]
        model = model.with_flexible({i: body for i in range(off, n)})
    return model


@dataclass(frozen=True)
class HybridInputs:
    """Joint inputs of a hybrid-dynamics run (seed 002).

    Passive joints get a given torque tau(t) = torque_amplitude sin(omega t) (their accelerations
    are unknown); active joints get a given motion q(t) = motion_amplitude sin(omega t) (their
    torques are unknown).  Joints are named; ``*_dofs(model)`` turn names into velocity indices.
    """

    active: tuple          # names of the joints with prescribed motion
    passive: tuple         # names of the joints with prescribed torque
    torque_amplitude: float = 10.0                   # N m
    motion_amplitude: float = float(np.deg2rad(3.0))  # rad
    omega: float = 1.0     # rad/s

    def torque(self, t):
        """The passive joints' torque at time t (the same for each)."""
        return self.torque_amplitude * np.sin(self.omega * t)

    def motion(self, t):
        """(q, qd, qdd) of every active joint at time t."""
        A, w = self.motion_amplitude, self.omega
        return A * np.sin(w * t), A * w * np.cos(w * t), -A * w * w * np.sin(w * t)

    def active_dofs(self, model):
        return np.array([model.v_slice(j).start for j in self.active], dtype=np.int64)

    def passive_dofs(self, model):
        return np.array([model.v_slice(j).start for j in self.passive], dtype=np.int64)

    def tau(self, model, t):
        """An nv vector: the passive joints' torques, zero elsewhere (active joints' torques are
        unknowns of the hybrid problem)."""
        tau = np.zeros(model.nv)
        tau[self.passive_dofs(model)] = self.torque(t)
        return tau

    def prescribed(self, model, t):
        """(dofs, q, qd, qdd) of the active joints at time t (arrays over the active joints)."""
        q, qd, qdd = self.motion(t)
        k = len(self.active)
        return self.active_dofs(model), np.full(k, q), np.full(k, qd), np.full(k, qdd)

    def initial_state(self, model, consistent=False):
        """(q0, qd0) at t = 0: neutral configuration and zero joint velocities, as in the paper.

        The prescribed motion's velocity at t = 0 is A omega (3 deg/s), not 0; with
        ``consistent=True`` the active joints start with it instead.
        """
        q0 = model.neutral()
        qd0 = np.zeros(model.nv)
        if consistent:
            dofs, _, qd, _ = self.prescribed(model, 0.0)
            qd0[dofs] = qd
        return q0, qd0


def three_arm_inputs():
    """Seed 002's inputs: motion 3 sin t deg on joints J1, J5, J6 (active), torque 10 sin t N m on
    J2, J3, J4, J7, J8, J9, J10 (passive); initial joint velocities 0."""
    return HybridInputs(active=("J1", "J5", "J6"), passive=("J2", "J3", "J4", "J7", "J8", "J9", "J10"),
                        torque_amplitude=10.0, motion_amplitude=float(np.deg2rad(3.0)), omega=1.0)


__all__ = ["space_robot", "cardan_chain", "three_arm_manipulator", "three_arm_inputs", "three_arm_link_inertia",
           "HybridInputs", "hexagonal_prism_inertia", "hexagonal_prism_volume"]
