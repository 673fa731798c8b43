"""The random draws that loop until accepted, on raw arrays, as jax.random runs them:
Marsaglia and Tsang's gamma (one key per element, JAX's while_loop over keys), the gradient
of a gamma draw in its shape parameter (JAX's implicit reparameterisation), Poisson (Knuth's
product of uniforms, Hormann's transformed rejection) and binomial (inversion, BTRS).

Imports backends, tape.graph and ops (batching, elementwise, gamma, prng, primitive); the
draws are primitives, with the gamma draw's VJP in its shape parameter only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backends
from ..tape.graph import on_stand_ins
from . import batching
from .elementwise import exp, where
from .gamma import digamma64, gammaln64
from .primitive import Primitive
from .prng import raw_normal, flat_unit_floats, raw_split


def _c(dtype, v):
    return dtype.type(v)


# --- gamma: Marsaglia and Tsang, one key per element ----------------------------------------
def _gamma_flat(keys, alpha, log_space):
    """Gamma(alpha) draws, one per row of keys [n, 2] (JAX's _gamma_one run for each)."""
    xp, dt = backends.xp_of(keys, alpha), alpha.dtype
    one, third = _c(dt, 1), _c(dt, 1 / 3)
    boost_mask = alpha >= one
    boosted = xp.where(boost_mask, alpha, alpha + one)
    d = boosted - third
    c = third / xp.sqrt(d)
    pair = raw_split(keys, (2,))
    key, subkey = pair[:, 0], pair[:, 1]
    X, V, U = xp.zeros_like(alpha), xp.ones_like(alpha), xp.full_like(alpha, 2)

    def rejected(X, V, U, d):
        with np.errstate(divide="ignore", invalid="ignore"):
            return (U >= one - _c(dt, 0.0331) * (X * X)) & (
                xp.log(U) >= X * _c(dt, 0.5) + d * (one - V + xp.log(V)))

    active = rejected(X, V, U, d)
    while active.any():
        idx = xp.nonzero(active)[0]
        three = raw_split(key[idx], (3,))
        key[idx] = three[:, 0]
        x, v = _normal_positive_v(three[:, 1], c[idx], dt)
        X[idx], V[idx] = x * x, v * v * v
        U[idx] = _scalar_uniforms(three[:, 2], dt)
        active[idx] = rejected(X[idx], V[idx], U[idx], d[idx])
    u = _scalar_uniforms(subkey, dt)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if log_space:
            log_samples = xp.log1p(-u)  # -exponential(subkey)
            log_boost = xp.where(boost_mask | (log_samples == 0), _c(dt, 0),
                                 log_samples * (one / alpha))
            return xp.log(d) + xp.log(V) + log_boost
        boost = xp.where(boost_mask, one, (one - u) ** (one / alpha))
        return d * V * boost


def _scalar_uniforms(keys, dtype):
    """uniform(key, ()) for each row of keys [n, 2]: one unit float each."""
    return flat_unit_floats(keys, 1, dtype).reshape(-1)


def _normal_positive_v(keys, c, dtype):
    """JAX's inner loop: normals x from split keys until v = 1 + c x is positive."""
    xp = backends.xp_of(keys)
    key = keys.copy()
    x = xp.zeros(c.shape, dtype)
    v = xp.full(c.shape, -1, dtype)
    todo = xp.arange(c.shape[0])
    while todo.size:
        pair = raw_split(key[todo], (2,))
        key[todo] = pair[:, 0]
        x[todo] = raw_normal(pair[:, 1], (), dtype)
        v[todo] = _c(dtype, 1) + x[todo] * c[todo]
        todo = todo[v[todo] <= 0]
    return x, v


def _gamma_impl(key, a, log_space):
    """Gamma draws of a's shape: the key split into one key per element (each key of a batch
    of keys [B, 2] into one per element of its row of a [B, ...])."""
    xp, lead = backends.xp_of(key, a), key.shape[:-1]
    size = math.prod(a.shape[len(lead):])
    keys = raw_split(key, (size,)).reshape(-1, 2)
    if a.size == 0 or on_stand_ins():  # a trace's stand-in zeros: nothing reads the draws
        return xp.zeros(a.shape, a.dtype)
    return _gamma_flat(keys, a.reshape(-1).copy(), log_space).reshape(a.shape)


# --- d sample / d alpha: -(dP/da) / (dP/dx) for the regularised incomplete gamma P ----------
def _igamma_series_derivative(ax, x, a, enabled):
    xp = backends.xp_of(x)
    eps = np.finfo(np.float64).eps
    r, c, ans = a.copy(), xp.ones_like(a), xp.ones_like(a)
    dc_da, dans_da = xp.zeros_like(a), xp.zeros_like(a)
    enabled = enabled.copy()
    with np.errstate(all="ignore"):
        while enabled.any():
            r_n = r + 1.0
            dc_da_n = dc_da * (x / r_n) - (c * x) / (r_n * r_n)
            dans_da_n = dans_da + dc_da_n
            c_n = c * (x / r_n)
            ans_n = ans + c_n
            r, c, ans = (xp.where(enabled, n, o) for n, o in ((r_n, r), (c_n, c), (ans_n, ans)))
            dc_da, dans_da = (xp.where(enabled, n, o)
                              for n, o in ((dc_da_n, dc_da), (dans_da_n, dans_da)))
            enabled = enabled & (xp.abs(dc_da_n / dans_da_n) > eps)
        dlogax_da = xp.log(x) - digamma64(a + 1.0, xp)
        return -(dans_da + ans * dlogax_da) * x / a


def _igammac_fraction_derivative(ax, x, a, enabled):
    xp = backends.xp_of(x)
    eps = np.finfo(np.float64).eps
    with np.errstate(all="ignore"):
        y = 1.0 - a
        z = x + y + 1.0
        pkm2, qkm2, pkm1, qkm1 = xp.ones_like(x), x, x + 1.0, z * x
        ans = pkm1 / qkm1
        dpkm2, dqkm2, dpkm1, dqkm1 = (xp.zeros_like(x), xp.zeros_like(x), xp.zeros_like(x), -x)
        dans = (dpkm1 - ans * dqkm1) / qkm1
        enabled = enabled.copy()
        for count in range(1, 2001):
            if not enabled.any():
                break
            y_n, z_n = y + 1.0, z + 2.0
            yc = y_n * count
            pk, qk = pkm1 * z_n - pkm2 * yc, qkm1 * z_n - qkm2 * yc
            nonzero = qk != 0
            ans_n = xp.where(nonzero, pk / qk, ans)
            dpk = dpkm1 * z_n - pkm1 - dpkm2 * yc + pkm2 * count
            dqk = dqkm1 * z_n - qkm1 - dqkm2 * yc + qkm2 * count
            dans_n = xp.where(nonzero, (dpk - ans_n * dqk) / qk, dans)
            converging = xp.where(nonzero, xp.abs(dans_n - dans), 1.0) > eps
            rescale = xp.abs(pk) > 1.0 / eps
            s = xp.where(rescale, eps, 1.0)
            new = (ans_n, y_n, z_n, pk * s, qk * s, pkm1 * s, qkm1 * s,
                   dpk * s, dqk * s, dpkm1 * s, dqkm1 * s, dans_n)
            old = (ans, y, z, pkm1, qkm1, pkm2, qkm2, dpkm1, dqkm1, dpkm2, dqkm2, dans)
            (ans, y, z, pkm1, qkm1, pkm2, qkm2, dpkm1, dqkm1, dpkm2, dqkm2, dans) = (
                xp.where(enabled, n, o) for n, o in zip(new, old))
            enabled = enabled & converging
        dlogax_da = xp.log(x) - digamma64(a, xp)
        return -(dans + ans * dlogax_da) * x


def gamma_sample_grad(a, x):
    """d x / d a for a draw x of Gamma(a) (XLA's random_gamma_grad), computed in float64 and
    returned in a's dtype: NaN for a <= 0, x < 0 or NaN inputs, 0 at x = 0."""
    xp, dtype = backends.xp_of(a, x), a.dtype
    a64, x64 = (xp.broadcast_to(v, np.broadcast_shapes(a.shape, x.shape)).astype(np.float64)
                for v in (a, x))
    with np.errstate(all="ignore"):
        is_nan = xp.isnan(a64) | xp.isnan(x64)
        x_zero = x64 == 0
        domain_error = (x64 < 0) | (a64 <= 0)
        use_c = (x64 > 1) & (x64 > a64)
        ax = a64 * xp.log(x64) - x64 - gammaln64(a64, xp)
        underflow = ax < -np.log(np.finfo(np.float64).max)
        enabled = ~(x_zero | domain_error | underflow | is_nan)
        safe_a, safe_x = xp.where(enabled, a64, 1.0), xp.where(enabled, x64, 1.0)
        out = xp.where(use_c,
                       -_igammac_fraction_derivative(ax, safe_x, safe_a, enabled & use_c),
                       _igamma_series_derivative(ax, safe_x, safe_a, enabled & ~use_c))
    out = xp.where(x_zero, 0.0, out)
    out = xp.where(domain_error | is_nan, np.nan, out)
    return out.astype(dtype)


def _gamma_grad_vjp(g, out, a, x, **_):
    raise NotImplementedError(
        "random.gamma: the gradient of a gamma draw in its shape parameter has no derivative "
        "here (nor in JAX, whose rule runs a while_loop); take one derivative in a only")


gamma_grad_p = Primitive("random_gamma_grad", gamma_sample_grad,
                         _gamma_grad_vjp, elementwise=True,
                         doc="random_gamma_grad(a, x): d x / d a for a draw x of Gamma(a).")


def _gamma_vjp(g, out, key, a, log_space):
    if not log_space:
        return None, g * gamma_grad_p(a, out)
    sample = exp(out)
    tiny = float(np.finfo(out.dtype).tiny)
    sample = where(sample == 0, tiny, sample)
    return None, g * gamma_grad_p(a, sample) / sample


def _gamma_tangent(ts, out, key, a, log_space):
    if ts[1] is None:
        return None
    return _gamma_vjp(ts[1], out, key, a, log_space)[1]


def _with_batched_keys(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """A batch of keys and of parameters: the keys broadcast to the batch, an unbatched
    parameter broadcast to it too (each example draws from its own key)."""
    def run(key, *values):
        B = next(v.shape[0] for v, b in zip((key, *values), batched) if b)
        key = key if batched[0] else ops.broadcast_to(key, (B, 2))
        values = [v if b else ops.broadcast_to(v, (B,) + tuple(v.shape))
                  for v, b in zip(values, batched[1:])]
        return ops.bind(prim, key, *values, **params)

    return run


gamma_p = Primitive("random_gamma", _gamma_impl, _gamma_vjp, tangent=_gamma_tangent,
                    batch=_with_batched_keys,
                    doc="random_gamma(key, a, log_space): Gamma(a) draws (their logs).")


# --- Poisson and binomial: one key for the whole array, rounds until every draw is in -------
def _per_key(run, dtype, key, *params):
    """run(key, *params) for one key [2], or for each key of a batch [..., 2] and its row of
    the parameters (which have the batch's axes first)."""
    xp, lead = backends.xp_of(key), key.shape[:-1]
    if on_stand_ins():  # a trace's stand-in zeros: nothing reads the draws
        return xp.zeros(params[0].shape, dtype)
    if not lead:
        return run(key, *params)
    flat = key.reshape(-1, 2)
    rows = [run(flat[i], *(p.reshape((-1,) + p.shape[len(lead):])[i] for p in params))
            for i in range(flat.shape[0])]
    return xp.stack(rows).reshape(params[0].shape) if rows else xp.zeros(params[0].shape, dtype)


def _split2(key, n=2):
    keys = raw_split(key, (n,))
    return [keys[i] for i in range(n)]


def _uniform(key, shape, dtype):
    return flat_unit_floats(key, math.prod(shape), dtype).reshape(shape)


def _lgamma(xp, x):
    return gammaln64(x.astype(np.float64), xp).astype(x.dtype)


def _poisson_one(key, lam, dtype):
    xp, shape = backends.xp_of(key), lam.shape
    f32 = np.dtype(np.float32)
    with np.errstate(all="ignore"):
        use_knuth = xp.isnan(lam) | (lam < 10)
        lam_k = xp.where(use_knuth, lam, f32.type(0))
        lam_r = xp.where(use_knuth, f32.type(1e5), lam)
        # Knuth: count the uniforms whose product stays above exp(-lam)
        k, log_prod, rng = xp.zeros(shape, dtype), xp.zeros(shape, f32), key
        while (log_prod > -lam_k).any():
            rng, sub = _split2(rng)
            k = xp.where(log_prod > -lam_k, k + dtype.type(1), k)
            log_prod = log_prod + xp.log(_uniform(sub, shape, f32))
        knuth = (k - dtype.type(1)).astype(dtype)
        # Hormann's transformed rejection
        log_lam = xp.log(lam_r)
        b = f32.type(0.931) + f32.type(2.53) * xp.sqrt(lam_r)
        a = f32.type(-0.059) + f32.type(0.02483) * b
        inv_alpha = f32.type(1.1239) + f32.type(1.1328) / (b - f32.type(3.4))
        v_r = f32.type(0.9277) - f32.type(3.6224) / (b - f32.type(2))
        k_out, accepted, rng = xp.full(shape, -1, f32), xp.zeros(shape, bool), key
        while (~accepted).any():
            rng, s0, s1 = _split2(rng, 3)
            u = _uniform(s0, shape, f32) - f32.type(0.5)
            v = _uniform(s1, shape, f32)
            us = f32.type(0.5) - xp.abs(u)
            kk = xp.floor((f32.type(2) * a / us + b) * u + lam_r + f32.type(0.43))
            s = xp.log(v * inv_alpha / (a / (us * us) + b))
            t = -lam_r + kk * log_lam - _lgamma(xp, kk + f32.type(1))
            accept = ((us >= f32.type(0.07)) & (v <= v_r)) | (
                ~((kk < 0) | ((us < f32.type(0.013)) & (v > us))) & (s <= t))
            k_out = xp.where(accept, kk, k_out)
            accepted = accepted | accept
        result = xp.where(use_knuth, knuth, k_out.astype(dtype))
        return xp.where(lam == 0, dtype.type(0), result)


poisson_p = Primitive(
    "random_poisson",
    lambda key, lam, dtype: _per_key(lambda k, la: _poisson_one(k, la, dtype), dtype, key, lam),
    doc="random_poisson(key, lam, dtype): Poisson draws (lam float32, of the draws' shape).",
    batch=_with_batched_keys)

_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(xp, k):
    dt = k.dtype
    table = xp.asarray(np.array(_STIRLING_TAIL, dt))
    use_table = k <= 9
    k = xp.clip(k, dt.type(0), dt.type(9))
    kp1sq = (k + 1) * (k + 1)
    approx = (dt.type(1 / 12) - (dt.type(1 / 360) - dt.type(1 / 1260) / kp1sq) / kp1sq) / (k + 1)
    return xp.where(use_table, table[xp.floor(k).astype(np.int32)], approx)


def _binomial_one(key, count, prob):
    xp, shape, dt = backends.xp_of(key), prob.shape, prob.dtype
    one, half = dt.type(1), dt.type(0.5)
    with np.errstate(all="ignore"):
        p_lt_half = prob < half
        q = xp.where(p_lt_half, prob, one - prob)
        count_bad = xp.isnan(count) | (count < 0)
        count_inf = xp.isinf(count)
        q_nan, q_neg = xp.isnan(q), q < 0
        q = xp.where(q_nan | q_neg, dt.type(0.01), q)
        use_inv = count_bad | (count * q <= 10)
        count = xp.floor(count)
        # inversion: count geometric waiting times until they pass count
        n_inv = xp.where(use_inv, count, dt.type(0))
        log1mq = xp.log1p(-q)
        num, total, rng = xp.zeros(shape, dt), xp.zeros(shape, dt), key
        while (total <= n_inv).any():
            sub, rng = _split2(rng)
            num = xp.where(total <= n_inv, num + one, num)
            total = total + xp.ceil(xp.log(_uniform(sub, shape, dt)) / log1mq)
        inversion = num - one
        # BTRS
        n, p = xp.where(use_inv, dt.type(1e4), count), xp.where(use_inv, half, q)
        stddev = xp.sqrt(n * p * (one - p))
        b = dt.type(1.15) + dt.type(2.53) * stddev
        a = dt.type(-0.0873) + dt.type(0.0248) * b + dt.type(0.01) * p
        c = n * p + half
        v_r = dt.type(0.92) - dt.type(4.2) / b
        r = p / (one - p)
        alpha = (dt.type(2.83) + dt.type(5.1) / b) * stddev
        m = xp.floor((n + one) * p)
        k_out, accepted, rng = xp.full(shape, -1, dt), xp.zeros(shape, bool), key
        while (~accepted).any():
            rng, s0, s1 = _split2(rng, 3)
            u = _uniform(s0, shape, dt) - half
            v = _uniform(s1, shape, dt)
            us = half - xp.abs(u)
            accept1 = (us >= dt.type(0.07)) & (v <= v_r)
            k = xp.floor((dt.type(2) * a / us + b) * u + c)
            reject = (k < 0) | (k > n)
            v = xp.log(v * alpha / (a / (us * us) + b))
            ub = ((m + half) * xp.log((m + one) / (r * (n - m + one)))
                  + (n + one) * xp.log((n - m + one) / (n - k + one))
                  + (k + half) * xp.log(r * (n - k + one) / (k + one))
                  + _stirling_tail(xp, m) + _stirling_tail(xp, n - m)
                  - _stirling_tail(xp, k) - _stirling_tail(xp, n - k))
            accept = accept1 | (~reject & (v <= ub))
            k_out = xp.where(accept, k, k_out)
            accepted = accepted | accept
        samples = xp.where(use_inv, inversion, k_out)
        invalid = q_neg | q_nan | count_bad
        samples = xp.where(invalid, dt.type(np.nan), samples)
        samples = xp.where(count_inf & ~invalid, dt.type(np.inf), samples)
        return xp.where(p_lt_half | count_bad | q_nan | count_inf, samples, count - samples)


binomial_p = Primitive(
    "random_binomial", lambda key, n, p: _per_key(_binomial_one, p.dtype, key, n, p),
    doc="random_binomial(key, n, p): binomial draws (n, p floats of the draws' shape).",
    batch=_with_batched_keys)
