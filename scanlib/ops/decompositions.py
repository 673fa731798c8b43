"""Linear-algebra primitives with their VJPs (inv, solve, triangular solve, cholesky, slogdet,
det, eigh, qr), the checked functions over them that scanlib.linalg makes public (with
matrix_power, and norm from matrices.py), and the NumPy dispatch of np.linalg.*.

Every matrix argument is [..., n, n], batched over leading axes as NumPy does. Each VJP is
written with scanlib's ops (matmul, the solve primitives, transposes, masks), so second
order works; complex matrices follow JAX's convention (plain transposes, no conjugate, for
holomorphic ops). Imports backends, tape and the ops below it.
"""

from __future__ import annotations

import collections
import math
import operator

import numpy as np

from .. import backends
from ..tape import Tensor
from ..tape.state import STATE
from . import batching
from . import elementwise as ew
from . import functions as F
from .gathers import argsort, take_along_axis
from .linalg import matmul_p
from .matrices import constant, norm, tril, triu
from .primitive import Primitive
from .structural import reshape_p, transpose_p

__all__: list[str] = []  # public as scanlib.linalg

SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _is_tensor(x):
    return type(x) is Tensor


def _mT(x):
    """x with its last two axes swapped (a plain transpose, no conjugate)."""
    return transpose_p(x, axes=tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _with_unit_axes(x):
    """x[..., None, None]: a per-matrix number that broadcasts over its matrix."""
    return reshape_p(x, shape=x.shape + (1, 1))


# --- forward helpers -------------------------------------------------------------------------
_FAILURES = {"cholesky": "the matrix is not positive definite",
             "inv": "the matrix is singular", "solve": "the matrix is singular",
             "solve_triangular": "the triangular matrix has a zero on its diagonal"}


def _linalg(who, compute, a, *rest):
    """compute(a, *rest), with a clear error when NumPy finds a singular (or, for cholesky,
    not positive definite) matrix. While a graph is traced, values are stand-in zeros whose
    results are never used: there the identity stands in for a, so tracing gets its shapes.
    (CuPy does not check: there such a matrix gives inf or nan, as in JAX.)"""
    try:
        return compute(a, *rest)
    except np.linalg.LinAlgError as e:
        if not STATE.builders:
            raise np.linalg.LinAlgError(
                f"{who}: {_FAILURES[who]} (NumPy: {e}), so the result would be inf or nan. "
                "Check the input matrix (a stack fails if any one matrix does).") from None
    xp = _xp(a)
    return compute(xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape), *rest)


def _batch_broadcast(a, b):
    """a [..., n, n] and b [..., n, k] with one batch shape: no backend has to guess whether
    b is a stack of vectors (NumPy 1 and CuPy do, by b's number of axes)."""
    xp = _xp(a, b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])


def _triangle_mask(xp, n, lower, strict):
    mask = xp.tri(n, n, -1 if strict else 0, dtype=bool)
    return mask if lower else mask.T


# --- inverse and solves ----------------------------------------------------------------------
def _inv_impl(a):
    return _linalg("inv", lambda m: _xp(m).linalg.inv(m), a)


# Forward mode's rules (`tangent`) sit beside the VJPs: ts holds the inputs' tangents, None
# for zero; forward mode fits what they return to the output's shape.
inv_p = Primitive(
    "inv", _inv_impl,
    lambda g, out, a: (ew.neg(matmul_p(matmul_p(_mT(out), g), _mT(out))),),
    tangent=lambda ts, out, a: ew.neg(matmul_p(matmul_p(out, ts[0]), out)),
    batch=batching.elementwise_rule,
    doc="inv(a): the inverse of a [..., n, n]; VJP -inv(a)^T g inv(a)^T.")


def _solve_impl(a, b):
    a, b = _batch_broadcast(a, b)
    return _linalg("solve", lambda m, r: _xp(m, r).linalg.solve(m, r), a, b)


def _solve_vjp(g, out, a, b):
    gb = solve_p(_mT(a), g)  # the walk's sum_to folds broadcast batch axes back
    return (ew.neg(matmul_p(gb, _mT(out))) if _is_tensor(a) else None), gb


def _solve_tangent(ts, out, a, b):
    """d x = a^-1 (d b - d a x): one more solve with a."""
    ta, tb = ts
    rhs = tb if ta is None else _minus(tb, matmul_p(ta, out))
    return solve_p(a, rhs)


def _minus(x, y):
    """x - y, x None for zero."""
    return ew.neg(y) if x is None else ew.sub(x, y)


solve_p = Primitive("solve", _solve_impl, _solve_vjp, tangent=_solve_tangent,
                    batch=batching.elementwise_rule, promote=True,
                    doc="solve(a, b): x with a x = b, for a [..., n, n] and b [..., n, k].")


