"""Elementwise primitives with their VJPs: arithmetic, transcendental functions, where,
comparisons, casts and device moves. Broadcasting is undone by the backward walk, so each rule
returns a cotangent of the output's shape.

Imports backends, tape and ops.primitive.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..tape import Tensor
from . import batching, shapes
from .primitive import Primitive


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _is_tensor(x):
    return type(x) is Tensor


# --- arithmetic ---------------------------------------------------------------------------
# Every primitive in this file is elementwise; `ufunc` names the NumPy/CuPy function that
# computes it into `out=`, `inline` the operator the generated loop writes for it. A
# `tangent` rule (forward mode's) sits beside each vjp: ts holds the inputs' tangents, None
# for zero, and forward mode fits what it returns to out's shape and dtype.
def _arith(name, impl, vjp, ufunc, op, **facts):
    return Primitive(name, impl, vjp, elementwise=True, ufunc=ufunc, inline=op, **facts)


def _plus(a, b):
    """a + b, either of them None for zero (a term that is absent is not computed)."""
    return b if a is None else a if b is None else add(a, b)


def _sub_tangent(ts, out, x, y):
    tx, ty = ts
    return tx if ty is None else neg(ty) if tx is None else sub(tx, ty)


add = _arith("add", lambda x, y: x + y, lambda g, out, x, y: (g, g), "add", "({0} + {1})",
             linear=True, tangent=lambda ts, out, x, y: _plus(*ts))
sub = _arith("sub", lambda x, y: x - y, lambda g, out, x, y: (g, neg(g)), "subtract",
             "({0} - {1})", linear=True, tangent=_sub_tangent)


def _is_broadcast_one(g):
    """g is a constant 1 stretched by broadcasting: the cotangent `sum` hands back."""
    v = g._value
    return (type(g) is Tensor and g._trace is None and not g.requires_grad
            and not any(getattr(v, "strides", (1,))) and v.size > 0 and v.flat[0] == 1)


def scale_cotangent(g, y, shape=None):
    """g * y, of the given shape (g's by default); when g is a broadcast 1 (a loss
    `sum(ys * P)` or `vdot(ys, P)`), y itself seen through a broadcast: a [T, ...] cotangent is
    not allocated and filled with copies of P, and the view is read-only, so writing into such
    a gradient cannot change P."""
    shape = g.shape if shape is None else shape
    if isinstance(y, Tensor) and _is_broadcast_one(g) and g.dtype == y.dtype:
        from .structural import broadcast_to_p  # structural imports this module
        return broadcast_to_p(y, shape=shape)
    return mul(g, y)


mul = _arith("mul", lambda x, y: x * y, lambda g, out, x, y: (
    scale_cotangent(g, y) if _is_tensor(x) else None,
    scale_cotangent(g, x) if _is_tensor(y) else None), "multiply", "({0} * {1})",
    multilinear=True)


def _div_tangent(ts, out, x, y):
    """(tx - out ty) / y: the quotient rule, one division."""
    tx, ty = ts
    if ty is None:
        return div(tx, y)
    d = mul(out, ty)
    return div(neg(d) if tx is None else sub(tx, d), y)


div = _arith("div", lambda x, y: x / y, lambda g, out, x, y: (
    div(g, y) if _is_tensor(x) else None,
    neg(div(mul(g, out), y)) if _is_tensor(y) else None), "true_divide", "({0} / {1})",
    tangent=_div_tangent, inexact=True)
neg = _arith("neg", lambda x: -x, lambda g, out, x: (neg(g),), "negative", "(-{0})",
             linear=True)


def _pow_dx(x, y):
    """d(x**y)/dx = y x**(y-1), and 0 where y == 0, as JAX (x**0 is constant, even at 0)."""
    if not _is_tensor(y):
        return mul(x, 0.0) if y == 0 else mul(x, 2.0) if y == 2 else mul(y, power(x, y - 1))
    zero = equal(y, 0)
    safe_y = where(zero, 1.0, y)  # x**(0 - 1) would be inf at x = 0, and 0 * inf is nan
    return where(zero, 0.0, mul(y, power(x, sub(safe_y, 1))))


def _pow_dy(out, x):
    """d(x**y)/dy = x**y log(x): the principal complex log when the result is complex (a
    negative real base to a complex power); for real results 0 where x <= 0."""
    if _is_complex(out):
        if not _is_tensor(x):
            return mul(out, complex(np.log(complex(x)))) if x != 0 else mul(out, 0.0)
        return mul(out, log(x if _is_complex(x) else astype(x, dtype=out.dtype)))
    if not _is_tensor(x):  # a number base (2.0 ** y): its log folds now
        return mul(out, float(np.log(x))) if x > 0 else mul(out, 0.0)
    positive = greater(x, 0)
    return where(positive, mul(out, log(where(positive, x, 1.0))), 0.0)


def _pow_vjp(g, out, x, y):
    return (mul(g, _pow_dx(x, y)) if _is_tensor(x) else None,
            mul(g, _pow_dy(out, x)) if _is_tensor(y) else None)


def _pow_tangent(ts, out, x, y):
    tx, ty = ts
    return _plus(None if tx is None else mul(tx, _pow_dx(x, y)),
                 None if ty is None else mul(ty, _pow_dy(out, x)))


def _pow_into(x, y, out):
    """x ** y into out, as the operator computes it: NumPy's `**` takes square, sqrt or
    reciprocal for a scalar exponent of 2, 0.5 or -1, whose last bits np.power's complex
    algorithm does not give, so a loop writing into its buffers would not be the loop."""
    _xp(out).copyto(out, x**y, casting="no")  # the buffer has impl's dtype: never a cast
    return out


power = _arith("pow", lambda x, y: x**y, _pow_vjp, "power", "({0} ** {1})",
               tangent=_pow_tangent, shape_of=shapes.power, out_impl=_pow_into)


# --- transcendental -----------------------------------------------------------------------
def _ufunc(name, vjp, tangent, doc, ufunc=None, inexact=True):
    """A primitive computed by the array namespace's function of that name."""
    ufunc = ufunc or name
    return Primitive(name, lambda x: getattr(_xp(x), ufunc)(x), vjp, doc=doc, elementwise=True,
                     ufunc=ufunc, tangent=tangent, inexact=inexact)


