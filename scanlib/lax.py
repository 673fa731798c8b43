"""`from scanlib import lax`: jax.lax's names with JAX's signatures and meanings, as views onto
scanlib's own objects (`lax.scan is scanlib.scan`, `lax.tanh is scanlib.tanh`). Control flow
(scan, fori_loop, while_loop, cond, switch, map, associative_scan), selection and dynamic
indexing (select, dynamic_slice, dynamic_update_slice and their `_in_dim` forms, clamped as
JAX clamps), `complex` (x + iy from its parts), lax's cumulative reductions (along axis 0 by
default, reverse=, the operand's dtype), the elementwise functions whose meaning is NumPy's
too, and lax's own array functions (ops.laxfuncs, laxmath, laxreduce, laxconv: pad, slice,
dot_general, conv, reduce_window, sort, ...) and implicit differentiation (custom_root,
custom_linear_solve). A name whose lax meaning differs from scanlib's function of that name
is lax's here (lax.round rounds halves away from zero, lax.pad takes (low, high, interior)
triples, lax.sort sorts several operands, lax.div truncates toward zero).

Imports the modules of scanlib that define these names (it is imported by scanlib/__init__).
"""

from .associative import associative_scan, cumlogsumexp, cummax, cummin, cumprod, cumsum
from .autodiff import stop_gradient
from .branching import cond, platform_dependent, switch
from .control import fori_loop, map, while_loop
from .implicit import custom_linear_solve, custom_root
from .ops import (abs, arccos, arcsin, arctan, arctan2, arccosh, arcsinh, arctanh, cbrt, ceil,
                  concatenate, conj, cos, cosh, erf, erfc, exp, expm1, floor, full, imag,
                  log, log1p, maximum, minimum, real, reciprocal, rsqrt, sigmoid, sign,
                  sin, sinh, sqrt, square, tan, tanh, transpose)
from .ops.dynamic import (complex, dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim,
                          dynamic_update_index_in_dim, dynamic_update_slice,
                          dynamic_update_slice_in_dim, select)
from .ops.elementwise import add, mul, neg, sub
from .ops.laxconv import (ConvDimensionNumbers, conv, conv_dimension_numbers,
                          conv_general_dilated, conv_transpose, conv_with_general_padding,
                          padtype_to_pads,
                          reduce_window)
from .ops.laxfuncs import (DotDimensionNumbers, GatherScatterMode, Precision, RoundingMethod,
                           batch_matmul, broadcast, broadcast_in_dim, broadcast_to_rank,
                           broadcasted_iota, collapse, convert_element_type, dot_general,
                           index_in_dim, iota, pad, rev, slice, slice_in_dim, split,
                           with_sharding_constraint)
from .ops.laxfuncs import lax_dot as dot
from .ops.laxfuncs import lax_expand_dims as expand_dims
from .ops.laxfuncs import lax_full_like as full_like
from .ops.laxfuncs import lax_reshape as reshape
from .ops.laxfuncs import lax_squeeze as squeeze
from .ops.laxmath import (clamp, clz, div, integer_pow, optimization_barrier, population_count,
                          rem, select_n, shift_left, shift_right_arithmetic, shift_right_logical)
from .ops.laxmath import lax_round as round
from .ops.laxreduce import (approx_max_k, approx_min_k, argmax, argmin, reduce, reduce_and,
                            reduce_max, reduce_min, reduce_or, reduce_prod, reduce_sum,
                            reduce_xor, sort, sort_key_val, top_k)
from .ops.mathfuncs import nextafter
from .ops.named import (broadcast_shapes, equal, exp2, greater, greater_equal, isfinite, less,
                        less_equal, not_equal, power)
from .ops.special import bitwise_and, bitwise_not, bitwise_or, bitwise_xor
from .scan import scan

# lax's names for functions scanlib calls by NumPy's names (the same functions).
acos, asin, atan, atan2 = arccos, arcsin, arctan, arctan2
acosh, asinh, atanh = arccosh, arcsinh, arctanh
logistic, max, min = sigmoid, maximum, minimum
eq, ne, lt, le, gt, ge = equal, not_equal, less, less_equal, greater, greater_equal
pow, is_finite = power, isfinite

