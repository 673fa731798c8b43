"""vmap runs no equation once per example for the primitives scanlib defines: the PRNG
primitives on a batch of keys, indexed reads and writes with every operand batched in any
combination, and the lanes of a while_loop under a second vmap. Each is checked against its
definition, the stack of f(x_i) over the examples (bit for bit where both run the same
operations; gradients too, vmap of grad and grad of vmap), and `scanlib.vmap.FALLBACKS` must
not grow. Last, every Primitive reachable from scanlib's modules has a batching rule.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import sys

import numpy as np
import pytest

import scanlib as sl
from scanlib.ops.primitive import Primitive
from scanlib.scan import cache as scan_cache
from scanlib.vmap import FALLBACKS
from test_vmap_rules import newton  # the cube root whose lanes stop apart

R = sl.random


def _np(x):
    return x.numpy() if isinstance(x, sl.Tensor) else np.asarray(x)


def _per_example(f, args, in_axes):
    B = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else sl.take(a, i, axis=ax) for a, ax in zip(args, in_axes)])
            for i in range(B)]
    columns = zip(*[sl.pytree.flatten(o)[0] for o in outs])
    return [np.stack([_np(x) for x in column]) for column in columns]


def _batched(f, args, in_axes=None):
    """vmap(f)(*args), checked to run no equation once per example."""
    scan_cache.clear()
    before = dict(FALLBACKS)
    got = sl.vmap(f, in_axes=in_axes if in_axes is not None else 0)(*args)
    grown = {k: v - before.get(k, 0) for k, v in FALLBACKS.items() if v != before.get(k, 0)}
    assert not grown, f"vmap ran these equations once per example: {grown}"
    return [_np(x) for x in sl.pytree.flatten(got)[0]]


def _check(f, args, in_axes=None, exact=True):
    axes = in_axes if in_axes is not None else (0,) * len(args)
    got, want = _batched(f, args, in_axes), _per_example(f, args, axes)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        if exact:
            assert np.array_equal(a, b, equal_nan=True), (a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# --- PRNG: a batch of keys is one call, equal to the per-key calls bit for bit -------------------
KEYS = R.split(R.PRNGKey(3), 5)
P = sl.tensor([0.1, 0.2, 0.3, 0.2, 0.2])
WEIGHTS = sl.tensor(np.random.default_rng(0).random((5, 3)))

ONE_KEY = {
    "split": lambda k: R.split(k, 3),
    "split_2d": lambda k: R.split(k, (2, 3)),
    "fold_in": lambda k: R.fold_in(k, 7),
    "bits": lambda k: R.bits(k, (2, 3)),
    "uniform": lambda k: R.uniform(k, (4,)),
    "uniform_float32": lambda k: R.uniform(k, (4,), dtype="float32"),
    "uniform_0d": lambda k: R.uniform(k, ()),
    "normal": lambda k: R.normal(k, (3, 2)),
    "normal_float32": lambda k: R.normal(k, (3, 2), dtype="float32"),
    "randint": lambda k: R.randint(k, (6,), 0, 10),
    "randint_int8": lambda k: R.randint(k, (6,), 0, 10, dtype="int8"),
    "permutation": lambda k: R.permutation(k, 7),
    "permutation_independent": lambda k: R.permutation(
        k, sl.arange(12.0).reshape(3, 4), axis=1, independent=True),
    "choice": lambda k: R.choice(k, 5, (3,)),
    "choice_no_replace": lambda k: R.choice(k, 5, (3,), replace=False),
    "choice_p": lambda k: R.choice(k, 5, (4,), p=P),
    "choice_p_no_replace": lambda k: R.choice(k, 5, (3,), replace=False, p=P),
    "categorical": lambda k: R.categorical(k, sl.tensor([0.1, 0.5, -1.0])),
    "bernoulli": lambda k: R.bernoulli(k, 0.3, (5,)),
    "gumbel": lambda k: R.gumbel(k, (3,)),
    "exponential": lambda k: R.exponential(k, (3,)),
    "split_then_draw": lambda k: R.normal(R.split(k)[1], (2,)),
}


@pytest.mark.parametrize("name", ONE_KEY)
def test_a_batch_of_keys_is_the_stack_of_each_keys_draws(name):
    _check(ONE_KEY[name], (KEYS,))


OTHER_BATCHED = {
    "fold_in_data": (lambda d: R.fold_in(R.PRNGKey(1), d),
                     (sl.tensor(np.arange(4, dtype=np.uint32)),)),
    "fold_in_key_and_data": (lambda k, d: R.fold_in(k, d),
                             (KEYS, sl.tensor(np.arange(5, dtype=np.int32)))),
    "seeds": (lambda s: R.PRNGKey(s), (sl.tensor(np.array([0, 1, 2**40, -5])),)),
    "randint_bound": (lambda k, h: R.randint(k, (3,), 0, h), (KEYS, sl.tensor(np.arange(1, 6)))),
    "randint_bound_only": (lambda h: R.randint(R.PRNGKey(0), (3,), 0, h),
                           (sl.tensor(np.arange(1, 6)),)),
    "choice_weights": (lambda k, p: R.choice(k, 3, (4,), p=p), (KEYS, WEIGHTS)),
    "choice_weights_only": (lambda p: R.choice(R.PRNGKey(0), 3, (2,), replace=False, p=p),
                            (WEIGHTS,)),
    "categorical_logits": (lambda lg: R.categorical(R.PRNGKey(0), lg), (WEIGHTS,)),
}


@pytest.mark.parametrize("name", OTHER_BATCHED)
def test_batched_seeds_data_bounds_and_weights(name):
    f, args = OTHER_BATCHED[name]
    _check(f, args)


def test_a_prng_key_in_a_while_loop_carry():
    def draw_until(key):
        def body(c):
            k, _, n = c
            k, sub = R.split(k)
            return k, R.uniform(sub, ()), n + 1

        return sl.while_loop(lambda c: c[1] < 0.8, body, (key, sl.tensor(0.0), sl.tensor(0)))

    keys = R.split(R.PRNGKey(0), 6)
    _check(draw_until, (keys,))
    assert len(set(_batched(draw_until, (keys,))[2].tolist())) > 1  # the lanes stop apart


def test_bad_weights_in_a_batch_are_named():
    p = sl.tensor(np.array([[0.2, 0.8], [0.5, -0.5]]))
    with pytest.raises(ValueError, match="finite, non-negative"):
        sl.jit(sl.vmap(lambda p: R.choice(R.PRNGKey(0), 2, (1,), p=p)))(p)


# --- indexing: reads and writes with x, the index arrays and the values batched in any mix ------
_rng = np.random.default_rng(0)
X = sl.tensor(_rng.standard_normal((4, 5, 6)))
X4 = sl.tensor(_rng.standard_normal((4, 3, 5, 6)))
I = sl.tensor(np.array([[0, 2], [1, 1], [4, 3], [2, 0]]))  # repeats: the last writer wins
J = sl.tensor(np.array([[5, 0], [1, 2], [3, 3], [0, 4]]))
V = sl.tensor(_rng.standard_normal((4, 2, 6)))
VC = sl.tensor(_rng.standard_normal((4, 5, 2)))
DISTINCT = sl.tensor(np.array([[0, 2], [1, 3], [4, 3], [2, 0]]))

INDEXING = {
    "get_x_i": (lambda x, i: x[i], (X, I), (0, 0)),
    "get_shared_x_i": (lambda x, i: x[i], (X[0], I), (None, 0)),
    "get_x_shared_i": (lambda x, i: x[i], (X, I[0]), (0, None)),
    "get_x_slice_i": (lambda x, i: x[:, i], (X, J), (0, 0)),
    "get_shared_x_slice_i": (lambda x, i: x[:, i], (X[0], J), (None, 0)),
    "get_x_i_j": (lambda x, i, j: x[i, j], (X, I, J), (0, 0, 0)),
    "get_x_i_shared_j": (lambda x, i, j: x[i, j], (X, I, J), (0, 0, None)),
    "get_x_none_slice_i": (lambda x, i: x[None, :, i], (X, J), (0, 0)),
    "get_x_ellipsis_i": (lambda x, i: x[..., i], (X, J), (0, 0)),
    "get_x_int_i": (lambda x, i: x[1, i], (X, J), (0, 0)),
    "get_x_i_slice_int": (lambda x, i: x[i % 3, :, 0], (X4, I), (0, 0)),
    "get_x_slice_slice_i": (lambda x, i: x[:, 1:3, i], (X4, J), (0, 0)),
    "get_x_slice_i_int": (lambda x, i: x[:, i, 0], (X4, I), (0, 0)),
    "get_x_in_axes_1": (lambda x, i: x[:, i], (sl.transpose(X, (1, 0, 2)), J), (1, 0)),
    "set_x_i_v": (lambda x, i, v: x.at[i].set(v), (X, I, V), (0, 0, 0)),
    "set_x_i_scalar": (lambda x, i: x.at[i].set(5.0), (X, I), (0, 0)),
    "set_shared_x_i": (lambda x, i: x.at[i].set(5.0), (X[0], I), (None, 0)),
    "set_shared_x_v": (lambda x, v: x.at[I[0]].set(v), (X[0], V), (None, 0)),
    "set_x_int_v": (lambda x, v: x.at[1].set(v[0]), (X, V), (0, 0)),
    "set_v_only": (lambda v: X[0].at[:, 1].set(v[:, 0]), (VC,), (0,)),
    "set_x_slice_i_v": (lambda x, i, v: x.at[:, i].set(v), (X, J, VC), (0, 0, 0)),
    "set_x_slice_i_shared_v": (lambda x, i, v: x.at[:, i].set(v), (X, J, VC[0]), (0, 0, None)),
    "set_v_only_slice_shared_i": (lambda v: X[0].at[:, J[0]].set(v), (VC,), (0,)),
    "set_x_slice_i_int": (lambda x, i: x.at[:, i, 0].set(sl.arange(6.0).reshape(3, 2)),
                          (X4, I), (0, 0)),
    "set_x_int_slice_i_v": (lambda x, i, v: x.at[0, :, i].set(v[:, 0] * 2.0), (X4, J, VC),
                            (0, 0, 0)),
    "add_x_i_v": (lambda x, i, v: x.at[i].add(v), (X, I, V), (0, 0, 0)),
    "add_shared_x_slice_i_v": (lambda x, i, v: x.at[:, i].add(v), (X[0], J, VC), (None, 0, 0)),
    "multiply_x_i_v": (lambda x, i, v: x.at[i].multiply(v), (X, DISTINCT, V), (0, 0, 0)),
    "take_clip": (lambda x, i: sl.take(x, i * 2 - 3, axis=1, mode="clip"), (X, J), (0, 0)),
    "take_wrap_shared_x": (lambda x, i: sl.take(x, i + 7, axis=0, mode="wrap"), (X[0], I),
                           (None, 0)),
    "take_along_axis": (lambda x, i: sl.take_along_axis(x, i[:, None] % 5, axis=0),
                        (X, I), (0, 0)),
}


@pytest.mark.parametrize("name", INDEXING)
def test_indexing_is_the_stack_of_examples(name):
    f, args, in_axes = INDEXING[name]
    _check(f, args, in_axes)


@pytest.mark.parametrize("name", [k for k in INDEXING if "int_slice" not in k])
def test_indexing_gradients_vmap_of_grad_and_grad_of_vmap(name):
    f, args, in_axes = INDEXING[name]

    def loss(*a):
        return sl.sum(sl.sin(f(*a)) * 1.3)

    argnums = tuple(n for n, a in enumerate(args) if a.dtype.kind == "f")
    grad = sl.grad(loss, argnums=argnums)
    per = [_np(g) for g in _per_example(grad, args, in_axes)]
    _check(grad, args, in_axes, exact=False)
    scan_cache.clear()
    before = dict(FALLBACKS)
    got = sl.grad(lambda *a: sl.sum(sl.vmap(loss, in_axes=in_axes)(*a)), argnums=argnums)(*args)
    assert dict(FALLBACKS) == before
    for g, p, n in zip(got, per, argnums):
        want = p.sum(axis=0) if in_axes[n] is None else np.moveaxis(p, 0, in_axes[n])
        np.testing.assert_allclose(_np(g), want, rtol=1e-12, atol=1e-12)


def test_indexing_forward_mode_jvp_of_vmap_and_vmap_of_jvp():
    def f(x, v, i):
        return sl.sin(x.at[:, i].set(v * x[:, i]))

    t = sl.tensor(_rng.standard_normal((4, 5, 6)))
    tv = sl.tensor(_rng.standard_normal((4, 5, 2)))
    want = np.stack([_np(sl.jvp(lambda x, v, b=b: f(x, v, J[b]), (X[b], VC[b]), (t[b], tv[b]))[1])
                     for b in range(4)])
    scan_cache.clear()
    before = dict(FALLBACKS)
    _, got = sl.jvp(lambda x, v: sl.vmap(f)(x, v, J), (X, VC), (t, tv))
    np.testing.assert_allclose(_np(got), want, rtol=1e-13, atol=1e-13)
    got = sl.vmap(lambda x, v, i, t, tv: sl.jvp(lambda x, v: f(x, v, i), (x, v), (t, tv))[1])(
        X, VC, J, t, tv)
    np.testing.assert_allclose(_np(got), want, rtol=1e-13, atol=1e-13)
    assert dict(FALLBACKS) == before


def test_a_repeated_index_in_one_example_is_still_an_error():
    with pytest.raises(ValueError, match="more than once"):
        sl.vmap(lambda x, i, v: x.at[i].multiply(v))(X, I, V)


# --- vmap of vmap of a while_loop whose lanes stop apart: one loop over every pair --------------
def grow(x, s):
    """Lanes stop apart; s is read by cond and body."""
    return sl.while_loop(lambda c: c < s * 10.0, lambda c: c * 1.5 + s, x)


XS = sl.tensor(np.array([[0.1, 0.5, 2.0], [1.0, 3.0, 0.01]]))
SS = sl.tensor([0.3, 2.0])


def _nested(f, a, s, s_outer):
    """vmap over the rows of a (and of s where s_outer) of vmap over a row's entries."""
    return sl.vmap(lambda x, s: sl.vmap(f, in_axes=(0, None))(x, s),
                   in_axes=(0, 0 if s_outer else None))(a, s)


