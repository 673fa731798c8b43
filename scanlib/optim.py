"""scanlib.optim: optimisers in optax's functional shape (being written).

Imports ops and pytree.
"""

from __future__ import annotations

__all__: list[str] = []
