"""jax.numpy's functions that had only an operator or no name here: the arithmetic and
comparison operators by name (add, less, power, ...), array and asarray with JAX's meaning
(differentiated through, stacking lists of tensors), isfinite, isclose, allclose, polyval.

Imports backends, tape and ops.elementwise/functions/structural/reductions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from . import reductions
from .functions import as_tensor, reshape, stack, tensor, zeros
from .special import isnan

if TYPE_CHECKING:
    from ..tape.types import ArrayLike, DTypeLike

__all__ = [
    "array", "asarray", "add", "subtract", "multiply", "divide", "negative", "positive",
    "power", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "isfinite", "isclose", "allclose", "polyval",
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
            # NumPy's promotion with Python numbers weak: [x_f32, 2.0] stays float32, as in JAX
            dtype = np.result_type(*[e.dtype if isinstance(e, (Tensor, np.ndarray, np.generic))
                                     else e for e in leaves])
        return _stacked(obj, np.dtype(dtype))
    return tensor(obj, dtype=dtype)


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
    dtype = np.result_type(*[t.dtype if isinstance(t, Tensor) else t for t in (a, b)])
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
    """The polynomial with coefficients p (highest power first) at x, by Horner's rule, as
    jnp.polyval; differentiable in p and x (and again).

    >>> sl.polyval(sl.tensor([1.0, 0.0, -2.0]), sl.tensor([0.0, 2.0]))  # x**2 - 2
    """
    p = as_tensor(p)
    if p.ndim != 1:
        raise ValueError(f"polyval: p must be one-dimensional (the coefficients, highest power "
                         f"first), got shape {p.shape}")
    if isinstance(x, _NUMBER):  # weak, as in JAX: polyval(p_f32, 3.0) is float32
        y = zeros((), np.result_type(p.dtype, x), p.device)
    else:
        x = as_tensor(x)
        y = zeros(x.shape, np.result_type(p.dtype, x.dtype), x.device)
    for k in range(p.shape[0]):
        y = ew.add(ew.mul(y, x), p[k])
    return y
