"""scanlib.numpy: jax.numpy's names, so that `import scanlib.numpy as jnp` ports a JAX program.

Every function here is scanlib's own object under jax.numpy's name (`jnp.tanh is sl.tanh`,
`jnp.acos is sl.arccos`), with JAX's meaning: `jnp.array(x)` and `jnp.asarray(x)` are
differentiated through. The dtype names are NumPy's scalar types (`x.astype(jnp.float32)`,
`jnp.zeros(3, jnp.float32)`), `jnp.ndarray` is `scanlib.Tensor`, and the default float is
float64 (JAX with `jax_enable_x64`). jax.numpy's names that scanlib lacks are not here, so a
port that needs one fails at its first use; docs/porting.md lists them. Imports ops, linalg,
fft, tape and vectorizing (vmap-based, as JAX's vectorize is, hence this module's high rank).
"""

import math as _math

import numpy as _np

from ..ops import (abs, add, all, allclose, angle, any, arange, arccos, arccosh, arcsin, arcsinh,
                   arctan, arctan2, arctanh, argmax, argmin, argsort, array, asarray, astype,
                   atleast_1d, atleast_2d, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
                   broadcast_arrays, broadcast_shapes, broadcast_to, cbrt, ceil, clip, concatenate,
                   conj, conjugate, copy, cos, cosh, cumprod, cumsum, deg2rad, diag, diagonal, diff,
                   divide, dot, einsum, empty, empty_like, equal, exp, exp2, expand_dims, expm1,
                   eye, flip, floor, floor_divide, fmod, from_dlpack, full, full_like, greater,
                   greater_equal, hstack, identity, imag, inner, invert, isclose, isfinite, isinf,
                   isnan, isneginf, isposinf, kron, less, less_equal, linspace, log, log10, log1p,
                   log2, logaddexp, logical_and, logical_not, logical_or, logical_xor, matmul,
                   matrix_transpose, max, maximum, mean, meshgrid, min, minimum, mod, moveaxis,
                   multiply, nan_to_num, nanmean, nansum, ndim, negative, not_equal, ones,
                   ones_like, outer, pad, permute_dims, polyval, positive, power, prod, rad2deg,
                   ravel, real, reciprocal, remainder, repeat, reshape, rint, roll, round,
                   searchsorted, select, shape, sign, sin, sinh, size, sort, split, sqrt, square,
                   squeeze, stack, std, subtract, sum, swapaxes, take, take_along_axis, tan, tanh,
                   tensordot, tile, trace, transpose, tril, triu, trunc, unstack, var, vdot, vstack,
                   where, zeros, zeros_like)
from ..ops import (average, bitwise_count, bitwise_left_shift, bitwise_right_shift, copysign,
                   corrcoef, count_nonzero, cov, cumulative_prod, cumulative_sum, divmod, fabs,
                   float_power, fmax, fmin, frexp, gcd, heaviside, hypot, i0, lcm, ldexp,
                   left_shift, logaddexp2, median, modf, nanargmax, nanargmin, nancumprod,
                   nancumsum, nanmax, nanmedian, nanmin, nanpercentile, nanprod, nanquantile,
                   nanstd, nanvar, nextafter, percentile, ptp, quantile, right_shift, signbit,
                   sinc, spacing, unwrap)
from ..ops import (append, array_equal, array_equiv, array_split, atleast_3d, can_cast,
                   column_stack, diag_indices, diag_indices_from, diagflat, dsplit, dstack,
                   ediff1d, fliplr, flipud, geomspace, hsplit, iscomplex, iscomplexobj, isdtype,
                   isreal, isrealobj, isscalar, iterable, logspace, ravel_multi_index, result_type,
                   rollaxis, rot90, trapezoid, tri, tril_indices, tril_indices_from, triu_indices,
                   triu_indices_from, unravel_index, vander, vsplit)
from ..ops import (bartlett, blackman, hamming, hanning, interp, kaiser)
from ..ops import (argwhere, bincount, compress, digitize, extract, flatnonzero, intersect1d,
                   isin, nonzero, setdiff1d, setxor1d, union1d, unique, unique_all,
                   unique_counts, unique_inverse, unique_values)
