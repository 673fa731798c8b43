"""Primitives that move or reduce data without arithmetic per element: reshape, transpose,
broadcast_to, indexing and its adjoint scatter_add, concatenate, sum and max; plus sum_to, the
one place that undoes broadcasting.

Imports backends, tape and ops.primitive/elementwise.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..tape import Tensor
from ..tape.graph import on_stand_ins
from . import batching, indexing, shapes
from .elementwise import astype, div, equal, where
from .primitive import Primitive, bind


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def normalize_axis(axis, ndim, what="axis"):
    """None -> None; an int or tuple -> a sorted tuple of non-negative axes (checked)."""
    if axis is None:
        return None
    if isinstance(axis, Tensor) or backends.is_array(axis):
        raise TypeError(f"{what} must be a Python int or a tuple of ints, got an array "
                        f"({axis!r}); axes decide shapes, so they cannot be tensors (pass "
                        "int(a) if it is a concrete value)")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{what} must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"{what} {a} is out of range for a tensor with {ndim} dimensions")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{what} {axis!r} names an axis twice")
    return tuple(sorted(out))


def _keepdims_shape(shape, axes):
    return tuple(1 if (axes is None or i in axes) else s for i, s in enumerate(shape))


# --- shape ---------------------------------------------------------------------------------
reshape_p = Primitive("reshape", lambda x, shape: x.reshape(shape),
                      lambda g, out, x, shape: (reshape_p(g, shape=x.shape),),
                      view=True, batch=batching.reshape_rule, linear=True)
transpose_p = Primitive(
    "transpose", lambda x, axes: x.transpose(axes),
    lambda g, out, x, axes: (transpose_p(g, axes=tuple(int(i) for i in np.argsort(axes))),),
    view=True, batch=batching.transpose_rule, linear=True)
broadcast_to_p = Primitive(
    "broadcast_to", lambda x, shape: _xp(x).broadcast_to(x, shape),
    lambda g, out, x, shape: (g,),  # the walk's sum_to folds g back to x's shape
    view=True, batch=batching.broadcast_to_rule, linear=True)


# --- indexing -------------------------------------------------------------------------------
Slot, fill_index = indexing.Slot, indexing.fill_index  # the templates (ops/indexing.py)


def scatter_add_impl(g, *arrays, index, shape):
    xp = _xp(g)
    out = xp.zeros(shape, dtype=g.dtype)
    if arrays:
        xp.add.at(out, fill_index(index, arrays), g)  # repeated indices accumulate
    else:
        out[index] = g
    return out


def _getitem_batch_rule(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """x[index] for every step: basic indexing of one batched input, or an unbatched x read
    at per-step index arrays (`X[t]` on a closed-over X) when the index starts with one, so
    that NumPy puts the steps' axis first (see _gather_steps)."""
    if not ops.loop:  # vmap: see batching.getitem_rule
        return (batching.getitem_rule(prim, params, batched, shapes, out_shape, ops)
                or indexing.getitem_rule(prim, params, batched, shapes, out_shape, ops))
    index = params["index"]
    if len(batched) == 1 and not any(type(i) is Slot for i in index):
        index = (slice(None),) + tuple(index)
        return lambda x: x[index]
    if batched[0] or not any(batched[1:]) or not index or type(index[0]) is not Slot:
        return None
    return _gather_steps(index, batched[1:])


def _gather_steps(index, batched):
    """x[index] at every step's index arrays ([C, ...] where batched) at once: a view of
    consecutive rows when the one index is a step counter (`X[t]`, the rows an xs would
    give), a gather otherwise."""
    def gather(x, *arrays):
        if len(arrays) == 1 and arrays[0].ndim == 1:
            rows = distinct_rows(_xp(x), arrays[0], x.shape[0])
            if isinstance(rows, slice):
                return x[(rows,) + tuple(index[1:])]
        idx = [a if b else a.reshape((1,) + a.shape) for a, b in zip(arrays, batched)]
        try:
            return x[fill_index(index, idx)]
        except IndexError:
            _raise_at_row(x, index, arrays, batched)
            raise
    return gather


def _raise_at_row(x, index, arrays, batched):
    """Re-raise NumPy's IndexError of a batched read from the first step that makes it, that
    step's offset in the chunk as the error's `chunk_row` (the loop names the step)."""
    steps = next(len(a) for a, b in zip(arrays, batched) if b)
    for r in range(steps):
        try:
            x[fill_index(index, [a[r] if b else a for a, b in zip(arrays, batched)])]
        except IndexError as e:
            e.chunk_row = r
            raise e from None


