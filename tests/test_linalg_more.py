"""jnp.linalg's SVD-based and general-eigenvalue functions (svd, svdvals, pinv, lstsq,
matrix_rank, cond, eig, eigvals), the array API's compositions (vector_norm, matrix_norm,
cross, vecdot, tensorsolve, tensorinv), the matrix 2- and nuclear norms, and qr's gradient for
wide matrices: forward against NumPy, VJPs against finite differences to second order, float32
against float64, inside a scan body (the opcheck table); against JAX where it is installed
(values, gradients, forward mode, the NaN of repeated singular values); vmap, jit, edges and
errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp_sl
from scanlib.testing import check_grads

from opcheck import N, case, table_tests

L = sl.linalg


def _distinct_sv(rng, shape):
    """A matrix with well separated singular values (2, 3, 4, ... apart), random vectors."""
    m, n = shape[-2:]
    k = min(m, n)
    u = np.linalg.qr(rng.standard_normal(shape[:-2] + (m, k)))[0]
    v = np.linalg.qr(rng.standard_normal(shape[:-2] + (n, k)))[0]
    return (u * (2.0 + np.arange(k)[::-1])) @ np.swapaxes(v, -1, -2)


def _general(rng, shape):
    """A square matrix with well separated eigenvalues (some complex pairs)."""
    n = shape[-1]
    return rng.standard_normal(shape) + np.diag(3.0 * np.arange(n))


V, E = _distinct_sv, _general


def _np_pinv(a):
    return np.linalg.pinv(a, rcond=10 * max(a.shape[-2:]) * np.finfo(a.dtype).eps)


def _svd_all(a):
    u, s, vh = L.svd(a, full_matrices=False)
    return sl.concatenate([u * u, sl.swapaxes(vh, -1, -2) ** 2, s[..., None, :]], axis=-2)


def _np_svd_all(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.concatenate([u * u, np.swapaxes(vh, -1, -2) ** 2, s[..., None, :]], axis=-2)


def _eigvals_parts(a):
    w = L.eigvals(a)
    return sl.real(w) * 0.7 + sl.imag(w)


def _np_eigvals_parts(a):
    w = np.linalg.eigvals(a).astype(np.result_type(a.dtype, np.complex64))
    return (w.real * 0.7 + w.imag).astype(a.dtype)


CASES = [
    case("svd-S-tall", lambda a: L.svd(a).S, (V, (4, 3)),
         ref=lambda a: np.linalg.svd(a, compute_uv=False)),
    case("svd-squared-vectors-tall", _svd_all, (V, (4, 3)), ref=_np_svd_all),
    case("svd-squared-vectors-wide", _svd_all, (V, (2, 3, 5)), ref=_np_svd_all),
    case("svd-full-square", lambda a: L.svd(a).U ** 2 + L.svd(a).Vh ** 2, (V, (3, 3)),
         ref=lambda a: np.linalg.svd(a)[0] ** 2 + np.linalg.svd(a)[2] ** 2),
    case("svdvals-batched", L.svdvals, (V, (2, 3, 4)),
         ref=lambda a: np.linalg.svd(a, compute_uv=False)),
    case("pinv-tall", L.pinv, (V, (5, 3)), ref=_np_pinv),
    case("pinv-wide-batched", L.pinv, (V, (2, 3, 4)), ref=_np_pinv),
    case("lstsq", lambda a, b: L.lstsq(a, b).x, (V, (5, 3)), (N, (5, 2)),
         ref=lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0]),
    case("cond", L.cond, (V, (2, 4, 3)), ref=np.linalg.cond),
    case("matrix-norm-2", lambda a: L.matrix_norm(a, ord=2), (V, (2, 4, 3)),
         ref=lambda a: np.linalg.norm(a, 2, (-2, -1))),
    case("matrix-norm-nuc", lambda a: L.matrix_norm(a, ord="nuc"), (V, (3, 4)),
         ref=lambda a: np.linalg.norm(a, "nuc")),
    case("norm-minus-2-axes-swapped", lambda a: L.norm(a, -2, (2, 0)), (V, (3, 2, 4)),
         ref=lambda a: np.linalg.norm(a, -2, (2, 0))),
    case("eigvals", _eigvals_parts, (E, (4, 4)), ref=_np_eigvals_parts, order=1, scan=False),
    case("eigvals-batched", _eigvals_parts, (E, (2, 3, 3)), ref=_np_eigvals_parts, order=1,
         scan=False),
    case("qr-wide", lambda a: sl.concatenate(list(L.qr(a)), axis=-1), (N, (3, 5)),
         ref=lambda a: np.concatenate(np.linalg.qr(a), axis=-1)),
    case("qr-wide-r-batched", lambda a: L.qr(a, mode="r"), (N, (2, 2, 4)),
         ref=lambda a: np.linalg.qr(a, mode="r")),
    case("vector-norm-axes", lambda x: L.vector_norm(x, axis=(0, 2)), (N, (3, 2, 4)),
         ref=lambda x: np.sqrt((x * x).sum(axis=(0, 2)))),
    case("cross-broadcast", L.cross, (N, (2, 3)), (N, (4, 1, 3)), ref=np.cross),
    case("vecdot", L.vecdot, (N, (2, 4)), (N, (4,)), ref=lambda x, y: (x * y).sum(-1)),
    case("tensorsolve", L.tensorsolve, (V, (2, 3, 6)), (N, (2, 3)),
         ref=np.linalg.tensorsolve),
    case("tensorinv", lambda a: L.tensorinv(a, ind=1), (V, (6, 2, 3)),
         ref=lambda a: np.linalg.tensorinv(a, ind=1)),
]

(test_forward_matches_numpy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = \
    table_tests(CASES)


# --- the views ---------------------------------------------------------------------------------
def test_jnp_linalg_names_are_scanlib_linalg_objects():
    for name in ["svd", "svdvals", "pinv", "lstsq", "matrix_rank", "cond", "eig", "eigvals",
                 "vector_norm", "matrix_norm", "cross", "vecdot", "tensorsolve", "tensorinv",
                 "matrix_power"]:
        assert getattr(jnp_sl.linalg, name) is getattr(sl.linalg, name), name


# --- against JAX -------------------------------------------------------------------------------
@pytest.fixture
def jax64():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def _close(ours, theirs, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(np.asarray(ours.numpy() if hasattr(ours, "numpy") else ours),
                               np.asarray(theirs), rtol=rtol, atol=atol)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (3, 3), (2, 4, 2)])
def test_svd_gradients_and_forward_mode_match_jax(jax64, shape):
    jnp = jax64.numpy
    rng = np.random.default_rng(1)
    a = _distinct_sv(rng, shape)
    m, n = shape[-2:]
    k = min(m, n)
    wu = rng.standard_normal(shape[:-1] + (k,))
    ws = rng.standard_normal(shape[:-2] + (k,))
    wv = rng.standard_normal(shape[:-2] + (k, n))

    def loss(mod, svd):
        def f(a):
            u, s, vh = svd(a, full_matrices=False)
            return mod.sum(u ** 3 * wu) + mod.sum(s * ws) + mod.sum(vh ** 3 * wv)
        return f

    _close(sl.grad(loss(sl, L.svd))(sl.tensor(a)), jax64.grad(loss(jnp, jnp.linalg.svd))(a))
    _close(sl.grad(lambda a: sl.sum(sl.grad(loss(sl, L.svd))(a) ** 2))(sl.tensor(a)),
           jax64.grad(lambda a: jnp.sum(jax64.grad(loss(jnp, jnp.linalg.svd))(a) ** 2))(a),
           rtol=1e-7, atol=1e-8)
    t = rng.standard_normal(shape)
    _, ours = sl.jvp(lambda a: L.svd(a, full_matrices=False), (sl.tensor(a),), (sl.tensor(t),))
    _, theirs = jax64.jvp(lambda a: jnp.linalg.svd(a, full_matrices=False), (a,), (t,))
    for o, th in zip(ours, theirs):
        _close(o, th)


def test_repeated_singular_values_give_jax_nan_and_finite_S_gradient(jax64):
    jnp = jax64.numpy
    a = np.diag([2.0, 2.0, 1.0])
    w = np.random.default_rng(0).standard_normal((3, 3))
    for part in (0, 2):
        ours = sl.grad(lambda a, part=part: sl.sum(L.svd(a)[part] * w))(sl.tensor(a)).numpy()
        theirs = np.asarray(jax64.grad(
            lambda a, part=part: jnp.sum(jnp.linalg.svd(a)[part] * w))(a))
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
        assert np.isnan(ours).any()
    ours = sl.grad(lambda a: sl.sum(L.svd(a).S * w[0]))(sl.tensor(a)).numpy()
    theirs = jax64.grad(lambda a: jnp.sum(jnp.linalg.svd(a)[1] * w[0]))(a)
    _close(ours, theirs)


def test_hermitian_svd_matches_jax(jax64):
    jnp = jax64.numpy
    rng = np.random.default_rng(2)
    b = rng.standard_normal((2, 4, 4))
    a = b + np.swapaxes(b, -1, -2)
    for ours, theirs in zip(L.svd(a, hermitian=True), jnp.linalg.svd(a, hermitian=True)):
        _close(ours, theirs)
    _close(L.svd(a, hermitian=True, compute_uv=False),
           jnp.linalg.svd(a, hermitian=True, compute_uv=False))
    w = rng.standard_normal((2, 4))
    _close(sl.grad(lambda a: sl.sum(L.svd(a, hermitian=True).S * w))(sl.tensor(a)),
           jax64.grad(lambda a: jnp.sum(jnp.linalg.svd(a, hermitian=True)[1] * w))(a))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 3, 3)])
def test_pinv_values_gradient_and_forward_mode_match_jax(jax64, shape):
    jnp = jax64.numpy
    rng = np.random.default_rng(3)
    a = _distinct_sv(rng, shape)
    w = rng.standard_normal(shape[:-2] + shape[-2:][::-1])
    _close(L.pinv(a), jnp.linalg.pinv(a))
    _close(sl.grad(lambda a: sl.sum(L.pinv(a) ** 2 * w))(sl.tensor(a)),
           jax64.grad(lambda a: jnp.sum(jnp.linalg.pinv(a) ** 2 * w))(a))
    t = rng.standard_normal(shape)
    _close(sl.jvp(L.pinv, (sl.tensor(a),), (sl.tensor(t),))[1],
           jax64.jvp(jnp.linalg.pinv, (a,), (t,))[1])
    # a rank-deficient matrix: the cut-off as JAX's
    r = a[..., :, :1] * np.ones(shape[-1])
    _close(L.pinv(r), jnp.linalg.pinv(r))
    _close(L.pinv(r, rtol=0.5), jnp.linalg.pinv(r, rtol=0.5))
    if shape[-1] == shape[-2]:  # hermitian: a read as symmetric, in value and gradient
        _close(L.pinv(a, hermitian=True), jnp.linalg.pinv(a, hermitian=True))
        _close(sl.grad(lambda a: sl.sum(L.pinv(a, hermitian=True) ** 2 * w))(sl.tensor(a)),
               jax64.grad(lambda a: jnp.sum(jnp.linalg.pinv(a, hermitian=True) ** 2 * w))(a))


@pytest.mark.parametrize("shape,bshape", [((5, 3), (5,)), ((3, 5), (3, 2)), ((4, 4), (4, 1))])
def test_lstsq_matches_jax(jax64, shape, bshape):
    jnp = jax64.numpy
    rng = np.random.default_rng(4)
    a, b = _distinct_sv(rng, shape), rng.standard_normal(bshape)
    for ours, theirs in zip(L.lstsq(a, b), jnp.linalg.lstsq(a, b)):
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        _close(ours, theirs, atol=1e-12)
    _close(sl.grad(lambda a, b: sl.sum(L.lstsq(a, b).x ** 2), argnums=(0, 1))(
        sl.tensor(a), sl.tensor(b))[0],
        jax64.grad(lambda a, b: jnp.sum(jnp.linalg.lstsq(a, b)[0] ** 2))(a, b))
    rank_one = np.outer(rng.standard_normal(shape[0]), rng.standard_normal(shape[1]))
    for ours, theirs in zip(L.lstsq(rank_one, b), jnp.linalg.lstsq(rank_one, b)):
        _close(ours, theirs, atol=1e-12)


def test_matrix_rank_and_cond_match_jax(jax64):
    jnp = jax64.numpy
    rng = np.random.default_rng(5)
    m = rng.standard_normal((3, 4, 4))
    m[0, :, 0] = m[0, :, 1]
    np.testing.assert_array_equal(L.matrix_rank(m).numpy(), jnp.linalg.matrix_rank(m))
    assert L.matrix_rank(m).dtype == jnp.linalg.matrix_rank(m).dtype
    assert int(L.matrix_rank(np.zeros(3))) == 0 and L.matrix_rank(np.ones(3)).dtype == np.int32
    np.testing.assert_array_equal(L.matrix_rank(m, rtol=2.0).numpy(),
                                  jnp.linalg.matrix_rank(m, rtol=2.0))
    for p in (None, 2, -2, "fro", 1, -1, np.inf):
        _close(L.cond(m[1:], p), jnp.linalg.cond(m[1:], p), rtol=1e-8)
    singular = np.ones((2, 2))
    for p in (None, 1):
        assert np.isinf(float(L.cond(singular, p))) == np.isinf(float(jnp.linalg.cond(singular,
                                                                                          p)))
    w = rng.standard_normal(2)
    _close(sl.grad(lambda a: sl.sum(L.cond(a) * w))(sl.tensor(m[1:])),
           jax64.grad(lambda a: jnp.sum(jnp.linalg.cond(a) * w))(m[1:]))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eigvals_gradient_and_forward_mode_match_jax(jax64, dtype):
    jnp = jax64.numpy
    rng = np.random.default_rng(6)
    a = _general(rng, (2, 4, 4)).astype(dtype)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal(a.shape)
    wr, wi = rng.standard_normal((2, 2, 4))

    def loss(mod, eigvals):
        return lambda a: mod.sum(mod.real(eigvals(a)) * wr + mod.imag(eigvals(a)) * wi)

    w = L.eigvals(a)
    _close(w, jnp.linalg.eigvals(a))
    assert w.dtype == np.complex128
    _close(sl.grad(loss(sl, L.eigvals))(sl.tensor(a)),
           jax64.grad(loss(jnp, jnp.linalg.eigvals))(a))
    _close(sl.grad(loss(sl, lambda a: L.eig(a).eigenvalues))(sl.tensor(a)),
           jax64.grad(loss(jnp, jnp.linalg.eigvals))(a))
    t = rng.standard_normal(a.shape).astype(dtype)
    _close(sl.jvp(L.eigvals, (sl.tensor(a),), (sl.tensor(t),))[1],
           jax64.jvp(jnp.linalg.eigvals, (a,), (t,))[1])
    ours, theirs = L.eig(a), jnp.linalg.eig(a)
    _close(ours.eigenvalues, theirs[0])
    _close(ours.eigenvectors, theirs[1])


def test_qr_of_a_wide_matrix_has_jax_gradient(jax64):
    jnp = jax64.numpy
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3, 5))
    wq, wr = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 5))
    for mode in ("reduced", "complete"):
        _close(sl.grad(lambda a, mode=mode: sl.sum(L.qr(a, mode=mode).Q * wq)
                       + sl.sum(L.qr(a, mode=mode).R * wr))(sl.tensor(a)),
               jax64.grad(lambda a, mode=mode: jnp.sum(jnp.linalg.qr(a, mode=mode)[0] * wq)
                          + jnp.sum(jnp.linalg.qr(a, mode=mode)[1] * wr))(a))
    check_grads(lambda a: L.qr(a).Q, (a,), order=2)


def test_norms_cross_vecdot_tensor_functions_match_jax(jax64):
    jnp = jax64.numpy
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4))
    for kw in ({}, {"axis": 1}, {"axis": (0, 2), "keepdims": True}, {"ord": 1, "axis": -1},
               {"ord": np.inf}, {"ord": 0, "axis": 0}, {"ord": 3.5}):
        _close(L.vector_norm(x, **kw), jnp.linalg.vector_norm(x, **kw))
    for ord in ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
        _close(L.matrix_norm(x, ord=ord), jnp.linalg.matrix_norm(x, ord=ord))
        _close(L.matrix_norm(x, ord=ord, keepdims=True),
               jnp.linalg.matrix_norm(x, ord=ord, keepdims=True))
    a3, b3 = rng.standard_normal((2, 3)), rng.standard_normal((4, 1, 3))
    _close(L.cross(a3, b3), jnp.linalg.cross(a3, b3))
    _close(L.cross(a3.T, a3.T[:, ::-1], axis=0), jnp.linalg.cross(a3.T, a3.T[:, ::-1], axis=0))
    z = x + 1j * rng.standard_normal(x.shape)
    _close(L.vecdot(z, x[0]), jnp.linalg.vecdot(z, x[0]))
    _close(L.vecdot(x, x, axis=0), jnp.linalg.vecdot(x, x, axis=0))
    a, b = _distinct_sv(rng, (6, 6)).reshape(2, 3, 6), rng.standard_normal((2, 3))
    _close(L.tensorsolve(a, b), jnp.linalg.tensorsolve(a, b))
    a = _distinct_sv(rng, (6, 6)).reshape(6, 2, 3)
    _close(L.tensorinv(a, ind=1), jnp.linalg.tensorinv(a, ind=1))


# --- transformations -------------------------------------------------------------------------
def test_vmap_jit_and_scan_of_svd_pinv_eigvals():
    rng = np.random.default_rng(9)
    a = _distinct_sv(rng, (3, 4, 3))
    stacked = L.svd(a, full_matrices=False)
    mapped = sl.vmap(lambda m: L.svd(m, full_matrices=False))(sl.tensor(a))
    for o, m in zip(stacked, mapped):
        np.testing.assert_allclose(m.numpy(), o.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sl.vmap(L.pinv)(sl.tensor(a)).numpy(), L.pinv(a).numpy(),
                               rtol=1e-12, atol=1e-12)
    sq = _general(rng, (3, 3, 3))
    np.testing.assert_allclose(sl.vmap(L.eigvals)(sl.tensor(sq)).numpy(), L.eigvals(sq).numpy(),
                               rtol=1e-12)
    f = sl.jit(lambda a: sl.sum(L.pinv(a) ** 2) + sl.sum(L.svdvals(a)))
    np.testing.assert_allclose(float(f(sl.tensor(a))),
                               float(sl.sum(L.pinv(a) ** 2) + sl.sum(L.svdvals(a))), rtol=1e-12)
    g = sl.grad(f)(sl.tensor(a))
    g_eager = sl.grad(lambda a: sl.sum(L.pinv(a) ** 2) + sl.sum(L.svdvals(a)))(sl.tensor(a))
    np.testing.assert_allclose(g.numpy(), g_eager.numpy(), rtol=1e-10)
    per_example = sl.vmap(sl.grad(lambda m: sl.sum(L.svd(m, full_matrices=False).U ** 3)))(
        sl.tensor(a))
    for i in range(3):
        one = sl.grad(lambda m: sl.sum(L.svd(m, full_matrices=False).U ** 3))(sl.tensor(a[i]))
        np.testing.assert_allclose(per_example.numpy()[i], one.numpy(), rtol=1e-10, atol=1e-12)

    def body(c, m):
        return c + sl.sum(sl.real(L.eigvals(m))) + sl.sum(L.pinv(m)), L.svdvals(m)

    def by_scan(x):
        c, ys = sl.scan(body, sl.tensor(0.0), x)
        return c + sl.sum(ys ** 2)

    def by_loop(x):
        c, ys = sl.tensor(0.0), []
        for t in range(x.shape[0]):
            c, y = body(c, x[t])
            ys.append(y)
        return c + sl.sum(sl.stack(ys) ** 2)

    np.testing.assert_allclose(sl.grad(by_scan)(sl.tensor(sq)).numpy(),
                               sl.grad(by_loop)(sl.tensor(sq)).numpy(), rtol=1e-10)


def test_jacfwd_of_svd_and_pinv_agree_with_jacrev():
    a = sl.tensor(_distinct_sv(np.random.default_rng(10), (3, 2)))
    for f in (lambda a: L.svd(a, full_matrices=False).U, L.pinv, L.svdvals):
        np.testing.assert_allclose(sl.jacfwd(f)(a).numpy(), sl.jacrev(f)(a).numpy(),
                                   rtol=1e-10, atol=1e-12)


# --- dtypes, edges, errors -------------------------------------------------------------------
def test_float32_stays_float32_and_eig_is_complex():
    a = _distinct_sv(np.random.default_rng(11), (4, 3)).astype(np.float32)
    assert all(o.dtype == np.float32 for o in L.svd(a))
    assert L.pinv(a).dtype == np.float32
    x, resid, rank, s = L.lstsq(a, np.ones(4, np.float32))
    assert x.dtype == resid.dtype == s.dtype == np.float32 and rank.dtype == np.int64
    sq = _general(np.random.default_rng(11), (3, 3)).astype(np.float32)
    assert L.eigvals(sq).dtype == np.complex64
    assert [o.dtype for o in L.eig(sq)] == [np.complex64, np.complex64]
    assert L.eigvals(np.eye(2, dtype=np.complex64)).dtype == np.complex64
    assert L.eigvals(np.eye(2, dtype=np.int64)).dtype == np.complex128
    g = sl.grad(lambda a: sl.sum(L.svd(a, full_matrices=False).U))(sl.tensor(a))
    assert g.dtype == np.float32


def test_empty_and_nan_inputs_as_jax():
    u, s, vh = L.svd(np.zeros((0, 3)))
    assert (u.shape, s.shape, vh.shape) == ((0, 0), (0,), (3, 3))
    assert L.svd(np.zeros((2, 3, 0)), full_matrices=False).U.shape == (2, 3, 0)
    assert L.pinv(np.zeros((0, 3))).shape == (3, 0)
    assert L.eigvals(np.zeros((0, 0))).shape == (0,)
    x, resid, rank, s = L.lstsq(np.zeros((0, 2)), np.zeros(0))
    assert x.shape == (2,) and int(rank) == 0 and s.shape == (0,)
    a = np.random.default_rng(12).standard_normal((2, 3, 3))
    a[1, 0, 0] = np.nan
    s = L.svdvals(a).numpy()
    assert np.isnan(s[1]).all() and np.isfinite(s[0]).all()  # LAPACK's "did not converge"
    w = L.eigvals(a).numpy()
    assert np.isnan(w[1].real).all() and np.isnan(w[1].imag).all() and np.isfinite(w[0]).all()
    assert np.isnan(L.pinv(a).numpy()[1]).all()


def test_errors_say_what_and_how_to_fix():
    wide = sl.tensor(np.random.default_rng(13).standard_normal((2, 3)))
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        sl.grad(lambda a: sl.sum(L.svd(a).U))(wide)
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        sl.jvp(lambda a: L.svd(a), (wide,), (wide,))
    # only S of a full decomposition: defined, and equal to the reduced one's
    np.testing.assert_allclose(sl.grad(lambda a: sl.sum(L.svd(a).S))(wide).numpy(),
                               sl.grad(lambda a: sl.sum(L.svdvals(a)))(wide).numpy())
    sq = sl.tensor(_general(np.random.default_rng(13), (3, 3)))
    with pytest.raises(NotImplementedError, match="eigenvectors"):
        sl.grad(lambda a: sl.sum(sl.real(L.eig(a).eigenvectors)))(sq)
    with pytest.raises(NotImplementedError, match="eigvals"):
        sl.jvp(lambda a: L.eig(a), (sq,), (sq,))
    with pytest.raises(NotImplementedError, match="eigenvectors"):  # JAX has no second order
        sl.grad(lambda a: sl.sum(sl.grad(lambda b: sl.sum(sl.real(L.eigvals(b))))(a) ** 2))(sq)
    with pytest.raises(TypeError, match="complex"):
        L.svd(np.eye(2) * 1j)
    with pytest.raises(TypeError, match="rtol must be one number"):
        L.pinv(np.ones((2, 3, 3)), rtol=np.ones(2))
    with pytest.raises(ValueError, match="only one of"):
        L.pinv(np.eye(2), rtol=0.1, rcond=0.1)
    with pytest.raises(ValueError, match="matrix"):
        L.svd(np.ones(3))
    with pytest.raises(ValueError, match="square"):
        L.eigvals(np.ones((2, 3)))
    with pytest.raises(ValueError, match="2-d"):
        L.lstsq(np.ones((2, 3, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="3-vectors"):
        L.cross(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="empty"):
        L.cond(np.ones((0, 0)))
    with pytest.raises(ValueError, match="as many elements"):
        L.tensorinv(np.ones((2, 3)), ind=1)
