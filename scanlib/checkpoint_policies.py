"""Saving policies for `checkpoint(f, policy=...)`, as `jax.checkpoint_policies`.

A policy is called as `policy(prim, *avals, **params)` on each equation of f's trace (prim a
scanlib Primitive, avals its inputs' shapes and dtypes, params the equation's parameters) and
returns True to keep that equation's output for the backward pass instead of computing it
again. The checkpoint then keeps f's inputs and those outputs; everything else is recomputed.
Values and gradients are the same under every policy: only memory and time change.

>>> import scanlib as sl
>>> W = sl.tensor([[0.5, -1.0], [2.0, 0.1]])
>>> f = sl.checkpoint(lambda h: sl.tanh(h @ W), policy=sl.checkpoint_policies.dots_saveable)
>>> sl.grad(lambda h: f(h).sum())(sl.ones(2)).shape
(2,)

Imports only the einsum subscripts parser from the ops (below scanlib/__init__).
"""

from __future__ import annotations

from .ops.linalg import parse_einsum

__all__ = [
    "everything_saveable", "nothing_saveable", "dots_saveable", "checkpoint_dots",
    "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
    "save_only_these_names", "save_any_names_but_these", "save_from_both_policies",
]

_DOTS = frozenset({"matmul", "einsum", "vdot"})


def everything_saveable(prim, *avals, **params) -> bool:
    """Save every output (no recomputation: the memory of no checkpoint)."""
    return True


def nothing_saveable(prim, *avals, **params) -> bool:
    """Save nothing but f's inputs (checkpoint's default)."""
    return False


def dots_saveable(prim, *avals, **params) -> bool:
    """Save the results of matrix products (matmul, vdot, einsum of two or more operands):
    the backward pass recomputes the cheap elementwise work around them, not the products."""
    return prim.name in _DOTS and (prim.name != "einsum" or len(avals) > 1)


checkpoint_dots = dots_saveable


def dots_with_no_batch_dims_saveable(prim, *avals, **params) -> bool:
    """Save the results of matrix products without batch dimensions (as JAX's dot_general
    sees them): vdot, matmul whose second operand has at most 2 dimensions (the first's
    leading axes are free, not batch, axes), and einsum of two or more operands where no
    index is shared by every operand and the output."""
    if prim.name == "vdot":
        return True
    if prim.name == "matmul":
        return len(avals[1].shape) <= 2
    if prim.name == "einsum" and len(avals) > 1:
        subs, out = parse_einsum(params["spec"], len(avals))
        return not any(all(c in s for s in subs) for c in out)
    return False


checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def save_only_these_names(*names):
    """Save exactly the values marked with `checkpoint_name(x, name)` for these names."""
    wanted = frozenset(names)

    def policy(prim, *avals, **params):
        return prim.name == "checkpoint_name" and params["name"] in wanted
    return policy


def save_any_names_but_these(*names):
    """Save every value marked with `checkpoint_name` except those with these names."""
    unwanted = frozenset(names)

    def policy(prim, *avals, **params):
        return prim.name == "checkpoint_name" and params["name"] not in unwanted
    return policy


def save_from_both_policies(policy_1, policy_2):
    """Save what either policy saves."""
    def policy(prim, *avals, **params):
        return policy_1(prim, *avals, **params) or policy_2(prim, *avals, **params)
    return policy
