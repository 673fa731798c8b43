"""scanlib.scipy.stats.multivariate_normal: logpdf and pdf through the covariance's Cholesky
factor, as jax.scipy.stats.multivariate_normal. Imports ops and linalg."""

from __future__ import annotations

import math

from ... import linalg
from ...ops import elementwise as ew
from ...ops.functions import reshape, sum as _sum
from ...ops.matrices import diagonal
from ...tape import Tensor
from ..special import promote_inexact

__all__ = ["logpdf", "pdf"]

_LOG_2PI = math.log(2.0 * math.pi)


def logpdf(x, mean, cov, allow_singular: None = None) -> Tensor:
    """log N(x; mean, cov) for x [..., n], mean [..., n] and cov [..., n, n] (batch axes
    broadcast), as jax.scipy.stats.multivariate_normal.logpdf: with L the (lower) Cholesky
    factor of cov and y = L^-1 (x - mean), -(|y|^2 + n log(2 pi)) / 2 - sum(log(diag(L))).
    A 0-d mean is the one-dimensional case, with cov its variance. allow_singular is refused,
    as in JAX.

    >>> cov = sl.tensor([[2.0, 0.5], [0.5, 1.0]])
    >>> sl.scipy.stats.multivariate_normal.logpdf(sl.tensor([0.5, -1.0]), sl.zeros(2), cov)
    """
    if allow_singular is not None:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular is not "
                                  "supported (as in JAX); leave it None")
    x, mean, cov = promote_inexact("multivariate_normal.logpdf", x, mean, cov)
    if mean.ndim == 0:
        d = ew.sub(x, mean)
        return ew.sub(ew.mul(ew.div(ew.mul(d, d), cov), -0.5),
                      ew.mul(ew.add(ew.log(cov), _LOG_2PI), 0.5))
    n = mean.shape[-1]
    if x.shape[-1:] != (n,) or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf: x {x.shape}, mean {mean.shape} and cov "
                         f"{cov.shape} must be [..., n], [..., n] and [..., n, n] with one n")
    d = ew.sub(x, mean)
    L = linalg.cholesky(cov)
    y = linalg.solve_triangular(L, reshape(d, (*d.shape, 1)), lower=True)
    y = reshape(y, y.shape[:-1])
    log_det_half = _sum(ew.log(diagonal(L, axis1=-2, axis2=-1)), axis=-1)
    return ew.sub(ew.sub(ew.mul(_sum(ew.mul(y, y), axis=-1), -0.5), n / 2 * _LOG_2PI),
                  log_det_half)


def pdf(x, mean, cov) -> Tensor:
    """exp(logpdf(x, mean, cov)), as jax.scipy.stats.multivariate_normal.pdf.

    >>> sl.scipy.stats.multivariate_normal.pdf(sl.zeros(2), sl.zeros(2), sl.eye(2))
    """
    return ew.exp(logpdf(x, mean, cov))
