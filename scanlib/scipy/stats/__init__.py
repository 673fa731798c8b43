"""scanlib.scipy.stats: jax.scipy.stats' distributions as modules of functions (norm.logpdf,
gamma.logpdf, poisson.logpmf, ...), and its functions mode, rankdata and sem, written with
scanlib's differentiable ops. Imports ops, nn and linalg."""

from . import (bernoulli, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm, geom, gumbel_l,
               gumbel_r, laplace, logistic, multinomial, multivariate_normal, nbinom, norm,
               pareto, poisson, t, uniform, wrapcauchy)

__all__ = ["norm", "multivariate_normal", "t", "gamma", "chi2", "cauchy", "laplace", "logistic",
           "uniform", "expon", "pareto", "gennorm", "gumbel_l", "gumbel_r", "wrapcauchy",
           "dirichlet", "poisson", "bernoulli", "binom", "geom", "nbinom", "multinomial"]
