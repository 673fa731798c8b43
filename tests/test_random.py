"""scanlib.random: keys and raw bits equal JAX's bit for bit (golden values here, and against
jax.random where JAX is installed), draws are deterministic and independent across split keys,
their moments and frequencies are right, they work inside scan bodies (a key in the carry)
exactly as in the Python loop, gradients flow to distribution parameters and never to keys,
and bad keys, shapes and dtypes raise.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import scanlib as sl
from scanlib import random as r
from scanlib.testing import check_grads

from opcheck import N, P, case, table_tests, jax_x64, jax_with_scanlibs_threefry

K = r.key(0)
# jax.random with jax_threefry_partitionable=True (JAX >= 0.5), recorded from JAX 0.10.2.
GOLDEN_SPLIT_0_3 = [[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009]]
GOLDEN_BITS_0_3 = [4070199207, 4202968722, 1427181096]
GOLDEN_UNIFORM32_0_3 = [0.947667, 0.9785799, 0.33229148]


def _np(t):
    return t.numpy() if isinstance(t, sl.Tensor) else np.asarray(t)


# --- golden values (no JAX needed) ---------------------------------------------------------
def test_key_split_fold_in_and_bits_match_recorded_jax_values():
    assert r.key(0).dtype == np.uint32 and r.key(0).shape == (2,)
    np.testing.assert_array_equal(_np(r.PRNGKey(42)), [0, 42])
    np.testing.assert_array_equal(_np(r.split(K, 3)), GOLDEN_SPLIT_0_3)
    np.testing.assert_array_equal(_np(r.split(K)), GOLDEN_SPLIT_0_3[:2])  # partitionable
    np.testing.assert_array_equal(_np(r.fold_in(K, 1)), GOLDEN_SPLIT_0_3[1])
    np.testing.assert_array_equal(_np(r.bits(K, (3,))), GOLDEN_BITS_0_3)
    np.testing.assert_array_equal(_np(r.bits(K, (3,), np.uint8)), [167, 146, 40])
    np.testing.assert_array_equal(_np(r.uniform(K, (3,), np.float32)),
                                  np.array(GOLDEN_UNIFORM32_0_3, np.float32))


def test_seeds_are_read_as_64_bit_integers():
    np.testing.assert_array_equal(_np(r.key(-1)), [2**32 - 1, 2**32 - 1])
    np.testing.assert_array_equal(_np(r.key(2**32 + 5)), [1, 5])
    np.testing.assert_array_equal(_np(r.key(np.int64(7))), [0, 7])
    np.testing.assert_array_equal(_np(r.key(sl.tensor(np.int32(-1)))), [0, 2**32 - 1])


def test_threefry2x32_matches_the_random123_known_answer():
    # Known-answer vector of Threefry-2x32-20 from the Random123 distribution (kat_vectors).
    key = np.array([0x13198A2E, 0x03707344], np.uint32)
    x0, x1 = r.threefry2x32(key, np.array([0x243F6A88], np.uint32),
                            np.array([0x85A308D3], np.uint32))
    assert (int(x0[0]), int(x1[0])) == (0xC4923A9C, 0x483DF7A0)


# --- against JAX, where it is installed ----------------------------------------------------


@pytest.fixture(scope="module")
def jax():
    return jax_with_scanlibs_threefry()


def _exact(ours, theirs):
    ours, theirs = _np(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("seed", [0, 1, 42, 2**31 - 1, 2**32 - 1])
def test_keys_split_fold_in_bits_equal_jax(jax, seed):
    jr = jax.random
    k, jk = r.key(seed), jr.PRNGKey(seed)
    _exact(k, jr.key_data(jr.key(seed)))
    _exact(r.PRNGKey(seed), jk)
    _exact(r.split(k), jr.split(jk))
    _exact(r.split(k, 5), jr.split(jk, 5))
    _exact(r.split(k, (2, 3)), jr.split(jk, (2, 3)))
    for data in (0, 3, 2**32 - 1):
        _exact(r.fold_in(k, data), jr.fold_in(jk, data))
    for dtype in ("uint8", "uint16", "uint32"):
        _exact(r.bits(k, (4, 5), dtype), jr.bits(jk, (4, 5), dtype))
    _exact(r.uniform(k, (7, 3), np.float32), jr.uniform(jk, (7, 3), np.float32))
    _exact(r.uniform(k, (11,), np.float16), jr.uniform(jk, (11,), np.float16))


@pytest.mark.parametrize("seed", [0, -1, 2**40 + 3])
def test_64_bit_draws_equal_jax_with_x64(jax, seed):
    jr = jax.random
    with jax_x64(jax):
        k, jk = r.key(seed), jr.PRNGKey(seed)
        _exact(k, jk)
        _exact(r.bits(k, (9,), np.uint64), jr.bits(jk, (9,), np.uint64))
        _exact(r.uniform(k, (1000,)), jr.uniform(jk, (1000,), np.float64))
        for dtype in ("int8", "uint8", "int16", "int32", "uint32", "int64"):
            _exact(r.randint(k, (50,), -3, 100, dtype), jr.randint(jk, (50,), -3, 100, dtype))
        _exact(r.randint(k, (50,), 0, 256, "uint8"), jr.randint(jk, (50,), 0, 256, "uint8"))
        lo = np.array([-5, 0, 1, 2])
        _exact(r.randint(k, (3, 4), lo, 5), jr.randint(jk, (3, 4), lo, 5))
        _exact(r.randint(k, (5,), 7, 3), jr.randint(jk, (5,), 7, 3))
        _exact(r.bernoulli(k, 0.3, (100,)), jr.bernoulli(jk, 0.3, (100,)))
        _exact(r.bernoulli(k, shape=(100,)), jr.bernoulli(jk, shape=(100,)))


def test_permutation_choice_and_categorical_equal_jax(jax):
    jr = jax.random
    with jax_x64(jax):
        k, jk = r.key(3), jr.PRNGKey(3)
        for n in (1, 5, 100, 3000):  # 3000 items take two sorting rounds
            _exact(r.permutation(k, n), jr.permutation(jk, n))
        x = np.arange(24.0).reshape(4, 6)
        _exact(r.permutation(k, sl.tensor(x), axis=1), jr.permutation(jk, x, axis=1))
        _exact(r.permutation(k, sl.tensor(x), 1, True), jr.permutation(jk, x, 1, True))
        p = np.array([0.1, 0.2, 0.3, 0.15, 0.25])
        _exact(r.choice(k, 10, (20,)), jr.choice(jk, 10, (20,)))
        _exact(r.choice(k, 10, (2, 3), replace=False), jr.choice(jk, 10, (2, 3), replace=False))
        _exact(r.choice(k, 5, (500,), p=p), jr.choice(jk, 5, (500,), p=p))
        _exact(r.choice(k, 5, (3,), False, p), jr.choice(jk, 5, (3,), False, p))
        _exact(r.choice(k, sl.tensor(x), (2, 2), axis=1), jr.choice(jk, x, (2, 2), axis=1))
        logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))
        _exact(r.categorical(k, logits, shape=(500, 2)),
               jr.categorical(jk, logits, shape=(500, 2)))
        _exact(r.categorical(k, logits, axis=0), jr.categorical(jk, logits, axis=0))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_and_bounded_uniform_agree_with_jax_to_a_few_ulps(jax, dtype):
    """Not bit-exact: erfinv and log1p are XLA's own, and XLA fuses u * span + lo into one
    multiply-add; the uniforms underneath are exact (test above)."""
    jr = jax.random
    with jax_x64(jax):
        k, jk = r.key(5), jr.PRNGKey(5)
        eps = np.finfo(dtype).eps
        ours, theirs = _np(r.normal(k, (20000,), dtype)), np.asarray(jr.normal(jk, (20000,), dtype))
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=40 * eps, atol=40 * eps)
        ours = _np(r.uniform(k, (2000,), dtype, -0.3, 2.7))
        np.testing.assert_allclose(ours, jr.uniform(jk, (2000,), dtype, -0.3, 2.7),
                                   rtol=4 * eps, atol=4 * eps)


# --- distributions -------------------------------------------------------------------------
def test_the_erfinv_behind_normal_is_accurate():
    for dtype, tol in (("float64", 8e-16), ("float32", 3e-7)):
        lo = float(np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype)))
        u = _np(r.uniform(K, (3000,), dtype, lo, 1.0))
        z = _np(r.normal(K, (3000,), dtype)).astype(np.float64)
        back = np.array([math.erf(v / math.sqrt(2)) for v in z])
        np.testing.assert_allclose(back, u.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_moments_of_100k_draws(dtype):
    n = 100_000
    z = _np(r.normal(K, (n,), dtype)).astype(np.float64)
    assert abs(z.mean()) < 0.02 and abs(z.var() - 1) < 0.03
    ecdf_gap = np.max(np.abs(np.arange(1, n + 1) / n - 0.5 * (1 + _erf(np.sort(z) / 2**0.5))))
    assert ecdf_gap < 2.0 / math.sqrt(n)  # Kolmogorov-Smirnov at about the 0.1% level
    u = _np(r.uniform(r.key(1), (n,), dtype)).astype(np.float64)
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.003
    u = _np(r.uniform(r.key(1), (n,), dtype, -2.0, 6.0)).astype(np.float64)
    assert -2 <= u.min() and u.max() < 6 and abs(u.mean() - 2) < 0.04
    e = _np(r.exponential(r.key(2), (n,), dtype)).astype(np.float64)
    assert e.min() >= 0 and abs(e.mean() - 1) < 0.02 and abs(e.var() - 1) < 0.05
    g = _np(r.gumbel(r.key(3), (n,), dtype)).astype(np.float64)
    assert abs(g.mean() - np.euler_gamma) < 0.02 and abs(g.var() - np.pi**2 / 6) < 0.06


def _erf(x):
    return np.vectorize(math.erf)(x)


def test_bernoulli_rate_and_broadcast_p():
    assert abs(_np(r.bernoulli(K, 0.3, (100_000,))).mean() - 0.3) < 0.01
    p = sl.tensor([0.1, 0.9])
    b = _np(r.bernoulli(K, p, (50_000, 2)))
    assert b.dtype == np.bool_ and b.shape == (50_000, 2)
    np.testing.assert_allclose(b.mean(axis=0), [0.1, 0.9], atol=0.01)
    assert r.bernoulli(K, p).shape == (2,)


def test_categorical_frequencies_follow_softmax():
    logits = sl.tensor([[1.0, 0.0, -1.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    i = _np(r.categorical(K, logits, shape=(50_000, 2)))
    assert i.shape == (50_000, 2) and i.dtype.kind == "i"
    want = _np(sl.softmax(logits))
    for row in range(2):
        freq = np.bincount(i[:, row], minlength=4) / len(i)
        np.testing.assert_allclose(freq, want[row], atol=5 * np.sqrt(0.25 / len(i)))
    j = _np(r.categorical(K, sl.tensor([[-np.inf, 0.0], [0.0, -np.inf]]), axis=1))
    np.testing.assert_array_equal(j, [1, 0])  # a zero probability is never drawn
    assert r.categorical(K, logits, axis=0).shape == (4,)


def test_choice_frequencies_and_no_repeats_without_replacement():
    p = sl.tensor([0.1, 0.2, 0.3, 0.4])
    i = _np(r.choice(K, 4, (40_000,), p=p))
    np.testing.assert_allclose(np.bincount(i, minlength=4) / len(i), _np(p), atol=0.015)
    unweighted = _np(r.choice(K, 4, (40_000,)))
    np.testing.assert_allclose(np.bincount(unweighted) / len(i), 0.25, atol=0.015)
    for s in range(20):
        k = r.key(s)
        for draw in (r.choice(k, 10, (7,), replace=False),
                     r.choice(k, 10, (2, 5), replace=False, p=sl.arange(1.0, 11.0))):
            assert len(set(_np(draw).ravel().tolist())) == _np(draw).size
    # weights without replacement: the heaviest item is almost always taken first
    first = [int(_np(r.choice(r.key(s), 3, (2,), False, p=[0.01, 0.01, 0.98]))[0])
             for s in range(50)]
    assert first.count(2) >= 45


def test_choice_of_an_array_along_an_axis():
    x = sl.arange(12.0).reshape(3, 4)
    rows = r.choice(K, x, (5,))
    assert rows.shape == (5, 4)
    cols = _np(r.choice(K, x, (3,), replace=False, axis=1))
    assert cols.shape == (3, 3) and len(set(cols[0].tolist())) == 3
    assert set(cols[0].tolist()) <= {0.0, 1.0, 2.0, 3.0}
    assert r.choice(K, x, (2, 2), replace=False, axis=1).shape == (3, 2, 2)
    np.testing.assert_array_equal(cols[1] - cols[0], 4.0)  # the same columns of every row


def test_permutation_is_a_permutation():
    for n in (0, 1, 2, 10, 3000):
        perm = _np(r.permutation(K, n))
        np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    x = sl.tensor(np.arange(20.0).reshape(4, 5))
    rows = _np(r.permutation(K, x))
    np.testing.assert_array_equal(np.sort(rows[:, 0]), [0, 5, 10, 15])
    np.testing.assert_array_equal(rows - rows[:, :1], np.tile(np.arange(5.0), (4, 1)))
    indep = _np(r.permutation(K, x, axis=1, independent=True))
    np.testing.assert_array_equal(np.sort(indep, axis=1), _np(x))
    assert len({tuple(np.argsort(row)) for row in indep}) > 1


def test_randint_range_dtype_and_spread():
    d = _np(r.randint(K, (60_000,), 1, 7))
    assert d.dtype == np.int64 and d.min() == 1 and d.max() == 6
    np.testing.assert_allclose(np.bincount(d)[1:] / len(d), 1 / 6, atol=0.01)
    small = _np(r.randint(K, (1000,), -128, 128, np.int8))
    assert small.dtype == np.int8 and small.min() == -128 and small.max() == 127
    assert _np(r.randint(K, (4,), 5, 5)).tolist() == [5] * 4  # empty range gives minval


# --- determinism, independence, shapes and dtypes ------------------------------------------
def test_the_same_key_gives_the_same_numbers_and_split_keys_differ():
    np.testing.assert_array_equal(_np(r.normal(K, (5,))), _np(r.normal(r.key(0), (5,))))
    keys = r.split(K, 100)
    assert len({tuple(_np(k)) for k in keys}) == 100
    draws = np.stack([_np(r.normal(k, (1000,))) for k in keys[:10]])
    corr = np.corrcoef(draws)
    assert np.max(np.abs(corr - np.eye(10))) < 0.15  # 1000 draws: |r| ~ 0.03 by chance
    assert not np.array_equal(_np(r.normal(r.fold_in(K, 1), (5,))),
                              _np(r.normal(r.fold_in(K, 2), (5,))))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shapes_and_dtypes(shape, dtype):
    for fn in (r.uniform, r.normal, r.gumbel, r.exponential):
        out = fn(K, shape, dtype)
        assert out.shape == shape and out.dtype == dtype, fn.__name__
    assert r.uniform(K, shape).dtype == np.float64  # scanlib's default float
    assert r.uniform(K, shape, dtype, sl.tensor(0.5), 2.0).dtype == dtype
    assert r.bits(K, shape).dtype == np.uint32 and r.bits(K, shape).shape == shape
    assert r.bits(K, shape, np.uint64).dtype == np.uint64
    assert r.randint(K, shape, 0, 3, np.int32).dtype == np.int32
    assert r.bernoulli(K, dtype(0.5), shape).shape == shape
    assert r.choice(K, 5, shape).shape == shape
    assert r.split(K, shape).shape == shape + (2,)


def test_float32_parameters_keep_float32_arithmetic():
    lo, hi = np.float32(0.1), np.float32(0.7)
    u = _np(r.uniform(K, (100,), np.float32))
    want = np.maximum(lo, u * (hi - lo) + lo)
    np.testing.assert_array_equal(_np(r.uniform(K, (100,), np.float32, 0.1, 0.7)), want)


# --- gradients: parameters yes, keys never ---------------------------------------------------
def test_gradients_flow_to_uniform_bounds_and_normal_parameters():
    check_grads(lambda lo, hi: r.uniform(K, (5,), minval=lo, maxval=hi),
                [np.array([-1.0, 0.0, 0.5, 1.0, 2.0]), np.array(3.0)], order=2)
    check_grads(lambda m, s: m + s * r.normal(K, (4,)), [np.array(0.3), np.array(1.5)],
                order=2)
    lo = sl.tensor(1.0, requires_grad=True)
    u = _np(r.uniform(K, (6,)))
    g = sl.grad(lambda lo: sl.sum(r.uniform(K, (6,), minval=lo, maxval=4.0)))(lo)
    np.testing.assert_allclose(_np(g), np.sum(1 - u), rtol=1e-12)


def test_choice_is_differentiable_in_the_items_not_the_weights():
    x = sl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    p = sl.tensor([0.2, 0.3, 0.5], requires_grad=True)
    idx = _np(r.choice(K, 3, (6,), p=p))
    gx, gp = sl.grad(lambda x, p: sl.sum(r.choice(K, x, (6,), p=p)), argnums=(0, 1))(x, p)
    np.testing.assert_array_equal(_np(gx), np.bincount(idx, minlength=3))
    np.testing.assert_array_equal(_np(gp), 0.0)


def test_keys_and_integer_draws_have_no_gradient():
    with pytest.raises(TypeError, match="floating"):
        sl.tensor(r.key(0), requires_grad=True)
    logits = sl.tensor([0.0, 1.0], requires_grad=True)
    out = r.categorical(K, logits, shape=(3,))
    assert out.dtype.kind == "i" and not out.requires_grad


# The draws are float64 whatever the parameters' dtype (JAX's promotion), so float32 and
# float64 parameters see the same noise and their gradients agree.
U64, Z64, E64 = (_np(fn(K, (3, 4))) for fn in (r.uniform, r.normal, r.exponential))


def _np_uniform(lo, w):
    lo64, hi64 = lo.astype(np.float64), (lo + w).astype(np.float64)
    return np.maximum(lo64, U64 * (hi64 - lo64) + lo64)


KEY = _np(K)  # a const of each case: the table moves it to the backend's device
CASES = [
    case("uniform-bounds", lambda k, lo, w: r.uniform(k, (3, 4), minval=lo, maxval=lo + w),
         (N, (3, 4)), (P, (4,)), consts=(KEY,), ref=lambda k, lo, w: _np_uniform(lo, w)),
    case("normal-loc-scale", lambda k, m, s: m + s * r.normal(k, (3, 4)), (N, (4,)),
         (P, (3, 1)), consts=(KEY,), ref=lambda k, m, s: m + s * Z64),
    case("exponential-rate", lambda k, lam: r.exponential(k, (3, 4)) / lam, (P, (4,)),
         consts=(KEY,), ref=lambda k, lam: E64 / lam),
]
(test_forward_matches_numpy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(CASES)


# --- inside scan bodies --------------------------------------------------------------------
def _noisy_walk(carry, x):
    key, h = carry
    key, sub = r.split(key)
    y = h * 0.9 + x * r.normal(sub, (3,))
    return (key, y), y


def test_a_key_in_the_carry_draws_new_numbers_each_step_as_the_loop_does(backend):
    xs = backend.tensor(np.linspace(0.5, 1.5, 6))
    init = (backend.tensor(r.key(0)), backend.tensor(np.zeros(3)))
    (key, h), ys = sl.scan(_noisy_walk, init, xs)
    backend.check_device(ys)
    backend.check_device(key)
    ys = _np(ys)
    assert len({tuple(row) for row in ys}) == 6  # every step differs
    carry, loop = init, []
    for t in range(6):
        carry, y = _noisy_walk(carry, xs[t])
        loop.append(_np(y))
    np.testing.assert_array_equal(ys, np.stack(loop))
    np.testing.assert_array_equal(_np(key), _np(carry[0]))
    (_, _), again = sl.scan(_noisy_walk, init, xs)
    np.testing.assert_array_equal(_np(again), ys)
    (_, _), interpreted = sl.scan(_noisy_walk, init, xs, interpret=True)
    np.testing.assert_array_equal(_np(interpreted), ys)


def test_traced_seeds_and_fold_in_of_a_traced_step_index(backend):
    seeds = backend.tensor(np.arange(4, dtype=np.int64))

    def body(c, t):
        return c, sl.stack([r.uniform(r.key(t), ()), r.uniform(r.fold_in(c, t), ())])

    _, ys = sl.scan(body, backend.tensor(r.key(9)), seeds)
    want = [[_np(r.uniform(r.key(t), ())), _np(r.uniform(r.fold_in(r.key(9), t), ()))]
            for t in range(4)]
    np.testing.assert_array_equal(_np(ys), want)


def test_gradient_through_draws_in_a_scan_matches_the_loop():
    s = sl.tensor(0.7)

    def loss_scan(s):
        (_, h), ys = sl.scan(lambda c, x: _noisy_walk(c, x * s), (K, sl.zeros(3)),
                             sl.ones(5))
        return sl.sum(ys * ys)

    def loss_loop(s):
        c, total = (K, sl.zeros(3)), 0.0
        for _ in range(5):
            c, y = _noisy_walk(c, s)
            total = total + sl.sum(y * y)
        return total

    np.testing.assert_allclose(_np(sl.grad(loss_scan)(s)), _np(sl.grad(loss_loop)(s)),
                               rtol=1e-12)


def _particle_filter(resample, n=64):
    """A bootstrap particle filter for x_t = 0.9 x_{t-1} + w, y_t = x_t + v (unit noises)."""
    def step(carry, y):
        key, particles, loglik = carry
        key, k_move, k_pick = r.split(key, 3)
        particles = 0.9 * particles + r.normal(k_move, (n,))
        logw = -0.5 * (y - particles) ** 2
        loglik = loglik + sl.logsumexp(logw) - math.log(n) - 0.5 * math.log(2 * math.pi)
        particles = resample(k_pick, particles, logw)
        return (key, particles, loglik), sl.mean(particles)

    return step


def _by_categorical(k, particles, logw):
    return particles[r.categorical(k, logw, shape=(particles.shape[0],))]


def _by_choice(k, particles, logw):
    return r.choice(k, particles, (particles.shape[0],), p=sl.softmax(logw))


@pytest.mark.parametrize("resample", [_by_categorical, _by_choice])
def test_a_bootstrap_particle_filter_runs_in_scan_and_is_reproducible(backend, resample):
    rng = np.random.default_rng(0)
    x, obs = 0.0, []
    for _ in range(20):
        x = 0.9 * x + rng.standard_normal()
        obs.append(x + rng.standard_normal())
    ys = backend.tensor(np.array(obs))
    init = (backend.tensor(r.key(1)), backend.tensor(np.zeros(64)), backend.tensor(0.0))
    step = _particle_filter(resample)
    (_, _, loglik), means = sl.scan(step, init, ys)
    (_, _, again), means2 = sl.scan(step, init, ys)
    assert float(_np(loglik)) == float(_np(again))
    np.testing.assert_array_equal(_np(means), _np(means2))
    carry = init
    for t in range(20):
        carry, _ = step(carry, ys[t])
    np.testing.assert_allclose(_np(carry[2]), _np(loglik), rtol=1e-12)
    # the exact log-likelihood of this linear-Gaussian model, by the Kalman filter
    m, v, exact = 0.0, 0.0, 0.0
    for y in obs:
        m, v = 0.9 * m, 0.81 * v + 1.0
        exact += -0.5 * (math.log(2 * math.pi * (v + 1)) + (y - m) ** 2 / (v + 1))
        gain = v / (v + 1)
        m, v = m + gain * (y - m), (1 - gain) * v
    assert abs(float(_np(loglik)) - exact) < 3.0
    assert np.all(np.abs(_np(means) - np.array(obs)) < 5)


# --- CuPy: the numbers follow the key's device -----------------------------------------------
def test_draws_on_the_backend_device_equal_the_cpu_ones(backend):
    k = backend.tensor(r.key(3))
    for out, want in ((r.normal(k, (4,)), r.normal(r.key(3), (4,))),
                      (r.split(k, 3), r.split(r.key(3), 3)),
                      (r.fold_in(k, 5), r.fold_in(r.key(3), 5)),
                      (r.randint(k, (4,), 0, 9), r.randint(r.key(3), (4,), 0, 9)),
                      (r.permutation(k, 6), r.permutation(r.key(3), 6)),
                      (r.choice(k, 4, (5,), p=backend.tensor([0.1, 0.2, 0.3, 0.4])),
                       r.choice(r.key(3), 4, (5,), p=sl.tensor([0.1, 0.2, 0.3, 0.4]))),
                      (r.categorical(k, backend.tensor([0.0, 1.0, 2.0]), shape=(5,)),
                       r.categorical(r.key(3), sl.tensor([0.0, 1.0, 2.0]), shape=(5,)))):
        backend.check_device(out)
        np.testing.assert_array_equal(_np(out), _np(want))



# --- findings of the adversarial review ----------------------------------------------------
@pytest.mark.parametrize("logits_shape, axis, shape, full", [
    ((1, 3), -1, (4,), (4, 3)),
    ((1, 3), -1, (2, 4), (4, 3)),
    ((3, 1), 0, (5,), (3, 5)),
    ((2, 1, 3), -1, (2, 6), (2, 6, 3)),
])
def test_categorical_broadcasts_a_size_1_batch_axis_to_shape(logits_shape, axis, shape, full):
    """The noise has `shape` plus the category axis, as in JAX: logits broadcast into it."""
    logits = np.log(np.random.default_rng(0).uniform(0.1, 1.0, logits_shape))
    drawn = r.categorical(K, logits, axis=axis, shape=shape)
    assert drawn.shape == shape
    np.testing.assert_array_equal(
        _np(drawn), _np(r.categorical(K, np.broadcast_to(logits, full), axis=axis,
                                      shape=shape)))


def test_categorical_with_a_size_1_batch_axis_equals_jax(jax):
    jr = jax.random
    with jax_x64(jax):
        k, jk = r.key(5), jr.PRNGKey(5)
        logits = np.log(np.array([[0.2, 0.3, 0.5]]))
        _exact(r.categorical(k, logits, shape=(4,)), jr.categorical(jk, logits, shape=(4,)))
        _exact(r.categorical(k, logits, shape=(3, 7)), jr.categorical(jk, logits, shape=(3, 7)))
        _exact(r.categorical(k, logits.T, axis=0, shape=(6,)),
               jr.categorical(jk, logits.T, axis=0, shape=(6,)))


def test_numpy_integer_seeds_keep_their_dtype_as_tensor_seeds_do():
    for seed in (np.uint64(2**63 + 1), np.int32(-1), np.uint32(2**32 - 1), np.int8(-3)):
        np.testing.assert_array_equal(_np(r.key(seed)), _np(r.key(sl.tensor(seed))))
    np.testing.assert_array_equal(_np(r.key(np.uint64(2**63 + 1))), [2**31, 1])
    np.testing.assert_array_equal(_np(r.key(np.int32(-1))), [0, 2**32 - 1])


def test_numpy_integer_seeds_equal_jax(jax):
    with jax_x64(jax):
        for seed in (np.uint64(2**63 + 1), np.int32(-1), np.int64(-1), np.uint16(7)):
            _exact(r.key(seed), jax.random.PRNGKey(seed))


def test_small_integer_randint_clips_bounds_beyond_int32_instead_of_wrapping():
    """Documented difference from JAX (docs/random.md): JAX wraps 2**31 to int32's -2**31."""
    drawn = _np(r.randint(K, (4000,), 0, 2**31, "int8"))
    assert drawn.dtype == np.int8 and drawn.min() >= 0 and len(np.unique(drawn)) == 128
    np.testing.assert_array_equal(_np(r.randint(K, (50,), 0, 2**40, "uint16")),
                                  _np(r.randint(K, (50,), 0, 2**16, "uint16")))
    np.testing.assert_array_equal(_np(r.randint(K, (50,), -2**31 - 1, 5, "int16")),
                                  _np(r.randint(K, (50,), -2**15, 5, "int16")))


