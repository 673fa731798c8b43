"""jit's runs of large arithmetic as numba kernels (scanlib/scan/regions.py), and nests that
store work other operations read (native_nests.Fused.stored).

A jitted call whose scans asked for compiler="numba" and that is not one fused kernel runs
its straight-line code, with each stretch of arithmetic on large arrays (a softmax's max and
sums over a few actions, a tanh layer's backward) as one kernel call, where it measures
faster than the NumPy calls. Each program here runs eagerly on NumPy's loops and under jit;
the region kernels must have run (`kernel_turn` is forced, so that timing cannot hide them),
with the straight-line code's dtypes and values to rounding.
"""

import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native
from test_native_nests import kernel_source
from test_numba_loop import _t, check

regions = sys.modules["scanlib.scan.regions"]
RNG = np.random.default_rng(3)


@pytest.fixture
def kernels_always(monkeypatch):
    """Region kernels run from their second call on, whatever their timing; and a call is
    never one fused kernel (its short scans would make it one)."""
    monkeypatch.setattr(native.TierChoice, "kernel_turn", lambda self: True)
    monkeypatch.setattr(sys.modules["scanlib.scan.fused"], "ENABLED", False)


def _leaves(out):
    return [np.asarray(a.numpy() if isinstance(a, sl.Tensor) else a)
            for a in sl.pytree.flatten(out)[0]]


def _trace(jitted):
    (trace,) = jitted._traces.values()
    return trace


def ppo_loss(params, obs, actions, rewards, compiler):
    """A policy's log-softmax over four actions and a value head on [T, B, H] activations,
    and a reverse scan of the rewards: GAE's loss, small."""
    hidden = sl.tanh(obs @ params["w1"] + params["b1"])
    logits = hidden @ params["w_pi"]
    logp_all = logits - sl.max(logits, axis=-1, keepdims=True)
    logp_all = logp_all - sl.log(sl.sum(sl.exp(logp_all), axis=-1, keepdims=True))
    value = (hidden @ params["w_v"])[..., 0]

    def step(adv, t):
        r, v = t
        adv = r - v + 0.9 * adv
        return adv, adv

    _, adv = sl.scan(step, sl.zeros_like(rewards[0]), (rewards, sl.stop_gradient(value)),
                     reverse=True, compiler=compiler)
    logp = sl.sum(logp_all * actions, axis=-1)
    entropy = -sl.mean(sl.sum(sl.exp(logp_all) * logp_all, axis=-1))
    return -sl.mean(logp * adv) + 0.5 * sl.mean((value - adv) ** 2) - 0.01 * entropy


def _ppo_args(T=64, B=8, D=5, H=16, A=4):
    params = {"w1": RNG.normal(size=(D, H)) / D ** 0.5, "b1": RNG.normal(size=H) * 0.1,
              "w_pi": RNG.normal(size=(H, A)) / H ** 0.5, "w_v": RNG.normal(size=(H, 1))}
    actions = np.eye(A)[RNG.integers(0, A, size=(T, B))]
    return params, RNG.normal(size=(T, B, D)), actions, RNG.normal(size=(T, B))


def test_a_policy_losses_arithmetic_runs_as_region_kernels(kernels_always):
    args = _ppo_args()
    want = _leaves(sl.value_and_grad(lambda *a: ppo_loss(*a, "numpy"))(*args))
    jitted = sl.jit(sl.value_and_grad(lambda *a: ppo_loss(*a, "numba")))
    jitted(*args)
    trace = _trace(jitted)
    assert trace.fused is None and len(trace.regions) >= 2
    before = native.STATS["region calls"]
    got = _leaves(jitted(*args))
    assert native.STATS["region calls"] - before == len(trace.regions)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _names(graph, run):
    start, stop = run
    return [e.prim.name for e in graph.eqns[start:stop]]


