"""The activations, normalisation and attention of jax.nn that scanlib has no older name
for, written with scanlib's ops (so their gradients, batching and graphs come from them), as
JAX writes them. Imports tape and ops.
"""

from __future__ import annotations

import math

import numpy as np

from ..ops import (
    as_tensor, broadcast_to, clip, einsum, exp, expm1, log, log1p, logsumexp, relu6,
    repeat, rsqrt, sigmoid, softplus, split, sqrt, square, stop_gradient, tanh, tensor,
)
from ..ops import max as amax
from ..ops import mean as average  # `mean` is also a keyword argument here
from ..ops import sum  # noqa: A004 (NumPy's name)
from ..ops import where as where_  # `where` is also the name of a keyword argument here

from ..tape import Tensor, type_str

__all__ = ["glu", "hard_sigmoid", "hard_silu", "hard_swish", "mish", "squareplus",
           "standardize", "log1mexp", "logmeanexp", "sparse_plus", "sparse_sigmoid",
           "dot_product_attention"]


def glu(x, axis=-1) -> Tensor:
    """The gated linear unit: a * sigmoid(b) for x split into halves a, b along axis, as
    jax.nn.glu.

    >>> sl.nn.glu(sl.tensor([1.0, 2.0, 0.0, 3.0]))
    """
    x = as_tensor(x)
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"glu: x {type_str(x.shape, x.dtype)} has {size} entries along axis "
                         f"{axis}, which must be even (it is split into two halves)")
    a, b = split(x, 2, axis)
    return a * sigmoid(b)


def hard_sigmoid(x) -> Tensor:
    """relu6(x + 3) / 6, as jax.nn.hard_sigmoid.

    >>> sl.nn.hard_sigmoid(sl.tensor([-4.0, 0.0, 4.0]))
    """
    return relu6(as_tensor(x) + 3.0) / 6.0


