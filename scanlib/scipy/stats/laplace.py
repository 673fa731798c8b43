"""scanlib.scipy.stats.laplace: the Laplace distribution's logpdf, pdf and cdf, as
jax.scipy.stats.laplace (the same formulas). Imports ops."""

from __future__ import annotations

from ...ops import abs, exp, log, where
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, loc=0, scale=1) -> Tensor:
    """-|x - loc| / scale - log(2 scale), as jax.scipy.stats.laplace.logpdf.

    >>> sl.scipy.stats.laplace.logpdf(sl.tensor([0.0, 1.0]), scale=2.0)
    """
    x, loc, scale = promote_inexact("laplace.logpdf", x, loc, scale)
    return -(abs(x - loc) / scale + log(scale * 2))


def pdf(x, loc=0, scale=1) -> Tensor:
    """The Laplace density exp(logpdf(x, loc, scale)), as jax.scipy.stats.laplace.pdf.

    >>> sl.scipy.stats.laplace.pdf(sl.tensor([0.0, 1.0]))
    """
    return exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """exp(z) / 2 for z = (x - loc) / scale <= 0, 1 - exp(-z) / 2 above, as
    jax.scipy.stats.laplace.cdf.

    >>> sl.scipy.stats.laplace.cdf(sl.tensor([-1.0, 0.0, 1.0]))
    """
    x, loc, scale = promote_inexact("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    return where(z <= 0, exp(z) * 0.5, 1 - exp(-z) * 0.5)
