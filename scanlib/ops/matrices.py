"""Matrix functions as NumPy names them (eye, diag, diagonal, trace, outer, tril, triu, kron,
tensordot, dot), and norm (public as scanlib.linalg.norm): composites of indexing, where with a
constant mask, reshape, einsum and reductions, so they need no VJP rule of their own.

Imports backends, tape and the ops below it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import operator

import numpy as np

from .. import backends
from . import elementwise as ew
from . import functions as F
from .structural import getitem, scatter_add_p, split_index

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any
    from ..tape import Tensor
    from ..tape.types import ArrayLike, DTypeLike, Device

__all__ = ["eye", "diag", "diagonal", "trace", "outer", "tril", "triu", "kron", "tensordot",
           "dot"]


def _int(value, who, what):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{who}: {what} must be an int, got {value!r}") from None


def constant(x, make):
    """make(xp) computed on x's device: masks and identities that follow the data."""
    with backends.on_device(x.device):
        return make(backends.namespace(x.device))


def zero_like(dtype):
    """The Python zero that keeps dtype in `where(mask, x, zero)` (0.0 would make ints
    float64, 0 would make bools int64)."""
    kind = np.dtype(dtype).kind
    return False if kind == "b" else 0 if kind in "iu" else 0.0


# --- creation and diagonals -----------------------------------------------------------------
def eye(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike = np.float64,
        device: Device | None = None) -> Tensor:
    """A 2-d tensor with ones on the k-th diagonal and zeros elsewhere, as numpy.eye.

    >>> sl.eye(2, 3, k=1)
    """
    N = _int(N, "eye", "N")
    M = N if M is None else _int(M, "eye", "M")
    return F.make_array("eye", None, dtype, device, N, M, _int(k, "eye", "k"))


