"""optax's other names in scanlib.optim: the optimisers (rmsprop, adagrad, adamax(w), amsgrad,
nadam(w), radam, lion, lamb, lars, adabelief, adadelta, yogi, novograd, sign_sgd, noisy_sgd,
fromage, sm3), their stages, the wrappers (masked, multi_transform, apply_if_finite,
MultiSteps, inject_hyperparams), tree_utils, schedules and losses: optax's trajectories step
by step in float64 and float32 (when optax is installed), the state's structure and names,
the same numbers under jit and in a scan carry, gradients through the updates, and errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl

from opcheck import optax_loop
from scanlib import optim
from scanlib.testing import check_grads

STEPS = 12


def _make(lib, name):
    """The optimiser called name, built from lib (optax or scanlib.optim) alone."""
    sched = lib.exponential_decay(1e-2, 5, 0.5)
    table = {
        "rmsprop": lambda: lib.rmsprop(1e-2),
        "rmsprop_centered": lambda: lib.rmsprop(1e-2, centered=True, momentum=0.9),
        "rmsprop_corrected": lambda: lib.rmsprop(1e-2, bias_correction=True, eps_in_sqrt=False,
                                                 momentum=0.5, nesterov=True),
        "adagrad": lambda: lib.adagrad(1e-1),
        "adamax": lambda: lib.adamax(1e-2),
        "adamaxw": lambda: lib.adamaxw(1e-2, weight_decay=0.1),
        "amsgrad": lambda: lib.amsgrad(1e-2),
        "nadam": lambda: lib.nadam(1e-2),
        "nadamw": lambda: lib.nadamw(1e-2, weight_decay=0.1),
        "radam": lambda: lib.radam(1e-2),
        "radam_nesterov": lambda: lib.radam(1e-2, nesterov=True),
        "lion": lambda: lib.lion(1e-3),
        "lion_smooth": lambda: lib.chain(lib.scale_by_lion(mode="smooth"), lib.scale(-0.1)),
        "lamb": lambda: lib.lamb(1e-2, weight_decay=0.1),
        "lars": lambda: lib.lars(1e-1, weight_decay=0.01),
        "adabelief": lambda: lib.adabelief(1e-2),
        "adabelief_nesterov": lambda: lib.adabelief(1e-2, nesterov=True),
        "adadelta": lambda: lib.adadelta(1.0),
        "adadelta_no_rate": lambda: lib.adadelta(),
        "yogi": lambda: lib.yogi(1e-2),
        "novograd": lambda: lib.novograd(1e-2, weight_decay=0.1),
        "sign_sgd": lambda: lib.sign_sgd(1e-2),
        "noisy_sgd": lambda: lib.noisy_sgd(1e-2, key=3),
        "fromage": lambda: lib.fromage(1e-2),
        "fromage_schedule": lambda: lib.fromage(sched),
        "sm3": lambda: lib.sm3(1e-2),
        "adamw_decay_schedule": lambda: lib.adamw(1e-2, weight_decay=sched),
        "adamw_mask": lambda: lib.adamw(1e-2, weight_decay=0.1, mask={"W": True, "b": False}),
        "ema": lambda: lib.ema(0.9),
        "ema_biased": lambda: lib.ema(0.9, debias=False),
        "clip": lambda: lib.chain(lib.clip(1.0), lib.sgd(0.1)),
        "clip_by_block_rms": lambda: lib.chain(lib.clip_by_block_rms(0.5), lib.sgd(0.1)),
        "apply_every": lambda: lib.chain(lib.apply_every(3), lib.sgd(0.1)),
        "zero_nans": lambda: lib.zero_nans(),
        "scale_by_schedule": lambda: lib.scale_by_schedule(sched),
        "multi_transform": lambda: lib.multi_transform({"a": lib.adam(1e-2), "b": lib.sgd(0.1)},
                                                       {"W": "a", "b": "b"}),
        "masked": lambda: lib.masked(lib.adam(1e-2), {"W": False, "b": True}),
        "apply_if_finite": lambda: lib.apply_if_finite(lib.adam(1e-2), 2),
        "multi_steps": lambda: lib.MultiSteps(lib.adam(1e-2), 3),
        "multi_steps_sum": lambda: lib.MultiSteps(lib.sgd(1e-2), 2, use_grad_mean=False),
        "inject_hyperparams": lambda: lib.inject_hyperparams(lib.adam)(learning_rate=sched,
                                                                       b1=0.8),
        "set_to_zero": lambda: lib.set_to_zero(),
        "identity": lambda: lib.identity(),
        "adan": lambda: lib.adan(1e-2),
        "adan_decay": lambda: lib.adan(1e-2, b1=0.9, eps_root=1e-8, weight_decay=0.1,
                                       mask={"W": True, "b": False}),
        "rprop": lambda: lib.rprop(1e-2),
        "adafactor": lambda: lib.adafactor(1e-2),
        "adafactor_factored": lambda: lib.adafactor(sched, min_dim_size_to_factor=3,
                                                    decay_offset=2),
        "adafactor_momentum": lambda: lib.adafactor(
            1e-2, min_dim_size_to_factor=3, momentum=0.9, dtype_momentum=None,
            weight_decay_rate=0.1, weight_decay_mask={"W": True, "b": False}),
        "adafactor_plain": lambda: lib.adafactor(multiply_by_parameter_scale=False,
                                                 clipping_threshold=None, factored=False),
        "factored_rms_decay_fn": lambda: lib.scale_by_factored_rms(
            min_dim_size_to_factor=3, decay_rate_fn=lambda t, d: 0.5 + 0 * t),
        "rprop_bounded": lambda: lib.rprop(1e-1, eta_minus=0.3, eta_plus=1.5, min_step_size=0.05,
                                           max_step_size=0.2),
    }
    return table[name]()


NAMES = ["rmsprop", "rmsprop_centered", "rmsprop_corrected", "adagrad", "adamax", "adamaxw",
         "amsgrad", "nadam", "nadamw", "radam", "radam_nesterov", "lion", "lion_smooth", "lamb",
         "lars", "adabelief", "adabelief_nesterov", "adadelta", "adadelta_no_rate", "yogi",
         "novograd", "sign_sgd", "noisy_sgd", "fromage", "fromage_schedule", "sm3",
         "adamw_decay_schedule", "adamw_mask", "ema", "ema_biased", "clip", "clip_by_block_rms",
         "apply_every", "zero_nans", "scale_by_schedule", "multi_transform", "masked",
         "apply_if_finite", "multi_steps", "multi_steps_sum", "inject_hyperparams",
         "set_to_zero", "identity", "adan", "adan_decay", "rprop", "rprop_bounded", "adafactor",
         "adafactor_factored", "adafactor_momentum", "adafactor_plain", "factored_rms_decay_fn"]
# optax's schedules see its int32 count, so they compute in float32 even with x64 on (scanlib's
# in float64): in float64 those trajectories agree to float32's rounding of the rate.
SCHEDULED = {"fromage_schedule", "adamw_decay_schedule", "scale_by_schedule",
             "inject_hyperparams", "adafactor_factored"}


def _problem(rng, dtype):
    p0 = {"W": rng.standard_normal((3, 4)).astype(dtype),
          "b": rng.standard_normal(4).astype(dtype)}
    grads = [{k: (3 * rng.standard_normal(v.shape)).astype(dtype) for k, v in p0.items()}
             for _ in range(STEPS)]
    return p0, grads


def _bound(name, dtype, want):
    """Each step may round differently where the operations are not IEEE's correctly rounded
    ones (sqrt, rsqrt, pow, norms summed in another order): a few ulps of the largest value
    per step. radam's rectification 1 - b2 ** t cancels (b2 = 0.999): pow's last ulp is
    amplified about a thousand times."""
    eps = np.finfo(dtype).eps
    scale = max(1.0, float(np.max(np.abs(want)))) if np.size(want) else 1.0
    if name.startswith("radam"):
        return 1e-4 * scale if dtype == np.float32 else 1e-11 * scale
    if dtype == np.float64 and name in SCHEDULED:
        return 1e-6 * scale
    return STEPS * 4 * eps * scale


def _state_leaves(jax, tree):
    out = []
    for leaf in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out.append(np.asarray(leaf))
    return out


def _classes(tree) -> list:
    """The NamedTuple classes in a state, depth first (optax's EmptyState is scanlib's ())."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        name = type(tree).__name__
        inner = [c for x in tree for c in _classes(x)]
        return inner if name == "EmptyState" else [name, *inner]
    if isinstance(tree, (tuple, list)):
        return [c for x in tree for c in _classes(x)]
    if isinstance(tree, dict):
        return [c for k in sorted(tree) for c in _classes(tree[k])]
    return []


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_trajectory_and_state_equal_optax(rng, name, dtype):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    p0, grads = _problem(rng, dtype)
    with jax.enable_x64(dtype == np.float64):
        theirs = _make(optax, name)
        if name.startswith("multi_steps"):  # optax accumulates in float32 by default
            theirs = optax.MultiSteps(theirs.inner_opt, theirs._every_k_schedule(0),
                                      use_grad_mean=name == "multi_steps",
                                      accumulator_dtype=dtype)
        q, t = optax_loop(optax, theirs, {k: jax.numpy.asarray(v) for k, v in p0.items()}, grads,
                     jax.numpy.asarray)
        q, their_leaves = jax.tree.map(np.asarray, q), _state_leaves(jax, t)
    p, s = optax_loop(optim, _make(optim, name), {k: sl.tensor(v) for k, v in p0.items()}, grads,
                 sl.tensor)
    for k in p0:
        got = p[k].numpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, q[k], rtol=0, atol=_bound(name, dtype, q[k]))
    ours = [np.asarray(sl.tensor(x).numpy()) for x in sl.pytree.leaves(s)]
    assert len(ours) == len(their_leaves)
    for a, b in zip(ours, their_leaves):
        assert a.shape == b.shape
        if b.dtype.kind in "iub":
            np.testing.assert_array_equal(a, b)  # counts, flags, keys
        elif not (name == "inject_hyperparams" and b.dtype != dtype):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=0, atol=_bound(name, dtype, b))
    assert _classes(s) == _classes(t)


