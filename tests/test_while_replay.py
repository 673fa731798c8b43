"""jit's replay of a while_loop and its gradient (scanlib/while_replay.py): the loop runs once,
on the tape as eager's does, and its VJP equation walks back through that tape instead of
running the loop again. A jitted value_and_grad must give eager's values and gradients bit for
bit (the same operations on the same arrays), and the Python loop's to rounding, in every
case the pairing takes, and in those it must leave alone.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl

RNG = np.random.default_rng(7)
W0 = sl.tensor(RNG.normal(size=(6, 6)) * 0.4)
H0 = sl.tensor(RNG.normal(size=6))
XS = sl.tensor(RNG.normal(size=(40, 6)))  # closed over: its cotangent is read by nobody


@pytest.fixture(autouse=True)
def numpy_loops():
    old = sl.set_loop_compiler("numpy")
    yield
    sl.set_loop_compiler(old)


def _source(jitted):
    return "\n".join(t._run.source for t in jitted._traces.values())


def _leaves(tree):
    return [np.asarray(x.numpy() if isinstance(x, sl.Tensor) else x)
            for x in sl.pytree.flatten(tree)[0]]


def _same(a, b):
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def _close(a, b):
    for x, y in zip(_leaves(a), _leaves(b)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def python_while(cond_fun, body_fun, val):
    while bool(cond_fun(val)):
        val = body_fun(val)
    return val


def _body(W, scale):
    def body(c):
        t, h, acc = c
        h = sl.tanh(h @ W + XS[t]) + 0.1 * h
        return t + 1, h, acc + scale * sl.sum(h * h)
    return body


CONDS = {
    "counter": lambda limit: lambda c: c[0] < 9,
    "state": lambda limit: lambda c: (c[0] < 30) & (c[2] < limit),
    "no trips": lambda limit: lambda c: c[0] < 0,
    "one trip": lambda limit: lambda c: c[0] < 1,
}


def _loss(kind, loop):
    def f(W, h, scale, limit):
        t, h, acc = loop(CONDS[kind](limit), _body(W, scale), (sl.tensor(0), h, scale * 0.0))
        return acc + sl.sum(sl.sin(h))
    return f


@pytest.mark.parametrize("kind", sorted(CONDS))
def test_jitted_gradient_is_eagers_and_the_loops(kind):
    args = (W0, H0, sl.tensor(0.7), sl.tensor(12.0))
    vg = sl.value_and_grad(_loss(kind, sl.while_loop), argnums=(0, 1, 2))
    jitted = sl.jit(vg)
    want = vg(*args)
    for _ in range(2):  # the trace's call, then a replay
        _same(jitted(*args), want)
    assert "while_loop_keeping_tape" in _source(jitted)
    assert "while_loop_vjp_from_tape" in _source(jitted)
    _close(want, sl.value_and_grad(_loss(kind, python_while), argnums=(0, 1, 2))(*args))


def test_a_carry_without_cotangent_and_a_cond_constant():
    """The cond reads a tensor (a cond constant); the loss reads only the hidden state, so
    the accumulator's and the counter's cotangents are absent."""
    def f(W, h, limit, loop):
        _, h, _ = loop(lambda c: (c[0] < 25) & (sl.sum(c[1] * c[1]) < limit),
                       _body(W, 1.0), (sl.tensor(0), h, sl.tensor(0.0)))
        return sl.sum(h * h)

    args = (W0, H0, sl.tensor(4.0))
    vg = sl.value_and_grad(lambda W, h, lim: f(W, h, lim, sl.while_loop), argnums=(0, 1))
    jitted = sl.jit(vg)
    _same(jitted(*args), vg(*args))
    _same(jitted(*args), vg(*args))
    assert "while_loop_vjp_from_tape" in _source(jitted)
    _close(vg(*args), sl.value_and_grad(lambda W, h, lim: f(W, h, lim, python_while),
                                        argnums=(0, 1))(*args))


def test_the_loops_value_used_twice_after_it():
    """The carries feed the loss twice and the grad is taken with respect to a closed-over
    tensor as well: the pairing reads which cotangents are wanted from the graph."""
    W = sl.tensor(W0.numpy())

    def f(h, loop):
        _, h, acc = loop(lambda c: c[0] < 6, _body(W, 1.0), (sl.tensor(0), h, sl.tensor(0.0)))
        return acc * sl.sum(h) + sl.sum(h * h)

    def g(h, loop):  # W is closed over; its gradient through sl.grad of a closure
        return sl.grad(lambda h: f(h, loop))(h)

    jitted = sl.jit(lambda h: g(h, sl.while_loop))
    _same(jitted(H0), g(H0, sl.while_loop))
    _same(jitted(H0), g(H0, sl.while_loop))
    _close(g(H0, sl.while_loop), g(H0, python_while))


def test_second_order_is_left_to_the_recomputing_vjp():
    """A gradient of a gradient reads the trip count twice: no pairing, the same values."""
    f = _loss("state", sl.while_loop)

    def gg(W):
        g = sl.grad(lambda W: f(W, H0, sl.tensor(0.7), sl.tensor(12.0)))(W)
        return sl.sum(g * g)

    want = sl.grad(gg)(W0)
    jitted = sl.jit(sl.grad(gg))
    _close(jitted(W0), want)
    _close(jitted(W0), want)
    assert "while_loop_keeping_tape" not in _source(jitted)
    ref = _loss("state", python_while)
    _close(want, sl.grad(lambda W: sl.sum(sl.grad(
        lambda W: ref(W, H0, sl.tensor(0.7), sl.tensor(12.0)))(W) ** 2))(W0))


def test_vmap_inside_jit_is_left_alone():
    hs = sl.tensor(RNG.normal(size=(3, 6)))
    vg = sl.vmap(sl.value_and_grad(lambda h: _loss("state", sl.while_loop)(
        W0, h, sl.tensor(0.7), sl.tensor(12.0))))
    jitted = sl.jit(vg)
    _close(jitted(hs), vg(hs))
    _close(jitted(hs), vg(hs))


def test_max_steps_raises_in_the_replay():
    def f(h):
        _, h, acc = sl.while_loop(lambda c: c[0] >= 0, _body(W0, 1.0),
                                  (sl.tensor(0), h, sl.tensor(0.0)), max_steps=5)
        return acc

    jitted = sl.jit(sl.value_and_grad(f))
    for _ in range(2):  # the trace runs on stand-ins; the replays run the loop
        with pytest.raises(RuntimeError, match="max_steps=5"):
            jitted(H0)


def test_float32_carries_keep_their_dtype():
    W, h = sl.tensor(W0.numpy().astype(np.float32)), sl.tensor(H0.numpy().astype(np.float32))
    xs = XS.numpy().astype(np.float32)

    def f(W, h):
        def body(c):
            t, h = c
            return t + 1, sl.tanh(h @ W + sl.tensor(xs)[t])
        _, h = sl.while_loop(lambda c: (c[0] < 8) & (sl.sum(c[1]) < 3.0), body,
                             (sl.tensor(0), h))
        return sl.sum(h * h)

    vg = sl.value_and_grad(f, argnums=(0, 1))
    jitted = sl.jit(vg)
    _same(jitted(W, h), vg(W, h))
    out = jitted(W, h)
    assert [x.dtype for x in _leaves(out)] == [np.float32] * 3
