"""scanlib.linalg and the matrix functions (eye, diag, trace, tril, kron, tensordot, dot, ...):
forward against NumPy, VJPs against finite differences to second order, float32 against
float64, batched inputs and inside a scan body (the opcheck table), plus JAX's gradients where
JAX is installed, a Kalman-style loss in a scan against its loop, errors and dtypes.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib.testing import check_grads

from opcheck import A, D, N, case, table_tests


# --- input generators: well-conditioned matrices, so that finite differences are accurate ----
def _spd(rng, shape):
    """Symmetric positive definite, eigenvalues well apart from 0 (exactly symmetric)."""
    n = shape[-1]
    a = rng.standard_normal(shape)
    m = a @ np.swapaxes(a, -1, -2) / n + np.eye(n)
    return (m + np.swapaxes(m, -1, -2)) / 2


def _wellcond(rng, shape):
    """A general matrix with a dominant diagonal of mixed signs (det may be negative)."""
    n = shape[-1]
    signs = np.where(rng.permutation(n) % 2 == 0, 1.0, -1.0)
    return 0.3 * rng.standard_normal(shape) + np.diag(2.0 * signs)


def _negdet(rng, shape):
    """Well-conditioned with a negative determinant (one row of a positive-definite one
    flipped)."""
    m = _spd(rng, shape) + 0.2 * rng.standard_normal(shape)
    m[..., 0, :] *= -1
    return m


def _uniform(rng, shape):
    """Uniform in (-2, 2). (opcheck's finite-difference direction is the standard normal draw
    of the same seed, so an N input would be moved along itself, to which Q is blind.)"""
    return rng.uniform(-2.0, 2.0, shape)


W, S, ND, G = _wellcond, _spd, _negdet, _uniform


def _mT(x):
    return np.swapaxes(x, -1, -2)


# NumPy references for the jax.scipy functions (NumPy has none).
def _np_solve_triangular(a, b, lower=False, trans=0, unit=False):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t - np.diag(np.diagonal(t)) + np.eye(a.shape[-1]).astype(a.dtype)
    t = _mT(t) if trans else t
    return np.linalg.solve(t, b) if b.ndim > 1 else np.linalg.solve(t, b[:, None])[:, 0]


def _np_norm(ord=None, axis=None, keepdims=False):
    return lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _eigh_vectors_squared(a):
    v = sl.linalg.eigh(a).eigenvectors
    return v * v  # a sign-free function of the eigenvectors


def _np_qr(part, mode="reduced"):
    return lambda a: np.linalg.qr(a, mode=mode)[part]


CASES = [
    # inverse and solves
    case("inv", sl.linalg.inv, (W, (3, 3)), ref=np.linalg.inv),
    case("inv-batched", sl.linalg.inv, (W, (2, 3, 3)), ref=np.linalg.inv),
    case("solve-vector", sl.linalg.solve, (W, (3, 3)), (N, (3,)), ref=np.linalg.solve),
    case("solve-matrix", sl.linalg.solve, (W, (3, 3)), (N, (3, 2)), ref=np.linalg.solve),
    case("solve-batched-a-vector-b", sl.linalg.solve, (W, (2, 3, 3)), (N, (3,)),
         ref=np.linalg.solve),
    case("solve-broadcast-a", sl.linalg.solve, (W, (3, 3)), (N, (2, 3, 2)),
         ref=np.linalg.solve),
    case("solve-broadcast-b", sl.linalg.solve, (W, (2, 3, 3)), (N, (3, 1)),
         ref=np.linalg.solve),
    case("solve_triangular-lower", lambda a, b: sl.linalg.solve_triangular(a, b, lower=True),
         (W, (3, 3)), (N, (3, 2)), ref=lambda a, b: _np_solve_triangular(a, b, lower=True)),
    case("solve_triangular-upper-vector", sl.linalg.solve_triangular, (W, (3, 3)), (N, (3,)),
         ref=_np_solve_triangular),
    case("solve_triangular-trans-T",
         lambda a, b: sl.linalg.solve_triangular(a, b, trans="T", lower=True),
         (W, (3, 3)), (N, (3, 2)),
         ref=lambda a, b: _np_solve_triangular(a, b, lower=True, trans=1)),
    case("solve_triangular-trans-C-upper",
         lambda a, b: sl.linalg.solve_triangular(a, b, trans=2),
         (W, (3, 3)), (N, (3, 2)), ref=lambda a, b: _np_solve_triangular(a, b, trans=1)),
    case("solve_triangular-unit-diagonal",
         lambda a, b: sl.linalg.solve_triangular(a, b, lower=True, unit_diagonal=True),
         (W, (3, 3)), (N, (3, 2)),
         ref=lambda a, b: _np_solve_triangular(a, b, lower=True, unit=True)),
    case("solve_triangular-batched",
         lambda a, b: sl.linalg.solve_triangular(a, b, lower=True),
         (W, (2, 3, 3)), (N, (2, 3, 1)), ref=lambda a, b: np.linalg.solve(np.tril(a), b)),
    case("cho_solve-lower",
         lambda s, b: sl.linalg.cho_solve((sl.linalg.cholesky(s), True), b),
         (S, (3, 3)), (N, (3, 2)), ref=np.linalg.solve),
    case("cho_solve-upper-vector",
         lambda s, b: sl.linalg.cho_solve((sl.linalg.cholesky(s, upper=True), False), b),
         (S, (3, 3)), (N, (3,)), ref=np.linalg.solve),
    # factorizations
    case("cholesky", sl.linalg.cholesky, (S, (3, 3)), ref=np.linalg.cholesky),
    case("cholesky-batched", sl.linalg.cholesky, (S, (2, 4, 4)), ref=np.linalg.cholesky),
    case("cholesky-upper", lambda a: sl.linalg.cholesky(a, upper=True), (S, (3, 3)),
         ref=lambda a: _mT(np.linalg.cholesky(a))),
    case("eigh-eigenvalues", lambda a: sl.linalg.eigh(a)[0], (S, (4, 4)),
         ref=lambda a: np.linalg.eigh(a)[0]),
    case("eigh-eigenvalues-batched-U", lambda a: sl.linalg.eigh(a, UPLO="U").eigenvalues,
         (S, (2, 3, 3)), ref=lambda a: np.linalg.eigh(a, UPLO="U")[0]),
    case("eigh-eigenvectors", _eigh_vectors_squared, (S, (4, 4)),
         ref=lambda a: np.linalg.eigh(a)[1] ** 2),
    case("eigh-both", lambda a: sl.linalg.eigh(a)[0][..., None] * _eigh_vectors_squared(a),
         (S, (2, 3, 3)), ref=lambda a: np.linalg.eigh(a)[0][..., None] * np.linalg.eigh(a)[1] ** 2),
    case("qr-Q-tall", lambda a: sl.linalg.qr(a).Q, (G, (4, 3)), ref=_np_qr(0)),
    case("qr-R-tall", lambda a: sl.linalg.qr(a).R, (G, (4, 3)), ref=_np_qr(1)),
    case("qr-both-square", lambda a: sl.concatenate(list(sl.linalg.qr(a)), axis=-2),
         (G, (3, 3)), ref=lambda a: np.concatenate(np.linalg.qr(a), axis=-2)),
    case("qr-both-batched", lambda a: sl.concatenate(list(sl.linalg.qr(a)), axis=-2),
         (G, (2, 4, 2)), ref=lambda a: np.concatenate(np.linalg.qr(a), axis=-2)),
    case("qr-mode-r", lambda a: sl.linalg.qr(a, mode="r"), (G, (4, 3)),
         ref=lambda a: np.linalg.qr(a, mode="r")),
    case("qr-complete-square", lambda a: sl.linalg.qr(a, mode="complete").Q, (G, (3, 3)),
         ref=_np_qr(0, "complete")),
    # determinants
    case("slogdet-logabsdet", lambda a: sl.linalg.slogdet(a).logabsdet, (W, (3, 3)),
         ref=lambda a: np.linalg.slogdet(a)[1]),
    case("slogdet-negative", lambda a: sl.linalg.slogdet(a)[1], (ND, (3, 3)),
         ref=lambda a: np.linalg.slogdet(a)[1]),
    case("slogdet-sign", lambda a: sl.linalg.slogdet(a).sign, (ND, (2, 3, 3)),
         ref=lambda a: np.linalg.slogdet(a)[0]),
    case("slogdet-batched", lambda a: sl.linalg.slogdet(a)[1], (W, (2, 3, 3)),
         ref=lambda a: np.linalg.slogdet(a)[1]),
    case("det", sl.linalg.det, (W, (3, 3)), ref=np.linalg.det),
    case("det-batched", sl.linalg.det, (ND, (2, 3, 3)), ref=np.linalg.det),
    # norms
    case("norm-vector", sl.linalg.norm, (N, (5,)), ref=np.linalg.norm),
    case("norm-flat-3d", sl.linalg.norm, (N, (2, 3, 4)), ref=np.linalg.norm),
    case("norm-fro", lambda x: sl.linalg.norm(x, "fro"), (N, (3, 4)), ref=_np_norm("fro")),
    case("norm-fro-batched", lambda x: sl.linalg.norm(x, axis=(-2, -1)), (N, (2, 3, 4)),
         ref=_np_norm(axis=(-2, -1))),
    case("norm-1", lambda x: sl.linalg.norm(x, 1), (A, (5,)), ref=_np_norm(1)),
    case("norm-inf-axis", lambda x: sl.linalg.norm(x, np.inf, axis=1), (D, (3, 4)),
         ref=_np_norm(np.inf, axis=1)),
    case("norm-minus-inf", lambda x: sl.linalg.norm(x, -np.inf), (D, (5,)),
         ref=_np_norm(-np.inf)),
    case("norm-p3-keepdims", lambda x: sl.linalg.norm(x, 3, axis=0, keepdims=True),
         (A, (3, 4)), ref=_np_norm(3, axis=0, keepdims=True)),
    case("norm-0", lambda x: sl.linalg.norm(x, 0, axis=-1), (A, (3, 4)),
         ref=_np_norm(0, axis=-1)),
    case("norm-matrix-1", lambda x: sl.linalg.norm(x, 1), (D, (3, 4)), ref=_np_norm(1)),
    case("norm-matrix-inf-swapped", lambda x: sl.linalg.norm(x, np.inf, axis=(1, 0)),
         (D, (3, 4)), ref=_np_norm(np.inf, axis=(1, 0))),
    case("norm-matrix-minus-1-keepdims",
         lambda x: sl.linalg.norm(x, -1, axis=(0, 2), keepdims=True), (D, (3, 2, 4)),
         ref=_np_norm(-1, axis=(0, 2), keepdims=True)),
    # powers
    case("matrix_power-3", lambda a: sl.linalg.matrix_power(a, 3), (W, (3, 3)),
         ref=lambda a: np.linalg.matrix_power(a, 3)),
    case("matrix_power-minus-2", lambda a: sl.linalg.matrix_power(a, -2), (W, (2, 3, 3)),
         ref=lambda a: np.linalg.matrix_power(a, -2)),
    case("matrix_power-1", lambda a: sl.linalg.matrix_power(a, 1), (W, (3, 3)),
         ref=lambda a: np.linalg.matrix_power(a, 1)),
    # matrix functions
    case("diag-vector", sl.diag, (N, (3,)), ref=np.diag),
    case("diag-vector-k", lambda v: sl.diag(v, 1), (N, (3,)), ref=lambda v: np.diag(v, 1)),
    case("diag-vector-minus-k", lambda v: sl.diag(v, -2), (N, (2,)),
         ref=lambda v: np.diag(v, -2)),
    case("diag-matrix", lambda m: sl.diag(m, -1), (N, (3, 4)), ref=lambda m: np.diag(m, -1)),
    case("diagonal", sl.diagonal, (N, (3, 4)), ref=np.diagonal),
    case("diagonal-axes", lambda a: sl.diagonal(a, 1, 2, 0), (N, (3, 2, 4)),
         ref=lambda a: np.diagonal(a, 1, 2, 0)),
    case("diagonal-negative-axes", lambda a: sl.diagonal(a, -1, axis1=-1, axis2=-2),
         (N, (2, 3, 4)), ref=lambda a: np.diagonal(a, -1, axis1=-1, axis2=-2)),
    case("trace", sl.trace, (N, (3, 4)), ref=np.trace),
    case("trace-batched", lambda a: sl.trace(a, 1, axis1=1, axis2=2), (N, (2, 3, 3)),
         ref=lambda a: np.trace(a, 1, axis1=1, axis2=2)),
    case("outer", sl.outer, (N, (3,)), (N, (2, 2)), ref=np.outer),
    case("tril", sl.tril, (N, (3, 4)), ref=np.tril),
    case("tril-k-batched", lambda m: sl.tril(m, -1), (N, (2, 3, 3)), ref=lambda m: np.tril(m, -1)),
    case("triu", sl.triu, (N, (4, 3)), ref=np.triu),
    case("triu-k", lambda m: sl.triu(m, 1), (N, (3, 3)), ref=lambda m: np.triu(m, 1)),
    case("kron", sl.kron, (N, (2, 3)), (N, (3, 2)), ref=np.kron),
    case("kron-mixed-ndim", sl.kron, (N, (3,)), (N, (2, 2)), ref=np.kron),
    case("tensordot-2", sl.tensordot, (N, (2, 3, 4)), (N, (3, 4, 2)), ref=np.tensordot),
    case("tensordot-pairs", lambda a, b: sl.tensordot(a, b, axes=([0, 2], [2, 0])),
         (N, (2, 3, 4)), (N, (4, 5, 2)),
         ref=lambda a, b: np.tensordot(a, b, axes=([0, 2], [2, 0]))),
    case("tensordot-0", lambda a, b: sl.tensordot(a, b, axes=0), (N, (2,)), (N, (3,)),
         ref=lambda a, b: np.tensordot(a, b, axes=0)),
    case("dot-nd", sl.dot, (N, (2, 3, 4)), (N, (2, 4, 3)), ref=np.dot),
    case("dot-nd-vector", sl.dot, (N, (2, 3, 4)), (N, (4,)), ref=np.dot),
    case("dot-matrix", sl.dot, (N, (3, 4)), (N, (4, 2)), ref=np.dot),
    case("dot-vector", sl.dot, (N, (4,)), (N, (4,)), ref=np.dot),
    case("dot-scalar", sl.dot, (N, ()), (N, (2, 3)), ref=np.dot),
]

(test_forward_matches_numpy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


# --- against JAX (where installed) ------------------------------------------------------------
@pytest.fixture
def jax64():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):  # only for this test: a global switch changes others' float32
        yield jax


def _grads_agree(jax, sl_loss, jax_loss, *inputs, rtol=1e-9):
    ours = sl.grad(sl_loss, argnums=tuple(range(len(inputs))))(*[sl.tensor(x) for x in inputs])
    theirs = jax.grad(jax_loss, argnums=tuple(range(len(inputs))))(*inputs)
    for g, h in zip(ours, theirs):
        np.testing.assert_allclose(g.numpy(), np.asarray(h), rtol=rtol, atol=1e-10)


def test_cholesky_gradient_matches_jax_for_a_non_symmetric_cotangent(jax64):
    """A loss that weighs L's entries unevenly, of an input that is not symmetric: JAX
    symmetrizes the input, and so must scanlib (its gradient is then symmetric)."""
    jnp = jax64.numpy
    rng = np.random.default_rng(5)
    a = _spd(rng, (4, 4)) + 0.1 * np.triu(rng.standard_normal((4, 4)), 1)  # not symmetric
    weights = rng.standard_normal((4, 4))
    _grads_agree(jax64, lambda a: sl.sum(sl.linalg.cholesky(a) * weights),
                 lambda a: jnp.sum(jnp.linalg.cholesky(a) * weights), a)
    g = sl.grad(lambda a: sl.sum(sl.linalg.cholesky(a) * weights))(sl.tensor(a)).numpy()
    np.testing.assert_allclose(g, g.T, rtol=1e-12)
    # second order: a Hessian-vector product through cholesky
    direction = rng.standard_normal((4, 4))

    def hvp_sl(a):
        return sl.vdot(sl.grad(lambda a: sl.sum(sl.linalg.cholesky(a) ** 3 * weights))(a),
                       sl.tensor(direction))

    def hvp_jax(a):
        g = jax64.grad(lambda a: jnp.sum(jnp.linalg.cholesky(a) ** 3 * weights))(a)
        return jnp.vdot(g, direction)

    _grads_agree(jax64, hvp_sl, hvp_jax, a)


def test_eigh_gradient_matches_jax(jax64):
    jnp = jax64.numpy
    rng = np.random.default_rng(6)
    a = _spd(rng, (2, 4, 4)) + 0.1 * rng.standard_normal((2, 4, 4))  # not symmetric
    cw, cv = rng.standard_normal((2, 4)), rng.standard_normal((2, 4, 4))

    def ours(a):
        w, v = sl.linalg.eigh(a)
        return sl.sum(w * cw) + sl.sum(v * v * cv)  # v * v: free of the eigenvectors' signs

    def theirs(a):
        w, v = jnp.linalg.eigh(a)
        return jnp.sum(w * cw) + jnp.sum(v * v * cv)

    _grads_agree(jax64, ours, theirs, a, rtol=1e-8)


def test_other_gradients_match_jax(jax64):
    jnp, jsl = jax64.numpy, jax64.scipy.linalg
    rng = np.random.default_rng(7)
    a, b = _wellcond(rng, (2, 3, 3)), rng.standard_normal((2, 3, 2))
    c = rng.standard_normal((2, 3, 2))
    pairs = [
        (lambda a, b: sl.sum(sl.linalg.solve(a, b) * c), lambda a, b: jnp.sum(
            jnp.linalg.solve(a, b) * c)),
        (lambda a, b: sl.sum(sl.linalg.inv(a) @ b * c), lambda a, b: jnp.sum(
            jnp.linalg.inv(a) @ b * c)),
        (lambda a, b: sl.sum(sl.linalg.solve_triangular(a, b, trans=1, lower=True) * c),
         lambda a, b: jnp.sum(jsl.solve_triangular(a, b, trans=1, lower=True) * c)),
        (lambda a, b: sl.sum(sl.linalg.slogdet(a)[1] * sl.linalg.det(a)) + sl.sum(b),
         lambda a, b: jnp.sum(jnp.linalg.slogdet(a)[1] * jnp.linalg.det(a)) + jnp.sum(b)),
        (lambda a, b: sl.sum(sl.linalg.qr(b).Q * c) + sl.sum(sl.linalg.qr(b).R) + sl.sum(a),
         lambda a, b: jnp.sum(jnp.linalg.qr(b)[0] * c) + jnp.sum(jnp.linalg.qr(b)[1])
         + jnp.sum(a)),
    ]
    for ours, theirs in pairs:
        _grads_agree(jax64, ours, theirs, a, b)


# --- a Kalman-style loss inside a scan ------------------------------------------------------
def _kalman_step(F, Q, R):
    """One step of a Kalman filter (observation matrix I): predict with F and Q, score y
    under N(m, S) with cholesky + cho_solve + slogdet, and update the mean and covariance."""
    def step(carry, y):
        m, P = carry
        m, P = F @ m, F @ P @ F.T + Q
        S = P + R
        L = sl.linalg.cholesky(S)
        innovation = y - m
        alpha = sl.linalg.cho_solve((L, True), innovation)
        nll = 0.5 * (sl.vdot(innovation, alpha) + sl.linalg.slogdet(S).logabsdet)
        m = m + P @ alpha
        P = P - P @ sl.linalg.cho_solve((L, True), P)
        return (m, P), nll
    return step


def test_kalman_style_loss_in_a_scan_matches_the_loop(backend):
    rng = np.random.default_rng(11)
    d, T = 3, 6
    m0, ys = backend.tensor(np.zeros(d)), backend.tensor(rng.standard_normal((T, d)))
    P0, Q, R = (backend.tensor(_spd(rng, (d, d))) for _ in range(3))
    F = backend.tensor(np.eye(d) * 0.9 + 0.1 * rng.standard_normal((d, d)))

    def by_scan(P0, F, Q, R):
        (m, P), nlls = sl.scan(_kalman_step(F, Q, R), (m0, P0), ys)
        return sl.sum(nlls) + sl.sum(P)

    def by_loop(P0, F, Q, R):
        step, carry, total = _kalman_step(F, Q, R), (m0, P0), 0.0
        for t in range(T):
            carry, nll = step(carry, ys[t])
            total = total + nll
        return total + sl.sum(carry[1])

    args = (P0, F, Q, R)
    v1, g1 = sl.value_and_grad(by_scan, argnums=(0, 1, 2, 3))(*args)
    v2, g2 = sl.value_and_grad(by_loop, argnums=(0, 1, 2, 3))(*args)
    np.testing.assert_allclose(v1.numpy(), v2.numpy(), rtol=1e-11)
    for a, b in zip(g1, g2):
        backend.check_device(a)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)
    check_grads(by_scan, [backend.array(x.numpy()) for x in args], order=2)


# --- complex matrices (JAX's convention) --------------------------------------------------------
def _complex_matrix(rng, shape):
    n = shape[-1]
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape) + 3 * np.eye(n)


@pytest.mark.parametrize("name", ["inv", "det", "logabsdet", "sign", "solve", "solve_triangular-C",
                                  "cho_solve", "matrix_power", "norm"])
def test_complex_forward_and_gradients(backend, name):
    rng = np.random.default_rng(8)
    a = _complex_matrix(rng, (2, 3, 3))
    b = rng.standard_normal((2, 3, 2)) + 1j * rng.standard_normal((2, 3, 2))
    bt = backend.tensor(b)
    fn, ref = {
        "inv": (sl.linalg.inv, np.linalg.inv),
        "det": (sl.linalg.det, np.linalg.det),
        "logabsdet": (lambda a: sl.linalg.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1]),
        "sign": (lambda a: sl.linalg.slogdet(a)[0], lambda a: np.linalg.slogdet(a)[0]),
        "solve": (lambda a: sl.linalg.solve(a, bt), lambda a: np.linalg.solve(a, b)),
        "solve_triangular-C": (
            lambda a: sl.linalg.solve_triangular(a, bt, trans="C", lower=True),
            lambda a: np.linalg.solve(np.conj(_mT(np.tril(a))), b)),
        "cho_solve": (lambda a: sl.linalg.cho_solve((a, True), bt),
                      lambda a: np.linalg.solve(np.tril(a) @ np.conj(_mT(np.tril(a))), b)),
        "matrix_power": (lambda a: sl.linalg.matrix_power(a, -2),
                         lambda a: np.linalg.matrix_power(a, -2)),
        "norm": (lambda a: sl.linalg.norm(a, axis=(-2, -1)),
                 lambda a: np.linalg.norm(a, axis=(-2, -1))),
    }[name]
    out = fn(backend.tensor(a))
    want = ref(a)
    assert out.dtype == want.dtype
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    check_grads(fn, [backend.array(a)], order=2)


def test_complex_gradients_match_jax(jax64):
    jnp = jax64.numpy
    rng = np.random.default_rng(9)
    a, b = _complex_matrix(rng, (2, 3, 3)), rng.standard_normal((2, 3, 2))
    c = rng.standard_normal(2)

    def ours(a):
        sign, logabsdet = sl.linalg.slogdet(a)
        return (sl.sum(sl.real(sign * c) + logabsdet * c) + sl.sum(sl.imag(sl.linalg.det(a)))
                + sl.sum(sl.real(sl.linalg.solve(a, b) * 1.5)))

    def theirs(a):
        sign, logabsdet = jnp.linalg.slogdet(a)
        return (jnp.sum(jnp.real(sign * c) + logabsdet * c) + jnp.sum(jnp.imag(jnp.linalg.det(a)))
                + jnp.sum(jnp.real(jnp.linalg.solve(a, b) * 1.5)))

    _grads_agree(jax64, ours, theirs, a)


@pytest.mark.parametrize("fn", [sl.linalg.cholesky, sl.linalg.eigh, sl.linalg.qr])
def test_complex_input_is_refused_where_not_supported(backend, fn):
    a = backend.tensor(_complex_matrix(np.random.default_rng(0), (3, 3)))
    with pytest.raises(TypeError, match="complex input"):
        fn(a)


# --- edge cases: repeated eigenvalues, singular matrices, dtypes -------------------------------
def test_eigenvalue_gradient_is_defined_for_repeated_eigenvalues(backend):
    """w's gradient needs no 1 / (w_i - w_j): at the identity (all eigenvalues equal) the
    gradient of sum(w) is the identity, not nan; also inside a scan body."""
    eye = backend.tensor(np.eye(3))
    g = sl.grad(lambda a: sl.sum(sl.linalg.eigh(a).eigenvalues))(eye)
    np.testing.assert_allclose(g.numpy(), np.eye(3), atol=1e-12)
    stack = backend.tensor(np.stack([np.eye(3), 2 * np.eye(3)]))

    def by_scan(xs):
        total, _ = sl.scan(lambda c, a: (c + sl.sum(sl.linalg.eigh(a)[0] ** 2), 0.0),
                           backend.tensor(0.0), xs)
        return total

    g = sl.grad(by_scan)(stack).numpy()
    np.testing.assert_allclose(g, np.stack([2 * np.eye(3), 4 * np.eye(3)]), atol=1e-12)


def test_singular_and_indefinite_matrices_raise(backend):
    if backend.name != "numpy":
        pytest.skip("CuPy does not check (inf or nan, as in JAX)")
    singular = backend.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        sl.linalg.inv(singular)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        sl.linalg.solve(singular, backend.tensor([1.0, 2.0]))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        sl.linalg.cholesky(backend.tensor(np.diag([1.0, -1.0])))
    with pytest.raises(np.linalg.LinAlgError, match="zero on its diagonal"):
        sl.linalg.solve_triangular(backend.tensor(np.diag([1.0, 0.0])), backend.tensor([1.0, 1]))
    # in a scan body, a singular step is an error too (only tracing sees stand-in zeros)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        sl.scan(lambda c, a: (c, sl.linalg.inv(a)), 0.0,
                backend.tensor(np.stack([np.eye(2), np.zeros((2, 2))])))


def test_integer_inputs_follow_numpy(backend):
    m = np.array([[2, 1], [1, 3]])
    t = backend.tensor(m)
    for ours, want in ((sl.linalg.inv(t), np.linalg.inv(m)), (sl.linalg.det(t), np.linalg.det(m)),
                       (sl.linalg.norm(t), np.linalg.norm(m)),
                       (sl.linalg.norm(t, 1, axis=0), np.linalg.norm(m, 1, axis=0)),
                       (sl.linalg.matrix_power(t, 3), np.linalg.matrix_power(m, 3)),
                       (sl.linalg.matrix_power(t, 0), np.linalg.matrix_power(m, 0)),
                       (sl.linalg.matrix_power(t, -1), np.linalg.matrix_power(m, -1)),
                       (sl.tril(t), np.tril(m)), (sl.triu(t > 1), np.triu(m > 1)),
                       (sl.trace(backend.tensor(m.astype(np.int32))), np.trace(m.astype(np.int32))),
                       (sl.diag(t), np.diag(m)), (sl.diag(backend.tensor([1, 2])), np.diag([1, 2])),
                       (sl.kron(t, t), np.kron(m, m)), (sl.outer(t, t), np.outer(m, m)),
                       (sl.tensordot(t, t, 1), np.tensordot(m, m, 1)),
                       (sl.dot(t, t), np.dot(m, m))):
        assert ours.dtype == want.dtype, (ours, want)
        np.testing.assert_allclose(ours.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_are_kept_and_promoted_as_numpy(backend, dtype):
    rng = np.random.default_rng(3)
    a, b = _wellcond(rng, (3, 3)).astype(dtype), rng.standard_normal(3)
    x = sl.linalg.solve(backend.tensor(a), backend.tensor(b.astype(np.float64)))
    assert x.dtype == np.linalg.solve(a, b).dtype == np.float64
    assert sl.eye(2, dtype=dtype, device=backend.device).dtype == dtype
    assert sl.linalg.norm(backend.tensor(a), np.inf).dtype == dtype
    w, v = sl.linalg.eigh(backend.tensor(_spd(rng, (3, 3)).astype(dtype)))
    assert w.dtype == v.dtype == dtype


def test_eye(backend):
    for args, kw in (((3,), {}), ((2, 4), {"k": 1}), ((3, 2), {"k": -1, "dtype": np.float32})):
        t = sl.eye(*args, device=backend.device, **kw)
        backend.check_device(t)
        want = np.eye(*args, **kw)
        assert t.dtype == want.dtype
        np.testing.assert_array_equal(t.numpy(), want)


def test_matrix_power_zero_is_the_identity_with_zero_gradient(backend):
    a = backend.tensor(_wellcond(np.random.default_rng(0), (2, 3, 3)))
    np.testing.assert_array_equal(sl.linalg.matrix_power(a, 0).numpy(), np.broadcast_to(
        np.eye(3), (2, 3, 3)))
    g = sl.grad(lambda a: sl.sum(sl.linalg.matrix_power(a, 0)) + sl.sum(a * 0.0))(a)
    np.testing.assert_array_equal(g.numpy(), 0.0)


def test_norm_gradient_at_zero_is_zero(backend):
    for kw in ({}, {"ord": "fro"}, {"axis": 1}):
        g = sl.grad(lambda x, kw=kw: sl.sum(sl.linalg.norm(x, **kw)))(
            backend.tensor(np.zeros((2, 3))))
        np.testing.assert_array_equal(g.numpy(), 0.0)


# --- NumPy dispatch ----------------------------------------------------------------------------
def test_numpy_functions_run_the_differentiable_ops(backend):
    if backend.name != "numpy":
        pytest.skip("NumPy functions on CuPy data are CuPy's to dispatch")
    rng = np.random.default_rng(4)
    s = _spd(rng, (3, 3))
    a = sl.tensor(s, requires_grad=True)
    results = {
        "inv": (np.linalg.inv(a), np.linalg.inv(s)),
        "solve": (np.linalg.solve(a, np.ones(3)), np.linalg.solve(s, np.ones(3))),
        "cholesky": (np.linalg.cholesky(a), np.linalg.cholesky(s)),
        "cholesky-upper": (np.linalg.cholesky(a, upper=True), np.linalg.cholesky(s, upper=True)),
        "slogdet": (np.linalg.slogdet(a).logabsdet, np.linalg.slogdet(s).logabsdet),
        "det": (np.linalg.det(a), np.linalg.det(s)),
        "eigh": (np.linalg.eigh(a, UPLO="U").eigenvalues, np.linalg.eigh(s, UPLO="U")[0]),
        "qr": (np.linalg.qr(a, mode="r"), np.linalg.qr(s, mode="r")),
        "norm": (np.linalg.norm(a, ord=1, axis=0, keepdims=True),
                 np.linalg.norm(s, ord=1, axis=0, keepdims=True)),
        "matrix_power": (np.linalg.matrix_power(a, 2), np.linalg.matrix_power(s, 2)),
        "diag": (np.diag(a, 1), np.diag(s, 1)), "diagonal": (np.diagonal(a), np.diagonal(s)),
        "trace": (np.trace(a), np.trace(s)), "outer": (np.outer(a, a), np.outer(s, s)),
        "tril": (np.tril(a, -1), np.tril(s, -1)), "triu": (np.triu(a), np.triu(s)),
        "kron": (np.kron(a, a), np.kron(s, s)),
        "tensordot": (np.tensordot(a, a, 1), np.tensordot(s, s, 1)),
        "dot-3d": (np.dot(a[None], a[None]), np.dot(s[None], s[None])),
    }
    for name, (ours, want) in results.items():
        assert isinstance(ours, sl.Tensor) and ours.requires_grad, name
        np.testing.assert_allclose(ours.numpy(), want, rtol=1e-12, err_msg=name)
    with pytest.raises(TypeError, match="dtype="):
        np.trace(a, dtype=np.float32)


# --- errors say what is wrong, with the shapes -------------------------------------------------
def test_errors_name_the_shapes_and_the_fix(backend):
    t = backend.tensor
    sq, wide = t(np.eye(3)), t(np.ones((2, 3)))
    cases = [
        (lambda: sl.linalg.inv(wide), ValueError, r"square matrix .* got shape \(2, 3\)"),
        (lambda: sl.linalg.det(t(np.ones(3))), ValueError, "square"),
        (lambda: sl.linalg.solve(sq, t(np.ones(4))), ValueError, "length 4"),
        (lambda: sl.linalg.solve(sq, t(np.ones((2, 3)))), ValueError, r"b\[\.\.\., None\]"),
        (lambda: sl.linalg.solve(t(np.ones((2, 3, 3))), t(np.ones((4, 3, 1)))), ValueError,
         "do not broadcast"),
        (lambda: sl.linalg.solve_triangular(sq, t(np.ones(3)), trans="X"), ValueError, "trans"),
        (lambda: sl.linalg.cho_solve(sq, t(np.ones(3))), TypeError, "pair"),
        (lambda: sl.linalg.eigh(sq, UPLO="X"), ValueError, "UPLO"),
        (lambda: sl.linalg.qr(t(np.ones(3))), ValueError, "matrix"),
        (lambda: sl.linalg.qr(sq, mode="raw"), ValueError, "mode"),
        (lambda: sl.linalg.norm(sq, "bad"), ValueError, "invalid order"),
        (lambda: sl.linalg.norm(t(np.ones(3)), "fro"), ValueError, "matrix norm"),
        (lambda: sl.linalg.norm(t(np.ones((2, 2, 2))), 1), ValueError, "name the axis"),
        (lambda: sl.linalg.norm(sq, axis=(0, 1, 0)), ValueError, "axis"),
        (lambda: sl.linalg.norm(sq, axis=2), ValueError, "out of range"),
        (lambda: sl.linalg.matrix_power(sq, 1.5), TypeError, "integer"),
        (lambda: sl.linalg.matrix_power(wide, 2), ValueError, "square"),
        (lambda: sl.linalg.inv(t(np.eye(2, dtype=np.float16))), TypeError, "float32"),
        (lambda: sl.tril(t(np.ones(3))), ValueError, "at least 2 axes"),
        (lambda: sl.diagonal(sq, 0, 1, -1), ValueError, "one axis"),
        (lambda: sl.diag(t(np.ones((2, 2, 2)))), ValueError, "1-d"),
        (lambda: sl.tensordot(sq, wide, axes=([0], [0])), ValueError, "do not match"),
        (lambda: sl.tensordot(sq, wide, axes=3), ValueError, "between 0"),
        (lambda: sl.tensordot(sq, wide, axes=([0, 1], [1])), ValueError, "as many"),
        (lambda: sl.dot(t(np.ones((2, 2, 3))), wide), ValueError, "not aligned"),
        (lambda: sl.eye(2.5), TypeError, "N must be an int"),
    ]
    for fn, error, match in cases:
        with pytest.raises(error, match=match):
            fn()


def test_tall_complete_qr_has_no_gradient_and_says_so(backend):
    """(The wide case has JAX's gradient: tests/test_linalg_more.py.)"""
    with pytest.raises(NotImplementedError, match="complete"):
        sl.grad(lambda a: sl.sum(sl.linalg.qr(a, mode="complete").Q))(
            backend.tensor(np.random.default_rng(0).standard_normal((3, 2))))


def test_dropped_outputs_are_recomputed_for_the_gradient(backend):
    """eigh and qr's rules need both outputs; a caller that keeps only one still gets the
    right gradient (the other is recomputed)."""
    s = backend.tensor(_spd(np.random.default_rng(2), (3, 3)))
    check_grads(lambda a: sl.linalg.eigh(a)[1][:, 0] ** 2, [s._value], order=1)
    check_grads(lambda a: sl.linalg.qr(a)[0], [s._value], order=1)


def test_det_gradient_is_the_cofactor_matrix_also_at_singular_matrices():
    """det is a polynomial: its gradient (the cofactor matrix) exists everywhere, as JAX
    gives it; det(a) inv(a)^T would fail at a singular a."""
    g = sl.grad(sl.linalg.det)(sl.tensor([[1.0, 2.0], [2.0, 4.0]]))
    np.testing.assert_allclose(g.numpy(), [[4.0, -2.0], [-2.0, 1.0]])
    np.testing.assert_allclose(sl.grad(sl.linalg.det)(sl.zeros((3, 3))).numpy(), 0.0)
    rank1 = np.outer([1.0, 2.0, 3.0], [1.0, 0.0, 2.0])
    check_grads(sl.linalg.det, [rank1], order=2)
    check_grads(sl.linalg.det, [np.random.default_rng(0).standard_normal((2, 4, 4))], order=2)


def test_singular_matrix_errors_do_not_talk_about_broadcasting():
    with pytest.raises(np.linalg.LinAlgError) as info:
        sl.linalg.solve(sl.tensor([[1.0, 2.0], [2.0, 4.0]]), sl.ones(2))
    assert "singular" in str(info.value) and "broadcasting" not in str(info.value)
    assert ".." not in str(info.value)


def test_numpy_2_linalg_spellings_dispatch():
    if not hasattr(np.linalg, "matrix_norm"):
        pytest.skip("NumPy < 2")
    x = np.arange(24.0).reshape(2, 3, 4)
    t = sl.tensor(x, requires_grad=True)
    for f in (lambda a: np.linalg.matmul(a, np.ones((4, 2))),
              lambda a: np.linalg.diagonal(a, offset=1), np.linalg.trace,
              np.linalg.matrix_transpose, np.linalg.vector_norm,
              lambda a: np.linalg.vector_norm(a, axis=1, keepdims=True),
              lambda a: np.linalg.vector_norm(a, keepdims=True), np.linalg.matrix_norm,
              lambda a: np.linalg.tensordot(a, np.ones((3, 4)))):
        out = f(t)
        assert isinstance(out, sl.Tensor) and out.requires_grad
        np.testing.assert_allclose(out.numpy(), f(x), rtol=1e-12)
    assert sl.linalg.norm(sl.zeros(0), np.inf).item() == 0.0


def test_slogdet_gradient_at_a_singular_matrix_says_so():
    with pytest.raises(np.linalg.LinAlgError, match="slogdet: the gradient of log"):
        sl.grad(lambda a: sl.linalg.slogdet(a)[1])(sl.tensor([[1.0, 2.0], [2.0, 4.0]]))


# --- matmul's VJP where one operand is a matrix broadcast against a batch -------------------
@pytest.mark.parametrize("x_shape, y_shape", [
    ((5, 3, 4), (4, 6)), ((2, 5, 3, 4), (4, 6)), ((16, 1, 4), (4, 6)), ((0, 3, 4), (4, 6)),
    ((5, 0, 4), (4, 6)), ((3, 4), (5, 4, 6)), ((3, 4), (2, 5, 4, 6)), ((3, 0), (5, 0, 6)),
    ((3, 4), (0, 4, 6))])
def test_matmul_vjp_of_a_matrix_against_a_batch_is_one_product(x_shape, y_shape):
    """The matrix's cotangent is the sum over the batch of per-index products; it is computed
    as one 2-d product over every row (no [B, K, N] of products summed after): the same
    numbers as NumPy's per-index products summed, to rounding, and second order against
    finite differences."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)

    def f(x, y):
        return sl.sum(sl.sin(x @ y))

    gx, gy = sl.grad(f, argnums=(0, 1))(x, y)
    g = np.cos(x @ y)
    lead = g.shape[:-2]
    want_x = g @ np.swapaxes(np.broadcast_to(y, lead + y.shape[-2:]), -1, -2)
    want_y = np.swapaxes(np.broadcast_to(x, lead + x.shape[-2:]), -1, -2) @ g
    want_x = want_x.sum(axis=tuple(range(want_x.ndim - x.ndim)))
    want_y = want_y.sum(axis=tuple(range(want_y.ndim - y.ndim)))
    assert gx.shape == x.shape and gy.shape == y.shape
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy.numpy(), want_y, rtol=1e-12, atol=1e-12)
    graph = sl.make_graph(sl.grad(f, argnums=(0, 1)))(x, y)
    matrix = x.shape if x.ndim == 2 else y.shape
    assert not any(len(v.shape) > 2 and tuple(v.shape[-2:]) == matrix
                   for e in graph.eqns if e.prim.name == "matmul" for v in e.outvars)
    assert not any(e.prim.name == "sum" and tuple(e.outvars[0].shape) == matrix
                   for e in graph.eqns)  # nothing summed after
    if x.size and y.size and 0 not in x_shape + y_shape:
        check_grads(lambda x, y: sl.sum(sl.tanh(x @ y) ** 2), (x, y), order=2)


# --- einsum: large contractions of two float arrays by BLAS ------------------------------------
@pytest.mark.parametrize("spec, shapes, blas", [
    ("hp,lp->lh", [(32, 32), (1024, 32)], True), ("ij,jk->ik", [(64, 48), (48, 40)], True),
    ("lh,lp->hp", [(1024, 32), (1024, 32)], True), ("ij,ij->", [(300, 300), (300, 300)], True),
    ("abc,cbd->ad", [(8, 16, 32), (32, 16, 24)], True),
    ("ldn,ld->dn", [(256, 64, 16), (256, 64)], False),  # d: a batch index
    ("ij,jk->ik", [(4, 5), (5, 6)], False),  # small
    ("ij,jk->ik", [(300, 1), (300, 300)], False),  # j broadcast from 1
    ("ii,ik->k", [(300, 300), (300, 300)], False),  # a diagonal
])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_einsum_of_a_large_contraction_goes_to_blas(spec, shapes, blas, dtype):
    """The value is np.einsum's to rounding, of its dtype and shape, in memory of its own;
    the gradient is the same einsums' (against finite differences in float64)."""
    from scanlib.ops import linalg as la

    rng = np.random.default_rng(0)
    xs = [(rng.standard_normal(s) + (1j * rng.standard_normal(s) if dtype == "complex128"
                                     else 0)).astype(dtype) for s in shapes]
    assert la._blas_pays(spec, xs) == blas
    got = sl.einsum(spec, *[sl.tensor(x) for x in xs]).numpy()
    want = np.einsum(spec, *xs)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert not any(np.shares_memory(got, x) for x in xs)
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    if dtype == "float64" and blas and max(map(np.size, xs)) <= 40_000:
        check_grads(lambda *ts: sl.sum(sl.sin(sl.einsum(spec, *ts))), tuple(xs), order=1)


@pytest.mark.parametrize("spec, shapes", [
    ("nh,zlh->zln", [(32, 32), (4, 256, 32)]), ("zln,zlh->nh", [(4, 256, 32), (4, 256, 32)])])
@pytest.mark.parametrize("dtypes", [("complex128", "float64"), ("float64", "complex128"),
                                    ("complex64", "float32")])
def test_einsum_of_a_complex_and_a_real_array_goes_to_blas(spec, shapes, dtypes):
    """An LRU's complex B against real inputs, and its gradient's contraction: np.einsum's
    value to rounding, complex, with inf and NaN where np.einsum has them (both cast the
    real operand to complex)."""
    from scanlib.ops import linalg as la

    rng = np.random.default_rng(1)
    xs = [(rng.standard_normal(s) + (1j * rng.standard_normal(s) if dt.startswith("complex")
                                     else 0)).astype(dt) for s, dt in zip(shapes, dtypes)]
    assert la._blas_pays(spec, xs)
    mixed = [np.zeros(xs[0].shape, "complex64"), np.zeros(xs[1].shape, "float64")]
    assert not la._blas_pays(spec, mixed)  # two precisions: np.einsum's loops
    for inf_in in (None, 0, 1):  # an inf in each operand in turn
        if inf_in is not None:
            xs[inf_in].flat[5] = np.inf
        got = sl.einsum(spec, *[sl.tensor(x) for x in xs]).numpy()
        want = np.einsum(spec, *xs)
        assert got.dtype == want.dtype and got.shape == want.shape
        for part in (np.real, np.imag):  # inf where inf, NaN where NaN, in both parts
            np.testing.assert_array_equal(np.isnan(part(got)), np.isnan(part(want)))
            np.testing.assert_array_equal(np.isinf(part(got)), np.isinf(part(want)))
        tol = 1e-4 if "float32" in dtypes else 1e-12
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=tol,
                                   atol=tol * np.abs(want[finite]).max())


def test_a_one_column_products_cotangent_is_a_broadcast_product():
    """x @ w with w [H, 1] (a value head): the cotangent of x is g * w^T, the same terms as
    g @ w^T, with no matmul of one term each in the backward graph."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((6, 5, 4)), rng.standard_normal((4, 1))
    check_grads(lambda x, w: sl.sum(sl.tanh(x @ w) ** 2), (x, w), order=2)
    graph = sl.jit(sl.grad(lambda x, w: sl.sum(sl.tanh(x @ w) ** 2), argnums=(0, 1))).trace(
        x, w)
    assert not any(e.prim.name == "matmul" and e.invars[0].shape[-1:] == (1,)
                   for e in graph.eqns)
    gx, _ = sl.grad(lambda x, w: sl.sum(x @ w * 3.0), argnums=(0, 1))(x, w)
    np.testing.assert_array_equal(gx.numpy(), np.broadcast_to(3.0 * w.T, x.shape))
