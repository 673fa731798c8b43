"""A hidden Markov model in log space: the forward and backward passes (`logsumexp` in a
`lax.scan` and a reverse one), posterior marginals, Viterbi decoding (max-product forward,
`argmax` back-pointers, back-tracking in a reverse scan), and the gradient of the
log-likelihood with respect to the initial, transition and emission parameters; the posterior
marginals also come out as the gradient of the log-likelihood with respect to the per-step log
evidence, as the expectation-maximisation literature uses it. Sequences are vmapped. Written in
the style of dynamax's `hidden_markov_model/inference.py` (there in probability space with
normalisers) and of the log-space HMMs in JAX research code.
Stands for https://github.com/probml/dynamax/blob/main/dynamax/hidden_markov_model/inference.py
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.nn import log_softmax, one_hot
from jax.scipy.special import logsumexp
from jax.scipy.stats import norm


class HMMParams(NamedTuple):
    initial_logits: jnp.ndarray       # [K]
    transition_logits: jnp.ndarray    # [K, K]
    emission_means: jnp.ndarray       # [K, D]
    emission_log_scales: jnp.ndarray  # [K, D]
    symbol_logits: jnp.ndarray        # [K, V], a second, discrete emission stream


def emission_log_probs(params, obs, symbols):
    """log p(y_t | z_t = k) for every t, k: [T, K]."""
    scales = jnp.exp(params.emission_log_scales)
    gauss = norm.logpdf(obs[:, None, :], params.emission_means, scales).sum(-1)
    discrete = one_hot(symbols, params.symbol_logits.shape[-1]) @ log_softmax(
        params.symbol_logits, axis=-1).T
    return gauss + discrete


def hmm_forward(log_pi, log_A, log_liks):
    """Log filtered messages alpha_t(k) = log p(y_1:t, z_t = k) and the log-likelihood."""
    def step(log_alpha, ll_t):
        log_alpha = logsumexp(log_alpha[:, None] + log_A, axis=0) + ll_t
        return log_alpha, log_alpha

    first = log_pi + log_liks[0]
    last, rest = lax.scan(step, first, log_liks[1:])
    log_alphas = jnp.concatenate([first[None], rest])
    return logsumexp(last), log_alphas


def hmm_backward(log_A, log_liks):
    def step(log_beta, ll_next):
        log_beta = logsumexp(log_A + (ll_next + log_beta)[None, :], axis=1)
        return log_beta, log_beta

    K = log_A.shape[0]
    _, log_betas = lax.scan(step, jnp.zeros(K), log_liks[1:], reverse=True)
    return jnp.concatenate([log_betas, jnp.zeros((1, K))])


def hmm_smoother(log_pi, log_A, log_liks):
    marginal_loglik, log_alphas = hmm_forward(log_pi, log_A, log_liks)
    log_betas = hmm_backward(log_A, log_liks)
    log_gamma = log_alphas + log_betas
    smoothed = jnp.exp(log_gamma - logsumexp(log_gamma, axis=1, keepdims=True))
    # Expected transition counts, summed over time.
    log_xi = (log_alphas[:-1, :, None] + log_A[None] + (log_liks[1:] + log_betas[1:])[:, None, :]
              - marginal_loglik)
    trans_counts = jnp.exp(logsumexp(log_xi, axis=0))
    return marginal_loglik, smoothed, trans_counts


def hmm_posterior_mode(log_pi, log_A, log_liks):
    """The most likely state path (Viterbi) and its log joint probability."""
    def forward(best, ll_t):
        scores = best[:, None] + log_A
        return jnp.max(scores, axis=0) + ll_t, jnp.argmax(scores, axis=0)

    last, pointers = lax.scan(forward, log_pi + log_liks[0], log_liks[1:])
    final_state = jnp.argmax(last)

    def backtrack(state, pointers_t):
        prev = pointers_t[state]
        return prev, prev

    _, states = lax.scan(backtrack, final_state, pointers, reverse=True)
    return jnp.concatenate([states, final_state[None]]), jnp.max(last)


def normalized(params):
    return (log_softmax(params.initial_logits), log_softmax(params.transition_logits, axis=-1))


def log_likelihood(params, obs, symbols):
    log_pi, log_A = normalized(params)
    return hmm_forward(log_pi, log_A, emission_log_probs(params, obs, symbols))[0]


@jax.jit
def batch_nll(params, obs, symbols):
    """Mean negative log-likelihood per time step over a batch of sequences [B, T, ...]."""
    lls = jax.vmap(log_likelihood, in_axes=(None, 0, 0))(params, obs, symbols)
    return -jnp.sum(lls) / obs.shape[0] / obs.shape[1]


def posterior_marginals_by_grad(params, obs, symbols):
    """p(z_t | y_1:T) as the gradient of log p(y_1:T) with respect to log p(y_t | z_t)."""
    log_pi, log_A = normalized(params)
    log_liks = emission_log_probs(params, obs, symbols)
    return jax.grad(lambda ll: hmm_forward(log_pi, log_A, ll)[0])(log_liks)


def decode(params, obs, symbols):
    """Viterbi paths of a batch of sequences [B, T, ...]."""
    log_pi, log_A = normalized(params)
    log_liks = jax.vmap(emission_log_probs, in_axes=(None, 0, 0))(params, obs, symbols)
    return jax.vmap(hmm_posterior_mode, in_axes=(None, None, 0))(log_pi, log_A, log_liks)


def em_objective(params, obs, symbols):
    """The smoother's outputs folded into one number, to differentiate through both scans."""
    log_pi, log_A = normalized(params)
    ll, smoothed, counts = hmm_smoother(log_pi, log_A, emission_log_probs(params, obs, symbols))
    return ll + jnp.sum(counts * log_A) + jnp.sum(smoothed[:, 0] ** 2)