from ..ops import (convolve, correlate, poly, polyadd, polyder, polydiv, polyfit, polyint,
                   polymul, polysub, roots, trim_zeros)
from ..ops import (cross, gradient, histogram, histogram_bin_edges, matvec, vecdot, vecmat)
from ..ops import (argpartition, block, choose, delete, fill_diagonal, insert, lexsort,
                   partition, put_along_axis, resize, sort_complex)
from ..ops.grids import (c_, frombuffer, fromiter, fromstring, index_exp, indices, ix_, mgrid,
                         ogrid, r_, s_)
from ..vectorizing import apply_along_axis, apply_over_axes, fromfunction, piecewise, vectorize
from ..ops.promotion import promote_types  # JAX's rule, which the ops follow
from ..tape import Tensor as ndarray
from . import fft, linalg

# The array API's and NumPy's other names for the same functions.
absolute = abs
acos, acosh, asin, asinh, atan, atanh, atan2 = (arccos, arccosh, arcsin, arcsinh, arctan, arctanh,
                                                arctan2)
amax, amin = max, min
around = round
radians, degrees = deg2rad, rad2deg
concat = concatenate
pow = power
true_divide = divide
bitwise_invert = invert

# dtypes: NumPy's scalar types, as jax.numpy's are (float_, int_, complex_ and uint are the
# 64-bit ones: scanlib's defaults are JAX's with jax_enable_x64).
bool_ = bool = _np.bool_
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
single, double, csingle, cdouble = _np.float32, _np.float64, _np.complex64, _np.complex128
int_, uint, float_, complex_ = _np.int64, _np.uint64, _np.float64, _np.complex128
dtype = _np.dtype
generic, number, inexact, floating = _np.generic, _np.number, _np.inexact, _np.floating
complexfloating, integer = _np.complexfloating, _np.integer
signedinteger, unsignedinteger = _np.signedinteger, _np.unsignedinteger
finfo, iinfo, issubdtype = _np.finfo, _np.iinfo, _np.issubdtype

# constants
pi, e, inf, nan, euler_gamma = _math.pi, _math.e, _math.inf, _math.nan, _np.euler_gamma
newaxis = None

__all__ = [
    "abs", "absolute", "acos", "acosh", "add", "all", "allclose", "amax", "amin", "angle",
    "any", "arange", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh",
    "argmax", "argmin", "argsort", "around", "array", "asarray", "asin", "asinh", "astype",
    "atan", "atan2", "atanh", "atleast_1d", "atleast_2d", "bitwise_and", "bitwise_invert",
    "bitwise_not", "bitwise_or", "bitwise_xor", "bool", "bool_", "broadcast_arrays",
    "broadcast_shapes", "broadcast_to", "cbrt", "cdouble", "ceil", "clip", "complex128",
    "complex64", "complex_", "complexfloating", "concat", "concatenate", "conj", "conjugate",
    "copy", "cos", "cosh", "csingle", "cumprod", "cumsum", "deg2rad", "degrees", "diag",
    "diagonal", "diff", "divide", "dot", "double", "dtype", "e", "einsum", "empty",
    "empty_like", "equal", "euler_gamma", "exp", "exp2", "expand_dims", "expm1", "eye", "fft",
    "finfo", "flip", "float16", "float32", "float64", "float_", "floating", "floor",
    "floor_divide", "fmod", "from_dlpack", "full", "full_like", "generic", "greater",
    "greater_equal", "hstack", "identity", "iinfo", "imag", "inexact", "inf", "inner", "int16",
    "int32", "int64", "int8", "int_", "integer", "invert", "isclose", "isfinite", "isinf",
    "isnan", "isneginf", "isposinf", "issubdtype", "kron", "less", "less_equal", "linalg",
    "linspace", "log", "log10", "log1p", "log2", "logaddexp", "logical_and", "logical_not",
    "logical_or", "logical_xor", "matmul", "matrix_transpose", "max", "maximum", "mean",
    "meshgrid", "min", "minimum", "mod", "moveaxis", "multiply", "nan", "nan_to_num", "nanmean",
    "nansum", "ndarray", "ndim", "negative", "newaxis", "not_equal", "number", "ones",
    "ones_like", "outer", "pad", "permute_dims", "pi", "polyval", "positive", "pow", "power",
    "prod", "promote_types", "rad2deg", "radians", "ravel", "real", "reciprocal",
    "remainder",
    "repeat", "reshape", "rint", "roll", "round", "searchsorted", "select", "shape", "sign",
    "signedinteger", "sin", "single", "sinh", "size", "sort", "split", "sqrt", "square",
    "squeeze", "stack", "std", "subtract", "sum", "swapaxes", "take", "take_along_axis", "tan",
    "tanh", "tensordot", "tile", "trace", "transpose", "tril", "triu", "true_divide", "trunc",
    "uint", "uint16", "uint32", "uint64", "uint8", "unsignedinteger", "unstack", "var", "vdot",
    "vstack", "where", "zeros", "zeros_like",
]
# statistics, nan reductions and the other elementwise functions
__all__ += ["average", "bitwise_count", "bitwise_left_shift", "bitwise_right_shift", "copysign",
    "corrcoef", "count_nonzero", "cov", "cumulative_prod", "cumulative_sum", "divmod", "fabs",
    "float_power", "fmax", "fmin", "frexp", "gcd", "heaviside", "hypot", "i0", "lcm", "ldexp",
    "left_shift", "logaddexp2", "median", "modf", "nanargmax", "nanargmin", "nancumprod",
    "nancumsum", "nanmax", "nanmedian", "nanmin", "nanpercentile", "nanprod", "nanquantile",
    "nanstd", "nanvar", "nextafter", "percentile", "ptp", "quantile", "right_shift", "signbit",
    "sinc", "spacing", "unwrap"]
