"""jax.lax's reductions and sorts: reduce_sum/prod/max/min/and/or/xor over `axes`, argmax and
argmin with lax's signature, lax.reduce (known monoids as one reduction, any other
computation folded), lax.sort of several operands by num_keys, sort_key_val and top_k.
Composed from scanlib's differentiable ops; public only through scanlib.lax.

Imports backends, tape and the public modules of ops.
"""

from __future__ import annotations

import builtins
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .functions import (as_tensor, broadcast_to, expand_dims, getitem, max, min, reshape, sum,
                        transpose)
from .gathers import argsort, take_along_axis
from .laxfuncs import cast_to, constant, ints, need_int, one_dim, take_range, value_like
from .named import astype, not_equal
from .reductions import all, any, argmax as np_argmax, argmin as np_argmin, prod
from .special import bitwise_and, bitwise_or, bitwise_xor

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from ..tape.types import ArrayLike, DTypeLike


# --- reductions ----------------------------------------------------------------------------
def _axes(operand, axes, who):
    x = as_tensor(operand)
    return x, tuple(one_dim(a, x.ndim, who) for a in ints(axes, who, "axes"))


def reduce_sum(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_sum: the sum over `axes`, in the operand's dtype.

    >>> sl.lax.reduce_sum(sl.ones((2, 3)), (0,))
    """
    x, axes = _axes(operand, axes, "reduce_sum")
    return cast_to(sum(x, axis=axes), x.dtype)


def reduce_prod(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_prod: the product over `axes`, in the operand's dtype.

    >>> sl.lax.reduce_prod(sl.full((2, 3), 2.0), (1,))
    """
    x, axes = _axes(operand, axes, "reduce_prod")
    return cast_to(prod(x, axis=axes), x.dtype)


def reduce_max(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_max: the maximum over `axes`.

    >>> sl.lax.reduce_max(sl.arange(6.0).reshape(2, 3), (1,))
    """
    x, axes = _axes(operand, axes, "reduce_max")
    return _identity_if_empty(x, axes, "max") if _empty(x, axes) else max(x, axis=axes)


def reduce_min(operand: ArrayLike, axes: Sequence[int], out_sharding: Any = None) -> Tensor:
    """lax.reduce_min: the minimum over `axes`.

    >>> sl.lax.reduce_min(sl.zeros((0, 2)), (0,))   # max and min of nothing: inf
    """
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
    return broadcast_to(constant(value, x.dtype, x), shape)


def _bitwise_reduce(who, op, logical, operand, axes):
    x, axes = _axes(operand, axes, who)
    if x.dtype == np.bool_ and logical is not None:
        return logical(x, axis=axes)
    if x.dtype != np.bool_:
        need_int(who, x)
    rest = [d for d in range(x.ndim) if d not in axes]
    x = transpose(x, tuple(axes) + tuple(rest))
    n = int(np.prod([x.shape[i] for i in range(len(axes))], dtype=np.int64))
    x = reshape(x, (n,) + x.shape[len(axes):])
    if n == 0:
        identity = {"reduce_and": -1, "reduce_or": 0, "reduce_xor": 0}[who]
        return broadcast_to(constant(identity, x.dtype, x), x.shape[1:])
    out = getitem(x, 0)
    for i in range(1, n):  # integers: the fold runs at trace time, one op per element
        out = op(out, getitem(x, i))
    return out


def reduce_and(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """lax.reduce_and: logical (bool) or bitwise (integers) and over `axes`.

    >>> sl.lax.reduce_and(sl.tensor([[True, False], [True, True]]), (1,))
    """
    return _bitwise_reduce("reduce_and", bitwise_and, all, operand, axes)


def reduce_or(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """lax.reduce_or: logical (bool) or bitwise (integers) or over `axes`.

    >>> sl.lax.reduce_or(sl.tensor(np.uint8([[1, 2], [4, 4]])), (1,))
    """
    return _bitwise_reduce("reduce_or", bitwise_or, any, operand, axes)


def reduce_xor(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """lax.reduce_xor: logical (bool) or bitwise (integers) xor over `axes`.

    >>> sl.lax.reduce_xor(sl.tensor(np.uint8([[1, 3], [4, 4]])), (1,))
    """
    x, _ = _axes(operand, axes, "reduce_xor")
    if x.dtype == np.bool_:
        return not_equal(_bitwise_reduce("reduce_xor", bitwise_xor, None, astype(x, np.uint8),
                                         axes), 0)
    return _bitwise_reduce("reduce_xor", bitwise_xor, None, x, axes)


def argmax(operand: ArrayLike, axis: int, index_dtype: DTypeLike) -> Tensor:
    """lax.argmax(operand, axis, index_dtype): the first index of the maximum along axis.

    >>> sl.lax.argmax(sl.tensor([[1.0, 3.0, 2.0]]), 1, np.int32)
    """
    x = as_tensor(operand)
    return astype(np_argmax(x, axis=one_dim(axis, x.ndim, "argmax")), index_dtype)


def argmin(operand: ArrayLike, axis: int, index_dtype: DTypeLike) -> Tensor:
    """lax.argmin(operand, axis, index_dtype): the first index of the minimum along axis.

    >>> sl.lax.argmin(sl.tensor([[1.0, 3.0, 0.0]]), 1, np.int32)
    """
    x = as_tensor(operand)
    return astype(np_argmin(x, axis=one_dim(axis, x.ndim, "argmin")), index_dtype)


# --- sorting -------------------------------------------------------------------------------
def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """lax.sort: one array sorted along `dimension`, or a sequence of arrays sorted together
    by the first num_keys of them (lexicographically; stable), returned as a tuple.

    >>> sl.lax.sort((sl.tensor([2, 1, 2]), sl.tensor([0.0, 1.0, 2.0])), num_keys=1)
    """
    single = isinstance(operand, Tensor) or not isinstance(operand, (list, tuple))
    xs = [as_tensor(operand)] if single else [as_tensor(o) for o in operand]
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of "
                         f"operands, {len(xs)}")
    if builtins.any(x.shape != xs[0].shape for x in xs):
        raise TypeError("sort: the operands must have one shape, got "
                        f"{[x.shape for x in xs]}")
    d = one_dim(dimension, xs[0].ndim, "sort")
    order = None
    for key in reversed(xs[:num_keys]):  # stable sorts from the last key: lexicographic
        k = key if order is None else take_along_axis(key, order, axis=d)
        idx = argsort(ew.stop_gradient(k), axis=d)
        order = idx if order is None else take_along_axis(order, idx, axis=d)
    out = tuple(take_along_axis(x, order, axis=d) for x in xs)
    return out[0] if single else out


def sort_key_val(keys: ArrayLike, values: ArrayLike, dimension: int = -1,
                 is_stable: bool = True) -> tuple[Tensor, Tensor]:
    """lax.sort_key_val: keys sorted along `dimension`, values reordered with them.

    >>> sl.lax.sort_key_val(sl.tensor([3.0, 1.0, 2.0]), sl.tensor([0, 1, 2]))
    """
    return sort((keys, values), dimension, is_stable, 1)


def top_k(operand: ArrayLike, k: int, *, axis: int = -1) -> tuple[Tensor, Tensor]:
    """lax.top_k: the k largest entries along the last axis in descending order (the lower
    index first among ties) and their int32 indices; differentiable in the values.

    >>> sl.lax.top_k(sl.tensor([1.0, 4.0, 3.0]), 2)
    """
    x = as_tensor(operand)
    d = one_dim(axis, x.ndim, "top_k")
    k = operator.index(k)
    if not 0 <= k <= x.shape[d]:
        raise ValueError(f"top_k: k={k} must be between 0 and the size {x.shape[d]} of axis {d}")
    idx = take_range(argsort(ew.stop_gradient(x), axis=d, descending=True), d, 0, k)
    return take_along_axis(x, idx, axis=d), astype(idx, np.int32)


def approx_max_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Tensor, Tensor]:
    """lax.approx_max_k: the k largest along reduction_dimension and their int32 indices;
    scanlib's are exact (recall 1, as JAX's on CPU).

    >>> sl.lax.approx_max_k(sl.tensor([1.0, 4.0, 3.0]), 2)
    """
    return top_k(operand, k, axis=reduction_dimension)


def approx_min_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Tensor, Tensor]:
    """lax.approx_min_k: the k smallest along reduction_dimension, ascending, and their int32
    indices (exact, the lower index first among ties).

    >>> sl.lax.approx_min_k(sl.tensor([1.0, 4.0, 3.0]), 2)
    """
    x = as_tensor(operand)
    d = one_dim(reduction_dimension, x.ndim, "approx_min_k")
    k = operator.index(k)
    if not 0 <= k <= x.shape[d]:
        raise ValueError(f"approx_min_k: k={k} must be between 0 and the size {x.shape[d]} of "
                         f"axis {d}")
    idx = take_range(argsort(ew.stop_gradient(x), axis=d), d, 0, k)
    return take_along_axis(x, idx, axis=d), astype(idx, np.int32)


# --- lax.reduce ----------------------------------------------------------------------------
def reduce(operands: Any, init_values: Any, computation: Callable, dimensions: Sequence[int]
           ) -> Any:
    """lax.reduce: operands reduced over `dimensions` by `computation`, starting from
    init_values. add, mul, max, min and the bitwise ops of lax run as one reduction; any other
    computation (of one operand or a tuple of them) is folded over the elements in order,
    which is its meaning when it is associative and commutative, as XLA requires.

    >>> sl.lax.reduce(sl.arange(6.0).reshape(2, 3), 0.0, sl.lax.add, (1,))
    """
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
    dims = tuple(one_dim(a, xs[0].ndim, "reduce") for a in ints(dimensions, "reduce",
                                                                "dimensions"))
    rest = [d for d in range(xs[0].ndim) if d not in dims]
    flat = []
    for x in xs:
        x = transpose(x, dims + tuple(rest))
        flat.append(reshape(x, (-1,) + x.shape[len(dims):]) if dims else expand_dims(x, 0))
    acc = [broadcast_to(value_like(v, x), x.shape[1:])
           for v, x in zip(inits, flat)]
    for i in range(flat[0].shape[0]):
        step = computation(acc[0], getitem(flat[0], i)) if single else computation(
            tuple(acc), tuple(getitem(x, i) for x in flat))
        acc = [step] if single else list(step)
    return acc[0] if single else tuple(acc)


def _public_of(computation, reducers):
    return next((r for fn, r in reducers.items() if computation is fn), None)