def test_small_integer_randint_equals_jax_for_bounds_within_int32(jax):
    jr = jax.random
    with jax_x64(jax):
        k, jk = r.key(3), jr.PRNGKey(3)
        for dtype in ("int8", "int16", "uint8", "uint16"):
            for lo, hi in [(0, 1000), (-5000, 70000), (-2**31, 2**31 - 1)]:
                _exact(r.randint(k, (64,), lo, hi, dtype), jr.randint(jk, (64,), lo, hi, dtype))


def test_bits_defaults_to_uint32_as_jax_withoutjax_x64(jax):
    jr = jax.random
    _exact(r.bits(K, (5,)), jr.bits(jr.PRNGKey(0), (5,)))
    with jax_x64(jax):  # JAX's default follows x64 mode; scanlib's stays uint32
        assert r.bits(K, (5,)).dtype == np.uint32
        _exact(r.bits(K, (5,), np.uint64), jr.bits(jr.PRNGKey(0), (5,)))


def test_messages_for_scalar_choice_empty_categorical_and_articles():
    with pytest.raises(TypeError, match=r"a must be an int .* at least 1 dimension, got f64\[\]"):
        r.choice(K, 3.0, (2,))
    with pytest.raises(ValueError, match=r"no categories along axis 0"):
        r.categorical(K, sl.zeros((0,)))
    with pytest.raises(ValueError, match=r"no categories along axis 1"):
        r.categorical(K, sl.zeros((2, 0)), shape=(4, 2))
    with pytest.raises(ValueError, match=r"at least 1 dimension"):
        r.categorical(K, sl.tensor(0.0))
    with pytest.raises(TypeError, match=r"got an int\."):
        r.normal(0, (2,))
    with pytest.raises(TypeError, match=r"got a float$"):
        r.key(1.5)

