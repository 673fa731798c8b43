"""scanlib.jit's fused kernel (scanlib/scan/fused.py): a traced graph whose scans all asked
for compiler="numba" runs as one numba kernel, scans as plain loops in it.

Each program runs eagerly (the per-scan tier, itself checked against the loop elsewhere) and
under jit, and the jit call must have run the fused kernel (a silent fallback would test
nothing), with the same dtypes and values to rounding (the kernel sums a gradient in the
loop's order, the NumPy loop per chunk). Where the kernel cannot apply (no rule for a
primitive, NumPy set to raise, an index out of range, long scans), jit's straight-line code
runs and gives its values or its errors.
"""

import re
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native

fused = sys.modules["scanlib.scan.fused"]
RNG = np.random.default_rng(0)


def _trace(jitted):
    (trace,) = jitted._traces.values()
    return trace


def _leaves(out):
    return [np.asarray(a.numpy() if isinstance(a, sl.Tensor) else a)
            for a in sl.pytree.flatten(out)[0]]


def check(make, *args, rtol=1e-11, want_fused=True):
    """make("numpy") eagerly (NumPy loops: no kernels to compile) and jit(make("numba"))
    (called twice: the first call compiles); returns the jitted function."""
    want = _leaves(make("numpy")(*args))
    jitted = sl.jit(make("numba"))
    jitted(*args)
    before = native.STATS["fused calls"]
    got = _leaves(jitted(*args))
    trace = _trace(jitted)
    if want_fused:
        assert trace.fused is not None, trace.fused_note
        assert native.STATS["fused calls"] == before + 1, "the fused kernel did not run"
    else:
        assert native.STATS["fused calls"] == before
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
    return jitted


def holt_winters(p, ys, compiler="numba"):
    alpha, beta = sl.sigmoid(p["alpha"]), sl.sigmoid(p["beta"])

    def step(carry, y):
        level, trend, season = carry
        err = y - (level + trend + season[0])
        season = sl.concatenate([season[1:], (season[0] + 0.3 * err)[None]])
        return (level + trend + alpha * err, trend + alpha * beta * err, season), err

    _, errs = sl.scan(step, (p["level"], p["trend"], p["season"]), ys, compiler=compiler)
    return -0.5 * sl.vdot(errs, errs) / sl.exp(2 * p["log_sigma"])


def _hw_params(dtype=np.float64):
    p = {"alpha": 0.1, "beta": -1.0, "log_sigma": 0.2, "level": 1.0, "trend": 0.05}
    p = {k: np.asarray(v, dtype) for k, v in p.items()}
    p["season"] = RNG.normal(size=4).astype(dtype)
    return p, RNG.normal(size=40).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_value_and_grad_of_a_scalar_recurrence(dtype):
    p, ys = _hw_params(dtype)
    check(lambda c: sl.value_and_grad(lambda p: holt_winters(p, ys, c)), p,
          rtol=1e-11 if dtype == np.float64 else 2e-5)


def test_second_order_reverse_scan_pytree_xs_and_literal_outputs():
    def loss(v, rewards, live, compiler):
        def step(adv, x):
            delta, alive = x
            adv = delta + 0.9 * alive * adv
            return adv, (adv, 2.0)

        _, (adv, twos) = sl.scan(step, np.zeros(3), (rewards + v[1:] - v[:-1], live),
                                 reverse=True, compiler=compiler)
        return sl.vdot(adv, adv) + sl.sum(twos)

    v, r = RNG.normal(size=(9, 3)), RNG.normal(size=(8, 3))
    live = (RNG.random((8, 3)) > 0.2).astype(np.float64)
    u = RNG.normal(size=v.shape)
    check(lambda c: sl.value_and_grad(lambda *a: loss(*a, c)), v, r, live)
    check(lambda c: sl.grad(lambda v: sl.vdot(sl.grad(loss)(v, r, live, c), u)), v)


