"""while_loop under the numba loop compiler: the loop as one numba kernel
(scanlib/scan/loop/native_while.py).

Each loop runs as the Python loop on the tape (while_loop's definition), under the NumPy loop
compiler and under numba's, and numba's must agree in values, dtypes and gradients (first and
second order), and must actually have run a while_loop kernel (a silent fallback would test
nothing). Loops numba cannot take fall back with a NumbaFallbackWarning and the NumPy loop's
values. Kernels compile into a temporary cache directory (conftest.py).
"""

import contextlib
import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native
from test_control import assert_trees_close, python_scan, python_while
from test_numba_loop import little_recursion, long_chain


@contextlib.contextmanager
def compiler(name, strict=True):
    old = sl.set_loop_compiler(name)
    try:
        with warnings.catch_warnings():
            if strict:
                warnings.simplefilter("error", sl.NumbaFallbackWarning)
            yield
    finally:
        sl.set_loop_compiler(old)


@contextlib.contextmanager
def kernels_run(counters=("while_loop kernel calls",)):
    before = [native.STATS[c] for c in counters]
    yield
    assert any(native.STATS[c] > b for c, b in zip(counters, before)), "no kernel ran"


def _total(tree):
    return sum(sl.sum(x * (1.0 + 0.5 * i)) for i, x in enumerate(sl.pytree.flatten(tree)[0]))


def _outputs(f, args, order):
    """f's value, its gradient and (order 2) the gradient of a scalar of its gradient."""
    argnums = tuple(range(len(args)))
    out = [f(*args)]
    if order >= 1:
        out.append(sl.grad(lambda *a: _total(f(*a)), argnums=argnums)(*args))
    if order >= 2:
        def gsum(*a):
            return _total([g * g for g in sl.grad(lambda *b: _total(f(*b)),
                                                  argnums=argnums)(*a)])
        out.append(sl.grad(gsum, argnums=argnums)(*args))
    return out


def check(run, args, order=2, rtol=1e-12, kernels=True, strict=True):
    """run(loop) -> f(*args): numba's while_loop against the NumPy tier's and the Python
    loop's, values and gradients; a kernel ran (unless kernels=False); no
    NumbaFallbackWarning (unless strict=False)."""
    want = _outputs(run(python_while), args, order)
    with compiler("numpy"):
        plain = _outputs(run(sl.while_loop), args, order)
    with compiler("numba", strict), kernels_run() if kernels else contextlib.nullcontext():
        got = _outputs(run(sl.while_loop), args, order)
    for ref in (want, plain):
        for a, b in zip(got, ref):
            assert_trees_close(a, b, rtol=rtol, atol=rtol)
    return got


def _counter_loop(loop):
    def f(x, w):
        def body(c):
            i, v, total = c
            v = sl.sin(v) * w + 0.25 * v
            return i + 1, v, total + sl.sum(v * v)
        return loop(lambda c: c[0] < 7, body, (sl.tensor(0), x, sl.tensor(0.0)))[1:]
    return f


def test_counter_condition_values_and_gradients():
    check(_counter_loop, (sl.tensor([0.3, -0.8, 1.1]), sl.tensor(0.9)))


def test_condition_reading_the_state():
    def run(loop):
        def f(x, w):
            return loop(lambda v: sl.sum(v * v) < 50.0, lambda v: v * w + 0.1 * sl.tanh(v), x)
        return f

    check(run, (sl.tensor([0.3, 0.5]), sl.tensor(1.4)))


@pytest.mark.parametrize("reduce", ["all", "any"])
def test_all_and_any_in_the_condition(reduce):
    def run(loop):
        def f(x, w):
            def cond(c):
                t, v = c
                checks = sl.stack([t < 12, sl.abs(sl.sum(v)) < 1e30])
                return sl.all(checks) if reduce == "all" else sl.any(checks & (t < 12))
            return loop(cond, lambda c: (c[0] + 1, sl.sin(c[1]) * w + 0.25 * c[1]),
                        (sl.tensor(0), x))
        return f

    check(run, (sl.tensor([0.3, -0.8, 1.1]), sl.tensor(0.9)))


