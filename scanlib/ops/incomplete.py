"""The incomplete gamma and beta functions, betaln and the Hurwitz zeta function as primitives
(public as scanlib.scipy.special): igamma and igammac (the regularised P(a, x) and Q(a, x)),
igamma_grad_a (dP/da), betainc (I_x(a, b)), betaln (log|B(a, b)|) and zeta(x, q).

Numerics for whole arrays in float64 (other float dtypes round once at the end): P by its
power series where x <= max(a, 1) and Q by Legendre's continued fraction elsewhere (Cephes'
igam), I_x by the continued fraction of Numerical Recipes' betacf (modified Lentz), with a and
b swapped where x is past the mean, zeta by Euler-Maclaurin summation (Cephes' zeta). The
prefactors x^a e^-x / Gamma(a) and x^a (1-x)^b / B(a, b) use Stirling's remainder for large a
and b, so that they do not lose digits to cancellation. Edge values are JAX's.

Imports backends, tape and ops.primitive/elementwise/gamma/prng_loops.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .gamma import digamma_p, gammaln64, gammaln_p, stirling_remainder, xlog1py_p, xlogy_p
from .primitive import Primitive
from .prng_loops import gamma_sample_grad

__all__: list[str] = []  # public as scanlib.scipy.special

_EPS = np.finfo(np.float64).eps
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_MAX_TERMS = 20000


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def iterate(step, state, active):
    """Run `state = step(state)` on the lanes still active until every lane has converged;
    step returns (new_state, converged)."""
    xp = _xp(active)
    for _ in range(_MAX_TERMS):
        if not bool(active.any()):
            break
        new, done = step(state)
        state = tuple(xp.where(active, n, o) for n, o in zip(new, state))
        active = active & ~done
    return state


# --- P(a, x) and Q(a, x) ------------------------------------------------------------------------
def _log_prefactor(a, x, xp):
    """log(x^a e^-x / Gamma(a))."""
    plain = a * xp.log(x) - x - gammaln64(a, xp)
    big = xp.where(a >= 10.0, a, 10.0)
    u = (x - big) / big
    stirling = (big * (xp.log1p(u) - u) + 0.5 * xp.log(big / (2.0 * math.pi))
                - stirling_remainder(big, xp))
    return xp.where(a >= 10.0, stirling, plain)


def _igamma_series(a, x, active, xp):
    """P(a, x) by sum x^n / ((a+1)...(a+n)), for x <= max(a, 1)."""
    def step(s):
        r, c, total = s
        r = r + 1.0
        c = c * x / r
        return (r, c, total + c), c <= total * _EPS
    _, _, total = iterate(step, (a, xp.ones_like(a), xp.ones_like(a)), active)
    return total * xp.exp(_log_prefactor(a, x, xp)) / a


def _igammac_fraction(a, x, active, xp):
    """Q(a, x) by Legendre's continued fraction, for x > max(a, 1)."""
    big, inv_big = 4503599627370496.0, 2.22044604925031308085e-16

    def step(s):
        y, z, c, pkm2, qkm2, pkm1, qkm1, ans = s
        c, y, z = c + 1.0, y + 1.0, z + 2.0
        yc = y * c
        pk, qk = pkm1 * z - pkm2 * yc, qkm1 * z - qkm2 * yc
        nonzero = qk != 0
        r = pk / xp.where(nonzero, qk, 1.0)
        done = nonzero & (xp.abs(ans - r) <= _EPS * xp.abs(r))
        ans = xp.where(nonzero, r, ans)
        scale = xp.where(xp.abs(pk) > big, inv_big, 1.0)
        return (y, z, c, pkm1 * scale, qkm1 * scale, pk * scale, qk * scale, ans), done

    y = 1.0 - a
    z = x + y + 1.0
    state = (y, z, xp.zeros_like(x), xp.ones_like(x), x, x + 1.0, z * x, (x + 1.0) / (z * x))
    ans = iterate(step, state, active)[-1]
    return ans * xp.exp(_log_prefactor(a, x, xp))


# log Gamma(1 + a) = -euler a + sum (-a)^k zeta(k) / k (|a| <= 1/2); _ZETA_INT, the values
# zeta(2), zeta(3), ..., zeta(59), is set below, after zeta.
_EULER = 0.57721566490153286061


def _gammaln1p(a, xp):
    """log Gamma(1 + a), accurate relative to its value for small a."""
    small = xp.where(xp.abs(a) <= 0.5, a, 0.0)
    acc = xp.zeros_like(small)
    for k in range(len(_ZETA_INT) + 1, 1, -1):
        acc = acc * small + (-1) ** k * _ZETA_INT[k - 2] / k
    return xp.where(xp.abs(a) <= 0.5, small * (acc * small - _EULER), gammaln64(1.0 + a, xp))


