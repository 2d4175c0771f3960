"""The bridge to Pinocchio (an optional dependency): partree Model <-> ``pinocchio.Model``, and
the conversion of q and v between the two.

``to_pinocchio(model)`` builds Pinocchio's twin of a partree model, and ``from_pinocchio(pin_model)``
builds partree's twin of any Pinocchio model: one from ``buildModelFromUrdf``,
``buildModelFromMJCF``, ``buildModelFromXML`` or built by hand.  Both keep the joint names, so
:class:`PinocchioMap` can match the joints of the two models by name and convert q and v.
``to_pinocchio`` adds the joints depth first (:func:`depth_first_order`), as Pinocchio's
algorithms need; partree numbers bodies parent before child but not necessarily depth first, so
the two joint orders (and q and v) can differ by a permutation, which :class:`PinocchioMap`
applies.

Frames agree: a partree body frame is its Pinocchio joint's frame, ``X_tree`` is Pinocchio's
``jointPlacements`` (E_tree = R^T), and Pinocchio's ``data.f[j]`` is partree's joint wrench with
the halves swapped ([f; n] versus [n; f], :func:`pin_wrench`).

Loops are Pinocchio's rigid constraints (``pinocchio.RigidConstraintModel``): a 'spherical' loop
is a ``CONTACT_3D`` constraint and a 'weld' loop a ``CONTACT_6D`` one, frame A of the loop the
constraint's joint1 frame (``joint1_placement`` in joint ``joint1_id``) and frame B its joint2
frame; joint 0 (the universe) is the world.  ``from_pinocchio(pin_model, constraints=...)``
reads them, :func:`loop_constraints_to_pinocchio` writes a model's loops for a Pinocchio model
of the same tree.
"""
from __future__ import annotations

import numpy as np

from .. import joints as J
from ..errors import MissingDependencyError, PartreeInputError
from ..flexible import refuse
from ..inertia import check_policy, labelled_warnings
from ..loops import DISTANCE, KINDS, SPHERICAL, WELD, Loop
from ..model import Model

_AXES = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
#: Pinocchio joint types whose q is (cos, sin) of the angle (continuous revolute joints)
UNBOUNDED = ("JointModelRUBX", "JointModelRUBY", "JointModelRUBZ", "JointModelRevoluteUnboundedUnaligned")
_REVOLUTE = ("JointModelRX", "JointModelRY", "JointModelRZ", "JointModelRevoluteUnaligned") + UNBOUNDED
_PRISMATIC = ("JointModelPX", "JointModelPY", "JointModelPZ", "JointModelPrismaticUnaligned")
#: Pinocchio joint types refused, with the reason
_REFUSED = {
    "JointModelPlanar": "its v is the velocity in the moving frame, which no chain of partree joints has",
    "JointModelHX": "a helical joint couples rotation and translation, which no partree joint does",
    "JointModelHY": "a helical joint couples rotation and translation, which no partree joint does",
    "JointModelHZ": "a helical joint couples rotation and translation, which no partree joint does",
    "JointModelHelicalUnaligned": "a helical joint couples rotation and translation, which no partree joint does",
    "JointModelEllipsoid": "its motion subspace depends on q in a way no partree joint has",
    "JointModelMimic": "a mimic joint is a constraint between joints (a closed loop), not supported yet",
}


def _pin():
    try:
        import pinocchio
    except ImportError:
        raise MissingDependencyError("the Pinocchio bridge needs pinocchio: pip install pin "
                                     "(or the 'test' extra of partree)") from None
    return pinocchio


def _axis_model(pin, axis, kind):
    a = np.asarray(axis, dtype=float)
    for k, letter in enumerate("XYZ"):
        e = np.zeros(3)
        e[k] = 1.0
        if np.array_equal(a, e):
            return getattr(pin, f"JointModel{'R' if kind == 'R' else 'P'}{letter}")()
    return pin.JointModelRevoluteUnaligned(a) if kind == "R" else pin.JointModelPrismaticUnaligned(a)