@pytest.mark.parametrize("name", NAMES)
def test_jit_and_scan_carry_take_the_eager_steps(rng, name):
    """The same bits under sl.jit (one trace) and with params and state in a scan carry."""
    p0, grads = _problem(rng, np.float32)
    opt = _make(optim, name)
    want, _ = optax_loop(optim, opt, {k: sl.tensor(v) for k, v in p0.items()}, grads, sl.tensor)

    def step(p, s, g):
        updates, s = opt.update(g, s, p)
        return optim.apply_updates(p, updates), s

    jitted = sl.jit(step)
    p = {k: sl.tensor(v) for k, v in p0.items()}
    s = opt.init(p)
    for g in grads:
        p, s = jitted(p, s, {k: sl.tensor(v) for k, v in g.items()})
    assert jitted.cache_info().misses == 1
    xs = {k: sl.tensor(np.stack([g[k] for g in grads])) for k in p0}
    (carried, _), _ = sl.scan(lambda c, g: (step(*c, g), None),
                              ({k: sl.tensor(v) for k, v in p0.items()}, opt.init(p0)), xs)
    for k in p0:
        assert p[k].dtype == carried[k].dtype == np.float32
        np.testing.assert_array_equal(p[k].numpy(), want[k].numpy())
        np.testing.assert_array_equal(carried[k].numpy(), want[k].numpy())


