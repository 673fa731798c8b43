"""scanlib.scipy.stats: jax.scipy.stats' distributions as modules of functions, norm and
multivariate_normal, written with scanlib's differentiable ops. Imports ops and linalg."""

from . import multivariate_normal, norm

__all__ = ["norm", "multivariate_normal"]
