"""jax.numpy's index helpers: tril_indices, triu_indices, diag_indices (and their _from
forms), unravel_index and ravel_multi_index, giving int64 tensors that index as NumPy's
arrays do; unravel_index and ravel_multi_index compose integer ops, so they work on traced
indices.

Imports tape and ops.elementwise/functions/special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .functions import as_tensor, tensor
from .special import floor_divide, remainder

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..tape.types import ArrayLike

__all__ = ["tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from",
           "diag_indices", "diag_indices_from", "unravel_index", "ravel_multi_index"]


def _indices(arrays):
    return tuple(tensor(np.asarray(a, np.int64)) for a in arrays)


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """The (rows, columns) of the lower triangle of an n x m matrix, as jnp.tril_indices.

    >>> sl.tril_indices(3)
    """
    return _indices(np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """The (rows, columns) of the upper triangle of an n x m matrix, as jnp.triu_indices.

    >>> sl.triu_indices(3, 1)
    """
    return _indices(np.triu_indices(n, k, m))


def _matrix_shape(arr, who):
    shape = np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"{who}: arr must be 2-d, got shape {shape}")
    return shape


def tril_indices_from(arr: ArrayLike, k: int = 0) -> tuple:
    """tril_indices for arr's (2-d) shape, as jnp.tril_indices_from.

    >>> sl.tril_indices_from(sl.ones((2, 3)))
    """
    n, m = _matrix_shape(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr: ArrayLike, k: int = 0) -> tuple:
    """triu_indices for arr's (2-d) shape, as jnp.triu_indices_from.

    >>> sl.triu_indices_from(sl.ones((2, 3)))
    """
    n, m = _matrix_shape(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """The indices of the main diagonal of an n x ... x n array of ndim axes, as
    jnp.diag_indices.

    >>> sl.diag_indices(3)
    """
    return _indices(np.diag_indices(n, ndim))


def diag_indices_from(arr: ArrayLike) -> tuple:
    """diag_indices for arr, whose axes must all have one length, as jnp.diag_indices_from.

    >>> sl.diag_indices_from(sl.ones((2, 2)))
    """
    shape = np.shape(arr)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: arr must have at least 2 axes, all of one "
                         f"length, got shape {shape}")
    return diag_indices(shape[0], len(shape))


def _int_tensor(x, who):
    x = as_tensor(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{who}: indices must be integers, got {x.dtype}")
    return x


def unravel_index(indices: ArrayLike, shape: Sequence[int]) -> tuple:
    """The multi-indices of flat indices into an array of the given shape (int64 tensors),
    as jnp.unravel_index: an index out of range is clipped (NumPy raises), a negative one
    counts from the end. Works on traced indices.

    >>> sl.unravel_index(sl.tensor([5, 7]), (3, 4))
    """
    flat = ew.astype(_int_tensor(indices, "unravel_index"), dtype=np.dtype(np.int64))
    size = int(np.prod(shape))
    flat = ew.where(ew.less(flat, 0), ew.add(flat, size), flat)
    flat = ew.maximum(ew.minimum(flat, max(size - 1, 0)), 0)
    out = []
    for d in reversed(tuple(shape)):
        out.append(remainder(flat, d) if d else flat)
        flat = floor_divide(flat, d) if d else flat
    return tuple(reversed(out))


def ravel_multi_index(multi_index: Sequence[ArrayLike], dims: Sequence[int],
                      mode: str = "raise") -> Tensor:
    """The flat indices of multi-indices into an array of shape dims (an int64 tensor), as
    jnp.ravel_multi_index: mode 'raise' refuses an index out of range (concrete indices
    only), 'wrap' wraps it around, 'clip' clips it.

    >>> sl.ravel_multi_index((sl.tensor([1, 2]), sl.tensor([0, 3])), (3, 4))
    """
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for "
                         f"{len(dims)} dimensions")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', got "
                         f"{mode!r}")
    out = None
    stride = 1
    for i, d in reversed(list(zip(multi_index, dims))):
        i = ew.astype(_int_tensor(i, "ravel_multi_index"), dtype=np.dtype(np.int64))
        if mode == "wrap":
            i = remainder(i, d)
        elif mode == "clip":
            i = ew.maximum(ew.minimum(i, d - 1), 0)
        elif i._trace is not None:
            raise TypeError("ravel_multi_index: mode='raise' checks the indices' values, "
                            "which a traced function does not have; pass mode='clip' or "
                            "mode='wrap'")
        elif i.size and (int(i.detach().numpy().min()) < 0
                         or int(i.detach().numpy().max()) >= d):
            raise ValueError(f"ravel_multi_index: an index is out of range for a dimension "
                             f"of length {d}; pass mode='clip' or mode='wrap' to bring it "
                             "in range")
        term = ew.mul(i, stride)
        out = term if out is None else ew.add(out, term)
        stride *= d
    return out
