"""The gamma and beta families of scanlib.scipy.special (public there): the incomplete gamma
and beta functions, betaln and zeta (the primitives of ops/incomplete.py), and gamma,
gammasgn, loggamma, factorial, comb, poch, beta and multigammaln, composed as JAX composes
them from gammaln. Imports ops.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..ops import elementwise as ew
from ..ops import gamma as _gamma
from ..ops import incomplete as _inc
from ..ops.mathfuncs import signbit
from ..ops.special import floor, remainder
from ..ops.structural import reshape_p, sum_p
from ..tape import Tensor
from ._args import promote_inexact, real_float

__all__ = ["gammainc", "gammaincc", "betaln", "beta", "betainc", "gamma", "gammasgn",
           "loggamma", "factorial", "comb", "poch", "multigammaln", "zeta"]


def gammainc(a, x) -> Tensor:
    """The regularised lower incomplete gamma function P(a, x), as jax.scipy.special.gammainc
    (1 at a = 0, nan for a < 0 or x < 0). Differentiable in x to every order, and once in a
    (as JAX: its derivative in a has no derivative of its own).

    >>> sl.scipy.special.gammainc(sl.tensor([0.5, 2.0, 10.0]), 2.0)
    """
    return _inc.igamma_p(*promote_inexact("gammainc", a, x))


def gammaincc(a, x) -> Tensor:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), computed
    directly where it is small, as jax.scipy.special.gammaincc; gradients as gammainc's.

    >>> sl.scipy.special.gammaincc(sl.tensor([0.5, 2.0, 10.0]), 30.0)
    """
    return _inc.igammac_p(*promote_inexact("gammaincc", a, x))


def betaln(a, b) -> Tensor:
    """log|B(a, b)|, as jax.scipy.special.betaln, accurate also where a or b is large
    (Stirling's remainders instead of a difference of large gammaln values); its gradients
    are digamma(a) - digamma(a + b) and digamma(b) - digamma(a + b).

    >>> sl.scipy.special.betaln(sl.tensor([0.5, 1e8]), 3.0)
    """
    return _inc.betaln_p(*promote_inexact("betaln", a, b))


def beta(a, b) -> Tensor:
    """The beta function B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), as
    jax.scipy.special.beta: sign times exp(betaln(a, b)).

    >>> sl.scipy.special.beta(sl.tensor([1.0, 0.5]), 2.0)
    """
    a, b = promote_inexact("beta", a, b)
    sign = ew.mul(ew.mul(gammasgn(a), gammasgn(b)), gammasgn(ew.add(a, b)))
    return ew.mul(sign, ew.exp(_inc.betaln_p(a, b)))


def betainc(a, b, x) -> Tensor:
    """The regularised incomplete beta function I_x(a, b), as jax.scipy.special.betainc (and
    lax.betainc): nan outside 0 <= x <= 1 and for negative a or b. Differentiable in x (to
    every order); a gradient with respect to a or b raises, as in JAX.

    >>> sl.scipy.special.betainc(2.0, 3.0, sl.tensor([0.0, 0.25, 1.0]))
    """
    return _inc.betainc_p(*promote_inexact("betainc", a, b, x))


def gammasgn(x) -> Tensor:
    """The sign of Gamma(x), as jax.scipy.special.gammasgn: -1 or 1, -1 at -0.0, nan at the
    negative integers, at -inf and at nan; its gradient is zero.

    >>> sl.scipy.special.gammasgn(sl.tensor([2.5, -0.5, -1.5]))
    """
    x = real_float(x, "gammasgn")
    fx = floor(x)
    negative = ew.less(x, 0.0)
    minus = ew.logical_or(ew.logical_and(negative, ew.not_equal(remainder(fx, 2.0), 0.0)),
                          ew.logical_and(ew.equal(x, 0.0), signbit(x)))
    nan = ew.logical_or(ew.logical_and(negative, ew.equal(x, fx)), ew.logical_not(
        ew.equal(x, x)))
    one = ew.astype(ew.where(minus, -1.0, 1.0), dtype=x.dtype)
    return ew.where(nan, math.nan, one)


def gamma(x) -> Tensor:
    """The gamma function, as jax.scipy.special.gamma: gammasgn(x) * exp(gammaln(x)) (+-inf
    at +-0, nan at the negative integers and at -inf).

    >>> sl.scipy.special.gamma(sl.tensor([0.5, 5.0, -1.5]))
    """
    x = real_float(x, "gamma")
    return ew.mul(gammasgn(x), ew.exp(_gamma.gammaln_p(x)))


