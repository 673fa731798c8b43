"""custom_vjp and custom_jvp: JAX's API and meaning, checked against closed forms and float64
finite differences under every transformation, and against JAX where it is installed."""

import contextlib
import functools
import io
import warnings

import numpy as np
import pytest

import scanlib as sl
from opcheck import fd_grad

X = np.array([0.3, 1.2, -0.7])
Y = np.array([2.0, -1.0, 0.5])


def close(a, b, tol=1e-7):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- the functions under test ---------------------------------------------------------------
def make_sin_mul():
    """f(x, y) = sin(x) * y with its true VJP, counting fwd calls."""
    calls = {"fwd": 0, "bwd": 0}

    @sl.custom_vjp
    def f(x, y):
        return sl.sin(x) * y

    def f_fwd(x, y):
        calls["fwd"] += 1
        return f(x, y), (sl.cos(x), sl.sin(x), y)

    def f_bwd(res, g):
        calls["bwd"] += 1
        cos_x, sin_x, y = res
        return cos_x * g * y, sin_x * g

    f.defvjp(f_fwd, f_bwd)
    return f, calls


def make_scaled_grad(scale):
    """The identity whose gradient is scaled: a rule that differs from fun's derivative, so
    a test sees that the rule (not fun) was differentiated."""
    @sl.custom_vjp
    def ident(x):
        return x

    ident.defvjp(lambda x: (x, None), lambda res, g: (g * scale,))
    return ident


def make_log1pexp():
    @sl.custom_jvp
    def log1pexp(x):
        return sl.log1p(sl.exp(x))

    log1pexp.defjvps(lambda t, out, x: t * (1.0 - 1.0 / (1.0 + sl.exp(x))))
    return log1pexp


def make_cubic_jvp():
    """f(x, y) = x**3 * y with a defjvp rule (true derivative)."""
    @sl.custom_jvp
    def f(x, y):
        return x ** 3 * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), 3.0 * x ** 2 * y * tx + x ** 3 * ty

    return f


# --- custom_vjp -------------------------------------------------------------------------------
def test_custom_vjp_value_grad_vjp_and_value_and_grad_match_closed_forms():
    f, _ = make_sin_mul()
    x, y = sl.tensor(X), sl.tensor(Y)
    close(f(x, y), np.sin(X) * Y)
    gx, gy = sl.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(x, y)
    close(gx, np.cos(X) * Y)
    close(gy, np.sin(X))
    v, g = sl.value_and_grad(lambda x: f(x, y).sum())(x)
    close(v, np.sum(np.sin(X) * Y))
    close(g, np.cos(X) * Y)
    out, pull = sl.vjp(f, x, y)
    ct = np.array([1.0, 2.0, 3.0])
    px, py = pull(sl.tensor(ct))
    close(px, np.cos(X) * Y * ct)
    close(py, np.sin(X) * ct)
    close(gx, fd_grad(lambda x: f(x, y).sum(), X))


def test_custom_vjp_uses_the_rule_and_keeps_only_the_residuals():
    f, calls = make_sin_mul()
    x, y = sl.tensor(X, requires_grad=True), sl.tensor(Y)
    out = f(x, y)
    assert calls == {"fwd": 1, "bwd": 0}
    out.sum().backward()
    assert calls == {"fwd": 1, "bwd": 1}  # bwd on the kept residuals; fwd not run again
    close(x.grad, np.cos(X) * Y)
    ident = make_scaled_grad(3.0)
    close(sl.grad(lambda x: ident(x).sum())(sl.tensor(X)), 3.0 * np.ones(3))


def test_custom_vjp_without_a_derivative_runs_fun_not_fwd():
    f, calls = make_sin_mul()
    close(f(sl.tensor(X), sl.tensor(Y)), np.sin(X) * Y)
    assert calls["fwd"] == 0


def test_custom_vjp_second_order_differentiates_fwd_and_bwd():
    f, _ = make_sin_mul()
    y = sl.tensor(Y)
    d2 = sl.grad(lambda x: sl.grad(lambda x: f(x, y).sum())(x).sum())(sl.tensor(X))
    close(d2, -np.sin(X) * Y)
    h = sl.jacrev(sl.jacrev(lambda x: f(x, y).sum()))(sl.tensor(X))
    close(h, np.diag(-np.sin(X) * Y))
    # a rule that is not fun's derivative: the gradient 3 * 2 * ident(x) is differentiated,
    # as JAX does, through fwd's operations (ident(x) = x), not by the rule again: 3 * 2
    ident = make_scaled_grad(3.0)
    close(sl.grad(lambda x: sl.grad(lambda x: (ident(x) ** 2).sum())(x).sum())(sl.tensor(X)),
          6.0 * np.ones(3))


def test_bwd_none_means_zero_for_an_argument_or_a_subtree():
    @sl.custom_vjp
    def f(x, d):
        return x * d["a"] + d["b"]

    f.defvjp(lambda x, d: (f(x, d), (x, d)),
             lambda res, g: (None, {"a": g * res[0], "b": None}))
    x, d = sl.tensor(X), {"a": sl.tensor(Y), "b": sl.tensor(Y)}
    gx, gd = sl.grad(lambda x, d: f(x, d).sum(), argnums=(0, 1))(x, d)
    close(gx, np.zeros(3))
    close(gd["a"], X)
    close(gd["b"], np.zeros(3))


def test_pytree_arguments_outputs_and_residuals():
    @sl.custom_vjp
    def f(p):
        return {"s": p["w"] * p["b"][0], "t": (p["b"][1],)}

    def fwd(p):
        return f(p), {"saved": [p["w"], p["b"][0]], "none": None}

    def bwd(res, g):
        w, b0 = res["saved"]
        return ({"w": g["s"] * b0, "b": (g["s"] * w, g["t"][0])},)

    f.defvjp(fwd, bwd)
    p = {"w": sl.tensor(X), "b": (sl.tensor(Y), sl.tensor(X))}
    g = sl.grad(lambda p: (f(p)["s"] + 2.0 * f(p)["t"][0]).sum())(p)
    close(g["w"], Y)
    close(g["b"][0], X)
    close(g["b"][1], 2.0 * np.ones(3))