# --- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.array([0, 0]), [0, 1], sl.tensor([0.0, 1.0]), 0])
def test_a_key_that_is_not_uint32_is_a_type_error_saying_how_to_make_one(bad):
    with pytest.raises(TypeError, match=r"scanlib\.random\.key\(") as err:
        r.normal(bad, (2,))
    assert "uint32[2]" in str(err.value)


def test_keys_of_the_wrong_shape_and_bad_seeds():
    with pytest.raises(TypeError, match="one key.*u32\\[4,2\\].*keys\\[i\\]"):
        r.split(r.split(K, 4))
    with pytest.raises(TypeError, match="one key"):
        r.uniform(sl.tensor(np.zeros(3, np.uint32)))
    with pytest.raises(TypeError, match="seed must be an int"):
        r.key(1.5)
    with pytest.raises(TypeError, match="scalar integer"):
        r.key(sl.tensor([1, 2]))
    with pytest.raises(ValueError, match="64-bit"):
        r.key(2**64)
    with pytest.raises(ValueError, match="out of range for uint32"):
        r.fold_in(K, -1)


def test_bad_shapes_dtypes_and_parameters():
    with pytest.raises(ValueError, match="negative"):
        r.normal(K, (2, -1))
    with pytest.raises(TypeError, match="tuple of ints"):
        r.normal(K, (2.0,))
    with pytest.raises(ValueError, match=r"broadcast to the shape argument \(3,\)"):
        r.uniform(K, (3,), minval=sl.zeros(4))
    with pytest.raises(ValueError, match="broadcast"):
        r.uniform(K, (), maxval=sl.ones(2))  # would silently grow the result
    with pytest.raises(TypeError, match="floating"):
        r.uniform(K, (2,), np.int32)
    with pytest.raises(TypeError, match="unsigned"):
        r.bits(K, (2,), np.int32)
    with pytest.raises(TypeError, match="integer dtype"):
        r.randint(K, (2,), 0, 5, np.float32)
    with pytest.raises(TypeError, match="bounds must be integers"):
        r.randint(K, (2,), sl.tensor(0.5), 5)
    with pytest.raises(TypeError, match="p must be a float"):
        r.bernoulli(K, sl.tensor(1))
    with pytest.raises(TypeError, match="logits must be floats"):
        r.categorical(K, sl.tensor([1, 2]))
    with pytest.raises(ValueError, match="out of range"):
        r.categorical(K, sl.zeros(3), axis=1)


