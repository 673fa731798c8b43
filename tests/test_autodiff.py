"""The differentiation APIs: JAX-style grad / value_and_grad / vjp on pytrees, higher order,
and torch-style backward() filling .grad.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import scanlib as sl
from scanlib.testing import check_grads

Params = namedtuple("Params", ["w", "b"])


def _np(x):
    return x.numpy() if isinstance(x, sl.Tensor) else np.asarray(x)


# --- grad and value_and_grad ------------------------------------------------------------------
def test_grad_of_a_polynomial(backend):
    x = backend.tensor([1.0, -2.0, 0.5])
    g = sl.grad(lambda x: (x**3 + 2.0 * x).sum())(x)
    assert isinstance(g, sl.Tensor) and not g.requires_grad
    backend.check_device(g)
    np.testing.assert_allclose(g.numpy(), 3 * _np(x) ** 2 + 2)


def test_grad_argnums(backend):
    x, y, z = backend.tensor([1.0, 2.0]), backend.tensor([3.0, 4.0]), backend.tensor(5.0)

    def f(x, y, z):
        return (x * y * z).sum()

    np.testing.assert_allclose(sl.grad(f, argnums=1)(x, y, z).numpy(), [5.0, 10.0])
    np.testing.assert_allclose(sl.grad(f, argnums=-1)(x, y, z).numpy(), 11.0)
    gz, gx = sl.grad(f, argnums=(2, 0))(x, y, z)
    np.testing.assert_allclose(gz.numpy(), 11.0)
    np.testing.assert_allclose(gx.numpy(), [15.0, 20.0])
    out = sl.grad(f, argnums=(1,))(x, y, z)
    assert isinstance(out, tuple) and len(out) == 1
    with pytest.raises(ValueError, match="out of range"):
        sl.grad(f, argnums=3)(x, y, z)


def test_grad_has_aux(backend):
    x = backend.tensor([1.0, 2.0])

    def f(x):
        y = x * x
        return y.sum(), {"y": y, "note": "kept"}

    g, aux = sl.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert aux["note"] == "kept"
    np.testing.assert_allclose(aux["y"].numpy(), [1.0, 4.0])
    (value, aux2), g2 = sl.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_allclose(value.numpy(), 5.0)
    np.testing.assert_allclose(g2.numpy(), [2.0, 4.0])
    assert aux2["note"] == "kept"
    with pytest.raises(TypeError, match="pair"):
        sl.grad(lambda x: x.sum(), has_aux=True)(x)


def test_value_and_grad(backend):
    x = backend.tensor([0.5, -1.0, 2.0])
    value, g = sl.value_and_grad(lambda x: sl.tanh(x).sum())(x)
    assert value.shape == () and not value.requires_grad
    np.testing.assert_allclose(value.item(), np.tanh(_np(x)).sum())
    np.testing.assert_allclose(g.numpy(), 1 - np.tanh(_np(x)) ** 2)


def test_grad_passes_keyword_arguments_through_undifferentiated():
    # JAX's grad and value_and_grad call f(*args, **kwargs) and differentiate args[argnums]
    # only; a jitted loss with static_argnames is called this way.
    def f(x, y, *, scale, power=2):
        return sl.sum(scale * x**power * y)

    x, y = sl.tensor([1.0, 2.0]), sl.tensor([3.0, -1.0])
    np.testing.assert_allclose(sl.grad(f)(x, y, scale=0.5, power=3).numpy(),
                               0.5 * 3 * _np(x) ** 2 * _np(y))
    value, (gx, gy) = sl.value_and_grad(f, argnums=(0, 1))(x, y, scale=2.0)
    assert float(value) == 2.0 * (3.0 - 4.0)
    np.testing.assert_allclose(gx.numpy(), 4.0 * _np(x) * _np(y))
    np.testing.assert_allclose(gy.numpy(), 2.0 * _np(x) ** 2)
    loss = sl.jit(lambda x, n: sl.sum(x**n), static_argnames="n")
    with pytest.warns(sl.JitFallbackWarning, match="requires grad"):
        np.testing.assert_allclose(sl.grad(loss)(x, n=3).numpy(), 3 * _np(x) ** 2)


def test_grad_accepts_arrays_and_python_floats(backend):
    g = sl.grad(lambda x: x * x * x)(3.0)
    assert isinstance(g, sl.Tensor) and g.shape == () and g.item() == 27.0
    a = backend.array([1.0, 2.0])
    g = sl.grad(lambda a: (a * a).sum())(a)
    backend.check_device(g)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


@pytest.mark.parametrize("kind", ["dict", "list", "tuple", "namedtuple", "nested"])
def test_grad_of_pytrees_keeps_the_structure(backend, kind):
    w, b = backend.array(np.arange(6.0).reshape(2, 3)), backend.array([1.0, -1.0])
    x = backend.tensor(np.ones(3))
    params = {"dict": {"w": w, "b": b}, "list": [w, b], "tuple": (w, b),
              "namedtuple": Params(w, b), "nested": {"layer": [Params(w, b)], "skip": None}}[kind]

    def unpack(p):
        if kind == "dict":
            return p["w"], p["b"]
        if kind == "nested":
            assert p["skip"] is None
            return p["layer"][0].w, p["layer"][0].b
        return p[0], p[1]

    def loss(p, x):
        w, b = unpack(p)
        return ((w @ x + b) ** 2).sum()

    g = sl.grad(loss)(params, x)
    assert type(g) is type(params)
    gw, gb = unpack(g)
    assert isinstance(gw, sl.Tensor) and gw.shape == (2, 3) and gb.shape == (2,)
    r = np.arange(6.0).reshape(2, 3) @ np.ones(3) + np.array([1.0, -1.0])
    np.testing.assert_allclose(gb.numpy(), 2 * r)
    np.testing.assert_allclose(gw.numpy(), 2 * r[:, None] * np.ones((2, 3)))


def test_grad_of_unused_argument_is_zeros(backend):
    x = backend.tensor(np.ones((2, 3), np.float32))
    y = backend.tensor([1.0, 2.0])
    gx, gy = sl.grad(lambda x, y: (y * y).sum(), argnums=(0, 1))(x, y)
    assert gx.shape == (2, 3) and gx.dtype == np.float32
    backend.check_device(gx)
    np.testing.assert_array_equal(gx.numpy(), 0.0)
    np.testing.assert_allclose(gy.numpy(), [2.0, 4.0])
    # An output that depends on nothing differentiable at all.
    g = sl.grad(lambda x: backend.tensor(3.0))(x)
    np.testing.assert_array_equal(g.numpy(), np.zeros((2, 3)))
    g = sl.grad(lambda p: p["a"].sum())({"a": y, "unused": x})
    np.testing.assert_array_equal(g["unused"].numpy(), 0.0)


def test_grad_of_a_constant_through_stop_gradient(backend):
    x = backend.tensor([1.0, 2.0])
    g = sl.grad(lambda x: (sl.stop_gradient(x) * x).sum())(x)
    np.testing.assert_allclose(g.numpy(), [1.0, 2.0])  # not 2x


# --- vjp ----------------------------------------------------------------------------------------
def test_vjp_basic(backend):
    x = backend.tensor([1.0, 2.0, 3.0])
    out, back = sl.vjp(lambda x: x * x, x)
    np.testing.assert_allclose(out.numpy(), [1.0, 4.0, 9.0])
    (g,) = back(backend.tensor([1.0, 0.0, -1.0]))
    np.testing.assert_allclose(g.numpy(), [2.0, 0.0, -6.0])
    (g2,) = back(backend.array([1.0, 1.0, 1.0]))  # vjp_fn can be called again, with an array
    np.testing.assert_allclose(g2.numpy(), [2.0, 4.0, 6.0])
    with pytest.raises(ValueError, match=r"\(3,\)"):
        back(backend.tensor([1.0, 2.0]))


def test_vjp_on_pytrees(backend):
    w, b = backend.tensor([[1.0, 2.0], [3.0, 4.0]]), backend.tensor([0.5, -0.5])
    x = backend.tensor([1.0, -1.0])
    primals = ({"w": w, "b": b}, [x], Params(w=x, b=b))

    def f(p, xs, nt):
        h = p["w"] @ xs[0] + p["b"]
        return {"h": h, "pair": (h.sum(), nt.w * nt.b)}

    out, back = sl.vjp(f, *primals)
    assert set(out) == {"h", "pair"} and isinstance(out["pair"], tuple)
    ct = {"h": backend.tensor([1.0, 2.0]), "pair": (backend.tensor(3.0),
                                                    backend.tensor([1.0, 1.0]))}
    gp, gxs, gnt = back(ct)
    assert set(gp) == {"w", "b"} and isinstance(gxs, list) and isinstance(gnt, Params)
    gh = np.array([1.0, 2.0]) + 3.0
    np.testing.assert_allclose(gp["b"].numpy(), gh)
    np.testing.assert_allclose(gp["w"].numpy(), np.outer(gh, [1.0, -1.0]))
    np.testing.assert_allclose(gxs[0].numpy(), _np(w).T @ gh)
    np.testing.assert_allclose(gnt.w.numpy(), _np(b))
    np.testing.assert_allclose(gnt.b.numpy(), _np(x))
    with pytest.raises(TypeError, match="structure"):
        back({"h": backend.tensor([1.0, 2.0])})


def test_vjp_has_aux(backend):
    x = backend.tensor([2.0])
    out, back, aux = sl.vjp(lambda x: (x * 3.0, "aux"), x, has_aux=True)
    assert aux == "aux"
    np.testing.assert_allclose(out.numpy(), [6.0])
    np.testing.assert_allclose(back(backend.tensor([1.0]))[0].numpy(), [3.0])


# --- higher order -------------------------------------------------------------------------------
def test_grad_of_grad(backend):
    x = backend.tensor(0.7)
    d1 = sl.grad(lambda x: sl.sin(x) * x)
    d2 = sl.grad(d1)
    d3 = sl.grad(d2)
    v = 0.7
    np.testing.assert_allclose(d1(x).item(), np.cos(v) * v + np.sin(v))
    np.testing.assert_allclose(d2(x).item(), -np.sin(v) * v + 2 * np.cos(v))
    np.testing.assert_allclose(d3(x).item(), -np.cos(v) * v - 3 * np.sin(v))
    np.testing.assert_allclose(sl.grad(sl.grad(lambda x: x**4))(2.0).item(), 48.0)


def _f(x):
    return (sl.tanh(x @ x.T) * sl.sin(x)[:, :1]).sum() + sl.logsumexp(x * x)


def test_hessian_vector_product_matches_finite_differences(backend, rng):
    x = backend.tensor(rng.standard_normal((3, 4)))
    v = rng.standard_normal((3, 4))

    def hvp(x, v):
        return sl.grad(lambda x: (sl.grad(_f)(x) * v).sum())(x)

    got = hvp(x, backend.tensor(v)).numpy()
    eps = 1e-5
    gplus = sl.grad(_f)(backend.tensor(x.numpy() + eps * v)).numpy()
    gminus = sl.grad(_f)(backend.tensor(x.numpy() - eps * v)).numpy()
    np.testing.assert_allclose(got, (gplus - gminus) / (2 * eps), rtol=1e-6, atol=1e-7)
    # And the Hessian is symmetric: <u, H v> == <v, H u>.
    u = rng.standard_normal((3, 4))
    uhv = (u * got).sum()
    vhu = (v * hvp(x, backend.tensor(u)).numpy()).sum()
    np.testing.assert_allclose(uhv, vhu, rtol=1e-10)


def test_vjp_of_vjp(backend, rng):
    x = backend.tensor(rng.standard_normal(4))
    ct = backend.tensor(rng.standard_normal(4))

    def g(x):  # J(x)^T ct for f = sin(x) * x: elementwise (cos(x) x + sin(x)) ct
        return sl.vjp(lambda x: sl.sin(x) * x, x)[1](ct)[0]

    out, back = sl.vjp(g, x)
    xs, cs = x.numpy(), ct.numpy()
    np.testing.assert_allclose(out.numpy(), (np.cos(xs) * xs + np.sin(xs)) * cs)
    w = rng.standard_normal(4)
    (gg,) = back(backend.tensor(w))
    np.testing.assert_allclose(gg.numpy(), (-np.sin(xs) * xs + 2 * np.cos(xs)) * cs * w)
    check_grads(g, [x.numpy() if backend.name == "numpy" else x], order=2)


def test_closure_perturbation_is_not_confused(backend):
    # The inner grad's x is the outer variable: d/dx [x * d/dy (x*y)] = d/dx x^2 = 2x.
    assert sl.grad(lambda x: x * sl.grad(lambda y: x * y)(2.0))(3.0).item() == 6.0
    x = backend.tensor(3.0)
    out = sl.grad(lambda x: x * sl.grad(lambda y: x * y)(backend.tensor(2.0)))(x)
    backend.check_device(out)
    assert out.item() == 6.0


def test_grad_inside_backward_style_code(backend):
    # grad of a function that itself differentiates a tensor requiring grad.
    w = backend.tensor([1.0, 2.0], requires_grad=True)
    loss = (sl.grad(lambda w: (w**3).sum())(w) * w).sum()  # sum 3 w^3
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), 9 * _np(w.detach()) ** 2)


# --- torch-style backward ---------------------------------------------------------------------
def test_returned_gradients_do_not_share_memory(backend):
    """add's rule hands one array to both of its inputs; each gradient returned still owns
    its memory, so clipping one in place (as NumPy code does) leaves the others alone."""
    x, y = backend.tensor([0.1, 0.2]), backend.tensor([0.3, 0.4])

    def f(x, y):
        return sl.sum(sl.tanh(x + y))

    gx, gy = sl.grad(f, argnums=(0, 1))(x, y)
    xp = sl.backends.xp_of(gx._value)
    assert not xp.shares_memory(gx._value, gy._value)
    want = 1 - np.tanh([0.4, 0.6]) ** 2
    gx._value[...] = 0.0
    np.testing.assert_allclose(backend.numpy(gy), want, rtol=1e-12)

    xl = backend.tensor([0.1, 0.2], requires_grad=True)
    yl = backend.tensor([0.3, 0.4], requires_grad=True)
    f(xl, yl).backward()
    assert not xp.shares_memory(xl.grad._value, yl.grad._value)
    np.testing.assert_allclose(backend.numpy(xl.grad), want, rtol=1e-12)


def test_backward_fills_grad_of_leaves(backend):
    w = backend.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = backend.tensor([0.5, 0.5], requires_grad=True)
    x = backend.tensor([1.0, -1.0])  # does not require grad
    loss = ((w @ x + b) ** 2).sum()
    assert loss.requires_grad and not loss.is_leaf
    loss.backward()
    h = np.array([-1.0, -1.0]) + 0.5
    np.testing.assert_allclose(b.grad.numpy(), 2 * h)
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.outer(h, [1.0, -1.0]))
    assert x.grad is None
    assert not w.grad.requires_grad
    backend.check_device(w.grad)


def test_backward_accumulates_across_calls(backend):
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0])
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_backward_with_cotangent(backend):
    x = backend.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(backend.tensor([1.0, 0.5, -1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, -6.0])
    x.grad = None
    (x * 2.0).backward(backend.array([1.0, 1.0, 1.0]))  # a raw array works too
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])
    x.grad = None
    (x * 2.0).backward([1.0, 2.0, 3.0])  # and a list, put on the tensor's device
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    backend.check_device(x.grad)


@pytest.mark.parametrize("ct", [2, np.array(2), np.array(True), "tensor"])
def test_an_integer_cotangent_counts_in_the_outputs_dtype(ct):
    """Through the identity (which would hand it back as the gradient), through a
    while_loop (whose VJP under jit dropped integer cotangents: a zero gradient) and through
    backward(): a float gradient, the same eagerly and under jit."""
    ct = sl.tensor(2) if isinstance(ct, str) else ct
    x = sl.tensor(0.7)

    def through_loop(x, ct, n):
        loop = lambda x: sl.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * c[1]),
                                       (sl.tensor(0), x))[1]
        return sl.vjp(loop, x)[1](ct)[0]

    want = float(np.asarray(ct)) * 4 * 0.7 ** 3  # d(x^4)/dx, two trips
    for f in (through_loop, sl.jit(through_loop)):
        for n, expected in ((2, want), (0, float(np.asarray(ct)))):
            g = f(x, ct, sl.tensor(n))
            assert g.dtype == np.float64
            np.testing.assert_allclose(g.numpy(), expected, rtol=1e-14)
    (g,) = sl.vjp(lambda x: x, sl.tensor(np.float32(0.7)))[1](ct)
    assert g.dtype == np.float32 and float(g) == float(np.asarray(ct))
    y = sl.tensor(0.7, requires_grad=True)
    y.backward(ct)
    assert y.grad.dtype == np.float64 and float(y.grad) == float(np.asarray(ct))


def test_backward_through_shared_subexpressions(backend):
    x = backend.tensor(1.5, requires_grad=True)
    a = x * x
    b = a * a + a  # x^4 + x^2
    (b + sl.exp(a)).backward()
    np.testing.assert_allclose(x.grad.item(), 4 * 1.5**3 + 2 * 1.5 + 2 * 1.5 * np.exp(1.5**2))


def test_backward_create_graph_gives_second_derivative(backend):
    x = backend.tensor(2.0, requires_grad=True)
    (x**3).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.item() == 12.0
    x.grad = None
    g.backward()
    assert x.grad.item() == 12.0  # d/dx 3x^2 = 6x


def test_no_grad(backend):
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    with sl.no_grad():
        y = x * 2.0
        assert not y.requires_grad
        with sl.enable_grad():
            assert (x * 2.0).requires_grad
        assert not (x * 2.0).requires_grad
    assert (x * 2.0).requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_functional_grad_works_inside_no_grad(backend):
    # grad/vjp are explicit requests: no_grad() must not turn them into silent zeros.
    x = backend.tensor([1.0, 2.0])
    w = backend.tensor([1.0, 2.0], requires_grad=True)
    with sl.no_grad():
        np.testing.assert_allclose(sl.grad(lambda x: (x * x).sum())(x).numpy(), [2.0, 4.0])
        value, g = sl.value_and_grad(lambda w: (w**3).sum())(w)
        np.testing.assert_allclose(g.numpy(), [3.0, 12.0])
        assert not g.requires_grad and not value.requires_grad  # nothing links to the tape
        (g2,) = sl.vjp(lambda x: sl.sin(x), x)[1](backend.tensor([1.0, 1.0]))
        np.testing.assert_allclose(g2.numpy(), np.cos([1.0, 2.0]))
        assert not (w * 2.0).requires_grad  # and no_grad still holds outside grad's f


def test_comparisons_are_bool_and_not_differentiable(backend):
    x = backend.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = backend.tensor([3.0, 2.0, 1.0])
    for out, want in ((x < y, [1, 0, 0]), (x <= y, [1, 1, 0]), (x > y, [0, 0, 1]),
                      (x >= y, [0, 1, 1]), (x == y, [0, 1, 0]), (x != y, [1, 0, 1]),
                      (x > 1.5, [0, 1, 1]), (~(x > 1.5), [1, 0, 0])):
        assert out.dtype == np.bool_ and not out.requires_grad
        np.testing.assert_array_equal(out.numpy(), np.array(want, bool))
    assert hash(x) != hash(y)
    assert x in {x: 1}  # __eq__ is elementwise, but tensors still work as dict keys


def test_integer_tensors_cannot_require_grad(backend):
    with pytest.raises(TypeError, match="floating-point"):
        backend.tensor([1, 2, 3], requires_grad=True)
    with pytest.raises(TypeError, match="floating-point"):
        backend.tensor([True, False], requires_grad=True)
    i = backend.tensor([1, 2])
    with pytest.raises(TypeError, match="int64"):
        sl.grad(lambda i: (i * 1.0).sum())(i)
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    assert not (x.astype(np.int64)).requires_grad


def test_numpy_asarray_and_repr(backend):
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    if backend.name == "numpy":
        with pytest.raises(TypeError, match="drop its gradient"):  # as torch refuses it too
            np.asarray(x)
        with pytest.raises(TypeError, match="drop its gradient"):  # a list NumPy converts
            np.sum([x, x])
        a = np.asarray(x.detach())
        assert isinstance(a, np.ndarray) and a.dtype == np.float64
        np.testing.assert_array_equal(a, [1.0, 2.0])
        np.testing.assert_array_equal(np.asarray(x.detach(), dtype=np.float32),
                                      np.float32([1, 2]))
    else:
        with pytest.raises(TypeError, match=r"\.numpy\(\)"):
            np.asarray(x)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])


def test_ndarray_op_tensor_is_a_tensor(backend):
    a = backend.array([1.0, 2.0])
    x = backend.tensor([3.0, 4.0], requires_grad=True)
    for out in (a + x, a - x, a * x, a / x, a**x, a @ x, np.exp(x), np.float64(2.0) * x,
                a < x):
        assert isinstance(out, sl.Tensor), type(out)
    assert (a * x).requires_grad


def test_device_moves_are_differentiable(backend):
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    y = x.to("cpu")
    assert y.device == "cpu"
    (y * y).sum().backward()
    backend.check_device(x.grad)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_grad_of_an_integer_result_raises_as_in_jax():
    with pytest.raises(TypeError, match="needs a float"):
        sl.grad(lambda v: sl.arange(5).at[1].set(v).sum())(sl.tensor(2.0))


def test_vjp_outputs_and_aux_are_plain_values_when_nothing_differentiates_them():
    """vjp's primal output and grad's aux came back requiring grad when no input did (they
    hung on vjp's private copy of the input: np.asarray refused them, and a later backward
    reached that copy instead of anything of the caller's). Where an input requires grad
    they stay on the tape, and gradients flow through them."""
    x = sl.tensor([1.0, 2.0])
    out, back = sl.vjp(lambda x: x * 2.0, x)
    (_, aux), g = sl.value_and_grad(lambda x: (sl.sum(x * x), x * 3.0), has_aux=True)(x)
    g2, aux2 = sl.grad(lambda x: (sl.sum(x * x), x), has_aux=True)(x)
    for t in (out, aux, aux2):
        assert not t.requires_grad
        np.asarray(t)
    np.testing.assert_array_equal(back(sl.ones(2))[0].numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(g.numpy(), g2.numpy())
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    out, _ = sl.vjp(lambda x: x * w, x)
    _, aux = sl.grad(lambda x: (sl.sum(x * w), x * w), has_aux=True)(x)
    assert out.requires_grad and aux.requires_grad
    sl.sum(out + aux).backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2 * x.numpy())


def test_mixed_partials_come_back_as_plain_values_as_jax_returns_them():
    """grad(grad(f, 1), 2) and jacrev(grad(f, 1), 0): the inner grad's own input is a leaf
    that needs a gradient, but nothing can differentiate with respect to it once the inner
    call has returned, so the result is a plain value (JAX: an array), not one left on the
    tape; a closed-over tensor that requires grad still keeps it there."""
    def f(w, a, b):
        return sl.sum(sl.sin(w * a * b))

    w, a, b = np.ones(3), np.array(0.5), np.array(0.2)
    mixed = sl.grad(sl.grad(f, 1), 2)(w, a, b)
    assert not mixed.requires_grad
    np.testing.assert_allclose(np.asarray(mixed), 3 * (np.cos(0.1) - 0.1 * np.sin(0.1)),
                               rtol=1e-14)
    jac = sl.jacrev(sl.grad(f, 1), 0)(w, a, b)
    assert not jac.requires_grad and jac.shape == (3,)
    third = sl.grad(lambda b: sl.grad(sl.grad(f, 1), 2)(w, a, b))(b)
    np.testing.assert_allclose(np.asarray(third), -3 * (2 * 0.5 * np.sin(0.1)
                                                        + 0.05 * np.cos(0.1)), rtol=1e-13)
    W = sl.tensor(2.0, requires_grad=True)
    assert sl.grad(sl.grad(lambda x, y: sl.sum(W * x * y), 0), 1)(1.0, 3.0).requires_grad