def test_an_output_nobody_reads_gets_zeros_and_integer_inputs_none():
    @sl.custom_vjp
    def two(x):
        return sl.sin(x), sl.cos(x)

    two.defvjp(lambda x: (two(x), x), lambda x, g: (g[0] * sl.cos(x) - g[1] * sl.sin(x),))
    x = sl.tensor(X)
    close(sl.grad(lambda x: two(x)[0].sum())(x), np.cos(X))
    close(sl.grad(lambda x: sl.scan(lambda c, _: (two(c)[1], None), x, None,
                                    length=1)[0].sum())(x), -np.sin(X))

    @sl.custom_vjp
    def take(x, i):
        return x[i]

    take.defvjp(lambda x, i: (x[i], (i, x.shape)),
                lambda res, g: (sl.zeros(res[1]).at[res[0]].add(g), None))
    close(sl.grad(lambda x: take(x, sl.tensor(1)) * 2.0)(x), [0.0, 2.0, 0.0])


def test_second_order_through_a_scan_and_nested_custom_functions():
    f, _ = make_sin_mul()
    cubic = make_cubic_jvp()
    y = sl.tensor(Y)

    def run(x, fn):
        return sl.scan(lambda c, _: (fn(c, y), None), x, None, length=2)[0].sum()

    x = sl.tensor(X)
    close(sl.grad(lambda x: sl.grad(lambda x: run(x, f))(x).sum())(x),
          sl.grad(lambda x: sl.grad(lambda x: run(x, lambda a, b: sl.sin(a) * b))(x).sum())(x))
    close(sl.hessian(lambda x: run(x, cubic))(x),
          sl.hessian(lambda x: run(x, lambda a, b: a ** 3 * b))(x))

    @sl.custom_jvp
    def outer(x):
        return cubic(x, y) * 2.0

    outer.defjvps(lambda t, out, x: t * 100.0)  # the outer rule hides the inner one
    close(sl.grad(lambda x: outer(x).sum())(x), 100.0 * np.ones(3))
    close(sl.jvp(outer, (x,), (sl.ones(3),))[1], 100.0 * np.ones(3))


def test_nondiff_argnums_pass_functions_and_keywords_resolve():
    @functools.partial(sl.custom_vjp, nondiff_argnums=(0,))
    def apply(fn, x, scale=2.0):
        return fn(x) * scale

    apply.defvjp(lambda fn, x, scale: (apply(fn, x, scale), x),
                 lambda fn, x, g: (g * 10.0, None))
    x = sl.tensor(X)
    close(apply(sl.sin, x), 2.0 * np.sin(X))
    close(apply(sl.sin, x=x, scale=3.0), 3.0 * np.sin(X))
    close(sl.grad(lambda x: apply(sl.sin, x).sum())(x), 10.0 * np.ones(3))


def test_python_numbers_stay_numbers_and_keep_the_dtype():
    ident = make_scaled_grad(3.0)

    @sl.custom_vjp
    def f(x, c):
        return x * c

    f.defvjp(lambda x, c: (x * c, c), lambda c, g: (g * c, None))
    x = sl.tensor(X.astype(np.float32))
    assert f(x, 2.0).dtype == np.float32
    g = sl.grad(lambda x: f(ident(x), 2.0).sum())(x)
    assert g.dtype == np.float32
    close(g, 6.0 * np.ones(3), 1e-6)


@pytest.mark.parametrize("where", ["scan", "fori_loop", "while_loop", "checkpoint"])
def test_custom_vjp_inside_loop_and_checkpoint_bodies(where):
    f, _ = make_sin_mul()
    ident = make_scaled_grad(2.0)
    y = sl.tensor(Y)

    def step(c):
        return ident(f(c, y))

    def run(x):
        if where == "scan":
            return sl.scan(lambda c, _: (step(c), None), x, None, length=3)[0]
        if where == "fori_loop":
            return sl.fori_loop(0, 3, lambda i, c: step(c), x)
        if where == "while_loop":
            return sl.while_loop(lambda s: s[1] < 3, lambda s: (step(s[0]), s[1] + 1),
                                 (x, 0))[0]
        return sl.checkpoint(lambda x: step(step(step(x))))(x)

    def loop(x):  # the Python loop, with the rule's factor 2 per step
        c = x
        for _ in range(3):
            c = sl.sin(c) * y
        return c

    x = sl.tensor(X)
    close(run(x), loop(x))
    close(sl.grad(lambda x: run(x).sum())(x), 8.0 * sl.grad(lambda x: loop(x).sum())(x))


def test_custom_vjp_under_vmap_and_jit():
    f, _ = make_sin_mul()
    xs, y = sl.tensor(np.stack([X, 2 * X])), sl.tensor(Y)
    close(sl.vmap(lambda x: f(x, y))(xs), np.sin(np.stack([X, 2 * X])) * Y)
    g = sl.vmap(sl.grad(lambda x: f(x, y).sum()))(xs)
    close(g, np.cos(np.stack([X, 2 * X])) * Y)
    g = sl.grad(lambda xs: sl.vmap(lambda x: f(x, y))(xs).sum())(xs)
    close(g, np.cos(np.stack([X, 2 * X])) * Y)
    jf = sl.jit(lambda x: f(x, y))
    close(jf(sl.tensor(X)), np.sin(X) * Y)
    close(sl.jit(sl.grad(lambda x: f(x, y).sum()))(sl.tensor(X)), np.cos(X) * Y)


