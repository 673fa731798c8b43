"""Elementwise math beyond arithmetic, as jax.numpy and jax.scipy.special name it: square,
expm1, log2, tan, the hyperbolic and inverse trigonometric functions, erf and erfc, logaddexp,
rounding (zero gradient), isnan/isinf, nan_to_num, floor_divide and remainder.

Imports backends, tape and ops.primitive/elementwise/structural/functions.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .functions import as_tensor
from .primitive import Primitive
from .structural import broadcast_to_p

__all__ = [
    "square", "expm1", "log2", "log10", "tan", "sinh", "cosh", "arcsin", "arccos", "arctan",
    "arctan2", "arcsinh", "arccosh", "arctanh", "erf", "erfc", "logaddexp", "rsqrt",
    "reciprocal", "cbrt", "floor", "ceil", "round", "rint", "trunc", "isnan", "isinf",
    "nan_to_num", "floor_divide", "remainder", "mod", "fmod",
]

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _xp(*a):
    return backends.xp_of(*a)


# --- argument checks ------------------------------------------------------------------------
def _prepared(x):
    """x itself, or a list/tuple made a Tensor (so that its dtype can be read)."""
    return as_tensor(x) if isinstance(x, (list, tuple)) else x


def _dtype(x):
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def _require_real(name, *xs):
    for x in xs:
        if _dtype(x).kind == "c":
            raise TypeError(
                f"{name}: got complex input ({_dtype(x)}), but {name} is defined here for real "
                f"numbers only. Apply it to the real part or the magnitude (scanlib.abs), "
                "whichever you mean.")


def _public(prim, doc, real=False):
    """The public function of a one-input primitive: checks its argument, then binds."""
    name = prim.name

    def op(x):
        x = _prepared(x)
        if real:
            _require_real(name, x)
        return prim(x)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    op.primitive = prim
    return op


def _zeros_like(g):
    """Zeros shaped and typed as g: the cotangent of a piecewise-constant op (as JAX gives:
    zeros, never None, so grad through floor is 0). A broadcast 0-d zero, so it costs no
    [shape] array and stays a graph value inside a traced backward."""
    return broadcast_to_p(Tensor(_xp(g._value).zeros((), g.dtype)), shape=g.shape)


def _unary(name, vjp, ufunc=None):
    """A primitive computed by the array namespace's function `ufunc` (default: name)."""
    ufunc = ufunc or name
    return Primitive(name, lambda x: getattr(_xp(x), ufunc)(x), vjp, elementwise=True,
                     ufunc=ufunc)


# --- holomorphic unary functions: VJP g * f'(x), no conjugate (JAX's convention) ------------
square_p = _unary("square", lambda g, out, x: (ew.mul(g, ew.mul(x, 2.0)),))
expm1_p = _unary("expm1", lambda g, out, x: (ew.mul(g, ew.add(out, 1.0)),))
log2_p = _unary("log2", lambda g, out, x: (ew.div(g, ew.mul(x, _LN2)),))
log10_p = _unary("log10", lambda g, out, x: (ew.div(g, ew.mul(x, _LN10)),))
tan_p = _unary("tan", lambda g, out, x: (ew.mul(g, ew.add(square_p(out), 1.0)),))
sinh_p = _unary("sinh", lambda g, out, x: (ew.mul(g, cosh_p(x)),))
cosh_p = _unary("cosh", lambda g, out, x: (ew.mul(g, sinh_p(x)),))
arcsin_p = _unary("arcsin", lambda g, out, x: (
    ew.div(g, ew.sqrt(ew.sub(1.0, square_p(x)))),))
arccos_p = _unary("arccos", lambda g, out, x: (
    ew.neg(ew.div(g, ew.sqrt(ew.sub(1.0, square_p(x))))),))
arctan_p = _unary("arctan", lambda g, out, x: (ew.div(g, ew.add(square_p(x), 1.0)),))
arcsinh_p = _unary("arcsinh", lambda g, out, x: (
    ew.div(g, ew.sqrt(ew.add(square_p(x), 1.0))),))