def _igammac_small_a(a, x, active, xp):
    """Q(a, x) for x <= 1.1 and a small (scipy's igamc_series): 1 - x^a / Gamma(a + 1) plus
    the series x^a / Gamma(a) sum (-x)^n / (n! (a + n)), without forming 1 - P."""
    def step(s):
        n, fac, total = s
        n = n + 1.0
        fac = fac * -x / n
        term = fac / (a + n)
        return (n, fac, total + term), xp.abs(term) <= _EPS * xp.abs(total + term)
    _, _, total = iterate(step, (xp.zeros_like(x), xp.ones_like(x), xp.zeros_like(x)), active)
    log_x = xp.log(x)
    return -xp.expm1(a * log_x - _gammaln1p(a, xp)) - xp.exp(a * log_x - gammaln64(a, xp)) * total


def _igamma_both(a, x, xp):
    """(P, Q) in float64, with JAX's edge values."""
    bad = (a < 0) | (x < 0) | xp.isnan(a) | xp.isnan(x) | xp.isinf(a)
    trivial = bad | (a == 0) | (x == 0) | xp.isinf(x)
    use_series = (x <= 1.0) | (x <= a)
    # where Q is near 1 - P's cancellation (P close to 1, a small), Q has its own series
    small_a = (x <= 1.1) & xp.where(x <= 0.5, a * -xp.log(x) < 0.4, x * 1.1 >= a)
    sa, sx = xp.where(trivial, 1.0, a), xp.where(trivial, 0.5, x)
    p = _igamma_series(sa, sx, ~trivial & use_series, xp)
    q = _igammac_fraction(sa, sx, ~trivial & ~use_series, xp)
    q_small = _igammac_small_a(sa, sx, ~trivial & small_a, xp)
    p, q = xp.where(use_series, p, 1.0 - q), xp.where(use_series, 1.0 - p, q)
    p, q = xp.where(small_a, 1.0 - q_small, p), xp.where(small_a, q_small, q)
    one = (a == 0) | xp.isinf(x)
    p, q = xp.where(one, 1.0, p), xp.where(one, 0.0, q)
    p, q = xp.where(x == 0, 0.0, p), xp.where(x == 0, 1.0, q)
    return xp.where(bad, xp.nan, p), xp.where(bad, xp.nan, q)


def float64_impl(fn):
    """fn on float64 copies of the broadcast inputs; the result in their float dtype."""
    def impl(*args, **params):
        xp = _xp(*args)
        args = [xp.asarray(v) for v in args]
        dtype = np.result_type(*args)
        dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
        shape = np.broadcast_shapes(*(v.shape for v in args))
        args = [xp.broadcast_to(v, shape).astype(np.float64) for v in args]
        with np.errstate(all="ignore"):
            out = fn(*args, xp, **params)
        return xp.asarray(out.astype(dtype, copy=False))
    return impl


def _igamma_dx(a, x):
    """dP/dx = x^(a-1) e^-x / Gamma(a), written in scanlib's ops (differentiable again)."""
    return ew.exp(ew.sub(ew.sub(xlogy_p(ew.sub(a, 1.0), x), x), gammaln_p(a)))


def _is_tensor(x):
    return type(x) is Tensor


def unsupported_cotangent(message, g, x):
    """The cotangent of an input whose derivative is not implemented: an error where the
    tape's walk asks for it (x requires grad), else nan, which a walk that does not want it
    drops and one that does (a scan body's traced backward) cannot drop silently; None for
    inputs that are not tensors."""
    if type(x) is not Tensor:
        return None
    if x.requires_grad:
        raise NotImplementedError(message)
    return ew.mul(g, math.nan)


def _refuse_tangents(message, ts, positions):
    """Forward mode's check: a tangent on an input without a derivative is an error."""
    if any(ts[i] is not None for i in positions):
        raise NotImplementedError(message)


def _igamma_vjp(g, out, a, x):
    return (ew.mul(g, igamma_grad_a_p(a, x)) if _is_tensor(a) else None,
            ew.mul(g, _igamma_dx(a, x)) if _is_tensor(x) else None)


def _igamma_tangent(ts, out, a, x):
    parts = [ew.mul(t, d()) for t, d in zip(ts, (lambda: igamma_grad_a_p(a, x),
                                                  lambda: _igamma_dx(a, x))) if t is not None]
    return parts[0] if len(parts) == 1 else ew.add(*parts)


def _igammac_vjp(g, out, a, x):
    return tuple(None if v is None else ew.neg(v) for v in _igamma_vjp(g, out, a, x))


def _igamma_grad_a64(a, x, xp):
    log_dx = (a - 1.0) * xp.log(x) - x - gammaln64(a, xp)
    out = -gamma_sample_grad(a, x) * xp.exp(log_dx)
    return xp.where((x == 0) | xp.isinf(x), 0.0, out)