def test_a_call_inside_jit_runs_its_function_as_generated_code_made_once(monkeypatch):
    """Under jit the call's graphs run as one generated function each (jit's replay),
    made on the first call, not walked equation by equation at every call."""
    f, _ = make_sin_mul()
    y = sl.tensor(Y)
    jf = sl.jit(lambda x: f(x, y) * 2.0)
    jg = sl.jit(sl.grad(lambda x: sl.scan(lambda c, _: (f(c, y), None), x, None,
                                          length=3)[0].sum()))
    close(jf(sl.tensor(X)), 2 * np.sin(X) * Y)
    custom = __import__("sys").modules["scanlib.custom"]
    graph = __import__("sys").modules["scanlib.tape.graph"]

    def no_walk(*a, **k):
        raise AssertionError("a custom call's graph walked by eval_graph")

    monkeypatch.setattr(custom, "eval_graph", no_walk, raising=False)
    monkeypatch.setattr(graph, "eval_graph", no_walk)
    close(jf(sl.tensor(2 * X)), 2 * np.sin(2 * X) * Y)
    close(jg(sl.tensor(X)), _chain(X, Y, 3))


def _chain(x, y, n):
    """d/dx of sum(f(f(...f(x)))) for f(x) = sin(x) * y, n times."""
    xs = [x]
    for _ in range(n):
        xs.append(np.sin(xs[-1]) * y)
    g = np.ones_like(x)
    for k in reversed(range(n)):
        g = g * np.cos(xs[k]) * y
    return g


def test_vmap_batches_the_call_and_its_rules_once_not_per_example():
    from scanlib.interpreters.batching import FALLBACKS

    f, calls = make_sin_mul()
    g = make_cubic_jvp()
    B = np.stack([X, 2 * X, 3 * X, 4 * X, 5 * X, 6 * X])
    xs, ys = sl.tensor(B), sl.tensor(np.stack([Y, -Y, Y, -Y, Y, -Y]))
    before = dict(FALLBACKS)
    gx, gy = sl.grad(lambda xs, ys: sl.vmap(f)(xs, ys).sum(), argnums=(0, 1))(xs, ys)
    close(gx, np.cos(B) * ys.numpy())
    close(gy, np.sin(B))
    # run on the whole batch, not per example: fwd is traced (by vmap, and beside fun where
    # a trace holds the call) a few times, however many examples
    assert calls["bwd"] == 1 and calls["fwd"] <= 3
    t = sl.jvp(lambda xs: sl.vmap(lambda x: g(x, sl.tensor(Y)))(xs), (xs,), (sl.ones(B.shape),))[1]
    close(t, 3 * B ** 2 * Y)
    close(sl.grad(lambda xs: sl.vmap(g)(xs, ys).sum())(xs), 3 * B ** 2 * ys.numpy())
    assert dict(FALLBACKS) == before


def test_forward_mode_of_a_custom_vjp_raises_as_in_jax():
    f, _ = make_sin_mul()
    y = sl.tensor(Y)
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a "
                                        r"custom_vjp function\."):
        sl.jvp(lambda x: f(x, y), (sl.tensor(X),), (sl.tensor(Y),))
    with pytest.raises(TypeError, match="forward-mode"):
        sl.jacfwd(lambda x: f(x, y))(sl.tensor(X))


def test_a_scan_body_cache_never_keeps_an_old_rule():
    ident = make_scaled_grad(1.0)

    def grad_through_scan():
        return sl.grad(lambda x: sl.scan(lambda c, _: (ident(c), None), x, None,
                                         length=2)[0].sum())(sl.tensor(X))

    for scale in (2.0, 3.0, 5.0):
        ident.defvjp(lambda x: (x, None), lambda res, g, s=scale: (g * s,))
        close(grad_through_scan(), scale ** 2 * np.ones(3))


def test_a_closed_over_tensor_that_requires_grad_is_refused():
    W = sl.tensor(Y, requires_grad=True)

    @sl.custom_vjp
    def f(x):
        return x * W

    f.defvjp(lambda x: (x * W, None), lambda res, g: (g * W,))
    with pytest.raises(TypeError, match="Pass the tensor as an argument of"):
        f(sl.tensor(X))
    with pytest.raises(TypeError, match="Pass the tensor as an argument of"):
        sl.scan(lambda c, _: (f(c), None), sl.tensor(X), None, length=2)
    with pytest.raises(TypeError, match="Pass the tensor as an argument of"):
        sl.grad(lambda x: sl.scan(lambda c, _: (make_closure(c)(x), None), x, None,
                                  length=2)[0].sum())(sl.tensor(X))
    with sl.no_grad():  # nothing is differentiated: fine
        close(f(sl.tensor(X)), X * Y)


def test_closing_over_a_traced_value_works_until_a_derivative_may_reach_it():
    def run(x):
        return sl.scan(lambda c, _: (make_closure(c)(c), None), x, None, length=2)[0]

    close(run(sl.tensor(X)), X ** 4)
    xs = sl.tensor(np.stack([X, Y]))
    close(sl.vmap(lambda x: make_closure(x)(x))(xs), np.stack([X, Y]) ** 2)
    close(sl.jit(lambda x: make_closure(x * 2.0)(x))(sl.tensor(X)), 2 * X ** 2)
    with pytest.raises(TypeError, match="a value computed inside an enclosing scan body"):
        sl.grad(lambda x: run(x).sum())(sl.tensor(X))
    with pytest.raises(TypeError, match="forward-mode autodiff"):
        sl.jvp(lambda x: make_closure(x)(sl.tensor(Y)), (sl.tensor(X),), (sl.tensor(Y),))

    def scaled(c):
        f = sl.custom_jvp(lambda x: x * c)
        f.defjvps(lambda t, out, x: t * c)
        return f

    with pytest.raises(TypeError, match=r"\(a tangent\)"):
        sl.jvp(lambda x: scaled(x)(sl.tensor(Y)), (sl.tensor(X),), (sl.tensor(Y),))
    close(sl.jvp(lambda y: scaled(sl.tensor(X))(y), (sl.tensor(Y),), (sl.ones(3),))[1], X)


def make_closure(c):
    @sl.custom_vjp
    def g(x):
        return x * c

    g.defvjp(lambda x: (x * c, None), lambda res, g: (g * c,))
    return g


