"""scanlib.scipy.linalg: jax.scipy.linalg's names and meanings. Its cholesky and cho_factor
give the UPPER factor by default (lower=False), as SciPy and JAX do, where scanlib.linalg's
cholesky (jax.numpy.linalg's) gives the lower one: a port keeps each meaning by keeping its
module. solve_triangular, cho_solve, inv and det are scanlib.linalg's own; solve, qr and svd
are scanlib.linalg's with SciPy's arguments; expm is the primitive of ops/expm.py, lu,
lu_factor and lu_solve read ops/decompositions.py's lu.
Imports linalg and ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import linalg as _linalg
from ..linalg import cho_solve, det, inv, solve_triangular

from ..ops import elementwise as ew
from ..ops.decompositions import (cholesky_unsymmetrized_p, lu_p, lu_pivots_to_permutation_p,
                                  polar_p, take_rows, triangular_solve_p)
from ..ops.expm import expm_p
from ..ops import eye, matmul, one_hot, tril, triu
from ..ops.functions import as_tensor, concatenate, swapaxes, where
from ..ops.gathers import argsort, take
from ..ops.promotion import result_type
from ..tape import Tensor


def _square_real(a, who):
    """a as a real float [..., n, n] Tensor (integers become float64, as NumPy's linalg)."""
    a = as_tensor(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{who}: expected a square matrix or a stack of them ([..., n, n]), "
                         f"got shape {a.shape}")
    kind = np.dtype(a.dtype).kind
    if kind == "c":
        raise TypeError(f"{who}: complex input ({a.dtype}) is not supported; scanlib's {who} "
                        "and its gradient are for real matrices")
    if kind in "biu":
        return ew.astype(a, dtype=np.dtype(np.float64))
    if a.dtype == np.float16:
        raise TypeError(f"{who}: float16 input is not supported; cast to float32 or float64")
    return a


def _mT(a):
    return swapaxes(a, -1, -2)

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "expm", "inv", "det",
           "solve", "qr", "svd", "block_diag", "toeplitz", "lu", "lu_factor", "lu_solve", "eigh",
           "polar"]


def cholesky(a, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Tensor:
    """The Cholesky factor of a symmetric positive definite a, as jax.scipy.linalg.cholesky:
    UPPER (a = U^T U) unless lower=True (then a = L L^T, scanlib.linalg.cholesky's default).
    As JAX's, it reads one triangle of a (the upper one unless lower) without symmetrizing, and
    its gradient is JAX's, not symmetrized (scanlib.linalg.cholesky's is): the two agree in
    every symmetric direction, so through an a built symmetric (B @ B.T) they are the same.
    overwrite_a and check_finite are accepted and ignored, as in JAX.

    >>> sl.scipy.linalg.cholesky(sl.tensor([[4.0, 2.0], [2.0, 3.0]]))
    """
    a = _square_real(a, "scipy.linalg.cholesky")
    if lower:
        return cholesky_unsymmetrized_p(a)
    return _mT(cholesky_unsymmetrized_p(_mT(a)))


def cho_factor(a, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Tensor, bool]:
    """(c, lower), the Cholesky factor for cho_solve, as jax.scipy.linalg.cho_factor: c is
    upper unless lower=True. (SciPy leaves garbage in c's other triangle; JAX and scanlib give
    zeros there.)

    >>> c_and_lower = sl.scipy.linalg.cho_factor(sl.tensor([[4.0, 2.0], [2.0, 3.0]]))
    >>> sl.scipy.linalg.cho_solve(c_and_lower, sl.tensor([1.0, 2.0]))
    """
    return cholesky(a, lower=lower), bool(lower)


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16) -> Tensor:
    """The matrix exponential of a real square matrix (or of each in a stack [..., n, n]), as
    jax.scipy.linalg.expm: scaling and squaring with a degree-13 Pade approximant, its
    gradient the Frechet derivative (to every order). Float32 input computes in float64 and
    is rounded once. upper_triangular and max_squarings are accepted for JAX's signature
    (the squarings here are as many as the norm needs).

    >>> sl.scipy.linalg.expm(sl.tensor([[0.0, 1.0], [-1.0, 0.0]]))  # a rotation by 1 radian
    """
    return expm_p(_square_real(A, "expm"))