def test_state_fields_read_as_in_optax():
    w = {"W": sl.ones((2, 3)), "b": sl.zeros(3)}
    assert optim.rmsprop(0.1).init(w)[0].nu["W"].shape == (2, 3)
    state = optim.amsgrad(0.1).init(w)
    assert isinstance(state[0], optim.ScaleByAmsgradState) and state[0].count.dtype == np.int32
    assert optim.lion(0.1).init(w)[0].mu["b"].shape == (3,)
    assert isinstance(optim.adamax(0.1).init(w)[0], optim.ScaleByAdamState)
    assert optim.novograd(0.1).init(w)[0].nu["W"].shape == ()
    assert [v.shape for v in optim.sm3(0.1).init(w)[0].mu["W"]] == [(2,), (3,)]
    masked = optim.masked(optim.adam(0.1), {"W": True, "b": False}).init(w)
    assert masked.inner_state[0].mu["b"] == optim.MaskedNode()
    multi = optim.multi_transform({"x": optim.sgd(0.1, 0.9), "y": optim.adam(0.1)},
                                  lambda p: {"W": "x", "b": "y"}).init(w)
    assert set(multi.inner_states) == {"x", "y"}
    assert multi.inner_states["x"].inner_state[0].trace["W"].shape == (2, 3)
    inj = optim.inject_hyperparams(optim.adamw)(learning_rate=0.1, weight_decay=1e-3).init(w)
    assert inj.hyperparams["weight_decay"].item() == pytest.approx(1e-3)
    assert inj.inner_state[0].count.item() == 0


def test_apply_updates_adds_the_updates_once_for_the_new_optimisers(rng):
    """optax's idiom and step are one step, not two (optax's apply_updates semantics)."""
    p0, grads = _problem(rng, np.float64)
    for name in ["rmsprop", "lamb", "novograd", "multi_transform", "multi_steps"]:
        opt = _make(optim, name)
        a, _ = optax_loop(optim, opt, {k: sl.tensor(v) for k, v in p0.items()}, grads, sl.tensor)
        b, s = {k: sl.tensor(v) for k, v in p0.items()}, opt.init(p0)
        for g in grads:
            b, s = opt.step({k: sl.tensor(v) for k, v in g.items()}, s, b)
        for k in p0:
            np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())


# --- differentiating through the updates --------------------------------------------------------
def _inner_loss(p):
    return (p ** 3).sum() + (sl.sin(p) * p).sum()


def _unrolled(opt, steps):
    def f(q):
        p, state = q, opt.init(q)
        for _ in range(steps):
            updates, state = opt.update(sl.grad(_inner_loss)(p), state, p)
            p = optim.apply_updates(p, updates)
        return (p * p).sum() + p.sum()
    return f


# radam is checked against finite differences only: optax's meta-gradient through its first
# steps is nan (the unused rectification takes sqrt of a negative; where passes 0 * nan back).
META = ["rmsprop", "adagrad", "adabelief", "yogi", "lamb", "novograd", "amsgrad", "lion_smooth"]


def _meta_opt(lib, name):
    return {"rmsprop": lambda: lib.rmsprop(0.05, centered=True),
            "adagrad": lambda: lib.adagrad(0.1),
            "adabelief": lambda: lib.adabelief(0.05),
            "yogi": lambda: lib.yogi(0.05),
            "lamb": lambda: lib.lamb(0.05, weight_decay=0.1),
            "novograd": lambda: lib.novograd(0.05),
            "radam": lambda: lib.radam(0.05, b2=0.99),  # rectified from step 6 on
            "amsgrad": lambda: lib.amsgrad(0.05),
            "lion_smooth": lambda: lib.chain(lib.scale_by_lion(mode="smooth"), lib.scale(-0.1)),
            }[name]()


@pytest.mark.parametrize("name", META)
def test_meta_gradient_equals_optax(name):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    q0 = np.array([0.5, -0.3, 1.2])
    steps = 3

    def theirs(q):
        opt = _meta_opt(optax, name)
        p, state = q, opt.init(q)
        for _ in range(steps):
            g = jax.grad(lambda p: (p ** 3).sum() + (jnp.sin(p) * p).sum())(p)
            u, state = opt.update(g, state, p)
            p = optax.apply_updates(p, u)
        return (p * p).sum() + p.sum()

    with jax.enable_x64(True):
        want = np.asarray(jax.grad(theirs)(jnp.asarray(q0)))
    got = sl.grad(_unrolled(_meta_opt(optim, name), steps))(sl.tensor(q0))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    assert np.all(np.isfinite(want)) and np.all(want != 0)


@pytest.mark.parametrize("name", ["rmsprop", "adagrad", "yogi", "lamb", "novograd", "radam"])
def test_meta_gradient_against_finite_differences(name):
    steps = 7 if name == "radam" else 2  # radam rectifies from step 6 on (b2 = 0.99)
    check_grads(_unrolled(_meta_opt(optim, name), steps), (np.array([0.5, -0.3, 1.2]),))


# --- wrappers -------------------------------------------------------------------------------------
def test_masked_leaves_the_other_updates_untouched():
    g = {"W": sl.tensor([1.0, -2.0]), "b": sl.tensor([3.0])}
    opt = optim.masked(optim.scale(-0.5), lambda params: {"W": True, "b": False})
    updates, _ = opt.update(g, opt.init(g))
    np.testing.assert_array_equal(updates["W"].numpy(), [-0.5, 1.0])
    np.testing.assert_array_equal(updates["b"].numpy(), [3.0])
    nested = {"enc": {"W": sl.ones(2), "b": sl.ones(1)}, "dec": sl.ones(3)}
    opt = optim.masked(optim.scale(2.0), {"enc": True, "dec": False})  # a prefix of the tree
    updates, _ = opt.update(nested, opt.init(nested))
    assert updates["enc"]["b"].item() == 2.0 and updates["dec"][0].item() == 1.0


def test_apply_if_finite_skips_non_finite_steps_then_gives_in():
    opt = optim.apply_if_finite(optim.sgd(1.0), max_consecutive_errors=1)
    w = sl.tensor([0.0])
    state = opt.init(w)
    bad = sl.tensor([float("nan")])
    u, state = opt.update(bad, state, w)
    assert u.item() == 0.0 and state.notfinite_count.item() == 1
    assert not state.last_finite.item() and state.total_notfinite.item() == 1
    u, state = opt.update(bad, state, w)  # the second in a row is past the limit: applied
    assert np.isnan(u.item()) and state.notfinite_count.item() == 2
    u, state = opt.update(sl.tensor([2.0]), state, w)
    assert u.item() == -2.0 and state.notfinite_count.item() == 0
    assert state.total_notfinite.item() == 2


