"""The tape itself: long chains at the default recursion limit, release of the recorded graph
after backward, and per-thread recording.
"""

from __future__ import annotations

import gc
import sys
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import scanlib as sl
from scanlib.tape import Node


def _live_nodes() -> tuple[int, int]:
    """(Node objects alive, those still holding their inputs: the recorded graph's edges)."""
    gc.collect()
    nodes = [o for o in gc.get_objects() if type(o) is Node]
    return len(nodes), sum(1 for n in nodes if n.inputs is not None)


def test_long_chain_at_default_recursion_limit(backend):
    assert sys.getrecursionlimit() <= 10_000  # the walk must not lean on a raised limit
    n, k = 100_000, 1.0000001
    x = backend.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(n):
        y = y * k
    y.backward()
    np.testing.assert_allclose(x.grad.item(), k**n, rtol=1e-9)
    # Freeing the chain must not recurse either (a deep chain of Tensor -> Node -> Tensor).
    del y
    gc.collect()


def test_long_chain_functional_grad(backend):
    def f(x):
        for _ in range(20_000):
            x = sl.tanh(x) * 1.0001 + 0.001
        return x

    g = sl.grad(f)(backend.tensor(0.3))
    # Reference: the same recurrence, differentiated by hand.
    v, d = 0.3, 1.0
    for _ in range(20_000):
        t = np.tanh(v)
        d *= (1 - t * t) * 1.0001
        v = t * 1.0001 + 0.001
    np.testing.assert_allclose(g.item(), d, rtol=1e-9)


def _train(backend, steps, style):
    rng = np.random.default_rng(0)
    xs = backend.tensor(rng.standard_normal((16, 4)))
    ys = backend.tensor(rng.standard_normal((16, 1)))
    # Functional-style parameters need no requires_grad (with it, grad links its result into
    # the caller's tape, as for grad-inside-backward code, and keeps that graph alive).
    leaf = style == "backward"
    w = backend.tensor(np.zeros((4, 1)), requires_grad=leaf)
    b = backend.tensor(np.zeros(1), requires_grad=leaf)
    counts, history = [], []

    def loss_fn(w, b):
        return ((sl.tanh(xs @ w + b) - ys) ** 2).mean()

    for step in range(steps):
        if style == "backward":
            loss = loss_fn(w, b)
            loss.backward()
            gw, gb = w.grad, b.grad
        else:
            loss, (gw, gb) = sl.value_and_grad(loss_fn, argnums=(0, 1))(w, b)
        history.append(loss)  # a common habit: keeping the loss tensors, not loss.item()
        with sl.no_grad():
            w = sl.tensor(w - 0.1 * gw, requires_grad=leaf)
            b = sl.tensor(b - 0.1 * gb, requires_grad=leaf)
        if step in (10, steps - 1):
            counts.append((*_live_nodes(), tracemalloc.get_traced_memory()[0]))
    return loss.item(), counts


@pytest.mark.parametrize("style", ["backward", "grad"])
def test_graph_is_released_after_backward(backend, style):
    first, _ = _train(backend, 1, style)
    last, ((_, early, _), (nodes, late, _)) = _train(backend, 1000, style)
    assert last < first  # it did train
    # No step's graph outlives its backward, even though every loss tensor is kept: what
    # remains is at most one Node per kept loss, with its inputs dropped.
    assert late <= early and late < 5, f"{late} nodes still hold inputs after 1000 steps"
    assert nodes <= 1000 + 50


@pytest.mark.parametrize("style", ["backward", "grad"])
def test_memory_does_not_grow_over_training_steps(backend, style):
    tracemalloc.start()
    try:
        _, ((_, _, early), (_, _, late)) = _train(backend, 1000, style)
    finally:
        tracemalloc.stop()
    # Kept loss tensors cost a few hundred bytes each; a kept graph would cost far more.
    per_step = (late - early) / 990
    assert per_step < 2000, f"{per_step:.0f} bytes per step"


def test_intermediates_are_freed_by_backward(backend):
    x = backend.tensor(np.ones(1000), requires_grad=True)
    h = sl.tanh(x * 2.0)
    ref = weakref.ref(h)
    loss = (h * 3.0).sum()
    del h
    assert ref() is not None  # the recorded graph holds it ...
    loss.backward()
    gc.collect()
    assert ref() is None  # ... until backward releases the graph
    assert x.grad is not None


def test_second_backward_raises_unless_graph_retained(backend):
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    loss = (sl.sin(x) * x).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()  # allowed: the first call kept the graph
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match=r"already released.*retain_graph=True"):
        loss.backward()
    # A new result that reuses a released part of the graph cannot walk through it either.
    x2 = backend.tensor(1.0, requires_grad=True)
    a = x2 * x2
    (a * 2.0).backward()
    with pytest.raises(RuntimeError, match="already released"):
        (a * 3.0).backward()


def test_vjp_function_can_be_called_many_times(backend):
    x = backend.tensor([1.0, 2.0])
    _, back = sl.vjp(lambda x: sl.exp(x) * x, x)
    for _ in range(3):
        np.testing.assert_allclose(back(backend.tensor([1.0, 1.0]))[0].numpy(),
                                   np.exp([1.0, 2.0]) * [2.0, 3.0])


@pytest.fixture
def frequent_thread_switches():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads inside single operations
    yield
    sys.setswitchinterval(old)