# Substitution over the whole batch at once costs a few NumPy calls per row; LAPACK's batched
# solve has a larger fixed cost and O(n^3) work per matrix. Measured (bench/trisolve.py):
# substitution wins for one matrix up to n = 4, for a stack of 64 up to n = 32 at least.
_SUBSTITUTION_MAX_N = 4
_SUBSTITUTION_MAX_N_STACKED = 32  # for a stack of at least _STACK matrices
_STACK = 64
_SUBSTITUTION_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _substitution(a, b, lower, unit_diagonal):
    """x with tri(a) x = b by forward (lower) or back substitution, vectorized over the batch
    and b's columns, as LAPACK's trsm; or None where it cannot show that it gives what the LU
    path below gives (so that path runs, with its errors and warnings): not NumPy float32 or
    float64, n past the limits above, a zero or a NaN or inf on the read diagonal, or a result
    that is not finite (a NaN or inf in b or in the read triangle, or overflow)."""
    n = a.shape[-1]
    if (type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype
            or a.dtype not in _SUBSTITUTION_DTYPES or n == 0):
        return None
    batch = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else np.broadcast_shapes(
        a.shape[:-2], b.shape[:-2])
    if n > (_SUBSTITUTION_MAX_N_STACKED if math.prod(batch) >= _STACK else _SUBSTITUTION_MAX_N):
        return None
    if not unit_diagonal:
        diagonal = np.diagonal(a, axis1=-2, axis2=-1)[..., None]  # [..., n, 1]
        if not (diagonal.all() and np.isfinite(diagonal).all()):
            return None
    x = np.empty(batch + b.shape[-2:], a.dtype)
    with np.errstate(all="ignore"):  # an overflow here is the LU path's to warn about
        for i in range(n) if lower else range(n - 1, -1, -1):
            s = b[..., i, :]
            if lower and i == 1 or not lower and i == n - 2:  # one term: no matmul
                j = i - 1 if lower else i + 1
                s = s - a[..., i, j, None] * x[..., j, :]
            elif i != (0 if lower else n - 1):
                done = slice(0, i) if lower else slice(i + 1, n)
                s = s - np.matmul(a[..., i:i + 1, done], x[..., done, :])[..., 0, :]
            x[..., i, :] = s if unit_diagonal else s / diagonal[..., i, :]
    return x if np.isfinite(x).all() else None


def _triangular_impl(a, b, lower, unit_diagonal):
    x = _substitution(a, b, lower, unit_diagonal)
    if x is not None:
        return x
    # Otherwise (NumPy has no triangular solve, and scipy is not a dependency): LU on the
    # triangle itself, which reads only that triangle, exact to rounding, O(n^3) not O(n^2).
    xp = _xp(a, b)
    n = a.shape[-1]
    t = xp.where(_triangle_mask(xp, n, lower, unit_diagonal), a, a.dtype.type(0))
    if unit_diagonal:
        t = t + xp.eye(n, dtype=a.dtype)
    t, b = _batch_broadcast(t, b)
    return _linalg("solve_triangular", lambda m, r: _xp(m, r).linalg.solve(m, r), t, b)


def _triangular_vjp(g, out, a, b, lower, unit_diagonal):
    gb = triangular_solve_p(_mT(a), g, lower=not lower, unit_diagonal=unit_diagonal)
    if not _is_tensor(a):
        return None, gb
    ga = ew.neg(matmul_p(gb, _mT(out)))
    n = a.shape[-1]
    mask = constant(ga, lambda xp: _triangle_mask(xp, n, lower, unit_diagonal))
    return ew.where(mask, ga, 0.0), gb  # only the triangle that was read has a gradient


def _triangular_tangent(ts, out, a, b, lower, unit_diagonal):
    """d x = tri(a)^-1 (d b - tri(d a) x), tri the triangle that is read."""
    ta, tb = ts
    rhs = tb
    if ta is not None:
        n = a.shape[-1]
        mask = constant(ta, lambda xp: _triangle_mask(xp, n, lower, unit_diagonal))
        rhs = _minus(tb, matmul_p(ew.where(mask, ta, 0.0), out))
    return triangular_solve_p(a, rhs, lower=lower, unit_diagonal=unit_diagonal)


triangular_solve_p = Primitive(
    "triangular_solve", _triangular_impl, _triangular_vjp, tangent=_triangular_tangent,
    batch=batching.elementwise_rule, promote=True,
    doc="triangular_solve(a, b, lower, unit_diagonal): x with tri(a) x = b, reading only "
        "a's lower (or upper) triangle, its diagonal taken as ones when unit_diagonal.")


# --- cholesky --------------------------------------------------------------------------------
def _cholesky_impl(a):
    return _linalg("cholesky", lambda m: _xp(m).linalg.cholesky(m), a)


def _cholesky_vjp(g, out, a):
    """For L = chol(A) with dA symmetric: dL = L Phi(L^-1 dA L^-T), Phi the lower triangle
    with half its diagonal; so A's cotangent is sym(L^-T Phi(L^T g) L^-1)."""
    s = _cholesky_cotangent(g, out)
    return (ew.mul(ew.add(s, _mT(s)), 0.5),)


