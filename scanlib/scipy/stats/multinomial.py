"""scanlib.scipy.stats.multinomial: the multinomial distribution's logpmf and pmf, as
jax.scipy.stats.multinomial (the same formula, counts along x's last axis). Imports ops."""

from __future__ import annotations

import numpy as np

from ...ops import astype, exp, sum, where
from ...tape import Tensor
from ..special import gammaln, promote_inexact, xlogy

__all__ = ["logpmf", "pmf"]


def _integer_dtype(v):
    return np.dtype(v.dtype) if hasattr(v, "dtype") else np.asarray(v).dtype


def logpmf(x, n, p) -> Tensor:
    """lgamma(n + 1) + sum(x log(p) - lgamma(x + 1)) over the last axis, -inf where the counts
    do not add up to n, as jax.scipy.stats.multinomial.logpmf. x and n must be integers (as in
    JAX); the result has p's float dtype. The counts are summed along the last axis, so a batch
    of count vectors [..., K] gives one value each (JAX compares the sum of the whole x with
    n, which agrees for one vector of counts).

    >>> sl.scipy.stats.multinomial.logpmf(sl.tensor([1, 2, 0]), 3, sl.tensor([0.2, 0.5, 0.3]))
    """
    dtypes = {"x": _integer_dtype(x), "n": _integer_dtype(n)}
    if any(d.kind not in "iu" for d in dtypes.values()):
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got x.dtype="
                         f"{dtypes['x']}, n.dtype={dtypes['n']}. Pass counts as integers "
                         "(x.astype(int32))")
    p, = promote_inexact("multinomial.logpmf", p)
    x = astype(x if isinstance(x, Tensor) else Tensor(np.asarray(x)), p.dtype)
    n = astype(n if isinstance(n, Tensor) else Tensor(np.asarray(n)), p.dtype)
    log_probs = gammaln(n + 1) + sum(xlogy(x, p) - gammaln(x + 1), axis=-1)
    return where(sum(x, axis=-1) == n, log_probs, -np.inf)


def pmf(x, n, p) -> Tensor:
    """P(X = x) = exp(logpmf(x, n, p)), as jax.scipy.stats.multinomial.pmf.

    >>> sl.scipy.stats.multinomial.pmf(sl.tensor([1, 2, 0]), 3, sl.tensor([0.2, 0.5, 0.3]))
    """
    return exp(logpmf(x, n, p))
