"""scanlib.scipy: jax.scipy's modules, special, stats and linalg, with JAX's names and
meanings (upper Cholesky factors by default in scipy.linalg, as SciPy and JAX)."""

from . import linalg, special, stats

__all__ = ["special", "stats", "linalg"]
