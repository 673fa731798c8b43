"""A scan inside a scan body on the numba tier: the inner loop written into the outer body's
kernel (loop/native_rules.py's Scope), forward and in the outer backward body (whose inner
scans are the inner forward, run again for its residuals, and its VJP, a reversed scan with
gradient accumulators).

Each program runs as scan's definition (the Python loop, on the tape), with
compiler="numpy" and with compiler="numba"; the numba run must compile every body (a
NumbaFallbackWarning is an error here: an outer body running as NumPy around compiled inner
scans would test nothing) and agree in values, dtypes and gradients, first and second order.
"""

import sys
import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native, native_rules
from test_numba_loop import little_recursion, long_chain
from test_scan_oracle import loop_scan

fused = sys.modules["scanlib.scan.fused"]
RNG = np.random.default_rng(7)


def _t(shape, dtype="float64", scale=1.0):
    return sl.tensor((scale * RNG.standard_normal(shape)).astype(dtype))


def numba_scan(*a, **k):
    return sl.scan(*a, compiler="numba", **k)


def numpy_scan(*a, **k):
    return sl.scan(*a, compiler="numpy", **k)


def _leaves(tree):
    return [a for a in sl.pytree.flatten(tree)[0] if a is not None]


def _agree(got, want, rtol):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(np.asarray(g.numpy(), np.float64),
                                   np.asarray(w.numpy(), np.float64), rtol=rtol, atol=rtol)


def check(program, args, rtol=1e-10, order=1):
    """program(scan_fn, *args) -> a scalar loss: its value and gradient (and, order=2, the
    gradient of the gradient's sum) with the numba scan against the loop and the NumPy loop;
    every numba body compiled (no fallback) and kernels ran."""
    argnums = tuple(range(len(args)))

    def run(scan_fn):
        def loss(*a):
            return program(scan_fn, *a)
        if order == 1:
            return sl.value_and_grad(loss, argnums=argnums)(*args)

        def gsum(*a):
            g = sl.grad(loss, argnums=argnums)(*a)
            return sum((x * x).sum() for x in _leaves(g))
        return sl.value_and_grad(gsum, argnums=argnums)(*args)

    want = run(loop_scan)
    plain = run(numpy_scan)
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = run(numba_scan)
    assert native.STATS["kernel calls"] > before, "no numba kernel ran"
    _agree(got, want, rtol)
    _agree(got, plain, rtol)


def rnn_of_rnns(scan_fn, W, xs, reverse_inner=False, inner_length=3):
    """Each outer step runs an inner RNN over a few points made from its x; the outer carry
    is the inner's initial state, its ys summed into the outer ys."""
    def outer(h, x):
        def inner(c, k):
            return sl.tanh(c @ W + k * x), (c * c).sum()

        ks = sl.arange(float(inner_length)).astype(x.dtype) * 0.5
        c, ys = scan_fn(inner, h, ks, reverse=reverse_inner)
        return c, ys.sum() if inner_length else h.sum()

    h, ys = scan_fn(outer, xs[0] * 0, xs)
    return (h * h).sum() + ys.sum()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reverse_inner", [False, True], ids=["inner forward", "inner reverse"])
def test_values_and_gradients_of_an_rnn_of_rnns(dtype, reverse_inner):
    rtol = 1e-10 if dtype == "float64" else 2e-4
    check(lambda s, W, xs: rnn_of_rnns(s, W, xs, reverse_inner),
          (_t((4, 4), dtype, 0.4), _t((6, 4), dtype)), rtol)


def test_an_empty_inner_scan():
    check(lambda s, W, xs: rnn_of_rnns(s, W, xs, inner_length=0),
          (_t((3, 3), scale=0.4), _t((5, 3))))


