"""The loop oracle for scan (the five-line Python loop of the scan issue, on the tape) and the
comparison helpers the scan test files share; the tests here check the oracle itself, so a
broken oracle cannot make scan tests pass by agreeing with it.
"""

from __future__ import annotations

import numpy as np
import optree
import pytest

import scanlib as sl

NS = "scanlib"
RTOL, ATOL = 1e-10, 1e-12


def tree_map(fn, tree, *rest):
    return optree.tree_map(fn, tree, *rest, none_is_leaf=False, namespace=NS)


def leaves(tree):
    return optree.tree_leaves(tree, none_is_leaf=False, namespace=NS)


def structure(tree):
    return optree.tree_structure(tree, none_is_leaf=False, namespace=NS)


def take(a, t, dim):
    """a[..., t, ...] on axis `dim` (negative counts from a's own end), recorded on the tape."""
    a = a if isinstance(a, sl.Tensor) else sl.as_tensor(a)
    d = dim % a.ndim
    return a[(slice(None),) * d + (t,)]


def loop_scan(f, init, xs=None, *, length=None, reverse=False, dim=0):
    """scan's definition, written as the issue writes it, with scanlib ops on the tape.

    For T == 0 the loop never calls f, so it cannot know ys' shapes: ys is returned as None.
    """
    xs_leaves = leaves(xs)
    T = length if not xs_leaves else xs_leaves[0].shape[dim % xs_leaves[0].ndim]
    carry, out = init, [None] * T
    for t in reversed(range(T)) if reverse else range(T):
        carry, out[t] = f(carry, tree_map(lambda a, t=t: take(a, t, dim), xs))
    ys = tree_map(lambda *ls: sl.stack(ls), *out) if T else None
    return carry, ys


def as_np(x):
    if isinstance(x, sl.Tensor):
        return x.numpy()
    if hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def assert_trees_close(got, want, rtol=RTOL, atol=ATOL, check_dtype=True, what="value"):
    """Same structure, and every leaf equal in shape, (where both are Tensors) dtype, and value."""
    assert structure(got) == structure(want), (
        f"{what}: structure {structure(got)} != {structure(want)}")
    for i, (g, w) in enumerate(zip(leaves(got), leaves(want))):
        gn, wn = as_np(g), as_np(w)
        assert gn.shape == wn.shape, f"{what} leaf {i}: shape {gn.shape} != {wn.shape}"
        if check_dtype and isinstance(g, sl.Tensor) and isinstance(w, sl.Tensor):
            assert g.dtype == w.dtype, f"{what} leaf {i}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_allclose(gn, wn, rtol=rtol, atol=atol, err_msg=f"{what} leaf {i}")


def cotangents_like(tree, seed=0):
    """Fixed random cotangents (NumPy float64) for every float leaf of tree; None elsewhere."""
    rng = np.random.default_rng(seed)

    def one(a):
        a = as_np(a)
        if a.dtype.kind != "f":
            return None
        return rng.standard_normal(a.shape).astype(a.dtype)

    return [one(a) for a in leaves(tree)]


def weighted_sum(tree, cts):
    """sum_i <leaf_i, ct_i> over float leaves: a scalar loss reading every output."""
    total = 0.0
    for a, c in zip(leaves(tree), cts):
        if c is not None:
            a = a if isinstance(a, sl.Tensor) else sl.as_tensor(a)
            total = total + (a * sl.tensor(c, device=a.device)).sum()
    return total


def compare_with_loop(make_f, args, *, wrt=(0,), rtol=RTOL, atol=ATOL, check_grad=True,
                      nonzero_grads=True, loop_make_f=None, **scan_kw):
    """scan vs the loop: values of (carry, ys) and gradients of a random weighted sum of them
    with respect to args[i] for i in wrt. args = (init, xs, params); f = make_f(params).
    Unless nonzero_grads=False, some gradient must be nonzero (a degenerate test otherwise).
    loop_make_f, if given, builds the loop's body (say, with loops where f has inner scans).

    Returns (scan outputs, loop outputs) for further checks.
    """

    def run(scan_fn, init, xs, params):
        build = loop_make_f if scan_fn is loop_scan and loop_make_f is not None else make_f
        return scan_fn(build(params), init, xs, **scan_kw)

    got = run(sl.scan, *args)
    want = run(loop_scan, *args)
    assert_trees_close(got, want, rtol, atol)
    if check_grad:
        cts = cotangents_like(want, seed=1)

        def loss(scan_fn):
            return lambda *a: weighted_sum(run(scan_fn, *a), cts)

        v_got, g_got = sl.value_and_grad(loss(sl.scan), argnums=tuple(wrt))(*args)
        v_want, g_want = sl.value_and_grad(loss(loop_scan), argnums=tuple(wrt))(*args)
        assert_trees_close(v_got, v_want, rtol, atol)
        assert_trees_close(g_got, g_want, rtol, atol, what="gradient")
        # A gradient that is zero everywhere would agree with a broken scan trivially.
        assert not nonzero_grads or any(np.any(as_np(g) != 0) for g in leaves(g_want)), \
            "degenerate test: zero grads"
    return got, want


# --- the oracle's own tests ----------------------------------------------------------------
def test_loop_oracle_matches_a_hand_written_recurrence():
    xs = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # scanned along dim=1: T=3

    def f(c, x):
        return c * 0.5 + x, (c, x * 2)

    carry, (ys_c, ys_x) = loop_scan(f, np.zeros(2), xs, dim=1)
    c, hist = np.zeros(2), []
    for t in range(3):
        hist.append(c)
        c = c * 0.5 + xs[:, t]
    np.testing.assert_allclose(as_np(carry), c)
    np.testing.assert_allclose(as_np(ys_c), np.stack(hist))
    np.testing.assert_allclose(as_np(ys_x), 2 * xs.T)


def test_loop_oracle_reverse_keeps_ys_aligned_with_xs():
    xs = np.array([1.0, 10.0, 100.0])
    carry, ys = loop_scan(lambda c, x: (c + x, c), 0.0, xs, reverse=True)
    np.testing.assert_allclose(as_np(carry), 111.0)
    np.testing.assert_allclose(as_np(ys), [110.0, 100.0, 0.0])


def test_loop_oracle_is_differentiable():
    w = sl.tensor(0.5)
    g = sl.grad(lambda w: loop_scan(lambda c, x: (c * w + x, None), 1.0,
                                    np.array([1.0, 2.0]))[0])(w)
    # carry = (1*w + 1)*w + 2 = w^2 + w + 2 -> d/dw = 2w + 1
    np.testing.assert_allclose(as_np(g), 2.0)


def test_assert_trees_close_catches_differences():
    with pytest.raises(AssertionError):
        assert_trees_close((sl.tensor([1.0]),), (sl.tensor([1.0 + 1e-8]),))
    with pytest.raises(AssertionError):
        assert_trees_close({"a": sl.tensor([1.0])}, {"b": sl.tensor([1.0])})
    with pytest.raises(AssertionError):
        assert_trees_close(sl.tensor([1.0], dtype="float32"), sl.tensor([1.0]))