def test_rule_errors_say_what_and_how_to_fix():
    @sl.custom_vjp
    def f(x, y):
        return x * y

    with pytest.raises(ValueError, match="negative position"):
        sl.custom_vjp(lambda x: x, nondiff_argnums=(-1,))
    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function f"):
        f(sl.tensor(X), sl.tensor(Y))
    f.defvjp(lambda x, y: (x * y, None), lambda res, g: g)
    with pytest.raises(TypeError, match=r"one cotangent per differentiable argument of f \(2\)"):
        sl.grad(lambda x: f(x, sl.tensor(Y)).sum())(sl.tensor(X))
    f.defvjp(lambda x, y: (x * y, None), lambda res, g: (g[:2], None))
    with pytest.raises(ValueError, match=r"output\[0\] is float64\[2\] for an argument of "
                                         r"float64\[3\]"):
        sl.grad(lambda x: f(x, sl.tensor(Y)).sum())(sl.tensor(X))
    f.defvjp(lambda x, y: x * y, lambda res, g: (g, g))
    with pytest.raises(TypeError, match="must return a pair"):
        sl.grad(lambda x: f(x, sl.tensor(Y)).sum())(sl.tensor(X))


def test_graph_printing_shows_the_call_its_rules_and_its_function():
    f, _ = make_sin_mul()
    text = str(sl.make_graph(lambda x, y: f(x, y) * 2.0)(sl.tensor(X), sl.tensor(Y)))
    assert "custom_vjp_call(x, y, rules={fwd: f_fwd, bwd: f_bwd}, num_args=2)" in text
    assert "def f(" in text and "sin(" in text
    log1pexp = make_log1pexp()
    text = str(sl.make_graph(log1pexp)(sl.tensor(X)))
    assert "custom_jvp_call(" in text and "jvp: log1pexp_jvps" in text
    plan = str(sl.scan_plan(lambda c, x: (log1pexp(c) * x, c), sl.tensor(X),
                            sl.tensor(np.ones((2, 3)))))
    assert "custom_jvp_call(carry, rules={jvp: log1pexp_jvps}, num_args=1)" in plan
    assert "def log1pexp(" in plan


@pytest.mark.parametrize("which", ["vjp", "jvp", "identity", "no numba rule"])
def test_numba_compiles_a_custom_call_inline_or_falls_back_with_the_same_values(which):
    pytest.importorskip("numba")
    from scanlib.scan.loop import native

    f, _ = make_sin_mul()
    cubic = make_cubic_jvp()
    ident = make_scaled_grad(2.0)
    sort = sl.custom_jvp(lambda x: sl.sort(x))
    sort.defjvps(lambda t, out, x: t)
    y = sl.tensor(Y)
    fn = {"vjp": lambda c: f(c, y), "jvp": lambda c: cubic(c, y) * 0.5,
          "identity": lambda c: ident(c) * 0.9, "no numba rule": sort}[which]

    def run(x, compiler):
        return sl.scan(lambda c, x: (fn(c) + x, c), x, sl.tensor(np.ones((3, 3))),
                       compiler=compiler)

    before = native.STATS["kernel calls"]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = run(sl.tensor(X), "numba")
        g = sl.grad(lambda x: run(x, "numba")[0].sum())(sl.tensor(X))
    fell_back = [x for x in w if issubclass(x.category, sl.NumbaFallbackWarning)]
    if which == "no numba rule":
        assert fell_back and "argsort (no numba rule)" in str(fell_back[0].message)
    else:
        assert not fell_back
        assert native.STATS["kernel calls"] - before == 3  # forward, forward, backward
    ref = run(sl.tensor(X), "numpy")
    for a, b in zip(out, ref):
        close(a, b, 1e-12)
    close(g, sl.grad(lambda x: run(x, "numpy")[0].sum())(sl.tensor(X)), 1e-12)


def test_jits_fused_numba_kernel_compiles_custom_calls_inline():
    pytest.importorskip("numba")
    f, _ = make_sin_mul()
    cubic = make_cubic_jvp()
    y = sl.tensor(Y)

    def loss(x, xs):
        _, ys = sl.scan(lambda h, x: (f(h, y) + cubic(x, y), h), x, xs, compiler="numba")
        return (ys ** 2).sum()

    xs = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    jitted = sl.jit(sl.value_and_grad(loss))
    for x in (X, 1.1 * X):
        value, g = jitted(x, xs)
        want_value, want_g = sl.value_and_grad(loss)(sl.tensor(x), xs)
        close(value, want_value, 1e-12)
        close(g, want_g, 1e-12)
    assert jitted.cache_info().hits == 1
    assert jitted._traces and all(t.fused is not None for t in jitted._traces.values())


# --- custom_jvp -------------------------------------------------------------------------------
def test_log1pexp_gradient_is_finite_where_the_naive_one_is_nan():
    log1pexp = make_log1pexp()
    x = sl.tensor([0.0, 10.0, 1000.0])
    with np.errstate(over="ignore", invalid="ignore"):
        naive = sl.grad(lambda x: sl.log1p(sl.exp(x)).sum())(x)
        g = sl.grad(lambda x: log1pexp(x).sum())(x)
        t = sl.jvp(log1pexp, (x,), (sl.ones(3),))[1]
    assert np.isnan(naive.numpy()[2])
    close(g, [0.5, 1.0 / (1.0 + np.exp(-10.0)), 1.0])
    close(t, g)


def test_custom_jvp_under_jvp_jacfwd_grad_and_hessian():
    f = make_cubic_jvp()
    x, y = sl.tensor(X), sl.tensor(Y)
    out, t = sl.jvp(f, (x, y), (sl.ones(3), sl.zeros(3)))
    close(out, X ** 3 * Y)
    close(t, 3 * X ** 2 * Y)
    close(sl.jacfwd(lambda x: f(x, y))(x), np.diag(3 * X ** 2 * Y))
    gx, gy = sl.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(x, y)
    close(gx, 3 * X ** 2 * Y)
    close(gy, X ** 3)
    close(sl.hessian(lambda x: f(x, y).sum())(x), np.diag(6 * X * Y))
    close(sl.jacrev(sl.jacrev(lambda x: f(x, y).sum()))(x), np.diag(6 * X * Y))
    close(sl.grad(lambda x: sl.grad(lambda x: f(x, y).sum())(x).sum())(x), 6 * X * Y)
    close(gx, fd_grad(lambda x: f(x, y).sum(), X))


