"""scanlib.linalg: differentiable linear algebra as jax.numpy.linalg and jax.scipy.linalg
spell it (solve, inv, cholesky, solve_triangular, cho_solve, slogdet, det, eigh, qr, norm,
matrix_power), batched over leading axes, on NumPy and CuPy data, to second order.

Gradients follow JAX's: cholesky and eigh symmetrize their input, complex matrices use plain
transposes (no conjugate) for holomorphic ops. On NumPy a singular (for cholesky, not
positive definite) matrix raises LinAlgError; CuPy does not check, and gives inf or nan.
The primitives and their VJPs live in ops/decompositions.py (norm in ops/matrices.py); this
module is the public namespace. Imports ops.
"""

from __future__ import annotations

from .ops.decompositions import (cho_solve, cholesky, det, eigh, inv, matrix_power, qr, slogdet,
                                 solve, solve_triangular)
from .ops.matrices import norm

__all__ = ["solve", "inv", "cholesky", "solve_triangular", "cho_solve", "slogdet", "det", "eigh",
           "qr", "norm", "matrix_power"]
