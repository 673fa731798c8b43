"""The log-gamma function and its derivatives as primitives: gammaln, digamma and
polygamma(n, .), each the VJP of the one before (so gradients of every order exist), and
xlogy / xlog1py with JAX's derivatives. Public as scanlib.scipy.special.

Numerics for whole arrays on the data's backend: the argument is shifted up by the recurrence
(Gamma(x + 1) = x Gamma(x)) until the asymptotic (Stirling) series is accurate, and negative
arguments are reflected. Float16/float32 inputs compute in float64 and are rounded once;
integers and bools compute in float64 and give JAX's float dtype for them (float32 for int32).
Edge values are JAX's: gammaln is +inf at the poles (0, -1, -2, ...) and at -inf; digamma is
nan at the poles.
None has a numba rule: a numba scan whose step computes one runs as the NumPy loop, with a
NumbaFallbackWarning.

Imports backends, tape and ops.primitive/elementwise.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .primitive import Primitive
from .promotion import inexact_dtype

__all__: list[str] = []  # public as scanlib.scipy.special

_SHIFT_TO = 10.0  # the asymptotic series is used at x >= 10 (error below 1e-16 relative)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# Bernoulli numbers B_2, B_4, ..., B_18 (the asymptotic series' coefficients).
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798)


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _compute_dtype(x):
    """The dtype the result has: the float dtype of x, JAX's float for integers and bools
    (`inexact_dtype`: float32 for int32)."""
    dt = np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype
    if dt.kind == "c":
        raise TypeError(f"got complex input ({dt}); gammaln, digamma and polygamma are "
                        "defined here for real numbers only")
    return inexact_dtype(dt)


def _shift_count(xp, x):
    """How many unit steps bring every finite x >= _SHIFT_TO (x in [?, _SHIFT_TO) only)."""
    finite = x[xp.isfinite(x)]
    if finite.size == 0:
        return 0
    return int(max(0.0, math.ceil(_SHIFT_TO - float(finite.min()))))


def _gammaln64(x, xp):
    """log|Gamma(x)| in float64 for an array x."""
    neg = x < 0.5
    # Reflection for x < 0.5: log|Gamma(x)| = log(pi / |sin(pi x)|) - log|Gamma(1 - x)|.
    y = xp.where(neg, 1.0 - x, x)
    y = xp.where(xp.isfinite(y), y, _SHIFT_TO)
    # The shift: log Gamma(y) = log Gamma(y + k) - log(y (y + 1) ... (y + k - 1)).
    k = _shift_count(xp, y)
    prod_log = xp.zeros_like(y)
    z = y.copy()
    for _ in range(k):
        small = z < _SHIFT_TO
        prod_log = prod_log + xp.where(small, xp.log(xp.where(small, z, 1.0)), 0.0)
        z = xp.where(small, z + 1.0, z)
    big = (z - 0.5) * xp.log(z) - z + _HALF_LOG_2PI + _stirling_series(z, xp)
    out = big - prod_log
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.abs(xp.sin(math.pi * xp.where(neg, x - xp.floor(x), 0.5)))
        reflected = math.log(math.pi) - xp.log(s) - out
    out = xp.where(neg, reflected, out)
    pole = (x <= 0) & (x == xp.floor(x))
    out = xp.where(pole | xp.isinf(x), xp.inf, out)
    return xp.where(xp.isnan(x), xp.nan, out)


def gammaln64(x, xp):
    """log|Gamma(x)| in float64 for an array x (for other modules' raw-array code)."""
    return _gammaln64(x, xp)


def stirling_remainder(x, xp):
    """log Gamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2) in float64, for x >= 10 (smaller
    x are computed at 10), for other modules' raw-array code."""
    return _stirling_series(xp.where(x >= 10.0, x, 10.0), xp)


def _stirling_series(z, xp):
    """The asymptotic (Bernoulli) series of log Gamma(z) beyond Stirling's terms, for z >= 10."""
    inv = 1.0 / z
    inv2 = inv * inv
    series = xp.zeros_like(z)
    for j in range(len(_BERNOULLI) - 1, -1, -1):
        n = 2 * (j + 1)
        series = series * inv2 + _BERNOULLI[j] / (n * (n - 1))
    return series * inv


def digamma64(x, xp):
    """digamma(x) in float64 for an array x (for other modules' raw-array code)."""
    return _polygamma64(0, x, xp)


def _polygamma64(n, x, xp):
    """The n-th derivative of digamma (n = 0: digamma itself) in float64 for an array x."""
    neg = x < 0.5 if n == 0 else xp.zeros(x.shape, bool)
    # Digamma reflects: psi(x) = psi(1 - x) - pi cot(pi x). Higher orders shift x up from any
    # value (the count is set by the smallest x).
    y = xp.where(neg, 1.0 - x, x)
    y = xp.where(xp.isfinite(y), y, _SHIFT_TO)
    k = _shift_count(xp, y)
    sign = 1.0 if n % 2 else -1.0  # (-1) ** (n + 1)
    n_fact = math.factorial(n)
    acc = xp.zeros_like(y)
    z = y.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(k):
            small = z < _SHIFT_TO
            acc = acc + xp.where(small, 1.0 / xp.where(small, z, 1.0) ** (n + 1), 0.0)
            z = xp.where(small, z + 1.0, z)
        inv = 1.0 / z
        inv2 = inv * inv
        series = xp.zeros_like(z)
        if n == 0:
            for j in range(len(_BERNOULLI) - 1, -1, -1):
                series = series * inv2 + _BERNOULLI[j] / (2 * (j + 1))
            big = xp.log(z) - 0.5 * inv - series * inv2
            out = big - acc
            cot = 1.0 / xp.tan(math.pi * xp.where(neg, x - xp.floor(x), 0.25))
            out = xp.where(neg, out - math.pi * cot, out)
        else:
            # (-1)^(n+1) [ (n-1)!/z^n + n!/(2 z^(n+1)) + sum B_2j (2j+n-1)!/(2j)! / z^(2j+n) ]
            for j in range(len(_BERNOULLI) - 1, -1, -1):
                m = 2 * (j + 1)
                coeff = _BERNOULLI[j] * math.factorial(m + n - 1) / math.factorial(m)
                series = series * inv2 + coeff
            big = (math.factorial(n - 1) * inv ** n + 0.5 * n_fact * inv ** (n + 1)
                   + series * inv2 * inv ** n)
            out = sign * (big + n_fact * acc)
    pole = (x <= 0) & (x == xp.floor(x))
    if n == 0:
        out = xp.where(pole | (x == -xp.inf), xp.nan, out)
        out = xp.where(x == xp.inf, xp.inf, out)
    else:
        out = xp.where(pole, xp.inf if n % 2 else xp.nan, out)
        out = xp.where(xp.isinf(x), xp.where(x > 0, 0.0, xp.nan), out)
    return xp.where(xp.isnan(x), xp.nan, out)


def _in_float64(fn):
    def impl(x, **params):
        xp = _xp(x)
        dtype = _compute_dtype(x)
        with np.errstate(all="ignore"):
            out = fn(xp.asarray(x, dtype=np.float64), xp, **params)
        return out.astype(dtype, copy=False) if out.ndim else xp.asarray(out, dtype)
    return impl


def _polygamma_impl(x, n):
    return _in_float64(lambda v, xp: _polygamma64(n, v, xp))(x)


gammaln_p = Primitive("gammaln", _in_float64(_gammaln64),
                      lambda g, out, x: (ew.mul(g, digamma_p(x)),), elementwise=True, inexact=True)
digamma_p = Primitive("digamma", _in_float64(lambda x, xp: _polygamma64(0, x, xp)),
                      lambda g, out, x: (ew.mul(g, polygamma_p(x, n=1)),), elementwise=True,
                      inexact=True)
polygamma_p = Primitive("polygamma", _polygamma_impl,
                        lambda g, out, x, n: (ew.mul(g, polygamma_p(x, n=n + 1)),),
                        elementwise=True, inexact=True)


# --- xlogy and xlog1py: 0 where x == 0, with JAX's derivatives (log(y) and x / y) ------------
def _is_tensor(x):
    return type(x) is Tensor


def _xlogy_impl(x, y):
    xp = _xp(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(xp.asarray(x) == 0, xp.zeros((), xp.result_type(x, y)),
                        x * xp.log(y))


def _xlog1py_impl(x, y):
    xp = _xp(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(xp.asarray(x) == 0, xp.zeros((), xp.result_type(x, y)),
                        x * xp.log1p(y))


xlogy_p = Primitive(
    "xlogy", _xlogy_impl,
    lambda g, out, x, y: (ew.mul(g, ew.log(y)) if _is_tensor(x) else None,
                          ew.mul(g, ew.div(x, y)) if _is_tensor(y) else None),
    elementwise=True, inexact=True)
xlog1py_p = Primitive(
    "xlog1py", _xlog1py_impl,
    lambda g, out, x, y: (ew.mul(g, ew.log1p(y)) if _is_tensor(x) else None,
                          ew.mul(g, ew.div(x, ew.add(y, 1.0))) if _is_tensor(y) else None),
    elementwise=True, inexact=True)
