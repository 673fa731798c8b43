"""scan against its definition, the Python loop (tests/test_scan_oracle.py), in values and
gradients (float64, rtol 1e-10), against finite differences (first and second order), and the
behaviours the scan issue names: pytrees, dim, reverse, lengths 0 and 1, closures, aliasing,
int carries, nested and chained scans, higher order, .backward(), long recurrences, dtypes.
"""

from __future__ import annotations

import importlib
import sys
from collections import namedtuple

import numpy as np
import pytest
from test_scan_oracle import (
    as_np,
    assert_trees_close,
    compare_with_loop,
    cotangents_like,
    leaves,
    loop_scan,
    structure,
    weighted_sum,
)

import scanlib as sl
from scanlib.testing import check_grads

Pair = namedtuple("Pair", ["a", "b"])


@pytest.fixture
def make(backend, rng):
    """make(*shape, scale=1.0): a random float64 Tensor on the backend's device."""

    def make(*shape, scale=1.0, dtype=np.float64):
        return backend.tensor((scale * rng.standard_normal(shape)).astype(dtype))

    return make


def rnn(p):
    """The tanh RNN of the issue: h = tanh(h @ W + x @ U + b), y = h."""

    def f(h, x):
        h = sl.tanh(h @ p["W"] + x @ p["U"] + p["b"])
        return h, h

    return f


def rnn_args(make, B=3, H=4, I=2, T=5):
    params = {"W": make(H, H, scale=0.5), "U": make(I, H), "b": make(H)}
    return make(B, H), make(T, B, I), params


# --- the loop oracle: values and gradients --------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_matches_loop_values_and_grads(make, reverse):
    got, _ = compare_with_loop(rnn, rnn_args(make), wrt=(0, 1, 2), reverse=reverse)
    assert got[1].shape == (5, 3, 4)


@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_long_enough_to_run_in_chunks(make, reverse, monkeypatch):
    # With B=32, H=128 a 512 KiB chunk budget splits T=40 into chunks of 14, 14 and 12 steps
    # (forward and backward): batched work and gradient sums cross chunk edges.
    monkeypatch.setattr(importlib.import_module("scanlib.scan.executor"), "CHUNK_BYTES", 1 << 19)

    def make_f(p):
        def f(h, x):
            h = sl.tanh(h @ p["W"] + x @ p["U"] + p["b"])
            return h, (h, sl.sin(h).sum(-1))

        return f

    args = rnn_args(make, B=32, H=128, I=16, T=40)
    args[2]["W"] = make(128, 128, scale=0.1)
    compare_with_loop(make_f, args, wrt=(0, 1, 2), reverse=reverse)


@pytest.mark.parametrize("reverse", [False, True])
def test_batched_work_written_in_place_across_chunks(make, reverse, monkeypatch):
    # Carry-independent work here runs per chunk and writes over its own temporaries
    # (exp(u) * 2 - 1 in one array), a y made that way goes straight into its stack, and
    # x @ U runs as one product over all rows. Small chunks make every chunk edge count.
    monkeypatch.setattr(importlib.import_module("scanlib.scan.executor"), "CHUNK_BYTES", 1)

    def make_f(p):
        def f(h, x):
            u = x @ p["U"]
            a = sl.exp(u) * 2.0 - 1.0
            h = sl.tanh(h @ p["W"] + a)
            return h, (sl.sin(x) * 3.0 + 1.0, u, h * a)

        return f

    compare_with_loop(make_f, rnn_args(make, T=37), wrt=(0, 1, 2), reverse=reverse)


@pytest.mark.parametrize("reverse", [False, True])
def test_vdot_in_the_body(make, reverse):
    # A per-step scalar from vdot (a 0-d y), one carry-independent and one on the carry.
    def make_f(p):
        def f(h, x):
            h = sl.tanh(h @ p["W"] + x @ p["U"])
            return h, (sl.vdot(h, h @ p["W"]), sl.vdot(x, x))

        return f

    compare_with_loop(make_f, rnn_args(make, T=6), wrt=(0, 1, 2), reverse=reverse)


@pytest.mark.parametrize("reverse", [False, True])
def test_readouts_of_the_carry_read_its_history_across_chunks(make, reverse, monkeypatch):
    # ys computed from the new and the incoming carry (a readout h @ V) run after each chunk's
    # steps, reading the carry's history buffer in place (no per-step copy into scratch).
    monkeypatch.setattr(importlib.import_module("scanlib.scan.executor"), "CHUNK_BYTES", 1)

    def make_f(p):
        def f(h, x):
            new = sl.tanh(h @ p["W"] + x @ p["U"])
            return new, (new, new @ p["W"], sl.sin(h))

        return f

    init, xs, params = rnn_args(make, T=37)
    compare_with_loop(make_f, (init, xs, params), wrt=(0, 1, 2), reverse=reverse)
    plan = sl.scan_plan(make_f(params), init, xs, reverse=reverse)
    assert "H0[t0" in plan.forward_source and "S0[t - t0] =" not in plan.forward_source, \
        plan.forward_source


