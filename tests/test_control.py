"""fori_loop and while_loop: against the same Python loop on the tape (values, gradients,
second order), finite differences in float64, data-dependent trip counts, nesting with scan,
pytree carries, error wording, and jax.lax where JAX is installed."""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl


def python_while(cond_fun, body_fun, val):
    while bool(cond_fun(val)):
        val = body_fun(val)
    return val


def python_fori(lower, upper, body_fun, val):
    for i in range(lower, upper):
        val = body_fun(sl.tensor(i), val)
    return val


def python_scan(f, carry, xs):
    """scan's definition: the Python loop over xs's rows, ys stacked."""
    ys = []
    for t in range(xs.shape[0]):
        carry, y = f(carry, xs[t])
        ys.append(y)
    return carry, sl.stack(ys)


def assert_trees_close(a, b, rtol=1e-12, atol=1e-12):
    la, ta = sl.pytree.flatten(a)
    lb, tb = sl.pytree.flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        x, y = sl.as_tensor(x), sl.as_tensor(y)
        assert x.dtype == y.dtype, (x.dtype, y.dtype)
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=rtol, atol=atol)


def _grads_match(f_loop, f_ref, args, order=2):
    """Values, gradients and (order 2) the gradient of a scalar of the gradient agree."""
    assert_trees_close(f_loop(*args), f_ref(*args))
    g1 = sl.grad(lambda *a: sl.sum(f_loop(*a)), argnums=tuple(range(len(args))))(*args)
    g2 = sl.grad(lambda *a: sl.sum(f_ref(*a)), argnums=tuple(range(len(args))))(*args)
    assert_trees_close(g1, g2)
    if order >= 2:
        def gsum(f):
            return lambda *a: sum(sl.sum(g * g) for g in sl.grad(
                lambda *b: sl.sum(f(*b)), argnums=tuple(range(len(a))))(*a))
        h1 = sl.grad(gsum(f_loop), argnums=tuple(range(len(args))))(*args)
        h2 = sl.grad(gsum(f_ref), argnums=tuple(range(len(args))))(*args)
        assert_trees_close(h1, h2)


# --- fori_loop ------------------------------------------------------------------------------
def _rnn_body(W):
    return lambda i, h: sl.tanh(h @ W + 0.1 * i.astype(np.float64))


@pytest.mark.parametrize("lower,upper", [(0, 0), (3, 1), (0, 1), (2, 9)])
def test_fori_loop_matches_python_loop(backend, lower, upper):
    rng = np.random.default_rng(0)
    W = backend.tensor(rng.standard_normal((3, 3)) * 0.5)
    h = backend.tensor(rng.standard_normal((2, 3)))

    _grads_match(lambda h, W: sl.fori_loop(lower, upper, _rnn_body(W), h),
                 lambda h, W: python_fori(lower, upper, _rnn_body(W), h), (h, W))


def test_fori_loop_finite_differences():
    rng = np.random.default_rng(1)
    sl.testing.check_grads(lambda h, W: sl.fori_loop(0, 5, _rnn_body(W), h),
                           (rng.standard_normal((2, 3)), rng.standard_normal((3, 3)) * 0.5),
                           order=2)


def test_fori_loop_index_dtype_and_tensor_bounds():
    seen = []

    def body(i, v):
        seen.append((i.shape, i.dtype))
        return v + i.astype(np.float64)

    assert float(sl.fori_loop(1, 4, body, sl.tensor(0.0))) == 6.0
    assert seen[-1] == ((), np.dtype(np.int64))
    out = sl.fori_loop(sl.tensor(1, dtype=np.int32), sl.tensor(4, dtype=np.int32), body, 0.0)
    assert float(out) == 6.0 and seen[-1] == ((), np.dtype(np.int32))
    assert float(sl.fori_loop(np.int32(0), 3, body, sl.tensor(0.0))) == 3.0
    assert seen[-1][1] == np.int32


def test_fori_loop_pytree_carry():
    W = sl.tensor([[0.5, -0.2], [0.1, 0.3]])

    def body(i, c):
        h = sl.tanh(c["h"] @ W)
        return {"h": h, "acc": (c["acc"][0] + sl.sum(h), c["acc"][1] + 1)}

    init = {"h": sl.tensor([1.0, 2.0]), "acc": (sl.tensor(0.0), sl.tensor(0))}
    assert_trees_close(sl.fori_loop(0, 4, body, init), python_fori(0, 4, body, init))


