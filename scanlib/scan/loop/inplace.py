"""The in-place forms of indexed updates that the generated loop (emit.py) and the program
interpreter (interp.py) call: a row written into a loop-owned carry buffer, a row added into
it, and a chunk's rows added into a gradient accumulator. Each computes what its functional
primitive (ops/structural.py) computes, without copying the whole buffer.

Imports backends and ops.structural.
"""

from __future__ import annotations

import numpy as np

from ... import backends
from ...ops.structural import fill_index, scatter_add_impl, Slot, distinct_rows
from ...ops.structural import set_rows  # noqa: F401  (the in-place scatter_set, shared)


def owned_copy(a):
    """A writable copy of a carry's initial value that the loop then owns (the caller's array
    is never written into). A broadcast zero (an unread output's cotangent) becomes fresh
    zeros, which the allocator gives without reading the stride-0 source."""
    xp = backends.xp_of(a)
    if a.ndim and a.size and not any(a.strides) and not a[(0,) * a.ndim]:
        return xp.zeros(a.shape, a.dtype)
    return a.copy()


def add_rows(buf, v, *arrays, index, shape):
    """buf + scatter_add(v, *arrays) in buf itself. A repeated position gets its values added
    one at a time (np.add.at); the pass allows that for gradient sums only."""
    where = fill_index(index, arrays)
    if arrays and any(np.shape(a) != () for a in arrays):
        backends.xp_of(buf).add.at(buf, where, v)
    else:  # one position per entry: a plain in-place add
        buf[where] += v


def chunk_scatter(index, batched, g_batched, g_ndim, row_ndim):
    """fn(acc, g, *arrays) adding every step's scatter_add(g_t, *arrays_t, index) into acc,
    in place, for a chunk's stacked g ([C, ...] when g_batched) and index arrays ([C, ...]
    where batched). One np.add.at for the chunk when the first index item is an index array
    (NumPy then puts the broadcast index axes first, so a leading axis of steps stays first);
    one per step otherwise. Gradient accumulators only: repeated positions are summed in
    another order than the loop's."""
    one_call = bool(index) and type(index[0]) is Slot and any(batched)
    pad = (1,) * (row_ndim - g_ndim)  # g broadcasts against its row: align it behind the steps

    def run(acc, g, *arrays):
        xp = backends.xp_of(acc)
        if g_batched:
            g = g.reshape(g.shape[:1] + pad + g.shape[1:])
        if not arrays:
            acc[index] += g.sum(axis=0) if g_batched else g
            return
        if one_call:
            if len(arrays) == 1 and arrays[0].ndim == 1:
                rows = distinct_rows(xp, arrays[0], acc.shape[0])
                if rows is not None:  # distinct rows: no position is added twice
                    acc[(rows,) + tuple(index[1:])] += g
                    return
            idx = [a if b else a.reshape((1,) + a.shape) for a, b in zip(arrays, batched)]
            xp.add.at(acc, fill_index(index, idx), g)
            return
        steps = next((len(a) for a, b in zip(arrays, batched) if b), len(g))
        for r in range(steps):
            step_arrays = [a[r] if b else a for a, b in zip(arrays, batched)]
            xp.add.at(acc, fill_index(index, step_arrays), g[r] if g_batched else g)
    return run


def scatter_sum_reference(acc, g, arrays, index, batched, g_batched):
    """acc + the sum over a chunk's steps of scatter_add(g_t, *arrays_t): the meaning of
    SumScatter, step by step through the primitive's own impl (for the interpreter)."""
    steps = next((len(a) for a, b in zip(arrays, batched) if b), None)
    steps = len(g) if steps is None else steps
    for r in range(steps):
        step_arrays = [a[r] if b else a for a, b in zip(arrays, batched)]
        acc = acc + scatter_add_impl(g[r] if g_batched else g, *step_arrays, index=index,
                                      shape=acc.shape)
    return acc
