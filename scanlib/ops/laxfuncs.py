"""jax.lax's array functions with lax's signatures and meanings, composed from scanlib's
differentiable ops (so gradients, vmap, jit, scan bodies come with them): slicing and
broadcasting by dimension lists, lax.pad (negative and interior padding), lax.round, div and
rem (C semantics), clamp, the bit operations, reductions over `axes`, lax.reduce, top_k and
lax.sort. Public only through scanlib.lax; the convolutions live in ops.laxconv.

Imports backends, tape and the public modules of ops.
"""

from __future__ import annotations

import builtins
import enum
import operator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .arrays import flip, pad as np_pad
from .functions import (as_tensor, broadcast_to, concatenate, einsum, expand_dims, getitem,
                        matmul, max, min, reshape, sign, squeeze, sum, transpose, where)
from .gathers import argsort, take_along_axis
from .mathfuncs import bitwise_count, left_shift, right_shift
from .named import astype, equal, full_like, greater, less, not_equal
from .reductions import all, any, argmax as np_argmax, argmin as np_argmin, prod
from .special import (bitwise_and, bitwise_or, bitwise_xor, floor_divide, fmod, round as np_round,
                      trunc)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from ..tape.types import ArrayLike, DTypeLike


class Precision(enum.Enum):
    """lax.Precision: accepted by dot_general and the convolutions; scanlib computes in the
    operands' dtype at every setting (NumPy's matmul has no lower-precision mode)."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


class RoundingMethod(enum.IntEnum):
    """lax.round's rounding_method: halves away from zero (JAX's default) or to even."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


class GatherScatterMode(enum.Enum):
    """jax.lax.GatherScatterMode, accepted as a constant (the `.at[]` modes of scanlib)."""
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3


class DotDimensionNumbers(NamedTuple):
    """((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), as lax's."""
    contracting: tuple
    batch: tuple


def ints(seq, who, what):
    """seq as a tuple of Python ints, or a TypeError naming `who` and `what`."""
    try:
        return tuple(operator.index(i) for i in seq)
    except TypeError:
        raise TypeError(f"{who}: {what} must be a sequence of ints, got {seq!r}") from None


def _axis(d, ndim, who):
    d = operator.index(d)
    if not -ndim <= d < builtins.max(ndim, 1):
        raise ValueError(f"{who}: dimension {d} is out of range for an operand of rank {ndim}")
    return d % builtins.max(ndim, 1)


def cast_to(x, dtype):
    """x in dtype (x itself when it is already, or when dtype is None)."""
    return x if dtype is None or np.dtype(dtype) == x.dtype else astype(x, dtype)


