"""jax.lax's array functions with lax's signatures and meanings, composed from scanlib's
differentiable ops (so gradients, vmap, jit, scan bodies come with them): lax's constants
and types, dot_general, slicing and broadcasting by dimension lists, lax.pad (negative and
interior padding), convert_element_type (saturating, as XLA's), iota; and the helpers that
ops.laxmath, ops.laxreduce and ops.laxconv share. Public only through scanlib.lax.

Imports backends, tape and the public modules of ops.
"""

from __future__ import annotations

import builtins
import enum
import operator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .arrays import flip, pad as np_pad
from .functions import (as_tensor, broadcast_to, concatenate, einsum, expand_dims, getitem,
                        matmul, reshape, squeeze, transpose, where)
from .named import astype, full_like, greater, less

if TYPE_CHECKING:
    from collections.abc import Sequence
    from ..tape.types import ArrayLike, DTypeLike


class Precision(enum.Enum):
    """lax.Precision: accepted by dot_general and the convolutions; scanlib computes in the
    operands' dtype at every setting (NumPy's matmul has no lower-precision mode).

    >>> sl.lax.dot_general(sl.ones(3), sl.ones(3), (((0,), (0,)), ((), ())),
    ...                    precision=sl.lax.Precision.HIGHEST)
    """
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


class RoundingMethod(enum.IntEnum):
    """lax.round's rounding_method: halves away from zero (JAX's default) or to even.

    >>> sl.lax.round(sl.tensor([2.5]), sl.lax.RoundingMethod.TO_NEAREST_EVEN)
    """
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


class GatherScatterMode(enum.Enum):
    """jax.lax.GatherScatterMode's names, so that a program naming them imports; `x.at[]`
    indexes as NumPy does and refuses a mode= with a message saying what to write.

    >>> sl.lax.GatherScatterMode.CLIP
    """
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3


class DotDimensionNumbers(NamedTuple):
    """((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), as lax's.

    >>> sl.lax.DotDimensionNumbers(((1,), (0,)), ((), ()))
    """
    contracting: tuple
    batch: tuple


def ints(seq, who, what):
    """seq as a tuple of Python ints, or a TypeError naming `who` and `what`."""
    try:
        return tuple(operator.index(i) for i in seq)
    except TypeError:
        raise TypeError(f"{who}: {what} must be a sequence of ints, got {seq!r}") from None


def one_dim(d, ndim, who):
    """d as an index in [0, ndim), or a ValueError naming `who`."""
    d = operator.index(d)
    if not -ndim <= d < builtins.max(ndim, 1):
        raise ValueError(f"{who}: dimension {d} is out of range for an operand of rank {ndim}")
    return d % builtins.max(ndim, 1)


def cast_to(x, dtype):
    """x in dtype (x itself when it is already, or when dtype is None)."""
    return x if dtype is None or np.dtype(dtype) == x.dtype else astype(x, dtype)


def constant(value, dtype, like):
    """A 0-d constant tensor of `value` in dtype (wrapping as astype does), on like's device."""
    with backends.on_device(like.device):
        return Tensor(backends.namespace(like.device).asarray(np.array(value).astype(dtype)))


def value_like(value, x):
    """A scalar operand in x's dtype: a tensor cast (keeping its gradient and device), a
    Python or NumPy number made on x's device."""
    if isinstance(value, Tensor):
        return cast_to(value, x.dtype)
    return constant(value, x.dtype, x)


def need_int(who, *xs):
    """A TypeError naming `who` unless every x has an integer dtype."""
    for x in xs:
        if not np.issubdtype(x.dtype, np.integer):
            raise TypeError(f"{who}: needs integer operands, got {x.dtype}")


