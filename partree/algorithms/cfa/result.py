"""The result of the constraint force algorithm, whichever method or backend computed it."""
import numpy as np


class CFAResult:
    """The joint accelerations and every joint's wrench, split into constraint and drive forces.

    Returned by :func:`partree.cfa` and by the parallel engine's ``constraint_forces``.

    A batch of states (``cfa`` with 2-D q, qd, tau) gives one result whose arrays have one row
    per state in front: qdd (B, nv), constraint_force (B, ns), drive_force (B, nv), joint_wrench
    (B, n, 6); ``constraint_force_of``, ``constraint_basis`` and ``constraint_wrench_of`` then
    answer per state too.

    Attributes
    ----------
    qdd : ndarray, shape (nv,)
        Joint accelerations.
    constraint_force : ndarray, shape (ns,)
        F_S of every joint, concatenated in body order, each in its joint's constraint basis W_j
        (see :mod:`partree.algorithms.cfa`); ns = sum(6 - nv_j).
    drive_force : ndarray, shape (nv,)
        F_T = (S^T S)^-1 tau per joint (tau itself for orthonormal S).
    joint_wrench : ndarray, shape (n, 6)
        F_j = S_j F_T,j + W_j F_S,j, the wrench the parent transmits to body j across joint j,
        in body j's frame, [n; f] (what ``rnea(..., return_wrenches=True)`` returns).
    levels : list of int
        levels[l] = number of joints eliminated at odd-even level l + 1 (summed over all
        chains); empty for the other methods.
    idx_s, ns_j : ndarray
        Offset and size of each joint's block in ``constraint_force``.
    method : str
        The method (or backend) that computed the result.
    """

    def __init__(self, model, method, qdd, FS, FT, F, q, idx_s, ns_j, levels, Wt=None):
        self._model = model
        self.method = method
        self.qdd = qdd
        self.constraint_force = FS
        self.drive_force = FT
        self.joint_wrench = F
        self._q = q
        self._Wt = Wt
        self.idx_s = idx_s
        self.ns_j = ns_j
        self.levels = levels
        self._buf = None        # the one buffer holding the arrays (the compiled leaf-first call's)

    @property
    def constraint_rows(self):
        """(ns, 6): W_j^T of every joint stacked (rows idx_s[j] .. idx_s[j] + 6 - nv_j), computed
        on first use at the configuration of this result ((B, ns, 6) for a batch)."""
        if self._Wt is None:
            from .common import constraint_bases

            model, qs = self._model, self._q
            if getattr(model, "flexible", None) is not None:
                # a joint's basis is its own (type, axes, angle), not its deformed parent's: the
                # rigid skeleton's at the joints' coordinates (``flexible_cfa``)
                model, qs = model.with_flexible({}), qs[..., :model.nq]
            if qs.ndim == 1:
                self._Wt = constraint_bases(model, qs)[0]
            else:
                self._Wt = np.array([constraint_bases(model, q)[0] for q in qs])
        return self._Wt

    def constraint_slice(self, name):
        """The slice of ``constraint_force`` (and of ``constraint_rows``) holding joint ``name``'s F_S."""
        j = self._model.joint_id(name)
        return slice(int(self.idx_s[j]), int(self.idx_s[j] + self.ns_j[j]))

    def constraint_force_of(self, name):
        """F_S of the joint ``name`` (or body index), in its basis ``constraint_basis(name)``."""
        return self.constraint_force[..., self.constraint_slice(name)].copy()

    def constraint_basis(self, name):
        """W_j (6 x (6 - nv_j)) of the joint ``name``, in body j's frame, at this configuration."""
        return np.swapaxes(self.constraint_rows[..., self.constraint_slice(name), :], -1, -2).copy()

    def constraint_wrench_of(self, name):
        """W_j F_S,j: the reaction part of joint ``name``'s wrench, [n; f] in body j's frame."""
        W, f = self.constraint_basis(name), self.constraint_force_of(name)
        return W @ f if f.ndim == 1 else (W @ f[..., None])[..., 0]

    def __repr__(self):
        states = "" if self.qdd.ndim == 1 else f"{self.qdd.shape[0]} states, "
        return (f"<CFAResult {self.method}: {states}nv={self.qdd.shape[-1]}, ns={self.constraint_force.shape[-1]}, "
                f"levels={len(self.levels)}>")


class _BufferView:
    """An attribute of :class:`BufferedCFAResult`: its view of the result buffer, made on first
    access and kept in the instance (a non-data descriptor: the instance's value wins after)."""

    def __init__(self, part):
        self.part = part

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        n, nq, nv, ns = obj._sizes
        b = obj._buf
        if self.part == 0:
            v = b[:nv]
        elif self.part == 1:
            v = b[nv:nv + ns]
        elif self.part == 2:
            v = b[nv + ns:2 * nv + ns]
        elif self.part == 3:
            v = b[2 * nv + ns:2 * nv + ns + 6 * n].reshape(n, 6)
        else:
            v = b[2 * nv + ns + 6 * n:]
        obj.__dict__[self.name] = v
        return v


class BufferedCFAResult(CFAResult):
    """A :class:`CFAResult` whose arrays are views of one buffer, qdd (nv), F_S (ns), F_T (nv),
    the joint wrenches (n, 6) and q (nq) in this order, each view made when it is first read: the
    compiled leaf-first call fills the buffer, and a result costs one allocation."""

    qdd = _BufferView(0)
    constraint_force = _BufferView(1)
    drive_force = _BufferView(2)
    joint_wrench = _BufferView(3)
    _q = _BufferView(4)

    def __init__(self, model, method, buf, sizes, idx_s, ns_j):
        self._model = model
        self.method = method
        self._buf = buf
        self._sizes = sizes
        self._Wt = None
        self.idx_s = idx_s
        self.ns_j = ns_j
        self.levels = []

    def __getstate__(self):
        # the views are made again from the buffer (pickled alone they would be copies of it)
        views = ("qdd", "constraint_force", "drive_force", "joint_wrench", "_q")
        return {k: v for k, v in self.__dict__.items() if k not in views}
