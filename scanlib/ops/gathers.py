"""Sorting and gathers in the manner of jax.numpy: sort/argsort, take, take_along_axis and
searchsorted. A gather is one getitem whose VJP scatters back; index checks (mode 'raise',
'clip', 'wrap') run at call time or, in a scan body, at run time.

Imports tape, the primitive modules of ops, functions' wrappers and ops.arrays' helpers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import batching
from . import elementwise as ew
from .arrays import _along, _flat, _on_device_of, _xp, _zero_d_as_1d, flip
from .functions import one_axis, as_tensor
from .primitive import Primitive
from .structural import getitem

if TYPE_CHECKING:
    from ..tape.types import ArrayLike, Axis, DTypeLike

__all__ = ["sort", "argsort", "take", "take_along_axis", "searchsorted"]


def _gather_along(x, idx, axis):
    """x[..., idx, ...] element by element along axis (idx has x's ndim and in-range
    values): NumPy's take_along_axis, one getitem whose VJP scatters back."""
    index = []
    for i in range(x.ndim):
        if i == axis:
            index.append(idx)
        else:
            shape = [1] * x.ndim
            shape[i] = x.shape[i]
            index.append(np.arange(x.shape[i]).reshape(shape))
    return getitem(x, tuple(index))


def _argsort_impl(x, axis):
    # kind="stable" is NumPy's stable sort and CuPy's only one (its array API passes it too)
    return _xp(x).argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)


argsort_p = Primitive("argsort", _argsort_impl, batch=batching.axis_rule)  # indices: no gradient


def _jax_sort_options(who, kind, order, stable):
    if kind is not None and kind not in _SORT_KINDS:
        raise ValueError(f"{who}: kind must be one of {_SORT_KINDS[1:]}, got {kind!r}")
    if order is not None:
        raise TypeError(f"{who}: order= is for structured arrays, which tensors are not; "
                        "leave it out")
    if stable not in (True, False):
        raise TypeError(f"{who}: stable must be True or False, got {stable!r}")


def _argsort_along(a, axis, descending):
    """Stable sorting indices; descending ones keep equal values in their order too, as JAX's:
    the ascending ones of a reversed, reversed back and renumbered."""
    if not descending:
        return argsort_p(a, axis=axis)
    flipped = argsort_p(flip(a, axis), axis=axis)
    return ew.sub(a.shape[axis] - 1, flip(flipped, axis))


def argsort(a: ArrayLike, axis: Axis = -1, *, kind: str | None = None, order: None = None,
            stable: bool = True, descending: bool = False, dtype: DTypeLike = None) -> Tensor:
    """Indices (int64, or dtype) that sort a along axis (of the flattened tensor when None),
    as jnp.argsort: ascending, or descending=True; equal values keep their order either way
    (stable=False allows any order of them, and this one is it). Not differentiable.

    >>> sl.argsort(sl.tensor([3.0, 1.0, 2.0]))
    """
    _jax_sort_options("argsort", kind, order, stable)
    a, axis = _zero_d_as_1d(as_tensor(a), axis)
    if axis is None:
        a, axis = _flat(a), 0
    idx = _argsort_along(a, one_axis(axis, a.ndim, "argsort"), descending)
    return idx if dtype is None else ew.astype(idx, dtype=np.dtype(dtype))


def sort(a: ArrayLike, axis: Axis = -1, *, kind: str | None = None, order: None = None,
         stable: bool = True, descending: bool = False) -> Tensor:
    """a sorted along axis (flattened when None), ascending or descending=True, as jnp.sort;
    differentiable: the cotangent goes back through the sorting permutation (equal values by
    the stable order).

    >>> sl.sort(sl.tensor([3.0, 1.0, 2.0]))
    """
    _jax_sort_options("sort", kind, order, stable)
    a = as_tensor(a)
    if axis is None:
        a, axis = _flat(a), 0
    axis = one_axis(axis, a.ndim, "sort")
    return _gather_along(a, _argsort_along(a, axis, descending), axis)


