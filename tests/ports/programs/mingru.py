"""minGRU in log space: the gate and candidate are functions of the input alone, so the
recurrence h_t = (1 - z_t) h_{t-1} + z_t h~_t is a linear one, computed in parallel in log
space (a cumulative sum of the log coefficients and a `logcumsumexp` of the log values), with
the sequential mode as the definition; a minGRU language model trained a few steps with optax.
Stands for: Feng et al. 2024, "Were RNNs All We Needed?", https://arxiv.org/abs/2410.01201
(its log-space `parallel_scan_log`, and the JAX ports of minGRU)."""

import jax
import jax.numpy as jnp
import optax
from jax import lax


def g(x):
    return jnp.where(x >= 0, x + 0.5, jax.nn.sigmoid(x))


def log_g(x):
    return jnp.where(x >= 0, jnp.log(jax.nn.relu(x) + 0.5), -jax.nn.softplus(-x))


def parallel_scan_log(log_coeffs, log_values):
    """log h_t for h_t = a_t h_{t-1} + b_t: log_coeffs (T, d) = log a_{1..T}, log_values
    (T + 1, d) = [log h_0, log b_1, ..., log b_T]; returns log h_{1..T}."""
    a_star = jnp.pad(jnp.cumsum(log_coeffs, axis=0), ((1, 0), (0, 0)))
    log_h0_plus_b_star = lax.cumlogsumexp(log_values - a_star, axis=0)
    log_h = a_star + log_h0_plus_b_star
    return log_h[1:]


def parallel_scan_log_assoc(log_coeffs, log_values):
    """The same by `associative_scan` on (sum of log a, logaddexp) pairs."""
    def combine(left, right):
        a_l, b_l = left
        a_r, b_r = right
        return a_l + a_r, jnp.logaddexp(b_l + a_r, b_r)

    log_a = jnp.concatenate([jnp.zeros_like(log_values[:1]), log_coeffs], axis=0)
    _, log_h = lax.associative_scan(combine, (log_a, log_values))
    return log_h[1:]


def min_gru(params, x, h0, mode="log"):
    """x (T, d_in), h0 (d_h,) -> h (T, d_h)."""
    k = x @ params["w_z"] + params["b_z"]
    pre_h = x @ params["w_h"] + params["b_h"]
    if mode == "sequential":
        z = jax.nn.sigmoid(k)
        h_tilde = g(pre_h)

        def step(h, inputs):
            z_t, ht_t = inputs
            h = (1 - z_t) * h + z_t * ht_t
            return h, h

        return lax.scan(step, h0, (z, h_tilde))[1]
    log_z = -jax.nn.softplus(-k)
    log_coeffs = -jax.nn.softplus(k)
    log_h0 = jnp.log(h0)[None]
    log_tilde_h = log_g(pre_h)
    log_values = jnp.concatenate([log_h0, log_z + log_tilde_h], axis=0)
    scan = parallel_scan_log if mode == "log" else parallel_scan_log_assoc
    return jnp.exp(scan(log_coeffs, log_values))


def lm_loss(params, tokens, mode="log"):
    """Next-token cross-entropy of a two-layer minGRU language model on tokens (B, T)."""
    def one(seq):
        x = params["embed"][seq[:-1]]
        for layer in params["layers"]:
            h0 = jnp.full((layer["w_h"].shape[1],), 0.5)
            x = x + min_gru(layer, x, h0, mode) @ layer["w_out"]
        logits = x @ params["unembed"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, seq[1:]).mean()

    return jax.vmap(one)(tokens).mean()


def train(params, tokens, steps=4):
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-2))
    opt_state = optimizer.init(params)

    @jax.jit
    def update(params, opt_state):
        loss, grads = jax.value_and_grad(lm_loss)(params, tokens)
        updates, opt_state = optimizer.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    def body(carry, _):
        params, opt_state = carry
        params, opt_state, loss = update(params, opt_state)
        return (params, opt_state), loss

    (params, _), losses = lax.scan(body, (params, opt_state), None, length=steps)
    return params, losses
