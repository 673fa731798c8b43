"""The inverse error function, the normal quantile ndtri and the scaled complementary error
function erfcx, as primitives with their VJPs (public as scanlib.scipy.special).

The inverses start from Giles' single-precision approximation (or, far in the tail, from
erfc's asymptote) and are refined by Newton steps on erf near 0 and on log(erfc) in the tails,
so that they are accurate to a few ulps in float64 down to the smallest subnormal. Other float
dtypes compute in float64 and are rounded once; integers and bools compute in float64.

Imports backends, tape and ops.primitive/elementwise/erf.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backends
from . import elementwise as ew
from .erf import erf_impl, erfcx_impl, horner
from .primitive import Primitive

__all__: list[str] = []  # public as scanlib.scipy.special

_SQRT_PI = math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)
# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision.
_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
            -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08)
_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
         -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257)


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _erfinv_near_zero(y, xp):
    """erfinv(y) for |y| <= 0.5 (y float64)."""
    y = xp.where(xp.abs(y) <= 0.5, y, 0.0)
    x = y * horner(-xp.log1p(-y * y) - 2.5, _CENTRAL)
    for _ in range(2):  # Newton on erf(x) - y; each step squares the relative error
        x = x - (erf_impl(x) - y) * (0.5 * _SQRT_PI) * xp.exp(x * x)
    return x


def _erfcinv_tail(t, xp):
    """erfcinv(t) = erfinv(1 - t) for t in (0, 0.5] (t float64, positive results)."""
    t = xp.where((t > 0) & (t <= 0.5), t, 0.5)
    w = -xp.log(t * (2.0 - t))
    giles = xp.where(w < 5.0, horner(w - 2.5, _CENTRAL),
                     horner(xp.sqrt(xp.maximum(w, 5.0)) - 3.0, _TAIL)) * (1.0 - t)
    # Far out, erfc(x) ~ exp(-x*x) / (x sqrt(pi)) gives a better start than the polynomial.
    big = -xp.log(t)
    asymptote = xp.sqrt(big - xp.log(_SQRT_PI * xp.sqrt(big)))
    x = xp.where(w < 30.0, giles, asymptote)
    log_t = xp.log(t)
    for _ in range(3):  # Newton on log(erfc(x)) - log(t) = log(erfcx(x)) - x*x - log(t)
        e = erfcx_impl(x)
        x = x + (xp.log(e) - x * x - log_t) * (0.5 * _SQRT_PI) * e
    return x


def _erfinv64(y, xp):
    a = xp.abs(y)
    out = xp.where(a <= 0.5, _erfinv_near_zero(y, xp), xp.sign(y) * _erfcinv_tail(1.0 - a, xp))
    out = xp.where(a == 1.0, xp.sign(y) * xp.inf, out)
    return xp.where((a > 1.0) | xp.isnan(y), xp.nan, out)


def _ndtri64(p, xp):
    central = _SQRT2 * _erfinv_near_zero(2.0 * p - 1.0, xp)
    low = -_SQRT2 * _erfcinv_tail(2.0 * p, xp)
    high = _SQRT2 * _erfcinv_tail(2.0 * (1.0 - p), xp)
    out = xp.where(p < 0.25, low, xp.where(p > 0.75, high, central))
    out = xp.where(p == 0.0, -xp.inf, xp.where(p == 1.0, xp.inf, out))
    return xp.where((p < 0) | (p > 1) | xp.isnan(p), xp.nan, out)


def _in_float64(fn):
    def impl(x):
        xp = _xp(x)
        x = xp.asarray(x)
        dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
        with np.errstate(all="ignore"):
            out = fn(x.astype(np.float64), xp)
        return xp.asarray(out.astype(dtype, copy=False))
    return impl


def _erfinv_vjp(g, out, x):
    return (ew.mul(g, ew.mul(ew.exp(ew.mul(out, out)), 0.5 * _SQRT_PI)),)


def _ndtri_vjp(g, out, x):
    return (ew.mul(g, ew.mul(ew.exp(ew.mul(ew.mul(out, out), 0.5)), math.sqrt(2 * math.pi))),)


def _erfcx_vjp(g, out, x):
    return (ew.mul(g, ew.sub(ew.mul(ew.mul(x, out), 2.0), 2.0 / _SQRT_PI)),)


erf_inv_p = Primitive("erf_inv", _in_float64(_erfinv64), _erfinv_vjp, elementwise=True,
                      tangent=lambda ts, out, x: _erfinv_vjp(ts[0], out, x)[0])
ndtri_p = Primitive("ndtri", _in_float64(_ndtri64), _ndtri_vjp, elementwise=True,
                    tangent=lambda ts, out, x: _ndtri_vjp(ts[0], out, x)[0])
erfcx_p = Primitive("erfcx", erfcx_impl, _erfcx_vjp, elementwise=True,
                    tangent=lambda ts, out, x: _erfcx_vjp(ts[0], out, x)[0])
