"""jax.lax's elementwise functions whose meaning NumPy's names do not share: lax.round (halves
away from zero), div and rem (C's, with XLA's results where C leaves them undefined),
clamp (JAX's gradients at ties), select_n, integer_pow and the bit operations (shifts past
the bit width, population_count, clz). Composed from scanlib's differentiable ops; public
only through scanlib.lax.

Imports backends, tape and the public modules of ops.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .functions import as_tensor, broadcast_to, sign, where
from .laxfuncs import RoundingMethod, constant, need_int
from .mathfuncs import bitwise_count, left_shift, right_shift
from .named import astype, equal, greater, less, not_equal
from .special import bitwise_or, floor_divide, fmod, round as np_round, trunc

if TYPE_CHECKING:
    from ..tape.types import ArrayLike


# --- elementwise ---------------------------------------------------------------------------
def _is_int(x):
    return np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_


def _pair(x, y):
    x, y = as_tensor(x), as_tensor(y)
    return x, y


def integer_pow(x: ArrayLike, y: int) -> Tensor:
    """lax.integer_pow: x ** y for a static integer y, in x's dtype.

    >>> sl.lax.integer_pow(sl.tensor([2.0, -3.0]), 3)
    """
    return ew.power(as_tensor(x), operator.index(y))


def optimization_barrier(operand: Any) -> Any:
    """lax.optimization_barrier: the operand (a pytree) itself; scanlib does not reorder.

    >>> sl.lax.optimization_barrier((sl.ones(2), sl.zeros(1)))
    """
    return operand


def _divisor(x, y):
    """y with the divisions C leaves undefined (by 0, and MIN by -1) replaced by 1."""
    bad = equal(y, constant(0, y.dtype, y))
    if np.issubdtype(y.dtype, np.signedinteger):
        bad = ew.logical_or(bad, equal(y, constant(-1, y.dtype, y)))
    return where(bad, constant(1, y.dtype, y), y)


def div(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.div: x / y, integers rounded toward zero (C's division: div(-7, 2) is -3); as
    XLA's, an integer divided by 0 gives -1 (all bits set) and MIN / -1 gives MIN.

    >>> sl.lax.div(sl.tensor([-7, 7]), sl.tensor([2, 2]))   # toward zero: [-3, 3]
    """
    x, y = _pair(x, y)
    if not (_is_int(x) and _is_int(y)):
        return ew.div(x, y)
    d = _divisor(x, y)
    q = floor_divide(x, d)
    inexact = not_equal(ew.sub(x, ew.mul(q, d)), constant(0, q.dtype, q))
    q = where(ew.logical_and(inexact, not_equal(less(x, 0), less(d, 0))),
              ew.add(q, constant(1, q.dtype, q)), q)
    if np.issubdtype(y.dtype, np.signedinteger):
        q = where(equal(y, constant(-1, y.dtype, y)), ew.sub(constant(0, x.dtype, x), x), q)
    return where(equal(y, constant(0, y.dtype, y)), constant(-1, q.dtype, q), q)


