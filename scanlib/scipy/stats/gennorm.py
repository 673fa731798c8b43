"""scanlib.scipy.stats.gennorm: the generalized normal distribution's logpdf, pdf and
cdf, as jax.scipy.stats.gennorm (the same formulas). Imports ops."""

from __future__ import annotations

from ...ops import abs, exp, log, power, sign
from ...tape import Tensor
from ..special import gammainc, gammaln, promote_inexact

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, beta) -> Tensor:
    """log(beta / 2) - lgamma(1 / beta) - |x|**beta, as jax.scipy.stats.gennorm.logpdf (beta =
    2 is a normal of variance 1/2, beta = 1 the Laplace distribution).

    >>> sl.scipy.stats.gennorm.logpdf(sl.tensor([0.0, 1.0]), 1.5)
    """
    x, beta = promote_inexact("gennorm.logpdf", x, beta)
    return log(beta * 0.5) - gammaln(1 / beta) - power(abs(x), beta)


def pdf(x, beta) -> Tensor:
    """The density exp(logpdf(x, beta)), as jax.scipy.stats.gennorm.pdf.

    >>> sl.scipy.stats.gennorm.pdf(sl.tensor([0.0, 1.0]), 1.5)
    """
    return exp(logpdf(x, beta))


def cdf(x, beta) -> Tensor:
    """(1 + sign(x) gammainc(1 / beta, |x|**beta)) / 2, as jax.scipy.stats.gennorm.cdf.
    Differentiable in x (to every order) and once in beta.

    >>> sl.scipy.stats.gennorm.cdf(sl.tensor([-1.0, 0.0, 2.0]), 1.5)
    """
    x, beta = promote_inexact("gennorm.cdf", x, beta)
    return (1 + sign(x) * gammainc(1 / beta, power(abs(x), beta))) * 0.5