def test_inner_xs_and_consts_from_the_outer_step_and_scalar_carries():
    # The inner xs are rows of the outer x; its consts the outer carry and x; its carries
    # 0-d (scalars in the kernel), one of them passed through unchanged.
    def program(scan_fn, a, xs):
        def outer(carry, x):
            s, v = carry

            def inner(c, row):
                acc, keep = c
                return (acc * 0.9 + (row * v).sum() * a, keep), acc + s

            (acc, keep), ys = scan_fn(inner, (s, s * 2.0), x)
            return (acc + keep * 0.1, v * 0.5 + x[0]), ys

        (s, v), ys = scan_fn(outer, (sl.tensor(0.0).astype(xs.dtype), xs[0, 0] * 0), xs)
        return s + (v * v).sum() + (ys * ys).sum()

    check(program, (sl.tensor(0.7), _t((5, 3, 2))))


def test_a_reverse_outer_scan_with_an_inner_one_that_carries_a_matrix_and_indexes_a_const():
    # Inner steps read E[i] at an integer i (its gradient: a row added at i), the outer step
    # a transpose.
    def program(scan_fn, P0, xs, E):
        def outer(P, x):
            def inner(c, i):
                M, n = c
                M = M @ (E[i] + x) + 0.1 * M.T
                return (M, n + 1), M[0, 1]

            (M, n), ys = scan_fn(inner, (P, sl.tensor(np.int64(0))), sl.arange(3))
            return M / (1.0 + sl.abs(M).sum()), ys * n.astype(ys.dtype)

        P, ys = scan_fn(outer, P0, xs, reverse=True)
        return P.sum() + (ys * ys).sum()

    check(program, (_t((2, 2)), _t((4, 2, 2), scale=0.3), _t((4, 2, 2), scale=0.3)))


def test_three_levels_and_grad_of_grad():
    def program(scan_fn, w, xs):
        def outer(h, x):
            def middle(m, k):
                def inner(c, j):
                    return sl.sin(c * w + j * k), c

                c, ys = scan_fn(inner, m, sl.arange(2.0))
                return c + x, ys.sum()

            m, ys = scan_fn(middle, h, sl.arange(3.0) * 0.1)
            return m, ys.sum()

        h, ys = scan_fn(outer, sl.tensor(0.3), xs)
        return h * h + ys.sum()

    check(program, (sl.tensor(0.8), _t(4)), order=1)
    check(program, (sl.tensor(0.8), _t(4)), order=2)


# Each dtype and each direction of the inner scan once (every pair of them to first order
# above): a second-order run compiles four kernels, ten seconds here.
@pytest.mark.parametrize("dtype, reverse_inner", [("float64", True), ("float32", False)],
                         ids=["float64-inner reverse", "float32-inner forward"])
def test_grad_of_grad_of_an_rnn_of_rnns(dtype, reverse_inner, monkeypatch):
    # Under grad of grad, the outer bodies hold inner scans bound with their residuals
    # (`_lin`, or, pruned, their residual-extended bodies): more stacked outputs than the
    # inner body's one y, read by the VJP; the kernel writes them as ys.
    seen = []
    real = native_rules.Scope.scan

    def recording(self, eqn, args, outs, indent=""):
        seen.append(len(eqn.outvars) - eqn.params["num_carry"] > 1)
        return real(self, eqn, args, outs, indent)

    monkeypatch.setattr(native_rules.Scope, "scan", recording)
    rtol = 1e-9 if dtype == "float64" else 2e-3
    check(lambda s, W, xs: rnn_of_rnns(s, W, xs, reverse_inner),
          (_t((3, 3), dtype, 0.4), _t((4, 3), dtype)), rtol, order=2)
    assert any(seen) and not all(seen)


def test_an_inner_scan_asking_for_numpy_keeps_the_outer_body_numpy():
    def f(h, x):
        c, _ = sl.scan(lambda c, k: (c * k, None), h, x, compiler="numpy")
        return c, c

    xs = _t((3, 2, 2))
    with pytest.warns(sl.NumbaFallbackWarning, match="compiler='numpy'"):
        got = sl.scan(f, sl.tensor([1.0, 2.0]), xs, compiler="numba")
    _agree(got, loop_scan(f, sl.tensor([1.0, 2.0]), xs), 1e-12)


