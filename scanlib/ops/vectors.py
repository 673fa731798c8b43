"""jax.numpy's products of vectors (cross, vecdot, matvec, vecmat), finite-difference
derivatives (gradient) and histograms (histogram, histogram_bin_edges): composites of
differentiable ops.

Imports tape and ops' functions, elementwise, arrays, gathers and setops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .arrays import linspace, moveaxis
from .functions import (as_tensor, broadcast_to, concatenate, expand_dims, getitem, matmul,
                        max, min, reshape, stack, sum, where)
from .gathers import searchsorted
from .setops import bincount

if TYPE_CHECKING:
    from ..tape.types import ArrayLike

__all__ = ["cross", "vecdot", "matvec", "vecmat", "gradient", "histogram",
           "histogram_bin_edges"]


def _conj(x):
    return ew.conj(x) if x.dtype.kind == "c" else x


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Tensor:
    """The cross product of 2- or 3-vectors along axisa of a and axisb of b (broadcast over
    the other axes), as jnp.cross: 3-vectors along axisc, or a scalar per pair of 2-vectors.

    >>> sl.numpy.cross(sl.tensor([1.0, 0.0, 0.0]), sl.tensor([0.0, 1.0, 0.0]))
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(as_tensor(a), axisa, -1), moveaxis(as_tensor(b), axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"cross: the vectors must have 2 or 3 entries, got {a.shape[-1]} and "
                         f"{b.shape[-1]} (along axisa={axisa}, axisb={axisb})")
    a0, a1 = getitem(a, (..., 0)), getitem(a, (..., 1))
    b0, b1 = getitem(b, (..., 0)), getitem(b, (..., 1))
    z = ew.sub(ew.mul(a0, b1), ew.mul(a1, b0))
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z
    a2 = getitem(a, (..., 2)) if a.shape[-1] == 3 else None
    b2 = getitem(b, (..., 2)) if b.shape[-1] == 3 else None
    x = ew.neg(ew.mul(a2, b1)) if b2 is None else (
        ew.mul(a1, b2) if a2 is None else ew.sub(ew.mul(a1, b2), ew.mul(a2, b1)))
    y = ew.mul(a2, b0) if b2 is None else (
        ew.neg(ew.mul(a0, b2)) if a2 is None else ew.sub(ew.mul(a2, b0), ew.mul(a0, b2)))
    shape = np.broadcast_shapes(x.shape, y.shape, z.shape)
    c = stack([broadcast_to(t, shape) for t in (x, y, z)], axis=-1)
    return moveaxis(c, -1, axisc)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Tensor:
    """sum(conj(x1) * x2) along axis (of each), broadcast over the others, as jnp.vecdot.

    >>> sl.numpy.vecdot(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), sl.tensor([1.0, 1.0]))
    """
    x1, x2 = moveaxis(as_tensor(x1), axis, -1), moveaxis(as_tensor(x2), axis, -1)
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"vecdot: x1 has {x1.shape[-1]} entries along axis {axis}, x2 has "
                         f"{x2.shape[-1]}; they must match")
    return sum(ew.mul(_conj(x1), x2), axis=-1)


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """The matrix-vector product over the last axes (x1 (..., m, n), x2 (..., n) -> (..., m)),
    broadcast over the rest, as jnp.matvec.

    >>> sl.numpy.matvec(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), sl.tensor([1.0, 1.0]))
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    if x1.ndim < 2 or x2.ndim < 1:
        raise ValueError(f"matvec: x1 must be at least 2-d and x2 at least 1-d, got shapes "
                         f"{x1.shape} and {x2.shape}")
    return getitem(matmul(x1, expand_dims(x2, -1)), (..., 0))


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """The vector-matrix product conj(x1) @ x2 over the last axes (x1 (..., n), x2 (..., n, m)
    -> (..., m)), broadcast over the rest, as jnp.vecmat.

    >>> sl.numpy.vecmat(sl.tensor([1.0, 1.0]), sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    if x1.ndim < 1 or x2.ndim < 2:
        raise ValueError(f"vecmat: x1 must be at least 1-d and x2 at least 2-d, got shapes "
                         f"{x1.shape} and {x2.shape}")
    return getitem(matmul(expand_dims(_conj(x1), -2), x2), (..., 0, slice(None)))


# --- gradient --------------------------------------------------------------------------------
def _along(x, axis, index):
    return getitem(x, (slice(None),) * axis + (index,))


def _derivative(f, spacing, axis):
    n = f.shape[axis]
    if n < 2:
        raise ValueError(f"gradient: axis {axis} has {n} entries; at least 2 are needed")
    s = as_tensor(spacing)
    if s.ndim == 0:
        dx = reshape(broadcast_to(s, (n - 1,)), (n - 1,))
    elif s.shape == (n,):
        dx = ew.sub(getitem(s, slice(1, None)), getitem(s, slice(0, -1)))
    else:
        raise ValueError(f"gradient: a spacing must be a scalar or hold the {n} coordinates of "
                         f"axis {axis}, got shape {s.shape}")
    shape = (-1,) + (1,) * (f.ndim - axis - 1)
    first = ew.div(ew.sub(_along(f, axis, slice(1, 2)), _along(f, axis, slice(0, 1))),
                   reshape(getitem(dx, slice(0, 1)), shape))
    last = ew.div(ew.sub(_along(f, axis, slice(-1, None)), _along(f, axis, slice(-2, -1))),
                  reshape(getitem(dx, slice(-1, None)), shape))
    if n == 2:
        return concatenate([first, last], axis)
    d1 = reshape(getitem(dx, slice(0, -1)), shape)
    d2 = reshape(getitem(dx, slice(1, None)), shape)
    total = ew.add(d1, d2)
    inner = ew.add(ew.add(
        ew.mul(ew.neg(ew.div(d2, ew.mul(d1, total))), _along(f, axis, slice(0, -2))),
        ew.mul(ew.div(ew.sub(d2, d1), ew.mul(d1, d2)), _along(f, axis, slice(1, -1)))),
        ew.mul(ew.div(d1, ew.mul(d2, total)), _along(f, axis, slice(2, None))))
    return concatenate([first, inner, last], axis)


def gradient(f: ArrayLike, *varargs: ArrayLike, axis: int | tuple | None = None,
             edge_order: int | None = None) -> Any:
    """The derivative of f sampled on a grid, by central differences inside and one-sided
    ones at the ends, as jnp.gradient / numpy.gradient (edge_order 1): spacings are scalars or
    coordinate arrays, one for all axes or one per axis. A tensor for one axis, else a list.

    >>> sl.numpy.gradient(sl.tensor([1.0, 4.0, 9.0, 16.0]))
    """
    if edge_order not in (None, 1):
        raise NotImplementedError("gradient: edge_order=2 is not supported (nor in JAX); the "
                                  "ends use one-sided first-order differences")
    f = as_tensor(f)
    if f.dtype.kind not in "fc":
        f = ew.astype(f, dtype=np.dtype(np.float64))
    axes = (list(range(f.ndim)) if axis is None else
            [a % f.ndim for a in ((axis,) if isinstance(axis, int) else axis)])
    spacing = list(varargs) if varargs else [1.0]
    if len(spacing) == 1:
        spacing = spacing * len(axes)
    if len(spacing) != len(axes):
        raise TypeError(f"gradient: give one spacing, or one per axis ({len(axes)}), got "
                        f"{len(varargs)}")
    out = [_derivative(f, s, a) for s, a in zip(spacing, axes)]
    return out[0] if len(out) == 1 else out


# --- histograms ------------------------------------------------------------------------------
def histogram_bin_edges(a: ArrayLike, bins: ArrayLike = 10, range: Any = None,
                        weights: ArrayLike | None = None) -> Tensor:
    """The edges of histogram's bins, as jnp.histogram_bin_edges: bins+1 equal steps over
    range (a's min and max by default, widened by 0.5 each way when they are equal), or the
    given edges.

    >>> sl.numpy.histogram_bin_edges(sl.tensor([0.0, 1.0, 4.0]), bins=4)
    """
    a = as_tensor(a)
    if not isinstance(bins, (int, np.integer)):
        edges = as_tensor(bins)
        if edges.ndim != 1:
            raise ValueError(f"histogram: bins must be an int or 1-d edges, got shape "
                             f"{edges.shape}")
        return edges
    dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
    if range is None:
        lo, hi = (ew.astype(min(a), dtype=dtype), ew.astype(max(a), dtype=dtype)) if a.size \
            else (0.0, 1.0)
    else:
        lo, hi = range
        if not isinstance(lo, Tensor) and not isinstance(hi, Tensor) and lo > hi:
            raise ValueError(f"histogram: range must be (low, high) with low <= high, got "
                             f"{range}")
    lo, hi = as_tensor(lo), as_tensor(hi)
    same = ew.equal(lo, hi)
    lo, hi = ew.where(same, ew.sub(lo, 0.5), lo), ew.where(same, ew.add(hi, 0.5), hi)
    return linspace(ew.astype(lo, dtype=dtype), ew.astype(hi, dtype=dtype), int(bins) + 1)


def histogram(a: ArrayLike, bins: ArrayLike = 10, range: Any = None,
              weights: ArrayLike | None = None, density: bool | None = None) -> tuple:
    """(counts, bin_edges) of the values of a, as jnp.histogram: each bin holds [left, right)
    and the last also its right edge; values outside are left out. Counts are floats (as
    JAX's), weighted sums with weights, a density with density=True; differentiable in the
    weights.

    >>> sl.numpy.histogram(sl.tensor([0.0, 1.0, 1.5, 4.0]), bins=2)
    """
    a = reshape(as_tensor(a), (-1,))
    edges = histogram_bin_edges(a, bins, range, weights)
    n = edges.shape[0] - 1
    slot = ew.sub(searchsorted(edges, a, side="right"), 1)
    slot = where(ew.equal(a, getitem(edges, -1)), n - 1, slot)
    inside = ew.logical_and(ew.greater_equal(slot, 0), ew.less(slot, n))
    slot = where(inside, slot, n)  # past the last bin: dropped below
    w = ew.astype(inside, dtype=edges.dtype)
    if weights is not None:
        w = ew.mul(w, reshape(as_tensor(weights), (-1,)))
    counts = getitem(bincount(slot, w, length=n + 1), slice(0, n))
    if density:
        widths = ew.sub(getitem(edges, slice(1, None)), getitem(edges, slice(0, -1)))
        counts = ew.div(counts, ew.mul(sum(counts), widths))
    return counts, edges


NUMPY_FUNCTIONS: dict = {}
NUMPY_UFUNCS: dict = {}