def test_multi_steps_emits_every_k_and_says_so():
    opt = optim.MultiSteps(optim.sgd(1.0), every_k_schedule=2)
    assert opt.gradient_transformation() is opt
    w = sl.tensor([0.0])
    state = opt.init(w)
    u, state = opt.update(sl.tensor([1.0]), state, w)
    assert u.item() == 0.0 and not opt.has_updated(state).item()
    u, state = opt.update(sl.tensor([3.0]), state, w)
    assert u.item() == -2.0 and opt.has_updated(state).item()  # the mean of 1 and 3
    assert state.gradient_step.item() == 1 and state.mini_step.item() == 0


def test_multi_steps_skips_with_skip_not_finite():
    optax = pytest.importorskip("optax")
    jnp = pytest.importorskip("jax.numpy")
    grads = [1.0, float("nan"), 3.0, 2.0, float("inf"), 5.0]

    def run(lib, asarray):
        opt = lib.MultiSteps(lib.adam(0.1), 2, should_skip_update_fn=lib.skip_not_finite)
        p = asarray([0.5])
        state = opt.init(p)
        values, skipped = [], []
        for g in grads:
            u, state = opt.update(asarray([g]), state, p)
            p = lib.apply_updates(p, u)
            values.append(float(np.asarray(sl.tensor(np.asarray(p)).numpy())[0]))
            skipped.append(int(np.asarray(state.skip_state["num_not_finite"])))
        return values, skipped, int(np.asarray(state.gradient_step))

    ours = run(optim, lambda v: sl.tensor(np.asarray(v, np.float32)))
    theirs = run(optax, lambda v: jnp.asarray(v, jnp.float32))
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    assert ours[1:] == theirs[1:] == ([0, 1, 0, 0, 1, 0], 2)


def test_inject_hyperparams_reads_a_changed_value_and_runs_under_jit():
    opt = optim.inject_hyperparams(optim.sgd)(learning_rate=0.1)
    w = sl.tensor(np.ones(2, np.float32))
    state = opt.init(w)
    assert state.hyperparams["learning_rate"].dtype == np.float32
    u, state = opt.update(sl.tensor(np.ones(2, np.float32)), state, w)
    np.testing.assert_allclose(u.numpy(), -0.1)
    state.hyperparams["learning_rate"] = sl.tensor(np.float32(0.5))
    u, state = opt.update(sl.tensor(np.ones(2, np.float32)), state, w)
    np.testing.assert_allclose(u.numpy(), -0.5)
    jitted = sl.jit(lambda g, s, p: opt.update(g, s, p))
    u, state = jitted(sl.tensor(np.ones(2, np.float32)), state, w)
    assert u.dtype == np.float32
    np.testing.assert_allclose(u.numpy(), -0.5)


# --- tree_utils, global_norm, incremental and periodic updates ---------------------------------
def test_tree_utils_equal_optax(rng):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    x = {"a": rng.standard_normal((2, 3)), "b": rng.standard_normal(4)}
    y = {"a": rng.standard_normal((2, 3)), "b": rng.standard_normal(4)}
    ours = sl.pytree.tree_map(sl.tensor, x), sl.pytree.tree_map(sl.tensor, y)
    with jax.enable_x64(True):
        theirs = jax.tree.map(jax.numpy.asarray, x), jax.tree.map(jax.numpy.asarray, y)
        tu, ot = optax.tree_utils, optim.tree_utils
        pairs = [
            (ot.tree_add(*ours), tu.tree_add(*theirs)),
            (ot.tree_sub(*ours), tu.tree_sub(*theirs)),
            (ot.tree_mul(*ours), tu.tree_mul(*theirs)),
            (ot.tree_div(*ours), tu.tree_div(*theirs)),
            (ot.tree_scalar_mul(0.5, ours[0]), tu.tree_scale(0.5, theirs[0])),
            (ot.tree_add_scalar_mul(ours[0], 0.5, ours[1]),
             tu.tree_add_scale(theirs[0], 0.5, theirs[1])),
            (ot.tree_vdot(*ours), tu.tree_vdot(*theirs)),
            (ot.tree_sum(ours[0]), tu.tree_sum(theirs[0])),
            (ot.tree_max(ours[0]), tu.tree_max(theirs[0])),
            (ot.tree_l2_norm(ours[0]), tu.tree_norm(theirs[0])),
            (ot.tree_norm(ours[0], squared=True), tu.tree_norm(theirs[0], squared=True)),
            (ot.tree_norm(ours[0], 1), tu.tree_norm(theirs[0], 1)),
            (ot.tree_norm(ours[0], "inf"), tu.tree_norm(theirs[0], "inf")),
            (ot.tree_zeros_like(ours[0]), tu.tree_zeros_like(theirs[0])),
            (ot.tree_full_like(ours[0], 3.0), tu.tree_full_like(theirs[0], 3.0)),
            (ot.tree_clip(ours[0], -0.5, 0.5), tu.tree_clip(theirs[0], -0.5, 0.5)),
            (ot.tree_update_moment(ours[0], ours[1], 0.9, 2),
             tu.tree_update_moment(theirs[0], theirs[1], 0.9, 2)),
            (ot.tree_update_infinity_moment(ours[0], ours[1], 0.9, 1e-3),
             tu.tree_update_infinity_moment(theirs[0], theirs[1], 0.9, 1e-3)),
            (ot.tree_bias_correction(ours[0], 0.9, 3),
             tu.tree_bias_correction(theirs[0], 0.9, jax.numpy.asarray(3))),
            (optim.global_norm(ours[0]), optax.tree.norm(theirs[0])),
            (optim.incremental_update(*ours, 0.1), optax.incremental_update(*theirs, 0.1)),
            (optim.periodic_update(*ours, 10, 5), optax.periodic_update(*theirs, 10, 5)),
            (optim.periodic_update(*ours, 11, 5), optax.periodic_update(*theirs, 11, 5)),
        ]
        for got, want in pairs:
            got = [np.asarray(sl.tensor(v).numpy()) for v in sl.pytree.leaves(got)]
            want = [np.asarray(v) for v in jax.tree.leaves(want)]
            assert len(got) == len(want)
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    assert optim.tree_utils.tree_size(ours[0]) == 10
    g = sl.grad(lambda t: optim.tree_utils.tree_l2_norm({"a": t}))(sl.tensor([3.0, 4.0]))
    np.testing.assert_allclose(g.numpy(), [0.6, 0.8])


