"""The compiled call path's buffers: a model's arrays in one int64 buffer, a workspace in one
float64 buffer, and the compiled views that take them apart again.

Crossing from Python into a compiled (numba) function costs a fixed amount per argument, for an
array most of all (its type is looked up and the array unboxed).  A kernel called with each of
the model's and the workspace's arrays pays that thirty times per call, which on a small robot
outweighs the dynamics themselves.  The call path (``aba``, ``rnea``, ``crba``, ``cfa``) hands a
compiled wrapper two buffers instead, the model's and the workspace's, plus the state; the
wrapper cuts them into the kernels' arrays with :func:`model_views` and :func:`workspace_views`
(views, no copies; :func:`raw_view`) and calls the same kernels, compiled function to
compiled function.

The model buffer (:func:`model_buffer`) is built once per model, on its first call: the model's
arrays are copied into it and the model's attributes are rebound to views of the buffer, so that
an array edited in place (``model.gravity[:] = 0``) is what the next call computes with.  Binding
one of those attributes to a new array drops the buffer (``Model.__setattr__``); the next call
builds it again.  Models of more than :data:`PACK_MAX_BODIES` bodies are not packed: their calls
take the kernels' arguments one by one, which costs nothing next to their dynamics, and packing
them would hold their arrays twice while it copies.

Layout of the model buffer (int64 words; the float64 and int8 parts are read through views):

======================  =========================================================================
header (8)              MAGIC, n, nq, nv, nquat, ns, start of the float part, 0
parent, idx_q, idx_v    (n,) each
idx_s                   (n,) offset of each joint's constraint rows in F_S (CFA)
quaternion starts       (nquat,) index in q of every spherical or free joint's quaternion
jtype                   (n,) int8, padded to whole words
float part              gravity (3), mass (n), axis, axis2, r_tree, com (n, 3) each,
                        E_tree, I_com (n, 3, 3) each
======================  =========================================================================

The workspace buffer (``Data``) holds E, r, v, c, IA, pA, a (per body), S, U, Dinv, u, qdd, tau
(per velocity coordinate) and the kernels' scratch, in this order (:func:`workspace_layout`): a
compiled call allocates no memory.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from ..checks import QUAT_MIN_NORM2, quaternion_starts
from ..flexible import RIGID_ALGORITHMS, unsupported

#: first word of a model buffer: 'partree' and the layout's version (a buffer of another layout,
#: and compiled code cached for another layout, refuse each other)
MAGIC = 0x7061727472656501
HEADER = 8
#: the largest model (bodies) whose arrays are packed into one buffer
PACK_MAX_BODIES = 1 << 16
#: the model attributes held in the buffer (binding one of them to a new array drops the buffer)
PACKED_FIELDS = ("parent", "jtype", "axis", "axis2", "E_tree", "r_tree", "mass", "com", "I_com",
                 "gravity", "idx_q", "idx_v")

#: return codes of the compiled calls (a body number >= 0 is a singular articulated inertia)
OK = -1
#: an input's size does not match the model (nothing was computed)
ERR_SHAPE = -2
#: an input holds a non-finite value or a zero quaternion (nothing was computed)
ERR_VALUE = -3
#: the workspace buffer was made for a model of other sizes
ERR_DATA = -4
#: a degenerate universal joint (parallel axes) in the constraint-force method; the joint is
#: returned as ``ERR_UNIVERSAL_AT - body``
ERR_UNIVERSAL_AT = -16


class Packed:
    """A model's buffer with the sizes the Python side of the call path needs."""

    __slots__ = ("buf", "n", "nq", "nv", "ns", "sizes", "idx_s", "ns_j", "dense_bytes")

    def __init__(self, buf, n, nq, nv, ns, idx_s, ns_j):
        self.buf = buf
        self.n = n
        self.nq = nq
        self.nv = nv
        self.ns = ns
        self.sizes = (n, nq, nv, ns)
        self.idx_s = idx_s
        self.ns_j = ns_j
        self.dense_bytes = 8 * nv * nv


def _words(nbytes):
    return (nbytes + 7) // 8


