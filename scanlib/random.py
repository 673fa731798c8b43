"""scanlib.random: JAX-style functional random keys. A key is a uint32[2] Tensor; `split` and
`fold_in` make new keys, and the same key always gives the same numbers, so a key in a scan's
carry draws fresh numbers at every step. Threefry-2x32 (20 rounds) on uint32 arrays, in JAX's
"partitionable" layout: keys and raw bits equal jax.random's bit for bit.

The public API: argument checks and distributions built on the generator of ops.prng, plus
the randint, shuffle and choice primitives; the other distributions (gamma, beta, poisson,
...) live in scanlib.distributions and are re-exported here. Imports backends, tape, ops and
(last) distributions; the primitives here have no VJP (keys have no gradient).
"""

from __future__ import annotations

import math

import numpy as np

from . import backends
from .ops import Primitive, as_tensor, getitem, log, log1p, maximum, stop_gradient, where
from .ops import batching
from .ops.functions import one_axis
from .ops.prng import (U32, flat_bits, flat_uniform, flat_unit_floats, raw_split,
                       argmax_p, bits_p, fold_in_p, keys_rule, normal_p, seed_p, shuffle_p,
                       split_p, uniform_p)
from .ops.prng import threefry2x32  # noqa: F401 (scanlib.random.threefry2x32, as before)
from .tape import Tensor, type_str
from .tape.graph import on_stand_ins

__all__ = [
    "key", "PRNGKey", "split", "fold_in", "bits", "uniform", "normal", "bernoulli",
    "categorical", "gumbel", "exponential", "randint", "choice", "permutation",
    "truncated_normal", "multivariate_normal", "gamma", "loggamma", "beta", "dirichlet",
    "laplace", "logistic", "cauchy", "lognormal", "t", "chisquare", "pareto", "weibull_min",
    "rademacher", "poisson", "binomial", "multinomial", "geometric", "rayleigh", "maxwell",
    "orthogonal", "generalized_normal", "ball", "key_data", "wrap_key_data", "clone",
]


# --- checking arguments ------------------------------------------------------------------
def _check_key(key, who) -> Tensor:
    """key as a Tensor, if it is one key: uint32[2]."""
    if not isinstance(key, Tensor) and not backends.is_array(key):
        raise TypeError(f"{who}: the key must be a uint32[2] array, got "
                        f"{_a(type(key).__name__)}. "
                        "Make one with scanlib.random.key(seed) and split it for new ones.")
    key = as_tensor(key)
    if key.dtype != U32:
        raise TypeError(
            f"{who}: a key must be a uint32[2] array, got {type_str(key.shape, key.dtype)}. "
            "Make one with scanlib.random.key(seed) (or PRNGKey(seed)); keys come from "
            "key, split and fold_in, never from other integers.")
    if key.shape != (2,):
        hint = (" For a batch of keys, vmap over them (sl.vmap(f)(keys), one call with "
                "each key's own numbers), use one at a time (keys[i]), or scan over them."
                if key.shape[-1:] == (2,) else "")
        raise TypeError(f"{who}: expects one key, a uint32[2] array, got "
                        f"{type_str(key.shape, key.dtype)}.{hint}")
    return key


def _a(name: str) -> str:
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _shape(shape, who) -> tuple:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"{who}: shape must be a tuple of ints, got {shape!r}")
    if any(s < 0 for s in shape):
        raise ValueError(f"{who}: shape {tuple(shape)} has a negative dimension")
    return tuple(int(s) for s in shape)


def _float_dtype(dtype, who) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in (np.float16, np.float32, np.float64):
        raise TypeError(f"{who}: dtype must be a real floating dtype (float16, float32 or "
                        f"float64), got {dtype}")
    return dtype


