"""scanlib.random's distributions beyond uniform and normal, each with jax.random's name,
signature and algorithm (so the same key gives JAX's numbers; docs/random.md says how
closely), differentiable in their float parameters where JAX's are. Re-exported by
scanlib.random. Imports tape, ops, linalg and random (its checks and basic draws).
"""

from __future__ import annotations

import operator

import numpy as np

from . import linalg
from .ops import (as_tensor, broadcast_to, clip, exp, expand_dims, floor, log, log1p, matmul,
                  maximum, moveaxis, power, sign, softmax, sqrt, stack, stop_gradient, swapaxes,
                  tan, tensor, where)
from .ops import abs as absolute
from .ops import sum as total
from .ops.prng import erfinv_p, nextafter_p
from .ops.prng_loops import binomial_p, gamma_p, poisson_p
from .ops.promotion import result_type
from .ops.special import erf
from .random import (_check_key, _check_shape, _float_dtype, _param, _shape, _shape_of,
                     bernoulli, exponential, normal, split, uniform)
from .tape import Tensor, type_str

__all__ = [
    "truncated_normal", "multivariate_normal", "gamma", "loggamma", "beta", "dirichlet",
    "laplace", "logistic", "cauchy", "lognormal", "t", "chisquare", "pareto", "weibull_min",
    "rademacher", "poisson", "binomial", "multinomial", "geometric", "rayleigh", "maxwell",
    "orthogonal", "generalized_normal", "ball", "key_data", "wrap_key_data", "clone",
]


def _dtype(dtype, who):
    return _float_dtype(np.float64 if dtype is None else dtype, who)


def _on(key, x) -> Tensor:
    """x as a Tensor: data that is not one yet (a number, a NumPy array) is placed where the
    key lives, as the draws are (a Tensor on another device stays an error)."""
    return x if isinstance(x, Tensor) else tensor(x, device=key.device)


def _number_or_tensor(key, x, dtype):
    """A Python number as a float holding dtype's value (arithmetic stays in dtype, as in
    JAX), anything else as _tensor gives it."""
    return _param(x, dtype) if isinstance(x, (bool, int, float, np.number)) else _tensor(
        key, x, dtype)


def _tensor(key, x, dtype, shape=None):
    """x as a Tensor of dtype (differentiably) on the key's device, broadcast to shape if
    given."""
    x = _on(key, x)
    if x.dtype.kind not in "fiub":
        raise TypeError(f"expected a real parameter, got {type_str(x.shape, x.dtype)}")
    x = x if x.dtype == dtype else x.astype(dtype)
    return x if shape is None or x.shape == shape else broadcast_to(x, shape)


def _param_shape(who, shape, *params):
    """shape (checked against the parameters'), or their broadcast shape when None."""
    shapes = [_shape_of(p) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*shapes))
    shape = _shape(shape, who)
    _check_shape(who, shape, *shapes)
    return shape


# --- from uniforms and normals -------------------------------------------------------------
def truncated_normal(key, lower, upper, shape=None, dtype=None) -> Tensor:
    """Standard normals conditioned on lower < x < upper, as jax.random.truncated_normal: the
    inverse CDF of uniforms between erf(lower/sqrt 2) and erf(upper/sqrt 2), clipped into the
    open interval. Differentiable in lower and upper.

    >>> x = sl.random.truncated_normal(sl.random.key(0), -1.0, 2.0, (4,))
    """
    key, dtype = _check_key(key, "truncated_normal"), _dtype(dtype, "truncated_normal")
    shape = _param_shape("truncated_normal", shape, lower, upper)
    lower, upper = _tensor(key, lower, dtype), _tensor(key, upper, dtype)
    sqrt2 = float(dtype.type(np.sqrt(2)))
    a, b = erf(lower / sqrt2), erf(upper / sqrt2)
    u = uniform(key, shape, dtype, minval=a, maxval=b)
    out = erfinv_p(u) * sqrt2
    return clip(out, nextafter_p(stop_gradient(lower), dtype.type(np.inf)),
                nextafter_p(stop_gradient(upper), dtype.type(-np.inf)))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky") -> Tensor:
    """Normal vectors with mean [..., n] and covariance [..., n, n], as
    jax.random.multivariate_normal: mean + factor @ z for z standard normal, the factor from
    method 'cholesky' (cov = L L^T), 'eigh' (V sqrt(w)) or 'svd' (U sqrt(s)); the last two
    take singular covariances too. Differentiable in mean and cov.

    >>> cov = sl.tensor([[2.0, 0.5], [0.5, 1.0]])
    >>> x = sl.random.multivariate_normal(sl.random.key(0), sl.zeros(2), cov, (5,))
    """
    key = _check_key(key, "multivariate_normal")
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"multivariate_normal: method must be one of 'svd', 'eigh' and "
                         f"'cholesky', got {method!r}")
    mean, cov = _on(key, mean), _on(key, cov)
    if dtype is None:
        dtype = np.result_type(mean.dtype, cov.dtype, np.float16)
        dtype = np.dtype(np.float64) if dtype.kind != "f" else dtype
    dtype = _float_dtype(dtype, "multivariate_normal")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal: mean must have at least 1 dimension, got "
                         f"{type_str(mean.shape, mean.dtype)}")
    n = mean.shape[-1]
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal: cov must have shape (..., {n}, {n}) for a "
                         f"mean of shape {mean.shape}, got {cov.shape}")
    if shape is None:
        shape = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    else:
        shape = _shape(shape, "multivariate_normal")
        _check_shape("multivariate_normal", shape, mean.shape[:-1], cov.shape[:-2])
    mean, cov = _tensor(key, mean, dtype), _tensor(key, cov, dtype)
    if method == "cholesky":
        factor = linalg.cholesky(cov)
    elif method == "svd":
        u, s, _ = linalg.svd(cov)
        factor = u * expand_dims(sqrt(s), -2)
    else:
        w, v = linalg.eigh(cov)
        factor = v * expand_dims(sqrt(w), -2)
    z = normal(key, shape + (n,), dtype)
    return mean + matmul(factor, expand_dims(z, -1))[..., 0]