def depth_first_order(model):
    """The model's bodies in depth-first order, children in increasing body order (the roots too).

    Every subtree is a contiguous run of this order, which Pinocchio's algorithms (``crba``,
    ``constraintDynamics``, ...) assume of a model's joint ids.  It is ``arange(model.n)`` for a
    model numbered depth first (``load_urdf``, ``load_mjcf``, :func:`from_pinocchio` of a model
    that Pinocchio's parsers built); partree's own numbering only puts parents before children
    (``random_tree`` and ``auto_tree`` with branches are not depth first).

    Parameters
    ----------
    model : Model
        Any partree model.

    Returns
    -------
    numpy.ndarray of int
        ``order[k]`` is the body whose joint :func:`to_pinocchio` adds k-th (fixed joints
        included, which add no Pinocchio joint).
    """
    ptr, idx = model.children()
    order = np.empty(model.n, dtype=np.int64)
    stack = list(model.roots()[::-1])
    k = 0
    while stack:                       # iterative: deep chains are fine
        i = int(stack.pop())
        order[k] = i
        k += 1
        stack.extend(idx[ptr[i]:ptr[i + 1]][::-1].tolist())
    return order


def to_pinocchio(model):
    """Build the Pinocchio model of a partree Model.

    Every moving joint becomes one Pinocchio joint of the same name and type (revolute and
    prismatic joints along x, y or z as ``JointModelRX`` ... ``PZ``, other axes as the unaligned
    types; universal, spherical and free as ``JointModelUniversal``, ``JointModelSpherical``
    and ``JointModelFreeFlyer``), so every joint has the same q and v in both.  A fixed joint has
    no Pinocchio joint: its body's inertia is appended to the nearest moving ancestor joint, as
    Pinocchio's own URDF parser does.

    The joints are added in depth-first order (:func:`depth_first_order`, children in increasing
    body order), as Pinocchio's algorithms need: every joint's subtree is a contiguous range of
    joint ids.  For a model numbered depth first (``load_urdf``, ``load_mjcf``,
    :func:`from_pinocchio` of a model that Pinocchio's parsers built) the joint order, q and v are
    then partree's; for another numbering (``random_tree``, a branched ``auto_tree``) the joints
    are partree's permuted: :class:`PinocchioMap` converts q, v, qdd and tau, and
    ``pin_joint_id`` gives each body's Pinocchio joint.

    Parameters
    ----------
    model : Model
        Any partree model.

    Returns
    -------
    pin_model : pinocchio.Model
        With partree's gravity.
    pin_joint_id : numpy.ndarray of int
        ``pin_joint_id[i]`` is the Pinocchio joint that carries body i (0, the universe, for a
        body welded to the base).

    The model's loops are not part of a ``pinocchio.Model``: :func:`loop_constraints_to_pinocchio`
    gives them as the constraints (``RigidConstraintModel``) of the Pinocchio model.

    Raises
    ------
    MissingDependencyError
        When pinocchio is not installed.
    PartreeInputError
        For a model with flexible bodies (a ``pinocchio.Model`` holds rigid bodies only).
    """
    refuse(model, "to_pinocchio")
    pin = _pin()
    pm = pin.Model()
    pm.name = str(model.name)
    pm.gravity = pin.Motion(np.asarray(model.gravity, dtype=float), np.zeros(3))
    jid = np.zeros(model.n, dtype=np.int64)
    place = [None] * model.n          # body frame in its Pinocchio joint's frame
    for i in depth_first_order(model).tolist():
        p = int(model.parent[i])
        parent_joint = 0 if p < 0 else int(jid[p])
        parent_place = pin.SE3.Identity() if p < 0 else place[p]
        X = parent_place * pin.SE3(model.E_tree[i].T.copy(), model.r_tree[i].copy())
        jt = int(model.jtype[i])
        name = model.joint_names[i]
        if jt == J.FIXED:
            jid[i] = parent_joint
            place[i] = X
        else:
            if jt == J.REVOLUTE:
                jm = _axis_model(pin, model.axis[i], "R")
            elif jt == J.PRISMATIC:
                jm = _axis_model(pin, model.axis[i], "P")
            elif jt == J.UNIVERSAL:
                jm = pin.JointModelUniversal(model.axis[i].copy(), model.axis2[i].copy())
            elif jt == J.SPHERICAL:
                jm = pin.JointModelSpherical()
            else:
                jm = pin.JointModelFreeFlyer()
            jid[i] = pm.addJoint(parent_joint, jm, X, name)
            place[i] = pin.SE3.Identity()
        if model.mass[i] > 0:
            inertia = pin.Inertia(float(model.mass[i]), model.com[i].copy(), model.I_com[i].copy())
            pm.appendBodyToJoint(int(jid[i]), inertia, place[i])
    return pm, jid