# --- gathers --------------------------------------------------------------------------------
def _fixed_indices_impl(idx, size, mode):
    """idx made in-range for an axis of `size` by mode; "raise" checks (at run time, also in
    a scan body) and turns negative indices into positive ones."""
    xp = _xp(idx)
    if mode == "clip":
        return xp.clip(idx, 0, size - 1)
    if mode == "wrap":
        return xp.mod(idx, size)
    bad = (idx < -size) | (idx >= size)
    if bool(bad.any()):
        raise IndexError(_out_of_range_message(int(idx[bad].ravel()[0].item()), size))
    return xp.where(idx < 0, idx + size, idx)


def _out_of_range_message(value, size):
    return (f"index {value} is out of bounds for an axis of size {size}. Pass mode='clip' "
            "to clamp indices to [0, size - 1] or mode='wrap' to take them modulo size "
            "(JAX fills or clips silently under jit; scanlib raises instead).")


def _fixed_indices_batch(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """Element by element: a batch of indices is one call (a scan's loop checks per step, so
    that an error names the step)."""
    return None if ops.loop else (lambda idx: ops.bind(prim, idx, **params))


fixed_indices_p = Primitive("fixed_indices", _fixed_indices_impl,  # integers: no gradient
                            batch=_fixed_indices_batch)


def _index_tensor(indices, like, who):
    if isinstance(indices, (list, tuple)) and np.asarray(indices).size == 0:
        indices = np.zeros(np.shape(indices), np.int64)  # [] reads as float64; NumPy takes it
    idx = _on_device_of(indices, like)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{who}: indices must be integers, got {idx.dtype}; cast them with "
                        ".astype('int64')")
    return idx


def _checked(idx, size, mode, who):
    if mode not in (None, "raise", "clip", "wrap"):
        raise ValueError(f"{who}: mode must be None, 'raise', 'clip' or 'wrap', got {mode!r}")
    mode = mode or "raise"
    if size == 0 and idx.size:
        raise IndexError(f"{who}: cannot take from an empty axis (indices {idx.shape})")
    if mode == "raise" and idx._trace is None:  # known now: the error comes from here
        xp = _xp(idx._value)
        bad = (idx._value < -size) | (idx._value >= size)
        if bool(xp.any(bad)):
            value = int(idx._value[bad].ravel()[0].item())
            raise IndexError(f"{who}: " + _out_of_range_message(value, size))
    return fixed_indices_p(idx, size=int(size), mode=mode) if idx.size else idx


def take(a: ArrayLike, indices: ArrayLike, axis: Axis = None, mode: str | None = None) -> Tensor:
    """Elements of a at indices along axis (of the flattened tensor when axis is None).

    mode None or 'raise': negative indices count from the end, out-of-range ones raise
    IndexError (also at run time inside a scan body); 'clip' clamps to [0, n - 1] (negative
    ones too, as NumPy and JAX); 'wrap' takes indices modulo n. Differentiable in a.

    >>> sl.take(sl.tensor([1.0, 2.0, 3.0]), [2, 0])
    """
    a, axis = _zero_d_as_1d(as_tensor(a), axis)
    if axis is None:
        a, axis = _flat(a), 0
    axis = one_axis(axis, a.ndim, "take")
    idx = _checked(_index_tensor(indices, a, "take"), a.shape[axis], mode, "take")
    return getitem(a, _along(axis, idx))


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: Axis = -1) -> Tensor:
    """arr's elements at indices along axis, matched element by element on the other axes
    (broadcast), as numpy.take_along_axis; axis=None takes from the flattened arr.

    Out-of-range indices raise IndexError (negative ones count from the end).

    >>> sl.take_along_axis(sl.tensor([[3.0, 1.0]]), sl.tensor([[1, 0]]), axis=1)
    """
    arr = as_tensor(arr)
    idx = _index_tensor(indices, arr, "take_along_axis")
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(f"take_along_axis: with axis=None indices must be 1-d, got shape "
                             f"{idx.shape}")
        arr, axis = _flat(arr), 0
    if idx.ndim != arr.ndim:
        raise ValueError(f"take_along_axis: indices and arr must have the same number of "
                         f"dimensions, got shapes {idx.shape} and {arr.shape}")
    axis = one_axis(axis, arr.ndim, "take_along_axis")
    idx = _checked(idx, arr.shape[axis], None, "take_along_axis")
    return _gather_along(arr, idx, axis)