def test_what_joins_a_run():
    """tanh on large arrays and products end a run; a max or a sum over a short last axis
    joins it, a long sum does not."""

    def f(x, w):
        y = (x * 2.0 + 1.0) * x - 3.0  # a run: mul, add, mul, sub
        z = sl.tanh(y)  # ends it
        m = z - sl.max(z, axis=-1, keepdims=True)  # a run: max over 4, sub ...
        s = sl.sum(m) / m.size  # ... a long sum ends it
        u = z @ w  # a product ends a run
        return sl.sum(u * u, axis=-1) * s  # mul, sum over 4: a run

    x, w = RNG.normal(size=(16384, 4)), RNG.normal(size=(4, 4))
    jitted = sl.jit(f)
    jitted(x, w)
    graph = _trace(jitted).graph
    got = [_names(graph, r) for r in regions.runs(graph)]
    assert ["mul", "add", "mul", "sub"] in got
    assert any(names[:2] == ["max", "sub"] and "sum" not in names for names in got)
    assert any(names[:2] == ["mul", "sum"] for names in got)
    assert not any({"tanh", "matmul"} & set(names) for names in got)


def test_values_where_a_kernel_could_differ(kernels_always):
    """NaN wins a max over the short axis; -0.0 and infinities pass through the arithmetic."""
    x = RNG.normal(size=(4096, 4))
    x[3, 2], x[7, 0], x[9] = np.nan, -0.0, [np.inf, -np.inf, 1.0, 0.0]

    def f(x, c):
        (c,), _ = sl.scan(lambda c, _: ((c[0] * 1.0,), None), (c,), None, length=2,
                          compiler="numba")
        m = x - sl.max(x, axis=-1, keepdims=True)
        return m * c - x * 0.5, sl.min(x * c, axis=-1)

    want = _leaves(f(x, 2.0))
    jitted = sl.jit(f)
    jitted(x, 2.0)
    assert _trace(jitted).regions
    before = native.STATS["region calls"]
    got = _leaves(jitted(x, 2.0))
    assert native.STATS["region calls"] > before
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def test_numpy_set_to_raise_is_honoured(kernels_always):
    def f(x, y):
        (s,), _ = sl.scan(lambda c, _: ((c[0] * 1.0,), None), (sl.sum(y),), None, length=2,
                          compiler="numba")
        return sl.sum((x / y + s) * x, axis=-1)

    x, y = RNG.normal(size=(8192, 3)), RNG.normal(size=(8192, 3))
    jitted = sl.jit(f)
    jitted(x, y)
    jitted(x, y)
    assert _trace(jitted).regions
    y[5, 1] = 0.0
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        jitted(x, y)


def test_not_without_numba_scans_nor_when_disabled(monkeypatch):
    """Only where the call's scans asked for numba (or "auto"), and regions.ENABLED."""
    x = RNG.normal(size=(8192, 3))

    def f(x, compiler):
        c, _ = sl.scan(lambda c, _: (c * 1.0, None), 1.0, None, length=2, compiler=compiler)
        return sl.sum(x * c - x * x, axis=-1)

    jitted = sl.jit(lambda x: f(x, "numpy"))
    jitted(x)
    assert _trace(jitted).regions == []
    monkeypatch.setattr(regions, "ENABLED", False)
    jitted = sl.jit(lambda x: f(x, "numba"))
    jitted(x)
    assert _trace(jitted).regions == []


# --- stored work in a scan's kernel: one nest computes it and writes its array -----------------
@pytest.fixture
def stored_at_any_size(monkeypatch):
    monkeypatch.setattr(sys.modules["scanlib.scan.loop.native_nests"], "STORED_MIN", 0)


def test_work_read_twice_is_computed_in_its_first_readers_nest(stored_at_any_size):
    def f(c, x):  # c [3, 4]
        a = c * x + 1.0  # read by b and by the output
        b = a * a - x
        return b * 0.5, (a, sl.sum(b, axis=1))

    check(f, _t((3, 4)), _t((5, 3, 4)))
    src = kernel_source(f, _t((3, 4)), _t((5, 3, 4)))
    # a and b in one nest, b * 0.5 in another, b's sum: three (each on its own: five)
    assert src.count("for _i1 in range(4):") == 3


def test_an_array_whose_writer_is_pending_is_written_before_it_is_read(stored_at_any_size):
    """a is read by b (whose own work waits for its reader d) and by c: c must read a's array
    after b's nest has written it, not before."""

    def f(h, x):  # h [4, 3]
        a = h * 2.0 + x
        b = a + 1.0
        c = sl.sum(a, axis=0)  # another shape: reads a's array
        e = a * 3.0  # the same shape: reads a's array too
        d = b * e
        return d * 0.1, (c, d)

    check(f, _t((4, 3)), _t((6, 4, 3)))
