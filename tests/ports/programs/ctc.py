"""Connectionist temporal classification: the CTC loss by the forward (alpha) recursion in log
space over a `lax.scan` of frames, on the label sequence interleaved with blanks, with padded
frames and labels masked as optax's `ctc_loss` takes them (`logit_paddings`,
`label_paddings`), a large negative number for log(0), `vmap` over the batch, and the gradient
with respect to the logits; a small bidirectional-free RNN acoustic model trained on it.
Stands for: Graves et al. 2006 and optax's `ctc_loss_with_forward_probs`
(https://github.com/google-deepmind/optax/blob/main/optax/losses/_classification.py)."""

import jax
import jax.numpy as jnp
import optax

LOG_ZERO = -1e5


def ctc_single(logits, logit_padding, labels, label_padding, blank_id=0):
    """-log p(labels | logits) for one example: logits (T, K), labels (N,), paddings 1.0 where
    a frame or label is padding."""
    logprobs = jax.nn.log_softmax(logits)
    n_labels = jnp.sum(1.0 - label_padding).astype(jnp.int32)
    S = 2 * labels.shape[0] + 1
    extended = jnp.full((S,), blank_id).at[1::2].set(labels)
    # s may come from s - 2 where it is a label that differs from the label two back
    skip = jnp.concatenate([jnp.zeros(2, bool),
                            (extended[2:] != blank_id) & (extended[2:] != extended[:-2])])
    init = jnp.full((S,), LOG_ZERO).at[:2].set(0.0)
    init = init + jnp.where(jnp.arange(S) < 2, logprobs[0, extended], 0.0)

    def step(alpha, frame):
        logp, pad = frame
        stay = alpha
        advance = jnp.concatenate([jnp.full((1,), LOG_ZERO), alpha[:-1]])
        jump = jnp.where(skip, jnp.concatenate([jnp.full((2,), LOG_ZERO), alpha[:-2]]),
                         LOG_ZERO)
        new = jax.nn.logsumexp(jnp.stack([stay, advance, jump]), axis=0) + logp[extended]
        alpha = jnp.where(pad > 0, alpha, new)
        return alpha, None

    alpha, _ = jax.lax.scan(step, init, (logprobs[1:], logit_padding[1:]))
    last = 2 * n_labels
    final = jnp.logaddexp(alpha[last], jnp.where(n_labels > 0, alpha[last - 1], LOG_ZERO))
    return -final


def ctc_loss(logits, logit_paddings, labels, label_paddings):
    return jax.vmap(ctc_single)(logits, logit_paddings, labels, label_paddings)


def acoustic_model(params, frames):
    """A GRU-free tanh RNN over the frames (T, F) -> logits (T, K)."""
    def step(h, x):
        h = jnp.tanh(x @ params["W_in"] + h @ params["W_h"] + params["b"])
        return h, h @ params["W_out"]

    _, logits = jax.lax.scan(step, jnp.zeros(params["W_h"].shape[0]), frames)
    return logits


def loss_fn(params, frames, frame_paddings, labels, label_paddings):
    logits = jax.vmap(acoustic_model, in_axes=(None, 0))(params, frames)
    per_example = ctc_loss(logits, frame_paddings, labels, label_paddings)
    return jnp.mean(per_example / jnp.maximum(jnp.sum(1.0 - label_paddings, axis=1), 1.0))


def train(params, batch, steps=3):
    optimizer = optax.sgd(0.1, momentum=0.9)
    opt_state = optimizer.init(params)
    step_fn = jax.jit(jax.value_and_grad(loss_fn))
    losses = []
    for _ in range(steps):
        loss, grads = step_fn(params, *batch)
        updates, opt_state = optimizer.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
        losses.append(loss)
    return params, jnp.stack(losses)