def _nested_loop(f, a, s, s_outer):
    rows = [[f(a[i, j], s[i] if s_outer else s) for j in range(a.shape[1])]
            for i in range(a.shape[0])]
    return [np.array([[_np(sl.pytree.flatten(e)[0][k]) for e in row] for row in rows])
            for k in range(len(sl.pytree.flatten(rows[0][0])[0]))]


def test_vmap_of_vmap_of_a_while_loop_is_one_loop():
    a = sl.tensor(np.logspace(-2, 3, 6).reshape(2, 3))
    _check(lambda r: sl.vmap(newton)(r), (a,))
    counts = _batched(lambda r: sl.vmap(newton)(r), (a,))[1]
    assert len(set(counts.ravel().tolist())) > 1  # the lanes did stop apart


@pytest.mark.parametrize("s_outer", [True, False])
def test_vmap_of_vmap_of_while_with_a_value_the_lanes_share(s_outer):
    s = SS if s_outer else SS[0]
    scan_cache.clear()
    before = dict(FALLBACKS)
    got = _nested(grow, XS, s, s_outer)
    assert dict(FALLBACKS) == before
    (want,) = _nested_loop(grow, XS, s, s_outer)
    assert np.array_equal(_np(got), want)


@pytest.mark.parametrize("s_outer", [True, False])
def test_vmap_of_vmap_of_while_gradients(s_outer):
    s = SS if s_outer else SS[0]
    grad = sl.grad(grow, argnums=(0, 1))
    want_x, want_s = _nested_loop(grad, XS, s, s_outer)
    scan_cache.clear()
    before = dict(FALLBACKS)
    got = _nested(grad, XS, s, s_outer)  # vmap of vmap of grad
    np.testing.assert_allclose(_np(got[0]), want_x, rtol=1e-13)
    np.testing.assert_allclose(_np(got[1]), want_s, rtol=1e-13)
    gx, gs = sl.grad(lambda x, s: sl.sum(_nested(grow, x, s, s_outer)), argnums=(0, 1))(XS, s)
    assert dict(FALLBACKS) == before
    np.testing.assert_allclose(_np(gx), want_x, rtol=1e-13)
    np.testing.assert_allclose(_np(gs), want_s.sum(axis=1) if s_outer else want_s.sum(),
                               rtol=1e-13)