def pin_wrench(force):
    """Pinocchio Force -> partree [n; f]."""
    return np.concatenate([force.angular, force.linear])


# ---------------------------------------------------------------------------------------- from
def _one_dof_axis(pin, jm):
    """(angular part, linear part) of the motion subspace of a one-DOF joint model at q = neutral."""
    tmp = pin.Model()
    j = tmp.addJoint(0, jm, pin.SE3.Identity(), "j")
    data = tmp.joints[j].createData()
    tmp.joints[j].calc(data, pin.neutral(tmp))
    S = np.asarray(data.S, dtype=float).reshape(6)
    return S[3:], S[:3]


def _expand(pin, jm, X, jname):
    """The partree joints of one Pinocchio joint model: a list of (code, axis, axis2, R, p) with
    (R, p) the placement of each in the previous one's frame, the first one's in X."""
    kind = jm.shortname()
    R, p = np.array(X.rotation, dtype=float), np.array(X.translation, dtype=float)
    z3 = np.zeros(3)
    if kind in _REVOLUTE or kind in _PRISMATIC:
        ang, lin = _one_dof_axis(pin, jm)
        a = ang if kind in _REVOLUTE else lin
        return [(J.REVOLUTE if kind in _REVOLUTE else J.PRISMATIC, a / np.linalg.norm(a), z3, R, p)]
    if kind == "JointModelSpherical":
        return [(J.SPHERICAL, z3, z3, R, p)]
    if kind == "JointModelFreeFlyer":
        return [(J.FREE, z3, z3, R, p)]
    if kind == "JointModelUniversal":
        u = jm.extract()
        return [(J.UNIVERSAL, np.array(u.axis1, dtype=float), np.array(u.axis2, dtype=float), R, p)]
    if kind == "JointModelSphericalZYX":
        # R = Rz(q0) Ry(q1) Rx(q2) and v = the angle rates: three revolute joints in a chain
        return [(J.REVOLUTE, np.array(_AXES[c]), z3, R if k == 0 else np.eye(3), p if k == 0 else z3)
                for k, c in enumerate("ZYX")]
    if kind == "JointModelTranslation":
        return [(J.PRISMATIC, np.array(_AXES[c]), z3, R if k == 0 else np.eye(3), p if k == 0 else z3)
                for k, c in enumerate("XYZ")]
    if kind == "JointModelComposite":
        c = jm.extract()
        out = []
        for k, (sub, P) in enumerate(zip(c.joints, c.jointPlacements)):
            out.extend(_expand(pin, sub, X * P if k == 0 else P, jname))
        return out
    why = _REFUSED.get(kind, "partree has no joint of this type")
    raise PartreeInputError(f"Pinocchio joint {jname!r} is a {kind}, which partree does not support: {why}")


def _body_names(pin_model):
    """Per Pinocchio joint, the name of its body: the first BODY frame on it at the joint's frame
    (the URDF child link), else the first BODY frame on it, else the joint's name."""
    pin = _pin()
    names = list(pin_model.names)
    found = {}
    for f in pin_model.frames:
        if f.type != pin.FrameType.BODY:
            continue
        j = int(f.parentJoint)
        at_joint = f.placement.isIdentity(1e-12)
        if j not in found or (at_joint and not found[j][1]):
            found[j] = (f.name, at_joint)
    return [found[j][0] if j in found else names[j] for j in range(len(names))]


