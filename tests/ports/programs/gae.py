"""Generalised advantage estimation and a PPO-style clipped loss, as JAX RL code writes them
(a reverse `lax.scan` over a trajectory, `jnp.where` on episode ends, optax for the update).
Reference: Schulman et al. 2016, "High-dimensional continuous control using GAE"."""

from functools import partial

import jax
import jax.numpy as jnp
import optax


def gae(rewards, values, dones, last_value, gamma=0.99, lam=0.95):
    def step(carry, t):
        advantage, next_value = carry
        reward, value, done = t
        not_done = 1.0 - done
        delta = reward + gamma * next_value * not_done - value
        advantage = delta + gamma * lam * not_done * advantage
        return (advantage, value), advantage

    init = (jnp.zeros_like(last_value), last_value)
    _, advantages = jax.lax.scan(step, init, (rewards, values, dones), reverse=True)
    return advantages, advantages + values


def policy(params, obs):
    hidden = jnp.tanh(obs @ params["w1"] + params["b1"])
    logits = hidden @ params["w_pi"]
    value = (hidden @ params["w_v"])[..., 0]
    return jax.nn.log_softmax(logits), value


@partial(jax.jit, static_argnames=("clip",))
def ppo_loss(params, obs, actions, old_logp, rewards, dones, last_value, clip=0.2):
    logp_all, values = policy(params, obs)
    logp = jnp.take_along_axis(logp_all, actions[..., None], axis=-1)[..., 0]
    advantages, targets = gae(rewards, jax.lax.stop_gradient(values), dones, last_value)
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    ratio = jnp.exp(logp - old_logp)
    clipped = jnp.clip(ratio, 1.0 - clip, 1.0 + clip)
    actor = -jnp.mean(jnp.minimum(ratio * advantages, clipped * advantages))
    critic = 0.5 * jnp.mean(jnp.square(values - targets))
    entropy = -jnp.mean(jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1))
    return actor + 0.5 * critic - 0.01 * entropy


def train(params, batch, steps=3, learning_rate=1e-2):
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(learning_rate))
    state = optimizer.init(params)
    losses = []
    for _ in range(steps):
        loss, grads = jax.value_and_grad(ppo_loss)(params, *batch)
        updates, state = optimizer.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        losses.append(loss)
    return params, jnp.stack(losses)
