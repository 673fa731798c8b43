"""Small triangular solves by substitution over the batch (decompositions._substitution):
where it fires (no LAPACK call), that it agrees with the LU path on the masked triangle to
rounding for every lower/trans/unit_diagonal combination, batched or not, float32 and float64,
and that wherever it cannot show it applies (a NaN or inf, a zero on the diagonal, overflow,
another dtype) the LU path runs and gives exactly what it gave before; gradients, jit, vmap and
scan bodies too. The LU path is forced by setting the size limits to 0."""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib.ops import decompositions as D


@pytest.fixture
def lu_only(monkeypatch):
    """A context in which every triangular solve takes the LU path."""
    class Off:
        def __enter__(self):
            monkeypatch.setattr(D, "_SUBSTITUTION_MAX_N", 0)
            monkeypatch.setattr(D, "_SUBSTITUTION_MAX_N_STACKED", 0)

        def __exit__(self, *exc):
            monkeypatch.setattr(D, "_SUBSTITUTION_MAX_N", 4)
            monkeypatch.setattr(D, "_SUBSTITUTION_MAX_N_STACKED", 32)
    return Off()


@pytest.fixture
def lapack_calls(monkeypatch):
    """How many times np.linalg.solve has been called (the LU path's only LAPACK call)."""
    calls = []
    solve = np.linalg.solve

    def counted(*args):
        calls.append(args)
        return solve(*args)
    monkeypatch.setattr(np.linalg, "solve", counted)
    return calls


def _triangular(rng, shape, dtype=np.float64):
    """Well conditioned in both triangles (diagonal +-2, off-diagonal 0.3 N(0, 1))."""
    n = shape[-1]
    signs = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return (0.3 * rng.standard_normal(shape) + np.diag(2.0 * signs)).astype(dtype)


def _both(fn, lu_only):
    fast = fn()
    with lu_only:
        slow = fn()
    return fast, slow