# --- products ------------------------------------------------------------------------------
def dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers: Any,
                precision: Any = None, preferred_element_type: DTypeLike = None,
                out_sharding: Any = None) -> Tensor:
    """lax.dot_general: contract lhs's and rhs's `contracting` dims, keep their `batch` dims
    in front; the result is batch + lhs's free dims + rhs's free dims.

    >>> sl.lax.dot_general(sl.ones((2, 3, 4)), sl.ones((2, 4, 5)), (([2], [1]), ([0], [0])))
    """
    x, y = as_tensor(lhs), as_tensor(rhs)
    try:
        (xc, yc), (xb, yb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError("dot_general: dimension_numbers must be ((lhs_contracting, "
                        "rhs_contracting), (lhs_batch, rhs_batch)), got "
                        f"{dimension_numbers!r}") from None
    xc, yc, xb, yb = (tuple(one_dim(d, n, "dot_general") for d in ints(ds, "dot_general", w))
                      for ds, n, w in ((xc, x.ndim, "lhs_contracting"),
                                       (yc, y.ndim, "rhs_contracting"),
                                       (xb, x.ndim, "lhs_batch"), (yb, y.ndim, "rhs_batch")))
    for a, b, what in ((xc, yc, "contracting"), (xb, yb, "batch")):
        if len(a) != len(b) or _sizes_differ(x.shape, y.shape, a, b):
            raise TypeError(f"dot_general: the {what} dimensions must pair up with equal sizes, "
                            f"got lhs{list(a)} of {x.shape} and rhs{list(b)} of {y.shape}")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    xs, ys = [None] * x.ndim, [None] * y.ndim
    for i, j in zip(xb + xc, yb + yc):
        xs[i] = ys[j] = next(letters)
    xs = [s or next(letters) for s in xs]
    ys = [s or next(letters) for s in ys]
    out = ([xs[i] for i in xb] + [s for i, s in enumerate(xs) if i not in xb + xc]
           + [s for j, s in enumerate(ys) if j not in yb + yc])
    return cast_to(einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y),
                 preferred_element_type)


def lax_dot(lhs: ArrayLike, rhs: ArrayLike, precision: Any = None, *,
            dimension_numbers: Any = None, preferred_element_type: DTypeLike = None,
            out_sharding: Any = None) -> Tensor:
    """lax.dot: the vector/matrix product of operands of rank 1 or 2 (lhs's last dim with
    rhs's first), or dot_general with the given dimension_numbers.

    >>> sl.lax.dot(sl.ones((2, 3)), sl.ones(3), precision=sl.lax.Precision.HIGHEST)
    """
    x, y = as_tensor(lhs), as_tensor(rhs)
    if dimension_numbers is None:
        if not (1 <= x.ndim <= 2 and 1 <= y.ndim <= 2):
            raise TypeError(f"lax.dot: operands of shapes {x.shape} and {y.shape} need "
                            "dimension_numbers (it multiplies vectors and matrices only); give "
                            "them, or use dot_general, matmul or einsum")
        dimension_numbers = (((x.ndim - 1,), (0,)), ((), ()))
    return dot_general(x, y, dimension_numbers, precision, preferred_element_type)


def _sizes_differ(xshape, yshape, a, b):
    return builtins.any(xshape[i] != yshape[j] for i, j in zip(a, b))


def batch_matmul(lhs: ArrayLike, rhs: ArrayLike, precision: Any = None) -> Tensor:
    """lax.batch_matmul: matmul of operands of equal rank (>= 2) with equal batch dims.

    >>> sl.lax.batch_matmul(sl.ones((2, 3, 4)), sl.ones((2, 4, 5))).shape
    """
    x, y = as_tensor(lhs), as_tensor(rhs)
    if x.ndim < 2 or x.ndim != y.ndim or x.shape[:-2] != y.shape[:-2]:
        raise TypeError("batch_matmul: the operands must have equal rank >= 2 and equal batch "
                        f"dimensions, got {x.shape} and {y.shape}; use matmul to broadcast")
    return matmul(x, y)