def hard_silu(x) -> Tensor:
    """x * hard_sigmoid(x), as jax.nn.hard_silu (and hard_swish).

    >>> sl.nn.hard_silu(sl.tensor([-4.0, 1.0, 4.0]))
    """
    x = as_tensor(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def mish(x) -> Tensor:
    """x * tanh(softplus(x)), as jax.nn.mish.

    >>> sl.nn.mish(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x = as_tensor(x)
    return x * tanh(softplus(x))


def squareplus(x, b=4) -> Tensor:
    """(x + sqrt(x**2 + b)) / 2, a smooth relu, as jax.nn.squareplus.

    >>> sl.nn.squareplus(sl.tensor([-2.0, 0.0, 2.0]))
    """
    x = as_tensor(x)
    return (x + sqrt(square(x) + b)) / 2


def sparse_plus(x) -> Tensor:
    """0 for x <= -1, x for x >= 1, (x + 1)**2 / 4 between, as jax.nn.sparse_plus.

    >>> sl.nn.sparse_plus(sl.tensor([-2.0, 0.0, 2.0]))
    """
    x = as_tensor(x)
    return where_(x <= -1.0, 0.0, where_(x >= 1.0, x, square(x + 1.0) / 4))


def sparse_sigmoid(x) -> Tensor:
    """clip((x + 1) / 2, 0, 1), the derivative of sparse_plus, as jax.nn.sparse_sigmoid.

    >>> sl.nn.sparse_sigmoid(sl.tensor([-2.0, 0.0, 2.0]))
    """
    return clip(as_tensor(x) + 1.0, 0.0, 2.0) * 0.5


def log1mexp(x) -> Tensor:
    """log(1 - exp(-x)) for x > 0, accurate for small and large x (log(-expm1(-x)) below
    log 2, log1p(-exp(-x)) above), as jax.nn.log1mexp.

    >>> sl.nn.log1mexp(sl.tensor([1e-8, 1.0, 40.0]))
    """
    x = as_tensor(x)
    c = math.log(2.0)
    return where_(x < c, log(-expm1(-x)), log1p(-exp(-x)))


def logmeanexp(x, axis=None, where=None, keepdims=False) -> Tensor:
    """log(mean(exp(x))) along axis, computed stably (logsumexp - log n), over the entries
    where `where` is True if given, as jax.nn.logmeanexp.

    >>> sl.nn.logmeanexp(sl.tensor([0.0, 1.0, 2.0]))
    """
    x = as_tensor(x)
    if where is None:
        axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        with np.errstate(divide="ignore"):  # no entries: log 0 = -inf, as JAX gives
            log_n = float(np.log(np.float64(math.prod(x.shape[a] for a in axes))))
        return logsumexp(x, axis, keepdims) - log_n
    mask = broadcast_to(as_tensor(where), x.shape)
    count = sum(where_(mask, 1.0, 0.0), axis, keepdims)
    return logsumexp(where_(mask, x, -np.inf), axis, keepdims) - log(count)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast") -> Tensor:
    """(x - mean) / sqrt(variance + epsilon) along axis, as jax.nn.standardize: the mean and
    variance over the entries where `where` is True if given (or the ones passed as mean= and
    variance=); algorithm 'fast' (E[x**2] - mean**2, clipped at 0) or 'stable'
    (E[(x - mean)**2]).

    >>> sl.nn.standardize(sl.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]]))
    """
    x = as_tensor(x)
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"standardize: unknown algorithm {algorithm!r}; expected 'fast' or "
                         "'stable'")
    if mean is None:
        mean = _mean(x, axis, where)
    if variance is None:
        if algorithm == "stable":
            variance = _mean(square(x - mean), axis, where)
        else:
            variance = clip(_mean(square(x), axis, where) - square(mean), 0)
    return (x - mean) * rsqrt(variance + epsilon)


def _mean(x, axis, mask):
    if mask is None:
        return average(x, axis, keepdims=True)
    mask = broadcast_to(as_tensor(mask), x.shape)
    return sum(where_(mask, x, 0.0), axis, keepdims=True) / sum(
        where_(mask, 1.0, 0.0), axis, keepdims=True)


def _ensure_4d(t):
    t = as_tensor(t)
    return t.reshape((1,) * (4 - t.ndim) + t.shape) if t.ndim < 4 else t


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None) -> Tensor:
    """softmax(q k^T * scale + bias, masked) v, as jax.nn.dot_product_attention with its XLA
    implementation: query [B, T, N, H], key and value [B, S, K, H] (N a multiple of K, each
    group of N // K query heads sharing one key head; leading axes may be dropped), bias and
    mask broadcasting to [B, N, T, S], a boolean mask (False: masked), is_causal for a lower
    triangular mask; scale 1 / sqrt(H) by default. Masked logits are set to -0.7 times the
    largest float32, as in JAX (a fully masked row averages the values uniformly). The
    softmax runs in the inputs' dtype (JAX runs it in float32 also for float64 inputs).

    >>> q = sl.ones((1, 4, 2, 8))
    >>> out = sl.nn.dot_product_attention(q, q, q, is_causal=True)
    """
    for name, v in (("query_seq_lengths", query_seq_lengths),
                    ("key_value_seq_lengths", key_value_seq_lengths),
                    ("local_window_size", local_window_size)):
        if v is not None:
            raise NotImplementedError(f"dot_product_attention: {name} is not supported here; "
                                      "express it as a boolean mask= instead")
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation {implementation!r} is not "
                         "available (scanlib runs the 'xla' one)")
    query = as_tensor(query)
    out_shape = query.shape
    q, k, v = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    B, S, K, H = k.shape
    if v.shape != k.shape or v.dtype != k.dtype:
        raise ValueError(f"dot_product_attention: value must have key's shape and dtype "
                         f"{type_str(k.shape, k.dtype)}, got {type_str(v.shape, v.dtype)}")
    if q.shape[0] != B or q.shape[3] != H or q.dtype != k.dtype:
        raise ValueError(f"dot_product_attention: query must be [{B}, T, N, {H}] of "
                         f"{k.dtype} to match key {type_str(k.shape, k.dtype)}, got "
                         f"{type_str(q.shape, q.dtype)}")
    N, T = q.shape[2], q.shape[1]
    if N % K:
        raise ValueError(f"dot_product_attention: the number of query heads ({N}) must be a "
                         f"multiple of the key/value heads ({K})")
    if N != K:  # query head n reads key head n // (N // K)
        k, v = repeat(k, N // K, axis=2), repeat(v, N // K, axis=2)
    scale = 1.0 / math.sqrt(H) if scale is None else scale
    logits = einsum("btnh,bsnh->bnts", q, k) * float(np.asarray(scale, q.dtype))
    if bias is not None:
        bias = bias if isinstance(bias, Tensor) else tensor(bias, device=q.device)
        logits = (logits + _ensure_4d(bias)).astype(logits.dtype)
    keep = None
    if mask is not None:
        mask = _ensure_4d(mask if isinstance(mask, Tensor) else tensor(mask, device=q.device))
        if mask.dtype != np.bool_:
            raise ValueError(f"dot_product_attention: mask must be boolean (True: attend), "
                             f"got {type_str(mask.shape, mask.dtype)}")
        keep = mask
    if is_causal:
        causal = tensor(np.tril(np.ones((T, S), bool))[None, None], device=q.device)
        keep = causal if keep is None else keep & causal
    if keep is not None:
        big = -0.7 * min(float(np.finfo(logits.dtype).max), float(np.finfo(np.float32).max))
        logits = where_(keep, logits, big)
    # exp(x - max) / sum, as jax.nn.softmax: a row masked throughout (all one large negative
    # value) is uniform, where x - logsumexp(x) would round to 0 at every entry
    shifted = exp(logits - stop_gradient(amax(logits, axis=-1, keepdims=True)))
    probs = shifted / sum(shifted, axis=-1, keepdims=True)
    return einsum("bnts,bsnh->btnh", probs, v).reshape(out_shape)
