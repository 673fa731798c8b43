"""checkpoint/remat and scan(checkpoint=...): values and gradients of any order are those of
the function (the loop) without checkpointing, memory is what the schedule promises (as a
ratio, with a wide margin), and bad options get errors that list the allowed ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

import scanlib as sl
from bench.checkpoint_memory import peak_bytes
from scanlib import pytree
from scanlib.scan.schedule import Revolve, binomial_split, parse, recomputed_steps
from scanlib.testing import check_grads

RNG = np.random.default_rng(7)
SCHEDULES = [1, 2, 3, 5, "sqrt", ("revolve", 1), ("revolve", 2), ("revolve", 4)]


def _close(a, b, rtol=1e-10, atol=1e-12):
    for x, y in zip(np.atleast_1d(a), np.atleast_1d(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def _tree_close(a, b, **kw):
    la, lb = pytree.flatten(a)[0], pytree.flatten(b)[0]
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x.detach() if isinstance(x, sl.Tensor) else x),
                                   np.asarray(y.detach() if isinstance(y, sl.Tensor) else y),
                                   **({"rtol": 1e-10, "atol": 1e-12} | kw))


# --- checkpoint(f) --------------------------------------------------------------------------
W = sl.tensor(RNG.standard_normal((3, 3)) * 0.7)


def _f(h, x):
    return sl.tanh(h @ W + x) * sl.sin(h)


def test_checkpoint_values_and_gradients_equal_f():
    h, x = sl.tensor(RNG.standard_normal(3)), sl.tensor(RNG.standard_normal(3))
    c = sl.checkpoint(_f)
    _tree_close(c(h, x), _f(h, x), rtol=0, atol=0)
    g1 = sl.grad(lambda h, x: (c(c(h, x), x) ** 2).sum(), argnums=(0, 1))(h, x)
    g2 = sl.grad(lambda h, x: (_f(_f(h, x), x) ** 2).sum(), argnums=(0, 1))(h, x)
    _tree_close(g1, g2)
    check_grads(lambda h, x: c(c(h, x), x), (h, x), order=2)


def test_checkpoint_second_order_and_nested():
    h = sl.tensor(RNG.standard_normal(3))
    inner = sl.checkpoint(lambda h: _f(h, h))
    outer = sl.remat(lambda h: inner(inner(h)) * 2.0)
    ref = lambda h: _f(_f(h, h), _f(h, h)) * 2.0  # noqa: E731
    _tree_close(sl.hessian(lambda h: outer(h).sum())(h), sl.hessian(lambda h: ref(h).sum())(h))
    v = sl.tensor(RNG.standard_normal(3))
    hvp = lambda fn: sl.grad(lambda h: (sl.grad(lambda u: fn(u).sum())(h) * v).sum())(h)  # noqa: E731
    _tree_close(hvp(outer), hvp(ref))


def test_checkpoint_closed_over_tensors_get_gradients_on_the_tape():
    Wp = sl.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    x = sl.tensor(RNG.standard_normal(3))
    sl.checkpoint(lambda x: sl.tanh(x @ Wp).sum())(x).backward()
    got = Wp.grad.numpy().copy()
    Wp.grad = None
    sl.tanh(x @ Wp).sum().backward()
    np.testing.assert_allclose(got, Wp.grad.numpy(), rtol=1e-12)


def test_checkpoint_pytrees_numbers_and_integer_inputs():
    def f(p, n, scale):
        return {"y": sl.tanh(p["a"] * scale) + n, "n": n * 2}, p["b"].sum()

    p = {"a": sl.tensor([0.1, 0.2]), "b": sl.tensor([1.0, 2.0, 3.0])}
    n = sl.tensor(3)
    out = sl.checkpoint(f)(p, n, 2.0)
    ref = f(p, n, 2.0)
    _tree_close(out, ref, rtol=0, atol=0)
    assert out[0]["n"].dtype == ref[0]["n"].dtype
    g = sl.grad(lambda p: sl.checkpoint(f)(p, n, 2.0)[0]["y"].sum())(p)
    gr = sl.grad(lambda p: f(p, n, 2.0)[0]["y"].sum())(p)
    _tree_close(g, gr)


def test_checkpoint_inside_a_scan_body_equals_the_loop():
    xs = sl.tensor(RNG.standard_normal((9, 3)))
    h0 = sl.tensor(RNG.standard_normal(3))
    step = sl.checkpoint(_f)

    def with_scan(h0, xs):
        c, ys = sl.scan(lambda h, x: (step(h, x), (h * x).sum()), h0, xs)
        return c.sum() + (ys ** 2).sum()

    def with_loop(h0, xs):
        h, total = h0, 0.0
        for t in range(xs.shape[0]):
            total = total + ((h * xs[t]).sum()) ** 2
            h = _f(h, xs[t])
        return h.sum() + total

    _close(with_scan(h0, xs).numpy(), with_loop(h0, xs).numpy())
    _tree_close(sl.grad(with_scan, argnums=(0, 1))(h0, xs),
                sl.grad(with_loop, argnums=(0, 1))(h0, xs))
    check_grads(with_scan, (h0, xs), order=2)


@pytest.mark.parametrize("interpret", [False, True])
def test_checkpoint_of_a_scan_and_interpreted(interpret):
    xs = sl.tensor(RNG.standard_normal((6, 3)))
    h0 = sl.tensor(RNG.standard_normal(3))

    def run(h0, xs):
        return sl.scan(lambda h, x: (_f(h, x), h.sum()), h0, xs, interpret=interpret)

    loss = lambda h0, xs: sum(v.sum() for v in sl.checkpoint(run)(h0, xs))  # noqa: E731
    ref = lambda h0, xs: sum(v.sum() for v in run(h0, xs))  # noqa: E731
    _tree_close(sl.grad(loss, argnums=(0, 1))(h0, xs), sl.grad(ref, argnums=(0, 1))(h0, xs))


def test_checkpoint_errors():
    with pytest.raises(TypeError, match="callable"):
        sl.checkpoint(3)
    with pytest.raises(TypeError, match="policy must be None or a function"):
        sl.checkpoint(_f, policy="dots")
    with pytest.raises(TypeError, match="name must be a string"):
        sl.checkpoint_name(sl.tensor(1.0), 3)
    with pytest.raises(TypeError, match=r"args\[1\] is a str"):
        sl.checkpoint(lambda a, b: a)(sl.tensor(1.0), "x")
    with pytest.raises(TypeError, match=r"args\[2\] is a str"):  # paths count static ones
        sl.checkpoint(lambda a, b, c: a, static_argnums=0)("s", sl.tensor(1.0), "x")
    with pytest.raises(TypeError, match="an int or a tuple of ints"):
        sl.checkpoint(_f, static_argnums="1")
    with pytest.raises(ValueError, match="names position 2.*2 positional"):
        sl.checkpoint(_f, static_argnums=2)(sl.tensor(1.0), sl.tensor(1.0))


@pytest.mark.parametrize("nums", [(1, 2), (-2, -1), 1])
def test_static_argnums_reach_f_as_given(nums):
    # as jax.checkpoint: a string choosing the activation, an int used as a loop count
    W = sl.tensor(RNG.standard_normal((3, 3)) * 0.5, requires_grad=True)
    h0 = sl.tensor(RNG.standard_normal(3))
    act = {"tanh": sl.tanh, "sin": sl.sin}

    def f(h, mode, n=2):
        for _ in range(n):
            h = act[mode](h @ W)
        return h.sum()

    args = ("sin",) if nums == 1 else ("tanh", 3)
    checkpointed = sl.checkpoint(f, static_argnums=nums)
    np.testing.assert_allclose(sl.grad(lambda h: checkpointed(h, *args))(h0).numpy(),
                               sl.grad(lambda h: f(h, *args))(h0).numpy(), rtol=1e-12)
    grads = []  # the closed-over W gets its gradient through the checkpointed call too
    for run in (lambda: checkpointed(h0, *args), lambda: f(h0, *args)):
        W.grad = None
        run().backward()
        grads.append(W.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


# --- saving policies (jax.checkpoint_policies) -----------------------------------------------
_POLICIES = {name: getattr(sl.checkpoint_policies, name) for name in (
    "everything_saveable", "nothing_saveable", "dots_saveable",
    "dots_with_no_batch_dims_saveable")}
_POLICIES["only t"] = sl.checkpoint_policies.save_only_these_names("t")
_POLICIES["all but t"] = sl.checkpoint_policies.save_any_names_but_these("t")
_POLICIES["both"] = sl.checkpoint_policies.save_from_both_policies(
    sl.checkpoint_policies.dots_saveable, _POLICIES["only t"])
_W = sl.tensor(RNG.standard_normal((3, 3)) * 0.5)


def _policy_f(h):
    # exp's rule reads its output: a kept value must still be differentiated through
    b = sl.exp(sl.checkpoint_name(sl.tanh(h @ _W), "t"))
    return sl.sin(b @ _W) * b + sl.einsum("i,ij->j", h, _W)


@pytest.mark.parametrize("name", list(_POLICIES))
def test_policies_keep_values_and_gradients_of_any_order(name):
    ck = sl.checkpoint(_policy_f, policy=_POLICIES[name])
    h0 = sl.tensor(RNG.standard_normal(3))
    xs = sl.tensor(RNG.standard_normal((4, 3)))

    def in_scan(g, h):
        return lambda h: sl.scan(lambda c, x: (c + g(x * h).sum(), None), sl.tensor(0.0), xs)[0]

    for got, want in [(ck(h0), _policy_f(h0)),
                      (sl.grad(lambda h: ck(h).sum())(h0),
                       sl.grad(lambda h: _policy_f(h).sum())(h0)),
                      (sl.hessian(lambda h: ck(h).sum())(h0),
                       sl.hessian(lambda h: _policy_f(h).sum())(h0)),
                      (sl.hessian(in_scan(ck, h0))(h0), sl.hessian(in_scan(_policy_f, h0))(h0)),
                      (sl.jvp(ck, (h0,), (xs[0],))[1], sl.jvp(_policy_f, (h0,), (xs[0],))[1]),
                      (sl.vmap(sl.grad(lambda h: ck(h).sum()))(xs),
                       sl.vmap(sl.grad(lambda h: _policy_f(h).sum()))(xs))]:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def _counting():
    calls = [0]

    def impl(x):
        calls[0] += 1
        return np.sin(x)

    return calls, sl.Primitive("heavy", impl, lambda g, out, x: (g * sl.cos(x),))


@pytest.mark.parametrize("where", ["tape", "scan"])
def test_a_saved_value_is_not_recomputed(where):
    calls, heavy = _counting()
    f = lambda h: sl.tanh(heavy(h * 2.0)) * h  # noqa: E731
    keep_heavy = lambda prim, *avals, **params: prim.name == "heavy"  # noqa: E731
    h0, xs = sl.tensor([0.3, -0.7]), sl.tensor(RNG.standard_normal((3, 2)))
    counts, grads = {}, {}
    for policy in (None, keep_heavy):
        ck = sl.checkpoint(f, policy=policy)
        if where == "tape":
            loss = lambda h, ck=ck: ck(h).sum()  # noqa: E731
        else:
            loss = lambda h, ck=ck: sl.scan(  # noqa: E731
                lambda c, x: (c + ck(x * h).sum(), None), sl.tensor(0.0), xs)[0]
        loss(h0)  # traces (f runs once on stand-ins; scan bodies are cached)
        calls[0] = 0
        grads[policy] = sl.grad(loss)(h0).numpy()
        counts[policy] = calls[0]
    steps = 1 if where == "tape" else 3
    # without the policy, the backward pass computes heavy again at every step (and traces
    # it once more inside the backward body): with it, neither
    assert counts[None] - counts[keep_heavy] >= steps, counts
    np.testing.assert_allclose(grads[keep_heavy], grads[None], rtol=1e-12)


def test_dots_with_no_batch_dims():
    policy = sl.checkpoint_policies.dots_with_no_batch_dims_saveable
    graph = sl.make_graph(lambda a, b, c: (a @ b, c @ c, c @ a, sl.einsum("ij,jk->ik", a, b),
                                           sl.einsum("bij,bjk->bik", c, c), sl.vdot(a, a),
                                           sl.einsum("ij->", a)))(
        np.ones((2, 2)), np.ones((2, 2)), np.ones((3, 2, 2)))
    # as JAX's dot_general: c @ a has free leading axes, not batch axes; a one-operand
    # einsum is a reduction, not a product
    kept = [bool(policy(e.prim, *e.invars, **e.params)) for e in graph.eqns]
    assert kept == [True, False, True, True, False, True, False]
    dots = [bool(sl.checkpoint_policies.dots_saveable(e.prim, *e.invars, **e.params))
            for e in graph.eqns]
    assert dots == [True, True, True, True, True, True, False]


def test_checkpoint_name_in_a_numba_scan_body():
    pytest.importorskip("numba")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        total = sl.scan(lambda c, x: (c + sl.checkpoint_name(x * 2.0, "a"), None), 0.0,
                        np.arange(4.0), compiler="numba")[0]
    assert float(total) == 12.0


# Found by an adversarial pass (session 8): a checkpoint with a policy bound by another
# checkpoint's replay, or by jit's graph on the tape, had nothing holding its kept values.
@pytest.mark.parametrize("how", ["nested", "jit", "jit inside"])
def test_a_checkpoint_with_a_policy_inside_another_or_under_jit(how):
    inner = sl.checkpoint(lambda h: sl.exp(sl.sin(h)),
                          policy=sl.checkpoint_policies.everything_saveable)
    f = {"nested": sl.checkpoint(lambda h: inner(sl.tanh(h))),
         "jit": sl.jit(sl.checkpoint(lambda h: inner(sl.tanh(h)))),
         "jit inside": sl.checkpoint(lambda h: sl.jit(inner)(sl.tanh(h)))}[how]
    ref = lambda h: sl.exp(sl.sin(sl.tanh(h)))  # noqa: E731
    h0 = sl.tensor([0.3, -0.7, 1.1])
    for got, want in [(sl.grad(lambda h: f(h).sum())(h0), sl.grad(lambda h: ref(h).sum())(h0)),
                      (sl.jvp(f, (h0,), (h0,))[1], sl.jvp(ref, (h0,), (h0,))[1]),
                      (sl.hessian(lambda h: f(h).sum())(h0),
                       sl.hessian(lambda h: ref(h).sum())(h0))]:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


# --- scan(checkpoint=...) ---------------------------------------------------------------------
def _rnn(Wh, xs, h0, reverse=False, checkpoint=None, dim=0):
    def step(c, x):
        h, n = c
        h = sl.tanh(h @ Wh + x)
        return (h, n + 1), {"s": (h * h).sum(), "h": h}

    (h, n), ys = sl.scan(step, (h0, sl.tensor(0)), xs, reverse=reverse, dim=dim,
                         checkpoint=checkpoint)
    T = ys["s"].shape[0]
    return h.sum() + (ys["s"] * sl.arange(1.0, T + 1.0)).sum() + ys["h"][::2].sum(), n


@pytest.mark.parametrize("T", [0, 1, 2, 3, 4, 7, 9, 10])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_scan_checkpoint_equals_plain_scan(T, reverse, schedule):
    Wh = sl.tensor(RNG.standard_normal((3, 3)) * 0.6)
    xs = sl.tensor(RNG.standard_normal((T, 3)))
    h0 = sl.tensor(RNG.standard_normal(3))
    got, n = _rnn(Wh, xs, h0, reverse, schedule)
    ref, m = _rnn(Wh, xs, h0, reverse, None)
    assert int(n.item()) == int(m.item()) == T and n.dtype == m.dtype
    _close(got.numpy(), ref.numpy())
    g = sl.grad(lambda *a: _rnn(*a, reverse, schedule)[0], argnums=(0, 1, 2))(Wh, xs, h0)
    r = sl.grad(lambda *a: _rnn(*a, reverse, None)[0], argnums=(0, 1, 2))(Wh, xs, h0)
    _tree_close(g, r)


@pytest.mark.parametrize("schedule", [2, "sqrt", ("revolve", 2)])
def test_scan_checkpoint_second_order_and_finite_differences(schedule):
    Wh = sl.tensor(RNG.standard_normal((3, 3)) * 0.6)
    xs = sl.tensor(RNG.standard_normal((3, 7)))  # scanned along dim=1
    h0 = sl.tensor(RNG.standard_normal(3))
    loss = lambda Wh, xs, h0: _rnn(Wh, xs.T, h0, False, schedule)[0]  # noqa: E731
    ref = lambda Wh, xs, h0: _rnn(Wh, xs.T, h0, False, None)[0]  # noqa: E731
    _tree_close(sl.hessian(loss)(Wh, xs, h0), sl.hessian(ref)(Wh, xs, h0))
    check_grads(loss, (Wh, xs, h0), order=2)
    dimmed = lambda Wh, xs, h0: _rnn(Wh, xs, h0, True, schedule, dim=1)[0]  # noqa: E731
    _close(dimmed(Wh, xs, h0).numpy(), _rnn(Wh, xs, h0, True, None, dim=1)[0].numpy())


@pytest.mark.parametrize("inner_schedule", [2, ("revolve", 2)])
def test_scan_checkpoint_without_xs_weak_init_and_nested(inner_schedule):
    W2 = sl.tensor(RNG.standard_normal((2, 2)) * 0.5)
    xs = sl.tensor(RNG.standard_normal((4, 2)))

    def outer(W2):
        def body(c, x):  # traced: a revolve schedule in here runs as nested checkpoints
            inner, _ = sl.scan(lambda a, _: (sl.tanh(a @ W2) + x, None), c, length=5,
                               checkpoint=inner_schedule)
            return inner, inner.sum()
        c, ys = sl.scan(body, sl.ones(2), xs, checkpoint="sqrt")
        return c.sum() + ys.sum()

    def plain(W2):
        def body(c, x):
            inner, _ = sl.scan(lambda a, _: (sl.tanh(a @ W2) + x, None), c, length=5)
            return inner, inner.sum()
        c, ys = sl.scan(body, sl.ones(2), xs)
        return c.sum() + ys.sum()

    _tree_close(sl.grad(outer)(W2), sl.grad(plain)(W2))
    # A Python-number init adopts the dtype f gives it, as without checkpointing.
    xs32 = sl.tensor(np.arange(6, dtype=np.float32))
    c, ys = sl.scan(lambda c, x: (c + x, c * x), 0.0, xs32, checkpoint=4)
    c0, ys0 = sl.scan(lambda c, x: (c + x, c * x), 0.0, xs32)
    assert c.dtype == c0.dtype == np.float32 and ys.dtype == ys0.dtype
    _close(ys.numpy(), ys0.numpy(), rtol=0, atol=0)


def test_scan_checkpoint_matches_jax_checkpointed_scan():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    Wn = RNG.standard_normal((3, 3)) * 0.6
    xn = RNG.standard_normal((12, 3))

    def jloss(W):
        def seg(h, xseg):
            return jax.lax.scan(lambda h, x: (jnp.tanh(h @ W + x), None), h, xseg)[0], None
        h, _ = jax.lax.scan(jax.checkpoint(seg), jnp.zeros(3), xn.reshape(4, 3, 3))
        return (h ** 2).sum()

    def sloss(W):
        h, _ = sl.scan(lambda h, x: (sl.tanh(h @ W + x), None), sl.zeros(3), sl.tensor(xn),
                       checkpoint=3)
        return (h ** 2).sum()

    with jax.enable_x64(True):
        want = np.asarray(jax.grad(jloss)(jnp.asarray(Wn)))
    np.testing.assert_allclose(sl.grad(sloss)(sl.tensor(Wn)).numpy(), want, rtol=1e-10)


@pytest.mark.parametrize("bad", [0, -2, True, "log", ("revolve", 0), ("revolve",), 2.5,
                                 ("binomial", 3)])
def test_bad_checkpoint_option_lists_the_allowed_ones(bad):
    with pytest.raises(ValueError, match=r'"sqrt".*revolve'):
        sl.scan(lambda c, x: (c + x, None), 0.0, sl.ones(3), checkpoint=bad)




def test_checkpointed_scan_keeps_far_less_memory():
    T, B, H = 200, 32, 64
    Wh = sl.tensor(RNG.standard_normal((H, H)) * 0.1)
    xs = sl.tensor(RNG.standard_normal((T, B, H)))

    def grad_with(schedule):
        def loss(Wh):
            _, ys = sl.scan(lambda h, x: (sl.tanh(sl.tanh(h @ Wh + x) * 1.5), h.sum(-1)),
                            sl.zeros((B, H)), xs, checkpoint=schedule)
            return (ys ** 2).sum()
        return lambda: sl.grad(loss)(Wh)

    plain = peak_bytes(grad_with(None))
    assert peak_bytes(grad_with("sqrt")) < plain / 2
    assert peak_bytes(grad_with(("revolve", 4))) < plain / 2


def test_revolve_memory_does_not_grow_with_the_length():
    """("revolve", s) on the tape keeps at most s carries and one step's residuals: its peak
    over a gradient is the same for 50 steps and 400 (the schedule once ran as nested
    checkpoints whose traced graphs held a few KB of Python objects per step)."""
    H = 64
    Wh = sl.tensor(RNG.standard_normal((H, H)) * 0.1)

    def peak(T):
        xs = sl.tensor(RNG.standard_normal((T, H, H)) * 0.1)

        def loss(Wh):
            h, _ = sl.scan(lambda h, x: (sl.tanh(h @ Wh + x), None), sl.zeros((H, H)), xs,
                           checkpoint=("revolve", 4))
            return (h ** 2).sum()
        return peak_bytes(lambda: sl.grad(loss)(Wh))

    carry = H * H * 8
    short, long = peak(50), peak(400)
    assert long < short + 4 * carry, (short, long)
    assert long < 20 * carry, long  # 4 carries, a step's residuals, the gradient, temporaries


# --- the schedule's arithmetic ------------------------------------------------------------------
@pytest.mark.parametrize("T, s", [(T, s) for T in (1, 2, 5, 17, 60, 1000) for s in (1, 2, 3, 8)
                                  if math.comb(s + Revolve.MAX_REPETITIONS, s) >= T])
def test_revolve_split_keeps_its_promises(T, s):
    """Simulate the recursion: every range of more than one step fits its budget, at most s
    snapshots are live at once, and the count scan_plan prints is the simulated one."""
    r = Revolve(s).repetitions(T)
    assert math.comb(s + r, s) >= T and (r == 0 or math.comb(s + r - 1, s) < T)
    recomputed, peak = 0, 0

    def walk(T, s, r, live):  # backward of a range; `live` snapshots held, its input's too
        nonlocal recomputed, peak
        if T <= 1:  # one step: its input is part of that step's residuals
            peak = max(peak, live - 1)
            return
        peak = max(peak, live)
        assert s >= 1 and r >= 1 and T <= math.comb(s + r, s)
        m = binomial_split(T, s, r)
        walk(T - m, s - 1, r, live + 1)  # the first part's input stays held meanwhile
        recomputed += m
        walk(m, s, r - 1, live)

    walk(T, s, r, 1)
    assert peak <= s
    assert recomputed == recomputed_steps(T, s, r)


def test_revolve_with_too_few_snapshots_says_how_many():
    with pytest.raises(ValueError, match=r"at least 2 snapshots"):
        sl.scan(lambda c, x: (c + x, None), 0.0, sl.ones(500), checkpoint=("revolve", 1))


def test_scan_plan_prints_the_schedule():
    Wp = sl.tensor(RNG.standard_normal((4, 4)), requires_grad=True)
    f = lambda h, x: (sl.tanh(h @ Wp + x), h.sum())  # noqa: E731
    xs = sl.zeros((100, 4))
    plan = sl.scan_plan(f, sl.zeros(4), xs, checkpoint="sqrt")
    # A carry is 32 bytes and a step keeps 64 (the incoming carry and tanh's result), so
    # "sqrt" takes k = round(sqrt(100 * 32 / 64)) = 7: 14 segments of 7 and one of 2.
    assert plan.schedule[0] == "checkpoint: sqrt: 14 segments of 7 steps and one of 2"
    assert "14 carries (448 bytes) and the last segment's residuals" in str(plan)
    assert "but the last one's (93 steps in all)" in str(plan)
    plan = sl.scan_plan(f, sl.zeros(4), xs, checkpoint=("revolve", 3))
    r = Revolve(3).repetitions(100)
    assert f"at most {r} times" in plan.schedule[0]
    assert f"{100 + recomputed_steps(100, 3, r)} (plain scan: 100)" in str(plan)
    assert sl.scan_plan(f, sl.zeros(4), xs).schedule is None
    empty = sl.scan_plan(f, sl.zeros(4), xs[:0], checkpoint="sqrt").schedule
    assert "0 carries" in empty[1] and "(0 steps in all)" in empty[2], empty
    assert empty[3].endswith(": 0 bytes"), empty


@pytest.mark.parametrize("k, T, recomputed", [(4, 10, 6), (5, 10, 5), (3, 3, 0),
                                               (20, 10, 0), (1, 5, 4), (2, 9, 7)])
def test_the_last_segment_keeps_its_residuals_and_is_not_recomputed(capsys, k, T, recomputed):
    """The backward pass starts with the last k steps, so the forward keeps their residuals
    (one segment's, as a recomputation would hold) and only the steps before them run again:
    a print in the body shows each step once in the forward, once more where recomputed."""
    W = sl.tensor(RNG.standard_normal((3, 3)) * 0.5)
    xs = sl.tensor(RNG.standard_normal((T, 3)))

    def loss(h, ck):
        def f(c, x):
            sl.debug.print("step {}", x[0])
            return sl.tanh(c @ W + x), sl.sum(c * c)
        return sl.scan(f, h, xs, checkpoint=ck)[1].sum()

    h = sl.tensor(RNG.standard_normal(3))
    want = sl.grad(loss)(h, None).numpy()
    capsys.readouterr()
    got = sl.grad(loss)(h, k).numpy()
    printed = capsys.readouterr().out.count("step ")
    assert printed == T + recomputed, printed
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_schedule_parse():
    assert parse(None) is None
    assert parse(4).length(100) == 4
    assert parse(np.int64(3)).length(10) == 3
    assert parse("sqrt").length(1000) == 32  # sizes unknown: sqrt(T)
    assert parse("sqrt").length(1000, 32, 128) == 16  # sqrt(1000 / 4)
    assert parse("sqrt").length(5, 10**6, 1) == 5  # never longer than the scan
    assert parse(("revolve", 8)).snapshots == 8


# --- found by an adversarial pass ---------------------------------------------------------------
def test_python_numbers_reach_f_as_themselves():
    X = sl.tensor(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(sl.checkpoint(lambda x, axis: x.sum(axis=axis))(X, 0).numpy(),
                                  [3.0, 5.0, 7.0])
    x32 = sl.tensor(np.ones(3, np.float32))
    assert sl.checkpoint(lambda x, a: x * a)(x32, 2.0).dtype == np.float32
    out = sl.checkpoint(lambda a: (a, 3.0))(x32)
    assert out[1] == 3.0 and type(out[1]) is float
    c, _ = sl.scan(lambda c, x: (sl.checkpoint(lambda c, s: c * s)(c, 0.5) + x, None),
                   sl.tensor(np.float32(1)), x32)
    assert c.dtype == np.float32
    with pytest.raises(TypeError, match="positionally"):
        sl.checkpoint(lambda x, b=1.0: x * b)(x32, b=2.0)


def test_a_tensor_axis_is_refused_not_read_as_no_axes():
    X = sl.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match="axis must be a Python int"):
        X.sum(axis=sl.tensor(0))
    with pytest.raises(TypeError, match="0-d"):
        tuple(sl.tensor(0))
    assert [r.shape for r in X] == [(3,), (3,)]


def test_while_loop_gradient_through_checkpoint_and_vmap():
    def wl(b):
        return sl.while_loop(lambda v: v[1] < 3, lambda v: (v[0] * b, v[1] + 1),
                             (sl.tensor(1.0), sl.tensor(0)))[0]

    assert sl.grad(sl.checkpoint(wl))(sl.tensor(2.0)).item() == pytest.approx(12.0)
    g = sl.grad(lambda a: sl.vmap(lambda x: sl.while_loop(
        lambda v: v < 4.0, lambda v: v * a + 0.5, x))(sl.tensor([0.1, 1.0])).sum())
    assert g(sl.tensor(1.5)).item() == pytest.approx(15.475)


@pytest.mark.parametrize("unroll", [1, 4, True, False, np.int64(2)])
def test_unroll_is_accepted_and_changes_nothing(unroll):
    xs = sl.tensor(RNG.standard_normal(7))
    got = sl.scan(lambda c, x: (c * 0.9 + x, c), 0.0, xs, unroll=unroll)
    want = sl.scan(lambda c, x: (c * 0.9 + x, c), 0.0, xs)
    _tree_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_bad_unroll(bad):
    with pytest.raises(ValueError, match="unroll must be an int >= 1 or a bool"):
        sl.scan(lambda c, x: (c + x, None), 0.0, sl.ones(3), unroll=bad)


# --- found by a review ----------------------------------------------------------------------------
def test_jvp_through_a_checkpoint_outside_a_scan_body():
    """The forward trace calls checkpoint's VJP directly, with no input requiring grad: it
    once returned no cotangents there, a zero tangent."""
    k = sl.checkpoint(lambda x: sl.sin(x) * x)
    _, t = sl.jvp(k, (sl.tensor(1.0),), (sl.tensor(1.0),))
    assert t.item() == pytest.approx(np.cos(1.0) + np.sin(1.0))
    xs = sl.tensor([1.0, 2.0, 3.0])
    for schedule in (2, ("revolve", 2)):
        def g(x, schedule=schedule):
            return sl.scan(lambda c, a: (sl.sin(c) * a, c), x, xs, checkpoint=schedule)[0]

        def plain(x):
            return sl.scan(lambda c, a: (sl.sin(c) * a, c), x, xs)[0]

        got = sl.jvp(g, (sl.tensor(0.5),), (sl.tensor(1.0),))[1]
        assert got.item() == pytest.approx(sl.jvp(plain, (sl.tensor(0.5),),
                                                  (sl.tensor(1.0),))[1].item(), rel=1e-12)


def test_interpret_reaches_the_segments_scan(monkeypatch):
    import importlib

    P = importlib.import_module("scanlib.scan.primitive")

    def refuse(*a, **k):
        raise AssertionError("the compiled loop ran under interpret=True")

    monkeypatch.setattr(P, "compiled", refuse)
    W = sl.tensor(RNG.standard_normal((2, 2)))
    xs = sl.tensor(RNG.standard_normal((5, 2)))
    g = sl.grad(lambda h: sl.scan(lambda c, x: (sl.tanh(c @ W + x), None), h, xs,
                                  checkpoint=2, interpret=True)[0].sum())
    assert g(sl.zeros(2)).shape == (2,)


def test_a_revolve_scans_gradient_traced_after_it_was_recorded():
    """vjp recorded on the tape, its function then traced (jit, vmap: a Jacobian): the walk
    meets revolve's node inside a trace, where scan's own VJP (which traces) stands in."""
    X = sl.tensor(RNG.standard_normal((9, 3)) * 0.5)
    W, h0 = sl.tensor(RNG.standard_normal((3, 3)) * 0.4), sl.tensor(RNG.standard_normal(3))

    def f(h0, W):
        hT, ys = sl.scan(lambda h, x: (sl.tanh(W @ h + x), sl.sum(h)), h0, X,
                         checkpoint=("revolve", 3))
        return hT * 2.0 + sl.sum(ys)

    _, back = sl.vjp(f, h0, W)
    ct = sl.tensor([1.0, -0.5, 0.3])
    want = back(ct)
    _tree_close(sl.jit(back)(ct), want)
    rows = sl.vmap(back)(sl.eye(3))
    _tree_close([r[1] for r in rows], [g for g in back(sl.eye(3)[1])])


# --- forward mode: one checkpoint over f's JVP (JAX's remat of the JVP) ---------------------------
def _printing(f):
    def g(*args):
        sl.debug.print("f {}", args[0].sum())
        return f(*args)
    return g


def test_jvp_of_a_checkpoint_runs_f_once(capsys):
    """jvp runs f once with its tangents beside it, checkpointed or not (the transposed VJP,
    the rule before, ran it once forward and again in the VJP's replay)."""
    h = sl.tensor(RNG.standard_normal(3))
    x = sl.tensor(RNG.standard_normal(3))
    for jac in (False, True):
        counts, found = [], []
        for g in (_printing(_f), sl.checkpoint(_printing(_f))):
            capsys.readouterr()
            found.append(sl.jacfwd(g)(h, x) if jac else sl.jvp(g, (h, x), (x, h))[1])
            counts.append(capsys.readouterr().out.count("f "))
        assert counts[1] == counts[0] == (3 if jac else 1), counts  # jacfwd: one per column
        np.testing.assert_allclose(found[1].numpy(), found[0].numpy(), rtol=1e-14, atol=1e-15)


def test_forward_mode_inside_a_trace_runs_f_once(capsys):
    """Under jit and vmap, in a scan body, and for jit's jacfwd, forward mode runs inside the
    trace as JAX's: a checkpointed f prints once per call (per example under vmap), where
    the transposed VJP ran it forward and again in its replay; the values are eager's."""
    h, x = sl.tensor(RNG.standard_normal(3)), sl.tensor(RNG.standard_normal(3))
    g = sl.checkpoint(_printing(_f))
    eager = sl.jvp(g, (h, x), (x, h))
    hs = sl.tensor(RNG.standard_normal((2, 3)))

    def in_a_scan(h):
        def body(c, _):
            return sl.jvp(g, (c, x), (x, c))[1] * 0.1, None
        return sl.scan(body, h, None, length=2)[0]

    cases = [
        ("jit", lambda: sl.jit(lambda h, x: sl.jvp(g, (h, x), (x, h)))(h, x), 1),
        ("vmap", lambda: sl.vmap(lambda h: sl.jvp(g, (h, x), (x, h))[1])(hs), 2),
        ("scan body", lambda: in_a_scan(h), 2),
        ("jit jacfwd", lambda: sl.jit(sl.jacfwd(g))(h, x), 1),
    ]
    for name, call, prints in cases:
        for _ in range(2):  # the call that traces, and one that replays
            capsys.readouterr()
            call()
            assert capsys.readouterr().out.count("f ") == prints, name
    _tree_close(cases[0][1](), eager, rtol=1e-14, atol=1e-15)
    _tree_close(cases[1][1](), sl.stack([sl.jvp(g, (r, x), (x, r))[1] for r in hs]),
                rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(cases[3][1]().numpy(), sl.jacfwd(g)(h, x).numpy(), rtol=1e-14,
                               atol=1e-15)
    # reverse mode over it: .backward() through a scan whose body takes a jvp (the body is
    # traced outside any grad, so by forward mode, and its graph then linearized) against
    # grad's transposed VJP of the same
    want = sl.grad(lambda h: in_a_scan(h).sum())(h)
    leaf = sl.tensor(h.numpy(), requires_grad=True)
    in_a_scan(leaf).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), want.numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("schedule", [None, 2, "sqrt"])
def test_jvp_of_a_checkpointed_scan_runs_each_step_once(capsys, schedule):
    T = 7
    xs = sl.tensor(RNG.standard_normal((T, 3)))

    def run(h):
        def body(c, x):
            sl.debug.print("step {}", x[0])
            return sl.tanh(c @ W + x), sl.sum(c * c)
        return sl.scan(body, h, xs, checkpoint=schedule)

    h, t = sl.tensor(RNG.standard_normal(3)), sl.tensor(RNG.standard_normal(3))
    capsys.readouterr()
    out, tan = sl.jvp(run, (h,), (t,))
    assert capsys.readouterr().out.count("step ") == T
    want = sl.jvp(lambda h: _loop(h, xs), (h,), (t,))
    _tree_close((out, tan), want, rtol=1e-13, atol=1e-15)


def _loop(h, xs):
    ys = []
    for x in xs:
        h, y = sl.tanh(h @ W + x), sl.sum(h * h)
        ys.append(y)
    return h, sl.stack(ys)


_C = sl.tensor(RNG.standard_normal(3) * 0.3)


def _awkward(h, x):
    """Closed-over tensors, an integer, a Python-number and a constant output, a nested
    checkpoint, a value named for a policy, an output that is an input."""
    inner = sl.checkpoint(lambda a: sl.exp(sl.checkpoint_name(a * _C, "t")) @ W)
    u = inner(sl.sin(h) + x) * h
    return {"u": u, "n": sl.argmax(u), "h": h, "s": sl.sum(u * x) ** 2, "one": 1.0,
            "c": np.array([1.0, 2.0])}


@pytest.mark.parametrize("policy", [None, "only t", "dots_saveable", "everything_saveable"])
def test_the_jvp_rule_gives_fs_derivatives_of_any_order(policy):
    ck = sl.checkpoint(_awkward, policy=_POLICIES[policy] if policy else None)
    h, x = sl.tensor(RNG.standard_normal(3)), sl.tensor(RNG.standard_normal(3))
    th, tx = sl.tensor(RNG.standard_normal(3)), sl.tensor(RNG.standard_normal(3))

    def floats(f):
        return lambda h, x: {k: v for k, v in f(h, x).items() if k in ("u", "s", "c")}

    def scalar(f):
        return lambda h, x: f(h, x)["s"] + f(h, x)["u"].sum()

    cases = [
        lambda f: sl.jvp(floats(f), (h, x), (th, tx)),
        lambda f: sl.jacfwd(floats(f), argnums=(0, 1))(h, x),
        lambda f: sl.hessian(scalar(f))(h, x),
        lambda f: sl.jacfwd(sl.grad(scalar(f)))(h, x),
        lambda f: sl.jacrev(sl.jacfwd(scalar(f)))(h, x),
        lambda f: sl.grad(lambda h: sl.jvp(floats(f), (h, x), (th, tx))[1]["s"])(h),
        lambda f: sl.vmap(lambda t: sl.jvp(floats(f), (h, x), (t, tx))[1]["u"])(sl.eye(3)),
        lambda f: sl.jit(lambda h: sl.jvp(floats(f), (h, x), (th, tx)))(h),
        lambda f: sl.scan(lambda c, a: (c + sl.jvp(floats(f), (c, a), (th, a))[1]["u"], None),
                          h, sl.stack([x, th]))[0],
        lambda f: sl.jvp(lambda h: sl.scan(lambda c, a: (f(c, a)["u"] * 0.5, f(c, a)["n"]),
                                           h, sl.stack([x, th]))[0], (h,), (tx,)),
    ]
    for case in cases:
        _tree_close(case(ck), case(_awkward), rtol=1e-12, atol=1e-14)


# --- vmap of a checkpoint whose results do not all depend on the batch ---------------------------
_XS3 = sl.tensor([1.0, 2.0, 3.0])
_H2 = sl.tensor([0.3, 0.5])


@pytest.mark.parametrize("case", ["python-number ys", "constant output", "kept unbatched"])
@pytest.mark.parametrize("how", ["vmap", "vmap grad", "vmap jacfwd", "vmap jvp"])
def test_vmap_of_a_checkpoint_with_results_the_batch_does_not_reach(case, how):
    """A result of a checkpoint that no batched input reaches (a Python number's ys stacked by
    a checkpointed segment, a constant f returns, a value a policy keeps that depends on an
    unbatched closed-over tensor) is batched as vmap's flags say: a scan holding it once
    failed its batching's own assertion."""
    y = sl.tensor([0.5, -0.3])
    keep_all = sl.checkpoint_policies.everything_saveable

    def make(on):
        if case == "python-number ys":
            return lambda h: sl.scan(lambda c, x: (sl.sin(c) * x, 1.5), h, _XS3,
                                     checkpoint=1 if on else None)[0]
        if case == "constant output":
            inner = lambda c: (np.float64(2.0), sl.sin(c))  # noqa: E731
        else:
            inner = lambda c: (c * sl.exp(y[0]), sl.sin(c))  # noqa: E731
        inner = sl.checkpoint(inner, policy=keep_all) if on else inner

        def run(h):
            def body(c, x):
                k, s = inner(c)
                return s * x + k * 0.1, k
            return sl.scan(body, h, _XS3)[0]
        return run

    def go(f):
        if how == "vmap":
            return sl.vmap(f)(_H2)
        if how == "vmap grad":
            return sl.vmap(sl.grad(f))(_H2)
        if how == "vmap jacfwd":
            return sl.vmap(sl.jacfwd(f))(_H2)
        return sl.vmap(lambda h: sl.jvp(f, (h,), (sl.ones_like(h),))[1])(_H2)

    np.testing.assert_allclose(go(make(True)).numpy(), go(make(False)).numpy(), rtol=1e-13)
