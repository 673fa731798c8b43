"""compiler="auto" (the default where numba is installed): kernels compile in a background
process while the NumPy loop runs the calls, then the calls run them; a body numba does not
take stays on the NumPy loop with a note on the log and no warning; without numba, "auto"
is "numpy". Values and gradients are the NumPy loop's (to rounding once a kernel runs)."""

from __future__ import annotations

import logging
import os
import warnings

import numpy as np
import pytest

import scanlib as sl
from scanlib.scan import api

numba = pytest.importorskip("numba")

from scanlib.scan.loop import native, native_background  # noqa: E402


def _wait_for_background(timeout=240.0):
    if not native_background.wait_idle(timeout):
        pytest.fail("the background compile process did not answer in time")


def _rnn_loss(W, compiler):
    def loss(h0, xs):
        def f(h, x):
            h = sl.tanh(h @ W + x)
            return h, (h * h).sum()
        h, ys = sl.scan(f, h0, xs, compiler=compiler)
        return ys.sum() + (h * h).sum()
    return loss


def _data(seed, T=50, n=3):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(n, n)) * 0.4
    return W, sl.tensor(rng.normal(size=(T, n))), sl.tensor(rng.normal(size=n))


@pytest.mark.usefixtures("fresh_kernel_cache")
def test_a_first_call_runs_the_numpy_loop_and_later_calls_the_kernel(caplog):
    W, xs, h0 = _data(0)
    want_v, want_g = sl.value_and_grad(_rnn_loss(W, "numpy"), argnums=(0, 1))(h0, xs)
    f = sl.value_and_grad(_rnn_loss(W, "auto"), argnums=(0, 1))
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        v, g = f(h0, xs)  # the kernels are not compiled yet: the NumPy loop's own values
    assert float(v) == float(want_v)
    for a, b in zip(g, want_g):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    asked = [r.getMessage() for r in caplog.records if "in a background process" in r.getMessage()]
    assert len(asked) == 2, asked  # the forward body and the backward body
    _wait_for_background()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        v, g = f(h0, xs)
    loaded = [r for r in caplog.records if "from numba's disk cache" in r.getMessage()]
    assert len(loaded) == 2, loaded  # both kernels loaded at this call, and ran in it
    np.testing.assert_allclose(float(v), float(want_v), rtol=1e-13)
    for a, b in zip(g, want_g):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)


def test_a_kernel_proved_before_loads_without_the_background_process(caplog):
    W, xs, h0 = _data(1)
    loss = _rnn_loss(W, "auto")
    sl.grad(loss)(h0, xs)
    _wait_for_background()
    # The same body traced anew (a new graph, a new kernel object, the same source): its
    # proof is recorded beside the kernel, so it loads at its first call.
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        before = native.STATS["kernel calls"]
        g = sl.grad(_rnn_loss(W, "auto"))(h0, xs)
    assert not [r for r in caplog.records if "in a background process" in r.getMessage()]
    assert native.STATS["kernel calls"] > before
    np.testing.assert_allclose(g.numpy(), sl.grad(_rnn_loss(W, "numpy"))(h0, xs).numpy(),
                               rtol=1e-12)


def test_a_body_numba_does_not_take_stays_on_the_numpy_loop_without_a_warning(caplog):
    xs = sl.tensor(np.random.default_rng(2).normal(size=(20, 4)))

    def f(c, x):
        return c * 0.5 + x + sl.argsort(c), c.sum()  # argsort has no numba rule

    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        with caplog.at_level(logging.INFO, logger="scanlib.numba"):
            c, ys = sl.scan(f, sl.tensor(np.zeros(4)), xs, compiler="auto")
    want_c, want_ys = sl.scan(f, sl.tensor(np.zeros(4)), xs, compiler="numpy")
    np.testing.assert_array_equal(c.numpy(), want_c.numpy())
    np.testing.assert_array_equal(ys.numpy(), want_ys.numpy())
    notes = [r for r in caplog.records if "runs as the NumPy loop" in r.getMessage()]
    assert notes and notes[0].levelno == logging.INFO and "argsort" in notes[0].getMessage()


def test_a_failed_background_compile_leaves_the_numpy_loop(monkeypatch, caplog):
    # A background process that cannot start: the job fails, the body keeps the NumPy loop.
    # (A size no other test uses: a kernel another test compiled would load from the disk.)
    monkeypatch.setattr(native_background, "_WORKER", native_background._Worker())
    monkeypatch.setattr(native_background.sys, "executable", "/nonexistent/python")
    W, xs, h0 = _data(3, T=7, n=5)
    want = sl.grad(_rnn_loss(W, "numpy"))(h0, xs).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        with caplog.at_level(logging.INFO, logger="scanlib.numba"):
            for _ in range(3):
                np.testing.assert_array_equal(sl.grad(_rnn_loss(W, "auto"))(h0, xs).numpy(),
                                              want)
    assert any("does not start" in r.getMessage() for r in caplog.records)


