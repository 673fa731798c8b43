"""jvp, linearize, jacfwd, jacrev and hessian: against central finite differences (float64),
against jax.jvp / jax.jacfwd / jax.hessian where JAX is installed, through scan (forward,
reverse, nested, pytree carries, closures), higher order, and the errors.

Each case is written once as f(m, *args), m a namespace of scanlib's or jax.numpy's ops.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import optree
import pytest

import scanlib as sl

SL = types.SimpleNamespace(tanh=sl.tanh, sin=sl.sin, exp=sl.exp, log=sl.log, sum=sl.sum,
                           mean=sl.mean, max=sl.max, where=sl.where, solve=sl.linalg.solve,
                           scan=sl.scan, cumsum=sl.cumsum)


def _jax_ns():
    """jax and a namespace of its ops; references run under jax.jit (eager dispatch of each op
    costs seconds here)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    return jax, types.SimpleNamespace(tanh=jnp.tanh, sin=jnp.sin, exp=jnp.exp, log=jnp.log,
                                      sum=jnp.sum, mean=jnp.mean, max=jnp.max, where=jnp.where,
                                      solve=jnp.linalg.solve, scan=jax.lax.scan,
                                      cumsum=jnp.cumsum)


# --- the cases --------------------------------------------------------------------------------
def _rnn(m, W, U, h0, xs, reverse=False):
    def body(h, x):  # closes over W and U
        h = m.tanh(h @ W + x @ U)
        return h, h * h
    return m.scan(body, h0, xs, reverse=reverse)


def _nested(m, W, h0, xs):
    def outer(h, row):
        def inner(c, x):
            c = m.sin(c * W + x)
            return c, c
        c, ys = m.scan(inner, h, row)
        return c + h, m.sum(ys, axis=0)
    return m.scan(outer, h0, xs)


def _dict_carry(m, p, init, xs):
    def body(carry, x):
        h = m.tanh(carry["h"] @ p["W"] + x)
        c = carry["c"] * p["a"] + h
        return {"h": h, "c": c}, {"y": m.sum(c, axis=-1)}
    return m.scan(body, init, xs)


CASES = {
    "elementwise": (lambda m, x, y: m.exp(m.sin(x) * y) + m.log(y * y + 1.0) / (x * x + 2.0),
                    [(3, 4), (3, 4)]),
    "broadcast": (lambda m, x, y: m.tanh(x + y) * x, [(3, 4), (4,)]),
    "matmul": (lambda m, a, b: m.tanh(a @ b) @ b.T, [(3, 4), (4, 5)]),
    "reductions": (lambda m, x: (m.sum(x * x, axis=0), m.mean(m.exp(x), axis=1),
                                 m.max(x, axis=-1), m.cumsum(x, axis=1)), [(4, 5)]),
    "indexing": (lambda m, x: x[1:, ::2] * x[0, 1] + x[np.array([2, 0, 2])][:, 1:3].sum(),
                 [(4, 5)]),
    "solve": (lambda m, a, b: m.solve(a + 4.0 * np.eye(3), b), [(3, 3), (3, 2)]),
    "where": (lambda m, x, y: m.where(x > 0.1, x * y, m.sin(y)), [(5,), (5,)]),
    "scan": (lambda m, W, U, h0, xs: _rnn(m, W, U, h0, xs), [(3, 3), (2, 3), (2, 3), (4, 2, 2)]),
    "scan_reverse": (lambda m, W, U, h0, xs: _rnn(m, W, U, h0, xs, reverse=True),
                     [(3, 3), (2, 3), (2, 3), (4, 2, 2)]),
    "scan_nested": (_nested, [(2,), (2,), (3, 4, 2)]),
    "scan_pytree": (_dict_carry, [{"W": (3, 3), "a": (3,)}, {"h": (2, 3), "c": (2, 3)},
                                  (4, 2, 3)]),
}


def _random(spec, rng, dtype=np.float64):
    return optree.tree_map(lambda s: rng.standard_normal(s).astype(dtype), spec,
                           is_leaf=lambda s: isinstance(s, tuple))


def _np(tree):
    return optree.tree_map(lambda t: np.asarray(t.numpy() if isinstance(t, sl.Tensor) else t),
                           tree, namespace="scanlib")


def _fd_jvp(f, args, tangents, eps=1e-6):
    def at(s):
        shifted = optree.tree_map(lambda a, t: a + s * t, args, tangents)
        return _np(f(*shifted))
    return optree.tree_map(lambda p, q: (p - q) / (2 * eps), at(eps), at(-eps))


