"""The PRNG compiled: threefry2x32 as one numba kernel (ops/prng_kernel.py) and the numba loop
tier's rules for the PRNG's draws, categorical's argmax, fixed_indices and gathers at index
arrays of one shape (native_rules.py). Threefry is integer arithmetic, so every compiled path
must give the NumPy code's bits exactly: keys, split, fold_in, bits, uniforms, normals and
permutations, for one key and batches of keys, under vmap, jit and inside scan bodies (where a
kernel must actually have run). JAX's values are the oracle where JAX is installed.
"""

import logging
import warnings

import numpy as np
import pytest

import scanlib as sl
from scanlib.ops import prng, prng_kernel

numba = pytest.importorskip("numba")

from scanlib.scan.loop import native  # noqa: E402 - only with numba

RNG = np.random.default_rng(7)


@pytest.fixture
def kernel_on():
    old = prng.KERNEL["use"]
    prng.use_kernel(True)
    yield
    prng.use_kernel(old)


def _numpy(fn, *args):
    old = prng.KERNEL["use"]
    prng.use_kernel(False)
    try:
        return fn(*args)
    finally:
        prng.use_kernel(old)


def _reference(key, x0, x1):
    """Threefry-2x32 element by element on Python ints (the cipher's definition)."""
    def rotl(v, r):
        return ((v << r) | (v >> (32 - r))) & 0xFFFFFFFF

    k0, k1 = int(key[0]), int(key[1])
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    a, b = (int(x0) + ks[0]) & 0xFFFFFFFF, (int(x1) + ks[1]) & 0xFFFFFFFF
    for i in range(5):
        for r in prng._ROTATIONS[i % 2]:
            a = (a + b) & 0xFFFFFFFF
            b = rotl(b, r) ^ a
        a = (a + ks[(i + 1) % 3]) & 0xFFFFFFFF
        b = (b + ks[(i + 2) % 3] + i + 1) & 0xFFFFFFFF
    return a, b


def _u32(shape):
    return RNG.integers(0, 2**32, shape, dtype=np.uint32)


SHAPES = [((2,), (5,)), ((8, 2), (1,)), ((8, 2), (7,)), ((3, 4, 2), (3, 4, 1)),
          ((2,), (6, 1)), ((3, 2), (0,)), ((3, 1, 2), (3, 4, 5)), ((1, 2), (4, 3))]


@pytest.mark.parametrize("key_shape, x_shape", SHAPES)
def test_kernel_equals_numpy_and_the_definition(key_shape, x_shape, kernel_on):
    key, x0, x1 = _u32(key_shape), _u32(x_shape), _u32(x_shape)
    got = prng.threefry2x32(key, x0, x1)
    want = _numpy(prng.threefry2x32, key, x0, x1)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.uint32 and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    # the definition, element by element (the broadcast of key [..., 1] with the counters)
    k0, k1 = key[..., 0:1], key[..., 1:2]
    kb0, kb1, b0, b1 = np.broadcast_arrays(k0, k1, x0, x1)
    for idx in list(np.ndindex(kb0.shape))[:50]:
        assert (got[0][idx], got[1][idx]) == _reference((kb0[idx], kb1[idx]), b0[idx], b1[idx])


def test_kernel_takes_the_forms_it_claims_and_declines_the_rest():
    key, c = _u32((4, 2)), _u32((9,))
    assert prng_kernel.threefry(key, c, c) is not None
    assert prng_kernel.threefry(key, _u32((4, 1)), _u32((4, 1))) is not None
    assert prng_kernel.threefry(key, c[None], c[None]) is not None
    assert prng_kernel.threefry(key, _u32(()), _u32(())) is None  # 0-d counters
    assert prng_kernel.threefry(key.astype(np.int64), c, c) is None  # not uint32
    assert prng_kernel.threefry(key, c, c[:3]) is None  # counters of two shapes
    assert prng_kernel.threefry(_u32((4, 3)), c, c) is None  # not a key
    ro = key.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(prng_kernel.threefry(ro, c, c)[0],
                                  prng_kernel.threefry(key, c, c)[0])
    strided = _u32((4, 4))[:, ::2]  # not contiguous: copied for the kernel
    np.testing.assert_array_equal(prng_kernel.threefry(strided, c, c)[1],
                                  prng_kernel.threefry(strided.copy(), c, c)[1])