def test_custom_jvp_rule_is_used_in_both_modes():
    @sl.custom_jvp
    def f(x):
        return sl.sin(x)

    f.defjvps(lambda t, out, x: 5.0 * t)  # not sin's derivative: the rule must win
    x = sl.tensor(X)
    close(sl.jvp(f, (x,), (sl.ones(3),))[1], 5.0 * np.ones(3))
    close(sl.grad(lambda x: f(x).sum())(x), 5.0 * np.ones(3))
    close(sl.vjp(f, x)[1](sl.tensor(Y))[0], 5.0 * Y)


def test_defjvps_none_and_nondiff_argnums():
    @sl.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda tx, out, x, y: tx * y, None)
    x, y = sl.tensor(X), sl.tensor(Y)
    gx, gy = sl.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(x, y)
    close(gx, Y)
    close(gy, np.zeros(3))

    @functools.partial(sl.custom_jvp, nondiff_argnums=(0,))
    def g(fn, x):
        return fn(x)

    @g.defjvp
    def g_jvp(fn, primals, tangents):
        return g(fn, *primals), 7.0 * tangents[0]

    close(sl.jvp(lambda x: g(sl.sin, x), (x,), (sl.ones(3),))[1], 7.0 * np.ones(3))
    close(sl.grad(lambda x: g(sl.sin, x).sum())(x), 7.0 * np.ones(3))


@pytest.mark.parametrize("where", ["scan", "fori_loop", "while_loop", "checkpoint"])
def test_custom_jvp_inside_loop_and_checkpoint_bodies(where):
    f = make_cubic_jvp()
    y = sl.tensor(np.array([0.5, -0.3, 0.2]))

    def run(x):
        if where == "scan":
            return sl.scan(lambda c, _: (f(c, y), None), x, None, length=2)[0]
        if where == "fori_loop":
            return sl.fori_loop(0, 2, lambda i, c: f(c, y), x)
        if where == "while_loop":
            return sl.while_loop(lambda s: s[1] < 2, lambda s: (f(s[0], y), s[1] + 1),
                                 (x, 0))[0]
        return sl.checkpoint(lambda x: f(f(x, y), y))(x)

    def loop(x):
        return (x ** 3 * y) ** 3 * y

    x = sl.tensor(X)
    close(run(x), loop(x))
    close(sl.grad(lambda x: run(x).sum())(x), sl.grad(lambda x: loop(x).sum())(x))
    close(sl.jvp(run, (x,), (sl.tensor(Y),))[1], sl.jvp(loop, (x,), (sl.tensor(Y),))[1])


def test_custom_jvp_under_vmap_and_jit():
    f = make_cubic_jvp()
    xs, y = sl.tensor(np.stack([X, 2 * X])), sl.tensor(Y)
    close(sl.vmap(lambda x: f(x, y))(xs), np.stack([X, 2 * X]) ** 3 * Y)
    close(sl.vmap(sl.grad(lambda x: f(x, y).sum()))(xs), 3 * np.stack([X, 2 * X]) ** 2 * Y)
    close(sl.grad(lambda xs: sl.vmap(lambda x: f(x, y))(xs).sum())(xs),
          3 * np.stack([X, 2 * X]) ** 2 * Y)
    close(sl.jit(sl.grad(lambda x: f(x, y).sum()))(sl.tensor(X)), 3 * X ** 2 * Y)
    close(sl.jit(lambda x: f(x, y))(sl.tensor(X)), X ** 3 * Y)


def test_custom_jvp_rule_errors():
    @sl.custom_jvp
    def f(x):
        return x * 2.0

    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function f"):
        f(sl.tensor(X))
    f.defjvp(lambda primals, tangents: (primals[0] * 2.0, tangents[0][:2]))
    with pytest.raises(ValueError, match=r"tangent_out leaf 0 as float64\[2\]"):
        sl.jvp(f, (sl.tensor(X),), (sl.tensor(Y),))


# --- devices ---------------------------------------------------------------------------------
def test_custom_functions_on_the_device_of_their_data(backend):
    f, _ = make_sin_mul()
    cubic = make_cubic_jvp()
    two = sl.custom_vjp(lambda x: (sl.sin(x), x * 2.0))
    two.defvjp(lambda x: (two(x), x), lambda x, g: (g[0] * sl.cos(x) + 2.0 * g[1],))
    x, y = backend.tensor(X), backend.tensor(Y)
    results = {
        "value": (f(x, y), np.sin(X) * Y),
        "grad": (sl.grad(lambda x: f(x, y).sum())(x), np.cos(X) * Y),
        "zero cotangent": (sl.grad(lambda x: two(x)[0].sum())(x), np.cos(X)),
        "second order": (sl.grad(lambda x: sl.grad(lambda x: f(x, y).sum())(x).sum())(x),
                         -np.sin(X) * Y),
        "scan": (sl.grad(lambda x: sl.scan(lambda c, _: (cubic(c, y), None), x, None,
                                           length=1)[0].sum())(x), 3 * X ** 2 * Y),
        "jvp": (sl.jvp(lambda x: cubic(x, y), (x,), (backend.tensor(np.ones(3)),))[1],
                3 * X ** 2 * Y),
        "vmap": (sl.vmap(lambda x: f(x, y))(backend.tensor(np.stack([X, X]))),
                 np.sin(np.stack([X, X])) * Y),
    }
    for name, (got, want) in results.items():
        backend.check_device(got)
        np.testing.assert_allclose(backend.numpy(got), want, rtol=1e-7, atol=1e-7, err_msg=name)