@pytest.mark.parametrize("state_cond", [False, True])
def test_the_gradient_runs_scan_kernels(state_cond):
    """The scan of the trip count that gives the gradient, and its backward, use the loop
    compiler as `scan` does. With a cond that reads the state, one while_loop kernel finds
    the trip count and saves each step's residuals, and only the backward scan follows: the
    forward is not run a second time."""
    def f(x, w):
        def cond(c):
            return (c[0] < 15) & (sl.sum(c[1] * c[1]) < 1e6) if state_cond else c[0] < 15
        c = sl.while_loop(cond, lambda c: (c[0] + 1, sl.tanh(c[1]) * w + 0.1 * c[1]),
                          (sl.tensor(0), x))
        return sl.sum(c[1] * c[1])

    args = (sl.tensor([0.3, -0.8, 1.1]), sl.tensor(1.3))
    want = sl.grad(lambda x, w: _python_f(x, w, state_cond), argnums=(0, 1))(*args)
    def scan_kernel_calls():  # "kernel calls" counts while_loop kernels' too
        return native.STATS["kernel calls"] - native.STATS["while_loop kernel calls"]

    for grad in (sl.grad(f, argnums=(0, 1)), sl.jit(sl.grad(f, argnums=(0, 1)))):
        with compiler("numba"):
            grad(*args)  # (jit: traced)
            before = scan_kernel_calls(), native.STATS["while_loop kernel calls"]
            got = grad(*args)
            scans = scan_kernel_calls() - before[0]
            assert scans == (1 if state_cond else 2), scans  # the backward (forward) scan
            assert native.STATS["while_loop kernel calls"] == before[1] + 1
        assert_trees_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("steps", [1, 15, 16, 17, 40])
def test_the_saving_kernel_keeps_every_steps_residuals(steps):
    """A cond reading the state: the kernel stores each step's residuals (scalars, vectors,
    matrices, float32) in arrays it doubles as they fill (at 16 steps, 32, ...); values and
    gradients (second order too) are the NumPy loop's and the Python loop's."""
    def run(loop):
        def f(x, m, w):
            def body(c):
                t, v, a = c
                v = sl.tanh(v * w + 0.1 * t.astype(v.dtype))
                a = sl.sin(a @ m) + v[:2, None] * 0.5
                return t + 1, v, a
            c = loop(lambda c: (c[0] < steps) & (sl.abs(sl.sum(c[2])) < 1e30), body,
                     (sl.tensor(0), x, m))
            return c[1], c[2]
        return f

    rng = np.random.default_rng(steps)
    args = [sl.tensor(rng.standard_normal(s).astype(np.float32) * 0.5)
            for s in [(3,), (2, 2), ()]]
    got = check(run, args, rtol=2e-5)
    assert all(g.dtype == np.float32 for g in got[1])
    with compiler("numba"):  # the gradient: the saving kernel, then the backward's kernel
        before = native.STATS["while_loop kernel calls"], native.STATS["kernel calls"]
        sl.grad(lambda *a: _total(run(sl.while_loop)(*a)), argnums=(0, 1, 2))(*args)
        loops = native.STATS["while_loop kernel calls"] - before[0]
        assert (loops, native.STATS["kernel calls"] - before[1] - loops) == (1, 1)


def test_the_saving_kernel_over_calls_of_other_trip_counts():
    """The residual arrays start as long as the last call's trip count: calls of one loop
    (one kernel) that stop later (the arrays grow), earlier (they are trimmed) or at the
    same step give the NumPy loop's gradients, to second order."""
    def loss(x, limit):
        def body(c):
            t, v = c
            return t + 1, sl.tanh(v * 1.1 + 0.05 * t.astype(v.dtype))
        c = sl.while_loop(lambda c: (c[0] < limit) & (sl.sum(c[1] * c[1]) < 1e9), body,
                          (sl.tensor(0), x))
        return sl.sum(c[1] * c[1])

    x = sl.tensor(np.linspace(-0.5, 0.7, 3))
    for steps in [40, 5, 17, 100, 100, 1, 33]:
        limit = sl.tensor(steps)
        first = sl.grad(lambda x, limit=limit: loss(x, limit))
        second = sl.grad(lambda x, first=first: sl.sum(first(x) ** 2))
        with compiler("numpy"):
            want = first(x), second(x)
        with compiler("numba"), kernels_run():
            got = first(x), second(x)
        assert_trees_close(got, want, rtol=1e-12, atol=1e-14)


def test_max_steps_raises_in_the_saving_kernel():
    def loss(x):
        return sl.while_loop(lambda v: sl.sum(v) < 1e9, lambda v: v * 1.5 + 1.0, x,
                             max_steps=20)[0]

    with compiler("numpy"), pytest.raises(RuntimeError, match="max_steps=20") as plain:
        sl.grad(loss)(sl.tensor([1.0, 2.0]))
    with compiler("numba"), kernels_run(), pytest.raises(RuntimeError) as got:
        sl.grad(loss)(sl.tensor([1.0, 2.0]))
    assert str(got.value) == str(plain.value)