def test_while_loop_and_jit_under_auto():
    old = sl.set_loop_compiler("auto")
    try:
        def body(c):
            return c[0] * 1.5 + c[1], c[1] + 0.25

        def run(x):
            return sl.while_loop(lambda c: c[0] < 100.0, body, (x, sl.tensor(1.0)))[0]

        W, xs, h0 = _data(4, T=30)
        jitted = sl.jit(sl.value_and_grad(_rnn_loss(W, None)))
        want_w = float(run(sl.tensor(1.0)))
        want_v, want_g = jitted(h0, xs)  # asks for the scans' kernels
        jitted(h0, xs)  # and then for the one fused kernel
        _wait_for_background()
        before = dict(native.STATS)
        for _ in range(2):
            assert float(run(sl.tensor(1.0))) == want_w  # carries the same ops, in order
            v, g = jitted(h0, xs)
            np.testing.assert_allclose(float(v), float(want_v), rtol=1e-13)
            np.testing.assert_allclose(g.numpy(), want_g.numpy(), rtol=1e-12, atol=1e-14)
        assert native.STATS["while_loop kernel calls"] > before.get("while_loop kernel calls", 0)
        assert native.STATS["fused calls"] > before.get("fused calls", 0)
    finally:
        sl.set_loop_compiler(old)


def test_auto_is_numpy_where_numba_is_not_installed(monkeypatch):
    monkeypatch.setattr(api, "_numba_installed", lambda: False)
    monkeypatch.setattr(api, "_DEFAULT_COMPILER", ["auto"])
    assert api.default_compiler() == "numpy"
    assert api._check_compiler("auto") == "numpy"


def test_a_bad_default_compiler_names_the_environment_variable(monkeypatch):
    monkeypatch.setenv("SCANLIB_LOOP_COMPILER", "fast")
    with pytest.raises(ValueError, match="SCANLIB_LOOP_COMPILER.*'fast'"):
        api._from_environment()
    monkeypatch.setenv("SCANLIB_LOOP_COMPILER", " NumPy ")
    assert api._from_environment() == "numpy"
    monkeypatch.delenv("SCANLIB_LOOP_COMPILER")
    assert api._from_environment() == "auto"


def test_tier_choice_keeps_the_faster_tier_once_each_has_its_samples():
    choice = native.TierChoice("a body")
    assert choice.kernel_turn()
    choice.record("kernel", 9.0, 3)  # the first kernel call loads it: left out
    for _ in range(native.TierChoice.SAMPLES):
        assert choice.kernel_turn()
        choice.record("kernel", 6.0, 3)
    assert not choice.kernel_turn()  # the NumPy code's turn, to compare
    for seconds in (2.0, 4.0, 9.0):
        choice.record("numpy", seconds, 2)
    assert choice.decided == "numpy" and not choice.kernel_turn()  # 1 s a step against 2
    choice.record("kernel", 0.001, 1)  # decided: nothing changes it
    assert choice.decided == "numpy"

    choice = native.TierChoice("a body")
    for seconds in (5.0, 3.0, 3.0, 3.0):
        choice.record("numpy", seconds)  # while the kernel compiles
    assert choice.kernel_turn()
    for seconds in (50.0, 2.0, 2.5, 2.0):
        choice.record("kernel", seconds)
    assert choice.decided == "kernel"


def test_auto_settles_on_a_tier_by_measuring_both(caplog):
    W, xs, h0 = _data(5, T=40, n=2)
    want = sl.grad(_rnn_loss(W, "numpy"))(h0, xs).numpy()
    f = sl.grad(_rnn_loss(W, "auto"))
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        f(h0, xs)
        _wait_for_background()
        for _ in range(2 * native.TierChoice.SAMPLES + 2):
            np.testing.assert_allclose(f(h0, xs).numpy(), want, rtol=1e-12, atol=1e-14)
    decided = [r.getMessage() for r in caplog.records if "(the kernel " in r.getMessage()]
    assert len(decided) == 2, decided  # the forward body and the backward body


@pytest.mark.usefixtures("fresh_kernel_cache")
def test_a_jitted_call_asks_for_its_scans_kernels_before_its_fused_kernel(caplog):
    # The scans' own kernels compile sooner and run the calls until the one kernel is ready;
    # then the faster of the two runs (on a Kalman filter, the scans' own kernels).
    W, xs, h0 = _data(6, T=20, n=6)
    jitted = sl.jit(sl.value_and_grad(_rnn_loss(W, "auto")))
    want_v, want_g = sl.value_and_grad(_rnn_loss(W, "numpy"))(h0, xs)
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        for _ in range(3):
            v, g = jitted(h0, xs)
            np.testing.assert_allclose(float(v), float(want_v), rtol=1e-13)
            np.testing.assert_allclose(g.numpy(), want_g.numpy(), rtol=1e-12, atol=1e-14)
    asked = [r.getMessage() for r in caplog.records if "in a background process" in r.getMessage()]
    assert len(asked) == 3, asked  # the forward body's, the backward body's, then the one
    assert ["one fused kernel" in a for a in asked] == [False, False, True], asked
    _wait_for_background()
    for _ in range(2 * native.TierChoice.SAMPLES + 2):
        v, g = jitted(h0, xs)
        np.testing.assert_allclose(g.numpy(), want_g.numpy(), rtol=1e-12, atol=1e-14)
    (trace,) = jitted._traces.values()
    assert trace.fused.choice.decided in ("kernel", "numpy")