def _check_shape(who, shape, *param_shapes):
    """Parameters must broadcast to exactly `shape` (as JAX requires)."""
    try:
        result = np.broadcast_shapes(shape, *param_shapes)
    except ValueError:
        result = None
    if result != shape:
        raise ValueError(
            f"{who}: the parameter shapes {list(param_shapes)} must broadcast to the shape "
            f"argument {shape}, but they {'do not broadcast' if result is None else 'give '}"
            f"{'' if result is None else result}. Pass a shape that the parameters fit.")


def _shape_of(x) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _param(x, dtype):
    """A distribution parameter in dtype: a Tensor (cast if needed, differentiably) or a
    Python float holding dtype's value exactly (so arithmetic stays in dtype, as in JAX)."""
    if isinstance(x, (bool, int, float, np.number)):
        return float(dtype.type(x))
    x = as_tensor(x)
    if x.dtype.kind not in "fiub":
        raise TypeError(f"expected a real parameter, got {type_str(x.shape, x.dtype)}")
    return x if x.dtype == dtype else x.astype(dtype)


def _is_concrete(x):
    return not (isinstance(x, Tensor) and x._trace is not None)


# --- keys ----------------------------------------------------------------------------------
def key(seed) -> Tensor:
    """A random key (uint32[2]) from an integer seed, as jax.random.key and PRNGKey.

    A Python int seed is read as a 64-bit signed integer (JAX with 64-bit types: for seeds in
    [0, 2**32) both of JAX's modes agree); a NumPy integer scalar or integer Tensor seed keeps
    its dtype, as in JAX (so np.uint64(2**63 + 1) works, and a 32-bit seed has a high word of
    0); a Tensor seed may be traced.

    >>> k = sl.random.key(0)
    >>> k, sub = sl.random.split(k)
    >>> x = sl.random.normal(sub, (3,))
    """
    if isinstance(seed, np.integer):
        seed = np.asarray(seed)  # its dtype decides, as JAX's threefry_seed
    elif isinstance(seed, int) and not isinstance(seed, bool):
        if not -2**63 <= seed < 2**63:
            raise ValueError(f"key: the seed {seed} does not fit in a 64-bit signed integer")
        return Tensor(np.array([(seed % 2**64) >> 32, seed % 2**32], dtype=U32))
    if not isinstance(seed, Tensor) and not backends.is_array(seed):
        raise TypeError(f"key: the seed must be an int, got {_a(type(seed).__name__)}")
    seed = as_tensor(seed)
    if seed.dtype.kind not in "iu" or seed.ndim:
        raise TypeError(f"key: the seed must be a scalar integer, got "
                        f"{type_str(seed.shape, seed.dtype)}")
    return seed_p(seed)


def PRNGKey(seed) -> Tensor:  # noqa: N802 (JAX's name)
    """A random key (uint32[2]) from an integer seed; the same as `key`.

    >>> k = sl.random.PRNGKey(42)
    """
    return key(seed)


def split(key, num=2) -> Tensor:
    """num new keys (uint32[num, 2]) from one key, as jax.random.split.

    num may be a shape tuple; the keys then have shape num + (2,).

    >>> keys = sl.random.split(sl.random.key(0), 3)
    >>> k0, k1, k2 = keys
    """
    key = _check_key(key, "split")
    return split_p(key, shape=_shape(num, "split"))


def fold_in(key, data) -> Tensor:
    """A new key from key and an integer (a step index, say), as jax.random.fold_in.

    >>> k = sl.random.fold_in(sl.random.key(0), 7)
    """
    key = _check_key(key, "fold_in")
    if isinstance(data, (int, np.integer)) and not isinstance(data, (bool, np.bool_)):
        if not 0 <= int(data) < 2**32:
            raise ValueError(f"fold_in: data {int(data)} is out of range for uint32 "
                             "[0, 2**32); fold in data % 2**32 if wrapping is meant")
        return fold_in_p(key, int(data))
    data = as_tensor(data)
    if data.dtype.kind not in "iu" or data.ndim:
        raise TypeError(f"fold_in: data must be a scalar integer, got "
                        f"{type_str(data.shape, data.dtype)}")
    return fold_in_p(key, data)  # a wider or signed integer wraps to uint32, as in JAX