def distinct_rows(xp, idx, n):
    """The 1-d row indices idx (into an axis of n) as a slice when they are consecutive
    (a step counter: `X[t]`, `X[T - 1 - t]`), as an array when distinct, None when a row
    repeats or one is out of range (indexing then raises NumPy's IndexError)."""
    if not len(idx) or bool(((idx < -n) | (idx >= n)).any()):
        return None
    rows = xp.where(idx < 0, idx + n, idx)
    first, last = int(rows[0]), int(rows[-1])
    if len(rows) == 1:
        return slice(first, first + 1)
    step = 1 if last > first else -1
    if abs(last - first) == len(rows) - 1 and bool((xp.diff(rows) == step).all()):
        return slice(first, last + step if last + step >= 0 else None, step)
    return rows if len(xp.unique(rows)) == len(rows) else None


def _inline_index(params):
    """x[index] as the generated code writes it, `{0}[{1}, 1:, ]` (the tuple impl builds,
    its arrays as arguments), when every other entry prints as itself; else None."""
    parts = []
    for t in params["index"]:
        if type(t) is Slot:
            parts.append("{%d}" % (t.i + 1))
        elif t is None or t is Ellipsis or type(t) is int:
            parts.append("..." if t is Ellipsis else repr(t))
        elif type(t) is slice and all(b is None or type(b) is int
                                      for b in (t.start, t.stop, t.step)):
            bounds = ["" if b is None else repr(b) for b in (t.start, t.stop, t.step)]
            parts.append(":".join(bounds if t.step is not None else bounds[:2]))
        else:
            return None
    return "{0}[" + "".join(p + ", " for p in parts) + "]" if parts else "{0}[()]"


getitem_p = Primitive(
    "getitem", lambda x, *arrays, index: x[fill_index(index, arrays) if arrays else index],
    lambda g, out, x, *arrays, index: (
        scatter_add_p(g, *arrays, index=index, shape=x.shape), *[None] * len(arrays)),
    sparse_index=lambda x, *arrays, index: fill_index(index, arrays),
    view=True, batch=_getitem_batch_rule, inline=_inline_index, linear=(0,))
scatter_add_p = Primitive(
    "scatter_add", scatter_add_impl,
    lambda g, out, upd, *arrays, index, shape: (
        getitem_p(g, *arrays, index=index), *[None] * len(arrays)),
    batch=indexing.scatter_add_rule, linear=(0,))


# --- functional indexed updates: x.at[index].set(v) and .add(v) --------------------------------
def _last_writers_impl(*arrays, index, shape, out_shape):
    """True where an entry of x[index] is the one a NumPy assignment keeps (the last writer of
    each repeated position), False where a later entry overwrote it."""
    xp = _xp(*arrays)
    ids = xp.arange(int(np.prod(out_shape)), dtype=np.int64).reshape(out_shape)
    buf = xp.full(shape, -1, dtype=np.int64)
    buf[fill_index(index, arrays)] = ids
    return buf[fill_index(index, arrays)] == ids


last_writers_p = Primitive("last_writers", _last_writers_impl, batch=indexing.last_writers_rule)


def may_repeat(arrays):
    """Whether index arrays can name one position twice (they have more than one entry)."""
    return bool(arrays) and int(np.prod(np.broadcast_shapes(*[a.shape for a in arrays]))) > 1


def set_rows(buf, v, *arrays, index, unique):
    """buf[index] = v in buf itself (a position named twice keeps the last value, as NumPy's
    assignment does; `unique` names the caller that refuses repeats). scatter_set runs it on
    a copy; the loop compiler's in-place updates on a buffer it owns."""
    where = fill_index(index, arrays)
    if unique and may_repeat(arrays) and not on_stand_ins():  # zeros repeat; real ones may not
        winners = _last_writers_impl(*arrays, index=index, shape=buf.shape,
                                     out_shape=np.shape(buf[where]))
        if not bool(winners.all()):
            raise ValueError(f"{unique}: the index names a position more than once; that is "
                             "not supported here (combine the repeated updates first)")
    buf[where] = v


def _scatter_set_impl(x, v, *arrays, index, unique):
    # an array even where x is NumPy's scalar (a 0-d cotangent, as NumPy's ops return them)
    out = backends.xp_of(x).asarray(x).copy()
    set_rows(out, v, *arrays, index=index, unique=unique)
    return out


def _scatter_set_vjp(g, out, x, v, *arrays, index, unique):
    ct_x = scatter_set_p(g, 0, *arrays, index=index, unique=False)
    ct_v = getitem_p(g, *arrays, index=index)
    if may_repeat(arrays) and not unique:  # a position written twice keeps only the last value
        mask = last_writers_p(*arrays, index=index, shape=x.shape, out_shape=ct_v.shape)
        ct_v = where(mask, ct_v, 0.0)
    return (ct_x, ct_v, *[None] * len(arrays))


