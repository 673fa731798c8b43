"""A linear-Gaussian state-space model: Kalman filter, Rauch-Tung-Striebel smoother and the
marginal log-likelihood, written as dynamax's `linear_gaussian_ssm/inference.py` writes them
(NamedTuples of parameters and posteriors, one `lax.scan` forward and a reverse one back,
`jax.scipy.stats.multivariate_normal.logpdf` for the predictive density, Cholesky solves
instead of inverses, `jnp.where` on missing observations), vmapped over several series.
Stands for https://github.com/probml/dynamax/blob/main/dynamax/linear_gaussian_ssm/inference.py
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax, vmap
from jax.scipy.linalg import cho_factor, cho_solve, solve_triangular
from jax.scipy.stats import multivariate_normal as mvn


class ParamsLGSSMInitial(NamedTuple):
    mean: jnp.ndarray
    cov_chol: jnp.ndarray  # lower Cholesky factor of the initial covariance


class ParamsLGSSMDynamics(NamedTuple):
    weights: jnp.ndarray
    bias: jnp.ndarray
    cov_chol: jnp.ndarray


class ParamsLGSSMEmissions(NamedTuple):
    weights: jnp.ndarray
    bias: jnp.ndarray
    cov_chol: jnp.ndarray


class ParamsLGSSM(NamedTuple):
    initial: ParamsLGSSMInitial
    dynamics: ParamsLGSSMDynamics
    emissions: ParamsLGSSMEmissions


class PosteriorGSSMFiltered(NamedTuple):
    marginal_loglik: jnp.ndarray
    filtered_means: jnp.ndarray
    filtered_covariances: jnp.ndarray


class PosteriorGSSMSmoothed(NamedTuple):
    marginal_loglik: jnp.ndarray
    filtered_means: jnp.ndarray
    filtered_covariances: jnp.ndarray
    smoothed_means: jnp.ndarray
    smoothed_covariances: jnp.ndarray
    smoothed_cross_covariances: jnp.ndarray


def _psd(chol):
    """A covariance from an unconstrained square factor (tril of it, with a small jitter)."""
    L = jnp.tril(chol)
    return L @ L.T + 1e-6 * jnp.eye(L.shape[-1])


def _symmetrize(A):
    return 0.5 * (A + A.T)


def _predict(m, P, F, b, Q):
    return F @ m + b, F @ P @ F.T + Q


def _condition_on(m, P, H, d, R, y):
    """Condition N(m, P) on y = H x + d + N(0, R): Joseph-free update with a Cholesky solve."""
    S = R + H @ P @ H.T
    S_chol = jnp.linalg.cholesky(S)
    K = cho_solve((S_chol, True), H @ P).T
    mu = H @ m + d
    m_new = m + K @ (y - mu)
    P_new = _symmetrize(P - K @ S @ K.T)
    return m_new, P_new


def lgssm_filter(params, emissions, mask):
    """The filtered posterior; `mask[t] == 0` marks a missing observation (skipped update)."""
    F, b, Q = (params.dynamics.weights, params.dynamics.bias, _psd(params.dynamics.cov_chol))
    H, d, R = (params.emissions.weights, params.emissions.bias,
               _psd(params.emissions.cov_chol))

    def _step(carry, t):
        ll, pred_mean, pred_cov = carry
        y, observed = emissions[t], mask[t]
        S = R + H @ pred_cov @ H.T
        y_ll = mvn.logpdf(y, H @ pred_mean + d, S)
        ll = ll + jnp.where(observed, y_ll, 0.0)
        upd_mean, upd_cov = _condition_on(pred_mean, pred_cov, H, d, R, y)
        filt_mean = jnp.where(observed, upd_mean, pred_mean)
        filt_cov = jnp.where(observed, upd_cov, pred_cov)
        pred_mean, pred_cov = _predict(filt_mean, filt_cov, F, b, Q)
        return (ll, pred_mean, pred_cov), (filt_mean, filt_cov)

    init = (jnp.array(0.0), params.initial.mean, _psd(params.initial.cov_chol))
    num_timesteps = emissions.shape[0]
    (ll, _, _), (means, covs) = lax.scan(_step, init, jnp.arange(num_timesteps))
    return PosteriorGSSMFiltered(marginal_loglik=ll, filtered_means=means,
                                 filtered_covariances=covs)


def lgssm_smoother(params, emissions, mask):
    """RTS smoother: a reverse scan over the filtered posterior."""
    F, b, Q = (params.dynamics.weights, params.dynamics.bias, _psd(params.dynamics.cov_chol))
    filtered = lgssm_filter(params, emissions, mask)
    ll, filt_means, filt_covs = filtered

    def _step(carry, args):
        smoothed_mean_next, smoothed_cov_next = carry
        filt_mean, filt_cov = args
        pred_cov = F @ filt_cov @ F.T + Q
        # G = filt_cov F^T pred_cov^{-1}, through the lower Cholesky factor of pred_cov
        L = jnp.linalg.cholesky(pred_cov)
        half = solve_triangular(L, F @ filt_cov, lower=True)
        G = solve_triangular(L.T, half, lower=False).T
        smoothed_mean = filt_mean + G @ (smoothed_mean_next - F @ filt_mean - b)
        smoothed_cov = filt_cov + G @ (smoothed_cov_next - pred_cov) @ G.T
        smoothed_cross = G @ smoothed_cov_next + jnp.outer(smoothed_mean, smoothed_mean_next)
        return (smoothed_mean, _symmetrize(smoothed_cov)), (smoothed_mean, smoothed_cov,
                                                             smoothed_cross)

    init = (filt_means[-1], filt_covs[-1])
    _, (means, covs, cross) = lax.scan(_step, init, (filt_means[:-1], filt_covs[:-1]),
                                       reverse=True)
    means = jnp.concatenate([means, filt_means[-1][None]])
    covs = jnp.concatenate([covs, filt_covs[-1][None]])
    return PosteriorGSSMSmoothed(marginal_loglik=ll, filtered_means=filt_means,
                                 filtered_covariances=filt_covs, smoothed_means=means,
                                 smoothed_covariances=covs, smoothed_cross_covariances=cross)


def marginal_log_prob(params, emissions, mask):
    return lgssm_filter(params, emissions, mask).marginal_loglik


@jax.jit
def batch_loss(params, emissions, masks):
    """Mean negative log-likelihood of a batch of series [B, T, D]."""
    lls = vmap(marginal_log_prob, in_axes=(None, 0, 0))(params, emissions, masks)
    return -jnp.mean(lls)


def smoothed_second_moment(params, emissions, mask):
    """A smoother statistic (as EM's E-step uses) to differentiate through the reverse scan."""
    post = lgssm_smoother(params, emissions, mask)
    Ex = post.smoothed_means
    ExxT = post.smoothed_covariances + jnp.einsum("ti,tj->tij", Ex, Ex)
    return jnp.sum(ExxT) + jnp.sum(post.smoothed_cross_covariances) + post.marginal_loglik


def whitened_innovations(params, emissions):
    """The innovations y_t - E[y_t | y_<t], whitened by the predictive covariance's upper
    Cholesky factor (cho_factor, as scipy gives it)."""
    H, d, R = (params.emissions.weights, params.emissions.bias,
               _psd(params.emissions.cov_chol))
    post = lgssm_filter(params, emissions, jnp.ones(emissions.shape[0]))
    F, b, Q = (params.dynamics.weights, params.dynamics.bias, _psd(params.dynamics.cov_chol))
    pred_means = post.filtered_means[:-1] @ F.T + b
    pred_covs = jnp.einsum("ij,tjk,lk->til", F, post.filtered_covariances[:-1], F) + Q
    prev_means = jnp.concatenate([params.initial.mean[None], pred_means])
    prev_covs = jnp.concatenate([_psd(params.initial.cov_chol)[None], pred_covs])

    def whiten(m, P, y):
        c, lower = cho_factor(H @ P @ H.T + R)
        return solve_triangular(c, y - H @ m - d, trans="T", lower=lower)

    return vmap(whiten)(prev_means, prev_covs, emissions)