def test_choice_and_permutation_errors():
    with pytest.raises(ValueError, match="without replacement"):
        r.choice(K, 3, (4,), replace=False)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        r.choice(K, 3, (2,), p=[0.5, 0.5])
    with pytest.raises(ValueError, match="non-negative"):
        r.choice(K, 3, (2,), p=[0.5, -0.1, 0.6])
    with pytest.raises(ValueError, match="fewer than"):
        r.choice(K, 3, (2,), replace=False, p=[1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="greater than 0"):
        r.choice(K, 0, (2,))
    with pytest.raises(TypeError, match="integer or at least 1-d"):
        r.permutation(K, 2.5)
    with pytest.raises(TypeError, match="traced"):
        sl.scan(lambda c, n: (c, r.permutation(K, n)), 0.0, sl.tensor([3, 3]))


@pytest.mark.parametrize("w", [[0.1, np.nan, 0.3], [0.0, 0.0, 0.0], [0.2, -0.1, 0.5],
                               [0.0, 0.0, 1.0]])
def test_bad_weights_known_only_inside_a_trace_raise_as_the_loop_does(w):
    # Checked when the values are there (a checked_weights equation), so the scan raises
    # the loop's ValueError, and under jit every call is checked.
    items = sl.tensor([1.0, 2.0, 3.0])

    def body(c, w):
        return c, (r.choice(K, items, (4,), p=w), r.choice(K, items, (2,), False, w),
                   r.choice(K, 3, (2,), p=w))

    with pytest.raises(ValueError, match="choice: p ") as loop:
        body(0.0, sl.tensor(w))
    with pytest.raises(ValueError, match="choice: p ") as scanned:
        sl.scan(body, 0.0, sl.tensor([w]))
    assert str(scanned.value) == str(loop.value)
    _, (good, _, _) = sl.scan(body, 0.0, sl.tensor([[0.2, 0.3, 0.5]]))
    np.testing.assert_array_equal(_np(good)[0], _np(r.choice(K, items, (4,), p=[0.2, 0.3, 0.5])))


@pytest.mark.parametrize("T", [3, 4])  # T = 4: the number of keys, where shapes would agree
@pytest.mark.parametrize("compiler", ["numpy", "numba"])
def test_fold_in_of_a_batch_of_keys_with_data_from_xs(T, compiler):
    # The loop compiler batches fold_in over the steps (its data comes from xs alone): the
    # keys vmap made [4, 2] must meet each step's datum, not be paired with the steps.
    if compiler == "numba":
        pytest.importorskip("numba")
    keys = sl.random.split(sl.random.key(0), 4)

    def f(c, x):
        u = sl.vmap(lambda k: sl.random.uniform(sl.random.fold_in(k, x), ()))(keys)
        return c + u.sum(), u

    xs = sl.tensor(np.arange(T) * 3 + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.NumbaFallbackWarning)
        c, us = sl.scan(f, sl.tensor(0.0), xs, compiler=compiler)
    want = np.array([[float(sl.random.uniform(sl.random.fold_in(keys[i], 3 * t + 1), ()))
                      for i in range(4)] for t in range(T)])
    np.testing.assert_array_equal(us.numpy(), want)
    assert float(c) == float(sl.tensor(want).sum())  # the same additions, in the loop's order


def test_fold_in_under_vmap_of_keys_data_or_both():
    keys = sl.random.split(sl.random.key(1), 3)
    data = sl.tensor(np.array([5, 6, 7]))
    one = [[sl.random.key_data(sl.random.fold_in(keys[i], int(d))).numpy() for d in (5, 6, 7)]
           for i in range(3)]
    both = sl.vmap(sl.random.fold_in)(keys, data)
    keys_only = sl.vmap(lambda k: sl.random.fold_in(k, 6))(keys)
    data_only = sl.vmap(lambda d: sl.random.fold_in(keys[2], d))(data)
    nested = sl.vmap(lambda d: sl.vmap(lambda k: sl.random.fold_in(k, d))(keys))(data)
    data_of = sl.random.key_data
    np.testing.assert_array_equal(data_of(both).numpy(), [one[i][i] for i in range(3)])
    np.testing.assert_array_equal(data_of(keys_only).numpy(), [one[i][1] for i in range(3)])
    np.testing.assert_array_equal(data_of(data_only).numpy(), one[2])
    np.testing.assert_array_equal(data_of(nested).numpy(),
                                  [[one[i][j] for i in range(3)] for j in range(3)])


def _erfinv64_by_selects(x):
    """XLA's float64 erfinv as selects over three regions for every element (the oracle):
    prng's own select path, which it takes for any array namespace other than NumPy's."""
    from types import SimpleNamespace

    from scanlib.ops.prng import _erfinv64

    numpy_by_another_name = SimpleNamespace(log1p=np.log1p, sqrt=np.sqrt, where=np.where)
    with np.errstate(all="ignore"):
        return _erfinv64(numpy_by_another_name, x)


@pytest.mark.parametrize("shape", [(1000,), (3, 7), (1,), ()])
def test_float64_erfinv_by_its_central_polynomial_is_the_selects_bit_for_bit(shape):
    """Where most values are central (a normal draw's), erfinv runs the central polynomial
    on all and the selects on the others: the same floats as the selects everywhere."""
    from scanlib.ops.prng import _erfinv64

    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, shape)
    flat = x.reshape(-1)
    edges = [1.0, -1.0, np.nan, 0.0, -0.0, 0.9999999, -0.99999999999, np.nextafter(1, 0),
             0.9981, -0.9982, 2.0, 0.9995, -0.99995, 0.999999, 0.99999999, np.inf]
    flat[::5] = np.resize(edges, flat[::5].shape)
    near_one = 1 - 10.0 ** -rng.uniform(2.5, 16, flat[1::5].shape)  # the two outer regions
    flat[1::5] = near_one * np.sign(rng.uniform(-1, 1, near_one.shape))
    with np.errstate(all="ignore"):
        got = _erfinv64(np, x)
    want = _erfinv64_by_selects(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got).view(np.uint64),
                                  np.asarray(want).view(np.uint64))