# sqrt(x - 1) sqrt(x + 1), not sqrt(x**2 - 1): the two differ off the real line, and the
# first is the derivative of NumPy's principal branch.
arccosh_p = _unary("arccosh", lambda g, out, x: (
    ew.div(g, ew.mul(ew.sqrt(ew.sub(x, 1.0)), ew.sqrt(ew.add(x, 1.0)))),))
arctanh_p = _unary("arctanh", lambda g, out, x: (ew.div(g, ew.sub(1.0, square_p(x))),))
reciprocal_p = _unary("reciprocal", lambda g, out, x: (ew.neg(ew.mul(g, square_p(out))),))
rsqrt_p = Primitive(
    "rsqrt", lambda x: 1 / _xp(x).sqrt(x),
    lambda g, out, x: (ew.mul(g, ew.mul(ew.mul(out, square_p(out)), -0.5)),), elementwise=True)
cbrt_p = _unary("cbrt", lambda g, out, x: (ew.div(g, ew.mul(square_p(out), 3.0)),))

square = _public(square_p, """Elementwise x * x.

    >>> sl.square(sl.tensor([-2.0, 3.0]))
    """)
expm1 = _public(expm1_p, """Elementwise exp(x) - 1, accurate for small x.

    >>> sl.expm1(sl.tensor([1e-10, 1.0]))
    """)
log2 = _public(log2_p, """Elementwise base-2 logarithm.

    >>> sl.log2(sl.tensor([1.0, 8.0]))
    """)
log10 = _public(log10_p, """Elementwise base-10 logarithm.

    >>> sl.log10(sl.tensor([1.0, 1000.0]))
    """)
tan = _public(tan_p, """Elementwise tangent; its VJP reuses the output (g * (1 + out**2)).

    >>> sl.tan(sl.tensor([0.0, 0.5]))
    """)
sinh = _public(sinh_p, """Elementwise hyperbolic sine.

    >>> sl.sinh(sl.tensor([0.0, 1.0]))
    """)
cosh = _public(cosh_p, """Elementwise hyperbolic cosine.

    >>> sl.cosh(sl.tensor([0.0, 1.0]))
    """)
arcsin = _public(arcsin_p, """Elementwise inverse sine (nan outside [-1, 1] for real input).

    >>> sl.arcsin(sl.tensor([0.0, 1.0]))
    """)
arccos = _public(arccos_p, """Elementwise inverse cosine (nan outside [-1, 1] for real input).

    >>> sl.arccos(sl.tensor([1.0, 0.0]))
    """)
arctan = _public(arctan_p, """Elementwise inverse tangent.

    >>> sl.arctan(sl.tensor([0.0, 1.0]))
    """)
arcsinh = _public(arcsinh_p, """Elementwise inverse hyperbolic sine.

    >>> sl.arcsinh(sl.tensor([0.0, 1.0]))
    """)
arccosh = _public(arccosh_p, """Elementwise inverse hyperbolic cosine (real input >= 1).

    >>> sl.arccosh(sl.tensor([1.0, 2.0]))
    """)
arctanh = _public(arctanh_p, """Elementwise inverse hyperbolic tangent (real input in (-1, 1)).

    >>> sl.arctanh(sl.tensor([0.0, 0.5]))
    """)
reciprocal = _public(reciprocal_p, """Elementwise 1 / x, as numpy.reciprocal (integer input
    stays integer, as in NumPy).

    >>> sl.reciprocal(sl.tensor([2.0, 4.0]))
    """)
rsqrt = _public(rsqrt_p, """Elementwise 1 / sqrt(x), as jax.lax.rsqrt.

    >>> sl.rsqrt(sl.tensor([4.0, 16.0]))
    """)
cbrt = _public(cbrt_p, """Elementwise real cube root (negative for negative x).

    >>> sl.cbrt(sl.tensor([-8.0, 27.0]))
    """, real=True)


