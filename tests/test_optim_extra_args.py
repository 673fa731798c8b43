"""optax's extra arguments (`update(grads, state, params, value=loss, ...)`): every stage takes
them, the ones that read them (scale_by_polyak, the linesearches, lbfgs) follow optax's
trajectories, and a missing one is named."""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl


def _shifted_quadratic(lib):
    def f(w):
        return ((w["a"] - 3.0) ** 2).sum() + (0.5 * w["b"] * w["b"]).sum() + 0.5
    return f


def _run(lib, np_or_jnp, value_and_grad, opt, w0, steps, *, apply):
    w = {k: np_or_jnp(v) for k, v in w0.items()}
    state = opt.init(w)
    f = _shifted_quadratic(lib)
    for _ in range(steps):
        value, g = value_and_grad(f)(w)
        updates, state = opt.update(g, state, w, value=value)
        w = apply(w, updates)
    return w


W0 = {"a": np.array([1.0, -2.0, 0.5]), "b": np.array([[0.3, -1.2], [2.0, 0.1]])}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", ["sps", "sps+"])
def test_polyak_sgd_follows_optax(dtype, variant):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    w0 = {k: v.astype(dtype) for k, v in W0.items()}
    kw = dict(max_learning_rate=0.3, scaling=0.9, f_min=1.0, eps=1e-3, variant=variant)
    with jax.enable_x64(dtype == np.float64):
        want = _run(jax.numpy, jax.numpy.asarray, jax.value_and_grad, optax.polyak_sgd(**kw),
                    w0, 8, apply=optax.apply_updates)
        want = {k: np.asarray(v) for k, v in want.items()}
    got = _run(sl, sl.tensor, sl.value_and_grad, sl.optim.polyak_sgd(**kw), w0, 8,
               apply=sl.optim.apply_updates)
    for k in w0:
        assert got[k].dtype == dtype
        np.testing.assert_allclose(got[k].numpy(), want[k], rtol=8 * np.finfo(dtype).eps)


def test_every_stage_takes_extra_args_and_a_missing_one_is_named():
    w = sl.tensor([1.0, 2.0])
    adam = sl.optim.adam(1e-2)
    plain, _ = adam.update(sl.tensor([1.0, 1.0]), adam.init(w), w)
    extra, _ = adam.update(sl.tensor([1.0, 1.0]), adam.init(w), w, value=3.0, grad=None)
    np.testing.assert_array_equal(plain.numpy(), extra.numpy())
    masked = sl.optim.masked(sl.optim.polyak_sgd(), {"w": True, "v": False})
    params = {"w": w, "v": sl.tensor([0.0])}
    grads = {"w": sl.tensor([1.0, 1.0]), "v": sl.tensor([1.0])}
    masked.update(grads, masked.init(params), params, value=1.0)  # reaches the inner stage
    opt = sl.optim.polyak_sgd()
    with pytest.raises(TypeError, match=r"scale_by_polyak needs value= in update"):
        opt.update(sl.tensor([1.0, 1.0]), opt.init(w), w)
