"""jax's top-level runtime names a port calls (scanlib/runtime.py): config, Array,
block_until_ready, device_put/device_get, devices, eval_shape, make_jaxpr, disable_jit,
named_scope/named_call, clear_caches, enable_x64, jacobian."""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp


def test_config_accepts_what_scanlib_is_and_refuses_what_it_is_not():
    sl.config.update("jax_enable_x64", True)
    sl.config.update("jax_platform_name", "cpu")
    sl.config.update("jax_default_matmul_precision", "highest")  # no effect on NumPy
    assert sl.config.jax_enable_x64 is True and sl.config.read("jax_enable_x64") is True
    with pytest.raises(ValueError, match="float64 by default.*dtype=jnp.float32"):
        sl.config.update("jax_enable_x64", False)
    with pytest.raises(ValueError, match="does not check results for NaN"):
        sl.config.update("jax_debug_nans", True)
    with pytest.raises(AttributeError, match="no such setting"):
        sl.config.update("jax_no_such_flag", 1)
    with sl.enable_x64(True):
        pass
    with pytest.raises(ValueError):
        with sl.enable_x64(False):
            pass


def test_array_is_the_tensor_type_and_block_until_ready_returns_its_argument():
    x = jnp.ones(3)
    assert isinstance(x, sl.Array) and sl.Array is sl.Tensor
    tree = {"a": x, "b": [np.zeros(2), 3.0]}
    assert sl.block_until_ready(tree) is tree
    assert x.block_until_ready() is x


def test_device_put_and_device_get_keep_the_tree_and_the_gradient():
    out = sl.device_put({"a": np.ones(2), "b": (np.float32(2.0),)})
    assert type(out["a"]) is sl.Tensor and out["b"][0].dtype == np.float32
    host = sl.device_get(out)
    assert type(host["a"]) is np.ndarray and host["b"][0] == 2.0
    g = sl.grad(lambda x: sl.sum(sl.device_put(x, "cpu") ** 2))(sl.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])
    assert sl.default_backend() in ("cpu", "gpu") and "cpu" in sl.devices()
    assert sl.devices("cpu") == ["cpu"]


def test_eval_shape_traces_without_computing():
    calls = []

    def f(x, y):
        calls.append(1)
        return {"h": sl.tanh(x @ y), "n": sl.sum(x)}

    out = sl.eval_shape(f, sl.ShapeDtypeStruct((2, 3), np.float32), np.ones((3, 4)))
    assert out["h"] == sl.ShapeDtypeStruct((2, 4), np.float64)
    assert out["n"].shape == () and out["n"].dtype == np.float32 and out["n"].ndim == 0
    assert len(calls) == 1


def test_make_jaxpr_prints_the_graph():
    text = str(sl.make_jaxpr(lambda x: sl.tanh(x) * 2)(np.zeros(3)))
    assert "tanh(x)" in text and "mul" in text


def test_disable_jit_runs_the_function_itself():
    seen = []

    @sl.jit
    def f(x):
        seen.append(type(x))
        return x * 2

    with sl.disable_jit():
        np.testing.assert_array_equal(f(np.ones(2)).numpy(), [2.0, 2.0])
        f(np.ones(2))
    assert f.cache_info().misses == 0 and len(seen) == 2
    f(np.ones(2))
    assert f.cache_info().misses == 1


def test_named_scope_named_call_jacobian_and_clear_caches():
    with sl.named_scope("layer"):
        y = sl.named_call(lambda x: x + 1, name="inc")(sl.tensor(1.0))
    assert y.item() == 2.0
    with pytest.raises(TypeError):
        with sl.named_scope(3):
            pass
    J = sl.jacobian(lambda x: x ** 2)(sl.tensor([1.0, 3.0]))
    np.testing.assert_array_equal(J.numpy(), np.diag([2.0, 6.0]))
    sl.scan(lambda c, x: (c + x, c), 0.0, np.ones(3))
    sl.clear_caches()
    _, ys = sl.scan(lambda c, x: (c + x, c), 0.0, np.ones(3))
    np.testing.assert_array_equal(ys.numpy(), [0.0, 1.0, 2.0])


def test_tensor_of_a_tensor_that_requires_grad_warns_and_array_differentiates():
    x = sl.tensor([1.0, 2.0])
    with pytest.warns(UserWarning, match=r"scanlib\.array\(x\)"):
        g = sl.grad(lambda x: sl.sum(sl.tensor(x[0]) * x))(x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0])  # torch's meaning: a copy
    g = sl.grad(lambda x: sl.sum(jnp.array(x[0]) * x))(x)
    np.testing.assert_array_equal(g.numpy(), [4.0, 1.0])  # JAX's
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sl.tensor(x)  # no gradient wanted: no warning
        sl.tensor(np.ones(2))
        sl.tensor(sl.tensor(1.0, requires_grad=True).detach())


def test_jit_accepts_jaxs_hints_and_they_change_nothing():
    x = np.ones(3)
    f = sl.jit(lambda a, b: a * b, donate_argnums=(0,), keep_unused=True, inline=True)
    np.testing.assert_array_equal(f(x, 2.0).numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(x, 1.0)  # the donated buffer is untouched and still valid
    g = sl.jit(donate_argnames="a")(lambda a: a + 1)
    np.testing.assert_array_equal(g(x).numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(TypeError, match="donate_argnums"):
        sl.jit(lambda a: a, donate_argnums="a")
    with pytest.raises(TypeError, match="donate_argnames"):
        sl.jit(lambda a: a, donate_argnames=[0])


def test_device_and_process_counts_are_a_single_hosts():
    assert sl.device_count("cpu") == sl.local_device_count("cpu") == 1
    assert sl.device_count() == len(sl.devices(sl.default_backend()))
    assert (sl.process_count(), sl.process_index()) == (1, 0)
