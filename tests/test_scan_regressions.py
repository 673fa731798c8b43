"""One regression test per failure reported in issue 9 ("scan you can trust"), each a
minimal reproduction checked against the Python loop that defines scan (and, where the
failure was in the loop compiler, against the reference interpreter too).
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl


def loop(f, init, xs, reverse=False):
    """scan's definition on the tape: the Python loop, ys stacked."""
    carry, out = init, [None] * len(xs)
    for t in (reversed(range(len(xs))) if reverse else range(len(xs))):
        carry, out[t] = f(carry, xs[t])
    return carry, out


def both(f, init, xs, **kw):
    """scan compiled and interpreted."""
    return [sl.scan(f, init, xs, interpret=i, **kw) for i in (False, True)]


def np_(x):
    return np.asarray(x.numpy() if isinstance(x, sl.Tensor) else x)


# --- 1. no_grad and detach inside a body -----------------------------------------------------
@pytest.mark.parametrize("cut", ["no_grad", "detach", "stop_gradient"])
def test_cut_inside_body_stops_the_gradient(cut):
    def f(c, x):
        if cut == "no_grad":
            with sl.no_grad():
                held = c * c + x
        elif cut == "detach":
            held = (c * c + x).detach()
        else:
            held = sl.stop_gradient(c * c + x)
        return held * 2 + c, None

    xs = sl.tensor(np.linspace(0.1, 0.4, 4 * 3).reshape(4, 3))
    x0 = np.array([0.3, -0.2, 0.5])
    want = sl.grad(lambda c: loop(f, c, xs)[0].sum())(x0)
    for interpret in (False, True):
        got = sl.grad(lambda c: sl.scan(f, c, xs, interpret=interpret)[0].sum())(x0)
        np.testing.assert_allclose(np_(got), np_(want), rtol=1e-12)
    np.testing.assert_allclose(np_(want), np.ones(3))  # only `+ c` carries a gradient


# --- 5. tensor() and grad inside a body ---------------------------------------------------------
def test_tensor_of_a_traced_value_is_its_value():
    xs = np.arange(1.0, 4.0)
    for carry, _ in both(lambda c, x: (c + sl.tensor(x), None), 0.0, xs):
        assert carry.item() == 6.0
    for carry, _ in both(lambda c, x: (c + sl.tensor(x, dtype=np.float32), None),
                         np.float32(0), xs):
        assert carry.dtype == np.float32 and carry.item() == 6.0


def test_tensor_of_a_traced_value_has_no_gradient_history():
    f = lambda c, x: (c * sl.tensor(c) + x, None)  # noqa: E731
    xs = sl.tensor([0.1, 0.2, 0.3])
    want = sl.grad(lambda c: loop(f, c, xs)[0])(0.5)
    got = sl.grad(lambda c: sl.scan(f, c, xs)[0])(0.5)
    np.testing.assert_allclose(np_(got), np_(want), rtol=1e-12)


def test_grad_inside_a_body_with_respect_to_a_closed_over_tensor_and_a_number():
    W = sl.tensor(2.0, requires_grad=True)

    def f(c, x):
        gw = sl.grad(lambda w: (w * w * x).sum())(W)       # 2 W x
        gn = sl.grad(lambda a: a * a * x)(3.0)             # 6 x
        return c + gw + gn, None

    xs = sl.tensor([1.0, 2.0, 3.0])
    want = loop(f, 0.0, xs)[0]
    for carry, _ in both(f, 0.0, xs):
        np.testing.assert_allclose(np_(carry), np_(want))
    assert want.item() == pytest.approx(4.0 * 6 + 6.0 * 6)
    # and the outer gradient through that inner gradient: d/dW sum_t 2 W x_t = 2 sum x
    gW = sl.grad(lambda w: sl.scan(
        lambda c, x: (c + sl.grad(lambda v: (v * v * x).sum())(w), None), 0.0, xs)[0])(W)
    assert gW.item() == pytest.approx(12.0)


# --- 6. a traced value that escapes ----------------------------------------------------------
def test_escaped_tracer_raises():
    log = []

    def f(c, x):
        log.append(c)
        return c + x, None

    sl.scan(f, 0.0, np.ones(3))
    with pytest.raises(TypeError, match="escaped"):
        log[-1] + 1.0
    with pytest.raises(TypeError, match="escaped"):
        log[-1].numpy()
    with pytest.raises(TypeError, match="escaped"):  # closed over by a later body
        sl.scan(lambda c, x: (c + log[-1], None), 0.0, np.ones(3))
