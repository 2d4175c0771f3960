"""The static description of a tree (Model) and the reusable workspace of the algorithms (Data).

Everything per body is an array indexed by body number (regular numbering: ``parent[i] < i``,
base = -1); there is never one Python object per body, so 10^7 bodies fit and build in seconds.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
from numba import njit

from . import joints as J
from .errors import PartreeInputError
from .inertia import apply_policy, check_policy
from .flexible import FlexibleBodies
from .loops import LoopSet, loop_set


class JointNames(Sequence):
    """Joint names of a model: explicit strings, or ``prefix + index`` generated on demand.

    Generated names cost no memory per body, so a 10^7-body model does not carry 10^7 strings.
    """

    def __init__(self, n, names=None, prefix="j"):
        self._n = int(n)
        self._prefix = prefix
        self._names = None
        self._index = None
        if names is not None:
            names = [str(s) for s in names]
            if len(names) != self._n:
                raise PartreeInputError(f"joint_names has {len(names)} entries for {self._n} bodies")
            self._names = names

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        i = int(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._names[i] if self._names is not None else f"{self._prefix}{i}"

    def index(self, name, *args):
        if self._names is None:
            s = str(name)
            if s.startswith(self._prefix) and s[len(self._prefix):].isdigit():
                k = int(s[len(self._prefix):])
                if 0 <= k < self._n and s == f"{self._prefix}{k}":
                    return k
            raise KeyError(f"no joint named {name!r}")
        if self._index is None:
            self._index = {}
            for k, s in enumerate(self._names):
                if s in self._index:
                    raise PartreeInputError(f"joint name {s!r} used twice (bodies {self._index[s]} and {k})")
                self._index[s] = k
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no joint named {name!r}") from None

    @property
    def explicit(self):
        return self._names

    @property
    def prefix(self):
        return self._prefix


def unit_heads(parent, units):
    """Check per-body unit labels against the tree ``parent``; return (labels as int64, heads).

    ``heads[i]`` is True where body i's parent lies outside its unit (or i is a root): the one body
    of its unit that may be a part root.  Every unit must be connected, so it has exactly one head.
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.shape[0]
    labels = np.asarray(units)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise PartreeInputError(f"units must be {n} integer labels, one per body; got dtype {labels.dtype} "
                                f"and shape {labels.shape}")
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    heads = parent < 0
    inner = np.flatnonzero(~heads)
    heads[inner] = labels[parent[inner]] != labels[inner]
    hl = np.sort(labels[heads])
    twice = np.flatnonzero(hl[1:] == hl[:-1])
    if twice.size:
        lab = int(hl[twice[0]])
        bad = np.flatnonzero(heads & (labels == lab))
        shown = ", ".join(f"{int(i)} (parent {int(parent[i])})" for i in bad[:8]) + (", ..." if bad.size > 8 else "")
        raise PartreeInputError(f"unit {lab} is not connected: its bodies {shown} all have their parent outside "
                                f"the unit; a unit needs exactly one body whose parent lies outside it")
    return labels, heads


#: the model arrays the compiled call path holds in one buffer (partree.algorithms.packed.PACKED_FIELDS)
_PACKED_FIELDS = frozenset(("parent", "jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com",
                            "gravity", "idx_q", "idx_v"))


def _as(a, shape, name, dtype=float):
    a = np.ascontiguousarray(a, dtype=dtype)
    if a.shape != shape:
        raise PartreeInputError(f"{name} has shape {a.shape}, expected {shape}")
    return a