# unique: False, or the name of the caller that needs each position written once (checked).
scatter_set_p = Primitive("scatter_set", _scatter_set_impl, _scatter_set_vjp, linear=(0, 1),
                          batch=indexing.scatter_set_rule)


_PLAIN_ITEMS = frozenset({int, bool, slice, type(None), type(Ellipsis)})


def split_index(index):
    """Split a NumPy-style index into a static template and the array indices it holds.

    Boolean masks that are known now become integer arrays (nonzero); a traced boolean mask
    is an error because the result's shape would depend on values.
    """
    items = index if isinstance(index, tuple) else (index,)
    template, arrays = [], []
    for item in items:
        if type(item) in _PLAIN_ITEMS:  # x[0], x[1:], x[None], x[...]: the common case
            template.append(item)
            continue
        if isinstance(item, list):
            item = np.asarray(item)
        if isinstance(item, Tensor) or backends.is_array(item):
            dtype = np.dtype(item.dtype)
            if dtype == np.bool_ and isinstance(item, np.generic):
                template.append(bool(item))  # np.True_ indexes as True does (a new axis)
                continue
            if dtype == np.bool_:
                if isinstance(item, Tensor) and item._trace is not None:
                    raise TypeError(
                        "indexing with a traced boolean mask: the result's shape would depend "
                        "on values, which a traced graph cannot have. Use scanlib.where(mask, "
                        "x, 0) to keep the shape.")
                value = item._value if isinstance(item, Tensor) else item
                for nz in _xp(value).nonzero(value):
                    template.append(Slot(len(arrays)))
                    arrays.append(nz)
                continue
            if dtype.kind not in "iu":
                raise IndexError(f"array indices must be integers or booleans, got {dtype}")
            if isinstance(item, np.generic):
                template.append(int(item))
                continue
            template.append(Slot(len(arrays)))
            arrays.append(item)
        else:
            template.append(item)
    return tuple(template), arrays


def getitem(x, index):
    """x[index] with NumPy's basic and advanced indexing."""
    template, arrays = split_index(index)
    # Index arrays given as lists or NumPy arrays follow the data to its device, as CuPy
    # allows; index Tensors stay Tensors (a traced one is an input of the equation).
    if arrays:
        device = x.device if isinstance(x, Tensor) else backends.device_of(x)
        arrays = [a if isinstance(a, Tensor) else backends.to_device(a, device) for a in arrays]
    return bind(getitem_p, x, *arrays, index=template)


# --- joining and splitting ------------------------------------------------------------------
# Each pair is the other's VJP, and the split side is one multi-output primitive: stacking T
# step results costs one equation forward and one backward, not T.
def _filled(cts, outs):
    """cts with each None replaced by zeros shaped like the matching output."""
    like = next(c for c in cts if c is not None)
    xp = _xp(like._value)
    return [c if c is not None else Tensor(xp.zeros(o.shape, like.dtype))
            for c, o in zip(cts, outs)]


def _split_impl(x, sizes, axis):
    lead, start, parts = (slice(None),) * axis, 0, []
    for size in sizes:  # Python ints: np.cumsum on a tuple costs more than the slicing
        parts.append(x[lead + (slice(start, start + size),)])
        start += size
    return parts


def _inline_split(params):
    """split as the generated code writes it, `({0}[:, 0:4], {0}[:, 4:8], )`: the views
    _split_impl makes, without its call (2.7 us a step on an LSTM's gates)."""
    sizes, axis = params["sizes"], params["axis"]
    if type(axis) is not int or axis < 0 or not all(type(s) is int for s in sizes):
        return None
    parts, start = [], 0
    for size in sizes:
        parts.append("{0}[%s%d:%d], " % (":, " * axis, start, start + size))
        start += size
    return "(" + "".join(parts) + ")"


def _unstack_impl(x, axis):
    lead = (slice(None),) * axis
    return [x[lead + (i,)] for i in range(x.shape[axis])]


concatenate_p = Primitive(
    "concatenate", lambda *xs, axis: _xp(*xs).concatenate(xs, axis=axis),
    lambda g, out, *xs, axis: split_p(g, sizes=tuple(x.shape[axis] for x in xs), axis=axis),
    out_impl=lambda *xs, axis, out: _xp(*xs).concatenate(xs, axis=axis, out=out),
    batch=batching.joining_rule, linear=True, promote=True, shape_of=shapes.concatenate)