def bits(key, shape=(), dtype=None) -> Tensor:
    """Uniform random unsigned integers (uint32 unless dtype is uint8/16/64).

    The uint32 default is JAX's without 64-bit types (with them on, JAX gives uint64) and the
    generator's own word; scanlib's other defaults are 64-bit (docs/random.md).

    >>> b = sl.random.bits(sl.random.key(0), (4,))
    """
    key = _check_key(key, "bits")
    dtype = np.dtype(np.uint32 if dtype is None else dtype)
    if dtype.kind != "u":
        raise TypeError(f"bits: dtype must be an unsigned integer dtype, got {dtype}")
    return bits_p(key, shape=_shape(shape, "bits"), width=8 * dtype.itemsize)


# --- continuous distributions --------------------------------------------------------------
def uniform(key, shape=(), dtype=np.float64, minval=0.0, maxval=1.0) -> Tensor:
    """Uniform floats on [minval, maxval), differentiable in minval and maxval.

    >>> u = sl.random.uniform(sl.random.key(0), (2, 3), minval=-1.0, maxval=1.0)
    """
    key, shape = _check_key(key, "uniform"), _shape(shape, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    _check_shape("uniform", shape, _shape_of(minval), _shape_of(maxval))
    u = uniform_p(key, shape=shape, dtype=dtype)
    if _is_number(minval, 0.0) and _is_number(maxval, 1.0):
        return u  # u * 1 + 0 and max(0, u) would give u exactly
    lo, hi = _param(minval, dtype), _param(maxval, dtype)
    both_numbers = isinstance(lo, float) and isinstance(hi, float)
    span = float(dtype.type(hi) - dtype.type(lo)) if both_numbers else hi - lo  # in dtype
    return maximum(lo, u * span + lo)


def _is_number(x, value):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == value


def normal(key, shape=(), dtype=np.float64) -> Tensor:
    """Standard normal floats, sqrt(2) erfinv(u) for u uniform on (-1, 1), as JAX draws them.

    The uniforms are JAX's bit for bit; erfinv is XLA's polynomial evaluated with NumPy, so
    the numbers agree with JAX's to a few ulps, not always exactly (docs/random.md).

    >>> z = 0.5 + 2.0 * sl.random.normal(sl.random.key(0), (3,))
    """
    key, shape = _check_key(key, "normal"), _shape(shape, "normal")
    return normal_p(key, shape=shape, dtype=_float_dtype(dtype, "normal"))


def gumbel(key, shape=(), dtype=np.float64) -> Tensor:
    """Standard Gumbel floats, -log(-log(u)).

    >>> g = sl.random.gumbel(sl.random.key(0), (3,))
    """
    dtype = _float_dtype(dtype, "gumbel")
    u = uniform(key, shape, dtype, minval=float(np.finfo(dtype).tiny), maxval=1.0)
    return -log(-log(u))


def exponential(key, shape=(), dtype=np.float64) -> Tensor:
    """Standard exponential floats (rate 1), -log1p(-u).

    >>> e = sl.random.exponential(sl.random.key(0), (3,)) / 2.0
    """
    return -log1p(-uniform(key, shape, _float_dtype(dtype, "exponential")))


# --- discrete distributions ----------------------------------------------------------------
def bernoulli(key, p=0.5, shape=None) -> Tensor:
    """Booleans that are True with probability p, as jax.random.bernoulli.

    uniform(key, shape) < p in p's float dtype (float64 for a Python float, as JAX with
    64-bit types); shape defaults to p's shape.

    >>> coin = sl.random.bernoulli(sl.random.key(0), 0.3, (5,))
    """
    key = _check_key(key, "bernoulli")
    dtype = np.dtype(np.float64 if isinstance(p, float) else as_tensor(p).dtype)
    if dtype.kind != "f":
        raise TypeError(f"bernoulli: p must be a float, got {dtype}")
    shape = _shape_of(p) if shape is None else _shape(shape, "bernoulli")
    _check_shape("bernoulli", shape, _shape_of(p))
    return uniform(key, shape, dtype) < _param(p, dtype)


def categorical(key, logits, axis=-1, shape=None) -> Tensor:
    """Indices drawn with probabilities softmax(logits) along axis, as jax.random.categorical.

    The Gumbel-max trick, as in JAX; shape (by default logits' shape without axis) may add
    leading sample axes. Not differentiable (the result is an integer).

    >>> logits = sl.log(sl.tensor([0.2, 0.3, 0.5]))
    >>> i = sl.random.categorical(sl.random.key(0), logits, shape=(4,))
    """
    key, logits = _check_key(key, "categorical"), stop_gradient(as_tensor(logits))
    if logits.dtype.kind != "f":
        raise TypeError(f"categorical: logits must be floats, got {logits.dtype}")
    if logits.ndim == 0:
        raise ValueError("categorical: logits must have at least 1 dimension (the categories "
                         "along axis), got a 0-d array")
    axis = one_axis(axis, logits.ndim, "categorical")
    if logits.shape[axis] == 0:
        raise ValueError(f"categorical: logits {type_str(logits.shape, logits.dtype)} has no "
                         f"categories along axis {axis} (size 0); there is nothing to draw")
    batch_shape = logits.shape[:axis] + logits.shape[axis + 1:]
    shape = batch_shape if shape is None else _shape(shape, "categorical")
    _check_shape("categorical", shape, batch_shape)
    # JAX's noise shape: `shape` with the category axis inserted (logits broadcast into it,
    # so a size-1 batch axis of logits takes shape's size there)
    prefix, batch = shape[:len(shape) - len(batch_shape)], shape[len(shape) - len(batch_shape):]
    noise_shape = prefix + batch[:axis] + (logits.shape[axis],) + batch[axis:]
    noisy = gumbel(key, noise_shape, logits.dtype) + logits
    return argmax_p(noisy, axis=len(prefix) + axis)


def _randint_impl(key, minval, maxval, shape, dtype):
    """JAX's randint: two words of random bits reduced modulo the span (so the bias is tiny);
    8- and 16-bit integers are drawn as int32 within their range, then cast (as JAX >= 0.8).
    A batch of keys [..., 2] draws for each (bounds broadcast against its axes then shape)."""
    xp, size = backends.xp_of(key), math.prod(shape)
    lead = key.shape[:-1]
    with backends.on_device(backends.device_of(key)):
        minval, maxval = (xp.broadcast_to(xp.asarray(v), lead + tuple(shape)).reshape(
                              lead + (size,)) for v in (minval, maxval))
    shape = lead + tuple(shape)
    if dtype.itemsize < 4:
        info = np.iinfo(dtype)
        minval = _clip_integer(minval, np.int32, info.min, info.max)
        maxval = _clip_integer(maxval, np.int32, info.min, info.max + 1)
        return _randint_flat(xp, key, minval, maxval, np.dtype(np.int32)).astype(
            dtype).reshape(shape)
    return _randint_flat(xp, key, minval, maxval, dtype).reshape(shape)


def _randint_flat(xp, key, minval, maxval, dtype):
    nbits = 8 * dtype.itemsize
    uint = np.dtype(f"uint{nbits}")
    lo, hi = _clip_integer(minval, dtype), _clip_integer(maxval, dtype)
    hi_too_big = _exceeds(maxval, dtype)
    keys = raw_split(key, (2,))
    high, low = (flat_bits(k, lo.shape[-1], nbits).astype(uint)
                 for k in (keys[..., 0, :], keys[..., 1, :]))
    span = (hi - lo).astype(uint)
    span = xp.where(hi <= lo, uint.type(1), span)
    span = xp.where(hi_too_big & (hi > lo), span + uint.type(1), span)
    multiplier = _rem(xp, xp.full_like(span, 2 ** (nbits // 2)), span)
    multiplier = _rem(xp, multiplier * multiplier, span)
    offset = _rem(xp, high, span) * multiplier + _rem(xp, low, span)
    return lo + _rem(xp, offset, span).astype(dtype)


def _rem(xp, a, b):
    """a % b for unsigned arrays with XLA's a % 0 = a (the full range of int64 has span 2**64,
    which wraps to 0)."""
    zero = b == 0
    return xp.where(zero, a, a % xp.where(zero, b.dtype.type(1), b))


def _clip_integer(v, dtype, lo=None, hi=None):
    """v clipped to [lo, hi] (dtype's range by default), then converted to dtype (JAX's
    _convert_and_clip_integer): a bound beyond the range never wraps."""
    info, src = np.iinfo(dtype), np.iinfo(v.dtype)
    lo = max(info.min if lo is None else lo, src.min)
    hi = min(info.max if hi is None else hi, src.max)
    return backends.xp_of(v).clip(v, v.dtype.type(lo), v.dtype.type(hi)).astype(dtype)


def _exceeds(v, dtype):
    xp = backends.xp_of(v)
    if np.iinfo(v.dtype).max <= np.iinfo(dtype).max:
        return xp.zeros(v.shape, dtype=bool)
    return v > v.dtype.type(np.iinfo(dtype).max)


def _randint_batch(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """A batch of keys and of bounds: the keys broadcast to the batch, a batched bound given
    1s after its batch axis so that it broadcasts against shape example by example."""
    rank = len(params["shape"])

    def run(key, minval, maxval):
        B = next(a.shape[0] for a, b in zip((key, minval, maxval), batched) if b)
        key = key if batched[0] else ops.broadcast_to(key, (B, 2))
        minval, maxval = (ops.reshape(v, (B,) + (1,) * (rank - len(s)) + tuple(s)) if b else v
                          for v, b, s in zip((minval, maxval), batched[1:], shapes[1:]))
        return ops.bind(prim, key, minval, maxval, **params)

    return run


randint_p = Primitive("random_randint", _randint_impl,
                      doc="random_randint(key, minval, maxval, shape, dtype): integers.",
                      batch=_randint_batch)


def randint(key, shape, minval, maxval, dtype=np.int64) -> Tensor:
    """Uniform integers in [minval, maxval) (minval where maxval <= minval), as JAX's randint.

    JAX's algorithm bit for bit, including its small modulo bias for huge ranges, except
    for 8/16-bit dtypes with bounds outside int32: JAX wraps those to int32 first, scanlib
    clips them to the dtype's range (docs/random.md).

    >>> dice = sl.random.randint(sl.random.key(0), (5,), 1, 7)
    """
    key, shape = _check_key(key, "randint"), _shape(shape, "randint")
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"randint: dtype must be an integer dtype, got {dtype}")
    _check_shape("randint", shape, _shape_of(minval), _shape_of(maxval))
    bounds = [_integer_bound(v, "randint") for v in (minval, maxval)]
    return randint_p(key, *bounds, shape=shape, dtype=dtype)


def _integer_bound(v, who):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        if not -2**63 <= int(v) < 2**64:
            raise ValueError(f"{who}: bound {int(v)} does not fit in int64 or uint64")
        return int(v)
    v = as_tensor(v)
    if v.dtype.kind not in "iu":
        raise TypeError(f"{who}: bounds must be integers, got {type_str(v.shape, v.dtype)}; "
                        "round them first if a float bound is meant")
    return v


# --- permutations and choice ---------------------------------------------------------------
def _take(x, index, axis):
    return getitem(x, (slice(None),) * axis + (index,))


def _take_along(x, index, axis):
    """x reordered along axis by index (index has x's shape), differentiably."""
    grids = [np.arange(s).reshape((-1,) + (1,) * (x.ndim - d - 1)) for d, s in enumerate(x.shape)]
    grids[axis] = index
    return getitem(x, tuple(grids))


def _concrete_int(x, who):
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    x = as_tensor(x)
    if x.ndim or x.dtype.kind not in "iu":
        return None
    if not _is_concrete(x):
        raise TypeError(f"{who}: an integer n must be known when the function is traced, but "
                        "it is a traced value; pass a Python int")
    return int(x.item())


def permutation(key, x, axis=0, independent=False) -> Tensor:
    """A random permutation of range(x) for an int x, or x shuffled along axis.

    Every slice is shuffled the same way unless independent=True, as jax.random.permutation;
    the result is differentiable in x (the indices are not).

    >>> perm = sl.random.permutation(sl.random.key(0), 5)
    >>> rows = sl.random.permutation(sl.random.key(1), sl.arange(6.0).reshape(3, 2))
    """
    key = _check_key(key, "permutation")
    n = _concrete_int(x, "permutation")
    if n is not None:
        if n < 0:
            raise ValueError(f"permutation: n must be non-negative, got {n}")
        return shuffle_p(key, shape=(n,), axis=0)
    x = as_tensor(x)
    if x.ndim == 0:
        raise TypeError(f"permutation: x must be an integer or at least 1-d, got "
                        f"{type_str(x.shape, x.dtype)}")
    axis = one_axis(axis, x.ndim, "permutation")
    if independent and x.ndim > 1:
        return _take_along(x, shuffle_p(key, shape=x.shape, axis=axis), axis)
    return _take(x, shuffle_p(key, shape=(x.shape[axis],), axis=0), axis)


def _choice_with_p_impl(key, p, shape, replace):
    """Indices drawn with probabilities p: the inverse CDF with replacement, Gumbel top-k
    without (JAX's algorithms). Weights that are not probabilities give the index n, out of
    range, instead of a plausible one; no error here, as a trace's stand-in weights are such
    (the weights that run are checked before: `_weights`, checked_weights). A batch of keys
    [B, 2] (p shared, or a batch [B, n]) draws for each."""
    xp, n_draws, n = backends.xp_of(key, p), math.prod(shape), p.shape[-1]
    lead = key.shape[:-1]
    if replace:
        cum = xp.cumsum(p, axis=-1)
        r = cum[..., -1:] * (p.dtype.type(1) - flat_unit_floats(key, n_draws, p.dtype))
        if lead:  # searchsorted(cum, r) row by row: how many entries of cum are below r
            index = (cum[..., None, :] < r[..., :, None]).sum(axis=-1, dtype=np.int64)
        else:
            index = xp.searchsorted(cum, r).astype(np.int64)
    else:
        tiny = np.finfo(p.dtype).tiny
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf: never drawn
            g = -xp.log(-xp.log(flat_uniform(key, n, p.dtype, tiny, 1.0))) + xp.log(p)
        index = xp.argsort(-g, axis=-1, kind="stable")[..., :n_draws].astype(np.int64)
    bad = ~(xp.all(xp.isfinite(p), axis=-1) & xp.all(p >= 0, axis=-1)
            & (xp.sum(p, axis=-1) > 0))
    return xp.where(bad[..., None], np.int64(n), index).reshape(lead + tuple(shape))


def _choice_batch(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """A batch of keys and of weights: the keys broadcast to the batch."""
    def run(key, p):
        key = key if batched[0] else ops.broadcast_to(key, (p.shape[0], 2))  # p is batched
        return ops.bind(prim, key, p, **params)

    return run


choice_p = Primitive("random_choice", _choice_with_p_impl,
                     doc="random_choice(key, p, shape, replace): indices drawn with weights p.",
                     batch=_choice_batch)


def choice(key, a, shape=(), replace=True, p=None, axis=0) -> Tensor:
    """Random items of a along axis (an int n means range(n)), as jax.random.choice.

    With or without replacement, uniformly or with probabilities p (weights, normalised by
    their sum). Differentiable in a's values, not in p.

    >>> p = sl.tensor([0.1, 0.2, 0.3, 0.2, 0.2])
    >>> i = sl.random.choice(sl.random.key(0), 5, (3,), replace=False, p=p)
    """
    key, shape = _check_key(key, "choice"), _shape(shape, "choice")
    n = _concrete_int(a, "choice")
    arr = None if n is not None else as_tensor(a)
    if arr is not None:
        if arr.ndim == 0:
            raise TypeError(f"choice: a must be an int (meaning range(a)) or an array with at "
                            f"least 1 dimension, got {type_str(arr.shape, arr.dtype)}")
        axis = one_axis(axis, arr.ndim, "choice")
        n = arr.shape[axis]
    n_draws = math.prod(shape)
    if n <= 0 and n_draws:
        raise ValueError(f"choice: a must be greater than 0 unless no samples are taken, got {n}")
    if not replace and n_draws > n:
        raise ValueError(f"choice: cannot take {n_draws} samples without replacement from "
                         f"{n} items; pass replace=True or a smaller shape")
    if p is None and replace:
        index = randint(key, shape, 0, n)
    elif p is None:
        index = permutation(key, n)[:n_draws].reshape(shape)
    else:
        index = choice_p(key, _weights(p, n, n_draws, replace), shape=shape,
                         replace=bool(replace))
    if arr is None:
        return index
    out = _take(arr, _in_range(index.reshape(-1), n, arr), axis)
    return out.reshape(arr.shape[:axis] + shape + arr.shape[axis + 1:])


def _in_range(index, n, arr):
    """index, where the out-of-range index n that bad weights give is kept for integer items
    and made 0 for float items: a trace's stand-in weights (zeros) are bad weights, and a
    float gather must not fail on them. Real weights are checked before (checked_weights)."""
    return index if arr.dtype.kind not in "fc" else where(index < n, index, 0)


def _weights(p, n, n_draws, replace):
    """p as a float Tensor of shape (n,), its values checked where they are known."""
    p = stop_gradient(as_tensor(p))
    if p.dtype.kind in "iub":
        p = p.astype(np.float64)
    if p.dtype.kind != "f":
        raise TypeError(f"choice: p must be real, got {type_str(p.shape, p.dtype)}")
    if p.shape != (n,):
        raise ValueError(f"choice: p must have shape ({n},), one weight per item, got {p.shape}")
    if _is_concrete(p):
        _check_weights(backends.to_numpy(p._value), n_draws, replace)
        return p
    # Traced (a scan body, jit): checked when the values are there, at every call.
    return checked_weights_p(p, n_draws=n_draws, replace=bool(replace))


def _check_weights(values, n_draws, replace):
    if values.ndim > 1:  # a batch of weights (vmap's): each row
        for row in values.reshape(-1, values.shape[-1]):
            _check_weights(row, n_draws, replace)
        return
    if not (np.all(np.isfinite(values)) and np.all(values >= 0) and values.sum() > 0):
        raise ValueError(f"choice: p must be finite, non-negative and not all 0, got {values}")
    if not replace and np.count_nonzero(values) < n_draws:
        raise ValueError(f"choice: p has {np.count_nonzero(values)} non-zero entries, fewer "
                         f"than the {n_draws} draws without replacement")


def _checked_weights_impl(p, n_draws, replace):
    if not on_stand_ins():  # a trace's stand-in zeros are not the weights
        _check_weights(backends.to_numpy(p), n_draws, replace)
    return p


checked_weights_p = Primitive("checked_weights", _checked_weights_impl,
                              doc="checked_weights(p): p, or choice's ValueError for bad weights",
                              batch=keys_rule)


# The other distributions, written on the functions above (and so imported after them).
from .distributions import (  # noqa: E402
    ball, beta, binomial, cauchy, chisquare, clone, dirichlet, gamma, generalized_normal,
    geometric, key_data, laplace, loggamma, logistic, lognormal, maxwell, multinomial,
    multivariate_normal,
    orthogonal, pareto, poisson, rademacher, rayleigh, t, truncated_normal, weibull_min,
    wrap_key_data,
)