def loggamma(x) -> Tensor:
    """The principal branch of log Gamma(x) for real x, as jax.scipy.special.loggamma:
    gammaln(x) for x > 0 and nan elsewhere (complex input, which JAX accepts, is refused).

    >>> sl.scipy.special.loggamma(sl.tensor([0.5, 10.0, -0.5]))
    """
    x = real_float(x, "loggamma")
    return ew.where(ew.greater(x, 0.0), _gamma.gammaln_p(x), math.nan)


def factorial(n, exact: bool = False) -> Tensor:
    """n! = Gamma(n + 1) in floats, and 0 for n < 0, as jax.scipy.special.factorial
    (exact=True, exact integers, is not supported, as in JAX).

    >>> sl.scipy.special.factorial(sl.tensor([0, 5, 20]))
    """
    if exact:
        raise NotImplementedError("factorial: exact=True (exact integers) is not supported, "
                                  "as in JAX; call it with exact=False for floats")
    n = real_float(n, "factorial")
    return ew.where(ew.less(n, 0.0), 0.0, ew.exp(_gamma.gammaln_p(ew.add(n, 1.0))))


def comb(N, k, *, repetition: bool = False) -> Tensor:
    """The binomial coefficient N choose k in floats, exp(gammaln(N + 1) - gammaln(k + 1) -
    gammaln(N - k + 1)), and 0 where k > N, N < 0 or k < 0, as jax.scipy.special.comb
    (repetition=True: N + k - 1 choose k).

    >>> sl.scipy.special.comb(10, sl.tensor([0.0, 3.0, 11.0]))
    """
    N, k = promote_inexact("comb", N, k)
    if repetition:
        result = comb(ew.sub(ew.add(N, k), 1.0), k)
        return ew.where(ew.logical_and(ew.equal(k, 0.0), ew.greater_equal(N, 0.0)), 1.0, result)
    ok = ew.logical_and(ew.logical_and(ew.less_equal(k, N), ew.greater_equal(N, 0.0)),
                        ew.greater_equal(k, 0.0))
    safe_n, safe_k = ew.where(ok, N, 0.0), ew.where(ok, k, 0.0)
    lg = _gamma.gammaln_p
    log_c = ew.sub(ew.sub(lg(ew.add(safe_n, 1.0)), lg(ew.add(safe_k, 1.0))),
                   lg(ew.sub(ew.add(safe_n, 1.0), safe_k)))
    return ew.where(ok, ew.exp(log_c), 0.0)


def poch(z, m) -> Tensor:
    """The rising factorial (Pochhammer symbol) Gamma(z + m) / Gamma(z), and 1 where m == 0,
    as jax.scipy.special.poch.

    >>> sl.scipy.special.poch(sl.tensor([1.0, 2.5]), 3.0)
    """
    z, m = promote_inexact("poch", z, m)
    return ew.where(ew.equal(m, 0.0), 1.0, ew.div(gamma(ew.add(z, m)), gamma(z)))


def multigammaln(a, d: int) -> Tensor:
    """log of the multivariate gamma function, d(d-1)/4 log(pi) + sum over i < d of
    gammaln(a - i/2), as jax.scipy.special.multigammaln (d a Python int).

    >>> sl.scipy.special.multigammaln(sl.tensor([3.0, 5.5]), 3)
    """
    if isinstance(d, Tensor) or isinstance(d, bool):
        raise TypeError(f"multigammaln: d must be a Python int (known now), got {d!r}")
    d = operator.index(d)
    a = real_float(a, "multigammaln")
    const = 0.25 * d * (d - 1) * math.log(math.pi)
    shifts = Tensor(np.arange(d, dtype=a.dtype) / 2)
    terms = _gamma.gammaln_p(ew.sub(reshape_p(a, shape=a.shape + (1,)), shifts))
    return ew.add(sum_p(terms, axis=(a.ndim,), keepdims=False), const)


def zeta(x, q=None) -> Tensor:
    """The Hurwitz zeta function sum over n >= 0 of (n + q)^-x, as jax.scipy.special.zeta
    (inf at x = 1 and at q = 0, -1, ..., nan for x < 1). With q=None, Riemann's zeta
    (q = 1), as SciPy (JAX raises there). Differentiable in q (-x zeta(x + 1, q)); a
    gradient with respect to x raises.

    >>> sl.scipy.special.zeta(sl.tensor([2.0, 4.0]), 1.0)  # pi**2 / 6, pi**4 / 90
    """
    x, q = promote_inexact("zeta", x, 1.0 if q is None else q)
    return _inc.zeta_p(x, q)