def _python_f(x, w, state_cond):
    t, v = 0, x
    while t < 15 and (not state_cond or sl.sum(v * v) < 1e6):
        t, v = t + 1, sl.tanh(v) * w + 0.1 * v
    return sl.sum(v * v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept(dtype):
    def run(loop):
        def f(x, a):
            return loop(lambda v: v[0] < 30.0, lambda v: v * a + 0.5, x)
        return f

    args = (sl.tensor(np.array([1.0, 2.0], dtype)), sl.tensor(np.array(1.5, dtype)))
    got = check(run, args, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert got[0].dtype == dtype and all(g.dtype == dtype for g in got[1])


def _int_loop(itype, jtype):
    def run(loop):
        def f(x):
            def body(c):
                i, j, v = c
                return i + 2, j * 3, v * 1.1
            i, j, v = loop(lambda c: c[1] < 1000, body,
                           (sl.tensor(itype(1)), sl.tensor(jtype(1)), x))
            assert i.dtype == itype and j.dtype == jtype
            return v * i.astype(v.dtype) + j.astype(v.dtype)
        return f
    return run


def test_integer_carries_keep_their_dtype():
    check(_int_loop(np.int64, np.int64), (sl.tensor([1.0, -2.0]),))
    # numba computes int32 scalars in int64: the kernel casts each result back (f asserts
    # the dtypes the loop returns)
    check(_int_loop(np.int32, np.int16), (sl.tensor([1.0, -2.0]),), order=1)


def test_zero_trip_loop():
    def run(loop):
        def f(x, w):
            return loop(lambda v: v[0] > 10.0, lambda v: v * w, x)
        return f

    got = check(run, (sl.tensor([1.0, 2.0]), sl.tensor(3.0)))
    np.testing.assert_array_equal(got[0].numpy(), [1.0, 2.0])


def test_max_steps_raises_as_the_numpy_loop_does():
    def go():
        return sl.while_loop(lambda v: v < 1e9, lambda v: v + 1.0, sl.tensor(0.0),
                             max_steps=5)

    with compiler("numpy"), pytest.raises(RuntimeError, match="max_steps=5") as plain:
        go()
    with compiler("numba"), kernels_run(), pytest.raises(RuntimeError) as got:
        go()
    assert str(got.value) == str(plain.value)
    with compiler("numba"), kernels_run():  # exactly max_steps steps is allowed
        out = sl.while_loop(lambda v: v < 5.0, lambda v: v + 1.0, sl.tensor(0.0), max_steps=5)
    assert float(out) == 5.0


def test_at_set_of_a_carry():
    def run(loop):
        def f(x, w):
            def body(c):
                i, k, v = c
                k = k.at[0].set(v).at[2, 1].set(w * v[1]).at[1].set(0.0)
                return i + 1, k, v * w + k[0] * 0.1
            init = (sl.tensor(0), sl.zeros((3, 2)), x)
            return loop(lambda c: c[0] < 4, body, init)[1:]
        return f

    # The loop is a kernel; the scan of its trip count that gives the gradient is not
    # (scan's numba loop has no in-place update of a carry), and says so.
    with pytest.warns(sl.NumbaFallbackWarning, match="scan: .*in-place indexed update"):
        check(run, (sl.tensor([0.5, -0.25]), sl.tensor(1.2)), strict=False)


def test_inside_a_scan_body_and_under_jit():
    targets = sl.tensor([0.5, 0.6, 0.9, 40.0])  # 0, 1 and many trips

    def run(loop, scan=sl.scan):
        def f(x, v0):
            def step(v, target):
                v = loop(lambda v: v < target, lambda v: v * x + 0.1, v)
                return v * 0.5, v
            return scan(step, v0, targets)[1]
        return f

    args = (sl.tensor(1.3), sl.tensor(1.0))
    want = _outputs(run(python_while, python_scan), args, 2)
    for wrap in (lambda f: f, sl.jit):
        # the while_loop's own kernel, or the scan's kernel it is written into (forward)
        with compiler("numba", strict=False), kernels_run(
                ("while_loop kernel calls", "kernel calls", "fused calls")):
            got = [wrap(run(sl.while_loop))(*args)]
            got.append(wrap(sl.grad(lambda *a: _total(run(sl.while_loop)(*a)),
                                    argnums=(0, 1)))(*args))
        for a, b in zip(got, want):
            assert_trees_close(a, b)


def _vmapped(loop, cond, body, per_example):
    """run(loop) of a vmapped while_loop; with python_while, the loop of each example."""
    def f(x, w):
        def one(v):
            return loop(lambda c: cond(c, v), lambda c: body(c, v, w), (v, sl.tensor(0.0)))[0]
        if loop is python_while:
            return sl.stack([one(x[b]) for b in range(x.shape[0])])
        return sl.vmap(one)(x)
    return f


def test_vmap_with_lanes_stopping_apart():
    def run(loop):
        return _vmapped(loop, lambda c, v: c[1] < v[0],
                        lambda c, v, w: (c[0] * w + v, c[1] + 1.0), None)

    check(run, (sl.tensor([[3.0, 1.0], [0.5, 2.0], [6.0, 0.1]]), sl.tensor(0.9)), order=1,
          kernels=False)


def test_vmap_with_one_stopping_decision_is_one_kernel():
    def run(loop):
        return _vmapped(loop, lambda c, v: c[1] < 5.0,
                        lambda c, v, w: (c[0] * w + 0.1, c[1] + 1.0), None)

    check(run, (sl.tensor([[3.0, 1.0], [0.5, 2.0]]), sl.tensor(0.9)))


def test_a_body_without_a_numba_rule_falls_back_with_a_warning():
    def go():
        return sl.while_loop(lambda v: v[0] < 10.0, lambda v: sl.sort(v) * 2.0 + 1.0,
                             sl.tensor([3.0, 1.0]))

    with compiler("numpy"):
        want = go()
    with compiler("numba", strict=False), pytest.warns(sl.NumbaFallbackWarning,
                                                       match="while_loop.*sort"):
        got = go()
    assert_trees_close(got, want)


def test_a_step_of_large_values_runs_as_the_numpy_loop():
    """As for a scan: above native.LARGE_STEP elements NumPy's vectorised loop is faster
    than a kernel's scalar loops, so numba leaves the loop to it (no warning: nothing is
    missing)."""
    x = sl.tensor(np.linspace(-1.0, 1.0, native.LARGE_STEP + 1))

    def go():
        return sl.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, sl.tanh(c[1]) * 1.1),
                             (sl.tensor(0), x))

    with compiler("numpy"):
        want = go()
    before = native.STATS["while_loop kernel calls"]
    with compiler("numba"):
        got = go()
    assert native.STATS["while_loop kernel calls"] == before
    assert_trees_close(got, want, rtol=0, atol=0)


