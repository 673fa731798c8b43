"""An extended (and iterated extended) Kalman filter and smoother for a nonlinear state-space
model, as dynamax's `nonlinear_gaussian_ssm/inference_ekf.py` writes them: the dynamics and
emission Jacobians from `jax.jacfwd` inside the `lax.scan` body, the iterated update as an inner
`lax.scan` over relinearisation points, `jnp.linalg.solve` on a symmetrised innovation
covariance, the marginal log-likelihood from `multivariate_normal.logpdf`, and its gradient
with respect to the model's physical parameters. The model is a pendulum observed through
sin(angle) with a control input, as in the dynamax and Särkkä examples.
Stands for https://github.com/probml/dynamax/blob/main/dynamax/nonlinear_gaussian_ssm/inference_ekf.py
"""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import jacfwd, lax
from jax.scipy.stats import multivariate_normal as mvn


class PendulumParams(NamedTuple):
    log_gravity: jnp.ndarray
    log_damping: jnp.ndarray
    log_q: jnp.ndarray     # process noise scale
    log_r: jnp.ndarray     # observation noise scale
    init_mean: jnp.ndarray


class PosteriorGSSMFiltered(NamedTuple):
    marginal_loglik: jnp.ndarray
    filtered_means: jnp.ndarray
    filtered_covariances: jnp.ndarray


DT = 0.1


def dynamics(params, x, u):
    angle, velocity = x[0], x[1]
    g, c = jnp.exp(params.log_gravity), jnp.exp(params.log_damping)
    accel = -g * jnp.sin(angle) - c * velocity + u
    return jnp.stack([angle + DT * velocity, velocity + DT * accel])


def emission(params, x, u):
    return jnp.array([jnp.sin(x[0]), 0.5 * x[1] * jnp.cos(x[0]) + 0.1 * u])


def _covs(params):
    Q = jnp.exp(2 * params.log_q) * jnp.array([[DT ** 3 / 3, DT ** 2 / 2], [DT ** 2 / 2, DT]])
    R = jnp.exp(2 * params.log_r) * jnp.eye(2)
    return Q, R


def psd_solve(A, b, diagonal_boost=1e-9):
    A = 0.5 * (A + A.T) + diagonal_boost * jnp.eye(A.shape[-1])
    return jnp.linalg.solve(A, b)


def _predict(m, P, f, F, Q, u):
    F_x = F(m, u)
    return f(m, u), F_x @ P @ F_x.T + Q


def _condition_on(m, P, h, H, R, u, y, num_iter):
    """Condition on y, relinearising h about the latest posterior mean num_iter times."""
    def _step(carry, _):
        prior_mean, _ = carry
        H_x = H(prior_mean, u)
        S = R + H_x @ P @ H_x.T
        K = psd_solve(S, H_x @ P).T
        posterior_cov = P - K @ S @ K.T
        posterior_mean = m + K @ (y - h(prior_mean, u) - H_x @ (m - prior_mean))
        return (posterior_mean, posterior_cov), None

    (mean, cov), _ = lax.scan(_step, (m, P), jnp.arange(num_iter))
    return mean, cov


@partial(jax.jit, static_argnames=("num_iter",))
def extended_kalman_filter(params, emissions, inputs, num_iter=1):
    f = partial(dynamics, params)
    h = partial(emission, params)
    F, H = jacfwd(f), jacfwd(h)
    Q, R = _covs(params)

    def _step(carry, t):
        ll, pred_mean, pred_cov = carry
        u, y = inputs[t], emissions[t]
        H_x = H(pred_mean, u)
        ll += mvn.logpdf(y, h(pred_mean, u), H_x @ pred_cov @ H_x.T + R)
        filtered_mean, filtered_cov = _condition_on(pred_mean, pred_cov, h, H, R, u, y, num_iter)
        pred_mean, pred_cov = _predict(filtered_mean, filtered_cov, f, F, Q, u)
        return (ll, pred_mean, pred_cov), (filtered_mean, filtered_cov)

    carry = (0.0, params.init_mean, 0.1 * jnp.eye(2))
    (ll, _, _), (means, covs) = lax.scan(_step, carry, jnp.arange(len(emissions)))
    return PosteriorGSSMFiltered(ll, means, covs)


def extended_kalman_smoother(params, emissions, inputs, num_iter=1):
    f = partial(dynamics, params)
    F = jacfwd(f)
    Q, _ = _covs(params)
    filtered = extended_kalman_filter(params, emissions, inputs, num_iter)

    def _step(carry, args):
        smoothed_mean_next, smoothed_cov_next = carry
        filtered_mean, filtered_cov, u = args
        F_x = F(filtered_mean, u)
        pred_mean = f(filtered_mean, u)
        pred_cov = F_x @ filtered_cov @ F_x.T + Q
        G = psd_solve(pred_cov, F_x @ filtered_cov).T
        smoothed_mean = filtered_mean + G @ (smoothed_mean_next - pred_mean)
        smoothed_cov = filtered_cov + G @ (smoothed_cov_next - pred_cov) @ G.T
        return (smoothed_mean, smoothed_cov), (smoothed_mean, smoothed_cov)

    means, covs = filtered.filtered_means, filtered.filtered_covariances
    _, (sm, sc) = lax.scan(_step, (means[-1], covs[-1]),
                           (means[:-1], covs[:-1], inputs[:-1]), reverse=True)
    return (jnp.vstack([sm, means[-1][None]]), jnp.vstack([sc, covs[-1][None]]))


def neg_log_likelihood(params, emissions, inputs, num_iter=1):
    return -extended_kalman_filter(params, emissions, inputs, num_iter).marginal_loglik
