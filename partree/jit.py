"""Compiled kernels: telling the user when numba compiles them.

partree's kernels are compiled by numba on first use and cached on disk next to the sources, so
only the first run after an install or an update compiles (about a minute in all, a few seconds
to tens of seconds per command); later runs load them.  :class:`CompileNotice` says so while it
happens, through numba's event API.
"""
from __future__ import annotations

import contextlib
import time


class CompileNotice:
    """Says when numba compiles kernels (a cold cache: the first run after an install or an
    update), through numba's event API (``numba.core.event``, event ``numba:compile``, which
    fires on compilation, not on loading a cached kernel): a note when the first compilation
    starts, and how long the start-up took when :meth:`done` is called.

    Parameters
    ----------
    say : callable or None
        Prints one line (None: silent).
    """

    def __init__(self, say):
        self.say = say
        self.t0 = time.perf_counter()
        self.compiled = False
        self._stack = None

    def __enter__(self):
        if self.say is None:
            return self
        from numba.core import event

        notice = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                if not notice.compiled:
                    notice.compiled = True
                    notice.say("compiling kernels (once: numba caches them for later runs)...")

            def on_end(self, ev):
                pass

        self._stack = contextlib.ExitStack()
        self._stack.enter_context(event.install_listener("numba:compile", _Listener()))
        return self

    def done(self):
        """Stop listening; report the start-up time when kernels were compiled."""
        if self._stack is not None:
            self._stack.close()
            self._stack = None
            if self.compiled:
                self.say(f"kernels ready after {time.perf_counter() - self.t0:.1f} s (compiled once; later runs "
                         f"load them from numba's cache)")

    def __exit__(self, *exc):
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        return False
