"""MJCF reader: ``load_mjcf(path_or_string) -> Model`` for MuJoCo's XML model format.

The reader builds the same rigid-body tree as MuJoCo's compiler, so that partree's ABA, RNEA and
CRBA agree with MuJoCo's ``mj_forward`` on the rigid-body terms (the tests hold them against
MuJoCo).  Mapping:

* **Bodies.**  Every ``<body>`` becomes one partree body whose frame is the MuJoCo body frame
  (shifted to the anchor of its last joint when that joint has a ``pos``, see below).  Bodies are
  numbered in MuJoCo's order (depth first, in file order), so a model's q and v have MuJoCo's
  ``qpos`` / ``qvel`` layout up to the quaternion order and the free joint's linear velocity
  (:func:`mujoco_to_partree`, :func:`partree_to_mujoco`).  Body names are MuJoCo's (``body<k>``,
  k = MuJoCo's body id, for an unnamed body).
* **Joints.**  ``hinge`` -> revolute, ``slide`` -> prismatic, ``ball`` -> spherical, ``free`` (or
  ``<freejoint>``) -> free.  A body with no joint is welded to its parent (a fixed joint named
  ``<body>_fixed``), so a body in ``<worldbody>`` without a joint is fixed to the world.  partree
  has one joint per body: a body with several joints (a hip with two or three hinges) becomes a
  chain of massless intermediate bodies, one per joint, named ``<body>/<joint>``, the last one
  being the body itself with its mass; MuJoCo composes the joints in the same order, each about
  its own axis and anchor in the body frame as already moved by the joints before it.  Joint
  names are kept (``joint<k>`` for an unnamed one).
* **Joint frames.**  The axis (default z) is normalised; a joint ``pos`` (an axis through a point
  other than the body origin) moves the partree body frame to that anchor: the body's centre of
  mass and its children's placements are shifted to match, so the motion is MuJoCo's exactly.
  A hinge or slide ``ref`` is folded into the placement, so q equals MuJoCo's ``qpos`` (not
  ``qpos - ref``).  A free joint's q is the body's pose in the world frame, as in MuJoCo; its
  placement is the identity whatever the body's ``pos`` / ``quat`` (which are only MuJoCo's
  initial ``qpos0``).  ``model.neutral()`` is therefore not MuJoCo's ``qpos0``.
* **Orientations**: ``quat`` (w, x, y, z), ``axisangle``, ``euler`` (``<compiler eulerseq>``,
  lower case for axes that move with the frame, upper case for fixed ones), ``xyaxes``,
  ``zaxis``; angles in ``<compiler angle>`` units (degrees unless ``angle="radian"``, as in
  MuJoCo).  ``<frame>`` elements (pos, orientation, ``childclass``) are applied to what they hold.
* **Mass properties.**  ``<inertial>`` (pos, orientation, mass, ``diaginertia`` or
  ``fullinertia``), or, as ``<compiler inertiafromgeom>`` says (``auto``: when the body has no
  ``<inertial>``; ``true``: whenever it has geoms; ``false``: never), the sum of its geoms
  (sphere, capsule, cylinder, box, ellipsoid; ``fromto``; ``mass`` or ``density``; geoms outside
  ``inertiagrouprange`` left out), with MuJoCo's formulas.  ``boundmass``, ``boundinertia``,
  ``balanceinertia`` and ``settotalmass`` are applied as MuJoCo applies them.  A body welded to
  the world has no dynamics: when its geoms are of a type whose inertia partree does not compute
  it gets zero mass instead of an error.
* **Defaults**: ``<default>`` classes with nested inheritance, ``class`` and ``childclass`` (on
  bodies and frames), for joint and geom attributes.
* **Includes**: ``<include file>`` is replaced by the children of the included file's
  ``<mujoco>``; the path is relative to the main file's directory (the current directory for an
  XML string), as in MuJoCo.
* **Gravity** from ``<option gravity>`` (zero with ``<flag gravity="disable">``).
* **Equality constraints** close kinematic loops (``model.loops``, :class:`partree.Loop`), with
  MuJoCo's semantics, as hard constraints (``solref`` and ``solimp`` do not apply), named as in
  the file (``connect<k>`` or ``weld<k>``, k the constraint's index, for an unnamed one):

  - ``<connect body1 body2 anchor>`` -> a 'spherical' loop: frame A at ``anchor`` in body1,
    frame B on body2 where that point is at MuJoCo's reference configuration ``qpos0`` (hinges
    and slides at ``ref``, balls at the identity, free bodies at their pose in the file: the
    poses as written), turned so that the two frames coincide there;
  - ``<weld body1 body2 relpose anchor>`` -> a 'weld' loop: frame B at ``anchor`` in body2 (axes
    body2's); frame A in body1 at relpose's position, its axes body1's turned by relpose's
    quaternion (body2's orientation relative to body1); without ``relpose`` (or with its
    quaternion zero, MuJoCo's default) frame A is where frame B is at ``qpos0``.  A weld with
    ``torquescale="0"`` constrains no rotation: a 'spherical' loop;
  - ``site1``/``site2`` forms: frames A and B are the two sites' frames (a connect makes their
    origins coincide, a weld the frames), whatever their poses at ``qpos0``;
  - body2 defaults to the world (a loop ended on the world, body -1), and ``world`` names it;
    ``<default>`` classes apply to equality constraints and sites; a constraint with
    ``active="false"`` is left out with a warning.

  ``equality='ignore-others'`` leaves the other kinds (joint, tendon, flex) out with a warning,
  ``equality='ignore'`` every equality constraint, and ``equality='error'`` refuses them.

Not rigid-body dynamics, and not in the model: joint ``armature``, ``damping``,
``frictionloss`` and ``stiffness``, tendon ``armature``, body ``gravcomp``, fluid forces
(``<option density viscosity wind>``), limits, contacts, actuators, tendons, sensors, visuals
and assets.  A model that sets any of the first ones to a non-zero value loads with one warning
naming them (MuJoCo's mass matrix includes the armatures).

Refused with an error that names the file, the element and its line: joint, tendon and flex
``<equality>`` constraints (partree's loops hold connect and weld constraints), ``<composite>``,
``<flexcomp>``, ``<flex>``, ``<replicate>``, ``<attach>``, ``<compiler coordinate="global">``,
free joints aligned to their inertia frame (``align`` / ``alignfree``), mesh, plane, height-field
and SDF geoms where a body's inertia must be computed from them (give the body an ``<inertial>``),
``shellinertia`` geoms, and unknown elements, joint types or geom types.
"""
from __future__ import annotations

import math
import os
import warnings
from xml.parsers import expat

import numpy as np