def test_fori_loop_nested_inside_scan():
    W = sl.tensor(np.random.default_rng(2).standard_normal((3, 3)) * 0.5)
    xs = sl.tensor(np.random.default_rng(3).standard_normal((4, 3)))

    def outer(inner):
        def f(W, xs):
            def step(h, x):
                h = inner(lambda i, v: sl.tanh(v @ W + x), h)
                return h, sl.sum(h)
            return sl.scan(step, sl.zeros(3), xs)[1]
        return f

    _grads_match(outer(lambda b, h: sl.fori_loop(0, 3, lambda i, v: b(i, v), h)),
                 outer(lambda b, h: python_fori(0, 3, b, h)), (W, xs))


def test_fori_loop_traced_bounds_inside_scan():
    # bounds computed from the scanned values: a while_loop at every step of the scan
    ns = [0, 1, 4, 7]

    def body(W):
        return lambda i, v: sl.tanh(v @ W) + 0.1 * i.astype(v.dtype)

    def ours(W, h0):
        def step(h, n):
            return sl.fori_loop(n // 2, n, body(W), h), None
        return sl.scan(step, h0, sl.tensor(ns, dtype=np.int32))[0]

    def reference(W, h0):
        for n in ns:
            h0 = python_fori(n // 2, n, lambda i, v: body(W)(i.astype(np.int32), v), h0)
        return h0

    W = sl.tensor(np.array([[0.5, -0.3], [0.2, 0.4]]))
    _grads_match(ours, reference, (W, sl.tensor([1.0, -1.0])))


@pytest.mark.parametrize("bad,what", [(1.5, "float"), (True, "bool"),
                                      (sl.tensor([1, 2]), r"i64\[2\]"),
                                      (sl.tensor(2.0), r"f64\[\]")])
def test_fori_loop_bad_bounds(bad, what):
    with pytest.raises(TypeError, match=f"fori_loop: upper must be .*{what}"):
        sl.fori_loop(0, bad, lambda i, v: v, sl.tensor(0.0))


# --- while_loop -----------------------------------------------------------------------------
def _doubling(x):
    return lambda v: v * x


@pytest.mark.parametrize("start,steps", [(200.0, 0), (60.0, 1), (0.01, 14)])
def test_while_loop_trip_counts_match_python_loop(backend, start, steps):
    x = backend.tensor(2.0)
    v0 = backend.tensor(start)
    cond = lambda v: v < 100.0  # noqa: E731
    calls = []
    body = lambda v: calls.append(v._trace is not None) or v * 2.0  # noqa: E731
    sl.while_loop(cond, body, v0)
    sl.grad(lambda v0: sl.while_loop(cond, body, v0))(v0)
    assert calls == [True, True]  # traced once per call, never run op by op
    _grads_match(lambda v0, x: sl.while_loop(cond, _doubling(x), v0 * x),
                 lambda v0, x: python_while(cond, _doubling(x), v0 * x), (v0, x))


def test_while_loop_finite_differences_many_steps():
    # a trip count that stays put under the small perturbations of the check
    def f(h, W):
        def body(c):
            return c[0] + 1, sl.tanh(c[1] @ W)
        return sl.while_loop(lambda c: c[0] < 7, body, (sl.tensor(0), h))[1]

    rng = np.random.default_rng(4)
    sl.testing.check_grads(f, (rng.standard_normal((2, 3)), rng.standard_normal((3, 3))),
                           order=2)


def test_while_loop_newton_to_tolerance():
    # sqrt(a) by Newton's method; the gradient flows through the iterations, as in the loop.
    def newton(a):
        def body(c):
            x, n = c
            return 0.5 * (x + a / x), n + 1
        return sl.while_loop(lambda c: sl.abs(c[0] * c[0] - a) > 1e-10 * a, body,
                             (sl.ones_like(a), sl.tensor(0)))

    a = sl.tensor(9.0)
    x, n = newton(a)
    assert abs(float(x) - 3.0) < 1e-9 and 3 <= int(n) <= 10
    _grads_match(lambda a: newton(a)[0],
                 lambda a: python_while(lambda c: sl.abs(c[0] * c[0] - a) > 1e-10 * a,
                                        lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1),
                                        (sl.ones_like(a), sl.tensor(0)))[0], (a,))
    np.testing.assert_allclose(float(sl.grad(lambda a: newton(a)[0])(a)), 1 / 6, rtol=1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_while_loop_ode_until_event(dtype):
    # a ball thrown up at speed u, Euler steps until it falls below the ground: the event
    # time's step count depends on u; the state at the event is differentiable in u and g.
    dt = dtype(0.01)

    def ball(u, g, loop):
        def body(s):
            t, y, v = s
            return t + dt, y + dt * v, v - dt * g
        zero = sl.zeros((), dtype)
        return loop(lambda s: s[1] >= 0.0, body, (zero, zero + dtype(1e-6), u))

    u, g = sl.tensor(np.array(5.0, dtype)), sl.tensor(np.array(9.81, dtype))
    t, y, v = ball(u, g, sl.while_loop)
    assert 1.0 < float(t) < 1.05 and float(y) < 0 and y.dtype == dtype
    order = 2 if dtype == np.float64 else 1
    tol = 1e-12 if dtype == np.float64 else 1e-5
    f_loop = lambda u, g: sl.stack(ball(u, g, sl.while_loop)[1:])  # noqa: E731
    f_ref = lambda u, g: sl.stack(ball(u, g, python_while)[1:])  # noqa: E731
    if order == 2:
        _grads_match(f_loop, f_ref, (u, g))
    else:
        assert_trees_close(f_loop(u, g), f_ref(u, g), rtol=tol, atol=tol)
        assert_trees_close(sl.grad(lambda u, g: sl.sum(f_loop(u, g)), argnums=(0, 1))(u, g),
                           sl.grad(lambda u, g: sl.sum(f_ref(u, g)), argnums=(0, 1))(u, g),
                           rtol=tol, atol=tol)


def test_while_loop_containing_scan():
    xs = sl.tensor(np.linspace(0.1, 0.5, 5))

    def f(w):
        def body(c):
            s, _ = sl.scan(lambda h, x: (sl.tanh(h * w + x), None), c[1], xs)
            return c[0] + 1, s
        return lambda c: c[0] < 3, body, (sl.tensor(0), w * 0.5)

    w = sl.tensor([0.7, -1.2])
    _grads_match(lambda w: sl.while_loop(*f(w))[1], lambda w: python_while(*f(w))[1], (w,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_while_loop_inside_scan_matches_python_loop(backend, dtype):
    targets = backend.tensor(np.array([0.5, 0.6, 0.9, 40.0], dtype=dtype))

    def run(loop, scan=sl.scan):
        def f(x, v0):
            def step(v, target):  # 0, 1 and many trips
                v = loop(lambda v: v < target, lambda v: v * x + 0.1, v)
                return v * 0.5, v
            return scan(step, v0, targets)[1]
        return f

    x, v0 = backend.tensor(np.array(1.3, dtype)), backend.tensor(np.array(1.0, dtype))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    out = run(sl.while_loop)(x, v0)
    assert out.dtype == dtype
    trips, v = [], 1.0
    for t in targets.numpy():  # the trip counts of the steps: 0, 1 and many
        n = 0
        while v < t:
            v, n = v * 1.3 + 0.1, n + 1
        trips.append(n)
        v *= 0.5
    assert trips[0] == 0 and trips[1] == 1 and trips[3] > 5, trips
    f_loop, f_ref = run(sl.while_loop), run(python_while, python_scan)
    assert_trees_close(f_loop(x, v0), f_ref(x, v0), rtol=tol, atol=tol)
    g1 = sl.grad(lambda x, v0: sl.sum(f_loop(x, v0)), argnums=(0, 1))(x, v0)
    g2 = sl.grad(lambda x, v0: sl.sum(f_ref(x, v0)), argnums=(0, 1))(x, v0)
    assert_trees_close(g1, g2, rtol=tol, atol=tol)


def test_while_loop_inside_scan_second_order():
    xs = sl.tensor([0.5, 3.0, 20.0])

    def run(loop, scan=sl.scan):
        def f(x, v0):
            def step(v, target):
                v = loop(lambda v: v < target, lambda v: sl.tanh(v) * x + v, v)
                return v * 0.3, v * v
            return scan(step, v0, xs)[1]
        return f

    _grads_match(run(sl.while_loop), run(python_while, python_scan),
                 (sl.tensor(0.8), sl.tensor(0.2)))


def test_nested_while_loops():
    def run(loop):
        def f(w):
            def inner(c):  # grows the state until it passes the outer counter
                return loop(lambda v: v < c[0] + 1.0, lambda v: v * w + 0.05, c[1])

            def body(c):
                return c[0] + 1.0, inner(c) * 0.6
            return loop(lambda c: c[0] < 4.0, body, (sl.tensor(0.0), sl.tensor(0.5)))[1]
        return f

    _grads_match(run(sl.while_loop), run(python_while), (sl.tensor(1.2),))


def test_fori_loop_inside_while_loop():
    W = sl.tensor(np.array([[0.6, -0.2], [0.3, 0.5]]))

    def run(loop, fori):
        def f(W, h):
            def body(c):
                return c[0] + 1, fori(0, 3, lambda i, v: v * 1.2 + sl.tanh(v @ W), c[1])
            return loop(lambda c: sl.sum(c[1] * c[1]) < 3.0, body, (sl.tensor(0), h))[1]
        return f

    h = sl.tensor([0.3, 0.1])
    _grads_match(run(sl.while_loop, sl.fori_loop), run(python_while, python_fori), (W, h))


def test_while_loop_inside_scan_with_pytree_carry():
    def run(loop, scan=sl.scan):
        def f(a):
            def step(c, target):
                out = loop(lambda c: c["y"][0] < target,
                           lambda c: {"y": (c["y"][0] + a * c["k"].astype(a.dtype),),
                                      "k": c["k"] + 1}, c)
                return out, out["y"][0]
            return scan(step, {"y": (sl.tensor(0.0),), "k": sl.tensor(1)},
                        sl.tensor([2.0, 2.5, 9.0]))[1]
        return f

    _grads_match(run(sl.while_loop), run(python_while, python_scan), (sl.tensor(0.7),))


def test_while_loop_not_run_on_stand_ins_at_trace_time():
    # on the trace's stand-in zeros this loop never stops (0 * 2 < 0 + 1 forever)
    def f(x):
        return sl.scan(lambda v, x: (sl.while_loop(lambda v: v < x + 1.0, lambda v: v * 2.0,
                                                   v), None), sl.tensor(1.0), x)[0]

    x = sl.tensor([3.0, 10.0])
    assert float(f(x)) == 16.0
    assert float(sl.grad(lambda x: f(x))(x)[1]) == 0.0
    print_out = str(sl.make_graph(lambda v: sl.while_loop(lambda v: v < 1.0,
                                                          lambda v: v * 2.0, v))(sl.tensor(0.5)))
    assert "while_loop(" in print_out and "def cond(" in print_out and "def body(" in print_out


def test_while_loop_max_steps_inside_scan():
    with pytest.raises(RuntimeError, match=r"still True after max_steps=3 steps"):
        sl.scan(lambda c, x: (sl.while_loop(lambda v: v < x, lambda v: v + 1.0, c,
                                            max_steps=3), None),
                sl.tensor(0.0), sl.tensor([2.0, 9.0]))


def test_while_loop_in_interpreted_scan():
    def f(x, interpret):
        return sl.scan(lambda v, t: (sl.while_loop(lambda v: v < t, lambda v: v * x, v), v),
                       sl.tensor(1.0), sl.tensor([3.0, 30.0]), interpret=interpret)[1]

    x = sl.tensor(1.7)
    assert_trees_close(f(x, True), f(x, False))
    assert_trees_close(sl.grad(lambda x: sl.sum(f(x, True)))(x),
                       sl.grad(lambda x: sl.sum(f(x, False)))(x))


def test_trip_count_runs_only_what_cond_needs():
    from scanlib.control import _trace_loop
    from scanlib.loops import counted_carries as _counted_carries

    def body(c):
        return c[0] + 1, sl.tanh(c[1]) * 2.0

    init = [sl.tensor(0), sl.tensor([0.3, -0.2])]
    tree = sl.pytree.flatten((0, 0))[1]
    cond, _, graph, _ = _trace_loop(lambda c: c[0] < 5, body, tree, init)
    assert _counted_carries(cond, graph, 2) == (0,)  # the counter alone
    cond, _, graph, _ = _trace_loop(lambda c: sl.sum(c[1]) < 5.0, body, tree, init)
    assert _counted_carries(cond, graph, 2) == (1,)
    # with the count found on the counter alone, value and gradients are still the loop's
    _grads_match(lambda x: sl.while_loop(lambda c: c[0] < 5, body, (sl.tensor(0), x))[1],
                 lambda x: python_while(lambda c: c[0] < 5, body, (sl.tensor(0), x))[1],
                 (init[1],))


def _newton_root(p, loop, tol):
    """The root of f(x, p) = x^3 + p x - 1 by Newton's method from x = 1, to |f| < tol."""
    def f(x):
        return x * x * x + p * x - 1.0

    def body(c):
        x, n = c
        return x - f(x) / (3.0 * x * x + p), n + 1
    return loop(lambda c: sl.abs(f(c[0])) > tol, body, (sl.ones_like(p), sl.tensor(0)))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_newton_root_gradient_is_the_loop_and_the_implicit_function(dtype, tol):
    p = sl.tensor(np.array(2.5, dtype))
    x, n = _newton_root(p, sl.while_loop, tol)
    assert x.dtype == dtype and 2 <= int(n) <= 30
    assert_trees_close(x, _newton_root(p, python_while, tol)[0])
    g = sl.grad(lambda p: _newton_root(p, sl.while_loop, tol)[0])(p)
    g_loop = sl.grad(lambda p: _newton_root(p, python_while, tol)[0])(p)
    assert g.dtype == dtype
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g.numpy(), g_loop.numpy(), rtol=rtol)
    x_ = float(x)
    implicit = -x_ / (3 * x_ * x_ + float(p))  # -f_p / f_x at the root
    np.testing.assert_allclose(float(g), implicit, rtol=1e-4 if dtype == np.float32 else 1e-9)
    if dtype == np.float64:
        _grads_match(lambda p: _newton_root(p, sl.while_loop, tol)[0],
                     lambda p: _newton_root(p, python_while, tol)[0], (p,))


def test_newton_inside_scan_per_step_parameters():
    ps = sl.tensor([0.5, 1.0, 4.0])

    def run(loop, scan=sl.scan):
        def f(scale):
            return scan(lambda c, p: (c, _newton_root(p * scale, loop, 1e-12)[0]), 0.0, ps)[1]
        return f

    _grads_match(run(sl.while_loop), run(python_while, python_scan), (sl.tensor(1.1),))


def test_while_loop_pytree_carry_and_closure_gradient():
    W = sl.tensor([[0.9, 0.2], [-0.3, 0.8]])

    def run(loop, W, h0):
        def body(c):
            return {"k": c["k"] + 1, "h": c["h"] @ W, "norms": [c["norms"][0] + sl.sum(c["h"])]}
        return loop(lambda c: c["k"] < 5, body,
                    {"k": sl.tensor(0), "h": h0, "norms": [sl.tensor(0.0)]})

    h0 = sl.tensor([1.0, -1.0])
    _grads_match(lambda W, h0: run(sl.while_loop, W, h0)["norms"][0],
                 lambda W, h0: run(python_while, W, h0)["norms"][0], (W, h0))


def test_while_loop_no_grad_returns_loop_result():
    x = sl.tensor(1.5, requires_grad=True)
    with sl.no_grad():
        out = sl.while_loop(lambda v: v < 10.0, lambda v: v * x, x)
    assert float(out) == 1.5 ** 6 and not out.requires_grad
    assert sl.while_loop(lambda v: v < 10.0, lambda v: v * x, x).requires_grad


def test_while_loop_max_steps():
    with pytest.raises(RuntimeError, match=r"still True after max_steps=5 steps"):
        sl.while_loop(lambda v: v < 100.0, lambda v: v + 1.0, sl.tensor(0.0), max_steps=5)
    # exactly max_steps steps is allowed
    assert float(sl.while_loop(lambda v: v < 5.0, lambda v: v + 1.0, sl.tensor(0.0),
                               max_steps=5)) == 5.0
    with pytest.raises(ValueError, match="max_steps must be None or an int >= 0"):
        sl.while_loop(lambda v: v < 1.0, lambda v: v, sl.tensor(0.0), max_steps=-1)


@pytest.mark.parametrize("cond,what", [
    (lambda v: v, r"f64\[\]"),
    (lambda v: sl.stack([v < 1.0, v < 2.0]), r"bool\[2\]"),
    (lambda v: 1, "int 1"),
    (lambda v: None, "NoneType None"),
])
def test_while_loop_bad_cond_result(cond, what):
    with pytest.raises(TypeError, match=f"cond_fun must return a 0-d bool .* returned {what}"):
        sl.while_loop(cond, lambda v: v + 1.0, sl.tensor(0.0))


def test_while_loop_carry_type_errors():
    with pytest.raises(TypeError, match=r"init_val is \(\*, \*\).* returned \*"):
        sl.while_loop(lambda c: c[0] < 1.0, lambda c: c[0] + 1.0, (sl.tensor(0.0), 1.0))
    with pytest.raises(TypeError, match=r"init_val is f64\[2\] and the returned val is f32\[2\]"):
        sl.while_loop(lambda v: v[0] < 1.0, lambda v: (v + 1.0).astype(np.float32),
                      sl.tensor([0.0, 0.0]))


# --- against JAX ----------------------------------------------------------------------------
def test_against_jax():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):  # for this test only: a global switch leaks
        jnp = jax.numpy
        W = np.array([[0.5, -0.4], [0.3, 0.2]])
        h0 = np.array([1.0, 2.0])

        ours = sl.fori_loop(1, 6, lambda i, h: sl.tanh(h @ sl.tensor(W)) * i.astype(np.float64), h0)
        theirs = jax.lax.fori_loop(1, 6, lambda i, h: jnp.tanh(h @ W) * i, jnp.asarray(h0))
        np.testing.assert_allclose(ours.numpy(), np.asarray(theirs), rtol=1e-12)

        def body(c):
            return c[0] + 1, c[1] * 1.7 + 0.1

        ours = sl.while_loop(lambda c: c[1] < 50.0, body, (sl.tensor(0), sl.tensor(0.5)))
        theirs = jax.lax.while_loop(lambda c: c[1] < 50.0, body, (0, 0.5))
        assert int(ours[0]) == int(theirs[0])
        np.testing.assert_allclose(float(ours[1]), float(theirs[1]), rtol=1e-12)
        # JAX can forward-differentiate its while_loop; our reverse-mode gradient must agree.
        d_jax = jax.jacfwd(lambda s: jax.lax.while_loop(lambda c: c[1] < 50.0,
                                                        lambda c: (c[0] + 1, c[1] * s),
                                                        (0, 0.5))[1])(1.7)
        d_ours = sl.grad(lambda s: sl.while_loop(lambda c: c[1] < 50.0,
                                                 lambda c: (c[0] + 1, c[1] * s),
                                                 (sl.tensor(0), sl.tensor(0.5)))[1])(sl.tensor(1.7))
        np.testing.assert_allclose(float(d_ours), float(d_jax), rtol=1e-12)


def test_fori_loop_index_promotion_error_says_how_to_cast():
    # the int64 index widens an int32 carry (a float32 one takes i as float32, as in JAX)
    with pytest.raises(TypeError, match=r"i\.astype\(v\.dtype\)"):
        sl.fori_loop(0, 3, lambda i, v: v + i, sl.tensor(np.int32(1)))
    out = sl.fori_loop(0, 3, lambda i, v: v + i.astype(v.dtype), sl.tensor(np.int32(1)))
    assert out.dtype == np.int32 and out.item() == 4
    out = sl.fori_loop(0, 3, lambda i, v: v + i, sl.tensor(np.float32(1.0)))
    assert out.dtype == np.float32 and out.item() == 4.0


def test_while_loop_refuses_a_carry_that_turns_float64():
    # NumPy reads `dtype == None` as float64, which once let this through.
    with pytest.raises(TypeError, match="keep each carry leaf's shape and dtype"):
        sl.while_loop(lambda v: v < 5, lambda v: v * 1.5, sl.tensor(1))


def test_while_loop_with_no_trips_returns_tensors_on_every_path():
    a = sl.tensor(2.0, requires_grad=True)
    assert type(sl.while_loop(lambda v: v > 100, lambda v: v * a, np.array(1.0))) is sl.Tensor
    assert type(sl.while_loop(lambda v: v > 100, lambda v: v * 2.0, np.array(1.0))) is sl.Tensor


def test_jvp_of_a_while_loop_runs_it():
    # jvp's forward trace holds real values: the loop must run there (it once returned the
    # stand-in zeros a shape-only trace would).
    w = lambda v0: sl.while_loop(lambda v: v < 100.0, lambda v: v * 3.0, v0)  # noqa: E731
    out, t = sl.jvp(w, (sl.tensor(1.0),), (sl.tensor(1.0),))
    assert out.item() == 243.0 and t.item() == 243.0


_WJ = sl.tensor([[0.9, 0.2], [-0.1, 0.8]])
_KJ = sl.tensor([0.1, -0.3])


def _while_f(x, k=_KJ):
    def body(c):
        v, i, u = c
        sl.debug.print("step {}", i)
        return sl.tanh(v @ _WJ) * 1.5 + x * k, i + 1, u * 2.0
    # cond reads a float carry too: its value has a tangent, the decision has none
    return sl.while_loop(lambda c: (c[1] < 3) & (sl.sum(c[0]) < 50.0), body,
                         (x * 0.5, 0, sl.ones(2)))[0]


def _while_loop_f(x, k=_KJ):
    v = x * 0.5
    for _ in range(3):
        v = sl.tanh(v @ _WJ) * 1.5 + x * k
    return v


def test_jvp_of_a_while_loop_is_one_loop_over_values_and_tangents(capsys):
    """while_loop's JVP rule (JAX's): one loop whose carries are the primal carries and their
    tangents, so the body runs once a step (the transposed VJP ran the loop and then a scan
    of its trip count again: twice the prints); every forward-mode transformation of it is
    the Python loop's."""
    x, t = sl.tensor([0.3, -0.2]), sl.tensor([1.0, 0.5])
    capsys.readouterr()
    got = sl.jvp(_while_f, (x,), (t,))
    assert capsys.readouterr().out.count("step ") == 3
    want = sl.jvp(_while_loop_f, (x,), (t,))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-14)
    cases = [
        lambda f: sl.jacfwd(f)(x),
        lambda f: sl.jacfwd(lambda k: f(x, k))(_KJ),  # a closed-over value's tangent
        lambda f: sl.hessian(lambda x: f(x).sum())(x),
        lambda f: sl.jacrev(sl.jacfwd(f))(x),
        lambda f: sl.jit(lambda x: sl.jvp(f, (x,), (t,))[1])(x),
        lambda f: sl.vmap(lambda u: sl.jvp(f, (x,), (u,))[1])(sl.eye(2)),
        lambda f: sl.grad(lambda x: sl.jvp(f, (x,), (t,))[1].sum())(x),
        lambda f: sl.scan(lambda c, a: (c + sl.jvp(f, (c,), (a,))[1], None), x,
                          sl.stack([t, x]))[0],
    ]
    for case in cases:
        np.testing.assert_allclose(case(_while_f).numpy(), case(_while_loop_f).numpy(),
                                   rtol=1e-12, atol=1e-14)
    capsys.readouterr()


def test_forward_mode_through_a_while_loop_reuses_its_compiled_loop(monkeypatch):
    """The JVP's loop is written once per body and set of tangents: its cond, like its body,
    is one graph (a new one per call once made every call write, and keep, another loop)."""
    from scanlib import loops

    written = []
    real = loops._generate
    monkeypatch.setattr(loops, "_generate", lambda *a: written.append(1) or real(*a))
    f = lambda x: sl.while_loop(lambda c: c[1] < 5,  # noqa: E731
                                lambda c: (sl.sin(c[0]) + x, c[1] + 1), (x, 0))[0]
    x = sl.tensor([0.3, -0.2])
    sl.jvp(f, (x,), (x,))
    before = len(written)
    for _ in range(3):
        sl.jvp(f, (x,), (x,))
    assert len(written) == before


def test_a_python_number_init_in_a_traced_while_loop_takes_the_bodys_dtype():
    xs = sl.tensor([0.5, 1.0, 2.0], dtype="float32")
    ys = sl.scan(lambda c, a: (c, sl.while_loop(lambda v: v < 3.0, lambda v: v + a, 0.0)),
                 sl.tensor(0.0, dtype="float32"), xs)[1]
    assert ys.dtype == np.float32
    np.testing.assert_array_equal(ys.numpy(), [3.0, 3.0, 4.0])


def test_a_condition_on_the_state_runs_the_body_once_with_gradients(monkeypatch):
    # When the trip count needs (most of) the body, the gradient's forward is one loop that
    # saves the residuals as it finds the count, not the count and then scan's forward.
    control = __import__("sys").modules["scanlib.control"]
    calls = []
    real = control.apply_scan
    monkeypatch.setattr(control, "apply_scan", lambda *a, **k: calls.append(1) or real(*a, **k))
    W = sl.tensor(np.array([[0.6, -0.3], [0.2, 0.5]], np.float32))

    def run(loop, h0, W):
        def body(c):  # |h| grows by 1.3 a step, give or take: the loop ends
            return {"h": c["h"] * 1.3 + 0.1 * sl.tanh(c["h"] @ W), "n": c["n"] + 1}
        return loop(lambda c: sl.sum(c["h"] * c["h"]) < 4.0, body, {"h": h0, "n": sl.tensor(0)})

    h0 = sl.tensor(np.array([0.1, 0.2], np.float32))
    out = run(sl.while_loop, h0, W)
    assert out["h"].dtype == np.float32 and int(out["n"]) > 2
    assert_trees_close(out, run(python_while, h0, W), rtol=1e-6, atol=1e-6)
    g = sl.grad(lambda h0, W: sl.sum(run(sl.while_loop, h0, W)["h"]), argnums=(0, 1))(h0, W)
    g_ref = sl.grad(lambda h0, W: sl.sum(run(python_while, h0, W)["h"]), argnums=(0, 1))(h0, W)
    assert all(a.dtype == np.float32 for a in g)
    assert_trees_close(g, g_ref, rtol=1e-5, atol=1e-6)
    h64, W64 = h0.astype(np.float64), W.astype(np.float64)
    _grads_match(lambda h0, W: run(sl.while_loop, h0, W)["h"],
                 lambda h0, W: run(python_while, h0, W)["h"], (h64, W64))
    assert calls == []  # never the count followed by scan
    with pytest.raises(RuntimeError, match="max_steps=2"):
        sl.grad(lambda W: sl.sum(sl.while_loop(
            lambda c: sl.sum(c * c) < 4.0, lambda c: c * 1.3 + sl.tanh(c @ W), h64,
            max_steps=2)))(W64)
    g0 = sl.grad(lambda W: sl.sum(sl.while_loop(lambda c: sl.sum(c * c) > 4.0,
                                                lambda c: c @ W, h64 * W[0, 0])))(W64)
    np.testing.assert_array_equal(g0.numpy(), [[float(sl.sum(h64)), 0.0], [0.0, 0.0]])  # no trip
    # a counter condition: the count is cheap, and scan's compiled loop runs the forward
    sl.grad(lambda W: sl.sum(sl.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] @ W),
                                           (sl.tensor(0), h64))[1]))(W64)
    assert calls == [1]