def test_multinomial_counts_are_jaxs():
    """jax.random.multinomial's numbers for the same key (one binomial per outcome), its
    shapes and dtypes: batched n and p, a zero probability, float32 p, under jit and vmap;
    each row's counts sum to its n."""
    cases = [(10.0, [0.2, 0.3, 0.5], None), (7, [[0.1, 0.9], [0.5, 0.5]], None),
             (np.array([3.0, 50.0]), [0.25, 0.25, 0.5], (2, 3)),
             (100.0, np.float32([0.2, 0.3, 0.5]), None), (20.0, [0.0, 0.0, 1.0, 0.0], None),
             (1000.0, [0.6, 0.4], (5, 2))]
    for n, p, shape in cases:
        got = sl.random.multinomial(sl.random.PRNGKey(3), sl.tensor(n) if isinstance(
            n, np.ndarray) else n, sl.tensor(np.asarray(p)), shape=shape)
        assert got.shape == (shape or np.shape(p))
        np.testing.assert_array_equal(got.numpy().sum(-1), np.broadcast_to(n, got.shape[:-1]))
    f = sl.jit(lambda k, p: sl.random.multinomial(k, 10.0, p))
    k, p = sl.random.PRNGKey(1), sl.tensor([0.2, 0.3, 0.5])
    np.testing.assert_array_equal(f(k, p).numpy(), sl.random.multinomial(k, 10.0, p).numpy())
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        for seed in range(3):
            for n, p, shape in cases:
                want = jax.random.multinomial(jax.random.PRNGKey(seed),  # n typed, as ours
                                              jax.numpy.asarray(np.asarray(n)),
                                              jax.numpy.asarray(p), shape=shape)
                got = sl.random.multinomial(sl.random.PRNGKey(seed), sl.tensor(np.asarray(n)),
                                            sl.tensor(np.asarray(p)), shape=shape)
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got.numpy(), np.asarray(want))