def _assert_trees_close(got, want, rtol=1e-6, atol=1e-8):
    got_leaves, got_tree = optree.tree_flatten(_np(got), namespace="scanlib")
    want_leaves, want_tree = optree.tree_flatten(_np(want), namespace="scanlib")
    assert len(got_leaves) == len(want_leaves), (got_tree, want_tree)
    for g, w in zip(got_leaves, want_leaves):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# --- jvp ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_jvp_matches_finite_differences(name, rng):
    fn, spec = CASES[name]
    args, tangents = _random(spec, rng), _random(spec, rng)

    def f(*a):
        return fn(SL, *a)

    out, t_out = sl.jvp(f, tuple(args), tuple(tangents))
    _assert_trees_close(out, f(*args))
    _assert_trees_close(t_out, _fd_jvp(f, args, tangents), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_jvp_matches_jax(name, rng):
    jax, jm = _jax_ns()
    fn, spec = CASES[name]
    args, tangents = _random(spec, rng), _random(spec, rng)
    out, t_out = sl.jvp(lambda *a: fn(SL, *a), tuple(args), tuple(tangents))
    with jax.enable_x64(True):
        want_out, want_t = jax.jit(lambda a, t: jax.jvp(lambda *a: fn(jm, *a), a, t))(
            tuple(args), tuple(tangents))
        want_out, want_t = _np(want_out), _np(want_t)
    _assert_trees_close(out, want_out)
    _assert_trees_close(t_out, want_t)


def test_jvp_keeps_float32_and_pytree_structure(rng):
    p = {"w": rng.standard_normal(3).astype(np.float32), "b": np.float32(0.5)}
    t = {"w": np.ones(3, np.float32), "b": np.float32(1.0)}
    out, t_out = sl.jvp(lambda p: {"y": (p["w"] * p["b"], sl.sum(p["w"]))}, (p,), (t,))
    assert set(t_out) == {"y"} and len(t_out["y"]) == 2
    assert t_out["y"][0].dtype == np.float32 and out["y"][0].dtype == np.float32
    np.testing.assert_allclose(t_out["y"][0].numpy(), p["w"] + 0.5, rtol=1e-6)
    np.testing.assert_allclose(t_out["y"][1].numpy(), 3.0)


def test_jvp_of_a_constant_output_is_zero():
    out, t_out = sl.jvp(lambda x: (x * 2.0, sl.tensor([1.0, 2.0])), (np.ones(2),),
                        (np.ones(2),))
    np.testing.assert_array_equal(t_out[0].numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(t_out[1].numpy(), [0.0, 0.0])


def test_jvp_has_aux():
    out, t_out, aux = sl.jvp(lambda x: (x * x, {"n": 3}), (sl.tensor([1.0, 2.0]),),
                             (sl.tensor([1.0, 1.0]),), has_aux=True)
    assert aux == {"n": 3}
    np.testing.assert_array_equal(t_out.numpy(), [2.0, 4.0])


def test_jvp_of_complex_functions_follows_jax(rng):
    z = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    t = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    _, t_out = sl.jvp(lambda z: z * z, (z,), (t,))
    np.testing.assert_allclose(t_out.numpy(), 2 * z * t)  # holomorphic: f'(z) t
    _, t_out = sl.jvp(lambda z: sl.real(z * sl.conj(z)), (z,), (t,))
    np.testing.assert_allclose(t_out.numpy(), 2 * (z.real * t.real + z.imag * t.imag))


def test_linearize_matches_jvp_for_several_tangents(rng):
    fn, spec = CASES["scan"]
    args = _random(spec, rng)

    def f(*a):
        return fn(SL, *a)

    out, f_jvp = sl.linearize(f, *args)
    _assert_trees_close(out, f(*args))
    for _ in range(2):
        tangents = _random(spec, rng)
        _assert_trees_close(f_jvp(*tangents), sl.jvp(f, tuple(args), tuple(tangents))[1])


def test_jvp_on_the_backend_device(backend, rng):
    x = backend.tensor(rng.standard_normal((2, 3)))
    t = backend.tensor(np.ones((2, 3)))
    W = backend.tensor(rng.standard_normal((3, 3)))
    out, t_out = sl.jvp(lambda x: sl.scan(lambda h, _: (sl.tanh(h @ W), h), x, None,
                                          length=3)[0], (x,), (t,))
    backend.check_device(t_out)
    jac = sl.jacfwd(lambda x: sl.tanh(x @ W))(x)
    backend.check_device(jac)
    assert jac.shape == (2, 3, 2, 3)


# --- higher order -------------------------------------------------------------------------------
def _loss(x):
    return sl.sum(sl.tanh(x) ** 3 * x)


def test_jvp_of_grad_is_a_hessian_vector_product(rng):
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    _, hv = sl.jvp(sl.grad(_loss), (x,), (v,))
    np.testing.assert_allclose(hv.numpy(), sl.hessian(_loss)(x).numpy() @ v, rtol=1e-10)


def test_grad_of_jvp_matches_finite_differences(rng):
    x, v = rng.standard_normal(4), rng.standard_normal(4)

    def directional(x):
        return sl.jvp(_loss, (x,), (v,))[1]

    g = sl.grad(directional)(x).numpy()
    eps = 1e-6
    fd = [(directional(x + eps * e).item() - directional(x - eps * e).item()) / (2 * eps)
          for e in np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)


# --- Jacobians ----------------------------------------------------------------------------------
def _random_fn(m, p, x):
    y = m.tanh(p["W"] @ x + p["b"])
    return {"y": y * x[:3], "s": (m.sum(y ** 2), m.exp(p["b"]) * x[0])}


def test_jacfwd_equals_jacrev_on_pytrees(rng):
    p = {"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(3)}
    x = rng.standard_normal(4)
    f = lambda p, x: _random_fn(SL, p, x)  # noqa: E731
    fwd = sl.jacfwd(f, argnums=(0, 1))(p, x)
    rev = sl.jacrev(f, argnums=(0, 1))(p, x)
    _assert_trees_close(fwd, rev, rtol=1e-10, atol=1e-12)
    assert fwd["y"][0]["W"].shape == (3, 3, 4) and fwd["s"][0][1].shape == (4,)
    assert fwd["s"][1][0]["b"].shape == (3, 3)


def test_jacobians_match_jax_nesting_and_values(rng):
    jax, jm = _jax_ns()
    p = {"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(3)}
    x = rng.standard_normal(4)
    for argnums in (0, 1, (1, 0)):
        got = sl.jacrev(lambda p, x: _random_fn(SL, p, x), argnums=argnums)(p, x)
        with jax.enable_x64(True):
            want = _np(jax.jit(jax.jacfwd(lambda p, x: _random_fn(jm, p, x),
                                          argnums=argnums))(p, x))
        assert optree.tree_structure(_np(got), namespace="scanlib") == \
            optree.tree_structure(want, namespace="scanlib")
        _assert_trees_close(got, want, rtol=1e-10, atol=1e-12)


def test_jacobian_of_a_scan_matches_finite_differences(rng):
    fn, spec = CASES["scan"]
    W, U, h0, xs = _random(spec, rng)

    def f(h0):
        return fn(SL, W, U, h0, xs)[0]

    jac = sl.jacfwd(f)(h0).numpy()
    assert jac.shape == (2, 3, 2, 3)
    eps = 1e-6
    for j in range(h0.size):
        e = np.zeros(h0.size)
        e[j] = eps
        e = e.reshape(h0.shape)
        fd = (f(h0 + e).numpy() - f(h0 - e).numpy()) / (2 * eps)
        np.testing.assert_allclose(jac.reshape(2, 3, -1)[..., j], fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(sl.jacrev(f)(h0).numpy(), jac, rtol=1e-10, atol=1e-12)


def test_jacobians_has_aux_and_negative_argnums(rng):
    x = rng.standard_normal(3)
    for jac in (sl.jacfwd, sl.jacrev):
        j, aux = jac(lambda a, x: (a * sl.sin(x), "aux"), argnums=-1, has_aux=True)(2.0, x)
        assert aux == "aux"
        np.testing.assert_allclose(j.numpy(), np.diag(2 * np.cos(x)), rtol=1e-12)


def test_jacobians_pass_keyword_arguments_through():
    def f(x, *, scale):
        return scale * x * x

    x = sl.tensor([1.0, 2.0])
    for jac in (sl.jacfwd, sl.jacrev):
        np.testing.assert_allclose(jac(f)(x, scale=3.0).numpy(), np.diag([6.0, 12.0]))
    np.testing.assert_allclose(sl.hessian(lambda x, *, c: sl.sum(c * x**3))(x, c=2.0).numpy(),
                               np.diag([12.0, 24.0]))


def test_jacobian_of_zero_size_input():
    j = sl.jacfwd(lambda x, y: sl.sum(x) * y, argnums=(0, 1))(np.zeros((0, 2)), np.ones(2))
    assert j[0].shape == (2, 0, 2) and j[1].shape == (2, 2)


# --- hessian ------------------------------------------------------------------------------------
def _energy(m, x, y):
    return m.sum(m.tanh(x @ y) ** 2) + m.sum(m.sin(x) * x) * m.sum(y ** 3)


def test_hessian_symmetric_and_equal_to_finite_differences_of_grad(rng):
    x, y = rng.standard_normal((2, 3)), rng.standard_normal(3)
    H = sl.hessian(lambda x: _energy(SL, x, y))(x).numpy()
    assert H.shape == (2, 3, 2, 3)
    flat = H.reshape(6, 6)
    np.testing.assert_allclose(flat, flat.T, rtol=1e-10, atol=1e-12)
    grad = sl.grad(lambda x: _energy(SL, x, y))
    eps = 1e-6
    for j in range(6):
        e = np.zeros(6)
        e[j] = eps
        e = e.reshape(2, 3)
        fd = (grad(x + e).numpy() - grad(x - e).numpy()) / (2 * eps)
        np.testing.assert_allclose(flat[:, j], fd.ravel(), rtol=1e-6, atol=1e-8)


def test_hessian_blocks_match_jax(rng):
    jax, jm = _jax_ns()
    x, y = rng.standard_normal((2, 3)), rng.standard_normal(3)
    got = sl.hessian(lambda x, y: _energy(SL, x, y), argnums=(0, 1))(x, y)
    with jax.enable_x64(True):
        want = _np(jax.jit(jax.hessian(lambda x, y: _energy(jm, x, y), argnums=(0, 1)))(x, y))
    assert got[0][1].shape == (2, 3, 3) and got[1][0].shape == (3, 2, 3)
    _assert_trees_close(got, want, rtol=1e-9, atol=1e-12)


def test_hessian_through_a_scan_matches_jax(rng):
    jax, jm = _jax_ns()
    fn, spec = CASES["scan"]
    W, U, h0, xs = _random(spec, rng)

    def loss(m, W):
        carry, ys = fn(m, W, U, h0, xs)
        return m.sum(carry ** 2) + m.sum(ys)

    got = sl.hessian(lambda W: loss(SL, W))(W).numpy()
    with jax.enable_x64(True):
        want = np.asarray(jax.jit(jax.hessian(lambda W: loss(jm, W)))(W))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


# --- errors -------------------------------------------------------------------------------------
def test_integer_primal_is_refused():
    with pytest.raises(TypeError, match=r"jvp: primals\[0\] has dtype int64.*float0"):
        sl.jvp(lambda x: x * 2, (np.arange(3),), (np.ones(3),))
    with pytest.raises(TypeError, match=r"jacfwd: args\[0\] has dtype bool"):
        sl.jacfwd(lambda x: x)(np.array([True]))
    # an integer argument not differentiated is fine
    j = sl.jacrev(lambda x, n: x * n, argnums=0)(np.ones(2), np.arange(2))
    np.testing.assert_array_equal(j.numpy(), np.diag([0.0, 1.0]))


def test_tangent_mismatch_names_the_path():
    p = {"h": np.ones((2, 3)), "c": np.ones(3)}
    bad_shape = {"h": np.ones((3, 2)), "c": np.ones(3)}
    with pytest.raises(TypeError, match=r"tangents\[0\]\['h'\] is float64\[3, 2\] but its "
                                        r"primal is float64\[2, 3\]"):
        sl.jvp(lambda p: p["h"], (p,), (bad_shape,))
    bad_dtype = {"h": np.ones((2, 3)), "c": np.ones(3, np.float32)}
    with pytest.raises(TypeError, match=r"tangents\[0\]\['c'\] is float32\[3\]"):
        sl.jvp(lambda p: p["h"], (p,), (bad_dtype,))
    with pytest.raises(TypeError, match="structure of primals"):
        sl.jvp(lambda p: p["h"], (p,), ({"h": np.ones((2, 3))},))
    _, f_jvp = sl.linearize(lambda x: x * 2.0, np.ones(2))
    with pytest.raises(TypeError, match=r"linearize: tangents\[0\] is float64\[3\]"):
        f_jvp(np.ones(3))


def test_bad_calls_are_refused():
    with pytest.raises(TypeError, match="primals must be a tuple"):
        sl.jvp(lambda x: x, np.ones(2), (np.ones(2),))
    with pytest.raises(TypeError, match="tangents must be a tuple"):
        sl.jvp(lambda x: x, (np.ones(2),), np.ones(2))
    with pytest.raises(TypeError, match=r"jvp: out\[1\] has dtype int64.*has_aux"):
        sl.jvp(lambda x: (x, sl.tensor([1, 2])), (np.ones(2),), (np.ones(2),))
    with pytest.raises(ValueError, match="argnums 2 is out of range for 2"):
        sl.jacfwd(lambda x, y: x, argnums=2)(np.ones(2), np.ones(2))
    with pytest.raises(TypeError, match="complex"):
        sl.jacrev(lambda z: z * z)(np.ones(2, complex))
    # an output that is not an array, eagerly (forward mode) as under jit
    for jacfwd in (sl.jacfwd(lambda x: "a"), sl.jit(sl.jacfwd(lambda x: "a"))):
        with pytest.raises(TypeError, match="jacfwd: out is a str; output leaves must be"):
            jacfwd(np.ones(2))
    with pytest.raises(TypeError, match=r"jvp: out\['b'\] is a str"):
        sl.jvp(lambda x: {"a": x, "b": "z"}, (np.ones(2),), (np.ones(2),))


def test_results_stay_on_the_callers_tape():
    """A jvp, jacfwd or hessian of a tensor that requires grad, or of a function closing
    over one, stays linked to it, as grad's result does: a later backward() reaches it."""
    x = np.array([0.3, -1.2, 0.7])
    t = np.array([1.0, 0.5, -2.0])
    xt = sl.Tensor(x, True)
    out, t_out = sl.jvp(lambda a: a ** 3, (xt,), (sl.tensor(t),))
    (sl.sum(t_out) + sl.sum(out)).backward()
    np.testing.assert_allclose(xt.grad.numpy(), 6 * x * t + 3 * x ** 2)
    xt = sl.Tensor(x, True)
    (sl.sum(sl.hessian(lambda a: sl.sum(a ** 3))(xt)) + sl.sum(xt)).backward()
    np.testing.assert_allclose(xt.grad.numpy(), 7.0)  # d/dx sum(diag(6x)) + 1
    xt = sl.Tensor(x, True)
    sl.sum(sl.jacfwd(lambda a: a ** 3)(xt)).backward()
    np.testing.assert_allclose(xt.grad.numpy(), 6 * x)
    w = sl.Tensor(np.array([1.0, 2.0, 3.0]), True)
    out, t_out = sl.jvp(lambda a: a * w * w, (sl.tensor(x),), (sl.tensor(t),))
    (sl.sum(out) + sl.sum(t_out) + sl.sum(w)).backward()
    np.testing.assert_allclose(w.grad.numpy(), 1 + 2 * w.numpy() * (x + t))
    w = sl.Tensor(np.array([1.0, 2.0, 3.0]), True)
    value, g = sl.value_and_grad(lambda a: sl.sum(a * w))(sl.tensor(x))
    (value + sl.sum(g)).backward()
    np.testing.assert_allclose(w.grad.numpy(), x + 1)
    # and with nothing on the tape, results are plain values, as before
    out, t_out = sl.jvp(lambda a: a ** 3, (sl.tensor(x),), (sl.tensor(t),))
    assert not out.requires_grad and not t_out.requires_grad


# --- forward mode (issue 12: jvp at the cost of a forward and its tangent) -------------------
@pytest.mark.parametrize("name", CASES)
def test_forward_mode_agrees_with_the_double_vjp(name, rng, monkeypatch):
    from scanlib import transforms

    fn, spec = CASES[name]
    args, tangents = _random(spec, rng), _random(spec, rng)

    def f(*a):
        return fn(SL, *a)

    t_args = tuple(optree.tree_map(sl.tensor, t) for t in tangents)
    out, _, push = transforms._linearized(f, tuple(args), False, "jvp")
    want = push(t_args)
    calls = []
    monkeypatch.setattr(transforms, "_linearized",
                        lambda *a: calls.append(a) or pytest.fail("double VJP used"))
    got_out, got = sl.jvp(f, tuple(args), tuple(tangents))
    assert not calls
    _assert_trees_close(got_out, out, rtol=1e-12, atol=0)
    _assert_trees_close(got, want, rtol=1e-9, atol=1e-12)


def test_forward_mode_runs_a_scan_once(rng, monkeypatch):
    """A scan with tangents runs as its JVP scan only, not its forward and then that."""
    from scanlib.scan import primitive

    fn, spec = CASES["scan"]
    args, tangents = _random(spec, rng), _random(spec, rng)
    runs = []
    original = primitive.scan_p.impl

    def counting(*a, **k):
        runs.append(k["body"].name)
        return original(*a, **k)

    monkeypatch.setattr(primitive.scan_p, "impl", counting)
    sl.jvp(lambda *a: fn(SL, *a), tuple(args), tuple(tangents))
    assert runs == ["jvp_body"]


def test_jvp_with_a_closed_over_tensor_that_requires_grad_stays_differentiable(rng):
    W = sl.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    # On W's device (the fake CuPy run puts new tensors there; NumPy arrays stay on the CPU).
    x, t = sl.tensor(rng.standard_normal((2, 3))), sl.tensor(rng.standard_normal((2, 3)))

    def f(x):
        return sl.scan(lambda h, _: (sl.tanh(h @ W), h), x, length=3)[0]

    _, t_out = sl.jvp(f, (x,), (t,))
    sl.sum(t_out).backward()

    def g(w):
        return _np(sl.jvp(lambda x: sl.scan(lambda h, _: (sl.tanh(h @ sl.tensor(w)), h), x,
                                            length=3)[0], (x,), (t,))[1]).sum()

    w0, e = W.numpy().copy(), np.zeros((3, 3))
    e[1, 2] = 1e-6
    fd = (g(w0 + e) - g(w0 - e)) / 2e-6
    np.testing.assert_allclose(W.grad.numpy()[1, 2], fd, rtol=1e-5)


def test_jvp_of_a_function_that_reads_a_value_as_a_number(rng):
    x, t = rng.standard_normal(3), rng.standard_normal(3)

    def f(x):
        # Python control flow on a value (bool(); float() of it would be refused, as in JAX)
        scale = 2.0 if sl.sum(x) > 0 else -2.0
        return scale * sl.sin(x)

    out, t_out = sl.jvp(f, (x,), (t,))
    _assert_trees_close(t_out, _fd_jvp(f, [x], [t]), rtol=1e-6)


def test_jvp_of_a_multilinear_op_with_one_tangent(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    ta = rng.standard_normal((3, 4))
    _, t_out = sl.jvp(lambda a, b: (a @ b, sl.vdot(a, a @ b @ b.T), a * a), (a, b),
                      (ta, np.zeros_like(b)))
    np.testing.assert_allclose(t_out[0].numpy(), ta @ b)
    np.testing.assert_allclose(t_out[1].numpy(), np.vdot(ta, a @ b @ b.T)
                               + np.vdot(a, ta @ b @ b.T))
    np.testing.assert_allclose(t_out[2].numpy(), 2 * a * ta)


def test_jvp_through_a_scan_in_float32_matches_jax(rng):
    jax, jm = _jax_ns()
    fn, spec = CASES["scan_nested"]
    args, tangents = _random(spec, rng, np.float32), _random(spec, rng, np.float32)
    out, t_out = sl.jvp(lambda *a: fn(SL, *a), tuple(args), tuple(tangents))
    want_out, want_t = jax.jit(lambda a, t: jax.jvp(lambda *a: fn(jm, *a), a, t))(
        tuple(args), tuple(tangents))
    assert all(leaf.dtype == np.float32 for leaf in optree.tree_leaves(_np(t_out)))
    _assert_trees_close(t_out, want_t, rtol=2e-4, atol=2e-5)


def test_jacfwd_equals_jacrev_on_a_kalman_log_likelihood(rng):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import kalman

    true = {"rho": 0.9, "omega": 0.3, "q": 0.5, "r": 1.0}
    ys = sl.tensor(kalman.simulate(true, 12, 3, rng))
    theta = kalman.to_theta(true)
    fwd = sl.jacfwd(lambda th: kalman.log_likelihood(th, ys))(theta)
    rev = sl.jacrev(lambda th: kalman.log_likelihood(th, ys))(theta)
    _assert_trees_close(fwd, rev, rtol=1e-9, atol=1e-12)


def test_jacfwd_pushes_columns_by_forward_mode_and_falls_back_where_recorded(monkeypatch):
    """Each column is one forward-mode jvp (no linearization), unless the Jacobian may be
    differentiated again: then the double VJP, which records."""
    transforms = sys.modules["scanlib.transforms"]
    calls = []
    real = transforms._linearized
    monkeypatch.setattr(transforms, "_linearized",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    W = sl.tensor([[0.5, -0.3], [0.2, 0.8]])

    def f(x, h):
        return sl.scan(lambda c, _: (sl.tanh(c @ W) * x, sl.sum(c)), h, length=4)

    x, h = sl.tensor([1.2, 0.7]), sl.tensor([0.3, -0.4])
    got = sl.jacfwd(f, argnums=(0, 1))(x, h)
    want = sl.jacrev(f, argnums=(0, 1))(x, h)
    for a, b in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    assert calls == []
    # inside grad the Jacobian is differentiated: recorded, and equal to jacrev's there too
    g = sl.grad(lambda x: sl.sum(sl.jacfwd(f)(x, h)[0] ** 2))(x)
    g2 = sl.grad(lambda x: sl.sum(sl.jacrev(f)(x, h)[0] ** 2))(x)
    np.testing.assert_allclose(g.numpy(), g2.numpy(), rtol=1e-12)
    assert calls


def _scans_in(graph):
    """Every scan equation of a traced graph, nested bodies included."""
    found = []
    for eqn in graph.eqns:
        if eqn.prim.name == "scan":
            found.append(eqn)
            found.extend(_scans_in(eqn.params["body"]))
    return found


@pytest.mark.parametrize("together", [64, 2, 3])
def test_jacfwd_in_a_trace_pushes_all_columns_as_one_batch(rng, monkeypatch, together):
    """Under jit the columns go through one vmapped push (one tangent scan over a batch of
    columns), as jax.jacfwd; per-column pushes would be one tangent scan each. Values, shapes
    and dtypes are the eager Jacobian's: leaves of several shapes, a float32 leaf, an empty
    leaf, several outputs, has_aux; with batches of 2 or 3 columns too, which split leaves."""
    transforms = sys.modules["scanlib.transforms"]
    monkeypatch.setattr(transforms, "PUSHED_TOGETHER", together)
    W = sl.tensor(rng.standard_normal((3, 3)) * 0.4)

    def f(p, x):
        def body(c, w):
            c = sl.tanh(c @ W * p["a"] + w * p["b"][:3])
            return c, sl.sum(c * c) + sl.sum(p["e"])
        c, ys = sl.scan(body, x, sl.tensor(rng_xs))
        return {"c": c, "ys": ys * p["f"].astype("float64")}, sl.sum(ys)

    rng_xs = rng.standard_normal((5, 3))
    p = {"a": sl.tensor(0.7), "b": sl.tensor(rng.standard_normal(4)),
         "e": sl.tensor(np.zeros((0, 2))), "f": sl.tensor(np.float32(1.5))}
    x = sl.tensor(rng.standard_normal(3))
    jf = sl.jacfwd(f, argnums=(0, 1), has_aux=True)
    (eager, aux), (traced, traced_aux) = jf(p, x), sl.jit(jf)(p, x)
    _assert_trees_close(traced, eager, rtol=1e-12, atol=1e-14)
    _assert_trees_close(traced_aux, aux, rtol=1e-12, atol=1e-14)
    for a, b in zip(optree.tree_leaves(_np(traced), namespace="scanlib"),
                    optree.tree_leaves(_np(eager), namespace="scanlib")):
        assert a.dtype == b.dtype and a.shape == b.shape
    rev = sl.jacrev(lambda p, x: f(p, x)[0], argnums=(0, 1))(p, x)  # float32 where f is
    _assert_trees_close(traced, rev, rtol=1e-6, atol=1e-8)
    if together < 3:
        return
    # forward mode, as JAX's: one scan, over the primal carry and a batch of tangent carries
    # (no forward scan saving residuals for a transposed walk); so for two columns too
    for g, arg in [(lambda x: f(p, x)[0], x),
                   (lambda y: f(p, sl.concatenate([y, x[2:]]))[0], x[:2])]:
        scans = _scans_in(sl.jit(sl.jacfwd(g)).trace(arg))
        assert [(e.params["reverse"], e.params["num_carry"]) for e in scans] == [(False, 2)]


@pytest.mark.parametrize("together", [64, 2])
def test_jacrev_in_a_trace_pulls_all_rows_back_as_one_batch(rng, monkeypatch, together):
    """Under jit the rows go through one vmapped VJP (one backward scan over a batch of
    cotangents), as jax.jacrev; values, shapes and dtypes are the eager Jacobian's (several
    output leaves, one empty, a float32 input leaf)."""
    transforms = sys.modules["scanlib.transforms"]
    monkeypatch.setattr(transforms, "PUSHED_TOGETHER", together)
    W = sl.tensor(rng.standard_normal((3, 3)) * 0.4)
    xs = sl.tensor(rng.standard_normal((6, 3)))

    def f(p, x):
        def body(c, w):
            c = sl.tanh(c @ W * p["a"] + w * x)
            return c, sl.sum(c * c)
        c, ys = sl.scan(body, x * p["b"].astype("float64"), xs)
        return {"c": c, "ys": ys[:4], "none": sl.zeros((0,))}

    p = {"a": sl.tensor(0.7), "b": sl.tensor(np.float32(1.5))}
    x = sl.tensor(rng.standard_normal(3))
    jr = sl.jacrev(f, argnums=(0, 1))
    eager, traced = jr(p, x), sl.jit(jr)(p, x)
    _assert_trees_close(traced, eager, rtol=1e-12, atol=1e-14)
    for a, b in zip(optree.tree_leaves(_np(traced), namespace="scanlib"),
                    optree.tree_leaves(_np(eager), namespace="scanlib")):
        assert a.dtype == b.dtype and a.shape == b.shape
    _assert_trees_close(traced, sl.jacfwd(f, argnums=(0, 1))(p, x), rtol=1e-5, atol=1e-7)
    if together == 64:
        graph = sl.jit(sl.jacrev(lambda x: f(p, x)["c"])).trace(x)
        backward_scans = [e for e in _scans_in(graph) if e.params["reverse"]]
        assert len(backward_scans) == 1, len(backward_scans)


def test_jacfwd_batched_in_a_trace_composes(rng):
    """The batched push inside other transformations: differentiated under jit, in a scan's
    body, under vmap; each against the same thing computed eagerly or by jacrev."""
    A = sl.tensor(rng.standard_normal((3, 3)) * 0.5)

    def f(x):
        return sl.scan(lambda c, _: (sl.sin(c @ A) + x, c * x), x, length=3)[1]

    x = sl.tensor(rng.standard_normal(3))
    loss = lambda x: sl.sum(sl.jacfwd(f)(x) ** 2)  # noqa: E731
    np.testing.assert_allclose(sl.jit(sl.grad(loss))(x).numpy(), sl.grad(loss)(x).numpy(),
                               rtol=1e-12)

    def body(c, _):  # a Jacobian per step, in a traced body
        return c + 0.1 * sl.sum(sl.jacfwd(f)(c), axis=(0, 1)), sl.sum(c)

    def body_rev(c, _):
        return c + 0.1 * sl.sum(sl.jacrev(f)(c), axis=(0, 1)), sl.sum(c)

    got = sl.scan(body, x, length=3)
    want = sl.scan(body_rev, x, length=3)
    _assert_trees_close(got, want, rtol=1e-10, atol=1e-12)
    xs = sl.tensor(rng.standard_normal((4, 3)))
    _assert_trees_close(sl.vmap(sl.jit(sl.jacfwd(f)))(xs), sl.vmap(sl.jacrev(f))(xs),
                        rtol=1e-10, atol=1e-12)


def test_forward_mode_in_a_trace_prints_as_jax(capsys, rng):
    """Forward mode inside a trace that gives up after running f (f reads a closed-over
    tensor that requires grad, or takes a grad through a custom_vjp) takes back what it
    recorded, so f prints once per call, not once more for the double VJP that computes the
    result; jit's jacfwd pushes every column at once (f prints once for 130 columns); and a
    weakly typed primal stays weak under jvp, eagerly and traced, as in JAX."""
    x, t = sl.tensor(rng.standard_normal(3)), sl.tensor(rng.standard_normal(3))
    W = sl.tensor(np.eye(3) * 2.0, requires_grad=True)

    def fW(a):
        sl.debug.print("PRINT {}", a[0])
        return sl.tanh(W @ a)

    @sl.custom_vjp
    def cv(y):
        return sl.sin(y)

    cv.defvjp(lambda y: (sl.sin(y), y), lambda r, g: (sl.cos(r) * g,))

    def fcv(a):
        sl.debug.print("PRINT {}", a[0])
        return sl.grad(lambda y: sl.sum(cv(y) * a))(a)

    X = sl.stack([x, x])
    cases = [(lambda: sl.vmap(lambda a: sl.jvp(fW, (a,), (t,)))(X), 2),
             (lambda: sl.scan(lambda c, a: (c, sl.jvp(fW, (a,), (t,))[1]), 0.0, X), 2),
             (lambda: sl.jit(lambda a: sl.jvp(fcv, (a,), (t,)))(x), 1),
             (lambda: sl.vmap(lambda a: sl.jvp(fcv, (a,), (t,)))(X), 2)]
    for i, (call, prints) in enumerate(cases):
        capsys.readouterr()
        call()
        assert capsys.readouterr().out.count("PRINT") == prints, i
    v = sl.ones(130)
    capsys.readouterr()
    jac = sl.jit(sl.jacfwd(lambda v: _printed(v) * v))(v)
    assert capsys.readouterr().out.count("PRINT") == 1
    np.testing.assert_array_equal(jac.numpy(), np.diag(np.full(130, 2.0)))
    w, x32 = sl.asarray(2.0), sl.tensor(np.float32([1.5, 2.5]))
    for jvp in (sl.jvp, sl.jit(sl.jvp, static_argnums=0)):
        out, tan = jvp(lambda a: a * x32, (w,), (sl.asarray(1.0),))
        assert out.dtype == tan.dtype == np.float32


def _printed(v):
    sl.debug.print("PRINT {}", v[0])
    return v


# --- linear_transpose ---------------------------------------------------------------------------
_RNG_LT = np.random.default_rng(11)
_A_LT = _RNG_LT.standard_normal((3, 4))
_B_LT = _RNG_LT.standard_normal((4, 2))
LINEAR = {
    "matvec": (lambda lib: (lambda x: _A_LT @ x), [np.zeros(4)], _RNG_LT.standard_normal(3)),
    "two_inputs": (lambda lib: (lambda x, y: (2.0 * x[::-1] - y[:4] / 3.0, lib.sum(x) * 0.5)),
                   [np.zeros(4), np.zeros(6)], (_RNG_LT.standard_normal(4), np.array(1.5))),
    "reshape_transpose": (lambda lib: (lambda x: (x.reshape(2, 6).T @ _B_LT[:2]).sum(0)),
                          [np.zeros(12)], _RNG_LT.standard_normal(2)),
    "dict": (lambda lib: (lambda d: {"o": d["a"] * 3.0 + lib.concatenate([d["b"], d["b"]])}),
             [{"a": np.zeros(4), "b": np.zeros(2)}], {"o": _RNG_LT.standard_normal(4)}),
    "affine": (lambda lib: (lambda x: x + 1.0), [np.zeros(3)], _RNG_LT.standard_normal(3)),
}


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_linear_transpose_is_jaxs(name):
    """The transpose of linear functions (products by constants, indexing, reshapes,
    sums, several inputs, pytrees), and of an affine one (its linear part, as JAX's)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    make, primals, ct = LINEAR[name]
    with jax.enable_x64(True):
        want = jax.linear_transpose(make(jnp), *jax.tree.map(jnp.asarray, primals))(
            jax.tree.map(jnp.asarray, ct))
        want = [np.asarray(x) for x in jax.tree.leaves(want)]
    got = sl.linear_transpose(make(sl), *primals)(ct)
    assert isinstance(got, tuple) and len(got) == len(primals)
    got = [x.numpy() for x in sl.pytree.leaves(got)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15)


def test_linear_transpose_refuses_what_is_not_linear():
    for fun, prim in ((lambda x: sl.sin(x), "sin"), (lambda x: x * x, "mul"),
                      (lambda x: 1.0 / x, "div")):
        with pytest.raises(TypeError, match=f"it applies {prim} to values that depend"):
            sl.linear_transpose(fun, np.zeros(2))
    with pytest.raises(TypeError, match="floating or complex"):
        sl.linear_transpose(lambda x: x, np.zeros(2, np.int32))
    fun_t = sl.linear_transpose(lambda x: 2.0 * x, sl.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(TypeError, match=r"cotangent leaf 0 is float64\[2\], but fun's output"):
        fun_t(np.ones(2))
    assert fun_t(np.ones(2, np.float32))[0].dtype == np.float32