# building and reshaping, index helpers, type predicates, interp and windows
__all__ += ["append", "array_equal", "array_equiv", "array_split", "atleast_3d", "bartlett",
    "blackman", "can_cast", "column_stack", "diag_indices", "diag_indices_from", "diagflat",
    "dsplit", "dstack", "ediff1d", "fliplr", "flipud", "geomspace", "hamming", "hanning", "hsplit",
    "interp", "iscomplex", "iscomplexobj", "isdtype", "isreal", "isrealobj", "isscalar",
    "iterable", "kaiser", "logspace", "ravel_multi_index", "result_type", "rollaxis", "rot90",
    "trapezoid", "tri", "tril_indices", "tril_indices_from", "triu_indices", "triu_indices_from",
    "unravel_index", "vander", "vsplit"]
# data-sized results (size=, fill_value=), sets and bins
__all__ += ["argwhere", "bincount", "compress", "digitize", "extract", "flatnonzero",
    "intersect1d", "isin", "nonzero", "setdiff1d", "setxor1d", "union1d", "unique", "unique_all",
    "unique_counts", "unique_inverse", "unique_values"]
# convolutions and polynomials
__all__ += ["convolve", "correlate", "poly", "polyadd", "polyder", "polydiv", "polyfit",
    "polyint", "polymul", "polysub", "roots", "trim_zeros"]
# vector products, finite differences and histograms
__all__ += ["cross", "gradient", "histogram", "histogram_bin_edges", "matvec", "vecdot",
    "vecmat"]
# editing by position and partial sorts
__all__ += ["argpartition", "block", "choose", "delete", "fill_diagonal", "insert", "lexsort",
    "partition", "put_along_axis", "resize", "sort_complex"]
# grids, index expressions, raw data, and functions mapped with vmap
__all__ += ["apply_along_axis", "apply_over_axes", "c_", "frombuffer", "fromfunction",
    "fromiter", "fromstring", "get_printoptions", "index_exp", "indices", "ix_", "mgrid",
    "ogrid", "piecewise", "printoptions", "r_", "s_", "set_printoptions", "vectorize"]

# Tensors print through NumPy, so NumPy's print options are jax.numpy's here.
printoptions, set_printoptions = _np.printoptions, _np.set_printoptions
get_printoptions = _np.get_printoptions


def __getattr__(name):
    if name == "bfloat16":
        raise AttributeError(
            "scanlib.numpy has no bfloat16: scanlib computes with NumPy or CuPy, which have no "
            "bfloat16 type. Use float32 (or float16) instead, e.g. x.astype(jnp.float32).")
    raise AttributeError(f"module 'scanlib.numpy' has no attribute {name!r}")