_IGAMMA_GRAD_A = ("gammainc/gammaincc: the second derivative with respect to a (a derivative "
                  "of igamma_grad_a) is not implemented (nor in JAX); take second derivatives "
                  "with respect to x only, or one derivative in a")


def _igamma_grad_a_vjp(g, out, a, x):
    return unsupported_cotangent(_IGAMMA_GRAD_A, g, a), unsupported_cotangent(_IGAMMA_GRAD_A, g, x)


def _igamma_grad_a_tangent(ts, out, a, x):
    # nan, not an error: forward mode over a gradient also pushes tangents through this
    # equation where its result (a's cotangent) is never read
    parts = [ew.mul(t, math.nan) for t in ts if t is not None]
    return parts[0] if len(parts) == 1 else ew.add(*parts)


igamma_p = Primitive("igamma", float64_impl(lambda a, x, xp: _igamma_both(a, x, xp)[0]),
                     _igamma_vjp, elementwise=True, tangent=_igamma_tangent)
igammac_p = Primitive("igammac", float64_impl(lambda a, x, xp: _igamma_both(a, x, xp)[1]),
                      _igammac_vjp, elementwise=True,
                      tangent=lambda ts, out, a, x: ew.neg(_igamma_tangent(ts, out, a, x)))
igamma_grad_a_p = Primitive("igamma_grad_a", float64_impl(_igamma_grad_a64),
                            _igamma_grad_a_vjp, elementwise=True,
                            tangent=_igamma_grad_a_tangent)


# --- log|B(a, b)| -------------------------------------------------------------------------------
def _betaln64(a, b, xp):
    lo, hi = xp.minimum(a, b), xp.maximum(a, b)
    s = a + b
    plain = gammaln64(lo, xp) + gammaln64(hi, xp) - gammaln64(s, xp)
    h = xp.where(hi >= 10.0, hi, 10.0)
    lo_pos = xp.where(lo > 0, lo, 1.0)
    sh = lo_pos + h
    # log Gamma(hi) - log Gamma(lo + hi) by Stirling's formula, exact in its large terms
    difference = (-(h - 0.5) * xp.log1p(lo_pos / h) - lo_pos * xp.log(sh) + lo_pos
                  + stirling_remainder(h, xp) - stirling_remainder(sh, xp))
    one_big = gammaln64(lo_pos, xp) + difference
    l10 = xp.where(lo >= 10.0, lo, 10.0)
    s10 = l10 + h
    both_big = (_HALF_LOG_2PI - 0.5 * xp.log(s10) + (l10 - 0.5) * xp.log(l10 / s10)
                + (h - 0.5) * xp.log1p(-l10 / s10) + stirling_remainder(l10, xp)
                + stirling_remainder(h, xp) - stirling_remainder(s10, xp))
    out = xp.where(lo >= 10.0, both_big, xp.where((hi >= 10.0) & (lo > 0), one_big, plain))
    return xp.where(xp.isnan(a) | xp.isnan(b), xp.nan, out)


def _betaln_vjp(g, out, a, b):
    d = digamma_p(ew.add(a, b))
    return (ew.mul(g, ew.sub(digamma_p(a), d)) if _is_tensor(a) else None,
            ew.mul(g, ew.sub(digamma_p(b), d)) if _is_tensor(b) else None)


betaln_p = Primitive("betaln", float64_impl(_betaln64), _betaln_vjp, elementwise=True)


