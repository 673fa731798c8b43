"""jax.numpy's other building and reshaping functions: append, atleast_3d, column_stack,
dstack, array_split and the h/v/d splits, fliplr, flipud, rot90, rollaxis, diagflat, tri,
vander, logspace, geomspace, trapezoid, ediff1d. Compositions of the structural ops, so their
gradients, vmap and scan bodies come with them.

Imports tape and ops.elementwise/functions/arrays/matrices/special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .arrays import diff, flip, linspace, moveaxis, ravel, split
from .functions import as_inexact, as_tensor, concatenate, reshape, sum, tensor, transpose
from .matrices import diag
from .special import log10

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..tape.types import ArrayLike, DTypeLike

__all__ = ["append", "atleast_3d", "column_stack", "dstack", "array_split", "hsplit", "vsplit",
           "dsplit", "fliplr", "flipud", "rot90", "rollaxis", "diagflat", "tri", "vander",
           "logspace", "geomspace", "trapezoid", "ediff1d"]


def _axis(axis, ndim, who):
    if not -ndim <= axis < ndim:
        raise ValueError(f"{who}: axis {axis} is out of range for a tensor with {ndim} "
                         "dimensions")
    return axis % ndim


# --- joining and splitting ------------------------------------------------------------------
def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Tensor:
    """values joined after arr along axis (both flattened when axis is None), as jnp.append.

    >>> sl.append(sl.tensor([1.0, 2.0]), sl.tensor([[3.0], [4.0]]))
    """
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def atleast_3d(*arys: ArrayLike) -> Any:
    """Each input with at least three axes: 0-d becomes (1, 1, 1), (n,) becomes (1, n, 1) and
    (m, n) becomes (m, n, 1), as jnp.atleast_3d; one tensor for one input, else a list.

    >>> sl.atleast_3d(sl.tensor([1.0, 2.0])).shape
    """
    out = []
    for a in arys:
        a = as_tensor(a)
        if a.ndim < 3:
            shape = {0: (1, 1, 1), 1: (1, a.size, 1)}.get(a.ndim, a.shape + (1,))
            a = reshape(a, shape)
        out.append(a)
    return out[0] if len(out) == 1 else out


def column_stack(tup: Sequence[ArrayLike]) -> Tensor:
    """1-d tensors as columns (and 2-d ones as they are) joined along axis 1, as
    jnp.column_stack.

    >>> sl.column_stack([sl.tensor([1.0, 2.0]), sl.tensor([3.0, 4.0])])
    """
    cols = [as_tensor(a) for a in tup]
    return concatenate([reshape(a, (a.size, 1)) if a.ndim < 2 else a for a in cols], 1)


def dstack(tup: Sequence[ArrayLike]) -> Tensor:
    """Tensors made at least 3-d (atleast_3d) joined along axis 2, as jnp.dstack.

    >>> sl.dstack([sl.tensor([1.0, 2.0]), sl.tensor([3.0, 4.0])]).shape
    """
    return concatenate([atleast_3d(a) for a in tup], 2)


def array_split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list:
    """ary split along axis into N sections (the first n % N of them one longer when N does
    not divide n) or at the given indices, as jnp.array_split.

    >>> [t.shape for t in sl.array_split(sl.arange(5.0), 3)]
    """
    ary = as_tensor(ary)
    if isinstance(indices_or_sections, (int, np.integer)):
        n = ary.shape[_axis(axis, ary.ndim, "array_split")]
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"array_split: the number of sections must be positive, got {k}")
        part, rest = divmod(n, k)
        sizes = [part + 1] * rest + [part] * (k - rest)
        indices_or_sections = list(np.cumsum(sizes)[:-1])
    return split(ary, indices_or_sections, axis)


def hsplit(ary: ArrayLike, indices_or_sections: Any) -> list:
    """split along axis 1 (axis 0 for 1-d ary), as jnp.hsplit.

    >>> [t.shape for t in sl.hsplit(sl.ones((2, 4)), 2)]
    """
    ary = as_tensor(ary)
    return split(ary, indices_or_sections, 1 if ary.ndim > 1 else 0)


def vsplit(ary: ArrayLike, indices_or_sections: Any) -> list:
    """split along axis 0 of a tensor with at least 2 axes, as jnp.vsplit.

    >>> [t.shape for t in sl.vsplit(sl.ones((4, 2)), 2)]
    """
    ary = as_tensor(ary)
    if ary.ndim < 2:
        raise ValueError(f"vsplit: ary must have at least 2 dimensions, got shape {ary.shape}")
    return split(ary, indices_or_sections, 0)


def dsplit(ary: ArrayLike, indices_or_sections: Any) -> list:
    """split along axis 2 of a tensor with at least 3 axes, as jnp.dsplit.

    >>> [t.shape for t in sl.dsplit(sl.ones((1, 2, 4)), 2)]
    """
    ary = as_tensor(ary)
    if ary.ndim < 3:
        raise ValueError(f"dsplit: ary must have at least 3 dimensions, got shape {ary.shape}")
    return split(ary, indices_or_sections, 2)


# --- reordering -----------------------------------------------------------------------------
def fliplr(m: ArrayLike) -> Tensor:
    """m reversed along axis 1, as jnp.fliplr.

    >>> sl.fliplr(sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    m = as_tensor(m)
    if m.ndim < 2:
        raise ValueError(f"fliplr: m must have at least 2 dimensions, got shape {m.shape}")
    return flip(m, 1)


def flipud(m: ArrayLike) -> Tensor:
    """m reversed along axis 0, as jnp.flipud.

    >>> sl.flipud(sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    m = as_tensor(m)
    if m.ndim < 1:
        raise ValueError("flipud: m must have at least 1 dimension, got a 0-d tensor")
    return flip(m, 0)


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Tensor:
    """m rotated by k quarter turns in the plane of axes, from the first towards the second,
    as jnp.rot90.

    >>> sl.rot90(sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    m = as_tensor(m)
    if m.ndim < 2:
        raise ValueError(f"rot90: m must have at least 2 dimensions, got shape {m.shape}")
    a1, a2 = (_axis(a, m.ndim, "rot90") for a in axes)
    if a1 == a2:
        raise ValueError(f"rot90: the two axes must differ, got {axes}")
    k = int(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a1), a2)
    perm = list(range(m.ndim))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    if k == 1:
        return transpose(flip(m, a2), tuple(perm))
    return flip(transpose(m, tuple(perm)), a2)


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Tensor:
    """a with axis moved to lie before position start, as jnp.rollaxis (moveaxis is the
    clearer spelling).

    >>> sl.rollaxis(sl.ones((2, 3, 4)), 2).shape
    """
    a = as_tensor(a)
    axis = _axis(axis, a.ndim, "rollaxis")
    if not -a.ndim <= start <= a.ndim:
        raise ValueError(f"rollaxis: start {start} is out of range for {a.ndim} dimensions")
    start = start + a.ndim if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


# --- building -------------------------------------------------------------------------------
def diagflat(v: ArrayLike, k: int = 0) -> Tensor:
    """A matrix with the flattened v on its k-th diagonal, as jnp.diagflat.

    >>> sl.diagflat(sl.tensor([[1.0, 2.0]]))
    """
    return diag(ravel(v), k)


def tri(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike = None) -> Tensor:
    """Ones at and below the k-th diagonal of an N x M matrix, as jnp.tri; float32 by default,
    as JAX's (also with x64).

    >>> sl.tri(3, k=-1)
    """
    return tensor(np.tri(N, M, k, dtype=np.float32 if dtype is None else dtype))


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of 1-d x: columns x**(N-1), ..., x**0 (increasing powers with
    increasing=True), as jnp.vander.

    >>> sl.vander(sl.tensor([1.0, 2.0, 3.0]), 3)
    """
    x = as_tensor(x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be 1-d, got shape {x.shape}")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    powers = np.arange(n) if increasing else np.arange(n)[::-1].copy()
    if x.dtype.kind in "fc":  # float32 x gives float32 powers, as in JAX
        powers = powers.astype(x.dtype)
    return ew.power(reshape(x, (x.shape[0], 1)), tensor(powers))


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             base: float = 10.0, dtype: DTypeLike = None) -> Tensor:
    """base ** linspace(start, stop, num, endpoint), as jnp.logspace.

    >>> sl.logspace(0.0, 2.0, 3)
    """
    out = ew.power(base, linspace(start, stop, num, endpoint))
    return ew.astype(out, dtype=np.dtype(dtype)) if dtype is not None else out


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              dtype: DTypeLike = None) -> Tensor:
    """num values from start to stop evenly spaced on a log scale (both negative allowed), as
    jnp.geomspace.

    >>> sl.geomspace(1.0, 1000.0, 4)
    """
    start, stop = as_tensor(start), as_tensor(stop)
    if start.dtype.kind in "biu":
        start = ew.astype(start, dtype=np.dtype(np.float64))
    sign = ew.sub(1.0, ew.mul(ew.mul(ew.sub(1.0, ew.sign(start)), ew.sub(1.0, ew.sign(stop))),
                              0.5))
    out = ew.mul(sign, logspace(log10(ew.mul(sign, start)), log10(ew.mul(sign, stop)), num,
                                endpoint))
    return ew.astype(out, dtype=np.dtype(dtype)) if dtype is not None else out


# --- differences and integrals ----------------------------------------------------------------
def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: float = 1.0,
              axis: int = -1) -> Tensor:
    """The integral of y along axis by the trapezoidal rule, at sample points x (1-d, or of
    y's shape) or spacing dx, as jnp.trapezoid.

    >>> sl.trapezoid(sl.tensor([1.0, 2.0, 3.0]), dx=0.5)
    """
    y = as_inexact(y)
    axis = _axis(axis, y.ndim, "trapezoid")
    y = moveaxis(y, axis, -1)
    if x is None:
        width = dx
    else:
        x = as_tensor(x)
        width = diff(x) if x.ndim == 1 else moveaxis(diff(x, axis=axis), axis, -1)
    n = y.shape[-1]
    return ew.mul(0.5, sum(ew.mul(width, ew.add(y[..., 1:n], y[..., 0:n - 1])), -1))


def ediff1d(ary: ArrayLike, to_end: ArrayLike | None = None,
            to_begin: ArrayLike | None = None) -> Tensor:
    """The differences of the flattened ary, with to_begin and to_end (flattened) around
    them, as jnp.ediff1d.

    >>> sl.ediff1d(sl.tensor([1.0, 4.0, 9.0]), to_begin=0.0)
    """
    arr = ravel(ary)
    parts = [ew.sub(arr[1:], arr[:-1])]
    if to_begin is not None:
        parts.insert(0, ew.astype(ravel(to_begin), dtype=arr.dtype))
    if to_end is not None:
        parts.append(ew.astype(ravel(to_end), dtype=arr.dtype))
    return concatenate(parts, 0) if len(parts) > 1 else parts[0]
