"""Batching rules: how a primitive runs on many examples at once (inputs with a leading batch
axis). The loop compiler uses them for a scan body's work that does not depend on the carry
(`x_t @ U`, `x_t + b`: the steps are the batch), and scanlib.vmap for every equation of a
traced function (the examples are the batch). A primitive names its rule where it is declared
(`batch=`); an elementwise primitive needs none (`elementwise_rule` serves them all).

A rule gets (prim, params, batched flags, per-example input shapes, per-example output shape,
ops) and returns a function of the full inputs (batched ones with the leading axis), or None
when it cannot batch that case. `ops` is what the function computes with: ArrayOps (arrays, the
loop compiler's, the default) or vmap's TensorOps (the same three functions on Tensors, which
record equations and tape nodes), so one rule serves both. Imports backends only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backends


class ArrayOps:
    """The loop compiler's ops: a primitive's impl on arrays. `loop` is True for it: a rule may
    decline a case there where the per-step loop is faster, and must keep what it batches
    there unchanged (tests/test_golden_loops.py pins the generated loops)."""

    loop = True

    @staticmethod
    def bind(prim, *args, **params):
        return prim.impl(*args, **params)

    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)

    @staticmethod
    def broadcast_to(x, shape):
        return backends.xp_of(x).broadcast_to(x, shape)

    @staticmethod
    def transpose(x, axes):
        return x.transpose(axes)

    @staticmethod
    def arange(n, like):
        """0, 1, ..., n - 1 (int64) on like's device."""
        with backends.on_device(backends.device_of(like)):
            return backends.xp_of(like).arange(n, dtype=np.int64)


ARRAYS = ArrayOps()


def _size(args, batched):
    return next(a.shape[0] for a, b in zip(args, batched) if b)


def aligned(batched, shapes, rank, ops=ARRAYS):
    """Batched inputs of a lower per-example rank get 1s after their leading axis, so that
    they broadcast against the others example by example, not against the batch axis. None
    when every input already has that rank (nothing to do, at no cost per call)."""
    if not any(b and len(s) < rank for b, s in zip(batched, shapes)):
        return None

    def fix(args):
        T = _size(args, batched)
        return [ops.reshape(a, (T,) + (1,) * (rank - len(s)) + tuple(s)) if b and len(s) < rank
                else a for a, b, s in zip(args, batched, shapes)]
    return fix


def elementwise_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """For any primitive that broadcasts its inputs' leading axes as NumPy does: elementwise
    ops, and the stacked linear algebra of [..., m, n] operands (solve, inv, det, ...)."""
    fix = aligned(batched, shapes, max(len(s) for s in shapes), ops)
    if fix is None:
        return lambda *args: ops.bind(prim, *args, **params)
    return lambda *args: ops.bind(prim, *fix(args), **params)


def rows_times(x, y, out=None):
    """x[T, ..., K] @ y[K, N] as one 2-d product over all of x's rows. NumPy runs a stacked
    matmul as one small product per leading index: 1.2-1.7x slower at these sizes, 3x when
    y is a transposed view (the `g @ U.T` of a backward body)."""
    xp = backends.xp_of(x, y)
    K, N = y.shape
    rows = math.prod(x.shape[:-1])  # not -1: NumPy cannot infer it when K is 0
    if out is None:
        return xp.matmul(x.reshape(rows, K), y).reshape(x.shape[:-1] + (N,))
    if not out.flags.c_contiguous:  # its 2-d reshape would be a copy, not a view
        return xp.matmul(x, y, out=out)
    xp.matmul(x.reshape(rows, K), y, out=out.reshape(rows, N))
    return out


def matmul_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """Both operands have ndim >= 2, so matmul broadcasts its leading axes: aligned ranks
    batch it. The loop keeps the cases that need no alignment (the others run per step)."""
    if not ops.loop:
        return elementwise_rule(prim, params, batched, shapes, out_shape, ops)
    bx, by = batched
    if bx and not by and len(shapes[1]) == 2:
        return rows_times
    if (bx and by and len(shapes[0]) == len(shapes[1])) or (by and not bx and len(shapes[0]) == 2):
        return lambda x, y: x @ y
    return None


def reshape_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    return lambda x: ops.bind(prim, x, shape=(x.shape[0],) + tuple(params["shape"]))


def transpose_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    axes = (0,) + tuple(a + 1 for a in params["axes"])
    return lambda x: ops.bind(prim, x, axes=axes)


def broadcast_to_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    shape = tuple(params["shape"])
    pad = (1,) * (len(shape) - len(shapes[0]))

    def run(x):
        T = x.shape[0]
        return ops.bind(prim, ops.reshape(x, (T,) + pad + tuple(shapes[0])), shape=(T,) + shape)

    return run


def reduce_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """sum, max, min, any, all: params axis (a sorted tuple, or None for every axis), keepdims."""
    axis = params["axis"]
    axis = tuple(range(1, len(shapes[0]) + 1)) if axis is None else tuple(a + 1 for a in axis)
    return lambda x: ops.bind(prim, x, axis=axis, keepdims=params["keepdims"])


