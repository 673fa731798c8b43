"""The residual plan of the issue's tanh RNN `h = tanh(h @ W + x @ U + b)`, y = h: which
policies it uses, that what it stores beyond ys is less than one extra [T, B, H] array (so the
memory property cannot regress), that gradients nobody asked for are not computed, and that
the printed plan teaches what happens.
"""

from __future__ import annotations

import gc
import importlib
import tracemalloc

import numpy as np
import pytest

import scanlib as sl

B, H, I, T = 32, 128, 64, 200
F32 = np.float32


def make_rnn(rng, batch=(B,), xs_grad=True):
    """(f, h0, xs, params) for the RNN, float32, everything requiring grad but maybe xs."""

    def t(*shape, grad=True):
        return sl.tensor((0.1 * rng.standard_normal(shape)).astype(F32), requires_grad=grad)

    W, U, b = t(H, H), t(I, H), t(H)
    h0, xs = t(*batch, H), t(T, *batch, I, grad=xs_grad)

    def f(h, x):
        h = sl.tanh(h @ W + x @ U + b)
        return h, h

    return f, h0, xs, {"W": W, "U": U, "b": b}


@pytest.fixture(scope="module")
def rnn_plan():
    f, h0, xs, _ = make_rnn(np.random.default_rng(0))
    return sl.scan_plan(f, h0, xs)


def rows(plan, policy):
    return [r for r in plan.residuals if r["policy"] == policy]


# --- the policies -----------------------------------------------------------------------------
def test_residual_rows_have_the_documented_fields(rnn_plan):
    assert rnn_plan.residuals
    for r in rnn_plan.residuals:
        assert set(r) == {"name", "policy", "type", "storage", "bytes"}
        assert r["policy"] in {"KEEP", "CLONE", "REMOVE_XS", "REMOVE_ADDITIONAL_INPUTS"}
        assert isinstance(r["bytes"], int) and r["bytes"] >= 0
    assert rnn_plan.residual_bytes == sum(r["bytes"] for r in rnn_plan.residuals)


def test_keep_references_ys(rnn_plan):
    keep = rows(rnn_plan, "KEEP")
    assert keep, rnn_plan
    # tanh's VJP reads its output, which is y: referenced in ys, not stored again.
    assert any("ys" in r["storage"] and r["bytes"] == 0 and r["type"] == "f32[32,128]"
               for r in keep), keep
    assert all(r["bytes"] == 0 for r in keep), "a KEEP residual is stored beyond ys"


def test_clone_is_the_carry_history_shared_with_ys(rnn_plan):
    clone = rows(rnn_plan, "CLONE")
    assert len(clone) == 1, rnn_plan
    (r,) = clone
    assert r["type"] == "f32[32,128]"
    assert "carry history" in r["storage"] and "shared with ys" in r["storage"]
    assert r["bytes"] <= B * H * 4  # at most the one step (h0) that ys lacks


def test_remove_xs_for_x(rnn_plan):
    (r,) = rows(rnn_plan, "REMOVE_XS")
    assert r["type"] == "f32[32,64]" and r["bytes"] == 0 and "xs" in r["storage"]


def test_remove_additional_inputs_for_W_and_U(rnn_plan):
    removed = {r["name"]: r for r in rows(rnn_plan, "REMOVE_ADDITIONAL_INPUTS")}
    assert {"W", "U"} <= set(removed), rnn_plan
    assert removed["W"]["type"] == "f32[128,128]" and removed["U"]["type"] == "f32[64,128]"
    assert removed["W"]["bytes"] == 0 and removed["U"]["bytes"] == 0


def test_stored_beyond_ys_is_less_than_one_T_B_H_array(rnn_plan):
    assert rnn_plan.residual_bytes < T * B * H * 4, rnn_plan


def test_unbatched_rnn_stores_less_than_one_T_H_array(rng):
    # matmul promotes a 1-d operand with a reshape; that view must not become a stored residual
    f, h0, xs, _ = make_rnn(rng, batch=())
    plan = sl.scan_plan(f, h0, xs)
    assert plan.residual_bytes < T * H * 4, plan
    assert rows(plan, "REMOVE_XS"), plan


def _retained_beyond_ys(f, h0, xs):
    """Bytes NumPy still holds after a recording forward scan, beyond ys itself."""
    for _ in range(2):  # the first call also fills caches; measure the second
        gc.collect()
        tracemalloc.start()
        try:
            carry, ys = sl.scan(f, h0, xs)
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert ys.requires_grad
        del carry, ys
    ys_bytes = T * int(np.prod(h0.shape)) * 4
    assert held >= ys_bytes, "tracemalloc does not see NumPy's arrays: the check cannot work"
    return held - ys_bytes