def test_numpy_path_is_unchanged_by_the_rewrite():
    """The in-place NumPy rounds against the definition, on a batch with its own axes."""
    key, x0, x1 = _u32((3, 2)), _u32((3, 2)), _u32((3, 2))
    got = _numpy(prng.threefry2x32, key, x0, x1)  # key [3, 2] as [3, 1] against [3, 2]
    for i in range(3):
        for j in range(2):
            assert (got[0][i, j], got[1][i, j]) == _reference(key[i], x0[i, j], x1[i, j])


SEEDS = [np.int32(-3), np.int64(2**40 + 5), np.uint32(2**31 + 1), np.uint64(2**63 + 9), 0]


def _draws(seed):
    key = sl.random.key(seed)
    keys = sl.random.split(key, 6)
    return [sl.random.key_data(key) if hasattr(sl.random, "key_data") else key, keys,
            sl.random.fold_in(key, 12345), sl.random.fold_in(key, 2**32 - 1),
            sl.vmap(lambda k: sl.random.fold_in(k, 3))(keys),
            sl.random.bits(key, (5,)), sl.random.bits(key, (3,), np.uint8),
            sl.random.bits(key, (2, 2), np.uint64),
            sl.random.uniform(key, (7,), np.float32), sl.random.uniform(key, (3, 2)),
            sl.random.normal(key, (4,)), sl.random.normal(key, (4,), np.float32),
            sl.random.permutation(key, 10), sl.random.categorical(key, sl.zeros((4, 3)))]


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"{type(s).__name__}")
def test_draws_equal_bit_for_bit(seed, kernel_on):
    got = _draws(seed)
    want = _numpy(_draws, seed)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def test_vmap_of_split_and_many_keys(kernel_on):
    keys = sl.random.split(sl.random.key(1), 300)
    got = sl.vmap(lambda k: sl.random.split(k, 3))(keys)
    want = _numpy(lambda: np.stack([np.asarray(sl.random.split(k, 3)) for k in keys]))
    np.testing.assert_array_equal(np.asarray(got), want)
    nested = sl.vmap(sl.vmap(lambda k: sl.random.uniform(k, (2,))))(got)
    np.testing.assert_array_equal(np.asarray(nested), _numpy(
        lambda: np.asarray(sl.vmap(sl.vmap(lambda k: sl.random.uniform(k, (2,))))(got))))


def test_draws_equal_jax_with_the_kernel(kernel_on):
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        _equal_jax(jax)


def _equal_jax(jax):
    jkey, key = jax.random.PRNGKey(42), sl.random.key(42)
    np.testing.assert_array_equal(np.asarray(sl.random.split(key, 5)),
                                  np.asarray(jax.random.split(jkey, 5)))
    np.testing.assert_array_equal(np.asarray(sl.random.fold_in(key, 7)),
                                  np.asarray(jax.random.fold_in(jkey, 7)))
    np.testing.assert_array_equal(np.asarray(sl.random.bits(key, (6,))),
                                  np.asarray(jax.random.bits(jkey, (6,), np.uint32)))
    for dt in (np.float32, np.float64):
        np.testing.assert_array_equal(np.asarray(sl.random.uniform(key, (9,), dt)),
                                      np.asarray(jax.random.uniform(jkey, (9,), dt)))
    np.testing.assert_array_equal(np.asarray(sl.random.permutation(key, 12)),
                                  np.asarray(jax.random.permutation(jkey, 12)))