def from_pinocchio(pin_model, inertia="warn", name=None, constraints=None) -> Model:
    """Build the partree Model of a Pinocchio model.

    One partree body per Pinocchio joint, whose frame is the joint's frame and whose inertia is the
    joint's (``pin_model.inertias``: Pinocchio has already merged into it the links welded by
    fixed joints, so a URDF's fixed links do not come back as bodies).  Joint types:

    * revolute (``RX``, ``RY``, ``RZ``, unaligned) -> revolute; prismatic -> prismatic;
      spherical -> spherical; free flyer -> free; universal -> universal: the same q and v;
    * continuous revolute (``RUBX`` ... , unbounded unaligned) -> revolute: Pinocchio's q is
      (cos θ, sin θ), partree's is θ (:class:`PinocchioMap` converts);
    * spherical ZYX -> three revolute joints about z, y and x in a chain, translation -> three
      prismatic joints along x, y and z, composite -> its joints in a chain: the same q and v, with
      massless intermediate bodies, the joints named ``<name>/0``, ``<name>/1``, ...;
    * planar, helical, ellipsoid and mimic joints are refused (no exact partree equivalent).

    Parameters
    ----------
    pin_model : pinocchio.Model
        Any Pinocchio model.
    inertia : {'warn', 'strict', 'fix'}, optional
        What to do with inertias that are not physical, passed to :class:`partree.Model`.
    name : str, optional
        Model name; default ``pin_model.name``.
    constraints : sequence of pinocchio.RigidConstraintModel, optional
        Rigid constraints of the model, which become its loops: ``CONTACT_3D`` -> 'spherical',
        ``CONTACT_6D`` -> 'weld', frame A in the body of ``joint1_id`` at ``joint1_placement``,
        frame B in the body of ``joint2_id`` at ``joint2_placement`` (joint 0, the universe, is
        the world; a joint that becomes a chain carries the constraint on its last body, whose
        frame is the joint's).  Named as the constraints (``constraint<k>`` where the name is
        empty).

    Returns
    -------
    Model
        Joint names are Pinocchio's; body names are those of the BODY frames at the joints (the
        URDF links), else the joint names.

    Raises
    ------
    PartreeInputError
        For a joint type partree does not support, naming the joint and its type, and for a
        constraint that is not ``CONTACT_3D`` or ``CONTACT_6D``, names a joint the model does not
        have, or has a ``desired_contact_placement`` other than the identity.
    MissingDependencyError
        When pinocchio is not installed.
    """
    check_policy(inertia)
    pin = _pin()
    bnames = _body_names(pin_model)
    parent, jtype, axis, axis2, E_tree, r_tree = [], [], [], [], [], []
    mass, com, I_com, jnames, bodies = [], [], [], [], []
    last = {0: -1}
    for j in range(1, pin_model.njoints):
        jname = pin_model.names[j]
        subs = _expand(pin, pin_model.joints[j], pin_model.jointPlacements[j], jname)
        prev = last[int(pin_model.parents[j])]
        for k, (code, a, a2, R, p) in enumerate(subs):
            parent.append(prev)
            jtype.append(code)
            axis.append(a)
            axis2.append(a2)
            E_tree.append(R.T)
            r_tree.append(p)
            mass.append(0.0)
            com.append(np.zeros(3))
            I_com.append(np.zeros((3, 3)))
            single = len(subs) == 1
            jnames.append(jname if single else f"{jname}/{k}")
            bodies.append(bnames[j] if single or k == len(subs) - 1 else f"{bnames[j]}/{k}")
            prev = len(parent) - 1
        inert = pin_model.inertias[j]
        mass[-1] = float(inert.mass)
        com[-1] = np.array(inert.lever, dtype=float)
        I_com[-1] = np.array(inert.inertia, dtype=float)
        last[j] = prev
    if not parent:
        raise PartreeInputError(f"Pinocchio model {pin_model.name!r} has no joints besides the universe")
    label = f"Pinocchio model {pin_model.name!r}"
    loops = _loops_from_constraints(pin, pin_model, constraints, last, label)
    with labelled_warnings(label):
        try:
            return Model(np.array(parent), np.array(jtype, dtype=np.int8), np.array(axis), np.array(E_tree),
                         np.array(r_tree), np.array(mass), np.array(com), np.array(I_com), axis2=np.array(axis2),
                         gravity=np.array(pin_model.gravity.linear, dtype=float), joint_names=jnames,
                         body_names=bodies, name=pin_model.name if name is None else name, allow_massless=True,
                         inertia=inertia, loops=loops)
        except PartreeInputError as exc:
            raise PartreeInputError(f"{label}: {exc}") from None


