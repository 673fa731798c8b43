"""jax.numpy's functions that build or edit arrays by position: insert, delete,
put_along_axis and fill_diagonal (which return a new array: JAX's inplace=False), choose,
resize, block, and the partial sorts (argpartition, partition, lexsort, sort_complex). Each
is a gather, scatter or concatenation of differentiable ops; positions must be known (Python
or NumPy values, or concrete tensors).

Imports tape and ops' functions, gathers, arrays and elementwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .arrays import moveaxis
from .functions import (arange, as_tensor, broadcast_to, concatenate, expand_dims, getitem,
                        reshape, stack)
from .gathers import argsort, sort, take, take_along_axis
from .special import remainder

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..tape.types import ArrayLike

__all__ = ["insert", "delete", "put_along_axis", "fill_diagonal", "choose", "resize", "block",
           "argpartition", "partition", "lexsort", "sort_complex"]


def _positions(obj, who):
    """obj as a NumPy value: positions decide shapes, so they must be known."""
    if isinstance(obj, slice):
        return obj
    if isinstance(obj, Tensor):
        if obj._trace is not None:
            raise TypeError(f"{who}: the positions (obj) are traced, but they decide the "
                            f"result's shape; pass them as Python ints or a NumPy array")
        return obj.detach().numpy()
    return np.asarray(obj)


def _inplace(inplace, who):
    if inplace:
        raise ValueError(f"{who}: scanlib's arrays are immutable, so it cannot write into a; "
                         f"pass inplace=False and use the array it returns, as in JAX")


def _flat_axis(arr, axis):
    if axis is None:
        return reshape(arr, (-1,)), 0
    return arr, axis % arr.ndim


def delete(arr: ArrayLike, obj: Any, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Tensor:
    """arr without the entries at obj (an int, a slice, ints or a bool mask) along axis (of
    arr flattened when None), as jnp.delete.

    >>> sl.numpy.delete(sl.tensor([1.0, 2.0, 3.0]), 1)
    """
    arr, axis = _flat_axis(as_tensor(arr), axis)
    keep = np.delete(np.arange(arr.shape[axis]), _positions(obj, "delete"))
    return take(arr, keep, axis=axis)


def insert(arr: ArrayLike, obj: Any, values: ArrayLike, axis: int | None = None) -> Tensor:
    """arr with values inserted before the positions obj (an int, a slice or ints) along axis
    (of arr flattened when None), as jnp.insert / numpy.insert; differentiable in both.

    >>> sl.numpy.insert(sl.tensor([1.0, 2.0, 3.0]), 1, sl.tensor([7.0, 8.0]))
    """
    arr, axis = _flat_axis(as_tensor(arr), axis)
    values = as_tensor(values)
    n = arr.shape[axis]
    where_ = _positions(obj, "insert")
    if isinstance(where_, slice):
        where_ = np.arange(*where_.indices(n))
    if where_.ndim == 0:  # values form a block inserted at one place, as in NumPy
        while values.ndim < arr.ndim:
            values = expand_dims(values, 0)
        values = moveaxis(values, 0, axis) if values.ndim else values
        m = values.shape[axis] if values.ndim else 1
    else:
        m = where_.shape[0]
        while values.ndim < arr.ndim:
            values = expand_dims(values, 0)
    shape = arr.shape[:axis] + (m,) + arr.shape[axis + 1:]
    values = broadcast_to(ew.astype(values, dtype=arr.dtype), shape)
    order = np.insert(np.arange(n), where_, n + np.arange(m))
    return take(concatenate([arr, values], axis), order, axis=axis)


def _along_grids(idx, axis):
    """The index tuple that picks idx's entries along axis and matches the other axes."""
    grids = np.meshgrid(*[np.arange(s) for s in idx.shape], indexing="ij", sparse=True)
    return tuple(idx if i == axis else grids[i] for i in range(idx.ndim))