# --- every primitive scanlib defines has a batching rule ----------------------------------------
# {name: why vmap never needs to batch it}; each reason is checked by a test of its own.
TAPE_ONLY = "bound only on the tape (no trace open), so never an equation vmap interprets"
NO_RULE_NEEDED: dict = {
    "reused": f"checkpoint's replay of a value a saving policy kept: {TAPE_ONLY}",
    "revolve_scan": f"scan(checkpoint=('revolve', s)) outside a trace: {TAPE_ONLY}",
    "mpi_allreduce": "scanlib.distributed's collective, refused inside vmap and every trace",
    "mpi_broadcast": "scanlib.distributed's collective, refused inside vmap and every trace",
    "fused_region": "a run of jit's equations in its replay, made after tracing, never traced",
    "while_loop_keeping_tape": "jit's replay of a loop and its gradient, made after tracing",
    "while_loop_vjp_from_tape": "jit's replay of a loop and its gradient, made after tracing",
}


def _primitives():
    """Every Primitive instance reachable from scanlib's modules (module attributes, and any
    other instance alive once they are imported whose impl scanlib defines, such as ones
    made inside functions; not a test's own)."""
    for info in pkgutil.walk_packages(sl.__path__, "scanlib."):
        importlib.import_module(info.name)
    found = {}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("scanlib"):
            for value in vars(module).values():
                if isinstance(value, Primitive):
                    found[id(value)] = value
    for obj in gc.get_objects():
        try:
            if isinstance(obj, Primitive) and getattr(obj.impl, "__module__", "").startswith(
                    "scanlib"):
                found[id(obj)] = obj
        except ReferenceError:
            continue
    return sorted(found.values(), key=lambda p: p.name)


