"""scan(..., compiler="numba"): the step loop as a numba kernel (scanlib/scan/loop/native.py).

Each body runs three ways, the Python loop on the tape (scan's definition), the NumPy loop
and the numba loop, and the numba one must agree in values, dtypes and gradients, and must
actually have run a kernel (a silent fallback would test nothing). Bodies numba cannot take,
or types it would change, fall back with a NumbaFallbackWarning and the NumPy loop's values;
errors inside a kernel come out as NumPy's. Kernels compile into a temporary cache directory
(conftest.py).
"""

import contextlib
import inspect
import sys
import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native
from test_scan_oracle import loop_scan


def _run(f, init, xs, reverse, scan_fn):
    def loss(init, xs):
        carry, ys = scan_fn(f, init, xs, reverse=reverse)
        leaves = sl.pytree.flatten((carry, ys))[0]
        total = 0.0
        for i, a in enumerate(leaves):
            if a.dtype.kind == "f":
                total = total + (a.astype("float64") * (0.5 + 0.1 * i)).sum()
        return total, leaves
    (value, leaves), grads = sl.value_and_grad(loss, argnums=(0, 1), has_aux=True)(init, xs)
    return value, leaves, sl.pytree.flatten(grads)[0]


def _agree(got, want, rtol):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64),
                               rtol=rtol, atol=rtol)


def check(f, init, xs, reverse=False, rtol=1e-10, kernels=True):
    """numba vs the loop and the NumPy loop; that a kernel ran (unless kernels=False)."""
    want = _run(f, init, xs, reverse, loop_scan)
    plain = _run(f, init, xs, reverse, sl.scan)
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = _run(f, init, xs, reverse, lambda *a, **k: sl.scan(*a, compiler="numba", **k))
    if kernels:
        assert native.STATS["kernel calls"] > before, "no numba kernel ran"
    for ref in (want, plain):
        _agree(sl.tensor(got[0]), sl.tensor(ref[0]), rtol)
        for g, w in zip(got[1] + got[2], ref[1] + ref[2]):
            _agree(g, w, rtol)


RNG = np.random.default_rng(0)


def _t(shape, dtype="float64", scale=1.0):
    return sl.tensor((scale * RNG.standard_normal(shape)).astype(dtype))


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_elementwise_rnn_with_two_carries_and_ys(reverse):
    W = _t((3, 3), scale=0.5)

    def f(c, x):
        h, s = c
        h = sl.tanh(h @ W + x * 0.5 - 1.0)
        s = s + sl.sum(h * h) / 2
        return (h, s), (sl.sigmoid(h), s * 2.0)

    check(f, (_t(3), sl.tensor(0.0)), _t((17, 3)), reverse)


def test_scalar_carries_holt_winters_form():
    a, b = sl.tensor(0.3), sl.tensor(0.1)

    def f(carry, y):
        level, trend, season = carry
        err = y - (level + trend + season[0])
        season = sl.concatenate([season[1:], (season[0] + b * err)[None]])
        return (level + trend + a * err, trend + a * b * err, season), err

    check(f, (sl.tensor(1.0), sl.tensor(0.1), _t(4)), _t(20))


def test_reductions_over_axes_max_min_keepdims_and_logsumexp():
    def f(c, x):
        m = sl.max(c[:, None] + x, axis=0)
        lo = sl.min(x, axis=1, keepdims=True)
        s = sl.sum(x * lo, axis=(0, 1))
        return sl.logsumexp(c[:, None] + x, axis=0) - m * 0.1, (s, sl.max(x), lo)

    check(f, _t(4), _t((9, 4, 4)))


def test_where_comparisons_clip_and_float32():
    def f(c, x):
        h = sl.where(c > 0, c * x, -0.5 * c)
        h = sl.clip(h, -2.0, 2.0) + sl.abs(x) * (x < 0.3)
        return h, sl.exp(h).astype("float32") * 2

    check(f, _t(5, "float32"), _t((12, 5), "float32"), rtol=2e-5)


