"""optax.tree_utils: arithmetic on pytrees of Tensors or arrays, leaf by leaf, under optax's
names (tree_add, tree_sub, tree_mul, tree_div, tree_scale, tree_add_scale, tree_vdot,
tree_sum, tree_norm, tree_max, tree_zeros_like, tree_full_like, tree_where, tree_clip,
tree_update_moment, tree_bias_correction, ...), and the older names optax keeps
(tree_scalar_mul, tree_add_scalar_mul, tree_l2_norm, tree_l1_norm, tree_linf_norm). Each is
differentiable, as scanlib's ops are.

Imports tape, ops and pytree.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from .. import ops, pytree


__all__ = ["tree_add", "tree_sub", "tree_mul", "tree_div", "tree_scale", "tree_scalar_mul",
           "tree_add_scale", "tree_add_scalar_mul", "tree_vdot", "tree_sum", "tree_max",
           "tree_min", "tree_size", "tree_conj", "tree_real", "tree_norm", "tree_l2_norm",
           "tree_l1_norm", "tree_linf_norm", "tree_zeros_like", "tree_ones_like",
           "tree_full_like", "tree_where", "tree_clip", "tree_cast", "tree_update_moment",
           "tree_update_moment_per_elem_norm", "tree_update_infinity_moment",
           "tree_bias_correction"]


def _t(x):
    return ops.as_tensor(x)


def _map(fn, *trees):
    return pytree.tree_map(lambda *xs: fn(*map(_t, xs)), *trees)


def _reduce(fn, values, initial):
    out = initial
    for v in values:
        out = fn(out, v)
    return out


def tree_add(tree_x: Any, tree_y: Any, *other_trees: Any) -> Any:
    """x + y (+ ...), leaf by leaf.

    >>> sl.optim.tree_utils.tree_add({"w": sl.tensor([1.0])}, {"w": sl.tensor([2.0])})
    """
    return _map(lambda *xs: _reduce(lambda a, b: a + b, xs[1:], xs[0]), tree_x, tree_y,
                *other_trees)


def tree_sub(tree_x: Any, tree_y: Any) -> Any:
    """x - y, leaf by leaf.

    >>> sl.optim.tree_utils.tree_sub({"w": sl.tensor([3.0])}, {"w": sl.tensor([1.0])})
    """
    return _map(lambda x, y: x - y, tree_x, tree_y)


def tree_mul(tree_x: Any, tree_y: Any) -> Any:
    """x * y, leaf by leaf.

    >>> sl.optim.tree_utils.tree_mul({"w": sl.tensor([3.0])}, {"w": sl.tensor([2.0])})
    """
    return _map(lambda x, y: x * y, tree_x, tree_y)


def tree_div(tree_x: Any, tree_y: Any) -> Any:
    """x / y, leaf by leaf.

    >>> sl.optim.tree_utils.tree_div({"w": sl.tensor([3.0])}, {"w": sl.tensor([2.0])})
    """
    return _map(lambda x, y: x / y, tree_x, tree_y)


def tree_scale(scalar, tree: Any) -> Any:
    """scalar * x for each leaf x.

    >>> sl.optim.tree_utils.tree_scale(0.5, {"w": sl.tensor([3.0])})
    """
    return _map(lambda x: scalar * x, tree)


tree_scalar_mul = tree_scale


def tree_add_scale(tree_x: Any, scalar, tree_y: Any) -> Any:
    """x + scalar * y, leaf by leaf.

    >>> sl.optim.tree_utils.tree_add_scale({"w": sl.tensor([1.0])},
    ...     0.5, {"w": sl.tensor([2.0])})
    """
    return _map(lambda x, y: x + scalar * y, tree_x, tree_y)


tree_add_scalar_mul = tree_add_scale


def tree_vdot(tree_x: Any, tree_y: Any):
    """The sum over leaves of vdot(x, y) (x conjugated), a 0-d Tensor (0 for empty trees).

    >>> sl.optim.tree_utils.tree_vdot({"w": sl.tensor([1.0, 2.0])},
    ...     {"w": sl.tensor([3.0, 4.0])})
    """
    vdots = [ops.vdot(_t(x), _t(y)) for x, y in
             zip(pytree.leaves(tree_x), pytree.leaves(tree_y))]
    return _reduce(lambda a, b: a + b, vdots, 0)


def tree_sum(tree: Any):
    """The sum of every element of every leaf.

    >>> sl.optim.tree_utils.tree_sum({"a": sl.tensor([1.0, 2.0]), "b": sl.tensor(3.0)})
    """
    return _reduce(lambda a, b: a + b, [ops.sum(_t(x)) for x in pytree.leaves(tree)], 0)


def tree_max(tree: Any):
    """The largest element of all leaves (-inf for an empty tree).

    >>> sl.optim.tree_utils.tree_max({"a": sl.tensor([1.0, 2.0]), "b": sl.tensor(-3.0)})
    """
    maxes = [ops.max(_t(x)) for x in pytree.leaves(tree) if _t(x).size]
    return _reduce(ops.maximum, maxes, -math.inf)


def tree_min(tree: Any):
    """The smallest element of all leaves (inf for an empty tree).

    >>> sl.optim.tree_utils.tree_min({"a": sl.tensor([1.0, 2.0]), "b": sl.tensor(-3.0)})
    """
    mins = [ops.min(_t(x)) for x in pytree.leaves(tree) if _t(x).size]
    return _reduce(ops.minimum, mins, math.inf)


def tree_size(tree: Any) -> int:
    """The number of elements of all leaves.

    >>> sl.optim.tree_utils.tree_size({"a": sl.ones((2, 3)), "b": sl.ones(4)})
    """
    return builtins.sum(int(np.prod(_t(x).shape)) for x in pytree.leaves(tree))


def tree_conj(tree: Any) -> Any:
    """conj(x) for each leaf.

    >>> sl.optim.tree_utils.tree_conj({"a": sl.tensor([1.0 + 2.0j])})
    """
    return _map(ops.conj, tree)


def tree_real(tree: Any) -> Any:
    """real(x) for each leaf.

    >>> sl.optim.tree_utils.tree_real({"a": sl.tensor([1.0 + 2.0j])})
    """
    return _map(ops.real, tree)


def _square(x):
    return ops.square(ops.real(x)) + ops.square(ops.imag(x)) if np.iscomplexobj(
        np.empty(0, x.dtype)) else ops.square(x)


def tree_norm(tree: Any, ord=None, squared: bool = False):
    """The norm of all leaves together, as one vector: L2 (ord None or 2), L1 (1) or the
    largest magnitude ('inf', inf); squared gives its square.

    >>> sl.optim.tree_utils.tree_norm({"a": sl.tensor([3.0]), "b": sl.tensor([4.0])})
    """
    if ord is None or ord == 2:
        sq = tree_sum(_map(_square, tree))
        return ops.as_tensor(sq) if squared else ops.sqrt(ops.as_tensor(sq))
    if ord == 1:
        out = tree_sum(_map(ops.abs, tree))
    elif ord in ("inf", "infinity") or ord == math.inf:
        out = tree_max(_map(ops.abs, tree))
    else:
        raise ValueError(f"tree_norm: unsupported ord {ord!r}; use None/2, 1 or 'inf'")
    out = ops.as_tensor(out)
    return _square(out) if squared else out


def tree_l2_norm(tree: Any, squared: bool = False):
    """tree_norm(tree, 2, squared).

    >>> sl.optim.tree_utils.tree_l2_norm({"a": sl.tensor([3.0]), "b": sl.tensor([4.0])})
    """
    return tree_norm(tree, 2, squared)


def tree_l1_norm(tree: Any):
    """tree_norm(tree, 1).

    >>> sl.optim.tree_utils.tree_l1_norm({"a": sl.tensor([3.0]), "b": sl.tensor([-4.0])})
    """
    return tree_norm(tree, 1)


def tree_linf_norm(tree: Any):
    """tree_norm(tree, 'inf').

    >>> sl.optim.tree_utils.tree_linf_norm({"a": sl.tensor([3.0]), "b": sl.tensor([-4.0])})
    """
    return tree_norm(tree, "inf")


def tree_zeros_like(tree: Any, dtype=None) -> Any:
    """Zeros shaped like each leaf (of its dtype, or dtype).

    >>> sl.optim.tree_utils.tree_zeros_like({"w": sl.ones(2)})
    """
    return _map(lambda x: ops.zeros_like(x, dtype=dtype), tree)


def tree_ones_like(tree: Any, dtype=None) -> Any:
    """Ones shaped like each leaf.

    >>> sl.optim.tree_utils.tree_ones_like({"w": sl.zeros(2)})
    """
    return _map(lambda x: ops.ones_like(x, dtype=dtype), tree)


def tree_full_like(tree: Any, fill_value, dtype=None) -> Any:
    """fill_value shaped like each leaf.

    >>> sl.optim.tree_utils.tree_full_like({"w": sl.zeros(2)}, 0.5)
    """
    return _map(lambda x: ops.full_like(x, fill_value, dtype=dtype), tree)


def tree_where(condition, tree_x: Any, tree_y: Any) -> Any:
    """where(condition, x, y), leaf by leaf.

    >>> sl.optim.tree_utils.tree_where(True, {"w": sl.ones(2)}, {"w": sl.zeros(2)})
    """
    return _map(lambda x, y: ops.where(condition, x, y), tree_x, tree_y)


def tree_clip(tree: Any, min_value=None, max_value=None) -> Any:
    """clip(x, min_value, max_value) for each leaf.

    >>> sl.optim.tree_utils.tree_clip({"w": sl.tensor([-2.0, 0.5, 3.0])}, -1.0, 1.0)
    """
    return _map(lambda x: ops.clip(x, min_value, max_value), tree)


def tree_cast(tree: Any, dtype=None) -> Any:
    """Each floating leaf cast to dtype (None: unchanged).

    >>> sl.optim.tree_utils.tree_cast({"w": sl.ones(2)}, "float32")
    """
    if dtype is None:
        return tree
    return _map(lambda x: x.astype(dtype), tree)


def tree_update_moment(updates: Any, moments: Any, decay, order: int) -> Any:
    """(1 - decay) * g ** order + decay * t, leaf by leaf: an exponential moving average.

    >>> sl.optim.tree_utils.tree_update_moment({"w": sl.tensor([2.0])},
    ...     {"w": sl.tensor([1.0])}, 0.9, 2)
    """
    return _map(lambda g, t: (1 - decay) * (g * g if order == 2 else g ** order) + decay * t,
                updates, moments)


def tree_update_moment_per_elem_norm(updates: Any, moments: Any, decay, order: int) -> Any:
    """tree_update_moment of |g| (the modulus for complex g).

    >>> sl.optim.tree_utils.tree_update_moment_per_elem_norm({"w": sl.tensor([-2.0])},
    ...     {"w": sl.tensor([1.0])}, 0.9, 1)
    """
    return _map(lambda g, t: (1 - decay) * (_square(g) if order == 2 else
                                            ops.abs(g) ** order) + decay * t,
                updates, moments)


def tree_update_infinity_moment(updates: Any, moments: Any, decay, eps) -> Any:
    """max(|g| + eps, decay * t), leaf by leaf.

    >>> sl.optim.tree_utils.tree_update_infinity_moment({"w": sl.tensor([-2.0])},
    ...     {"w": sl.tensor([3.0])}, 0.9, 1e-8)
    """
    return _map(lambda g, t: ops.maximum(ops.abs(g) + eps, decay * t), updates, moments)


def tree_bias_correction(moment: Any, decay, count) -> Any:
    """t / (1 - decay ** count), the correction computed in float32 (float64 for float64
    leaves) and cast to each leaf's dtype, as optax's.

    >>> sl.optim.tree_utils.tree_bias_correction({"w": sl.tensor([0.1])}, 0.9, 1)
    """
    count = _t(count)

    def correct(t):
        c = count.astype(np.promote_types(t.dtype, np.float32))
        return t / (1 - decay ** c).astype(t.dtype)

    return _map(correct, moment)



