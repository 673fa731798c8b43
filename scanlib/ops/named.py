"""jax.numpy's functions that had only an operator or no name here: the arithmetic and
comparison operators by name (add, less, power, ...), array and asarray with JAX's meaning
(differentiated through, stacking lists of tensors), isfinite, isclose, allclose, polyval,
and small compositions of the other ops (full_like, select, nansum, exp2, shape, ...).

Imports tape and ops.elementwise/functions/arrays/matrices/reductions/special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from . import reductions
from .arrays import moveaxis
from .functions import (as_inexact, as_tensor, broadcast_to, reshape, stack, sum, swapaxes,
                        tensor, transpose, where_mask, zeros)
from .matrices import eye, tensordot
from .promotion import result_type
from .special import isnan

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..tape.types import ArrayLike, DTypeLike

__all__ = [
    "array", "asarray", "add", "subtract", "multiply", "divide", "negative", "positive",
    "power", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "isfinite", "isclose", "allclose", "polyval", "astype", "copy", "full_like", "empty",
    "empty_like", "identity", "shape", "ndim", "size", "permute_dims", "matrix_transpose",
    "unstack", "broadcast_shapes", "broadcast_arrays", "select", "isposinf", "isneginf", "exp2",
    "deg2rad", "rad2deg", "nansum", "nanmean", "inner",
]

_NUMBER = (bool, int, float, complex)


def _operands(x, y):
    """x and y with at least one of them a Tensor; a Python number stays a number, so that it
    keeps its weak type (jnp.add(f32, 2.0) is float32), as it does with the operators."""
    if isinstance(x, Tensor) or isinstance(y, Tensor):
        return (x if isinstance(x, (Tensor, *_NUMBER)) else as_tensor(x),
                y if isinstance(y, (Tensor, *_NUMBER)) else as_tensor(y))
    if isinstance(x, _NUMBER) and not isinstance(y, _NUMBER):
        return x, as_tensor(y)
    return as_tensor(x), (y if isinstance(y, _NUMBER) else as_tensor(y))


def _binary(prim, name, doc):
    def op(x: ArrayLike, y: ArrayLike) -> Tensor:
        return prim(*_operands(x, y))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


add = _binary(ew.add, "add", """Elementwise x + y, as jnp.add (the `+` operator).

    >>> sl.add(sl.tensor([1.0, 2.0]), 3.0)
    """)
subtract = _binary(ew.sub, "subtract", """Elementwise x - y, as jnp.subtract.

    >>> sl.subtract(1.0, sl.tensor([1.0, 2.0]))
    """)
multiply = _binary(ew.mul, "multiply", """Elementwise x * y, as jnp.multiply.

    >>> sl.multiply(sl.tensor([1.0, 2.0]), sl.tensor([3.0, 4.0]))
    """)
divide = _binary(ew.div, "divide", """Elementwise x / y (true division: integers give
    float64), as jnp.divide.

    >>> sl.divide(sl.tensor([1, 2]), 4)
    """)
power = _binary(ew.power, "power", """Elementwise x ** y, as jnp.power, differentiable in both.

    >>> sl.grad(lambda x: sl.power(x, 3.0).sum())(sl.tensor([1.0, 2.0]))
    """)
equal = _binary(ew.equal, "equal", """Elementwise x == y (a bool tensor).

    >>> sl.equal(sl.tensor([1.0, 2.0]), 2.0)
    """)
not_equal = _binary(ew.not_equal, "not_equal", """Elementwise x != y (a bool tensor).

    >>> sl.not_equal(sl.tensor([1.0, 2.0]), 2.0)
    """)
less = _binary(ew.less, "less", """Elementwise x < y (a bool tensor).

    >>> sl.less(sl.tensor([1.0, 2.0]), 2.0)
    """)
less_equal = _binary(ew.less_equal, "less_equal", """Elementwise x <= y (a bool tensor).

    >>> sl.less_equal(sl.tensor([1.0, 2.0]), 2.0)
    """)
greater = _binary(ew.greater, "greater", """Elementwise x > y (a bool tensor).

    >>> sl.greater(sl.tensor([1.0, 2.0]), 1.0)
    """)
greater_equal = _binary(ew.greater_equal, "greater_equal", """Elementwise x >= y (a bool
    tensor).

    >>> sl.greater_equal(sl.tensor([1.0, 2.0]), 2.0)
    """)


def negative(x: ArrayLike) -> Tensor:
    """Elementwise -x, as jnp.negative.

    >>> sl.negative(sl.tensor([1.0, -2.0]))
    """
    return ew.neg(as_tensor(x))


def positive(x: ArrayLike) -> Tensor:
    """x itself (a Tensor), as jnp.positive and the unary `+`.

    >>> sl.positive(sl.tensor([1.0, -2.0]))
    """
    return as_tensor(x)


def isfinite(x: ArrayLike) -> Tensor:
    """Elementwise test for a finite number, neither inf nor nan (bool, not differentiable).

    >>> sl.isfinite(sl.tensor([1.0, np.inf, -np.inf, np.nan]))
    """
    return ew.isfinite(as_tensor(x))


# --- array and asarray ----------------------------------------------------------------------
def _holds_tensor(x):
    return isinstance(x, Tensor) or (isinstance(x, (list, tuple))
                                     and any(_holds_tensor(e) for e in x))


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for e in x:
            yield from _leaves(e)
    else:
        yield x


def _stacked(x, dtype):
    """A nested list holding tensors, each part cast to dtype and stacked, as jnp.array does:
    stacking is differentiable, so no part loses its gradient."""
    if isinstance(x, (list, tuple)):
        if not x:
            raise ValueError("array: an empty list beside tensors has no shape to stack with")
        return stack([_stacked(e, dtype) for e in x])
    x = x if isinstance(x, Tensor) else tensor(x)
    return x if x.dtype == dtype else ew.astype(x, dtype=dtype)


def _from_parts(obj, dtype):
    if isinstance(obj, Tensor):
        return obj if dtype is None or np.dtype(dtype) == obj.dtype else obj.astype(dtype)
    if isinstance(obj, (list, tuple)) and _holds_tensor(obj):
        leaves = list(_leaves(obj))
        if dtype is None:
            # JAX's promotion, Python numbers weak: [x_f32, 2.0] and [x_f32, i_int32] are float32
            dtype = result_type(*leaves)
        return _stacked(obj, np.dtype(dtype))
    out = tensor(obj, dtype=dtype)
    if dtype is None and type(obj) in (int, float, complex):
        out._weak = True  # as JAX's: beside a typed array it takes that array's dtype
    return out


def array(object: ArrayLike, dtype: DTypeLike = None, copy: bool = True,
          order: str | None = None, ndmin: int = 0) -> Tensor:
    """A Tensor of object, with jax.numpy.array's meaning: of a tensor being differentiated,
    the same value differentiated through (also inside scan bodies and under grad); a list
    holding tensors is stacked (differentiably, its Python numbers taking the tensors' dtype);
    dtype casts. NumPy data is copied. `scanlib.tensor(x)` is torch's constructor instead: a
    copy without gradient history.

    >>> sl.grad(lambda x: sl.sum(sl.array(x[0]) * x))(sl.tensor([3.0, 1.0]))
    >>> sl.array([sl.tensor(1.0), 2.0], dtype="float32")
    """
    if order not in (None, "K", "A", "C"):
        raise ValueError(f"array: order={order!r} is not supported; tensors are row-major "
                         "(C order). Leave order out.")
    del copy  # tensors are immutable and NumPy data is always copied: every copy is one
    out = _from_parts(object, dtype)
    if ndmin > out.ndim:
        out = reshape(out, (1,) * (ndmin - out.ndim) + tuple(out.shape))
    return out


def asarray(a: ArrayLike, dtype: DTypeLike = None, order: str | None = None,
            copy: bool | None = None) -> Tensor:
    """A Tensor of a, with jax.numpy.asarray's meaning: a tensor itself (differentiated
    through; cast when dtype differs), a list holding tensors stacked, other data copied
    into a new tensor (a later write into a NumPy array does not change it).

    >>> sl.asarray([[1, 2], [3, 4]], dtype="float32")
    """
    return array(a, dtype=dtype, copy=copy, order=order)


# --- closeness and polynomials --------------------------------------------------------------
def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """Elementwise |a - b| <= atol + rtol * |b|, as jnp.isclose: an infinity is close only to
    itself, nan to nothing (to nan with equal_nan=True); integers and bools compare as
    floats. A bool tensor, not differentiable.

    >>> sl.isclose(sl.tensor([1.0, 1.1, np.inf, np.nan]), [1.0 + 1e-9, 1.0, np.inf, np.nan])
    """
    a, b = _operands(a, b)
    a, b = (ew.stop_gradient(t) if isinstance(t, Tensor) else t for t in (a, b))
    dtype = result_type(a, b)
    if dtype.kind not in "fc":  # JAX's promote_args_inexact: integers compare as floats
        dtype = np.result_type(dtype, 1.0)
    a, b = (ew.astype(t, dtype=dtype) if isinstance(t, Tensor) and t.dtype != dtype
            else t if isinstance(t, Tensor) else tensor(t, dtype=dtype) for t in (a, b))
    with np.errstate(invalid="ignore"):  # inf - inf is nan, and not close: no warning
        in_range = ew.less_equal(ew.absolute(ew.sub(a, b)),
                                 ew.add(atol, ew.mul(rtol, ew.absolute(b))))
    out = ew.logical_or(ew.equal(a, b), ew.logical_and(ew.isfinite(b), in_range))
    if equal_nan:
        out = ew.logical_or(out, ew.logical_and(isnan(a), isnan(b)))
    return out


def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Tensor:
    """Whether every element of a is close to b's (isclose), as jnp.allclose: a 0-d bool
    tensor.

    >>> sl.allclose(sl.tensor([1.0, 2.0]), sl.tensor([1.0, 2.0 + 1e-9]))
    """
    return reductions.all(isclose(a, b, rtol, atol, equal_nan))


def polyval(p: ArrayLike, x: ArrayLike) -> Tensor:
    """The polynomial with coefficients p (highest power first, along p's first axis) at x, by
    Horner's rule, as jnp.polyval; a p of shape [M, ...] holds M coefficient arrays, which
    broadcast with x (so one call evaluates several polynomials). Differentiable in p and x
    (and again).

    >>> sl.polyval(sl.tensor([1.0, 0.0, -2.0]), sl.tensor([0.0, 2.0]))  # x**2 - 2
    """
    p = as_tensor(p)
    if p.ndim == 0:
        raise ValueError("polyval: p must be at least one-dimensional (the coefficients, highest "
                         "power first, along its first axis), got a 0-d value")
    if isinstance(x, _NUMBER):  # weak, as in JAX: polyval(p_f32, 3.0) is float32
        y = zeros(p.shape[1:], np.result_type(p.dtype, x), p.device)
    else:
        x = as_tensor(x)
        y = zeros(np.broadcast_shapes(p.shape[1:], x.shape),
                  np.result_type(p.dtype, x.dtype), x.device)
    for k in range(p.shape[0]):
        y = ew.add(ew.mul(y, x), p[k])
    return y


# --- more of jax.numpy's names, as compositions --------------------------------------------------
def astype(x: ArrayLike, dtype: DTypeLike) -> Tensor:
    """x converted to dtype, as jnp.astype and x.astype; differentiable (the gradient is cast
    back to x's dtype).

    >>> sl.astype(sl.tensor([1.5, 2.5]), "int32")
    """
    return as_tensor(x).astype(dtype)


def copy(a: ArrayLike) -> Tensor:
    """a as a tensor, as jnp.copy: of a tensor, the same value differentiated through (tensors
    are immutable, so it is a copy in every sense that matters); NumPy data is copied.

    >>> sl.copy(np.arange(3.0))
    """
    return array(a)


def full_like(a: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike = None,
              shape: Any = None) -> Tensor:
    """A tensor of a's shape and dtype (unless given) filled with fill_value, as jnp.full_like;
    differentiable in fill_value (a tensor fill broadcasts, as in JAX).

    >>> sl.full_like(sl.zeros((2, 2), dtype="float32"), 7.0)
    """
    a = as_tensor(a)
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    fill = array(fill_value, dtype=dtype)
    return broadcast_to(fill, a.shape if shape is None else shape)


def empty(shape: Any, dtype: DTypeLike = np.float64, device: Any = None) -> Tensor:
    """A tensor of zeros, as jnp.empty gives (no uninitialised memory).

    >>> sl.empty(2)
    """
    return zeros(shape, dtype, device)


def empty_like(a: ArrayLike, dtype: DTypeLike = None) -> Tensor:
    """Zeros of a's shape and dtype (unless given), as jnp.empty_like gives.

    >>> sl.empty_like(sl.ones(2, dtype="int32"))
    """
    a = as_tensor(a)
    return zeros(a.shape, a.dtype if dtype is None else dtype, a.device)


def identity(n: int, dtype: DTypeLike = np.float64) -> Tensor:
    """The n x n identity matrix, as jnp.identity.

    >>> sl.identity(2)
    """
    return eye(n, dtype=dtype)


def shape(a: ArrayLike) -> tuple:
    """a's shape, as jnp.shape (a list holding tensors is read as array would stack it).

    >>> sl.shape([[1.0, 2.0]])
    """
    return tuple(a.shape) if isinstance(a, Tensor) else tuple(array(a).shape)


def ndim(a: ArrayLike) -> int:
    """a's number of axes, as jnp.ndim.

    >>> sl.ndim(3.0)
    """
    return len(shape(a))


def size(a: ArrayLike) -> int:
    """a's number of elements, as jnp.size.

    >>> sl.size(sl.zeros((2, 3)))
    """
    return int(np.prod(shape(a), dtype=np.int64))


def permute_dims(a: ArrayLike, axes: Sequence[int]) -> Tensor:
    """a with its axes in the order axes, as jnp.permute_dims (the array API's transpose).

    >>> sl.permute_dims(sl.zeros((2, 3, 4)), (2, 0, 1)).shape
    """
    return transpose(a, tuple(axes))


def matrix_transpose(x: ArrayLike) -> Tensor:
    """x with its last two axes swapped, as jnp.matrix_transpose.

    >>> sl.matrix_transpose(sl.zeros((5, 2, 3))).shape
    """
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: needs at least 2 axes, got shape {x.shape}")
    return swapaxes(x, -1, -2)


def unstack(x: ArrayLike, axis: int = 0) -> tuple:
    """The slices of x along axis, as a tuple of tensors, as jnp.unstack (the inverse of stack).

    >>> sl.unstack(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1)
    """
    x = moveaxis(as_tensor(x), axis, 0)
    return tuple(x[i] for i in range(x.shape[0]))


def broadcast_shapes(*shapes: Any) -> tuple:
    """The shape that shapes broadcast to, as jnp.broadcast_shapes (NumPy's rule).

    >>> sl.broadcast_shapes((2, 1), (3,))
    """
    return tuple(np.broadcast_shapes(*shapes))


def broadcast_arrays(*args: ArrayLike) -> list:
    """The arguments broadcast to one shape (differentiable), as jnp.broadcast_arrays.

    >>> [t.shape for t in sl.broadcast_arrays(sl.zeros((2, 1)), sl.zeros(3))]
    """
    ts = [as_tensor(a) for a in args]
    common = np.broadcast_shapes(*[t.shape for t in ts])
    return [t if t.shape == common else broadcast_to(t, common) for t in ts]


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike],
           default: ArrayLike = 0) -> Tensor:
    """Elementwise the choice of the first true condition (default where none is), as
    jnp.select; the gradient flows only to the chosen values.

    >>> x = sl.tensor([-2.0, 0.5, 3.0])
    >>> sl.select([x < 0, x < 1], [-x, x * 10], x)
    """
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist has {len(condlist)} conditions but choicelist has "
                         f"{len(choicelist)} choices; give one choice per condition")
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        cond = as_tensor(cond)
        if cond.dtype != np.bool_:
            raise TypeError(f"select: conditions must be bool tensors, got {cond.dtype}; compare "
                            "(x > 0) to make one")
        out = ew.where(cond, choice, out)
    return out if isinstance(out, Tensor) else as_tensor(out)


def isposinf(x: ArrayLike) -> Tensor:
    """Elementwise x == +inf (bool, not differentiable), as jnp.isposinf.

    >>> sl.isposinf(sl.tensor([1.0, np.inf, -np.inf]))
    """
    return ew.equal(as_tensor(x), np.inf)


def isneginf(x: ArrayLike) -> Tensor:
    """Elementwise x == -inf (bool, not differentiable), as jnp.isneginf.

    >>> sl.isneginf(sl.tensor([1.0, np.inf, -np.inf]))
    """
    return ew.equal(as_tensor(x), -np.inf)


def exp2(x: ArrayLike) -> Tensor:
    """Elementwise 2 ** x, as jnp.exp2 (int32 computes in float32, int64 in float64).

    >>> sl.exp2(sl.tensor([0.0, 3.0, -1.0]))
    """
    return ew.power(2.0, as_inexact(x))


def deg2rad(x: ArrayLike) -> Tensor:
    """Degrees to radians, x * pi / 180, as jnp.deg2rad and jnp.radians.

    >>> sl.deg2rad(sl.tensor([180.0, 90.0]))
    """
    return ew.mul(as_inexact(x), np.pi / 180)


def rad2deg(x: ArrayLike) -> Tensor:
    """Radians to degrees, x * 180 / pi, as jnp.rad2deg and jnp.degrees.

    >>> sl.rad2deg(sl.tensor([np.pi, np.pi / 2]))
    """
    return ew.mul(as_inexact(x), 180 / np.pi)


def nansum(a: ArrayLike, axis: Any = None, keepdims: bool = False, *,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """Sum over axis with nan read as 0, as jnp.nansum (with its `initial` and `where`, as in
    sum); a nan element gets no gradient.

    >>> sl.nansum(sl.tensor([1.0, np.nan, 2.0]))
    """
    a = as_tensor(a)
    if a.dtype.kind in "fc":
        a = ew.where(isnan(a), 0, a)
    return sum(a, axis, keepdims, initial=initial, where=where)


def nanmean(a: ArrayLike, axis: Any = None, keepdims: bool = False, *,
            where: ArrayLike | None = None) -> Tensor:
    """Mean over axis of the elements that are not nan (and where the bool mask `where` is
    True), as jnp.nanmean (nan where there are none).

    >>> sl.nanmean(sl.tensor([1.0, np.nan, 2.0]))
    """
    a = as_inexact(a)
    present = ew.logical_not(isnan(a))
    if where is not None:
        present = ew.logical_and(present, where_mask(where, a, "nanmean"))
    count = sum(present, axis, keepdims)
    real = np.empty(0, a.dtype).real.dtype
    with np.errstate(invalid="ignore", divide="ignore"):
        return ew.div(nansum(a, axis, keepdims, where=present), ew.astype(count, dtype=real))


def inner(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The sum product over the last axes of a and b, as jnp.inner (a product for 0-d).

    >>> sl.inner(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), sl.tensor([1.0, 1.0]))
    """
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return ew.mul(a, b)
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 1]))
