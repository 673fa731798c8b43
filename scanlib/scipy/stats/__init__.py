"""scanlib.scipy.stats: jax.scipy.stats' distributions as modules of functions (norm.logpdf,
gamma.logpdf, poisson.logpmf, ...), gaussian_kde, and the functions mode, rankdata and sem,
written with scanlib's differentiable ops. Imports ops, nn, linalg, random and tree_util."""

from . import (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma,
               gennorm, geom, gumbel_l, gumbel_r, laplace, logistic, multinomial,
               multivariate_normal, nbinom, norm, pareto, poisson, t, truncnorm, uniform,
               vonmises, wrapcauchy)
from ._core import mode, rankdata, sem
from .kde import gaussian_kde

__all__ = ["norm", "multivariate_normal", "t", "gamma", "chi2", "cauchy", "laplace", "logistic",
           "uniform", "expon", "pareto", "gennorm", "gumbel_l", "gumbel_r", "wrapcauchy",
           "dirichlet", "poisson", "bernoulli", "binom", "geom", "nbinom", "multinomial",
           "beta", "betabinom", "truncnorm", "vonmises", "gaussian_kde", "mode", "rankdata", "sem"]