def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None,
                   inplace: bool = True, *, mode: str | None = None) -> Tensor:
    """arr with values written at indices along axis (matched on the other axes, as in
    take_along_axis), as jnp.put_along_axis, which needs inplace=False; differentiable.

    >>> sl.numpy.put_along_axis(sl.zeros((1, 3)), sl.tensor([[2]]), 5.0, 1, inplace=False)
    """
    _inplace(inplace, "put_along_axis")
    arr = as_tensor(arr)
    idx = as_tensor(indices)
    if axis is None:
        flat = reshape(arr, (-1,))
        return reshape(flat.at[reshape(idx, (-1,))].set(reshape(broadcast_to(
            as_tensor(values), idx.shape), (-1,))), arr.shape)
    axis = axis % arr.ndim
    if idx.ndim != arr.ndim:
        raise ValueError(f"put_along_axis: indices and arr must have the same number of "
                         f"dimensions, got shapes {idx.shape} and {arr.shape}")
    shape = tuple(idx.shape[i] if i == axis else max(idx.shape[i], arr.shape[i])
                  for i in range(arr.ndim))
    idx = broadcast_to(idx, shape)
    return arr.at[_along_grids(idx, axis)].set(broadcast_to(as_tensor(values), shape))


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *,
                  inplace: bool = True) -> Tensor:
    """a with its main diagonal set to val (repeated along it when shorter), as
    jnp.fill_diagonal, which needs inplace=False; wrap=True restarts the diagonal of a tall
    matrix every ncols + 1 rows, as in NumPy.

    >>> sl.numpy.fill_diagonal(sl.zeros((2, 2)), 1.0, inplace=False)
    """
    _inplace(inplace, "fill_diagonal")
    a = as_tensor(a)
    if a.ndim < 2 or (a.ndim > 2 and len(set(a.shape)) != 1):
        raise ValueError(f"fill_diagonal: a must be 2-d, or have all sides equal, got shape "
                         f"{a.shape}")
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.size if wrap else a.shape[1] * a.shape[1]
        flat_idx = np.arange(0, min(end, a.size), step)
    else:
        flat_idx = np.arange(a.shape[0]) * int(np.sum(np.cumprod((1,) + a.shape[:0:-1])))
    val = reshape(as_tensor(val), (-1,))
    n = flat_idx.shape[0]
    if val.shape[0] != n:
        val = getitem(val, np.arange(n) % max(val.shape[0], 1))
    flat = reshape(a, (-1,))
    return reshape(flat.at[flat_idx].set(ew.astype(val, dtype=a.dtype)), a.shape)


