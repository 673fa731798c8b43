"""jax.numpy's functions whose result size depends on the data: nonzero, argwhere,
flatnonzero, unique and its array-API forms, the sorted set operations, compress, extract,
bincount, and digitize and isin beside them. Each takes JAX's `size=` (and `fill_value=`),
which fixes the result's size so that it can run under jit, vmap and inside scan bodies;
outside those it may be left out. Values are gathered from the input, so they carry its
gradient; indices and counts are int64 (JAX's with 64-bit types).

Imports tape and ops' functions, gathers, reductions and elementwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import builtins

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .functions import (arange, as_tensor, concatenate, expand_dims, full, getitem, reshape,
                        stack, sum, where)
from .gathers import argsort, searchsorted, sort, take
from .reductions import any, cumsum
from .special import floor_divide, isnan, remainder

if TYPE_CHECKING:
    from ..tape.types import ArrayLike

__all__ = ["nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
           "unique_inverse", "unique_all", "union1d", "intersect1d", "setdiff1d", "setxor1d",
           "compress", "extract", "bincount", "digitize", "isin"]

_INT = np.dtype(np.int64)
_BIN = np.dtype(np.int32)  # jnp.digitize's dtype, with 64-bit types too


def _traced(*xs):
    return builtins.any(isinstance(x, Tensor) and x._trace is not None for x in xs)


def _size(size, count, who, *inputs):
    """The result's size: size= when given, else the count, which must be concrete."""
    if size is not None:
        return int(size)
    if _traced(*inputs):
        raise TypeError(
            f"{who}: the size of its result depends on the values of its input, which are not "
            f"known while tracing (under jit, vmap, grad's trace or in a scan body); pass size= "
            f"(and fill_value= for the entries past the count), e.g. {who}(x, size=10), as in "
            f"JAX")
    return int(count.numpy())


def _constant(like, shape, value, dtype=None):
    return full(shape, value, dtype=dtype or like.dtype, device=like.device)


def _arange(n, like):
    return arange(n, dtype=_INT, device=like.device)


def _flat(x):
    return reshape(x, (-1,))


def _padded(x, n):
    """x's first n entries along axis 0, repeating the last entry when x is shorter."""
    if x.shape[0] >= n:
        return getitem(x, slice(0, n))
    if x.shape[0] == 0:
        return _constant(x, (n,) + x.shape[1:], 0)
    return concatenate([x, getitem(x, np.full(n - x.shape[0], x.shape[0] - 1))])


def _compact(values, keep, size, fill, who, *inputs, by_value=False):
    """The entries of values (1-d) where keep holds, in order (sorted when by_value), padded
    with fill (their first one when fill is None) to `size`; and their count."""
    count = sum(keep)
    order = argsort(values) if by_value else None
    flags = ew.logical_not(keep) if order is None else getitem(ew.logical_not(keep), order)
    first = argsort(ew.astype(flags, dtype=np.dtype(np.int8)))  # stable: kept ones first
    index = first if order is None else getitem(order, first)
    n = _size(size, count, who, values, keep, *inputs)
    index = _padded(index, n)
    got = getitem(values, index) if values.shape[0] else _constant(values, (n,), 0)
    inside = ew.less(_arange(n, values), count)
    if fill is None:
        fill = getitem(got, 0) if n else 0
    return where(inside, got, fill), index, inside


