"""The layout of a distributed run's pieces of the state (some parts of the tree, concatenated), and
what the distributed backends share."""
from __future__ import annotations

import numpy as np

from ..errors import PartreeInputError
from ..joints import PRISMATIC
from .dynamics import Dynamics
from .loop import Backend


class LocalLayout:
    """The joints of a list of parts, concatenated (part after part, each in its own local
    numbering): the model-like object a ``StateSpace`` needs (jtype, idx_q, idx_v, nq_j, nv_j,
    nq, nv) plus where every piece sits in the global vectors (qsel, vsel, bodies).  A part with
    flexible bodies adds its modal coordinates after its joints, as scalar entries.

    Parameters
    ----------
    parts : list of PartKernel
        The parts (``partree.parallel.part.build_part``), in the order their pieces are
        concatenated.
    """

    def __init__(self, parts):
        self.parts = list(parts)
        jt, nqj, nvj, qsel, vsel, bod = [], [], [], [], [], []
        self.qsl, self.vsl, self.bsl = [], [], []
        oq = ov = ob = 0
        for pk in self.parts:
            # a part with flexible bodies: its joints, then its modal coordinates, each a scalar
            # of a vector space (a prismatic-like entry: q += dq) for the integrators
            nqj_p = getattr(pk, "nq_joints", pk.nq)
            nvj_p = getattr(pk, "nv_joints", pk.nv)
            ne = pk.nv - nvj_p
            jt.append(np.concatenate((np.asarray(pk.jtype), np.full(ne, PRISMATIC, dtype=np.asarray(pk.jtype).dtype))))
            nqj.append(np.concatenate((np.diff(np.append(pk.idx_q, nqj_p)), np.ones(ne, dtype=np.int64))))
            nvj.append(np.concatenate((np.diff(np.append(pk.idx_v, nvj_p)), np.ones(ne, dtype=np.int64))))
            qsel.append(pk.qsel)
            vsel.append(pk.vsel)
            bod.append(pk.bodies)
            self.qsl.append(slice(oq, oq + pk.nq))
            self.vsl.append(slice(ov, ov + pk.nv))
            self.bsl.append(slice(ob, ob + pk.m))
            oq += pk.nq
            ov += pk.nv
            ob += pk.m

        def cat(xs, dt=np.int64):
            return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt)

        self.jtype = cat(jt, np.asarray(self.parts[0].jtype).dtype if self.parts else np.int64)
        self.nq_j, self.nv_j = cat(nqj), cat(nvj)
        self.idx_q = np.concatenate(([0], np.cumsum(self.nq_j)[:-1])).astype(np.int64) if self.nq_j.size \
            else np.zeros(0, dtype=np.int64)
        self.idx_v = np.concatenate(([0], np.cumsum(self.nv_j)[:-1])).astype(np.int64) if self.nv_j.size \
            else np.zeros(0, dtype=np.int64)
        self.nq, self.nv, self.n = oq, ov, ob
        self.qsel, self.vsel, self.bodies = cat(qsel), cat(vsel), cat(bod)


class DistributedBackend(Backend):
    """What the MPI and Dask backends share: inputs restricted to the pieces of the state each
    part holds (inputs that need the whole state are refused)."""

    def dynamics(self, model, inputs, custom=None):
        if custom is not None:
            raise PartreeInputError("a custom dynamics function / StateSpace cannot be used with the distributed "
                                    "backends (they build their own local ones)")
        if getattr(model, "flexible", None) is not None:
            from .flexible import FlexibleDynamics
            dyn = FlexibleDynamics(model, **inputs)
        else:
            dyn = Dynamics(model, **inputs)
        dyn.restrict([], [], [])           # inputs that need the whole state are refused here
        return dyn
