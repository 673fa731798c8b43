"""scanlib.linalg: linear algebra as jax.numpy.linalg and jax.scipy.linalg spell it (being
written).

Imports ops.
"""

from __future__ import annotations

__all__: list[str] = []