# --- erf and erfc -------------------------------------------------------------------------
# The rational approximations of FreeBSD's msun s_erf.c (fdlibm; Copyright (C) 1993 by Sun
# Microsystems, Inc.: "Permission to use, copy, modify, and distribute this software is freely
# granted, provided that this notice is preserved."), evaluated for whole arrays: every branch
# is computed on inputs clamped into its interval and the right one is selected. Error below
# 1 ulp in float64; other float dtypes are computed in float64 and rounded once.
_ERX = 8.45062911510467529297e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
       5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
       7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02,
       1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
       4.34565877475229228821e+02, 6.45387271733267880336e+02, 4.29008140027567833386e+02,
       1.08635005541779435134e+02, 6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
       1.53672958608443695994e+03, 3.19985821950859553908e+03, 2.55305040643316442583e+03,
       4.74528541206955367215e+02, -2.24409524465858183362e+01)


def _poly(z, coeffs):
    acc = coeffs[-1]
    for c in coeffs[-2::-1]:
        acc = acc * z + c
    return acc


def _small_ratio(x, xp):
    """R(x**2) / S(x**2) for |x| < 0.84375, where erf(x) = x + x * ratio."""
    x = xp.where(xp.abs(x) < 0.84375, x, 0.0)
    z = x * x
    return _poly(z, _PP) / _poly(z, _QQ)


def _middle(a, xp):
    """erf(a) - erx for a in [0.84375, 1.25)."""
    s = xp.clip(a, 0.84375, 1.25) - 1.0
    return _poly(s, _PA) / _poly(s, _QA)


def _tail(a, xp):
    """erfc(a) for a in [1.25, 28]: exp(-a*a - 0.5625 + R/S) / a, with -a*a split as
    -z*z + (z - a)(z + a) for a short z, so that the large part of the exponent is exact."""
    a = xp.clip(a, 1.25, 28.0)
    s = 1.0 / (a * a)
    rs = xp.where(a < 1 / 0.35, _poly(s, _RA) / _poly(s, _SA), _poly(s, _RB) / _poly(s, _SB))
    z = a.astype(np.float32).astype(np.float64)  # 24 bits: z * z is exact in float64
    return xp.exp(-z * z - 0.5625) * xp.exp((z - a) * (z + a) + rs) / a


def _as_float64(x):
    x = _xp(x).asarray(x)
    if x.dtype.kind == "c":  # the public functions refuse it first; a direct bind lands here
        raise TypeError(f"erf/erfc are defined for real input only, got {x.dtype}")
    return x.astype(np.float64)


def _result(out, x, xp):
    """out (float64) in the float dtype of x (float64 for integer and bool input)."""
    x = xp.asarray(x)
    return xp.asarray(out if x.dtype.kind != "f" else out.astype(x.dtype, copy=False))


def _erf_impl(x):
    xp = _xp(x)
    v = _as_float64(x)
    a = xp.abs(v)
    with np.errstate(all="ignore"):  # branches not selected may overflow; their values unused
        small = v + v * _small_ratio(v, xp)
        large = xp.where(a < 1.25, _ERX + _middle(a, xp), xp.where(a < 6.0, 1.0 - _tail(a, xp),
                                                                    1.0))
        out = xp.where(a < 0.84375, small, xp.copysign(large, v))
    return _result(xp.where(xp.isnan(v), v, out), x, xp)


def _erfc_impl(x):
    xp = _xp(x)
    v = _as_float64(x)
    a = xp.abs(v)
    with np.errstate(all="ignore"):
        xy = v * _small_ratio(v, xp)
        small = xp.where(v < 0.25, 1.0 - (v + xy), 0.5 - (xy + (v - 0.5)))
        mid = _middle(a, xp)
        mid = xp.where(v > 0, (1.0 - _ERX) - mid, 1.0 + (_ERX + mid))
        tail = xp.where(a < 28.0, _tail(a, xp), 0.0)
        tail = xp.where(v > 0, tail, 2.0 - tail)
        out = xp.where(a < 0.84375, small, xp.where(a < 1.25, mid, tail))
    return _result(xp.where(xp.isnan(v), v, out), x, xp)


