"""scanlib.experimental.ode.odeint, jax.experimental.ode's solver: values and adjoint-method
gradients against closed forms, against the same program in JAX where it is installed, for
pytree states, closed-over parameters, vmap and jit."""

import numpy as np
import pytest

import scanlib as sl
from scanlib.experimental.ode import odeint

TS = np.array([0.0, 0.5, 1.0, 2.0])


def decay(y, t, k):
    return -k * y


def test_exponential_decay_and_its_gradients_are_the_closed_forms():
    k, y0 = sl.tensor(0.7), sl.tensor([1.0, 2.0])
    ys = odeint(decay, y0, sl.tensor(TS), k, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ys.numpy(), np.exp(-0.7 * TS)[:, None] * [1.0, 2.0], rtol=1e-9)
    # L = sum_i y(t_i)[0], y(t) = y0 e^{-k (t - t_0)}: dL/dk = sum -t e^{-kt}, dL/dy0[0] =
    # sum e^{-kt}, dL/dt_i = -k e^{-k t_i}, and dL/dt_0 = k sum_{i > 0} e^{-k t_i}
    loss = lambda k, y0, ts: sl.numpy.sum(odeint(decay, y0, ts, k, rtol=1e-10, atol=1e-10)[:, 0])  # noqa: E731
    gk, gy0, gts = sl.grad(loss, (0, 1, 2))(k, y0, sl.tensor(TS))
    e = np.exp(-0.7 * TS)
    np.testing.assert_allclose(gk.numpy(), np.sum(-TS * e), rtol=1e-8)
    np.testing.assert_allclose(gy0.numpy(), [e.sum(), 0.0], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(gts.numpy(), np.r_[0.7 * e[1:].sum(), -0.7 * e[1:]], rtol=1e-8)


def test_a_pytree_state_a_closure_vmap_and_jit():
    W = sl.tensor([[0.0, 1.0], [-1.0, 0.0]])  # a rotation: y(t) = R(t) y0

    def loss(W, y0):
        ys = odeint(lambda s, t: {"a": W[0] @ s["v"] + 0.0 * s["a"], "v": W @ s["v"]},
                    {"a": sl.tensor(0.0), "v": y0}, sl.tensor(TS), rtol=1e-10, atol=1e-10)
        return sl.numpy.sum(ys["v"][-1] ** 2) + sl.numpy.sum(ys["a"])

    y0 = sl.tensor([1.0, 0.0])
    ys = odeint(lambda y, t: W @ y, y0, sl.tensor(TS), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ys.numpy(), np.stack([np.cos(TS), -np.sin(TS)], 1), atol=1e-9)
    g = sl.grad(loss, (0, 1))(W, y0)
    np.testing.assert_allclose(sl.jit(sl.grad(loss, (0, 1)))(W, y0)[0].numpy(), g[0].numpy(),
                               rtol=1e-12)
    batched = sl.vmap(lambda y0: odeint(decay, y0, sl.tensor(TS), sl.tensor(0.5)))(
        sl.tensor([[1.0], [3.0]]))
    np.testing.assert_allclose(batched.numpy()[:, :, 0],
                               np.array([[1.0], [3.0]]) * np.exp(-0.5 * TS), rtol=1e-7)


def test_args_must_be_arrays():
    with pytest.raises(TypeError, match=r"args\[0\] holds str"):
        odeint(lambda y, t, s: y, sl.tensor([1.0]), sl.tensor(TS), "fast")


def test_against_jax():
    jax = pytest.importorskip("jax")
    from jax.experimental.ode import odeint as jax_odeint

    def program(lib, solve, W, b, params, y0):
        np_ = lib.numpy

        def lotka_volterra(s, t, p):
            return {"prey": p[0] * s["prey"] - p[1] * s["prey"] * s["pred"],
                    "pred": -p[2] * s["pred"] + p[3] * s["prey"] * s["pred"]}

        ys = solve(lotka_volterra, y0, np_.asarray(TS), params, rtol=1e-10, atol=1e-10)
        zs = solve(lambda y, t: np_.tanh(W @ y + b * np_.cos(t)), np_.ones(3), np_.asarray(TS),
                   rtol=1e-10, atol=1e-10)
        return (np_.sum(ys["prey"] ** 2) + np_.sum(ys["pred"] * np_.asarray(TS))
                + np_.sum(zs[-1] ** 2))

    rng = np.random.default_rng(0)
    inputs = (0.5 * rng.standard_normal((3, 3)), np.full(3, 0.1), np.array([1.1, 0.4, 0.4, 0.1]),
              {"prey": np.array(10.0), "pred": np.array(5.0)})
    with jax.enable_x64(True):
        want = jax.value_and_grad(lambda *a: program(jax, jax_odeint, *a), (0, 1, 2, 3))(*inputs)
        want = jax.tree_util.tree_leaves(want)
    got = sl.tree_util.tree_leaves(sl.value_and_grad(
        lambda *a: program(sl, odeint, *a), (0, 1, 2, 3))(*inputs))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-11, atol=1e-12)