_ASSUME = ("gen", "sym", "her", "pos")


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Tensor:
    """x with a @ x = b, as jax.scipy.linalg.solve, by scanlib.linalg.solve (LU of the whole
    of a) for every assume_a, its gradient JAX's: with "pos", JAX factors one triangle of a
    (the upper, or the lower with lower=True) for the value and differentiates through the
    whole of a, as here, so for a symmetric a (the only one "pos" promises) the two agree.
    The overwrite and check flags are accepted and ignored, as in JAX.

    >>> sl.scipy.linalg.solve(sl.tensor([[4.0, 2.0], [2.0, 3.0]]), sl.tensor([1.0, 2.0]),
    ...                       assume_a="pos")
    """
    if assume_a not in _ASSUME:
        raise ValueError(f"scipy.linalg.solve: assume_a must be one of {_ASSUME}, got "
                         f"{assume_a!r}")
    return _linalg.solve(a, b)


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """(q, r) as jax.scipy.linalg.qr: mode "full" (q square), "economic" (q [m, k]), or "r"
    (a tuple (r,), SciPy's form). Pivoting and mode "raw" are not supported.

    >>> q, r = sl.scipy.linalg.qr(sl.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
    ...                           mode="economic")
    >>> r
    """
    if pivoting:
        raise NotImplementedError("scipy.linalg.qr: pivoting is not supported")
    modes = {"full": "complete", "economic": "reduced", "r": "r"}
    if mode not in modes:
        raise ValueError(f"scipy.linalg.qr: mode must be 'full', 'economic' or 'r', got "
                         f"{mode!r}")
    if mode == "r":
        return (_linalg.qr(a, mode="complete")[1],)
    return _linalg.qr(a, mode=modes[mode])


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    """(u, s, vh), or s alone with compute_uv=False, as jax.scipy.linalg.svd (that is,
    scanlib.linalg.svd with SciPy's arguments).

    >>> sl.scipy.linalg.svd(sl.tensor([[3.0, 0.0], [0.0, 4.0]]), compute_uv=False)
    """
    return _linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def block_diag(*arrs) -> Tensor:
    """The block-diagonal matrix of the given matrices (a 0-d or 1-d one counts as one row),
    zeros elsewhere, of their promoted dtype, as jax.scipy.linalg.block_diag.

    >>> sl.scipy.linalg.block_diag(sl.tensor([[1.0, 2.0]]), sl.tensor(3.0))
    """
    if not arrs:
        arrs = (as_tensor(np.zeros((1, 0))),)
    blocks = []
    for x in arrs:
        x = as_tensor(x)
        if x.ndim > 2:
            raise ValueError(f"scipy.linalg.block_diag: arguments must have at most 2 "
                             f"dimensions, got shape {x.shape}")
        blocks.append(x.reshape((1, -1)) if x.ndim < 2 else x)
    dtype = result_type(*blocks)
    cols = sum(int(x.shape[1]) for x in blocks)
    rows, start = [], 0
    for x in blocks:
        m, n = int(x.shape[0]), int(x.shape[1])
        left = as_tensor(np.zeros((m, start), dtype))
        right = as_tensor(np.zeros((m, cols - start - n), dtype))
        rows.append(concatenate([left, ew.astype(x, dtype=np.dtype(dtype)), right], axis=1))
        start += n
    return concatenate(rows, axis=0)


