"""scanlib.scipy.stats' functions of a sample: mode, rankdata and sem, as jax.scipy.stats'
(mode and rankdata from one sort along the last axis, so that they work batched, under vmap
and jit, without value-dependent shapes). Imports ops."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...ops import (any, arange, argmax, argsort, astype, atleast_1d, concatenate, full, isnan,
                    max, moveaxis, nanstd, ravel, reshape, sort, sqrt, std, sum,
                    take_along_axis, where)
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["mode", "rankdata", "sem", "ModeResult"]


class ModeResult(NamedTuple):
    """mode's result: the most common values and how often each occurs."""
    mode: Tensor
    count: Tensor


def _nan_policy(who, nan_policy):
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"{who}: illegal nan_policy value {nan_policy!r}; expected one of "
                         "'propagate', 'omit', 'raise'")
    if nan_policy != "propagate":
        raise NotImplementedError(f"{who}: nan_policy={nan_policy!r} is not supported (as in "
                                  "JAX); check for nans outside the call and use 'propagate'")


def _runs(x):
    """For x [..., n] (n >= 1): the sorting order along the last axis, the sorted values, each
    sorted position's dense rank (1 for the smallest value; nans equal to each other) and the
    starts of the runs of equal values, ascending, padded with n to length n + 1."""
    order = argsort(x, axis=-1)
    s = take_along_axis(x, order, axis=-1)
    n = s.shape[-1]
    nan_pair = isnan(s[..., 1:]) & isnan(s[..., :-1])
    new_run = concatenate([full(s.shape[:-1] + (1,), True),
                           (s[..., 1:] != s[..., :-1]) & ~nan_pair], axis=-1)
    dense = astype(new_run, np.int64).cumsum(axis=-1)
    starts = sort(where(new_run, arange(n), n), axis=-1)
    starts = concatenate([starts, full(s.shape[:-1] + (1,), n, dtype=starts.dtype)], axis=-1)
    return order, s, dense, starts


def mode(a, axis: int | None = 0, nan_policy: str = "propagate",
         keepdims: bool = False) -> ModeResult:
    """The most common value along axis (the smallest of those tied) and its count, as
    jax.scipy.stats.mode: ModeResult(mode, count); nans count as one value; an empty axis gives
    mode nan and count 0 (float64, as JAX's default float). axis=None looks at all values.

    >>> sl.scipy.stats.mode(sl.tensor([[3.0, 1.0], [1.0, 1.0], [3.0, 2.0]]))
    """
    _nan_policy("mode", nan_policy)
    x = atleast_1d(a)
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x = ravel(x)
        axis = 0
    else:
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"mode: axis {axis} is out of bounds for an array of {x.ndim} "
                             f"dimensions (shape {x.shape})")
        axis %= x.ndim
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape) if keepdims or
                          i != axis)
    if x.shape[axis] == 0:
        nan = full(out_shape, np.nan, dtype=np.float64)
        return ModeResult(nan, full(out_shape, 0.0, dtype=np.float64))
    x = moveaxis(x, axis, -1)
    _, s, dense, starts = _runs(x)
    run_end = take_along_axis(starts, dense, axis=-1)
    run_start = take_along_axis(starts, dense - 1, axis=-1)
    counts = run_end - run_start
    at = argmax(counts, axis=-1, keepdims=True)
    value = take_along_axis(s, at, axis=-1)
    count = max(counts, axis=-1)
    return ModeResult(reshape(value, out_shape), reshape(count, out_shape))


_METHODS = ("average", "min", "max", "dense", "ordinal")


def rankdata(a, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate") -> Tensor:
    """The ranks 1..n of a's values (ties by method: 'average', 'min', 'max', 'dense' or
    'ordinal'), as jax.scipy.stats.rankdata: float64 (JAX's default float); all nan where the
    data (the whole array with axis=None, else the slice) has a nan; axis=None ranks the
    flattened array, an axis ranks along it. Not differentiable (a rank does not change with
    small moves of the data).

    >>> sl.scipy.stats.rankdata(sl.tensor([3.0, 1.0, 1.0, 2.0]))
    >>> sl.scipy.stats.rankdata(sl.tensor([3.0, 1.0, 1.0, 2.0]), "min")
    """
    _nan_policy("rankdata", nan_policy)
    if method not in _METHODS:
        raise ValueError(f"rankdata: unknown method {method!r}; expected one of {_METHODS}")
    a = a if isinstance(a, Tensor) else Tensor(np.asarray(a))
    if axis is None:
        x = ravel(a)
        axis = 0
    else:
        if not -a.ndim <= axis < a.ndim:
            raise ValueError(f"rankdata: axis {axis} is out of bounds for an array of {a.ndim} "
                             f"dimensions (shape {a.shape})")
        x = moveaxis(a, axis, -1)
    if x.shape[-1] == 0:
        return moveaxis(astype(x, np.float64), -1, axis)
    order, _, dense_sorted, starts = _runs(x)
    inv = argsort(order, axis=-1)
    dense = take_along_axis(dense_sorted, inv, axis=-1)
    if method == "ordinal":
        ranks = inv + 1
    elif method == "dense":
        ranks = dense
    elif method == "max":
        ranks = take_along_axis(starts, dense, axis=-1)
    elif method == "min":
        ranks = take_along_axis(starts, dense - 1, axis=-1) + 1
    else:
        ranks = (take_along_axis(starts, dense, axis=-1)
                 + take_along_axis(starts, dense - 1, axis=-1) + 1) * 0.5
    ranks = astype(ranks, np.float64)
    has_nan = any(isnan(x), axis=-1, keepdims=True)
    return moveaxis(where(has_nan, np.nan, ranks), -1, axis)


def sem(a, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False) -> Tensor:
    """The standard error of the mean, std(a, axis, ddof) / sqrt(n), as jax.scipy.stats.sem:
    n is the axis' length (all values with axis=None); nan_policy='omit' leaves nans out of
    both (nanstd and the count of the others).

    >>> sl.scipy.stats.sem(sl.tensor([1.0, 2.0, 4.0, 7.0]))
    """
    b, = promote_inexact("sem", a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return std(b, axis, ddof=ddof, keepdims=keepdims) / math.sqrt(size)
    if nan_policy == "omit":
        count = sum(~isnan(b), axis=axis, keepdims=keepdims)
        return nanstd(b, axis, ddof=ddof, keepdims=keepdims) / astype(sqrt(count), b.dtype)
    raise ValueError(f"sem: nan_policy={nan_policy!r} is not supported; use 'propagate' or "
                     "'omit'")