split_p = Primitive(
    "split", _split_impl,
    lambda cts, outs, x, sizes, axis, _saved=None: (
        concatenate_p(*_filled(cts, outs_or_shapes(outs, x, sizes, axis)), axis=axis),),
    multiple_results=True, batch=batching.axis_rule, linear=True, inline=_inline_split)


def _stack_impl(*xs, axis):
    # 0-d NumPy numbers of one native dtype (a scalar model's parameters, a while_loop's
    # test): np.array builds the array np.stack would, in a tenth of its 4 us. Not objects,
    # records or other byte orders, which np.array treats differently.
    if axis == 0 and xs and xs[0].dtype in _STACKS_BY_ARRAY and all(
            (type(x) is np.ndarray or isinstance(x, np.generic)) and not x.ndim for x in xs):
        dtype = xs[0].dtype
        if all(x.dtype == dtype for x in xs):
            return np.array(xs, dtype=dtype)
    return _xp(*xs).stack(xs, axis=axis)


_STACKS_BY_ARRAY = frozenset(np.dtype(c) for c in "?bBhHiIlLqQefdFD")


stack_p = Primitive(
    "stack", _stack_impl,
    lambda g, out, *xs, axis: unstack_p(g, axis=axis), batch=batching.joining_rule,
    linear=True, promote=True)
unstack_p = Primitive(
    "unstack", _unstack_impl,
    lambda cts, outs, x, axis, _saved=None: (
        stack_p(*_filled(cts, outs_or_shapes(outs, x, None, axis)), axis=axis),),
    multiple_results=True, batch=batching.axis_rule, linear=True)


class _Shape:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


def outs_or_shapes(outs, x, sizes, axis):
    """Something with .shape for each piece (outputs may have been freed)."""
    if sizes is None:
        piece = x.shape[:axis] + x.shape[axis + 1:]
        return [o if o is not None else _Shape(piece) for o in outs]
    return [o if o is not None else _Shape(x.shape[:axis] + (s,) + x.shape[axis + 1:])
            for o, s in zip(outs, sizes)]


# --- reductions -----------------------------------------------------------------------------
def _sum_vjp(g, out, x, axis, keepdims):
    if not keepdims:
        g = reshape_p(g, shape=_keepdims_shape(x.shape, axis))
    return (broadcast_to_p(g, shape=x.shape),)


sum_p = Primitive("sum", lambda x, axis, keepdims: x.sum(axis=axis, keepdims=keepdims),
                  _sum_vjp, batch=batching.reduce_rule, linear=True, shape_of=shapes.reduction,
                  keeps_weak=False)  # JAX's reductions give typed results


def _max_vjp(g, out, x, axis, keepdims):
    kshape = _keepdims_shape(x.shape, axis)
    if not keepdims:
        g, out = reshape_p(g, shape=kshape), reshape_p(out, shape=kshape)
    hit = equal(x, out)  # ties share the cotangent evenly
    count = sum_p(astype(hit, dtype=g.dtype), axis=axis, keepdims=True)
    # A NaN extreme is hit by no entry (count 0): 0 / 0 makes the whole slice's gradient NaN,
    # as JAX's, rather than a silent zero.
    return (where(hit, div(g, count), div(0.0, count)),)


def _max_tangent(ts, out, x, axis, keepdims):
    """The mean of t over the entries that hit the extreme, as the VJP shares ties."""
    hit = equal(x, out if keepdims else reshape_p(out, shape=_keepdims_shape(x.shape, axis)))
    count = sum_p(astype(hit, dtype=ts[0].dtype), axis=axis, keepdims=keepdims)
    return div(sum_p(where(hit, ts[0], 0.0), axis=axis, keepdims=keepdims), count)


max_p = Primitive("max", lambda x, axis, keepdims: _xp(x).max(x, axis=axis, keepdims=keepdims),
                  _max_vjp, batch=batching.reduce_rule, tangent=_max_tangent, keeps_weak=False,
                  shape_of=shapes.reduction)
min_p = Primitive("min", lambda x, axis, keepdims: _xp(x).min(x, axis=axis, keepdims=keepdims),
                  _max_vjp, batch=batching.reduce_rule,  # the same rules: where x hits out
                  tangent=_max_tangent, keeps_weak=False, shape_of=shapes.reduction)


def sum_to(g, shape):
    """Sum g over the axes that broadcasting added or stretched, so that it has `shape`."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    if axes:
        g = sum_p(g, axis=axes, keepdims=False)
    return reshape_p(g, shape=shape) if g.shape != shape else g
