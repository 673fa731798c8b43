"""The singular value decomposition and the general eigendecomposition, with their rules, and
the functions built on them that scanlib.linalg makes public: svd, svdvals, pinv, lstsq,
matrix_rank, cond, eig, eigvals (as jax.numpy.linalg spells them).

Each rule is JAX's: svd's JVP and the VJP that is its transpose (so repeated singular values
give JAX's inf and nan in the singular vectors' gradients), pinv's own JVP (Golub and
Pereyra), eig's eigenvalue derivative diag(v^-1 da v). SVD-based functions take real
matrices; eig and eigvals take real or complex ones and return complex results, as JAX.
Imports backends, tape and the ops below it.
"""

from __future__ import annotations

import collections

import numpy as np

from .. import backends
from . import batching
from . import elementwise as ew
from . import functions as F
from .decompositions import eigh, solve_p
from .decompositions import floating_input as _floating
from .decompositions import square_input as _square
from .decompositions import transpose_matrices as _mT
from .gathers import argsort, take_along_axis
from .linalg import matmul_p
from .matrices import constant, norm
from .primitive import Primitive
from .reductions import any as _any
from .special import isnan
from .structural import reshape_p

__all__: list[str] = []  # public as scanlib.linalg

SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])
EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
LstsqResult = collections.namedtuple("LstsqResult", ["x", "residuals", "rank", "s"])


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _row(s):
    """s [..., k] as [..., 1, k]: scales a matrix's columns."""
    return reshape_p(s, shape=s.shape[:-1] + (1, s.shape[-1]))


def _col(s):
    """s [..., k] as [..., k, 1]: scales a matrix's rows."""
    return reshape_p(s, shape=s.shape + (1,))


def _eye(like, k):
    return constant(like, lambda xp: xp.eye(k, dtype=like.dtype))


def _finite_parts(compute, a):
    """compute(a)'s arrays, NaN for each matrix of a that holds a NaN or inf (where LAPACK, so
    NumPy, raises "did not converge", JAX gives NaN), the others computed as usual."""
    xp = _xp(a)
    bad = ~xp.isfinite(a).all(axis=(-2, -1)) if a.size else xp.zeros(a.shape[:-2], bool)
    if not bad.any():
        return compute(a)
    outs = compute(xp.where(bad[..., None, None], a.dtype.type(0), a))
    return [xp.where(bad.reshape(bad.shape + (1,) * (o.ndim - bad.ndim)),
                     o.dtype.type(complex(np.nan, np.nan) if o.dtype.kind == "c" else np.nan), o)
            for o in outs]


# --- svd -------------------------------------------------------------------------------------
def _svd_impl(a, full_matrices):
    return _finite_parts(lambda m: list(_xp(m).linalg.svd(m, full_matrices=full_matrices)), a)


def _gap_inverses(s):
    """F[i, j] = 1 / (s[j]^2 - s[i]^2) off the diagonal, 0 on it, computed as JAX does: equal
    singular values give inf there."""
    k = s.shape[-1]
    gaps = ew.mul(ew.add(_row(s), _col(s)), ew.sub(_row(s), _col(s)))  # [i, j]: s_j^2 - s_i^2
    eye = _eye(s, k)
    return ew.sub(ew.div(1.0, ew.add(gaps, eye)), eye)


def _full_check(a, full_matrices, what):
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        raise NotImplementedError(
            f"svd: the {what} of U and Vh with full_matrices=True is not defined for a "
            f"non-square matrix ({m}x{n}: the extra columns are any orthonormal completion), "
            "as in JAX. Call svd(a, full_matrices=False), or use only the singular values.")


