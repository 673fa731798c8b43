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


# --- lbfgs, scale_by_lbfgs, scale_by_zoom_linesearch, value_and_grad_from_state ---------------
def _rosenbrock(w):
    x = w["x"]
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum() + \
        0.5 * (w["y"] ** 2).sum()


R0 = {"x": np.array([-1.2, 1.0, 0.5, -0.3]), "y": np.array([[0.3, -1.0], [2.0, 0.7]])}

LINESEARCH = {
    "lbfgs": lambda lib: lib.lbfgs(),
    "lbfgs_memory_3_unscaled": lambda lib: lib.lbfgs(memory_size=3, scale_init_precond=False),
    "lbfgs_rate_no_linesearch": lambda lib: lib.lbfgs(learning_rate=1e-3, linesearch=None),
    "sgd_zoom_keep": lambda lib: lib.chain(lib.sgd(1.0), lib.scale_by_zoom_linesearch(15)),
    "sgd_zoom_options": lambda lib: lib.chain(lib.sgd(1e-3), lib.scale_by_zoom_linesearch(
        10, max_learning_rate=50.0, approx_dec_rtol=None, curv_rtol=float("inf"),
        increase_factor=3.0)),
    "sgd_backtracking": lambda lib: lib.chain(lib.sgd(1.0), lib.scale_by_backtracking_linesearch(
        15, store_grad=True, decrease_factor=0.5, increase_factor=2.0, max_learning_rate=3.0)),
    "sgd_backtracking_no_grad": lambda lib: lib.chain(
        lib.sgd(1e-2), lib.scale_by_backtracking_linesearch(8, atol=1e-3)),
    "lbfgs_backtracking": lambda lib: lib.lbfgs(linesearch=lib.scale_by_backtracking_linesearch(
        20, store_grad=True, rtol=1e-3)),
}
NO_VALUE_IN_STATE = {"lbfgs_rate_no_linesearch", "sgd_backtracking_no_grad"}


def _descend(lib, opt, w, steps, value_and_grad_from_state, apply, jit=None):
    state = opt.init(w)
    vg = value_and_grad_from_state(_rosenbrock)

    def one(w, state):
        value, grad = vg(w, state=state)
        updates, state = opt.update(grad, state, w, value=value, grad=grad,
                                    value_fn=_rosenbrock)
        return apply(w, updates), state

    one = jit(one) if jit else one
    path = []
    for _ in range(steps):
        w, state = one(w, state)
        path.append({k: np.asarray(v.numpy() if hasattr(v, "numpy") else v)
                     for k, v in w.items()})
    return path, state


def _optax_path(name, dtype, steps):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    with jax.enable_x64(dtype == np.float64):
        w = {k: jax.numpy.asarray(v.astype(dtype)) for k, v in R0.items()}
        opt = LINESEARCH[name](optax)
        vg_state = optax.value_and_grad_from_state
        if name in NO_VALUE_IN_STATE:  # no value or grad in its state: plain value_and_grad
            def vg_state(f):
                return lambda w, state: jax.value_and_grad(f)(w)
        path, state = _descend(jax.numpy, opt, w, steps, vg_state, optax.apply_updates)
        return path, [np.asarray(x) for x in jax.tree.leaves(state)]


def _ours(name, dtype, steps, jit=None):
    opt = LINESEARCH[name](sl.optim)
    vg_state = sl.optim.value_and_grad_from_state
    if name in NO_VALUE_IN_STATE:
        def vg_state(f):
            return lambda w, state: sl.value_and_grad(f)(w)
    w = {k: sl.tensor(v.astype(dtype)) for k, v in R0.items()}
    path, state = _descend(sl, opt, w, steps, vg_state, sl.optim.apply_updates, jit)
    return path, [np.asarray(sl.tensor(x).numpy()) for x in sl.pytree.leaves(state)]


