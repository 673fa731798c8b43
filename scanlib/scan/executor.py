"""Runs a scan body T times: the forward loop of the scan primitive.

The passes of loop/ decide where each equation runs (once, per chunk of steps, or per step)
and loop/emit.py prints that as straight-line Python; this file allocates the output stacks
and runs it. A y that is the carry shares one history buffer with the carry residuals, a y that
is an x is the xs array itself, never a copy.
Imports backends and the scan modules below it.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from .loop.emit import generate
from .loop import compile_program

CHUNK_BYTES = 1 << 19  # budget for the per-chunk temporaries of batched work
MIN_CHUNK = 16


class CompiledBody:
    """A body graph compiled for the loop; call it with (T, init, xs, consts) arrays."""

    def __init__(self, graph, num_carry, num_xs, reverse, sum_carries=()):
        self.program = compile_program(graph, num_carry, num_xs, reverse, sum_carries)
        self.source, self._run = generate(self.program)
        self.num_carry, self.reverse = num_carry, reverse

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
        res = self._run(xp, T, C, *init, *xs, *consts, *stacks, *hists, *scratch)
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


def compiled(graph, num_carry, num_xs, reverse, sum_carries=()) -> CompiledBody:
    """The CompiledBody of a graph, built once and cached on it. `sum_carries`: the carries
    that are gradient accumulators, whose additions the loop may reorder."""
    cache = graph._compiled
    if cache is None:
        cache = graph._compiled = {}
    key = (num_carry, num_xs, reverse, tuple(sum_carries))
    if key not in cache:
        cache[key] = CompiledBody(graph, num_carry, num_xs, reverse, sum_carries)
    return cache[key]