def _svd_vjp(cts, outs, a, full_matrices, _saved=None):
    """The transpose of JAX's JVP: with dS = U^T dA V, a's cotangent is U C V^T for
    C = diag(g_s) + (Gu + Gu^T) S + S (Gv + Gv^T), Gu = F * (U^T g_U), Gv = F * (V^T g_V), plus
    the parts of g_U (tall a) or g_V (wide a) outside U's (V's) span, divided by s."""
    g_u, g_s, g_vh = cts
    if g_u is not None or g_vh is not None:
        _full_check(a, full_matrices, "gradient")
    m, n = a.shape[-2:]
    k = min(m, n)
    u, s, vh = outs
    if u is None or s is None or vh is None or (full_matrices and m != n):
        # an output the caller dropped, or a full U or Vh whose extra columns must not be
        # differentiated again (second order): recompute the reduced decomposition
        u, s, vh = svd_p(a, full_matrices=False)
    c = None if g_s is None else ew.mul(_col(g_s), _eye(g_s, k))
    f = _gap_inverses(s) if g_u is not None or g_vh is not None else None
    extra = None
    if g_u is not None:
        gu = ew.mul(f, matmul_p(_mT(u), g_u))
        part = ew.mul(ew.add(gu, _mT(gu)), _row(s))
        c = part if c is None else ew.add(c, part)
        if m > n:
            outside = ew.sub(g_u, matmul_p(u, matmul_p(_mT(u), g_u)))
            extra = matmul_p(ew.div(outside, _row(s)), vh)
    if g_vh is not None:
        g_v = _mT(g_vh)
        v = _mT(vh)
        gv = ew.mul(f, matmul_p(vh, g_v))
        part = ew.mul(_col(s), ew.add(gv, _mT(gv)))
        c = part if c is None else ew.add(c, part)
        if n > m:
            outside = ew.sub(g_v, matmul_p(v, matmul_p(vh, g_v)))
            more = matmul_p(u, _mT(ew.div(outside, _row(s))))
            extra = more if extra is None else ew.add(extra, more)
    if c is None:
        return (extra,)
    ga = matmul_p(matmul_p(u, c), vh)
    return (ga if extra is None else ew.add(ga, extra),)


def _svd_tangent(ts, outs, a, full_matrices):
    """JAX's JVP: dS = U^T dA V, ds = diag(dS), dU = U (F * (dS S + S dS^T)) (+ the part of
    dA V outside U's span, divided by s, for tall a), and dV likewise."""
    _full_check(a, full_matrices, "derivative")
    u, s, vh = outs
    da = ts[0]
    m, n = a.shape[-2:]
    ut, v = _mT(u), _mT(vh)
    ds_mat = matmul_p(matmul_p(ut, da), v)
    eye = _eye(s, s.shape[-1])
    ds = F.sum(ew.mul(ds_mat, eye), axis=-1)
    f = _gap_inverses(s)
    dss = ew.mul(_row(s), ds_mat)
    sds = ew.mul(_col(s), ds_mat)
    du = matmul_p(u, ew.mul(f, ew.add(dss, _mT(dss))))
    dv = matmul_p(v, ew.mul(f, ew.add(sds, _mT(sds))))
    if m > n:
        dav = matmul_p(da, v)
        du = ew.add(du, ew.div(ew.sub(dav, matmul_p(u, matmul_p(ut, dav))), _row(s)))
    if n > m:
        dahu = matmul_p(_mT(da), u)
        dv = ew.add(dv, ew.div(ew.sub(dahu, matmul_p(v, matmul_p(vh, dahu))), _row(s)))
    return [du, ds, _mT(dv)]


svd_p = Primitive("svd", _svd_impl, _svd_vjp, multiple_results=True, tangent=_svd_tangent,
                  batch=batching.elementwise_rule,
                  doc="svd(a, full_matrices): [u, s, vh] with a = u diag(s) vh, s descending.")


def _svd_hermitian(a, compute_uv):
    """JAX's svd(hermitian=True): from eigh, s = |w| descending, u its eigenvectors in that
    order, vh = (u * sign(w))^T."""
    w, v = eigh(a)
    s = ew.absolute(w)
    idx = _flip_last(argsort(s, axis=-1))
    s = take_along_axis(s, idx, axis=-1)
    if not compute_uv:
        return s
    sign = take_along_axis(ew.sign(w), idx, axis=-1)
    u = take_along_axis(v, reshape_p(idx, shape=idx.shape[:-1] + (1, idx.shape[-1])), axis=-1)
    return SVDResult(u, s, _mT(ew.mul(u, _row(sign))))


def _flip_last(x):
    return F.getitem(x, (Ellipsis, slice(None, None, -1)))