def _cholesky_cotangent(g, out):
    """L^-T Phi(L^T g) L^-1: the transpose of dA -> L Phi(L^-1 dA L^-T) for any dA."""
    n = out.shape[-1]
    dtype = out.dtype
    half_diagonal = constant(out, lambda xp: xp.tri(n, dtype=dtype) - 0.5 * xp.eye(n, dtype=dtype))
    phi = ew.mul(matmul_p(_mT(out), g), half_diagonal)
    upper = _mT(out)
    left = triangular_solve_p(upper, phi, lower=False, unit_diagonal=False)  # L^-T phi
    return _mT(triangular_solve_p(upper, _mT(left), lower=False, unit_diagonal=False))


def _cholesky_tangent(ts, out, a):
    """d L = L Phi(L^-1 sym(d a) L^-T), Phi the lower triangle with half its diagonal (the
    VJP's map, transposed: it too reads d a symmetrized)."""
    n = out.shape[-1]
    dtype = out.dtype
    half_diagonal = constant(out, lambda xp: xp.tri(n, dtype=dtype) - 0.5 * xp.eye(n, dtype=dtype))
    sym = ew.mul(ew.add(ts[0], _mT(ts[0])), 0.5)
    left = triangular_solve_p(out, sym, lower=True, unit_diagonal=False)  # L^-1 sym
    inner = _mT(triangular_solve_p(out, _mT(left), lower=True, unit_diagonal=False))
    return matmul_p(out, ew.mul(inner, half_diagonal))


cholesky_p = Primitive("cholesky", _cholesky_impl, _cholesky_vjp, tangent=_cholesky_tangent,
                       batch=batching.elementwise_rule,
                       doc="cholesky(a): the lower Cholesky factor of a symmetric positive "
                           "definite [..., n, n] (its lower triangle is read).")
# jax.scipy.linalg.cholesky's: the same factor, with JAX's unsymmetrized derivative
# L Phi(L^-1 dA L^-T) for every dA, so its cotangent is not made symmetric (it agrees with
# cholesky_p's on symmetric directions).
cholesky_unsymmetrized_p = Primitive(
    "cholesky_unsymmetrized", _cholesky_impl,
    lambda g, out, a: (_cholesky_cotangent(g, out),), batch=batching.elementwise_rule,
    doc="cholesky_unsymmetrized(a): cholesky's factor, its cotangent not symmetrized.")


# --- determinants ----------------------------------------------------------------------------
def _slogdet_impl(a):
    xp = _xp(a)
    sign, logabsdet = xp.linalg.slogdet(a)
    return [xp.asarray(sign), xp.asarray(logabsdet)]


def _slogdet_vjp(cts, outs, a, _saved=None):
    """d logabsdet = Re(t) and d sign = sign i Im(t), t = tr(a^-1 da): a's cotangent is
    (g_logabsdet + i Im(g_sign sign)) a^-T. A real sign is piecewise constant: no gradient."""
    g_sign, g_log = cts
    if np.dtype(a.dtype).kind != "c":
        g_sign = None
    if g_sign is None and g_log is None:
        return (None,)
    coef = g_log
    if g_sign is not None:
        sign = outs[0] if outs[0] is not None else slogdet_p(a)[0]
        c = ew.mul(g_sign, sign)
        phase = ew.mul(ew.sub(c, ew.conj(c)), 0.5)  # i Im(c)
        coef = phase if coef is None else ew.add(coef, phase)
    try:
        inverse = inv_p(a)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(
            "slogdet: the gradient of log|det a| is undefined where a is singular (det a = 0, "
            "log|det a| = -inf); for a gradient that exists there, use det(a), whose gradient "
            "is the cofactor matrix.") from None
    return (ew.mul(_with_unit_axes(coef), _mT(inverse)),)


def _slogdet_tangent(ts, outs, a):
    """t = tr(a^-1 d a): d logabsdet = Re(t), d sign = sign i Im(t) (zero for a real sign)."""
    t = F.sum(ew.mul(_mT(inv_p(a)), ts[0]), axis=(-2, -1))
    if np.dtype(a.dtype).kind != "c":
        return [None, t]
    return [ew.mul(outs[0], ew.mul(ew.sub(t, ew.conj(t)), 0.5)), ew.real(t)]


slogdet_p = Primitive("slogdet", _slogdet_impl, _slogdet_vjp, multiple_results=True,
                      tangent=_slogdet_tangent,
                      batch=batching.elementwise_rule,
                      doc="slogdet(a): [sign, log|det a|] of a [..., n, n].")
def _cofactors(a):
    """The cofactor matrix of a [..., n, n], from the determinants of its n^2 minors: it is
    det(a) inv(a)^T where a is invertible, and defined where a is singular too, as det's
    gradient is (a polynomial's). O(n^5) work: meant for the small matrices of filters."""
    n = a.shape[-1]
    if n == 1:
        return constant(a, lambda xp: xp.ones(a.shape, a.dtype))
    rest = np.array([[j for j in range(n) if j != i] for i in range(n)])  # [n, n-1]
    minors = F.getitem(a, (Ellipsis, rest[:, None, :, None], rest[None, :, None, :]))
    signs = constant(a, lambda xp: xp.asarray((-1.0) ** np.add.outer(np.arange(n),
                                                                    np.arange(n))))
    return ew.mul(det_p(minors), signs)