@pytest.mark.parametrize("a_shape,b_shape", [((2, 2), (2,)), ((1, 1), (1, 3)), ((3, 3), (3, 2)),
                                             ((5, 4, 4), (5, 4, 1)), ((2, 2), (7, 2, 2)),
                                             ((64, 16, 16), (64, 16, 3)),
                                             ((64, 1, 8, 8), (3, 8, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_substitution_fires_and_agrees_with_lu(a_shape, b_shape, dtype, lu_only, lapack_calls):
    rng = np.random.default_rng(0)
    a = _triangular(rng, a_shape, dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    rtol = 1e-13 if dtype == np.float64 else 2e-5
    for lower in (True, False):
        for trans in (0, 1, 2, "N", "T", "C"):
            for unit in (False, True):
                def solve(trans=trans, lower=lower, unit=unit):
                    return sl.linalg.solve_triangular(sl.tensor(a), sl.tensor(b), trans=trans,
                                                      lower=lower, unit_diagonal=unit).numpy()
                del lapack_calls[:]
                fast = solve()
                assert not lapack_calls, "a small system went to LAPACK"
                with lu_only:
                    slow = solve()
                assert lapack_calls
                assert fast.dtype == slow.dtype == dtype and fast.shape == slow.shape
                np.testing.assert_allclose(fast, slow, rtol=rtol, atol=rtol)


def test_unread_triangle_and_unit_diagonal_are_ignored(lu_only, lapack_calls):
    rng = np.random.default_rng(1)
    a = _triangular(rng, (3, 3))
    b = rng.standard_normal((3, 2))
    junk = a + 1e6 * np.triu(np.ones((3, 3)), 1)  # finite junk above the diagonal
    want = np.linalg.solve(np.tril(a), b)
    got = sl.linalg.solve_triangular(sl.tensor(junk), sl.tensor(b), lower=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14)
    zero_diagonal = junk - np.diag(np.diagonal(junk))  # unit_diagonal reads no diagonal
    want = np.linalg.solve(np.tril(a, -1) + np.eye(3), b)
    del lapack_calls[:]
    got = sl.linalg.solve_triangular(sl.tensor(zero_diagonal), sl.tensor(b), lower=True,
                                     unit_diagonal=True).numpy()
    assert not lapack_calls
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_larger_single_systems_stay_on_lu(lapack_calls):
    rng = np.random.default_rng(2)
    a = _triangular(rng, (8, 8))
    sl.linalg.solve_triangular(sl.tensor(a), sl.tensor(np.ones(8)), lower=True)
    assert len(lapack_calls) == 1


def _nan(a, i, j):
    a = a.copy()
    a[..., i, j] = np.nan
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["nan-b", "inf-b", "nan-read", "nan-unread", "inf-diagonal",
                                  "inf-off-diagonal", "overflow", "underflow"])
def test_not_finite_as_the_lu_path_gives_it(case, dtype, lu_only):
    a = np.array([[2.0, 0.0], [1.0, 4.0]])
    b = np.array([1.0, 2.0])
    tiny, huge = (1e-300, 1e300) if dtype == np.float64 else (1e-30, 1e30)
    if case == "nan-b":
        b[0] = np.nan
    elif case == "inf-b":
        b[1] = np.inf
    elif case == "nan-read":
        a = _nan(a, 1, 0)
    elif case == "nan-unread":
        a = _nan(a, 0, 1)
    elif case == "inf-diagonal":
        a[0, 0] = np.inf
    elif case == "inf-off-diagonal":
        a[1, 0] = np.inf
    elif case == "overflow":
        a = np.array([[tiny, 0.0], [1.0, tiny]])
    else:
        a, b = np.array([[huge, 0.0], [1.0, huge]]), np.array([tiny, 1.0])
    a, b = a.astype(dtype), b.astype(dtype)

    def solve():
        try:
            return sl.linalg.solve_triangular(sl.tensor(a), sl.tensor(b), lower=True).numpy()
        except np.linalg.LinAlgError as e:  # LU's pivoting can meet a singular matrix
            return str(e)
    fast, slow = _both(solve, lu_only)
    if isinstance(slow, str):
        assert fast == slow
        return
    assert fast.dtype == slow.dtype == dtype
    np.testing.assert_array_equal(fast, slow)  # NaN where NaN, inf where inf, same values


def test_zero_diagonal_raises_as_before():
    with pytest.raises(np.linalg.LinAlgError, match="zero on its diagonal"):
        sl.linalg.solve_triangular(sl.tensor(np.array([[1.0, 0.0], [3.0, 0.0]])),
                                   sl.tensor([1.0, 1.0]), lower=True)
    stack = np.stack([np.eye(2)] * 63 + [np.diag([1.0, 0.0])])
    with pytest.raises(np.linalg.LinAlgError, match="zero on its diagonal"):
        sl.linalg.solve_triangular(sl.tensor(stack), sl.tensor(np.ones((64, 2, 1))))


def test_other_dtypes_stay_on_lu(lapack_calls):
    a = np.array([[2.0, 0.0], [1.0, 4.0]])
    sl.linalg.solve_triangular(sl.tensor(a.astype(np.complex128)), sl.tensor(np.ones(2)))
    assert len(lapack_calls) == 1


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("unit", [False, True])
def test_gradients_unchanged(lower, trans, unit, lu_only):
    rng = np.random.default_rng(3)
    a = _triangular(rng, (2, 3, 3))
    b = rng.standard_normal((2, 3, 2))
    c = rng.standard_normal((2, 3, 2))

    def loss(a, b):
        x = sl.linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
        return sl.sum(x * c) + sl.sum(x * x)
    grads = sl.grad(loss, argnums=(0, 1))
    second = sl.grad(lambda a, b: sl.sum(grads(a, b)[0] ** 2))
    for f in (lambda: grads(sl.tensor(a), sl.tensor(b)),
              lambda: (second(sl.tensor(a), sl.tensor(b)),)):
        fast, slow = _both(f, lu_only)
        for x, y in zip(fast, slow):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12, atol=1e-13)


def test_jit_vmap_scan_and_cho_solve(lu_only):
    rng = np.random.default_rng(4)
    a = _triangular(rng, (6, 2, 2))
    b = rng.standard_normal((6, 2))
    ta, tb = sl.tensor(a), sl.tensor(b)

    def one(a, b):
        return sl.linalg.solve_triangular(a, b, lower=True)

    def body(c, ab):
        x = one(*ab)
        return c + sl.sum(x), x

    want = np.stack([np.linalg.solve(np.tril(m), r) for m, r in zip(a, b)])
    runs = {"vmap": lambda: sl.vmap(one)(ta, tb),
            "jit vmap": lambda: sl.jit(sl.vmap(one))(ta, tb),
            "scan": lambda: sl.scan(body, sl.tensor(0.0), (ta, tb))[1],
            "jit scan": lambda: sl.jit(lambda a, b: sl.scan(body, sl.tensor(0.0), (a, b))[1])(
                ta, tb),
            "grad scan": lambda: sl.grad(lambda a: sl.scan(body, sl.tensor(0.0), (a, tb))[0])(ta),
            "cho_solve": lambda: sl.linalg.cho_solve(
                (sl.linalg.cholesky(sl.tensor(a @ np.swapaxes(a, -1, -2))), True), tb[..., None])}
    for name, run in runs.items():
        fast, slow = _both(lambda run=run: run().numpy(), lu_only)
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-14, err_msg=name)
        if name in ("vmap", "jit vmap", "scan", "jit scan"):
            np.testing.assert_allclose(fast, want, rtol=1e-13, err_msg=name)
