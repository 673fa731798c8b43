"""Threefry-2x32 as numba functions, for NumPy keys when numba is installed: `threefry_rows`
(what prng.threefry2x32 calls) and the draws the numba loop tier's rules call (split, bits,
unit floats, fold_in). Exact uint32 arithmetic (done in uint64 and masked), so the results
are the NumPy code's bit for bit. The source is written to SCANLIB_CACHE_DIR (as the loop
tier's kernels are) and compiled with numba's disk cache there, once per machine.

Imports nothing of scanlib; numba only when the functions are first asked for.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import math
import os
import sys
import tempfile
import time

import numpy as np

log = logging.getLogger("scanlib.numba")  # logs.get("numba"), which ops do not import
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # prng.py's


def _block_lines():
    """The 20 rounds on uint64 words a, b (each < 2**32) under ks0, ks1, ks2, unrolled (m is
    the low 32 bits' mask)."""
    lines = []
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            lines += ["a = (a + b) & m",
                      f"b = (((b << np.uint64({r})) | (b >> np.uint64({32 - r}))) & m) ^ a"]
        lines += [f"a = (a + ks{(i + 1) % 3}) & m",
                  f"b = (b + ks{(i + 2) % 3} + np.uint64({i + 1})) & m"]
    return lines


def _source():
    block = "\n".join("    " + ln for ln in _block_lines())
    return f'''"""scanlib's Threefry-2x32 for numba (written by scanlib/ops/prng_kernel.py)."""
import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True)


@_jit
def block(ks0, ks1, ks2, a, b):
    m = np.uint64(0xFFFFFFFF)
    a = (a + ks0) & m
    b = (b + ks1) & m
{block}
    return a, b


@_jit
def keys_of(k0, k1):
    ks0, ks1 = np.uint64(k0), np.uint64(k1)
    return ks0, ks1, ks0 ^ ks1 ^ np.uint64(0x1BD11BDA)


@_jit
def threefry_rows(keys, x0, x1):
    """out[i, j] = threefry2x32(keys[i], (x0[r, j], x1[r, j])), r = i where x0 has a row
    per key, else 0."""
    rows, n = keys.shape[0], x0.shape[1]
    per_key = x0.shape[0] != 1
    out0 = np.empty((rows, n), np.uint32)
    out1 = np.empty((rows, n), np.uint32)
    for i in range(rows):
        ks0, ks1, ks2 = keys_of(keys[i, 0], keys[i, 1])
        r = i if per_key else 0
        for j in range(n):
            a, b = block(ks0, ks1, ks2, np.uint64(x0[r, j]), np.uint64(x1[r, j]))
            out0[i, j] = np.uint32(a)
            out1[i, j] = np.uint32(b)
    return out0, out1


@_jit
def split(keys, n):
    """raw_split: [L, n, 2] uint32, n new keys from each of keys [L, 2] (the cipher of
    counters 0..n-1, 64-bit, high word first)."""
    out = np.empty((keys.shape[0], n, 2), np.uint32)
    for i in range(keys.shape[0]):
        ks0, ks1, ks2 = keys_of(keys[i, 0], keys[i, 1])
        for j in range(n):
            c = np.uint64(j)
            a, b = block(ks0, ks1, ks2, c >> np.uint64(32), c & np.uint64(0xFFFFFFFF))
            out[i, j, 0], out[i, j, 1] = np.uint32(a), np.uint32(b)
    return out


@_jit
def bits32(keys, n):
    """flat_bits of width 32 (narrower widths: these, cast): [L, n] uint32, the two words
    xor-ed."""
    words = split(keys, n)
    out = np.empty((keys.shape[0], n), np.uint32)
    for i in range(keys.shape[0]):
        for j in range(n):
            out[i, j] = words[i, j, 0] ^ words[i, j, 1]
    return out


@_jit
def bits64(keys, n):
    """flat_bits of width 64: [L, n] uint64, the first word high."""
    words = split(keys, n)
    out = np.empty((keys.shape[0], n), np.uint64)
    for i in range(keys.shape[0]):
        for j in range(n):
            out[i, j] = (np.uint64(words[i, j, 0]) << np.uint64(32)) | np.uint64(words[i, j, 1])
    return out


@_jit
def unit_floats32(keys, n):
    """flat_unit_floats in float32: [L, n] in [0, 1), the mantissa's bits under 1.0's
    exponent, minus 1."""
    m = bits32(keys, n)
    for i in range(keys.shape[0]):
        for j in range(n):
            m[i, j] = (m[i, j] >> np.uint32(9)) | np.uint32(0x3F800000)
    out = m.view(np.float32)
    for i in range(keys.shape[0]):
        for j in range(n):
            out[i, j] -= np.float32(1.0)
    return out


@_jit
def unit_floats64(keys, n):
    """flat_unit_floats in float64: [L, n] in [0, 1)."""
    m = bits64(keys, n)
    for i in range(keys.shape[0]):
        for j in range(n):
            m[i, j] = (m[i, j] >> np.uint64(12)) | np.uint64(0x3FF0000000000000)
    out = m.view(np.float64)
    for i in range(keys.shape[0]):
        for j in range(n):
            out[i, j] -= np.float64(1.0)
    return out


@_jit
def stable_order(v):
    """The permutation sorting v stably (NumPy's kind="stable"): a bottom-up merge sort
    (numba's own argsort takes seconds to compile)."""
    n = v.shape[0]
    order = np.arange(n)
    spare = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if i < mid and (j >= hi or v[order[i]] <= v[order[j]]):
                    spare[k] = order[i]
                    i += 1
                else:
                    spare[k] = order[j]
                    j += 1
        order, spare = spare, order
        width *= 2
    return order


@_jit
def shuffle(keys, n, rounds):
    """prng.py's raw_shuffle of a 1-d shape (n,): [L, n] int64, a permutation per key
    (rounds of stable sorts by random bits)."""
    out = np.empty((keys.shape[0], n), np.int64)
    key = np.empty((1, 2), np.uint32)
    sub = np.empty((1, 2), np.uint32)
    for i in range(keys.shape[0]):
        key[0, 0], key[0, 1] = keys[i, 0], keys[i, 1]
        index = np.arange(n)
        moved = np.empty(n, np.int64)
        for _ in range(rounds):
            pair = split(key, 2)
            key[0, 0], key[0, 1] = pair[0, 0, 0], pair[0, 0, 1]
            sub[0, 0], sub[0, 1] = pair[0, 1, 0], pair[0, 1, 1]
            order = stable_order(bits32(sub, n)[0])
            for k in range(n):
                moved[k] = index[order[k]]
            index, moved = moved, index
        for k in range(n):
            out[i, k] = index[k]
    return out


@_jit
def fold_in(keys, data):
    """_fold_in_impl: [L, 2], key i folded with data[i] (uint32)."""
    out = np.empty((keys.shape[0], 2), np.uint32)
    for i in range(keys.shape[0]):
        ks0, ks1, ks2 = keys_of(keys[i, 0], keys[i, 1])
        a, b = block(ks0, ks1, ks2, np.uint64(0), np.uint64(data[i]))
        out[i, 0], out[i, 1] = np.uint32(a), np.uint32(b)
    return out
'''


SOURCE = _source()
DIGEST = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
_module = []  # the loaded module, once
_ready = []  # its threefry_rows, once called


def missing():
    """None when numba imports, else why not (as native.missing says it)."""
    try:
        import numba  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or a broken install
        return f"{type(e).__name__}: {e}"
    return None


def module():
    """The module of numba functions (compiled when first called, or loaded from numba's disk
    cache), written to the cache directory on first use."""
    if _module:
        return _module[0]
    directory = cache_dir()
    mod = None
    if directory is not None:
        name = f"scanlib_threefry_{DIGEST}"
        path = os.path.join(directory, name + ".py")
        try:
            if not os.path.exists(path):
                fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
                with os.fdopen(fd, "w") as fh:
                    fh.write(SOURCE)
                os.replace(tmp, path)
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod  # numba's cache finds the functions through it
            spec.loader.exec_module(mod)
            mod.where = f"cached in {directory}"
        except OSError:
            mod = None
    if mod is None:
        import types

        mod = types.ModuleType("scanlib_threefry")
        exec(compile(SOURCE.replace("cache=True", "cache=False"),  # noqa: S102 - our own
                     "<scanlib threefry2x32 kernel>", "exec"), vars(mod))
        mod.where = "not cached (no writable cache directory: set SCANLIB_CACHE_DIR)"
    _module.append(mod)
    return mod


def functions():
    """The functions the loop tier's kernels call (native_rules.py's PRNG rules)."""
    m = module()
    return m.split, m.bits32, m.bits64, m.unit_floats32, m.unit_floats64, m.fold_in, m.shuffle


def _rows_kernel():
    """module().threefry_rows, its first call compiled (or loaded) here and logged."""
    if _ready:
        return _ready[0]
    m = module()
    log.info("compiling the threefry2x32 kernel (seconds, unless numba's disk cache has it)")
    start = time.perf_counter()
    z = np.zeros((1, 2), np.uint32)
    m.threefry_rows(z, z[:, :1].copy(), z[:, :1].copy())
    hit = sum(m.threefry_rows.stats.cache_hits.values())
    log.info("%s the threefry2x32 kernel in %.2f s; %s", "loaded" if hit else "compiled",
             time.perf_counter() - start, m.where)
    _ready.append(m.threefry_rows)
    return _ready[0]


def cache_dir():
    """SCANLIB_CACHE_DIR (default ~/.cache/scanlib)/numba-pyXY, or None where it cannot be
    written: where every numba kernel scanlib writes is cached (the loop tier's import it)."""
    directory = os.environ.get("SCANLIB_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "scanlib")
    directory = os.path.join(directory, f"numba-py{sys.version_info[0]}{sys.version_info[1]}")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK) else None


def _c(a):
    """a as a C-contiguous array numba may write (the kernel's one signature)."""
    a = np.ascontiguousarray(a)
    return a if a.flags.writeable else a.copy()


def draw(name, key, n):
    """module().<name>(keys, n) (split, bits32, bits64, unit_floats32, unit_floats64) of
    NumPy uint32 keys [..., 2] as rows [L, 2]: [L, n] (split: [L, n, 2]); None where the
    keys are not that (the caller computes it otherwise). Its first call per function
    compiles it, or loads it from numba's disk cache, and is logged."""
    if not (type(key) is np.ndarray and key.dtype == np.uint32 and key.ndim >= 1
            and key.shape[-1] == 2):
        return None
    fn = _draws.get(name)
    if fn is None:
        start = time.perf_counter()
        fn = getattr(module(), name)
        out = fn(_c(key.reshape(-1, 2)), n)
        log.info("%s the %s kernel of threefry2x32 in %.2f s; %s",
                 "loaded" if sum(fn.stats.cache_hits.values()) else "compiled", name,
                 time.perf_counter() - start, module().where)
        _draws[name] = fn
        return out
    return fn(_c(key.reshape(-1, 2)), n)


_draws = {}  # name -> module()'s function, once called


def threefry(key, x0, x1):
    """prng.threefry2x32 of NumPy uint32 arrays by the kernel, or None where its one form
    does not fit: x0 and x1 of one shape with at least one axis, whose leading axes are
    all 1, or the keys' batch axes (broadcast with them)."""
    if not (type(key) is np.ndarray and type(x0) is np.ndarray and type(x1) is np.ndarray
            and key.dtype == x0.dtype == x1.dtype == np.uint32 and key.ndim >= 1
            and key.shape[-1] == 2 and x0.shape == x1.shape and x0.ndim >= 1):
        return None
    lead, n, x_lead = key.shape[:-1], x0.shape[-1], x0.shape[:-1]
    if x_lead and x_lead != lead:  # counters with axes of their own: broadcast the keys
        try:
            lead = np.broadcast_shapes(lead, x_lead)
        except ValueError:
            return None
        key = np.broadcast_to(key, lead + (2,))
    rows = math.prod(lead)
    if x_lead == lead:
        x0, x1 = x0.reshape(rows, n), x1.reshape(rows, n)
    elif math.prod(x_lead) == 1:
        x0, x1 = x0.reshape(1, n), x1.reshape(1, n)
    else:
        return None
    out0, out1 = _rows_kernel()(_c(key.reshape(rows, 2)), _c(x0), _c(x1))
    return out0.reshape(lead + (n,)), out1.reshape(lead + (n,))