# --- nonzero and its relatives ---------------------------------------------------------------
def nonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> tuple:
    """The indices (a tuple of int64 tensors, one per axis) of a's nonzero elements, as
    jnp.nonzero: with size=, exactly `size` of them (the rest fill_value, 0 by default; a
    scalar or one per axis), which lets it run under jit, vmap and in scan bodies.

    >>> sl.numpy.nonzero(sl.tensor([0.0, 3.0, 0.0, 4.0]), size=3, fill_value=-1)
    """
    a = as_tensor(a)
    if a.ndim == 0:
        raise ValueError("nonzero of a 0-d array is not defined (as in NumPy 2 and JAX); use "
                         "nonzero(atleast_1d(a))")
    keep = _flat(ew.not_equal(a, 0))
    flat_index, index, inside = _compact(_arange(a.size, a), keep, size, 0, "nonzero", a)
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * a.ndim
    if len(fills) != a.ndim:
        raise ValueError(f"nonzero: fill_value has {len(fills)} entries for an array of "
                         f"{a.ndim} axes; give one per axis, or a scalar")
    out, rest = [], flat_index
    for axis in reversed(range(a.ndim)):
        n = a.shape[axis]
        out.append(remainder(rest, n) if n else rest)
        rest = floor_divide(rest, n) if n else rest
    out = out[::-1]
    return tuple(o if f is None else where(inside, o, f) for o, f in zip(out, fills))


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Tensor:
    """The indices (int64) of the nonzero elements of a flattened, as jnp.flatnonzero (size=
    and fill_value= as in nonzero).

    >>> sl.numpy.flatnonzero(sl.tensor([[0, 1], [2, 0]]))
    """
    return nonzero(_flat(as_tensor(a)), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Tensor:
    """The indices of a's nonzero elements as the rows of an int64 matrix (n, a.ndim), as
    jnp.argwhere (size= and fill_value= as in nonzero).

    >>> sl.numpy.argwhere(sl.tensor([[0, 1], [2, 0]]))
    """
    a = as_tensor(a)
    if a.ndim == 0:
        found = nonzero(expand_dims(a, 0), size=size, fill_value=fill_value)[0]
        return getitem(expand_dims(found, 1), (slice(None), slice(0, 0)))
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=1)


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *,
             size: int | None = None, fill_value: Any = 0) -> Tensor:
    """The slices of a along axis (of a flattened when None) where condition (1-d) is true, as
    jnp.compress; with size=, exactly `size` of them, the rest fill_value.

    >>> sl.numpy.compress(sl.tensor([True, False, True]), sl.tensor([1.0, 2.0, 3.0]))
    """
    condition, a = as_tensor(condition), as_tensor(a)
    if condition.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got shape {condition.shape}")
    if axis is None:
        a, axis = _flat(a), 0
    axis = axis % a.ndim
    n = a.shape[axis]
    if condition.shape[0] > n:
        raise ValueError(f"compress: condition has {condition.shape[0]} entries, more than "
                         f"axis {axis} of a, with {n}")
    idx = nonzero(condition, size=size, fill_value=0)[0]
    got = take(a, ew.minimum(idx, builtins.max(n - 1, 0)), axis=axis)
    count = sum(ew.not_equal(condition, 0))
    inside = reshape(ew.less(_arange(idx.shape[0], a), count),
                     (-1,) + (1,) * (a.ndim - axis - 1))
    return where(inside, got, fill_value) if size is not None else got


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None,
            fill_value: Any = 0) -> Tensor:
    """The elements of arr where condition is true, flattened, as jnp.extract (size= and
    fill_value= as in compress).

    >>> sl.numpy.extract(sl.tensor([True, False]), sl.tensor([1.0, 2.0]))
    """
    return compress(_flat(as_tensor(condition)), _flat(as_tensor(arr)), size=size,
                    fill_value=fill_value)


# --- unique and the set operations -----------------------------------------------------------
def _first_of_runs(s, equal_nan=True):
    """True at the first of each run of equal values of the sorted 1-d s."""
    if s.shape[0] == 0:
        return ew.astype(s, dtype=np.dtype(np.bool_))
    new = ew.not_equal(getitem(s, slice(1, None)), getitem(s, slice(0, -1)))
    if equal_nan and s.dtype.kind in "fc":
        both = ew.logical_and(isnan(getitem(s, slice(1, None))),
                              isnan(getitem(s, slice(0, -1))))
        new = ew.logical_and(new, ew.logical_not(both))
    return concatenate([_constant(s, (1,), True, np.bool_), new])


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