def model_buffer(model):
    """The model's :class:`Packed` buffer, built on first use, or None for a model too large to
    pack (more than :data:`PACK_MAX_BODIES` bodies).

    Building it rebinds the model's kernel arrays (:data:`PACKED_FIELDS`) to views of the buffer,
    with the same values, shapes and dtypes.
    """
    pk = model._packed
    if pk is not None:
        return pk
    if getattr(model, "flexible", None) is not None:
        # no buffer: the compiled calls compute rigid bodies only
        raise unsupported(model, RIGID_ALGORITHMS)
    n = model.n
    if n > PACK_MAX_BODIES:
        return None
    nq, nv = model.nq, model.nv
    qstarts = quaternion_starts(model)
    nquat = qstarts.shape[0]
    ns_j = (6 - np.asarray(model.nv_j)).astype(np.int64)
    idx_s = np.concatenate(([0], np.cumsum(ns_j)[:-1])).astype(np.int64)
    ns = int(ns_j.sum())
    ints = HEADER + 4 * n + nquat + _words(n)
    floats = 3 + n + 4 * 3 * n + 2 * 9 * n
    buf = np.zeros(ints + floats, dtype=np.int64)
    buf[:HEADER] = (MAGIC, n, nq, nv, nquat, ns, ints, 0)
    views = {}
    o = HEADER
    for name, a in (("parent", model.parent), ("idx_q", model.idx_q), ("idx_v", model.idx_v),
                    ("idx_s", idx_s), ("qstarts", qstarts)):
        k = a.shape[0]
        buf[o:o + k] = a
        views[name] = buf[o:o + k]
        o += k
    b8 = buf.view(np.int8)
    jt = b8[8 * o:8 * o + n]
    jt[:] = model.jtype
    views["jtype"] = jt
    f = buf.view(np.float64)
    o = ints
    for name, shape in (("gravity", (3,)), ("mass", (n,)), ("axis", (n, 3)), ("axis2", (n, 3)),
                        ("r_tree", (n, 3)), ("com", (n, 3)), ("E_tree", (n, 3, 3)), ("I_com", (n, 3, 3))):
        k = int(np.prod(shape))
        v = f[o:o + k].reshape(shape)
        v[...] = getattr(model, name)
        views[name] = v
        o += k
    for name in PACKED_FIELDS:
        object.__setattr__(model, name, views[name])
    # the quaternion starts are cached against the jtype array: keep the cache valid
    model._quaternion_starts = (model.jtype, views["qstarts"])
    pk = Packed(buf, n, nq, nv, ns, views["idx_s"], ns_j)
    model._packed = pk
    return pk


#: fixed part of the kernels' scratch in a workspace (the largest need of one call: ABA's passes)
SCRATCH = 192


def workspace_layout(n, nv):
    """(name, shape) of every array of a workspace, in buffer order; the last, ``scratch``, holds
    the kernels' small work arrays during a compiled call (SCRATCH + nv + 1 values)."""
    return (("E", (n, 3, 3)), ("r", (n, 3)), ("v", (n, 6)), ("c", (n, 6)), ("IA", (n, 6, 6)), ("pA", (n, 6)),
            ("a", (n, 6)), ("S", (nv, 6)), ("U", (nv, 6)), ("Dinv", (nv, 6)), ("u", (nv,)), ("qdd", (nv,)),
            ("tau", (nv,)), ("scratch", (SCRATCH + nv + 1,)))


@njit(cache=True)
def welded_size(n):
    """Length (float64 values) of the area after a workspace's arrays where the call path keeps
    the model with its welded bodies merged (``partree.algorithms.welded``): the number of bodies
    of the merged model (1) and the copy of the model buffer it was made from (HEADER + 3 + 37 n),
    the merged model's buffer, with room for n bodies and n quaternions (HEADER + 3 + 40 n), each
    body's representative and original index (2 n), placement in its representative (12 n),
    merged external wrench (6 n) and compact inertia (10 n), and one more compact inertia (10);
    none for a model too large to pack."""
    return 2 * HEADER + 17 + 107 * n if n <= PACK_MAX_BODIES else 0


@njit(cache=True)
def workspace_size(n, nv):
    """Length of a workspace buffer (float64 values)."""
    return 72 * n + 22 * nv + SCRATCH + 1 + welded_size(n)


@njit(cache=True)
def workspace_length(mb):
    """:func:`workspace_size` of the model of buffer ``mb``, in compiled code."""
    return workspace_size(mb[1], mb[3])


def workspace_nv(size, n):
    """nv of a workspace buffer of ``size`` values for n bodies (:func:`workspace_size` inverted)."""
    return (size - 72 * n - SCRATCH - 1 - welded_size(n)) // 22


@njit(cache=True)
def welded_area(wb, n, nv):
    """The workspace's area for the merged model (:func:`welded_size`), as a raw view."""
    return raw_view(wb, 72 * n + 22 * nv + SCRATCH + 1, (welded_size(n),))