def _matrix(a, who):
    a = F.as_tensor(a)
    if a.ndim < 2:
        raise ValueError(f"{who}: expected a matrix or a stack of them ([..., m, n]), got shape "
                         f"{a.shape}")
    return _floating(a, who, complex_ok=False)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The singular value decomposition a = U @ diag(S) @ Vh, as jax.numpy.linalg.svd: a named
    tuple (U, S, Vh), S descending, or S alone when compute_uv=False.

    Gradients are JAX's: those of U and Vh need distinct singular values (repeated ones give
    inf or nan, as in JAX) and, for a non-square a, full_matrices=False (else
    NotImplementedError, as JAX); S's gradient is always defined. hermitian=True reads a as
    symmetric and decomposes it with eigh, as JAX does. Real matrices only.

    >>> sl.linalg.svd(sl.tensor([[3.0, 0.0], [0.0, -4.0]])).S
    """
    a = _matrix(a, "svd")
    if hermitian:
        _square(a, "svd(hermitian=True)", complex_ok=False)
        return _svd_hermitian(a, compute_uv)
    if not compute_uv:
        return svd_p(a, full_matrices=False)[1]
    return SVDResult(*svd_p(a, full_matrices=bool(full_matrices)))


def svdvals(x):
    """The singular values of each matrix in x, descending, as jax.numpy.linalg.svdvals.

    >>> sl.linalg.svdvals(sl.tensor([[3.0, 0.0], [0.0, -4.0]]))
    """
    return svd(x, compute_uv=False)


# --- pinv ------------------------------------------------------------------------------------
def _pinv_impl(a, rtol):
    """As JAX (and NumPy): singular values up to rtol times the largest count as zero."""
    xp = _xp(a)
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return xp.zeros(a.shape[:-2] + (n, m), a.dtype)
    u, s, vh = _svd_impl(a, full_matrices=False)
    cutoff = rtol * s[..., 0:1]
    s = xp.where(s > cutoff, s, xp.inf).astype(a.dtype)
    return xp.matmul(xp.swapaxes(vh, -1, -2), xp.swapaxes(u, -1, -2) / s[..., None])


def _pinv_vjp(g, p, a, rtol):
    """The transpose of _pinv_tangent: -p^T g p^T + (I - a p) g^T p p^T + p^T p g^T (I - p a)."""
    h = _mT(g)
    first = ew.neg(matmul_p(matmul_p(_mT(p), g), _mT(p)))
    second = matmul_p(ew.sub(h, matmul_p(a, matmul_p(p, h))), matmul_p(p, _mT(p)))
    third = matmul_p(matmul_p(_mT(p), p), ew.sub(h, matmul_p(matmul_p(h, p), a)))
    return (ew.add(ew.add(first, second), third),)


def _pinv_tangent(ts, p, a, rtol):
    """JAX's rule (Golub and Pereyra): dp = -p da p + p p^T da^T (I - a p) + (I - p a) da^T
    p^T p."""
    da = ts[0]
    dat = _mT(da)
    s = matmul_p(matmul_p(p, _mT(p)), dat)
    t = matmul_p(matmul_p(dat, _mT(p)), p)
    out = ew.neg(matmul_p(matmul_p(p, da), p))
    out = ew.add(out, ew.sub(s, matmul_p(matmul_p(s, a), p)))
    return ew.add(out, ew.sub(t, matmul_p(matmul_p(p, a), t)))


pinv_p = Primitive("pinv", _pinv_impl, _pinv_vjp, tangent=_pinv_tangent,
                   batch=batching.elementwise_rule,
                   doc="pinv(a, rtol): the Moore-Penrose pseudo-inverse of a [..., m, n].")


def _tolerance(rtol, who):
    try:
        return float(rtol)
    except TypeError:
        raise TypeError(f"{who}: rtol must be one number here, got {type(rtol).__name__} "
                        f"{getattr(rtol, 'shape', '')}; for a tolerance per matrix, vmap "
                        f"{who} over the stack with its own rtol each") from None


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse of each matrix in a ([..., m, n] -> [..., n, m]), as
    jax.numpy.linalg.pinv: singular values up to rtol times the largest count as zero (by
    default rtol = 10 max(m, n) eps, JAX's, not NumPy's 1e-15). Its gradient is JAX's rule,
    defined where the rank does not change. hermitian=True reads a as symmetric, (a + a^T) / 2,
    as JAX does (so the gradient is symmetric too). Real matrices only.

    >>> sl.linalg.pinv(sl.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).shape
    """
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified")
        rtol = rcond
    a = _matrix(a, "pinv")
    if hermitian:
        a = ew.mul(ew.add(_square(a, "pinv(hermitian=True)"), _mT(a)), 0.5)
    if rtol is None:
        rtol = 10.0 * max(a.shape[-2:], default=0) * float(np.finfo(a.dtype).eps)
    return pinv_p(a, rtol=_tolerance(rtol, "pinv"))


