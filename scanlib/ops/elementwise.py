"""Elementwise primitives with their VJPs: arithmetic, transcendental functions, where,
comparisons, casts and device moves. Broadcasting is undone by the backward walk, so each rule
returns a cotangent of the output's shape.

Imports backends, tape and ops.primitive.
"""

from __future__ import annotations

from .. import backends
from ..tape import Tensor
from .primitive import Primitive


def _xp(*a):
    return backends.xp_of(*a)


def _is_tensor(x):
    return type(x) is Tensor


# --- arithmetic ---------------------------------------------------------------------------
add = Primitive("add", lambda x, y: x + y, lambda g, out, x, y: (g, g))
sub = Primitive("sub", lambda x, y: x - y, lambda g, out, x, y: (g, neg(g)))
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


mul = Primitive("mul", lambda x, y: x * y, lambda g, out, x, y: (
    scale_cotangent(g, y) if _is_tensor(x) else None,
    scale_cotangent(g, x) if _is_tensor(y) else None))
div = Primitive("div", lambda x, y: x / y, lambda g, out, x, y: (
    div(g, y) if _is_tensor(x) else None,
    neg(div(mul(g, out), y)) if _is_tensor(y) else None))
neg = Primitive("neg", lambda x: -x, lambda g, out, x: (neg(g),))


def _pow_vjp(g, out, x, y):
    gx = gy = None
    if _is_tensor(x):
        if isinstance(y, (int, float)) and y == 2:
            gx = mul(g, mul(x, 2.0))
        else:
            gx = mul(g, mul(y, power(x, sub(y, 1) if _is_tensor(y) else y - 1)))
    if _is_tensor(y):
        positive = greater(x, 0)
        safe_x = where(positive, x, 1.0)
        gy = mul(g, where(positive, mul(out, log(safe_x)), 0.0))
    return gx, gy


power = Primitive("pow", lambda x, y: x**y, _pow_vjp)


# --- transcendental -----------------------------------------------------------------------
exp = Primitive("exp", lambda x: _xp(x).exp(x), lambda g, out, x: (mul(g, out),),
    doc='exp(x): elementwise e**x; the VJP reuses the output (g * out).')
log = Primitive("log", lambda x: _xp(x).log(x), lambda g, out, x: (div(g, x),),
    doc='log(x): elementwise natural logarithm; VJP g / x.')
log1p = Primitive("log1p", lambda x: _xp(x).log1p(x), lambda g, out, x: (div(g, add(x, 1.0)),),
    doc='log1p(x): elementwise log(1 + x), accurate for small x.')
sqrt = Primitive("sqrt", lambda x: _xp(x).sqrt(x), lambda g, out, x: (div(mul(g, 0.5), out),),
    doc='sqrt(x): elementwise square root; VJP g / (2 out).')
sin = Primitive("sin", lambda x: _xp(x).sin(x), lambda g, out, x: (mul(g, cos(x)),),
    doc='sin(x): elementwise sine.')
cos = Primitive("cos", lambda x: _xp(x).cos(x), lambda g, out, x: (neg(mul(g, sin(x))),),
    doc='cos(x): elementwise cosine.')
tanh = Primitive("tanh", lambda x: _xp(x).tanh(x),
                 lambda g, out, x: (mul(g, sub(1.0, mul(out, out))),),
    doc='tanh(x): elementwise hyperbolic tangent; VJP g * (1 - out**2).')  # reuses the output


def _sigmoid_impl(x):
    xp = _xp(x)
    return (xp.tanh(x * 0.5) + 1) * 0.5  # stable for large |x|, unlike 1 / (1 + exp(-x))


sigmoid = Primitive("sigmoid", _sigmoid_impl,
                    lambda g, out, x: (mul(g, mul(out, sub(1.0, out))),),
    doc='sigmoid(x): 1 / (1 + exp(-x)), stable for large |x|; VJP g * out * (1 - out).')
sign = Primitive("sign", lambda x: _xp(x).sign(x),
    doc='sign(x): -1, 0 or 1 elementwise (not differentiable).')
absolute = Primitive("abs", lambda x: _xp(x).abs(x), lambda g, out, x: (mul(g, sign(x)),),
    doc='abs(x): elementwise |x|; VJP g * sign(x) (0 at 0).')


def _max_vjp(g, out, x, y):
    # Ties split the cotangent evenly, as JAX does.
    gx = where(greater(x, y), g, where(equal(x, y), mul(g, 0.5), 0.0))
    return gx, sub(g, gx)


def _min_vjp(g, out, x, y):
    gx = where(less(x, y), g, where(equal(x, y), mul(g, 0.5), 0.0))
    return gx, sub(g, gx)


maximum = Primitive("maximum", lambda x, y: _xp(x, y).maximum(x, y), _max_vjp,
    doc='maximum(x, y): elementwise larger value; ties split the gradient evenly.')
minimum = Primitive("minimum", lambda x, y: _xp(x, y).minimum(x, y), _min_vjp,
    doc='minimum(x, y): elementwise smaller value; ties split the gradient evenly.')

where = Primitive(
    "where", lambda c, x, y: _xp(c, x, y).where(c, x, y),
    lambda g, out, c, x, y: (None, where(c, g, 0.0), where(c, 0.0, g)))

# --- comparisons (not differentiable: bool results) ------------------------------------------
less = Primitive("lt", lambda x, y: x < y)
less_equal = Primitive("le", lambda x, y: x <= y)
greater = Primitive("gt", lambda x, y: x > y)
greater_equal = Primitive("ge", lambda x, y: x >= y)
equal = Primitive("eq", lambda x, y: x == y)
not_equal = Primitive("ne", lambda x, y: x != y)
logical_not = Primitive("not", lambda x: _xp(x).logical_not(x))
logical_and = Primitive("and", lambda x, y: _xp(x, y).logical_and(x, y))
logical_or = Primitive("or", lambda x, y: _xp(x, y).logical_or(x, y))
isfinite = Primitive("isfinite", lambda x: _xp(x).isfinite(x))

# --- identity-like ------------------------------------------------------------------------
copy = Primitive("copy", lambda x: x, lambda g, out, x: (g,))  # a new node for the same data
stop_gradient = Primitive("stop_gradient", lambda x: x,
    doc="stop_gradient(x): x's value, with no gradient flowing through it.")
astype = Primitive("astype", lambda x, dtype: x.astype(dtype, copy=False),
                   lambda g, out, x, dtype: (g,))  # the walk casts g back to x's dtype


def _device_put_impl(x, device):
    return backends.to_device(x, device)


device_put = Primitive(
    "device_put", _device_put_impl, lambda g, out, x, device: (device_put(g, device=x.device),))

