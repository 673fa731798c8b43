"""Elementwise math beyond arithmetic, as jax.numpy and jax.scipy.special name it: square,
expm1, log2, tan, the hyperbolic and inverse trigonometric functions, erf and erfc, logaddexp,
rounding (zero gradient), isnan/isinf, nan_to_num, floor_divide and remainder.

Imports backends, tape and ops.primitive/elementwise/structural/functions/erf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import operator

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .erf import erf_impl, erfc_impl
from .functions import as_tensor
from .primitive import Primitive
from .structural import broadcast_to_p

if TYPE_CHECKING:
    from ..tape.types import ArrayLike

__all__ = [
    "square", "expm1", "log2", "log10", "tan", "sinh", "cosh", "arcsin", "arccos", "arctan",
    "arctan2", "arcsinh", "arccosh", "arctanh", "erf", "erfc", "logaddexp", "rsqrt",
    "reciprocal", "cbrt", "floor", "ceil", "round", "rint", "trunc", "isnan", "isinf",
    "nan_to_num", "floor_divide", "remainder", "mod", "fmod", "logical_and", "logical_or",
    "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "invert",
]

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


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

    def op(x: ArrayLike) -> Tensor:
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


def _unary(name, vjp, ufunc=None, inexact=True):
    """A primitive computed by the array namespace's function `ufunc` (default: name), in
    floating point unless `inexact` is False (see Primitive)."""
    ufunc = ufunc or name
    return Primitive(name, lambda x: getattr(_xp(x), ufunc)(x), vjp, elementwise=True,
                     ufunc=ufunc, tangent=_tangent_of(vjp), inexact=inexact)


def _tangent_of(vjp):
    """Forward mode's rule of a holomorphic (or real) elementwise function: its VJP multiplies
    g by f'(x) and its tangent is t * f'(x), so the VJP at g = t is the tangent."""
    return lambda ts, out, x: vjp(ts[0], out, x)[0]


# --- holomorphic unary functions: VJP g * f'(x), no conjugate (JAX's convention) ------------
square_p = _unary("square", lambda g, out, x: (ew.mul(g, ew.mul(x, 2.0)),), inexact=False)
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


def _rsqrt_vjp(g, out, x):
    return (ew.mul(g, ew.mul(ew.mul(out, square_p(out)), -0.5)),)


rsqrt_p = Primitive("rsqrt", lambda x: 1 / _xp(x).sqrt(x), _rsqrt_vjp, elementwise=True,
                    inexact=True, tangent=_tangent_of(_rsqrt_vjp))
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
reciprocal = _public(reciprocal_p, """Elementwise 1 / x, as jnp.reciprocal: integers are
    divided in floating point (float32 for int32), where numpy.reciprocal truncates to 0.

    >>> sl.reciprocal(sl.tensor([2.0, 4.0]))
    """)
rsqrt = _public(rsqrt_p, """Elementwise 1 / sqrt(x), as jax.lax.rsqrt.

    >>> sl.rsqrt(sl.tensor([4.0, 16.0]))
    """)
cbrt = _public(cbrt_p, """Elementwise real cube root (negative for negative x).

    >>> sl.cbrt(sl.tensor([-8.0, 27.0]))
    """, real=True)


# --- erf and erfc: the numerics are in ops.erf -------------------------------------------
def _erf_vjp(g, out, x):
    return (ew.mul(g, ew.mul(ew.exp(ew.neg(square_p(x))), _TWO_OVER_SQRT_PI)),)


def _erfc_vjp(g, out, x):
    return (ew.neg(_erf_vjp(g, out, x)[0]),)


erf_p = Primitive("erf", erf_impl, _erf_vjp, elementwise=True, inexact=True,
                  tangent=_tangent_of(_erf_vjp))
erfc_p = Primitive("erfc", erfc_impl, _erfc_vjp, elementwise=True, inexact=True,
                   tangent=_tangent_of(_erfc_vjp))
erf = _public(erf_p, """The error function 2/sqrt(pi) * integral of exp(-t**2) from 0 to x, as
    jax.scipy.special.erf: below 1 ulp in float64, rounded once in float32.

    >>> sl.erf(sl.tensor([0.0, 0.5, 3.0]))
    """, real=True)
erfc = _public(erfc_p, """The complementary error function 1 - erf(x), accurate where it is
    tiny (large x), as jax.scipy.special.erfc.

    >>> sl.erfc(sl.tensor([0.0, 5.0]))
    """, real=True)


# --- rounding: piecewise constant, so the cotangent is zero (of the input's dtype) -----------
# NumPy 2.1+ keeps integer (and bool) dtypes through floor, ceil and trunc; older NumPy and
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

    # No vjp: its derivative is zero, and what it makes carries none (as sign's, and as
    # JAX's, whose floor has a zero tangent): a custom call on it computes fun.
    return Primitive(name, impl, None, elementwise=True, out_impl=out_impl)


floor_p, ceil_p, trunc_p = _rounding("floor"), _rounding("ceil"), _rounding("trunc")
# rint of integers is float64 as in NumPy (and in JAX, whose rint takes its default float)
rint_p = Primitive("rint", lambda x: _xp(x).rint(x), None, elementwise=True, ufunc="rint")
round_p = Primitive("round", lambda x, decimals: _xp(x).around(x, decimals), None,
                    elementwise=True)

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


def round(x: ArrayLike, decimals: int = 0) -> Tensor:
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


# --- logical and bitwise: bool results or integer bits, not differentiable ----------------------
def _two_input(prim, doc, bits=False):
    """The public function of a two-input test; `bits`: bool or integer inputs only."""
    def op(x: ArrayLike, y: ArrayLike) -> Tensor:
        return prim(*(_bits(prim.name, x, y) if bits else (_prepared(x), _prepared(y))))
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = doc
    op.primitive = prim
    return op


logical_xor_p = Primitive("logical_xor", lambda x, y: _xp(x, y).logical_xor(x, y),
                          elementwise=True, ufunc="logical_xor")
logical_and = _two_input(ew.logical_and, """Elementwise x and y, by truth value (a bool tensor).

    >>> sl.logical_and(sl.tensor([True, False]), sl.tensor([True, True]))
    """)
logical_or = _two_input(ew.logical_or, """Elementwise x or y, by truth value (a bool tensor).

    >>> sl.logical_or(sl.tensor([True, False]), sl.tensor([False, False]))
    """)
logical_xor = _two_input(logical_xor_p, """Elementwise x xor y, by truth value (a bool tensor).

    >>> sl.logical_xor(sl.tensor([True, False]), sl.tensor([True, True]))
    """)


def logical_not(x: ArrayLike) -> Tensor:
    """Elementwise not x, by truth value (a bool tensor).

    >>> sl.logical_not(sl.tensor([True, False]))
    """
    return ew.logical_not(_prepared(x))


def _bits(name, *xs):
    """xs, checked to be bool or integer, as NumPy's bitwise ufuncs take them."""
    xs = [_prepared(x) for x in xs]
    for x in xs:
        if _dtype(x).kind not in "biu":
            hint = ("~(x < a)" if len(xs) == 1 else "(x < a) & (y > b)")
            raise TypeError(
                f"{name}: got {_dtype(x)} input; it takes bools or integers (as NumPy's). "
                f"For a condition on floats, compare first: {hint}.")
    return xs