def _values():
    base = np.arange(24.0).reshape(2, 3, 4)
    readonly = np.ones(3, np.float32)
    readonly.flags.writeable = False
    yield from [base, base.T, base[:, ::2], base[0], base[0, :, 1], base[..., 0].T,
                np.asfortranarray(base), base.astype(np.int32)[:, 1:], np.ones((), np.int8),
                np.zeros((0, 3)), np.zeros((3, 0), order="F"), np.ones(5, bool), readonly,
                np.ones((2, 2), np.complex64)[:, :1], np.ones(1, np.uint16)]
    yield from [np.float32(1.5), np.int64(3), np.bool_(True), np.complex128(1j), np.uint8(7)]
    yield from [True, 3, -(2 ** 62), 2.5, 1j]


@pytest.mark.parametrize("value", list(_values()), ids=lambda v: type(v).__name__)
def test_argument_types_name_what_numba_types(value):
    (kind,) = native.argument_types([value])
    assert numba.typeof(native.proxy(kind)) == numba.typeof(value)


@pytest.mark.parametrize("value", [np.ones(3, ">f8"), np.zeros(3, object), 2 ** 64, "a",
                                   np.zeros(4, np.dtype([("a", "f8")])),
                                   np.frombuffer(bytes(17), np.float64, 2, offset=1)])
def test_argument_types_leave_other_values_to_numba(value):
    assert native.argument_types([value]) is None


def test_a_first_call_does_not_import_numba(tmp_path):
    # numba's start-up (about half a second) is paid when a kernel is ready, not before.
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, scanlib as sl\n"
        "c, ys = sl.scan(lambda c, x: (sl.tanh(c * 0.5 + x), c), sl.tensor(np.zeros(3)),\n"
        "                sl.tensor(np.ones((20, 3))))\n"
        "print('numba' in sys.modules, float(c.sum()))\n")
    env = dict(os.environ, SCANLIB_LOOP_COMPILER="auto", SCANLIB_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "False", out.stdout


def test_a_kernel_that_leaves_each_call_to_numpy_gives_numpys_values():
    # The kernel's solve defers a pivot within n * eps of the largest entry to NumPy: it
    # raises, and the NumPy loop runs the call (its time counts against the kernel).
    A = sl.tensor(np.array([[1.0, 1.0], [1.0, 1.0 + 4e-16]]))

    def f(c, x):
        return sl.linalg.solve(A, c * 0.5 + x) * 1e-16, c.sum()

    xs = sl.tensor(np.ones((50, 2)))
    want_c, want_ys = sl.scan(f, sl.tensor(np.ones(2)), xs, compiler="numpy")
    sl.scan(f, sl.tensor(np.ones(2)), xs, compiler="auto")
    _wait_for_background()
    for _ in range(2 * native.TierChoice.SAMPLES + 2):
        c, ys = sl.scan(f, sl.tensor(np.ones(2)), xs, compiler="auto")
        np.testing.assert_array_equal(c.numpy(), want_c.numpy())
        np.testing.assert_array_equal(ys.numpy(), want_ys.numpy())


@pytest.mark.usefixtures("fresh_kernel_cache")
def test_a_step_past_the_size_rule_is_timed_under_auto(caplog):
    """A step of 16,900 float64 elements is past LARGE_STEP (the numba tier keeps the NumPy
    loop: test_numba_loop), but under "auto", which times both, its kernel is compiled and
    the faster of the two runs it; values the NumPy loop's to rounding."""
    rng = np.random.default_rng(3)
    c0, xs = sl.tensor(rng.normal(size=(130, 130))), sl.tensor(rng.normal(size=(4, 130, 130)))

    def run(compiler):
        def loss(c0, xs):
            h, ys = sl.scan(lambda c, x: (c * 0.5 + x * x, (c * c).sum()), c0, xs,
                            compiler=compiler)
            return (h * h).sum() + ys.sum()
        return sl.value_and_grad(loss)(c0, xs)

    want_v, want_g = run("numpy")
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        run("auto")
        _wait_for_background()
        for _ in range(2 * native.TierChoice.SAMPLES + 2):
            v, g = run("auto")
    messages = [r.getMessage() for r in caplog.records]
    assert any("in a background process" in m for m in messages), messages
    assert any("runs it" in m for m in messages), messages  # TierChoice decided
    np.testing.assert_allclose(float(v), float(want_v), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), want_g.numpy(), rtol=1e-12)
