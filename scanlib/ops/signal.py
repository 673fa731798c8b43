"""jax.numpy's piecewise-linear interpolation (interp) and window functions (bartlett,
blackman, hamming, hanning, kaiser), written as JAX writes them: interp is differentiable in
x, xp and fp, and kaiser in beta.

Imports tape and ops.elementwise/functions/arrays/gathers/mathfuncs/special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .functions import arange, as_inexact, as_tensor, concatenate, full, getitem
from .gathers import argsort, searchsorted, take
from .mathfuncs import i0
from .special import remainder

if TYPE_CHECKING:
    from ..tape.types import ArrayLike

__all__ = ["interp", "bartlett", "blackman", "hamming", "hanning", "kaiser"]


def _floating(x):
    x = as_tensor(x)
    if x.dtype.kind == "c":
        raise TypeError(f"interp: got complex input ({x.dtype}); interp takes real x and xp")
    return as_inexact(x)


def _end(value, name):
    if isinstance(value, str):
        if value != "extrapolate":
            raise ValueError(f"interp: the only string {name}= takes is 'extrapolate', got "
                             f"{value!r}")
        return None
    return value


def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | str | None = None,
           right: ArrayLike | str | None = None, period: float | None = None) -> Tensor:
    """The piecewise-linear interpolant through (xp, fp) at x, as jnp.interp: xp increasing
    (or any order with period=, a circle's coordinate); beyond the ends fp's end values, or
    left/right, or the end segments continued with 'extrapolate'. Differentiable in x, xp and
    fp (a segment of zero width takes its left value, as in JAX).

    >>> sl.interp(sl.tensor([0.5, 2.5]), sl.tensor([0.0, 1.0, 2.0]), sl.tensor([0.0, 10.0, 0.0]))
    """
    x, xp, fp = _floating(x), _floating(xp), _floating(fp)
    if xp.ndim != 1 or xp.shape != fp.shape:
        raise ValueError(f"interp: xp and fp must be 1-d of one length, got shapes {xp.shape} "
                         f"and {fp.shape}")
    left_value, right_value = _end(left, "left"), _end(right, "right")
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"interp: period must be a number, got {period!r}")
        period = abs(float(period))
        x, xp = remainder(x, period), remainder(xp, period)
        order = argsort(xp)
        xp, fp = take(xp, order), take(fp, order)
        xp = concatenate([ew.sub(xp[-1:], period), xp, ew.add(xp[:1], period)], 0)
        fp = concatenate([fp[-1:], fp, fp[:1]], 0)
    n = xp.shape[0]
    i = ew.maximum(ew.minimum(searchsorted(xp, x, side="right"), n - 1), 1)
    below = ew.sub(i, 1)
    f0, x0 = take(fp, below), take(xp, below)
    df, dx = ew.sub(take(fp, i), f0), ew.sub(take(xp, i), x0)
    epsilon = float(np.spacing(np.finfo(xp.dtype).eps))
    flat = ew.less_equal(ew.absolute(dx), epsilon)
    f = ew.where(flat, f0, ew.add(f0, ew.mul(ew.div(ew.sub(x, x0), ew.where(flat, 1, dx)), df)))
    if period is None:
        if left != "extrapolate":
            f = ew.where(ew.less(x, getitem(xp, 0)),
                         getitem(fp, 0) if left_value is None else left_value, f)
        if right != "extrapolate":
            f = ew.where(ew.greater(x, getitem(xp, n - 1)),
                         getitem(fp, n - 1) if right_value is None else right_value, f)
    return f


def _window(M):
    M = int(M)
    if M <= 1:
        return None, full((max(M, 0),), 1.0)
    return arange(float(M)), None


def bartlett(M: int) -> Tensor:
    """The Bartlett (triangular) window of M points, float64, as jnp.bartlett.

    >>> sl.bartlett(5)
    """
    n, ones = _window(M)
    if n is None:
        return ones
    return ew.sub(1.0, ew.div(ew.absolute(ew.sub(ew.add(ew.mul(n, 2.0), 1.0), M)), M - 1))


def _cosine_window(M, a0, a1, a2=0.0):
    n, ones = _window(M)
    if n is None:
        return ones
    out = ew.sub(a0, ew.mul(a1, ew.cos(ew.mul(n, 2 * math.pi / (M - 1)))))
    if a2:
        out = ew.add(out, ew.mul(a2, ew.cos(ew.mul(n, 4 * math.pi / (M - 1)))))
    return out


def blackman(M: int) -> Tensor:
    """The Blackman window of M points, float64, as jnp.blackman.

    >>> sl.blackman(5)
    """
    return _cosine_window(M, 0.42, 0.5, 0.08)


def hamming(M: int) -> Tensor:
    """The Hamming window of M points, float64, as jnp.hamming.

    >>> sl.hamming(5)
    """
    return _cosine_window(M, 0.54, 0.46)


def hanning(M: int) -> Tensor:
    """The Hann window of M points, float64, as jnp.hanning.

    >>> sl.hanning(5)
    """
    return _cosine_window(M, 0.5, 0.5)


def kaiser(M: int, beta: ArrayLike) -> Tensor:
    """The Kaiser window of M points with shape parameter beta, i0(beta sqrt(1 - r**2)) /
    i0(beta), as jnp.kaiser; differentiable in beta.

    >>> sl.kaiser(5, 4.0)
    """
    n, ones = _window(M)
    if n is None:
        return ones
    alpha = 0.5 * (M - 1)
    r = ew.div(ew.sub(n, alpha), alpha)
    return ew.div(i0(ew.mul(beta, ew.sqrt(ew.sub(1.0, ew.mul(r, r))))), i0(beta))