from .. import joints as J
from ..errors import PartreeInputError
from ..inertia import check_policy, labelled_warnings
from ..loops import Loop
from ..model import Model
from ..spatial import axis_angle

#: MJCF joint type -> partree joint code
JOINT_TYPES = {"hinge": J.REVOLUTE, "slide": J.PRISMATIC, "ball": J.SPHERICAL, "free": J.FREE}
#: geom types whose mass properties are computed
GEOM_TYPES = ("sphere", "capsule", "cylinder", "box", "ellipsoid")
#: every geom type MuJoCo knows (the others are refused only where their inertia is needed)
KNOWN_GEOM_TYPES = GEOM_TYPES + ("plane", "hfield", "mesh", "sdf")
ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")

#: top-level sections the dynamics does not need
_IGNORED_SECTIONS = {"asset", "actuator", "sensor", "contact", "tendon", "visual", "statistic", "size",
                     "keyframe", "custom", "extension"}
#: elements inside a body or frame the dynamics does not need
_IGNORED_IN_BODY = {"camera", "light", "plugin"}
#: elements that change the dynamics and that partree refuses, with the reason
_REFUSED = {
    "composite": "<composite> generates bodies and constraints (MuJoCo's replicated soft bodies); "
                 "partree does not expand it",
    "flexcomp": "<flexcomp> is a deformable (flex) object, which partree does not model",
    "flex": "<flex> is a deformable object, which partree does not model",
    "replicate": "<replicate> is not expanded by partree; write the repeated bodies out",
    "attach": "<attach> (model composition) is not supported; attach the model's bodies in the file",
}
#: equality constraints that become loops (MuJoCo's <connect> and <weld>)
EQUALITY_LOOPS = ("connect", "weld")
#: the other equality constraints, with why partree has no loop for them
_EQUALITY_OTHERS = {
    "joint": "it couples two joints' coordinates by a polynomial",
    "tendon": "it couples tendon lengths",
    "flex": "it holds a deformable object's edges",
    "flexvert": "it holds a deformable object's vertices",
    "flexstrain": "it holds a deformable object's strains",
    "distance": "MuJoCo's distance constraint between geoms",
}
#: load_mjcf's equality modes
EQUALITY_MODES = ("loops", "ignore-others", "ignore", "error")


# ---------------------------------------------------------------------------------------- XML
class _Node:
    """An XML element with the file and line it came from."""

    __slots__ = ("tag", "attrib", "children", "line", "file")

    def __init__(self, tag, attrib, line, file):
        self.tag = tag
        self.attrib = attrib
        self.children = []
        self.line = line
        self.file = file

    def where(self):
        return f"{self.file}, line {self.line}: <{self.tag}>"


def _error(node, msg):
    return PartreeInputError(f"{node.where()}: {msg}")


def _parse_xml(data, label):
    """Parse XML text or bytes into a _Node tree, keeping line numbers."""
    parser = expat.ParserCreate()
    stack = []
    root = []

    def start(tag, attrs):
        node = _Node(tag, attrs, parser.CurrentLineNumber, label)
        if stack:
            stack[-1].children.append(node)
        else:
            root.append(node)
        stack.append(node)

    def end(tag):
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise PartreeInputError(f"{label}, line {exc.lineno}: malformed XML: "
                                f"{expat.ErrorString(exc.code)}") from None
    return root[0]


def _read_source(path_or_string):
    """(xml text or bytes, label, directory for includes)."""
    if isinstance(path_or_string, (bytes, bytearray)):
        if bytes(path_or_string).lstrip().removeprefix(b"\xef\xbb\xbf").startswith(b"<"):
            return bytes(path_or_string), "<MJCF string>", os.getcwd()
        path_or_string = os.fsdecode(bytes(path_or_string))
    if isinstance(path_or_string, str) and path_or_string.lstrip().lstrip("\ufeff").startswith("<"):
        return path_or_string.lstrip().lstrip("\ufeff"), "<MJCF string>", os.getcwd()
    if not isinstance(path_or_string, (str, os.PathLike)):
        raise PartreeInputError(f"load_mjcf needs a path or an XML string, got {type(path_or_string).__name__}")
    path = os.fspath(path_or_string)
    return _read_file(path, "MJCF file"), path, os.path.dirname(os.path.abspath(path))


def _read_file(path, what, node=None):
    where = f"{node.where()}: " if node is not None else ""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise PartreeInputError(f"{where}{path}: no such {what}") from None
    except IsADirectoryError:
        raise PartreeInputError(f"{where}{path}: is a directory, not an {what}") from None
    except OSError as exc:
        raise PartreeInputError(f"{where}{path}: cannot read {what} ({exc.strerror or exc})") from None


def _expand_includes(root, base_dir, active):
    """Replace every <include file> under root by the children of the included <mujoco>
    (iterative: deeply nested bodies are fine)."""
    stack = [(root, active)]
    while stack:
        node, chain = stack.pop()
        out = []
        for child in node.children:
            if child.tag != "include":
                stack.append((child, chain))
                out.append(child)
                continue
            fname = child.attrib.get("file")
            if not fname:
                raise _error(child, "missing required attribute 'file'")
            path = fname if os.path.isabs(fname) else os.path.join(base_dir, fname)
            if not os.path.exists(path):
                alt = os.path.join(os.path.dirname(os.path.abspath(child.file)), fname)
                if os.path.exists(alt):
                    path = alt
            key = os.path.abspath(path)
            if key in chain:
                raise _error(child, f"file {fname!r} includes itself (through {' -> '.join(chain)})")
            sub = _parse_xml(_read_file(path, "included MJCF file", child), path)
            if sub.tag != "mujoco":
                raise _error(sub, f"an included file must have <mujoco> as its root element, not <{sub.tag}>")
            holder = _Node("mujoco", {}, sub.line, sub.file)
            holder.children = sub.children
            _expand_includes(holder, base_dir, chain + [key])
            out.extend(holder.children)
        node.children = out


# ---------------------------------------------------------------------------------------- numbers
def _numbers(node, attrs, name, count=None, default=None, at_most=None):
    """Parse an attribute of whitespace-separated finite floats (exactly ``count``, or up to
    ``at_most``); ``default`` when absent (an error when that is None)."""
    text = attrs.get(name)
    if text is None:
        if default is None:
            raise _error(node, f"missing required attribute {name!r}")
        return np.array(default, dtype=float)
    parts = text.split()
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise _error(node, f"{name}={text!r} is not numeric") from None
    if count is not None and len(vals) != count:
        raise _error(node, f"{name}={text!r}: expected {count} numbers, got {len(vals)}")
    if at_most is not None and not 1 <= len(vals) <= at_most:
        raise _error(node, f"{name}={text!r}: expected 1 to {at_most} numbers, got {len(vals)}")
    if not all(math.isfinite(v) for v in vals):
        raise _error(node, f"{name}={text!r} is not finite")
    return np.array(vals)