def laplace(key, shape=(), dtype=None) -> Tensor:
    """Standard Laplace floats, sign(u) log1p(-|u|) for u uniform on (-1, 1).

    >>> x = sl.random.laplace(sl.random.key(0), (3,))
    """
    dtype = _dtype(dtype, "laplace")
    u = uniform(key, shape, dtype, minval=-1.0 + float(np.finfo(dtype).epsneg), maxval=1.0)
    return sign(u) * log1p(-absolute(u))


def logistic(key, shape=(), dtype=None) -> Tensor:
    """Standard logistic floats, log(u) - log1p(-u).

    >>> x = sl.random.logistic(sl.random.key(0), (3,))
    """
    dtype = _dtype(dtype, "logistic")
    u = uniform(key, shape, dtype, minval=float(np.finfo(dtype).tiny), maxval=1.0)
    return log(u) - log1p(-u)


def cauchy(key, shape=(), dtype=None) -> Tensor:
    """Standard Cauchy floats, tan(pi (u - 1/2)).

    >>> x = sl.random.cauchy(sl.random.key(0), (3,))
    """
    dtype = _dtype(dtype, "cauchy")
    u = uniform(key, shape, dtype, minval=float(np.finfo(dtype).eps), maxval=1.0)
    return tan((u - 0.5) * float(dtype.type(np.pi)))


def lognormal(key, sigma=1.0, shape=None, dtype=None) -> Tensor:
    """exp(sigma z) for z standard normal; differentiable in sigma.

    >>> x = sl.random.lognormal(sl.random.key(0), 0.5, (3,))
    """
    key, dtype = _check_key(key, "lognormal"), _dtype(dtype, "lognormal")
    shape = _param_shape("lognormal", shape, sigma)
    return exp(normal(key, shape, dtype) * _number_or_tensor(key, sigma, dtype))


def pareto(key, b, shape=None, dtype=None) -> Tensor:
    """Pareto floats with shape parameter b (scale 1), exp(e / b) for e exponential;
    differentiable in b.

    >>> x = sl.random.pareto(sl.random.key(0), 3.0, (3,))
    """
    key, dtype = _check_key(key, "pareto"), _dtype(dtype, "pareto")
    shape = _param_shape("pareto", shape, b)
    return exp(exponential(key, shape, dtype) / _number_or_tensor(key, b, dtype))


def weibull_min(key, scale, concentration, shape=(), dtype=None) -> Tensor:
    """Weibull floats, scale (-log1p(-u)) ** (1 / concentration); differentiable in both.

    >>> x = sl.random.weibull_min(sl.random.key(0), 1.0, 2.0, (3,))
    """
    key, dtype = _check_key(key, "weibull_min"), _dtype(dtype, "weibull_min")
    shape = _shape(shape, "weibull_min")
    u = uniform(key, shape, dtype)
    scale = _number_or_tensor(key, scale, dtype)
    return power(-log1p(-u), 1.0 / _tensor(key, concentration, dtype)) * scale


