"""A small communicator over TCP sockets, with mpi4py's call signatures, for the ranks of a Dask
simulation (or any set of processes or threads that can reach each other).

:class:`SocketComm` implements exactly what the MPI engine and the MPI simulation backend call on
a communicator: ``Get_rank``, ``Get_size``, ``Gatherv``, ``Scatterv``, ``Allreduce`` (numpy
buffers, sent raw after a small header), ``allreduce``, ``allgather``, ``gather``, ``bcast``,
``send``, ``recv``, ``reduce`` (Python objects, pickled), ``Barrier`` and ``Abort``.

Topology: a star.  Rank 0 listens (:func:`listen`); every other rank connects to it
(:meth:`SocketComm.connect`) and sends its rank and the run's token; rank 0 accepts them
(:meth:`SocketComm.accept`).  Every collective goes through rank 0, which receives the other
ranks' contributions in rank order, so the reductions (``allreduce``, ``reduce``,
``Allreduce``) add (or take the maximum / minimum) in rank order, left to right: the same bits on
every rank and on every run.  Point-to-point messages (``send`` / ``recv``) go between rank 0 and
another rank; a message that arrives while another tag is awaited waits in a queue, as in MPI.

``Abort`` closes every socket of the rank: the other ranks' pending and next calls raise
:class:`CommAborted` (a ``ConnectionError``), and a rank whose call fails so closes its own
sockets too, so an error on one rank ends the whole group instead of leaving the others waiting
in a collective.  A peer that dies (its process killed) does the same through the closed
connection.

``local_comms(n)`` returns n connected communicators in one process (one per thread: the socket
waits release the GIL), for tests and for several ranks sharing one Dask worker.
"""
from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time

import numpy as np

#: message header: tag (int64), kind (0 pickled object, 1 raw bytes), payload bytes (uint64)
_HEAD = struct.Struct("<qBQ")
#: the tag of the collectives' messages (user tags are >= 0)
_COLL = -7
ANY_TAG = -1
ANY_SOURCE = -2
#: messages up to this size are sent with their header in one call
_SMALL = 1 << 16
#: how long a rank waiting for a message polls without giving way (seconds), then how long it
#: polls giving its core away between polls before it blocks (see ``SocketComm._recv_exact``)
SPIN_SECONDS = 5e-5
YIELD_SECONDS = 2e-3
#: the non-blocking flag of ``recv_into`` (0 where the platform has none: reads then block at once)
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0) if hasattr(os, "sched_yield") else 0


class CommAborted(ConnectionError):
    """The group of ranks ended: a rank called ``Abort``, or a peer's connection closed."""


# the reduction operations: mpi4py's MPI.SUM / MAX / MIN when given, or these names
SUM, MAX, MIN = "sum", "max", "min"


def _op_name(op):
    if op is None:
        return SUM
    if isinstance(op, str):
        if op not in (SUM, MAX, MIN):
            raise ValueError(f"unknown reduction {op!r}")
        return op
    import sys

    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        for name, o in ((SUM, mpi.SUM), (MAX, mpi.MAX), (MIN, mpi.MIN)):
            if op == o:
                return name
    raise ValueError(f"unsupported reduction operation {op!r} (SUM, MAX, MIN)")


def _fold(op, values):
    """Reduce ``values`` (rank order) left to right."""
    name = _op_name(op)
    acc = values[0]
    for x in values[1:]:
        if name == SUM:
            acc = acc + x
        elif name == MAX:
            acc = np.maximum(acc, x) if isinstance(acc, np.ndarray) or isinstance(x, np.ndarray) else max(acc, x)
        else:
            acc = np.minimum(acc, x) if isinstance(acc, np.ndarray) or isinstance(x, np.ndarray) else min(acc, x)
    return acc


def _buf(spec):
    """The array of a buffer argument: an ndarray or mpi4py's ``[array, ...]`` forms."""
    if spec is None:
        return None
    if isinstance(spec, (list, tuple)):
        return spec[0]
    return spec