def _loops_from_constraints(pin, pin_model, constraints, last, label):
    """partree Loops of Pinocchio rigid constraints (``last[j]``: the body of Pinocchio joint j)."""
    if constraints is None:
        return None
    if isinstance(constraints, pin.RigidConstraintModel):
        constraints = [constraints]
    kinds = {pin.ContactType.CONTACT_3D: "spherical", pin.ContactType.CONTACT_6D: "weld"}
    loops, names, generated = [], [], []
    for k, c in enumerate(constraints):
        if not isinstance(c, pin.RigidConstraintModel):
            raise PartreeInputError(f"{label}: constraints must be pinocchio.RigidConstraintModel objects; "
                                    f"constraint {k} is a {type(c).__name__}")
        cname = str(c.name) or f"constraint{k}"
        what = f"{label}: constraint {k} ({cname!r})"
        if c.type not in kinds:
            raise PartreeInputError(f"{what} is a {c.type.name} constraint; partree's loops read CONTACT_3D "
                                    f"(spherical) and CONTACT_6D (weld) constraints")
        if not c.desired_contact_placement.isIdentity(0.0):
            raise PartreeInputError(f"{what} has a desired_contact_placement other than the identity; put the "
                                    f"offset into joint1_placement (a loop's frames coincide when it is closed)")
        ends = []
        for key in ("joint1", "joint2"):
            j = int(getattr(c, f"{key}_id"))
            if not 0 <= j < pin_model.njoints:
                raise PartreeInputError(f"{what}: {key}_id {j} is not a joint of the model "
                                        f"({pin_model.njoints} joints)")
            X = getattr(c, f"{key}_placement")
            b = last[j]
            ends.append((None if b < 0 else int(b), (np.array(X.rotation, dtype=float),
                                                     np.array(X.translation, dtype=float))))
        if ends[0][0] == ends[1][0]:
            raise PartreeInputError(f"{what} joins joint {int(c.joint1_id)} to itself")
        names.append(cname)
        generated.append(not str(c.name))
        loops.append(Loop(cname, kinds[c.type], ends[0][0], ends[1][0], ends[0][1], ends[1][1]))
    taken = {n for n, g in zip(names, generated) if not g}
    for lp, g in zip(loops, generated):
        if g:
            base, i = lp.name, 1
            while lp.name in taken:
                i += 1
                lp.name = f"{base}_{i}"
            taken.add(lp.name)
    return loops


