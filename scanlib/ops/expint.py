"""The exponential integrals as primitives (public as scanlib.scipy.special): expn(n, x), the
generalised E_n(x) = integral of exp(-x t) / t**n over t >= 1 (exp1 is n = 1), and expi(x),
Ei(x) = -E_1(-x) for x < 0.

Numerics for whole arrays in float64 (other float dtypes round once): E_n by its series for
x <= 1 and by its continued fraction (modified Lentz, Numerical Recipes' expint) beyond; Ei by
its power series up to x = 50 (all terms positive) and its asymptotic series past it. Edge
values are SciPy's (E_n(0) = 1 / (n - 1) for n > 1, inf for n <= 1; Ei(0) = -inf).

Imports backends, tape and ops.primitive/elementwise/incomplete.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from . import elementwise as ew
from ..tape import Tensor
from .incomplete import float64_impl, iterate, unsupported_cotangent
from .primitive import Primitive

__all__: list[str] = []  # public as scanlib.scipy.special

_EULER = 0.57721566490153286061
_EPS = np.finfo(np.float64).eps


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _expn_fraction(n, x, active, xp):
    """E_n(x) for x > 1: the continued fraction, modified Lentz."""
    tiny = 1e-300

    def step(s):
        i, b, c, d, h = s
        a = -i * (n - 1.0 + i)
        b = b + 2.0
        d = 1.0 / (a * d + b)
        c = b + a / c
        delta = c * d
        return (i + 1.0, b, c, d, h * delta), xp.abs(delta - 1.0) <= _EPS

    b = x + n
    state = (xp.ones_like(x), b, xp.full(x.shape, 1.0 / tiny), 1.0 / b, 1.0 / b)
    return iterate(step, state, active)[-1] * xp.exp(-x)


def _expn_series(n, x, active, xp):
    """E_n(x) for 0 < x <= 1: the series, with digamma(n) at the term k = n - 1."""
    log_x = xp.log(x)
    psi = -_EULER + xp.zeros_like(x)
    m = int(float(n.max())) if n.size else 0
    for k in range(1, m):  # psi(n) = -euler + sum_{k < n} 1 / k
        psi = psi + xp.where(n - 1.0 >= k, 1.0 / k, 0.0)
    start = xp.where(n == 1.0, -log_x - _EULER, 1.0 / xp.where(n == 1.0, 1.0, n - 1.0))

    def step(s):
        i, fact, total = s
        fact = fact * -x / i
        at_n = i == n - 1.0
        term = xp.where(at_n, fact * (psi - log_x), -fact / xp.where(at_n, 1.0, i - n + 1.0))
        return (i + 1.0, fact, total + term), xp.abs(term) <= _EPS * xp.abs(total + term)

    return iterate(step, (xp.ones_like(x), xp.ones_like(x), start), active)[-1]


def _expn64(n, x, xp):
    bad = (n < 0) | (x < 0) | (n != xp.floor(n)) | xp.isnan(n) | xp.isnan(x)
    at_zero = x == 0
    trivial = bad | at_zero | xp.isinf(x) | (n == 0)
    sn, sx = xp.where(trivial, 1.0, n), xp.where(trivial, 0.5, x)
    series = _expn_series(sn, sx, ~trivial & (sx <= 1.0), xp)
    fraction = _expn_fraction(sn, xp.where(sx > 1.0, sx, 2.0), ~trivial & (sx > 1.0), xp)
    out = xp.where(sx <= 1.0, series, fraction)
    out = xp.where(n == 0, xp.exp(-x) / x, out)
    out = xp.where(at_zero, xp.where(n > 1, 1.0 / xp.where(n > 1, n - 1.0, 1.0), xp.inf), out)
    out = xp.where(xp.isinf(x) & (x > 0), 0.0, out)
    return xp.where(bad, xp.nan, out)


# The asymptotic series of Ei past x = 50: exp(x) / x * sum k! / x**k, to its smallest term.
def _expi64(x, xp):
    a = xp.abs(x)
    e1 = _expn64(xp.ones_like(x), xp.where(x < 0, a, 1.0), xp)
    near = xp.where((x > 0) & (x <= 50.0), x, 1.0)
    term, total = xp.ones_like(near), xp.zeros_like(near)
    for k in range(1, 200):
        term = term * near / k
        total = total + term / k
    series = total + _EULER + xp.log(near)
    far = xp.where(x > 50.0, x, 51.0)
    term, acc = xp.ones_like(far), xp.ones_like(far)
    for k in range(1, 50):
        term = term * k / far
        acc = acc + term
    asymptotic = xp.exp(far) / far * acc
    out = xp.where(x < 0, -e1, xp.where(x <= 50.0, series, asymptotic))
    out = xp.where(x == 0, -xp.inf, xp.where(xp.isinf(x), xp.where(x > 0, xp.inf, -0.0), out))
    return xp.where(xp.isnan(x), xp.nan, out)


_EXPN_N = ("expn: the derivative with respect to n (an integer order) does not exist; "
           "differentiate with respect to x only")


def _expn_dx(n, x):
    """dE_n/dx = -E_(n-1)(x), and -E_0(x) (1 + 1 / x) for n = 0."""
    lower = expn_p(ew.where(ew.equal(n, 0.0), 1.0, ew.sub(n, 1.0)), x)
    e0 = ew.div(ew.exp(ew.neg(x)), x)
    return ew.neg(ew.where(ew.equal(n, 0.0), ew.mul(e0, ew.add(ew.div(1.0, x), 1.0)), lower))


def _expn_vjp(g, out, n, x):
    return (unsupported_cotangent(_EXPN_N, g, n),
            ew.mul(g, _expn_dx(n, x)) if type(x) is Tensor else None)


def _expn_tangent(ts, out, n, x):
    if ts[0] is not None:
        raise NotImplementedError(_EXPN_N)
    return None if ts[1] is None else ew.mul(ts[1], _expn_dx(n, x))


def _expi_vjp(g, out, x):
    return (ew.mul(g, ew.div(ew.exp(x), x)),)


expn_p = Primitive("expn", float64_impl(_expn64), _expn_vjp, elementwise=True,
                   tangent=_expn_tangent)
expi_p = Primitive("expi", float64_impl(_expi64), _expi_vjp, elementwise=True,
                   tangent=lambda ts, out, x: _expi_vjp(ts[0], out, x)[0])