def cfa_workspace_size(ns):
    """Length of the constraint-force workspace: a flag (the q-independent constraint rows are
    computed) and the rows W^T (ns, 6)."""
    return 1 + 6 * ns


@intrinsic
def raw_view(typingctx, buf, offset, shape):
    """A C-contiguous view of the 1-D array ``buf`` starting at element ``offset``, of the shape
    given as a tuple, that holds no reference to ``buf``'s memory (its meminfo is null).

    Views made by slicing and reshaping count references to their buffer, twice or more each, and
    a call makes some thirty of them.  A raw view counts none, and neither do the views the
    kernels take of it (``E[i]``): it is valid as long as ``buf`` is, which for the compiled calls
    is the whole call (the caller holds the buffers), and no kernel keeps an array beyond its call.
    """
    ndim = len(shape)
    retty = types.Array(buf.dtype, ndim, "C")

    def codegen(context, builder, signature, args):
        bufv, off, shp = args
        src = make_array(buf)(context, builder, bufv)
        dst = make_array(retty)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(buf.dtype)))
        shapes = cgutils.unpack_tuple(builder, shp, ndim)
        strides = []
        acc = itemsize
        for extent in reversed(shapes):
            strides.append(acc)
            acc = builder.mul(acc, extent)
        strides.reverse()
        populate_array(dst, data=builder.gep(src.data, [off]), shape=shapes, strides=strides, itemsize=itemsize,
                       meminfo=None)
        return dst._getvalue()

    return retty(buf, offset, shape), codegen


@intrinsic
def unowned(typingctx, arr):
    """The same view of ``arr`` (data, shape, strides), holding no reference to its memory (its
    meminfo is null), as :func:`raw_view` makes them.

    A kernel called from Python gets arrays that count references, and each view it takes
    (``E[x]``, ``a[up]``) counts them again, with atomic operations: in a pass that takes a few
    views per body these cost as much as the arithmetic.  Rebinding the arguments at the kernel's
    entry (``E = unowned(E)``) makes those views free.  Valid while the caller holds ``arr``: the
    whole call, as no kernel keeps an array beyond it."""
    if not isinstance(arr, types.Array):
        return None         # no implementation: numba's typing error

    def codegen(context, builder, signature, args):
        src = make_array(arr)(context, builder, args[0])
        dst = make_array(arr)(context, builder)
        populate_array(dst, data=src.data, shape=cgutils.unpack_tuple(builder, src.shape, arr.ndim),
                       strides=cgutils.unpack_tuple(builder, src.strides, arr.ndim), itemsize=src.itemsize,
                       meminfo=None)
        return dst._getvalue()

    return arr(arr), codegen


@njit(cache=True)
def model_views(mb):
    """The kernels' model arrays, as raw views of the model buffer ``mb``: parent, jtype,
    axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, idx_s, quaternion
    starts."""
    n = mb[1]
    nquat = mb[4]
    o = HEADER
    parent = raw_view(mb, o, (n,))
    idx_q = raw_view(mb, o + n, (n,))
    idx_v = raw_view(mb, o + 2 * n, (n,))
    idx_s = raw_view(mb, o + 3 * n, (n,))
    qstarts = raw_view(mb, o + 4 * n, (nquat,))
    jtype = raw_view(mb.view(np.int8), 8 * (o + 4 * n + nquat), (n,))
    f = mb.view(np.float64)
    o = mb[6]
    gravity = raw_view(f, o, (3,))
    o += 3
    mass = raw_view(f, o, (n,))
    o += n
    axis = raw_view(f, o, (n, 3))
    o += 3 * n
    axis2 = raw_view(f, o, (n, 3))
    o += 3 * n
    r_tree = raw_view(f, o, (n, 3))
    o += 3 * n
    com = raw_view(f, o, (n, 3))
    o += 3 * n
    E_tree = raw_view(f, o, (n, 3, 3))
    o += 9 * n
    I_com = raw_view(f, o, (n, 3, 3))
    return parent, jtype, axis, axis2, E_tree, r_tree, mass, com, I_com, idx_q, idx_v, gravity, idx_s, qstarts