det_p = Primitive(
    "det", lambda a: _xp(a).asarray(_xp(a).linalg.det(a)),
    lambda g, out, a: (ew.mul(_with_unit_axes(g), _cofactors(a)),),
    tangent=lambda ts, out, a: F.sum(ew.mul(_cofactors(a), ts[0]), axis=(-2, -1)),
    batch=batching.elementwise_rule,
    doc="det(a): the determinant of a [..., n, n]; VJP g times a's cofactor matrix, defined "
        "for singular a too.")


# --- eigh and qr -----------------------------------------------------------------------------
def _eigh_impl(a, UPLO):
    w, v = _xp(a).linalg.eigh(a, UPLO=UPLO)
    return [w, v]


def _eigh_vjp(cts, outs, a, UPLO, _saved=None):
    """a = v diag(w) v^T: a's cotangent is v (diag(g_w) + F * (v^T g_v)) v^T with
    F[i, j] = 1 / (w[j] - w[i]) off the diagonal. Only g_v needs F, so the eigenvalues'
    gradient is defined for repeated eigenvalues too; the eigenvectors' is not (inf, nan)."""
    g_w, g_v = cts
    w, v = outs
    if w is None or v is None:  # an output the caller dropped: recompute both
        w, v = eigh_p(a, UPLO=UPLO)
    n = w.shape[-1]
    middle = None
    if g_w is not None:
        eye = constant(g_w, lambda xp: xp.eye(n, dtype=g_w.dtype))
        middle = ew.mul(reshape_p(g_w, shape=g_w.shape + (1,)), eye)
    if g_v is not None:
        off = constant(w, lambda xp: ~xp.eye(n, dtype=bool))
        gaps = ew.sub(reshape_p(w, shape=w.shape[:-1] + (1, n)),
                      reshape_p(w, shape=w.shape + (1,)))  # [i, j] = w[j] - w[i]
        f = ew.where(off, ew.div(1.0, ew.where(off, gaps, 1.0)), 0.0)
        rotated = ew.mul(f, matmul_p(_mT(v), g_v))
        middle = rotated if middle is None else ew.add(middle, rotated)
    return (matmul_p(matmul_p(v, middle), _mT(v)),)


eigh_p = Primitive("eigh", _eigh_impl, _eigh_vjp, multiple_results=True,
                   batch=batching.elementwise_rule,
                   doc="eigh(a, UPLO): [w, v], the ascending eigenvalues and eigenvectors of "
                       "a symmetric [..., n, n].")


def _qr_impl(a, mode):
    q, r = _xp(a).linalg.qr(a, mode=mode)
    return [q, r]


def _qr_vjp(cts, outs, a, mode, _saved=None):
    """For a = q r (m >= n, q [m, n]): with M = g_r r^T - q^T g_q, a's cotangent is
    (g_q + q copyltu(M)) r^-T, copyltu(M) = triu(M) + triu(M, 1)^T. A wide a = [a1 a2] (m < n)
    is q r1 = a1, square, and r2 = q^T a2, as JAX's rule: a2's cotangent is q g_r2, and a1's
    the square rule's with g_q + a2 g_r2^T."""
    m, n = a.shape[-2:]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            f"qr: the gradient of mode 'complete' is implemented for square and wide matrices "
            f"(m <= n), but this one is {m}x{n}: its extra columns of Q are any orthonormal "
            "completion. Use mode 'reduced' (the default) for a tall matrix.")
    g_q, g_r = cts
    q, r = outs
    if q is None or r is None:  # an output the caller dropped: recompute both
        q, r = qr_p(a, mode=mode)
    if m >= n:
        return (_qr_square_vjp(q, r, g_q, g_r),)
    a2 = F.getitem(a, (Ellipsis, slice(None), slice(m, None)))
    r1 = F.getitem(r, (Ellipsis, slice(None), slice(0, m)))
    g_r1 = g_a2 = None
    if g_r is not None:
        g_r1 = F.getitem(g_r, (Ellipsis, slice(None), slice(0, m)))
        g_r2 = F.getitem(g_r, (Ellipsis, slice(None), slice(m, None)))
        g_a2 = matmul_p(q, g_r2)
        from_r2 = matmul_p(a2, _mT(g_r2))
        g_q = from_r2 if g_q is None else ew.add(g_q, from_r2)
    g_a1 = _qr_square_vjp(q, r1, g_q, g_r1)
    if g_a2 is None:
        g_a2 = ew.mul(a2, 0.0)
    return (F.concatenate([g_a1, g_a2], axis=-1),)