bitwise_and_p = Primitive("bitwise_and", lambda x, y: x & y, elementwise=True,
                          ufunc="bitwise_and", inline="({0} & {1})")
bitwise_or_p = Primitive("bitwise_or", lambda x, y: x | y, elementwise=True,
                         ufunc="bitwise_or", inline="({0} | {1})")
bitwise_xor_p = Primitive("bitwise_xor", lambda x, y: x ^ y, elementwise=True,
                          ufunc="bitwise_xor", inline="({0} ^ {1})")
invert_p = Primitive("invert", lambda x: ~x, elementwise=True, ufunc="invert", inline="(~{0})")


bitwise_and = _two_input(bitwise_and_p, """Elementwise x & y: the bits of integers, and of bools.

    On bools it is logical and, so conditions combine as in JAX: `(t < n) & (err > tol)`.

    >>> sl.bitwise_and(sl.tensor([12, 5]), sl.tensor([10, 1]))
    """, bits=True)
bitwise_or = _two_input(bitwise_or_p, """Elementwise x | y: the bits of integers, and of bools.

    >>> sl.bitwise_or(sl.tensor([12, 5]), sl.tensor([10, 2]))
    """, bits=True)
bitwise_xor = _two_input(bitwise_xor_p, """Elementwise x ^ y: the bits of integers, and of bools.

    >>> sl.bitwise_xor(sl.tensor([12, 5]), sl.tensor([10, 1]))
    """, bits=True)