def _unique(x, size, fill_value, equal_nan, who):
    """values, first indices, inverse (flat), counts of the flattened x."""
    flat = _flat(x)
    order = argsort(flat)
    s = getitem(flat, order)
    first = _first_of_runs(s, equal_nan)
    values, slots, inside = _compact(s, first, size, fill_value, who, x)
    indices = getitem(order, slots) if flat.shape[0] else slots
    indices = where(inside, indices, getitem(indices, 0)) if indices.shape[0] else indices
    group = ew.sub(cumsum(first), 1)  # the unique value each sorted element belongs to
    inverse = getitem(group, argsort(order)) if flat.shape[0] else group
    hits = ew.equal(expand_dims(group, 1), expand_dims(_arange(values.shape[0], x), 0))
    counts = sum(hits, axis=0)
    return values, indices, inverse, counts


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value: Any = None, sorted: bool = True) -> Any:
    """The sorted unique elements of ar (flattened), as jnp.unique: optionally the index of
    each one's first occurrence, the inverse (ar's shape: which unique value each element is)
    and the counts (int64). With size=, exactly `size` values (the rest fill_value, by
    default the smallest value; indices 0, counts 0), which lets it run under jit and vmap.
    The values carry ar's gradient; axis= is not supported.

    >>> sl.numpy.unique(sl.tensor([3.0, 1.0, 3.0]), return_counts=True)
    """
    if axis is not None:
        raise NotImplementedError(
            "unique(axis=...): unique rows or slices are not supported; for a 2-d array, "
            "number the rows (e.g. with a dot product against random weights) and take "
            "unique of those numbers")
    x = as_tensor(ar)
    values, indices, inverse, counts = _unique(x, size, fill_value, equal_nan, "unique")
    extra = ([indices] if return_index else []) + (
        [reshape(inverse, x.shape)] if return_inverse else []) + (
        [counts] if return_counts else [])
    return (values, *extra) if extra else values


def unique_values(x: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Tensor:
    """The sorted unique values of x (flattened), as jnp.unique_values (size= as in unique).

    >>> sl.numpy.unique_values(sl.tensor([3, 1, 3]))
    """
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x: ArrayLike, *, size: int | None = None,
                  fill_value: Any = None) -> UniqueCountsResult:
    """(values, counts) of x's unique values, as jnp.unique_counts (size= as in unique).

    >>> sl.numpy.unique_counts(sl.tensor([3, 1, 3]))
    """
    return UniqueCountsResult(*unique(x, return_counts=True, size=size, fill_value=fill_value))


def unique_inverse(x: ArrayLike, *, size: int | None = None,
                   fill_value: Any = None) -> UniqueInverseResult:
    """(values, inverse_indices of x's shape), as jnp.unique_inverse (size= as in unique).

    >>> sl.numpy.unique_inverse(sl.tensor([3, 1, 3]))
    """
    return UniqueInverseResult(*unique(x, return_inverse=True, size=size,
                                       fill_value=fill_value))


def unique_all(x: ArrayLike, *, size: int | None = None,
               fill_value: Any = None) -> UniqueAllResult:
    """(values, indices, inverse_indices, counts), as jnp.unique_all (size= as in unique).

    >>> sl.numpy.unique_all(sl.tensor([3, 1, 3]))
    """
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True,
                                   return_counts=True, size=size, fill_value=fill_value))


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False,
         invert: bool = False, *, method: str = "auto") -> Tensor:
    """True where an element of `element` is among test_elements (a bool tensor of element's
    shape), as jnp.isin; invert=True negates it. Compares every pair.

    >>> sl.numpy.isin(sl.tensor([1, 2, 3]), sl.tensor([2, 5]))
    """
    element, test = as_tensor(element), _flat(as_tensor(test_elements))
    found = any(ew.equal(expand_dims(element, -1), test), axis=-1)
    return ew.logical_not(found) if invert else found


def _set_result(c, keep, size, fill_value, who, *inputs):
    return _compact(c, keep, size, fill_value, who, *inputs, by_value=True)[0]


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None,
            fill_value: Any = None) -> Tensor:
    """The sorted unique values found in either input, as jnp.union1d (size= and fill_value=
    as in unique).

    >>> sl.numpy.union1d(sl.tensor([3, 1]), sl.tensor([2, 1]))
    """
    c = concatenate([_flat(as_tensor(ar1)), _flat(as_tensor(ar2))])
    return unique(c, size=size, fill_value=fill_value)