# --- shapes --------------------------------------------------------------------------------
def pad(operand: ArrayLike, padding_value: ArrayLike, padding_config: Sequence[Any]) -> Tensor:
    """lax.pad: per dim (low, high, interior); interior values go between the elements, and a
    negative low or high removes elements. Differentiable in operand and padding_value.

    >>> sl.lax.pad(sl.tensor([1.0, 2.0]), 0.0, [(1, -1, 2)])   # [0, 1, 0, 0]
    """
    x = as_tensor(operand)
    value = value_like(padding_value, x)
    config = [tuple(ints(c, "pad", "each padding_config entry")) for c in padding_config]
    if len(config) != x.ndim or builtins.any(len(c) != 3 for c in config):
        raise ValueError(f"pad: padding_config needs one (low, high, interior) triple per "
                         f"dimension of the operand {x.shape}, got {padding_config!r}")
    for axis, (lo, hi, interior) in enumerate(config):
        if interior < 0:
            raise ValueError(f"pad: interior padding must be >= 0, got {interior} in dim {axis}")
        n = x.shape[axis]
        if interior and n > 1:  # each element followed by `interior` values, the last trimmed
            x = expand_dims(x, axis + 1)
            fill = broadcast_to(value, x.shape[:axis + 1] + (interior,) + x.shape[axis + 2:])
            x = concatenate([x, fill], axis + 1)
            x = reshape(x, x.shape[:axis] + (n * (interior + 1),) + x.shape[axis + 2:])
            x = take_range(x, axis, 0, n + (n - 1) * interior)
        size = x.shape[axis]
        if size + builtins.min(lo, 0) + builtins.min(hi, 0) < 0:
            raise ValueError(f"pad: padding {lo, hi, interior} of dim {axis} removes more than "
                             f"its {size} elements")
        x = take_range(x, axis, -builtins.min(lo, 0), size + builtins.min(hi, 0))
        if lo > 0 or hi > 0:
            widths = [(0, 0)] * x.ndim
            widths[axis] = (builtins.max(lo, 0), builtins.max(hi, 0))
            x = np_pad(x, widths, constant_values=value)
    return x


def take_range(x, axis, start, stop, step=1):
    """x[start:stop:step] along axis (x itself for the whole axis)."""
    if start == 0 and stop == x.shape[axis] and step == 1:
        return x
    return getitem(x, (builtins.slice(None),) * axis + (builtins.slice(start, stop, step),))