def invert(x: ArrayLike) -> Tensor:
    """Elementwise ~x: each integer's bits flipped (two's complement, ~5 == -6), not x for bools.

    >>> sl.invert(sl.tensor([True, False]))
    """
    return invert_p(*_bits("invert", x))


bitwise_not = invert


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


def nan_to_num(x: ArrayLike, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
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
                      elementwise=True, inexact=True, ufunc="arctan2")


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
                        elementwise=True, inexact=True, ufunc="logaddexp")


# No vjp: its derivative is zero and what it makes carries none, as floor's.
floor_divide_p = Primitive("floor_divide", lambda x, y: _xp(x, y).floor_divide(x, y), None,
                           elementwise=True, ufunc="floor_divide")
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


def arctan2(y: ArrayLike, x: ArrayLike) -> Tensor:
    """Elementwise angle of the point (x, y) in (-pi, pi], as numpy.arctan2(y, x).

    >>> sl.arctan2(sl.tensor([1.0, -1.0]), sl.tensor([-1.0, -1.0]))
    """
    return _binary(arctan2_p, "arctan2", y, x)


def logaddexp(x: ArrayLike, y: ArrayLike) -> Tensor:
    """Elementwise log(exp(x) + exp(y)) without overflow; its gradient is the softmax of
    (x, y).

    >>> sl.logaddexp(sl.tensor([1000.0, -np.inf]), sl.tensor([1000.0, 0.0]))
    """
    return _binary(logaddexp_p, "logaddexp", x, y)


def floor_divide(x: ArrayLike, y: ArrayLike) -> Tensor:
    """Elementwise floor(x / y), as Python's and NumPy's `//` (also for negative operands and
    integers); its gradient is zero.

    >>> sl.floor_divide(sl.tensor([7.0, -7.0]), 2.0)
    """
    return _binary(floor_divide_p, "floor_divide", x, y)


def remainder(x: ArrayLike, y: ArrayLike) -> Tensor:
    """Elementwise x - y * floor(x / y), with the sign of y, as Python's and NumPy's `%`;
    gradients 1 for x and -floor(x / y) for y (as JAX).

    >>> sl.remainder(sl.tensor([7.0, -7.0]), 3.0)
    """
    return _binary(remainder_p, "remainder", x, y)


def mod(x: ArrayLike, y: ArrayLike) -> Tensor:
    """The same as remainder (x % y).

    >>> sl.mod(sl.tensor([-1.0, 5.0]), 3.0)
    """
    return _binary(remainder_p, "mod", x, y)


def fmod(x: ArrayLike, y: ArrayLike) -> Tensor:
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
    np.logical_xor: logical_xor, np.bitwise_and: bitwise_and, np.bitwise_or: bitwise_or,
    np.bitwise_xor: bitwise_xor, np.invert: invert,
}