def test_nested_scans_integer_carry_and_empty_scan():
    def f(w, xs, compiler="numba"):
        def outer(c, x):
            def inner(h, z):
                return sl.tanh(h * w + z), h

            h, hs = sl.scan(inner, c[0], x, compiler=compiler)
            return (h, c[1] + 1), sl.sum(hs)

        (h, n), sums = sl.scan(outer, (np.zeros(2), np.int64(0)), xs, compiler=compiler)
        _, none = sl.scan(lambda c, x: (c + x, c), np.zeros(2), xs[:0, 0], compiler=compiler)
        return sl.sum(h) + sl.sum(sums), n, none

    w, xs = RNG.normal(size=2), RNG.normal(size=(5, 3, 2))
    jitted = check(lambda c: lambda w, xs: f(w, xs, c), w, xs)
    _, n, none = jitted(w, xs)
    assert n.dtype == np.int64 and n.item() == 5 and none.shape == (0, 2)
    check(lambda c: sl.grad(lambda w: f(w, xs, c)[0]), w)


def test_outputs_never_share_the_callers_arrays():
    def f(a, b, compiler):
        c, _ = sl.scan(lambda c, x: (c * x, c), np.ones(3), b, compiler=compiler)
        return a, a[1:], c

    a, b = np.arange(4.0), RNG.normal(size=(3, 3))
    jitted = check(lambda c: lambda a, b: f(a, b, c), a, b)
    same, view, c = jitted(a, b)
    a[:] = -1.0  # the caller writes into its array after the call
    np.testing.assert_array_equal(same.numpy(), np.arange(4.0))
    np.testing.assert_array_equal(view.numpy(), np.arange(1.0, 4.0))


def test_a_primitive_without_a_numba_rule_replays_the_straight_line_code():
    def make(compiler):
        return sl.value_and_grad(lambda w, xs: sl.sum(sl.scan(
            lambda c, x: (c + sl.erf(x * w), c), np.zeros(2), xs, compiler=compiler)[1]))

    jitted = check(make, RNG.normal(size=2), RNG.normal(size=(4, 2)), want_fused=False)
    trace = _trace(jitted)
    assert trace.fused is None and "erf" in trace.fused_note


def test_much_work_outside_the_scans_that_numpy_calls_do_faster_keeps_the_per_scan_tier(
        monkeypatch):
    # Batched 4x4 products over a long sequence (an associative scan's level) are BLAS work
    # for NumPy and loop nests for a kernel: many of them would make one kernel large (slow to
    # compile) and no faster.
    def make(compiler):
        def loss(m, xs):
            prods = m @ m
            h = sl.scan(lambda c, x: (sl.tanh(c + x), c), np.zeros(4), xs,
                        compiler=compiler)[1]
            return sl.sum(prods) + sl.sum(h * h)
        return sl.value_and_grad(loss, argnums=(0, 1))

    m, xs = RNG.normal(size=(2000, 4, 4)), RNG.normal(size=(6, 4))
    check(make, m, xs)  # a few such equations: one kernel (the estimate is rough)
    monkeypatch.setattr(fused, "MAX_OUTSIDE", 0)  # as if they were many
    jitted = check(make, m, xs, want_fused=False)
    trace = _trace(jitted)
    assert trace.fused is None and "outside the scans" in trace.fused_note
    assert "matmul on large values" in trace.fused_note
    check(make, m[:8], xs)  # on a short sequence the kernel is estimated faster


def test_a_kernel_too_long_to_compile_keeps_the_per_scan_tier(monkeypatch):
    monkeypatch.setattr(fused, "MAX_LINES", 10)
    p, ys = _hw_params()
    jitted = check(lambda c: sl.value_and_grad(lambda p: holt_winters(p, ys, c)), p,
                   want_fused=False)
    assert _trace(jitted).fused is None and "lines (more than 10)" in _trace(jitted).fused_note