def _qr_square_vjp(q, r, g_q, g_r):
    """a's cotangent for a = q r with r [..., n, n] square (the m >= n rule)."""
    inner = matmul_p(g_r, _mT(r)) if g_r is not None else None
    if g_q is not None:
        qt_gq = matmul_p(_mT(q), g_q)
        inner = ew.neg(qt_gq) if inner is None else ew.sub(inner, qt_gq)
    upper = triu(inner)
    lifted = matmul_p(q, ew.add(upper, _mT(triu(inner, 1))))
    b = lifted if g_q is None else ew.add(g_q, lifted)
    return _mT(triangular_solve_p(r, _mT(b), lower=False, unit_diagonal=False))


qr_p = Primitive("qr", _qr_impl, _qr_vjp, multiple_results=True,
                 batch=batching.elementwise_rule,
                 doc="qr(a, mode): [q, r] with a = q r, q orthonormal, r upper triangular.")


# --- lu --------------------------------------------------------------------------------------
def _lu_impl(a):
    """[lu, pivots, permutation] of a [..., n, n]: Gaussian elimination with partial pivoting,
    one column at a time over the whole batch, as LAPACK's getf2 (the row of the largest
    |entry|, the first of equals; a zero pivot leaves its column unscaled). lu holds L's
    multipliers below the diagonal (its unit diagonal implied) and U on and above it, with
    a[permutation] = L U; pivots[j] is the row that step j swapped with row j (int32)."""
    xp = _xp(a)
    lu = xp.array(a, copy=True)
    *batch, n, _ = lu.shape
    pivots = xp.zeros((*batch, n), np.int32)
    perm = xp.array(xp.broadcast_to(xp.arange(n, dtype=np.int32), (*batch, n)))
    with np.errstate(all="ignore"):  # a NaN or inf in a spreads as LAPACK's would
        for j in range(n):
            p = j + xp.argmax(xp.abs(lu[..., j:, j]), axis=-1)
            pivots[..., j] = p
            rows = p[..., None, None]
            row_j, row_p = lu[..., j, :].copy(), xp.take_along_axis(lu, rows, axis=-2)
            lu[..., j, :] = row_p[..., 0, :]
            xp.put_along_axis(lu, rows, row_j[..., None, :], axis=-2)
            at_j = perm[..., j].copy()
            perm[..., j] = xp.take_along_axis(perm, p[..., None], axis=-1)[..., 0]
            xp.put_along_axis(perm, p[..., None], at_j[..., None], axis=-1)
            pivot = lu[..., j, j][..., None]
            nonzero = pivot != 0
            below = lu[..., j + 1:, j]
            lu[..., j + 1:, j] = xp.where(nonzero, below / xp.where(nonzero, pivot, 1), below)
            lu[..., j + 1:, j + 1:] -= lu[..., j + 1:, j:j + 1] * lu[..., j:j + 1, j + 1:]
    return [lu, pivots, perm]


def _lu_factors(lu):
    """(L, U) of a packed lu: L unit lower triangular, U upper."""
    n = lu.shape[-1]
    eye = constant(lu, lambda xp: xp.eye(n, dtype=lu.dtype))
    return ew.add(tril(lu, -1), eye), triu(lu)


def take_rows(x, perm):
    """x[..., perm, :]: the rows of each matrix in x in perm's order (also lu_solve's)."""
    return take_along_axis(x, ew.astype(perm, dtype=np.dtype(np.intp))[..., None], axis=-2)


def _lu_vjp(cts, outs, a, _saved=None):
    """For a[perm] = L U, dA reaches lu as L tril(X, -1) + triu(X) U with X = L^-1 dA[perm]
    U^-1 (the tangent below); transposed: X's cotangent is tril(L^T g, -1) + triu(g U^T),
    and a's is L^-T that U^-T, its rows put back where perm took them."""
    g = cts[0]
    if g is None:
        return (None,)
    if outs[0] is None or outs[2] is None:  # the tape holds outputs weakly: lu_factor
        outs = lu_p(a)                       # keeps no permutation
    lu, _, perm = outs
    l, u = _lu_factors(lu)
    x_bar = ew.add(tril(matmul_p(_mT(l), g), -1), triu(matmul_p(g, _mT(u))))
    y = triangular_solve_p(_mT(lu), x_bar, lower=False, unit_diagonal=True)  # L^-T x_bar
    z = _mT(triangular_solve_p(lu, _mT(y), lower=False, unit_diagonal=False))  # y U^-T
    inverse = argsort(perm, axis=-1)
    return (take_rows(z, inverse),)


def _lu_tangent(ts, outs, a):
    """d lu = L tril(X, -1) + triu(X) U, X = L^-1 d a[perm] U^-1 (JAX's lu JVP)."""
    lu, _, perm = outs
    l, u = _lu_factors(lu)
    la = triangular_solve_p(lu, take_rows(ts[0], perm), lower=True, unit_diagonal=True)
    x = _mT(triangular_solve_p(_mT(lu), _mT(la), lower=True, unit_diagonal=False))
    return [ew.add(matmul_p(l, tril(x, -1)), matmul_p(triu(x), u)), None, None]


lu_p = Primitive("lu", _lu_impl, _lu_vjp, multiple_results=True, tangent=_lu_tangent,
                 batch=batching.elementwise_rule,
                 doc="lu(a): [lu, pivots, permutation] of a [..., n, n], a[permutation] = L U.")