def test_forward_pass_really_holds_less_than_one_T_B_H_array(rng):
    # The plan's accounting checked against the allocator: what the forward keeps alive for
    # backward (residuals, history buffer) beyond ys.
    f, h0, xs, _ = make_rnn(rng)
    assert _retained_beyond_ys(f, h0, xs) < T * B * H * 4


def test_unbatched_forward_pass_really_holds_less_than_one_T_H_array(rng):
    f, h0, xs, _ = make_rnn(rng, batch=())
    assert _retained_beyond_ys(f, h0, xs) < T * H * 4


def test_a_value_of_closed_over_tensors_only_is_computed_once_not_per_step(rng):
    W = sl.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    plan = sl.scan_plan(lambda h, x: (sl.tanh(h @ sl.tanh(W) + x), h * 3), sl.zeros((2, 4)),
                        sl.zeros((50, 2, 4)))
    per_step = [r for r in plan.residuals if r["type"] == "f64[4,4]"]
    assert per_step and all(r["policy"] == "REMOVE_ADDITIONAL_INPUTS" for r in per_step)
    assert all(r["bytes"] <= 4 * 4 * 8 for r in per_step), plan  # not 50 * that


def test_a_real_intermediate_is_kept_stacked(rng):
    w = sl.tensor(rng.standard_normal(4), requires_grad=True)
    n = 7
    plan = sl.scan_plan(lambda h, x: (sl.sin(h * w) * x, None), sl.zeros(4), sl.zeros((n, 4)))
    stacked = [r for r in rows(plan, "KEEP") if "stacked" in r["storage"]]
    assert stacked, plan
    assert all(r["bytes"] == n * 4 * 8 for r in stacked)


# --- only the gradients that are needed -----------------------------------------------------
def _xs_gradient_outputs(graph, x_shape):
    """Outputs of a backward body shaped like one step of xs, and matmuls producing that shape
    (U's transpose times g is how dx is computed)."""
    outs = [v for v in graph.outvars if getattr(v, "shape", None) == x_shape]
    matmuls = [e for e in graph.eqns if e.prim.name == "matmul"
               and e.outvars[0].shape == x_shape]
    return outs, matmuls


def test_plan_with_xs_requiring_grad_computes_dx(rnn_plan):
    outs, matmuls = _xs_gradient_outputs(rnn_plan.backward_body, (B, I))
    assert outs and matmuls  # so the next test's check can fail


def test_plan_with_xs_not_requiring_grad_computes_no_dx(rng):
    f, h0, xs, _ = make_rnn(rng, xs_grad=False)
    plan = sl.scan_plan(f, h0, xs)
    outs, matmuls = _xs_gradient_outputs(plan.backward_body, (B, I))
    assert not outs and not matmuls, plan.backward_body


@pytest.mark.parametrize("xs_grad", [False, True])
def test_backward_scan_computes_dx_only_when_xs_requires_grad(rng, monkeypatch, xs_grad):
    # The same property on the backward scan that .backward() really runs (small sizes).
    primitive = importlib.import_module("scanlib.scan.primitive")
    seen = []
    real = primitive.linearize

    def spy(*args, **kw):
        lin = real(*args, **kw)
        seen.append(lin)
        return lin

    monkeypatch.setattr(primitive, "linearize", spy)
    W = sl.tensor(rng.standard_normal((8, 8)), requires_grad=True)
    U = sl.tensor(rng.standard_normal((6, 8)), requires_grad=True)
    xs = sl.tensor(rng.standard_normal((5, 4, 6)), requires_grad=xs_grad)
    _, ys = sl.scan(lambda h, x: (sl.tanh(h @ W + x @ U),) * 2, sl.zeros((4, 8)), xs)
    ys.sum().backward()
    assert seen
    for lin in seen:
        outs, matmuls = _xs_gradient_outputs(lin.bwd_body, (4, 6))
        assert bool(outs) == xs_grad and bool(matmuls) == xs_grad, lin.bwd_body
    assert (xs.grad is not None) == xs_grad and U.grad is not None


# --- printing ---------------------------------------------------------------------------------
def test_printed_plan_shows_body_backward_body_and_policies(rnn_plan):
    text = str(rnn_plan)
    assert text == repr(rnn_plan)
    assert "def body(" in text and "def backward_body(" in text
    assert "tanh(" in text and "matmul(" in text
    assert "f32[32,128]" in text and "f32[32,64]" in text
    for word in ("KEEP", "CLONE", "REMOVE_XS", "REMOVE_ADDITIONAL_INPUTS"):
        assert word in text
    assert f"{rnn_plan.residual_bytes:,}" in text  # the total


def test_plan_body_is_the_traced_forward_graph(rnn_plan):
    body = rnn_plan.body
    assert [e.prim.name for e in body.eqns].count("matmul") == 2
    assert [e.prim.name for e in body.eqns][-1] == "tanh"
    assert [v.shape for v in body.invars] == [(B, H), (B, I)]
    assert rnn_plan.length == T and rnn_plan.reverse is False
