"""Build a model body by body, by name: :class:`ModelBuilder`.

The arrays of :class:`partree.Model` suit generators and files; a mechanism written by hand reads
better as a list of named bodies, each placed on a named parent, plus the loops that close it.
"""
from __future__ import annotations

import numpy as np

from . import joints as J
from .errors import PartreeInputError
from .loops import WORLD, Loop
from .loops import placement as _placement
from .model import Model


def _vector(x, what):
    a = np.asarray(x, dtype=float)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise PartreeInputError(f"{what} must be a finite 3-vector; got {x!r}")
    return a


def _unit(x, what):
    a = _vector(x, what)
    n = float(np.linalg.norm(a))
    if n < 1e-12:
        raise PartreeInputError(f"{what} is a zero vector")
    return a / n


def _inertia(x, what):
    """3x3 about the centre of mass from a 3x3 matrix, 3 principal moments or one scalar."""
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        I = float(a) * np.eye(3)
    elif a.shape == (3,):
        I = np.diag(a)
    elif a.shape == (3, 3):
        I = a.copy()
    else:
        raise PartreeInputError(f"{what} must be a 3x3 matrix about the centre of mass, 3 principal moments or "
                                f"a scalar; got shape {a.shape}")
    if not np.all(np.isfinite(I)):
        raise PartreeInputError(f"{what} is not finite")
    return I


