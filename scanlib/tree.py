"""scanlib.tree: jax.tree's short names (map, leaves, structure, flatten, unflatten, reduce,
all), the same functions as scanlib.tree_util's. Imports pytree and tree_util.
"""

from __future__ import annotations

from .pytree import flatten, leaves, reduce, structure, tree_map as map, unflatten  # noqa: A004
from .tree_util import tree_all as all  # noqa: A004

__all__ = ["map", "leaves", "structure", "flatten", "unflatten", "reduce", "all"]