def _erf_vjp(g, out, x):
    return (ew.mul(g, ew.mul(ew.exp(ew.neg(square_p(x))), _TWO_OVER_SQRT_PI)),)


erf_p = Primitive("erf", _erf_impl, _erf_vjp, elementwise=True)
erfc_p = Primitive("erfc", _erfc_impl, lambda g, out, x: (ew.neg(_erf_vjp(g, out, x)[0]),),
                   elementwise=True)
erf = _public(erf_p, """The error function 2/sqrt(pi) * integral of exp(-t**2) from 0 to x, as
    jax.scipy.special.erf: below 1 ulp in float64, rounded once in float32.

    >>> sl.erf(sl.tensor([0.0, 0.5, 3.0]))
    """, real=True)
erfc = _public(erfc_p, """The complementary error function 1 - erf(x), accurate where it is
    tiny (large x), as jax.scipy.special.erfc.

    >>> sl.erfc(sl.tensor([0.0, 5.0]))
    """, real=True)


# --- rounding: piecewise constant, so the cotangent is zero (of the input's dtype) -----------
# NumPy 2.3+ keeps integer (and bool) dtypes through floor, ceil and trunc; older NumPy and
# CuPy give floats. The installed NumPy decides, and CuPy is made to agree with it.
_ROUNDING_KEEPS_INTEGERS = np.floor(np.ones(1, np.int64)).dtype == np.int64


def _rounding(name):
    def keeps(x):
        return _ROUNDING_KEEPS_INTEGERS and _dtype(x).kind in "biu"

    def impl(x):
        return _xp(x).asarray(x).copy() if keeps(x) else getattr(_xp(x), name)(x)

    def out_impl(x, out):  # not ufunc=: CuPy's floor of integers is float, refused by out=
        if keeps(x):
            out[...] = x
            return out
        return getattr(_xp(x), name)(x, out=out)

    return Primitive(name, impl, lambda g, out, x: (_zeros_like(g),), elementwise=True,
                     out_impl=out_impl)


floor_p, ceil_p, trunc_p = _rounding("floor"), _rounding("ceil"), _rounding("trunc")
rint_p = _unary("rint", lambda g, out, x: (_zeros_like(g),))
round_p = Primitive("round", lambda x, decimals: _xp(x).around(x, decimals),
                    lambda g, out, x, decimals: (_zeros_like(g),), elementwise=True)

floor = _public(floor_p, """Elementwise largest integer <= x; its gradient is zero.

    >>> sl.floor(sl.tensor([-1.5, 0.5, 2.0]))
    """, real=True)
ceil = _public(ceil_p, """Elementwise smallest integer >= x; its gradient is zero.

    >>> sl.ceil(sl.tensor([-1.5, 0.5, 2.0]))
    """, real=True)
trunc = _public(trunc_p, """Elementwise x rounded towards zero; its gradient is zero.

    >>> sl.trunc(sl.tensor([-1.5, 0.5, 2.7]))
    """, real=True)
rint = _public(rint_p, """Elementwise nearest integer, halves to even (numpy.rint); its
    gradient is zero.

    >>> sl.rint(sl.tensor([0.5, 1.5, 2.5]))
    """)


def round(x, decimals=0):
    """Round to the given number of decimals, halves to even, as jnp.round and numpy.round;
    its gradient is zero.

    >>> sl.round(sl.tensor([0.5, 1.5, 2.675]), 0)
    """
    decimals = operator.index(decimals)
    return round_p(_prepared(x), decimals=decimals)