def test_every_primitive_has_a_batching_rule():
    prims = _primitives()
    assert len(prims) > 100, [p.name for p in prims]  # the walk did find scanlib's primitives
    missing = [p.name for p in prims
               if p.batch is None and p.vmap is None and not p.elementwise
               and p.name not in NO_RULE_NEEDED]
    assert not missing, f"no batching rule (vmap runs these once per example): {missing}"
    stale = set(NO_RULE_NEEDED) - {p.name for p in prims if p.batch is None and p.vmap is None}
    assert not stale, f"these have a rule now; take them off NO_RULE_NEEDED: {stale}"


def _names(graph, found):
    """The primitive names of graph's equations and of every graph nested in their params."""
    for eqn in graph.eqns:
        found.add(eqn.prim.name)
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(inner, "eqns"):
                    _names(inner, found)
    return found


W3 = sl.tensor(np.random.default_rng(2).standard_normal((3, 3)))
H = sl.tensor(np.random.default_rng(1).standard_normal((4, 3)))


def _kept_by_policy(h):
    return sl.sum(sl.checkpoint(lambda h: sl.tanh(h @ W3) * h,
                                policy=sl.checkpoint_policies.everything_saveable)(h))


def _revolved(h):
    c, ys = sl.scan(lambda c, x: (sl.tanh(c @ W3) + x, c), h, sl.tensor(np.ones((6, 3))),
                    checkpoint=("revolve", 2))
    return sl.sum(c) + sl.sum(ys)