# --- schedules ------------------------------------------------------------------------------------
SCHEDULES = {
    "warmup_constant": lambda L: L.warmup_constant_schedule(0.1, 1.0, 7),
    "warmup_exponential": lambda L: L.warmup_exponential_decay_schedule(
        0.0, 1.0, 5, 10, 0.5, transition_begin=3, end_value=0.01),
    "warmup_exponential_staircase": lambda L: L.warmup_exponential_decay_schedule(
        0.0, 1.0, 5, 10, 0.5, staircase=True),
    "sgdr": lambda L: L.sgdr_schedule([
        dict(init_value=0.0, peak_value=1.0, warmup_steps=3, decay_steps=10),
        dict(init_value=0.1, peak_value=0.5, warmup_steps=2, decay_steps=20, end_value=0.01)]),
    "piecewise_linear": lambda L: L.piecewise_interpolate_schedule(
        "linear", 2.0, {10: 0.5, 25: 0.1, 26: 3.0}),
    "piecewise_cosine": lambda L: L.piecewise_interpolate_schedule("cosine", 2.0,
                                                                   {10: 0.5, 25: 0.1}),
    "piecewise_none": lambda L: L.piecewise_interpolate_schedule("cosine", 2.0),
    "linear_onecycle": lambda L: L.linear_onecycle_schedule(100, 1.0),
    "cosine_onecycle": lambda L: L.cosine_onecycle_schedule(100, 1.0),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedules_equal_optax_for_int_and_traced_counts(name):
    """optax's formula on a float64 count; a Python int count gives a Python float, a 0-d
    Tensor count (traced inside an optimiser under jit) a Tensor of the same value."""
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    steps = range(-2, 120)
    with jax.enable_x64(True):
        theirs = SCHEDULES[name](optax)
        want = np.array([float(theirs(jax.numpy.asarray(t, jax.numpy.float64))) for t in steps])
    ours = SCHEDULES[name](optim)
    got = [ours(t) for t in steps]
    assert all(isinstance(v, float) for v in got)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-16)
    traced = [ours(sl.tensor(float(t))).item() for t in steps]
    np.testing.assert_allclose(traced, want, rtol=1e-15, atol=1e-16)
    # the int32 count an optimiser's state holds: optax's bounds are int64 arrays, so its
    # piecewise and one-cycle schedules divide in float64 there too, not float32
    if name.startswith(("piecewise", "linear_onecycle", "cosine_onecycle")):
        at_int32 = [ours(sl.tensor(t, dtype="int32")) for t in steps]
        assert all(v.dtype == np.float64 for v in at_int32)
        np.testing.assert_array_equal([v.item() for v in at_int32], traced)


def test_a_new_schedule_drives_an_optimiser_under_jit():
    sched = optim.sgdr_schedule([dict(init_value=0.0, peak_value=1.0, warmup_steps=1,
                                      decay_steps=3)] * 2)
    opt = optim.sgd(sched)
    w = sl.tensor([0.0])

    def step(w, s):
        return opt.step(sl.tensor([1.0]), s, w)

    jitted, (a, sa), (b, sb) = sl.jit(step), (w, opt.init(w)), (w, opt.init(w))
    for _ in range(6):
        a, sa = step(a, sa)
        b, sb = jitted(b, sb)
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-15)
    assert a.item() == pytest.approx(-sum(sched(t) for t in range(6)), rel=1e-15)


def test_schedules_refuse_bad_arguments():
    with pytest.raises(ValueError, match="interpolate_type must be 'cosine' or 'linear'"):
        optim.piecewise_interpolate_schedule("cubic", 1.0)
    with pytest.raises(ValueError, match="scales must be non-negative"):
        optim.piecewise_interpolate_schedule("linear", 1.0, {3: -1.0})
    with pytest.raises(ValueError, match="transition_steps must be positive"):
        optim.linear_onecycle_schedule(0, 1.0)


# --- losses ---------------------------------------------------------------------------------------
def _loss_cases(rng):
    x, y = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    p = rng.dirichlet(np.ones(5), 4)
    p[0, 1] = 0.0
    labels = (rng.random((4, 5)) > 0.5).astype(float)
    return {
        "hinge_loss": ((x, np.sign(y)), {}),
        "kl_divergence": ((np.log(rng.dirichlet(np.ones(5), 4)), p), {}),
        "cosine_similarity": ((x, y), {}),
        "cosine_distance": ((x, y), {"epsilon": 1e-3}),
        "log_cosh": ((x, y), {}),
        "sigmoid_focal_loss": ((x, labels), {"alpha": 0.25, "gamma": 1.5}),
        "smooth_labels": ((p, 0.1), {}),
        "safe_softmax_cross_entropy": ((x, p), {}),
    }


LOSSES = ["hinge_loss", "kl_divergence", "cosine_similarity", "cosine_distance", "log_cosh",
          "sigmoid_focal_loss", "smooth_labels", "safe_softmax_cross_entropy"]


def _call(fn, args, kw, asarray):
    return fn(*[asarray(a) if isinstance(a, np.ndarray) else a for a in args], **kw)