# --- tests: bool results, not differentiable ---------------------------------------------------
isnan_p = Primitive("isnan", lambda x: _xp(x).isnan(x), elementwise=True, ufunc="isnan")
isinf_p = Primitive("isinf", lambda x: _xp(x).isinf(x), elementwise=True, ufunc="isinf")
isnan = _public(isnan_p, """Elementwise test for nan (a bool tensor, not differentiable).

    >>> sl.isnan(sl.tensor([1.0, np.nan]))
    """)
isinf = _public(isinf_p, """Elementwise test for +inf or -inf (bool, not differentiable).

    >>> sl.isinf(sl.tensor([1.0, -np.inf]))
    """)


# --- nan_to_num ---------------------------------------------------------------------------
def _nan_to_num_impl(x, nan, posinf, neginf):
    return _xp(x).nan_to_num(x, copy=True, nan=nan, posinf=posinf, neginf=neginf)


nan_to_num_p = Primitive(
    "nan_to_num", _nan_to_num_impl,
    lambda g, out, x, nan, posinf, neginf: (ew.where(ew.isfinite(x), g, 0.0),),
    elementwise=True)


def _real_number(name, value, optional=True):
    if value is None and optional:
        return None
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"nan_to_num: {name} must be a real number"
                        f"{' or None' if optional else ''}, got {value!r}")
    return float(value)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """x with nan, +inf and -inf replaced (by 0 and the dtype's largest and smallest finite
    values unless given), as numpy.nan_to_num; the gradient passes where x was finite.

    >>> sl.nan_to_num(sl.tensor([1.0, np.nan, np.inf, -np.inf]))
    """
    x = _prepared(x)
    _require_real("nan_to_num", x)
    return nan_to_num_p(x, nan=_real_number("nan", nan, optional=False),
                        posinf=_real_number("posinf", posinf),
                        neginf=_real_number("neginf", neginf))


# --- two-input functions --------------------------------------------------------------------
def _is_tensor(x):
    return type(x) is Tensor


def _arctan2_vjp(g, out, y, x):
    r2 = x * x + y * y  # a Python number where both are (never: one is a Tensor here)
    return (ew.div(ew.mul(g, x), r2) if _is_tensor(y) else None,
            ew.neg(ew.div(ew.mul(g, y), r2)) if _is_tensor(x) else None)


arctan2_p = Primitive("arctan2", lambda y, x: _xp(y, x).arctan2(y, x), _arctan2_vjp,
                      elementwise=True, ufunc="arctan2")


def _logaddexp_vjp(g, out, x, y):
    """d logaddexp(x, y) / dx = exp(x - out), a softmax weight. Where out is infinite (an
    input is +inf, or both are -inf) the weights are 1 and 0, or 1/2 each for equal
    infinities, picked by comparisons: no inf - inf is computed, so nothing warns or is nan."""
    infinite = isinf_p(out)
    finite_out = ew.where(infinite, 0.0, out)

    def weight(a, b):
        at_inf = ew.where(ew.equal(a, b), 0.5, ew.where(ew.equal(a, out), 1.0, 0.0))
        if at_inf.dtype != out.dtype:  # Python numbers above: float64
            at_inf = ew.astype(at_inf, dtype=np.dtype(out.dtype))
        return ew.where(infinite, at_inf, ew.exp(ew.sub(ew.where(infinite, 0.0, a), finite_out)))

    return (ew.mul(g, weight(x, y)) if _is_tensor(x) else None,
            ew.mul(g, weight(y, x)) if _is_tensor(y) else None)


logaddexp_p = Primitive("logaddexp", lambda x, y: _xp(x, y).logaddexp(x, y), _logaddexp_vjp,
                        elementwise=True, ufunc="logaddexp")


def _zero_pair(g, out, x, y):
    return (_zeros_like(g) if _is_tensor(x) else None, _zeros_like(g) if _is_tensor(y) else None)


floor_divide_p = Primitive("floor_divide", lambda x, y: _xp(x, y).floor_divide(x, y),
                           _zero_pair, elementwise=True, ufunc="floor_divide")
