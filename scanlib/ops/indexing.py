"""Index templates, and vmap of indexed reads and writes whose index arrays are batched.

A template is the index of x[index] with each array replaced by a `Slot` naming an input of
the equation (ops/structural.py writes them). vmap batches x[index] with batched index
arrays as one read of the batched x at (arange(B), *index): the arange an index array too, so
each example reads its own rows; NumPy puts the batch and the arrays' broadcast axes first,
and where an example's own result has other axes before those, a transpose moves them back.
Writes (scatter_set, scatter_add) and last_writers are batched the same way. Imports
ops.batching (and so backends) only.
"""

from __future__ import annotations

import numpy as np

from . import batching


class Slot:
    """Stands in an index template for the i-th array index (an input of the equation)."""

    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"<index {self.i}>"

    # By position, so that two traces of `E[i]` have equal params and share a cache entry.
    def __eq__(self, other):
        return type(other) is Slot and other.i == self.i

    def __hash__(self):
        return hash(("Slot", self.i))


def fill_index(template, arrays):
    return tuple(arrays[t.i] if type(t) is Slot else t for t in template)


def indexed_layout(shape, index, array_shapes):
    """(the shape of x[index] for an x of `shape`, and how many of its axes come before the
    index arrays' broadcast axes): NumPy puts those axes where the array items stand when
    they stand together, else first."""
    arrays = bool(array_shapes)
    consumed = sum(1 for t in index if t is not None and t is not Ellipsis)
    dims, d = [], 0  # (item position, size) of each axis a basic item gives
    for pos, t in enumerate(index):
        if t is None:
            dims.append((pos, 1))
        elif t is Ellipsis:
            dims += [(pos, n) for n in shape[d:d + len(shape) - consumed]]
            d += len(shape) - consumed
        elif isinstance(t, slice):
            dims.append((pos, len(range(*t.indices(shape[d])))))
            d += 1
        else:
            d += 1
    if Ellipsis not in index:
        dims += [(len(index), n) for n in shape[d:]]
    advanced = [i for i, t in enumerate(index) if not batching.is_slice_like(t)] if arrays \
        else []  # without arrays, ints are basic indices
    if not advanced:
        return tuple(n for _, n in dims), 0
    broadcast = tuple(np.broadcast_shapes(*array_shapes))
    if advanced != list(range(advanced[0], advanced[-1] + 1)):
        return broadcast + tuple(n for _, n in dims), 0
    before = tuple(n for p, n in dims if p < advanced[0])
    return before + broadcast + tuple(n for p, n in dims if p > advanced[0]), len(before)


def _with_batch_arange(index, array_batched, array_shapes, region, before):
    """x[index] on a batch of examples whose index arrays are batched (or whose layout a
    leading slice would change): the batched x read at (arange(B), *index), the arange an
    index array too, so each example reads its own rows. NumPy then puts the batch and the
    arrays' broadcast axes first; `perm` moves the `before` axes back in front of those.
    Returns (the new template, a function of (ops, B, like, arrays) giving the new arrays,
    perm, its inverse, the batched layout's shape without B), or None for a template with
    a 0-d boolean (NumPy's rules for those are not followed here: the loop runs them)."""
    if any(isinstance(t, (bool, np.bool_)) for t in index):
        return None
    rank = len(np.broadcast_shapes(*array_shapes))
    template = (Slot(0),) + tuple(Slot(t.i + 1) if type(t) is Slot else t for t in index)

    def arrays_of(ops, B, like, arrays):
        arange = ops.reshape(ops.arange(B, like), (B,) + (1,) * rank)
        return [arange] + [ops.reshape(a, (B,) + (1,) * (rank - len(s)) + tuple(s)) if b else a
                           for a, b, s in zip(arrays, array_batched, array_shapes)]

    n = len(region) + 1
    perm = ((0,) + tuple(range(1 + rank, 1 + rank + before)) + tuple(range(1, 1 + rank))
            + tuple(range(1 + rank + before, n)))
    inverse = tuple(int(i) for i in np.argsort(perm))
    layout = tuple(((0,) + region)[i] for i in inverse)[1:]
    return template, arrays_of, perm, inverse, layout


def _moved(ops, x, perm):
    return x if perm == tuple(range(len(perm))) else ops.transpose(x, perm)