# --- lstsq, matrix_rank, cond ----------------------------------------------------------------
def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """The least-squares solution x of a @ x = b (a [m, n], b [m] or [m, k]), as
    jax.numpy.linalg.lstsq: a named tuple (x, residuals, rank, s). As JAX: singular values
    below rcond times the largest (by default eps max(m, n)) count as zero, residuals are
    always the squared norms of b - a x (NumPy's empty ones only with numpy_resid=True), and
    the gradient flows through svd (defined where the singular values are distinct).

    >>> sl.linalg.lstsq(sl.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]]),
    ...                 sl.tensor([1.0, 2.0, 2.0])).x
    """
    a, b = _matrix(a, "lstsq"), _floating(F.as_tensor(b), "lstsq", complex_ok=False)
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise ValueError(f"lstsq: a must be 2-d and b 1-d or 2-d (as NumPy and JAX; vmap for "
                         f"a stack), got shapes {a.shape} and {b.shape}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"lstsq: a {a.shape} and b {b.shape} must have the same number of rows")
    if a.dtype != b.dtype:
        dtype = np.promote_types(a.dtype, b.dtype)
        a, b = ew.astype(a, dtype=dtype), ew.astype(b, dtype=dtype)
    vector = b.ndim == 1
    if vector:
        b = F.reshape(b, (b.shape[0], 1))
    m, n = a.shape
    eps = float(np.finfo(a.dtype).eps)
    if a.size == 0:
        s = F.zeros((0,), dtype=a.dtype)
        rank = F.tensor(np.int64(0))
        x = F.zeros((n, b.shape[1]), dtype=a.dtype)
    else:
        rcond = eps * max(n, m) if rcond is None else (eps if rcond < 0 else float(rcond))
        u, s, vt = svd(a, full_matrices=False)
        mask = ew.logical_and(ew.greater(s, 0.0),
                              ew.greater_equal(s, ew.mul(F.getitem(s, 0), rcond)))
        rank = F.sum(mask)
        s_inv = ew.where(mask, ew.div(1.0, ew.where(mask, s, 1.0)), 0.0)
        x = matmul_p(_mT(vt), ew.mul(_col(s_inv), matmul_p(_mT(u), b)))
    if numpy_resid and (int(rank) < n or m <= n):
        resid = F.zeros((0,), dtype=a.dtype)
    else:
        r = ew.sub(b, matmul_p(a, x))
        resid = F.sum(ew.mul(r, r), axis=0)
    if vector:
        x = F.reshape(x, (n,))
        resid = F.reshape(resid, resid.shape[:0] + (-1,))
    return LstsqResult(x, resid, rank, s)


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):  # noqa: N803 - JAX's name
    """The rank of each matrix in M, as jax.numpy.linalg.matrix_rank: the number of singular
    values above rtol (a tolerance, as JAX's; by default max(s) max(m, n) eps). An integer
    tensor, no gradient.

    >>> sl.linalg.matrix_rank(sl.tensor([[1.0, 2.0], [2.0, 4.0]]))
    """
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified")
        rtol = tol
    M = F.as_tensor(M)
    if M.ndim < 2:
        return ew.astype(_any(ew.not_equal(M, 0)), dtype=np.dtype(np.int32))
    s = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        rtol = ew.mul(F.max(s, axis=-1), max(M.shape[-2:]) * float(np.finfo(s.dtype).eps))
    rtol = F.as_tensor(rtol)
    return F.sum(ew.greater(s, reshape_p(rtol, shape=rtol.shape + (1,))), axis=-1)


def cond(x, p=None):
    """The condition number of each matrix in x in the p-norm (the 2-norm, a ratio of singular
    values, by default), as jax.numpy.linalg.cond; inf where the matrix is singular.

    >>> sl.linalg.cond(sl.tensor([[1.0, 0.0], [0.0, 4.0]]))
    """
    x = _matrix(x, "cond")
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"cond: the input must not be empty, got shape {x.shape}")
    if p is None or p == 2:
        s = svdvals(x)
        return ew.div(F.getitem(s, (Ellipsis, 0)), F.getitem(s, (Ellipsis, -1)))
    if p == -2:
        s = svdvals(x)
        r = ew.div(F.getitem(s, (Ellipsis, -1)), F.getitem(s, (Ellipsis, 0)))
    else:
        if x.shape[-2] != x.shape[-1]:
            raise ValueError(f"cond: for p={p!r} the matrix must be square, got shape {x.shape}")
        from .decompositions import inv_p

        with np.errstate(all="ignore"):
            inverse = _inverse_or_nan(x, inv_p)
        r = ew.mul(norm(x, p, (-2, -1)), norm(inverse, p, (-2, -1)))
    # NaN where x has none means a singular x: inf, as JAX
    nan_in_x = _any(isnan(x), axis=(-2, -1))
    return ew.where(ew.logical_and(isnan(r), ew.logical_not(nan_in_x)), np.inf, r)