def test_the_outer_kernel_holds_the_inner_loop():
    from scanlib.scan.api import prepare
    from scanlib.scan.executor import compiled

    def f(h, x):
        c, ys = numba_scan(lambda c, k: (c * k + 1.0, c), h, x, reverse=True)
        return c, ys

    body, *_ = prepare(f, _t(2), _t((3, 4, 2)), None, False, 0)
    cb = compiled(body, 1, 1, False, (), "numba")
    src = cb.native.kernel_source
    assert "for nt" in src and "range(4 - 1, -1, -1)" in src, src


def test_an_index_out_of_range_in_an_inner_step_is_numpys():
    E = _t((3, 2))

    def f(h, x):
        c, _ = numba_scan(lambda c, i: (c + E[i], None), h, x)
        return c, None

    idx = sl.tensor(np.array([[0, 1], [2, 5]]))
    with pytest.raises(IndexError, match="out of range"):
        sl.scan(f, sl.tensor([0.0, 0.0]), idx, compiler="numba")


def _trace(jitted):
    (trace,) = jitted._traces.values()
    return trace


def test_jit_fuses_a_call_with_nested_scans_and_a_step_index():
    # X[t] at the step's t (the step-index idiom) in both levels: the fused kernel reads
    # the row through a bounds-checked index instead of refusing the call.
    X = _t((5, 3))

    def make(compiler):
        def loss(W):
            def outer(h, t):
                def inner(c, j):
                    return sl.tanh(c @ W + X[t] * j), X[t][j]

                c, ys = sl.scan(inner, h, sl.arange(2), compiler=compiler)
                return c, ys.sum()

            h, ys = sl.scan(outer, X[0] * 0, sl.arange(5), compiler=compiler)
            return h.sum() + ys.sum()
        return sl.value_and_grad(loss)

    W = _t((3, 3), scale=0.4)
    want = make("numpy")(W)
    jitted = sl.jit(make("numba"))
    jitted(W)
    before = native.STATS["fused calls"]
    got = jitted(W)
    assert _trace(jitted).fused is not None, _trace(jitted).fused_note
    assert native.STATS["fused calls"] == before + 1
    _agree(got, want, 1e-10)


