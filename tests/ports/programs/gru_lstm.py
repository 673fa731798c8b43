"""GRU and LSTM cells scanned over a trajectory with the hidden state reset at episode ends, as
PureJaxRL's recurrent PPO writes its `ScannedRNN` (`jnp.where` on the done flags inside the scan
body, the cell `vmap`ped over the batch), with the parameters as plain pytrees and a jit'd
optax update (adamw, a warmup-cosine schedule, gradient clipping by global norm).
Stands for: https://github.com/luchris429/purejaxrl/blob/main/purejaxrl/ppo_rnn.py"""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax


class LSTMState(NamedTuple):
    c: jax.Array
    h: jax.Array


def gru_cell(params, h, x):
    """One GRU step for one example: h (H,), x (D,)."""
    gates = x @ params["w_x"] + params["b"]
    r_x, z_x, n_x = jnp.split(gates, 3)
    r_h, z_h, n_h = jnp.split(h @ params["w_h"], 3)
    r = jax.nn.sigmoid(r_x + r_h)
    z = jax.nn.sigmoid(z_x + z_h)
    n = jnp.tanh(n_x + r * n_h)
    return (1.0 - z) * n + z * h


def lstm_cell(params, state, x):
    """One LSTM step for one example; the state is an LSTMState of (H,) vectors."""
    gates = x @ params["w_x"] + state.h @ params["w_h"] + params["b"]
    i, f, g, o = jnp.split(gates, 4, axis=-1)
    c = jax.nn.sigmoid(f + 1.0) * state.c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return LSTMState(c, h)


def initialize_carry(kind, batch_size, hidden_size):
    zeros = jnp.zeros((batch_size, hidden_size))
    return LSTMState(zeros, zeros) if kind == "lstm" else zeros


@partial(jax.jit, static_argnums=(0,))
def scanned_rnn(kind, params, carry, inputs):
    """Runs the cell over time; carry (B, H) (or an LSTMState of them), inputs = (obs (T, B, D),
    dones (T, B)). Where an episode ended, the carry starts again from zeros."""
    cell = jax.vmap(lstm_cell if kind == "lstm" else gru_cell, in_axes=(None, 0, 0))

    def step(carry, x):
        obs, done = x
        fresh = initialize_carry(kind, obs.shape[0], params["w_h"].shape[0])
        carry = jax.tree_util.tree_map(
            lambda new, old: jnp.where(done[:, jnp.newaxis], new, old), fresh, carry)
        carry = cell(params, carry, obs)
        out = carry.h if kind == "lstm" else carry
        return carry, out

    return jax.lax.scan(step, carry, inputs)


def loss_fn(params, kind, carry, obs, dones, targets):
    _, hs = scanned_rnn(kind, params["rnn"], carry, (obs, dones))
    preds = (hs @ params["head"]["w"] + params["head"]["b"])[..., 0]
    return jnp.mean(jnp.square(preds - targets))


def make_optimizer(steps, peak=3e-2):
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=peak, warmup_steps=2, decay_steps=steps, end_value=1e-3)
    return optax.chain(optax.clip_by_global_norm(0.5),
                       optax.adamw(learning_rate=schedule, weight_decay=1e-2))


def train(params, kind, carry, obs, dones, targets, steps=5):
    optimizer = make_optimizer(steps)
    opt_state = optimizer.init(params)

    @jax.jit
    def update(params, opt_state):
        loss, grads = jax.value_and_grad(loss_fn)(params, kind, carry, obs, dones, targets)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    for _ in range(steps):
        params, opt_state, loss = update(params, opt_state)
        losses.append(loss)
    return params, jnp.stack(losses)
