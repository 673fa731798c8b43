"""An RWKV-4 language model in its recurrent form: token shift, the WKV time-mixing recurrence
in the numerically safe form that carries a running maximum exponent (a, b, p) through
`lax.scan`, squared-ReLU channel mixing, layer norms; the state is a pytree of per-layer
NamedTuples, the loss is next-token cross-entropy `vmap`ped over a batch, and its gradient
covers every parameter.
Stands for: https://github.com/BlinkDL/RWKV-LM (RWKV-4's `RWKV_RNN`) and its JAX ports, and
"RWKV in 150 lines" (https://johanwind.github.io/2023/03/23/rwkv_details.html)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp


class LayerState(NamedTuple):
    att_x: jax.Array  # the previous token's input to time mixing
    a: jax.Array  # numerator of the weighted average, scaled by exp(-p)
    b: jax.Array  # its denominator, scaled the same way
    p: jax.Array  # the running maximum exponent
    ffn_x: jax.Array  # the previous token's input to channel mixing


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * w + b


def time_mixing(p, x, state):
    xk = x * p["mix_k"] + state.att_x * (1 - p["mix_k"])
    xv = x * p["mix_v"] + state.att_x * (1 - p["mix_v"])
    xr = x * p["mix_r"] + state.att_x * (1 - p["mix_r"])
    k, v = p["Wk"] @ xk, p["Wv"] @ xv
    r = jax.nn.sigmoid(p["Wr"] @ xr)

    ww = p["bonus"] + k
    q = jnp.maximum(state.p, ww)
    e1, e2 = jnp.exp(state.p - q), jnp.exp(ww - q)
    wkv = (e1 * state.a + e2 * v) / (e1 * state.b + e2)

    ww = state.p - jnp.exp(p["decay"])
    q = jnp.maximum(ww, k)
    e1, e2 = jnp.exp(ww - q), jnp.exp(k - q)
    a, b = e1 * state.a + e2 * v, e1 * state.b + e2
    return p["Wout"] @ (r * wkv), state._replace(att_x=x, a=a, b=b, p=q)


def channel_mixing(p, x, state):
    xk = x * p["mix_k"] + state.ffn_x * (1 - p["mix_k"])
    xr = x * p["mix_r"] + state.ffn_x * (1 - p["mix_r"])
    r = jax.nn.sigmoid(p["Wr"] @ xr)
    k = jnp.square(jax.nn.relu(p["Wk"] @ xk))
    return r * (p["Wv"] @ k), state._replace(ffn_x=x)


def initial_state(params):
    d = params["emb"].shape[1]
    zeros = jnp.zeros(d)
    return [LayerState(zeros, zeros, zeros, jnp.full((d,), -1e30), zeros)
            for _ in params["blocks"]]


def rwkv_step(params, states, token):
    x = layer_norm(params["emb"][token], *params["ln0"])
    new_states = []
    for block, state in zip(params["blocks"], states):
        dx, state = time_mixing(block["att"], layer_norm(x, *block["ln1"]), state)
        x = x + dx
        dx, state = channel_mixing(block["ffn"], layer_norm(x, *block["ln2"]), state)
        x = x + dx
        new_states.append(state)
    logits = params["head"] @ layer_norm(x, *params["ln_out"])
    return new_states, logits


def rnn_forward(params, tokens):
    """tokens (T,) -> logits (T, V) and the final state."""
    def step(states, token):
        return rwkv_step(params, states, token)

    states, logits = jax.lax.scan(step, initial_state(params), tokens)
    return logits, states


@jax.jit
def loss_fn(params, batch):
    def one(tokens):
        logits, _ = rnn_forward(params, tokens[:-1])
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, tokens[1:, None], axis=-1).mean()

    return jax.vmap(one)(batch).mean()