__all__ = [
    # control flow
    "scan", "fori_loop", "while_loop", "cond", "switch", "map", "associative_scan",
    "stop_gradient", "platform_dependent", "custom_root", "custom_linear_solve",
    # selection and dynamic indexing
    "select", "select_n", "dynamic_slice", "dynamic_update_slice", "dynamic_slice_in_dim",
    "dynamic_index_in_dim", "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim",
    # cumulative reductions
    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
    # elementwise and structural
    "abs", "add", "sub", "mul", "neg", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt",
    "square", "reciprocal", "sign", "floor", "ceil", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "erf",
    "erfc", "max", "min", "real", "imag", "complex", "conj", "dot", "concatenate", "reshape",
    "transpose", "full", "exp2", "pow", "integer_pow", "div", "rem", "round", "clamp",
    "nextafter", "is_finite", "convert_element_type",
    # comparisons and bits
    "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "shift_left", "shift_right_logical", "shift_right_arithmetic",
    "population_count", "clz",
    # shapes, slices and creation
    "pad", "slice", "slice_in_dim", "index_in_dim", "broadcast", "broadcast_in_dim",
    "broadcast_to_rank", "expand_dims", "squeeze", "rev", "collapse", "iota",
    "broadcasted_iota", "full_like", "optimization_barrier", "split",
    "with_sharding_constraint", "broadcast_shapes",
    # products, convolutions and windows
    "dot_general", "batch_matmul", "conv_general_dilated", "conv", "conv_with_general_padding",
    "conv_transpose", "conv_dimension_numbers", "padtype_to_pads", "reduce_window",
    # reductions and sorting
    "reduce", "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
    "reduce_or", "reduce_xor", "argmax", "argmin", "sort", "sort_key_val", "top_k",
    "approx_max_k", "approx_min_k",
    # constants and types
    "Precision", "RoundingMethod", "GatherScatterMode", "DotDimensionNumbers",
    "ConvDimensionNumbers",
]


# --- special functions: views onto scanlib.scipy.special's (lax.betainc is
# regularized_incomplete_beta, I_x(a, b); lax.polygamma takes its order as a Python int here).
import numpy as _np  # noqa: E402

from .ops import incomplete as _incomplete  # noqa: E402
from .ops.elementwise import astype as _astype  # noqa: E402
from .ops import prng_loops as _prng_loops  # noqa: E402
from .scipy import special as _special  # noqa: E402

erf_inv, lgamma, digamma = _special.erfinv, _special.gammaln, _special.digamma
igamma, igammac, betainc = _special.gammainc, _special.gammaincc, _special.betainc
polygamma, zeta = _special.polygamma, _special.zeta
bessel_i0e, bessel_i1e = _special.i0e, _special.i1e


def igamma_grad_a(a, x):
    """dP(a, x)/da, the derivative of igamma in a, as jax.lax.igamma_grad_a.

    >>> sl.lax.igamma_grad_a(2.0, sl.tensor([0.5, 3.0]))
    """
    return _incomplete.igamma_grad_a_p(*_special.promote_inexact("igamma_grad_a", a, x))


def random_gamma_grad(a, x, *, dtype=None):
    """dx/da for a draw x of Gamma(a) with x held at its quantile (implicit
    reparameterisation), as jax.lax.random_gamma_grad; the result in dtype (default: the
    inputs' float dtype). Not differentiable again, as in JAX.

    >>> sl.lax.random_gamma_grad(2.0, sl.tensor([0.5, 3.0]))
    """
    a, x = _special.promote_inexact("random_gamma_grad", a, x)
    out = _prng_loops.gamma_grad_p(a, x)
    return out if dtype is None or _np.dtype(dtype) == out.dtype else _astype(out, dtype=dtype)


__all__ += ["erf_inv", "lgamma", "digamma", "igamma", "igammac", "igamma_grad_a", "betainc",
            "polygamma", "zeta", "bessel_i0e", "bessel_i1e", "random_gamma_grad"]