@pytest.mark.parametrize("name, f", [("reused", _kept_by_policy), ("revolve_scan", _revolved)])
def test_tape_only_primitives_never_reach_a_graph(name, f, monkeypatch):
    prim = next(p for p in _primitives() if p.name == name)
    calls = []
    impl = prim.impl
    monkeypatch.setattr(prim, "impl", lambda *a, **k: calls.append(1) or impl(*a, **k))
    sl.grad(f)(H[0])
    assert calls, f"{name} was not bound on the tape: the check below would prove nothing"
    _, vjp_fn = sl.vjp(f, H[0])  # recorded on the tape, its walk traced by vmap below
    traced = {
        "grad": (sl.grad(f), H[0]),
        "jit of grad": (sl.jit(sl.grad(f)), H[0]),
        "vmap of grad": (sl.vmap(sl.grad(f)), H),
        "grad of vmap": (sl.grad(lambda x: sl.sum(sl.vmap(f)(x))), H),
        "vmap of a vjp function": (sl.vmap(vjp_fn), sl.tensor([1.0, 2.0, -0.5])),
    }
    for what, (g, x) in traced.items():
        assert name not in _names(sl.make_graph(g)(x), set()), what
    scan_cache.clear()
    before = dict(FALLBACKS)
    got = sl.vmap(sl.grad(f))(H)
    assert dict(FALLBACKS) == before
    np.testing.assert_allclose(_np(got), np.stack([_np(sl.grad(f)(h)) for h in H]),
                               rtol=1e-13, atol=1e-13)