def test_the_numpy_compiler_runs_no_kernel():
    before = native.STATS["while_loop kernel calls"]
    with compiler("numpy"):
        sl.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, sl.tensor(1.0))
    assert native.STATS["while_loop kernel calls"] == before


def test_ode_port_under_numba_agrees_with_jax():
    """The adaptive Dormand-Prince solver (a while_loop in a scan, under custom_vjp, whose
    backward solves another while_loop) with its while_loops as kernels: JAX's results."""
    from ports import cases, harness

    rtol, atol = cases.TOLERANCES.get("ode", (1e-10, 1e-12))
    # The Lotka-Volterra half of the case: its solve and its adjoint solve are the same four
    # loops (scan over times, while_loop of steps, forward and backward) as the neural ODE's,
    # whose two kernels would take about 30 s more to compile; test_ports.py compares the
    # whole case with JAX under the NumPy loop compiler.
    program = harness.load("ode", "scanlib")
    # the while_loops' own kernels, or the kernels of the scans they are written into
    with compiler("numba", strict=False), kernels_run(("while_loop kernel calls",
                                                       "kernel calls")):
        got = harness.flatten(cases.ode(program, *harness.frameworks("scanlib"),
                                        neural_ode=False))
    want = {k: v for k, v in harness.read_golden("ode").items() if not k.startswith("node_")}
    assert {"ys/prey", "grads/0", "rk_grads/0"} <= set(want)
    problems = harness.compare(got, want, rtol=rtol, atol=atol)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_set_at_a_static_index_in_a_scan_kernel(dtype):
    """scatter_set's numba rule also serves a scan's step (a value of the step, not a carry
    updated in place): the kernel runs and agrees with the loop and the NumPy loop."""
    from test_numba_loop import check as check_scan

    w = sl.tensor(np.array([0.5, -1.5, 2.0], dtype))

    def f(c, x):
        k = (w * x).at[1].set(c[0]).at[None, 2].set(x[:1]).at[0].set(0.25)
        return c * 0.5 + k[1:] * k[0] + k[2], k

    check_scan(f, sl.tensor(np.array([0.1, 0.2], dtype)),
               sl.tensor(np.linspace(-1, 1, 21, dtype=dtype).reshape(7, 3)),
               rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_a_carry_read_after_a_long_chain_of_operations_compiles():
    # numba walks a carry's definitions recursively; the body reads each carry by a name
    # assigned once, so a long body stays within the recursion limit.
    def run(loop):
        def f(x):
            def body(c):
                i, v = c
                h = long_chain(v)
                return i + 1, v * 0.9 + h  # v read again after the chain
            return loop(lambda c: c[0] < 3, body, (sl.tensor(0), x))[1]
        return f

    with little_recursion():
        check(run, (sl.tensor([0.3, -0.8]),), order=0)