# --- a while_loop in a scan body: a `while` in the kernel ---------------------------------------
def _newton_sqrt(c, x, max_steps=None):
    """A while_loop in the step: Newton's iteration for sqrt(x^2 + c^2 + 1), its trip count a y."""
    a = x * x + c * c + 1.0

    def cond(v):
        i, r = v
        return (i < 20) & (sl.abs(r * r - a) > 1e-6 * a)

    def body(v):
        i, r = v
        return i + 1, 0.5 * (r + a / r)

    i, r = sl.while_loop(cond, body, (sl.tensor(np.int64(0)), a), max_steps=max_steps)
    return r * 0.1 + c * 0.5, (i, r)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_a_while_loop_in_a_scan_body_runs_in_the_kernel(dtype, reverse):
    init, xs = _t((), dtype), _t((9,), dtype, 3.0)
    with sl.no_grad():
        want = loop_scan(_newton_sqrt, init, xs, reverse=reverse)
        plain = numpy_scan(_newton_sqrt, init, xs, reverse=reverse)
        before = native.STATS["kernel calls"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", sl.NumbaFallbackWarning)
            got = numba_scan(_newton_sqrt, init, xs, reverse=reverse)
    assert native.STATS["kernel calls"] > before
    rtol = 1e-12 if dtype == "float64" else 1e-5
    _agree(got, want, rtol)
    _agree(got, plain, rtol)
    assert got[1][0].dtype == np.int64 and got[1][0].numpy().max() > 1


def test_a_while_loop_in_a_scan_body_under_grad():
    # The forward body compiles; the backward body holds while_loop's derivative, which has
    # no numba rule: it runs as NumPy, with a warning, and the gradients are the loop's.
    init, xs = _t(()), _t((5,), scale=3.0)

    def loss(scan_fn):
        return lambda c, xs: scan_fn(_newton_sqrt, c, xs)[0]

    want = sl.value_and_grad(loss(loop_scan), argnums=(0, 1))(init, xs)
    with pytest.warns(sl.NumbaFallbackWarning, match="while_loop_vjp"):
        got = sl.value_and_grad(loss(numba_scan), argnums=(0, 1))(init, xs)
    _agree(got, want, 1e-12)


def test_a_while_loop_past_max_steps_raises_while_loops_error():
    f = lambda c, x: _newton_sqrt(c, x, max_steps=1)  # noqa: E731
    with sl.no_grad(), pytest.raises(RuntimeError, match="max_steps=1"):
        numba_scan(f, sl.tensor(0.5), sl.tensor([3.0, 4.0]))


def test_jit_fuses_a_while_loop_in_a_scan_body():
    xs = _t((6,), scale=3.0)

    def make(compiler):
        return lambda c: sl.scan(_newton_sqrt, c, xs, compiler=compiler)

    want = make("numpy")(sl.tensor(0.3))
    jitted = sl.jit(make("numba"))
    jitted(sl.tensor(0.3))
    before = native.STATS["fused calls"]
    got = jitted(sl.tensor(0.3))
    assert _trace(jitted).fused is not None, _trace(jitted).fused_note
    assert native.STATS["fused calls"] == before + 1
    _agree(got, want, 1e-12)


def custom_rnn(scan_fn, W, xs):
    """An outer scan whose body calls a custom_vjp function that runs a scan of its own (as
    odeint's solver does in its custom_vjp): the inner scan is written into the outer kernel
    through the custom call's rule, forward and backward."""
    def run(h, x, W):
        def inner(c, k):
            return sl.tanh(c @ W + k * x), None
        return scan_fn(inner, h, sl.arange(3.0).astype(x.dtype) * 0.5)[0]

    @sl.custom_vjp
    def solve(h, x, W):
        return run(h, x, W)

    def solve_fwd(h, x, W):
        return run(h, x, W), (h, x, W)

    def solve_bwd(res, g):
        return sl.vjp(run, *res)[1](g)

    solve.defvjp(solve_fwd, solve_bwd)

    def outer(h, x):
        h = solve(h, x, W)
        return h, (h * h).sum()

    h, ys = scan_fn(outer, xs[0] * 0, xs)
    return (h * h).sum() + ys.sum()


def test_a_scan_inside_a_custom_vjp_call_in_a_scan_body():
    check(custom_rnn, (_t((4, 4), scale=0.4), _t((6, 4))))


def test_jit_fuses_a_call_whose_custom_vjp_runs_a_scan():
    W, xs = _t((4, 4), scale=0.4), _t((6, 4))
    loss = sl.value_and_grad(lambda W, xs: custom_rnn(numba_scan, W, xs), argnums=(0, 1))
    jitted = sl.jit(loss)
    jitted(W, xs)
    assert _trace(jitted).fused is not None, _trace(jitted).fused_note
    _agree(jitted(W, xs), sl.value_and_grad(lambda W, xs: custom_rnn(loop_scan, W, xs),
                                            argnums=(0, 1))(W, xs), 1e-10)


def test_a_nested_carry_read_after_a_long_chain_of_operations_compiles():
    # numba walks a carry's definitions recursively; each step reads its carries by a name
    # assigned once, so a long body stays within the recursion limit.
    def program(scan_fn, W, xs):
        def outer(h, x):
            def inner(c, k):
                h = long_chain(c * k)
                return c * 0.9 + h + x, None  # c read again after the chain
            c, _ = scan_fn(inner, h, sl.arange(2.0), reverse=False)
            return c, None
        h, _ = scan_fn(outer, W, xs)
        return (h * h).sum()

    args = (_t(4), _t((3, 4)))
    want = program(numpy_scan, *args)
    before = native.STATS["kernel calls"]
    with little_recursion(), warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = program(numba_scan, *args)
    assert native.STATS["kernel calls"] > before
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