def test_draws_on_numpy_keys_are_one_kernel_call_each(monkeypatch):
    """With the kernel on, split, bits and unit floats of NumPy keys (one, a batch, a
    read-only view) call one numba function each, not the cipher with counters made apart."""
    old = prng.KERNEL["use"]
    prng.use_kernel(True)
    try:
        key = sl.random.key(7)
        keys = sl.random.split(key, 3)
        draws = [lambda k: sl.random.split(k, 4), lambda k: sl.random.bits(k, (2, 3)),
                 lambda k: sl.random.bits(k, (3,), np.uint64),
                 lambda k: sl.random.bits(k, (5,), np.uint8),
                 lambda k: sl.random.uniform(k, (4,), np.float32),
                 lambda k: sl.random.uniform(k, (2, 2)), lambda k: sl.random.normal(k, (3,))]
        want = [np.asarray(_numpy(d, key)) for d in draws]
        want_vmapped = [np.asarray(_numpy(sl.vmap(d), keys)) for d in draws]

        def no_cipher(*args):
            raise AssertionError("threefry2x32 called")

        monkeypatch.setattr(prng_kernel, "threefry", no_cipher)
        monkeypatch.setattr(prng, "_threefry_xp", no_cipher)
        frozen = np.asarray(keys).copy()
        frozen.flags.writeable = False
        for d, w, wv in zip(draws, want, want_vmapped):
            got = np.asarray(d(key))
            assert got.dtype == w.dtype
            np.testing.assert_array_equal(got, w)
            np.testing.assert_array_equal(np.asarray(sl.vmap(d)(keys)), wv)
            np.testing.assert_array_equal(np.asarray(sl.vmap(d)(frozen)), wv)
    finally:
        prng.use_kernel(old)


def test_jit_equals_numpy(kernel_on):
    def f(key):
        k1, k2 = sl.random.split(key)
        return sl.random.uniform(k1, (4,)) + sl.random.normal(k2, (4,))

    got = sl.jit(f)(sl.random.key(3))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(_numpy(f, sl.random.key(3))))


def test_first_compile_is_logged(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SCANLIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(prng_kernel, "_module", [])
    monkeypatch.setattr(prng_kernel, "_ready", [])
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        prng_kernel.threefry(_u32((2,)), _u32((3,)), _u32((3,)))
    text = caplog.text
    assert "compiling the threefry2x32 kernel" in text
    assert "the threefry2x32 kernel in" in text and str(tmp_path) in text
    assert list(tmp_path.rglob("scanlib_threefry_*.py"))


def test_default_switches_to_the_kernel_after_numpy_time(monkeypatch):
    calls = []
    real = prng_kernel.threefry
    monkeypatch.setattr(prng_kernel, "threefry", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setitem(prng.KERNEL, "use", None)
    monkeypatch.setitem(prng.KERNEL, "auto", None)
    monkeypatch.setitem(prng.KERNEL, "numpy_s", 0.0)
    monkeypatch.setattr(prng, "SWITCH_S", 1e9)
    key, c = _u32((2,)), _u32((4,))
    first = prng.threefry2x32(key, c, c)
    assert not calls and prng.KERNEL["numpy_s"] > 0
    monkeypatch.setattr(prng, "SWITCH_S", 0.0)
    second = prng.threefry2x32(key, c, c)
    assert calls and prng.KERNEL["auto"] is True
    np.testing.assert_array_equal(first[0], second[0])
    prng.use_kernel(False)
    calls.clear()
    prng.threefry2x32(key, c, c)
    assert not calls
    with pytest.raises(ValueError, match="use_kernel: on must be None, True or False"):
        prng.use_kernel("yes")


# --- inside scan bodies on the numba tier -------------------------------------------------------
def _scan_both(body, init, xs, **kw):
    """(numba tier result, NumPy tier result); a kernel must have run, without fallback."""
    want = sl.scan(body, init, xs, compiler="numpy", **kw)
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = sl.scan(body, init, xs, compiler="numba", **kw)
    assert native.STATS["kernel calls"] > before, "no numba kernel ran"
    return got, want


def _same_bits(got, want):
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8),
                                      np.atleast_1d(w).view(np.uint8))


@pytest.mark.parametrize("batch", [None, 3])
def test_rollout_body_draws_compile_bit_exact(batch):
    def body(key, x):
        key, sub = sl.random.split(key)
        keys = sl.random.split(sub, 4)
        u32 = sl.vmap(lambda k: sl.random.uniform(k, (), np.float32))(keys)
        u64 = sl.random.uniform(sub, (2, 3))
        b8, b64 = sl.random.bits(sub, (3,), np.uint8), sl.random.bits(sub, (2,), np.uint64)
        b32 = sl.random.bits(sub, ())
        # fold_in of xs data under vmap fails on the NumPy tier itself (a broadcast error)
        folded = sl.random.fold_in(sub, 11 if batch else x)
        folded_many = sl.vmap(lambda k: sl.random.fold_in(k, 3))(keys)
        folded_lit = sl.random.fold_in(sub, 2**32 - 7)
        action = sl.random.categorical(sub, sl.log(sl.tensor([[0.2, 0.3, 0.5]] * 4)))
        perm = sl.random.permutation(sub, 6)
        return key, (u32, u64, b8, b64, b32, folded, folded_many, folded_lit, action, perm)

    init = sl.random.key(5)
    xs = np.arange(5, dtype=np.int32)
    if batch:  # a batch of keys in the carry: the draws' batched forms
        init, body = sl.random.split(init, batch), sl.vmap(body, in_axes=(0, None))
    got, want = _scan_both(body, init, xs)
    _same_bits(got, want)


