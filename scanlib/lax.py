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