def loop_constraints_to_pinocchio(model, pin_model, reference_frame=None):
    """The loops of a partree model as Pinocchio rigid constraints of a Pinocchio model of the same tree.

    Every 'spherical' loop becomes a ``CONTACT_3D`` constraint and every 'weld' loop a
    ``CONTACT_6D`` one, joint1 carrying frame A and joint2 frame B (joint 0, the universe, for a
    loop end on the world), named as the loop.  A loop end on a body welded to a moving one by
    fixed joints goes to that body's Pinocchio joint, with the fixed joints' placements composed
    into its placement; the Pinocchio joints are found by name, so ``pin_model`` can come from
    :func:`to_pinocchio`, be the model :func:`from_pinocchio` read, or be built by Pinocchio from
    the same URDF.

    Parameters
    ----------
    model : Model
        A partree model with loops.
    pin_model : pinocchio.Model
        Pinocchio's model of the same tree.
    reference_frame : pinocchio.ReferenceFrame, optional
        The constraints' frame; default ``pinocchio.ReferenceFrame.LOCAL``.

    Returns
    -------
    list of pinocchio.RigidConstraintModel
        One per loop, in the model's order (for ``pinocchio.initConstraintDynamics`` and
        ``constraintDynamics``).

    Raises
    ------
    PartreeInputError
        For a loop of another kind (Pinocchio has no revolute, prismatic, universal or distance
        rigid constraint), and for a loop end whose body has no Pinocchio joint of its name or
        is an intermediate body of the chain of one Pinocchio joint.
    MissingDependencyError
        When pinocchio is not installed.
    """
    pin = _pin()
    ref = pin.ReferenceFrame.LOCAL if reference_frame is None else reference_frame
    loops = model.loops
    out = []
    for k in range(len(loops)):
        code = int(loops.kind[k])
        if code not in (SPHERICAL, WELD):
            raise PartreeInputError(f"loop {loops.names[k]!r} is a {KINDS[code]} loop: Pinocchio's rigid constraints "
                                    f"are CONTACT_3D (a spherical loop) and CONTACT_6D (a weld loop) only"
                                    + (" (a distance constraint is not rigid)" if code == DISTANCE else ""))
        ends = []
        for b, R, p in ((loops.body_a[k], loops.R_a[k], loops.p_a[k]), (loops.body_b[k], loops.R_b[k], loops.p_b[k])):
            j, X = _pin_frame(pin, model, pin_model, int(b), loops.names[k])
            ends.append((j, X * pin.SE3(np.array(R), np.array(p))))
        kind = pin.ContactType.CONTACT_3D if code == SPHERICAL else pin.ContactType.CONTACT_6D
        c = pin.RigidConstraintModel(kind, pin_model, ends[0][0], ends[0][1], ends[1][0], ends[1][1], ref)
        c.name = loops.names[k]
        out.append(c)
    return out


def _pin_frame(pin, model, pin_model, i, loop):
    """(Pinocchio joint, placement of body i's frame in that joint's frame) for a loop end on body i."""
    X = pin.SE3.Identity()
    while i >= 0 and int(model.jtype[i]) == J.FIXED:
        X = pin.SE3(model.E_tree[i].T.copy(), model.r_tree[i].copy()) * X
        i = int(model.parent[i])
    if i < 0:
        return 0, X
    name = model.joint_names[i]
    if pin_model.existJointName(name):
        return int(pin_model.getJointId(name)), X
    base, _, k = name.rpartition("/")
    if base and k.isdigit() and pin_model.existJointName(base):
        try:
            model.joint_names.index(f"{base}/{int(k) + 1}")
        except (KeyError, ValueError):
            return int(pin_model.getJointId(base)), X      # the last body of the joint's chain: its frame
        raise PartreeInputError(f"loop {loop!r}: body {i} ({model.body_names[i]}) is an intermediate body of the "
                                f"chain of Pinocchio joint {base!r}, whose frame moves in the joint's frame")
    raise PartreeInputError(f"loop {loop!r}: body {i} ({model.body_names[i]}) has no Pinocchio joint named "
                            f"{name!r} in model {pin_model.name!r}")