class ModelBuilder:
    """A model written body by body, with names, then closed by loops.

    Every body hangs from a parent body added before it (or from the world), through one joint;
    :meth:`build` returns the :class:`partree.Model`, numbered in the order the bodies were added
    (which is regular numbering, since a parent comes before its children), with the loops.

    Parameters
    ----------
    name : str, optional
        The model's name.
    gravity : array_like of 3 floats, optional
        Gravity in world coordinates.

    Examples
    --------
    A planar four-bar linkage in the x-z plane, its joints about y: a crank and a rocker on the
    ground 2 m apart, the coupler on the crank's tip, and a revolute loop joining the coupler's
    tip to the rocker's tip (the linkage is closed at q = 0).

    >>> import partree
    >>> b = partree.ModelBuilder("four-bar")
    >>> y = (0.0, 1.0, 0.0)
    >>> b.add_body("crank", None, "revolute", axis=y, mass=1.0, com=(0, 0, 0.5), inertia=0.1)
    0
    >>> b.add_body("coupler", "crank", "revolute", placement=(0, 0, 1), axis=y, mass=2.0,
    ...            com=(1, 0, 0.25), inertia=0.3)
    1
    >>> b.add_body("rocker", None, "revolute", placement=(2, 0, 0), axis=y, mass=1.5,
    ...            com=(0, 0, 0.75), inertia=0.2)
    2
    >>> b.add_loop("tip", "revolute", "coupler", "rocker", placement_a=(2, 0, 0.5),
    ...            placement_b=(0, 0, 1.5), axis=y)
    >>> model = b.build()
    >>> model
    <partree.Model 'four-bar': 3 bodies (3 revolute), nq=3, nv=3, 1 loop>
    >>> model.loops.nrow
    5
    """

    def __init__(self, name="model", gravity=(0.0, 0.0, -9.81)):
        self.name = str(name)
        self.gravity = _vector(gravity, "gravity")
        self._parent, self._jtype, self._axis, self._axis2 = [], [], [], []
        self._E, self._r, self._mass, self._com, self._I = [], [], [], [], []
        self._bnames, self._jnames = [], []
        self._body_index, self._joint_index = {}, {}
        self._loops = []
        self._loop_names = set()

    def __len__(self):
        return len(self._parent)

    def body(self, name):
        """Number of the body ``name`` (an int is checked and passed through)."""
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            if not 0 <= int(name) < len(self):
                raise PartreeInputError(f"there is no body {int(name)} ({len(self)} bodies so far)")
            return int(name)
        try:
            return self._body_index[str(name)]
        except KeyError:
            known = ", ".join(map(repr, self._bnames[:10])) + (", ..." if len(self) > 10 else "")
            raise PartreeInputError(f"no body named {name!r} (the bodies so far: {known or 'none'})") from None

    def add_body(self, name, parent, joint, placement=None, mass=0.0, com=(0.0, 0.0, 0.0), inertia=0.0, axis=None,
                 joint_name=None):
        """Add a body and the joint that connects it to its parent.

        Parameters
        ----------
        name : str
            The body's name (unique).
        parent : str, int or None
            The parent body, by name or number, added before; None (or 'world') for the world.
        joint : str
            'revolute', 'prismatic', 'universal', 'spherical', 'free' or 'fixed'.
        placement : optional
            The joint frame's pose in the parent body (in the world for a root): a position (3,),
            a pair (R, p) or a 4x4 homogeneous matrix, with R's columns the joint frame's axes
            and p its origin in parent coordinates (as URDF's ``<origin>``); identity by default.
            The body's frame is the joint frame moved by the joint (they coincide at q = 0).
        mass : float, optional
            The body's mass (0 for a massless frame).
        com : array_like of 3 floats, optional
            The centre of mass in body coordinates.
        inertia : optional
            The rotational inertia about the centre of mass in body axes: a 3x3 matrix, 3
            principal moments (a diagonal matrix) or one scalar s (s times the identity).
        axis : optional
            revolute and prismatic: the joint axis in the joint frame, default (0, 0, 1);
            universal: the pair of axes (first, second), default ((1, 0, 0), (0, 1, 0)).  Not
            for the other joint types.
        joint_name : str, optional
            The joint's name (unique); default the body's name.

        Returns
        -------
        int
            The body's number.

        Raises
        ------
        PartreeInputError
            For a name used twice, an unknown parent or joint type, or a malformed value.
        """
        name = str(name)
        if name == WORLD:
            raise PartreeInputError(f"{WORLD!r} names the fixed world; give the body another name")
        if name in self._body_index:
            raise PartreeInputError(f"body name {name!r} is used twice (body {self._body_index[name]} has it)")
        jname = name if joint_name is None else str(joint_name)
        if jname in self._joint_index:
            raise PartreeInputError(f"body {name!r}: joint name {jname!r} is used twice "
                                    f"(body {self._joint_index[jname]}'s joint has it)")
        what = f"body {name!r}"
        if parent is None or (isinstance(parent, str) and parent == WORLD):
            p = -1
        else:
            try:
                p = self.body(parent)
            except PartreeInputError as exc:
                raise PartreeInputError(f"{what}: parent {parent!r} is not a body added before it ({exc})") from None
        if not isinstance(joint, str):
            raise PartreeInputError(f"{what}: joint must be a type name ({', '.join(J.NAMES)}); got {joint!r}")
        try:
            code = J.code_of(joint)
        except ValueError as exc:
            raise PartreeInputError(f"{what}: {exc}") from None
        axis1, axis2 = np.zeros(3), np.zeros(3)
        if code in (J.REVOLUTE, J.PRISMATIC):
            axis1 = _unit((0.0, 0.0, 1.0) if axis is None else axis, f"{what}: axis")
        elif code == J.UNIVERSAL:
            pair = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)) if axis is None else axis
            if len(pair) != 2:
                raise PartreeInputError(f"{what}: a universal joint's axis is a pair (first, second); got {axis!r}")
            axis1 = _unit(pair[0], f"{what}: axis[0]")
            axis2 = _unit(pair[1], f"{what}: axis[1]")
            if abs(float(axis1 @ axis2)) > 1.0 - 1e-9:
                raise PartreeInputError(f"{what}: the universal joint's two axes are parallel")
        elif axis is not None:
            raise PartreeInputError(f"{what}: axis is for revolute, prismatic and universal joints, not {joint!r}")
        R, pos = _placement(placement, f"{what}: placement")
        m = float(mass)
        if not np.isfinite(m):
            raise PartreeInputError(f"{what}: mass {mass!r} is not finite")
        self._parent.append(p)
        self._jtype.append(code)
        self._axis.append(axis1)
        self._axis2.append(axis2)
        self._E.append(R.T)
        self._r.append(pos)
        self._mass.append(m)
        self._com.append(_vector(com, f"{what}: com"))
        self._I.append(_inertia(inertia, f"{what}: inertia"))
        self._bnames.append(name)
        self._jnames.append(jname)
        k = len(self._parent) - 1
        self._body_index[name] = k
        self._joint_index[jname] = k
        return k

    def add_loop(self, name, kind, body_a, body_b, placement_a=None, placement_b=None, axis=None, length=None):
        """Add a loop: a cut joint between a frame on body a and a frame on body b.

        The arguments are those of :class:`partree.Loop` (bodies by name or number, None or
        'world' for the world); the bodies are checked by :meth:`build`, so a loop may name a
        body added after it.

        Raises
        ------
        PartreeInputError
            For a loop name used twice or a malformed loop.
        """
        lp = Loop(name, kind, body_a, body_b, placement_a, placement_b, axis, length)
        if lp.name in self._loop_names:
            raise PartreeInputError(f"loop name {lp.name!r} is used twice")
        self._loop_names.add(lp.name)
        self._loops.append(lp)

    def build(self, inertia="warn", allow_massless=True, **kw):
        """The :class:`partree.Model` of the bodies and loops added so far.

        Parameters
        ----------
        inertia : {'warn', 'strict', 'fix'}, optional
            The inertia policy of :class:`partree.Model`.
        allow_massless : bool, optional
            Accept massless bodies (frames); a moving joint must still move some inertia.
        **kw
            Other arguments of :class:`partree.Model` (``units``, ``validate``).

        Returns
        -------
        Model

        Raises
        ------
        PartreeInputError
            When no body was added, or for what :class:`partree.Model` refuses (a loop on an
            unknown body, a joint that moves no inertia, ...).
        """
        if not self._parent:
            raise PartreeInputError(f"model {self.name!r} has no bodies: add_body first")
        for key in ("parent", "jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com", "gravity",
                    "joint_names", "body_names", "name", "loops"):
            if key in kw:
                raise PartreeInputError(f"build(): {key!r} comes from the builder, not from an argument")
        return Model(np.array(self._parent, dtype=np.int64), np.array(self._jtype, dtype=np.int8),
                     np.array(self._axis), np.array(self._E), np.array(self._r), np.array(self._mass),
                     np.array(self._com), np.array(self._I), axis2=np.array(self._axis2), gravity=self.gravity,
                     joint_names=list(self._jnames), body_names=list(self._bnames), name=self.name,
                     allow_massless=allow_massless, inertia=inertia, loops=list(self._loops), **kw)

