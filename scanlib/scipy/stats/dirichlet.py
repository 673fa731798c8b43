"""scanlib.scipy.stats.dirichlet: the Dirichlet distribution's logpdf and pdf, as
jax.scipy.stats.dirichlet (the same formula; the simplex's components along x's first axis).
Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import abs, all, concatenate, exp, reshape, sum, where
from ...tape import Tensor
from ..special import gammaln, promote_inexact, xlogy

__all__ = ["logpdf", "pdf"]


def logpdf(x, alpha) -> Tensor:
    """sum((alpha - 1) log(x)) - (sum(lgamma(alpha)) - lgamma(sum(alpha))) over x's first axis,
    as jax.scipy.stats.dirichlet.logpdf: alpha is one-dimensional [K]; x is [K, ...] or
    [K - 1, ...] (the last component is then 1 - the others' sum); -inf where x is off the
    simplex (a component <= 0, or a sum more than 1e-6 from 1).

    >>> sl.scipy.stats.dirichlet.logpdf(sl.tensor([0.2, 0.3, 0.5]), sl.tensor([1.0, 2.0, 3.0]))
    """
    x, alpha = promote_inexact("dirichlet.logpdf", x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: alpha must be one-dimensional [K]; got alpha.shape="
                         f"{alpha.shape}")
    if x.ndim == 0 or x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError(f"dirichlet.logpdf: x must have the same number of entries as alpha "
                         f"along its first axis, or one fewer; got x.shape={x.shape}, "
                         f"alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = concatenate([x, 1 - sum(x, axis=0, keepdims=True)], axis=0)
    normalizer = sum(gammaln(alpha)) - gammaln(sum(alpha))
    alpha = reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))
    log_probs = sum(xlogy(alpha - 1, x), axis=0) - normalizer
    on_simplex = all(x > 0, axis=0) & (abs(sum(x, axis=0) - 1) < 1e-6)
    return where(on_simplex, log_probs, -np.inf)


def pdf(x, alpha) -> Tensor:
    """The density exp(logpdf(x, alpha)), as jax.scipy.stats.dirichlet.pdf.

    >>> sl.scipy.stats.dirichlet.pdf(sl.tensor([0.2, 0.3]), sl.tensor([1.0, 2.0, 3.0]))
    """
    return exp(logpdf(x, alpha))
