"""URDF reader: ``load_urdf(path_or_string) -> Model`` with the standard library's XML parser.

Mapping (see ``partree.joints`` for the conventions):

* every URDF joint becomes one partree body, whose body frame is the joint's child link frame;
  ``joint_names`` are the URDF joint names and ``body_names`` the child link names;
* revolute and continuous -> revolute (q = the angle, as in URDF), prismatic -> prismatic,
  fixed -> fixed (a body with nv = 0, so the algorithms still report its reaction wrench),
  floating -> free; planar and anything else are refused;
* joint ``<origin xyz rpy>``: R = rpy_to_matrix(rpy), E_tree = R^T, r_tree = xyz;
  ``<axis xyz>`` (default 1 0 0) is normalised;
* link ``<inertial>``: mass, centre of mass = origin xyz, inertia about the CoM rotated into the
  link frame (R I R^T with R from the inertial origin's rpy).  Links without ``<inertial>`` get
  zero mass and zero inertia (the model is built with ``allow_massless=True``);
* the root link (the one link that is no joint's child) is the fixed base and not a body; with
  ``floating_base=True`` a free joint named ``root_joint`` attaches it to the world, and it
  becomes body 0;
* bodies are numbered depth-first from the root (children in file order), so parent[i] < i;
* inertias are checked under the policy ``inertia`` (``partree.inertia``), "warn" by default:
  robot descriptions often carry inertias that are not a rigid body's (a broken triangle
  inequality, a link whose mass sits in a link welded to it) but make a usable model; they are
  accepted and named in one ``PartreeInertiaWarning``, whose message starts with the file.

Elements the dynamics does not need (visual, collision, limit, dynamics, mimic, transmission,
gazebo, ...) are ignored.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import numpy as np

from .. import joints as J
from ..inertia import check_policy, labelled_warnings
from ..model import Model
from ..errors import PartreeInputError
from ..spatial import rpy_to_matrix

#: URDF joint type -> partree joint code
JOINT_TYPES = {
    "revolute": J.REVOLUTE,
    "continuous": J.REVOLUTE,
    "prismatic": J.PRISMATIC,
    "fixed": J.FIXED,
    "floating": J.FREE,
}

ROOT_JOINT_NAME = "root_joint"


class _Source:
    """Where the XML came from, for error messages."""

    def __init__(self, label):
        self.label = label

    def error(self, msg):
        return PartreeInputError(f"{self.label}: {msg}")


def _read_source(path_or_string):
    """(xml text or bytes, label) from a path, a path-like, an XML string or XML bytes."""
    if isinstance(path_or_string, (bytes, bytearray)):
        if bytes(path_or_string).lstrip().removeprefix(b"\xef\xbb\xbf").startswith(b"<"):
            return bytes(path_or_string), "<URDF string>"
        path_or_string = os.fsdecode(bytes(path_or_string))
    if isinstance(path_or_string, str) and path_or_string.lstrip().lstrip("\ufeff").startswith("<"):
        return path_or_string.lstrip().lstrip("\ufeff"), "<URDF string>"
    if not isinstance(path_or_string, (str, os.PathLike)):
        raise PartreeInputError(f"load_urdf needs a path or an XML string, got {type(path_or_string).__name__}")
    path = os.fspath(path_or_string)
    try:
        with open(path, "rb") as fh:
            return fh.read(), path
    except FileNotFoundError:
        raise PartreeInputError(f"{path}: no such URDF file") from None
    except IsADirectoryError:
        raise PartreeInputError(f"{path}: is a directory, not a URDF file") from None
    except OSError as exc:
        raise PartreeInputError(f"{path}: cannot read URDF file ({exc.strerror or exc})") from None


def _floats(src, text, count, what):
    """Parse ``count`` whitespace-separated finite floats."""
    parts = text.split()
    if len(parts) != count:
        raise src.error(f"{what} = {text!r}: expected {count} numbers, got {len(parts)}")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise src.error(f"{what} = {text!r} is not numeric") from None
    if not all(math.isfinite(v) for v in vals):
        raise src.error(f"{what} = {text!r} is not finite")
    return vals


def _attr_float(src, elem, name, what, default=None):
    text = elem.get(name)
    if text is None:
        if default is None:
            raise src.error(f"{what}: missing required attribute {name!r}")
        return default
    return _floats(src, text, 1, f"{what} {name}")[0]


def _origin(src, elem, what):
    """(R, xyz) of the optional <origin xyz rpy> child of elem (missing -> identity, zero)."""
    o = elem.find("origin")
    if o is None:
        return np.eye(3), np.zeros(3)
    xyz = o.get("xyz")
    rpy = o.get("rpy")
    xyz = np.zeros(3) if xyz is None else np.array(_floats(src, xyz, 3, f"{what} <origin> xyz"))
    R = np.eye(3) if rpy is None else rpy_to_matrix(_floats(src, rpy, 3, f"{what} <origin> rpy"))
    return R, xyz


def _required_name(src, elem, what):
    name = elem.get("name")
    if name is None or not name.strip():
        raise src.error(f"a <{what}> element has no name attribute")
    return name


def _link_inertia(src, link, name):
    """(mass, com, I_com) of a link in its own frame; zeros without <inertial>."""
    inertial = link.find("inertial")
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    what = f"link {name!r} <inertial>"
    m_el = inertial.find("mass")
    if m_el is None:
        raise src.error(f"{what}: missing <mass> element")
    mass = _attr_float(src, m_el, "value", f"{what} <mass>")
    if mass < 0:
        raise src.error(f"{what}: negative mass {mass!r}")
    i_el = inertial.find("inertia")
    if i_el is None:
        raise src.error(f"{what}: missing <inertia> element")
    ixx, ixy, ixz, iyy, iyz, izz = (_attr_float(src, i_el, k, f"{what} <inertia>")
                                    for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    R, com = _origin(src, inertial, what)
    I_link = R @ I @ R.T
    I_link = 0.5 * (I_link + I_link.T)   # exactly symmetric
    return mass, com, I_link


def load_urdf(path_or_string, floating_base=False, gravity=(0.0, 0.0, -9.81), name=None, inertia="warn") -> Model:
    """Build a Model from a URDF file (path or path-like) or a URDF XML string.

    ``floating_base=True`` attaches the root link to the world with a free joint named
    ``'root_joint'`` (body 0); otherwise the root link is the fixed base.  ``name`` overrides the
    model name (default: the robot's name).  ``inertia`` is the inertia policy (see
    ``Model`` and ``partree.inertia``): "warn" (default) accepts every physically usable inertia
    and names the bodies that are not a rigid body's in one ``PartreeInertiaWarning``; "fix"
    balances them as MuJoCo's ``balanceinertia`` does; "strict" refuses them.  Errors raise
    ``PartreeInputError`` naming the file and the offending element, body or joint.
    """
    text, label = _read_source(path_or_string)
    src = _Source(label)
    try:
        check_policy(inertia)
    except PartreeInputError as exc:
        raise src.error(str(exc)) from None
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise src.error(f"malformed XML: {exc}") from None
    if root.tag != "robot":
        raise src.error(f"the root element is <{root.tag}>, expected <robot>")

    # ---------------------------------------------------------------- links
    links = {}          # name -> (mass, com, I_com)
    link_order = []
    for link in root.findall("link"):
        lname = _required_name(src, link, "link")
        if lname in links:
            raise src.error(f"link {lname!r} is defined twice")
        links[lname] = _link_inertia(src, link, lname)
        link_order.append(lname)
    if not links:
        raise src.error("the robot has no <link>")

    # ---------------------------------------------------------------- joints
    joints = []         # dicts, in file order
    joint_names = set()
    parent_joint = {}   # child link -> joint index
    for jel in root.findall("joint"):
        jname = _required_name(src, jel, "joint")
        what = f"joint {jname!r}"
        if jname in joint_names:
            raise src.error(f"{what} is defined twice")
        joint_names.add(jname)
        jtype = jel.get("type")
        if jtype is None:
            raise src.error(f"{what}: missing required attribute 'type'")
        if jtype not in JOINT_TYPES:
            raise src.error(f"{what} has type {jtype!r}, which partree does not support "
                            f"(supported: {', '.join(JOINT_TYPES)})")
        ends = {}
        for tag in ("parent", "child"):
            el = jel.find(tag)
            if el is None:
                raise src.error(f"{what}: missing <{tag}> element")
            lk = el.get("link")
            if lk is None:
                raise src.error(f"{what} <{tag}>: missing required attribute 'link'")
            if lk not in links:
                raise src.error(f"{what}: {tag} link {lk!r} is not defined")
            ends[tag] = lk
        if ends["parent"] == ends["child"]:
            raise src.error(f"{what}: link {ends['parent']!r} is both parent and child (a cycle)")
        child = ends["child"]
        if child in parent_joint:
            other = joints[parent_joint[child]]["name"]
            raise src.error(f"link {child!r} has two parent joints ({other!r} and {jname!r})")
        code = JOINT_TYPES[jtype]
        R, xyz = _origin(src, jel, what)
        axis = np.zeros(3)
        if code in (J.REVOLUTE, J.PRISMATIC):
            a_el = jel.find("axis")
            a_txt = None if a_el is None else a_el.get("xyz")
            axis = np.array([1.0, 0.0, 0.0]) if a_txt is None else \
                np.array(_floats(src, a_txt, 3, f"{what} <axis> xyz"))
            nrm = float(np.linalg.norm(axis))
            if not nrm > 1e-12:
                raise src.error(f"{what}: <axis> xyz = {a_txt!r} is a zero vector")
            axis = axis / nrm
        parent_joint[child] = len(joints)
        joints.append(dict(name=jname, type=code, parent=ends["parent"], child=child,
                           E=np.ascontiguousarray(R.T), r=xyz, axis=axis))

    # ---------------------------------------------------------------- tree
    roots = [lk for lk in link_order if lk not in parent_joint]
    if len(roots) != 1:
        if not roots:
            raise src.error("every link is some joint's child: the links form a cycle (no root link)")
        raise src.error(f"several root links (links that are no joint's child): {', '.join(map(repr, roots))}; "
                        f"a URDF must be one tree")
    base = roots[0]
    children = {lk: [] for lk in link_order}
    for k, jd in enumerate(joints):
        children[jd["parent"]].append(k)

    # depth-first from the root, children in file order (iterative: deep chains are fine)
    order = []                      # joint indices in body order
    body_of_link = {base: 0 if floating_base else -1}
    nb0 = 1 if floating_base else 0
    stack = list(reversed(children[base]))
    while stack:
        k = stack.pop()
        body_of_link[joints[k]["child"]] = nb0 + len(order)
        order.append(k)
        stack.extend(reversed(children[joints[k]["child"]]))
    if len(order) != len(joints):
        lost = [joints[k]["name"] for k in range(len(joints)) if joints[k]["child"] not in body_of_link]
        raise src.error(f"joints {', '.join(map(repr, lost[:10]))}{' ...' if len(lost) > 10 else ''} "
                        f"form a cycle that is not connected to the root link {base!r}")

    n = nb0 + len(order)
    if n == 0:
        raise src.error(f"the robot has no joints: link {base!r} is the fixed base and nothing moves "
                        f"(use floating_base=True to make it a free body)")
    parent = np.empty(n, dtype=np.int64)
    jtype = np.empty(n, dtype=np.int8)
    axis = np.zeros((n, 3))
    E_tree = np.empty((n, 3, 3))
    r_tree = np.zeros((n, 3))
    mass = np.empty(n)
    com = np.empty((n, 3))
    I_com = np.empty((n, 3, 3))
    jnames, bnames = [], []
    if floating_base:
        if ROOT_JOINT_NAME in joint_names:
            raise src.error(f"floating_base=True adds a joint named {ROOT_JOINT_NAME!r}, but the URDF "
                            f"already has a joint of that name")
        parent[0] = -1
        jtype[0] = J.FREE
        E_tree[0] = np.eye(3)
        mass[0], com[0], I_com[0] = links[base]
        jnames.append(ROOT_JOINT_NAME)
        bnames.append(base)
    for b, k in enumerate(order, start=nb0):
        jd = joints[k]
        parent[b] = body_of_link[jd["parent"]]
        jtype[b] = jd["type"]
        axis[b] = jd["axis"]
        E_tree[b] = jd["E"]
        r_tree[b] = jd["r"]
        mass[b], com[b], I_com[b] = links[jd["child"]]
        jnames.append(jd["name"])
        bnames.append(jd["child"])
    robot_name = name if name is not None else (root.get("name") or os.path.splitext(os.path.basename(label))[0])
    with labelled_warnings(label):
        try:
            return Model(parent, jtype, axis, E_tree, r_tree, mass, com, I_com, gravity=gravity, joint_names=jnames,
                         body_names=bnames, name=robot_name, allow_massless=True, inertia=inertia)
        except PartreeInputError as exc:
            raise src.error(str(exc)) from None