def slice(operand: ArrayLike, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Tensor:
    """lax.slice: operand[start:limit:stride] in every dim (static bounds).

    >>> sl.lax.slice(sl.arange(10.0), (1,), (8,), (3,))
    """
    x = as_tensor(operand)
    starts, limits = ints(start_indices, "slice", "start_indices"), ints(
        limit_indices, "slice", "limit_indices")
    steps = (1,) * x.ndim if strides is None else ints(strides, "slice", "strides")
    if not len(starts) == len(limits) == len(steps) == x.ndim:
        raise TypeError(f"slice: start_indices, limit_indices and strides need one entry per "
                        f"dimension of the operand {x.shape}")
    for d, (a, b, s) in enumerate(zip(starts, limits, steps)):
        if not 0 <= a <= b <= x.shape[d] or s < 1:
            raise ValueError(f"slice: dim {d} of size {x.shape[d]} can't be sliced "
                             f"[{a}:{b}:{s}] (0 <= start <= limit <= size, stride >= 1)")
    return getitem(x, tuple(builtins.slice(a, b, s) for a, b, s in zip(starts, limits, steps)))


def split(operand: ArrayLike, sizes: Sequence[int], axis: int = 0) -> list[Tensor]:
    """lax.split: operand cut along `axis` into pieces of the given sizes (which sum to it).

    >>> sl.lax.split(sl.arange(5.0), (2, 3))
    """
    x = as_tensor(operand)
    d = one_dim(axis, x.ndim, "split")
    sizes = ints(sizes, "split", "sizes")
    if builtins.sum(sizes) != x.shape[d] or builtins.any(n < 0 for n in sizes):
        raise ValueError(f"split: sizes {sizes} must be >= 0 and sum to the size "
                         f"{x.shape[d]} of axis {d}")
    starts = np.cumsum((0,) + sizes)
    return [take_range(x, d, int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def slice_in_dim(operand: ArrayLike, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Tensor:
    """lax.slice_in_dim: operand[start:limit:stride] along `axis` (negative indices count from
    the end; None means the whole dim).

    >>> sl.lax.slice_in_dim(sl.arange(10.0), -3, None)
    """
    x = as_tensor(operand)
    axis = one_dim(axis, x.ndim, "slice_in_dim")
    n = x.shape[axis]
    start = 0 if start_index is None else operator.index(start_index)
    limit = n if limit_index is None else operator.index(limit_index)
    start, limit = start + n if start < 0 else start, limit + n if limit < 0 else limit
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


def index_in_dim(operand: ArrayLike, index: int, axis: int = 0,
                 keepdims: bool = True) -> Tensor:
    """lax.index_in_dim: the static `index` along `axis`, the dim kept unless keepdims=False.

    >>> sl.lax.index_in_dim(sl.arange(6.0).reshape(2, 3), 1, axis=1, keepdims=False)
    """
    x = as_tensor(operand)
    axis = one_dim(axis, x.ndim, "index_in_dim")
    n, i = x.shape[axis], operator.index(index)
    if not -n <= i < n:
        raise IndexError(f"index_in_dim: index {i} is out of bounds for dim {axis} of size {n}")
    out = slice_in_dim(x, i % n, i % n + 1, 1, axis)
    return out if keepdims else squeeze(out, axis)


def broadcast(operand: ArrayLike, sizes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.broadcast: operand with new leading dims of the given sizes.

    >>> sl.lax.broadcast(sl.tensor([1.0, 2.0]), (3,)).shape
    """
    x = as_tensor(operand)
    return broadcast_to(x, ints(sizes, "broadcast", "sizes") + x.shape)


def broadcast_in_dim(operand: ArrayLike, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.broadcast_in_dim: operand's dim i becomes dim broadcast_dimensions[i] of `shape`
    (of the same size, or of size 1 broadcast); the others are new.

    >>> sl.lax.broadcast_in_dim(sl.tensor([1.0, 2.0]), (2, 3), (0,))
    """
    x = as_tensor(operand)
    shape = ints(shape, "broadcast_in_dim", "shape")
    dims = ints(broadcast_dimensions, "broadcast_in_dim", "broadcast_dimensions")
    if (len(dims) != x.ndim or list(dims) != sorted(set(dims))
            or builtins.any(not 0 <= d < len(shape) for d in dims)
            or builtins.any(x.shape[i] not in (1, shape[d]) for i, d in enumerate(dims))):
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {dims} must give each dim of "
                        f"the operand {x.shape} an increasing place in shape {shape} of the "
                        "same size (or size 1)")
    middle = [1] * len(shape)
    for i, d in enumerate(dims):
        middle[d] = x.shape[i]
    return broadcast_to(reshape(x, tuple(middle)), shape)


def broadcast_to_rank(x: ArrayLike, rank: int) -> Tensor:
    """lax.broadcast_to_rank: x with leading size-1 dims added up to `rank`.

    >>> sl.lax.broadcast_to_rank(sl.ones(3), 3).shape
    """
    x = as_tensor(x)
    return reshape(x, (1,) * builtins.max(rank - x.ndim, 0) + x.shape)


def lax_expand_dims(array: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """lax.expand_dims: size-1 dims inserted at `dimensions` (of the result).

    >>> sl.lax.expand_dims(sl.ones(3), (0, 2)).shape
    """
    return expand_dims(as_tensor(array), tuple(ints(dimensions, "expand_dims", "dimensions")))


def lax_squeeze(array: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """lax.squeeze: the size-1 `dimensions` removed.

    >>> sl.lax.squeeze(sl.ones((1, 3, 1)), (0, 2)).shape
    """
    return squeeze(as_tensor(array), tuple(ints(dimensions, "squeeze", "dimensions")))


def lax_reshape(operand: ArrayLike, new_sizes: Sequence[int],
                dimensions: Sequence[int] | None = None, out_sharding: Any = None) -> Tensor:
    """lax.reshape: operand (transposed by `dimensions` first, when given) in new_sizes.

    >>> sl.lax.reshape(sl.arange(6.0).reshape(2, 3), (6,), dimensions=(1, 0))
    """
    x = as_tensor(operand)
    if dimensions is not None:
        x = transpose(x, ints(dimensions, "reshape", "dimensions"))
    return reshape(x, ints(new_sizes, "reshape", "new_sizes"))


def rev(operand: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """lax.rev: operand reversed along `dimensions`.

    >>> sl.lax.rev(sl.arange(3.0), (0,))
    """
    dims = ints(dimensions, "rev", "dimensions")
    x = as_tensor(operand)
    return flip(x, dims) if dims else x


def collapse(operand: ArrayLike, start_dimension: int, stop_dimension: int | None = None
             ) -> Tensor:
    """lax.collapse: dims start_dimension..stop_dimension-1 merged into one.

    >>> sl.lax.collapse(sl.ones((2, 3, 4)), 1).shape
    """
    x = as_tensor(operand)
    start = one_dim(start_dimension, x.ndim, "collapse")
    stop = x.ndim if stop_dimension is None else operator.index(stop_dimension)
    stop = stop + x.ndim if stop < 0 else stop
    size = int(np.prod(x.shape[start:stop], dtype=np.int64))
    return reshape(x, x.shape[:start] + (size,) + x.shape[stop:])


def convert_element_type(operand: ArrayLike, new_dtype: DTypeLike) -> Tensor:
    """lax.convert_element_type: operand as new_dtype; floats become integers as XLA converts
    them (toward zero, saturating at the ends of the range, NaN to 0), complex to real keeps
    the real part; differentiable between float dtypes.

    >>> sl.lax.convert_element_type(sl.tensor([-1.7, np.nan, 1e10]), np.int32)
    """
    x = as_tensor(operand)
    if np.issubdtype(x.dtype, np.complexfloating) and not np.issubdtype(
            np.dtype(new_dtype), np.complexfloating):
        x = ew.real(x)  # JAX keeps the real part, as NumPy does with a warning
    new = np.dtype(new_dtype)
    if np.issubdtype(new, np.integer) and np.issubdtype(x.dtype, np.floating):
        return _saturated(x, new)
    return cast_to(x, new)


def _saturated(x, new):
    """Floats to integers as XLA converts them: toward zero, out-of-range values to the
    nearest end of the range, NaN to 0 (NumPy's astype leaves these undefined)."""
    info = np.iinfo(new)
    lo, hi = (float(np.array(v, x.dtype)) for v in (info.min, info.max))  # hi may round up
    inside = ew.logical_and(greater(x, lo), less(x, hi))
    out = astype(where(inside, x, constant(0, x.dtype, x)), new)
    out = where(ew.greater_equal(x, hi), constant(info.max, new, x), out)
    return where(ew.less_equal(x, lo), constant(info.min, new, x), out)


def iota(dtype: DTypeLike, size: int, dimension: int = 0, sharding: Any = None) -> Tensor:
    """lax.iota: 0, 1, ..., size-1 in dtype.

    >>> sl.lax.iota(np.int32, 4)
    """
    return as_tensor(np.arange(operator.index(size), dtype=np.dtype(dtype)))


def broadcasted_iota(dtype: DTypeLike, shape: Sequence[int], dimension: int,
                     out_sharding: Any = None) -> Tensor:
    """lax.broadcasted_iota: an array of `shape` whose values count along `dimension`.

    >>> sl.lax.broadcasted_iota(np.int32, (2, 3), 1)
    """
    shape = ints(shape, "broadcasted_iota", "shape")
    d = one_dim(dimension, len(shape), "broadcasted_iota")
    return broadcast_in_dim(iota(dtype, shape[d]), shape, (d,))


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """jax.lax.with_sharding_constraint: x itself (scanlib runs on one device).

    >>> sl.lax.with_sharding_constraint(sl.ones(2), None)
    """
    return x


def lax_full_like(x: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike = None,
                  shape: Any = None, sharding: Any = None) -> Tensor:
    """lax.full_like: an array like x (its shape and dtype unless given) filled with value.

    >>> sl.lax.full_like(sl.ones(2, dtype='float32'), 7.0)
    """
    return full_like(x, fill_value, dtype=dtype, shape=shape)