def index_reduce_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """argmax, argmin: params axis (an int, or None for the flattened input), keepdims."""
    axis, shape = params["axis"], tuple(shapes[0])
    if axis is not None:
        return lambda x: ops.bind(prim, x, axis=axis % len(shape) + 1,
                                  keepdims=params["keepdims"])

    def flat(x):
        B = x.shape[0]
        out = ops.bind(prim, ops.reshape(x, (B, int(np.prod(shape, dtype=np.int64)))), axis=1,
                       keepdims=False)
        return ops.reshape(out, (B,) + tuple(out_shape))

    return flat


def axis_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """A primitive of one input whose int param `axis` names an axis of it (cumsum, argsort,
    unstack, split): the same axis, one further along."""
    axis = params["axis"] % len(shapes[0]) + 1
    return lambda x: ops.bind(prim, x, **{**params, "axis": axis})


def joining_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """concatenate and stack along `axis`: unbatched inputs are broadcast along the batch axis
    first (a view), so every input has it."""
    axis = params["axis"] % len(out_shape) + 1

    def run(*xs):
        B = _size(xs, batched)
        xs = [x if b else ops.broadcast_to(x, (B,) + tuple(s))
              for x, b, s in zip(xs, batched, shapes)]
        return ops.bind(prim, *xs, **{**params, "axis": axis})

    return run


def leading_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """A primitive that maps over its inputs' leading axes whatever they are (device_put; v of
    searchsorted): the same call. Only where every batched input is the mapped one (first)."""
    if any(batched[1:]):
        return None
    return lambda *args: ops.bind(prim, *args, **params)


def first_free_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """searchsorted(a, v): a batch of v's is one call (any shape of v); a batch of a's is not."""
    if batched[0]:
        return None
    return lambda *args: ops.bind(prim, *args, **params)


# --- indexing: templates as ops/structural.py writes them ----------------------------------------
# A template item is basic (a slice, None, Ellipsis, an int or bool) or stands for an index
# array, an input of the equation after the indexed one.
def is_slice_like(item):
    return item is None or item is Ellipsis or isinstance(item, slice)


def prefix_keeps_layout(index, n_arrays):
    """Whether x[(slice(None),) + index] has x[index]'s layout after a new leading axis.

    Advanced indices (arrays, and ints or bools beside them) that stand next to each other
    put their result axes where they stand; apart, NumPy moves those axes to the front, in
    front of the new one too."""
    if not n_arrays:
        return True
    if any(isinstance(t, (bool, np.bool_)) for t in index):  # a 0-d mask among arrays
        return False
    where = [i for i, t in enumerate(index) if not is_slice_like(t)]
    return where == list(range(where[0], where[-1] + 1))


def getitem_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """x[index] for every example: with the same index arrays (inputs after x) for all, or a
    shared x gathered at each example's indices (an embedding lookup). The loop batches basic
    indexing only."""
    index, n_arrays = tuple(params["index"]), len(batched) - 1
    if n_arrays and ops.loop or not prefix_keeps_layout(index, n_arrays):
        return None
    if any(batched[1:]):
        return None if batched[0] else _gather_rule(prim, index, batched, shapes, ops)
    index = (slice(None),) + index
    return lambda x, *arrays: ops.bind(prim, x, *arrays, index=index)


def _gather_rule(prim, index, batched, shapes, ops):
    """x[arrays...] with x shared and index arrays batched: where the advanced indices lead
    the index, their broadcast shape leads the result, so a batch axis in front of every
    batched array (ranks aligned) is the batch axis of the result."""
    if is_slice_like(index[0]):
        return None
    fix = aligned(batched[1:], shapes[1:], max(len(s) for s in shapes[1:]), ops)
    if fix is None:
        return lambda x, *arrays: ops.bind(prim, x, *arrays, index=index)
    return lambda x, *arrays: ops.bind(prim, x, *fix(arrays), index=index)


def scatter_add_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    """getitem's VJP (g added into zeros at index) for every example, with the same index.
    The loop keeps it per step (batched there, it changes the LSTM's backward loop)."""
    index, n_arrays = tuple(params["index"]), len(batched) - 1
    if ops.loop or any(batched[1:]) or not prefix_keeps_layout(index, n_arrays):
        return None
    index = (slice(None),) + index
    return lambda g, *arrays: ops.bind(prim, g, *arrays, index=index,
                                       shape=(g.shape[0],) + tuple(params["shape"]))


def einsum_rule(prim, params, batched, shapes, out_shape, ops=ARRAYS):
    ins, out = params["spec"].split("->")
    subs = ins.split(",")
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                  if c not in params["spec"])
    spec = ",".join(letter + s if b else s for s, b in zip(subs, batched)) + "->" + letter + out
    return lambda *xs: ops.bind(prim, *xs, spec=spec)
