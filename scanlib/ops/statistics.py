"""Statistics as jax.numpy has them: average, the quantile family (quantile, percentile,
median and their nan-skipping forms), ptp, count_nonzero, cov, corrcoef and the array API's
cumulative_sum/prod. Compositions of differentiable ops, in JAX's order, so that values and
gradients (through the sorted elements that a quantile selects) are JAX's.

Imports tape and ops.elementwise/functions/structural/arrays/gathers/matrices/reductions/special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .arrays import atleast_2d, moveaxis
from .functions import (as_inexact, as_tensor, broadcast_to, clip, concatenate, full, matmul,
                        max, mean, min, reshape, sum, transpose, zeros)
from .gathers import sort, take_along_axis
from .matrices import diag
from .reductions import any, cumprod, cumsum
from .special import ceil, floor, isnan
from .structural import normalize_axis

if TYPE_CHECKING:
    from typing import Any

    from ..tape.types import ArrayLike, Axis, DTypeLike

__all__ = ["average", "quantile", "percentile", "median", "nanquantile", "nanpercentile",
           "nanmedian", "ptp", "count_nonzero", "cov", "corrcoef", "cumulative_sum",
           "cumulative_prod"]


def _axes_as_given(axis, ndim):
    """axis as a tuple of non-negative axes in the order given (checked; None: all)."""
    normalize_axis(axis, ndim)  # checks range, repeats and types
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(int(a) % ndim for a in axes)


def average(a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None,
            returned: bool = False, keepdims: bool = False) -> Any:
    """Weighted mean sum(a * weights) / sum(weights) over axis, as jnp.average (the mean
    without weights). weights has a's shape, or the shape of a along axis. With returned=True
    also the sum of the weights (the count without weights), broadcast to the average's shape.

    >>> sl.average(sl.tensor([1.0, 2.0, 4.0]), weights=sl.tensor([1.0, 1.0, 2.0]))
    """
    a = as_inexact(a)
    given = _axes_as_given(axis, a.ndim)
    if weights is None:
        avg = mean(a, axis, keepdims)
        n = int(np.prod([a.shape[i] for i in given]))
        total = full((), n, dtype=avg.dtype)
    else:
        w = as_inexact(weights)
        if w.shape != a.shape:
            if axis is None:
                raise ValueError(f"average: weights of shape {w.shape} differ from a's shape "
                                 f"{a.shape}; give axis= to weight a along some axes")
            along = tuple(a.shape[i] for i in given)
            if w.shape != along:
                raise ValueError(f"average: weights must have a's shape {a.shape} or its shape "
                                 f"along axis {axis!r}, {along}; got {w.shape}")
            w = transpose(w, tuple(np.argsort(given)))
            w = reshape(w, tuple(s if i in given else 1 for i, s in enumerate(a.shape)))
        total = sum(w, axis, keepdims)
        avg = ew.div(sum(ew.mul(a, w), axis, keepdims), total)
    if not returned:
        return avg
    return avg, (broadcast_to(total, avg.shape) if total.shape != avg.shape else total)


# --- quantiles ------------------------------------------------------------------------------
_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _reduced_to_last(a, axis, keepdims):
    """a with the reduced axes moved to the end and merged, and the shape of the result."""
    given = _axes_as_given(axis, a.ndim)
    keep = [i for i in range(a.ndim) if i not in given]
    moved = transpose(a, tuple(keep + sorted(given))) if a.ndim else a
    n = int(np.prod([a.shape[i] for i in given]))
    x = reshape(moved, tuple(a.shape[i] for i in keep) + (n,))
    shape = (tuple(1 if i in given else s for i, s in enumerate(a.shape)) if keepdims
             else tuple(a.shape[i] for i in keep))
    return x, shape


def _q_tensor(q, dtype, name):
    """q as a Tensor in a's float dtype (a Tensor q stays differentiable)."""
    q = as_tensor(q) if isinstance(q, Tensor) else as_tensor(np.asarray(q, dtype))
    if q.ndim > 1:
        raise ValueError(f"{name}: q must be a number or a 1-d list of them, got shape {q.shape}")
    if q.dtype.kind == "c":
        raise TypeError(f"{name}: q must be real, got {q.dtype}")
    return ew.astype(q, dtype=dtype) if q.dtype != dtype else q


