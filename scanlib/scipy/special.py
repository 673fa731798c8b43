"""scanlib.scipy.special: jax.scipy.special's names. expit, erf and erfc are scanlib's own
(`sl.sigmoid`, `sl.erf`, `sl.erfc`); gammaln, digamma, polygamma, xlogy and xlog1py are the
primitives of ops/gamma.py (gradients of every order); logit, ndtr and logsumexp (with JAX's
`b=` and `return_sign=`) are composites. Imports ops.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..ops import elementwise as ew
from ..ops import gamma as _gamma
from ..ops.functions import as_tensor, logsumexp as _logsumexp, where_mask
from ..ops.functions import sigmoid as expit
from ..ops.special import erf, erfc
from ..ops.structural import broadcast_to_p, max_p, normalize_axis, reshape_p, sum_p
from ..tape import Tensor

__all__ = ["expit", "logit", "erf", "erfc", "ndtr", "gammaln", "digamma", "polygamma", "xlogy",
           "xlog1py", "logsumexp"]


def _real_float(x, who):
    """x as a Tensor of a real float dtype: integers and bools become float64 (JAX: its
    default float), complex is refused."""
    return promote_inexact(who, x)[0]


def gammaln(x) -> Tensor:
    """log|Gamma(x)|, as jax.scipy.special.gammaln: +inf at 0, -1, -2, ... and at +-inf; its
    gradient is digamma(x).

    >>> sl.scipy.special.gammaln(sl.tensor([0.5, 1.0, 10.0, -0.5]))
    """
    return _gamma.gammaln_p(_real_float(x, "gammaln"))


def digamma(x) -> Tensor:
    """The logarithmic derivative of Gamma, as jax.scipy.special.digamma: nan at 0, -1, -2,
    ... (as JAX); its gradient is polygamma(1, x).

    >>> sl.scipy.special.digamma(sl.tensor([1.0, 0.5, 10.0]))
    """
    return _gamma.digamma_p(_real_float(x, "digamma"))


def polygamma(n: int, x) -> Tensor:
    """The n-th derivative of digamma (n a non-negative Python int here; JAX also takes an
    array of orders), as jax.scipy.special.polygamma.

    >>> sl.scipy.special.polygamma(1, sl.tensor([1.0, 2.0]))  # pi**2 / 6, pi**2 / 6 - 1
    """
    if isinstance(n, Tensor) or not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"polygamma: n must be a non-negative Python int, got {n!r} (an array "
                        "of orders, which JAX accepts, is not supported: call it per order)")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"polygamma: n must be >= 0, got {n}")
    x = _real_float(x, "polygamma")
    return _gamma.digamma_p(x) if n == 0 else _gamma.polygamma_p(x, n=n)


def promote_inexact(who, *args):
    """args as Tensors of one real float dtype, as JAX's promote_args_inexact: the arrays'
    promoted dtype (NumPy's rule), float64 if that is not a float; Python numbers are weak
    (they take the arrays' dtype, as in JAX and NumPy)."""
    strong = [np.dtype(a.dtype) for a in args if hasattr(a, "dtype")]
    dtype = np.result_type(*strong) if strong else np.dtype(np.float64)
    if dtype.kind == "c" or any(isinstance(a, complex) for a in args):
        raise TypeError(f"{who}: got complex input; it is defined here for real numbers only")
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
    out = []
    for a in args:
        a = as_tensor(a) if hasattr(a, "dtype") else Tensor(np.asarray(a, dtype))
        out.append(a if a.dtype == dtype else ew.astype(a, dtype=dtype))
    return tuple(out)


def _pair(x, y, who):
    return promote_inexact(who, x, y)


def xlogy(x, y) -> Tensor:
    """x * log(y), and 0 where x == 0 (also where y is 0), as jax.scipy.special.xlogy. Its
    derivatives are JAX's: log(y) for x and x / y for y (at x == y == 0: -inf and nan).

    >>> sl.scipy.special.xlogy(sl.tensor([0.0, 2.0]), sl.tensor([0.0, np.e]))
    """
    return _gamma.xlogy_p(*_pair(x, y, "xlogy"))


def xlog1py(x, y) -> Tensor:
    """x * log1p(y), and 0 where x == 0, as jax.scipy.special.xlog1py; derivatives log1p(y)
    and x / (1 + y), as JAX's.

    >>> sl.scipy.special.xlog1py(sl.tensor([0.0, 2.0]), sl.tensor([-1.0, 1e-10]))
    """
    return _gamma.xlog1py_p(*_pair(x, y, "xlog1py"))


def logit(x) -> Tensor:
    """log(x / (1 - x)), the inverse of expit, as jax.scipy.special.logit (-inf at 0, +inf at
    1, nan outside [0, 1]).

    >>> sl.scipy.special.logit(sl.tensor([0.25, 0.5, 0.9]))
    """
    x = _real_float(x, "logit")
    return ew.log(ew.div(x, ew.sub(1.0, x)))


_SQRT_HALF = math.sqrt(0.5)


def ndtr(x) -> Tensor:
    """The standard normal distribution function, erfc(-x / sqrt(2)) / 2, as
    jax.scipy.special.ndtr (accurate in the lower tail).

    >>> sl.scipy.special.ndtr(sl.tensor([-40.0, 0.0, 1.0]))
    """
    x = _real_float(x, "ndtr")
    return ew.mul(erfc(ew.mul(x, -_SQRT_HALF)), 0.5)


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False, *,
              where=None):
    """log(sum(b * exp(a))) along axis, stable, as jax.scipy.special.logsumexp (b, a scale
    broadcast against a, defaults to 1). With return_sign=True, (log|sum|, sign of sum);
    without it a negative sum gives nan, as in JAX. The bool mask `where` leaves out the
    elements where it is False (-inf where none is left); they get no gradient.

    >>> sl.scipy.special.logsumexp(sl.tensor([1000.0, 1000.0]))
    >>> sl.scipy.special.logsumexp(sl.tensor([0.0, 0.0]), b=sl.tensor([1.0, -2.0]),
    ...                            return_sign=True)
    """
    if b is None and not return_sign:
        return _logsumexp(a, axis=axis, keepdims=keepdims, where=where)
    a = _real_float(a, "logsumexp")
    if b is not None:
        a, b = _pair(a, b, "logsumexp")
        shape = np.broadcast_shapes(a.shape, b.shape)
        a = _bcast(a, shape)
        b = _bcast(b, shape)
    mask = where_mask(where, a, "logsumexp")
    if mask is not None:
        a = ew.where(mask, a, -np.inf)
        b = b if b is None else ew.where(mask, b, 0)
    axes = normalize_axis(axis, a.ndim)
    m = ew.stop_gradient(max_p(a, axis=axes, keepdims=True))
    m = ew.where(ew.isfinite(m), m, 0.0)
    e = ew.exp(ew.sub(a, m))
    s = sum_p(e if b is None else ew.mul(b, e), axis=axes, keepdims=True)
    if return_sign:
        sign = ew.sign(s)
        out = ew.add(ew.log(ew.absolute(s)), m)
    else:
        out = ew.add(ew.log(s), m)
    if not keepdims:
        kept = tuple(n for i, n in enumerate(out.shape) if axes is not None and i not in axes)
        out = reshape_p(out, shape=kept)
        if return_sign:
            sign = reshape_p(sign, shape=kept)
    return (out, sign) if return_sign else out


def _bcast(x, shape):
    return x if x.shape == shape else broadcast_to_p(x, shape=shape)
