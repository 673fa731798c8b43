"""scanlib.jit: the same values, gradients and dtypes as f (the oracle: f called without it),
one trace per signature and never a stale one, and f itself wherever a replay could not give
f's answer (arguments or closed-over tensors on the caller's tape, nested traces)."""

import functools

import numpy as np
import pytest

import scanlib as sl
from scanlib.tape.graph import merge_rebound

RNG = np.random.default_rng(0)


def counted(f):
    """f, and a list that grows by one each time f runs in Python (each trace, or eager)."""
    runs = []

    def g(*args, **kwargs):
        runs.append(1)
        return f(*args, **kwargs)
    return g, runs


def same(a, b, rtol=0.0):
    """Pytrees of tensors / numbers equal leaf by leaf, dtype for dtype, bit for bit unless
    rtol says otherwise (a gradient accumulated in another order)."""
    la, ta = sl.pytree.flatten(a)
    lb, tb = sl.pytree.flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        # jit's results are tensors where f returned an array (as jax.jit's are jax arrays)
        y = sl.as_tensor(y) if isinstance(y, np.ndarray) else y
        assert type(x) is type(y) or (isinstance(x, sl.Tensor) and isinstance(y, sl.Tensor))
        if isinstance(x, sl.Tensor):
            assert x.dtype == y.dtype and x.shape == y.shape, (x, y)
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=rtol, atol=0)
        else:
            assert x == y or (x != x and y != y)


def rnn_loss(params, xs):
    def step(h, x):
        h = sl.tanh(h @ params["W"] + x @ params["U"])
        return h, sl.sum(h * h)

    h, ys = sl.scan(step, sl.zeros((2, 3)), xs)
    return sl.sum(ys) + sl.sum(h)