# A holomorphic function's VJP is g * f'(x) (JAX's convention, no conjugate) and its tangent
# t * f'(x): the two rules are the same product, written once for each direction.
exp = _ufunc("exp", lambda g, out, x: (mul(g, out),), lambda ts, out, x: mul(ts[0], out),
             "exp(x): elementwise e**x; the VJP reuses the output (g * out).")
log = _ufunc("log", lambda g, out, x: (div(g, x),), lambda ts, out, x: div(ts[0], x),
             "log(x): elementwise natural logarithm; VJP g / x.")
log1p = _ufunc("log1p", lambda g, out, x: (div(g, add(x, 1.0)),),
               lambda ts, out, x: div(ts[0], add(x, 1.0)),
               "log1p(x): elementwise log(1 + x), accurate for small x.")
sqrt = _ufunc("sqrt", lambda g, out, x: (div(mul(g, 0.5), out),),
              lambda ts, out, x: div(mul(ts[0], 0.5), out),
              "sqrt(x): elementwise square root; VJP g / (2 out).")
sin = _ufunc("sin", lambda g, out, x: (mul(g, cos(x)),), lambda ts, out, x: mul(ts[0], cos(x)),
             "sin(x): elementwise sine.")
cos = _ufunc("cos", lambda g, out, x: (neg(mul(g, sin(x))),),
             lambda ts, out, x: neg(mul(ts[0], sin(x))), "cos(x): elementwise cosine.")
tanh = _ufunc("tanh", lambda g, out, x: (mul(g, sub(1.0, mul(out, out))),),  # reuses out
              lambda ts, out, x: mul(ts[0], sub(1.0, mul(out, out))),
              "tanh(x): elementwise hyperbolic tangent; VJP g * (1 - out**2).")


def _sigmoid_parts(x, dtype):
    """What sigmoid needs from x, read before anything is written (out may be x's buffer):
    e = exp(-|x|), at most 1 so nothing overflows, and where x >= 0. The numerator is e where
    x < 0 (e / (1 + e), no cancellation in the negative tail), else 1 (1 / (1 + e)):
    maximum(e, x >= 0) picks exactly those (e <= 1; NaN stays NaN), 3x faster than
    where(x < 0, e, 1). Written in place where it can be: each extra pass costs about as
    much as the arithmetic here."""
    xp = _xp(x)
    e = xp.empty(x.shape, dtype)
    xp.absolute(x, out=e, dtype=dtype)  # computed in dtype: |int8(-128)| does not wrap
    xp.negative(e, out=e)
    xp.exp(e, out=e)
    return xp, e, x >= 0