def _quantile(a, q, axis, method, keepdims, skip_nans, name):
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {', '.join(map(repr, _METHODS))}, got "
                         f"{method!r}")
    a = as_inexact(a)
    if a.dtype.kind == "c":
        raise TypeError(f"{name}: got complex input ({a.dtype}); quantiles of complex numbers "
                        "are not defined. Take the real part or the magnitude first.")
    q = _q_tensor(q, a.dtype, name)
    x, shape = _reduced_to_last(a, axis, keepdims)
    n = x.shape[-1]
    if n == 0:
        raise ValueError(f"{name}: the {'tensor' if axis is None else 'axis'} to take "
                         f"quantiles over is empty (a's shape {a.shape}, axis {axis!r})")
    if skip_nans:  # nan sorts to the end; only the first `count` elements count
        s = sort(x, -1)
        count = ew.astype(sum(ew.logical_not(isnan(s)), -1), dtype=a.dtype)
        last = ew.sub(reshape(count, (1,) * q.ndim + count.shape), 1.0)
    else:  # a nan anywhere in a slice makes its quantiles nan
        s = sort(ew.where(any(isnan(x), -1, keepdims=True), np.nan, x), -1)
        last = float(n - 1)
    batch = x.shape[:-1]
    pos = ew.mul(reshape(q, q.shape + (1,) * len(batch)), last)
    low, high = floor(pos), ceil(pos)
    high_weight = ew.sub(pos, low)
    low_weight = ew.sub(1.0, high_weight)

    def value_at(i):
        i = ew.astype(ew.maximum(0.0, ew.minimum(i, last)), dtype=np.dtype(np.int64))
        i = broadcast_to(i, q.shape + batch)
        k = int(np.prod(q.shape))
        i = reshape(moveaxis(i, tuple(range(q.ndim)), tuple(range(-q.ndim, 0))), batch + (k,))
        v = reshape(take_along_axis(s, i, -1), batch + q.shape)
        return moveaxis(v, tuple(range(len(batch), v.ndim)), tuple(range(q.ndim)))

    if method == "lower":
        out = value_at(low)
    elif method == "higher":
        out = value_at(high)
    elif method == "nearest":
        out = ew.where(ew.less_equal(high_weight, 0.5), value_at(low), value_at(high))
    elif method == "midpoint":
        out = ew.mul(ew.add(value_at(low), value_at(high)), 0.5)
    else:
        out = ew.add(ew.mul(value_at(low), low_weight), ew.mul(value_at(high), high_weight))
    return reshape(out, q.shape + shape)


_QUANTILE_DOC = """{what}, as jnp.{name}: the sorted values along axis (an int, a tuple, or
    None for all) are read at position q{scale} * (n - 1){nan}. `method` says how a position
    between two elements reads: 'linear' (interpolates), 'lower', 'higher', 'nearest',
    'midpoint'. q may be a number or a 1-d list (the result then has q's axis first).
    Integers compute in float (float32 for int32, as JAX). The gradient goes to the elements
    read (through the sort), and to q where it is a tensor, as in JAX.

    >>> sl.{name}(sl.tensor([[1.0, 5.0, 2.0], [4.0, 3.0, 6.0]]), {q}, axis=1)
    """


def quantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, method: str = "linear",
             keepdims: bool = False) -> Tensor:
    return _quantile(a, q, axis, method, keepdims, False, "quantile")


def percentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, method: str = "linear",
               keepdims: bool = False) -> Tensor:
    a = as_inexact(a)
    q = ew.div(_q_tensor(q, a.dtype, "percentile"), 100.0)
    return _quantile(a, q, axis, method, keepdims, False, "percentile")


def median(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """The median over axis (an int, a tuple, or None for all), as jnp.median: the middle of
    the sorted values, or the mean of the two middle ones (quantile 0.5, method='midpoint');
    nan for a slice with a nan. The gradient goes to the middle elements (through the sort).

    >>> sl.median(sl.tensor([[1.0, 5.0, 2.0], [4.0, 3.0, 6.0]]), axis=1)
    """
    return _quantile(a, 0.5, axis, "midpoint", keepdims, False, "median")


def nanquantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, method: str = "linear",
                keepdims: bool = False) -> Tensor:
    return _quantile(a, q, axis, method, keepdims, True, "nanquantile")


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, method: str = "linear",
                  keepdims: bool = False) -> Tensor:
    a = as_inexact(a)
    q = ew.div(_q_tensor(q, a.dtype, "nanpercentile"), 100.0)
    return _quantile(a, q, axis, method, keepdims, True, "nanpercentile")