_SIDES = ("left", "right")
_SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")
searchsorted_p = Primitive(
    "searchsorted",
    lambda a, v, side, dtype: _xp(a, v).searchsorted(a, v, side=side).astype(dtype, copy=False),
    batch=batching.first_free_rule)


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike = None,
                 *, method: str = "scan") -> Tensor:
    """Indices where the elements of v would be inserted into the sorted 1-d a to keep it
    sorted ('left': before equal values, 'right': after), as jnp.searchsorted: int32 (int64
    only where a is longer than int32 can count), with or without x64, where NumPy gives int64.
    `sorter` (argsort(a)) searches an unsorted a; `method` is JAX's choice of algorithm, one
    result. Not differentiable.

    >>> sl.searchsorted(sl.tensor([1.0, 2.0, 3.0]), sl.tensor([2.0, 2.5]))
    """
    a = as_tensor(a)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got shape {a.shape}")
    if side not in _SIDES:
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in _SEARCH_METHODS:
        raise ValueError(f"searchsorted: method must be one of {_SEARCH_METHODS}, got {method!r}")
    if sorter is not None:
        a = take(a, sorter)
    v = _on_device_of(v, a)
    dtype = np.dtype(np.int32 if a.shape[0] <= np.iinfo(np.int32).max else np.int64)
    return searchsorted_p(a, v, side=side, dtype=dtype)


_SORT_KINDS = (None, "stable", "mergesort", "quicksort", "heapsort")
_STABLE_KINDS = (None, "stable", "mergesort")


def _sort_axis(axis, kind, stable, who):
    """axis, once NumPy's `kind` and `stable` are checked: scanlib's sort is stable, and any
    kind of np.sort gives the same values; np.argsort's unstable ones may order ties
    otherwise."""
    if kind not in _SORT_KINDS:
        raise ValueError(f"{who}: kind must be one of {_SORT_KINDS[1:]}, got {kind!r}")
    if stable not in (None, True, False):
        raise ValueError(f"{who}: stable must be None, True or False, got {stable!r}")
    if stable is not None and kind is not None:
        raise ValueError(f"{who}: `kind` and keyword parameter `stable` cannot both be given")
    if who == "argsort" and (kind not in _STABLE_KINDS or stable is False):
        given = f"kind={kind!r}" if kind is not None else "stable=False"
        raise ValueError(f"np.argsort(t, {given}) on a scanlib Tensor: scanlib sorts stably "
                         "(equal values keep their order), which an unstable sort need not; "
                         "pass kind='stable' (or leave kind out).")
    return axis


# NumPy functions (np.f called on a Tensor, NEP 18) and ufuncs that run these ops; each
# callable takes NumPy's parameter names (numpy_interop refuses other keywords).
NUMPY_FUNCTIONS: dict = {
    np.take: lambda a, indices, axis=None, mode="raise": take(a, indices, axis, mode),
    np.take_along_axis: lambda arr, indices, axis=-1: take_along_axis(arr, indices, axis),
    np.searchsorted: lambda a, v, side="left", sorter=None: searchsorted(a, v, side, sorter),
    np.sort: lambda a, axis=-1, kind=None, *, stable=None: sort(
        a, _sort_axis(axis, kind, stable, "sort")),
    np.argsort: lambda a, axis=-1, kind=None, *, stable=None: argsort(
        a, _sort_axis(axis, kind, stable, "argsort")),
}
NUMPY_UFUNCS: dict = {}