@pytest.mark.parametrize("name", LOSSES)
def test_losses_equal_optax_in_values_and_gradients(rng, name):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    args, kw = _loss_cases(rng)[name]
    with jax.enable_x64(True):
        want = np.asarray(_call(getattr(optax, name), args, kw, jax.numpy.asarray))
        want_grad = np.asarray(jax.grad(lambda z: _call(getattr(optax, name), (z, *args[1:]),
                                                        kw, jax.numpy.asarray).sum())(
            jax.numpy.asarray(args[0])))
    got = _call(getattr(optim, name), args, kw, sl.tensor)
    assert got.shape == want.shape and got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-15)
    grad = sl.grad(lambda z: _call(getattr(optim, name), (z, *args[1:]), kw, sl.tensor).sum())(
        sl.tensor(args[0]))
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", LOSSES)
def test_losses_keep_float32_and_have_finite_difference_gradients(rng, name):
    args, kw = _loss_cases(rng)[name]
    f32 = _call(getattr(optim, name), [a.astype(np.float32) if isinstance(a, np.ndarray) else a
                                       for a in args], kw, sl.tensor)
    assert f32.dtype == np.float32
    rest = args[1:]
    check_grads(lambda z: _call(getattr(optim, name), (z, *rest), kw, sl.tensor), (args[0],))


def test_losses_at_the_edges():
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    inf, nan = float("inf"), float("nan")
    cases = [
        ("safe_softmax_cross_entropy", ([[0.0, -inf, 1.0]], [[0.5, 0.0, 0.5]]), {}),
        ("kl_divergence", ([[-inf, 0.0]], [[0.0, 1.0]]), {}),
        ("log_cosh", ([1000.0, -1000.0, 0.0, nan],), {}),
        ("hinge_loss", ([2.0, nan], 1.0), {}),
        ("cosine_similarity", ([[0.0, 0.0]], [[1.0, 0.0]]), {"epsilon": 1e-6}),
        ("sigmoid_focal_loss", ([50.0, -50.0], [1.0, 0.0]), {}),
        ("hinge_loss", (np.zeros((0, 3)), np.ones((0, 3))), {}),
        ("log_cosh", (np.float64(2.0),), {}),
        ("smooth_labels", (np.zeros((0, 3)), 0.1), {}),
    ]
    with jax.enable_x64(True):
        for name, args, kw in cases:
            args = [np.asarray(a, np.float64) if isinstance(a, (list, np.ndarray, np.floating))
                    else a for a in args]
            want = np.asarray(_call(getattr(optax, name), args, kw, jax.numpy.asarray))
            got = _call(getattr(optim, name), args, kw, sl.tensor)
            assert got.shape == want.shape, name
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-14, atol=1e-300, err_msg=name)


def test_losses_broadcast_as_optax():
    got = optim.hinge_loss(sl.tensor([[0.5], [2.0]]), sl.tensor([1.0, -1.0]))
    np.testing.assert_array_equal(got.numpy(), [[0.5, 1.5], [0.0, 3.0]])


# --- errors ---------------------------------------------------------------------------------------
def test_errors_say_what_where_and_how():
    w = {"W": sl.ones((2, 2)), "b": sl.ones(2)}
    with pytest.raises(TypeError, match=r"mask's keys at mask are \['W'\] but the parameters' "
                       r"are \['W', 'b'\]"):
        optim.masked(optim.sgd(0.1), {"W": True}).init(w)
    with pytest.raises(ValueError, match=r"labels \['c'\] have no transformation"):
        optim.multi_transform({"a": optim.sgd(0.1)}, {"W": "a", "b": "c"}).init(w)
    with pytest.raises(TypeError, match=r"scale_by_sm3 needs parameters of at least one axis, "
                       r"but grads\['s'\] is 0-d"):
        opt = optim.sm3(0.1)
        opt.update({"s": sl.tensor(1.0)}, opt.init({"s": sl.tensor(1.0)}))
    with pytest.raises(TypeError, match=r"scale_by_novograd needs params; pass them"):
        opt = optim.novograd(0.1)
        opt.update(w, opt.init(w))
    with pytest.raises(TypeError, match="mu_dtype is not supported"):
        optim.adam(0.1, mu_dtype=np.float32)
    with pytest.raises(TypeError, match="accumulator_dtype is not supported"):
        optim.MultiSteps(optim.sgd(0.1), 2, accumulator_dtype=np.float32)
    with pytest.raises(ValueError, match="apply_every: k must be a positive int"):
        optim.apply_every(0)
    with pytest.raises(TypeError, match=r"add_noise: pass key="):
        optim.noisy_sgd(0.1)
    with pytest.raises(ValueError, match="mode must be 'hard', 'smooth' or 'refined'"):
        optim.scale_by_lion(mode="soft")
    with pytest.raises(TypeError, match=r"state must be a ScaleByRmsState, got "
                       r"ScaleByAdamState"):
        optim.scale_by_rms().update(w, optim.scale_by_adam().init(w), w)
    with pytest.raises(TypeError, match=r"state\.inner_states\['a'\] must be a MaskedState"):
        opt = optim.multi_transform({"a": optim.sgd(0.1)}, {"W": "a", "b": "a"})
        opt.update(w, optim.PartitionState({"a": ()}), w)


def test_radam_warns_of_nothing_before_rectifying():
    import warnings

    opt = optim.radam(0.1)
    w = sl.tensor([1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        updates, _ = opt.update(sl.tensor([2.0]), opt.init(w), w)
    assert np.isfinite(updates.item())


def _ctc_problem(rng):
    batch, steps, classes, length = 3, 7, 5, 4
    logits = rng.standard_normal((batch, steps, classes))
    logit_paddings = np.zeros((batch, steps))
    logit_paddings[1, 6:] = 1.0
    logit_paddings[2, 5:] = 1.0
    labels = rng.integers(1, classes, (batch, length))
    labels[0, 2] = labels[0, 1]  # a repeated label needs a blank between its two
    label_paddings = np.zeros((batch, length))
    label_paddings[1, 3:] = 1.0
    label_paddings[2, 2:] = 1.0
    return logits, logit_paddings, labels, label_paddings


def test_ctc_loss_equals_optax_in_values_forward_probs_and_gradients(rng):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    logits, *rest = _ctc_problem(rng)
    with jax.enable_x64(True):
        want = [np.asarray(v) for v in optax.ctc_loss_with_forward_probs(
            *map(jax.numpy.asarray, (logits, *rest)))]
        want_grad = np.asarray(jax.grad(lambda z: optax.ctc_loss(
            z, *map(jax.numpy.asarray, rest)).sum())(jax.numpy.asarray(logits)))
    got = optim.ctc_loss_with_forward_probs(sl.tensor(logits), *map(sl.tensor, rest))
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-13, atol=1e-12)
    grad = sl.grad(lambda z: optim.ctc_loss(z, *map(sl.tensor, rest)).sum())(sl.tensor(logits))
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-12, atol=1e-14)