def test_not_fused_unless_every_scan_asked_for_numba_and_the_scans_are_short():
    p, ys = _hw_params()
    check(lambda c: sl.value_and_grad(lambda p: holt_winters(p, ys, "numpy")), p,
          want_fused=False)
    long_ys = RNG.normal(size=fused.MAX_STEPS // 2 + 1)  # forward and backward: too many
    check(lambda c: sl.value_and_grad(lambda p: holt_winters(p, long_ys, c)), p,
          want_fused=False)
    old, fused.ENABLED = fused.ENABLED, False
    try:
        check(lambda c: sl.value_and_grad(lambda p: holt_winters(p, ys, c)), p,
              want_fused=False)
    finally:
        fused.ENABLED = old


def test_an_index_out_of_range_raises_the_loops_error():
    def f(table, idx):  # each step gathers two rows
        return sl.scan(lambda c, i: (c + table[i], c), np.zeros(2), idx, compiler="numba")[0]

    table, jitted = np.arange(5.0), sl.jit(f)
    assert jitted(table, np.array([[0, 1], [4, 2]])).numpy().tolist() == [4.0, 3.0]
    assert _trace(jitted).fused is not None
    with pytest.raises(IndexError, match="out of range at step t=1"):
        jitted(table, np.array([[0, 1], [5, 2]]))


def test_numpy_set_to_raise_is_honoured():
    f = sl.jit(lambda x: sl.scan(lambda c, x: (c / x, c), np.ones(2), x, compiler="numba")[0])
    x = np.ones((3, 2))
    f(x)
    assert _trace(f).fused is not None
    x[1, 0] = 0.0
    with np.errstate(divide="ignore"):
        assert np.isinf(f(x).numpy()[0])
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        f(x)


@pytest.mark.usefixtures("fresh_kernel_cache")
def test_a_type_numba_would_change_is_not_proved(monkeypatch):
    """numba's typing is checked before the kernel first runs (the check itself is tested in
    test_numba_loop.py); when it fails, the straight-line code runs, then and after."""
    def refuse(self, typemap):
        raise native.NotProved("numba types v0 as float32, the graph as float64")

    monkeypatch.setattr(native.NativeKernel, "_check", refuse)
    p, _ = _hw_params()
    ys = RNG.normal(size=37)  # a length no other test uses: a kernel compiled here
    f = sl.value_and_grad(lambda p: holt_winters(p, ys))
    jitted, before = sl.jit(f), native.STATS["fused calls"]
    f = sl.value_and_grad(lambda p: holt_winters(p, ys, "numpy"))
    for _ in range(2):
        got = jitted(p)
        assert _trace(jitted).fused.kernel is None
        assert "numba types v0" in _trace(jitted).fused.note
    assert native.STATS["fused calls"] == before
    for g, w in zip(_leaves(got), _leaves(f(p))):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _two_scans_of_one_body(w, xs, ys, compiler="numba"):
    def step(h, x):
        return sl.tanh(h * w + x), h * h

    a, sa = sl.scan(step, np.zeros(3), xs, compiler=compiler)
    b, sb = sl.scan(step, np.ones(3), ys, compiler=compiler)  # the same loop: a function
    c, sc = sl.scan(step, np.zeros(3), xs[:4], compiler=compiler)  # shorter: another one
    return sl.sum(a * b) + sl.sum(sa) + sl.sum(sb) + sl.sum(c) + sl.sum(sc)


def test_scans_of_one_body_share_one_loop_function(monkeypatch):
    """Each scan loop of a long fused kernel is a function of its own, one for the scans of
    the same body, length and argument types (numba compiles it once); values and gradients
    are the NumPy loops'."""
    monkeypatch.setattr(fused, "LOOP_FUNCTIONS_FROM", 0)  # (this kernel is short)
    w, xs, ys = RNG.normal(size=3), RNG.normal(size=(9, 3)), RNG.normal(size=(9, 3))
    jitted = check(lambda c: lambda w: _two_scans_of_one_body(w, xs, ys, c), w)
    source = _trace(jitted).fused.source
    assert source.count("\ndef _loop") == 2 and source.count("= _loop0(") == 2, source
    jitted = check(lambda c: sl.grad(lambda w: _two_scans_of_one_body(w, xs, ys, c)), w)
    source = _trace(jitted).fused.source  # forward and backward loops, each once
    assert source.count("\ndef _loop") == 4, source


@pytest.mark.usefixtures("fresh_kernel_cache")
def test_the_loop_functions_types_are_proved(monkeypatch):
    """numba's types of the values inside a loop function are checked as the kernel's own
    are: a loop whose parameter numba would type otherwise keeps the straight-line code."""
    checked = native.NativeKernel._check

    def refuse_loop_values(self, typemap):
        if any(name.startswith("p") for name in typemap):  # only loop functions have these
            raise native.NotProved("numba types p0 as float32, the graph as float64")
        checked(self, typemap)

    monkeypatch.setattr(native.NativeKernel, "_check", refuse_loop_values)
    monkeypatch.setattr(fused, "LOOP_FUNCTIONS_FROM", 0)
    w, xs = RNG.normal(size=3), RNG.normal(size=(11, 3))  # a length no other test uses
    jitted = sl.jit(lambda w: _two_scans_of_one_body(w, xs, xs + 1.0))
    before = native.STATS["fused calls"]
    got = jitted(w)
    assert _trace(jitted).fused.kernel is None and "p0" in _trace(jitted).fused.note
    assert native.STATS["fused calls"] == before
    np.testing.assert_allclose(
        got.numpy(), _two_scans_of_one_body(w, xs, xs + 1.0, "numpy").numpy(), rtol=1e-12)


def _nested_scans(w, xs, outer, compiler="numba"):
    """An outer scan of `outer` steps, each running an inner scan over xs."""
    def inner(h, x):
        return sl.tanh(h * w + x), h * h

    def step(c, _):
        h, ys = sl.scan(inner, c, xs, compiler=compiler)
        return h + 0.5 * sl.sum(ys, axis=0), sl.sum(h)

    c, ys = sl.scan(step, np.zeros(3), None, length=outer, compiler=compiler)
    return sl.sum(c * c) + sl.sum(ys)


@pytest.mark.parametrize("outer", [2, 17])
def test_a_nested_scan_run_a_few_times_is_a_loop_function(monkeypatch, outer):
    """A scan nested in a loop function's body is a function too where it runs at most
    FUNCTION_RUNS times a call (numba compiles a long kernel faster in pieces); in a longer
    loop it stays in place (a call would cost at every step), and a kernel of one loop call
    keeps it in place too. Values and gradients are the NumPy loops'."""
    from scanlib.scan.loop import native_rules

    monkeypatch.setattr(fused, "LOOP_FUNCTIONS_FROM", 0)
    monkeypatch.setattr(native_rules, "FUNCTION_RUNS", 16)
    w, xs = RNG.normal(size=3), RNG.normal(size=(5, 3))
    jitted = check(lambda c: lambda w: _nested_scans(w, xs, outer, c), w)
    source = _trace(jitted).fused.source
    functions = source.count("\ndef _loop")
    assert functions == (2 if outer <= 16 else 0), source  # one loop call: kept in place
    if outer <= 16:  # the inner loop is called from inside the outer one's loop
        assert re.search(r"^ {8}.*= _loop1\(", source, re.M), source
    check(lambda c: sl.grad(lambda w: _nested_scans(w, xs, outer, c)), w)


def _passed_through(w, xs, compiler="numba"):
    def step(carry, x):
        h, k = carry  # k passes through unchanged (as a constant's tangent in a JVP scan)
        return (sl.tanh(h * k + x), k), h * w

    (h, k), ys = sl.scan(step, (np.zeros(3), w * 2.0), xs, compiler=compiler)
    return sl.sum(h) + sl.sum(k * k) + sl.sum(ys)


@pytest.mark.parametrize("loop_functions", [False, True])
def test_a_carry_passed_through_keeps_its_array(monkeypatch, loop_functions):
    """A carry the body returns unchanged is not copied at every step (jacfwd's tangent
    scans carried the constants' tangents so); values and gradients are the NumPy loop's."""
    if loop_functions:
        monkeypatch.setattr(fused, "LOOP_FUNCTIONS_FROM", 0)
    w, xs = RNG.normal(size=3), RNG.normal(size=(6, 3))
    jitted = check(lambda c: lambda w: _passed_through(w, xs, c), w)
    source = _trace(jitted).fused.source
    assert re.search(r"^ +v\d+, v\d+, = v\d+, s\d+,$", source, re.M), source  # no copy
    check(lambda c: sl.grad(lambda w: _passed_through(w, xs, c)), w)
    check(lambda c: sl.jacfwd(lambda w: _passed_through(w, xs, c)), w)


# --- found by an adversarial pass: each must give NumPy's values (or error) under jit --------
def _tick(compiler):
    """A two-step scan: with compiler="numba" it makes a graph fused."""
    return sl.scan(lambda c, x: (c + x, c), np.float64(0.0), np.ones(2), compiler=compiler)[0]


def _same_as_eager(make, *args):
    want = make("numpy")(*args)
    got = sl.jit(make("numba"))(*args)
    for g, w in zip(_leaves(got), _leaves(want)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


ADVERSARIAL = {
    # int64 with uint64 is float64 computed in floats (numba wrapped in int64)
    "int64 * uint64": (lambda c: lambda a, b: (a * b + _tick(c), a - b),
                       np.array([2**40, 2**62], np.int64), np.array([2**40, 2**62], np.uint64)),
    # float32 sums: NumPy's pairwise, not one element at a time (1% off here)
    "float32 sum": (lambda c: lambda x: sl.sum(x) + _tick(c),
                    np.concatenate([[1e8], np.ones(10**5)]).astype(np.float32)),
    # out of range, NumPy's cast is its own (numba's vectorised casts saturate)
    "float to int": (lambda c: lambda x: (x.astype(np.int16), x.astype(np.uint32), _tick(c)),
                     sl.tensor(np.array([7e4, 1e20, np.nan] + [7e4] * 13))),
    "triangular solve with NaN": (
        lambda c: lambda a, b: sl.linalg.solve_triangular(a, b, lower=True) + _tick(c),
        np.array([[1.0, 0.0], [np.nan, 1.0]]), np.ones((2, 1))),
    "big-endian input": (lambda c: lambda x: x * 2 + _tick(c), np.arange(3.0).astype(">f8")),
}


@pytest.mark.parametrize("case", list(ADVERSARIAL))
def test_numpys_values_where_numba_differs(case):
    make, *args = ADVERSARIAL[case]
    _same_as_eager(make, *args)


def test_a_singular_solve_raises_as_numpy_does():
    def make(compiler):
        return lambda a, b: sl.linalg.solve(a, b) + _tick(compiler)

    # Two equal rows: LU's elimination leaves an exact zero pivot whatever BLAS kernel runs it
    # (arange(1, 10).reshape(3, 3) is singular in exact arithmetic only: OpenBLAS's
    # Sandybridge kernels, without FMA, leave a pivot of 1e-16 and NumPy solves it).
    a, b = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [1.0, 2.0, 3.0]]), np.ones((3, 1))
    with pytest.raises(np.linalg.LinAlgError):
        make("numpy")(a, b)
    with pytest.raises(np.linalg.LinAlgError):
        sl.jit(make("numba"))(a, b)


