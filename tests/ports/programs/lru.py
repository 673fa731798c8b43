"""The Linear Recurrent Unit: a complex diagonal linear recurrence x_k = Lambda x_{k-1} +
gamma B u_k with Lambda = exp(-exp(nu_log) + i exp(theta_log)), run by `associative_scan`
over the sequence, the real part of C x_k read out; a small deep-LRU model (an encoder,
LRU blocks with a GELU-gated MLP and residuals, mean pooling) with its loss, `vmap`ped over
the batch, and the gradient of every parameter.
Stands for: the JAX code in Orvieto et al. 2023, "Resurrecting Recurrent Neural Networks for
Long Sequences", https://arxiv.org/abs/2303.06349 (and github.com/NicolasZucchet/minimal-LRU)."""

from functools import partial

import jax
import jax.numpy as jnp


def init_lru(u_r, u_theta, B_re, B_im, C_re, C_im, D, r_min=0.4, r_max=0.9,
             max_phase=jnp.pi):
    """The LRU's parameters from uniform draws u_r, u_theta (N,) and Gaussian B, C, D, with
    the ring initialisation of the paper (|Lambda| in [r_min, r_max], phase in [0, max_phase])."""
    nu_log = jnp.log(-0.5 * jnp.log(u_r * (r_max**2 - r_min**2) + r_min**2))
    theta_log = jnp.log(max_phase * u_theta)
    Lambda_mod = jnp.exp(-jnp.exp(nu_log))
    gamma_log = jnp.log(jnp.sqrt(1 - jnp.abs(Lambda_mod) ** 2))
    H = B_re.shape[1]
    N = B_re.shape[0]
    return {"nu_log": nu_log, "theta_log": theta_log, "gamma_log": gamma_log,
            "B_re": B_re / jnp.sqrt(2 * H), "B_im": B_im / jnp.sqrt(2 * H),
            "C_re": C_re / jnp.sqrt(N), "C_im": C_im / jnp.sqrt(N), "D": D}


def combine_diagonal(earlier, later):
    """Composes two steps x -> a x + b of a diagonal linear recurrence (earlier first)."""
    a_1, b_1 = earlier
    a_2, b_2 = later
    return a_2 * a_1, a_2 * b_1 + b_2


def lru(params, inputs):
    """inputs (L, H) -> outputs (L, H)."""
    decay = jnp.exp(-jnp.exp(params["nu_log"]))
    Lambda = decay * jnp.exp(1j * jnp.exp(params["theta_log"]))
    B = jnp.exp(params["gamma_log"])[:, None] * (params["B_re"] + 1j * params["B_im"])
    C = params["C_re"] + 1j * params["C_im"]
    steps = jnp.broadcast_to(Lambda, (inputs.shape[0],) + Lambda.shape)
    kicks = jnp.einsum("nh,lh->ln", B, inputs)
    _, states = jax.lax.associative_scan(combine_diagonal, (steps, kicks))
    return jnp.real(states @ C.T) + inputs * params["D"]


def lru_sequential(params, inputs):
    """The same recurrence as a `lax.scan`, the definition the parallel scan must agree with."""
    Lambda = jnp.exp(-jnp.exp(params["nu_log"]) + 1j * jnp.exp(params["theta_log"]))
    B_norm = (params["B_re"] + 1j * params["B_im"]) * jnp.exp(params["gamma_log"])[:, None]
    C = params["C_re"] + 1j * params["C_im"]

    def step(h, u):
        h = Lambda * h + B_norm @ u
        return h, (C @ h).real + params["D"] * u

    _, ys = jax.lax.scan(step, jnp.zeros(Lambda.shape, dtype=Lambda.dtype), inputs)
    return ys


def layer_norm(x, eps=1e-6):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps)


def block(params, x):
    y = lru(params["lru"], layer_norm(x))
    y = jax.nn.gelu(y)
    y = (y @ params["w_out"]) * jax.nn.sigmoid(y @ params["w_gate"])
    return x + y


@jax.jit
def model(params, inputs):
    """A deep LRU classifier for one sequence: inputs (L, D_in) -> logits (K,)."""
    x = inputs @ params["encoder"]
    for blk in params["blocks"]:
        x = block(blk, x)
    return jnp.mean(x, axis=0) @ params["decoder"]


@partial(jax.jit, static_argnames="num_classes")
def loss_fn(params, inputs, labels, num_classes):
    logits = jax.vmap(model, in_axes=(None, 0))(params, inputs)
    onehot = jax.nn.one_hot(labels, num_classes)
    return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits), axis=-1))