def _pivots_impl(pivots, n):
    xp = _xp(pivots)
    perm = xp.array(xp.broadcast_to(xp.arange(n, dtype=np.int32), (*pivots.shape[:-1], n)))
    for j in range(pivots.shape[-1]):
        p = pivots[..., j:j + 1].astype(np.intp)
        at_j = perm[..., j].copy()
        perm[..., j] = xp.take_along_axis(perm, p, axis=-1)[..., 0]
        xp.put_along_axis(perm, p, at_j[..., None], axis=-1)
    return perm


lu_pivots_to_permutation_p = Primitive(
    "lu_pivots_to_permutation", _pivots_impl, batch=batching.elementwise_rule,
    doc="lu_pivots_to_permutation(pivots, n): the row order the swaps in pivots make.")


# --- polar ---------------------------------------------------------------------------------
def _polar_impl(a):
    """[u, p] of a real [..., m, n], m >= n: a = u p, u with orthonormal columns, p symmetric
    positive semidefinite, from the thin SVD a = W diag(s) V^T: u = W V^T, p = V diag(s) V^T
    (symmetrized)."""
    xp = _xp(a)
    w, s, vt = xp.linalg.svd(a, full_matrices=False)
    v = xp.swapaxes(vt, -1, -2)
    p = (v * s[..., None, :]) @ vt
    return [w @ vt, (p + xp.swapaxes(p, -1, -2)) / 2]


def _polar_parts(p):
    """(V, 1 / (s_i + s_j), 1 / s) of p = V diag(s) V^T, the eigenbasis the rules solve the
    Sylvester equation p X + X p = C in: X = V ((V^T C V) / (s_i + s_j)) V^T."""
    s, v = eigh_p(p, UPLO="L")
    n = s.shape[-1]
    sums = ew.add(reshape_p(s, shape=s.shape + (1,)), reshape_p(s, shape=s.shape[:-1] + (1, n)))
    return v, ew.div(1.0, sums), ew.div(1.0, s)


def _sylvester(v, k, c):
    """X with p X + X p = c (p = V diag(s) V^T, k = 1 / (s_i + s_j))."""
    return matmul_p(matmul_p(v, ew.mul(matmul_p(matmul_p(_mT(v), c), v), k)), _mT(v))


def _times_p_inverse(x, v, s_inv):
    """x p^-1 = x V diag(1 / s) V^T."""
    return matmul_p(ew.mul(matmul_p(x, v), reshape_p(s_inv, shape=s_inv.shape[:-1] + (1,)
                                                          + s_inv.shape[-1:])), _mT(v))


def _polar_tangent(ts, outs, a):
    """From p^2 = a^T a: p dp + dp p = da^T a + a^T da, and du = (da - u dp) p^-1."""
    u, p = outs
    v, k, s_inv = _polar_parts(p)
    da = ts[0]
    dp = _sylvester(v, k, ew.add(matmul_p(_mT(da), a), matmul_p(_mT(a), da)))
    return [_times_p_inverse(ew.sub(da, matmul_p(u, dp)), v, s_inv), dp]


def _polar_vjp(cts, outs, a, _saved=None):
    """The tangent rule transposed: with G = sym(g_p - u^T g_u p^-1) and H its Sylvester
    solution, a's cotangent is g_u p^-1 + 2 a H."""
    g_u, g_p = cts
    if outs[0] is None or outs[1] is None:
        outs = polar_p(a)
    u, p = outs
    v, k, s_inv = _polar_parts(p)
    g = None if g_p is None else g_p
    if g_u is not None:
        pulled = _times_p_inverse(matmul_p(_mT(u), g_u), v, s_inv)
        g = ew.neg(pulled) if g is None else ew.sub(g, pulled)
    out = None
    if g is not None:
        h = _sylvester(v, k, ew.mul(ew.add(g, _mT(g)), 0.5))
        out = ew.mul(matmul_p(a, h), 2.0)
    if g_u is not None:
        direct = _times_p_inverse(g_u, v, s_inv)
        out = direct if out is None else ew.add(out, direct)
    return (out,)


polar_p = Primitive("polar", _polar_impl, _polar_vjp, multiple_results=True,
                    tangent=_polar_tangent, batch=batching.elementwise_rule,
                    doc="polar(a): [u, p], a = u p for a real [..., m, n], m >= n.")


# --- the checked functions (public as scanlib.linalg) ----------------------------------------
def _floating(a, who, complex_ok=True):
    """a as a float or complex tensor: integers become JAX's float for them (`as_inexact`)."""
    kind = np.dtype(a.dtype).kind
    if kind in "biu":
        return F.as_inexact(a)
    if kind == "c" and not complex_ok:
        raise TypeError(f"{who}: complex input ({a.dtype}) is not supported; scanlib's {who} "
                        "and its gradient are for real matrices")
    if kind not in "fc" or a.dtype == np.float16:
        raise TypeError(f"{who}: {a.dtype} input is not supported (NumPy's linalg has no "
                        f"{a.dtype}); cast to float32 or float64 first")
    return a


