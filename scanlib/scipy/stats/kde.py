"""scanlib.scipy.stats.gaussian_kde: a Gaussian kernel density estimate of a weighted sample,
as jax.scipy.stats.gaussian_kde (a pytree, so it goes through grad, jit, vmap and scan).
Imports ops, linalg, random and tree_util."""

from __future__ import annotations

import math

import numpy as np

from ... import linalg, random
from ...ops import (atleast_1d, atleast_2d, cov, diag, exp, full, isscalar, log, matmul, power,
                    prod, reshape, squeeze, sqrt, sum, zeros)
from ...tape import Tensor
from ...tree_util import register_pytree_node_class
from ..linalg import cho_factor, cho_solve
from ..special import logsumexp, ndtr, promote_inexact

__all__ = ["gaussian_kde"]


@register_pytree_node_class
class gaussian_kde:
    """A Gaussian kernel density estimate of dataset [d, n] (a 1-d dataset is one variable),
    as jax.scipy.stats.gaussian_kde: bw_method is 'scott' (the default), 'silverman', a
    scalar factor, or a callable of the kde; weights [n] (normalised to sum 1) default to
    1 / n. Holds dataset, weights, neff, covariance (the data's weighted covariance times the
    factor squared) and inv_cov; d and n. evaluate / __call__ / pdf and logpdf at points
    [d, m]; integrate_gaussian, integrate_box_1d, integrate_kde and resample as JAX's.

    >>> kde = sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 1.5, 3.0]))
    >>> kde.pdf(sl.tensor([0.5, 2.0]))
    """

    __slots__ = ("neff", "dataset", "weights", "covariance", "inv_cov")

    def __init__(self, dataset, bw_method=None, weights=None):
        dataset = atleast_2d(dataset)
        if np.dtype(dataset.dtype).kind == "c":
            raise NotImplementedError("gaussian_kde: complex data is not supported")
        if not dataset.size > 1:
            raise ValueError(f"gaussian_kde: dataset must have more than one element; got shape "
                             f"{dataset.shape}")
        d, n = dataset.shape
        if weights is not None:
            dataset, weights = promote_inexact("gaussian_kde", dataset, weights)
            weights = atleast_1d(weights)
            if weights.ndim != 1:
                raise ValueError(f"gaussian_kde: weights must be one-dimensional [n]; got shape "
                                 f"{weights.shape}")
            if weights.shape[0] != n:
                raise ValueError(f"gaussian_kde: weights must have length n = {n} (dataset "
                                 f"{dataset.shape} is [d, n]); got {weights.shape[0]}")
            weights = weights / sum(weights)
        else:
            dataset, = promote_inexact("gaussian_kde", dataset)
            weights = full(n, 1.0 / n, dtype=dataset.dtype)
        self.dataset, self.weights = dataset, weights
        self.neff = 1 / sum(weights ** 2)
        bw_method = "scott" if bw_method is None else bw_method
        if isinstance(bw_method, str) and bw_method == "scott":
            factor = power(self.neff, -1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = power(self.neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif isscalar(bw_method) and not isinstance(bw_method, str) or (
                isinstance(bw_method, Tensor) and bw_method.ndim == 0):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError(f"gaussian_kde: bw_method must be 'scott', 'silverman', a scalar or "
                             f"a callable; got {bw_method!r}")
        data_cov = atleast_2d(cov(dataset, rowvar=True, bias=False, aweights=weights))
        self.covariance = data_cov * factor ** 2
        self.inv_cov = linalg.inv(data_cov) / factor ** 2

    def tree_flatten(self):
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        kde.neff, kde.dataset, kde.weights, kde.covariance, kde.inv_cov = children
        return kde

    @property
    def d(self) -> int:
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        return self.dataset.shape[1]

    def _reshape_points(self, points):
        points = atleast_2d(points)
        if np.dtype(points.dtype).kind == "c":
            raise NotImplementedError("gaussian_kde: complex points are not supported")
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return reshape(points, (self.d, 1))
            raise ValueError(f"gaussian_kde: points have dimension {d}, the dataset has "
                             f"dimension {self.d}; pass points as [{self.d}, m]")
        return points

    def _kernel_args(self, points):
        """log of each point's kernel weight from each data point, [m, n], unweighted."""
        points = self._reshape_points(points)
        data, xi, precision = promote_inexact("gaussian_kde", self.dataset, points,
                                              self.inv_cov)
        whitening = linalg.cholesky(precision)
        p = matmul(data.T, whitening)
        x = matmul(xi.T, whitening)
        log_norm = sum(log(diag(whitening))) - 0.5 * self.d * math.log(2 * math.pi)
        diff = reshape(p, (1,) + p.shape) - reshape(x, (x.shape[0], 1, x.shape[1]))
        return log_norm - 0.5 * sum(diff * diff, axis=-1)

    def evaluate(self, points) -> Tensor:
        """The estimated density at points [d, m] (a 1-d array for d = 1), as
        jax.scipy.stats.gaussian_kde.evaluate.

        >>> sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 3.0])).evaluate(sl.tensor([1.0]))
        """
        return sum(self.weights * exp(self._kernel_args(points)), axis=1)

    def __call__(self, points) -> Tensor:
        return self.evaluate(points)

    def pdf(self, x) -> Tensor:
        """evaluate(x), as jax.scipy.stats.gaussian_kde.pdf.

        >>> sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 3.0])).pdf(sl.tensor([1.0]))
        """
        return self.evaluate(x)

    def logpdf(self, x) -> Tensor:
        """log of the density at x, through logsumexp (finite far in the tails), as
        jax.scipy.stats.gaussian_kde.logpdf.

        >>> sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 3.0])).logpdf(sl.tensor([100.0]))
        """
        return logsumexp(log(self.weights) + self._kernel_args(x), axis=1)

    def _convolve(self, chol, targets, weights, means):
        """norm * sum_j weights_j N(targets_j; means_i, chol's matrix) for each column i of
        means [d, k], as JAX's _gaussian_kernel_convolve."""
        c = chol[0]
        norm = 1.0 / (math.sqrt(2 * math.pi) ** self.d * prod(diag(c)))
        diff = reshape(targets, (self.d, 1, -1)) - reshape(means, (self.d, -1, 1))
        flat = reshape(diff, (self.d, -1))
        alpha = reshape(cho_solve(chol, flat), diff.shape)
        arg = 0.5 * sum(diff * alpha, axis=0)
        return norm * sum(exp(-arg) * weights, axis=-1)

    def integrate_gaussian(self, mean, cov) -> Tensor:
        """The integral of the density times the Gaussian N(mean, cov), as
        jax.scipy.stats.gaussian_kde.integrate_gaussian.

        >>> kde = sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 3.0]))
        >>> kde.integrate_gaussian(sl.tensor([0.5]), sl.tensor([[2.0]]))
        """
        mean = atleast_1d(squeeze(mean))
        cov = atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"gaussian_kde.integrate_gaussian: mean must be [{self.d}]; got "
                             f"shape {mean.shape}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"gaussian_kde.integrate_gaussian: cov must be [{self.d}, "
                             f"{self.d}]; got shape {cov.shape}")
        chol = cho_factor(self.covariance + cov)
        return self._convolve(chol, self.dataset, self.weights, reshape(mean, (self.d, 1)))[0]

    def integrate_box_1d(self, low, high) -> Tensor:
        """The density's mass between the scalars low and high, for a one-variable kde, as
        jax.scipy.stats.gaussian_kde.integrate_box_1d.

        >>> sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 3.0])).integrate_box_1d(0.0, 1.0)
        """
        if self.d != 1:
            raise ValueError(f"gaussian_kde.integrate_box_1d: only a one-variable kde (d = 1) "
                             f"is supported; this one has d = {self.d}")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("gaussian_kde.integrate_box_1d: low and high must be scalars")
        sigma = squeeze(sqrt(self.covariance))
        lo = squeeze((low - self.dataset) / sigma)
        hi = squeeze((high - self.dataset) / sigma)
        return sum(self.weights * (ndtr(hi) - ndtr(lo)))

    def integrate_kde(self, other) -> Tensor:
        """The integral of the product of this density and other's, as
        jax.scipy.stats.gaussian_kde.integrate_kde.

        >>> kde = sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 3.0]))
        >>> kde.integrate_kde(sl.scipy.stats.gaussian_kde(sl.tensor([0.5, 2.0])))
        """
        if other.d != self.d:
            raise ValueError(f"gaussian_kde.integrate_kde: the kdes have dimensions {self.d} "
                             f"and {other.d}; they must be the same")
        chol = cho_factor(self.covariance + other.covariance)
        sm, lg = (self, other) if self.n < other.n else (other, self)
        result = self._convolve(chol, lg.dataset, lg.weights, sm.dataset)
        return sum(result * sm.weights)

    def resample(self, key, shape=()) -> Tensor:
        """Samples [d, *shape] from the density: a data point drawn by weight plus Gaussian
        noise of the kde's covariance, as jax.scipy.stats.gaussian_kde.resample (the same
        samples for the same key, scanlib.random's draws being JAX's).

        >>> kde = sl.scipy.stats.gaussian_kde(sl.tensor([0.0, 1.0, 3.0]))
        >>> kde.resample(sl.random.key(0), (4,)).shape
        """
        ind_key, eps_key = random.split(key)
        ind = random.choice(ind_key, self.n, shape=shape, p=self.weights)
        eps = random.multivariate_normal(eps_key, zeros(self.d, dtype=self.covariance.dtype),
                                         self.covariance, shape=shape,
                                         dtype=self.dataset.dtype).T
        return self.dataset[:, ind] + eps

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        raise NotImplementedError("gaussian_kde.integrate_box: only one-variable boxes are "
                                  "supported (as in JAX); use integrate_box_1d")

    def set_bandwidth(self, bw_method=None):
        raise NotImplementedError("gaussian_kde.set_bandwidth: changing the bandwidth is not "
                                  "supported (as in JAX); build a new gaussian_kde with "
                                  "bw_method=")
