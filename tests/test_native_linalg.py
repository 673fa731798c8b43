"""scan(..., compiler="numba") on bodies with batched linear algebra: solve, solve_triangular
and cholesky of stacks of matrices [..., n, n] (native_rules.py writes them as a loop over the
stack). Each body must run as a kernel, forward and backward, and agree with the Python loop
and the NumPy loop to a tolerance (numba's elimination is not LAPACK's, so not bit for bit);
a matrix of a stack that the kernel cannot solve as NumPy would gives NumPy's values or
NumPy's error; forms the rules cannot prove fall back with a warning.
"""

import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native
from test_numba_loop import check

RNG = np.random.default_rng(27)
RTOL = {"float64": 1e-9, "float32": 2e-3}


def _t(shape, dtype="float64", scale=1.0, diagonal=0.0):
    """A random tensor; `diagonal` added to the last two axes' diagonal (well conditioned)."""
    x = scale * RNG.standard_normal(shape)
    if diagonal:
        x = x + diagonal * np.eye(shape[-1])
    return sl.tensor(x.astype(dtype))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_batched_solve_with_broadcast_batch_axes(dtype, reverse):
    A = sl.tensor(_t((2, 1, 3, 3), dtype, 0.3, diagonal=2.0).numpy(), requires_grad=True)

    def f(c, x):
        y = sl.linalg.solve(A + x, c)  # [2, 1] with [4, 1] matrices: a [2, 4] stack
        return sl.tanh(y[0]), sl.sum(y * y, axis=(-1, -2))

    check(f, _t((4, 3, 2), dtype), _t((6, 4, 1, 1), dtype, 0.1), reverse, rtol=RTOL[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_batched_solve_of_a_vector_and_of_one_matrix_against_a_stack(dtype):
    M = _t((3, 3), dtype, 0.3, diagonal=2.0)

    def f(c, x):
        v = sl.linalg.solve(x, c[0, :, 0])  # a stack of matrices, one right-hand side [n]
        w = sl.linalg.solve(M, c)  # one matrix, a stack of right-hand sides
        return sl.tanh(w + v[..., None] * 0.1), v  # v[..., None]: a scatter_add at (...,)

    check(f, _t((2, 3, 2), dtype), _t((5, 2, 3, 3), dtype, 0.3, diagonal=2.0),
          rtol=RTOL[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("lower, unit_diagonal", [(True, False), (False, False), (True, True),
                                                  (False, True)])
def test_batched_triangular_solve(lower, unit_diagonal, dtype):
    def f(c, x):
        y = sl.linalg.solve_triangular(x, c, lower=lower, unit_diagonal=unit_diagonal)
        z = sl.linalg.solve_triangular(x, c[:, :, :1], trans="T", lower=lower)
        return sl.tanh(y), sl.sum(z, axis=(1, 2))

    check(f, _t((3, 4, 2), dtype), _t((5, 3, 4, 4), dtype, 0.3, diagonal=2.0),
          rtol=RTOL[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_batched_cholesky_and_cho_solve_a_kalman_update(dtype):
    H = _t((2, 3), dtype, 0.5)

    def f(carry, y):  # a Kalman update of a stack of 4 filters (vmap's form)
        m, P = carry
        S = H @ P @ H.T + 0.5 * sl.eye(2, dtype=dtype)
        L = sl.linalg.cholesky(S)
        K = sl.linalg.cho_solve((L, True), H @ P)
        v = y - m @ H.T
        m = m + sl.sum(K * sl.reshape(v, (4, 2, 1)), axis=-2)
        P = P - sl.swapaxes(K, -1, -2) @ H @ P
        return (m, 0.5 * (P + sl.swapaxes(P, -1, -2)) + 0.1 * sl.eye(3, dtype=dtype)), \
            sl.sum(L * sl.eye(2, dtype=dtype), axis=(-1, -2))

    P0 = np.broadcast_to(np.eye(3, dtype=dtype), (4, 3, 3)).copy()
    check(f, (_t((4, 3), dtype), sl.tensor(P0)), _t((7, 4, 2), dtype), rtol=RTOL[dtype])


def test_index_forms_of_vmapped_bodies():
    # vmap writes emissions[t] of a batch as E[:, t] and a diagonal of a stack as
    # M[..., i, i] (with its scatter_adds in the backward body)
    ts = sl.tensor(np.array([0, 2, 5, 1, -1]))

    def loss(c, E, compiler):
        def f(c, t):
            M = c[..., None] * c[..., None, :] + 2.0 * sl.eye(2)
            d = sl.diagonal(M, axis1=-2, axis2=-1)
            return sl.tanh(c + E[:, t] * 0.5), sl.sum(sl.log(d), axis=-1)

        carry, ys = sl.scan(f, c, ts, compiler=compiler)
        return sl.sum(carry * carry) + sl.sum(ys)

    c, E = _t((3, 2)), _t((3, 6, 2))
    want = sl.value_and_grad(loss, argnums=(0, 1))(c, E, "numpy")
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = sl.value_and_grad(loss, argnums=(0, 1))(c, E, "numba")
    assert native.STATS["kernel calls"] >= before + 2  # forward and backward
    assert np.abs(want[1][1].numpy()[:, [0, 1, 2, 5]]).min() > 0  # the rows read
    for g, w in zip([got[0], *got[1]], [want[0], *want[1]]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)


def _kernel_ran_and(f, init, xs):
    """scan's result under compiler="numba", asserting that a kernel was tried, none fell
    back with a warning."""
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        out = sl.scan(f, init, xs, compiler="numba")
    assert native.STATS["kernel calls"] > before, "no numba kernel ran"
    return out


def _stack_with(matrix, count=3, step=2, steps=4):
    """[steps, count, n, n] well-conditioned matrices, `matrix` at step `step` in the middle
    of the stack."""
    n = len(matrix)
    xs = RNG.standard_normal((steps, count, n, n)) * 0.1 + 2.0 * np.eye(n)
    xs[step, count // 2] = matrix
    return sl.tensor(xs)


@pytest.mark.parametrize("who, matrix, message", [
    ("solve", [[1.0, 2.0], [2.0, 4.0]], "singular"),
    ("solve_triangular", [[2.0, 0.0], [1.0, 0.0]], "diagonal"),
    ("cholesky", [[1.0, 2.0], [2.0, 1.0]], "positive definite"),
])
def test_a_failing_matrix_in_the_middle_of_a_stack_raises_numpys_error(who, matrix, message):
    fn = {"solve": lambda a, c: sl.linalg.solve(a, c),
          "solve_triangular": lambda a, c: sl.linalg.solve_triangular(a, c, lower=True),
          # (scaled by the carry, so that it is in the step, not hoisted out of the loop)
          "cholesky": lambda a, c: sl.linalg.cholesky(a * sl.sum(c * c)) @ c}[who]
    xs = _stack_with(np.array(matrix))
    init = sl.tensor(np.ones((3, 2, 1)))
    before = native.STATS["kernel calls"]
    with pytest.raises(np.linalg.LinAlgError, match=message):
        sl.scan(lambda c, a: (0.5 * fn(a, c), c), init, xs, compiler="numba")
    assert native.STATS["kernel calls"] > before  # the kernel raised; NumPy's loop reran


def test_a_nearly_singular_matrix_in_a_stack_gives_numpys_values():
    # LAPACK's pivot is 2.2e-16, not zero: NumPy solves it. The kernel's elimination cannot
    # promise the same pivot (its rounding is not LAPACK's), raises, and NumPy's loop runs.
    xs = _stack_with(np.array([[1.0, 1.0], [1.0, 1.0 + 2.0 ** -52]]))
    init = sl.tensor(RNG.standard_normal((3, 2, 1)))

    def f(c, a):
        y = sl.linalg.solve(a, c)
        return 0.5 * c + 1e-17 * y, y

    got = _kernel_ran_and(f, init, xs)
    want = sl.scan(f, init, xs)
    assert np.isfinite(want[1].numpy()).all()
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


@pytest.mark.parametrize("init, xs, match", [
    (np.ones((0, 2, 1)), np.ones((3, 0, 2, 2)), "solve of"),  # an empty stack
    (np.ones((2, 2, 1), complex), np.ones((3, 2, 2, 2), complex) + np.eye(2), "complex"),
])
def test_forms_the_rules_cannot_prove_fall_back(init, xs, match):
    def f(c, a):
        y = sl.linalg.solve(a, c)
        return 0.5 * c + 0.1 * y, y

    want = sl.scan(f, sl.tensor(init), sl.tensor(xs))
    with pytest.warns(sl.NumbaFallbackWarning, match=match):
        got = sl.scan(f, sl.tensor(init), sl.tensor(xs), compiler="numba")
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    assert got[1].dtype == want[1].dtype


def test_jit_fuses_a_scan_with_batched_linear_algebra():
    from test_fused import check as check_fused

    def make(compiler):
        def loss(A, c0, xs):
            def f(c, x):
                L = sl.linalg.cholesky(A @ sl.swapaxes(A, -1, -2) + sl.eye(2) * (1.0 + x))
                y = sl.linalg.solve_triangular(L, c, lower=True)
                return 0.5 * c + sl.linalg.solve(A + 2.0 * sl.eye(2), y), sl.sum(y)

            c, ys = sl.scan(f, c0, xs, compiler=compiler)
            return sl.sum(c * c) + sl.sum(ys)

        return sl.value_and_grad(loss, argnums=(0, 1))

    check_fused(make, _t((3, 2, 2), scale=0.5), _t((3, 2, 1)), sl.tensor(np.arange(5) * 0.1),
                rtol=1e-9)