def _inverse_or_nan(x, inv_p):
    """inv(x), with NaN (not NumPy's LinAlgError) for a singular x, as JAX's inverse gives."""
    try:
        return inv_p(x)
    except np.linalg.LinAlgError:
        return ew.mul(inv_p(ew.add(ew.mul(x, 0.0), _eye(x, x.shape[-1]))), np.nan)


# --- eig -------------------------------------------------------------------------------------
def _complex_of(dtype):
    return np.dtype(np.complex64) if np.dtype(dtype) in (np.float32, np.complex64) else \
        np.dtype(np.complex128)


def _eig_impl(a):
    xp = _xp(a)
    if not hasattr(xp.linalg, "eig"):
        raise NotImplementedError(
            f"eig: {xp.__name__} has no general (non-symmetric) eigendecomposition; as in "
            "JAX, which computes it on the CPU only, move the matrix there first "
            "(a.to('cpu')), or use eigh for a symmetric one")
    dtype = _complex_of(a.dtype)
    return _finite_parts(lambda m: [x.astype(dtype, copy=False) for x in xp.linalg.eig(m)], a)


def _eig_vjp(cts, outs, a, _saved=None):
    """d w = diag(v^-1 da v), so a's cotangent is v^-T diag(g_w) v^T (a plain transpose: JAX's
    convention; the walk takes its real part for a real a). The eigenvectors' derivative is
    not defined without a normalization JAX does not fix, so, as JAX, it raises."""
    g_w, g_v = cts
    if g_v is not None:
        raise NotImplementedError(
            "eig: the gradient of the eigenvectors of a non-symmetric matrix is not "
            "implemented (as in JAX: it depends on a normalization of each eigenvector). "
            "Differentiate the eigenvalues (eigvals), or use eigh for a symmetric matrix.")
    v = outs[1]
    if v is None:
        v = eig_p(a)[1]
    n = v.shape[-1]
    middle = ew.mul(_col(g_w), constant(g_w, lambda xp: xp.eye(n, dtype=g_w.dtype)))
    return (solve_p(_mT(v), matmul_p(middle, _mT(v))),)


# No forward rule: forward mode transposes the VJP, which raises for the eigenvectors, as JAX.
eig_p = Primitive("eig", _eig_impl, _eig_vjp, multiple_results=True,
                  batch=batching.elementwise_rule,
                  doc="eig(a): [w, v], the eigenvalues and right eigenvectors of a square "
                      "[..., n, n], complex.")


def _eigvals_impl(a):
    return _eig_impl(a)[0]


def _eigvals_vjp(g, w, a):
    return _eig_vjp([g, None], [w, None], a)


def _eigvals_tangent(ts, w, a):
    """d w = diag(v^-1 da v) = sum(solve(v, da) * v^T, -1), as JAX's."""
    v = eig_p(a)[1]
    da = ts[0]
    if np.dtype(da.dtype).kind != "c":
        da = ew.astype(da, dtype=v.dtype)
    return F.sum(ew.mul(solve_p(v, da), _mT(v)), axis=-1)


eigvals_p = Primitive("eigvals", _eigvals_impl, _eigvals_vjp, tangent=_eigvals_tangent,
                      batch=batching.elementwise_rule,
                      doc="eigvals(a): the eigenvalues of a square [..., n, n], complex.")


def eig(a):
    """The eigenvalues and right eigenvectors of each square matrix in a, as a named tuple
    (eigenvalues, eigenvectors), both complex (complex64 for float32 input), as
    jax.numpy.linalg.eig: columns of unit norm, in LAPACK's order.

    Only the eigenvalues are differentiable (reverse mode); the eigenvectors' gradient and
    forward mode raise NotImplementedError, as in JAX. On CuPy data it raises (JAX computes
    eig on the CPU only).

    >>> sl.linalg.eig(sl.tensor([[0.0, 1.0], [-1.0, 0.0]])).eigenvalues
    """
    w, v = eig_p(_square(a, "eig"))
    return EigResult(w, v)


def eigvals(a):
    """The eigenvalues of each square matrix in a, complex, as jax.numpy.linalg.eigvals; its
    gradient is JAX's, diag(v^-1 da v), in reverse and forward mode (first order: the second
    needs the eigenvectors' derivative, which JAX lacks too).

    >>> sl.linalg.eigvals(sl.tensor([[0.0, 1.0], [-1.0, 0.0]]))
    """
    return eigvals_p(_square(a, "eigvals"))