def nanmedian(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """The median over axis of the elements that are not nan (nan for a slice of nans only),
    as jnp.nanmedian; nan elements get no gradient.

    >>> sl.nanmedian(sl.tensor([[1.0, np.nan, 2.0], [4.0, 3.0, 6.0]]), axis=1)
    """
    return _quantile(a, 0.5, axis, "midpoint", keepdims, True, "nanmedian")


_NO_NANS = "; a slice with a nan gives nan"
_SKIPS = ", where n counts the elements that are not nan (nan for a slice of nans only)"
for _f, _what, _scale, _q in (
        (quantile, "The q-th quantile (q in [0, 1])", "", "0.5"),
        (percentile, "The q-th percentile (q in [0, 100])", " / 100", "50.0"),
        (nanquantile, "The q-th quantile (q in [0, 1]) of the elements that are not nan", "",
         "0.5"),
        (nanpercentile, "The q-th percentile (q in [0, 100]) of the elements that are not nan",
         " / 100", "50.0")):
    _nan = _SKIPS if _f.__name__.startswith("nan") else _NO_NANS
    _f.__doc__ = _QUANTILE_DOC.format(what=_what, name=_f.__name__, scale=_scale, nan=_nan,
                                      q=_q)


# --- ranges, counts, covariance -------------------------------------------------------------
def ptp(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Peak to peak, max - min over axis, as jnp.ptp (ties share the gradient, as max's do).

    >>> sl.ptp(sl.tensor([[1.0, 5.0], [4.0, 3.0]]), axis=1)
    """
    return ew.sub(max(a, axis, keepdims), min(a, axis, keepdims))


def count_nonzero(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """The number of nonzero (true) elements over axis, as an int64 tensor, as jnp.count_nonzero.

    >>> sl.count_nonzero(sl.tensor([[0.0, 1.0], [2.0, 3.0]]), axis=1)
    """
    return ew.astype(sum(ew.not_equal(as_tensor(a), 0), axis, keepdims),
                     dtype=np.dtype(np.int64))


def _one_weight(w, n, what, integer=False):
    w = as_tensor(w)
    if w.ndim > 1:
        raise ValueError(f"cov: {what} must be 1-d, got shape {w.shape}")
    if w.shape[0] != n:
        raise ValueError(f"cov: {what} has {w.shape[0]} weights for {n} observations")
    if integer and w.dtype.kind not in "iu":
        raise TypeError(f"cov: fweights must be integers, got {w.dtype}")
    return ew.absolute(w)


def cov(m: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, fweights: ArrayLike | None = None,
        aweights: ArrayLike | None = None, dtype: DTypeLike = None) -> Tensor:
    """The covariance matrix of the variables in the rows of m (columns with rowvar=False),
    with y's variables appended, as jnp.cov: divides by n - 1 (n with bias=True, or n - ddof),
    with frequency and analytic weights as NumPy weighs them. One variable gives a 0-d tensor.

    >>> sl.cov(sl.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    """
    m = as_inexact(m)
    if m.ndim > 2:
        raise ValueError(f"cov: m must have at most 2 dimensions, got shape {m.shape}")
    x = atleast_2d(m)
    if not rowvar and m.ndim != 1:
        x = transpose(x)
    if x.shape[0] == 0:
        return zeros((0, 0), dtype=x.dtype)
    if y is not None:
        y = as_inexact(y)
        if y.ndim > 2:
            raise ValueError(f"cov: y must have at most 2 dimensions, got shape {y.shape}")
        y2 = atleast_2d(y)
        if not rowvar and y2.shape[0] != 1:
            y2 = transpose(y2)
        x = concatenate([x, y2], 0)
    if dtype is not None:
        if np.dtype(dtype).kind not in "fc":
            raise ValueError(f"cov: dtype must be a float or complex dtype, got {dtype}")
        x = ew.astype(x, dtype=np.dtype(dtype))
    if x.shape[1] == 0:
        return full(() if x.shape[0] == 1 else (x.shape[0],) * 2, np.nan, dtype=x.dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = _one_weight(fweights, x.shape[1], "fweights", integer=True)
    if aweights is not None:
        aweights = _one_weight(aweights, x.shape[1], "aweights")
        w = aweights if w is None else ew.mul(w, aweights)
    if w is not None and w.dtype != x.dtype:
        w = ew.astype(w, dtype=x.dtype)
        aweights = None if aweights is None else ew.astype(aweights, dtype=x.dtype)
    avg, total = average(x, 1, w, returned=True)
    total = total[0]
    if w is None:
        f = float(x.shape[1] - ddof)
    elif ddof == 0:
        f = total
    elif aweights is None:
        f = ew.sub(total, float(ddof))
    else:
        f = ew.sub(total, ew.div(ew.mul(float(ddof), sum(ew.mul(w, aweights))), total))
    x = ew.sub(x, reshape(avg, (avg.shape[0], 1)))
    xw = x if w is None else ew.mul(x, w)
    out = ew.div(matmul(x, ew.conj(transpose(xw))), f)
    return reshape(out, ()) if out.shape == (1, 1) else out


def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True,
             dtype: DTypeLike = None) -> Tensor:
    """Pearson correlation coefficients, cov / (std_i std_j), clipped to [-1, 1], as
    jnp.corrcoef.

    >>> sl.corrcoef(sl.tensor([[0.0, 1.0, 2.0], [2.0, 1.5, 0.0]]))
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return ew.div(c, c)
    std = ew.sqrt(ew.real(diag(c)))
    if std.dtype != c.dtype:
        std = ew.astype(std, dtype=c.dtype)
    c = ew.div(ew.div(c, reshape(std, (-1, 1))), reshape(std, (1, -1)))
    if c.dtype.kind == "c":
        raise TypeError("corrcoef: complex input is not supported; correlate the real and "
                        "imaginary parts apart")
    return clip(c, -1.0, 1.0)


# --- the array API's cumulative functions -----------------------------------------------------
def _cumulative(x, axis, dtype, include_initial, name, fn, identity):
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError(f"{name}: x must have at least one dimension, got a 0-d tensor")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{name}: x has {x.ndim} dimensions, so axis must be given (it "
                             "may be left out for a 1-d x only)")
        axis = 0
    axis = normalize_axis(axis, x.ndim)[0]
    out = fn(x, axis, dtype)
    if include_initial:
        shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
        out = concatenate([full(shape, identity, dtype=out.dtype), out], axis)
    return out


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: DTypeLike = None,
                   include_initial: bool = False) -> Tensor:
    """Cumulative sum along axis (which may be left out for 1-d x only), as the array API's
    and jnp.cumulative_sum; include_initial=True puts the empty sum 0 first.

    >>> sl.cumulative_sum(sl.tensor([1.0, 2.0, 3.0]), include_initial=True)
    """
    return _cumulative(x, axis, dtype, include_initial, "cumulative_sum", cumsum, 0)


def _cumprod_jax(x, axis, dtype):
    # jnp.cumulative_prod keeps an integer dtype (int8 stays int8); bools count as int64.
    if dtype is None and x.dtype.kind in "iu":
        dtype = x.dtype
    return cumprod(x, axis, dtype)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None, dtype: DTypeLike = None,
                    include_initial: bool = False) -> Tensor:
    """Cumulative product along axis (which may be left out for 1-d x only), as the array
    API's and jnp.cumulative_prod; include_initial=True puts the empty product 1 first.

    >>> sl.cumulative_prod(sl.tensor([1.0, 2.0, 3.0]), include_initial=True)
    """
    return _cumulative(x, axis, dtype, include_initial, "cumulative_prod", _cumprod_jax, 1)


NUMPY_FUNCTIONS: dict = {
    np.average: lambda a, axis=None, weights=None, returned=False, keepdims=False: average(
        a, axis, weights, returned, keepdims),
    np.median: lambda a, axis=None, keepdims=False: median(a, axis, keepdims),
    np.quantile: lambda a, q, axis=None, method="linear", keepdims=False: quantile(
        a, q, axis, method, keepdims),
    np.percentile: lambda a, q, axis=None, method="linear", keepdims=False: percentile(
        a, q, axis, method, keepdims),
    np.ptp: lambda a, axis=None, keepdims=False: ptp(a, axis, keepdims),
    np.cov: lambda m, y=None, rowvar=True, bias=False, ddof=None, fweights=None,
    aweights=None, dtype=None: cov(m, y, rowvar, bias, ddof, fweights, aweights, dtype),
    np.corrcoef: lambda x, y=None, rowvar=True, dtype=None: corrcoef(x, y, rowvar, dtype),
}