def getitem_rule(prim, params, batched, shapes, out_shape, ops):
    """x[index] per example with index arrays batched (x too, or shared): one read of the
    batched x at a batch arange and the arrays (_with_batch_arange)."""
    index = tuple(params["index"])
    found = _with_batch_arange(index, batched[1:], shapes[1:], tuple(out_shape),
                               indexed_layout(shapes[0], index, shapes[1:])[1])
    if found is None:
        return None
    template, arrays_of, perm, _, _ = found

    def run(x, *arrays):
        B = next(a.shape[0] for a, b in zip((x,) + arrays, batched) if b)
        x = x if batched[0] else ops.broadcast_to(x, (B,) + tuple(shapes[0]))
        return _moved(ops, ops.bind(prim, x, *arrays_of(ops, B, x, arrays), index=template),
                      perm)

    return run


def _updates(ops, v, b, B, region, inverse):
    """v (per example broadcastable to region, batched where b) as the batched layout of
    region with the batch axis first (vmap's scatter_set and scatter_add)."""
    if not b and np.ndim(v) == 0:
        return v
    s = tuple(v.shape[1:] if b else v.shape)
    v = ops.reshape(v, (B if b else 1,) + (1,) * (len(region) - len(s)) + s)
    return _moved(ops, ops.broadcast_to(v, (B,) + region), inverse)


def scatter_add_rule(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """batching.scatter_add_rule, and under vmap the cases it declines (index arrays batched,
    a layout a leading slice would change): g added at a batch arange and the arrays."""
    rule = batching.scatter_add_rule(prim, params, batched, shapes, out_shape, ops)
    if rule is not None or ops.loop:
        return rule
    index, shape = tuple(params["index"]), tuple(params["shape"])
    region, before = indexed_layout(shape, index, shapes[1:])
    found = _with_batch_arange(index, batched[1:], shapes[1:], region, before)
    if found is None:
        return None
    template, arrays_of, _, inverse, _ = found

    def run(g, *arrays):
        B = next(a.shape[0] for a, b in zip((g,) + arrays, batched) if b)
        g = _updates(ops, g, batched[0], B, region, inverse)
        return ops.bind(prim, g, *arrays_of(ops, B, g, arrays), index=template,
                        shape=(B,) + shape)

    return run


def last_writers_rule(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """Each example's last writers: the positions of every example apart (a batch arange)."""
    index, shape = tuple(params["index"]), tuple(params["shape"])
    if ops.loop:
        return None
    region, before = indexed_layout(shape, index, shapes)
    found = _with_batch_arange(index, batched, shapes, region, before)
    if found is None:
        return None
    template, arrays_of, perm, _, layout = found

    def run(*arrays):
        B = next(a.shape[0] for a, b in zip(arrays, batched) if b)
        out = ops.bind(prim, *arrays_of(ops, B, arrays[0], arrays), index=template,
                       shape=(B,) + shape, out_shape=(B,) + layout)
        return _moved(ops, out, perm)

    return run


def scatter_set_rule(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """x.at[index].set(v) per example, x, v and the index arrays batched in any combination:
    one write into the batched x, at a leading slice where the index arrays are shared (and
    that keeps the layout), else at a batch arange and the arrays (_with_batch_arange)."""
    if ops.loop:
        return None
    index, xs, array_shapes = tuple(params["index"]), tuple(shapes[0]), shapes[2:]
    region, before = indexed_layout(xs, index, array_shapes)
    if not any(batched[2:]) and batching.prefix_keeps_layout(index, len(array_shapes)):
        template, perm = (slice(None),) + index, None
        inverse = tuple(range(len(region) + 1))
    else:
        found = _with_batch_arange(index, batched[2:], array_shapes, region, before)
        if found is None:
            return None
        template, arrays_of, perm, inverse, _ = found

    def run(x, v, *arrays):
        B = next(a.shape[0] for a, b in zip((x, v) + arrays, batched) if b)
        x = x if batched[0] else ops.broadcast_to(x, (B,) + xs)
        v = _updates(ops, v, batched[1], B, region, inverse)
        if perm is not None:
            arrays = arrays_of(ops, B, x, arrays)
        return ops.bind(prim, x, v, *arrays, index=template, unique=params["unique"])

    return run