# Each mode once and each index dtype in two modes (every pair: six kernels, not three).
@pytest.mark.parametrize("mode, dtype", [("raise", np.int32), ("clip", np.int64),
                                         ("wrap", np.int32), ("raise", np.int64)],
                         ids=["raise-int32", "clip-int64", "wrap-int32", "raise-int64"])
def test_fixed_indices_and_gathers_in_a_body(mode, dtype):
    table = RNG.normal(size=(6, 3))

    def body(c, idx):
        rows = sl.take(table, idx, axis=0, mode=mode)
        picked = sl.take_along_axis(rows, (idx[:, None] % 3).astype(dtype), axis=-1)[:, 0]
        return c + picked.sum(), picked

    xs = RNG.integers(-6 if mode == "raise" else -20, 6 if mode == "raise" else 20,
                      (5, 4)).astype(dtype)
    got, want = _scan_both(body, np.float64(0.0), xs)
    _same_bits(got, want)


def test_fixed_indices_out_of_range_raises_numpys_error():
    def body(c, idx):
        return c + sl.take(np.arange(4.0), idx).sum(), idx

    xs = np.array([[0, 1], [2, 9]], np.int64)
    with pytest.raises(IndexError) as numpy_error:
        sl.scan(body, np.float64(0.0), xs, compiler="numpy")
    with pytest.raises(IndexError) as numba_error:
        sl.scan(body, np.float64(0.0), xs, compiler="numba")
    assert str(numba_error.value) == str(numpy_error.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gather_at_index_arrays_gradients(dtype):
    """take_along_axis (x[i, j] with [B, 1] index arrays) and its scatter in the backward
    body: values, gradients and (float64) second order on the numba tier equal the NumPy
    tier's. The second-order bodies hold the same gather and scatter again; in float32 they
    would add two kernels (six seconds) and no rule."""
    w0 = RNG.normal(size=(4, 3)).astype(dtype)
    actions = RNG.integers(0, 3, (6, 4))

    def loss(w, compiler):
        def body(c, a):
            logp = sl.nn.log_softmax(c * w, axis=-1)
            picked = sl.take_along_axis(logp, a[:, None], axis=-1)[:, 0]
            return c + 0.1 * sl.tanh(picked)[:, None], picked

        carry, ys = sl.scan(body, sl.ones((4, 3), dtype), actions, compiler=compiler)
        return (carry * carry).sum() + ys.sum()

    def grad2(w, compiler):
        g = sl.grad(loss)(w, compiler)
        return sl.grad(lambda w: (sl.grad(loss)(w, compiler) * g.numpy()).sum())(w)

    for fn in (loss, sl.grad(loss), grad2)[:3 if dtype == np.float64 else 2]:
        want = fn(w0, "numpy")
        before = native.STATS["kernel calls"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", sl.NumbaFallbackWarning)
            got = fn(w0, "numba")
        assert native.STATS["kernel calls"] > before
        assert np.asarray(got).dtype == np.asarray(want).dtype == dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12 if
                                   dtype == np.float64 else 1e-5, atol=1e-12)


def test_draws_in_a_body_under_jit():
    def run(key, compiler):
        def body(k, x):
            k, sub = sl.random.split(k)
            return k, sl.random.uniform(sub, (3,)) * x

        return sl.scan(body, key, sl.arange(4.0), compiler=compiler)[1]

    want = run(sl.random.key(9), "numpy")
    before = native.STATS["kernel calls"]
    got = sl.jit(lambda k: run(k, "numba"))(sl.random.key(9))
    assert native.STATS["kernel calls"] > before
    _same_bits(got, want)
