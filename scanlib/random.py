"""scanlib.random: JAX-style functional random keys (being written).

Imports ops.
"""

from __future__ import annotations

__all__: list[str] = []
