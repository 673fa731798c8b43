"""Peng's / Watkins' Q(lambda) for a small Q-network, as rlax and the JAX DQN agents write it:
lambda-returns by a reverse `lax.scan` bootstrapping on the target network's values at the
online network's greedy actions (double Q), traces cut where the behaviour action is not
greedy, `stop_gradient` on the targets, a Huber loss from optax, `vmap` over a batch of
trajectories, and a jitted training loop (`lax.fori_loop`) with adam and a Polyak-averaged
target network (`optax.incremental_update`).
Stands for: https://github.com/google-deepmind/rlax/blob/master/rlax/_src/value_learning.py
(`q_lambda`) and its use in DQN-style agents (e.g. dqn_zoo's, written for JAX)."""

import jax
import jax.numpy as jnp
import optax


def q_network(params, obs):
    h = jax.nn.relu(obs @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def lambda_returns(r_t, discount_t, v_t, lambda_t):
    """G_t = r_t + discount_t ((1 - lambda_t) v_t + lambda_t G_{t+1}), bootstrapped from
    v_t[-1] at the end; all (T,)."""
    def step(g, inputs):
        r, d, v, lam = inputs
        g = r + d * ((1.0 - lam) * v + lam * g)
        return g, g

    _, returns = jax.lax.scan(step, v_t[-1], (r_t, discount_t, v_t, lambda_t), reverse=True)
    return returns


def q_lambda_errors(q_tm1, a_tm1, r_t, discount_t, q_t_target, q_t_online, lambda_,
                    watkins=True):
    """TD errors of Q(lambda) for one trajectory: q_* (T, A), a_tm1 (T,), the rest (T,)."""
    greedy = jnp.argmax(q_t_online, axis=-1)
    v_t = jnp.take_along_axis(q_t_target, greedy[:, None], axis=-1)[:, 0]
    lambda_t = jnp.full_like(r_t, lambda_)
    if watkins:
        next_action = jnp.concatenate([a_tm1[1:], greedy[-1:]])
        lambda_t = jnp.where(next_action == greedy, lambda_t, 0.0)
    target = jax.lax.stop_gradient(lambda_returns(r_t, discount_t, v_t, lambda_t))
    q_a = jnp.take_along_axis(q_tm1, a_tm1[:, None], axis=-1)[:, 0]
    return target - q_a


def loss_fn(params, target_params, batch, lambda_=0.8, watkins=True):
    obs, actions, rewards, discounts = batch  # obs (B, T + 1, D); the rest (B, T)

    def one(obs, actions, rewards, discounts):
        q_all = q_network(params, obs)
        q_target = q_network(target_params, obs[1:])
        errors = q_lambda_errors(q_all[:-1], actions, rewards, discounts, q_target,
                                 q_all[1:], lambda_, watkins)
        return optax.huber_loss(errors, delta=1.0).mean()

    return jax.vmap(one)(obs, actions, rewards, discounts).mean()


def train(params, batch, num_steps=4, tau=0.3, learning_rate=1e-2):
    optimizer = optax.adam(learning_rate)

    @jax.jit
    def run(params):
        def body(i, state):
            params, target_params, opt_state, losses = state
            loss, grads = jax.value_and_grad(loss_fn)(params, target_params, batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            target_params = optax.incremental_update(params, target_params, tau)
            return params, target_params, opt_state, losses.at[i].set(loss)

        init = (params, params, optimizer.init(params), jnp.zeros(num_steps))
        return jax.lax.fori_loop(0, num_steps, body, init)

    params, target_params, _, losses = run(params)
    return params, target_params, losses