def toeplitz(c, r=None) -> Tensor:
    """The Toeplitz matrix with first column c and first row r (c[0] wins on the diagonal;
    r defaults to conj(c), a Hermitian matrix), as jax.scipy.linalg.toeplitz, of 1-d c and r.

    >>> sl.scipy.linalg.toeplitz(sl.tensor([1.0, 2.0, 3.0]), sl.tensor([1.0, 4.0]))
    """
    c = as_tensor(c)
    r = ew.conj(c) if r is None else as_tensor(r)
    if c.ndim != 1 or r.ndim != 1:
        raise ValueError(f"scipy.linalg.toeplitz: c and r must be 1-d, got shapes {c.shape} "
                         f"and {r.shape}")
    m, n = int(c.shape[0]), int(r.shape[0])
    dtype = np.dtype(result_type(c, r))
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    below = take(ew.astype(c, dtype=dtype), np.broadcast_to(np.maximum(i - j, 0), (m, n)))
    above = take(ew.astype(r, dtype=dtype), np.broadcast_to(np.maximum(j - i, 0), (m, n)))
    return where(np.asarray(i >= j), below, above)


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Tensor, Tensor]:
    """(lu, piv), the LU factorization with partial pivoting of a square a (or of each in a
    stack [..., n, n]), as jax.scipy.linalg.lu_factor: lu holds L's multipliers below the
    diagonal (L's diagonal is ones) and U on and above it; piv[j] (int32) is the row that
    step j swapped with row j, as LAPACK's getrf (0-based). Differentiable through lu, with
    JAX's rule. A singular a factors without an error, as in JAX (U has a zero on its
    diagonal). The flags are accepted and ignored.

    >>> lu, piv = sl.scipy.linalg.lu_factor(sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> lu, piv
    """
    lu_, pivots, _ = lu_p(_square_real(a, "scipy.linalg.lu_factor"))
    return lu_, pivots


