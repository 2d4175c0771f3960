"""Prescribed joint motions given as data, for hybrid-dynamics runs from files and the command line.

``simulate(..., prescribed={joint: f})`` takes any ``f(t) -> (q, qd, qdd)``; the motions here are
such functions built from a few numbers, so that a run's prescribed motion can be written in
JSON (``partree simulate --prescribe``), recorded in the results' options and fingerprinted for
checkpoints:

* ``{"sine": {"amplitude": A, "omega": w, "phase": p, "offset": c}}``: q = c + A sin(w t + p)
  (``omega`` in rad/s; ``phase`` and ``offset`` default to 0);
* ``{"polynomial": [c0, c1, c2, ...]}``: q = c0 + c1 t + c2 t^2 + ... (a constant, a constant
  velocity, a constant acceleration, or any degree).

:func:`prescribed_from_json` reads ``{"joint name": motion, ...}`` from a JSON string or file.
Each named joint must have one degree of freedom (revolute or prismatic).
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from ..errors import PartreeInputError


class SineMotion:
    """q(t) = offset + amplitude sin(omega t + phase), with its first two derivatives."""

    def __init__(self, amplitude, omega, phase=0.0, offset=0.0):
        self.amplitude, self.omega, self.phase, self.offset = (_finite(amplitude, "amplitude"),
                                                               _finite(omega, "omega"), _finite(phase, "phase"),
                                                               _finite(offset, "offset"))

    def __call__(self, t):
        A, w = self.amplitude, self.omega
        s, c = math.sin(w * t + self.phase), math.cos(w * t + self.phase)
        return self.offset + A * s, A * w * c, -A * w * w * s

    def __repr__(self):
        return (f"SineMotion(amplitude={self.amplitude!r}, omega={self.omega!r}, phase={self.phase!r}, "
                f"offset={self.offset!r})")


class PolynomialMotion:
    """q(t) = sum_k coefficients[k] t^k, with its first two derivatives."""

    def __init__(self, coefficients):
        c = np.atleast_1d(np.asarray(coefficients, dtype=float))
        if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)):
            raise PartreeInputError(f"a polynomial motion needs a non-empty list of finite coefficients, got "
                                    f"{coefficients!r}")
        self.coefficients = c

    def __call__(self, t):
        c = self.coefficients
        p = np.polynomial.polynomial
        d1, d2 = p.polyder(c, 1), p.polyder(c, 2)
        return float(p.polyval(t, c)), float(p.polyval(t, d1)) if d1.size else 0.0, \
            float(p.polyval(t, d2)) if d2.size else 0.0

    def __repr__(self):
        return f"PolynomialMotion({self.coefficients.tolist()!r})"


def _finite(x, name):
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise PartreeInputError(f"a sine motion's {name} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise PartreeInputError(f"a sine motion's {name} must be finite, got {x!r}")
    return v


def motion(spec):
    """A motion from its JSON form: ``{"sine": {...}}`` or ``{"polynomial": [...]}`` (see the
    module docstring)."""
    if not isinstance(spec, dict) or len(spec) != 1:
        raise PartreeInputError(f"a prescribed motion is one of {{\"sine\": {{...}}}} or {{\"polynomial\": [...]}}, "
                                f"got {spec!r}")
    (kind, args), = spec.items()
    if kind == "sine":
        if not isinstance(args, dict):
            raise PartreeInputError(f"sine motion: give {{\"amplitude\": A, \"omega\": w, \"phase\": p, "
                                    f"\"offset\": c}}, got {args!r}")
        unknown = set(args) - {"amplitude", "omega", "phase", "offset"}
        if unknown or not {"amplitude", "omega"} <= set(args):
            raise PartreeInputError(f"sine motion: needs amplitude and omega (phase, offset optional); got keys "
                                    f"{sorted(args)}")
        return SineMotion(**args)
    if kind == "polynomial":
        return PolynomialMotion(args)
    raise PartreeInputError(f"unknown prescribed motion {kind!r}: the motions are 'sine' and 'polynomial'")


def prescribed_from_json(text, model):
    """``{joint name: motion}`` from a JSON object (a string, or the path of a .json file) naming
    joints of ``model`` with one degree of freedom each."""
    src = str(text)
    if os.path.isfile(src):
        with open(src) as f:
            src = f.read()
    try:
        data = json.loads(src)
    except json.JSONDecodeError as e:
        raise PartreeInputError(f"--prescribe: not a JSON object nor a JSON file ({e})") from None
    if not isinstance(data, dict) or not data:
        raise PartreeInputError("--prescribe: give a JSON object {\"joint name\": motion, ...}")
    out = {}
    for name, spec in data.items():
        if name not in model.joint_names:
            raise PartreeInputError(f"--prescribe: model {model.name!r} has no joint {name!r}")
        j = model.joint_names.index(name)
        if int(model.nv_j[j]) != 1:
            raise PartreeInputError(f"--prescribe: joint {name!r} has {int(model.nv_j[j])} degrees of freedom; "
                                    f"prescribed motions are for one-DOF joints (revolute, prismatic)")
        out[name] = motion(spec)
    return out


def initial_state(model, prescribed, q0, qd0, t0=0.0):
    """q0, qd0 with the prescribed joints' entries set to their motions at t0 (copies)."""
    q0, qd0 = np.array(q0, dtype=float), np.array(qd0, dtype=float)
    for name, f in prescribed.items():
        j = model.joint_names.index(name)
        q, qd, _ = f(t0)
        q0[model.idx_q[j]] = q
        qd0[model.idx_v[j]] = qd
    return q0, qd0