def rayleigh(key, scale, shape=None, dtype=None) -> Tensor:
    """Rayleigh floats, scale sqrt(-2 log u); differentiable in scale.

    >>> x = sl.random.rayleigh(sl.random.key(0), 1.0, (3,))
    """
    key, dtype = _check_key(key, "rayleigh"), _dtype(dtype, "rayleigh")
    shape = _param_shape("rayleigh", shape, scale)
    u = uniform(key, shape, dtype)
    return _tensor(key, scale, dtype, shape) * sqrt(log(u) * -2.0)


def maxwell(key, shape=(), dtype=None) -> Tensor:
    """Maxwell floats: the length of a standard normal 3-vector.

    >>> x = sl.random.maxwell(sl.random.key(0), (3,))
    """
    dtype = _dtype(dtype, "maxwell")
    z = normal(key, _shape(shape, "maxwell") + (3,), dtype)
    return linalg.norm(z, axis=-1)


def rademacher(key, shape=(), dtype=np.int64) -> Tensor:
    """-1 or 1 with equal probability (int64 unless dtype is given; JAX's int default).

    >>> x = sl.random.rademacher(sl.random.key(0), (4,))
    """
    b = bernoulli(key, 0.5, _shape(shape, "rademacher")).astype(dtype)
    return (b * 2 - 1).astype(dtype)


def geometric(key, p, shape=None, dtype=np.int64) -> Tensor:
    """The number of Bernoulli(p) trials up to the first success (1, 2, ...), as integers
    (int64 unless dtype is given): floor(log u / log1p(-p)) + 1. Not differentiable.

    >>> x = sl.random.geometric(sl.random.key(0), 0.3, (4,))
    """
    key = _check_key(key, "geometric")
    shape = _param_shape("geometric", shape, p)
    p = stop_gradient(_on(key, p))
    fdtype = p.dtype if p.dtype.kind == "f" else np.dtype(np.float64)
    u = uniform(key, shape, fdtype)
    u = where(u == 0, 1.0, u)
    return (floor(log(u) / log1p(-_tensor(key, p, fdtype))) + 1.0).astype(dtype)


# --- from gamma draws ----------------------------------------------------------------------
def gamma(key, a, shape=None, dtype=None) -> Tensor:
    """Gamma(a) floats (scale 1), as jax.random.gamma: Marsaglia and Tsang's method with one
    key per element, and JAX's implicit reparameterisation gradient in a (d x / d a from
    the incomplete gamma function; first order only, as in JAX).

    >>> x = sl.random.gamma(sl.random.key(0), sl.tensor([0.5, 2.0, 10.0]))
    >>> dx = sl.grad(lambda a: sl.random.gamma(sl.random.key(0), a).sum())(sl.tensor([2.0]))
    """
    return _gamma(key, a, shape, dtype, "gamma", False)


def loggamma(key, a, shape=None, dtype=None) -> Tensor:
    """log of Gamma(a) floats, computed in log space (accurate for tiny a), as
    jax.random.loggamma; differentiable in a.

    >>> x = sl.random.loggamma(sl.random.key(0), 0.01, (3,))
    """
    return _gamma(key, a, shape, dtype, "loggamma", True)


def _gamma(key, a, shape, dtype, who, log_space):
    key, dtype = _check_key(key, who), _dtype(dtype, who)
    shape = _param_shape(who, shape, a)
    return gamma_p(key, _tensor(key, a, dtype, shape), log_space=log_space)


def chisquare(key, df, shape=None, dtype=None) -> Tensor:
    """Chi-square floats with df degrees of freedom, 2 Gamma(df / 2); differentiable in df.

    >>> x = sl.random.chisquare(sl.random.key(0), 3.0, (3,))
    """
    key, dtype = _check_key(key, "chisquare"), _dtype(dtype, "chisquare")
    shape = _param_shape("chisquare", shape, df)
    return exp(loggamma(key, _tensor(key, df, dtype) / 2.0, shape, dtype)) * 2.0


def t(key, df, shape=None, dtype=None) -> Tensor:
    """Student's t floats with df degrees of freedom, z sqrt(df / (2 g)) for z normal and g
    Gamma(df / 2); differentiable in df.

    >>> x = sl.random.t(sl.random.key(0), 5.0, (3,))
    """
    key, dtype = _check_key(key, "t"), _dtype(dtype, "t")
    shape = _param_shape("t", shape, df)
    key_n, key_g = split(key)
    half_df = _tensor(key, df, dtype) / 2.0
    z = normal(key_n, shape, dtype)
    return z * sqrt(half_df / gamma(key_g, half_df, shape, dtype))


