"""A bootstrap particle filter for a stochastic-volatility model, as pfjax writes one: a
`lax.scan` over observations with the PRNG key split in the carry, multinomial
(`jax.random.categorical`) or systematic (`jnp.searchsorted` on the cumulative weights)
resampling, resampling only when the effective sample size falls (`lax.cond`), the
log-likelihood estimate from `logsumexp` of the log weights, runs `vmap`ped over keys, and the
gradient of the estimate with respect to the model parameters as JAX gives it (through the
reparameterised proposals and the weights; the resampling indices carry none).
Stands for https://github.com/mlysy/pfjax/blob/main/src/pfjax/particle_filter.py
"""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.random as random
from jax import lax
from jax.scipy.special import logsumexp
from jax.scipy.stats import norm


class SVParams(NamedTuple):
    mu: jnp.ndarray         # long-run log volatility
    logit_phi: jnp.ndarray  # persistence, phi = tanh(.)
    log_sigma: jnp.ndarray  # volatility of log volatility


def init_sample(params, key, n_particles):
    phi, sigma = jnp.tanh(params.logit_phi), jnp.exp(params.log_sigma)
    sd = sigma / jnp.sqrt(1.0 - phi ** 2)
    return params.mu + sd * random.normal(key, (n_particles,))


def state_sample(params, key, x_prev):
    phi, sigma = jnp.tanh(params.logit_phi), jnp.exp(params.log_sigma)
    return params.mu + phi * (x_prev - params.mu) + sigma * random.normal(key, x_prev.shape)


def meas_lpdf(y, x):
    return norm.logpdf(y, loc=0.0, scale=jnp.exp(x / 2.0))


def resample_multinomial(key, logw):
    n = logw.shape[0]
    return random.categorical(key, logw, shape=(n,))


def resample_systematic(key, logw):
    n = logw.shape[0]
    w = jax.nn.softmax(logw)
    u = (random.uniform(key) + jnp.arange(n)) / n
    cdf = jnp.cumsum(w)
    return jnp.minimum(jnp.searchsorted(cdf, u), n - 1)


def ess(logw):
    return jnp.exp(2 * logsumexp(logw) - logsumexp(2 * logw))


@partial(jax.jit, static_argnames=("n_particles", "method", "threshold"))
def particle_filter(params, key, y_meas, n_particles=64, method="systematic", threshold=0.5):
    resample = resample_systematic if method == "systematic" else resample_multinomial
    key, subkey = random.split(key)
    x0 = init_sample(params, subkey, n_particles)
    logw0 = meas_lpdf(y_meas[0], x0)
    loglik0 = logsumexp(logw0) - jnp.log(n_particles)

    def step(carry, y):
        key, x_prev, logw_prev, loglik = carry
        key, k_resample, k_state = random.split(key, 3)

        def do_resample(_):
            ancestors = resample(k_resample, lax.stop_gradient(logw_prev)).astype(jnp.int32)
            return ancestors, jnp.full(n_particles, -jnp.log(n_particles))

        def keep(_):
            return jnp.arange(n_particles, dtype=jnp.int32), logw_prev - logsumexp(logw_prev)

        ancestors, logw_base = lax.cond(ess(logw_prev) < threshold * n_particles,
                                        do_resample, keep, None)
        x = state_sample(params, k_state, x_prev[ancestors])
        logw = logw_base + meas_lpdf(y, x)
        loglik = loglik + logsumexp(logw)
        return (key, x, logw, loglik), (x, logw, ancestors)

    init = (key, x0, logw0, loglik0)
    (_, _, _, loglik), (xs, logws, ancestors) = lax.scan(step, init, y_meas[1:])
    return {"loglik": loglik, "x_particles": xs, "logw": logws, "ancestors": ancestors}


def filtered_means(out):
    w = jax.nn.softmax(out["logw"], axis=-1)
    return jnp.sum(w * out["x_particles"], axis=-1)


def simulate(params, key, n_obs):
    """Draw a latent path and its observations, the key split once per step."""
    key, k0 = random.split(key)
    x0 = init_sample(params, k0, 1)[0]

    def step(x, k):
        k_x, k_y = random.split(k)
        x = state_sample(params, k_x, x)
        return x, (x, jnp.exp(x / 2.0) * random.normal(k_y))

    _, (xs, ys) = lax.scan(step, x0, random.split(key, n_obs))
    return xs, ys


def mean_loglik(params, keys, y_meas, method):
    """The log-likelihood estimate averaged over independent filters (one per key)."""
    run = jax.vmap(lambda k: particle_filter(params, k, y_meas, n_particles=32,
                                             method=method)["loglik"])
    return jnp.mean(run(keys))
