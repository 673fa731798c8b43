"""optax.tree: the pytree arithmetic of optim.tree_utils under optax's short names (add, sub,
mul, div, scale, add_scale, vdot, sum, max, min, size, conj, real, norm, zeros_like,
ones_like, full_like, where, clip, cast, update_moment, update_moment_per_elem_norm,
update_infinity_moment, bias_correction), and the state helpers: get and set (a value by its
dict key or NamedTuple field, as `optax.tree.get(state, "learning_rate")`), cast_like, dtype
and allclose.

    lr = sl.optim.tree.get(state, "learning_rate")
    state = sl.optim.tree.set(state, learning_rate=0.01)

Imports ops, pytree and optim.tree_utils.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops, pytree
from .tree_utils import (tree_add as add, tree_add_scale as add_scale,
                         tree_bias_correction as bias_correction, tree_cast as cast,
                         tree_clip as clip, tree_conj as conj, tree_div as div,
                         tree_full_like as full_like, tree_max as max, tree_min as min,
                         tree_mul as mul, tree_norm as norm, tree_ones_like as ones_like,
                         tree_real as real, tree_scale as scale, tree_size as size,
                         tree_sub as sub, tree_sum as sum,
                         tree_update_infinity_moment as update_infinity_moment,
                         tree_update_moment as update_moment,
                         tree_update_moment_per_elem_norm as update_moment_per_elem_norm,
                         tree_vdot as vdot, tree_where as where,
                         tree_zeros_like as zeros_like)

__all__ = ["add", "sub", "mul", "div", "scale", "add_scale", "vdot", "sum", "max", "min",
           "size", "conj", "real", "norm", "zeros_like", "ones_like", "full_like", "where",
           "clip", "cast", "update_moment", "update_moment_per_elem_norm",
           "update_infinity_moment", "bias_correction", "get", "set", "cast_like", "dtype",
           "allclose"]


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _matches(tree, key, found):
    """Every value in tree under key: a dict's key, a NamedTuple's field, or a NamedTuple
    whose class is called key (optax.tree.get's search), outermost first."""
    if _is_namedtuple(tree):
        if type(tree).__name__ == key:
            found.append(tree)
        for name, x in zip(tree._fields, tree):
            if name == key:
                found.append(x)
            _matches(x, key, found)
    elif isinstance(tree, dict):
        for k, x in tree.items():
            if k == key:
                found.append(x)
            _matches(x, key, found)
    elif isinstance(tree, (tuple, list)):
        for x in tree:
            _matches(x, key, found)
    return found


def _no_filtering(who: str, filtering):
    if filtering is not None:
        raise NotImplementedError(f"{who}: filtering= (a function of optax's key paths) is not "
                                  "supported; look the value up in the part of the state "
                                  "that holds it (state[1]) instead.")


def get(tree: Any, key: Any, default: Any = None, filtering: Any = None) -> Any:
    """The value in tree under key (a dict key, a NamedTuple field or a NamedTuple's class
    name), default where there is none, a KeyError where there are several, as
    optax.tree.get.

    >>> state = sl.optim.adam(0.1).init(sl.tensor([1.0]))
    >>> sl.optim.tree.get(state, "count")
    """
    _no_filtering("get", filtering)
    found = _matches(tree, key, [])
    if len(found) > 1:
        raise KeyError(f"get: found {len(found)} values for {key!r} in the tree; optax.tree.get "
                       "raises too. Look it up in the part of the tree that holds one.")
    return found[0] if found else default


def _replaced(tree, values):
    if _is_namedtuple(tree):
        new = [values[name] if name in values else _replaced(x, values)
               for name, x in zip(tree._fields, tree)]
        return type(tree)(*new)
    if isinstance(tree, dict):
        return type(tree)((k, values[k] if k in values else _replaced(x, values))
                          for k, x in tree.items())
    if isinstance(tree, (tuple, list)):
        return type(tree)(_replaced(x, values) for x in tree)
    return tree


def set(tree: Any, filtering: Any = None, /, **values: Any) -> Any:  # noqa: A001
    """A copy of tree with the values under each key of `values` (dict keys and NamedTuple
    fields, wherever they are) replaced, as optax.tree.set; a KeyError if a key is nowhere.

    >>> state = sl.optim.adam(0.1).init(sl.tensor([1.0]))
    >>> sl.optim.tree.set(state, count=sl.tensor(3, dtype="int32"))[0].count
    """
    _no_filtering("set", filtering)
    for key in values:
        if not _matches(tree, key, []):
            raise KeyError(f"set: found no value for {key!r} in the tree.")
    return _replaced(tree, values)


def cast_like(tree: Any, other_tree: Any) -> Any:
    """Each leaf of tree cast to the dtype of other_tree's leaf at the same place, as
    optax.tree.cast_like.

    >>> sl.optim.tree.cast_like({"w": sl.ones(2)}, {"w": sl.zeros(2, dtype="float32")})
    """
    leaves, treedef = pytree.flatten(tree)
    others = pytree.leaves(other_tree)
    if len(others) != len(leaves):
        raise TypeError(f"cast_like: the trees have {len(leaves)} and {len(others)} leaves; "
                        "they must have one structure.")
    return pytree.unflatten(treedef, [ops.as_tensor(x).astype(np.dtype(o.dtype))
                                      for x, o in zip(leaves, others)])


def dtype(tree: Any, mixed_dtype_handler: str | None = None) -> Any:
    """The dtype the leaves share, as optax.tree.dtype; with mixed dtypes an error, or with
    mixed_dtype_handler="promote" their promoted dtype.

    >>> sl.optim.tree.dtype({"w": sl.ones(2), "b": sl.zeros(1)})
    """
    dtypes = [np.dtype(ops.as_tensor(x).dtype) for x in pytree.leaves(tree)]
    if not dtypes:
        return np.dtype(np.float64)
    if all(d == dtypes[0] for d in dtypes):
        return dtypes[0]
    if mixed_dtype_handler == "promote":
        return np.result_type(*dtypes)
    if mixed_dtype_handler is None:
        names = sorted({str(d) for d in dtypes})
        raise ValueError(f"dtype: the leaves have several dtypes {names}; pass "
                         "mixed_dtype_handler='promote' for their promoted dtype.")
    raise NotImplementedError(f"dtype: mixed_dtype_handler={mixed_dtype_handler!r} is not "
                              "supported; use None or 'promote'.")


def allclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8,
             equal_nan: bool = False) -> bool:
    """Whether the two trees have one structure and their leaves are all close, as
    optax.tree.allclose.

    >>> sl.optim.tree.allclose({"w": sl.ones(2)}, {"w": sl.ones(2) + 1e-9})
    """
    la, ta = pytree.flatten(a)
    lb, tb = pytree.flatten(b)
    if ta != tb:
        return False
    return all(np.allclose(ops.as_tensor(x).numpy(), ops.as_tensor(y).numpy(), rtol=rtol,
                           atol=atol, equal_nan=equal_nan) for x, y in zip(la, lb))
