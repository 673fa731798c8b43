"""A character-level RNN language model as min-char-rnn, written for JAX: parameters drawn
with `jax.random`, one-hot inputs, a tanh recurrence by `lax.scan` `vmap`ped over a batch of
windows cut from the text by `lax.dynamic_slice` at random offsets, optax's
`softmax_cross_entropy_with_integer_labels`, a jitted adam update (gradient clipping), and
sampling by `jax.random.categorical` with the key split in the scan carry.
Stands for: https://gist.github.com/karpathy/d4dee566867f8291f086 (min-char-rnn) and its JAX
ports."""

from functools import partial

import jax
import jax.numpy as jnp
import optax
from jax import lax


def init_params(key, vocab_size, hidden_size):
    k_xh, k_hh, k_hy = jax.random.split(key, 3)
    return {
        "W_xh": jax.random.normal(k_xh, (vocab_size, hidden_size)) * 0.1,
        "W_hh": jax.random.normal(k_hh, (hidden_size, hidden_size)) * 0.1,
        "W_hy": jax.random.normal(k_hy, (hidden_size, vocab_size)) * 0.1,
        "b_h": jnp.zeros(hidden_size),
        "b_y": jnp.zeros(vocab_size),
    }


def rnn_step(params, h, x_onehot):
    h = jnp.tanh(x_onehot @ params["W_xh"] + h @ params["W_hh"] + params["b_h"])
    return h, h @ params["W_hy"] + params["b_y"]


def forward(params, h0, inputs):
    """inputs (T,) integer tokens -> final state (H,), logits (T, V)."""
    vocab_size = params["W_xh"].shape[0]
    xs = jax.nn.one_hot(inputs, vocab_size)
    return lax.scan(partial(rnn_step, params), h0, xs)


def loss_fn(params, h0, inputs, targets):
    _, logits = jax.vmap(forward, in_axes=(None, 0, 0))(params, h0, inputs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def get_batch(key, data, batch_size, seq_len):
    starts = jax.random.randint(key, (batch_size,), 0, data.shape[0] - seq_len - 1)
    window = jax.vmap(lambda s: lax.dynamic_slice(data, (s,), (seq_len + 1,)))(starts)
    return window[:, :-1], window[:, 1:]


def train(key, data, vocab_size, hidden_size=8, steps=4, batch_size=3, seq_len=6,
          learning_rate=1e-2):
    key, init_key = jax.random.split(key)
    params = init_params(init_key, vocab_size, hidden_size)
    optimizer = optax.chain(optax.clip_by_global_norm(5.0), optax.adam(learning_rate))
    opt_state = optimizer.init(params)

    @jax.jit
    def update(params, opt_state, key):
        inputs, targets = get_batch(key, data, batch_size, seq_len)
        h0 = jnp.zeros((batch_size, hidden_size))
        loss, grads = jax.value_and_grad(loss_fn)(params, h0, inputs, targets)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    for _ in range(steps):
        key, batch_key = jax.random.split(key)
        params, opt_state, loss = update(params, opt_state, batch_key)
        losses.append(loss)
    return params, jnp.array(losses)


@partial(jax.jit, static_argnames=("length",))
def sample(params, key, first_token, length, temperature=1.0):
    hidden_size = params["W_hh"].shape[0]
    vocab_size = params["W_xh"].shape[0]

    def step(carry, _):
        h, token, key = carry
        key, subkey = jax.random.split(key)
        h, logits = rnn_step(params, h, jax.nn.one_hot(token, vocab_size))
        token = jax.random.categorical(subkey, logits / temperature)
        return (h, token, key), token

    init = (jnp.zeros(hidden_size), first_token, key)
    _, tokens = lax.scan(step, init, None, length=length)
    return tokens