def _number(node, attrs, name, default=None):
    return float(_numbers(node, attrs, name, 1, None if default is None else [default])[0])


def _choice(node, attrs, name, options, default):
    val = attrs.get(name, default)
    if val not in options:
        raise _error(node, f"{name}={val!r}: expected one of {', '.join(map(repr, options))}")
    return val


def _quat_matrix(wxyz):
    w, x, y, z = wxyz
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _z_to_matrix(z):
    """MuJoCo's minimal rotation taking (0, 0, 1) to z (a half turn about x when z = -e_z)."""
    axis = np.cross([0.0, 0.0, 1.0], z)
    s = float(np.linalg.norm(axis))
    if s < 1e-10:
        axis = np.array([1.0, 0.0, 0.0])
    else:
        axis = axis / s
    return axis_angle(axis, math.atan2(s, z[2]))


# ---------------------------------------------------------------------------------------- reader
class _Compiler:
    """The <compiler> settings that matter to the dynamics."""

    def __init__(self):
        self.angle_scale = math.pi / 180.0
        self.eulerseq = "xyz"
        self.inertiafromgeom = "auto"
        self.inertiagrouprange = (0, 5)
        self.boundmass = 0.0
        self.boundinertia = 0.0
        self.balanceinertia = False
        self.settotalmass = -1.0
        self.alignfree = False

    def read(self, node):
        a = node.attrib
        if "angle" in a:
            self.angle_scale = 1.0 if _choice(node, a, "angle", ("degree", "radian"), "degree") == "radian" \
                else math.pi / 180.0
        if "eulerseq" in a:
            seq = a["eulerseq"]
            if len(seq) != 3 or any(c not in "xyzXYZ" for c in seq):
                raise _error(node, f"eulerseq={seq!r}: expected three of x, y, z, X, Y, Z")
            self.eulerseq = seq
        if "coordinate" in a and a["coordinate"] != "local":
            raise _error(node, f"coordinate={a['coordinate']!r}: only local coordinates are supported "
                               f"(as in MuJoCo since version 2.3.3)")
        if "inertiafromgeom" in a:
            self.inertiafromgeom = _choice(node, a, "inertiafromgeom", ("auto", "true", "false"), "auto")
        if "inertiagrouprange" in a:
            g = _numbers(node, a, "inertiagrouprange", 2)
            self.inertiagrouprange = (int(g[0]), int(g[1]))
        if "boundmass" in a:
            self.boundmass = _number(node, a, "boundmass")
        if "boundinertia" in a:
            self.boundinertia = _number(node, a, "boundinertia")
        if "balanceinertia" in a:
            self.balanceinertia = _choice(node, a, "balanceinertia", ("true", "false"), "false") == "true"
        if "settotalmass" in a:
            self.settotalmass = _number(node, a, "settotalmass")
        if "alignfree" in a:
            self.alignfree = _choice(node, a, "alignfree", ("true", "false"), "false") == "true"


class _Builder:
    """Collects the partree bodies as MuJoCo's bodies and joints are read."""

    def __init__(self):
        self.parent, self.jtype, self.axis, self.R, self.p = [], [], [], [], []
        self.mass, self.com, self.I = [], [], []
        self.jnames, self.bnames = [], []
        self.generated_jname = []

    def add(self, parent, jtype, axis, R, p, jname, bname, generated):
        self.parent.append(parent)
        self.jtype.append(jtype)
        self.axis.append(axis)
        self.R.append(R)
        self.p.append(p)
        self.mass.append(0.0)
        self.com.append(np.zeros(3))
        self.I.append(np.zeros((3, 3)))
        self.jnames.append(jname)
        self.bnames.append(bname)
        self.generated_jname.append(generated)
        return len(self.parent) - 1