def _square(a, who, complex_ok=True):
    a = F.as_tensor(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{who}: expected a square matrix or a stack of them ([..., n, n]), "
                         f"got shape {a.shape}")
    return _floating(a, who, complex_ok)


def _right_hand_side(a, b, who):
    """b as [..., n, k] and a function that gives the result b's layout back. As NumPy 2 (and
    JAX from 0.5): b is one vector only when 1-d; otherwise a stack of [n, k] matrices."""
    b = _floating(F.as_tensor(b), who)
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"{who}: a has shape {a.shape} but the vector b has length "
                             f"{b.shape[0]}; they must agree (n = {n})")
        return F.reshape(b, (n, 1)), lambda x: F.reshape(x, x.shape[:-1])
    if b.ndim == 0 or b.shape[-2] != n:
        raise ValueError(
            f"{who}: a has shape {a.shape}, so b must be [{n}] or [..., {n}, k], got shape "
            f"{b.shape}. (A b of 2 or more axes is a stack of matrices, as in NumPy 2; for a "
            f"stack of vectors write {who}(a, b[..., None])[..., 0].)")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"{who}: the batch axes of a {a.shape[:-2]} and b {b.shape[:-2]} do "
                         f"not broadcast (shapes {a.shape} and {b.shape})") from None
    return b, lambda x: x


def inv(a):
    """The inverse of a square matrix (or of each in a stack [..., n, n]).

    >>> sl.linalg.inv(sl.tensor([[2.0, 0.0], [0.0, 4.0]]))
    """
    return inv_p(_square(a, "inv"))


def solve(a, b):
    """x with a @ x = b, for a [..., n, n] and b [n] or [..., n, k] (NumPy 2's rule).

    >>> sl.linalg.solve(sl.tensor([[2.0, 0.0], [0.0, 4.0]]), sl.tensor([2.0, 2.0]))
    """
    a = _square(a, "solve")
    b, as_given = _right_hand_side(a, b, "solve")
    return as_given(solve_p(a, b))


_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False):
    """x with op(a) @ x = b for a triangular a, as jax.scipy.linalg.solve_triangular.

    op is a itself (trans 0 or 'N'), a^T (1, 'T') or a^H (2, 'C'); only a's lower
    (lower=True) or upper triangle is read, its diagonal taken as ones when unit_diagonal.
    b is [n] or [..., n, k], as in solve. NumPy has no triangular solve: small systems (n up
    to 4, or up to 32 on a stack of 64 or more) are solved by substitution over the whole
    stack at once, others by LU on the triangle (exact to rounding, O(n^3) rather than
    O(n^2)), as is any system whose substitution meets a zero, NaN or inf on the diagonal or
    gives a result that is not finite, so errors, NaN and inf are the LU path's.

    >>> sl.linalg.solve_triangular(sl.tensor([[2.0, 0.0], [1.0, 1.0]]), sl.tensor([2.0, 3.0]),
    ...                            lower=True)
    """
    a = _square(a, "solve_triangular")
    if isinstance(trans, bool) or trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0/'N', 1/'T' or 2/'C', got {trans!r}")
    b, as_given = _right_hand_side(a, b, "solve_triangular")
    lower = bool(lower)
    if _TRANS[trans]:
        a, lower = _mT(a), not lower
        if _TRANS[trans] == 2 and np.dtype(a.dtype).kind == "c":
            a = ew.conj(a)
    return as_given(triangular_solve_p(a, b, lower=lower, unit_diagonal=bool(unit_diagonal)))


def cho_solve(c_and_lower, b):
    """x with A @ x = b from A's Cholesky factor, as jax.scipy.linalg.cho_solve.

    c_and_lower is (c, lower): A = c c^H when lower, else c^H c.

    >>> L = sl.linalg.cholesky(sl.tensor([[4.0, 2.0], [2.0, 3.0]]))
    >>> sl.linalg.cho_solve((L, True), sl.tensor([1.0, 2.0]))
    """
    try:
        c, lower = c_and_lower
    except (TypeError, ValueError):
        raise TypeError("cho_solve: the first argument must be a pair (c, lower), as "
                        f"cholesky's factor and whether it is lower, got {c_and_lower!r}") from None
    lower = bool(lower)
    y = solve_triangular(c, b, trans=0 if lower else 2, lower=lower)
    return solve_triangular(c, y, trans=2 if lower else 0, lower=lower)


def _symmetrized(a):
    return ew.mul(ew.add(a, _mT(a)), 0.5)


def cholesky(a, upper=False):
    """The Cholesky factor L (a = L @ L^T) of a symmetric positive definite matrix.

    L is lower triangular, or upper (a = U^T @ U) when upper=True. As JAX does, a is
    symmetrized first ((a + a^T) / 2), so its gradient is symmetric. Real matrices only.

    >>> sl.linalg.cholesky(sl.tensor([[4.0, 2.0], [2.0, 3.0]]))
    """
    factor = cholesky_p(_symmetrized(_square(a, "cholesky", complex_ok=False)))
    return _mT(factor) if upper else factor