# --- products ------------------------------------------------------------------------------
def dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers: Any,
                precision: Any = None, preferred_element_type: DTypeLike = None,
                out_sharding: Any = None) -> Tensor:
    """lax.dot_general: contract lhs's and rhs's `contracting` dims, keep their `batch` dims
    in front; the result is batch + lhs's free dims + rhs's free dims.

    >>> lax.dot_general(sl.ones((2, 3, 4)), sl.ones((2, 4, 5)), (([2], [1]), ([0], [0])))
    """
    x, y = as_tensor(lhs), as_tensor(rhs)
    try:
        (xc, yc), (xb, yb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError("dot_general: dimension_numbers must be ((lhs_contracting, "
                        "rhs_contracting), (lhs_batch, rhs_batch)), got "
                        f"{dimension_numbers!r}") from None
    xc, yc, xb, yb = (tuple(_axis(d, n, "dot_general") for d in ints(ds, "dot_general", w))
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


def _sizes_differ(xshape, yshape, a, b):
    return builtins.any(xshape[i] != yshape[j] for i, j in zip(a, b))


def batch_matmul(lhs: ArrayLike, rhs: ArrayLike, precision: Any = None) -> Tensor:
    """lax.batch_matmul: matmul of operands of equal rank (>= 2) with equal batch dims."""
    x, y = as_tensor(lhs), as_tensor(rhs)
    if x.ndim < 2 or x.ndim != y.ndim or x.shape[:-2] != y.shape[:-2]:
        raise TypeError("batch_matmul: the operands must have equal rank >= 2 and equal batch "
                        f"dimensions, got {x.shape} and {y.shape}; use matmul to broadcast")
    return matmul(x, y)


# --- shapes --------------------------------------------------------------------------------
def pad(operand: ArrayLike, padding_value: ArrayLike, padding_config: Sequence[Any]) -> Tensor:
    """lax.pad: per dim (low, high, interior); interior values go between the elements, and a
    negative low or high removes elements. Differentiable in operand and padding_value.

    >>> lax.pad(sl.tensor([1.0, 2.0]), 0.0, [(1, -1, 2)])   # [0, 1, 0, 0]
    """
    x = as_tensor(operand)
    value = astype(as_tensor(padding_value), x.dtype)
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
            x = _take(x, axis, 0, n + (n - 1) * interior)
        size = x.shape[axis]
        if size + builtins.min(lo, 0) + builtins.min(hi, 0) < 0:
            raise ValueError(f"pad: padding {lo, hi, interior} of dim {axis} removes more than "
                             f"its {size} elements")
        x = _take(x, axis, -builtins.min(lo, 0), size + builtins.min(hi, 0))
        if lo > 0 or hi > 0:
            widths = [(0, 0)] * x.ndim
            widths[axis] = (builtins.max(lo, 0), builtins.max(hi, 0))
            x = np_pad(x, widths, constant_values=value)
    return x


def _take(x, axis, start, stop, step=1):
    if start == 0 and stop == x.shape[axis] and step == 1:
        return x
    return getitem(x, (builtins.slice(None),) * axis + (builtins.slice(start, stop, step),))


def slice(operand: ArrayLike, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Tensor:
    """lax.slice: operand[start:limit:stride] in every dim (static bounds)."""
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


def slice_in_dim(operand: ArrayLike, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Tensor:
    """lax.slice_in_dim: operand[start:limit:stride] along `axis` (negative indices count from
    the end; None means the whole dim)."""
    x = as_tensor(operand)
    axis = _axis(axis, x.ndim, "slice_in_dim")
    n = x.shape[axis]
    start = 0 if start_index is None else operator.index(start_index)
    limit = n if limit_index is None else operator.index(limit_index)
    start, limit = start + n if start < 0 else start, limit + n if limit < 0 else limit
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


def index_in_dim(operand: ArrayLike, index: int, axis: int = 0,
                 keepdims: bool = True) -> Tensor:
    """lax.index_in_dim: the static `index` along `axis`, the dim kept unless keepdims=False."""
    x = as_tensor(operand)
    axis = _axis(axis, x.ndim, "index_in_dim")
    n, i = x.shape[axis], operator.index(index)
    if not -n <= i < n:
        raise IndexError(f"index_in_dim: index {i} is out of bounds for dim {axis} of size {n}")
    out = slice_in_dim(x, i % n, i % n + 1, 1, axis)
    return out if keepdims else squeeze(out, axis)


def broadcast(operand: ArrayLike, sizes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.broadcast: operand with new leading dims of the given sizes."""
    x = as_tensor(operand)
    return broadcast_to(x, ints(sizes, "broadcast", "sizes") + x.shape)


def broadcast_in_dim(operand: ArrayLike, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.broadcast_in_dim: operand's dim i becomes dim broadcast_dimensions[i] of `shape`
    (of the same size, or of size 1 broadcast); the others are new."""
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
    """lax.broadcast_to_rank: x with leading size-1 dims added up to `rank`."""
    x = as_tensor(x)
    return reshape(x, (1,) * builtins.max(rank - x.ndim, 0) + x.shape)


def lax_expand_dims(array: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """lax.expand_dims: size-1 dims inserted at `dimensions` (of the result)."""
    return expand_dims(as_tensor(array), tuple(ints(dimensions, "expand_dims", "dimensions")))


def lax_squeeze(array: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """lax.squeeze: the size-1 `dimensions` removed."""
    return squeeze(as_tensor(array), tuple(ints(dimensions, "squeeze", "dimensions")))


def lax_reshape(operand: ArrayLike, new_sizes: Sequence[int],
                dimensions: Sequence[int] | None = None, out_sharding: Any = None) -> Tensor:
    """lax.reshape: operand (transposed by `dimensions` first, when given) in new_sizes."""
    x = as_tensor(operand)
    if dimensions is not None:
        x = transpose(x, ints(dimensions, "reshape", "dimensions"))
    return reshape(x, ints(new_sizes, "reshape", "new_sizes"))


def rev(operand: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """lax.rev: operand reversed along `dimensions`."""
    dims = ints(dimensions, "rev", "dimensions")
    x = as_tensor(operand)
    return flip(x, dims) if dims else x


def collapse(operand: ArrayLike, start_dimension: int, stop_dimension: int | None = None
             ) -> Tensor:
    """lax.collapse: dims start_dimension..stop_dimension-1 merged into one."""
    x = as_tensor(operand)
    start = _axis(start_dimension, x.ndim, "collapse")
    stop = x.ndim if stop_dimension is None else operator.index(stop_dimension)
    stop = stop + x.ndim if stop < 0 else stop
    size = int(np.prod(x.shape[start:stop], dtype=np.int64))
    return reshape(x, x.shape[:start] + (size,) + x.shape[stop:])


def convert_element_type(operand: ArrayLike, new_dtype: DTypeLike) -> Tensor:
    """lax.convert_element_type: operand as new_dtype (floats to integers truncate toward
    zero); differentiable between float dtypes."""
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
    lo, hi = np.array(info.min, x.dtype), np.array(info.max, x.dtype)  # hi may round up
    inside = ew.logical_and(greater(x, lo), less(x, hi))
    out = astype(where(inside, x, _const(0, x.dtype)), new)
    out = where(ew.greater_equal(x, hi), _const(info.max, new), out)
    return where(ew.less_equal(x, lo), _const(info.min, new), out)


def iota(dtype: DTypeLike, size: int, dimension: int = 0, sharding: Any = None) -> Tensor:
    """lax.iota: 0, 1, ..., size-1 in dtype."""
    return as_tensor(np.arange(operator.index(size), dtype=np.dtype(dtype)))


def broadcasted_iota(dtype: DTypeLike, shape: Sequence[int], dimension: int,
                     out_sharding: Any = None) -> Tensor:
    """lax.broadcasted_iota: an array of `shape` whose values count along `dimension`."""
    shape = ints(shape, "broadcasted_iota", "shape")
    d = _axis(dimension, len(shape), "broadcasted_iota")
    return broadcast_in_dim(iota(dtype, shape[d]), shape, (d,))


def lax_full_like(x: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike = None,
                  shape: Any = None, sharding: Any = None) -> Tensor:
    """lax.full_like: an array like x (its shape and dtype unless given) filled with value."""
    return full_like(x, fill_value, dtype=dtype, shape=shape)


# --- elementwise ---------------------------------------------------------------------------
def _is_int(x):
    return np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_


def _pair(x, y):
    x, y = as_tensor(x), as_tensor(y)
    return x, y


def integer_pow(x: ArrayLike, y: int) -> Tensor:
    """lax.integer_pow: x ** y for a static integer y, in x's dtype."""
    return ew.power(as_tensor(x), operator.index(y))


def optimization_barrier(operand: Any) -> Any:
    """lax.optimization_barrier: the operand (a pytree) itself; scanlib does not reorder."""
    return operand


def _const(value, dtype):
    return as_tensor(np.array(value).astype(dtype))


def _divisor(x, y):
    """y with the divisions C leaves undefined (by 0, and MIN by -1) replaced by 1."""
    bad = equal(y, _const(0, y.dtype))
    if np.issubdtype(y.dtype, np.signedinteger):
        bad = ew.logical_or(bad, equal(y, _const(-1, y.dtype)))
    return where(bad, _const(1, y.dtype), y)


def div(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.div: x / y, integers rounded toward zero (C's division: div(-7, 2) is -3); as
    XLA's, an integer divided by 0 gives -1 (all bits set) and MIN / -1 gives MIN."""
    x, y = _pair(x, y)
    if not (_is_int(x) and _is_int(y)):
        return ew.div(x, y)
    d = _divisor(x, y)
    q = floor_divide(x, d)
    inexact = not_equal(ew.sub(x, ew.mul(q, d)), _const(0, q.dtype))
    q = where(ew.logical_and(inexact, not_equal(less(x, 0), less(d, 0))),
              ew.add(q, _const(1, q.dtype)), q)
    if np.issubdtype(y.dtype, np.signedinteger):
        q = where(equal(y, _const(-1, y.dtype)), ew.sub(_const(0, x.dtype), x), q)
    return where(equal(y, _const(0, y.dtype)), _const(-1, q.dtype), q)


def rem(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.rem: C's remainder x - y * div(x, y), with the sign of x (as numpy.fmod); as
    XLA's, an integer remainder by 0 is x."""
    x, y = _pair(x, y)
    if not (_is_int(x) and _is_int(y)):
        return fmod(x, y)
    r = fmod(x, _divisor(x, y))
    if np.issubdtype(y.dtype, np.signedinteger):
        r = where(equal(y, _const(-1, y.dtype)), _const(0, r.dtype), r)
    return where(equal(y, _const(0, y.dtype)), x, r)


def lax_round(x: ArrayLike, rounding_method: int | RoundingMethod = 0) -> Tensor:
    """lax.round: to the nearest integer, halves away from zero (JAX's default, 2.5 -> 3) or
    to even with rounding_method=TO_NEAREST_EVEN (2.5 -> 2, as NumPy); gradient zero."""
    x = as_tensor(x)
    method = RoundingMethod(int(rounding_method))
    if method == RoundingMethod.TO_NEAREST_EVEN:
        return np_round(x)
    t = trunc(x)
    finite = where(ew.isfinite(x), x, as_tensor(np.zeros((), x.dtype)))
    # finite - trunc(finite) is exact, so no rounding of x + 0.5 moves a value across a half
    half_or_more = ew.greater_equal(ew.absolute(ew.sub(finite, trunc(finite))), 0.5)
    return where(half_or_more, ew.add(t, sign(x)), t)


def select_n(which: ArrayLike, *cases: ArrayLike) -> Tensor:
    """lax.select_n: cases[which] elementwise; `which` is bool (two cases: False picks the
    first) or an integer in [0, len(cases)). Differentiable in the cases."""
    w = as_tensor(which)
    if not cases:
        raise ValueError("select_n: give at least one case")
    if w.dtype == np.bool_ and len(cases) != 2:
        raise TypeError(f"select_n: a bool `which` selects between 2 cases, got {len(cases)}")
    if w.dtype != np.bool_ and not np.issubdtype(w.dtype, np.integer):
        raise TypeError(f"select_n: `which` must be bool or integer, got {w.dtype}")
    out = as_tensor(cases[-1])
    for i in range(len(cases) - 2, -1, -1):  # the first case whose index matches wins
        pick = ew.logical_not(w) if w.dtype == np.bool_ else equal(w, i)
        out = where(pick, cases[i], out)
    return out


def clamp(min: ArrayLike, x: ArrayLike, max: ArrayLike) -> Tensor:
    """lax.clamp(min, x, max): x limited to [min, max]. Gradients as JAX's: to x strictly
    inside, to min (max) where x is strictly below (above), and to none of them at a tie."""
    x = as_tensor(x)
    lo, hi = (as_tensor(np.asarray(b, x.dtype)) if isinstance(b, (int, float)) else as_tensor(b)
              for b in (min, max))  # Python numbers are weak: they take x's dtype
    for name, b in (("min", lo), ("max", hi)):
        if b.ndim and b.shape != x.shape:
            raise TypeError(f"clamp: {name} must be a scalar or of x's shape {x.shape}, got "
                            f"{b.shape}; broadcast it first")
        if b.dtype != x.dtype:
            raise TypeError(f"clamp: {name} is {b.dtype} and x is {x.dtype}; lax.clamp takes "
                            "one dtype, convert_element_type the bound first")
    inside = ew.logical_and(less(lo, x), less(x, hi))
    return where(inside, x, where(less(x, lo), broadcast_to(lo, x.shape),
                                  where(greater(x, hi), broadcast_to(hi, x.shape),
                                        ew.stop_gradient(x))))


def _unsigned(x):
    return np.dtype(f"uint{x.dtype.itemsize * 8}")


def _need_int(who, *xs):
    for x in xs:
        if not np.issubdtype(x.dtype, np.integer):
            raise TypeError(f"{who}: needs integer operands, got {x.dtype}")


def _out_of_range(y, bits):
    return ew.logical_or(less(y, 0), ew.greater_equal(y, bits))


def shift_left(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.shift_left: x << y; shifts below 0 or of the bit width or more give 0, as XLA's."""
    x, y = _pair(x, y)
    _need_int("shift_left", x, y)
    bits = x.dtype.itemsize * 8
    out = left_shift(x, astype(clamp(0, y, bits - 1), x.dtype))
    return where(_out_of_range(y, bits), as_tensor(np.zeros((), x.dtype)), out)


def shift_right_logical(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.shift_right_logical: x >> y filling with zeros (signed x read as unsigned)."""
    x, y = _pair(x, y)
    _need_int("shift_right_logical", x, y)
    bits = x.dtype.itemsize * 8
    u = astype(x, _unsigned(x))
    out = right_shift(u, astype(clamp(0, y, bits - 1), u.dtype))
    return astype(where(_out_of_range(y, bits), as_tensor(np.zeros((), u.dtype)), out), x.dtype)


def shift_right_arithmetic(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.shift_right_arithmetic: x >> y filling with the sign bit."""
    x, y = _pair(x, y)
    _need_int("shift_right_arithmetic", x, y)
    bits = x.dtype.itemsize * 8
    shift = astype(where(_out_of_range(y, bits), bits - 1, y), x.dtype)
    return right_shift(x, shift)


def population_count(x: ArrayLike) -> Tensor:
    """lax.population_count: the number of set bits, in x's dtype."""
    x = as_tensor(x)
    _need_int("population_count", x)
    return astype(bitwise_count(astype(x, _unsigned(x))), x.dtype)


def clz(x: ArrayLike) -> Tensor:
    """lax.clz: the number of leading zero bits, in x's dtype."""
    x = as_tensor(x)
    _need_int("clz", x)
    bits = x.dtype.itemsize * 8
    u = astype(x, _unsigned(x))
    shift = 1
    while shift < bits:  # smear the highest set bit down; its popcount is the bit length
        u = bitwise_or(u, right_shift(u, as_tensor(np.array(shift, dtype=u.dtype))))
        shift *= 2
    return astype(ew.sub(bits, astype(bitwise_count(u), np.int64)), x.dtype)


# --- reductions ----------------------------------------------------------------------------
def _axes(operand, axes, who):
    x = as_tensor(operand)
    return x, tuple(_axis(a, x.ndim, who) for a in ints(axes, who, "axes"))


def reduce_sum(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_sum: the sum over `axes`, in the operand's dtype."""
    x, axes = _axes(operand, axes, "reduce_sum")
    return cast_to(sum(x, axis=axes), x.dtype)


def reduce_prod(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_prod: the product over `axes`, in the operand's dtype."""
    x, axes = _axes(operand, axes, "reduce_prod")
    return cast_to(prod(x, axis=axes), x.dtype)


def reduce_max(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_max: the maximum over `axes`."""
    x, axes = _axes(operand, axes, "reduce_max")
    return _identity_if_empty(x, axes, "max") if _empty(x, axes) else max(x, axis=axes)


def reduce_min(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_min: the minimum over `axes`."""
    x, axes = _axes(operand, axes, "reduce_min")
    return _identity_if_empty(x, axes, "min") if _empty(x, axes) else min(x, axis=axes)


def _empty(x, axes):
    return builtins.any(x.shape[a] == 0 for a in axes)


def _identity_if_empty(x, axes, which):
    """max (min) over no elements: the lowest (highest) value of the dtype, as XLA's."""
    if x.dtype == np.bool_:
        value = which == "min"
    elif np.issubdtype(x.dtype, np.integer):
        value = getattr(np.iinfo(x.dtype), "min" if which == "max" else "max")
    else:
        value = -np.inf if which == "max" else np.inf
    shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return as_tensor(np.full(shape, value, dtype=x.dtype))


def _bitwise_reduce(who, op, logical, operand, axes):
    x, axes = _axes(operand, axes, who)
    if x.dtype == np.bool_ and logical is not None:
        return logical(x, axis=axes)
    if x.dtype != np.bool_:
        _need_int(who, x)
    rest = [d for d in range(x.ndim) if d not in axes]
    x = transpose(x, tuple(axes) + tuple(rest))
    n = int(np.prod([x.shape[i] for i in range(len(axes))], dtype=np.int64))
    x = reshape(x, (n,) + x.shape[len(axes):])
    if n == 0:
        identity = {"reduce_and": -1, "reduce_or": 0, "reduce_xor": 0}[who]
        return as_tensor(np.full(x.shape[1:], identity, dtype=x.dtype))
    out = getitem(x, 0)
    for i in range(1, n):  # integers: the fold runs at trace time, one op per element
        out = op(out, getitem(x, i))
    return out


def reduce_and(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """lax.reduce_and: logical (bool) or bitwise (integers) and over `axes`."""
    return _bitwise_reduce("reduce_and", bitwise_and, all, operand, axes)


def reduce_or(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """lax.reduce_or: logical (bool) or bitwise (integers) or over `axes`."""
    return _bitwise_reduce("reduce_or", bitwise_or, any, operand, axes)


def reduce_xor(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """lax.reduce_xor: logical (bool) or bitwise (integers) xor over `axes`."""
    x, _ = _axes(operand, axes, "reduce_xor")
    if x.dtype == np.bool_:
        return not_equal(_bitwise_reduce("reduce_xor", bitwise_xor, None, astype(x, np.uint8),
                                         axes), 0)
    return _bitwise_reduce("reduce_xor", bitwise_xor, None, x, axes)


def argmax(operand: ArrayLike, axis: int, index_dtype: DTypeLike) -> Tensor:
    """lax.argmax(operand, axis, index_dtype): the first index of the maximum along axis."""
    x = as_tensor(operand)
    return astype(np_argmax(x, axis=_axis(axis, x.ndim, "argmax")), index_dtype)


def argmin(operand: ArrayLike, axis: int, index_dtype: DTypeLike) -> Tensor:
    """lax.argmin(operand, axis, index_dtype): the first index of the minimum along axis."""
    x = as_tensor(operand)
    return astype(np_argmin(x, axis=_axis(axis, x.ndim, "argmin")), index_dtype)


# --- sorting -------------------------------------------------------------------------------
def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """lax.sort: one array sorted along `dimension`, or a sequence of arrays sorted together
    by the first num_keys of them (lexicographically; stable), returned as a tuple."""
    single = isinstance(operand, Tensor) or not isinstance(operand, (list, tuple))
    xs = [as_tensor(operand)] if single else [as_tensor(o) for o in operand]
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of "
                         f"operands, {len(xs)}")
    if builtins.any(x.shape != xs[0].shape for x in xs):
        raise TypeError("sort: the operands must have one shape, got "
                        f"{[x.shape for x in xs]}")
    d = _axis(dimension, xs[0].ndim, "sort")
    order = None
    for key in reversed(xs[:num_keys]):  # stable sorts from the last key: lexicographic
        k = key if order is None else take_along_axis(key, order, axis=d)
        idx = argsort(ew.stop_gradient(k), axis=d)
        order = idx if order is None else take_along_axis(order, idx, axis=d)
    out = tuple(take_along_axis(x, order, axis=d) for x in xs)
    return out[0] if single else out


def sort_key_val(keys: ArrayLike, values: ArrayLike, dimension: int = -1,
                 is_stable: bool = True) -> tuple[Tensor, Tensor]:
    """lax.sort_key_val: keys sorted along `dimension`, values reordered with them."""
    return sort((keys, values), dimension, is_stable, 1)


def top_k(operand: ArrayLike, k: int, *, axis: int = -1) -> tuple[Tensor, Tensor]:
    """lax.top_k: the k largest entries along the last axis in descending order (the lower
    index first among ties) and their int32 indices; differentiable in the values."""
    x = as_tensor(operand)
    d = _axis(axis, x.ndim, "top_k")
    k = operator.index(k)
    if not 0 <= k <= x.shape[d]:
        raise ValueError(f"top_k: k={k} must be between 0 and the size {x.shape[d]} of axis {d}")
    idx = _take(argsort(ew.stop_gradient(x), axis=d, descending=True), d, 0, k)
    return take_along_axis(x, idx, axis=d), astype(idx, np.int32)


# --- lax.reduce ----------------------------------------------------------------------------
def reduce(operands: Any, init_values: Any, computation: Callable, dimensions: Sequence[int]
           ) -> Any:
    """lax.reduce: operands reduced over `dimensions` by `computation`, starting from
    init_values. add, mul, max, min and the bitwise ops of lax run as one reduction; any other
    computation (of one operand or a tuple of them) is folded over the elements in order,
    which is its meaning when it is associative and commutative, as XLA requires."""
    from . import functions, named, special
    single = not isinstance(operands, (list, tuple))
    xs = [as_tensor(operands)] if single else [as_tensor(o) for o in operands]
    inits = [init_values] if single else list(init_values)
    reducers = {ew.add: reduce_sum, named.add: reduce_sum, ew.mul: reduce_prod,
                named.multiply: reduce_prod, functions.maximum: reduce_max,
                functions.minimum: reduce_min,
                bitwise_and: reduce_and, bitwise_or: reduce_or, bitwise_xor: reduce_xor,
                special.logical_and: reduce_and, special.logical_or: reduce_or}
    known = _public_of(computation, reducers)
    if single and known is not None:
        return cast_to(computation(inits[0], known(xs[0], dimensions)), xs[0].dtype)
    dims = tuple(_axis(a, xs[0].ndim, "reduce") for a in ints(dimensions, "reduce",
                                                                "dimensions"))
    rest = [d for d in range(xs[0].ndim) if d not in dims]
    flat = []
    for x in xs:
        x = transpose(x, dims + tuple(rest))
        flat.append(reshape(x, (-1,) + x.shape[len(dims):]) if dims else expand_dims(x, 0))
    acc = [broadcast_to(astype(as_tensor(v), x.dtype), x.shape[1:])
           for v, x in zip(inits, flat)]
    for i in range(flat[0].shape[0]):
        step = computation(acc[0], getitem(flat[0], i)) if single else computation(
            tuple(acc), tuple(getitem(x, i) for x in flat))
        acc = [step] if single else list(step)
    return acc[0] if single else tuple(acc)


def _public_of(computation, reducers):
    return next((r for fn, r in reducers.items() if computation is fn), None)
