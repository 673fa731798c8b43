"""Runs a scan body T times: the forward loop of the scan primitive.

The passes of loop/ decide where each equation runs (once, per chunk of steps, or per step)
and loop/emit.py prints that as straight-line Python; this file allocates the output stacks
and runs it. A y that is the carry shares one history buffer with the carry residuals, a y that
is an x is the xs array itself, never a copy.
Imports backends, the logger and the scan modules below it.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from .. import backends, logs
from .loop.emit import generate
from .loop import compile_program
from .loop.ir import STEP

_log = logs.get("numba")
CHUNK_BYTES = 1 << 19  # budget for the per-chunk temporaries of batched work
MIN_CHUNK = 16


class CompiledBody:
    """A body graph compiled for the loop; call it with (T, init, xs, consts) arrays.
    With compiler="numba", its step loop also as a numba kernel (loop/native.py), which runs
    on NumPy arrays whenever it is proved to apply and its step's values are small; the
    NumPy loop otherwise."""

    def __init__(self, graph, num_carry, num_xs, reverse, sum_carries=(), compiler="numpy"):
        self.program = compile_program(graph, num_carry, num_xs, reverse, sum_carries)
        self.source, self._run = generate(self.program)
        self.num_carry, self.reverse = num_carry, reverse
        self.native, self.native_note = None, None
        # "auto": the kernel compiles in a background process, and a body numba cannot take
        # runs as the NumPy loop with a note on the log (the user asked for no compiler).
        self.quiet = compiler == "auto"
        self.choice = None  # under "auto": the kernel or the NumPy loop, by their times
        self.kernel_raised = False  # in this call, the kernel raised and NumPy's loop ran
        if compiler in ("numba", "auto"):
            self._build_native()

    def _build_native(self):
        from .loop import native  # numba only when asked for

        # ("auto" found numba installed; a broken one fails in the background process.)
        why = None if self.quiet else native.missing()
        if why is not None:
            raise ImportError(f"scan: {why}")
        prog = self.program
        # a carry the body returns as it came in (a model's parameters through a rollout)
        # is read, never computed or written per step: it counts as a closed-over value does;
        # so does a gradient accumulator, summed per chunk outside the kernel (a closed-over
        # X's gradient, [N, N], takes one row of each step's work)
        changed = [v for i, (v, out) in enumerate(zip(prog.carry_in, prog.carry_out))
                   if out is not v and i not in prog.accumulators]
        why = native.numpy_loop_is_faster([prog.eqns[n] for n in prog.in_section(STEP)],
                                          changed, measured=self.quiet)
        if why is not None:
            self.native_note = f"{why}, where the NumPy loop is faster"
            _log.info("scan body %r runs as the NumPy loop: %s", prog.graph.name,
                      self.native_note)
            return
        try:
            self.native = native.build(self.program, background=self.quiet)
        except native.Unsupported as e:
            self._fall_back(f"it has {e}")
        if self.native is not None and self.quiet:
            self.choice = native.TierChoice(native.describe(self.program))

    def _fall_back(self, why):
        """Once per body (this object is cached on its graph): a warning (only a log entry
        under "auto"), and a record."""
        self.native, self.native_note = None, why
        if self.quiet:
            _log.info("scan body %r runs as the NumPy loop: numba does not compile it: %s",
                      self.program.graph.name, why)
            return
        message = (f"scan: compiler='numba' does not compile the body "
                   f"{self.program.graph.name!r}: {why}. It runs as the NumPy loop (the same "
                   "values, slower); scanlib.scan_plan(...) prints the body.")
        _log.warning("%s", message)
        warnings.warn(message, NumbaFallbackWarning, stacklevel=4)

    def _run_native(self, args):
        """The numba loop's results, or None when the NumPy loop must run instead: the
        kernel is still compiling in the background, or was not proved for these types
        (from now on, NumPy), or it raised (NumPy's loop then raises its own error, or gives
        the values)."""
        from .loop import native

        if self.native.kernel.waiting():
            return None
        try:
            return self.native.run(*args)
        except native.NotReady:
            pass
        except native.NotProved as e:
            self._fall_back(str(e))
        except native.KERNEL_ERRORS:  # NumPy's loop raises its own error (or has values)
            self.kernel_raised = True
        return None

    def chunk_length(self, T):
        per_step = self.program.storage.per_step_bytes
        if T <= MIN_CHUNK or not per_step:
            return max(T, 1)
        c = max(MIN_CHUNK, CHUNK_BYTES // per_step)
        n_chunks = -(-T // c)
        return -(-T // n_chunks)  # equal chunks

    def __call__(self, length, init, xs, consts):
        """Run the loop; returns (final carry values, ys arrays)."""
        T, prog, mem = length, self.program, self.program.storage
        arrays = init + xs + consts
        xp = backends.xp_of(*arrays) if arrays else np
        if T == 0:
            return list(init), [xp.empty((0,) + v.shape, v.dtype) for v in prog.y_out]
        C = self.chunk_length(T)
        stacks = [xp.empty((T,) + v.shape, v.dtype) for v in mem.stacked]
        hists = []
        for i in mem.hist:
            v = prog.carry_in[i]
            h = xp.empty((T + 1,) + v.shape, v.dtype)
            h[T if self.reverse else 0] = init[i]
            hists.append(h)
        scratch = [xp.empty((C,) + v.shape, v.dtype) for v in mem.scratch]
        args = (xp, T, C, *init, *xs, *consts, *stacks, *hists, *scratch)
        # Under np.errstate(...="raise") NumPy raises where a kernel would not: NumPy runs.
        res, choice, self.kernel_raised = None, self.choice, False
        start = time.perf_counter()
        if self.native is not None and xp is np:
            from .loop import native

            if not native.numpy_errstate_forbids() and (choice is None or
                                                        choice.kernel_turn()):
                res = self._run_native(args)
                if res is not None and choice is not None:
                    choice.record("kernel", time.perf_counter() - start, T)
        if res is None:
            numpy_start = time.perf_counter()
            try:
                res = self._run(*args)
            except IndexError as e:
                raise IndexError(self._index_error(e, T)) from None
            if choice is not None and self.native is not None:
                # A kernel that raised and left the call to NumPy's loop cost both.
                choice.record(*("kernel", time.perf_counter() - start) if self.kernel_raised
                              else ("numpy", time.perf_counter() - numpy_start), T)
        carry, broadcast = list(res[:self.num_carry]), list(res[self.num_carry:])
        ys = []
        for place, v in zip(mem.ys, prog.y_out):
            if place.kind == "stack":
                ys.append(stacks[place.index])
            elif place.kind == "xs":
                ys.append(xs[place.index])
            elif place.kind in ("hist_in", "hist_out"):
                h = hists[mem.hist.index(place.index)]
                ys.append(h[1:] if (place.kind == "hist_out") != self.reverse else h[:T])
            else:
                value = broadcast.pop(0)
                ys.append(xp.broadcast_to(xp.asarray(value, dtype=v.dtype), (T,) + v.shape))
        return carry, ys


    def _index_error(self, e, T):
        """NumPy's IndexError from inside the loop, with the step it happened at and the fix.
        The step is read from the generated loop's frame: `t` in the per-step body, `t0`
        and `t1` in a chunk's batched work."""
        tb, where = e.__traceback__, ""
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code.co_filename.startswith("<scanlib-generated scan loop"):
                lines = self.source.splitlines()
                line = lines[tb.tb_lineno - 1] if tb.tb_lineno <= len(lines) else ""
                depth = len(line) - len(line.lstrip())
                loc = frame.f_locals
                if depth >= 12 and "t" in loc:
                    where = f" at step t={loc['t']}"
                elif depth >= 8 and "t0" in loc:
                    row = getattr(e, "chunk_row", None)
                    where = (f" at step t={loc['t0'] + row}" if row is not None
                             else f" in steps t={loc['t0']}..{loc['t1'] - 1}")
            tb = tb.tb_next
        return (f"scan: an index inside f is out of range{where} (of T={T} steps): {e}. "
                "NumPy raises here, where JAX under jit clamps the index silently: read with "
                "scanlib.take(x, i, axis=..., mode='clip') to clamp it as JAX does, or fix the "
                "index (or the scan's length).")


def compiled(graph, num_carry, num_xs, reverse, sum_carries=(), compiler="numpy"):
    """The CompiledBody of a graph, built once and cached on it. `sum_carries`: the carries
    that are gradient accumulators, whose additions the loop may reorder; `compiler`:
    "numpy", "numba" or "auto" (an entry of each, never one for another)."""
    cache = graph._compiled
    if cache is None:
        cache = graph._compiled = {}
    key = (num_carry, num_xs, reverse, tuple(sum_carries), compiler)
    if key not in cache:
        cache[key] = CompiledBody(graph, num_carry, num_xs, reverse, sum_carries, compiler)
    return cache[key]


class NumbaFallbackWarning(UserWarning):
    """A scan asked for compiler="numba" runs (a body of it) as the NumPy loop: numba has no
    form of one of its primitives, or would type a value otherwise than NumPy. The values are
    the NumPy loop's. Silence it with the warnings module:

    >>> import scanlib as sl
    >>> sl.NumbaFallbackWarning.__mro__[1].__name__  # warnings.simplefilter("ignore", it)
    'UserWarning'
    """