# x - y * q with q = floor(x / y) (remainder) or trunc(x / y) (fmod): d/dx 1, d/dy -q.
remainder_p = Primitive(
    "remainder", lambda x, y: _xp(x, y).remainder(x, y),
    lambda g, out, x, y: (g if _is_tensor(x) else None,
                          ew.neg(ew.mul(g, floor_divide_p(x, y))) if _is_tensor(y) else None),
    elementwise=True, ufunc="remainder")
fmod_p = Primitive(
    "fmod", lambda x, y: _xp(x, y).fmod(x, y),
    lambda g, out, x, y: (g if _is_tensor(x) else None,
                          ew.neg(ew.mul(g, trunc_p(ew.div(x, y)))) if _is_tensor(y) else None),
    elementwise=True, ufunc="fmod")


def _binary(prim, name, x, y):
    x, y = _prepared(x), _prepared(y)
    _require_real(name, x, y)
    return prim(x, y)


def arctan2(y, x):
    """Elementwise angle of the point (x, y) in (-pi, pi], as numpy.arctan2(y, x).

    >>> sl.arctan2(sl.tensor([1.0, -1.0]), sl.tensor([-1.0, -1.0]))
    """
    return _binary(arctan2_p, "arctan2", y, x)


def logaddexp(x, y):
    """Elementwise log(exp(x) + exp(y)) without overflow; its gradient is the softmax of
    (x, y).

    >>> sl.logaddexp(sl.tensor([1000.0, -np.inf]), sl.tensor([1000.0, 0.0]))
    """
    return _binary(logaddexp_p, "logaddexp", x, y)


def floor_divide(x, y):
    """Elementwise floor(x / y), as Python's and NumPy's `//` (also for negative operands and
    integers); its gradient is zero.

    >>> sl.floor_divide(sl.tensor([7.0, -7.0]), 2.0)
    """
    return _binary(floor_divide_p, "floor_divide", x, y)


def remainder(x, y):
    """Elementwise x - y * floor(x / y), with the sign of y, as Python's and NumPy's `%`;
    gradients 1 for x and -floor(x / y) for y (as JAX).

    >>> sl.remainder(sl.tensor([7.0, -7.0]), 3.0)
    """
    return _binary(remainder_p, "remainder", x, y)


def mod(x, y):
    """The same as remainder (x % y).

    >>> sl.mod(sl.tensor([-1.0, 5.0]), 3.0)
    """
    return _binary(remainder_p, "mod", x, y)


def fmod(x, y):
    """Elementwise x - y * trunc(x / y), with the sign of x, as C's fmod and numpy.fmod;
    gradients 1 for x and -trunc(x / y) for y.

    >>> sl.fmod(sl.tensor([7.0, -7.0]), 3.0)
    """
    return _binary(fmod_p, "fmod", x, y)


# NumPy functions (np.f called on a Tensor, NEP 18) and ufuncs that run these ops; each
# callable takes NumPy's parameter names (numpy_interop refuses other keywords).
NUMPY_FUNCTIONS: dict = {
    np.round: lambda a, decimals=0: round(a, decimals),
    np.around: lambda a, decimals=0: round(a, decimals),
    np.nan_to_num: lambda x, nan=0.0, posinf=None, neginf=None: nan_to_num(
        x, nan, posinf, neginf),
}
NUMPY_UFUNCS: dict = {
    np.square: square, np.expm1: expm1, np.log2: log2, np.log10: log10, np.tan: tan,
    np.sinh: sinh, np.cosh: cosh, np.arcsin: arcsin, np.arccos: arccos, np.arctan: arctan,
    np.arctan2: arctan2, np.arcsinh: arcsinh, np.arccosh: arccosh, np.arctanh: arctanh,
    np.logaddexp: logaddexp, np.reciprocal: reciprocal, np.cbrt: cbrt, np.floor: floor,
    np.ceil: ceil, np.trunc: trunc, np.rint: rint, np.isnan: isnan, np.isinf: isinf,
    np.floor_divide: floor_divide, np.remainder: remainder, np.fmod: fmod,
}