def test_ctc_loss_keeps_float32_runs_under_jit_and_has_fd_gradients(rng):
    logits, *rest = _ctc_problem(rng)
    rest = [sl.tensor(v) for v in rest]
    f32 = optim.ctc_loss(sl.tensor(logits.astype(np.float32)), *rest)
    assert f32.dtype == np.float32
    eager = optim.ctc_loss(sl.tensor(logits), *rest)
    np.testing.assert_array_equal(sl.jit(optim.ctc_loss)(sl.tensor(logits), *rest).numpy(),
                                  eager.numpy())
    check_grads(lambda z: optim.ctc_loss(z, *rest), (logits,))
    with pytest.raises(ValueError, match=r"label_paddings must be shaped like labels"):
        optim.ctc_loss(sl.tensor(logits), rest[0], rest[1], rest[2][:, :2])


def test_keep_params_nonnegative_and_safe_norm_are_optaxs():
    """keep_params_nonnegative lands a parameter its update would take below 0 on 0;
    safe_norm is min_norm (gradient 0, not NaN) where the norm is at most min_norm; both
    against optax where installed, values, shapes and gradients."""
    o, w = optim.keep_params_nonnegative(), sl.tensor([1.0, 2.0, 0.5])
    got = o.update(sl.tensor([-3.0, -1.0, 0.2]), o.init(w), w)[0]
    np.testing.assert_array_equal(got.numpy(), [-1.0, -1.0, 0.2])
    with pytest.raises(TypeError, match="needs params"):
        o.update(sl.tensor([1.0, 1.0, 1.0]), o.init(w))
    zero = optim.safe_norm(sl.tensor([0.0, 0.0]), 1e-6)
    assert zero.item() == 1e-6
    g = sl.grad(lambda x: optim.safe_norm(x, 1e-6))(sl.tensor([0.0, 0.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    cases = [(np.zeros(3), {}), (np.array([3.0, 4.0]), {}),
             (np.array([[0.0, 0.0], [3.0, 4.0]]), {"axis": 1}),
             (np.array([[0.0, 0.0], [3.0, 4.0]]), {"axis": 1, "keepdims": True}),
             (np.array([1e-8, 0.0]), {"ord": 1})]
    with jax.enable_x64(True):
        for x, kw in cases:
            want = optax.safe_norm(jax.numpy.asarray(x), 1e-6, **kw)
            got = optim.safe_norm(sl.tensor(x), 1e-6, **kw)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), np.asarray(want))
            want = jax.grad(lambda x, kw=kw: optax.safe_norm(x, 1e-6, **kw).sum())(
                jax.numpy.asarray(x))
            got = sl.grad(lambda x, kw=kw: sl.sum(optim.safe_norm(x, 1e-6, **kw)))(
                sl.tensor(x))
            np.testing.assert_array_equal(got.numpy(), np.asarray(want))


def test_adaptive_grad_clip_is_optaxs():
    """Each unit (a vector, a matrix's column, a kernel's output channel, or axis=) clipped
    to clipping * max(|p|, eps); a unit under it untouched; params required."""
    p, g = sl.tensor([[3.0, 0.0], [4.0, 0.0]]), sl.tensor([[6.0, 1.0], [8.0, 0.0]])
    o = optim.adaptive_grad_clip(0.1)
    got = o.update(g, o.init(p), p)[0].numpy()
    np.testing.assert_allclose(got, [[0.3, 1e-4], [0.4, 0.0]], rtol=1e-12)
    with pytest.raises(TypeError, match="needs params"):
        o.update(g, o.init(p))
    with pytest.raises(ValueError, match="pass axis="):
        o.update(sl.ones((1, 2, 1, 2, 1, 2, 2)), (), sl.ones((1, 2, 1, 2, 1, 2, 2)))
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    shapes = {"v": (5,), "m": (4, 3), "r3": (2, 3, 4), "k": (2, 2, 3, 4),
              "k5": (2, 1, 2, 3, 2), "row": (1, 6), "s": ()}
    params = {k: np.asarray(rng.standard_normal(s)) for k, s in shapes.items()}
    grads = {k: np.asarray(3.0 * rng.standard_normal(s)) for k, s in shapes.items()}
    params["m"][:, 1] = 0.0  # a zero column: eps bounds it
    with jax.enable_x64(True):
        for clipping, eps, axis in [(0.1, 1e-3, None), (0.5, 0.1, None), (0.01, 1e-3, None),
                                    (0.1, 1e-3, -1)]:
            keys = [k for k in shapes if axis is None or shapes[k]]
            ps, gs = {k: params[k] for k in keys}, {k: grads[k] for k in keys}
            want = optax.adaptive_grad_clip(clipping, eps, axis).update(gs, None, ps)[0]
            got = optim.adaptive_grad_clip(clipping, eps, axis).update(gs, (), ps)[0]
            for k in keys:
                np.testing.assert_allclose(got[k].numpy(), np.asarray(want[k]), rtol=1e-14,
                                           atol=1e-15)


def test_per_example_global_norm_clip_is_optaxs():
    g = {"w": sl.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])}
    summed, clipped = optim.per_example_global_norm_clip(g, 1.0)
    np.testing.assert_allclose(summed["w"].numpy(), [0.9, 1.2], rtol=1e-12)  # 0.6+0.3, ...
    assert clipped.item() == 1
    with pytest.raises(ValueError, match="examples on axis 0"):
        optim.per_example_global_norm_clip({"w": sl.ones((3, 2)), "b": sl.ones(2)}, 1.0)
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(1)
    grads = {"w": rng.standard_normal((6, 3, 2)), "b": rng.standard_normal((6, 2))}
    grads["w"][2], grads["b"][2] = 0.0, 0.0  # a zero example: its multiplier is 1, not NaN
    with jax.enable_x64(True):
        want = optax.per_example_global_norm_clip(grads, 1.5)
    got = optim.per_example_global_norm_clip(grads, 1.5)
    for k in grads:
        np.testing.assert_allclose(got[0][k].numpy(), np.asarray(want[0][k]), rtol=1e-14)
    assert got[1].item() == int(want[1])