class _Reader:
    def __init__(self, root, label, equality):
        self.root = root
        self.label = label
        self.equality = equality
        self.compiler = _Compiler()
        self.defaults = {}              # class -> {"joint": attrs, "geom": attrs}
        self.gravity = np.array([0.0, 0.0, -9.81])
        self.passive = {}               # ignored non-zero term -> the joints or bodies that set it
        self.body_count = 0             # MuJoCo body ids (world = 0)
        self.joint_count = 0
        self.joint_lines = {}
        self.body_lines = {}
        self.dropped = []               # equality constraints left out (equality='ignore', 'ignore-others')
        self.inactive = []              # equality constraints with active="false", left out
        self.loops = []                 # partree.Loop of every <connect> and <weld>
        self.loop_generated = []        # whether its name was made up (the element has none)
        # named MuJoCo body -> (partree body, anchor offset of its frame, world pose (R, p) at qpos0)
        self.bodies = {"world": (-1, np.zeros(3), np.eye(3), np.zeros(3))}
        self.sites = {}                 # site name -> (partree body, R, p in the partree body frame)
        self.site_lines = {}

    # ------------------------------------------------------------ top level
    def read(self):
        root = self.root
        if root.tag != "mujoco":
            raise _error(root, "the root element must be <mujoco> (an MJCF file)")
        sections = {}
        for child in root.children:
            sections.setdefault(child.tag, []).append(child)
        for tag, nodes in sections.items():
            if tag in ("compiler", "option", "default", "worldbody", "equality", "deformable"):
                continue
            if tag in _REFUSED:
                raise _error(nodes[0], _REFUSED[tag])
            if tag not in _IGNORED_SECTIONS:
                raise _error(nodes[0], "unknown MJCF element")
        for node in sections.get("compiler", []):
            self.compiler.read(node)
        for node in sections.get("option", []):
            self._read_option(node)
        main = {"joint": {}, "geom": {}, "site": {}, "equality": {}}
        self.defaults = {"main": main}
        for node in sections.get("default", []):
            cls = node.attrib.get("class", "main")
            if cls != "main":
                raise _error(node, f"the top-level <default> has class {cls!r}; it must be 'main' or have no class")
            self._read_default(node, main)
        for node in sections.get("deformable", []):
            for child in node.children:
                if child.tag == "flex":
                    raise _error(child, _REFUSED["flex"])
        for node in sections.get("tendon", []):
            for child in node.children:
                if "armature" in child.attrib and np.any(_numbers(child, child.attrib, "armature") != 0.0):
                    self.passive.setdefault("tendon armature", []).append(
                        repr(child.attrib.get("name") or f"<{child.tag}> at line {child.line}"))
        for node in sections.get("equality", []):
            for child in node.children:
                if self.equality == "error":
                    named = f" {child.attrib['name']!r}" if child.attrib.get("name") else ""
                    raise _error(child, f"equality constraint{named}: equality constraints are refused "
                                        f"(equality='error'); the default, equality='loops', reads <connect> and "
                                        f"<weld> as loops, and equality='ignore' loads the tree without them")
                if self.equality == "ignore":
                    self.dropped.append(f"<{child.tag}> at line {child.line}")
        b = _Builder()
        for node in sections.get("worldbody", []):
            self._read_worldbody(node, b)
        if self.equality in ("loops", "ignore-others"):
            count = 0
            for node in sections.get("equality", []):
                for child in node.children:
                    self._read_equality(child, count)
                    count += 1
        return b

    def _read_option(self, node):
        a = node.attrib
        if "gravity" in a:
            self.gravity = _numbers(node, a, "gravity", 3)
        fluid = [k for k in ("density", "viscosity") if k in a and _number(node, a, k) != 0.0]
        if "wind" in a and np.any(_numbers(node, a, "wind", 3) != 0.0):
            fluid.append("wind")
        if fluid:
            self.passive.setdefault("fluid forces", []).append(f"<option {' '.join(fluid)}>")
        for child in node.children:
            if child.tag == "flag" and child.attrib.get("gravity") == "disable":
                self.gravity = np.zeros(3)

    def _read_default(self, node, cls):
        # the class's own elements first, then its nested classes (which inherit them), as in MuJoCo
        for child in node.children:
            if child.tag in ("joint", "geom", "site", "equality"):
                cls[child.tag] = _merge(cls[child.tag], child.attrib)
        for child in node.children:
            if child.tag == "default":
                name = child.attrib.get("class")
                if not name:
                    raise _error(child, "a nested <default> needs a class attribute")
                if name in self.defaults:
                    raise _error(child, f"default class {name!r} is defined twice")
                sub = {k: dict(v) for k, v in cls.items()}
                self.defaults[name] = sub
                self._read_default(child, sub)

    def _attrs(self, node, kind, childclass):
        """node's attributes over those of its default class."""
        cls = node.attrib.get("class", childclass)
        if cls not in self.defaults:
            raise _error(node, f"default class {cls!r} is not defined")
        return _merge(self.defaults[cls][kind], node.attrib)

    # ------------------------------------------------------------ frames and orientations
    def _rotation(self, node, attrs):
        given = [k for k in ORIENTATIONS if k in attrs]
        if len(given) > 1:
            raise _error(node, f"several orientations given ({', '.join(given)}); MJCF allows one")
        if not given:
            return np.eye(3)
        k = given[0]
        if k == "quat":
            q = _numbers(node, attrs, "quat", 4)
            n = float(np.linalg.norm(q))
            if n < 1e-10:
                raise _error(node, f"quat={attrs['quat']!r} is zero")
            return _quat_matrix(q / n)
        if k == "axisangle":
            v = _numbers(node, attrs, "axisangle", 4)
            if np.linalg.norm(v[:3]) < 1e-10:
                raise _error(node, f"axisangle={attrs['axisangle']!r} has a zero axis")
            return axis_angle(v[:3], v[3] * self.compiler.angle_scale)
        if k == "euler":
            e = _numbers(node, attrs, "euler", 3) * self.compiler.angle_scale
            R = np.eye(3)
            for c, ang in zip(self.compiler.eulerseq, e):
                Ri = axis_angle(np.eye(3)["xyz".index(c.lower())], ang)
                R = R @ Ri if c.islower() else Ri @ R
            return R
        if k == "xyaxes":
            v = _numbers(node, attrs, "xyaxes", 6)
            x, y = v[:3], v[3:]
            nx = np.linalg.norm(x)
            if nx < 1e-10:
                raise _error(node, f"xyaxes={attrs['xyaxes']!r}: the x axis is zero")
            x = x / nx
            y = y - x * (x @ y)
            ny = np.linalg.norm(y)
            if ny < 1e-10:
                raise _error(node, f"xyaxes={attrs['xyaxes']!r}: the y axis is parallel to the x axis")
            y = y / ny
            return np.column_stack([x, y, np.cross(x, y)])
        z = _numbers(node, attrs, "zaxis", 3)
        nz = np.linalg.norm(z)
        if nz < 1e-10:
            raise _error(node, f"zaxis={attrs['zaxis']!r} is zero")
        return _z_to_matrix(z / nz)

    def _pose(self, node, attrs):
        return self._rotation(node, attrs), _numbers(node, attrs, "pos", 3, (0.0, 0.0, 0.0))

    # ------------------------------------------------------------ bodies
    def _contents(self, node, R, p, childclass, out):
        """Flatten a body's (or frame's) contents in file order: (kind, node, R, p, childclass),
        with (R, p) the pose of the enclosing frames in the body."""
        for child in node.children:
            tag = child.tag
            if tag == "frame":
                attrs = child.attrib
                Rf, pf = self._pose(child, attrs)
                self._contents(child, R @ Rf, R @ pf + p, attrs.get("childclass", childclass), out)
            elif tag in ("body", "joint", "freejoint", "geom", "inertial", "site"):
                out.append((tag, child, R, p, childclass))
            elif tag in _REFUSED:
                raise _error(child, _REFUSED[tag])
            elif tag not in _IGNORED_IN_BODY:
                raise _error(child, "unknown MJCF element inside a body")
        return out

    def _read_worldbody(self, world, b):
        for kind, node, R, p, cc in self._contents(world, np.eye(3), np.zeros(3), "main", []):
            if kind == "body":
                self._read_tree(node, R, p, cc, b)
            elif kind == "site":
                self._read_site(node, R, p, cc, -1, np.zeros(3))
            elif kind in ("joint", "freejoint", "inertial"):
                raise _error(node, "the world body cannot have joints or inertia")

    def _read_site(self, node, Rf, pf, cc, body, anchor):
        """Record a named site's frame in its partree body (MuJoCo's body frame moved by ``anchor``)."""
        name = node.attrib.get("name")
        if not name:
            return
        if name in self.site_lines:
            raise _error(node, f"site name {name!r} is used twice (first at line {self.site_lines[name]})")
        self.site_lines[name] = node.line
        attrs = self._attrs(node, "site", cc)
        if "fromto" in node.attrib:
            ft = _numbers(node, attrs, "fromto", 6)
            d = ft[3:] - ft[:3]
            L = float(np.linalg.norm(d))
            if L < 1e-10:
                raise _error(node, f"fromto={attrs['fromto']!r} has zero length")
            # MuJoCo's frame of a fromto site: z from the "to" point towards the "from" point
            R, pos = _z_to_matrix(-d / L), 0.5 * (ft[:3] + ft[3:])
        else:
            R, pos = self._pose(node, attrs)
        self.sites[name] = (body, Rf @ R, Rf @ pos + pf - anchor)

    def _read_tree(self, top, R0, p0, cc0, b):
        # depth first, children in file order: MuJoCo's body order (iterative: deep chains are fine)
        # (node, frame pose in the parent body, childclass, parent partree body, parent's anchor
        #  offset, the MuJoCo parent is the world, the parent is welded to the world, the MuJoCo
        #  parent's world pose at qpos0)
        stack = [(top, R0, p0, cc0, -1, np.zeros(3), True, True, np.eye(3), np.zeros(3))]
        while stack:
            node, Rf, pf, cc, parent, offset, top_level, static_parent, Rw, pw = stack.pop()
            children = self._read_body(node, Rf, pf, cc, parent, offset, top_level, static_parent, b, Rw, pw)
            stack.extend(reversed(children))

    def _read_body(self, node, Rf, pf, cc, parent, offset, top_level, static_parent, b, Rw_parent, pw_parent):
        self.body_count += 1
        attrs = node.attrib
        bname = attrs.get("name") or f"body{self.body_count}"
        if attrs.get("name"):
            if bname in self.body_lines:
                raise _error(node, f"body name {bname!r} is used twice (first at line {self.body_lines[bname]})")
            self.body_lines[bname] = node.line
        Rb, pb = self._pose(node, attrs)
        # pose of the body in the parent partree frame: undo the parent's anchor offset
        R_c, p_c = Rf @ Rb, Rf @ pb + pf - offset
        childclass = attrs.get("childclass", cc)
        if childclass not in self.defaults:
            raise _error(node, f"childclass {childclass!r} is not a defined default class")
        contents = self._contents(node, np.eye(3), np.zeros(3), childclass, [])
        joints = [(n, R, p, c) for kind, n, R, p, c in contents if kind in ("joint", "freejoint")]
        geoms = [(n, R, p, c) for kind, n, R, p, c in contents if kind == "geom"]
        inertials = [(n, R, p) for kind, n, R, p, c in contents if kind == "inertial"]
        if len(inertials) > 1:
            raise _error(inertials[1][0], f"body {bname!r} has a second <inertial>")
        if node.attrib.get("gravcomp") and _number(node, attrs, "gravcomp") != 0.0:
            self.passive.setdefault("gravcomp", []).append(f"body {bname!r}")

        last = parent
        anchor = np.zeros(3)
        if not joints:
            last = b.add(parent, J.FIXED, np.zeros(3), R_c, p_c, f"{bname}_fixed", bname, True)
        for k, (jn, Rj, pj, jc) in enumerate(joints):
            self.joint_count += 1
            if jn.tag == "freejoint":
                ja = dict(jn.attrib)
                ja["type"] = "free"
                align = ja.get("align", "auto")
                if align not in ("true", "false", "auto"):
                    raise _error(jn, f"align={align!r}: expected 'true', 'false' or 'auto'")
                aligned = align == "true" or (align == "auto" and self.compiler.alignfree)
            else:
                ja = self._attrs(jn, "joint", jc)
                aligned = False
            jname = ja.get("name") or f"joint{self.joint_count - 1}"
            if ja.get("name"):
                if jname in self.joint_lines:
                    raise _error(jn, f"joint name {jname!r} is used twice (first at line {self.joint_lines[jname]})")
                self.joint_lines[jname] = jn.line
            jt_name = _choice(jn, ja, "type", tuple(JOINT_TYPES), "hinge")
            code = JOINT_TYPES[jt_name]
            for key in ("armature", "damping", "frictionloss", "stiffness"):
                if key in ja and np.any(_numbers(jn, ja, key) != 0.0):
                    self.passive.setdefault(key, []).append(repr(jname))
            name_of_body = bname if k == len(joints) - 1 else f"{bname}/{jname}"
            generated = not ja.get("name")
            if code == J.FREE:
                if len(joints) > 1:
                    raise _error(jn, f"body {bname!r}: a free joint must be the body's only joint")
                if not top_level:
                    raise _error(jn, f"body {bname!r}: a free joint can only be in a top-level body "
                                     f"(a child of <worldbody>), as in MuJoCo")
                if aligned:
                    raise _error(jn, "a free joint aligned to the body's inertia frame (align / "
                                     "<compiler alignfree>) is not supported: its q would be the pose of "
                                     "MuJoCo's principal-axes frame; remove the alignment")
                last = b.add(-1, J.FREE, np.zeros(3), np.eye(3), np.zeros(3), jname, name_of_body, generated)
                anchor = np.zeros(3)
                continue
            pos = Rj @ _numbers(jn, ja, "pos", 3, (0.0, 0.0, 0.0)) + pj
            axis = np.zeros(3)
            R_pl, p_pl = (R_c, R_c @ pos + p_c) if k == 0 else (np.eye(3), pos - anchor)
            if code in (J.REVOLUTE, J.PRISMATIC):
                a = Rj @ _numbers(jn, ja, "axis", 3, (0.0, 0.0, 1.0))
                na = float(np.linalg.norm(a))
                if na < 1e-10:
                    raise _error(jn, f"joint {jname!r}: axis {ja.get('axis')!r} is zero")
                axis = a / na
                ref = _number(jn, ja, "ref", 0.0)
                if ref != 0.0:
                    # q = qpos: MuJoCo moves the joint by qpos - ref from the body's pose
                    if code == J.REVOLUTE:
                        R_pl = R_pl @ axis_angle(axis, -ref * self.compiler.angle_scale)
                    else:
                        p_pl = p_pl - ref * (R_pl @ axis)
            last = b.add(last, code, axis, R_pl, p_pl, jname, name_of_body, generated)
            anchor = pos
        mass, com, I = self._body_inertia(node, bname, geoms, inertials, static_parent and not joints)
        b.mass[last], b.com[last], b.I[last] = mass, com - anchor, I
        static = static_parent and not joints
        # the MuJoCo body's world pose at qpos0 (hinges and slides at ref, balls at the identity,
        # a free joint at the body's pose): the poses as written in the file
        Rw, pw = Rw_parent @ Rf @ Rb, Rw_parent @ (Rf @ pb + pf) + pw_parent
        if attrs.get("name"):
            self.bodies[bname] = (last, anchor, Rw, pw)
        for kind, n, R, p, c in contents:
            if kind == "site":
                self._read_site(n, R, p, c, last, anchor)
        return [(n, R, p, c, last, anchor, False, static, Rw, pw)
                for kind, n, R, p, c in contents if kind == "body"]

    # ------------------------------------------------------------ equality constraints
    def _eq_body(self, node, attrs, key, default=None):
        name = attrs.get(key, default)
        if name is None:
            raise _error(node, f"missing required attribute {key!r}")
        if name not in self.bodies:
            raise _error(node, f"{key}={name!r} is not a named body of the model")
        return self.bodies[name]

    def _eq_site(self, node, attrs, key):
        name = attrs.get(key)
        if name is None:
            raise _error(node, f"missing required attribute {key!r} (a site form needs site1 and site2)")
        if name not in self.sites:
            raise _error(node, f"{key}={name!r} is not a named site of the model")
        return self.sites[name]

    def _read_equality(self, node, index):
        """A <connect> or <weld> as a partree.Loop (MuJoCo's semantics, hard instead of soft: solref
        and solimp do not apply); the other kinds are refused or dropped."""
        tag = node.tag
        named = f" {node.attrib['name']!r}" if node.attrib.get("name") else ""
        if tag not in EQUALITY_LOOPS:
            if self.equality == "ignore-others":
                self.dropped.append(f"<{tag}>{named} at line {node.line}")
                return
            why = _EQUALITY_OTHERS.get(tag)
            if why is None:
                raise _error(node, "unknown equality constraint (MuJoCo's are connect, weld, joint, tendon and "
                                   "flex)")
            raise _error(node, f"equality constraint{named}: partree's loops hold <connect> and <weld> constraints, "
                               f"not <{tag}> ({why}); load_mjcf(..., equality='ignore-others') loads the model "
                               f"without it")
        attrs = self._attrs(node, "equality", "main")
        if _choice(node, attrs, "active", ("true", "false"), "true") == "false":
            self.inactive.append(f"<{tag}>{named} at line {node.line}")
            return
        site_form = "site1" in attrs or "site2" in attrs
        body_keys = [k for k in ("body1", "body2", "anchor", "relpose") if k in attrs]
        if site_form and body_keys:
            raise _error(node, f"both the site form (site1, site2) and the body form ({', '.join(body_keys)}) are "
                               f"given; MuJoCo takes one")
        name = attrs.get("name") or f"{tag}{index}"
        kind = "spherical" if tag == "connect" else "weld"
        if tag == "weld" and _number(node, attrs, "torquescale", 1.0) == 0.0:
            kind = "spherical"              # no rotational rows: the position rows are a connect's
        if site_form:
            b1, R1, p1 = self._eq_site(node, attrs, "site1")
            b2, R2, p2 = self._eq_site(node, attrs, "site2")
            pa, pb = (R1, p1), (R2, p2)
        elif tag == "connect":
            b1, a1, R1w, p1w = self._eq_body(node, attrs, "body1")
            b2, a2, R2w, p2w = self._eq_body(node, attrs, "body2", "world")
            anchor = _numbers(node, attrs, "anchor", 3)
            # the anchor in body1, and the body2 point where it is at qpos0
            x2 = R2w.T @ (R1w @ anchor + p1w - p2w)
            pa, pb = (np.eye(3), anchor - a1), (R2w.T @ R1w, x2 - a2)
        else:
            b1, a1, R1w, p1w = self._eq_body(node, attrs, "body1")
            b2, a2, R2w, p2w = self._eq_body(node, attrs, "body2", "world")
            anchor = _numbers(node, attrs, "anchor", 3, (0.0, 0.0, 0.0))
            rel = _numbers(node, attrs, "relpose", 7, (0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0))
            if np.linalg.norm(rel[3:]) >= 1e-15:
                # body1's point relpose[:3] on body2's anchor, body2's axes body1's turned by relpose's quat
                pa = (_quat_matrix(rel[3:] / np.linalg.norm(rel[3:])), rel[:3] - a1)
            else:
                # no relpose (its quat is zero): the relative pose at qpos0
                pa = (R1w.T @ R2w, R1w.T @ (R2w @ anchor + p2w - p1w) - a1)
            pb = (np.eye(3), anchor - a2)
        if b1 == b2:
            what = "the world" if b1 < 0 else "one body"
            raise _error(node, f"equality constraint{named} joins {what} to itself")
        try:
            self.loops.append(Loop(name, kind, None if b1 < 0 else int(b1), None if b2 < 0 else int(b2),
                                   pa, pb))
            self.loop_generated.append(not attrs.get("name"))
        except PartreeInputError as exc:
            raise _error(node, str(exc)) from None

    # ------------------------------------------------------------ mass properties
    def _body_inertia(self, node, bname, geoms, inertials, welded_to_world):
        mode = self.compiler.inertiafromgeom
        lo, hi = self.compiler.inertiagrouprange
        used = []
        for g, R, p, c in geoms:
            ga = self._attrs(g, "geom", c)
            group = int(_number(g, ga, "group", 0.0))
            if lo <= group <= hi:
                used.append((g, ga, R, p))
        if (mode == "true" and used) or (mode == "auto" and not inertials):
            try:
                mass, com, I = self._geoms_inertia(bname, used)
            except PartreeInputError:
                if not welded_to_world:
                    raise
                mass, com, I = 0.0, np.zeros(3), np.zeros((3, 3))
        elif inertials:
            node_i, Rf, pf = inertials[0]
            mass, com, I = self._inertial(node_i)
            com, I = Rf @ com + pf, Rf @ I @ Rf.T
        else:
            mass, com, I = 0.0, np.zeros(3), np.zeros((3, 3))
        c = self.compiler
        if c.boundmass > 0.0 or c.boundinertia > 0.0 or c.balanceinertia:
            mass = max(mass, c.boundmass)
            ev, V = np.linalg.eigh(I)
            ev = np.maximum(ev, c.boundinertia)
            if c.balanceinertia and ev[0] + ev[1] < ev[2]:
                ev = np.full(3, ev.mean())
            I = (V * ev) @ V.T
        return mass, com, 0.5 * (I + I.T)

    def _inertial(self, node):
        a = node.attrib
        mass = _number(node, a, "mass")
        if mass < 0:
            raise _error(node, f"negative mass {mass!r}")
        pos = _numbers(node, a, "pos", 3)
        if "fullinertia" in a:
            if any(k in a for k in ORIENTATIONS) or "diaginertia" in a:
                raise _error(node, "fullinertia excludes diaginertia and an orientation (as in MuJoCo)")
            f = _numbers(node, a, "fullinertia", 6)
            I = np.array([[f[0], f[3], f[4]], [f[3], f[1], f[5]], [f[4], f[5], f[2]]])
        elif "diaginertia" in a:
            R = self._rotation(node, a)
            I = R @ np.diag(_numbers(node, a, "diaginertia", 3)) @ R.T
        else:
            raise _error(node, "needs diaginertia or fullinertia")
        return mass, pos, I

    def _geoms_inertia(self, bname, used):
        total, first, second = 0.0, np.zeros(3), []
        for g, ga, Rf, pf in used:
            m, p, R, Idiag = self._geom_inertia(bname, g, ga)
            if m == 0.0:
                continue
            Rg, pg = Rf @ R, Rf @ p + pf
            total += m
            first += m * pg
            second.append((m, pg, Rg @ np.diag(Idiag) @ Rg.T))
        if total == 0.0:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        com = first / total
        I = np.zeros((3, 3))
        for m, pg, Ig in second:
            d = pg - com
            I += Ig + m * ((d @ d) * np.eye(3) - np.outer(d, d))
        return total, com, I

    def _geom_inertia(self, bname, g, ga):
        """(mass, pos, R, principal moments about its centre) of one geom, in its body (or frame)."""
        gtype = ga.get("type", "sphere")
        if gtype not in KNOWN_GEOM_TYPES:
            raise _error(g, f"unknown geom type {gtype!r}")
        if gtype not in GEOM_TYPES:
            raise _error(g, f"body {bname!r}: its inertia comes from its geoms (<compiler inertiafromgeom>), "
                            f"and partree does not compute the inertia of a {gtype!r} geom (supported: "
                            f"{', '.join(GEOM_TYPES)}); give the body an <inertial> element")
        if ga.get("shellinertia", "false") == "true":
            raise _error(g, f"body {bname!r}: shellinertia geoms are not supported; give the body an <inertial>")
        size = _numbers(g, ga, "size", default=(0.0, 0.0, 0.0), at_most=3)
        size = np.concatenate([size, np.zeros(3 - size.size)])
        if "fromto" in ga:
            if "pos" in g.attrib and "fromto" in g.attrib:
                raise _error(g, "both pos and fromto are given (as in MuJoCo, one of them)")
            if gtype == "sphere":
                raise _error(g, "fromto is not allowed for a sphere")
            ft = _numbers(g, ga, "fromto", 6)
            d = ft[3:] - ft[:3]
            L = float(np.linalg.norm(d))
            if L < 1e-10:
                raise _error(g, f"fromto={ga['fromto']!r} has zero length")
            R = _z_to_matrix(d / L)
            pos = 0.5 * (ft[:3] + ft[3:])
            if gtype in ("box", "ellipsoid"):
                size[1:] = size[0], 0.5 * L       # MuJoCo: a square section of half-side size[0]
            else:
                size[1] = 0.5 * L
        else:
            R, pos = self._pose(g, ga)
        r = size[0]
        need = {"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3}[gtype]
        if np.any(size[:need] <= 0):
            raise _error(g, f"geom of type {gtype!r} needs {need} positive size values, got {size[:need]}")
        if gtype == "sphere":
            vol = 4.0 / 3.0 * math.pi * r ** 3
        elif gtype == "capsule":
            vol = math.pi * r * r * (2.0 * size[1] + 4.0 / 3.0 * r)
        elif gtype == "cylinder":
            vol = math.pi * r * r * 2.0 * size[1]
        elif gtype == "ellipsoid":
            vol = 4.0 / 3.0 * math.pi * size[0] * size[1] * size[2]
        else:
            vol = 8.0 * size[0] * size[1] * size[2]
        if "mass" in ga:
            mass = _number(g, ga, "mass")
            density = mass / vol
        else:
            density = _number(g, ga, "density", 1000.0)
            mass = density * vol
        if mass < 0:
            raise _error(g, f"negative geom mass {mass!r}")
        if gtype == "sphere":
            d = np.full(3, 0.4 * mass * r * r)
        elif gtype == "capsule":
            h = 2.0 * size[1]
            m_cyl = density * math.pi * r * r * h
            m_sph = density * 4.0 / 3.0 * math.pi * r ** 3
            ixx = m_cyl * (h * h / 12.0 + r * r / 4.0) + m_sph * (0.4 * r * r + h * h / 4.0 + 3.0 * h * r / 8.0)
            d = np.array([ixx, ixx, 0.5 * m_cyl * r * r + 0.4 * m_sph * r * r])
        elif gtype == "cylinder":
            h = 2.0 * size[1]
            ixx = mass * (3.0 * r * r + h * h) / 12.0
            d = np.array([ixx, ixx, 0.5 * mass * r * r])
        elif gtype == "ellipsoid":
            a, bb, c = size
            d = mass / 5.0 * np.array([bb * bb + c * c, a * a + c * c, a * a + bb * bb])
        else:
            a, bb, c = size
            d = mass / 3.0 * np.array([bb * bb + c * c, a * a + c * c, a * a + bb * bb])
        return mass, pos, R, d


def _merge(default, own):
    """Attributes ``own`` over ``default``; a partial ``size`` keeps the default's later values and an
    orientation given on the element replaces the default's."""
    out = dict(default)
    if any(k in own for k in ORIENTATIONS):
        for k in ORIENTATIONS:
            out.pop(k, None)
    if "fromto" in own:
        out.pop("pos", None)
    for k, v in own.items():
        if k == "size" and "size" in out:
            mine, base = v.split(), out["size"].split()
            if len(mine) < len(base):
                v = " ".join(mine + base[len(mine):])
        out[k] = v
    return out


def _unique(names, generated):
    """Make generated names unique against the given ones and each other."""
    taken = {n for n, g in zip(names, generated) if not g}
    out = []
    for n, g in zip(names, generated):
        if g:
            base, k = n, 1
            while n in taken:
                k += 1
                n = f"{base}_{k}"
            taken.add(n)
        out.append(n)
    return out


def load_mjcf(path_or_string, inertia="warn", gravity=None, name=None, equality="loops") -> Model:
    """Build a Model from an MJCF (MuJoCo XML) file or string.

    The model has MuJoCo's bodies, joints, placements, masses and inertias, in MuJoCo's order; the
    module's docstring (``partree.io.mjcf``) lists the mapping, what is supported and what is
    refused.  Joint armature, damping, friction loss and stiffness, gravity compensation and fluid
    forces are not rigid-body dynamics and are not in the model: a file that sets them loads with
    one warning naming them.

    Parameters
    ----------
    path_or_string : str, path-like or bytes
        An MJCF file, or the XML itself (a string starting with ``<``).  ``<include>`` files are
        found relative to the file's directory (the current directory for an XML string).
    inertia : {'warn', 'strict', 'fix'}, optional
        What to do with inertias that are not physical, passed to :class:`partree.Model`.
    gravity : array_like of 3 floats, optional
        Gravity in world coordinates; default: the file's ``<option gravity>`` (MuJoCo's
        (0, 0, -9.81) when absent).
    name : str, optional
        Model name; default: ``<mujoco model>``, or the file's name.
    equality : {'loops', 'ignore-others', 'ignore', 'error'}, optional
        What to do with ``<equality>`` constraints.  ``'loops'`` (default): every ``<connect>``
        becomes a 'spherical' loop and every ``<weld>`` a 'weld' loop (``model.loops``, see the
        module docstring), and the other kinds (joint, tendon, flex) are refused;
        ``'ignore-others'``: the same loops, and the other kinds are left out with a warning;
        ``'ignore'``: the tree alone, every equality constraint left out with a warning;
        ``'error'``: any equality constraint is refused.  Constraints with ``active="false"``
        are left out with a warning.

    Returns
    -------
    Model
        q and v have MuJoCo's layout, except that quaternions are (x, y, z, w) and a free
        joint's linear velocity is in the body frame (:func:`mujoco_to_partree` converts).

    Raises
    ------
    PartreeInputError
        For a missing or malformed file, an element partree refuses, or a model the physics
        refuses; the message names the file, the element and its line.
    """
    check_policy(inertia)
    if equality not in EQUALITY_MODES:
        raise PartreeInputError(f"equality={equality!r}: expected one of {', '.join(map(repr, EQUALITY_MODES))}")
    text, label, base_dir = _read_source(path_or_string)
    root = _parse_xml(text, label)
    _expand_includes(root, base_dir, [os.path.abspath(label)] if label != "<MJCF string>" else [])
    reader = _Reader(root, label, equality)
    b = reader.read()
    n = len(b.parent)
    if n == 0:
        raise PartreeInputError(f"{label}: the model has no bodies (nothing in <worldbody>)")
    if reader.dropped:
        what = "the model is the tree without them" if equality == "ignore" else \
            "partree's loops hold <connect> and <weld> only"
        warnings.warn(f"{label}: equality constraints ignored ({what}): {', '.join(reader.dropped)}", stacklevel=2)
    if reader.inactive:
        warnings.warn(f"{label}: inactive equality constraints (active=\"false\") are not in the model: "
                      f"{', '.join(reader.inactive)}", stacklevel=2)
    for lp, nm in zip(reader.loops, _unique([lp.name for lp in reader.loops], reader.loop_generated)):
        lp.name = nm
    if reader.passive:
        parts = []
        for what, who in reader.passive.items():
            shown = ", ".join(who[:6]) + (f" and {len(who) - 6} more" if len(who) > 6 else "")
            parts.append(f"{what} ({shown})")
        warnings.warn(f"{label}: not rigid-body dynamics, so not in the model: {'; '.join(parts)}", stacklevel=2)
    mass = np.array(b.mass)
    I = np.array(b.I)
    if reader.compiler.settotalmass > 0 and mass.sum() > 0:
        s = reader.compiler.settotalmass / mass.sum()
        mass, I = mass * s, I * s
    R = np.array(b.R)
    model_name = name if name is not None else (root.attrib.get("model") or
                                                os.path.splitext(os.path.basename(label))[0])
    with labelled_warnings(label):
        try:
            return Model(np.array(b.parent), np.array(b.jtype, dtype=np.int8), np.array(b.axis),
                         np.ascontiguousarray(R.transpose(0, 2, 1)), np.array(b.p), mass, np.array(b.com), I,
                         gravity=reader.gravity if gravity is None else gravity,
                         joint_names=_unique(b.jnames, b.generated_jname), body_names=b.bnames, name=model_name,
                         allow_massless=True, inertia=inertia, loops=reader.loops)
        except PartreeInputError as exc:
            raise PartreeInputError(f"{label}: {exc}") from None


# ---------------------------------------------------------------------------------------- states
def _free_and_ball(model):
    free = np.flatnonzero(model.jtype == J.FREE)
    ball = np.flatnonzero(model.jtype == J.SPHERICAL)
    return free, ball


def mujoco_to_partree(model, qpos, qvel=None):
    """partree's (q, qd) from MuJoCo's (qpos, qvel), for a model from :func:`load_mjcf`.

    Quaternions go from MuJoCo's (w, x, y, z) to (x, y, z, w), and a free joint's linear velocity
    from world coordinates (MuJoCo) to body coordinates (partree); everything else is the same
    number.  Returns q alone when ``qvel`` is None.

    Accelerations differ by more than a rotation for a free joint: with R the body's orientation
    and ω its angular velocity, MuJoCo's ``qacc[0:3]`` is R (a_lin + ω × v_lin) for partree's
    linear a_lin and v_lin.
    """
    qpos = np.asarray(qpos, dtype=float)
    if qpos.shape != (model.nq,):
        raise PartreeInputError(f"qpos has shape {qpos.shape}, expected ({model.nq},)")
    q = qpos.copy()
    free, ball = _free_and_ball(model)
    for i in ball:
        k = model.idx_q[i]
        q[k:k + 4] = qpos[[k + 1, k + 2, k + 3, k]]
    for i in free:
        k = model.idx_q[i] + 3
        q[k:k + 4] = qpos[[k + 1, k + 2, k + 3, k]]
    if qvel is None:
        return q
    qvel = np.asarray(qvel, dtype=float)
    if qvel.shape != (model.nv,):
        raise PartreeInputError(f"qvel has shape {qvel.shape}, expected ({model.nv},)")
    qd = qvel.copy()
    for i in free:
        k, kq = model.idx_v[i], model.idx_q[i] + 3
        R = _quat_matrix(qpos[kq:kq + 4] / np.linalg.norm(qpos[kq:kq + 4]))
        qd[k:k + 3] = R.T @ qvel[k:k + 3]
    return q, qd


def partree_to_mujoco(model, q, qd=None):
    """MuJoCo's (qpos, qvel) from partree's (q, qd): the inverse of :func:`mujoco_to_partree`."""
    q = np.asarray(q, dtype=float)
    if q.shape != (model.nq,):
        raise PartreeInputError(f"q has shape {q.shape}, expected ({model.nq},)")
    qpos = q.copy()
    free, ball = _free_and_ball(model)
    for i in ball:
        k = model.idx_q[i]
        qpos[k:k + 4] = q[[k + 3, k, k + 1, k + 2]]
    for i in free:
        k = model.idx_q[i] + 3
        qpos[k:k + 4] = q[[k + 3, k, k + 1, k + 2]]
    if qd is None:
        return qpos
    qd = np.asarray(qd, dtype=float)
    if qd.shape != (model.nv,):
        raise PartreeInputError(f"qd has shape {qd.shape}, expected ({model.nv},)")
    qvel = qd.copy()
    for i in free:
        k, kq = model.idx_v[i], model.idx_q[i] + 3
        w = qpos[kq:kq + 4]
        qvel[k:k + 3] = _quat_matrix(w / np.linalg.norm(w)) @ qd[k:k + 3]
    return qpos, qvel
