"""Hamiltonian Monte Carlo as blackjax builds it: a velocity-Verlet integrator over pytree
positions (`tree_util.tree_map`, `flatten_util.ravel_pytree` for the kinetic energy with a
diagonal inverse mass matrix), `jax.value_and_grad` of the log density inside a
`lax.fori_loop` of leapfrog steps, a Metropolis-Hastings accept with `jax.random.uniform` and
`lax.cond`, NamedTuple states, a sampling loop as a `lax.scan` over split keys, chains
`vmap`ped, and the gradient of the mean acceptance probability with respect to the step size
and of the samples with respect to the target's hyperparameters. The target is a Bayesian
logistic regression.
Stands for https://github.com/blackjax-devs/blackjax/blob/main/blackjax/mcmc/hmc.py
(and blackjax/mcmc/integrators.py, blackjax/mcmc/proposal.py)
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.scipy.stats import norm


class IntegratorState(NamedTuple):
    position: dict
    momentum: dict
    logdensity: jnp.ndarray
    logdensity_grad: dict


class HMCState(NamedTuple):
    position: dict
    logdensity: jnp.ndarray
    logdensity_grad: dict


class HMCInfo(NamedTuple):
    momentum: dict
    acceptance_rate: jnp.ndarray
    is_accepted: jnp.ndarray
    energy: jnp.ndarray
    num_integration_steps: int


def gaussian_euclidean(inverse_mass_matrix):
    def kinetic_energy(momentum):
        flat, _ = ravel_pytree(momentum)
        return 0.5 * jnp.dot(flat, inverse_mass_matrix * flat)

    def sample_momentum(rng_key, position):
        flat, unravel = ravel_pytree(position)
        p = jax.random.normal(rng_key, flat.shape) / jnp.sqrt(inverse_mass_matrix)
        return unravel(p)

    return kinetic_energy, sample_momentum


def velocity_verlet(logdensity_fn: Callable, kinetic_energy_fn: Callable):
    logdensity_and_grad_fn = jax.value_and_grad(logdensity_fn)
    kinetic_energy_grad_fn = jax.grad(kinetic_energy_fn)

    def one_step(state: IntegratorState, step_size):
        momentum = jax.tree_util.tree_map(lambda m, g: m + 0.5 * step_size * g,
                                          state.momentum, state.logdensity_grad)
        kinetic_grad = kinetic_energy_grad_fn(momentum)
        position = jax.tree_util.tree_map(lambda x, k: x + step_size * k,
                                          state.position, kinetic_grad)
        logdensity, logdensity_grad = logdensity_and_grad_fn(position)
        momentum = jax.tree_util.tree_map(lambda m, g: m + 0.5 * step_size * g,
                                          momentum, logdensity_grad)
        return IntegratorState(position, momentum, logdensity, logdensity_grad)

    return one_step


def hmc_kernel(logdensity_fn, step_size, inverse_mass_matrix, num_integration_steps):
    kinetic_energy, sample_momentum = gaussian_euclidean(inverse_mass_matrix)
    integrator = velocity_verlet(logdensity_fn, kinetic_energy)

    def kernel(rng_key, state: HMCState):
        key_momentum, key_accept = jax.random.split(rng_key)
        momentum = sample_momentum(key_momentum, state.position)
        start = IntegratorState(state.position, momentum, state.logdensity,
                                state.logdensity_grad)
        end = jax.lax.fori_loop(0, num_integration_steps,
                                lambda _, s: integrator(s, step_size), start)
        energy0 = -start.logdensity + kinetic_energy(start.momentum)
        energy1 = -end.logdensity + kinetic_energy(end.momentum)
        delta = energy0 - energy1
        delta = jnp.where(jnp.isnan(delta), -jnp.inf, delta)
        p_accept = jnp.clip(jnp.exp(delta), max=1.0)
        do_accept = jnp.log(jax.random.uniform(key_accept)) < delta
        new_state = jax.lax.cond(
            do_accept,
            lambda: HMCState(end.position, end.logdensity, end.logdensity_grad),
            lambda: state)
        return new_state, HMCInfo(momentum, p_accept, do_accept, energy1,
                                  num_integration_steps)

    return kernel


def init(position, logdensity_fn):
    logdensity, logdensity_grad = jax.value_and_grad(logdensity_fn)(position)
    return HMCState(position, logdensity, logdensity_grad)


def inference_loop(rng_key, kernel, initial_state, num_samples):
    def one_step(state, rng_key):
        state, info = kernel(rng_key, state)
        return state, (state, info)

    keys = jax.random.split(rng_key, num_samples)
    _, (states, infos) = jax.lax.scan(one_step, initial_state, keys)
    return states, infos


def logistic_regression_logdensity(X, y, prior_scale):
    def logdensity_fn(params):
        logits = X @ params["w"] + params["b"]
        loglik = jnp.sum(y * jax.nn.log_sigmoid(logits) + (1 - y) * jax.nn.log_sigmoid(-logits))
        prior = (jnp.sum(norm.logpdf(params["w"], 0.0, prior_scale))
                 + norm.logpdf(params["b"], 0.0, 2.0))
        return loglik + prior

    return logdensity_fn


def run_chains(rng_key, positions, X, y, prior_scale, step_size, num_samples=6,
               num_integration_steps=4):
    logdensity_fn = logistic_regression_logdensity(X, y, prior_scale)
    dim = positions["w"].shape[-1] + 1
    kernel = hmc_kernel(logdensity_fn, step_size, jnp.ones(dim), num_integration_steps)

    def one_chain(key, position):
        return inference_loop(key, kernel, init(position, logdensity_fn), num_samples)

    keys = jax.random.split(rng_key, positions["b"].shape[0])
    return jax.vmap(one_chain)(keys, positions)


def mean_acceptance(step_size, rng_key, positions, X, y, prior_scale):
    """The mean Metropolis acceptance probability, differentiable in the step size (as
    step-size adaptation schemes use it)."""
    _, infos = run_chains(rng_key, positions, X, y, prior_scale, step_size)
    return jnp.mean(infos.acceptance_rate)


def posterior_mean_w(prior_scale, rng_key, positions, X, y, step_size):
    states, _ = run_chains(rng_key, positions, X, y, prior_scale, step_size)
    return jnp.mean(states.position["w"], axis=(0, 1))
