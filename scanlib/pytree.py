"""Pytrees (nested tuples, lists, dicts, namedtuples, None) through optree, with readable
paths such as `init['h']` or `xs[1]` for error messages.

Imports optree only; any object that is not a container (a Tensor, an array) is a leaf.
"""

from __future__ import annotations

import dataclasses
import functools

import optree

NAMESPACE = "scanlib"


def flatten(tree, is_leaf=None):
    """(leaves, treedef); None is an empty subtree, as in JAX. `is_leaf(node)`, when given,
    stops the flattening at the nodes for which it is true, as jax.tree_util.tree_flatten's.

    >>> sl.tree_util.tree_flatten({'h': sl.zeros(2), 'c': [1.0, None]})
    """
    return optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def leaves(tree, is_leaf=None) -> list:
    """The leaves of tree, left to right (dict keys sorted), as jax.tree_util.tree_leaves.

    >>> sl.tree.leaves({'b': [1.0, 2.0], 'a': 3.0, 'c': None})
    """
    return optree.tree_leaves(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def structure(tree, is_leaf=None):
    """The treedef of tree (its structure without the leaves), as
    jax.tree_util.tree_structure.

    >>> sl.tree.structure({'h': sl.zeros(2), 'c': (1.0, 2.0)})
    """
    return optree.tree_structure(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


class _NoInitializer:
    def __repr__(self):
        return "<no initializer>"


_NO_INITIALIZER = _NoInitializer()


def reduce(function, tree, initializer=_NO_INITIALIZER, is_leaf=None):
    """functools.reduce(function, leaves(tree)[, initializer]), as jax.tree_util.tree_reduce.

    An empty tree with no initializer raises TypeError, as functools.reduce does.

    >>> sl.tree.reduce(lambda a, b: a + b, {'a': 1.0, 'b': [2.0, 3.0]}, 10.0)
    """
    flat = leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(function, flat)
    return functools.reduce(function, flat, initializer)


def register_node(nodetype, flatten_func, unflatten_func):
    """Make instances of nodetype pytree nodes (scan carries, grad arguments, optimiser
    params...), as jax.tree_util.register_pytree_node: flatten_func(node) returns
    (children, aux_data) and unflatten_func(aux_data, children) rebuilds the node.

    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> _ = sl.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
    ...                                       lambda aux, children: Pair(*children))
    >>> sl.grad(lambda p: p.a * p.b)(Pair(sl.tensor(2.0), sl.tensor(3.0))).a
    """
    optree.register_pytree_node(nodetype, flatten_func, unflatten_func, namespace=NAMESPACE)
    return nodetype


def flatten_with_paths(tree, root: str):
    """(paths, leaves, treedef) with each path written like `root['h'][0]`."""
    paths, leaves, treedef = optree.tree_flatten_with_path(
        tree, none_is_leaf=False, namespace=NAMESPACE)
    return [keystr(root, p) for p in paths], leaves, treedef


def key_orders(tree, treedef):
    """The keys of every dict in tree (whose treedef is given), in insertion order and with
    their types: what a treedef leaves out (optree compares dicts with sorted keys, and
    1 == True == 1.0) but a function iterating over a dict sees; inside deques and nodes
    users registered in optree too. Hashable."""
    other_nodes = _has_other_nodes(treedef)
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys = tuple(node)
            out.append((keys, tuple(map(type, keys))))
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        elif other_nodes and node is not None:
            try:
                stack.extend(optree.tree_flatten_one_level(node, none_is_leaf=False,
                                                           namespace=NAMESPACE)[0])
            except ValueError:  # a leaf
                pass
    return tuple(out)


_PLAIN_KINDS = frozenset({optree.PyTreeKind.LEAF, optree.PyTreeKind.NONE,
                          optree.PyTreeKind.TUPLE, optree.PyTreeKind.LIST,
                          optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT,
                          optree.PyTreeKind.DEFAULTDICT, optree.PyTreeKind.NAMEDTUPLE,
                          optree.PyTreeKind.STRUCTSEQUENCE})


_MAPPING_KINDS = frozenset({optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT,
                            optree.PyTreeKind.DEFAULTDICT})


@functools.lru_cache(maxsize=1024)
def has_key_orders(treedef) -> bool:
    """Whether key_orders can say anything of a tree with this treedef: it has a dict, or a
    node other than tuples, lists and None."""
    return treedef.kind in _MAPPING_KINDS or _has_other_nodes(treedef) or any(
        has_key_orders(c) for c in treedef.children())


@functools.lru_cache(maxsize=1024)
def _has_other_nodes(treedef) -> bool:
    """Whether treedef has a node other than tuples, lists, dicts and None (a deque, a node
    registered by a user), which key_orders must then open one level at a time."""
    return treedef.kind not in _PLAIN_KINDS or any(
        _has_other_nodes(c) for c in treedef.children())


def keystr(root: str, path) -> str:
    """A path as written in error messages: `keystr("init", ("h", 0))` is `init['h'][0]`
    (a node registered with keys gives its keys' own text: `init.w`)."""
    return root + "".join(str(k) if isinstance(k, KEY_TYPES) else f"[{k!r}]" for k in path)


# --- JAX's key types (scanlib.tree_util's), which nodes registered with keys give ---------
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The key of an item of a tuple or list: `[0]`, as jax.tree_util.SequenceKey.

    >>> str(sl.tree_util.SequenceKey(0)), sl.tree_util.SequenceKey(0)
    """
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """The key of a dict's value: `['h']`, as jax.tree_util.DictKey.

    >>> str(sl.tree_util.DictKey('h')), sl.tree_util.DictKey('h')
    """
    key: object

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The key of an attribute (a namedtuple's field, a dataclass'): `.h`, as
    jax.tree_util.GetAttrKey.

    >>> str(sl.tree_util.GetAttrKey('h')), sl.tree_util.GetAttrKey('h')
    """
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The key of the i-th child of a node registered without keys: `[<flat index 0>]`, as
    jax.tree_util.FlattenedIndexKey.

    >>> str(sl.tree_util.FlattenedIndexKey(0)), sl.tree_util.FlattenedIndexKey(0)
    """
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


KEY_TYPES = (SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey)


def unflatten(treedef, leaves):
    """The tree of treedef's structure with these leaves: the inverse of flatten, as
    jax.tree_util.tree_unflatten.

    >>> leaves, treedef = sl.tree_util.tree_flatten({'h': 1.0, 'c': [2.0, 3.0]})
    >>> sl.tree_util.tree_unflatten(treedef, [x * 10 for x in leaves])
    """
    return optree.tree_unflatten(treedef, list(leaves))


def leaf_names(tree, root: str):
    """Identifier-like names for the leaves (`params_W`), used as hints in printed graphs."""
    paths, _, _ = optree.tree_flatten_with_path(tree, none_is_leaf=False, namespace=NAMESPACE)
    out = []
    for p in paths:
        name = "_".join([root] + [str(k) for k in p])
        out.append(name if name.isidentifier() else None)
    return out


def structure_str(treedef) -> str:
    """`(*, {'h': *})` for a treedef: the PyTreeSpec(...) wrapper and namespace dropped."""
    text = str(treedef)
    if text.startswith("PyTreeSpec(") and text.endswith(")"):
        text = text[len("PyTreeSpec("):-1]
    return text.split(", namespace=")[0]


def tree_map(fn, tree, *rest, is_leaf=None):
    """fn applied leaf by leaf to trees of one structure (None stays an empty subtree), as
    jax.tree_util.tree_map.

    >>> sl.tree.map(lambda a, b: a + b, {'h': 1.0, 'c': (2.0, None)},
    ...             {'h': 10.0, 'c': (20.0, None)})
    """
    return optree.tree_map(fn, tree, *rest, is_leaf=is_leaf, none_is_leaf=False,
                           namespace=NAMESPACE)
