"""scanlib.scipy.special: jax.scipy.special's names. expit, erf, erfc and i0 are scanlib's own
(`sl.sigmoid`, `sl.erf`, `sl.erfc`, `sl.i0`); gammaln, digamma, polygamma, xlogy and xlog1py
are the primitives of ops/gamma.py (gradients of every order); erfinv, ndtri and erfcx those
of ops/normal.py; i1, i0e and i1e those of ops/mathfuncs.py; the incomplete gamma and beta
functions, betaln, zeta and the gamma family's composites are in scipy/_gammas.py; logit,
ndtr, log_ndtr, the entropies, softmax and logsumexp (with JAX's `b=` and `return_sign=`) are
composites. Imports ops.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from ..ops import elementwise as ew
from ..ops import gamma as _gamma
from ..ops.functions import as_tensor, logsumexp as _logsumexp, where_mask
from ..ops.functions import sigmoid as expit
from ..ops.special import erf, erfc, expm1
from ..ops import expint as _expint
from ..ops import mathfuncs as _bessel
from ..ops import normal as _normal
from ..ops.functions import softmax as _softmax
from ..ops.mathfuncs import i0
from ..ops.nn import log_softmax as _log_softmax
from ..ops.structural import broadcast_to_p, max_p, normalize_axis, reshape_p, sum_p
from ..tape import Tensor
from ._args import promote_inexact, real_float
from ._gammas import (beta, betainc, betaln, comb, factorial, gamma, gammainc, gammaincc,
                      gammasgn, loggamma, multigammaln, poch, zeta)

__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "erfcx", "ndtr", "ndtri", "log_ndtr",
           "gammaln", "digamma", "polygamma", "xlogy", "xlog1py", "logsumexp", "gammainc",
           "gammaincc", "betaln", "beta", "betainc", "gamma", "gammasgn", "loggamma",
           "factorial", "comb", "poch", "multigammaln", "zeta", "i0", "i0e", "i1", "i1e",
           "entr", "rel_entr", "kl_div", "softmax", "log_softmax", "boxcox", "boxcox1p",
           "bernoulli", "exp1", "expi", "expn"]


_real_float = real_float


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


# --- the normal distribution's inverses and tails ------------------------------------------
def erfinv(x) -> Tensor:
    """The inverse of erf on (-1, 1), as jax.scipy.special.erfinv (lax.erf_inv): +-inf at
    +-1, nan outside; to a few ulps in float64, also near +-1. Its derivative is
    sqrt(pi) / 2 * exp(erfinv(x)**2).

    >>> sl.scipy.special.erfinv(sl.tensor([0.0, 0.5, -0.999]))
    """
    return _normal.erf_inv_p(_real_float(x, "erfinv"))


def ndtri(p) -> Tensor:
    """The inverse of ndtr, the standard normal quantile, as jax.scipy.special.ndtri: -inf at
    0, inf at 1, nan outside [0, 1]; accurate in both tails (down to the smallest
    subnormal p). Its derivative is sqrt(2 pi) exp(ndtri(p)**2 / 2).

    >>> sl.scipy.special.ndtri(sl.tensor([1e-300, 0.025, 0.5, 0.975]))
    """
    return _normal.ndtri_p(_real_float(p, "ndtri"))


def erfcx(x) -> Tensor:
    """The scaled complementary error function exp(x**2) erfc(x), as
    jax.scipy.special.erfcx: finite where erfc underflows (about 1 / (x sqrt(pi)) for large
    x). Its derivative is 2 x erfcx(x) - 2 / sqrt(pi).

    >>> sl.scipy.special.erfcx(sl.tensor([0.0, 10.0, 1e10]))
    """
    return _normal.erfcx_p(_real_float(x, "erfcx"))


def log_ndtr(x, series_order: int = 3) -> Tensor:
    """log(ndtr(x)), accurate in both tails, as jax.scipy.special.log_ndtr: below -1 it is
    log(erfcx(-x / sqrt(2)) / 2) - x**2 / 2 (no asymptotic series, so series_order, which is
    checked as JAX checks it, changes nothing), above it log1p(-ndtr(-x)).

    >>> sl.scipy.special.log_ndtr(sl.tensor([-1e3, -5.0, 0.0, 10.0]))
    """
    if not isinstance(series_order, (int, np.integer)) or isinstance(series_order, bool):
        raise TypeError(f"log_ndtr: series_order must be a Python int, got {series_order!r}")
    if not 0 <= series_order <= 30:
        raise ValueError(f"log_ndtr: series_order must be in [0, 30], got {series_order}")
    x = _real_float(x, "log_ndtr")
    low = ew.less(x, -1.0)
    x_low, x_high = ew.where(low, x, -1.0), ew.where(low, 0.0, x)
    scaled = _normal.erfcx_p(ew.mul(x_low, -_SQRT_HALF))
    left = ew.sub(ew.log(ew.mul(scaled, 0.5)), ew.mul(ew.mul(x_low, x_low), 0.5))
    right = ew.log1p(ew.neg(ndtr(ew.neg(x_high))))
    return ew.where(low, left, right)


# --- modified Bessel functions ------------------------------------------------------------
def i1(x) -> Tensor:
    """The modified Bessel function of the first kind of order 1, as jax.scipy.special.i1;
    differentiable to every order (I1' = I0 - I1 / x).

    >>> sl.scipy.special.i1(sl.tensor([0.0, 1.0, -2.0]))
    """
    return _bessel.i1_p(_real_float(x, "i1"))


def i0e(x) -> Tensor:
    """exp(-|x|) I0(x), finite for every x, as jax.scipy.special.i0e (lax.bessel_i0e).

    >>> sl.scipy.special.i0e(sl.tensor([0.0, 1.0, 1e4]))
    """
    return _bessel.i0e_p(_real_float(x, "i0e"))


def i1e(x) -> Tensor:
    """exp(-|x|) I1(x), finite for every x, as jax.scipy.special.i1e (lax.bessel_i1e).

    >>> sl.scipy.special.i1e(sl.tensor([0.0, 1.0, -1e4]))
    """
    return _bessel.i1e_p(_real_float(x, "i1e"))


# --- entropies ------------------------------------------------------------------------------
def entr(x) -> Tensor:
    """-x log(x) for x > 0, 0 at 0 and -inf for x < 0, as jax.scipy.special.entr; its
    gradient is -(log(x) + 1) (nan at 0, where JAX's is inf).

    >>> sl.scipy.special.entr(sl.tensor([0.0, 0.5, 1.0]))
    """
    x = _real_float(x, "entr")
    return ew.where(ew.less(x, 0.0), -math.inf, ew.neg(_gamma.xlogy_p(x, x)))


def rel_entr(p, q) -> Tensor:
    """p log(p / q) where p > 0 and q > 0, 0 where p == 0 and q >= 0, inf elsewhere, as
    jax.scipy.special.rel_entr (the same formula, so the same gradients).

    >>> sl.scipy.special.rel_entr(sl.tensor([0.0, 0.5, 0.5]), sl.tensor([0.3, 0.25, 0.0]))
    """
    p, q = _pair(p, q, "rel_entr")
    both = ew.logical_and(ew.greater(p, 0.0), ew.greater(q, 0.0))
    zero = ew.logical_and(ew.equal(p, 0.0), ew.greater_equal(q, 0.0))
    safe_p, safe_q = ew.where(both, p, 1.0), ew.where(both, q, 1.0)
    value = ew.sub(_gamma.xlogy_p(safe_p, safe_p), _gamma.xlogy_p(safe_p, safe_q))
    inf = Tensor(np.asarray(math.inf, dtype=p.dtype))
    return ew.where(both, value, ew.where(zero, 0.0, inf))


def kl_div(p, q) -> Tensor:
    """rel_entr(p, q) - p + q, as jax.scipy.special.kl_div.

    >>> sl.scipy.special.kl_div(sl.tensor([0.5, 0.5]), sl.tensor([0.25, 0.75]))
    """
    p, q = _pair(p, q, "kl_div")
    return ew.add(ew.sub(rel_entr(p, q), p), q)


# --- softmax, with jax.scipy.special's default axis (all axes) ----------------------------------
def softmax(x, *, axis=None) -> Tensor:
    """exp(x) / sum(exp(x)) along axis, stable, as jax.scipy.special.softmax, whose axis
    defaults to None (all axes; jax.nn.softmax's, and scanlib.softmax's, to -1).

    >>> sl.scipy.special.softmax(sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    return _softmax(_real_float(x, "softmax"), axis=axis)


def log_softmax(x, *, axis=None) -> Tensor:
    """x - logsumexp(x) along axis, as jax.scipy.special.log_softmax, whose axis defaults to
    None (all axes; jax.nn.log_softmax's to -1).

    >>> sl.scipy.special.log_softmax(sl.tensor([1.0, 2.0, 3.0]))
    """
    return _log_softmax(_real_float(x, "log_softmax"), axis=axis)


# --- Box-Cox transforms and Bernoulli numbers ------------------------------------------------
def boxcox(x, lmbda) -> Tensor:
    """The Box-Cox transform (x**lmbda - 1) / lmbda, and log(x) where lmbda == 0, as
    jax.scipy.special.boxcox (expm1(lmbda log x) / lmbda, the same formula).

    >>> sl.scipy.special.boxcox(sl.tensor([1.0, 2.0, 4.0]), sl.tensor([0.0, 0.5, 2.0]))
    """
    x, lmbda = _pair(x, lmbda, "boxcox")
    return _boxcox(ew.log(x), lmbda)


def boxcox1p(x, lmbda) -> Tensor:
    """The Box-Cox transform of 1 + x, accurate for small x, as jax.scipy.special.boxcox1p.

    >>> sl.scipy.special.boxcox1p(sl.tensor([1e-10, 1.0]), 0.5)
    """
    x, lmbda = _pair(x, lmbda, "boxcox1p")
    return _boxcox(ew.log1p(x), lmbda)


def _boxcox(log_x, lmbda):
    zero = ew.equal(lmbda, 0.0)
    safe = ew.where(zero, 1.0, lmbda)
    return ew.where(zero, log_x, ew.div(expm1(ew.mul(safe, log_x)), safe))


def bernoulli(n: int) -> Tensor:
    """The Bernoulli numbers B_0, ..., B_n (B_1 = -1/2) as a float64 vector, as
    jax.scipy.special.bernoulli: exact rationals rounded once up to n = 64, beyond that
    2 (2k)! zeta(2k) / (2 pi)**(2k) (inf once they overflow, past n = 258).

    >>> sl.scipy.special.bernoulli(6)
    """
    if isinstance(n, (Tensor, bool)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"bernoulli: n must be a Python int, got {n!r}")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"bernoulli: n must be a non-negative integer, got {n}")
    exact = [Fraction(1)]
    for m in range(1, min(n, 64) + 1):
        exact.append(-sum(math.comb(m + 1, k) * exact[k] for k in range(m)) / (m + 1))
    out = np.zeros(n + 1)
    out[:len(exact)] = [float(b) for b in exact]
    magnitude = 2.0
    with np.errstate(over="ignore"):
        for m in range(1, n + 1):
            magnitude *= m / (2 * math.pi)
            if m > 64 and m % 2 == 0:
                zeta_m = 1.0 + sum(k ** -m for k in range(2, 5))
                out[m] = (-1) ** (m // 2 + 1) * magnitude * zeta_m
    return Tensor(out)


# --- exponential integrals ----------------------------------------------------------------------
def exp1(x) -> Tensor:
    """The exponential integral E1(x) = integral of exp(-t) / t over t >= x, for x >= 0, as
    jax.scipy.special.exp1 (inf at 0, nan for x < 0); its derivative is -exp(-x) / x.

    >>> sl.scipy.special.exp1(sl.tensor([0.1, 1.0, 50.0]))
    """
    x = _real_float(x, "exp1")
    return _expint.expn_p(Tensor(np.ones((), x.dtype)), x)


def expi(x) -> Tensor:
    """The exponential integral Ei(x), the principal value of the integral of exp(t) / t
    below x, as jax.scipy.special.expi (-inf at 0, -E1(-x) for x < 0); its derivative is
    exp(x) / x.

    >>> sl.scipy.special.expi(sl.tensor([-1.0, 0.5, 10.0]))
    """
    return _expint.expi_p(_real_float(x, "expi"))


def expn(n, x) -> Tensor:
    """The generalised exponential integral E_n(x) = integral of exp(-x t) / t**n over t >= 1,
    as jax.scipy.special.expn (n a non-negative integer, or an array of them; nan for others
    and for x < 0; E_n(0) = 1 / (n - 1) for n > 1, as SciPy). Its derivative in x is
    -E_(n-1)(x); n has none.

    >>> sl.scipy.special.expn(sl.tensor([0, 1, 2, 5]), 1.0)
    """
    if np.dtype(n.dtype if hasattr(n, "dtype") else np.asarray(n).dtype).kind == "f":
        n, x = _pair(n, x, "expn")  # float orders promote with x, as in JAX
    else:  # integer orders (or Python ints) take x's float dtype
        x = _real_float(x, "expn")
        n = as_tensor(n) if hasattr(n, "dtype") else Tensor(np.asarray(n))
        if np.dtype(n.dtype).kind == "c":
            raise TypeError("expn: n must be real integers, got complex input")
        n = n if n.dtype == x.dtype else ew.astype(n, dtype=x.dtype)
    return _expint.expn_p(n, x)