def lu_solve(lu_and_piv: tuple[Any, Any], b, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Tensor:
    """x with a @ x = b (trans=0), a.T @ x = b (1 or 2: a is real) from lu_factor(a)'s
    (lu, piv), as jax.scipy.linalg.lu_solve. b is [n] or [n, k], or for a stack of
    factorizations [..., n] (one vector each) or [..., n, k].

    >>> a = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> sl.scipy.linalg.lu_solve(sl.scipy.linalg.lu_factor(a), sl.tensor([5.0, 6.0]))
    """
    who = "scipy.linalg.lu_solve"
    lu_, piv = lu_and_piv
    lu_ = _square_real(lu_, who)
    piv = as_tensor(piv)
    n = lu_.shape[-1]
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ValueError(f"{who}: trans must be 0, 1 or 2 ('N', 'T', 'C'), got {trans!r}")
    b = as_tensor(b)
    vector = b.ndim == 1
    if b.ndim < 1 or (b.shape[-1] if vector else b.shape[-2]) != n:
        raise ValueError(
            f"{who}: lu is {tuple(lu_.shape)}, so b must be [{n}] or [..., {n}, k], got shape "
            f"{tuple(b.shape)}. (A b of 2 or more axes is a stack of matrices, as in NumPy 2 "
            f"and JAX's coming rule; for a stack of vectors write lu_solve(lu_and_piv, "
            f"b[..., None])[..., 0].)")
    if vector:
        b = b[..., None]
    dtype = result_type(lu_, b)
    lu_, b = ew.astype(lu_, dtype=dtype), ew.astype(b, dtype=dtype)
    perm = lu_pivots_to_permutation_p(piv, n=n)
    if trans in (0, "N"):
        x = take_rows(b, perm)
        x = triangular_solve_p(lu_, x, lower=True, unit_diagonal=True)
        x = triangular_solve_p(lu_, x, lower=False, unit_diagonal=False)
    else:  # a[perm] = L U, so a.T = U.T L.T P: solve U.T, then L.T, then undo the rows
        x = triangular_solve_p(_mT(lu_), b, lower=True, unit_diagonal=False)
        x = triangular_solve_p(_mT(lu_), x, lower=False, unit_diagonal=True)
        x = take_rows(x, argsort(perm, axis=-1))
    return x[..., 0] if vector else x


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(p, l, u) with a = p @ l @ u, p a permutation matrix, l unit lower triangular and u
    upper triangular, for a square a (or each in a stack), as jax.scipy.linalg.lu; with
    permute_l, (p @ l, u). Differentiable through l and u, with JAX's rule.

    >>> p, l, u = sl.scipy.linalg.lu(sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> p, l, u
    """
    a = _square_real(a, "scipy.linalg.lu")
    lu_, _, perm = lu_p(a)
    n = a.shape[-1]
    l = ew.add(tril(lu_, -1), eye(n, dtype=lu_.dtype))
    u = triu(lu_)
    p = _mT(one_hot(perm, n, dtype=lu_.dtype))  # p[perm[i], i] = 1: a = p (a[perm])
    if permute_l:
        return matmul(p, l), u
    return p, l, u


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,
         check_finite: bool = True):
    """(w, v): the ascending eigenvalues and the eigenvectors of a symmetric a (w alone with
    eigvals_only), as jax.scipy.linalg.eigh: a symmetrized first, (a + a.T) / 2, as JAX's
    lax.linalg.eigh does by default, so `lower` changes nothing and the gradient is
    scanlib.linalg.eigh's. Only the standard problem: b, eigvals and type other than 1 raise
    NotImplementedError, as in JAX. Real only.

    >>> sl.scipy.linalg.eigh(sl.tensor([[2.0, 1.0], [1.0, 2.0]]), eigvals_only=True)
    """
    if b is not None:
        raise NotImplementedError("scipy.linalg.eigh: only the b=None case is implemented, "
                                  "as in JAX")
    if type != 1:
        raise NotImplementedError("scipy.linalg.eigh: only the type=1 case is implemented, "
                                  "as in JAX")
    if eigvals is not None:
        raise NotImplementedError("scipy.linalg.eigh: only the eigvals=None case is "
                                  "implemented, as in JAX")
    w, v = _linalg.eigh(a, UPLO="L" if lower else "U")
    return w if eigvals_only else (w, v)


def polar(a, side: str = "right", *, method: str = "qdwh", eps: Any = None,
          max_iterations: Any = None) -> tuple[Tensor, Tensor]:
    """The polar decomposition, as jax.scipy.linalg.polar: (u, p) with a = u p (side
    "right", m >= n: u [m, n] with orthonormal columns, p [n, n] symmetric positive
    semidefinite) or a = p u (side "left", m <= n: p [m, m]). Computed from the SVD whatever
    the method (JAX's "qdwh" and "svd" give the same factors); the derivative solves
    p dp + dp p = d(a^T a) in p's eigenbasis, defined where a has full rank. Real only.

    >>> u, p = sl.scipy.linalg.polar(sl.tensor([[2.0, 1.0], [0.0, 3.0]]))
    >>> u @ p
    """
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"polar: method must be 'qdwh' or 'svd', got {method!r}")
    a = as_tensor(a)
    if a.ndim < 2:
        raise ValueError(f"polar: a must be a matrix or a stack of them, got shape {a.shape}")
    if np.dtype(a.dtype).kind == "c":
        raise TypeError(f"polar: complex input ({a.dtype}) is not supported; scanlib's polar "
                        "is real.")
    if np.dtype(a.dtype).kind != "f":
        a = a.astype(result_type(a, 1.0))
    m, n = a.shape[-2:]
    if side == "right":
        if m < n:
            raise ValueError(f"polar: side='right' needs m >= n, got a of shape {a.shape}; "
                             "use side='left' for a wide matrix.")
        u, p = polar_p(a)
        return u, p
    if m > n:
        raise ValueError(f"polar: side='left' needs m <= n, got a of shape {a.shape}; use "
                         "side='right' for a tall matrix.")
    u, p = polar_p(_mT(a))
    return _mT(u), p
