"""jax.numpy's other elementwise functions: hypot, fmax/fmin, copysign, heaviside, sinc,
logaddexp2, float_power, fabs, signbit, the shifts, gcd/lcm, divmod, frexp/ldexp/modf,
nextafter/spacing, i0, bitwise_count and unwrap. Most are compositions written as JAX writes
them, so their gradients at the edges are JAX's (hypot at 0, sinc's Maclaurin series at 0);
the primitives here are the integer and bit functions (no gradient) and i0/i1.

Imports backends, tape and ops.primitive/elementwise/functions/arrays/named/reductions/special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .arrays import diff
from .functions import as_tensor, concatenate, getitem
from .named import isposinf
from .primitive import Primitive
from .promotion import inexact_dtype
from .reductions import cumsum
from .special import ceil, floor, floor_divide, isnan, logaddexp, remainder

if TYPE_CHECKING:
    from ..tape.types import ArrayLike

__all__ = ["hypot", "fmax", "fmin", "copysign", "heaviside", "sinc", "logaddexp2",
           "float_power", "fabs", "signbit", "left_shift", "right_shift", "bitwise_left_shift",
           "bitwise_right_shift", "gcd", "lcm", "divmod", "frexp", "ldexp", "modf", "nextafter",
           "spacing", "i0", "bitwise_count", "unwrap"]

_NUMBER = (bool, int, float)


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _real(name, x, inexact=True):
    """x as a Tensor (a Python number stays a number, keeping its weak type), real, and of a
    float dtype where `inexact` (bools and integers become `inexact_dtype`'s float, as in
    sl.mean: float32 for int32)."""
    if isinstance(x, _NUMBER):
        return float(x) if inexact else x
    x = as_tensor(x)
    if x.dtype.kind == "c":
        raise TypeError(f"{name}: got complex input ({x.dtype}); {name} is defined for real "
                        "numbers. Apply it to the real part or the magnitude (sl.abs).")
    if inexact and x.dtype.kind in "biu":
        x = ew.astype(x, dtype=inexact_dtype(x.dtype))
    return x


def _real_pair(name, x, y, inexact=True):
    """x and y as _real makes them, at least one a Tensor; a number beside a float tensor
    becomes a 0-d tensor of its dtype (its weak type: hypot(float32, 4.0) is float32)."""
    x, y = _real(name, x, inexact), _real(name, y, inexact)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        return as_tensor(x), y
    if not isinstance(x, Tensor) and y.dtype.kind == "f":
        x = as_tensor(np.asarray(x, y.dtype))
    if not isinstance(y, Tensor) and x.dtype.kind == "f":
        y = as_tensor(np.asarray(y, x.dtype))
    return x, y


def _integers(name, *xs):
    """xs as Tensors (Python ints stay weak), checked to be integers (bools for the shifts'
    sake are not: NumPy refuses them too)."""
    out = []
    for x in xs:
        x = x if isinstance(x, int) and not isinstance(x, bool) else as_tensor(x)
        if isinstance(x, Tensor) and x.dtype.kind not in "iu":
            raise TypeError(f"{name}: takes integers, got {x.dtype}; cast with "
                            ".astype(jnp.int64) where the values are whole numbers")
        out.append(x)
    if not any(isinstance(x, Tensor) for x in out):
        out[0] = as_tensor(out[0])
    return out


# --- compositions with JAX's gradients at the edges ------------------------------------------
def hypot(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """Elementwise sqrt(x1**2 + x2**2) without overflow, as jnp.hypot: inf where either is
    inf (even with a nan), and at (0, 0) the value 0 with gradient (1/2, 1/2), as JAX gives.

    >>> sl.hypot(sl.tensor([3.0, 0.0]), sl.tensor([4.0, 0.0]))
    """
    x1, x2 = _real_pair("hypot", x1, x2)
    # |x| with JAX's abs gradient, +-1 (1 at 0): the gradient (1/2, 1/2) at (0, 0) is JAX's
    x1, x2 = (ew.add(ew.where(ew.greater_equal(x, 0), x, ew.neg(x)), 0.0) for x in (x1, x2))
    infinite = ew.logical_or(isposinf(x1), isposinf(x2))
    big, small = ew.maximum(x1, x2), ew.minimum(x1, x2)
    zero = ew.equal(big, 0)
    ratio = ew.div(small, ew.where(zero, 1, big))
    out = ew.where(zero, big, ew.mul(big, ew.sqrt(ew.add(1, ew.mul(ratio, ratio)))))
    return ew.where(infinite, np.inf, out)


def fmax(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """Elementwise maximum that skips a nan (nan only where both are), as jnp.fmax: the
    gradient goes to the element chosen, to x2 at a tie (JAX's `where(x1 > x2, x1, x2)`).

    >>> sl.fmax(sl.tensor([1.0, np.nan, np.nan]), sl.tensor([2.0, 3.0, np.nan]))
    """
    x1, x2 = _real_pair("fmax", x1, x2, inexact=False)
    return ew.where(ew.logical_or(ew.greater(x1, x2), isnan(x2)), x1, x2)


def fmin(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """Elementwise minimum that skips a nan (nan only where both are), as jnp.fmin: the
    gradient goes to the element chosen, to x2 at a tie.

    >>> sl.fmin(sl.tensor([1.0, np.nan, np.nan]), sl.tensor([2.0, 3.0, np.nan]))
    """
    x1, x2 = _real_pair("fmin", x1, x2, inexact=False)
    return ew.where(ew.logical_or(ew.less(x1, x2), isnan(x2)), x1, x2)


def copysign(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """Elementwise |x1| with the sign bit of x2 (so -0.0 counts as negative), as
    jnp.copysign; the gradient for x1 is +-sign(x1), none for x2.

    >>> sl.copysign(sl.tensor([1.0, 2.0]), sl.tensor([-0.0, 3.0]))
    """
    x1, x2 = _real_pair("copysign", x1, x2)
    size = ew.absolute(x1)
    return ew.where(signbit(x2), ew.neg(size), size)


def heaviside(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The step function: 0 where x1 < 0, 1 where x1 > 0, x2 where x1 == 0 (nan where x1 is
    nan), as jnp.heaviside; x2 gets the gradient where it is chosen.

    >>> sl.heaviside(sl.tensor([-1.0, 0.0, 2.0]), 0.5)
    """
    x1, x2 = _real_pair("heaviside", x1, x2)
    at_zero = ew.where(isnan(x1), x1, x2)
    return ew.where(ew.less(x1, 0), 0, ew.where(ew.greater(x1, 0), 1, at_zero))


def _sinc_maclaurin_vjp(g, out, x, k):
    return (ew.mul(g, sinc_maclaurin_p(x, k=k + 1)),)


# The k-th derivative of sin(x)/x at 0, as a function of x whose derivative is the (k+1)-th:
# so every order of sinc's derivative at 0 is exact (JAX's _sinc_maclaurin).
sinc_maclaurin_p = Primitive(
    "sinc_maclaurin",
    lambda x, k: x * 0 + (0 if k % 2 else (-1) ** (k // 2) / (k + 1)),
    _sinc_maclaurin_vjp, elementwise=True, inexact=True,
    tangent=lambda ts, out, x, k: ew.mul(ts[0], sinc_maclaurin_p(x, k=k + 1)))


def sinc(x: ArrayLike) -> Tensor:
    """Elementwise sin(pi x) / (pi x), 1 at 0, as jnp.sinc; derivatives of every order at 0
    are those of its Maclaurin series (0, -pi**2/3, ...), as in JAX.

    >>> sl.sinc(sl.tensor([0.0, 0.5, 1.0]))
    """
    x = _real("sinc", x)
    x = as_tensor(x)
    at_zero = ew.equal(x, 0)
    pi_x = ew.mul(x, math.pi)
    safe = ew.where(at_zero, 1, pi_x)
    return ew.where(at_zero, sinc_maclaurin_p(pi_x, k=0), ew.div(ew.sin(safe), safe))


def logaddexp2(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """Elementwise log2(2**x1 + 2**x2) without overflow, as jnp.logaddexp2; its gradient is
    (2**(x1 - out), 2**(x2 - out)), as logaddexp's is, to every order.

    >>> sl.logaddexp2(sl.tensor([1.0, 100.0]), sl.tensor([1.0, 100.0]))
    """
    x1, x2 = _real_pair("logaddexp2", x1, x2)
    ln2 = math.log(2.0)
    return ew.div(logaddexp(ew.mul(x1, ln2), ew.mul(x2, ln2)), ln2)


def float_power(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """Elementwise x1 ** x2 computed in a float dtype (int32 becomes float32, int64 float64), as
    jnp.float_power (float32 stays float32 there, where numpy.float_power gives float64).

    >>> sl.float_power(sl.tensor([2, 3]), -1)
    """
    return ew.power(*_real_pair("float_power", x1, x2))


def fabs(x: ArrayLike) -> Tensor:
    """Elementwise |x| in a float dtype (int32 becomes float32, int64 float64), as jnp.fabs.

    >>> sl.fabs(sl.tensor([-1, 2]))
    """
    return ew.absolute(as_tensor(_real("fabs", x)))


def modf(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """(fractional part, integral part), both with x's sign, as jnp.modf; gradients 1 and 0.

    >>> sl.modf(sl.tensor([2.5, -1.25]))
    """
    x = as_tensor(_real("modf", x))
    whole = ew.where(ew.greater_equal(x, 0), floor(x), ceil(x))
    return ew.sub(x, whole), whole


def divmod(x1: ArrayLike, x2: ArrayLike) -> tuple[Tensor, Tensor]:
    """(x1 // x2, x1 % x2), as jnp.divmod and Python's divmod: floor division and the
    remainder with x2's sign.

    >>> sl.divmod(sl.tensor([7.0, -7.0]), 2.0)
    """
    return floor_divide(x1, x2), remainder(x1, x2)


# --- bits of floats -------------------------------------------------------------------------
signbit_p = Primitive("signbit", lambda x: _xp(x).signbit(x), elementwise=True, ufunc="signbit")


def signbit(x: ArrayLike) -> Tensor:
    """Elementwise: is the sign bit set (True for -0.0 and negative numbers; a bool tensor,
    not differentiable), as jnp.signbit.

    >>> sl.signbit(sl.tensor([-0.0, 0.0, -2.0]))
    """
    x = _real("signbit", x, inexact=False)
    x = as_tensor(x)
    if x.dtype.kind == "b":
        return ew.not_equal(x, x)  # all False, of x's shape
    return signbit_p(x)


nextafter_p = Primitive(
    "nextafter", lambda x, y: _xp(x, y).nextafter(x, y),
    lambda g, out, x, y: (g if isinstance(x, Tensor) else None, None),
    elementwise=True, inexact=True, ufunc="nextafter")


def nextafter(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The next float after x1 towards x2, as jnp.nextafter. Its gradient is 1 for x1 (the
    result is x1 moved by one unit in the last place) and 0 for x2; JAX defines none.

    >>> sl.nextafter(sl.tensor([1.0]), 2.0) - 1.0
    """
    return nextafter_p(*_real_pair("nextafter", x1, x2))


def spacing(x: ArrayLike) -> Tensor:
    """The distance from x to the next float away from zero, as jnp.spacing (negative for
    negative x); piecewise constant, so its gradient is 0.

    >>> sl.spacing(sl.tensor([1.0, -1.0]))
    """
    x = as_tensor(_real("spacing", x))
    negative = signbit(x)
    toward = ew.astype(ew.where(negative, -np.inf, np.inf), dtype=x.dtype)
    out = ew.sub(nextafter_p(x, toward), x)
    tiny = float(np.finfo(x.dtype).smallest_subnormal)
    return ew.where(ew.equal(out, 0), ew.astype(ew.where(negative, -tiny, tiny), dtype=x.dtype),
                    out)


def _frexp_impl(x):
    return _xp(x).frexp(x)


frexp_exponent_p = Primitive("frexp_exponent", lambda x: _frexp_impl(x)[1], elementwise=True)
ldexp_p = Primitive(
    "ldexp", lambda x, e: _xp(x, e).ldexp(x, e).astype(x.dtype, copy=False),
    lambda g, out, x, e: (ldexp_p(g, e) if isinstance(x, Tensor) else None, None),
    elementwise=True, promote=False)  # e is an integer exponent, not a value to promote
frexp_mantissa_p = Primitive(
    "frexp_mantissa", lambda x: _frexp_impl(x)[0],
    lambda g, out, x: (ldexp_p(g, ew.neg(frexp_exponent_p(x))),), elementwise=True, inexact=True)


def frexp(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) with x = mantissa * 2**exponent and 0.5 <= |mantissa| < 1, as
    jnp.frexp; the exponent is int32 (0 for 0, inf and nan) and the mantissa's gradient is
    2**-exponent.

    >>> sl.frexp(sl.tensor([8.0, 0.75]))
    """
    x = as_tensor(_real("frexp", x))
    return frexp_mantissa_p(x), frexp_exponent_p(x)


def ldexp(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """Elementwise x1 * 2**x2 for integer x2, exactly, as jnp.ldexp; the gradient for x1 is
    2**x2 (x2, an integer, has none).

    >>> sl.ldexp(sl.tensor([1.0, 0.75]), sl.tensor([3, -1]))
    """
    x1 = as_tensor(_real("ldexp", x1))
    (x2,) = _integers("ldexp", x2)
    return ldexp_p(x1, x2)


# --- integers and bits ----------------------------------------------------------------------
def _int_binary(name, ufunc):
    prim = Primitive(name, lambda x, y: getattr(_xp(x, y), ufunc)(x, y), elementwise=True,
                     ufunc=ufunc)

    def public(x1: ArrayLike, x2: ArrayLike) -> Tensor:
        return prim(*_integers(name, x1, x2))

    public.__name__ = public.__qualname__ = name
    public.primitive = prim
    return public


left_shift = _int_binary("left_shift", "left_shift")
left_shift.__doc__ = """Elementwise x1 << x2 on integers, as jnp.left_shift and `<<` (0 once
    x2 reaches the width of the type).

    >>> sl.left_shift(sl.tensor([1, 3]), 2)
    """
right_shift = _int_binary("right_shift", "right_shift")
right_shift.__doc__ = """Elementwise x1 >> x2 on integers (arithmetic: the sign fills in), as
    jnp.right_shift and `>>`.

    >>> sl.right_shift(sl.tensor([8, -8]), 2)
    """
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
gcd = _int_binary("gcd", "gcd")
gcd.__doc__ = """Elementwise greatest common divisor of integers (non-negative; gcd(0, 0) is
    0), as jnp.gcd.

    >>> sl.gcd(sl.tensor([12, -18]), 8)
    """
lcm = _int_binary("lcm", "lcm")
lcm.__doc__ = """Elementwise least common multiple of integers (non-negative; 0 where either
    is 0), as jnp.lcm.

    >>> sl.lcm(sl.tensor([4, -6]), 6)
    """

bitwise_count_p = Primitive("bitwise_count", lambda x: _xp(x).bitwise_count(x),
                            elementwise=True, ufunc="bitwise_count")


def bitwise_count(x: ArrayLike) -> Tensor:
    """Elementwise number of 1 bits in |x| (uint8), as jnp.bitwise_count.

    >>> sl.bitwise_count(sl.tensor([7, -8, 0]))
    """
    (x,) = _integers("bitwise_count", x)
    return bitwise_count_p(x)


# --- the modified Bessel function i0 --------------------------------------------------------
def _bessel_series(x, order):
    """I_order(x) for order 0 or 1 by its power series sum (x/2)**(2k + order) / (k! (k +
    order)!): every term is positive, so the sum loses no digits to cancellation, and it stops
    when the terms no longer change it (about |x| / 2 + 30 terms). Computed in float64."""
    xp = _xp(x)
    dtype = x.dtype
    x = x.astype(np.float64)
    finite = xp.isfinite(x)
    a = xp.where(finite, xp.minimum(xp.abs(x), 800.0), 0.0)  # I_n(713) overflows already
    q = a * a / 4
    term = (a / 2) if order else xp.ones_like(a)
    total = term.copy()
    k = 0
    with np.errstate(over="ignore", invalid="ignore"):
        while k < 3000:
            k += 1
            term = term * q / (k * (k + order))
            total = total + term
            if not bool(xp.any(term > total * 1e-17)):
                break
    if order:
        total = xp.where(x < 0, -total, total)
    inf = xp.where(x < 0, -np.inf, np.inf) if order else np.inf
    out = xp.where(finite, total, xp.where(xp.isnan(x), np.nan, inf))
    return out.astype(dtype, copy=False)


def _bessel_scaled(x, order):
    """exp(-|x|) I_order(x) for order 0 or 1: the power series times exp(-|x|) up to |x| = 30,
    beyond it Hankel's asymptotic series exp(-x) I(x) ~ sum (-1)^k a_k / x^k / sqrt(2 pi x),
    whose 30 terms are below 1e-17 there. Computed in float64."""
    xp = _xp(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    x = x.astype(np.float64)
    a = xp.abs(x)
    near = xp.where(a <= 30.0, a, 0.0)
    series = _bessel_series(near, order) * xp.exp(-near)
    far = xp.where(a > 30.0, a, 30.0)
    mu, term, total = 4.0 * order * order, xp.ones_like(far), xp.ones_like(far)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, 31):
            term = -term * (mu - (2 * k - 1) ** 2) / (8.0 * k * far)
            total = total + term
        total = total / xp.sqrt(2.0 * math.pi * far)
    out = xp.where(a <= 30.0, series, xp.where(xp.isinf(a), 0.0, total))
    if order:
        out = xp.where(x < 0, -out, out)
    return xp.where(xp.isnan(x), np.nan, out).astype(dtype, copy=False)


def _i0e_vjp(g, out, x):
    return (ew.mul(g, ew.sub(i1e_p(x), ew.mul(ew.sign(x), out))),)


def _i1e_vjp(g, out, x):
    # (exp(-|x|) I1)' = i0e(x) - i1e(x) (sign(x) + 1 / x), which is 1/2 at 0.
    at_zero = ew.equal(x, 0)
    safe = ew.where(at_zero, 1, x)
    d = ew.sub(i0e_p(safe), ew.mul(out, ew.add(ew.sign(safe), ew.div(1.0, safe))))
    return (ew.mul(g, ew.where(at_zero, 0.5, d)),)


i0e_p = Primitive("bessel_i0e", lambda x: _bessel_scaled(x, 0), _i0e_vjp, elementwise=True,
                  tangent=lambda ts, out, x: _i0e_vjp(ts[0], out, x)[0])
i1e_p = Primitive("bessel_i1e", lambda x: _bessel_scaled(x, 1), _i1e_vjp, elementwise=True,
                  tangent=lambda ts, out, x: _i1e_vjp(ts[0], out, x)[0])


def _i1_vjp(g, out, x):
    # I1'(x) = I0(x) - I1(x) / x, which is 1/2 at 0.
    at_zero = ew.equal(x, 0)
    safe = ew.where(at_zero, 1, x)
    return (ew.mul(g, ew.where(at_zero, 0.5, ew.sub(i0_p(x), ew.div(i1_p(x), safe)))),)


i0_p = Primitive("i0", lambda x: _bessel_series(x, 0),
                 lambda g, out, x: (ew.mul(g, i1_p(x)),), elementwise=True, inexact=True,
                 tangent=lambda ts, out, x: ew.mul(ts[0], i1_p(x)))
i1_p = Primitive("i1", lambda x: _bessel_series(x, 1), _i1_vjp, elementwise=True, inexact=True,
                 tangent=lambda ts, out, x: _i1_vjp(ts[0], out, x)[0])


def i0(x: ArrayLike) -> Tensor:
    """The modified Bessel function of the first kind of order 0, as jnp.i0 (integers compute
    in float64); its derivative is I1, itself differentiable to every order.

    >>> sl.i0(sl.tensor([0.0, 1.0]))
    """
    x = as_tensor(_real("i0", x))
    return i0_p(x)


# --- phase unwrapping -----------------------------------------------------------------------
def unwrap(p: ArrayLike, discont: float | None = None, axis: int = -1,
           period: float = 2 * math.pi) -> Tensor:
    """p with jumps larger than discont (default period / 2) along axis brought back by
    multiples of period, as jnp.unwrap; the gradient flows as through the differences and
    their running sum.

    >>> sl.unwrap(sl.tensor([0.0, 3.0, 6.5, 0.2]))
    """
    p = as_tensor(p)
    if p.dtype.kind == "c":
        raise TypeError(f"unwrap: got complex input ({p.dtype}); unwrap takes real phases")
    if p.ndim == 0:
        raise ValueError("unwrap: p must have at least one dimension, got a 0-d tensor")
    if p.shape[axis] == 0:
        return p
    if p.dtype.kind in "biu":  # float64 even for int32, as jnp.unwrap
        p = ew.astype(p, dtype=np.dtype(np.float64))
    half = period / 2
    discont = half if discont is None else discont
    dd = diff(p, axis=axis)
    ddmod = ew.sub(remainder(ew.add(dd, half), period), half)
    ddmod = ew.where(ew.logical_and(ew.equal(ddmod, -half), ew.greater(dd, 0)), half, ddmod)
    correct = ew.where(ew.less(ew.absolute(dd), discont), 0, ew.sub(ddmod, dd))
    axis = axis % p.ndim
    head = getitem(p, (slice(None),) * axis + (slice(0, 1),))
    rest = getitem(p, (slice(None),) * axis + (slice(1, None),))
    return concatenate([head, ew.add(rest, cumsum(correct, axis))], axis)


NUMPY_UFUNCS: dict = {
    np.hypot: hypot, np.fmax: fmax, np.fmin: fmin, np.copysign: copysign,
    np.heaviside: heaviside, np.logaddexp2: logaddexp2, np.fabs: fabs, np.signbit: signbit,
    np.left_shift: left_shift, np.right_shift: right_shift, np.gcd: gcd, np.lcm: lcm,
    np.ldexp: ldexp, np.nextafter: nextafter, np.spacing: spacing,
    np.bitwise_count: bitwise_count,
}
NUMPY_FUNCTIONS: dict = {
    np.sinc: lambda x: sinc(x), np.i0: lambda x: i0(x),
    np.unwrap: lambda p, discont=None, axis=-1, period=2 * math.pi: unwrap(p, discont, axis,
                                                                           period),
}
