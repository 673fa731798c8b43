"""V-trace targets and policy-gradient advantages (IMPALA) in rlax's style: clipped importance
weights, a reverse `lax.scan` over time for the corrected TD errors, `stop_gradient` on the
bootstrap targets (chosen by `lax.select`), discounts that are zero at episode ends; batched over
trajectories by `vmap` (time-major, in_axes=1), and an IMPALA actor-critic loss with its
gradient.
Stands for: https://github.com/google-deepmind/rlax/blob/master/rlax/_src/vtrace.py and its use
in IMPALA learners (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp


class VTraceOutput(NamedTuple):
    errors: jax.Array
    pg_advantage: jax.Array
    q_estimate: jax.Array


def vtrace(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_=1.0, clip_rho_threshold=1.0,
           stop_target_gradients=True):
    """V-trace TD errors of one trajectory; every argument (T,), lambda_ scalar or (T,)."""
    rho_bar = jnp.minimum(rho_tm1, clip_rho_threshold)
    trace = lambda_ * jnp.minimum(rho_tm1, 1.0)
    deltas = rho_bar * (r_t + discount_t * v_t - v_tm1)

    def backwards(acc, step):
        delta, gamma, c = step
        acc = delta + gamma * c * acc
        return acc, acc

    _, corrections = jax.lax.scan(backwards, jnp.zeros_like(v_t[0]),
                                  (deltas, discount_t, trace), reverse=True)
    targets = corrections + v_tm1
    return jax.lax.select(stop_target_gradients,
                          jax.lax.stop_gradient(targets) - v_tm1, corrections)


def vtrace_td_error_and_advantage(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_=1.0,
                                  clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0,
                                  stop_target_gradients=True):
    """The TD errors, the policy-gradient advantages rho_pg (r + gamma q_next - v) and the
    Q estimates, where q_next mixes the next V-trace target and value by lambda (the last
    step bootstraps from v_t)."""
    lambda_ = lambda_ * jnp.ones_like(discount_t)
    errors = vtrace(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_, clip_rho_threshold,
                    stop_target_gradients)
    targets = v_tm1 + errors
    mixed = lambda_ * jnp.roll(targets, -1) + (1.0 - lambda_) * jnp.roll(v_tm1, -1)
    q_next = mixed.at[-1].set(v_t[-1])
    q_estimate = r_t + discount_t * q_next
    pg_advantage = jnp.minimum(rho_tm1, clip_pg_rho_threshold) * (q_estimate - v_tm1)
    return VTraceOutput(errors, pg_advantage, q_estimate)


batched_vtrace = jax.vmap(vtrace_td_error_and_advantage,
                          in_axes=(1, 1, 1, 1, 1, None), out_axes=1)


def network(params, obs):
    hidden = jax.nn.relu(obs @ params["w1"] + params["b1"])
    return hidden @ params["w_pi"], (hidden @ params["w_v"])[..., 0]


@jax.jit
def impala_loss(params, obs, actions, behaviour_logits, rewards, dones, lambda_=0.95,
                discount=0.99):
    """obs (T + 1, B, D): the trajectory and the bootstrap observation; actions, rewards,
    dones (T, B); behaviour_logits (T, B, A)."""
    logits, values = network(params, obs)
    logits = logits[:-1]
    learner_logp = jax.nn.log_softmax(logits)
    behaviour_logp = jax.nn.log_softmax(behaviour_logits)
    pick = lambda logp: jnp.take_along_axis(logp, actions[..., None], axis=-1)[..., 0]
    rhos = jnp.exp(pick(learner_logp) - pick(behaviour_logp))
    discounts = discount * (1.0 - dones)
    out = batched_vtrace(values[:-1], values[1:], rewards, discounts,
                         jax.lax.stop_gradient(rhos), lambda_)
    pg_loss = -jnp.mean(pick(learner_logp) * jax.lax.stop_gradient(out.pg_advantage))
    baseline_loss = 0.5 * jnp.mean(jnp.square(out.errors))
    entropy = -jnp.mean(jnp.sum(jax.nn.softmax(logits) * learner_logp, axis=-1))
    return pg_loss + 0.5 * baseline_loss - 0.01 * entropy, out