# The real floats whose sigmoid takes the short path below: NumPy arrays, out of x's dtype.
_SIGMOID_FAST = frozenset(map(np.dtype, ("float32", "float64")))


def _sigmoid_fast(x, out):
    """The arithmetic of _sigmoid_out on a float32 or float64 NumPy array, with less Python
    around it (an LSTM step calls sigmoid three times; on its [32, 128] gates this is 11 us a
    call, not 13). The numerator is maximum(e, sign(x)), the same values as maximum(e, x >= 0)
    without a bool array cast in the loop: sign is 1 (x > 0), -1 (x < 0, where e >= 0 wins),
    0 at x = 0 (where e = 1 wins) and NaN at NaN."""
    sign = np.sign(x)  # read before out is written: out may be x's buffer
    e = np.absolute(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    np.maximum(e, sign, out=out)
    e += 1
    return np.divide(out, e, out=out)


def _sigmoid_dtype(x):
    return np.result_type(x.dtype, 1.0)  # NumPy 2: float32 stays float32, ints -> float64


def _sigmoid_out(x, out):
    """sigmoid written into out, the same arithmetic as its impl."""
    if type(x) is np.ndarray and x.dtype in _SIGMOID_FAST and out.dtype == x.dtype:
        return _sigmoid_fast(x, out)
    if _is_complex(x):  # complex: the tanh form (the branches on x < 0 mean nothing there)
        xp = _xp(x)
        xp.multiply(x, 0.5, out=out)
        xp.tanh(out, out=out)
        out += 1
        out *= 0.5
        return out
    xp, e, nonnegative = _sigmoid_parts(x, out.dtype)
    xp.maximum(e, nonnegative, out=out)  # the numerator (x is read no more)
    e += 1
    xp.divide(out, e, out=out)
    return out


def _sigmoid_impl(x):
    if type(x) is np.ndarray and x.ndim and x.dtype in _SIGMOID_FAST:
        return _sigmoid_fast(x, np.empty(x.shape, x.dtype))
    if type(x) is np.ndarray and x.ndim == 0 and x.dtype.kind == "f":
        # A scalar model's parameter: the same operations on a NumPy scalar of x's dtype
        # (the same ufunc loops, so the same bits), without the buffers: 1 us, not 8.
        v = x[()]
        e = np.exp(-abs(v))
        return np.asarray((e if v < 0 else v.dtype.type(1)) / (e + 1))
    if _is_complex(x):
        return (_xp(x).tanh(x * 0.5) + 1) * 0.5
    return _sigmoid_out(x, _xp(x).empty(x.shape, _sigmoid_dtype(x)))


sigmoid = Primitive(
    "sigmoid", _sigmoid_impl, lambda g, out, x: (mul(g, mul(out, sub(1.0, out))),),
    doc="sigmoid(x): 1 / (1 + exp(-x)), as e / (1 + e) with e = exp(x) for x < 0 (accurate "
        "in the tail, nothing overflows); VJP g * out * (1 - out).",
    elementwise=True, out_impl=_sigmoid_out, inexact=True,
    tangent=lambda ts, out, x: mul(ts[0], mul(out, sub(1.0, out))))


def _softplus_impl(x):
    # max(x, 0) + log1p(exp(-|x|)): x + log1p(exp(-x)) for x > 0, else log1p(exp(x)), so
    # nothing overflows (JAX's logaddexp(x, 0)); NumPy's own logaddexp is slower and warns
    # at NaN. One equation, where `where` over the two branches takes ten.
    xp = _xp(x)
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


def _logistic_derivative(out, x):
    return mul(out, sigmoid(neg(x)))  # sigmoid(x) sigmoid(-x): accurate in both tails


# softplus' derivative: sigmoid's values, and a derivative that keeps sigmoid(-x) where
# 1 - sigmoid(x) rounds to 0 (softplus'' at 50 is exp(-50), not 0).
softplus_grad_p = Primitive(
    "softplus_grad", _sigmoid_impl,
    lambda g, out, x: (mul(g, _logistic_derivative(out, x)),),
    doc="softplus_grad(x): sigmoid(x), softplus' derivative; VJP g * out * sigmoid(-x).",
    elementwise=True, out_impl=_sigmoid_out, inexact=True,
    tangent=lambda ts, out, x: mul(ts[0], _logistic_derivative(out, x)))
softplus_p = Primitive(
    "softplus", _softplus_impl, lambda g, out, x: (mul(g, softplus_grad_p(x)),),
    doc="softplus(x): log(1 + exp(x)) without overflow, for real floats; VJP g * sigmoid(x).",
    elementwise=True, inexact=True, tangent=lambda ts, out, x: mul(ts[0], softplus_grad_p(x)))


def _relu_picked(x, t):
    """t where x > 0, else 0: relu's derivative (0 at 0 and at NaN, as JAX's) applied to t."""
    return where(greater(x, 0), t, 0.0)


# relu as one equation: max(x, 0) is where(x > 0, x, max(x, 0))'s value to the bit (x > 0
# picks x, which max(x, 0) is there), in one NumPy call where that form took four, and its
# derivative is the form's (where(x > 0, g, 0)). For real floats (functions.relu).
relu_p = Primitive(
    "relu", lambda x: _xp(x).maximum(x, 0), lambda g, out, x: (_relu_picked(x, g),),
    doc="relu(x): max(x, 0) for real floats, NaN staying NaN; VJP g where x > 0, else 0 "
        "(0 at 0 and at NaN, as JAX's).",
    elementwise=True, tangent=lambda ts, out, x: _relu_picked(x, ts[0]))


sign = Primitive("sign", lambda x: _xp(x).sign(x), elementwise=True,
                 doc="sign(x): -1, 0 or 1 elementwise (not differentiable).")


def _abs_vjp(g, out, x):
    if not _is_complex(x):  # JAX's: g where x >= 0 (so 1 at 0, a subgradient), else -g
        return (where(greater_equal(x, 0), g, neg(g)),)
    # JAX's convention: g * conj(z) / |z| (0 at 0), written differentiably for second order
    zero = equal(out, 0)
    return (where(zero, 0.0, mul(g, div(conj(x), where(zero, 1.0, out)))),)


def _abs_tangent(ts, out, x):
    if not _is_complex(x):
        return where(greater_equal(x, 0), ts[0], neg(ts[0]))
    zero = equal(out, 0)  # d|z| = Re(conj(z) dz) / |z|, 0 at 0 as the VJP
    return where(zero, 0.0, div(real(mul(conj(x), ts[0])), where(zero, 1.0, out)))


absolute = _ufunc("abs", _abs_vjp, _abs_tangent,
                  "abs(x): elementwise |x|; VJP g * sign(x) for real x (0 at 0), g * conj(z) "
                  "/ |z| for complex z (JAX's convention).", ufunc="absolute", inexact=False)


# --- complex parts ------------------------------------------------------------------------
# Cotangents follow JAX's convention: the pairing of a cotangent c with a tangent t is
# Re(c * t), so a holomorphic f has VJP g * f'(z) (no conjugate), and a real input's cotangent
# is the real part of what reaches it (fit_cotangent takes it).
def _is_complex(x):
    return np.dtype(getattr(x, "dtype", type(x))).kind == "c"


def _real_vjp(g, out, x):
    return (g,)  # Re(g * dz) = g Re(dz): the cotangent of z is g itself


def _imag_vjp(g, out, x):
    return (mul(g, -1j) if _is_complex(x) else mul(g, 0.0),)  # Im(dz) = Re(-i dz)


def _angle_vjp(g, out, x):
    if not _is_complex(x):
        return (mul(g, 0.0),)
    # d angle = Im(dz / z) = Re(-i conj(z) dz / |z|^2); 0 at z = 0, as |z| there
    r2 = real(mul(x, conj(x)))
    zero = equal(r2, 0)
    return (where(zero, 0.0, mul(g, div(mul(conj(x), -1j), where(zero, 1.0, r2)))),)


real = Primitive("real", lambda x: _xp(x).real(x), _real_vjp, elementwise=True, linear=True,
                 doc="real(x): the real part (x itself for real x).")
imag = Primitive("imag", lambda x: _xp(x).imag(x), _imag_vjp, elementwise=True, linear=True,
                 doc="imag(x): the imaginary part (zeros for real x).")
conj = Primitive("conj", lambda x: _xp(x).conjugate(x), lambda g, out, x: (conj(g),),
                 elementwise=True, ufunc="conjugate", linear=True,
                 doc="conj(x): the complex conjugate (x itself for real x).")
def _float64_if_integer(x):
    """x, with integers and bools as float64: angle of them is float64 in JAX, where NumPy's
    is float16 for int8 and bools, losing digits."""
    dtype = getattr(x, "dtype", None)
    return x.astype(np.float64) if dtype is not None and dtype.kind in "biu" else x


angle = Primitive("angle", lambda x: _xp(x).angle(_float64_if_integer(x)), _angle_vjp,
                  elementwise=True,
                  doc="angle(x): the argument of a complex number, in radians.")


def _complex_impl(x, y):
    # Parts written in place: x + 1j * y would make inf * 1j = nan + inf j.
    xp = _xp(x, y)
    # dtypes of arrays (CuPy's too), Python numbers as weak as NumPy 2 takes them
    dtype = np.result_type(getattr(x, "dtype", x), getattr(y, "dtype", y), np.complex64)
    out = xp.empty(np.broadcast_shapes(np.shape(x), np.shape(y)), dtype)
    out.real[...], out.imag[...] = x, y
    return out


# Re(g * (dx + i dy)) = Re(g) dx - Im(g) dy
complex_p = Primitive("complex", _complex_impl,
                      lambda g, out, x, y: (real(g), neg(imag(g))), elementwise=True,
                      linear=True, doc="complex(x, y): x + iy, of real x and y.")


def _picked(x_wins, y_wins):
    """The VJP of maximum (x_wins = greater) or minimum (less), as JAX's: the cotangent goes to
    the winner, split evenly at a tie, and to neither where the result is NaN (no side wins
    or ties), so a NaN's gradient does not land on the other operand."""
    def vjp(g, out, x, y):
        tie = equal(x, y)
        half = mul(g, 0.5)
        return (where(x_wins(x, y), g, where(tie, half, 0.0)) if _is_tensor(x) else None,
                where(y_wins(x, y), g, where(tie, half, 0.0)) if _is_tensor(y) else None)
    return vjp


def _picked_tangent(x_wins, y_wins):
    """The tangent of maximum or minimum: the winner's, the mean of the two at a tie, zero
    where the result is NaN, as the VJP splits the cotangent."""
    def tangent(ts, out, x, y):
        tx, ty = (0.0 if t is None else t for t in ts)
        return where(x_wins(x, y), tx,
                     where(equal(x, y), mul(add(tx, ty), 0.5), where(y_wins(x, y), ty, 0.0)))
    return tangent


# The comparisons are defined below: these read them when called.
def _x_greater(x, y):
    return greater(x, y)


def _x_less(x, y):
    return less(x, y)


maximum = Primitive("maximum", lambda x, y: _xp(x, y).maximum(x, y),
                    _picked(_x_greater, _x_less),
                    doc="maximum(x, y): elementwise larger value (NaN if either is); ties "
                        "split the gradient evenly, and a NaN result gives neither any.",
                    elementwise=True, ufunc="maximum",
                    tangent=_picked_tangent(_x_greater, _x_less))
minimum = Primitive("minimum", lambda x, y: _xp(x, y).minimum(x, y),
                    _picked(_x_less, _x_greater),
                    doc="minimum(x, y): elementwise smaller value (NaN if either is); ties "
                        "split the gradient evenly, and a NaN result gives neither any.",
                    elementwise=True, ufunc="minimum",
                    tangent=_picked_tangent(_x_less, _x_greater))

# A large float where is picked by bits, branch-free: ((x ^ y) * c) ^ y on the operands'
# bits as integers of their size is x's bits where c is True and y's elsewhere (x * c where
# y is +0.0, whose bits are zeros). np.where branches per element, and a mask as
# unpredictable as a relu's costs it 4-6x as much (1.8 ms against 0.3-0.5 ms on 500k
# float64; on a predictable mask np.where is 0.3 ms). Bits are copied, not computed, so the
# values are np.where's; other dtypes, a condition that is not bool or smaller than
# _BITS_MIN_SIZE, or a result whose shape or dtype is not the operands' (broadcast up by the
# condition, or promoted) go to np.where.
_BITS_MIN_SIZE = 8192
_SAME_SIZE_INT = {2: np.int16, 4: np.int32, 8: np.int64}
_HOST_VALUES = (np.ndarray, np.generic, int, float)


def _where_impl(c, x, y):
    if type(c) is np.ndarray and c.size >= _BITS_MIN_SIZE and c.dtype == np.bool_:
        picked = _pick_bits(c, x, y)  # (a NumPy condition: x and y are not CuPy's)
        if picked is not None:
            return picked
    return _xp(c, x, y).where(c, x, y)


def _pick_bits(c, x, y):
    """where(c, x, y) computed on the bits of x and y, or None where that does not apply."""
    if not all(isinstance(v, _HOST_VALUES) for v in (x, y)):
        return None  # a CuPy operand beside a NumPy condition: np.where says what is wrong
    dtype = np.result_type(x, y)
    if dtype.kind != "f" or dtype.itemsize not in _SAME_SIZE_INT:
        return None
    arrays = [v for v in (x, y) if isinstance(v, np.ndarray)]
    if any(v.dtype != dtype for v in arrays) or max((v.size for v in arrays), default=0) < \
            _BITS_MIN_SIZE:
        return None
    bits = _SAME_SIZE_INT[dtype.itemsize]
    xb, yb = (np.asarray(v, dtype).view(bits) for v in (x, y))
    shape = np.broadcast_shapes(xb.shape, yb.shape)
    if np.broadcast_shapes(shape, c.shape) != shape:
        return None
    if not yb.ndim and yb == 0:
        return np.multiply(xb, c).view(dtype)
    out = np.bitwise_xor(xb, yb)
    np.multiply(out, c, out=out)
    return np.bitwise_xor(out, yb, out=out).view(dtype)

where = Primitive(
    "where", _where_impl,
    lambda g, out, c, x, y: (None, where(c, g, 0.0), where(c, 0.0, g)), elementwise=True,
    linear=(1, 2), promote=(1, 2))


# --- comparisons (not differentiable: bool results) ------------------------------------------
def _test(name, impl, inline=None):
    return Primitive(name, impl, elementwise=True, inline=inline)


less = _test("lt", lambda x, y: x < y, "({0} < {1})")
less_equal = _test("le", lambda x, y: x <= y, "({0} <= {1})")
greater = _test("gt", lambda x, y: x > y, "({0} > {1})")
greater_equal = _test("ge", lambda x, y: x >= y, "({0} >= {1})")
equal = _test("eq", lambda x, y: x == y, "({0} == {1})")
not_equal = _test("ne", lambda x, y: x != y, "({0} != {1})")
logical_not = _test("not", lambda x: _xp(x).logical_not(x))
logical_and = _test("and", lambda x, y: _xp(x, y).logical_and(x, y))
logical_or = _test("or", lambda x, y: _xp(x, y).logical_or(x, y))
isfinite = _test("isfinite", lambda x: _xp(x).isfinite(x))

# --- identity-like ------------------------------------------------------------------------
copy = Primitive("copy", lambda x: x, lambda g, out, x: (g,),  # a new node, the same data
                 elementwise=True, view=True, linear=True)
stop_gradient = Primitive(
    "stop_gradient", lambda x: x, elementwise=True, view=True,
    doc="stop_gradient(x): x's value, with no gradient flowing through it.")
checkpoint_name_p = Primitive(  # scanlib.checkpoint_name (remat.py) binds it
    "checkpoint_name", lambda x, name: x, lambda g, out, x, name: (g,),
    elementwise=True, view=True, tangent=lambda ts, out, x, name: ts[0],  # unnamed, as JAX
    doc="checkpoint_name(x, name): x, marked for a saving policy.")
scale_gradient_p = Primitive(  # scanlib.optim.scale_gradient binds it
    "scale_gradient", lambda x, scale: x, lambda g, out, x, scale: (g * scale,),
    elementwise=True, view=True, tangent=lambda ts, out, x, scale: ts[0] * scale,
    doc="scale_gradient(x, scale): x, whose derivative is scale (optax.scale_gradient).")
astype = Primitive("astype", lambda x, dtype: x.astype(dtype, copy=False),
                   lambda g, out, x, dtype: (g,),  # the walk casts g back to x's dtype
                   elementwise=True, linear=True, keeps_weak=False)


def _device_put_impl(x, device):
    return backends.to_device(x, device)


device_put = Primitive(
    "device_put", _device_put_impl, lambda g, out, x, device: (device_put(g, device=x.device),),
    batch=batching.leading_rule, linear=True)

