"""Immutability: scanlib computes in place only into arrays it allocated itself (the walk's
sums, the loop's stacks and temporaries). No input, closed-over array, cotangent or earlier
result may change, whatever the body looks like."""

import numpy as np
import pytest

import scanlib as sl


def _snapshot(arrays):
    return [np.array(a, copy=True) for a in arrays]


def _bodies(W, b):
    yield "rnn", lambda h, x: (sl.tanh(h @ W + x + b),) * 2
    yield "carry unchanged", lambda h, x: (h, h * x)
    yield "accumulator", lambda h, x: (h + x * 2.0, None)
    yield "temp used twice", lambda h, x: ((lambda a: sl.tanh(a * a + a))(h + x), h)
    yield "sigmoid chain", lambda h, x: (sl.sigmoid(sl.sigmoid(h) * x + 1.0), sl.exp(-h))
    yield "slices", lambda h, x: (sl.concatenate([h[:, :2] * 2.0, sl.tanh(h[:, 2:])], 1) + x, h)
    yield "carry read once", lambda h, x: (sl.tanh(h + x), x * 2.0)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("case", range(7))
def test_scan_and_backward_leave_every_input_unchanged(case, reverse):
    rng = np.random.default_rng(case)
    h0 = rng.standard_normal((3, 4))
    xs = rng.standard_normal((40, 3, 4))
    W_np, b_np = rng.standard_normal((4, 4)) * 0.5, rng.standard_normal(4)
    P = rng.standard_normal((40, 3, 4))
    W, b = sl.tensor(W_np, requires_grad=True), sl.tensor(b_np, requires_grad=True)
    name, f = list(_bodies(W, b))[case]
    before = _snapshot([h0, xs, W_np, b_np, P])

    def loss(h0, xs):
        carry, ys = sl.scan(f, h0, xs, reverse=reverse)
        total = (carry * carry).sum()
        return total + ((ys * P).sum() if ys is not None else 0.0)

    value, grads = sl.value_and_grad(loss, argnums=(0, 1))(h0, xs)
    sl.tensor(h0, requires_grad=True)  # nothing below may touch h0's buffer either
    carry, ys = sl.scan(f, sl.tensor(h0), sl.tensor(xs), reverse=reverse)
    kept = _snapshot([carry.numpy()] + ([ys.numpy()] if ys is not None else []))
    l2 = loss(sl.tensor(h0, requires_grad=True), sl.tensor(xs, requires_grad=True))
    l2.backward()
    after = _snapshot([h0, xs, W_np, b_np, P])
    for a, c in zip(before, after):
        np.testing.assert_array_equal(a, c, err_msg=f"{name}: an input changed")
    for a, c in zip(kept, [carry.numpy()] + ([ys.numpy()] if ys is not None else [])):
        np.testing.assert_array_equal(a, c, err_msg=f"{name}: an earlier result changed")
    assert np.isfinite(value.item()) and all(np.isfinite(g.numpy()).all() for g in grads)


def test_vjp_leaves_the_cotangent_and_the_outputs_unchanged():
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((30, 5))
    ct = rng.standard_normal((30, 5))
    before = _snapshot([xs, ct])

    def f(xs):
        return sl.scan(lambda c, x: (c + x, c * x), sl.zeros(5), xs)[1]

    out, back = sl.vjp(f, xs)
    out_before = _snapshot([out.numpy()])
    g1 = back(sl.tensor(ct))[0].numpy().copy()
    g2 = back(sl.tensor(ct))[0].numpy()
    np.testing.assert_array_equal(g1, g2)  # a second call sees the same, unmodified inputs
    for a, c in zip(before + out_before, _snapshot([xs, ct, out.numpy()])):
        np.testing.assert_array_equal(a, c)


def test_loop_walk_sums_in_place_only_into_its_own_arrays():
    # x is used by several ops: its cotangent is summed in place, but the first contribution
    # handed back by a rule (here g itself, shared with y's cotangent) must not be mutated.
    x = sl.tensor(np.ones(3), requires_grad=True)
    y = sl.tensor(np.full(3, 2.0), requires_grad=True)
    s = x + y
    loss = (s + x + x * 3.0).sum()
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 5.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(3))