def rnn_args(dtype="float64"):
    params = {"W": (0.4 * RNG.standard_normal((3, 3))).astype(dtype),
              "U": (0.4 * RNG.standard_normal((4, 3))).astype(dtype)}
    return params, RNG.standard_normal((7, 2, 4)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_value_and_grad_of_a_scan_equals_f_and_traces_once(dtype):
    vg, runs = counted(sl.value_and_grad(rnn_loss))
    jitted = sl.jit(vg)
    for _ in range(3):
        params, xs = rnn_args(dtype)
        same(jitted(params, xs), vg(params, xs))
    assert len(runs) == 3 + 1  # three eager calls, one trace
    assert jitted._cache_size() == 1


def test_a_new_shape_dtype_or_structure_traces_again_and_old_ones_stay():
    f, runs = counted(lambda x: sl.sum(sl.exp(x)))
    jitted = sl.jit(f)
    args = [np.ones(3), np.ones(4), np.ones(3, np.float32), sl.tensor(np.ones(3)),
            np.ones((3, 1))]
    for a in args:
        same(jitted(a), f(a))
    assert jitted._cache_size() == 4  # an array and a tensor of one type share a trace
    before = len(runs)
    same(jitted(np.ones(4)), f(np.ones(4)))
    assert len(runs) == before + 1  # f's own call only


def test_python_numbers_are_static_by_type_and_value():
    f = lambda x, c: x * c  # noqa: E731
    jitted = sl.jit(f)
    x = sl.tensor(np.ones(2, np.float32))
    for c in [2, 2.0, 3.0, -0.0, 0.0, True, float("nan"), 1j]:
        same(jitted(x, c), f(x, c))  # float32 * Python number stays float32, as in f
    assert jitted._cache_size() == 8


def test_numpy_scalars_are_traced_beside_python_numbers():
    f = lambda a, b, c, d: a * b + c * d  # noqa: E731
    jitted = sl.jit(f)
    for args in [(np.float64(0.5), 2.0, np.float32(3.0), np.arange(3.0)),
                 (np.float64(1.5), 2.0, np.float32(-1.0), np.arange(3.0)),
                 (np.int64(2), True, np.bool_(True), np.ones(2, np.float32))]:
        same(jitted(*args), f(*[sl.tensor(a) if isinstance(a, np.generic) else a
                                for a in args]))
    assert jitted._cache_size() == 2


def linear_loss(params, x, y):
    return sl.mean((x @ params["w"] + params["b"] - y) ** 2)


def train_step(params, x, y):
    g = sl.grad(linear_loss)(params, x, y)
    return {k: params[k] - 0.1 * g[k] for k in params}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_train_step_with_a_scalar_bias_traces_once(dtype):
    # The gradient of a 0-d parameter, and the parameter after an update, hold a NumPy
    # scalar (np.float64), not a 0-d array: traced by shape and dtype like the arrays beside
    # it, so every call after the first replays the trace.
    step, runs = counted(train_step)
    jitted = sl.jit(step)
    x, y = RNG.standard_normal((5, 3)).astype(dtype), RNG.standard_normal(5).astype(dtype)
    params = {"w": np.ones(3, dtype), "b": np.dtype(dtype).type(0.5)}
    eager = params
    for _ in range(10):
        params, eager = jitted(params, x, y), train_step(eager, x, y)
        same(params, eager)
        assert params["b"].dtype == dtype and params["b"].shape == ()
    assert len(runs) == 1
    assert jitted.cache_info() == (9, 1, 0, 256, 1)  # hits, misses, eager, maxsize, currsize


def test_numpy_scalars_0d_arrays_and_tensors_of_them_share_a_trace():
    f, runs = counted(lambda x: x * 2.0 + 1.0)
    jitted = sl.jit(f)
    for x in [np.float64(1.5), np.array(2.5), sl.tensor(3.5), sl.sum(sl.tensor([4.5])),
              sl.tensor(np.float64(5.5))]:
        same(jitted(x), f(sl.as_tensor(x)))
    assert len(runs) == 5 + 1  # five eager calls, one trace
    assert jitted.cache_info().misses == 1 and jitted.cache_info().hits == 4


def test_eager_calls_warn_once_per_reason_and_are_counted():
    import warnings

    f, runs = counted(lambda w: sl.sum(sl.tanh(w) ** 2))
    jitted = sl.jit(f)
    W = sl.tensor(RNG.standard_normal(3))
    g = sl.jit(lambda x: sl.sum(W * x))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            jitted(sl.tensor(RNG.standard_normal(3), requires_grad=True))
        g(np.ones(3))  # traced while W needs no gradient
        W.requires_grad_()
        for _ in range(2):
            g(np.ones(3))
    messages = [str(w.message) for w in caught if w.category is sl.JitFallbackWarning]
    assert len(messages) == 2, messages
    assert messages[0].startswith("jit(g): args[0] requires grad, so g runs eagerly")
    assert "jit(value_and_grad(g))" in messages[0]  # g: the function counted() returns
    assert messages[1].startswith("jit(f): f reads W, which requires grad")
    assert jitted.cache_info() == (0, 0, 3, 256, 0) and len(runs) == 3
    assert g.cache_info() == (0, 1, 2, 256, 1)
    jitted(np.ones(3))
    jitted.cache_clear()
    assert jitted.cache_info() == (0, 0, 0, 256, 0)


def test_tracing_again_for_each_new_python_number_warns_once():
    import warnings

    f, runs = counted(lambda x, lr: x - lr * x)
    jitted = sl.jit(f)
    x = np.ones(2, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(12):
            same(jitted(x, 0.1 * i), f(sl.tensor(x), 0.1 * i))  # float32, as f gives
        for i in range(12):
            jitted(x, 0.1 * i)  # cached now
    messages = [str(w.message) for w in caught if w.category is sl.JitFallbackWarning]
    assert len(messages) == 1, messages
    assert messages[0].startswith("jit(g): traced g 8 times for new values of its "
                                  "Python-number arguments (args[1])")
    assert jitted.cache_info() == (12, 12, 0, 256, 12) and len(runs) == 12 + 12
    lr = sl.jit(lambda x, lr: x - lr * x)  # a NumPy scalar: one trace for all its values
    for i in range(12):
        lr(x, np.float32(0.1 * i))
    assert lr.cache_info().misses == 1


def test_static_argnums_and_argnames():
    def f(x, n, *, mode="sum"):
        y = x
        for _ in range(n):  # Python control flow on a static argument
            y = sl.sin(y)
        return sl.sum(y) if mode == "sum" else sl.max(y)

    jitted = sl.jit(f, static_argnums=1, static_argnames="mode")
    x = RNG.standard_normal(5)
    for n, mode in [(1, "sum"), (3, "sum"), (3, "max"), (1, "sum")]:
        same(jitted(x, n, mode=mode), f(x, n, mode=mode))
    assert jitted._cache_size() == 3
    deco = sl.jit(static_argnums=(1,))(f)
    same(deco(x, 2), f(x, 2))
    with pytest.raises(TypeError, match="static argument args\\[1\\] is a list"):
        jitted(x, [1])
    with pytest.raises(ValueError, match="static_argnums \\(1,\\) is out of range"):
        sl.jit(lambda x: x, static_argnums=(1,))(x)


def test_keyword_and_nested_arguments_are_traced():
    def f(tree, *, scale):
        return {"a": tree[0] * scale, "b": [sl.sum(tree[1]["w"]), None]}

    jitted = sl.jit(f)
    tree = (np.ones(2), {"w": np.arange(3.0)})
    same(jitted(tree, scale=np.float64(2.0)), f(tree, scale=np.float64(2.0)))
    with pytest.raises(TypeError, match="jit: kwargs\\['scale'\\] is a str"):
        jitted(tree, scale="big")
    with pytest.raises(TypeError, match="jit: args\\[0\\]\\[1\\]\\['w'\\] is a str"):
        jitted((np.ones(2), {"w": "x"}), scale=2.0)


def test_outputs_that_are_inputs_numbers_or_closed_over():
    K = sl.tensor([1.0, 2.0])

    def f(x):
        return x, 3, 1.5, K, (x + K)

    same(sl.jit(f)(np.zeros(2)), f(np.zeros(2)))


def test_an_argument_that_requires_grad_runs_f_on_the_tape():
    w = sl.tensor(RNG.standard_normal(3), requires_grad=True)
    f, runs = counted(lambda w: sl.sum(sl.tanh(w) ** 2))
    jitted = sl.jit(f)
    with pytest.warns(sl.JitFallbackWarning, match="requires grad"):
        out = jitted(w)
    out.backward()
    want = sl.grad(lambda w: sl.sum(sl.tanh(w) ** 2))(w.detach())
    np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
    assert sl.grad(jitted)(w.detach()).numpy().tolist() == want.numpy().tolist()
    assert jitted._cache_size() == 0 and len(runs) == 2


def test_a_closed_over_tensor_that_requires_grad_keeps_its_gradient():
    W = sl.tensor(RNG.standard_normal(3))
    jitted = sl.jit(lambda x: sl.sum(W * x))
    x = np.ones(3)
    jitted(x)  # traced while W needs no gradient
    W.requires_grad_()
    with pytest.warns(sl.JitFallbackWarning, match="reads W"):
        jitted(x).backward()  # now it does: f runs on the tape
    np.testing.assert_array_equal(W.grad.numpy(), x)
    with sl.no_grad():
        assert jitted(x).requires_grad is False


def test_inside_a_scan_body_and_inside_another_jit_it_is_traced_inline():
    inner = sl.jit(lambda c, x: (sl.tanh(c + x), c * x))

    def loss(w):
        return sl.sum(sl.scan(inner, w, np.arange(6.0).reshape(3, 2))[1])

    w = RNG.standard_normal(2)
    same(sl.jit(sl.value_and_grad(loss))(w), sl.value_and_grad(loss)(w))
    same(sl.jit(lambda w: inner(w, w))(w), inner.__wrapped__(w, w))


def test_higher_order_and_jvp_through_a_scan():
    params, xs = rnn_args()

    def f(W):
        return rnn_loss({"W": W, "U": params["U"]}, xs)

    W = params["W"]
    # hessian is jacfwd of jacrev: eagerly its columns are forward-mode jvps, in a trace (where
    # the result may be differentiated) the double VJP, another order of roundings
    same(sl.jit(sl.hessian(f))(W), sl.hessian(f)(W), rtol=1e-13)
    same(sl.jit(sl.grad(sl.grad(lambda s: f(W * s))))(np.float64(1.0)),
         sl.grad(sl.grad(lambda s: f(W * s)))(np.float64(1.0)))
    tangent = RNG.standard_normal(W.shape)
    same(sl.jit(lambda W, t: sl.jvp(f, (W,), (t,)))(W, tangent), sl.jvp(f, (W,), (tangent,)))


def test_a_scan_differentiated_in_the_trace_runs_its_forward_once():
    # The data (xs) and a closed-over matrix need no gradient: the first binding of the scan
    # saves residuals for the parameters only, the walk back asks for more, and the scan is
    # bound again with them. The replayed graph keeps the second binding alone.
    ys, A = RNG.standard_normal((20, 3)), RNG.standard_normal((3, 3)) * 0.3

    def loss(p):
        def step(m, y):
            m = sl.tanh(m @ A + y * p)
            return m, sl.sum(m * y)

        return sl.sum(sl.scan(step, sl.zeros(3), ys)[1])

    vg = sl.value_and_grad(loss)
    graph = sl.jit(vg).trace(np.ones(3))
    forwards = [e for e in graph.eqns if e.prim.name == "scan" and not e.params["reverse"]]
    assert len(forwards) == 1, graph
    same(sl.jit(vg)(np.ones(3)), vg(np.ones(3)))
    assert merge_rebound(graph) is graph  # nothing left to merge


def test_a_jit_trace_walks_back_as_eager_does(monkeypatch):
    # A jit call's own graph is never differentiated (arguments that require grad run f
    # eagerly), so its trace walks back without recording the walk, as an eager call does:
    # the backward scan, and a custom_vjp call inside the backward, are not linearized for a
    # gradient nothing asks for. Values and gradients are the eager call's, bit for bit.
    from scanlib.scan import primitive

    calls = []
    real = primitive.linearize
    monkeypatch.setattr(primitive, "linearize", lambda *a, **k: calls.append(1) or real(*a, **k))

    @sl.custom_vjp
    def scaled(x):
        return x * 2.0

    scaled.defvjp(lambda x: (x * 2.0, None),
                  lambda _, g: (sl.scan(lambda c, x: (c * 2.0 + x, c), g, np.ones(3))[0],))

    def loss(params, xs):
        return rnn_loss(params, xs) + sl.sum(scaled(params["W"]))

    vg = sl.value_and_grad(loss)
    params, xs = rnn_args()
    eager = vg(params, xs)
    eager_calls, calls[:] = len(calls), []
    jitted = sl.jit(vg)
    graph = jitted.trace(params, xs)
    assert len(calls) == eager_calls == 1, (len(calls), eager_calls)
    assert not [e for e in graph.eqns if e.prim.name == "stop_gradient"], graph
    same(jitted(params, xs), eager)
    # Differentiated inside the trace, the walk is recorded: the second order is right.
    def squared_grad(s):
        g = sl.grad(loss)({"W": params["W"] * s, "U": params["U"]}, xs)
        return sl.sum(g["W"] ** 2)

    one = np.float64(1.0)
    same(sl.jit(sl.grad(squared_grad))(one), sl.grad(squared_grad)(one), rtol=1e-12)


def test_detach_of_a_tracer_that_escaped_a_jit_trace_raises():
    leaked = []
    sl.jit(lambda x: leaked.append(x) or x * 2.0)(np.ones(2))
    with pytest.raises(TypeError, match="escaped"):
        leaked[0].detach()


def test_python_control_flow_on_an_argument_says_jit():
    jitted = sl.jit(lambda x: x if x.sum() > 0 else -x)
    with pytest.raises(TypeError, match="traced \\(inside a scan body, jit or make_graph\\)"):
        jitted(np.ones(2))


def test_errors_at_run_time_are_those_of_f():
    table = sl.tensor(np.arange(4.0))

    def f(idx):
        return sl.scan(lambda c, i: (c + table[i], c), 0.0, idx)[0]

    jitted = sl.jit(f)
    assert jitted(np.array([0, 1, 2])).item() == 3.0
    with pytest.raises(IndexError, match="at step t=1"):
        jitted(np.array([0, 9, 2]))
    with pytest.raises(np.linalg.LinAlgError):
        sl.jit(sl.linalg.cholesky)(-np.eye(2))


def test_the_scan_compiler_default_and_grad_mode_are_part_of_the_signature():
    f, runs = counted(lambda x: sl.scan(lambda c, x: (c * x, c), 1.0, x)[0])
    jitted = sl.jit(f)
    x = np.arange(1.0, 4.0)
    jitted(x)
    with sl.no_grad():
        jitted(x)
    assert jitted._cache_size() == 2 and len(runs) == 2
    from scanlib.scan.loop import native

    if native.missing() is None:  # another default compiler: another trace
        old = sl.set_loop_compiler("numba")
        try:
            jitted(x)
        finally:
            sl.set_loop_compiler(old)
        assert jitted._cache_size() == 3 and len(runs) == 3


def test_a_tracer_that_escaped_is_refused_as_f_refuses_it():
    leaked = []
    sl.make_graph(lambda x: leaked.append(x) or x)(np.ones(2))
    with pytest.raises(TypeError, match="escaped"):
        sl.jit(lambda x: x * 2)(leaked[0])


def test_trace_prints_the_graph_and_the_code_it_runs():
    jitted = sl.jit(lambda x: sl.sum(sl.exp(x) * 2.0))
    text = str(jitted.trace(np.ones(3)))
    assert "exp(" in text and "mul(" in text and "sum(" in text
    trace = next(iter(jitted._traces.values()))
    assert "def run(a0):" in trace._run.source and "* _l" in trace._run.source
    assert repr(jitted).startswith("jit(")
    with pytest.raises(TypeError, match="must be callable"):
        sl.jit(3)


def test_dict_insertion_order_and_key_types_are_part_of_the_signature():
    # A treedef compares dicts with sorted keys (and 1 == True), but f sees the order.
    jitted = sl.jit(lambda d: sl.concatenate(list(d.values())))
    d1, d2 = {"a": np.ones(1), "b": np.zeros(1)}, {"b": np.zeros(1), "a": np.ones(1)}
    same(jitted(d1), sl.concatenate(list(d1.values())))
    same(jitted(d2), sl.concatenate(list(d2.values())))
    keys = sl.jit(lambda d: [type(k).__name__ for k in d] and d)
    assert [type(k) for k in keys({1: np.ones(1)})] == [int]
    assert [type(k) for k in keys({True: np.ones(1)})] == [bool]


def test_higher_order_through_a_scan_over_closed_over_xs():
    # The walk back binds the scan again with more residuals at each order; the merged
    # graph must keep every value defined before it is read.
    xs = np.linspace(-1.0, 1.0, 4)

    def loss(w):
        return sl.sum(sl.scan(lambda h, x: (sl.tanh(h * w + x), h), 0.1, xs)[1] ** 2)

    for transform in (sl.hessian, lambda f: sl.grad(sl.grad(f))):
        # the eager walk binds the scans with other residual sets: 1 ulp apart here
        same(sl.jit(transform(loss))(np.array(0.5)), transform(loss)(np.array(0.5)), 1e-14)


@pytest.mark.parametrize("compiler", ["numpy", "auto"])
def test_second_order_reads_residuals_a_first_walk_back_left_unread(compiler):
    # Traced, the body's closed-over NumPy constant (K, in a scan nothing reads) is an input
    # of the trace, so the first walk back binds the outer scan again with more residuals,
    # and its backward scan reads only some of them: the walk back through that backward
    # scan needs the others, which that binding must keep (they were None in the replay).
    K = np.array([0.5, -1.0, 2.0])

    def f(h, xs, flag, scan):
        def body(carry, x):
            h, flag = carry
            scan(lambda c, _: (c * x * K, None), h, None, length=2)  # nothing reads it
            return (sl.tanh(sl.where(flag, x, -x)), flag), None

        return sl.sum(scan(body, (h, flag), xs)[0][0])

    from test_scan_oracle import loop_scan as loop

    def hvp(scan):
        g = sl.grad(lambda h, xs, flag: sl.sum(sl.grad(f, argnums=(0, 1))(h, xs, flag, scan)[1]),
                    argnums=(0, 1))
        return lambda h, xs, flag: g(h, xs, flag)

    args = (RNG.standard_normal(3), RNG.standard_normal((2, 3)), np.array(True))
    scan = functools.partial(sl.scan, compiler=compiler)
    same(sl.jit(hvp(scan))(*args), hvp(loop)(*args), rtol=1e-12)
    same(sl.jit(hvp(scan))(*args), hvp(scan)(*args), rtol=1e-12)


def test_grad_of_grad_through_three_nested_scans_when_the_loss_reads_the_final_carry():
    # Each walk back binds the outer scan again, extended with the residuals that order
    # needs: two bindings that extend the same one with different residuals are two
    # computations, and merging the second into the place of the first lost the first's.
    def f(w, a, b, xs):
        def l1(h, x):
            def l2(g, y):
                g2, _ = sl.scan(lambda q, z: (q * a + sl.tanh(w @ q + x * z) * b, None), g,
                                sl.stack([y, y]))
                return g2, sl.sum(g2 * b)

            h2, ys = sl.scan(l2, h, sl.arange(3.0))
            return h2, sl.sum(ys)

        h, ys = sl.scan(l1, sl.zeros(3), xs)
        return sl.sum(ys) + sl.sum(h ** 2) * b

    rng = np.random.default_rng(5)
    w, a, b, xs = (rng.normal(size=(3, 3)) * 0.3, np.array(0.7), np.array(0.2),
                   rng.normal(size=(5, 3)))
    gg = sl.grad(sl.grad(f, 1), 2)
    same(sl.jit(gg)(w, a, b, xs), gg(w, a, b, xs), rtol=1e-12)
    eps = 1e-6
    fd = (sl.grad(f, 1)(w, a, b + eps, xs) - sl.grad(f, 1)(w, a, b - eps, xs)) / (2 * eps)
    np.testing.assert_allclose(sl.jit(gg)(w, a, b, xs).numpy(), fd.numpy(), rtol=1e-6)


def test_static_arguments_by_name_or_position_and_left_to_their_default():
    def f(x, mode, n=2):
        return sl.take(x, np.array([7]), mode=mode) * n

    x = sl.arange(5.0)
    same(sl.jit(f, static_argnames="mode")(x, "clip"), f(x, "clip"))
    same(sl.jit(f, static_argnums=1)(x, mode="clip"), f(x, "clip"))
    same(sl.jit(f, static_argnums=(1, 2))(x, "wrap"), f(x, "wrap"))


def test_index_checks_wait_for_the_values_and_weights_are_checked_each_call():
    # .at[i].multiply refuses repeated positions: the trace's stand-in zeros repeat, real
    # indices may not; choice's weights are checked when they are there, as eagerly.
    mul = sl.jit(lambda x, i: x.at[i].multiply(2.0))
    same(mul(sl.arange(5.0), np.array([0, 1])), sl.arange(5.0).at[np.array([0, 1])].multiply(2.0))
    with pytest.raises(ValueError, match="more than once"):
        mul(sl.arange(5.0), np.array([1, 1]))
    draw = sl.jit(lambda k, p: sl.random.choice(k, 5, (3,), p=p))
    key = sl.random.key(0)
    same(draw(key, np.full(5, 0.2)), sl.random.choice(key, 5, (3,), p=np.full(5, 0.2)))
    with pytest.raises(ValueError, match="p must be finite, non-negative and not all 0"):
        draw(key, np.zeros(5))


def test_results_never_share_memory_with_the_callers_arrays():
    a = np.arange(3.0)
    for f in (lambda x: sl.tensor(x), lambda x: sl.reshape(x, (3,)), lambda x: x):
        t = sl.jit(f)(a)
        a[0] = 5.0
        assert t.numpy()[0] == 0.0
        a[0] = 0.0


def test_repeated_calls_on_arrays_run_the_trace_of_their_own_signature():
    """A call whose arguments are all NumPy arrays finds its trace by their shapes and dtypes
    (a fast path, from the second call of a signature on): every part of the signature still
    decides which trace runs, and a result is never the caller's array."""
    f, runs = counted(lambda x, y: (x * y, x))
    jitted = sl.jit(f)
    a, b = np.arange(3.0), np.ones(3)
    calls = {
        "float64": lambda: jitted(a, b),
        "float32": lambda: jitted(a.astype(np.float32), b.astype(np.float32)),
        "mixed": lambda: jitted(a.astype(np.float32), b),
        "shorter": lambda: jitted(a[:2], b[:2]),
        "big-endian": lambda: jitted(a.astype(">f8"), b),
        "int": lambda: jitted(np.arange(3), np.arange(3)),
        "tensor": lambda: jitted(sl.tensor(a), b),
        "keyword": lambda: jitted(a, y=b),
    }
    want = {name: call() for name, call in calls.items()}
    traced = len(runs)
    for _ in range(2):
        for name, call in calls.items():
            got = call()
            same(got, want[name])
            assert not np.shares_memory(got[1].numpy(), a), name
            with sl.no_grad():
                same(call(), want[name])
    assert len(runs) == 2 * traced  # each signature once more under no_grad, then no more
    assert jitted.cache_info().misses == len(runs)
    jitted.cache_clear()
    jitted(a, b)
    assert jitted.cache_info().misses == 1
    # Pytrees of arrays: a dict's key order is part of the signature (f may iterate it).
    values, runs = counted(lambda p, q: [v * q[0] for v in p.values()])
    jitted = sl.jit(values)
    for _ in range(3):
        for p in ({"a": a, "b": b}, {"b": b, "a": a}):
            for q in ((b,), (sl.tensor(b),)):
                got = jitted(p, q)
                assert [t.numpy().tolist() for t in got] == [(v * b).tolist() for v in p.values()]
    assert len(runs) == 2
    with pytest.warns(sl.JitFallbackWarning, match="requires grad"):
        jitted({"a": a, "b": b}, (sl.tensor(b, requires_grad=True),))


def test_arrays_f_makes_or_closes_over_belong_to_the_trace():
    # An array f creates and returns comes back as a new tensor each call; a closed-over
    # array is read when f is traced (copied), as JAX reads it: writing into either later
    # changes no call.
    B = np.ones(2)
    jitted = sl.jit(lambda x: (x + B, np.zeros(2)))
    first = jitted(np.ones(2))
    B[:] = 10.0
    second = jitted(np.ones(2))
    assert second[0].numpy().tolist() == [2.0, 2.0]
    assert second[1] is not first[1] and second[1].numpy().tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="jit: f returned a set"):
        sl.jit(lambda x: (x, {1}))(np.ones(1))


def test_keyword_order_with_static_keywords_and_nodes_users_register():
    import optree

    def f(**kw):
        return [v * (i + 1) if not isinstance(v, str) else float(i) for i, v in enumerate(
            kw.values())]

    jitted = sl.jit(f, static_argnames="mode")
    x = np.ones(2)
    for kw in ({"a": x, "mode": "m", "b": x}, {"mode": "m", "a": x, "b": x}):
        same(jitted(**kw), f(**{k: sl.tensor(v) if k != "mode" else v for k, v in kw.items()}))

    class Box:
        def __init__(self, d):
            self.d = d

    optree.register_pytree_node(Box, lambda b: ((b.d,), None, None), lambda _, c: Box(c[0]),
                                namespace="scanlib")
    first = sl.jit(lambda b: list(b.d.values())[0])
    assert first(Box({"a": np.ones(1), "b": np.zeros(1)})).item() == 1.0
    assert first(Box({"b": np.zeros(1), "a": np.ones(1)})).item() == 0.0


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix's own
def test_array_subclasses_are_plain_arrays_and_masked_ones_are_refused():
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    assert sl.jit(lambda a: a * a)(m).numpy().tolist() == [[1.0, 4.0], [9.0, 16.0]]
    with pytest.raises(TypeError, match="masked array"):
        sl.jit(lambda a: a * 2)(np.ma.masked_array([0.0, 1.0], mask=[0, 1]))


def test_numbers_are_told_apart_by_their_bits_also_in_scans_cache():
    import dataclasses
    import math

    nan = float("nan")
    jitted = sl.jit(lambda x, n: x * math.copysign(1.0, n))
    assert jitted(np.ones(1), nan).item() == 1.0 and jitted(np.ones(1), -nan).item() == -1.0

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        scale: float

    scaled = sl.jit(lambda x, c: x * c.scale, static_argnums=1)
    assert scaled(np.arange(3, dtype=np.int32), Cfg(1)).dtype == np.int32
    assert scaled(np.arange(3, dtype=np.int32), Cfg(1.0)).dtype == np.float64
    for n in (-nan, nan):  # a body's literal: scan's cache keyed -nan and nan alike
        _, ys = sl.scan(lambda c, x, n=n: (c, x + n), 0.0, np.zeros(2))
        assert np.signbit(ys.numpy()).tolist() == [np.signbit(n)] * 2


def test_methods_copies_and_shared_snapshots():
    import copy
    import pickle

    class A:
        def __init__(self, k):
            self.k = k

        @sl.jit
        def times(self, x):
            return x * self.k

    with pytest.raises(TypeError, match="args\\[0\\] is a A"):
        A(2.0).times(np.ones(1))
    A.times = sl.jit(A.times.__wrapped__, static_argnums=0)
    assert A(2.0).times(np.ones(1)).item() == 2.0
    f = sl.jit(lambda x: x + 1)
    g = copy.deepcopy(f)
    assert g(np.ones(1)).item() == 2.0 and g._cache_size() == 1 and f._cache_size() == 0
    assert pickle.loads(pickle.dumps(sl.jit(np.add)))(np.ones(1), np.ones(1)).item() == 2.0
    big = np.ones(1000)
    h = sl.jit(lambda x: x * big)
    h(np.ones(1000)), h(np.ones((1, 1000)))
    k0, k1 = [t._run.__globals__["_k0"] for t in h._traces.values()]
    assert k0 is k1 and k0 is not big  # one copy for both signatures


@pytest.mark.parametrize("dtype", ["complex128", "bool", "int32", "float64"])
def test_a_closed_over_array_of_any_dtype_is_shared_between_signatures(dtype):
    """A second signature's trace compares the closed-over array with the first's copy, sign
    bits included: that comparison raised TypeError on complex numbers."""
    values = {"complex128": [1 + 2j, -0.0 - 1j], "bool": [True, False], "int32": [3, -4],
              "float64": [-0.0, 2.5]}[dtype]
    K = np.array(values, dtype)
    f = sl.jit(lambda x: x * K)
    for x in (np.ones(2), np.ones((1, 2))):
        np.testing.assert_array_equal(np.asarray(f(x)).reshape(2), np.ones(2) * K)
    K[0] = K[1]  # changed in place: the next new signature reads it anew
    np.testing.assert_array_equal(np.asarray(f(np.ones((1, 1, 2)))).reshape(2), np.ones(2) * K)


def test_a_view_of_a_closed_over_array_as_a_result_is_read_when_traced():
    # Found by an adversarial pass: K[1:] (NumPy's, not traced) came back as a view of the
    # live K, so writing into K changed later results; as a constant, it is read when traced.
    K = np.arange(4.0)
    for jitted in (sl.jit(lambda x: (x + 1, K[1:])), sl.jit(lambda x: (x + 1, sl.tensor(K)[1:]))):
        K[:] = np.arange(4.0)
        first = jitted(np.ones(1))[1]
        K[:] = -1.0
        assert jitted(np.ones(1))[1].numpy().tolist() == [1.0, 2.0, 3.0]
        assert first.numpy().tolist() == [1.0, 2.0, 3.0]


def test_a_view_of_a_read_only_constant_as_a_result_is_a_copy():
    # A read-only closed-over array is not copied when traced (it may be huge, and nothing
    # writes through it), but its owner may write into the array it views.
    K = np.arange(4.0)
    R = K.view()
    R.flags.writeable = False
    jitted = sl.jit(lambda x: (x + 1, sl.reshape(R, (2, 2))))
    first = jitted(np.ones(1))[1]
    K[:] = -1.0
    assert first.numpy().ravel().tolist() == [0.0, 1.0, 2.0, 3.0]


def peak_bytes(call):
    """The most memory NumPy held at once during call() (tracemalloc sees NumPy's buffers)."""
    import tracemalloc

    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_replay_frees_each_value_after_its_last_read():
    # A chain of 30 operations on a 1 MiB array: f itself holds two or three such arrays at
    # once; a replay that kept every intermediate until it returned would hold all 30.
    def chain(x):
        for _ in range(10):
            x = sl.sin(x) * 1.5 + 0.25
        return sl.sum(x)

    x = RNG.standard_normal(2 ** 17)  # 1 MiB
    jitted = sl.jit(chain)
    jitted(x)
    assert peak_bytes(lambda: jitted(x)) < 4 * x.nbytes
    # and with a gradient: no more than f on the tape holds
    vg = sl.value_and_grad(lambda x: chain(x) + sl.sum(sl.tanh(x) * x))
    same(sl.jit(vg)(x), vg(x))
    jitted_vg = sl.jit(vg)
    jitted_vg(x)
    assert peak_bytes(lambda: jitted_vg(x)) <= peak_bytes(lambda: vg(x))


def test_a_replayed_call_makes_few_python_calls():
    # A count, not a time: the Python functions a call of a small jitted function runs (its
    # signature, the cache lookup, the replay, the outputs as tensors); no check is skipped.
    import sys

    f = sl.jit(lambda p, x: {"a": p["w"] * x, "b": sl.sum(x)})
    p, x = {"w": np.ones(2)}, np.ones(2)
    f(p, x)
    calls = []

    def count(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(count)
    try:
        f(p, x)
    finally:
        sys.setprofile(None)
    assert f.cache_info().hits == 1
    assert len(calls) <= 33, calls
