"""jax.numpy's index and grid helpers (indices, ix_, s_, index_exp, mgrid, ogrid, r_, c_) and
its readers of raw data (frombuffer, fromiter, fromstring). The grids are constants built by
NumPy; r_ and c_ join tensors with scanlib's concatenate, so they keep gradients.

Imports tape and ops' functions and elementwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..tape import Tensor
from .functions import as_tensor, concatenate, reshape, tensor, transpose

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..tape.types import ArrayLike, DTypeLike

__all__ = ["indices", "ix_", "s_", "index_exp", "mgrid", "ogrid", "r_", "c_", "frombuffer",
           "fromiter", "fromstring"]

s_ = np.s_  # plain Python index objects, as jnp.s_ and jnp.index_exp are
index_exp = np.index_exp


def indices(dimensions: Iterable[int], dtype: DTypeLike = np.int64,
            sparse: bool = False) -> Any:
    """The index of each axis at every point of a grid of shape dimensions, stacked (or, with
    sparse=True, a tuple of broadcastable arrays), as jnp.indices.

    >>> sl.numpy.indices((2, 3))
    """
    out = np.indices(tuple(int(d) for d in dimensions), dtype=dtype, sparse=sparse)
    return tuple(tensor(o) for o in out) if sparse else tensor(out)


def ix_(*args: ArrayLike) -> tuple:
    """An open mesh of 1-d index arrays (each reshaped to vary along its own axis), as jnp.ix_:
    `a[ix_(rows, cols)]` picks the cross product.

    >>> sl.numpy.ix_(sl.tensor([0, 1]), sl.tensor([2, 3]))
    """
    out = []
    for i, a in enumerate(args):
        t = as_tensor(a)
        if t.ndim != 1:
            raise ValueError(f"ix_: each argument must be 1-d, got shape {t.shape} at {i}")
        if t.dtype == np.bool_:
            raise TypeError("ix_: bool arguments have data-dependent sizes; pass "
                            "nonzero(mask)[0] instead")
        out.append(reshape(t, (1,) * i + (-1,) + (1,) * (len(args) - i - 1)))
    return tuple(out)


class _Grid:
    """mgrid and ogrid: NumPy's dense or open grid of the slices, as tensors."""

    def __init__(self, sparse):
        self.sparse = sparse

    def __getitem__(self, key):
        out = (np.ogrid if self.sparse else np.mgrid)[key]
        if isinstance(out, (list, tuple)):
            return [tensor(o) for o in out]
        return tensor(out)


mgrid = _Grid(False)
ogrid = _Grid(True)


class _Concatenator:
    """r_ and c_: NumPy's index-expression concatenation of tensors, numbers and slices."""

    def __init__(self, axis, ndmin, trans1d):
        self.defaults = (axis, ndmin, trans1d)

    def __getitem__(self, key):
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self.defaults
        if items and isinstance(items[0], str):
            spec = items.pop(0)
            if spec in ("r", "c"):
                raise NotImplementedError(f"{spec!r}: matrix outputs are not supported; "
                                          "reshape the result instead")
            parts = [int(p) for p in spec.split(",")]
            axis, ndmin, trans1d = (parts + [ndmin, trans1d][len(parts) - 1:])[:3]
        arrays = []
        for item in items:
            if isinstance(item, slice):
                t = tensor(np.r_[item])
            else:
                t = as_tensor(item)
                if t.ndim == 0:
                    t = reshape(t, (1,))
            arrays.append(self._at_least(t, ndmin, trans1d))
        if not arrays:
            return tensor(np.zeros(0))
        return concatenate(arrays, axis)

    @staticmethod
    def _at_least(t, ndmin, trans1d):
        if t.ndim >= ndmin:
            return t
        k2 = ndmin - t.ndim
        t = reshape(t, (1,) * k2 + t.shape)
        k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
        axes = list(range(ndmin))
        return transpose(t, tuple(axes[:k1] + axes[k2:] + axes[k1:k2]))


r_ = _Concatenator(0, 1, -1)
c_ = _Concatenator(-1, 2, 0)


def frombuffer(buffer: Any, dtype: DTypeLike = float, count: int = -1,
               offset: int = 0) -> Tensor:
    """A 1-d tensor read from a bytes-like buffer, as jnp.frombuffer (a copy; eager only).

    >>> sl.numpy.frombuffer(b"\\x01\\x02", dtype="uint8")
    """
    return tensor(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).copy())


def fromiter(iterable: Iterable[Any], dtype: DTypeLike, count: int = -1) -> Tensor:
    """A 1-d tensor of the values of an iterable, as jnp.fromiter (eager only).

    >>> sl.numpy.fromiter(range(3), dtype="float64")
    """
    return tensor(np.fromiter(iterable, dtype=dtype, count=count))


def fromstring(string: str, dtype: DTypeLike = float, count: int = -1, *, sep: str) -> Tensor:
    """A 1-d tensor of the numbers in a text string separated by sep, as jnp.fromstring.

    >>> sl.numpy.fromstring("1 2 3", sep=" ")
    """
    return tensor(np.fromstring(string, dtype=dtype, count=count, sep=sep))


NUMPY_FUNCTIONS: dict = {}
NUMPY_UFUNCS: dict = {}