def _diagonal_indices(n_rows, n_cols, offset):
    """Row and column indices of the offset-th diagonal of an [n_rows, n_cols] matrix."""
    row0, col0 = max(-offset, 0), max(offset, 0)
    length = max(0, min(n_rows - row0, n_cols - col0))
    return np.arange(length) + row0, np.arange(length) + col0


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The offset-th diagonal of a over axis1 and axis2, as a last axis (numpy.diagonal).

    >>> sl.diagonal(sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    a = F.as_tensor(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: needs at least 2 axes, got shape {a.shape}")
    ax1, ax2 = (F.one_axis(ax, a.ndim, "diagonal") for ax in (axis1, axis2))
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 name one axis ({axis1}, {axis2}); give two "
                         "different axes")
    rest = [i for i in range(a.ndim) if i not in (ax1, ax2)]
    moved = F.transpose(a, tuple(rest) + (ax1, ax2))
    rows, cols = _diagonal_indices(a.shape[ax1], a.shape[ax2], _int(offset, "diagonal",
                                                                    "offset"))
    return getitem(moved, (Ellipsis, rows, cols))


def diag(v: ArrayLike, k: int = 0) -> Tensor:
    """A matrix with v on its k-th diagonal for 1-d v; the k-th diagonal for 2-d v (numpy.diag).

    >>> sl.diag(sl.tensor([1.0, 2.0]))
    """
    v = F.as_tensor(v)
    k = _int(k, "diag", "k")
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: input must be 1-d (to make a matrix) or 2-d (to take its "
                         f"diagonal), got shape {v.shape}; use diagonal() for more axes")
    n = v.shape[0] + abs(k)
    template, arrays = split_index(_diagonal_indices(n, n, k))
    arrays = [backends.to_device(i, v.device) for i in arrays]
    return scatter_add_p(v, *arrays, index=template, shape=(n, n))


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """Sum of the offset-th diagonal over axis1 and axis2, as numpy.trace.

    >>> sl.trace(sl.eye(3))
    """
    return F.sum(diagonal(a, offset, axis1, axis2), axis=-1)


def _triangle(m, k, who, lower):
    m = F.as_tensor(m)
    if m.ndim < 2:
        raise ValueError(f"{who}: needs at least 2 axes ([..., M, N]), got shape {m.shape}")
    n_rows, n_cols = m.shape[-2:]
    k = _int(k, who, "k")
    if lower:
        mask = constant(m, lambda xp: xp.tri(n_rows, n_cols, k, dtype=bool))
    else:
        mask = constant(m, lambda xp: ~xp.tri(n_rows, n_cols, k - 1, dtype=bool))
    return ew.where(mask, m, zero_like(m.dtype))


def tril(m: ArrayLike, k: int = 0) -> Tensor:
    """m with the elements above its k-th diagonal zeroed (last two axes), as numpy.tril.

    >>> sl.tril(sl.ones((3, 3)))
    """
    return _triangle(m, k, "tril", lower=True)


def triu(m: ArrayLike, k: int = 0) -> Tensor:
    """m with the elements below its k-th diagonal zeroed (last two axes), as numpy.triu.

    >>> sl.triu(sl.ones((3, 3)), k=1)
    """
    return _triangle(m, k, "triu", lower=False)


# --- products -------------------------------------------------------------------------------
def outer(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The outer product of a and b, flattened first, as numpy.outer.

    >>> sl.outer(sl.tensor([1.0, 2.0]), sl.tensor([1.0, 10.0, 100.0]))
    """
    a, b = F.reshape(a, -1), F.reshape(b, -1)
    return ew.mul(F.reshape(a, (a.shape[0], 1)), F.reshape(b, (1, b.shape[0])))


def kron(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The Kronecker product: blocks a[i, j] * b, for any number of axes, as numpy.kron.

    >>> sl.kron(sl.eye(2), sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    a, b = F.as_tensor(a), F.as_tensor(b)
    ndim = max(a.ndim, b.ndim)
    a_shape = (1,) * (ndim - a.ndim) + a.shape
    b_shape = (1,) * (ndim - b.ndim) + b.shape
    # a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...] is [a0, b0, a1, b1, ...]
    a_spread = F.reshape(a, tuple(s for d in a_shape for s in (d, 1)))
    b_spread = F.reshape(b, tuple(s for d in b_shape for s in (1, d)))
    return F.reshape(ew.mul(a_spread, b_spread),
                     tuple(p * q for p, q in zip(a_shape, b_shape)))


def _axes_list(axes, ndim, who):
    """A sequence (or one int) of axes, in the order given, checked and made non-negative."""
    axes = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    out = []
    for ax in axes:
        ax = _int(ax, who, "each axis")
        if not -ndim <= ax < ndim:
            raise ValueError(f"{who}: axis {ax} is out of range for an operand with {ndim} axes")
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{who}: axes {axes} name an axis twice")
    return out


def _tensordot_axes(a, b, axes):
    if isinstance(axes, (int, np.integer)):
        n = _int(axes, "tensordot", "axes")
        if n < 0 or n > a.ndim or n > b.ndim:
            raise ValueError(f"tensordot: axes={n} must be between 0 and the operands' numbers of "
                             f"axes ({a.ndim} and {b.ndim})")
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    try:
        a_axes, b_axes = axes
    except (TypeError, ValueError):
        raise TypeError(f"tensordot: axes must be an int or a pair of axis sequences, got "
                        f"{axes!r}") from None
    a_axes = _axes_list(a_axes, a.ndim, "tensordot")
    b_axes = _axes_list(b_axes, b.ndim, "tensordot")
    if len(a_axes) != len(b_axes):
        raise ValueError(f"tensordot: {len(a_axes)} axes of the first operand paired with "
                         f"{len(b_axes)} of the second ({axes!r}); give as many of each")
    return a_axes, b_axes


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[Any] = 2) -> Tensor:
    """Sum of products over the given axes of a and b, as numpy.tensordot.

    axes is an int (the last `axes` axes of a with the first of b) or a pair of sequences.

    >>> sl.tensordot(sl.ones((2, 3, 4)), sl.ones((3, 4, 5)), axes=2).shape
    """
    a, b = F.as_tensor(a), F.as_tensor(b)
    a_axes, b_axes = _tensordot_axes(a, b, axes)
    for i, j in zip(a_axes, b_axes):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: shapes {a.shape} and {b.shape} do not match along the "
                             f"summed axes: axis {i} of the first has length {a.shape[i]}, axis "
                             f"{j} of the second {b.shape[j]}")
    if a.ndim + b.ndim - len(a_axes) > len(_LETTERS):
        raise ValueError(f"tensordot: operands of {a.ndim} and {b.ndim} axes are more than "
                         "scanlib's einsum can name; reshape them first")
    a_sub = _LETTERS[:a.ndim]
    fresh = iter(_LETTERS[a.ndim:])
    b_sub = [a_sub[a_axes[b_axes.index(j)]] if j in b_axes else next(fresh)
             for j in range(b.ndim)]
    out = [c for i, c in enumerate(a_sub) if i not in a_axes]
    out += [c for j, c in enumerate(b_sub) if j not in b_axes]
    return F.einsum(f"{a_sub},{''.join(b_sub)}->{''.join(out)}", a, b)


def dot(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The dot product with NumPy's rule for any number of axes, as numpy.dot.

    A product for 0-d operands, matmul for 1-d and 2-d, else a sum over a's last axis and b's
    second-to-last (its only one for 1-d b).

    >>> sl.dot(sl.ones((2, 3, 4)), sl.ones((5, 4, 6))).shape
    """
    a, b = F.as_tensor(a), F.as_tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return ew.mul(a, b)
    b_axis = max(b.ndim - 2, 0)
    if a.shape[-1] != b.shape[b_axis]:
        raise ValueError(f"dot: shapes {a.shape} and {b.shape} are not aligned: the last axis of "
                         f"the first ({a.shape[-1]}) must equal axis {b_axis} of the second "
                         f"({b.shape[b_axis]})")
    if a.ndim <= 2 and b.ndim <= 2:
        return F.matmul(a, b)
    return tensordot(a, b, axes=([a.ndim - 1], [b_axis]))


# --- norms (public as scanlib.linalg.norm) --------------------------------------------------
def _sqrt_at_zero_is_zero(s):
    """sqrt(s) whose gradient at s = 0 is 0 (a subgradient of the norm at 0), not inf * 0."""
    positive = ew.greater(s, 0)
    return ew.where(positive, ew.sqrt(ew.where(positive, s, 1.0)), 0.0)


def _abs_squared(x):
    return ew.mul(x, x) if np.dtype(x.dtype).kind != "c" else ew.real(ew.mul(x, ew.conj(x)))


def _vector_norm(x, ord, axes):
    if ord is None or ord == 2:
        return _sqrt_at_zero_is_zero(F.sum(_abs_squared(x), axis=axes, keepdims=True))
    if isinstance(ord, str):
        raise ValueError(f"norm: ord={ord!r} is a matrix norm; a vector norm takes a number "
                         "(None, 2, 1, inf, -inf, 0 or any p)")
    if ord == np.inf:
        if all(x.shape[a] == 0 for a in axes):  # NumPy's inf-norm of nothing is 0
            return F.sum(ew.absolute(x), axis=axes, keepdims=True)
        return F.max(ew.absolute(x), axis=axes, keepdims=True)
    if ord == -np.inf:
        return F.min(ew.absolute(x), axis=axes, keepdims=True)
    if ord == 0:  # the count of nonzeros, as NumPy: no gradient
        real = np.zeros((), x.dtype).real.dtype
        return F.sum(ew.astype(ew.not_equal(x, 0), dtype=real), axis=axes, keepdims=True)
    if ord == 1:
        return F.sum(ew.absolute(x), axis=axes, keepdims=True)
    p = float(ord)
    return ew.power(F.sum(ew.power(ew.absolute(x), p), axis=axes, keepdims=True), 1.0 / p)


def _matrix_norm(x, ord, rows, cols):
    if ord is None or ord == "fro":
        return _sqrt_at_zero_is_zero(F.sum(_abs_squared(x), axis=(rows, cols), keepdims=True))
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x|; inf: the largest row sum (min for -1, -inf)
        summed, other = (rows, cols) if ord in (1, -1) else (cols, rows)
        pick = F.max if ord > 0 else F.min
        return pick(F.sum(ew.absolute(x), axis=summed, keepdims=True), axis=other,
                    keepdims=True)
    if ord in ("nuc", 2, -2):
        from .spectral import svdvals  # spectral's cond imports this module

        rest = [i for i in range(x.ndim) if i not in (rows, cols)]
        s = svdvals(F.transpose(x, tuple(rest) + (rows, cols)))
        out = F.sum(s, axis=-1) if ord == "nuc" else (F.max if ord == 2 else F.min)(s, axis=-1)
        return F.reshape(out, tuple(1 if i in (rows, cols) else d for i, d in enumerate(x.shape)))
    raise ValueError(f"norm: invalid order {ord!r} for a matrix norm; use None, 'fro', 1, -1, "
                     "inf or -inf")


def norm(x, ord=None, axis=None, keepdims=False):
    """A vector or matrix norm, as numpy.linalg.norm.

    Vector norms of any order, and the Frobenius, nuclear, 1, -1, 2, -2, inf and -inf matrix
    norms (the nuclear and 2-norms from svd's singular values). Integers are taken as floats
    (float32 for int32, as in JAX). The gradient of a 2-norm (or Frobenius norm) at 0 is 0, a
    subgradient.

    >>> sl.linalg.norm(sl.tensor([3.0, 4.0]))
    """
    x = F.as_inexact(x)
    if axis is None:
        if ord is None:
            out = _sqrt_at_zero_is_zero(F.sum(_abs_squared(x), axis=None, keepdims=True))
            return out if keepdims else F.reshape(out, ())
        if x.ndim not in (1, 2):
            raise ValueError(f"norm: ord={ord!r} with axis=None needs a 1-d or 2-d input, got "
                             f"shape {x.shape}; name the axis (or axes) to take the norm over")
        axis = tuple(range(x.ndim))
    axes = tuple(_axes_list(axis, x.ndim, "norm"))
    if len(axes) == 1:
        out = _vector_norm(x, ord, axes)
    elif len(axes) == 2:
        out = _matrix_norm(x, ord, *axes)
    else:
        raise ValueError(f"norm: axis={axis!r} names {len(axes)} axes; give one (a vector norm) "
                         "or two (a matrix norm)")
    return out if keepdims else F.squeeze(out, axis=axes)


# NumPy functions (np.f called on a Tensor, NEP 18) and ufuncs that run these ops; each
# callable takes NumPy's parameter names (numpy_interop refuses other keywords). np.eye makes
# no tensor from one, so it has no entry; np.dot's here replaces numpy_interop's 2-d one.
NUMPY_FUNCTIONS: dict = {
    np.diag: diag,
    np.diagonal: diagonal,
    np.trace: trace,
    np.outer: outer,
    np.tril: tril,
    np.triu: triu,
    np.kron: kron,
    np.tensordot: tensordot,
    np.dot: dot,
}
# NumPy 2's array-API spellings in np.linalg: the same functions over the last two axes.
def _np_vector_norm(x, axis=None, keepdims=False, ord=2):
    x = F.as_tensor(x)
    if axis is not None:
        return norm(x, ord, axis, keepdims)
    out = norm(F.reshape(x, -1), ord)  # every element, as one vector
    return F.reshape(out, (1,) * x.ndim) if keepdims else out


def _np_trace(x, offset=0, dtype=None):
    out = trace(x, offset, -2, -1)
    return out if dtype is None else ew.astype(out, dtype=np.dtype(dtype))


NUMPY_FUNCTIONS.update({
    np.linalg.matmul: lambda x1, x2: F.matmul(x1, x2),
    np.linalg.outer: lambda x1, x2: outer(x1, x2),
    np.linalg.diagonal: lambda x, offset=0: diagonal(x, offset, -2, -1),
    np.linalg.trace: _np_trace,
    np.linalg.tensordot: lambda x1, x2, axes=2: tensordot(x1, x2, axes),
    np.linalg.matrix_transpose: lambda x: F.swapaxes(x, -1, -2),
    np.linalg.vector_norm: _np_vector_norm,
    np.linalg.matrix_norm: lambda x, keepdims=False, ord="fro": norm(x, ord, (-2, -1),
                                                                      keepdims),
} if hasattr(np.linalg, "matrix_norm") else {})
NUMPY_UFUNCS: dict = {}
