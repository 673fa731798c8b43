"""Holt-Winters triple exponential smoothing (level, trend, additive seasonality) as a
`lax.scan` whose carry holds the seasonal buffer (rolled with `jnp.concatenate` and `.at[]`
updates), smoothing weights through `jax.nn.sigmoid`, batched over series with `vmap`, a
one-step-ahead squared loss, a multi-step forecast by a second scan, and the weights fitted
with optax (Adam under an exponential-decay schedule, gradient clipping), in the shape of
numpyro's Holt-Winters example (there a probabilistic model; here its deterministic filter).
Stands for https://github.com/pyro-ppl/numpyro/blob/master/examples/holt_winters.py
"""

from functools import partial

import jax
import jax.numpy as jnp
import optax
from jax import lax


def holt_winters(params, y, period):
    alpha, beta, gamma = (jax.nn.sigmoid(params[k]) for k in ("alpha", "beta", "gamma"))
    level0 = y[:period].mean()
    trend0 = (y[period:2 * period].mean() - level0) / period
    season0 = y[:period] - level0

    def step(carry, y_t):
        level, trend, season = carry
        forecast = level + trend + season[0]
        new_level = alpha * (y_t - season[0]) + (1 - alpha) * (level + trend)
        new_trend = beta * (new_level - level) + (1 - beta) * trend
        new_season = gamma * (y_t - new_level) + (1 - gamma) * season[0]
        season = jnp.concatenate([season[1:], season[:1]]).at[-1].set(new_season)
        return (new_level, new_trend, season), forecast

    carry, forecasts = lax.scan(step, (level0, trend0, season0), y)
    return carry, forecasts


def forecast(carry, horizon):
    def step(state, h):
        level, trend, season = state
        return state, level + h * trend + season[(h - 1) % season.shape[0]]

    _, out = lax.scan(step, carry, jnp.arange(1, horizon + 1))
    return out


@partial(jax.jit, static_argnums=2)
def loss(params, ys, period):
    def one(y):
        _, f = holt_winters(params, y, period)
        return jnp.mean((f[period:] - y[period:]) ** 2)
    return jnp.mean(jax.vmap(one)(ys))


def fit(params, ys, period, steps=8):
    schedule = optax.exponential_decay(0.2, transition_steps=2, decay_rate=0.8)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(schedule))
    state = optimizer.init(params)

    def update(carry, _):
        params, state = carry
        value, grads = jax.value_and_grad(loss)(params, ys, period)
        updates, state = optimizer.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), value

    (params, _), losses = lax.scan(update, (params, state), None, length=steps)
    return params, losses


def predict(params, ys, period, horizon):
    carries, _ = jax.vmap(lambda y: holt_winters(params, y, period))(ys)
    return jax.vmap(lambda c: forecast(c, horizon))(carries)