@pytest.mark.parametrize("uniform", [True, False])
def test_per_example_layer_norm_clip_is_optaxs(uniform):
    """Each leaf clipped on its own to C / sqrt(K) (uniform) or C * sqrt(D_i / D)."""
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(4)
    grads = {"a": rng.standard_normal((5, 3)), "b": rng.standard_normal((5, 2, 2)),
             "c": rng.standard_normal(5)}
    grads["a"][1] = 0.0  # a zero example of one layer: its multiplier is 1, not NaN
    for clip in (0.0, 0.7, np.inf):
        with jax.enable_x64(True):
            want = optax.per_example_layer_norm_clip(grads, clip, uniform)
        got = optim.per_example_layer_norm_clip(grads, clip, uniform)
        for k in grads:
            np.testing.assert_allclose(got[0][k].numpy(), np.asarray(want[0][k]), rtol=1e-14,
                                       atol=1e-15)
            assert got[1][k].item() == int(want[1][k])
    with pytest.raises(ValueError, match="examples on axis 0"):
        optim.per_example_layer_norm_clip({"w": sl.ones((3, 2)), "b": sl.ones(2)}, 1.0)


@pytest.mark.parametrize("scale", [0.0, 0.5, 1.0, -3.0])
def test_scale_gradient_scales_the_gradient_only(scale):
    """The value unchanged, the gradient times scale, at every order and through a scan
    body on each loop compiler; optax's, where installed."""
    x = np.array([1.0, -2.0])
    f = lambda x: sl.numpy.sum(optim.scale_gradient(x, scale) ** 3)  # noqa: E731
    np.testing.assert_array_equal(optim.scale_gradient(sl.tensor(x), scale).numpy(), x)
    np.testing.assert_allclose(sl.grad(f)(sl.tensor(x)).numpy(), 3 * x ** 2 * scale)
    # the rule holds at every order: optax's fwd calls scale_gradient again (jax.grad of
    # jax.grad gives scale ** 2 too; JAX's jacrev of jacrev gives scale, vmapped)
    np.testing.assert_allclose(sl.jacrev(sl.jacrev(f))(sl.tensor(x)).numpy(),
                               np.diag(6 * x * scale ** 2))
    for compiler in ("numpy", "numba"):
        if compiler == "numba":
            pytest.importorskip("numba")
        scanned = sl.grad(lambda x, c=compiler: sl.numpy.sum(sl.scan(
            lambda h, _: (optim.scale_gradient(h, scale) * 1.5, None), x, None, length=3,
            compiler=c)[0]))(sl.tensor(x))
        np.testing.assert_allclose(scanned.numpy(), np.full(2, (1.5 * scale) ** 3))
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        g = jax.grad(lambda x: jax.numpy.sum(optax.scale_gradient(x, scale) ** 3))
        want = jax.grad(lambda x: jax.numpy.sum(g(x)))(x)
    np.testing.assert_allclose(sl.grad(lambda x: sl.numpy.sum(sl.grad(f)(x)))(
        sl.tensor(x)).numpy(), want)


def test_freeze_selective_transform_and_named_chain_are_optaxs():
    params = {"w": np.ones(3), "b": np.ones(2), "c": {"d": np.ones(1)}}
    grads = {"w": np.arange(3.0), "b": np.arange(2.0) + 1, "c": {"d": np.array([5.0])}}
    frozen = optim.chain(optim.freeze({"w": True, "b": False, "c": True}), optim.sgd(0.1))
    got = frozen.update(grads, frozen.init(params), params)[0]
    np.testing.assert_array_equal(got["w"].numpy(), np.zeros(3))
    np.testing.assert_allclose(got["b"].numpy(), [-0.1, -0.2])
    named = optim.named_chain(("clip", optim.clip(1.0)), ("sgd", optim.sgd(0.1)))
    state = named.init(params)
    assert list(state) == ["clip", "sgd"]
    with pytest.raises(TypeError, match=r"must be the dict \{clip, sgd\}"):
        named.update(grads, tuple(state.values()), params)
    with pytest.raises(ValueError, match="names must differ"):
        optim.named_chain(("a", optim.sgd(0.1)), ("a", optim.sgd(0.1)))
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")

    def run(lib, make, steps=3):
        opt = make(lib)
        state = opt.init(params)
        for _ in range(steps):
            updates, state = opt.update(grads, state, params)
        return jax.tree_util.tree_leaves(jax.tree.map(np.asarray, updates)), state

    masks = [{"w": True, "b": False, "c": {"d": True}}, True, False,
             {"w": False, "b": True, "c": False}]
    makers = [lambda lib, m=m: lib.chain(lib.freeze(m), lib.adam(0.1)) for m in masks]
    makers += [lambda lib, m=m: lib.selective_transform(lib.adam(0.1), freeze_mask=m)
               for m in masks]
    makers.append(lambda lib: lib.named_chain(("clip", lib.clip_by_global_norm(1.0)),
                                              ("adam", lib.adam(0.1))))
    with jax.enable_x64(True):
        for make in makers:
            (want, their_state), (got, state) = run(optax, make), run(optim, make)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-14)
    assert type(state) is type(their_state) and list(state) == list(their_state)
    np.testing.assert_allclose(state["adam"][0].mu["w"].numpy(),
                               np.asarray(their_state["adam"][0].mu["w"]), rtol=1e-14)