# --- against JAX ------------------------------------------------------------------------------
def test_against_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def build(lib, np_):
        @lib.custom_vjp
        def f(x, y):
            return np_.sin(x) * y

        f.defvjp(lambda x, y: (f(x, y), (x, y)),
                 lambda r, g: (np_.cos(r[0]) * g * r[1] * 2.0, None))

        @lib.custom_jvp
        def h(x):
            return np_.tanh(x)

        h.defjvps(lambda t, out, x: t * (1.0 - out ** 2) * 3.0)

        def loss(x, y):
            return (h(f(x, y)) ** 2).sum()
        return loss, h

    (ours, h), (theirs, hj) = build(sl, sl), build(jax, jnp)
    with jax.enable_x64(True):
        _compare_with_jax(jax, jnp, ours, theirs)
        # custom_jvp under forward mode and second order, and vmap of a gradient
        t = sl.jvp(h, (sl.tensor(X),), (sl.tensor(Y),))[1]
        close(t, np.asarray(jax.jvp(hj, (jnp.asarray(X),), (jnp.asarray(Y),))[1]), 1e-12)
        H = sl.hessian(lambda x: h(x).sum())(sl.tensor(X))
        close(H, np.asarray(jax.hessian(lambda x: hj(x).sum())(jnp.asarray(X))), 1e-10)
        B = np.stack([X, Y])
        v = sl.vmap(sl.grad(ours), in_axes=(0, None))(sl.tensor(B), sl.tensor(Y))
        vj = jax.vmap(jax.grad(theirs), in_axes=(0, None))(jnp.asarray(B), jnp.asarray(Y))
        close(v, np.asarray(vj), 1e-12)


def _compare_with_jax(jax, jnp, ours, theirs):
    g = sl.grad(ours, argnums=(0, 1))(sl.tensor(X), sl.tensor(Y))
    gj = jax.grad(theirs, argnums=(0, 1))(jnp.asarray(X), jnp.asarray(Y))
    for a, b in zip(g, gj):
        close(a, np.asarray(b), 1e-12)
    gg = sl.grad(lambda x: sl.grad(ours)(x, sl.tensor(Y)).sum())(sl.tensor(X))
    ggj = jax.grad(lambda x: jax.grad(theirs)(x, jnp.asarray(Y)).sum())(jnp.asarray(X))
    close(gg, np.asarray(ggj), 1e-10)


# --- closure_convert ---------------------------------------------------------------------------
def _adjoint_apply(module):
    """apply(fun, x): fun(x) through a custom_vjp whose rule differentiates a closure-converted
    fun, as an adjoint solver does (odeint's shape)."""
    @functools.partial(module.custom_vjp, nondiff_argnums=(0,))
    def call(f, x, *consts):
        return f(x, *consts)

    def call_fwd(f, x, *consts):
        return f(x, *consts), (x, consts)

    def call_bwd(f, res, g):
        x, consts = res
        return module.vjp(f, x, *consts)[1](g)

    call.defvjp(call_fwd, call_bwd)

    def apply(fun, x):
        converted, consts = module.closure_convert(fun, x)
        return call(converted, x, *consts)

    return apply


def _closure_loss(module, np_module, apply):
    def loss(W, x):
        y = apply(lambda v: np_module.tanh(W @ v) * np_module.sum(v), x)
        return np_module.sum(y ** 2)
    return loss


def test_closure_convert_hoists_what_a_derivative_reaches():
    W, x = sl.tensor(np.outer(X, Y)), sl.tensor(X)
    table = np.arange(3.0)  # a constant: stays inside

    f, consts = sl.closure_convert(lambda v: sl.tanh(W @ v) + table, x)
    assert consts == []
    close(f(x), np.tanh(W.numpy() @ X) + table)

    def loss(W, x):
        g, hoisted = sl.closure_convert(lambda v: sl.tanh(W @ v) + table, x)
        assert len(hoisted) == 1 and hoisted[0] is W
        return sl.sum(g(x, *hoisted) ** 2)

    gW, gx = sl.grad(loss, argnums=(0, 1))(W, x)
    direct = sl.grad(lambda W, x: sl.sum((sl.tanh(W @ x) + table) ** 2), argnums=(0, 1))(W, x)
    close(gW, direct[0], 1e-14)
    close(gx, direct[1], 1e-14)


def test_closure_convert_gives_a_custom_vjp_the_cotangent_of_a_closed_over_tensor():
    apply = _adjoint_apply(sl)
    loss = _closure_loss(sl, sl, apply)
    W, x = np.outer(X, Y) * 0.3, X
    gW, gx = sl.grad(loss, argnums=(0, 1))(sl.tensor(W), sl.tensor(x))
    close(gW, fd_grad(lambda w: loss(sl.tensor(w), sl.tensor(x)).item(), W), 1e-7)
    close(gx, fd_grad(lambda v: loss(sl.tensor(W), sl.tensor(v)).item(), x), 1e-7)
    # Inside a scan body the closed-over value is the carry, a traced value: hoisted too.
    def scanned(W):
        def body(c, _):
            return apply(lambda v: sl.tanh(c @ v), sl.tensor(x)).sum() * c, None
        return sl.sum(sl.scan(body, W, None, length=2)[0])
    def looped(W):
        c = W
        for _ in range(2):
            c = sl.tanh(c @ sl.tensor(x)).sum() * c
        return sl.sum(c)
    close(sl.grad(scanned)(sl.tensor(W)), sl.grad(looped)(sl.tensor(W)), 1e-13)


def test_closure_convert_agrees_with_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as J

    W, x = np.outer(X, Y) * 0.3, X
    with jax.enable_x64(True):
        theirs = jax.grad(_closure_loss(jax, J, _adjoint_apply(jax)), argnums=(0, 1))(W, x)
    ours = sl.grad(_closure_loss(sl, sl, _adjoint_apply(sl)), argnums=(0, 1))(
        sl.tensor(W), sl.tensor(x))
    for o, t in zip(ours, theirs):
        close(o, np.asarray(t), 1e-13)


def test_closure_convert_refuses_other_arguments():
    f, _ = sl.closure_convert(lambda v: v * 2.0, sl.ones(3))
    with pytest.raises(TypeError, match=r"args\[0\] is float64\[2\] but fun was traced with "
                                        r"float64\[3\]"):
        f(sl.ones(2))
    with pytest.raises(TypeError, match="takes fun's 1 argument"):
        f(sl.ones(3), sl.ones(3))