def test_rows_times_writes_into_a_strided_out():
    """The batched `x @ W` of a loop also fills an output that is not in C order."""
    batching = importlib.import_module("scanlib.ops.batching")
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal((4, 3, 5)), rng.standard_normal((5, 2))
    out = np.zeros((4, 2, 3)).transpose(0, 2, 1)
    assert not out.flags.c_contiguous
    batching.rows_times(x, W, out=out)
    np.testing.assert_allclose(out, x @ W, rtol=1e-12)
    np.testing.assert_allclose(batching.rows_times(x, W), x @ W, rtol=1e-12)


def test_reverse_runs_backwards_and_keeps_ys_aligned_with_xs(backend):
    xs = backend.tensor([1.0, 10.0, 100.0])
    carry, ys = sl.scan(lambda c, x: (c + x, c), 0.0, xs, reverse=True)
    np.testing.assert_allclose(as_np(carry), 111.0)
    np.testing.assert_allclose(as_np(ys), [110.0, 100.0, 0.0])  # ys[t] from step t
    carry, ys = sl.scan(lambda c, x: (c + x, c), 0.0, xs)
    np.testing.assert_allclose(as_np(ys), [0.0, 1.0, 11.0])


def test_length_reverse_and_unroll_by_position_as_in_jax():
    def f(c, x):
        c = c * 0.5 + (1.0 if x is None else x)
        return c, c

    xs = sl.tensor([1.0, 2.0, 3.0])
    for args, kwargs in [((None, 4), {"length": 4}), ((xs, None, True), {"reverse": True}),
                         ((xs, 3, False, 2), {"length": 3, "unroll": 2})]:
        want = sl.scan(f, sl.tensor(0.0), args[0], **kwargs)
        got = sl.scan(f, sl.tensor(0.0), *args)
        for g, w in zip(sl.tree_util.tree_leaves(got), sl.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    with pytest.raises(TypeError):
        sl.scan(f, sl.tensor(0.0), xs, None, False, 1, 0)  # dim is a keyword


def test_docstring_example():
    carry, ys = sl.scan(lambda c, x: (c + x, c * x), 0.0, sl.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(carry.numpy(), 6.0)
    np.testing.assert_allclose(ys.numpy(), [0.0, 2.0, 9.0])


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_finite_differences(backend, rng, order, reverse):
    W = backend.array(0.5 * rng.standard_normal((3, 3)))
    U = backend.array(rng.standard_normal((2, 3)))

    def f(h0, xs, W, U):
        return sl.scan(lambda h, x: (sl.tanh(h @ W + x @ U), sl.sin(h) * x.sum()), h0, xs,
                       reverse=reverse)

    h0 = backend.array(rng.standard_normal((2, 3)))
    xs = backend.array(rng.standard_normal((4, 2, 2)))
    check_grads(f, (h0, xs, W, U), order=order)


def test_finite_differences_catch_a_wrong_gradient():
    # check_grads is the FD oracle used above: it must reject a function whose VJP is wrong.
    def bad(x):
        return x * sl.stop_gradient(x)  # forward x^2, VJP says x

    with pytest.raises(AssertionError):
        check_grads(bad, (np.array([1.0, 2.0]),))


# --- pytrees --------------------------------------------------------------------------------
def test_dict_carry_tuple_xs_and_none_y_leaf(make):
    def make_f(p):
        def f(c, x):
            h = sl.tanh(c["h"] * p + x[0])
            s = c["s"] + x[1].sum()
            return {"h": h, "s": s}, (c["h"], None, x[1] * c["s"])

        return f

    got, _ = compare_with_loop(make_f, ({"h": make(3), "s": make()}, (make(4, 3), make(4, 2)),
                                        make(3)), wrt=(0, 1, 2))
    carry, ys = got
    assert set(carry) == {"h", "s"} and ys[1] is None
    assert ys[0].shape == (4, 3) and ys[2].shape == (4, 2)


def test_namedtuple_and_list_pytrees(make):
    def make_f(p):
        return lambda c, x: (Pair(c.a * x[0] + p, [c.b[0] * sl.sin(x[1])]), [c.a, None])

    got, _ = compare_with_loop(make_f, (Pair(make(2), [make(2)]), [make(5, 2), make(5, 2)],
                                        make(2)), wrt=(0, 1, 2))
    carry, ys = got
    assert type(carry) is Pair and isinstance(carry.b, list)
    assert isinstance(ys, list) and ys[1] is None


def test_y_none_gives_ys_none(make):
    got, _ = compare_with_loop(lambda p: (lambda c, x: (c * p + x, None)),
                               (make(3), make(4, 3), make(3)), wrt=(0, 1, 2))
    assert got[1] is None


def test_xs_pytree_with_none_leaf_passes_none_to_f(make):
    seen = []

    def make_f(p):
        def f(c, x):
            seen.append(x["skip"])
            return c * p + x["a"], x["a"]

        return f

    compare_with_loop(make_f, (make(3), {"a": make(4, 3), "skip": None}, make(3)),
                      wrt=(0, 1, 2))
    assert seen and all(s is None for s in seen)


# --- dim ------------------------------------------------------------------------------------
def test_dim_1(make):
    compare_with_loop(lambda p: (lambda c, x: (c * p + x, sl.exp(0.1 * c))),
                      (make(3), make(3, 6), make(3)), wrt=(0, 1, 2), dim=1)


@pytest.mark.parametrize("reverse", [False, True])
def test_negative_dim_counts_from_each_leafs_own_end(make, reverse):
    # a is [3, T], b is [3, 2, T]: dim=-1 is axis 1 of a and axis 2 of b.
    def make_f(p):
        return lambda c, x: (c * p + x["a"] @ x["b"], (x["a"], c))

    got, _ = compare_with_loop(make_f, (make(2), {"a": make(3, 6), "b": make(3, 2, 6)}, make(2)),
                               wrt=(0, 1, 2), dim=-1, reverse=reverse)
    assert got[1][0].shape == (6, 3)


def test_dim_2_leaves_of_different_rank(make):
    def make_f(p):
        return lambda c, x: (c * p + x[0].sum() * x[1].sum(1), x[0])

    compare_with_loop(make_f, (make(2), (make(4, 3, 5), make(2, 7, 5)), make(2)),
                      wrt=(0, 1, 2), dim=2)


# --- lengths --------------------------------------------------------------------------------
def test_length_0_carry_is_init_and_ys_are_empty(make):
    init = {"h": make(2)}
    carry, ys = sl.scan(lambda c, x: (c, {"a": c["h"] * x, "b": None, "c": (x.sum(), c["h"])}),
                        init, make(0, 2))
    assert_trees_close(carry, init)
    assert ys["b"] is None
    assert ys["a"].shape == (0, 2) and ys["c"][0].shape == (0,) and ys["c"][1].shape == (0, 2)
    assert ys["a"].dtype == np.float64


def test_length_0_gradients(make):
    i, p = make(3), make(3)

    def loss(i, p):
        c, ys = sl.scan(lambda c, x: (c * p + x, c * 2), i, make(0, 3))
        return (c * c).sum() + ys.sum()

    gi, gp = sl.grad(loss, argnums=(0, 1))(i, p)
    np.testing.assert_allclose(as_np(gi), 2 * as_np(i))
    np.testing.assert_allclose(as_np(gp), 0.0)


def test_length_0_without_xs(make):
    init = make(3)
    carry, ys = sl.scan(lambda c, x: (c + 1.0, c * 2), init, length=0)
    assert_trees_close(carry, init)
    assert ys.shape == (0, 3)


def test_length_1(make):
    compare_with_loop(lambda p: (lambda c, x: (sl.sin(c * p) + x, c * x)),
                      (make(3), make(1, 3), make(3)), wrt=(0, 1, 2))


def test_xs_none_with_length(make):
    def make_f(p):
        def f(c, x):
            assert x is None
            return sl.sin(c * p) + 1.0, c

        return f

    got, _ = compare_with_loop(make_f, (make(3), None, make(3)), wrt=(0, 2), length=4)
    assert got[1].shape == (4, 3)


def test_f_is_traced_once_not_run_per_step(make):
    calls = []

    def f(c, x):
        calls.append(1)
        return c + x, c

    sl.scan(f, make(3), make(50, 3))
    n50 = len(calls)
    calls.clear()
    sl.scan(f, make(3), make(500, 3))
    assert n50 == len(calls) <= 2


# --- closures and partial requires_grad -----------------------------------------------------
WRT = {"init": (0,), "xs": (1,), "params": (2,), "init+params": (0, 2)}


@pytest.mark.parametrize("which", list(WRT))
def test_grad_with_respect_to_some_inputs(make, which):
    compare_with_loop(rnn, rnn_args(make), wrt=WRT[which])


@pytest.mark.parametrize("which", ["W", "U", "b", "h0", "xs"])
def test_backward_sweep_only_one_input_requires_grad(backend, rng, which):
    data = {"W": 0.5 * rng.standard_normal((3, 3)), "U": rng.standard_normal((2, 3)),
            "b": rng.standard_normal(3), "h0": rng.standard_normal(3),
            "xs": rng.standard_normal((4, 2))}
    ct = rng.standard_normal((4, 3))

    def run(scan_fn):
        t = {k: backend.tensor(v, requires_grad=(k == which)) for k, v in data.items()}
        carry, ys = scan_fn(rnn({"W": t["W"], "U": t["U"], "b": t["b"]}), t["h0"], t["xs"])
        assert carry.requires_grad and ys.requires_grad
        ((carry * carry).sum() + (ys * backend.tensor(ct)).sum()).backward()
        return t

    got, want = run(sl.scan), run(loop_scan)
    for k in data:
        if k == which:
            assert got[k].grad is not None
            assert_trees_close(got[k].grad, want[k].grad, what=f"{k}.grad")
        else:
            assert got[k].grad is None, f"{k} does not require grad but got .grad"


def test_nothing_requires_grad_gives_outputs_without_grad(make):
    h0, xs, p = rnn_args(make)
    carry, ys = sl.scan(rnn(p), h0, xs)
    assert not carry.requires_grad and not ys.requires_grad


def test_closed_over_numpy_arrays_and_scalars_are_constants(backend, make, rng):
    K = backend.array(rng.standard_normal(3))
    scale = 2.5

    def make_f(p):
        return lambda c, x: (c * K + x * scale + p, (c * 3, K, scale))

    got, _ = compare_with_loop(make_f, (make(3), make(4, 3), make(3)), wrt=(0, 1, 2))
    ys = got[1]
    np.testing.assert_array_equal(as_np(ys[1]), np.broadcast_to(as_np(K), (4, 3)))
    np.testing.assert_array_equal(as_np(ys[2]), np.full(4, 2.5))
    assert not ys[1].requires_grad


def test_backward_twice_accumulates_like_the_loop(backend, rng):
    W0, xs = 0.5 * rng.standard_normal((3, 3)), rng.standard_normal((4, 3))

    def run(scan_fn):
        W = backend.tensor(W0, requires_grad=True)
        for _ in range(2):
            carry, _ = scan_fn(lambda h, x: (sl.tanh(h @ W + x), h), backend.tensor(np.ones(3)),
                               backend.tensor(xs))
            carry.sum().backward()
        return W.grad

    got, want = run(sl.scan), run(loop_scan)
    assert_trees_close(got, want)


# --- aliasing -------------------------------------------------------------------------------
def _carry_as_y(p):
    return lambda c, x: (sl.tanh(c * p + x), c)


def _x_as_y(p):
    return lambda c, x: (c * p + x, (x, x))


def _same_tensor_twice(p):
    def f(c, x):
        n = sl.tanh(c * p + x)
        return n, (n, n, c)

    return f


def _carry_unchanged(p):
    return lambda c, x: ((c[0], c[1] * p + x), (c[0], c[1]))


def _carry_unchanged_only(p):
    return lambda c, x: (c, c * p + x)


def _closed_constant_as_y(p):
    K = sl.tensor(np.arange(3.0), device=p.device)._value  # a raw array on p's device
    return lambda c, x: (c * p + x, (K, p, 1.5))


def _carry_in_and_out_as_y(p):
    def f(c, x):
        n = sl.sin(c * p) + x
        return n, (c, n, c)

    return f


def _swap_carries(p):
    return lambda c, x: ((c[1] * p, c[0] + x), (c[0], c[1]))


def _carry_from_x(p):
    return lambda c, x: (x * p, (c, x * 2))


def _carry_from_constant(p):
    return lambda c, x: ((p, c[0] * x), c[1])


def _whole_carry_unchanged(p):
    return lambda c, x: (c, c * 2.0 + x)  # never reads p


# name: (make_f, init is a pair, argnums to differentiate)
ALIASING = {
    "carry_as_y": (_carry_as_y, False, (0, 1, 2)),
    "x_as_y": (_x_as_y, False, (0, 1, 2)),
    "same_tensor_twice": (_same_tensor_twice, False, (0, 1, 2)),
    "carry_unchanged": (_carry_unchanged, True, (0, 1, 2)),
    "whole_carry_unchanged": (_whole_carry_unchanged, False, (0, 1)),
    "closed_constant_as_y": (_closed_constant_as_y, False, (0, 1, 2)),
    "carry_in_and_out_as_y": (_carry_in_and_out_as_y, False, (0, 1, 2)),
    "swap_carries": (_swap_carries, True, (0, 1, 2)),
    "carry_from_x": (_carry_from_x, False, (0, 1, 2)),
    "carry_from_constant": (_carry_from_constant, True, (0, 1, 2)),
}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", list(ALIASING))
def test_aliasing(make, name, reverse):
    make_f, pair, wrt = ALIASING[name]
    init = (make(3), make(3)) if pair else make(3)
    compare_with_loop(make_f, (init, make(4, 3), make(3)), wrt=wrt, reverse=reverse)


def test_unchanged_2d_carry_in_matmul_with_weight_needing_grad(make):
    # Found by tests/test_scan_hypothesis.py: the backward scan's fused sum_t a_t @ b_t
    # got an a that is the same at every step (an unchanged carry) and crashed.
    def make_f(W):
        return lambda c, x: ((sl.tanh(c[1] @ W + x), c[1]), c[0])

    compare_with_loop(make_f, ((make(2, 3), make(2, 3)), make(4, 2, 3), make(3, 3)),
                      wrt=(0, 1, 2))


def test_returned_ys_do_not_alias_each_other_or_inputs(make):
    # Immutability: the outputs are fresh values; computing with them leaves the inputs alone.
    init, xs = make(3), make(4, 3)
    init_np, xs_np = as_np(init).copy(), as_np(xs).copy()
    _, (a, b, c) = sl.scan(lambda c, x: (c + x, (x, c, x)), init, xs)
    _ = a * 2 + b + c
    np.testing.assert_array_equal(as_np(init), init_np)
    np.testing.assert_array_equal(as_np(xs), xs_np)
    np.testing.assert_array_equal(as_np(a), xs_np)


# --- dtypes ---------------------------------------------------------------------------------
def test_int_counter_alongside_float_carry(make):
    def make_f(p):
        return lambda c, x: ((c[0] + 1, c[1] * p + x * c[0]), (c[0], c[1]))

    got, _ = compare_with_loop(make_f, ((0, make(3)), make(4, 3), make(3)), wrt=(1, 2))
    (count, _), (counts, _) = got
    assert count.dtype.kind == "i" and counts.dtype.kind == "i"
    np.testing.assert_array_equal(as_np(count), 4)
    np.testing.assert_array_equal(as_np(counts), [0, 1, 2, 3])


def test_int_array_xs_index_closed_over_table(backend, make):
    table = make(5, 3)
    idx = backend.array(np.array([0, 3, 1, 4, 3]))
    compare_with_loop(lambda p: (lambda c, x: (sl.tanh(c * p + table[x]), c)),
                      (make(3), idx, make(3)), wrt=(0, 2))


def test_float32_is_preserved(backend, rng):
    W = backend.tensor(rng.standard_normal((3, 3)).astype(np.float32), requires_grad=True)
    xs = backend.tensor(rng.standard_normal((6, 3)).astype(np.float32), requires_grad=True)
    h0 = backend.tensor(np.ones(3, np.float32), requires_grad=True)
    carry, ys = sl.scan(lambda h, x: (sl.tanh(h @ W + x), h * 2), h0, xs)
    assert carry.dtype == np.float32 and ys.dtype == np.float32
    (carry.sum() + ys.sum()).backward()
    for t in (W, xs, h0):
        assert t.grad.dtype == np.float32
    # and the float32 values are the float64 loop's, to float32 precision
    W64 = backend.tensor(as_np(W).astype(np.float64), requires_grad=True)
    c64, ys64 = loop_scan(lambda h, x: (sl.tanh(h @ W64 + x), h * 2),
                          backend.tensor(np.ones(3)), backend.tensor(as_np(xs).astype(np.float64)))
    (c64.sum() + ys64.sum()).backward()
    np.testing.assert_allclose(as_np(ys), as_np(ys64), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(as_np(W.grad), as_np(W64.grad), rtol=1e-4, atol=1e-5)


def test_python_scalar_init_adopts_body_dtype_when_f_ignores_it(backend):
    xs = backend.tensor(np.ones(3, np.float32))
    carry, ys = sl.scan(lambda c, x: (x * 2, c), 0.0, xs)
    assert carry.dtype == np.float32 and ys.dtype == np.float32


@pytest.mark.parametrize("dtype, init", [
    ("float32", 0.0), ("float64", 0.0), ("float16", 0.0), ("int32", 0), ("int16", 0),
    ("int8", 0), ("uint8", 0),
])
def test_python_number_init_adopts_the_dtype_of_an_accumulator(backend, dtype, init):
    # The issue and scan's docstring: "`0.0` works as a float32 accumulator", as in JAX, where
    # lax.scan(lambda c, x: (c + x, c), 0.0, f32 xs) has a float32 carry; the loop agrees.
    xs = backend.tensor(np.array([1, 2, 3], dtype))
    carry, ys = sl.scan(lambda c, x: (c + x, c), init, xs)
    want_carry = init
    for t in range(3):  # the loop itself (its ys would stack a CPU Python number with xs)
        want_carry = want_carry + xs[t]
    assert carry.dtype == want_carry.dtype == np.dtype(dtype)
    # (the loop's ys[0] is the Python number itself, so its stack is float64; scan's is not)
    assert ys.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(as_np(ys), [0, 1, 3])


def test_python_number_init_keeps_numpy_dtype_when_f_does_not_promote_it():
    carry, _ = sl.scan(lambda c, x: (c * 0.5, c), 1.0, length=3)
    assert carry.dtype == np.float64
    carry, _ = sl.scan(lambda c, x: (c + 1, c), 0, length=3)
    assert carry.dtype == np.int64
    x32 = sl.tensor(np.ones(3, np.float32))
    carry, ys = sl.scan(lambda c, x: ({"a": c["a"] + x, "n": c["n"] + 1, "m": c["m"] * 0.5},
                                      c["a"]), {"a": 0.0, "n": 0, "m": 1.0}, x32)
    assert (carry["a"].dtype, carry["n"].dtype, carry["m"].dtype) == (np.float32, np.int64,
                                                                      np.float64)
    assert ys.dtype == np.float32


# --- nested and chained scans ---------------------------------------------------------------
def _nested(inner_scan):
    def make_f(p):
        def f(c, x):
            c2, ys = inner_scan(lambda ci, xi: (sl.tanh(ci * p + xi), ci * xi), c, x)
            return c2, ys.sum(0)

        return f

    return make_f


def test_nested_scan_matches_loop_of_loops(make):
    args = (make(3), make(4, 5, 3), make(3))
    cts = [np.linspace(-1, 1, 3), np.arange(12.0).reshape(4, 3) / 10]

    def loss(outer, inner):
        return lambda i, x, p: weighted_sum(outer(_nested(inner)(p), i, x), cts)

    got = sl.value_and_grad(loss(sl.scan, sl.scan), argnums=(0, 1, 2))(*args)
    want = sl.value_and_grad(loss(loop_scan, loop_scan), argnums=(0, 1, 2))(*args)
    assert_trees_close(got, want)


def test_nested_inner_body_closes_over_outer_carry_and_x(make):
    def make_f(p):
        def f(c, x):
            return sl.scan(lambda ci, xi: (sl.tanh(ci * c + xi * p), ci * x.sum()), c, x)

        return f

    compare_with_loop(make_f, (make(3), make(4, 5, 3), make(3)), wrt=(0, 1, 2))


def test_nested_scan_second_order(rng):
    def f(i, x, p):
        return sl.scan(lambda c, x: sl.scan(lambda ci, xi: (sl.tanh(ci * p + xi), ci * xi), c, x),
                       i, x)

    check_grads(f, (rng.standard_normal(3), rng.standard_normal((3, 4, 3)),
                    rng.standard_normal(3)), order=2)


def test_chained_scans(make):
    def run(scan_fn, i, x, p):
        c1, y1 = scan_fn(lambda c, x: (sl.tanh(c * p + x), c), i, x)
        c2, y2 = scan_fn(lambda c, x: (c * y1.mean() + x, sl.sin(c)), c1, y1, reverse=True)
        return c2, y2

    args = (make(3), make(4, 3), make(3))
    cts = [np.full(3, 0.3), np.arange(12.0).reshape(4, 3)]

    def loss(scan_fn):
        return lambda *a: weighted_sum(run(scan_fn, *a), cts)

    assert_trees_close(sl.value_and_grad(loss(sl.scan), argnums=(0, 1, 2))(*args),
                       sl.value_and_grad(loss(loop_scan), argnums=(0, 1, 2))(*args))


# --- higher order, vjp, backward ------------------------------------------------------------
def test_grad_of_grad_matches_loop(make):
    args = (make(3), make(4, 3), make(3))

    def loss(scan_fn):
        return lambda i, x, p: (scan_fn(lambda c, x: (sl.tanh(c * p + x), sl.sin(c) * x),
                                        i, x)[1] ** 2).sum()

    def grad_norm(scan_fn):
        def g(i, x, p):
            gs = sl.grad(loss(scan_fn), argnums=(0, 1, 2))(i, x, p)
            return sum(((g * g).sum() for g in gs), 0.0)

        return g

    got = sl.grad(grad_norm(sl.scan), argnums=(0, 1, 2))(*args)
    want = sl.grad(grad_norm(loop_scan), argnums=(0, 1, 2))(*args)
    assert_trees_close(got, want)
    assert all(np.any(as_np(g) != 0) for g in got)  # torch's scan gives silent zeros here


def test_hessian_vector_product_through_scan(make):
    p, v, h0, xs = make(3), make(3), make(3), make(5, 3)

    def hvp(scan_fn):
        def loss(p):
            return scan_fn(lambda c, x: (sl.tanh(c * p + x), None), h0, xs)[0].sum()

        return sl.grad(lambda p: (sl.grad(loss)(p) * v).sum())(p)

    assert_trees_close(hvp(sl.scan), hvp(loop_scan))


def test_vjp_with_cotangents_on_carry_and_ys(make):
    W = make(3, 3, scale=0.5)
    args = (make(3), make(4, 3), W)

    def body(W):
        return lambda c, x: (sl.tanh(c @ W + x), {"s": sl.sin(c), "n": None})

    out_s, back_s = sl.vjp(lambda i, x, W: sl.scan(body(W), i, x), *args)
    out_l, back_l = sl.vjp(lambda i, x, W: loop_scan(body(W), i, x), *args)
    assert_trees_close(out_s, out_l)
    ct = (make(3), {"s": make(4, 3), "n": None})
    g_s, g_l = back_s(ct), back_l(ct)
    assert_trees_close(g_s, g_l)
    # both cotangents matter: dropping either changes the answer
    g_carry_only = back_s((ct[0], {"s": ct[1]["s"] * 0, "n": None}))
    assert not np.allclose(as_np(g_carry_only[2]), as_np(g_s[2]))


def test_torch_style_backward_matches_loop(backend, rng):
    W0, xs0 = 0.5 * rng.standard_normal((3, 3)), rng.standard_normal((4, 3))

    def run(scan_fn):
        W = backend.tensor(W0, requires_grad=True)
        xs = backend.tensor(xs0, requires_grad=True)
        carry, ys = scan_fn(lambda c, x: (sl.tanh(c @ W + x), c), backend.tensor(np.ones(3)), xs)
        (carry.sum() + (ys * ys).sum()).backward()
        return W.grad, xs.grad

    assert_trees_close(run(sl.scan), run(loop_scan))


# --- inputs used twice, outside grad, deeper derivatives ---------------------------------
def _grads_agree(run, args, wrt=(0, 1, 2)):
    """Values and gradients of a weighted sum of run(scan_fn, *args) agree for scan and loop."""
    cts = cotangents_like(run(loop_scan, *args))

    def loss(scan_fn):
        return lambda *a: weighted_sum(run(scan_fn, *a), cts)

    assert_trees_close(sl.value_and_grad(loss(sl.scan), argnums=wrt)(*args),
                       sl.value_and_grad(loss(loop_scan), argnums=wrt)(*args))


def test_the_same_tensor_as_two_xs_leaves(make):
    def run(scan_fn, i, a, p):
        return scan_fn(lambda c, x: (sl.tanh(c * p + x[0] * x[1]), x[0] - 2 * x[1]), i, (a, a))

    _grads_agree(run, (make(3), make(4, 3), make(3)))


def test_closure_over_the_tensors_that_are_also_init_and_xs(make):
    def run(scan_fn, i, a, p):
        return scan_fn(lambda c, x: (sl.tanh(c * p + x * a.sum(0) + i), c * a[0]), a[0] + i, a)

    _grads_agree(run, (make(3), make(4, 3), make(3)))


def test_carry_leaf_replaced_by_a_python_number(make):
    def make_f(p):
        return lambda c, x: ((1.0, c[1] * p + x * c[0]), (c[0], 2))

    got, _ = compare_with_loop(make_f, ((0.0, make(3)), make(4, 3), make(3)), wrt=(1, 2))
    np.testing.assert_array_equal(as_np(got[1][0]), [0.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(as_np(got[1][1]), [2, 2, 2, 2])


def test_scan_under_no_grad_records_nothing(make):
    W = make(3, 3)
    W.requires_grad = True
    with sl.no_grad():
        carry, ys = sl.scan(lambda h, x: (sl.tanh(h @ W + x), h), make(3), make(4, 3))
    assert not carry.requires_grad and not ys.requires_grad


def test_grad_of_grad_with_slices_transposes_and_reshapes_in_the_body(make):
    def body(c, x, p):
        a = c[:, :2] * p[:2]
        b = sl.transpose(c)[2:]
        n = sl.tanh(sl.concatenate([a, sl.transpose(b) * x[:, 2:]], axis=1) + x)
        return n, sl.reshape(n, (8,))[3:6]

    def grad_norm(scan_fn):
        def loss(i, x, p):
            carry, ys = scan_fn(lambda c, x: body(c, x, p), i, x)
            return (ys**2).sum() + carry.sum()

        return lambda *a: sum(((g * g).sum() for g in sl.grad(loss, argnums=(0, 1, 2))(*a)), 0.0)

    args = (make(2, 4), make(5, 2, 4), make(4))
    assert_trees_close(sl.grad(grad_norm(sl.scan), argnums=(0, 1, 2))(*args),
                       sl.grad(grad_norm(loop_scan), argnums=(0, 1, 2))(*args))


def test_grad_of_grad_through_nested_scans(make):
    def loss(scan_fn):
        return lambda i, x, p: scan_fn(
            lambda c, x: scan_fn(lambda ci, xi: (sl.tanh(ci * p + xi * c), ci * xi), c, x),
            i, x)[1].sum()

    def grad_norm(scan_fn):
        return lambda *a: sum(((g * g).sum() for g in
                               sl.grad(loss(scan_fn), argnums=(0, 1, 2))(*a)), 0.0)

    args = (make(3), make(4, 2, 3), make(3))
    assert_trees_close(sl.grad(grad_norm(sl.scan), argnums=(0, 1, 2))(*args),
                       sl.grad(grad_norm(loop_scan), argnums=(0, 1, 2))(*args))


def test_third_derivative(make):
    p, xs, h0 = make(3), make(4, 3), make(3)

    def third(scan_fn):
        g1 = sl.grad(lambda p: scan_fn(lambda c, x: (sl.tanh(c * p + x), None), h0, xs)[0].sum())
        g2 = sl.grad(lambda p: (g1(p) ** 2).sum())
        return sl.grad(lambda p: (g2(p) ** 2).sum())(p)

    assert_trees_close(third(sl.scan), third(loop_scan))


def test_reverse_nested_scan_with_negative_dim(make):
    def make_f(p):
        return lambda c, x: sl.scan(lambda ci, xi: (sl.sin(ci * p) + xi, ci), c, x, dim=-1,
                                    reverse=True)

    compare_with_loop(make_f, (make(3), make(4, 3, 5), make(3)), wrt=(0, 1, 2), reverse=True)


def test_length_0_inner_scan_inside_a_body(make):
    def make_f(p):
        def f(c, x):
            inner, _ = sl.scan(lambda ci, xi: (ci * p + xi, ci), c, x[:0])
            return inner * 2 + x.sum(0), c

        return f

    compare_with_loop(make_f, (make(3), make(4, 2, 3), make(3)), wrt=(0, 1, 2))


def test_float32_grad_of_grad_stays_float32(backend, rng):
    W = backend.tensor(rng.standard_normal((3, 3)).astype(np.float32))
    xs = backend.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    h0 = backend.tensor(np.ones(3, np.float32))

    def loss(W):
        return sl.scan(lambda c, x: (sl.tanh(c @ W + x), c), h0, xs)[1].sum()

    gg = sl.grad(lambda W: (sl.grad(loss)(W) ** 2).sum())(W)
    assert gg.dtype == np.float32


# --- long recurrences -----------------------------------------------------------------------
def test_100k_steps_at_the_default_recursion_limit(backend, rng):
    T = 100_000
    xs_np = 0.1 * rng.standard_normal(T)
    w0 = 0.9
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # Python's default
    try:
        w = backend.tensor(w0, requires_grad=True)
        xs = backend.tensor(xs_np, requires_grad=True)
        carry, ys = sl.scan(lambda c, x: (sl.tanh(c * w + x), c), backend.tensor(0.0), xs)
        (carry + ys.sum()).backward()
    finally:
        sys.setrecursionlimit(old)
    # Hand-written forward and BPTT in NumPy: the reference.
    h = np.empty(T + 1)
    h[0] = 0.0
    for t in range(T):
        h[t + 1] = np.tanh(h[t] * w0 + xs_np[t])
    gh, gw, gx = 1.0, 0.0, np.empty(T)  # d(loss)/d h[T] = 1 (the carry)
    for t in range(T - 1, -1, -1):
        ga = gh * (1 - h[t + 1] ** 2)
        gx[t] = ga
        gw += ga * h[t]
        gh = ga * w0 + 1.0  # h[t] is also ys[t]
    np.testing.assert_allclose(as_np(carry), h[T], rtol=1e-10)
    np.testing.assert_allclose(as_np(ys), h[:T], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(as_np(xs.grad), gx, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(as_np(w.grad), gw, rtol=1e-9)


# --- helpers used above can fail ------------------------------------------------------------
def test_compare_with_loop_detects_a_wrong_scan(make, monkeypatch):
    import test_scan_oracle as oracle

    real_scan = sl.scan

    def off_by_one(f, init, xs=None, **kw):
        carry, ys = real_scan(f, init, xs, **kw)
        return carry, ys * 1.000001

    monkeypatch.setattr(oracle.sl, "scan", off_by_one)
    with pytest.raises(AssertionError):
        compare_with_loop(rnn, rnn_args(make), wrt=(2,))


def test_cotangents_and_structure_helpers():
    tree = {"a": sl.tensor([1.0, 2.0]), "b": (None, sl.tensor([1, 2]))}
    cts = cotangents_like(tree)
    assert cts[0].shape == (2,) and cts[1] is None
    assert len(leaves(tree)) == 2
    assert structure(tree) != structure({"a": 1, "b": (2, 3)})


@pytest.mark.parametrize("exponent", [2, 0.5, -1, 3])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.float32])
def test_pow_written_into_the_loops_buffers_is_the_operators(exponent, dtype):
    """NumPy's `x ** 2` is square(x) (sqrt, reciprocal for 0.5, -1), whose last bits
    np.power's complex algorithm does not give: a scan whose pow runs batched into its
    buffers must still give the loop's bits."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 32, 64)) * (1 + 1j if dtype != np.float32 else 1))
    x = np.abs(x).astype(dtype) if exponent == 0.5 and dtype == np.float32 else x.astype(dtype)
    ys = sl.scan(lambda c, xt: (c, sl.sin(xt) ** exponent), 0.0, x)[1]
    want = np.stack([(sl.sin(sl.tensor(x[t])) ** exponent).numpy() for t in range(len(x))])
    np.testing.assert_array_equal(ys.numpy(), want)
