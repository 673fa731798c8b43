"""`vmap(f, in_axes, out_axes)`: JAX's vectorising map. f is traced once on one example's
shapes; its graph then runs on the whole batch by vmap's interpreter
(interpreters/batching.py), each equation through its primitive's batching rule, so that the
result is differentiable, traceable and vmappable again. This module is the API: axes,
their checks, and placing the outputs.

Imports backends, tape, ops, pytree, tracing and the interpreters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import functools

import numpy as np
import optree

from . import backends, pytree
from .interpreters.batching import FALLBACKS, evaluate, move_axis  # noqa: F401 (FALLBACKS:
# {primitive name: equations run once per example}, read by tests as scanlib.vmap.FALLBACKS)
from .ops.functions import as_tensor
from .ops.structural import broadcast_to_p
from .tape import Tensor
from .tracing import abstract_leaf, closure_names, trace_function

if TYPE_CHECKING:
    from .tape.types import PyTree

__all__ = ["vmap"]

def vmap(f: Callable[..., Any], in_axes: PyTree = 0, out_axes: PyTree = 0,
         axis_name: str | None = None, axis_size: int | None = None,
         spmd_axis_name: str | None = None) -> Callable[..., Any]:
    """Vectorise f over a batch axis, like `jax.vmap`: `vmap(f)(xs)` is `stack([f(x) for x in
    xs])`, computed as one batched program.

    `in_axes` says which axis of each argument is the batch axis: an int, None (not mapped:
    every example sees the whole argument), or a tuple with one entry per positional
    argument, each entry a tree prefix of its argument (an int or None for a whole subtree).
    Negative axes count from the end. Keyword arguments are mapped along axis 0. `out_axes`
    places the batch axis in each output the same way (None only for an output that does
    not depend on a mapped input). `axis_size` gives the batch size when no input is mapped.
    f is traced once per call, so use scanlib ops and no Python control flow on mapped values
    inside it; grad, scan and vmap compose with it in any order.

    >>> import scanlib as sl
    >>> W = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> sl.vmap(lambda x: W @ x)(sl.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])).shape
    (3, 2)
    """
    if not callable(f):
        raise TypeError(f"vmap: f must be callable, got {type(f).__name__}")
    if axis_name is not None or spmd_axis_name is not None:
        raise NotImplementedError("vmap: axis_name and spmd_axis_name (named axes for "
                                  "collectives) are not supported; leave them None.")
    if axis_size is not None and (not isinstance(axis_size, (int, np.integer))
                                  or isinstance(axis_size, bool) or axis_size < 0):
        raise TypeError(f"vmap: axis_size must be a non-negative int, got {axis_size!r}")
    in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes  # as JAX allows
    _check_axes_tree(in_axes, "in_axes")
    _check_axes_tree(out_axes, "out_axes")

    @functools.wraps(f)
    def batched(*args, **kwargs):
        return _call(f, in_axes, out_axes, axis_size, args, kwargs)

    return batched


# --- axes: checks and broadcasting against the arguments -----------------------------------------
def _check_axes_tree(axes, what):
    for leaf in optree.tree_leaves(axes, none_is_leaf=True, namespace=pytree.NAMESPACE):
        if leaf is not None and (not isinstance(leaf, (int, np.integer)) or isinstance(leaf, bool)):
            raise TypeError(f"vmap: {what} must be an int, None, or a (nested) tuple, list or "
                            f"dict of them, got {axes!r} (which holds {leaf!r})")


def _leaf_axes(axes, tree, root, what):
    """(paths, leaves, axis per leaf) for the leaves of tree, with axes a tree prefix of it
    (None in axes is a leaf: not mapped; None in tree is an empty subtree)."""
    try:
        full = optree.tree_broadcast_prefix(axes, tree, none_is_leaf=True,
                                            namespace=pytree.NAMESPACE)
    except ValueError as e:
        raise ValueError(
            f"vmap: {what} must be a tree prefix of {root} (one int or None for a whole "
            f"subtree), but {what}={axes!r} does not fit {root}, whose structure is "
            f"{pytree.structure_str(pytree.flatten(tree)[1])}: {e}") from None
    paths, leaves, _ = optree.tree_flatten_with_path(tree, none_is_leaf=True,
                                                     namespace=pytree.NAMESPACE)
    flat_axes = optree.tree_leaves(full, none_is_leaf=True, namespace=pytree.NAMESPACE)
    kept = [(pytree.keystr(root, p), x, a) for p, x, a in zip(paths, leaves, flat_axes)
            if x is not None]
    return [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]


def _normalized_axis(axis, ndim, path, what):
    if not -ndim <= axis < ndim:
        raise ValueError(f"vmap: {what}={axis} is out of range for {path}, which has "
                         f"{ndim} axes (valid: {-ndim} to {ndim - 1})" if ndim else
                         f"vmap: {path} is 0-d, so it has no axis {axis} to map over; give it "
                         f"{what}=None to pass it whole to every example")
    return int(axis) % ndim


def _batch_size(paths, leaves, axes, axis_size):
    sizes = [(p, x.shape[a], a) for p, x, a in zip(paths, leaves, axes) if a is not None]
    if not sizes:
        if axis_size is None:
            raise ValueError("vmap: no argument is mapped (every in_axes entry is None), so "
                             "pass axis_size=B to say how many examples to make.")
        return int(axis_size)
    B = sizes[0][1]
    bad = [s for s in sizes if s[1] != B]
    if bad or (axis_size is not None and axis_size != B):
        listing = "; ".join(f"{p} has size {n} along axis {a}" for p, n, a in sizes)
        given = f" but axis_size={axis_size}" if axis_size is not None and not bad else ""
        raise ValueError(f"vmap: the mapped axes must all have one size{given}: {listing}. "
                         "Give every mapped input the same batch size, or in_axes=None "
                         "for one that is shared.")
    return B


# --- the call ----------------------------------------------------------------------------------
def _call(f, in_axes, out_axes, axis_size, args, kwargs):
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
        raise ValueError(f"vmap: in_axes has {len(in_axes)} entries but f was called with "
                         f"{len(args)} positional arguments; give one entry per argument, or "
                         "one int or None for all of them")
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    paths, leaves, leaf_axes = _leaf_axes((axes, 0), (args, kwargs), "args", "in_axes")
    paths = [_readable(p, len(args)) for p in paths]
    mapped = [i for i, a in enumerate(leaf_axes) if a is not None]
    infos = {}
    for i in mapped:
        if not (isinstance(leaves[i], Tensor) or backends.is_array(leaves[i])):
            raise TypeError(f"vmap: {paths[i]} is a {type(leaves[i]).__name__}, which has no "
                            "axis to map over; give it in_axes=None, or pass an array")
        infos[i] = abstract_leaf(leaves[i], paths[i])
        leaf_axes[i] = _normalized_axis(leaf_axes[i], len(infos[i][0]), paths[i], "in_axes")
    B = _batch_size(paths, leaves, leaf_axes, axis_size)
    avals = [(_drop(infos[i][0], leaf_axes[i]), infos[i][1]) for i in mapped]
    devices = {infos[i][2] for i in mapped}
    tree = pytree.flatten((args, kwargs))[1]

    def per_example(tracers):
        filled = list(leaves)
        for i, t in zip(mapped, tracers):
            filled[i] = t
        a, k = pytree.unflatten(tree, filled)
        return f(*a, **k)

    graph, out_tree, _ = trace_function(
        per_example, avals, pytree.flatten([0] * len(mapped))[1],
        device=devices.pop() if len(devices) == 1 else "cpu",
        name=getattr(f, "__name__", "f").replace("<lambda>", "f"),
        const_names=closure_names(f))
    inputs = [move_axis(as_tensor(leaves[i]), leaf_axes[i], 0) for i in mapped]
    outs, flags = evaluate(graph, inputs, [True] * len(mapped), graph.consts,
                           [False] * len(graph.consts), B)
    return _place_outputs(outs, flags, graph.outvars, out_tree, out_axes, B)


def _readable(path, n_args):
    """'args[0][1]' -> 'args[1]', 'args[1]['b']' -> "kwargs['b']": (args, kwargs) is ours."""
    if path.startswith("args[0]"):
        return "args" + path[len("args[0]"):]
    return "kwargs" + path[len("args[1]"):]


def _drop(shape, axis):
    return tuple(shape[:axis]) + tuple(shape[axis + 1:])


def _place_outputs(outs, flags, outvars, out_tree, out_axes, B):
    tree = pytree.unflatten(out_tree, list(range(len(outs))))
    paths, positions, axes = _leaf_axes(out_axes, tree, "out", "out_axes")
    placed = list(outs)
    for path, i, axis in zip(paths, positions, axes):
        x, batched = outs[i], flags[i]
        if axis is None:
            if batched:
                raise ValueError(f"vmap: out_axes is None for {path}, but it depends on a "
                                 "mapped input (it differs between examples); give it an "
                                 "int out_axes")
            continue
        x = as_tensor(x)
        if not batched:
            x = broadcast_to_p(x, shape=(B,) + tuple(x.shape))
        placed[i] = move_axis(x, 0, _normalized_axis(axis, x.ndim, path, "out_axes"))
    return pytree.unflatten(out_tree, placed)
