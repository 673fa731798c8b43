"""Step-indexed buffers in scan: a carry buffer updated one row per step (`buf.at[t].set(h)`)
and a closed-over tensor read at the step (`X[t]`) cost O(row) per step, forward and
backward, and mean exactly what the Python loop on the tape means (values, gradients, second
order) and what `interpret=True` computes. The fast paths fire where they should and not
where they must not; memory grows linearly in T.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scanlib as sl
from scanlib.scan.loop.ir import SumScatter

rng0 = np.random.default_rng(0)
B, H = 3, 4


def python_loop(f, init, T, reverse=False):
    """The loop that defines scan, on the tape; t is a 0-d int64 tensor as scan gives it."""
    carry, ys = init, []
    for t in (reversed(range(T)) if reverse else range(T)):
        carry, y = f(carry, sl.tensor(np.int64(t)))
        ys.append(y)
    return carry, ys


def leaves(tree):
    return [x for x in sl.pytree.flatten(tree)[0] if x is not None] if tree is not None else []


def loss_of(carry, ys):
    """A loss that reads every output with its own weights (so no cotangent is uniform)."""
    total = 0.0
    for k, x in enumerate(x for x in leaves(carry) + leaves(ys) if np.prod(x.shape)):
        w = np.cos(np.arange(np.prod(x.shape)) + k).reshape(x.shape).astype(x.dtype)
        total = total + sl.sum(sl.tanh(x) * w)
    return total


def check(make_f, init_np, T, params, reverse=False, dtype=np.float64, with_ys=False,
          backend=None):
    """scan (compiled and interpreted) against the Python loop: values and gradients with
    respect to the init buffer and the closed-over params."""
    tol = 1e-4 if dtype == np.float32 else 1e-10
    results = []
    for mode in ("loop", "compiled", "interpret"):
        ps = [sl.tensor(p.astype(dtype), requires_grad=True) for p in params]
        init = tuple(sl.tensor(a.astype(dtype), requires_grad=True) for a in init_np)
        f = make_f(*ps)
        if mode == "loop":
            carry, ys = python_loop(f, init, T, reverse)
            ys = [sl.stack(list(col)) for col in zip(*[leaves(y) for y in ys])] \
                if ys and with_ys else None
        else:
            carry, ys = sl.scan(f, init, sl.arange(T), reverse=reverse,
                                interpret=mode == "interpret")
            ys = ys if with_ys else None
        loss = loss_of(carry, ys)
        loss.backward()
        results.append(([np.asarray(x.numpy()) for x in leaves(carry) + leaves(ys)
                         if np.prod(x.shape)],
                        [np.asarray(a.grad.numpy()) if a.grad is not None else None
                         for a in list(init) + ps]))
    (want, want_g) = results[0]
    for mode, (got, got_g) in zip(("compiled", "interpret"), results[1:]):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype, mode
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{mode} value")
        for g, w in zip(got_g, want_g):
            if w is None:
                assert g is None or not np.any(g), mode
                continue
            assert g.dtype == w.dtype, mode
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{mode} grad")


def rnn_into_buffer(at="t", op="set"):
    def make(W):
        def f(c, t):
            buf, h = c
            h = sl.tanh(h @ W)
            row = {"t": t, "rev": buf.shape[0] - 1 - t}[at]
            upd = buf.at[row]
            return (upd.set(h) if op == "set" else upd.add(h), h), None
        return f
    return make


def buffers(T, dtype=np.float64):
    return (rng0.normal(size=(max(T, 1), B, H)), rng0.normal(size=(B, H)))


W0 = rng0.normal(0, 0.5, (H, H))


@pytest.mark.parametrize("T", [0, 1, 17, 33])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("at, op", [("t", "set"), ("rev", "set"), ("t", "add"), ("rev", "add")])
def test_buffer_updates_match_the_loop(T, dtype, at, op):
    check(rnn_into_buffer(at, op), buffers(T), T, [W0], dtype=dtype)


@pytest.mark.parametrize("T", [1, 17])
def test_buffer_reverse(T):
    check(rnn_into_buffer("t", "set"), buffers(T), T, [W0], reverse=True)
    check(rnn_into_buffer("rev", "add"), buffers(T), T, [W0], reverse=True)


def read_before_write(W):
    def f(c, t):
        buf, h = c
        prev = buf[t - 1]  # the row written last step (row -1 at t = 0)
        h = sl.tanh(h @ W + prev * h)
        return (buf.at[t].set(h), h), None
    return f


def read_after_write(W):
    def f(c, t):
        buf, h = c
        new = buf.at[t].set(sl.tanh(h @ W))
        h = new[t] * 0.5 + buf[t]  # the new row and the old one
        return (new, h), None
    return f


def repeated_set(W):
    def f(c, t):
        buf, h = c
        h = sl.tanh(h @ W)
        idx = sl.stack([t, t])  # the same row twice: set keeps the last value
        return (buf.at[idx].set(sl.stack([h * 2.0, h])), h), None
    return f


def repeated_add(W):
    def f(c, t):
        buf, h = c
        h = sl.tanh(h @ W)
        idx = sl.stack([t, t])
        return (buf.at[idx].add(sl.stack([h * 2.0, h])), h), None
    return f


def buffer_as_y(W):
    def f(c, t):
        buf, h = c
        h = sl.tanh(h @ W)
        new = buf.at[t].set(h)
        return (new, h), new
    return f


def row_as_y(W):
    def f(c, t):
        buf, h = c
        h = sl.tanh(h @ W)
        new = buf.at[t].set(h)
        return (new, h), (buf[t - 1], new[t])  # views of both stages, as ys: copied
    return f


@pytest.mark.parametrize("make_f", [read_before_write, read_after_write, repeated_set,
                                    repeated_add, buffer_as_y, row_as_y])
@pytest.mark.parametrize("T", [0, 1, 17])
def test_buffer_reads_and_aliases(make_f, T):
    check(make_f, buffers(T), T, [W0], with_ys=True)


def forward_program(f, init, T, needs_grad=True):
    plan = sl.scan_plan(f, init, sl.arange(T))
    return plan.forward_loop.program, plan.backward_loop.program


def test_in_place_fires_forward_and_backward():
    W = sl.tensor(W0, requires_grad=True)
    fwd, bwd = forward_program(rnn_into_buffer()(W), tuple(map(sl.tensor, buffers(9))), 9)
    assert {r.carry for r in fwd.in_place.values()} == {0}
    assert "update_in_place" in fwd.fired and "update_in_place" in bwd.fired
    assert {r.carry for r in bwd.in_place.values()} == {0}  # the buffer's cotangent


@pytest.mark.parametrize("make_f, fires", [(read_before_write, True), (read_after_write, False),
                                           (repeated_set, True), (repeated_add, False),
                                           (buffer_as_y, False), (row_as_y, True)])
def test_in_place_fires_only_where_it_may(make_f, fires):
    W = sl.tensor(W0, requires_grad=True)
    fwd, _ = forward_program(make_f(W), tuple(map(sl.tensor, buffers(9))), 9)
    assert bool(fwd.in_place) == fires, fwd.fired
    if make_f is row_as_y:
        assert len(fwd.copied) == 2


def test_static_row_read_by_batched_work_does_not_fire():
    def f(c, t):
        buf, h = c
        h = sl.tanh(h @ sl.tensor(W0))
        return (buf.at[t].set(h), h), sl.sin(buf[0])  # buf[0] runs after the steps
    fwd, _ = forward_program(f, tuple(map(sl.tensor, buffers(9))), 9)
    assert not fwd.in_place
    check(lambda W: f, buffers(9), 9, [W0], with_ys=True)


def test_user_init_buffer_is_unchanged():
    buf0 = np.zeros((5, B, H))
    held = sl.tensor(buf0.copy())
    W = sl.tensor(W0)
    (buf, h), _ = sl.scan(rnn_into_buffer()(W), (held, sl.tensor(np.ones((B, H)))),
                          sl.arange(5))
    assert np.array_equal(held.numpy(), buf0)
    assert np.any(buf.numpy() != 0)
    (buf2, _), _ = sl.scan(rnn_into_buffer()(W), (held, sl.tensor(np.ones((B, H)))),
                           sl.arange(5))
    np.testing.assert_array_equal(buf.numpy(), buf2.numpy())  # a second call starts afresh
    assert np.array_equal(held.numpy(), buf0)


def test_second_order_through_buffer():
    T = 6
    b0, h0 = buffers(T)

    def loss(W, loop):
        f = rnn_into_buffer("t", "add")(W)
        init = (sl.tensor(b0), sl.tensor(h0))
        if loop:
            (buf, h), _ = python_loop(f, init, T)
        else:
            (buf, h), _ = sl.scan(f, init, sl.arange(T))
        return sl.sum(sl.sin(buf)) + sl.sum(h * h)

    def hvp(loop):
        g = sl.grad(lambda W: sl.sum(sl.grad(lambda V: loss(V, loop))(W) ** 2))
        return g(sl.tensor(W0)).numpy()

    np.testing.assert_allclose(hvp(False), hvp(True), rtol=1e-9, atol=1e-10)


# --- the step-index idiom: a closed-over X read as X[t] --------------------------------------
def index_body(X, how):
    def f(c, t):
        if how == "t":
            row = X[t]
        elif how == "rev":
            row = X[X.shape[0] - 1 - t]
        elif how == "clip":
            row = sl.take(X, t + 2, axis=0, mode="clip")
        else:  # a column: the index is not the first item
            row = X[:, t]
        return c * 0.5 + sl.tanh(row) * c, None
    return f


@pytest.mark.parametrize("how", ["t", "rev", "clip", "col"])
@pytest.mark.parametrize("T", [0, 1, 17, 33])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_step_index_matches_the_loop(how, T, dtype):
    n = max(T, 1)
    Xn = rng0.normal(size=(n, n))

    def make(X):
        f = index_body(X, how)
        return lambda c, t: ((f(c[0], t)[0],), None)

    check(make, (np.ones(n),), T, [Xn], dtype=dtype)


def test_step_index_accumulates_in_place():
    X = sl.tensor(rng0.normal(size=(50, 7)), requires_grad=True)
    plan = sl.scan_plan(index_body(X, "t"), sl.ones(7), sl.arange(50))
    accs = plan.backward_loop.program.accumulators
    assert any(isinstance(a.how, SumScatter) for a in accs.values()), plan.backward_loop
    assert "scatter_into_accumulators" in plan.backward_loop.fired


def test_step_index_repeated_rows_add_up():
    X = sl.tensor(rng0.normal(size=(4, 3)), requires_grad=True)
    idx = sl.tensor(np.array([0, 2, 2, 2, 1, 0, 3, 3]))
    c, _ = sl.scan(lambda c, t: (c * 0.9 + X[t] * c, None), sl.ones(3), idx)
    sl.sum(c).backward()
    got = X.grad.numpy()
    X.grad = None
    c = sl.ones(3)
    for t in idx.numpy():
        c = c * 0.9 + X[int(t)] * c
    sl.sum(c).backward()
    np.testing.assert_allclose(got, X.grad.numpy(), rtol=1e-12)


def test_index_past_the_end_names_the_step_and_the_fix():
    X = sl.tensor(np.ones((10, 3)))
    with pytest.raises(IndexError, match=r"at step t=9 .*mode='clip'"):
        sl.scan(lambda c, t: (c + X[t + 1], None), sl.zeros(3), sl.arange(10))
    with pytest.raises(IndexError, match=r"at step t=5 .*mode='clip'"):
        sl.scan(lambda c, t: (c * X[t + 5], None), sl.zeros(3), sl.arange(10))
    with pytest.raises(IndexError, match=r"at step t=7 .*mode='clip'"):  # a per-step index
        sl.scan(lambda c, t: ((c[0] + 1, c[1] + X[c[0]]), None),
                (sl.tensor(np.int64(3)), sl.zeros(3)), sl.arange(10))


# --- memory and time grow linearly in T -------------------------------------------------------
def peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_buffer_memory_is_linear_in_T():
    W = sl.tensor(rng0.normal(0, 0.3, (16, 16)), requires_grad=True)

    def run(T):
        def go():
            init = (sl.zeros((T, 4, 16)), sl.tensor(rng0.normal(size=(4, 16))))
            (buf, h), _ = sl.scan(rnn_into_buffer()(W), init, sl.arange(T))
            (sl.sum(buf * buf) + sl.sum(h)).backward()
        return peak_bytes(go)

    run(50)
    ratio = run(800) / run(200)
    assert ratio < 6, ratio  # quadratic would be ~16


def test_step_index_memory_is_linear_in_T():
    def run(T):
        X = sl.tensor(rng0.normal(size=(T, 64)), requires_grad=True)

        def go():
            c, _ = sl.scan(index_body(X, "t"), sl.ones(64), sl.arange(T))
            sl.sum(c).backward()
        return peak_bytes(go)

    run(50)
    ratio = run(1600) / run(400)
    assert ratio < 6, ratio


@pytest.mark.parametrize("body", [
    lambda c, t: (c.at[:, 0].add(c[:, 2]), c[:, 0] + 0),
    lambda c, t: (c.at[0].set(c[1]).at[1].set(c[0]), c[:, 0] + 0),
    lambda c, t: (c.at[1:].set(c[:-1]), c[:, 0] + 0),
    lambda c, t: (c.at[t % 5].set(c[(t + 1) % 5]), c[:, 0] + 0),
], ids=["add-a-column-read", "swap-rows", "shift", "set-from-the-next-row"])
def test_an_update_that_reads_the_carry_differentiates_as_interpreted(body):
    """update_in_place fired on these backward bodies and the verifier then refused the loop
    (InvalidLoop, a crash on valid input, found by an adversarial pass): the pass now checks
    the rewritten program as the verifier does, and does not fire."""
    C = sl.tensor(np.arange(15.0).reshape(5, 3) / 10)

    def f(C, interpret):
        return sl.sum(sl.sin(sl.scan(body, C, sl.arange(4), interpret=interpret)[1]))

    def d(interpret, order):
        g = sl.grad(lambda C: f(C, interpret))
        return g if order == 1 else sl.grad(lambda C: sl.sum(g(C) ** 2))

    for order in (1, 2):
        np.testing.assert_allclose(d(False, order)(C).numpy(), d(True, order)(C).numpy(),
                                   rtol=1e-12, atol=1e-12)


def two_buffers_read_across():
    """Two carry buffers, each updated in place; carry 1's backward adds a row of carry 0's
    cotangent (c1[2] written into c0), read after carry 0's own update. Accepting both
    in-place chains made that read see the overwritten row: the verifier refused the loop
    (InvalidLoop) and the gradient raised."""
    def make(W):
        def f(c, t):
            c0, c1 = c
            k = t % 4
            c0 = c0.at[:, 3].set(c1[:, 3] * W[0, 0])
            c0 = c0.at[k].set(c1[2])
            c0 = c0.at[:, 3].set(c1[:, 3] * 2.0)
            c1 = c1.at[:, 1].set(c1[:, 1] * 2.0)
            c0 = c0.at[k].set(c1[2])
            return (c0, c1), sl.sum(c0[0])
        return f
    return make


def test_in_place_chains_of_two_carries_stay_right_together():
    init = (rng0.normal(size=(4, 6)), rng0.normal(size=(4, 6)))
    check(two_buffers_read_across(), init, 5, [rng0.normal(size=(2, 2))], with_ys=True)


def _generated_body(steps, W):
    """A body over carry buffers [4, 6]: each step (op, a, b, i, j) updates buffer a from
    buffer b (rows i, j; columns i, j), or reads it into the output."""
    def f(c, x):
        c, outs = list(c), []
        for op, a, b, i, j in steps:  # a, b < n: buffers; i, j < 4: rows or columns
            if op == 0:
                c[a] = c[a].at[i].set(sl.tanh(c[b][j] @ W + x))
            elif op == 1:
                c[a] = c[a].at[i].add(c[b][j] * 0.5)
            elif op == 2:
                c[a] = c[a].at[:, i].set(c[b][:, j] * 2.0)
            elif op == 3:
                c[a] = c[a].at[sl.tensor(np.array([i, j]))].add(x)
            elif op == 4:
                outs.append(c[a][i] * 1.0)
            elif op == 5:
                c[a] = sl.sin(c[a]) + c[b] * 0.1
            elif op == 6:
                c[a] = c[a].at[i].multiply(1.1)
            else:
                c[a] = c[a].at[sl.astype(x, np.int64)[0] % 4].set(c[b][i])
        return tuple(c), sum(sl.sum(o) for o in outs) if outs else sl.sum(c[0])
    return f


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2 ** 32 - 1))
def test_generated_buffer_updates_across_carries_match_the_loop(seed):
    """Indexed updates of several carry buffers reading each other: scan's value and
    gradients (whatever update_in_place chose) are the Python loop's. The steps are drawn
    uniformly from the seed (hypothesis would favour short, similar steps, and about one
    body in twenty reaches two chains that meet)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    steps = [tuple(int(v) for v in rng.integers(0, (8, n, n, 4, 4)))
             for _ in range(int(rng.integers(2, 9)))]
    W = rng.standard_normal((6, 6)) * 0.3
    init = tuple(rng.standard_normal((4, 6)) for _ in range(n))
    xs = np.abs(rng.standard_normal((5, 6)))
    f = _generated_body(steps, W)

    def by_scan(init):
        c, ys = sl.scan(f, init, xs)
        return sl.sum(ys) + sum(sl.sum(ci * (k + 1)) for k, ci in enumerate(c))

    def by_loop(init):
        c, total = init, 0.0
        for t in range(len(xs)):
            c, y = f(c, sl.tensor(xs[t]))
            total = total + y
        return total + sum(sl.sum(ci * (k + 1)) for k, ci in enumerate(c))

    got, want = sl.value_and_grad(by_scan)(init), sl.value_and_grad(by_loop)(init)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-12, atol=1e-12)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)