def choose(a: ArrayLike, choices: Sequence[ArrayLike], out: None = None,
           mode: str = "raise") -> Tensor:
    """Elementwise choices[a][...], all broadcast together, as jnp.choose: mode 'raise'
    (indices checked, so a must be concrete), 'wrap' or 'clip'; differentiable in the
    choices.

    >>> sl.numpy.choose(sl.tensor([0, 1]), [sl.tensor([1.0, 1.0]), sl.tensor([2.0, 2.0])])
    """
    if out is not None:
        raise NotImplementedError("choose: out= is not supported; use the returned array")
    a = as_tensor(a)
    n = len(choices)
    if mode == "raise":
        if a._trace is not None:
            raise TypeError("choose: mode='raise' checks the indices, which are not known "
                            "while tracing; pass mode='clip' or mode='wrap', as in JAX")
        values = a.detach().numpy()
        if values.size and (values.min() < 0 or values.max() >= n):
            raise ValueError(f"choose: indices must be in [0, {n}), got values from "
                             f"{values.min()} to {values.max()}; or pass mode='clip'/'wrap'")
    elif mode == "wrap":
        a = remainder(a, n)
    elif mode == "clip":
        a = ew.minimum(ew.maximum(a, 0), n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    cs = [as_tensor(c) for c in choices]
    shape = np.broadcast_shapes(a.shape, *[c.shape for c in cs])
    stacked = stack([broadcast_to(c, shape) for c in cs])
    return getitem(take_along_axis(stacked, expand_dims(broadcast_to(a, shape), 0), 0), 0)


def resize(a: ArrayLike, new_shape: int | Sequence[int]) -> Tensor:
    """a's elements (flattened, repeated as often as needed) in new_shape, as jnp.resize.

    >>> sl.numpy.resize(sl.tensor([1.0, 2.0, 3.0]), (2, 2))
    """
    a = reshape(as_tensor(a), (-1,))
    shape = (int(new_shape),) if np.ndim(new_shape) == 0 else tuple(int(s) for s in new_shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"resize: new_shape must be non-negative, got {shape}")
    size = int(np.prod(shape))
    if a.shape[0] == 0:
        return reshape(ew.astype(ew.mul(arange(size, device=a.device), 0), dtype=a.dtype),
                       shape)
    return reshape(getitem(a, np.arange(size) % a.shape[0]), shape)


def _block_depth(arrays):
    depth = 0
    while isinstance(arrays, list):
        if not arrays:
            raise ValueError("block: lists must not be empty")
        arrays, depth = arrays[0], depth + 1
    return depth


def _block(arrays, depth, ndim):
    if not isinstance(arrays, list):
        if isinstance(arrays, tuple):
            raise TypeError("block: nest lists, not tuples (as in NumPy)")
        t = as_tensor(arrays)
        return reshape(t, (1,) * (ndim - t.ndim) + t.shape)
    parts = [_block(x, depth - 1, ndim) for x in arrays]
    return concatenate(parts, axis=-depth)


def block(arrays: Any) -> Tensor:
    """An array assembled from nested lists of blocks, as jnp.block: the innermost lists
    join along the last axis, the next ones along the one before, and so on.

    >>> sl.numpy.block([[sl.eye(2), sl.zeros((2, 1))], [sl.ones((1, 3))]])
    """
    depth = _block_depth(arrays)

    def leaves(x):
        return [y for z in x for y in leaves(z)] if isinstance(x, list) else [as_tensor(x)]
    ndim = max([depth] + [t.ndim for t in leaves(arrays)])
    if depth == 0:
        return as_tensor(arrays)
    return _block(arrays, depth, ndim)


# --- partial sorts ---------------------------------------------------------------------------
def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Tensor:
    """Indices (int32, as JAX's) that partition a along axis around its kth smallest value, as
    jnp.argpartition: the kth+1 smallest first, in increasing order, then the others in their
    original order (JAX's order; NumPy leaves it unspecified).

    >>> sl.numpy.argpartition(sl.tensor([5.0, 3.0, 1.0, 2.0, 4.0]), 2)
    """
    a = moveaxis(as_tensor(a), axis, -1)
    n = a.shape[-1]
    kth = int(kth) + n if int(kth) < 0 else int(kth)
    if not 0 <= kth < n:
        raise ValueError(f"argpartition: kth={kth} is out of range for {n} entries")
    order = argsort(a, axis=-1)
    rank = argsort(order, axis=-1)
    rest = argsort(ew.astype(ew.less_equal(rank, kth), dtype=np.dtype(np.int8)), axis=-1)
    idx = concatenate([getitem(order, (..., slice(0, kth + 1))),
                       getitem(rest, (..., slice(0, n - kth - 1)))], axis=-1)
    return moveaxis(ew.astype(idx, dtype=np.dtype(np.int32)), -1, axis)


def partition(a: ArrayLike, kth: int, axis: int = -1) -> Tensor:
    """a partitioned along axis around its kth smallest value, as jnp.partition: the kth+1
    smallest values in increasing order, then the others in decreasing order (JAX's order;
    NumPy leaves it unspecified); differentiable.

    >>> sl.numpy.partition(sl.tensor([5.0, 3.0, 1.0, 2.0, 4.0]), 2)
    """
    a = moveaxis(as_tensor(a), axis, -1)
    n = a.shape[-1]
    kth = int(kth) + n if int(kth) < 0 else int(kth)
    if not 0 <= kth < n:
        raise ValueError(f"partition: kth={kth} is out of range for {n} entries")
    s = sort(a, axis=-1)
    out = concatenate([getitem(s, (..., slice(0, kth + 1))),
                       getitem(s, (..., slice(n - 1, kth, -1)))], axis=-1)
    return moveaxis(out, -1, axis)


def lexsort(keys: Sequence[ArrayLike], axis: int = -1) -> Tensor:
    """Indices (int64) that sort by the last key, then the one before, and so on (stable),
    as jnp.lexsort.

    >>> sl.numpy.lexsort([sl.tensor([1, 0, 2]), sl.tensor([0, 0, 1])])
    """
    keys = [as_tensor(k) for k in (keys if isinstance(keys, (list, tuple)) else
                                   list(as_tensor(keys)))]
    if not keys:
        raise TypeError("lexsort: give at least one key")
    shape = np.broadcast_shapes(*[k.shape for k in keys])
    keys = [broadcast_to(k, shape) for k in keys]
    order = argsort(keys[0], axis=axis)
    for k in keys[1:]:
        order = take_along_axis(order, argsort(take_along_axis(k, order, axis), axis=axis),
                                axis)
    return order


def sort_complex(a: ArrayLike) -> Tensor:
    """a sorted by real part, then imaginary part, along the last axis, as a complex array,
    as jnp.sort_complex; differentiable.

    >>> sl.numpy.sort_complex(sl.tensor([3.0, 1.0, 2.0]))
    """
    a = as_tensor(a)
    kind = a.dtype.kind
    if kind != "c":
        a = ew.astype(a, dtype=np.dtype(np.complex64 if a.dtype in (np.float32, np.float16)
                                        else np.complex128))
    order = lexsort([ew.imag(a), ew.real(a)], axis=-1)
    return take_along_axis(a, order, -1)


NUMPY_FUNCTIONS: dict = {}
NUMPY_UFUNCS: dict = {}
