"""Random-number generation on raw arrays: Threefry-2x32 (20 rounds) in JAX's "partitionable"
layout, raw bits, unit floats and uniforms, erfinv and normals, and the key-derivation (seed,
split, fold_in) and draw (bits, uniform, normal, a permutation; categorical's argmax)
primitives. The public API is scanlib.random.

Imports backends, ops.batching, ops.elementwise, ops.primitive and ops.prng_kernel (numba's
threefry2x32, where installed); the primitives here have no VJP (keys have no gradient),
except erfinv's (truncated_normal's inverse CDF).
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from .. import backends
from . import batching, prng_kernel
from .elementwise import exp, mul
from .primitive import Primitive

U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)


# --- Threefry-2x32 on raw uint32 arrays --------------------------------------------------
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_SHIFTS = tuple(tuple((np.uint32(r), np.uint32(32 - r)) for r in rots) for rots in _ROTATIONS)
_PARITY = np.uint32(0x1BD11BDA)
_ROUND_NUMBERS = tuple(np.uint32(i + 1) for i in range(5))
# The numba kernel is ~15x faster on a few keys (8 us against 110 us a call), but loading
# numba's runtime costs 0.5-1 s once per process (2 s to compile it on an empty cache): so
# by default a process switches to it once it has spent SWITCH_S in NumPy's threefry.
KERNEL = {"use": None, "auto": None, "numpy_s": 0.0}
SWITCH_S = 0.5
log = logging.getLogger("scanlib.numba")  # logs.get("numba"), which ops do not import


def use_kernel(on: bool | None) -> None:
    """Whether threefry2x32 runs as one numba kernel on NumPy keys: True or False, or None
    (the default) to switch to it, where numba is installed, once NumPy's has taken
    SWITCH_S seconds in this process. The two give the same bits."""
    if on not in (None, True, False):
        raise ValueError(f"use_kernel: on must be None, True or False, got {on!r}")
    KERNEL["use"] = on


def _kernel_on():
    on = KERNEL["use"]
    if on is None:
        on = KERNEL["auto"]
        if on is None and KERNEL["numpy_s"] >= SWITCH_S:
            on = KERNEL["auto"] = prng_kernel.missing() is None
            if on:
                log.info("threefry2x32: %.2f s spent in NumPy's; switching to numba's kernel",
                         KERNEL["numpy_s"])
    return on


def threefry2x32(key, x0, x1):
    """The Threefry-2x32 block cipher (20 rounds) of counters (x0, x1) under key, as raw
    uint32 arrays on the key's backend; the function jax.random is built on. A batch of keys
    [..., 2] (vmap's) broadcasts against the counters: one row of results per key. On NumPy
    with numba installed, one numba kernel computes it (use_kernel); otherwise NumPy's
    operators do, in place (the same bits)."""
    if _kernel_on():
        out = prng_kernel.threefry(key, x0, x1)
        if out is not None:
            return out
    start = time.perf_counter()
    out = _threefry_xp(key, x0, x1)
    KERNEL["numpy_s"] += time.perf_counter() - start
    return out


def _threefry_xp(key, x0, x1):
    """threefry2x32 as array operations, each round's in place on two fresh arrays."""
    k0, k1 = key[..., 0:1], key[..., 1:2]  # (1,)-arrays: array arithmetic wraps without warnings
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = x0 + ks[0], x1 + ks[1]  # new arrays, updated in place from here
    if x0.shape != x1.shape:
        xp = backends.xp_of(x0)
        shape = np.broadcast_shapes(x0.shape, x1.shape)
        x0, x1 = xp.broadcast_to(x0, shape).copy(), xp.broadcast_to(x1, shape).copy()
    for i in range(5):
        for left, right in _SHIFTS[i % 2]:
            x0 += x1
            high = x1 << left
            x1 >>= right
            x1 |= high
            x1 ^= x0
        x0 += ks[(i + 1) % 3]
        x1 += ks[(i + 2) % 3] + _ROUND_NUMBERS[i]
    return x0, x1


# Everything is computed on flat arrays and reshaped at the end, so a 0-d draw is a 0-d array
# (NumPy turns 0-d arithmetic into scalars, which have no .view and warn on wrapping).
def _counters(key, size):
    """The index of each element as a 64-bit number split into its high and low words (JAX's
    iota_2x32_shape, row-major)."""
    xp = backends.xp_of(key)
    with backends.on_device(backends.device_of(key)):
        index = xp.arange(size, dtype=_U64)
    return (index >> np.uint64(32)).astype(U32), (index & np.uint64(0xFFFFFFFF)).astype(U32)


def _drawn(name, key, size):
    """prng_kernel.draw's [L, size(, 2)] rows as key's leading axes + (size,) (+ (2,)), or
    None where the kernel is off or does not take these keys."""
    out = prng_kernel.draw(name, key, size) if _kernel_on() else None
    return None if out is None else out.reshape(key.shape[:-1] + out.shape[1:])


def flat_bits(key, size, width):
    """size random unsigned integers of `width` bits: JAX's partitionable random_bits."""
    out = _drawn("bits64" if width == 64 else "bits32", key, size)
    if out is not None:  # one numba call, the bits below's
        return out if width in (32, 64) else out.astype(np.dtype(f"uint{width}"))
    b0, b1 = threefry2x32(key, *_counters(key, size))
    if width == 64:
        return (b0.astype(_U64) << np.uint64(32)) | b1.astype(_U64)
    return (b0 ^ b1).astype(np.dtype(f"uint{width}"))


def raw_bits(key, shape, width):
    """flat_bits in the given shape (after a batch of keys' own axes)."""
    return flat_bits(key, math.prod(shape), width).reshape(key.shape[:-1] + tuple(shape))


def raw_split(key, shape):
    """`shape` new keys (uint32 pairs, the last axis) derived from key (from each of a
    batch of keys: its axes first)."""
    out = _drawn("split", key, math.prod(shape))
    if out is None:
        b0, b1 = threefry2x32(key, *_counters(key, math.prod(shape)))
        out = backends.xp_of(key).stack([b0, b1], axis=-1)
    return out.reshape(key.shape[:-1] + tuple(shape) + (2,))


def flat_unit_floats(key, size, dtype):
    """Floats in [0, 1) of dtype: random mantissa bits under the exponent of 1.0, minus 1."""
    if dtype in (np.float32, np.float64):
        out = _drawn(f"unit_floats{dtype.itemsize * 8}", key, size)
        if out is not None:  # one numba call, the arithmetic below's
            return out
    info = np.finfo(dtype)
    uint = np.dtype(f"uint{info.bits}")
    mantissa = flat_bits(key, size, info.bits) >> uint.type(info.bits - info.nmant)
    one = uint.type(np.array(1.0, dtype).view(uint))  # a scalar: CuPy mixes no NumPy arrays
    return (mantissa | one).view(dtype) - dtype.type(1.0)


def _unit_floats(key, shape, dtype):
    return flat_unit_floats(key, math.prod(shape), dtype).reshape(key.shape[:-1] + tuple(shape))


def flat_uniform(key, size, dtype, lo, hi):
    """Uniform on [lo, hi) in dtype, with JAX's arithmetic (so equal to jax.random.uniform)."""
    lo, hi = dtype.type(lo), dtype.type(hi)
    floats = flat_unit_floats(key, size, dtype)
    return backends.xp_of(key).maximum(lo, floats * (hi - lo) + lo)


# --- erfinv, for normal: Giles' polynomials, evaluated as XLA evaluates them ---------------
_ERFINV32 = (
    (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941),
    (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))
_ERFINV64 = (
    (-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
     1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
     6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
     2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
     1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
     4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
     0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
     0.24015818242558961693, 1.6536545626831027356),
    (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
     1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
     2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
     6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
     0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
     -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
     3.0838856104922207635),
    (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
     -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
     2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
     -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
     7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
     1.0103004648645343977, 4.8499064014085844221))


def _erfinv32(xp, x):
    w = -xp.log1p(-x * x)
    small = w < np.float32(5.0)
    w = xp.where(small, w - np.float32(2.5), xp.sqrt(w) - np.float32(3.0))
    lo, hi = (tuple(np.float32(c) for c in cs) for cs in _ERFINV32)
    p = xp.where(small, lo[0], hi[0])
    for a, b in zip(lo[1:], hi[1:]):
        p = xp.where(small, a, b) + p * w
    return p * x


def _erfinv64(xp, x):
    w = -xp.log1p(-x * x)
    lt625 = w < 6.25
    a, b, c = _ERFINV64
    central = _erfinv64_central(xp, x, w, lt625)
    if central is not None:
        return central
    lt16 = w < 16.0
    sqrt_w = xp.sqrt(w)
    w = xp.where(lt625, w - 3.125, sqrt_w - xp.where(lt16, 3.25, 5.0))

    def coefficient(i):
        out = xp.where(lt625, a[i], b[i]) if i < 19 else a[i]
        return xp.where(lt16, out, c[i]) if i < 17 else out

    p = coefficient(0)
    for i in range(1, 17):
        p = coefficient(i) + p * w
    for i in range(17, 23):
        p = xp.where(lt16 if i < 19 else lt625, coefficient(i) + p * w, p)
    return p * x


def _erfinv64_central(xp, x, w, central):
    """float64 erfinv on NumPy for the central region (w < 6.25: |x| < 0.998, all but a few
    of a normal draw): there every select picks the central polynomial, so its Horner steps
    with scalar coefficients give the same floats as the selects do, at a quarter of the
    time (1,000 values: 79 against 327 us); the few others (and NaN) are computed by the
    polynomials the selects would pick for them and put in place. None elsewhere (CuPy, 0-d,
    no element central). float32 keeps its selects (9 terms in two regions)."""
    if xp is not np or not x.ndim or not central.any():
        return None
    t = w - 3.125
    a = _ERFINV64[0]
    p = a[0]
    for k in a[1:]:
        p = k + p * t
    out = p * x
    tail = ~central
    if tail.any():
        out[tail] = _erfinv64_tail(w[tail], x[tail])
    return out


def _erfinv64_tail(w, x):
    """The few values outside the central region, one by one as Python floats (IEEE double
    products and sums, as NumPy's), where the selects would pick for them: for 6.25 <= w <
    16 the second polynomial in sqrt(w) - 3.25, else (w >= 16, NaN) the third in
    sqrt(w) - 5."""
    _, b, c = _ERFINV64
    found = []
    for w_i, root, x_i in zip(w.tolist(), np.sqrt(w).tolist(), x.tolist()):
        coefficients, t = (b, root - 3.25) if w_i < 16.0 else (c, root - 5.0)
        p = coefficients[0]
        for k in coefficients[1:]:
            p = k + p * t
        found.append(p * x_i)
    return found


def raw_normal(key, shape, dtype):
    """JAX's normal: sqrt(2) erfinv(u), u uniform on (-1, 1); erfinv in float32 unless float64."""
    xp = backends.xp_of(key)
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = flat_uniform(key, math.prod(shape), dtype, lo, 1.0)
    z = _erfinv64(xp, u) if dtype == np.float64 else _erfinv32(xp, u.astype(np.float32))
    return (z.astype(dtype) * dtype.type(np.sqrt(2))).reshape(key.shape[:-1] + tuple(shape))


# --- primitives: one equation per draw, computed on the key's backend ----------------------
def _seed_impl(seed):
    """JAX's threefry_seed: the high word of a 64-bit seed (0 for narrower ones), then the low
    word (astype keeps it, in two's complement for a negative seed). A batch of seeds gives
    a batch of keys [..., 2]."""
    xp, seed = backends.xp_of(seed), seed.reshape(seed.shape + (1,))
    high = (seed.astype(_U64) >> np.uint64(32)).astype(U32) if seed.dtype.itemsize == 8 else (
        xp.zeros_like(seed, dtype=U32))
    return xp.concatenate([high, seed.astype(U32)], axis=-1)


def _fold_in_impl(key, data):
    xp = backends.xp_of(key)
    with backends.on_device(backends.device_of(key)):
        data = xp.asarray(data).astype(U32)
    data = data.reshape(data.shape + (1,))  # a batch of data: one key each
    return xp.concatenate(threefry2x32(key, xp.zeros_like(data), data), axis=-1)


def keys_rule(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """The batching rule of every primitive here (and of scanlib.random's): its impl takes a
    batch of keys [B, 2] (a batch of seeds, of fold_in's data) and gives each key's results
    with the batch axis first, computed as one key's are, element by element (so equal to
    the per-key calls bit for bit, as jax.vmap's are)."""
    return lambda *args: ops.bind(prim, *args, **params)


def _fold_in_rule(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """fold_in's: each input's batch axis first, the key broadcast to the batch where only the
    data is batched (a key closed over, data from a scan's xs), and batched data given 1s
    after its batch axis so that it broadcasts against the key's own leading axes (keys
    [4, 2] folded with one datum each example), not against the batch axis."""
    (key_batched, data_batched), (key_shape, data_shape) = batched, shapes
    lead = len(key_shape) - 1  # the key's leading axes in one example

    def run(key, data):
        B = (key if key_batched else data).shape[0]
        if not key_batched:
            key = ops.broadcast_to(key, (B,) + tuple(key_shape))
        if data_batched and len(data_shape) < lead:
            data = ops.reshape(data, (B,) + (1,) * (lead - len(data_shape)) + tuple(data_shape))
        return ops.bind(prim, key, data, **params)
    return run


seed_p = Primitive("random_seed", _seed_impl, doc="random_seed(seed): the key of an int seed.",
                   batch=keys_rule)
split_p = Primitive("random_split", raw_split, doc="random_split(key, shape): new keys.",
                    batch=keys_rule)
fold_in_p = Primitive("random_fold_in", _fold_in_impl, doc="random_fold_in(key, data).",
                      batch=_fold_in_rule)
bits_p = Primitive("random_bits", lambda key, shape, width: raw_bits(key, shape, width),
                   doc="random_bits(key, shape, width): uniform unsigned integers.",
                   batch=keys_rule)
uniform_p = Primitive("random_uniform", lambda key, shape, dtype: _unit_floats(key, shape, dtype),
                      doc="random_uniform(key, shape, dtype): uniform floats in [0, 1).",
                      batch=keys_rule)
normal_p = Primitive("random_normal", raw_normal,
                     doc="random_normal(key, shape, dtype): standard normal floats.",
                     batch=keys_rule)


# --- permutations and categorical's argmax ----------------------------------------------
def shuffle_rounds(size):
    """How many sorts raw_shuffle makes of `size` elements (JAX's count)."""
    return int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))


def raw_shuffle(key, shape, axis):
    """Indices permuting each slice along axis: JAX's _shuffle, rounds of stable sorts by
    random 32-bit keys (ceil(3 ln(size) / ln(2**32 - 1)) rounds, so ties barely matter).
    A batch of keys [..., 2] gives one permutation each (its axes first)."""
    xp, rounds = backends.xp_of(key), shuffle_rounds(math.prod(shape))
    lead = key.shape[:-1]
    with backends.on_device(backends.device_of(key)):
        along = xp.arange(shape[axis], dtype=np.int64).reshape(
            (-1,) + (1,) * (len(shape) - axis - 1))
        index = xp.broadcast_to(along, lead + tuple(shape)).copy()
    axis += len(lead)
    for _ in range(rounds):
        keys = raw_split(key, (2,))
        key, sort_keys = keys[..., 0, :], raw_bits(keys[..., 1, :], shape, 32)
        index = xp.take_along_axis(index, xp.argsort(sort_keys, axis=axis, kind="stable"),
                                   axis=axis)
    return index


shuffle_p = Primitive("random_shuffle", raw_shuffle,
                      doc="random_shuffle(key, shape, axis): permutation indices along axis.",
                      batch=keys_rule)


argmax_p = Primitive("argmax", lambda x, axis: backends.xp_of(x).asarray(
                         backends.xp_of(x).argmax(x, axis=axis)),
                     doc="argmax(x, axis): index of the first maximum (or NaN) along axis.",
                     batch=batching.axis_rule)


# --- erfinv as a differentiable primitive (truncated_normal's), and nextafter -------------
def _erfinv_impl(x):
    """XLA's erfinv: its float64 polynomial for float64, its float32 one otherwise."""
    xp = backends.xp_of(x)
    if x.dtype == np.float64:
        return _erfinv64(xp, x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _erfinv32(xp, x.astype(np.float32)).astype(x.dtype)


def _erfinv_vjp(g, out, x):
    return (mul(g, mul(exp(mul(out, out)), math.sqrt(math.pi) / 2)),)


erfinv_p = Primitive("erfinv", _erfinv_impl, _erfinv_vjp, elementwise=True, inexact=True,
                     tangent=lambda ts, out, x: None if ts[0] is None else
                     _erfinv_vjp(ts[0], out, x)[0],
                     doc="erfinv(x): the inverse error function (XLA's polynomials).")
nextafter_p = Primitive("nextafter", lambda x, y: backends.xp_of(x).nextafter(x, y),
                        elementwise=True, inexact=True,
                        doc="nextafter(x, y): the float after x towards y (no gradient).")