# --- I_x(a, b) ----------------------------------------------------------------------------------
def _beta_fraction(a, b, x, active, xp):
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf), modified Lentz."""
    tiny = 1e-300

    def guard(v):
        return xp.where(xp.abs(v) < tiny, tiny, v)

    qab, qap, qam = a + b, a + 1.0, a - 1.0

    def step(s):
        m, c, d, h = s
        m2 = 2.0 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / guard(1.0 + aa * d)
        c = guard(1.0 + aa / c)
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / guard(1.0 + aa * d)
        c = guard(1.0 + aa / c)
        delta = d * c
        return (m + 1.0, c, d, h * delta), xp.abs(delta - 1.0) <= _EPS

    d = 1.0 / guard(1.0 - qab * x / qap)
    return iterate(step, (xp.ones_like(x), xp.ones_like(x), d, d), active)[-1]


def _betainc64(a, b, x, xp):
    bad = (a < 0) | (b < 0) | (x < 0) | (x > 1) | xp.isnan(a) | xp.isnan(b) | xp.isnan(x)
    bad = bad | ((a == 0) & (b == 0)) | (xp.isinf(a) & xp.isinf(b))
    trivial = bad | (a == 0) | (b == 0) | (x == 0) | (x == 1) | xp.isinf(a) | xp.isinf(b)
    one = (x == 1) | (a == 0) | xp.isinf(b)
    a, b = xp.where(trivial, 1.0, a), xp.where(trivial, 1.0, b)
    xs = xp.where(trivial, 0.5, x)
    swap = xs > (a + 1.0) / (a + b + 2.0)
    log_x, log_1mx = xp.log(xs), xp.log1p(-xs)
    aa, bb = xp.where(swap, b, a), xp.where(swap, a, b)
    la, lb = xp.where(swap, log_1mx, log_x), xp.where(swap, log_x, log_1mx)
    xx = xp.where(swap, 1.0 - xs, xs)
    front = xp.exp(aa * la + bb * lb - _betaln64(aa, bb, xp)) / aa
    part = front * _beta_fraction(aa, bb, xx, ~trivial, xp)
    out = xp.where(swap, 1.0 - part, part)
    out = xp.where(trivial, xp.where(one & ~(x == 0), 1.0, 0.0), out)
    return xp.where(bad, xp.nan, out)


_BETAINC_AB = ("betainc: the derivative with respect to a and b is not implemented (nor in "
               "JAX); differentiate with respect to x only, with a and b constants (or wrapped "
               "in scanlib.stop_gradient)")


def _betainc_dx(a, b, x):
    log_dx = ew.sub(ew.add(xlogy_p(ew.sub(a, 1.0), x), xlog1py_p(ew.sub(b, 1.0), ew.neg(x))),
                    betaln_p(a, b))
    return ew.exp(log_dx)


def _betainc_vjp(g, out, a, b, x):
    return (unsupported_cotangent(_BETAINC_AB, g, a), unsupported_cotangent(_BETAINC_AB, g, b),
            ew.mul(g, _betainc_dx(a, b, x)) if _is_tensor(x) else None)


def _betainc_tangent(ts, out, a, b, x):
    _refuse_tangents(_BETAINC_AB, ts, (0, 1))
    return None if ts[2] is None else ew.mul(ts[2], _betainc_dx(a, b, x))


betainc_p = Primitive("betainc", float64_impl(_betainc64), _betainc_vjp, elementwise=True,
                      tangent=_betainc_tangent)


# --- the Hurwitz zeta function --------------------------------------------------------------------
# (2j)! / B_2j for j = 1..12: the Euler-Maclaurin correction's denominators (Cephes' zeta.c).
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)


def _zeta64(x, q, xp):
    bad = (x < 1) | xp.isnan(x) | xp.isnan(q) | xp.isinf(q)
    pole = (x == 1) | ((q <= 0) & (q == xp.floor(q)))
    bad = bad | ((q < 0) & (x != xp.floor(x)) & ~pole)
    ok = ~(bad | pole)
    xs, qs = xp.where(ok, x, 2.0), xp.where(ok, q, 1.0)
    n = max(9, int(math.ceil(9.0 - float(qs.min())))) if qs.size else 9
    s = xp.zeros_like(qs)
    for k in range(n + 1):
        s = s + xp.power(qs + k, -xs)
    w = qs + n
    b = xp.power(w, -xs)
    s = s + b * w / (xs - 1.0) - 0.5 * b
    fact, k, active = xp.ones_like(xs), 0.0, xp.ones(xs.shape, bool)
    for denom in _ZETA_A:
        fact = fact * (xs + k)
        b = b / w
        t = fact * b / denom
        s = s + xp.where(active, t, 0.0)
        active = active & (xp.abs(t) > _EPS * xp.abs(s))
        k += 1.0
        fact = fact * (xs + k)
        b = b / w
        k += 1.0
    s = xp.where(xp.isinf(x) & (q > 1), 0.0, xp.where(xp.isinf(x) & (q == 1), 1.0, s))
    return xp.where(bad, xp.nan, xp.where(pole, xp.inf, s))


_ZETA_X = ("zeta: the derivative with respect to x (the exponent) is not implemented here "
           "(JAX has one); differentiate with respect to q only, with x a constant")


def _zeta_dq(x, q):
    return ew.neg(ew.mul(x, zeta_p(ew.add(x, 1.0), q)))


def _zeta_vjp(g, out, x, q):
    return (unsupported_cotangent(_ZETA_X, g, x),
            ew.mul(g, _zeta_dq(x, q)) if _is_tensor(q) else None)


def _zeta_tangent(ts, out, x, q):
    _refuse_tangents(_ZETA_X, ts, (0,))
    return None if ts[1] is None else ew.mul(ts[1], _zeta_dq(x, q))


zeta_p = Primitive("zeta", float64_impl(_zeta64), _zeta_vjp, elementwise=True,
                   tangent=_zeta_tangent)


with np.errstate(all="ignore"):
    _ZETA_INT = tuple(float(v) for v in _zeta64(np.arange(2.0, 60.0), np.ones(58), np))