@pytest.mark.parametrize("name", sorted(LINESEARCH))
def test_linesearch_and_lbfgs_follow_optax_in_float64(name):
    """25 steps on a 4-d Rosenbrock plus a quadratic: the same path as optax's to 1e-8 (the
    linesearch's branches taken alike at every step), and the same final state."""
    want, want_state = _optax_path(name, np.float64, 25)
    got, got_state = _ours(name, np.float64, 25)
    for step, (g, w) in enumerate(zip(got, want)):
        for k in R0:
            assert g[k].dtype == np.float64
            np.testing.assert_allclose(g[k], w[k], rtol=1e-8, atol=1e-10,
                                       err_msg=f"step {step}, {k}")
    assert len(got_state) == len(want_state)
    for a, b in zip(got_state, want_state):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", ["lbfgs", "sgd_zoom_keep", "lbfgs_backtracking"])
def test_linesearch_and_lbfgs_follow_optax_in_float32_and_under_jit(name):
    """float32: 8 steps, within float32's rounding of optax's path (NumPy and XLA sum the
    objective in other orders, a few ulps at the start, amplified along a Rosenbrock valley);
    under jit the loop and the branches trace once and give the eager path."""
    want, _ = _optax_path(name, np.float32, 8)
    got, _ = _ours(name, np.float32, 8)
    for g, w in zip(got, want):
        for k in R0:
            assert g[k].dtype == np.float32
            np.testing.assert_allclose(g[k], w[k], rtol=0, atol=1e-3)
    eager, _ = _ours(name, np.float64, 10)
    jitted, _ = _ours(name, np.float64, 10, jit=sl.jit)
    for e, j in zip(eager, jitted):
        for k in R0:
            np.testing.assert_allclose(j[k], e[k], rtol=1e-12, atol=1e-14)


def test_value_and_grad_from_state_reuses_the_linesearchs_values():
    calls = []

    def f(w, scale=1.0):
        calls.append(1)
        return scale * ((w - 3.0) ** 2).sum()

    opt = sl.optim.lbfgs()
    w = sl.tensor([1.0, 2.0])
    state = opt.init(w)
    vg = sl.optim.value_and_grad_from_state(f)
    value, grad = vg(w, state=state, scale=2.0)  # the state holds no finite value yet
    assert len(calls) == 1 and float(value) == 10.0
    updates, state = opt.update(grad, state, w, value=value, grad=grad, value_fn=f, scale=2.0)
    w = sl.optim.apply_updates(w, updates)
    before = len(calls)
    value, grad = vg(w, state=state, scale=2.0)  # the linesearch's, at the new parameters
    assert len(calls) == before
    np.testing.assert_allclose(float(value), float(f(w, 2.0)))
    with pytest.raises(ValueError, match="no value or no gradient in the state"):
        sl.optim.value_and_grad_from_state(f)(w, state=sl.optim.adam(0.1).init(w))


def test_linesearch_errors_name_what_is_missing():
    f = lambda w: (w * w).sum()  # noqa: E731
    opt = sl.optim.lbfgs()
    w = sl.tensor([1.0, 2.0])
    value, grad = sl.value_and_grad(f)(w)
    with pytest.raises(TypeError, match="needs value_fn= in update"):
        opt.update(grad, opt.init(w), w, value=value, grad=grad)
    with pytest.raises(TypeError, match=r"not arguments of value_fn: \['data'\]"):
        opt.update(grad, opt.init(w), w, value=value, grad=grad, value_fn=f, data=1.0)
    with pytest.raises(ValueError, match="memory_size must be an int >= 1"):
        sl.optim.scale_by_lbfgs(0)
    with pytest.raises(ValueError, match="initial_guess_strategy"):
        sl.optim.scale_by_zoom_linesearch(5, initial_guess_strategy="best")


