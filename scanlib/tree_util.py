"""scanlib.tree_util: jax.tree_util's names (tree_map, tree_leaves, tree_flatten,
tree_unflatten, tree_structure, tree_reduce, tree_all, register_pytree_node,
register_pytree_node_class, Partial) as views onto scanlib.pytree, and the key paths
(tree_flatten_with_path, keystr, SequenceKey, ...) and registrations (register_dataclass,
register_pytree_with_keys, register_static) written here on optree's, so that
`from jax import tree_util` ports by its import alone.

Pytrees are JAX's: tuples, lists, dicts, namedtuples and None (an empty subtree), plus the
node types registered here, which every transformation (grad, scan, vmap, jit, optim) then
opens. Imports pytree (and optree) only.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Union

import optree

from . import pytree
from .pytree import KEY_TYPES as _KEYS
from .pytree import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey
from .pytree import flatten as tree_flatten
from .pytree import leaves as tree_leaves
from .pytree import reduce as tree_reduce
from .pytree import register_node as register_pytree_node
from .pytree import structure as tree_structure
from .pytree import tree_map
from .pytree import unflatten as tree_unflatten

__all__ = ["tree_map", "tree_leaves", "tree_flatten", "tree_unflatten", "tree_structure",
           "tree_reduce", "tree_all", "register_pytree_node", "register_pytree_node_class",
           "Partial", "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path",
           "keystr", "SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey",
           "register_dataclass", "register_pytree_with_keys", "register_pytree_with_keys_class",
           "register_static", "all_leaves", "tree_transpose", "tree_broadcast",
           "treedef_children", "treedef_is_leaf", "treedef_tuple", "PyTreeDef", "KeyEntry",
           "KeyPath"]

PyTreeDef = optree.PyTreeSpec  # what tree_structure returns (optree's treespec)
KeyEntry = Union[SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey, Any]  # one step of a path
KeyPath = tuple  # a path: a tuple of KeyEntry, as tree_flatten_with_path gives (jax's alias)


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


# --- key paths: JAX's key types and the functions that give them ---------------------------
_SEQUENCES = {optree.PyTreeKind.TUPLE, optree.PyTreeKind.LIST, optree.PyTreeKind.DEQUE}
_MAPPINGS = {optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT,
             optree.PyTreeKind.DEFAULTDICT}


def _key_of(entry):
    """JAX's key for one of optree's path entries."""
    kind = entry.kind
    if kind in _SEQUENCES:
        return SequenceKey(entry.entry)
    if kind in _MAPPINGS:
        return DictKey(entry.entry)
    if kind in (optree.PyTreeKind.NAMEDTUPLE, optree.PyTreeKind.STRUCTSEQUENCE):
        return GetAttrKey(entry.field)
    if isinstance(entry.entry, _KEYS):  # a node registered with keys (or a dataclass)
        return entry.entry
    return FlattenedIndexKey(entry.entry)


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """([(path, leaf), ...], treedef): each leaf with its key path, a tuple of SequenceKey,
    DictKey, GetAttrKey and FlattenedIndexKey, as jax.tree_util.tree_flatten_with_path.

    >>> pairs, treedef = sl.tree_util.tree_flatten_with_path({'h': [1.0, 2.0]})
    >>> [sl.tree_util.keystr(path) for path, _ in pairs]
    ["['h'][0]", "['h'][1]"]
    """
    if is_leaf_takes_path:
        raise NotImplementedError("tree_flatten_with_path: is_leaf_takes_path=True is not "
                                  "supported; pass is_leaf(node) of the node alone")
    accessors, leaves, treedef = optree.tree_flatten_with_accessor(
        tree, is_leaf, none_is_leaf=False, namespace=pytree.NAMESPACE)
    paths = [tuple(_key_of(e) for e in accessor) for accessor in accessors]
    return list(zip(paths, leaves)), treedef


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False) -> list:
    """[(path, leaf), ...], as jax.tree_util.tree_leaves_with_path.

    >>> sl.tree_util.tree_leaves_with_path((1.0, {'a': 2.0}))
    """
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """f(path, leaf, *leaves of rest) leaf by leaf, as jax.tree_util.tree_map_with_path.

    >>> sl.tree_util.tree_map_with_path(lambda p, x: sl.tree_util.keystr(p), {'a': [1, 2]})
    {'a': ["['a'][0]", "['a'][1]"]}
    """
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([f(path, leaf, *(o[i] for o in others))
                              for i, (path, leaf) in enumerate(pairs)])


def keystr(keys, *, simple=False, separator="") -> str:
    """A key path as a string: `['h'][0].x` (each key's str), or with simple=True the bare
    keys joined by separator (`h/0/x`), as jax.tree_util.keystr.

    >>> sl.tree_util.keystr((sl.tree_util.DictKey('h'), sl.tree_util.SequenceKey(0)))
    "['h'][0]"
    """
    if not simple:
        return separator.join(str(k) for k in keys)
    return separator.join(str(_simple(k)) for k in keys)


def _simple(k):
    if isinstance(k, SequenceKey):
        return k.idx
    if isinstance(k, (DictKey, FlattenedIndexKey)):
        return k.key
    if isinstance(k, GetAttrKey):
        return k.name
    return k


# --- registrations -------------------------------------------------------------------------
def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """Make nodetype a pytree node whose children have keys: flatten_with_keys(node) returns
    ([(key, child), ...], aux_data), as jax.tree_util.register_pytree_with_keys; the keys
    appear in key paths.

    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> _ = sl.tree_util.register_pytree_with_keys(
    ...     Pair, lambda p: (((sl.tree_util.GetAttrKey('a'), p.a),
    ...                       (sl.tree_util.GetAttrKey('b'), p.b)), None),
    ...     lambda aux, children: Pair(*children))
    """
    def flatten(node):
        pairs, aux = flatten_with_keys(node)
        pairs = list(pairs)
        return [c for _, c in pairs], aux, [k for k, _ in pairs]

    optree.register_pytree_node(nodetype, flatten, unflatten_func, namespace=pytree.NAMESPACE)
    return nodetype


def register_pytree_with_keys_class(cls):
    """Class decorator: a class with `tree_flatten_with_keys()` and a classmethod
    `tree_unflatten(aux_data, children)` becomes a keyed pytree node, as
    jax.tree_util.register_pytree_with_keys_class.

    >>> class Box:
    ...     def __init__(self, v):
    ...         self.v = v
    ...     def tree_flatten_with_keys(self):
    ...         return ((sl.tree_util.GetAttrKey('v'), self.v),), None
    ...     @classmethod
    ...     def tree_unflatten(cls, aux, children):
    ...         return cls(*children)
    >>> Box = sl.tree_util.register_pytree_with_keys_class(Box)  # or as a decorator, @...
    >>> sl.tree_util.tree_leaves_with_path(Box(1.0))
    """
    return register_pytree_with_keys(cls, lambda node: node.tree_flatten_with_keys(),
                                     cls.tree_unflatten)


def register_dataclass(nodetype, data_fields=None, meta_fields=None, drop_fields=()):
    """Make a dataclass a pytree node: data_fields are its children (keyed by GetAttrKey),
    meta_fields its static aux data, as jax.tree_util.register_dataclass. With neither
    given, the fields marked static (`sl.tree.static()`, metadata static=True) are meta and
    the other init fields are data.

    >>> from dataclasses import dataclass
    >>> class Params:
    ...     w: object
    ...     name: str = sl.tree.static(default="layer")
    >>> Params = sl.tree_util.register_dataclass(dataclass(Params))  # or decorators, @...
    >>> sl.tree_util.tree_leaves_with_path(Params(w=1.0))
    """
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; "
                            "decorate it with @dataclasses.dataclass or pass data_fields "
                            "and meta_fields")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if f.init and f.name not in meta_fields]
    elif data_fields is None or meta_fields is None:
        raise TypeError("register_dataclass: pass both data_fields and meta_fields, or "
                        "neither (to read them from the dataclass' fields)")
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init}
        missing = init - set(data_fields) - set(meta_fields) - set(drop_fields)
        if missing:
            raise ValueError(f"register_dataclass: the init fields {sorted(missing)} of "
                             f"{nodetype.__name__} are in neither data_fields nor "
                             "meta_fields (nor drop_fields)")
    keys = [GetAttrKey(name) for name in data_fields]

    def flatten(node):
        return ([getattr(node, n) for n in data_fields],
                tuple(getattr(node, n) for n in meta_fields), keys)

    def unflatten(meta, children):
        return nodetype(**dict(zip(data_fields, children)), **dict(zip(meta_fields, meta)))

    optree.register_pytree_node(nodetype, flatten, unflatten, namespace=pytree.NAMESPACE)
    return nodetype


def register_static(cls):
    """Make cls a pytree node with no leaves, its instance the aux data (static under jit,
    never traced or differentiated), as jax.tree_util.register_static. cls must be hashable.

    >>> class Name(str):
    ...     pass
    >>> Name = sl.tree_util.register_static(Name)  # or as a decorator, @...
    >>> sl.tree_util.tree_leaves([Name("a"), 1.0])
    """
    optree.register_pytree_node(cls, lambda node: ((), node), lambda node, _: node,
                                namespace=pytree.NAMESPACE)
    return cls


# --- structures ----------------------------------------------------------------------------
def all_leaves(iterable, is_leaf=None) -> bool:
    """Whether every item of iterable is a leaf (None is not: it is an empty subtree), as
    jax.tree_util.all_leaves.

    >>> sl.tree_util.all_leaves([1.0, sl.zeros(2)]), sl.tree_util.all_leaves([(1.0,)])
    (True, False)
    """
    return all(tree_structure(x, is_leaf).is_leaf() for x in iterable)


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """An outer tree of inner trees turned into an inner tree of outer trees, as
    jax.tree_util.tree_transpose (inner_treedef None: the first inner tree's structure).

    >>> outer, inner = sl.tree_util.tree_structure([0, 0]), sl.tree_util.tree_structure((0, 0))
    >>> sl.tree_util.tree_transpose(outer, inner, [(1, 2), (3, 4)])
    ([1, 3], [2, 4])
    """
    if inner_treedef is None:
        first = outer_treedef.flatten_up_to(pytree_to_transpose)[0]
        inner_treedef = tree_structure(first)
    return optree.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """prefix_tree with each of its leaves repeated over the subtree of full_tree at its
    place, as jax.tree_util.tree_broadcast (jax.tree.broadcast).

    >>> sl.tree_util.tree_broadcast([1, 2], [[3, 4], (5,)])
    [[1, 1], (2,)]
    """
    return optree.tree_broadcast_prefix(prefix_tree, full_tree, is_leaf, none_is_leaf=False,
                                        namespace=pytree.NAMESPACE)


def treedef_children(treedef) -> list:
    """The treedefs of a treedef's children, as jax.tree_util.treedef_children.

    >>> sl.tree_util.treedef_children(sl.tree_util.tree_structure((1.0, [2.0])))
    """
    return list(treedef.children())


def treedef_is_leaf(treedef) -> bool:
    """Whether a treedef is a single leaf, as jax.tree_util.treedef_is_leaf.

    >>> sl.tree_util.treedef_is_leaf(sl.tree_util.tree_structure(1.0))
    True
    """
    return treedef.is_leaf()


def treedef_tuple(treedefs):
    """The treedef of a tuple of the given treedefs, as jax.tree_util.treedef_tuple.

    >>> t = sl.tree_util.tree_structure
    >>> sl.tree_util.treedef_tuple([t(1.0), t([1.0])])
    """
    return optree.treespec_tuple(list(treedefs), none_is_leaf=False,
                                 namespace=pytree.NAMESPACE)


def static(**kwargs):
    """A dataclass field that register_dataclass makes static (aux data, not a leaf): the
    arguments of dataclasses.field, with metadata static=True, as jax.tree.static.

    >>> f = sl.tree.static(default="add")
    """
    metadata = {**kwargs.pop("metadata", {}), "static": True}
    return dataclasses.field(metadata=metadata, **kwargs)