def test_float32_lstm_with_sigmoids_of_split_views():
    # numba's sigmoid listed its float64 loop first, which a float32 input casts to safely:
    # the gates came back float64 and this body fell back to NumPy.
    Wx, Wh = _t((3, 16), "float32", 0.3), _t((4, 16), "float32", 0.3)

    def f(c, x):
        h, cell = c
        i, g, o, u = sl.split(x @ Wx + h @ Wh, 4, axis=-1)
        cell = sl.sigmoid(u) * cell + sl.sigmoid(i) * sl.tanh(g)
        h = sl.sigmoid(o) * sl.tanh(cell)
        return (h, cell), sl.sum(h)

    check(f, (_t((2, 4), "float32"), _t((2, 4), "float32")), _t((9, 2, 3), "float32"),
          rtol=2e-5)


def test_softplus_and_log_sigmoid_with_their_second_derivative():
    # softplus is one primitive with a numba form, its gradient softplus_grad another (the
    # step of an HMC leapfrog differentiates a log_sigmoid likelihood, and its scan's VJP
    # differentiates that gradient again)
    w = _t(3, "float64", 2.0)

    def f(c, x):
        g = sl.grad(lambda v: (sl.log_sigmoid(v * x) + sl.softplus(v - x)).sum())(c)
        return c + 0.1 * g, sl.softplus(x * 20.0) - sl.log_sigmoid(-c)

    check(f, w, _t((8, 3), "float64", 3.0))
    check(lambda c, x: (sl.softplus(c * x), sl.log_sigmoid(x)), _t(4, "float32"),
          _t((6, 4), "float32"), rtol=2e-5)


def test_gather_and_scatter_of_a_diagonal_and_static_slices():
    def f(c, x):
        M = c[:, None] * x + sl.eye(3)
        d = sl.diagonal(M)
        return M[1] + d * M[::-1, 0], sl.sum(M[1:, :2])

    check(f, _t(3), _t((8, 3, 3)))


def test_kalman_step_with_linalg():
    F = sl.tensor(0.9 * np.eye(2) + 0.05 * RNG.standard_normal((2, 2)), requires_grad=True)
    H = _t((1, 2))

    def f(carry, y):
        m, P = carry
        m, P = F @ m, F @ P @ F.T + 0.1 * sl.eye(2)
        S = H @ P @ H.T + 0.2
        L = sl.linalg.cholesky(S)
        v = y - H @ m
        z = sl.linalg.solve_triangular(L, v[:, None], lower=True)
        K = sl.linalg.solve(S, H @ P).T
        ll = -0.5 * sl.sum(z * z) - sl.sum(sl.log(sl.diagonal(L)))
        return (m + K @ v, P - K @ H @ P), ll

    check(f, (_t(2), sl.tensor(np.eye(2))), _t((10, 1)))