# ---------------------------------------------------------------------------------------- q and v
class PinocchioMap:
    """Index maps between a partree Model and a Pinocchio model of the same mechanism, matched by
    joint name, to convert q and v (qd, qdd, tau) both ways.

    A Pinocchio joint named N matches the partree joint N, or the chain N/0, N/1, ... that
    :func:`from_pinocchio` makes of a composite, spherical ZYX or translation joint.  Quaternions
    are (x, y, z, w) in both, and a free joint's v is [v_lin; ω] in the body frame in both, so
    their numbers are copied; a continuous revolute joint's Pinocchio q (cos θ, sin θ) becomes θ
    and back.  Fixed partree joints have no coordinates.  It works for a model and the result of
    :func:`to_pinocchio` or :func:`from_pinocchio`, and for ``load_urdf`` and Pinocchio's
    ``buildModelFromUrdf`` of the same file, whatever the order of the joints in each (the
    depth-first order of :func:`to_pinocchio` permutes a model's joints where its numbering is
    not depth first).

    Parameters
    ----------
    model : Model
        The partree model.
    pin_model : pinocchio.Model
        The Pinocchio model.

    Raises
    ------
    PartreeInputError
        When a Pinocchio joint has no partree joint of that name, their sizes differ, or a
        moving partree joint has no Pinocchio joint.
    """

    def __init__(self, model, pin_model):
        self.model = model
        self.pin_model = pin_model
        names = model.joint_names
        self._q = []          # (partree q slice, pinocchio q slice, unbounded)
        self._v = np.zeros(model.nv, dtype=np.int64)
        seen = np.zeros(model.nv, dtype=bool)
        for j in range(1, pin_model.njoints):
            jm = pin_model.joints[j]
            nm = pin_model.names[j]
            ids = []
            try:
                ids = [names.index(nm)]
            except (KeyError, ValueError):
                k = 0
                while True:
                    try:
                        ids.append(names.index(f"{nm}/{k}"))
                    except (KeyError, ValueError):
                        break
                    k += 1
            if not ids:
                raise PartreeInputError(f"Pinocchio joint {nm!r} has no partree joint of that name in model "
                                        f"{model.name!r}")
            qs = slice(int(model.idx_q[ids[0]]), int(model.idx_q[ids[-1]] + model.nq_j[ids[-1]]))
            vs = slice(int(model.idx_v[ids[0]]), int(model.idx_v[ids[-1]] + model.nv_j[ids[-1]]))
            unbounded = jm.shortname() in UNBOUNDED
            nq = 1 if unbounded else jm.nq
            if qs.stop - qs.start != nq or vs.stop - vs.start != jm.nv:
                raise PartreeInputError(f"joint {nm!r}: partree has nq={qs.stop - qs.start}, nv={vs.stop - vs.start}, "
                                        f"Pinocchio's {jm.shortname()} has nq={jm.nq}, nv={jm.nv}")
            self._q.append((qs, slice(jm.idx_q, jm.idx_q + jm.nq), unbounded))
            self._v[vs] = np.arange(jm.idx_v, jm.idx_v + jm.nv)
            seen[vs] = True
        if not seen.all() or model.nv != pin_model.nv:
            k = int(np.flatnonzero(~seen)[0]) if not seen.all() else 0
            i = int(np.searchsorted(model.idx_v, k, side="right") - 1)
            raise PartreeInputError(f"partree joint {model.joint_names[i]!r} has no Pinocchio joint "
                                    f"(partree nv={model.nv}, Pinocchio nv={pin_model.nv})")

    def q_to_pinocchio(self, q):
        """Pinocchio's q from partree's."""
        q = np.asarray(q, dtype=float)
        out = np.zeros(self.pin_model.nq)
        for a, b, unbounded in self._q:
            if unbounded:
                out[b] = np.cos(q[a.start]), np.sin(q[a.start])
            else:
                out[b] = q[a]
        return out

    def q_from_pinocchio(self, q_pin):
        """partree's q from Pinocchio's."""
        q_pin = np.asarray(q_pin, dtype=float)
        out = np.zeros(self.model.nq)
        for a, b, unbounded in self._q:
            if unbounded:
                out[a] = np.arctan2(q_pin[b.start + 1], q_pin[b.start])
            else:
                out[a] = q_pin[b]
        return out

    def v_to_pinocchio(self, v):
        """Pinocchio's v (or a, tau) from partree's qd (or qdd, tau)."""
        out = np.zeros(self.pin_model.nv)
        out[self._v] = np.asarray(v, dtype=float)
        return out

    def v_from_pinocchio(self, v_pin):
        """partree's qd (or qdd, tau) from Pinocchio's v (or a, tau)."""
        return np.asarray(v_pin, dtype=float)[self._v]


def pinocchio_configuration(model, pin_model, q):
    """Pinocchio's q of a partree q (:class:`PinocchioMap`; build one to convert many)."""
    return PinocchioMap(model, pin_model).q_to_pinocchio(q)


def partree_configuration(model, pin_model, q_pin):
    """partree's q of a Pinocchio q (:class:`PinocchioMap`; build one to convert many)."""
    return PinocchioMap(model, pin_model).q_from_pinocchio(q_pin)


__all__ = ["to_pinocchio", "from_pinocchio", "PinocchioMap", "pinocchio_configuration",
           "partree_configuration", "pin_wrench", "loop_constraints_to_pinocchio", "depth_first_order"]