def beta(key, a, b, shape=None, dtype=None) -> Tensor:
    """Beta(a, b) floats, Ga / (Ga + Gb) from two gamma draws in log space; differentiable in
    a and b.

    >>> x = sl.random.beta(sl.random.key(0), 2.0, 3.0, (3,))
    """
    key, dtype = _check_key(key, "beta"), _dtype(dtype, "beta")
    shape = _param_shape("beta", shape, a, b)
    key_a, key_b = split(key)
    log_a = loggamma(key_a, _tensor(key, a, dtype, shape), shape, dtype)
    log_b = loggamma(key_b, _tensor(key, b, dtype, shape), shape, dtype)
    log_max = maximum(log_a, log_b)
    scaled_a, scaled_b = exp(log_a - log_max), exp(log_b - log_max)
    return scaled_a / (scaled_a + scaled_b)


def dirichlet(key, alpha, shape=None, dtype=None) -> Tensor:
    """Dirichlet(alpha) vectors (alpha's last axis), the softmax of log-gamma draws;
    differentiable in alpha.

    >>> x = sl.random.dirichlet(sl.random.key(0), sl.tensor([1.0, 2.0, 3.0]), (2,))
    """
    key, dtype = _check_key(key, "dirichlet"), _dtype(dtype, "dirichlet")
    alpha = _on(key, alpha)
    if alpha.ndim < 1:
        raise ValueError(f"dirichlet: alpha must have at least 1 dimension, got "
                         f"{type_str(alpha.shape, alpha.dtype)}")
    if shape is None:
        shape = alpha.shape[:-1]
    else:
        shape = _shape(shape, "dirichlet")
        _check_shape("dirichlet", shape, alpha.shape[:-1])
    draws = loggamma(key, _tensor(key, alpha, dtype), shape + alpha.shape[-1:], dtype)
    return softmax(draws, -1)


def generalized_normal(key, p, shape=(), dtype=None) -> Tensor:
    """Generalized normal floats with density proportional to exp(-|x|**p), r g**(1/p) for
    g Gamma(1/p) and r a random sign.

    >>> x = sl.random.generalized_normal(sl.random.key(0), 1.5, (3,))
    """
    key, dtype = _check_key(key, "generalized_normal"), _dtype(dtype, "generalized_normal")
    shape = _shape(shape, "generalized_normal")
    _check_shape("generalized_normal", shape, _shape_of(p))
    keys = split(key)
    inv_p = 1.0 / _tensor(key, p, dtype)
    g = gamma(keys[0], inv_p, shape, dtype)
    return rademacher(keys[1], shape, dtype) * power(g, inv_p)


def ball(key, d, p=2, shape=(), dtype=None) -> Tensor:
    """Points uniform in the d-dimensional unit p-norm ball, shape + (d,).

    >>> x = sl.random.ball(sl.random.key(0), 3, shape=(4,))
    """
    key, dtype = _check_key(key, "ball"), _dtype(dtype, "ball")
    shape = _shape(shape, "ball")
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
        raise TypeError(f"ball: d must be a Python int, got {d!r}")
    k1, k2 = split(key)
    g = generalized_normal(k1, p, shape + (int(d),), dtype)
    e = exponential(k2, shape, dtype)
    pp = _number_or_tensor(key, p, dtype)
    return g / expand_dims(power(total(power(absolute(g), pp), axis=-1) + e, 1.0 / pp), -1)


def orthogonal(key, n, shape=(), dtype=None, m=None) -> Tensor:
    """Matrices uniform on the orthogonal group O(n) (semi-orthogonal n x m when m is given):
    the Q of a normal matrix's QR, its columns' signs fixed by R's diagonal, as
    jax.random.orthogonal.

    >>> q = sl.random.orthogonal(sl.random.key(0), 3)
    """
    key, dtype = _check_key(key, "orthogonal"), _dtype(dtype, "orthogonal")
    shape = _shape(shape, "orthogonal")
    m = n if m is None else m
    for name, v in (("n", n), ("m", m)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
            raise TypeError(f"orthogonal: {name} must be a non-negative Python int, got {v!r}")
    z = normal(key, shape + (max(n, m), min(n, m)), dtype)
    q, r = linalg.qr(z)
    x = q * expand_dims(sign(linalg.diagonal(r)), -2)
    return swapaxes(x, -1, -2) if n < m else x


# --- counts --------------------------------------------------------------------------------
def poisson(key, lam, shape=None, dtype=np.int64) -> Tensor:
    """Poisson(lam) integers (int64 unless dtype is given), as jax.random.poisson: Knuth's
    method for lam < 10, Hormann's transformed rejection above, lam taken in float32 as JAX
    does. Not differentiable.

    >>> x = sl.random.poisson(sl.random.key(0), 3.0, (4,))
    """
    key = _check_key(key, "poisson")
    shape = _param_shape("poisson", shape, lam)
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"poisson: dtype must be an integer dtype, got {dtype}")
    lam = stop_gradient(_tensor(key, lam, np.dtype(np.float32), shape))
    return poisson_p(key, lam, dtype=dtype)