def _sorted_firsts(a):
    s = sort(_flat(as_tensor(a)))
    return s, _first_of_runs(s)


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False,
                return_indices: bool = False, *, size: int | None = None,
                fill_value: Any = None) -> Tensor:
    """The sorted unique values found in both inputs, as jnp.intersect1d (size= and
    fill_value= as in unique; return_indices is not supported).

    >>> sl.numpy.intersect1d(sl.tensor([3, 1, 2]), sl.tensor([2, 3, 5]))
    """
    if return_indices:
        raise NotImplementedError("intersect1d(return_indices=True) is not supported; find "
                                  "the indices with isin and nonzero")
    s, first = _sorted_firsts(ar1)
    keep = ew.logical_and(first, isin(s, ar2))
    return _set_result(s, keep, size, fill_value, "intersect1d", ar1, ar2)


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
              size: int | None = None, fill_value: Any = None) -> Tensor:
    """The sorted unique values of ar1 that are not in ar2, as jnp.setdiff1d (size= as in
    unique; fill_value defaults to 0, as in JAX).

    >>> sl.numpy.setdiff1d(sl.tensor([3, 1, 2]), sl.tensor([2, 5]))
    """
    s, first = _sorted_firsts(ar1)
    keep = ew.logical_and(first, isin(s, ar2, invert=True))
    fill = 0 if fill_value is None else fill_value  # JAX's default here
    return _set_result(s, keep, size, fill, "setdiff1d", ar1, ar2)


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
             size: int | None = None, fill_value: Any = None) -> Tensor:
    """The sorted unique values in exactly one of the inputs, as jnp.setxor1d (size= and
    fill_value= as in unique).

    >>> sl.numpy.setxor1d(sl.tensor([3, 1, 2]), sl.tensor([2, 5]))
    """
    s1, f1 = _sorted_firsts(ar1)
    s2, f2 = _sorted_firsts(ar2)
    keep = concatenate([ew.logical_and(f1, isin(s1, s2, invert=True)),
                        ew.logical_and(f2, isin(s2, s1, invert=True))])
    return _set_result(concatenate([s1, s2]), keep, size, fill_value, "setxor1d", ar1, ar2)


# --- counting and binning --------------------------------------------------------------------
def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *,
             length: int | None = None) -> Tensor:
    """How many times (or the summed weights with which) each of 0..length-1 occurs in the
    1-d integer x, as jnp.bincount: negative values count as 0 and values past length are
    dropped; length= fixes the size, which lets it run under jit and vmap. int64 counts, or
    the weights' dtype; differentiable in the weights.

    >>> sl.numpy.bincount(sl.tensor([0, 1, 1, 3]))
    """
    x = as_tensor(x)
    if x.dtype == np.bool_:
        x = ew.astype(x, dtype=_INT)
    if x.dtype.kind not in "iu":
        raise TypeError(f"bincount: x must be integers, got {x.dtype}; cast it, e.g. "
                        "x.astype('int64')")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {x.shape}")
    if length is None:
        if _traced(x):
            raise TypeError("bincount: the length of its result depends on the values of x, "
                            "which are not known while tracing (under jit, vmap or in a scan "
                            "body); pass length=, as in JAX")
        top = int(x.numpy().max()) + 1 if x.size else 0
        length = builtins.max(int(minlength), top, 0)
    hits = ew.equal(expand_dims(ew.maximum(x, 0), 1), expand_dims(_arange(int(length), x), 0))
    if weights is None:
        return sum(hits, axis=0)
    w = as_tensor(weights)
    if w.shape != x.shape:
        raise ValueError(f"bincount: weights have shape {w.shape}, x has {x.shape}; they must "
                         "match")
    return sum(ew.mul(expand_dims(w, 1), hits), axis=0)


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *,
             method: str | None = None) -> Tensor:
    """The index (int32, as JAX's) of the bin each x falls in, as jnp.digitize: bins are
    increasing or decreasing; right=True closes the bins on the right.

    >>> sl.numpy.digitize(sl.tensor([0.5, 1.5, 3.0]), sl.tensor([1.0, 2.0]))
    """
    x, bins = as_tensor(x), as_tensor(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got shape {bins.shape}")
    if bins.shape[0] == 0:
        return ew.astype(ew.mul(x, 0), dtype=_BIN)
    side = "left" if right else "right"
    increasing = ew.greater_equal(getitem(bins, -1), getitem(bins, 0))
    up = searchsorted(bins, x, side=side)
    down = ew.sub(bins.shape[0], searchsorted(getitem(bins, slice(None, None, -1)), x,
                                              side=side))
    return ew.astype(where(increasing, up, down), dtype=_BIN)


NUMPY_FUNCTIONS: dict = {}
NUMPY_UFUNCS: dict = {}