def test_numpy_error_handlers_are_called():
    f = sl.jit(lambda x: sl.sqrt(x) + _tick("numba"))
    x = np.array([-1.0, 4.0])
    f(x)
    assert _trace(f).fused is not None
    calls = []
    old = np.seterrcall(lambda kind, flag: calls.append(kind))
    try:
        with np.errstate(invalid="call"):
            f(x)
    finally:
        np.seterrcall(old)
    assert calls == ["invalid value"]


@pytest.mark.parametrize("steps", [1, 2, 7])
def test_a_fused_kernels_next_carries_alternate_between_two_arrays(steps):
    """A [3, 2] carry computed anew at every step: the fused kernel writes even steps into
    one array and odd steps into another (native_nests.double_buffer_carries), forward and
    backward; values and gradients are the NumPy loops', over odd and even lengths."""
    xs = np.random.default_rng(5).normal(size=(steps, 3, 2))

    def make(compiler):
        def loss(c0, xs):
            def f(c, x):
                return sl.tanh(c[::-1] * 0.9 + x), sl.sum(c * x)
            c, ys = sl.scan(f, c0, xs, compiler=compiler)
            return sl.sum(c * c) + sl.sum(ys)
        return sl.value_and_grad(loss, argnums=(0, 1))

    jitted = check(make, np.ones((3, 2)) * 0.3, xs)
    source = _trace(jitted).fused.source
    assert re.search(r"^ +(\w+) = \1_even if t\d+ % 2 == 0 else \1_odd$", source, re.M), \
        source