def test_custom_derivatives_module_is_a_view():
    from scanlib import custom_derivatives

    assert custom_derivatives.custom_vjp is sl.custom_vjp
    assert custom_derivatives.custom_jvp is sl.custom_jvp
    assert custom_derivatives.closure_convert is sl.closure_convert
    from scanlib.ad_checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat
    assert (checkpoint, checkpoint_name, remat) == (sl.checkpoint, sl.checkpoint_name, sl.remat)
    assert checkpoint_policies is sl.checkpoint_policies


# --- under jit, fwd runs once: its residuals are the call's outputs ---------------------------
def _printing_sin():
    @sl.custom_vjp
    def f(x, w):
        return sl.sin(x * w) * w

    def f_fwd(x, w):
        sl.debug.print("fwd {}", x)
        return sl.sin(x * w) * w, (sl.cos(x * w), x, w)

    def f_bwd(res, g):
        c, x, w = res
        return g * c * w * w, sl.sum(g * (c * x * w + sl.sin(x * w)))

    f.defvjp(f_fwd, f_bwd)
    return lambda x, w: sl.sum(f(x, w) ** 2)


def test_jit_of_a_gradient_runs_fwd_once_as_jax_does(capsys):
    loss = _printing_sin()
    x, w = np.array([0.3, -0.7]), np.array(1.3)
    for transform in (sl.grad, sl.value_and_grad):
        want = transform(loss, (0, 1))(x, w)
        assert capsys.readouterr().out.count("fwd") == 1
        jitted = sl.jit(transform(loss, (0, 1)))
        got = jitted(x, w)
        assert capsys.readouterr().out.count("fwd") == 1
        for a, b in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        graph = jitted.trace(x, w)
        assert [e.prim.name for e in graph.eqns].count("custom_vjp_call") == 1
        assert not any(e.prim.name == "cos" for e in graph.eqns)  # fwd's cos: in the call


@pytest.mark.parametrize("order", ["grad of grad", "jacrev of grad"])
def test_jit_differentiates_fwd_through_the_residuals_it_kept(order, capsys):
    """Beyond the first order a derivative of bwd reaches the inputs through fwd's residuals,
    which under jit are the call's outputs: eager's values, and JAX's grad of grad."""
    loss = _printing_sin()
    x, w = np.array([0.3, -0.7]), np.array(1.3)
    if order == "grad of grad":
        fn = sl.grad(lambda x, w: sl.sum(sl.grad(loss)(x, w) ** 2), (0, 1))
    else:
        fn = sl.jacrev(sl.grad(loss, 1), 0)
    want, got = fn(x, w), sl.jit(fn)(x, w)
    capsys.readouterr()
    for a, b in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=1e-13)
    if order == "grad of grad":  # JAX 0.4's values for this program
        np.testing.assert_allclose(np.asarray(got[0]), [12.54897201, 5.99910016], rtol=1e-8)
        np.testing.assert_allclose(float(got[1]), 31.60665682, rtol=1e-8)


def _printing_softplus():
    @sl.custom_jvp
    def f(x):
        sl.debug.print("fun {}", x)
        return sl.log(1 + sl.exp(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        sl.debug.print("primal {}", x)
        sl.debug.print("tangent {}", t)
        sl.debug.print("both {} {}", x, t)
        return sl.logaddexp(x, 0.0), t * sl.nn.sigmoid(x)

    return f


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_a_custom_jvp_rule_prints_as_jaxs_linearize(capsys):
    """Differentiated in reverse mode, JAX runs the rule once and prints only what does not
    read its tangents: a tangent (zeros while the rule computed the primal output, then
    again while it was transposed) was printed here, and everything twice."""
    f = _printing_softplus()
    x = sl.tensor([1.0, 2.0])
    loss = lambda x: f(x).sum()  # noqa: E731
    for how in (sl.grad(loss), sl.jit(sl.grad(loss)), sl.hessian(loss),
                lambda x: sl.vjp(f, x)[1](sl.ones(2))):
        how(x)
        assert _lines(capsys) == ["primal [1. 2.]"]
    sl.jvp(f, (x,), (sl.tensor([3.0, 4.0]),))
    assert _lines(capsys) == ["primal [1. 2.]", "tangent [3. 4.]", "both [1. 2.] [3. 4.]"]
    f(x)
    assert _lines(capsys) == ["fun [1. 2.]"]
    # In a differentiated scan the call is the rule's at every step, in order, as JAX's.
    body = lambda c, _: (f(c) - 1.0, None)  # noqa: E731
    sl.grad(lambda x: sl.scan(body, x, None, length=2)[0].sum())(x)
    assert _lines(capsys) == ["primal [1. 2.]", "primal [0.31326169 1.12692801]"]


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_a_differentiated_body_computes_the_rules_primal_output_in_both_modes():
    """Where fun overflows and the rule does not, the loop under grad, and each loop or
    checkpoint around the call, give the rule's value and its gradient, in reverse and in
    forward mode; a call on values nobody differentiates is fun's."""
    f = _printing_softplus()
    body = lambda c, _: (f(c) - 999.0, None)  # noqa: E731

    def loop(x):
        c = x
        for _ in range(2):
            c = body(c, None)[0]
        return c.sum()

    def nested(x):
        return sl.scan(lambda c, _: (sl.scan(body, c, None, length=1)[0], None), x, None,
                       length=2)[0].sum()

    x = sl.tensor([1.0, 1000.0])
    with contextlib.redirect_stdout(io.StringIO()):
        want_v, want_g = sl.value_and_grad(loop)(x)
        assert np.isfinite(want_v.numpy())
        cases = {
            "scan": lambda x: sl.scan(body, x, None, length=2)[0].sum(),
            "fori_loop": lambda x: sl.fori_loop(0, 2, lambda i, c: body(c, None)[0], x).sum(),
            "while_loop": lambda x: sl.while_loop(
                lambda c: c[0] < 2, lambda c: (c[0] + 1, body(c[1], None)[0]), (0, x))[1].sum(),
            "checkpoint": sl.checkpoint(loop),
            "revolve": lambda x: sl.scan(body, x, None, length=2,
                                         checkpoint=("revolve", 1))[0].sum(),
            "nested scans": nested,
            "jit of scan": sl.jit(lambda x: sl.scan(body, x, None, length=2)[0].sum()),
        }
        for name, fn in cases.items():
            v, g = sl.value_and_grad(fn)(x)
            np.testing.assert_allclose(v.numpy(), want_v.numpy(), rtol=1e-12, err_msg=name)
            np.testing.assert_allclose(g.numpy(), want_g.numpy(), rtol=1e-12, err_msg=name)
            v, t = sl.jvp(fn, (x,), (sl.ones(2),))
            np.testing.assert_allclose(v.numpy(), want_v.numpy(), rtol=1e-12, err_msg=name)
            np.testing.assert_allclose(t.numpy(), want_g.numpy().sum(), rtol=1e-12,
                                       err_msg=name)
            assert np.isinf(fn(x).numpy()), name  # not differentiated: fun's


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_in_a_differentiated_body_a_call_on_values_nothing_differentiates_is_funs():
    """Only a call whose inputs depend on a differentiated value computes the rule's primal
    output: one on a constant, an undifferentiated xs or carry, the loop's index or a
    stopped gradient computes fun, in the loop and in JAX. And a while_loop's cond computes
    on primals, as JAX's, in forward mode too."""
    f = _printing_softplus()
    k = sl.tensor(1000.0)

    def step(c, x):
        a, b = c
        return (a * (f(k) - k + 1.0) + f(x) + f(b) + f(sl.stop_gradient(a) + 1000.0),
                b + 1.0), None

    def loop(x, xs):
        c = (x, sl.tensor(1000.0))
        for t in range(2):
            c = step(c, xs[t])[0]
        return c[0]

    xs = sl.tensor([1000.0, 1001.0])
    with contextlib.redirect_stdout(io.StringIO()):
        want = sl.value_and_grad(loop)(sl.tensor(2.0), xs)
        assert np.isinf(want[0].numpy())
        scan = lambda x, xs: sl.scan(step, (x, sl.tensor(1000.0)), xs)[0][0]  # noqa: E731
        for fn in (scan, sl.checkpoint(loop)):
            same_or_both_nan(sl.value_and_grad(fn)(sl.tensor(2.0), xs), want)
            same_or_both_nan(sl.jvp(lambda x, fn=fn: fn(x, xs), (sl.tensor(2.0),),
                                    (sl.tensor(1.0),)),
                             sl.jvp(lambda x: loop(x, xs), (sl.tensor(2.0),), (sl.tensor(1.0),)))
        # cond reads fun's inf: no step runs (the rule's value would let three run)
        cond = lambda c: f(c[1] + 1000.0) - 1000.0 < 3.0  # noqa: E731
        run = lambda x: sl.while_loop(cond, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))[1]  # noqa: E731,E501
        got = sl.jvp(run, (sl.tensor(1.0),), (sl.tensor(1.0),))
        assert [float(t.numpy()) for t in got] == [1.0, 1.0]


def same_or_both_nan(got, want):
    for a, b in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(a.numpy()), np.asarray(b.numpy()), rtol=1e-12)


