"""scanlib.linalg: differentiable linear algebra as jax.numpy.linalg and jax.scipy.linalg
spell it (solve, inv, cholesky, solve_triangular, cho_solve, slogdet, det, eigh, qr, norm,
matrix_power), batched over leading axes, on NumPy and CuPy data, to second order.

Gradients follow JAX's: cholesky and eigh symmetrize their input, complex matrices use plain
transposes (no conjugate) for holomorphic ops. On NumPy a singular (for cholesky, not
positive definite) matrix raises LinAlgError; CuPy does not check, and gives inf or nan.
The primitives and their VJPs live in ops/decompositions.py (norm in ops/matrices.py); this
module is the public namespace, with the array API's few compositions of them (diagonal,
trace, matrix_transpose, outer, eigvalsh, multi_dot over the last two axes). Imports ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ops import matmul
from .ops import diagonal as _diagonal
from .ops import matrix_transpose
from .ops import outer as _outer
from .ops import sum as _sum
from .ops.decompositions import (cho_solve, cholesky, det, eigh, inv, matrix_power, qr, slogdet,
                                 solve, solve_triangular)
from .ops.functions import as_tensor
from .ops.matrices import norm

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .tape import Tensor
    from .tape.types import ArrayLike

__all__ = ["solve", "inv", "cholesky", "solve_triangular", "cho_solve", "slogdet", "det", "eigh",
           "qr", "norm", "matrix_power", "diagonal", "trace", "matrix_transpose", "outer",
           "eigvalsh", "multi_dot"]


def diagonal(x: ArrayLike, *, offset: int = 0) -> Tensor:
    """The offset-th diagonal of each matrix in x (its last two axes), as jnp.linalg.diagonal
    (scanlib.diagonal, NumPy's, takes the first two axes by default).

    >>> sl.linalg.diagonal(sl.ones((4, 2, 3))).shape
    """
    return _diagonal(x, offset, -2, -1)


def trace(x: ArrayLike, *, offset: int = 0) -> Tensor:
    """The sum of the offset-th diagonal of each matrix in x (its last two axes), as
    jnp.linalg.trace.

    >>> sl.linalg.trace(sl.tensor([[[1.0, 2.0], [3.0, 4.0]]]))
    """
    return _sum(diagonal(x, offset=offset), -1)


def outer(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The outer product of two vectors, as jnp.linalg.outer (which takes 1-d operands only).

    >>> sl.linalg.outer(sl.tensor([1.0, 2.0]), sl.tensor([1.0, 10.0]))
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer: takes two 1-d vectors, got shapes {x1.shape} and "
                         f"{x2.shape}; scanlib.outer flattens its operands, as numpy.outer")
    return _outer(x1, x2)


def eigvalsh(a: ArrayLike, UPLO: str = "L") -> Tensor:  # noqa: N803 - NumPy's name
    """The eigenvalues of each symmetric (Hermitian) matrix in a, ascending, as
    jnp.linalg.eigvalsh; differentiable (eigh's rule).

    >>> sl.linalg.eigvalsh(sl.tensor([[2.0, 1.0], [1.0, 2.0]]))
    """
    return eigh(a, UPLO)[0]


def multi_dot(arrays: Sequence[ArrayLike]) -> Tensor:
    """The matrix product of arrays, left to right (the first may be 1-d, as may the last), as
    jnp.linalg.multi_dot; the same product in another association order, so equal up to
    rounding.

    >>> sl.linalg.multi_dot([sl.ones(2), sl.ones((2, 3)), sl.ones(3)])
    """
    arrays = [as_tensor(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError(f"linalg.multi_dot: needs at least 2 arrays, got {len(arrays)}")
    out = arrays[0]
    for a in arrays[1:]:
        out = matmul(out, a)
    return out