def rem(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.rem: C's remainder x - y * div(x, y), with the sign of x (as numpy.fmod); as
    XLA's, an integer remainder by 0 is x.

    >>> sl.lax.rem(sl.tensor([-7, 7]), sl.tensor([2, 2]))   # [-1, 1]
    """
    x, y = _pair(x, y)
    if not (_is_int(x) and _is_int(y)):
        return fmod(x, y)
    r = fmod(x, _divisor(x, y))
    if np.issubdtype(y.dtype, np.signedinteger):
        r = where(equal(y, constant(-1, y.dtype, y)), constant(0, r.dtype, r), r)
    return where(equal(y, constant(0, y.dtype, y)), x, r)


def lax_round(x: ArrayLike, rounding_method: int | RoundingMethod = 0) -> Tensor:
    """lax.round: to the nearest integer, halves away from zero (JAX's default, 2.5 -> 3) or
    to even with rounding_method=TO_NEAREST_EVEN (2.5 -> 2, as NumPy); gradient zero.

    >>> sl.lax.round(sl.tensor([0.5, 1.5, 2.5, -2.5]))   # [1, 2, 3, -3]
    """
    x = as_tensor(x)
    method = RoundingMethod(int(rounding_method))
    if method == RoundingMethod.TO_NEAREST_EVEN:
        return np_round(x)
    t = trunc(x)
    finite = where(ew.isfinite(x), x, constant(0, x.dtype, x))
    # finite - trunc(finite) is exact, so no rounding of x + 0.5 moves a value across a half
    half_or_more = ew.greater_equal(ew.absolute(ew.sub(finite, trunc(finite))), 0.5)
    return where(half_or_more, ew.add(t, sign(x)), t)


def select_n(which: ArrayLike, *cases: ArrayLike) -> Tensor:
    """lax.select_n: cases[which] elementwise; `which` is bool (two cases: False picks the
    first) or an integer in [0, len(cases)). Differentiable in the cases.

    >>> sl.lax.select_n(sl.tensor([0, 2, 1]), sl.zeros(3), sl.ones(3), sl.full(3, 2.0))
    """
    w = as_tensor(which)
    if not cases:
        raise ValueError("select_n: give at least one case")
    if w.dtype == np.bool_ and len(cases) != 2:
        raise TypeError(f"select_n: a bool `which` selects between 2 cases, got {len(cases)}")
    if w.dtype != np.bool_ and not np.issubdtype(w.dtype, np.integer):
        raise TypeError(f"select_n: `which` must be bool or integer, got {w.dtype}")
    out = as_tensor(cases[-1])
    for i in range(len(cases) - 2, -1, -1):  # the first case whose index matches wins
        pick = ew.logical_not(w) if w.dtype == np.bool_ else equal(w, i)
        out = where(pick, cases[i], out)
    return out


def clamp(min: ArrayLike, x: ArrayLike, max: ArrayLike) -> Tensor:
    """lax.clamp(min, x, max): min(max(x, min), max), as XLA's (so max wins when min > max).
    Gradients as JAX's: to x strictly inside, to min where x is strictly below it (and min <
    max), to max where x is strictly above it, and to none of them at a tie.

    >>> sl.lax.clamp(0.0, sl.tensor([-1.0, 0.5, 2.0]), 1.0)
    """
    x = as_tensor(x)
    lo, hi = (constant(b, x.dtype, x) if isinstance(b, (int, float)) else as_tensor(b)
              for b in (min, max))  # Python numbers are weak: they take x's dtype
    for name, b in (("min", lo), ("max", hi)):
        if b.ndim and b.shape != x.shape:
            raise TypeError(f"clamp: {name} must be a scalar or of x's shape {x.shape}, got "
                            f"{b.shape}; broadcast it first")
        if b.dtype != x.dtype:
            raise TypeError(f"clamp: {name} is {b.dtype} and x is {x.dtype}; lax.clamp takes "
                            "one dtype, convert_element_type the bound first")
    inside = ew.logical_and(less(lo, x), less(x, hi))
    lo_wins = ew.logical_and(less(x, lo), less(lo, hi))
    tie = ew.stop_gradient(ew.minimum(ew.maximum(x, lo), hi))  # XLA's value; NaN stays NaN
    return where(inside, x, where(lo_wins, broadcast_to(lo, x.shape),
                                  where(greater(x, hi), broadcast_to(hi, x.shape), tie)))


def _unsigned(x):
    return np.dtype(f"uint{x.dtype.itemsize * 8}")


def _out_of_range(y, bits):
    return ew.logical_or(less(y, 0), ew.greater_equal(y, bits))


def shift_left(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.shift_left: x << y; shifts below 0 or of the bit width or more give 0, as XLA's.

    >>> sl.lax.shift_left(sl.tensor(np.int32([1, 1])), sl.tensor(np.int32([3, 40])))
    """
    x, y = _pair(x, y)
    need_int("shift_left", x, y)
    bits = x.dtype.itemsize * 8
    out = left_shift(x, astype(clamp(0, y, bits - 1), x.dtype))
    return where(_out_of_range(y, bits), constant(0, x.dtype, x), out)


def shift_right_logical(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.shift_right_logical: x >> y filling with zeros (signed x read as unsigned).

    >>> sl.lax.shift_right_logical(sl.tensor(np.int32([-8])), sl.tensor(np.int32([28])))
    """
    x, y = _pair(x, y)
    need_int("shift_right_logical", x, y)
    bits = x.dtype.itemsize * 8
    u = astype(x, _unsigned(x))
    out = right_shift(u, astype(clamp(0, y, bits - 1), u.dtype))
    return astype(where(_out_of_range(y, bits), constant(0, u.dtype, u), out), x.dtype)


def shift_right_arithmetic(x: ArrayLike, y: ArrayLike) -> Tensor:
    """lax.shift_right_arithmetic: x >> y filling with the sign bit.

    >>> sl.lax.shift_right_arithmetic(sl.tensor(np.int32([-8])), sl.tensor(np.int32([2])))
    """
    x, y = _pair(x, y)
    need_int("shift_right_arithmetic", x, y)
    bits = x.dtype.itemsize * 8
    shift = astype(where(_out_of_range(y, bits), bits - 1, y), x.dtype)
    return right_shift(x, shift)


def population_count(x: ArrayLike) -> Tensor:
    """lax.population_count: the number of set bits, in x's dtype.

    >>> sl.lax.population_count(sl.tensor(np.int32([7, -1])))
    """
    x = as_tensor(x)
    need_int("population_count", x)
    return astype(bitwise_count(astype(x, _unsigned(x))), x.dtype)


def clz(x: ArrayLike) -> Tensor:
    """lax.clz: the number of leading zero bits, in x's dtype.

    >>> sl.lax.clz(sl.tensor(np.int32([1, 0, -1])))
    """
    x = as_tensor(x)
    need_int("clz", x)
    bits = x.dtype.itemsize * 8
    u = astype(x, _unsigned(x))
    shift = 1
    while shift < bits:  # smear the highest set bit down; its popcount is the bit length
        u = bitwise_or(u, right_shift(u, constant(shift, u.dtype, u)))
        shift *= 2
    return astype(ew.sub(bits, astype(bitwise_count(u), np.int64)), x.dtype)