def test_a_fwd_that_calls_its_own_function_is_traced_a_bounded_number_of_times():
    """As JAX's documentation writes it, fwd calls f itself: tracing fwd beside fun in a
    body must not trace fwd again inside it (three such functions nested took minutes)."""
    runs = {"f": 0, "g": 0, "h": 0}

    def chain(inner, name, scale):
        @sl.custom_vjp
        def fn(x):
            return (inner(x) if inner else sl.sin(x)) * scale

        def fwd(x):
            runs[name] += 1
            return fn(x), sl.cos(x)

        fn.defvjp(fwd, lambda c, g: (scale * c * g,))
        return fn

    h = chain(chain(chain(None, "f", 1.0), "g", 2.0), "h", 2.0)
    sl.scan(lambda c, _: (h(c), None), sl.tensor([0.1, 0.2]), None, length=2)
    assert max(runs.values()) <= 2, runs


@pytest.mark.parametrize("inner", ["cond", "while_loop", "scan", "checkpoint", "floor",
                                   "checkpoint=sqrt"])
def test_the_values_a_nested_loop_or_branch_leaves_alone_stay_undifferentiated(inner):
    """What a cond, loop or checkpoint inside a body returns depends on the differentiated
    value only along its own paths, and floor carries no derivative (as in JAX): a custom
    call on the rest computes fun, not the rule's primal output (here fun's plus 100)."""
    f = sl.custom_jvp(lambda x: sl.sin(x))
    f.defjvp(lambda p, t: (sl.sin(p[0]) + 100.0, sl.cos(p[0]) * t[0]))
    passes = {
        "cond": lambda a, b, i: sl.lax.cond(i > 0.5, lambda a, b: (a, b),
                                            lambda a, b: (a * 2.0, b * 2.0), a, b),
        "while_loop": lambda a, b, i: sl.while_loop(lambda c: c[0] < -1.0, lambda c: c, (a, b)),
        "scan": lambda a, b, i: sl.scan(lambda c, _: ((c[0] * 2.0, c[1] * 0.5), None),
                                        (a, b), None, length=2)[0],
        "checkpoint": sl.checkpoint(lambda a, b, i: (a * 2.0, b * 0.5)),
        "floor": lambda a, b, i: (a, b + sl.floor(a)),
    }

    def body(c, i):
        a, b = passes.get(inner, passes["cond"])(*c, i)
        return (a, b), f(b)

    def loss(x):
        ck = {"checkpoint": "sqrt"} if inner == "checkpoint=sqrt" else {}
        return sl.scan(body, (x, sl.tensor(0.2)), sl.tensor(np.arange(5.0)), **ck)[1].sum()

    x = sl.tensor(0.7)
    value = loss(x).numpy()  # nothing differentiates it: fun everywhere
    assert value < 100.0
    close(sl.value_and_grad(loss)(x)[0], value)
    close(sl.jvp(loss, (x,), (sl.tensor(1.0),))[0], value)
    close(sl.jit(sl.value_and_grad(loss))(x)[0], value)
