"""optax's schedules and losses in scanlib.optim: against optax (with JAX's x64 on, so both
compute in float64) over 40 steps and random inputs, as learning rates of scanlib's
optimisers (Python-int steps and traced ones inside a scan body agree), and the losses'
values, dtypes and gradients against finite differences and jax.grad.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib import optim
from scanlib.testing import check_grads

STEPS = 40


def _schedules(lib):
    """The same schedules built by optax or by scanlib.optim: name -> schedule."""
    return {
        "constant": lib.constant_schedule(0.3),
        "linear": lib.linear_schedule(1.0, 0.1, transition_steps=25, transition_begin=5),
        "polynomial": lib.polynomial_schedule(0.5, 0.01, power=2.5, transition_steps=30),
        "piecewise": lib.piecewise_constant_schedule(1.0, {10: 0.5, 20: 0.1, 20.5: 2.0}),
        "exponential": lib.exponential_decay(0.1, transition_steps=7, decay_rate=0.8,
                                             transition_begin=3),
        "exponential_staircase_end": lib.exponential_decay(
            0.1, transition_steps=4, decay_rate=0.5, staircase=True, end_value=0.01),
        "exponential_growing": lib.exponential_decay(0.1, 5, 1.5, end_value=0.4),
        "cosine": lib.cosine_decay_schedule(0.2, decay_steps=30, alpha=0.1),
        "cosine_exponent": lib.cosine_decay_schedule(0.2, decay_steps=30, exponent=2.0),
        "warmup_cosine": lib.warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=8,
                                                          decay_steps=35, end_value=0.05),
        "join": lib.join_schedules([lib.constant_schedule(0.5),
                                    lib.linear_schedule(0.5, 0.0, 10),
                                    lib.cosine_decay_schedule(0.1, 5)], [12, 25]),
    }


NAMES = list(_schedules(optim))


@pytest.mark.parametrize("name", NAMES)
def test_schedule_matches_optax_over_40_steps(name):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    ours = _schedules(optim)[name]
    with jax.enable_x64(True):
        theirs = _schedules(optax)[name]
        want = [float(theirs(jax.numpy.asarray(t))) for t in range(STEPS)]
    got = [ours(t) for t in range(STEPS)]
    assert all(isinstance(v, float) for v in got)  # a Python int step gives a Python float
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-17)


@pytest.mark.parametrize("name", NAMES)
def test_schedule_of_a_traced_step_equals_the_python_step(name):
    """Inside a scan body the step is a 0-d float64 Tensor: the same values as Python ints."""
    schedule = _schedules(optim)[name]
    _, ys = sl.scan(lambda c, t: (c, sl.tensor(1.0) * schedule(t)), 0.0,
                    sl.arange(STEPS).astype("float64"))
    np.testing.assert_allclose(ys.numpy(), [schedule(t) for t in range(STEPS)], rtol=1e-15,
                               atol=1e-18)


@pytest.mark.parametrize("name", ["exponential", "cosine", "warmup_cosine", "piecewise"])
def test_schedule_as_adams_learning_rate_matches_optax(name):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    p0 = {"W": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    grads = [{k: rng.standard_normal(v.shape) for k, v in p0.items()} for _ in range(STEPS)]
    with jax.enable_x64(True):
        # both schedules see the int32 count, whose true division and float functions give
        # float32 even with x64 on
        opt = optax.adam(_schedules(optax)[name])
        q = jax.tree.map(jax.numpy.asarray, p0)
        state = opt.init(q)
        for g in grads:
            updates, state = opt.update(jax.tree.map(jax.numpy.asarray, g), state, q)
            q = optax.apply_updates(q, updates)
        q = jax.tree.map(np.asarray, q)
    opt = optim.adam(_schedules(optim)[name])
    p = {k: sl.tensor(v) for k, v in p0.items()}
    state = opt.init(p)
    for g in grads:
        updates, state = opt.update(g, state, p)
        p = optim.apply_updates(p, updates)
    for k in p0:
        np.testing.assert_allclose(p[k].numpy(), q[k], rtol=1e-12, atol=1e-14)

    # the same 40 steps with the update inside a scan body, where the count is traced
    def body(carry, g):
        p, state = carry
        return opt.step(g, state, p), None

    stacked = {k: sl.tensor(np.stack([g[k] for g in grads])) for k in p0}
    (p_scan, _), _ = sl.scan(body, ({k: sl.tensor(v) for k, v in p0.items()},
                                    opt.init(p)), stacked)
    for k in p0:
        np.testing.assert_allclose(p_scan[k].numpy(), p[k].numpy(), rtol=1e-13, atol=1e-15)


def test_schedule_errors_are_optax_s():
    with pytest.raises(ValueError, match="decay_steps must be positive"):
        optim.cosine_decay_schedule(1.0, 0)
    with pytest.raises(ValueError, match="non-negative"):
        optim.piecewise_constant_schedule(1.0, {5: -0.1})
    with pytest.raises(ValueError, match="2 schedules need 1 boundaries"):
        optim.join_schedules([optim.constant_schedule(1.0)] * 2, [])
    # degenerate transitions hold init_value, as optax's
    assert optim.linear_schedule(0.5, 0.0, transition_steps=0)(10) == 0.5
    assert optim.exponential_decay(0.5, 0, 0.1)(10) == 0.5
    assert optim.exponential_decay(0.5, 10, 0.0)(10) == 0.5


# --- losses ----------------------------------------------------------------------------------
def _loss_inputs(rng, dtype):
    logits = (3 * rng.standard_normal((5, 4))).astype(dtype)
    probs = rng.dirichlet(np.ones(4), 5).astype(dtype)
    labels = rng.integers(0, 4, 5)
    binary = rng.integers(0, 2, (5, 4)).astype(dtype)
    preds = (2 * rng.standard_normal((5, 4))).astype(dtype)
    targets = rng.standard_normal((5, 4)).astype(dtype)
    return logits, probs, labels, binary, preds, targets


def _losses(lib, logits, probs, labels, binary, preds, targets):
    return {
        "softmax_cross_entropy": lib.softmax_cross_entropy(logits, probs),
        "softmax_cross_entropy_axis0": lib.softmax_cross_entropy(logits, probs, axis=0),
        "integer_labels": lib.softmax_cross_entropy_with_integer_labels(logits, labels),
        "integer_labels_axis0": lib.softmax_cross_entropy_with_integer_labels(
            logits, labels[:4], axis=0),
        "sigmoid_bce": lib.sigmoid_binary_cross_entropy(logits, binary),
        "squared_error": lib.squared_error(preds, targets),
        "l2_loss": lib.l2_loss(preds, targets),
        "l2_loss_no_targets": lib.l2_loss(preds),
        "huber": lib.huber_loss(preds, targets),
        "huber_delta": lib.huber_loss(preds, targets, delta=0.3),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_losses_match_optax_on_random_inputs(dtype):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    for seed in range(5):
        inputs = _loss_inputs(np.random.default_rng(seed), dtype)
        with jax.enable_x64(dtype == np.float64):
            want = _losses(optax, *[jax.numpy.asarray(v) for v in inputs])
            want = {k: np.asarray(v) for k, v in want.items()}
        got = _losses(optim, *[sl.tensor(v) for v in inputs])
        for k in want:
            assert got[k].dtype == want[k].dtype, k
            assert got[k].shape == want[k].shape, k
            tol = 1e-14 if dtype == np.float64 else 2e-6
            np.testing.assert_allclose(got[k].numpy(), want[k], rtol=tol, atol=tol, err_msg=k)


def test_loss_gradients_match_jax_and_finite_differences():
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    logits, probs, labels, binary, preds, targets = _loss_inputs(np.random.default_rng(9),
                                                                 np.float64)

    def total(lib, summed):
        return lambda lg, pr: summed(_losses(lib, lg, probs, labels, binary, pr, targets))

    ours = total(optim, lambda d: sl.sum(sl.stack([sl.sum(v) for v in d.values()])))
    with jax.enable_x64(True):
        theirs = total(optax, lambda d: sum(v.sum() for v in d.values()))
        want = jax.grad(theirs, argnums=(0, 1))(logits, preds)
    got = sl.grad(ours, argnums=(0, 1))(sl.tensor(logits), sl.tensor(preds))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-13, atol=1e-14)


def test_loss_gradients_against_finite_differences_to_second_order():
    rng = np.random.default_rng(2)
    logits, probs, labels, binary, preds, targets = _loss_inputs(rng, np.float64)
    check_grads(lambda lg, p: optim.softmax_cross_entropy(lg, p), (logits, probs), order=2)
    check_grads(lambda lg: optim.softmax_cross_entropy_with_integer_labels(lg, labels),
                (logits,), order=2)
    check_grads(lambda lg: optim.sigmoid_binary_cross_entropy(lg, binary), (logits,), order=2)
    check_grads(lambda p, t: optim.l2_loss(p, t), (preds, targets), order=2)
    away = preds + np.where(np.abs(preds - targets) < 1.1, 0.2, 0.0)  # off huber's kinks
    away = np.where(np.abs(np.abs(away - targets) - 1.0) < 0.05, away + 0.2, away)
    check_grads(lambda p: optim.huber_loss(p, targets), (away,), order=2)


def test_losses_edges_and_errors():
    # stable at large logits, 0-d and empty batches, and the checks optax makes
    out = optim.sigmoid_binary_cross_entropy(sl.tensor([1000.0, -1000.0]), sl.tensor([1.0, 1.0]))
    np.testing.assert_array_equal(out.numpy(), [0.0, 1000.0])
    out = optim.softmax_cross_entropy_with_integer_labels(sl.tensor([1000.0, 0.0]), 0)
    assert out.shape == () and float(out) == 0.0
    assert optim.softmax_cross_entropy(sl.zeros((0, 3)), sl.zeros((0, 3))).shape == (0,)
    assert optim.l2_loss(sl.tensor(3.0)).shape == ()
    with pytest.raises(TypeError, match="labels must be integers"):
        optim.softmax_cross_entropy_with_integer_labels(sl.zeros((2, 3)), sl.zeros(2))
    with pytest.raises(TypeError, match="logits must be a real float"):
        optim.softmax_cross_entropy(sl.tensor([[1, 2]]), sl.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="same shape"):
        optim.l2_loss(sl.zeros(3), sl.zeros((2, 3)))
    with pytest.raises(NotImplementedError, match="where="):
        optim.softmax_cross_entropy(sl.zeros(3), sl.zeros(3), where=sl.ones(3, dtype=bool))
    with pytest.raises(IndexError):
        optim.softmax_cross_entropy_with_integer_labels(sl.zeros((2, 3)), sl.tensor([0, 3]))


# --- a JAX program ported by its imports alone -------------------------------------------------
def _training_program(jax, jnp, optax, tree_util, ravel_pytree, special, X, Y, params):
    """A small classifier trained with optax, written once against JAX's modules: the port is
    the choice of modules passed in."""
    def loss(p, x, y):
        logits = jnp.tanh(x @ p["W"] + p["b"]) * 3.0
        penalty = sum(tree_util.tree_leaves(tree_util.tree_map(lambda w: jnp.sum(w * w), p)))
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y)) + (
            1e-3 * penalty)

    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adam(optax.warmup_cosine_decay_schedule(0.0, 0.1, 5, 40)))
    state = opt.init(params)
    losses = []
    for _ in range(40):
        value, g = jax.value_and_grad(loss)(params, X, Y)
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
        losses.append(value)
    flat, unravel = ravel_pytree(params)
    return losses, flat, special.logsumexp(flat), unravel(flat * 2)["b"]


def test_a_jax_training_program_ports_by_its_imports():
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(11)
    X, Y = rng.standard_normal((16, 3)), rng.integers(0, 4, 16)
    p0 = {"W": 0.5 * rng.standard_normal((3, 4)), "b": np.zeros(4)}
    with jax.enable_x64(True):
        import jax.flatten_util
        import jax.scipy.special

        want = _training_program(jax, jax.numpy, optax, jax.tree_util,
                                 jax.flatten_util.ravel_pytree, jax.scipy.special,
                                 X, Y, jax.tree.map(jax.numpy.asarray, p0))
        want = jax.tree.map(np.asarray, want)
    got = _training_program(sl, sl, sl.optim, sl.tree_util, sl.flatten_util.ravel_pytree,
                            sl.scipy.special, X, Y, {k: sl.tensor(v) for k, v in p0.items()})
    # both step counts are int32: the warmup's division is float32, and the cosine's weakly
    # typed float64 yields to it in join_schedules' where
    np.testing.assert_allclose([float(v) for v in got[0]], want[0], rtol=1e-12)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-14)