def binomial(key, n, p, shape=None, dtype=None) -> Tensor:
    """Binomial(n, p) counts as floats (float64 unless dtype is given), as
    jax.random.binomial: inversion for n min(p, 1-p) <= 10, BTRS above; NaN for p outside
    [0, 1] or a negative n. Not differentiable.

    >>> x = sl.random.binomial(sl.random.key(0), 10.0, 0.3, (4,))
    """
    key, dtype = _check_key(key, "binomial"), _dtype(dtype, "binomial")
    shape = _param_shape("binomial", shape, n, p)
    p = stop_gradient(_on(key, p))
    pdtype = p.dtype if p.dtype.kind == "f" else np.dtype(np.float64)
    count = stop_gradient(_tensor(key, n, pdtype, shape))
    out = binomial_p(key, count, _tensor(key, p, pdtype, shape))
    return out if out.dtype == dtype else out.astype(dtype)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1) -> Tensor:
    """Multinomial(n, p) counts as floats, outcomes along p's last axis, as
    jax.random.multinomial and with its numbers: one binomial per outcome, of what the
    earlier outcomes left, at p's share of what remains (each with its own key, from
    split(key, k)). `shape` is the result's whole shape (p's when None), as JAX's code
    reads it; `unroll` is accepted and changes nothing. Not differentiable.

    >>> sl.random.multinomial(sl.random.key(0), 10.0, sl.tensor([0.2, 0.3, 0.5]))
    """
    key, dtype = _check_key(key, "multinomial"), _dtype(dtype, "multinomial")
    inexact = result_type(n, p)  # Python numbers weak, as promote_dtypes_inexact reads them
    inexact = inexact if inexact.kind == "f" else np.dtype(np.float64)
    n = stop_gradient(_on(key, n)).astype(inexact)
    p = stop_gradient(_on(key, p)).astype(inexact)
    shape = tuple(p.shape) if shape is None else tuple(operator.index(d) for d in shape)
    if not shape:
        raise ValueError("multinomial: p needs an axis of outcomes (its last)")
    remainder = broadcast_to(n, shape[:-1])
    p = moveaxis(broadcast_to(p, shape), -1, 0)
    k = shape[-1]
    remaining = [None] * k  # p's reverse cumulative sum, from the last outcome
    for i in reversed(range(k)):
        remaining[i] = p[i] if i == k - 1 else remaining[i + 1] + p[i]
    keys = split(key, k)
    counts = []
    for i in range(k):
        ratio = p[i] / where(remaining[i] == 0, 1.0, remaining[i])
        count = binomial(keys[i], remainder, clip(ratio, 0, 1), dtype=remainder.dtype)
        remainder = remainder - count
        counts.append(count)
    out = moveaxis(stack(counts), 0, -1)
    return out.astype(dtype)


# --- keys ----------------------------------------------------------------------------------
def key_data(keys) -> Tensor:
    """The uint32 data of keys [..., 2]: scanlib's keys are their data already, so this is
    keys itself (checked), as jax.random.key_data of a legacy uint32 key.

    >>> sl.random.key_data(sl.random.key(0))
    """
    return _check_key_data(keys, "key_data")


def wrap_key_data(key_bits_array, *, impl=None) -> Tensor:
    """Keys from uint32 data [..., 2], as jax.random.wrap_key_data: the data itself (only
    Threefry keys exist here; impl may be None or 'threefry2x32').

    >>> k = sl.random.wrap_key_data(sl.random.key_data(sl.random.key(0)))
    """
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"wrap_key_data: only impl='threefry2x32' keys exist in scanlib, "
                         f"got impl={impl!r}")
    return _check_key_data(key_bits_array, "wrap_key_data")


def clone(key) -> Tensor:
    """The key itself, as jax.random.clone outside key-reuse checking.

    >>> k = sl.random.clone(sl.random.key(0))
    """
    return _check_key_data(key, "clone")


def _check_key_data(keys, who) -> Tensor:
    keys = as_tensor(keys)
    if keys.dtype != np.uint32 or keys.shape[-1:] != (2,):
        raise TypeError(f"{who}: keys are uint32 arrays with a last axis of 2, got "
                        f"{type_str(keys.shape, keys.dtype)}. Make them with "
                        "scanlib.random.key(seed) and split.")
    return keys

