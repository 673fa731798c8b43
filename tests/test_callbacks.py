"""pure_callback, as jax.pure_callback: the callback's values eagerly, under jit, in scan and
while bodies, under vmap by each vmap_method; no derivative unless a custom rule gives one;
clear errors for a result that does not match what was declared."""

import numpy as np
import pytest

import scanlib as sl


def cube(x):
    return sl.pure_callback(lambda a: np.asarray(a) ** 3, sl.ShapeDtypeStruct(x.shape, x.dtype),
                            x, vmap_method="sequential")


X = np.array([0.5, -1.0, 2.0])


def test_values_eagerly_under_jit_and_in_loop_bodies():
    x = sl.tensor(X)
    np.testing.assert_array_equal(cube(x).numpy(), X ** 3)
    np.testing.assert_array_equal(sl.jit(cube)(x).numpy(), X ** 3)
    summed = sl.scan(lambda c, xt: (c + cube(xt), None), sl.tensor(0.0), x)[0]
    np.testing.assert_allclose(summed.numpy(), np.sum(X ** 3))
    found = sl.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, cube(c[1]) * 0.5),
                          (0, sl.tensor(1.5)))[1]
    np.testing.assert_allclose(found.numpy(), (((1.5 ** 3 * 0.5) ** 3) * 0.5) ** 3 * 0.5)


def test_a_pytree_result_and_keyword_arguments():
    def stats(x, *, ddof):
        return {"mean": np.mean(x), "var": np.var(x, ddof=ddof)}

    scalar = sl.ShapeDtypeStruct((), np.float64)
    shape = {"mean": scalar, "var": scalar}
    got = sl.jit(lambda x: sl.pure_callback(stats, shape, x, ddof=1))(sl.tensor(X))
    np.testing.assert_allclose(got["var"].numpy(), np.var(X, ddof=1))


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_by_each_method(method):
    calls = []

    def f(a, w):
        calls.append(np.shape(a))
        w = np.reshape(w, np.shape(w) + (1,) * (np.ndim(a) - np.ndim(w)))  # w: (), (1,), (3,)
        return np.asarray(a * w + np.sin(a))

    def g(x, w):
        return sl.pure_callback(f, sl.ShapeDtypeStruct(x.shape, x.dtype), x, w,
                                vmap_method=method)

    xs, w = np.arange(6.0).reshape(3, 2), sl.tensor(2.0)
    got = sl.vmap(g, in_axes=(0, None))(sl.tensor(xs), w)
    np.testing.assert_allclose(got.numpy(), xs * 2.0 + np.sin(xs))
    assert len(calls) == (3 if method == "sequential" else 1)
    with pytest.raises(NotImplementedError, match="needs vmap_method="):
        sl.vmap(lambda x: sl.pure_callback(np.sin, sl.ShapeDtypeStruct((2,), np.float64), x))(
            sl.tensor(xs))


def test_no_derivative_unless_a_custom_rule_gives_one():
    x = sl.tensor(X)
    with pytest.raises(TypeError, match="has no derivative"):
        sl.grad(lambda x: sl.sum(cube(x)))(x)
    with pytest.raises(TypeError, match="has no derivative"):
        sl.jvp(cube, (x,), (x,))
    np.testing.assert_allclose(sl.grad(lambda x: sl.sum(x * sl.stop_gradient(cube(x))))(x).numpy(),
                               X ** 3)

    @sl.custom_jvp
    def c(x):
        return cube(x)

    c.defjvp(lambda p, t: (cube(p[0]), 3.0 * p[0] ** 2 * t[0]))
    loss = lambda x: sl.scan(lambda h, xt: (h + c(xt * h), None), sl.tensor(1.0), x)[0]  # noqa: E731
    h, grad = sl.value_and_grad(loss)(x)
    want = sl.value_and_grad(lambda x: sl.scan(lambda h, xt: (h + (xt * h) ** 3, None),
                                               sl.tensor(1.0), x)[0])(x)
    np.testing.assert_allclose(h.numpy(), want[0].numpy())
    np.testing.assert_allclose(grad.numpy(), want[1].numpy(), rtol=1e-12)
    np.testing.assert_allclose(sl.jit(sl.grad(loss))(x).numpy(), want[1].numpy(), rtol=1e-12)


def test_a_result_unlike_the_declared_one_raises():
    with pytest.raises(TypeError, match=r"returned leaf 0 as float32\[3\], but .* float64\[3\]"):
        sl.pure_callback(lambda a: a.astype(np.float32), sl.ShapeDtypeStruct((3,), np.float64),
                         sl.tensor(X))
    with pytest.raises(TypeError, match="each leaf must have a shape and a dtype"):
        sl.pure_callback(np.sin, 3.0, sl.tensor(X))
    with pytest.raises(TypeError, match="returned"):
        sl.pure_callback(lambda a: (a, a), sl.ShapeDtypeStruct((3,), np.float64), sl.tensor(X))


def test_against_jax():
    jax = pytest.importorskip("jax")

    def program(lib, x):
        def f(a):
            return np.asarray(np.cos(a) * 2.0)

        y = lib.pure_callback(f, lib.ShapeDtypeStruct(x.shape, x.dtype), x,
                              vmap_method="sequential")
        return lib.vmap(lambda r: lib.pure_callback(
            f, lib.ShapeDtypeStruct(r.shape, r.dtype), r, vmap_method="expand_dims"))(y[None])

    with jax.enable_x64(True):
        want = jax.jit(lambda x: program(jax, x))(X)
    np.testing.assert_array_equal(sl.jit(lambda x: program(sl, x))(sl.tensor(X)).numpy(),
                                  np.asarray(want))