def _counts(spec):
    """(counts, displacements) of a vector buffer argument ``[array, (counts, displs)(, type)]``."""
    counts, displs = spec[1][0], spec[1][1]
    if displs is None:
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return [int(c) for c in counts], [int(d) for d in displs]


def listen(host=None, port=0):
    """Rank 0's listening socket.

    Parameters
    ----------
    host : str, optional
        The address to bind (default: every interface).
    port : int
        0: any free port.

    Returns
    -------
    socket.socket
        The listening socket (its port: ``getsockname()[1]``).
    """
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("" if host is None else host, int(port)))
    srv.listen(128)
    return srv


def _tune(s):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(None)
    return s


class SocketComm:
    """One rank of a group connected over TCP (see the module docstring).

    Build it with :meth:`accept` (rank 0) or :meth:`connect` (the others), or take a group of
    connected ones from :func:`local_comms`.

    Parameters
    ----------
    rank, size : int
        This rank and the number of ranks.
    socks : dict
        rank -> connected socket: every other rank on rank 0, ``{0: socket}`` elsewhere.
    """

    def __init__(self, rank, size, socks):
        self.rank, self.size = int(rank), int(size)
        self._socks = dict(socks)
        self._queued = {r: [] for r in self._socks}        # received, not yet matched (tag, kind, payload)
        self._aborted = False
        self.bytes_sent = 0

    # ------------------------------------------------------------------ set-up
    @classmethod
    def accept(cls, srv, size, token="", timeout=60.0):
        """Rank 0: accept the ``size - 1`` other ranks on the listening socket ``srv`` (closed
        afterwards).  Connections with another token are turned away."""
        socks = {}
        deadline = time.monotonic() + timeout
        try:
            while len(socks) < size - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"rank 0: {len(socks)} of {size - 1} ranks connected within {timeout} s")
                srv.settimeout(left)
                s, _ = srv.accept()
                _tune(s)
                try:
                    tag, kind, payload = cls._read(s)
                    tok, r = pickle.loads(payload)
                except (OSError, ValueError, pickle.UnpicklingError, EOFError):
                    s.close()
                    continue
                if tok != token or not (0 < r < size) or r in socks:
                    s.close()
                    continue
                socks[r] = s
        except BaseException:
            for s in socks.values():
                s.close()
            raise
        finally:
            srv.close()
        return cls(0, size, socks)

    @classmethod
    def connect(cls, rank, size, address, token="", timeout=60.0):
        """Rank ``rank`` (> 0): connect to rank 0 at ``address`` (host, port)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                s = socket.create_connection(tuple(address), timeout=max(deadline - time.monotonic(), 0.1))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        _tune(s)
        payload = pickle.dumps((token, int(rank)))
        s.sendall(_HEAD.pack(_COLL, 0, len(payload)) + payload)
        return cls(rank, size, {0: s})

    def close(self):
        """Close the connections (after the last call)."""
        for s in self._socks.values():
            try:
                s.close()
            except OSError:
                pass
        self._socks = {}

    # ------------------------------------------------------------------ wire
    @staticmethod
    def _recv_exact(s, n):
        """``n`` bytes from ``s``.  A wait polls (non-blocking reads) for ``SPIN_SECONDS``, then
        gives the core away between polls (``sched_yield``) up to ``YIELD_SECONDS``, then blocks:
        a message that comes within the polling is read without a sleeping process's wake-up
        (about 40 µs a message on a Linux loopback), and a long wait costs no CPU."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        t0 = None
        while got < n:
            if _DONTWAIT:
                try:
                    k = s.recv_into(view[got:], n - got, _DONTWAIT)
                except BlockingIOError:
                    now = time.perf_counter()
                    t0 = now if t0 is None else t0
                    if now - t0 < SPIN_SECONDS:
                        continue
                    if now - t0 < YIELD_SECONDS:
                        os.sched_yield()
                        continue
                    k = s.recv_into(view[got:], n - got)
            else:
                k = s.recv_into(view[got:], n - got)
            if k == 0:
                raise CommAborted("connection closed by the peer")
            got += k
        return buf

    @classmethod
    def _read(cls, s):
        tag, kind, n = _HEAD.unpack(cls._recv_exact(s, _HEAD.size))
        return tag, kind, cls._recv_exact(s, n) if n else bytearray()

    def _sock(self, peer):
        if self._aborted:
            raise CommAborted(f"rank {self.rank}: the communicator was aborted")
        try:
            return self._socks[peer]
        except KeyError:
            raise ValueError(f"rank {self.rank} has no connection to rank {peer} (a star around rank 0: "
                             f"point-to-point messages go between rank 0 and the others)") from None

    def _put(self, peer, tag, kind, payload):
        s = self._sock(peer)
        mv = memoryview(payload).cast("B")
        head = _HEAD.pack(tag, kind, mv.nbytes)
        try:
            if mv.nbytes <= _SMALL:
                s.sendall(head + mv.tobytes())
            else:
                s.sendall(head)
                s.sendall(mv)
        except OSError as e:
            self.Abort()                 # the group is broken: end the others' calls too
            raise CommAborted(f"rank {self.rank}: sending to rank {peer} failed ({e})") from None
        self.bytes_sent += mv.nbytes

    def _get(self, peer, tag):
        """The next message from ``peer`` with ``tag`` (ANY_TAG: any user tag): (tag, kind, payload)."""
        q = self._queued[peer] if peer in self._queued else None
        if q is None:
            self._sock(peer)
        for i, m in enumerate(q):
            if m[0] == tag or (tag == ANY_TAG and m[0] >= 0):
                return q.pop(i)
        s = self._sock(peer)
        while True:
            try:
                m = self._read(s)
            except OSError as e:         # CommAborted included (a closed connection)
                self.Abort()             # the group is broken: end the others' calls too
                raise CommAborted(f"rank {self.rank}: receiving from rank {peer} failed ({e})") from None
            if m[0] == tag or (tag == ANY_TAG and m[0] >= 0):
                return m
            q.append(m)

    def _send_obj(self, peer, obj, tag=_COLL):
        self._put(peer, tag, 0, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def _recv_obj(self, peer, tag=_COLL):
        t, kind, payload = self._get(peer, tag)
        return pickle.loads(payload) if kind == 0 else payload

    def _send_arr(self, peer, arr):
        self._put(peer, _COLL, 1, np.ascontiguousarray(arr))

    def _recv_into(self, peer, out):
        """Receive raw bytes from ``peer`` into the contiguous array ``out``."""
        _, kind, payload = self._get(peer, _COLL)
        if len(payload) != out.nbytes:
            raise CommAborted(f"rank {self.rank}: expected {out.nbytes} bytes from rank {peer}, got {len(payload)}")
        if out.nbytes:
            np.copyto(out.reshape(-1).view(np.uint8), np.frombuffer(payload, dtype=np.uint8))

    @staticmethod
    def _root0(root):
        if root != 0:
            raise NotImplementedError("SocketComm collectives have root 0")

    # ------------------------------------------------------------------ mpi4py's interface
    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def Barrier(self):
        self.bcast(self.gather(None, root=0), root=0)

    barrier = Barrier

    def bcast(self, obj, root=0):
        self._root0(root)
        if self.rank == 0:
            data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            for r in range(1, self.size):
                self._put(r, _COLL, 0, data)
            return obj
        return self._recv_obj(0)

    def gather(self, obj, root=0):
        self._root0(root)
        if self.rank == 0:
            return [obj] + [self._recv_obj(r) for r in range(1, self.size)]
        self._send_obj(0, obj)
        return None

    def allgather(self, obj):
        return self.bcast(self.gather(obj, root=0), root=0)

    def reduce(self, obj, op=None, root=0):
        got = self.gather(obj, root=root)
        return _fold(op, got) if self.rank == 0 else None

    def allreduce(self, obj, op=None):
        return self.bcast(self.reduce(obj, op=op, root=0), root=0)

    def send(self, obj, dest, tag=0):
        self._send_obj(int(dest), obj, tag=int(tag))

    def recv(self, buf=None, source=0, tag=ANY_TAG, status=None):
        if source == ANY_SOURCE:
            raise NotImplementedError("SocketComm.recv needs the source rank")
        return self._recv_obj(int(source), tag=int(tag))

    def Gatherv(self, sendbuf, recvbuf, root=0):
        self._root0(root)
        x = np.ascontiguousarray(_buf(sendbuf))
        if self.rank != 0:
            self._send_arr(0, x)
            return
        out = _buf(recvbuf)
        counts, displs = _counts(recvbuf)
        flat = out.reshape(-1)
        flat[displs[0]:displs[0] + counts[0]] = x.reshape(-1)
        for r in range(1, self.size):
            piece = flat[displs[r]:displs[r] + counts[r]]
            if piece.flags.c_contiguous:
                self._recv_into(r, piece)
            else:
                tmp = np.empty(counts[r], dtype=flat.dtype)
                self._recv_into(r, tmp)
                piece[:] = tmp

    def Scatterv(self, sendbuf, recvbuf, root=0):
        self._root0(root)
        out = _buf(recvbuf)
        if self.rank != 0:
            if out.flags.c_contiguous:
                self._recv_into(0, out)
            else:
                tmp = np.empty_like(out, order="C")
                self._recv_into(0, tmp)
                out[...] = tmp
            return
        full = np.ascontiguousarray(_buf(sendbuf)).reshape(-1)
        counts, displs = _counts(sendbuf)
        for r in range(1, self.size):
            self._send_arr(r, full[displs[r]:displs[r] + counts[r]])
        out.reshape(-1)[:] = full[displs[0]:displs[0] + counts[0]]

    def Allreduce(self, sendbuf, recvbuf, op=None):
        x = np.ascontiguousarray(_buf(sendbuf))
        out = _buf(recvbuf)
        if self.rank != 0:
            self._send_arr(0, x)
            self._recv_into(0, out)
            return
        vals = [x.copy()]
        for r in range(1, self.size):
            tmp = np.empty_like(x)
            self._recv_into(r, tmp)
            vals.append(tmp)
        res = np.ascontiguousarray(_fold(op, vals), dtype=x.dtype)
        for r in range(1, self.size):
            self._send_arr(r, res)
        out[...] = res.reshape(out.shape)

    def Abort(self, errorcode=1):
        """End the group: close this rank's connections (the others' calls then raise
        :class:`CommAborted`).  Returns (unlike MPI's, which ends the process): the error that
        called it goes on in this rank."""
        self._aborted = True
        for s in self._socks.values():
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def __repr__(self):
        return f"<SocketComm rank {self.rank} of {self.size}>"


def own_error(errors, also=()):
    """The first of ``errors`` (rank order) that a rank raised on its own: not the broken
    channel's consequence on the others (``CommAborted``, a closed connection, a timeout) nor one
    of ``also``; None if there is none."""
    for e in errors:
        if not isinstance(e, (ConnectionError, TimeoutError) + tuple(also)):
            return e
    return None


def address_host(address):
    """The host of a Dask-style address ``'tcp://host:port'`` (IPv6 brackets removed)."""
    rest = address.split("://", 1)[-1]
    return rest.rsplit(":", 1)[0].strip("[]")


def new_token():
    """A random token that a group's connections must present."""
    return os.urandom(8).hex()


def local_comms(size, token=None, timeout=60.0):
    """``size`` connected communicators in this process (rank r at index r), over the loopback
    interface: for ranks that run as threads of one process, and for tests."""
    token = new_token() if token is None else token
    if size == 1:
        return [SocketComm(0, 1, {})]
    srv = listen("127.0.0.1")
    addr = ("127.0.0.1", srv.getsockname()[1])
    out = [None] * size
    errs = []

    def acc():
        try:
            out[0] = SocketComm.accept(srv, size, token, timeout)
        except BaseException as e:   # noqa: BLE001 -- re-raised below
            errs.append(e)
    th = threading.Thread(target=acc, daemon=True)
    th.start()
    for r in range(1, size):
        out[r] = SocketComm.connect(r, size, addr, token, timeout)
    th.join()
    if errs:
        raise errs[0]
    return out
