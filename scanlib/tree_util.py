"""scanlib.tree_util: jax.tree_util's names (tree_map, tree_leaves, tree_flatten,
tree_unflatten, tree_structure, tree_reduce, tree_all, register_pytree_node,
register_pytree_node_class, Partial) as views
onto scanlib.pytree, so that `from jax import tree_util` ports by its import alone.

Pytrees are JAX's: tuples, lists, dicts, namedtuples and None (an empty subtree), plus the
node types registered here, which every transformation (grad, scan, vmap, jit, optim) then
opens. Imports pytree only.
"""

from __future__ import annotations

import functools

from . import pytree
from .pytree import flatten as tree_flatten
from .pytree import leaves as tree_leaves
from .pytree import reduce as tree_reduce
from .pytree import register_node as register_pytree_node
from .pytree import structure as tree_structure
from .pytree import tree_map
from .pytree import unflatten as tree_unflatten

__all__ = ["tree_map", "tree_leaves", "tree_flatten", "tree_unflatten", "tree_structure",
           "tree_reduce", "tree_all", "register_pytree_node", "register_pytree_node_class",
           "Partial"]


def tree_all(tree, is_leaf=None) -> bool:
    """Whether every leaf is true, as jax.tree_util.tree_all (True for an empty tree).

    >>> sl.tree_util.tree_all({'a': True, 'b': [1, 2]})
    """
    return all(tree_leaves(tree, is_leaf))


def register_pytree_node_class(cls):
    """Class decorator: a class with a `tree_flatten()` method returning (children, aux_data)
    and a classmethod `tree_unflatten(aux_data, children)` becomes a pytree node, as
    jax.tree_util.register_pytree_node_class.

    >>> class Box:
    ...     def __init__(self, v):
    ...         self.v = v
    ...     def tree_flatten(self):
    ...         return (self.v,), None
    ...     @classmethod
    ...     def tree_unflatten(cls, aux, children):
    ...         return cls(*children)
    >>> Box = sl.tree_util.register_pytree_node_class(Box)  # or as a decorator, @...
    >>> sl.grad(lambda b: b.v ** 2)(Box(sl.tensor(3.0))).v
    """
    register_pytree_node(cls, lambda node: node.tree_flatten(), cls.tree_unflatten)
    return cls


class Partial(functools.partial):
    """functools.partial that is a pytree, as jax.tree_util.Partial: its positional and keyword
    arguments are the leaves (so they are traced, differentiated and batched), the function is
    static. It can be passed to a jitted function or ride in a scan carry.

    >>> floor_at = sl.tree_util.Partial(sl.maximum, sl.tensor([1.0, 2.0]))
    >>> sl.tree_util.tree_leaves(floor_at), floor_at(1.5)
    """

    def __new__(cls, func, *args, **kw):
        # As JAX's: a Partial of a Partial is one Partial (functools.partial flattens
        # partials too, but would lose the subclass' func).
        if isinstance(func, functools.partial):
            original = func
            func = func.func
            args = original.args + args
            kw = {**original.keywords, **kw}
        return super().__new__(cls, func, *args, **kw)


pytree.register_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]))
