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


def test_fori_loop_traced_bound_raises():
    with pytest.raises(TypeError, match="fori_loop: upper is traced"):
        sl.scan(lambda c, n: (sl.fori_loop(0, n, lambda i, v: v + 1.0, c), None),
                sl.tensor(0.0), sl.tensor([1, 2]))


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
    count = []
    sl.while_loop(cond, lambda v: (v._trace is None and count.append(1)) or v * 2.0, v0)
    assert len(count) == steps  # run on values once per step (and traced by scan)
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


def test_while_loop_ode_until_event():
    # a ball thrown up at speed u, Euler steps until it falls below the ground: the event
    # time's step count depends on u; the state at the event is differentiable in u and g.
    dt = 0.01

    def ball(u, g, loop):
        def body(s):
            t, y, v = s
            return t + dt, y + dt * v, v - dt * g
        return loop(lambda s: s[1] >= 0.0, body, (sl.tensor(0.0), sl.tensor(0.0) + 1e-9, u))

    u, g = sl.tensor(5.0), sl.tensor(9.81)
    t, y, v = ball(u, g, sl.while_loop)
    assert 1.0 < float(t) < 1.05 and float(y) < 0
    _grads_match(lambda u, g: sl.stack(ball(u, g, sl.while_loop)[1:]),
                 lambda u, g: sl.stack(ball(u, g, python_while)[1:]), (u, g))


def test_while_loop_containing_scan():
    xs = sl.tensor(np.linspace(0.1, 0.5, 5))

    def f(w):
        def body(c):
            s, _ = sl.scan(lambda h, x: (sl.tanh(h * w + x), None), c[1], xs)
            return c[0] + 1, s
        return lambda c: c[0] < 3, body, (sl.tensor(0), w * 0.5)

    w = sl.tensor([0.7, -1.2])
    _grads_match(lambda w: sl.while_loop(*f(w))[1], lambda w: python_while(*f(w))[1], (w,))


def test_while_loop_inside_scan_raises():
    with pytest.raises(TypeError, match=r"while_loop cannot run inside a scan body "
                                        r"\(or make_graph\) yet.*fori_loop"):
        sl.scan(lambda c, x: (sl.while_loop(lambda v: v < x, lambda v: v + 1.0, c), None),
                sl.tensor(0.0), sl.tensor([1.0, 2.0]))


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
    with pytest.raises(TypeError, match=r"i\.astype\(v\.dtype\)"):
        sl.fori_loop(0, 3, lambda i, v: v + i, sl.tensor(np.float32(1.0)))
    out = sl.fori_loop(0, 3, lambda i, v: v + i.astype(v.dtype), sl.tensor(np.float32(1.0)))
    assert out.dtype == np.float32 and out.item() == 4.0
