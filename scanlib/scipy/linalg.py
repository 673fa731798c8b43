"""scanlib.scipy.linalg: jax.scipy.linalg's names and meanings. Its cholesky and cho_factor
give the UPPER factor by default (lower=False), as SciPy and JAX do, where scanlib.linalg's
cholesky (jax.numpy.linalg's) gives the lower one: a port keeps each meaning by keeping its
module. solve_triangular, cho_solve, inv and det are scanlib.linalg's own; expm is the
primitive of ops/expm.py. Imports linalg."""

from __future__ import annotations

from ..linalg import cho_solve, det, inv, solve_triangular
import numpy as np

from ..ops import elementwise as ew
from ..ops.decompositions import cholesky_unsymmetrized_p
from ..ops.expm import expm_p
from ..ops.functions import as_tensor, swapaxes
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

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "expm", "inv", "det"]


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