def test_threads_compute_gradients_concurrently(backend, frequent_thread_switches):
    n_threads, iters = 4, 200
    barrier = threading.Barrier(n_threads)
    errors, results = [], {}

    def work(k):
        try:
            x = backend.tensor(np.full(3, float(k + 1)))
            barrier.wait()
            for i in range(iters):
                if k % 2:
                    g = sl.grad(lambda x: (x**3).sum() * float(k))(x)
                else:
                    xr = sl.tensor(x, requires_grad=True)
                    ((xr**3).sum() * float(k)).backward()
                    g = xr.grad
                np.testing.assert_allclose(g.numpy(), 3 * (k + 1) ** 2 * float(k))
                results[k] = i
        except Exception as e:  # noqa: BLE001 - reported below with the thread's number
            errors.append((k, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results == {k: iters - 1 for k in range(n_threads)}


def test_no_grad_is_per_thread(backend, frequent_thread_switches):
    """One thread inside no_grad() must not switch recording off for another."""
    inside, done = threading.Event(), threading.Event()
    out = {}

    def quiet():
        with sl.no_grad():
            inside.set()
            done.wait(10)

    def busy():
        inside.wait(10)
        try:
            x = backend.tensor([1.0, 2.0], requires_grad=True)
            (x * x).sum().backward()
            out["grad"] = x.grad.numpy()
        except Exception as e:  # noqa: BLE001
            out["error"] = e
        finally:
            done.set()

    threads = [threading.Thread(target=quiet), threading.Thread(target=busy)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "error" not in out, out.get("error")
    np.testing.assert_allclose(out["grad"], [2.0, 4.0])


def test_the_torch_style_in_place_update_says_what_happened():
    """`w -= lr * w.grad` rebinds w to a tensor with history (tensors are immutable): its .grad
    stays None, so reading it warns, as torch does, naming the update that works."""
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    w -= 0.1 * w.grad
    with pytest.warns(UserWarning, match=r"not a leaf.*requires_grad_\(\)"):
        assert w.grad is None
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with sl.no_grad():
        w -= 0.1 * w.grad
    with pytest.raises(RuntimeError, match=r"w -= lr \* w\.grad.*requires_grad_\(\)"):
        (w * w).sum().backward()
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with sl.no_grad():  # the update that works
        w = (w - 0.1 * w.grad).requires_grad_()
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [1.6, 3.2])


def test_the_tensor_class_refuses_a_tensor_as_its_value():
    """sl.Tensor(x) stored x as the array: a gradient silently dropped, a crash in repr."""
    x = sl.tensor([3.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"scanlib\.tensor\(data\)"):
        sl.Tensor(x)


def test_a_loops_results_its_differentiated_inputs_do_not_reach_need_no_gradient():
    """As in its Python loop and in JAX: a carry, y, branch result or checkpoint output that
    does not depend on what requires grad does not require grad, and in forward mode has a
    zero tangent; the trip count never does. floor's result carries no derivative."""
    x = sl.tensor(1.5, requires_grad=True)
    zero = sl.tensor(0.0)
    (a, b), ys = sl.scan(lambda c, _: ((c[0] * 2.0, c[1] + 1.0), c[1]), (x, zero), None,
                         length=3)
    assert a.requires_grad and not b.requires_grad and not ys.requires_grad
    a, b = sl.while_loop(lambda c: c[1] < 2.0, lambda c: (c[0] * 2.0, c[1] + 1.0), (x, zero))
    assert a.requires_grad and not b.requires_grad
    (a, b), ys = sl.scan(lambda c, _: ((c[0] * 2.0, c[1] + 1.0), c[1]), (x, zero), None,
                         length=3, checkpoint=("revolve", 2))
    assert a.requires_grad and not b.requires_grad and not ys.requires_grad
    # vmap's while_loop whose examples stop at different steps
    xs, stops = x * sl.ones(2), sl.tensor([1.0, 2.0])
    a, b = sl.vmap(lambda x, n: sl.while_loop(lambda c: c[1] < n,
                                              lambda c: (c[0] * 2.0, c[1] + 1.0),
                                              (x, sl.tensor(0.0))))(xs, stops)
    assert a.requires_grad and not b.requires_grad
    a, b = sl.lax.cond(True, lambda a, b: (a, b * 2.0), lambda a, b: (a * 2.0, b), x, zero)
    assert a.requires_grad and not b.requires_grad
    a, b = sl.checkpoint(lambda a, b: (a * 2.0, b + 1.0))(x, zero)
    assert a.requires_grad and not b.requires_grad
    assert not sl.floor(x).requires_grad
    # forward mode: b's tangent is zero, a's is not
    ta, tb = sl.jvp(lambda x: sl.scan(lambda c, _: ((c[0] * 2.0, c[1] + 1.0), None), (x, zero),
                                      None, length=3)[0], (x.detach(),), (sl.tensor(1.0),))[1]
    assert (float(ta.numpy()), float(tb.numpy())) == (8.0, 0.0)
    # the gradient through them is unchanged
    g = sl.grad(lambda x: sum(sl.scan(lambda c, _: ((c[0] * 2.0, c[1] + 1.0), c[1] * c[0]),
                                      (x, zero), None, length=3)[1]))(x.detach())
    assert float(g.numpy()) == 0.0 * 1 + 1.0 * 2 + 2.0 * 4