def slogdet(a):
    """The sign and log absolute value of the determinant, as numpy.linalg.slogdet.

    A named tuple (sign, logabsdet); for complex a the sign is a complex unit.

    >>> sl.linalg.slogdet(sl.tensor([[2.0, 0.0], [0.0, -3.0]]))
    """
    sign, logabsdet = slogdet_p(_square(a, "slogdet"))
    return SlogdetResult(sign, logabsdet)


def det(a):
    """The determinant of a square matrix (or of each in a stack).

    >>> sl.linalg.det(sl.tensor([[2.0, 1.0], [1.0, 3.0]]))
    """
    return det_p(_square(a, "det"))


def eigh(a, UPLO="L"):
    """The eigenvalues (ascending) and eigenvectors of a symmetric matrix, as a named tuple.

    As JAX does, a is symmetrized first, so UPLO changes nothing for a symmetric a. The
    eigenvectors' gradient needs distinct eigenvalues (it divides by their gaps: repeated
    ones give inf or nan); the eigenvalues' gradient alone is always defined. Real only.

    >>> sl.linalg.eigh(sl.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
    """
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    w, v = eigh_p(_symmetrized(_square(a, "eigh", complex_ok=False)), UPLO=UPLO)
    return EighResult(w, v)


def qr(a, mode="reduced"):
    """The QR decomposition a = Q @ R as a named tuple (R alone for mode='r'), as numpy.linalg.qr.

    The gradient is JAX's, for any shape in mode 'reduced' or 'r', and for square and wide
    matrices in mode 'complete' (a tall one there raises NotImplementedError). Real matrices
    only.

    >>> sl.linalg.qr(sl.tensor([[3.0, 1.0], [4.0, 2.0]])).R
    """
    a = F.as_tensor(a)
    if a.ndim < 2:
        raise ValueError(f"qr: expected a matrix or a stack of them ([..., m, n]), got shape "
                         f"{a.shape}")
    a = _floating(a, "qr", complex_ok=False)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r} ('raw' "
                         "is LAPACK's internal form, which has no gradient here)")
    q, r = qr_p(a, mode="reduced" if mode == "r" else mode)
    return r if mode == "r" else QRResult(q, r)


def matrix_power(a, n):
    """a raised to the integer power n, as numpy.linalg.matrix_power.

    By repeated squaring; n < 0 inverts a first, n = 0 gives the identity (no gradient).

    >>> sl.linalg.matrix_power(sl.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    """
    a = F.as_tensor(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"matrix_power: expected a square matrix or a stack of them "
                         f"([..., n, n]), got shape {a.shape}")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: the exponent must be an integer, got {n!r}") from None
    if n == 0:
        size, dtype = a.shape[-1], a.dtype
        return F.as_tensor(constant(a, lambda xp: xp.broadcast_to(xp.eye(size, dtype=dtype),
                                                                  a.shape)))
    if n < 0:
        a, n = inv(a), -n
    result, power = None, a
    while n:
        if n & 1:
            result = power if result is None else matmul_p(result, power)
        n >>= 1
        if n:
            power = matmul_p(power, power)
    return result


# NumPy functions (np.f called on a Tensor, NEP 18) and ufuncs that run these ops; each
# callable takes NumPy's parameter names (numpy_interop refuses other keywords).
def _numpy_triangle(a, lower):
    """The symmetric matrix NumPy's eigh and cholesky read: one triangle of a, mirrored (they
    never look at the other; scanlib's own functions symmetrize instead, as JAX's do)."""
    a = _square(a, "np.linalg", complex_ok=False)
    half = tril(a) if lower else triu(a)
    eye = constant(a, lambda xp: xp.eye(a.shape[-1], dtype=a.dtype))
    return ew.sub(ew.add(half, _mT(half)), ew.mul(a, eye))  # the diagonal counted once


def _np_cholesky(a, upper=False):
    return cholesky(_numpy_triangle(a, lower=not upper), upper=upper)


def _np_eigh(a, UPLO="L"):
    if UPLO not in ("L", "U"):
        raise ValueError(f"np.linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return eigh(_numpy_triangle(a, lower=UPLO == "L"), UPLO=UPLO)  # NumPy's vector signs


NUMPY_FUNCTIONS: dict = {
    np.linalg.inv: inv,
    np.linalg.solve: solve,
    np.linalg.cholesky: _np_cholesky,
    np.linalg.slogdet: slogdet,
    np.linalg.det: det,
    np.linalg.eigh: _np_eigh,
    np.linalg.eigvalsh: lambda a, UPLO="L": _np_eigh(a, UPLO).eigenvalues,
    np.linalg.qr: qr,
    np.linalg.norm: norm,
    np.linalg.matrix_power: matrix_power,
}
NUMPY_UFUNCS: dict = {}

# The seams ops/spectral.py shares: its inputs are checked as these, and its rules transpose.
floating_input, square_input, transpose_matrices = _floating, _square, _mT
