"""scanlib.linalg: differentiable linear algebra as jax.numpy.linalg and jax.scipy.linalg
spell it (solve, inv, cholesky, solve_triangular, cho_solve, slogdet, det, eigh, qr, norm,
matrix_power, svd, pinv, lstsq, eig, ...), batched over leading axes, on NumPy and CuPy data,
to second order.

Gradients follow JAX's: cholesky and eigh symmetrize their input, complex matrices use plain
transposes (no conjugate) for holomorphic ops. On NumPy a singular (for cholesky, not
positive definite) matrix raises LinAlgError; CuPy does not check, and gives inf or nan.
The primitives and their VJPs live in ops/decompositions.py, ops/spectral.py (svd, pinv, eig)
and ops/matrices.py (norm); this module is the public namespace, with the array API's
compositions of them (diagonal, trace, outer, eigvalsh, multi_dot, vector_norm, matrix_norm,
cross, vecdot, tensorsolve, tensorinv). Imports ops.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

from .ops import broadcast_arrays, conj, matmul, moveaxis, reshape, stack, transpose
from .ops import diagonal as _diagonal
from .ops import matrix_transpose
from .ops import outer as _outer
from .ops import sum as _sum
from .ops.decompositions import (cho_solve, cholesky, det, eigh, inv, matrix_power, qr, slogdet,
                                 solve, solve_triangular)
from .ops.functions import as_tensor
from .ops.matrices import norm
from .ops.spectral import cond, eig, eigvals, lstsq, matrix_rank, pinv, svd, svdvals

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .tape import Tensor
    from .tape.types import ArrayLike

__all__ = ["solve", "inv", "cholesky", "solve_triangular", "cho_solve", "slogdet", "det", "eigh",
           "qr", "norm", "matrix_power", "diagonal", "trace", "matrix_transpose", "outer",
           "eigvalsh", "multi_dot", "svd", "svdvals", "pinv", "lstsq", "matrix_rank", "cond",
           "eig", "eigvals", "vector_norm", "matrix_norm", "cross", "vecdot", "tensorsolve",
           "tensorinv"]


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


def vector_norm(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None,
                keepdims: bool = False, ord: float = 2) -> Tensor:
    """The ord-norm of x's elements along axis (every axis by default, as one vector, also for
    a tuple of axes), as jnp.linalg.vector_norm.

    >>> sl.linalg.vector_norm(sl.tensor([[3.0, 0.0], [0.0, 4.0]]))
    """
    x = as_tensor(x)
    axes = tuple(range(x.ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis
    axes = tuple(sorted(operator.index(a) % max(x.ndim, 1) for a in axes))
    rest = [i for i in range(x.ndim) if i not in axes]
    flat = reshape(transpose(x, tuple(rest) + axes),
                   tuple(x.shape[i] for i in rest) + (math.prod(x.shape[i] for i in axes),))
    out = norm(flat, ord, -1)
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: str | float = "fro") -> Tensor:
    """The ord-norm of each matrix in x (its last two axes), as jnp.linalg.matrix_norm:
    'fro', 'nuc', 1, -1, 2, -2, inf or -inf.

    >>> sl.linalg.matrix_norm(sl.tensor([[3.0, 0.0], [0.0, 4.0]]), ord=2)
    """
    return norm(x, ord, (-2, -1), keepdims)


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Tensor:
    """The cross product of 3-vectors along axis (the operands broadcast), as
    jnp.linalg.cross.

    >>> sl.linalg.cross(sl.tensor([1.0, 0.0, 0.0]), sl.tensor([0.0, 1.0, 0.0]))
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    if x1.ndim == 0 or x2.ndim == 0 or x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"linalg.cross: both operands must be 3-vectors along axis {axis}, "
                         f"got shapes {x1.shape} and {x2.shape}")
    a, b = (moveaxis(t, axis, -1) for t in broadcast_arrays(x1, x2))
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    out = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return moveaxis(out, -1, axis)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Tensor:
    """The dot product of vectors along axis, conj(x1) . x2 (the operands broadcast), as
    jnp.linalg.vecdot.

    >>> sl.linalg.vecdot(sl.tensor([[1.0, 2.0]]), sl.tensor([3.0, 4.0]))
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    if x1.ndim == 0 or x2.ndim == 0 or x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"linalg.vecdot: the operands' axis {axis} must have one length, got "
                         f"shapes {x1.shape} and {x2.shape}")
    return _sum(conj(x1) * x2, axis)


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: tuple[int, ...] | None = None) -> Tensor:
    """x with tensordot(a, x, x.ndim) = b, as jnp.linalg.tensorsolve (axes of a moved to the
    end first).

    >>> sl.linalg.tensorsolve(2.0 * sl.eye(4).reshape(2, 2, 2, 2), sl.ones((2, 2)))
    """
    a, b = as_tensor(a), as_tensor(b)
    if axes is not None:
        moved = [operator.index(k) % a.ndim for k in axes]
        a = transpose(a, tuple(i for i in range(a.ndim) if i not in moved) + tuple(moved))
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape or b.size != math.prod(out_shape):
        raise ValueError(f"tensorsolve: a's leading axes must be b's shape {b.shape} and the "
                         f"rest hold as many elements, got a of shape {a.shape}")
    return reshape(solve(reshape(a, (b.size, math.prod(out_shape))), reshape(b, (-1,))),
                   out_shape)


def tensorinv(a: ArrayLike, ind: int = 2) -> Tensor:
    """The inverse of a as a linear map from its first ind axes to the rest, as
    jnp.linalg.tensorinv.

    >>> sl.linalg.tensorinv(sl.eye(4).reshape(4, 2, 2), ind=1).shape
    """
    a = as_tensor(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    left, right = a.shape[:ind], a.shape[ind:]
    if math.prod(left) != math.prod(right):
        raise ValueError(f"tensorinv: the first {ind} axes of a {a.shape} must hold as many "
                         "elements as the rest")
    return reshape(inv(reshape(a, (math.prod(left), math.prod(right)))), right + left)