@njit(cache=True)
def workspace_views(wb, n, nv, nb=-1):
    """The workspace arrays E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, tau and the scratch as
    raw views of ``wb`` (the order of :func:`workspace_layout`) for a model of n bodies; with
    ``nb`` >= 0, the per-body arrays cut to their first nb rows (the call path's merged model,
    ``partree.algorithms.welded``), the others where they are for n."""
    m = n if nb < 0 else nb
    E = raw_view(wb, 0, (m, 3, 3))
    o = 9 * n
    r = raw_view(wb, o, (m, 3))
    o += 3 * n
    v = raw_view(wb, o, (m, 6))
    o += 6 * n
    c = raw_view(wb, o, (m, 6))
    o += 6 * n
    IA = raw_view(wb, o, (m, 6, 6))
    o += 36 * n
    pA = raw_view(wb, o, (m, 6))
    o += 6 * n
    a = raw_view(wb, o, (m, 6))
    o += 6 * n
    S = raw_view(wb, o, (nv, 6))
    o += 6 * nv
    U = raw_view(wb, o, (nv, 6))
    o += 6 * nv
    Dinv = raw_view(wb, o, (nv, 6))
    o += 6 * nv
    u = raw_view(wb, o, (nv,))
    o += nv
    qdd = raw_view(wb, o, (nv,))
    o += nv
    tau = raw_view(wb, o, (nv,))
    o += nv
    scratch = raw_view(wb, o, (SCRATCH + nv + 1,))
    return E, r, v, c, IA, pA, a, S, U, Dinv, u, qdd, tau, scratch


@njit(cache=True)
def _all_finite(x):
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


@njit(cache=True)
def _all_finite2(x):
    for i in range(x.shape[0]):
        for k in range(x.shape[1]):
            if not np.isfinite(x[i, k]):
                return False
    return True


@njit(cache=True)
def check_buffers(mb, wb):
    """:data:`OK`, or :data:`ERR_DATA` when ``mb`` is not a model buffer or the workspace ``wb``
    has not the size of this model's."""
    if mb[0] != MAGIC or wb.shape[0] != workspace_length(mb):
        return ERR_DATA
    return OK


@njit(cache=True)
def check_q(mb, q, check):
    """:data:`OK`, or :data:`ERR_SHAPE` when q has not nq values, or (with ``check``)
    :data:`ERR_VALUE` when one is not finite or a quaternion is zero (the rules of
    ``partree.checks.state``)."""
    if q.shape[0] != mb[2]:
        return ERR_SHAPE
    if check:
        if not _all_finite(q):
            return ERR_VALUE
        o = HEADER + 4 * mb[1]
        for k in range(mb[4]):
            i = mb[o + k]
            n2 = q[i] * q[i] + q[i + 1] * q[i + 1] + q[i + 2] * q[i + 2] + q[i + 3] * q[i + 3]
            if not n2 > QUAT_MIN_NORM2:
                return ERR_VALUE
    return OK


@njit(cache=True)
def check_v(mb, x, check):
    """:data:`OK`, or :data:`ERR_SHAPE` when x has not nv values, or (with ``check``)
    :data:`ERR_VALUE` when one is not finite."""
    if x.shape[0] != mb[3]:
        return ERR_SHAPE
    if check and not _all_finite(x):
        return ERR_VALUE
    return OK


@njit(cache=True)
def check_fext(mb, fext, check):
    """:data:`OK`, or :data:`ERR_SHAPE` when f_ext is neither (n, 6) nor (0, 6) (no external
    forces), or (with ``check``) :data:`ERR_VALUE` when a value is not finite."""
    if fext.shape[0] != 0 and fext.shape[0] != mb[1]:
        return ERR_SHAPE
    if fext.shape[1] != 6:
        return ERR_SHAPE
    if check and not _all_finite2(fext):
        return ERR_VALUE
    return OK


#: f_ext of a call without external forces: no rows
NO_FORCES = np.zeros((0, 6))


def restrict(dispatcher, signature):
    """Compile ``dispatcher`` for ``signature`` (loading numba's disk cache where it holds it) and
    refuse any other argument types from then on: a call with other types raises TypeError
    instead of compiling a specialization for them.  The Python side of the call path relies on
    this to hand arrays straight to the compiled call and to check and convert them only when
    that call refuses them."""
    if dispatcher._can_compile:
        dispatcher.compile(signature)
        dispatcher.disable_compile()


@njit(cache=True)
def check_state(mb, wb, q, qd, x, fext, check):
    """The checks of a call on a state: the buffers, q (nq), qd and x (nv: tau or qdd) and f_ext,
    in that order; :data:`OK` or the first error code."""
    e = check_buffers(mb, wb)
    if e == OK:
        e = check_q(mb, q, check)
    if e == OK:
        e = check_v(mb, qd, check)
    if e == OK:
        e = check_v(mb, x, check)
    if e == OK:
        e = check_fext(mb, fext, check)
    return e
