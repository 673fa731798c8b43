"""scanlib.tree: jax.tree's short names (map, leaves, structure, flatten, unflatten, reduce,
all, map_with_path, leaves_with_path, flatten_with_path, transpose, broadcast, static), the
same functions as scanlib.tree_util's. Imports pytree and tree_util.
"""

from __future__ import annotations

from .pytree import flatten, leaves, reduce, structure, tree_map as map, unflatten  # noqa: A004
from .tree_util import static
from .tree_util import tree_all as all  # noqa: A004
from .tree_util import tree_broadcast as broadcast
from .tree_util import tree_flatten_with_path as flatten_with_path
from .tree_util import tree_leaves_with_path as leaves_with_path
from .tree_util import tree_map_with_path as map_with_path
from .tree_util import tree_transpose as transpose

__all__ = ["map", "leaves", "structure", "flatten", "unflatten", "reduce", "all",
           "map_with_path", "leaves_with_path", "flatten_with_path", "transpose",
           "broadcast", "static"]
