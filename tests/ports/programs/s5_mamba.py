"""Two selective / structured state-space layers as their JAX reference code writes them.

S5: a complex diagonal state matrix Lambda, discretised by zero-order hold with a learned
log-step (Lambda_bar = exp(Lambda * Delta), B_bar = (Lambda_bar - 1) / Lambda * B), run by
`associative_scan`, bidirectional by reversing the sequence.
Stands for: https://github.com/lindermanlab/S5/blob/main/s5/ssm.py (Smith et al. 2023).

Mamba: the selective scan, with the step Delta, B and C computed from the input (Delta by a
softplus of a low-rank projection), A = -exp(A_log), a causal depthwise convolution, the SiLU
gate; the recurrence h_t = exp(Delta_t A) h_{t-1} + Delta_t B_t x_t by `lax.scan` and by
`associative_scan`, which must agree.
Stands for: https://github.com/state-spaces/mamba (mamba_simple.py, selective_scan_ref) and its
JAX ports."""

from functools import partial

import jax
import jax.numpy as jnp
from jax.nn import softplus


# --- S5 -------------------------------------------------------------------------------------
def zoh(Lambda, B, step):
    """Zero-order hold: the continuous x' = Lambda x + B u held over `step`."""
    Lambda_bar = jnp.exp(step * Lambda)
    return Lambda_bar, ((Lambda_bar - 1.0) / Lambda)[:, None] * B


@jax.vmap
def compose(first, second):
    a_1, b_1 = first
    a_2, b_2 = second
    return a_1 * a_2, a_2 * b_1 + b_2


def run_ssm(Lambda_bar, B_bar, C, u, bidirectional):
    L = u.shape[0]
    steps = jnp.tile(Lambda_bar[None], (L, 1))
    kicks = u @ B_bar.T
    _, states = jax.lax.associative_scan(compose, (steps, kicks))
    if bidirectional:
        _, backward = jax.lax.associative_scan(compose, (steps, kicks), reverse=True)
        states = jnp.concatenate([states, backward], axis=-1)
    return jnp.real(jnp.einsum("hp,lp->lh", C, states))


def s5_layer(params, u, bidirectional=True):
    """u (L, H) -> (L, H)."""
    Lambda = jax.lax.complex(params["Lambda_re"], params["Lambda_im"])
    B = params["B"][..., 0] + 1j * params["B"][..., 1]
    C = params["C"][..., 0] + 1j * params["C"][..., 1]
    step = params["step_rescale"] * jnp.exp(params["log_step"][:, 0])
    Lambda_bar, B_bar = zoh(Lambda, B, step)
    return run_ssm(Lambda_bar, B_bar, C, u, bidirectional) + params["D"] * u


# --- Mamba ----------------------------------------------------------------------------------
def selective_scan_sequential(u, delta, A, B, C, D):
    """u, delta (L, d); A (d, n); B, C (L, n) -> y (L, d), one step at a time."""
    deltaA = jnp.exp(jnp.einsum("ld,dn->ldn", delta, A))
    deltaB_u = jnp.einsum("ld,ln,ld->ldn", delta, B, u)

    def step(x, inputs):
        dA, dBu, c = inputs
        x = dA * x + dBu
        return x, jnp.einsum("dn,n->d", x, c)

    x0 = jnp.zeros((u.shape[1], A.shape[1]))
    _, ys = jax.lax.scan(step, x0, (deltaA, deltaB_u, C))
    return ys + u * D


def selective_scan_parallel(u, delta, A, B, C, D):
    """The same recurrence as one `associative_scan` over the sequence."""
    deltaA = jnp.exp(delta[..., None] * A[None])
    deltaB_u = delta[..., None] * B[:, None, :] * u[..., None]

    def combine(left, right):
        a_l, b_l = left
        a_r, b_r = right
        return a_r * a_l, a_r * b_l + b_r

    _, xs = jax.lax.associative_scan(combine, (deltaA, deltaB_u), axis=0)
    return jnp.sum(xs * C[:, None, :], axis=-1) + u * D


def causal_conv1d(x, w, b):
    """Depthwise causal convolution: x (L, d), w (k, d)."""
    k = w.shape[0]
    padded = jnp.pad(x, ((k - 1, 0), (0, 0)))
    windows = jnp.stack([padded[i:i + x.shape[0]] for i in range(k)], axis=0)
    return jnp.einsum("kld,kd->ld", windows, w) + b


def mamba_block(params, x, parallel=True):
    """x (L, d_model) -> (L, d_model)."""
    d_inner = params["A_log"].shape[0]
    d_state = params["A_log"].shape[1]
    dt_rank = params["dt_proj"].shape[0]
    xz = x @ params["in_proj"]
    x_in, z = jnp.split(xz, [d_inner], axis=-1)
    x_in = jax.nn.silu(causal_conv1d(x_in, params["conv_w"], params["conv_b"]))
    x_dbl = x_in @ params["x_proj"]
    dt, B, C = jnp.split(x_dbl, [dt_rank, dt_rank + d_state], axis=-1)
    delta = softplus(dt @ params["dt_proj"] + params["dt_bias"])
    A = -jnp.exp(params["A_log"])
    scan = selective_scan_parallel if parallel else selective_scan_sequential
    y = scan(x_in, delta, A, B, C, params["D"])
    y = y * jax.nn.silu(z)
    return y @ params["out_proj"]


def rms_norm(x, weight, eps=1e-5):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * weight


@partial(jax.jit, static_argnames=("parallel",))
def model_loss(params, tokens, parallel=True):
    """A two-layer Mamba language model on a batch of token sequences (B, L): next-token
    cross-entropy."""
    def one(seq):
        x = params["embed"][seq]
        for layer in params["layers"]:
            x = x + mamba_block(layer, rms_norm(x, layer["norm"]), parallel)
        logits = rms_norm(x, params["norm_f"]) @ params["embed"].T
        logp = jax.nn.log_softmax(logits[:-1])
        return -jnp.mean(jnp.take_along_axis(logp, seq[1:, None], axis=-1))

    return jnp.mean(jax.vmap(one)(tokens))