def test_an_int32_scalar_carry_stays_int32_and_wraps_as_numpys():
    # numba adds int32 scalars in int64: the kernel casts back, and wraps at 2**31 as
    # NumPy's int32 does.
    def f(c, x):
        n, s = c
        n = n + np.int32(1)
        return (n, s + x), n * np.int32(3) - np.int32(2)

    init, xs = (sl.tensor(np.int32(2**31 - 3)), sl.tensor(0.0)), _t(5)
    with np.errstate(over="ignore"):
        want = sl.scan(f, init, xs, compiler="numpy")
        before = native.STATS["kernel calls"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", sl.NumbaFallbackWarning)
            got = sl.scan(f, init, xs, compiler="numba")
    assert native.STATS["kernel calls"] > before
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert got[1].numpy()[3] < 0  # wrapped


@contextlib.contextmanager
def little_recursion(room=400):
    """Python's recursion limit `room` frames above the caller's depth: numba walks a
    carry's definitions recursively, and a long body exceeded the default limit of 1000."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + room)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def long_chain(h, n=60):
    """n operations in a row on h, each a loop nest in a kernel."""
    for _ in range(n):
        h = sl.sin(h) * 0.5
    return h


def test_a_carry_read_after_a_long_chain_of_operations_compiles():
    def f(c, x):
        h = long_chain(c)
        return c * 0.9 + h + x, None  # c read again after the chain

    init, xs = _t(4), _t((3, 4))
    want = sl.scan(f, init, xs, compiler="numpy")
    before = native.STATS["kernel calls"]
    with little_recursion(), warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = sl.scan(f, init, xs, compiler="numba")
    assert native.STATS["kernel calls"] > before
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


def test_a_primitive_without_a_rule_falls_back_with_a_warning():
    def f(c, x):
        return sl.erf(c + x), sl.sort(x)

    with pytest.warns(sl.NumbaFallbackWarning, match="no numba rule"):
        carry, ys = sl.scan(f, _t(3), _t((4, 3)), compiler="numba")
    ref = sl.scan(f, _t(3) * 0 + carry * 0 + _t(3), _t((4, 3)))  # runs: the numpy path
    assert ref[1].shape == ys.shape


def test_an_error_inside_the_kernel_is_numpys():
    def f(c, x):
        return c, sl.linalg.cholesky(c * x)  # x < 0 at step 2: not positive definite

    xs = sl.tensor(np.array([1.0, 2.0, -1.0, 3.0]))
    with pytest.raises(np.linalg.LinAlgError, match="cholesky"):
        sl.scan(f, sl.tensor(np.eye(2)), xs, compiler="numba")


def test_an_index_out_of_range_is_numpys_with_the_step():
    E = _t((4, 2))

    def f(c, i):
        return c + sl.take(E, sl.stack([i, i]), axis=0).sum(), None

    idx = sl.tensor(np.array([0, 1, 2, 9]))
    with pytest.raises(IndexError, match="step t=3"):
        sl.scan(f, sl.tensor(0.0), idx, compiler="numba")


def test_numpy_and_numba_entries_of_one_body_are_separate():
    def f(c, x):
        return sl.sin(c) + x, c

    xs = _t((6, 2))
    a = sl.scan(f, _t(2), xs)
    before = native.STATS["kernel calls"]
    b = sl.scan(f, _t(2) * 0 + a[0] * 0 + _t(2), xs, compiler="numba")
    assert native.STATS["kernel calls"] > before
    c = sl.scan(f, b[0], xs)
    assert c[1].shape == (6, 2)


def test_the_default_compiler_is_settable_and_checked():
    old = sl.set_loop_compiler("numba")
    try:
        assert old == "numpy"
        before = native.STATS["kernel calls"]
        sl.scan(lambda c, x: (c * x, c), _t(2), _t((3, 2)))
        assert native.STATS["kernel calls"] > before
    finally:
        assert sl.set_loop_compiler(old) == "numba"
    with pytest.raises(ValueError, match="compiler must be one of"):
        sl.scan(lambda c, x: (c, c), _t(2), _t((3, 2)), compiler="jax")
    with pytest.raises(ValueError, match="compiler must be one of"):
        sl.set_loop_compiler("numbaa")


def test_the_kernel_source_is_printed_python():
    w = native._NativeWriter  # noqa: F841 - the printer exists where the docs say
    from scanlib.scan.executor import compiled
    from scanlib.scan.api import prepare

    body, *_ = prepare(lambda c, x: (c * 2.0 + x, c), _t(2), _t((3, 2)), None, False, 0)
    cb = compiled(body, 1, 1, False, (), "numba")
    assert "@numba.njit" in cb.native.kernel_source and "_kernel(t0, t1" in cb.native.source


# What an adversarial test found numba computing otherwise than NumPy: each falls back now.
@pytest.mark.parametrize("f, init, xs", [
    (lambda c, x: (sl.fmod(c, x), c), np.array([-5, -1, 7]), np.array([[3, 2, -2]])),
    (lambda c, x: (sl.where(c < 1000, c + x, c - x), c), np.array([1], np.int8),
     np.array([[1]], np.int8)),
    (lambda c, x: (sl.sign(c) + x, c), np.array([255], np.uint8), np.array([[0]], np.uint8)),
    (lambda c, x: (sl.floor_divide(c, x), c), np.array([1.0, np.inf]),
     np.array([[-np.inf, 1.0]])),
], ids=["int fmod", "int8 vs 1000", "sign of uint8", "floor_divide at inf"])
def test_forms_numba_computes_otherwise_fall_back(f, init, xs):
    want = sl.scan(f, sl.tensor(init), sl.tensor(xs))
    with pytest.warns(sl.NumbaFallbackWarning):
        got = sl.scan(f, sl.tensor(init), sl.tensor(xs), compiler="numba")
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())


def test_a_zero_on_a_triangular_diagonal_raises_numpys_error():
    f = lambda c, x: (sl.linalg.solve_triangular(x, c, lower=True), c)  # noqa: E731
    with pytest.raises(np.linalg.LinAlgError, match="diagonal"):
        sl.scan(f, sl.tensor(np.ones((2, 1))), sl.tensor([[[2.0, 7.0], [1.0, 0.0]]]),
                compiler="numba")


def test_errstate_raise_runs_the_numpy_loop():
    f = lambda c, x: (c / x, c)  # noqa: E731
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        sl.scan(f, sl.tensor([1.0, 2.0]), sl.tensor([[0.0, 1.0]]), compiler="numba")


def _runs_the_numpy_loop_without_a_warning(f, init, xs):
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = sl.scan(f, init, xs, compiler="numba")
    assert native.STATS["kernel calls"] == before
    want = sl.scan(f, init, xs)
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_a_step_on_large_values_runs_the_numpy_loop_without_a_warning():
    # NumPy's loops over 1,600 elements and BLAS's 64,000-term product are faster
    W = _t((40, 40), scale=0.1)
    f = lambda c, x: (sl.tanh(c @ W + x), c.sum())  # noqa: E731
    _runs_the_numpy_loop_without_a_warning(f, _t((40, 40)), _t((5, 40, 40)))


def test_a_float64_step_of_many_small_operations_on_2000_values_is_a_kernel():
    """CTC's alpha recursion: a logsumexp of shifted copies on [8, 243] values, no product.
    NumPy's calls cost more than their loops there, and the kernel runs it."""
    skip = _t((8, 243)).numpy() > 0

    def f(alpha, logp):
        advance = sl.concatenate([sl.full((8, 1), -1e5), alpha[:, :-1]], axis=1)
        jump = sl.where(skip, sl.concatenate([sl.full((8, 2), -1e5), alpha[:, :-2]], axis=1),
                        -1e5)
        new = sl.logsumexp(sl.stack([alpha, advance, jump]), axis=0) + logp
        return new, new.sum()

    check(f, _t((8, 243)), _t((6, 8, 243)), rtol=1e-9)


@pytest.mark.parametrize("dtype, shape", [("float32", (8, 243)), ("float64", (130, 130))])
def test_float32_work_or_a_very_large_step_keeps_the_numpy_loop(dtype, shape):
    # NumPy's SIMD loops over float32, and its loops over more than 16,384 elements, are faster
    f = lambda c, x: (sl.tanh(c * 0.5 + x), c.sum())  # noqa: E731
    _runs_the_numpy_loop_without_a_warning(f, _t(shape, dtype), _t((4,) + shape, dtype))


def test_why_the_numpy_loop_is_faster_names_the_reason():
    def eqns(f, *args):
        return sl.make_graph(f)(*args).eqns

    def many_operations(a):
        for _ in range(20):
            a = a * 0.5 + 1.0
        return sl.exp(a)

    small, mid = np.ones((8, 100)), np.ones((8, 243))
    assert native.numpy_loop_is_faster(eqns(lambda a: sl.exp(a) * 2.0, small)) is None
    # a few transcendental calls on large values: NumPy's SIMD loops; many operations: the
    # kernel, which pays no call's fixed cost
    assert "exp on large values" in native.numpy_loop_is_faster(
        eqns(lambda a: sl.exp(a) * 2.0, mid))
    assert native.numpy_loop_is_faster(eqns(many_operations, mid)) is None
    assert "float32" in native.numpy_loop_is_faster(eqns(lambda a: sl.exp(a),
                                                         mid.astype(np.float32)))
    assert "16384" in native.numpy_loop_is_faster(eqns(lambda a: a * 2.0, np.ones((130, 130))))
    # under "auto" (measured): the estimate decides up to MEASURED_STEP, then NumPy
    assert native.numpy_loop_is_faster(eqns(lambda a: a * 2.0, np.ones((130, 130))),
                                       measured=True) is None
    assert "65536" in native.numpy_loop_is_faster(eqns(lambda a: a * 2.0, np.ones((300, 300))),
                                                  measured=True)
    assert "exp on large values" in native.numpy_loop_is_faster(
        eqns(lambda a: sl.exp(a) * 2.0, np.ones((130, 130))), measured=True)
    rnn = native.numpy_loop_is_faster(eqns(lambda h, w: sl.tanh(h @ w), np.ones((40, 40)),
                                           np.ones((40, 40))))
    assert "matmul, tanh on large values" in rnn and "as NumPy calls" in rnn
    # a product alone is BLAS's either way (numba's @ calls it)
    assert native.numpy_loop_is_faster(eqns(lambda a, w: a @ w, np.ones((32, 64)),
                                            np.ones((64, 64)))) is None
    # ... but a batched one is a loop nest in the kernel, even where its result is small
    assert "matmul on large values" in native.numpy_loop_is_faster(
        eqns(lambda a, w: a @ w, np.ones((4, 64, 32)), np.ones((4, 32, 16))))
    assert "matmul on large values" in native.numpy_loop_is_faster(
        eqns(lambda a, w: a @ w, np.ones((4, 8, 64)), np.ones((4, 64, 8))))


def test_the_estimate_counts_shared_logistic_work_once():
    # a logistic regression's log-likelihood and its gradient: four sigmoid and softplus of
    # z and -z, whose kernel computes exp(-|z|) once (native_rules.Fusion)
    def loglik(z):
        return sl.softplus(z) + sl.softplus(-z) + sl.sigmoid(z) - sl.sigmoid(sl.negative(-z))

    mid = np.ones((4, 500))
    assert "estimated" in native.numpy_loop_is_faster(
        sl.make_graph(lambda z: sl.exp(z) + sl.log(z) + sl.tanh(z) + sl.sin(z))(mid).eqns)
    assert native.numpy_loop_is_faster(sl.make_graph(loglik)(mid).eqns) is None


def test_a_large_carry_returned_unchanged_does_not_keep_the_numpy_loop():
    # a rollout carries the model's parameters through unchanged: they are read per step,
    # like a closed-over value, and the step's own values are small
    def f(c, x):
        W, h = c
        return (W, sl.tanh(h @ W + x)), h.sum()

    check(f, (_t((130, 130), scale=0.05), _t((2, 130))), _t((6, 2, 130)))
    changed = lambda c, x: ((c[0] * 0.5, sl.tanh(c[1] @ c[0] + x)), c[1].sum())  # noqa: E731
    # W changes: 16,900 values a step
    _runs_the_numpy_loop_without_a_warning(changed, (_t((130, 130), scale=0.05), _t((2, 130))),
                                           _t((6, 2, 130)))


def test_a_slow_compile_says_so_while_it_runs(monkeypatch, caplog):
    monkeypatch.setattr(native, "SLOW_COMPILE_S", 0)  # every compile counts as slow here
    f = lambda c, x: (c * 0.987654 + sl.sin(x), c)  # noqa: E731 - a body no test compiled
    with caplog.at_level("WARNING", logger="scanlib.numba"):
        sl.scan(f, _t(3), _t((4, 3)), compiler="numba")
    assert any("still compiling the step loop of scan body" in r.getMessage()
               for r in caplog.records)
