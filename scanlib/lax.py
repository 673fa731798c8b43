"""`from scanlib import lax`: jax.lax's names with JAX's signatures and meanings, as views onto
scanlib's own objects (`lax.scan is scanlib.scan`, `lax.tanh is scanlib.tanh`). Control flow
(scan, fori_loop, while_loop, cond, switch, map, associative_scan), selection and dynamic
indexing (select, dynamic_slice, dynamic_update_slice and their `_in_dim` forms, clamped as
JAX clamps), `complex` (x + iy from its parts), lax's cumulative reductions (along axis 0 by
default, reverse=, the operand's dtype) and the elementwise functions whose meaning is
NumPy's too. A name whose lax meaning
differs from scanlib's function of that name is not here under scanlib's (lax.cumsum is
lax's; lax.round, lax.pad, lax.sort, lax.argmax, lax.div are left out: their meanings differ).

Imports the modules of scanlib that define these names (it is imported by scanlib/__init__).
"""

from .associative import associative_scan, cumlogsumexp, cummax, cummin, cumprod, cumsum
from .autodiff import stop_gradient
from .branching import cond, platform_dependent, switch
from .control import fori_loop, map, while_loop
from .ops import (abs, arccos, arcsin, arctan, arctan2, arccosh, arcsinh, arctanh, cbrt, ceil,
                  concatenate, conj, cos, cosh, dot, erf, erfc, exp, expm1, floor, full, imag,
                  log, log1p, maximum, minimum, real, reciprocal, reshape, rsqrt, sigmoid, sign,
                  sin, sinh, sqrt, square, tan, tanh, transpose)
from .ops.dynamic import (complex, dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim,
                          dynamic_update_index_in_dim, dynamic_update_slice,
                          dynamic_update_slice_in_dim, select)
from .ops.elementwise import add, mul, neg, sub
from .scan import scan

# lax's names for functions scanlib calls by NumPy's names (the same functions).
acos, asin, atan, atan2 = arccos, arcsin, arctan, arctan2
acosh, asinh, atanh = arccosh, arcsinh, arctanh
logistic, max, min = sigmoid, maximum, minimum

__all__ = [
    # control flow
    "scan", "fori_loop", "while_loop", "cond", "switch", "map", "associative_scan",
    "stop_gradient", "platform_dependent",
    # selection and dynamic indexing
    "select", "dynamic_slice", "dynamic_update_slice", "dynamic_slice_in_dim",
    "dynamic_index_in_dim", "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim",
    # cumulative reductions
    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
    # elementwise and structural
    "abs", "add", "sub", "mul", "neg", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt",
    "square", "reciprocal", "sign", "floor", "ceil", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "erf",
    "erfc", "max", "min", "real", "imag", "complex", "conj", "dot", "concatenate", "reshape",
    "transpose", "full",
]