def test_the_generated_loop_writes_namespace_calls_and_static_scatters_itself():
    """reshape, where, concatenate and scatters at a static index are written into the
    generated loop (with its own array namespace), not called through their impls at every
    step; the values stay the Python loop's, gradients (whose bodies scatter) too."""
    from scanlib.control import _trace_loop
    from scanlib.loops import runner

    def body(c):
        i, v, m = c
        w = sl.reshape(v, (2, 1))
        w = sl.reshape(w, (2, 1)) * 0.5  # to the shape it has
        m = m.at[1].set(0.0).at[0].set(sl.where(v > 0.0, v, -v))
        v = sl.concatenate([w[:, 0], sl.sin(v[:1]) + v[1:]], axis=0)[1:] + 0.1
        g = sl.grad(lambda u: sl.sin(u[0]) * u[1])(v)  # its transposes scatter into zeros
        return i + 1, v + 0.1 * g, m

    init = (sl.tensor(0), sl.tensor([0.3, -0.4]), sl.zeros((3, 2)))

    def f(v, m, loop):
        _, v, m = loop(lambda c: c[0] < 5, body, (init[0], v, m))
        return sl.concatenate([v, sl.reshape(m, (6,))])

    _grads_match(lambda v, m: f(v, m, sl.while_loop), lambda v, m: f(v, m, python_while),
                 init[1:])
    tree = sl.pytree.flatten(init)[1]
    cond, _, graph, _ = _trace_loop(lambda c: c[0] < 5, body, tree, list(init))
    source = runner(cond, graph, (0, 1, 2)).source
    for name in ("reshape", "where", "concatenate", "scatter_set", "scatter_add"):
        assert f"# {name}" not in source, source
    for written in (".reshape((2, 1))", "xp.where(", ".copy()", "xp.zeros("):
        assert written in source, source
    # the backward body of while_loop's gradient (a scan) scatters into zeros: the loop
    # finds its trip count with the same generated code
    grad = sl.jit(sl.grad(lambda v: sl.sum(sl.sin(f(v, init[2], sl.while_loop)))))
    want = sl.grad(lambda v: sl.sum(sl.sin(f(v, init[2], python_while))))(init[1])
    np.testing.assert_allclose(grad(init[1]).numpy(), want.numpy(), rtol=1e-12)
