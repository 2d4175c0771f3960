"""Build the equivalent Pinocchio model of a partree Model (Pinocchio is a test/benchmark
reference, not a dependency).

Fixed joints become inertia appended to the nearest moving ancestor joint, as Pinocchio's own
URDF parser does; every moving joint keeps its name.  Joint wrenches compare directly:
Pinocchio's ``data.f[j]`` is [f; n] in joint j's frame, partree's is [n; f] in the same frame.
"""
import numpy as np

from .. import joints as J


def _axis_model(pin, axis, kind):
    a = np.asarray(axis, dtype=float)
    for k, letter in enumerate("XYZ"):
        e = np.zeros(3)
        e[k] = 1.0
        if np.array_equal(a, e):
            return getattr(pin, f"JointModel{'R' if kind == 'R' else 'P'}{letter}")()
    return pin.JointModelRevoluteUnaligned(a) if kind == "R" else pin.JointModelPrismaticUnaligned(a)


def to_pinocchio(model):
    """Return (pin_model, pin_joint_id) where pin_joint_id[i] is the Pinocchio joint of body i
    (0 for bodies welded to the base by fixed joints)."""
    import pinocchio as pin

    pm = pin.Model()
    pm.gravity = pin.Motion(np.asarray(model.gravity, dtype=float), np.zeros(3))
    jid = np.zeros(model.n, dtype=np.int64)
    place = [None] * model.n          # body frame in its Pinocchio joint's frame
    for i in range(model.n):
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
