"""NaN and infinity at the edges, as JAX gives them: a NaN is never hidden by a kink (relu,
maximum, clip keep it) and its gradient does not land on the other operand."""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl

EDGES = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -1.0, 7.0])


def test_relu_keeps_nan_with_a_zero_gradient():
    x = sl.tensor(EDGES)
    np.testing.assert_array_equal(sl.relu(x).numpy(), [np.nan, np.inf, 0, 0, 1, 0, 7])
    g = sl.grad(lambda x: sl.sum(sl.relu(x)))(x)
    np.testing.assert_array_equal(g.numpy(), [0, 1, 0, 0, 1, 0, 1])
    assert sl.relu(sl.arange(-2, 3)).dtype == np.int64


def test_a_nan_extreme_makes_its_slices_gradient_nan():
    g = sl.grad(sl.max)(sl.tensor([1.0, np.nan, 3.0, 2.0]))
    assert np.isnan(g.numpy()).all()  # JAX's: not a silent zero
    g = sl.grad(lambda x: sl.sum(sl.min(x, axis=1)))(sl.tensor([[1.0, np.nan], [3.0, 2.0]]))
    np.testing.assert_array_equal(g.numpy(), [[np.nan, np.nan], [0.0, 1.0]])
    g = sl.grad(sl.max)(sl.tensor([1.0, 3.0, 3.0]))  # ties still share
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.5, 0.5])


def test_abs_has_jaxs_subgradient_at_zero():
    g = sl.grad(lambda x: sl.sum(sl.abs(x)))(sl.tensor([0.0, -0.0, -2.0, 3.0]))
    np.testing.assert_array_equal(g.numpy(), [1, 1, -1, 1])
    _, t = sl.jvp(sl.abs, (sl.tensor([0.0, -2.0]),), (sl.tensor([5.0, 5.0]),))
    np.testing.assert_array_equal(t.numpy(), [5, -5])


def test_maximum_and_minimum_give_a_nan_result_no_gradient():
    x = sl.tensor([np.nan, 1.0, 0.5, 2.0])
    y = sl.tensor([0.5, np.nan, 0.5, 1.0])
    for f, win_x in ((sl.maximum, [0, 0, 0.5, 1]), (sl.minimum, [0, 0, 0.5, 0])):
        gx, gy = sl.grad(lambda a, b, f=f: sl.sum(f(a, b)), argnums=(0, 1))(x, y)
        np.testing.assert_array_equal(gx.numpy(), win_x)
        np.testing.assert_array_equal(gy.numpy(), [0, 0, 0.5, 1 - win_x[3]])
        _, t = sl.jvp(f, (x, y), (sl.ones(4), sl.full((4,), 10.0)))
        np.testing.assert_array_equal(t.numpy(), [0, 0, 5.5, 10 - 9 * win_x[3]])


FUNCTIONS = {
    "relu": (lambda m: m.nn.relu, lambda m: m.nn.relu),
    "relu6": (lambda m: m.nn.relu6, lambda m: m.nn.relu6),
    "leaky_relu": (lambda m: m.nn.leaky_relu, lambda m: m.nn.leaky_relu),
    "elu": (lambda m: m.nn.elu, lambda m: m.nn.elu),
    "softplus": (lambda m: m.nn.softplus, lambda m: m.nn.softplus),
    "sigmoid": (lambda m: m.nn.sigmoid, lambda m: m.nn.sigmoid),
    "maximum": (lambda m: lambda x: m.numpy.maximum(x, 0.5),
                lambda m: lambda x: m.numpy.maximum(x, 0.5)),
    "clip": (lambda m: lambda x: m.numpy.clip(x, -0.5, 2.0),
             lambda m: lambda x: m.numpy.clip(x, -0.5, 2.0)),
    "abs": (lambda m: m.numpy.abs, lambda m: m.numpy.abs),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_values_and_gradients_at_the_edges_are_jaxs(name):
    jax = pytest.importorskip("jax")
    ours, theirs = FUNCTIONS[name]
    f = ours(sl)
    value = f(sl.tensor(EDGES)).numpy()
    with np.errstate(all="ignore"):
        grad = np.array([sl.grad(f)(sl.tensor(v)).item() for v in EDGES])
    with jax.enable_x64(True):
        g = theirs(jax)
        want_value = np.asarray(g(jax.numpy.asarray(EDGES)))
        want_grad = np.array([float(jax.grad(g)(v)) for v in EDGES])
    # NaN and infinities where JAX has them; finite values to rounding (XLA's exp and log1p
    # are not NumPy's)
    np.testing.assert_allclose(value, want_value, rtol=1e-14, atol=0)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-14, atol=0)