class Model:
    """A tree of rigid bodies.

    Every per-body quantity is an array indexed by body number (n bodies); joint i connects
    ``parent[i]`` to body i.  After construction the model also holds the joint sizes
    ``nq_j``, ``nv_j`` (int[n]), their offsets ``idx_q``, ``idx_v`` in q and v, and the totals
    ``nq``, ``nv``.

    Parameters
    ----------
    parent : int[n]
        Parent body, -1 for the base; regular numbering ``parent[i] < i``.
    jtype : int[n] or sequence of str or str
        Joint codes (``partree.joints``) or names ('revolute', 'prismatic', 'universal',
        'spherical', 'free', 'fixed'); one name for all joints.
    axis : float[n, 3]
        Joint axis, a unit vector in the joint frame (revolute, prismatic, first axis of
        universal; ignored by the other types).
    E_tree : float[n, 3, 3]
        Joint placement: rotation from the parent body's coordinates to the joint frame.
    r_tree : float[n, 3]
        Joint placement: the joint frame's origin in the parent's coordinates.
    mass : float[n]
        Body masses.
    com : float[n, 3]
        Centres of mass, in body coordinates.
    I_com : float[n, 3, 3]
        Rotational inertias about the centres of mass, in body axes.
    axis2 : float[n, 3], optional
        Second axis of universal joints (zeros elsewhere).
    gravity : float[3], optional
        Gravity in base coordinates (default (0, 0, -9.81)).
    joint_names : sequence of str, optional
        n joint names; generated as 'j<i>' otherwise (no strings stored).
    body_names : sequence of str, optional
        n body names; generated as 'b<i>' otherwise.
    name : str, optional
        Name of the model.
    allow_massless : bool, optional
        Accept bodies with zero mass and zero inertia (URDF frames).
    validate : bool, optional
        Check the arrays (:meth:`validate`); default True.
    inertia : {'strict', 'warn', 'fix'}, optional
        What :meth:`validate` does with a body whose inertia is not a rigid body's (see
        ``partree.inertia``): 'strict' (default) refuses it, 'warn' accepts it when it is
        physically usable and warns once (:class:`~partree.errors.PartreeInertiaWarning`) with
        the bodies named, 'fix' balances its principal moments (as MuJoCo's ``balanceinertia``)
        and warns with what changed.  Kept as ``inertia_policy``.
    units : int[n], optional
        Unit label of every body: bodies with the same label form one repeated unit (e.g. a
        scissor unit); every unit must be connected.  The partitioner
        (``partree.parallel.partition``) never splits a unit.
    loops : sequence of Loop, optional
        Cut joints closing kinematic loops over the tree (:class:`partree.Loop`); kept as
        ``loops``, a :class:`partree.loops.LoopSet`.  See :meth:`with_loops`.
    flexible : dict body -> FlexibleBody, optional
        Modal data of the bodies that deform (:class:`partree.flexible.FlexibleBody`); kept as
        ``flexible``, a :class:`partree.flexible.FlexibleBodies` (None for a rigid model).  See
        :meth:`with_flexible` and ``partree.algorithms.flexible_dynamics``.

    Raises
    ------
    PartreeInputError
        For arrays of the wrong shape and, with ``validate``, for anything :meth:`validate`
        refuses.
    """

    def __init__(self, parent, jtype, axis, E_tree, r_tree, mass, com, I_com, axis2=None,
                 gravity=(0.0, 0.0, -9.81), joint_names=None, body_names=None, name="model",
                 allow_massless=False, validate=True, units=None, inertia="strict", loops=None,
                 flexible=None):
        parent = np.ascontiguousarray(parent, dtype=np.int64)
        if parent.ndim != 1:
            raise PartreeInputError(f"parent must be 1-D, got shape {parent.shape}")
        n = parent.shape[0]
        if n == 0:
            raise PartreeInputError("a model needs at least one body")
        self.n = n
        self.name = name
        self.parent = parent
        if isinstance(jtype, str):
            jtype = [jtype] * n
        jt = np.asarray(jtype)
        if jt.dtype.kind in "US":
            jt = np.array([J.code_of(str(s)) for s in jt])
        self.jtype = _as(jt, (n,), "jtype", np.int8)
        self.axis = _as(axis, (n, 3), "axis")
        self.axis2 = np.zeros((n, 3)) if axis2 is None else _as(axis2, (n, 3), "axis2")
        self.E_tree = _as(E_tree, (n, 3, 3), "E_tree")
        self.r_tree = _as(r_tree, (n, 3), "r_tree")
        self.mass = _as(mass, (n,), "mass")
        self.com = _as(com, (n, 3), "com")
        self.I_com = _as(I_com, (n, 3, 3), "I_com")
        self.gravity = _as(gravity, (3,), "gravity")
        self.joint_names = joint_names if isinstance(joint_names, JointNames) else JointNames(n, joint_names)
        self.body_names = body_names if isinstance(body_names, JointNames) else JointNames(n, body_names, "b")
        self.allow_massless = bool(allow_massless)
        self.inertia_policy = check_policy(inertia)
        self._topo = {}
        self._data = None
        self._quaternion_starts = None     # (partree.checks.quaternion_starts)
        self._packed = None                # (partree.algorithms.packed.model_buffer)
        if validate:
            self.validate()
        else:
            self._sizes()
        self.units = None if units is None else unit_heads(parent, units)[0]
        self.loops = LoopSet.empty() if loops is None else loop_set(self, loops)
        self.flexible = None if not flexible else FlexibleBodies(self, flexible)

    def _sizes(self):
        """Joint sizes and offsets from ``jtype`` (valid codes)."""
        self.nq_j = J.NQ[self.jtype]
        self.nv_j = J.NV[self.jtype]
        self.idx_q = np.concatenate(([0], np.cumsum(self.nq_j)[:-1])).astype(np.int64)
        self.idx_v = np.concatenate(([0], np.cumsum(self.nv_j)[:-1])).astype(np.int64)
        self.nq = int(self.nq_j.sum())
        self.nv = int(self.nv_j.sum())

    def __setattr__(self, name, value):
        # the compiled call path reads the kernel arrays from one buffer whose views they are
        # (partree.algorithms.packed): binding one of them to a new array drops that buffer, and
        # the next call builds it again from the arrays the model holds then
        if name in _PACKED_FIELDS or name == "flexible":
            # (a model with flexible bodies never has one: the compiled calls refuse it)
            object.__setattr__(self, "_packed", None)
        object.__setattr__(self, name, value)

    def __getstate__(self):
        # a copy's arrays are no longer views of this model's buffer: the copy builds its own
        state = self.__dict__.copy()
        state["_packed"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_packed", None)
        self.__dict__.setdefault("loops", LoopSet.empty())     # a model pickled without loops
        self.__dict__.setdefault("flexible", None)             # a model pickled without flexible bodies

    # ------------------------------------------------------------------ validation
    def validate(self):
        """Check the model; raise :class:`~partree.errors.PartreeInputError` naming the body.

        Checks regular numbering, joint codes, finite values, unit axes, rotation matrices in
        ``E_tree``, positive masses (zero with zero inertia where ``allow_massless``) and
        physical inertias: symmetric, positive semi-definite (a moment within rounding of zero
        counts as zero; a body welded to a moving one by fixed joints is judged with it, as one
        rigid body), and, as ``inertia_policy`` says, the triangle inequality of the principal
        moments (``partree.inertia``).  Every moving joint must move some inertia along its
        motion: a joint whose subtree has no mass or inertia along it leaves its motion
        undetermined.  Under 'fix' it replaces ``I_com`` by the repaired inertias.
        """
        n, p = self.n, self.parent
        bad = np.flatnonzero((p >= np.arange(n)) | (p < -1))
        if bad.size:
            i = int(bad[0])
            what = "itself" if p[i] == i else ("a later body" if p[i] > i else "an invalid index")
            raise PartreeInputError(
                f"parent array is not in regular numbering: body {i} ({self._bname(i)}) has parent "
                f"{int(p[i])}, {what}; need -1 <= parent[i] < i (use partree.model.regular_numbering "
                f"to renumber a tree, which also detects cycles)")
        if np.any(self.jtype < 0) or np.any(self.jtype >= len(J.NAMES)):
            i = int(np.flatnonzero((self.jtype < 0) | (self.jtype >= len(J.NAMES)))[0])
            raise PartreeInputError(f"body {i}: unknown joint type code {int(self.jtype[i])}")
        self._sizes()
        for name in ("axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com", "gravity"):
            a = getattr(self, name)
            if not np.all(np.isfinite(a)):
                i = int(np.argwhere(~np.isfinite(a))[0][0]) if a.ndim > 1 or name != "gravity" else 0
                raise PartreeInputError(f"{name} is not finite at body {i} ({self._bname(i)})")
        needs_axis = np.isin(self.jtype, (J.REVOLUTE, J.PRISMATIC, J.UNIVERSAL))
        na = np.linalg.norm(self.axis, axis=1)
        bad = np.flatnonzero(needs_axis & (np.abs(na - 1.0) > 1e-9))
        if bad.size:
            i = int(bad[0])
            raise PartreeInputError(f"joint {self._jname(i)} (body {i}): axis {self.axis[i]} is not a unit vector")
        uni = self.jtype == J.UNIVERSAL
        if uni.any():
            n2 = np.linalg.norm(self.axis2, axis=1)
            bad = np.flatnonzero(uni & (np.abs(n2 - 1.0) > 1e-9))
            if bad.size:
                i = int(bad[0])
                raise PartreeInputError(f"universal joint {self._jname(i)} (body {i}): axis2 is not a unit vector")
        E = self.E_tree
        orth = np.abs(np.einsum("nij,nkj->nik", E, E) - np.eye(3)).max(axis=(1, 2))
        bad = np.flatnonzero((orth > 1e-8) | (np.linalg.det(E) < 0))
        if bad.size:
            i = int(bad[0])
            raise PartreeInputError(f"E_tree of body {i} ({self._bname(i)}) is not a rotation matrix")
        m = self.mass
        Ic = self.I_com
        asym = np.abs(Ic - Ic.transpose(0, 2, 1)).max(axis=(1, 2))
        bad = np.flatnonzero(asym > 1e-9 * np.maximum(1.0, np.abs(Ic).max(axis=(1, 2))))
        if bad.size:
            i = int(bad[0])
            raise PartreeInputError(f"inertia of body {i} ({self._bname(i)}) is not symmetric")
        massless = (m == 0.0) & np.all(Ic == 0.0, axis=(1, 2))
        bad = np.flatnonzero(m < 0 if self.allow_massless else m <= 0)
        bad = np.setdiff1d(bad, np.flatnonzero(massless)) if self.allow_massless else bad
        if bad.size:
            i = int(bad[0])
            raise PartreeInputError(f"body {i} ({self._bname(i)}) has non-positive mass {m[i]!r}")
        apply_policy(self, self.inertia_policy, massless)

    def _bname(self, i):
        return self.body_names[i]

    def _jname(self, i):
        return self.joint_names[i]

    # ------------------------------------------------------------------ sizes and names
    def __repr__(self):
        counts = np.bincount(self.jtype, minlength=len(J.NAMES))
        kinds = ", ".join(f"{c} {J.NAMES[k]}" for k, c in enumerate(counts) if c)
        nl = len(getattr(self, "loops", ()))
        loops = f", {nl} loop{'s' if nl != 1 else ''}" if nl else ""
        fl = getattr(self, "flexible", None)
        flex = f", {len(fl.bodies)} flexible with {fl.n_modal} modes" if fl is not None else ""
        return f"<partree.Model {self.name!r}: {self.n} bodies ({kinds}), nq={self.nq}, nv={self.nv}{loops}{flex}>"

    def with_loops(self, loops, replace=False):
        """A model with the same tree and these loops (:class:`partree.Loop` objects) added to its
        own, or in their place with ``replace``.  The arrays are shared, not copied."""
        new = copy.copy(self)
        added = loop_set(self, loops)
        object.__setattr__(new, "loops", added if replace or not len(self.loops) else self.loops.concat(added))
        seen = set()
        for nm in new.loops.names:
            if nm in seen:
                raise PartreeInputError(f"loop name {nm!r} used twice")
            seen.add(nm)
        object.__setattr__(new, "_data", None)
        object.__setattr__(new, "_topo", dict(self._topo))
        return new

    def with_flexible(self, bodies):
        """A model with the same tree whose bodies ``bodies`` (dict body index ->
        :class:`partree.flexible.FlexibleBody`) deform; an empty dict gives the rigid model.  The
        arrays are shared, not copied."""
        new = copy.copy(self)
        object.__setattr__(new, "flexible", FlexibleBodies(self, bodies) if bodies else None)
        object.__setattr__(new, "_data", None)
        # the copy builds its own buffer (a rigid one) or, with flexible bodies, none: the compiled
        # call path must not find this model's
        object.__setattr__(new, "_packed", None)
        return new

    def joint_id(self, name):
        """Body number of the joint named ``name`` (or an int passed through)."""
        if isinstance(name, (int, np.integer)):
            if not -self.n <= name < self.n:
                raise KeyError(f"no joint {name}")
            return int(name) % self.n
        return self.joint_names.index(name)

    def q_slice(self, name):
        """Slice of the joint ``name`` (or body index) in q."""
        i = self.joint_id(name)
        return slice(int(self.idx_q[i]), int(self.idx_q[i] + self.nq_j[i]))

    def v_slice(self, name):
        """Slice of the joint ``name`` (or body index) in v (qd, qdd, tau)."""
        i = self.joint_id(name)
        return slice(int(self.idx_v[i]), int(self.idx_v[i] + self.nv_j[i]))

    def joint_type(self, name):
        """Type name ('revolute', ...) of the joint ``name`` (or body index)."""
        return J.NAMES[int(self.jtype[self.joint_id(name)])]

    @property
    def nbytes(self):
        """Bytes held by the model's arrays."""
        return sum(getattr(self, k).nbytes for k in ("parent", "jtype", "axis", "axis2", "E_tree", "r_tree",
                                                         "mass", "com", "I_com", "nq_j", "nv_j", "idx_q", "idx_v"))

    def total_mass(self):
        """Sum of the body masses."""
        return float(self.mass.sum())

    # ------------------------------------------------------------------ configurations
    def neutral(self):
        """Neutral configuration: zero angles and displacements, identity quaternions."""
        q = np.zeros(self.nq)
        for code in (J.SPHERICAL, J.FREE):
            ids = np.flatnonzero(self.jtype == code)
            if ids.size:
                q[self.idx_q[ids] + J.QUAT_OFFSET[code] + 3] = 1.0
        return q

    def random_configuration(self, rng=None, scale=np.pi):
        """Random configuration: angles and displacements uniform in [-scale, scale], random unit
        quaternions."""
        rng = np.random.default_rng(rng)
        q = rng.uniform(-scale, scale, self.nq)
        for code in (J.SPHERICAL, J.FREE):
            ids = np.flatnonzero(self.jtype == code)
            if ids.size:
                quat = rng.normal(size=(ids.size, 4))
                quat /= np.linalg.norm(quat, axis=1, keepdims=True)
                k = self.idx_q[ids] + J.QUAT_OFFSET[code]
                for c in range(4):
                    q[k + c] = quat[:, c]
        return q

    def random_velocity(self, rng=None, scale=1.0):
        """Random velocity: every entry uniform in [-scale, scale]."""
        rng = np.random.default_rng(rng)
        return rng.uniform(-scale, scale, self.nv)

    def normalize(self, q):
        """Return q with every quaternion normalised."""
        q = np.array(q, dtype=float)
        for code in (J.SPHERICAL, J.FREE):
            ids = np.flatnonzero(self.jtype == code)
            if ids.size:
                k = (self.idx_q[ids] + J.QUAT_OFFSET[code])[:, None] + np.arange(4)
                q[k] /= np.linalg.norm(q[k], axis=1, keepdims=True)
        return q

    # ------------------------------------------------------------------ topology
    def children(self, i=None):
        """Children of body i (array), or, with no argument, the CSR pair (ptr, idx) for all
        bodies (children of i are idx[ptr[i]:ptr[i+1]]; the base's children are ``roots()``)."""
        if "children" not in self._topo:
            p = self.parent
            order = np.argsort(p, kind="stable")
            counts = np.bincount(p[p >= 0], minlength=self.n)
            ptr = np.zeros(self.n + 1, dtype=np.int64)
            np.cumsum(counts, out=ptr[1:])
            idx = order[np.count_nonzero(p < 0):]
            self._topo["children"] = (ptr, idx)
        ptr, idx = self._topo["children"]
        if i is None:
            return ptr, idx
        return idx[ptr[i]:ptr[i + 1]]

    def roots(self):
        """Bodies attached to the base (parent -1)."""
        return np.flatnonzero(self.parent < 0)

    def num_children(self):
        """Number of children of every body."""
        ptr, _ = self.children()
        return np.diff(ptr)

    def depth(self):
        """Depth of every body (roots have depth 0)."""
        if "depth" not in self._topo:
            self._topo["depth"] = _depth(self.parent)
        return self._topo["depth"]

    def levels(self):
        """Bodies grouped by depth: CSR pair (ptr, idx); level d is idx[ptr[d]:ptr[d+1]]."""
        d = self.depth()
        order = np.argsort(d, kind="stable")
        ptr = np.zeros(int(d.max()) + 2, dtype=np.int64)
        np.cumsum(np.bincount(d), out=ptr[1:])
        return ptr, order

    def subtree_sizes(self):
        """Number of bodies in the subtree of every body (itself included)."""
        if "subtree" not in self._topo:
            self._topo["subtree"] = _subtree_sizes(self.parent)
        return self._topo["subtree"]

    def nodes(self):
        """Bodies with two or more children (the seed papers' node bodies)."""
        return np.flatnonzero(self.num_children() >= 2)

    def chains(self):
        """Split the tree into chains: maximal runs of bodies where each body is the only child
        of the previous one.  A chain starts at a root or at a child of a node body, and ends at
        a leaf or a node body.  Returns CSR (ptr, idx): chain c is idx[ptr[c]:ptr[c+1]],
        ordered base to tip."""
        if "chains" not in self._topo:
            self._topo["chains"] = _chains(self.parent, self.num_children())
        return self._topo["chains"]

    # ------------------------------------------------------------------ workspace
    def create_data(self):
        """A new workspace (:class:`Data`) for this model (refused for a model with flexible
        bodies: it serves the rigid-body algorithms)."""
        return Data(self)

    @property
    def data(self):
        """A workspace kept with the model for calls that don't pass one."""
        if self._data is None:
            self._data = Data(self)
        return self._data

    def select(self, ids):
        """A sub-model made of the bodies ``ids`` (sorted; parents outside become base).

        The flexible bodies among ``ids`` stay flexible with the same modal data (their modes
        renumbered with the bodies); a child whose flexible parent is kept attaches at the same
        node, one whose parent is left out becomes a base body as any other."""
        ids = np.sort(np.asarray(ids, dtype=np.int64))
        new = -np.ones(self.n, dtype=np.int64)
        new[ids] = np.arange(ids.size)
        par = self.parent[ids]
        par = np.where(par >= 0, new[np.maximum(par, 0)], -1)
        names = [self.joint_names[i] for i in ids] if self.joint_names.explicit is not None else None
        bnames = [self.body_names[i] for i in ids] if self.body_names.explicit is not None else None
        return Model(par, self.jtype[ids], self.axis[ids], self.E_tree[ids], self.r_tree[ids], self.mass[ids],
                     self.com[ids], self.I_com[ids], axis2=self.axis2[ids], gravity=self.gravity,
                     joint_names=names, body_names=bnames, name=self.name, allow_massless=self.allow_massless,
                     validate=False, inertia=self.inertia_policy, flexible=self._selected_flexible(ids))

    def _selected_flexible(self, ids):
        """{new index: FlexibleBody} of the flexible bodies among the sorted ``ids``."""
        fl = getattr(self, "flexible", None)
        if fl is None:
            return None
        return {k: fl.bodies[int(i)] for k, i in enumerate(ids) if int(i) in fl.bodies}


@njit(cache=True)
def _depth(parent):
    n = parent.shape[0]
    d = np.zeros(n, dtype=np.int64)
    for i in range(n):
        if parent[i] >= 0:
            d[i] = d[parent[i]] + 1
    return d


@njit(cache=True)
def _subtree_sizes(parent):
    n = parent.shape[0]
    s = np.ones(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        if parent[i] >= 0:
            s[parent[i]] += s[i]
    return s


@njit(cache=True)
def _chains(parent, nchild):
    n = parent.shape[0]
    starts = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        p = parent[i]
        if p < 0 or nchild[p] != 1:
            starts[i] = True
    nc = 0
    for i in range(n):
        if starts[i]:
            nc += 1
    # the unique child of each single-child body
    only = -np.ones(n, dtype=np.int64)
    for i in range(n):
        p = parent[i]
        if p >= 0 and nchild[p] == 1:
            only[p] = i
    ptr = np.zeros(nc + 1, dtype=np.int64)
    idx = np.empty(n, dtype=np.int64)
    c = 0
    k = 0
    for i in range(n):
        if starts[i]:
            j = i
            while True:
                idx[k] = j
                k += 1
                if only[j] < 0:
                    break
                j = only[j]
            c += 1
            ptr[c] = k
    return ptr, idx


def regular_numbering(parent):
    """Permutation ``perm`` that puts an arbitrary parent array (any order, -1 for the base) into
    regular numbering: new body k is old body perm[k].  Raises on cycles and bad references."""
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    bad = np.flatnonzero((parent < -1) | (parent >= n))
    if bad.size:
        i = int(bad[0])
        raise PartreeInputError(f"body {i} has parent {int(parent[i])}, which is not a body (n = {n})")
    self_loop = np.flatnonzero(parent == np.arange(n))
    if self_loop.size:
        raise PartreeInputError(f"body {int(self_loop[0])} is its own parent (a cycle)")
    order = _bfs_order(parent)
    if order.size < n:
        seen = np.zeros(n, dtype=bool)
        seen[order] = True
        i = int(np.flatnonzero(~seen)[0])
        # walk up from i until a body repeats: that is the cycle
        path, j = [], i
        while j not in path:
            path.append(j)
            j = int(parent[j])
        cyc = path[path.index(j):]
        raise PartreeInputError(f"parent array has a cycle through bodies {cyc} (not connected to the base)")
    return order


def _bfs_order(parent):
    n = parent.size
    has_parent = parent >= 0
    order_children = np.argsort(np.where(has_parent, parent, -1), kind="stable")
    counts = np.bincount(parent[has_parent], minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    kids = order_children[np.count_nonzero(~has_parent):]
    out = [np.flatnonzero(~has_parent)]
    frontier = out[0]
    while frontier.size:
        nxt = np.concatenate([kids[ptr[i]:ptr[i + 1]] for i in frontier]) if frontier.size < 64 else \
            _gather_children(frontier, ptr, kids)
        if nxt.size:
            out.append(nxt)
        frontier = nxt
    return np.concatenate(out)


@njit(cache=True)
def _gather_children(frontier, ptr, kids):
    m = 0
    for i in frontier:
        m += ptr[i + 1] - ptr[i]
    out = np.empty(m, dtype=np.int64)
    k = 0
    for i in frontier:
        for j in range(ptr[i], ptr[i + 1]):
            out[k] = kids[j]
            k += 1
    return out


def renumber(model_arrays_parent, perm):
    """Map a parent array through ``perm`` (from ``regular_numbering``)."""
    parent = np.asarray(model_arrays_parent, dtype=np.int64)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    p = parent[perm]
    return np.where(p >= 0, inv[np.maximum(p, 0)], -1)


class Data:
    """Workspace of the algorithms, allocated once per model and reused between calls.

    Its arrays are views of one float64 buffer, which the compiled call path hands to its kernels
    as a single argument (``partree.algorithms.packed``):

    ===========  ============  ===============================================================
    E, r         (n, 3, 3),    X_up: rotation and translation
                 (n, 3)
    v, c, a      (n, 6)        body velocities, velocity-product accelerations, accelerations
    IA           (n, 6, 6)     articulated (ABA) or composite (CRBA) inertias
    pA           (n, 6)        bias forces (ABA), body forces and joint wrenches (RNEA)
    S, U, Dinv   (nv, 6)       motion subspaces (one row per DOF), U = IA S, D^-1
    u, qdd, tau  (nv,)         u = tau - S^T pA, the last ABA and RNEA results
    scratch      (nv + 193,)   the kernels' small work arrays during a compiled call
    ===========  ============  ===============================================================

    After the compiled calls of ABA, RNEA (without joint wrenches) and CRBA on a model with
    welded bodies, the per-body arrays hold the bodies of the model with its welded bodies
    merged in their first rows (``partree.algorithms.welded``); the per-coordinate arrays are
    the model's.  The buffer ends with the area where those calls keep the merged model.
    """

    def __init__(self, model: Model):
        from .algorithms.packed import workspace_size
        from .flexible import RIGID_ALGORITHMS, refuse

        refuse(model, f"{RIGID_ALGORITHMS} and their workspace (Model.create_data, Model.data)")

        self.n = model.n
        self._buf = np.zeros(workspace_size(model.n, model.nv))
        self._cfa_buf = None        # the constraint-force method's rows (partree.algorithms.cfa)
        self._bind(model.nv)

    def _bind(self, nv):
        from .algorithms.packed import workspace_layout

        o = 0
        for name, shape in workspace_layout(self.n, nv):
            k = int(np.prod(shape))
            setattr(self, name, self._buf[o:o + k].reshape(shape))
            o += k

    def __getstate__(self):
        # the views are made again from the buffer (pickled alone they would be copies of it)
        return {"n": self.n, "_buf": self._buf, "_cfa_buf": self._cfa_buf}

    def __setstate__(self, state):
        from .algorithms.packed import workspace_nv

        self.__dict__.update(state)
        self._bind(workspace_nv(self._buf.shape[0], self.n))

    @property
    def nbytes(self):
        """Bytes held by the workspace."""
        return self._buf.nbytes + (0 if self._cfa_buf is None else self._cfa_buf.nbytes)