def test_the_gradient_through_a_zoom_is_forward_modes_and_finite_differences():
    """Reverse mode through an update whose linesearch zooms (the cubic's first reference
    point is its low end, a zero radical): forward mode's and central differences' numbers,
    not NaN."""
    def f(w):
        return ((w - sl.tensor([1.0, -2.0, 0.5])) ** 4).sum() + (w * w).sum()

    def one_step(w):
        opt = sl.optim.chain(sl.optim.sgd(0.3), sl.optim.scale_by_zoom_linesearch(10))
        value, grad = sl.value_and_grad(f)(w)
        updates, state = opt.update(grad, opt.init(w), w, value=value, grad=grad, value_fn=f)
        assert int(state[1].info.num_linesearch_steps) >= 2 or state[1].info \
            .num_linesearch_steps._trace is not None
        return sl.optim.apply_updates(w, updates).sum()

    w = sl.tensor([0.3, 0.7, -1.1])
    reverse = sl.grad(one_step)(w).numpy()
    forward = sl.jacfwd(one_step)(w).numpy()
    eps, fd = 1e-6, []
    for i in range(3):
        e = np.zeros(3)
        e[i] = eps
        fd.append((float(one_step(sl.tensor(w.numpy() + e)))
                   - float(one_step(sl.tensor(w.numpy() - e)))) / (2 * eps))
    np.testing.assert_allclose(reverse, forward, rtol=1e-10)
    np.testing.assert_allclose(reverse, fd, rtol=1e-6)


def test_linesearch_edges_as_optax():
    """An objective infinite outside its domain (no warning: the interpolations do no inf
    arithmetic), a zero gradient for polyak, max_linesearch_steps=0 (one step, as optax),
    and value_fn's keyword arguments by name only (a **kwargs catch-all is refused, as
    optax refuses it)."""
    import warnings

    def f(w):
        inside = w.sum() < 1.0
        return sl.where(inside, ((w - 0.4) ** 2).sum(), np.inf)

    w = sl.tensor([0.1, 0.2, 0.3])
    value, grad = sl.value_and_grad(f)(w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for steps in (0, 15):
            opt = sl.optim.chain(sl.optim.sgd(1.0), sl.optim.scale_by_zoom_linesearch(steps))
            updates, _ = opt.update(grad, opt.init(w), w, value=value, grad=grad, value_fn=f)
            assert np.isfinite(updates.numpy()).all()
        polyak = sl.optim.polyak_sgd()
        zero, _ = polyak.update(sl.zeros(3), polyak.init(w), w, value=1.0)
        np.testing.assert_array_equal(zero.numpy(), 0.0)

    def g(w, **data):
        return (w * w).sum()

    opt = sl.optim.lbfgs()
    with pytest.raises(TypeError, match=r"not arguments of value_fn: \['scale'\]"):
        opt.update(grad, opt.init(w), w, value=value, grad=grad, value_fn=g, scale=2.0)


def test_lbfgs_under_inject_hyperparams_and_adafactors_momentum_dtype():
    jnp = pytest.importorskip("jax.numpy")
    opt = sl.optim.inject_hyperparams(sl.optim.lbfgs)(learning_rate=0.5)
    w = sl.tensor([1.0, 2.0])
    state = opt.init(w)
    updates, state = opt.update(sl.tensor([0.5, 1.0]), state, w, value=1.0,
                                grad=sl.tensor([0.5, 1.0]), value_fn=lambda w: (w * w).sum())
    assert updates.shape == (2,)
    for dtype in (np.float32, "float32", jnp.float32):
        sl.optim.adafactor(momentum=0.9, dtype_momentum=dtype).init(sl.ones(2, dtype="float32"))
    masked = sl.optim.masked(sl.optim.lbfgs(), {"a": True, "b": False})
    params = {"a": sl.ones(2), "b": sl.ones(1)}
    grads = {"a": sl.ones(2), "b": sl.ones(1)}
    with pytest.raises(TypeError, match="grad= must be shaped like the gradients this stage"):
        masked.update(grads, masked.init(params), params, value=1.0, grad=grads,
                      value_fn=lambda p: (p["a"] ** 2).sum())
