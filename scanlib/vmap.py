"""`vmap(f, in_axes, out_axes)`: JAX's vectorising map. f is traced once on one example's
shapes; each equation then runs on the whole batch through its primitive's batching rule
(ops/batching.py, the rules the loop compiler uses), bound on Tensors so that the result is
differentiable, traceable and vmappable again. A scan becomes one scan over batched carries.

Imports backends, tape, ops, pytree, tracing and scan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import collections
import functools
import inspect

import numpy as np
import optree

from . import backends, pytree
from .ops import batching
from .ops.functions import as_tensor
from .ops.primitive import bind
from .ops.structural import broadcast_to_p, getitem_p, reshape_p, stack_p, transpose_p
from .scan.cache import canonical
from .scan.primitive import apply_scan, scan_p
from .tape import Literal, Tensor, Var
from .tape.graph import used_vars
from .tracing import abstract_leaf, closure_names, trace_function

if TYPE_CHECKING:
    from .tape.types import PyTree

__all__ = ["vmap"]

# {primitive name: equations run as a loop over the batch}: a primitive without a batching
# rule (or a case its rule declines) is still exact, only slower; tests read this.
FALLBACKS: collections.Counter = collections.Counter()


class TensorOps(batching.ArrayOps):
    """What batching rules compute with under vmap: primitives bound on Tensors."""

    loop = False

    @staticmethod
    def bind(prim, *args, **params):
        return bind(prim, *args, **params)

    @staticmethod
    def reshape(x, shape):
        return x if tuple(x.shape) == tuple(shape) else reshape_p(x, shape=tuple(shape))

    @staticmethod
    def broadcast_to(x, shape):
        return x if tuple(x.shape) == tuple(shape) else broadcast_to_p(x, shape=tuple(shape))


TENSORS = TensorOps()


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


def _move_axis(x, source, dest):
    if source == dest:
        return x
    order = [i for i in range(x.ndim) if i != source]
    order.insert(dest, source)
    return transpose_p(x, axes=tuple(order))


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
    inputs = [_move_axis(as_tensor(leaves[i]), leaf_axes[i], 0) for i in mapped]
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
        placed[i] = _move_axis(x, 0, _normalized_axis(axis, x.ndim, path, "out_axes"))
    return pytree.unflatten(out_tree, placed)


# --- the batched interpreter ---------------------------------------------------------------------
def evaluate(graph, args, flags, consts, const_flags, B):
    """(values, batched flags) of graph's outputs from Tensors args and consts, each batched
    one with the batch axis first: every equation bound on the batch by its primitive's
    batching rule, an equation with no batched input bound as it is."""
    env = dict(zip(graph.invars, zip(args, flags)))
    env.update(zip(graph.constvars, zip(consts, const_flags)))

    def read(v):
        return (v.value, False) if isinstance(v, Literal) else env[v]

    eqns, _ = used_vars(graph.eqns, graph.outvars)
    for eqn in eqns:
        values, batched = zip(*[read(v) for v in eqn.invars]) if eqn.invars else ((), ())
        if eqn.prim is scan_p:
            outs, out_flags = _scan(eqn, list(values), list(batched), B)
        elif not any(batched):
            outs = bind(eqn.prim, *values, **eqn.params)
            outs, out_flags = (outs if eqn.prim.multiple_results else [outs]), None
        else:
            outs = _batched_eqn(eqn, values, batched, B)
            out_flags = None
        if out_flags is None:
            out_flags = [any(batched)] * len(eqn.outvars)
        env.update(zip(eqn.outvars, zip(outs, out_flags)))
    pairs = [read(v) for v in graph.outvars]
    return [p[0] for p in pairs], [p[1] for p in pairs]


_TAKES_OPS: dict = {}


def _rule(prim):
    """prim's batching rule if it can run on Tensors (takes `ops`), else None."""
    rule = prim.batch
    if rule is None:
        return None
    if rule not in _TAKES_OPS:
        _TAKES_OPS[rule] = "ops" in inspect.signature(rule).parameters
    return rule if _TAKES_OPS[rule] else None


def _shapes(eqn):
    return [v.shape if isinstance(v, Var) else np.shape(v.value) for v in eqn.invars]


def _batched_eqn(eqn, values, batched, B):
    prim, shapes = eqn.prim, _shapes(eqn)
    out_shapes = [v.shape for v in eqn.outvars]
    rule = _rule(prim)
    fn = None
    if rule is not None:
        fn = rule(prim, eqn.params, list(batched), shapes,
                  out_shapes if prim.multiple_results else out_shapes[0], TENSORS)
    if fn is None:
        return _loop(eqn, values, batched, B)
    outs = fn(*values)
    outs = list(outs) if prim.multiple_results else [outs]
    for out, v in zip(outs, eqn.outvars):
        if tuple(out.shape) != (B,) + v.shape or out.dtype != v.dtype:
            raise AssertionError(
                f"vmap: the batching rule of {prim.name} gave {out.dtype}{list(out.shape)} "
                f"for a batch of {B} examples of {v.dtype}{list(v.shape)} (a bug in the rule; "
                "please report it)")
    return outs


def _loop(eqn, values, batched, B):
    """The equation once per example, stacked: exact for any primitive, and B calls."""
    FALLBACKS[eqn.prim.name] += 1
    prim = eqn.prim
    if B == 0:
        like = next(a for a, b in zip(values, batched) if b)
        xp = backends.xp_of(like._value)
        return [Tensor(xp.zeros((0,) + v.shape, v.dtype)) for v in eqn.outvars]
    per_example = []
    for i in range(B):
        args = [getitem_p(a, index=(i,)) if b else a for a, b in zip(values, batched)]
        out = bind(prim, *args, **eqn.params)
        per_example.append(out if prim.multiple_results else [out])
    return [stack_p(*column, axis=0) for column in zip(*per_example)]


# --- scan: one scan over batched carries --------------------------------------------------------
def batched_outputs(graph, flags, const_flags):
    """Which of graph's outputs depend on a batched input (the flags `evaluate` returns)."""
    batched = {v for v, f in zip(graph.invars, flags) if f}
    batched |= {v for v, f in zip(graph.constvars, const_flags) if f}
    for eqn in graph.eqns:
        ins = [v in batched for v in eqn.invars]
        if not any(ins):
            continue
        outs = _scan_flags(eqn.params, ins) if eqn.prim is scan_p else [True] * len(eqn.outvars)
        batched.update(v for v, f in zip(eqn.outvars, outs) if f)
    return [v in batched for v in graph.outvars]


def _scan_flags(params, flags):
    """Batched flags of a scan's carries and ys: a carry is batched when its init is, or when
    the body makes it so from batched inputs (repeated until nothing changes, as in JAX)."""
    nc, nx, body = params["num_carry"], params["num_xs"], params["body"]
    carry, xs, consts = flags[:nc], flags[nc:nc + nx], flags[nc + nx:]
    while True:
        out = batched_outputs(body, carry + xs, consts)
        grown = [c or o for c, o in zip(carry, out[:nc])]
        if grown == carry:
            return carry + out[nc:]
        carry = grown


def _scan(eqn, values, batched, B):
    p = eqn.params
    body, nc, nx = p["body"], p["num_carry"], p["num_xs"]
    mode = {"interpret": p.get("interpret", False), "sum_carries": p.get("sum_carries", ()),
            "compiler": p.get("compiler", "numpy")}
    if not any(batched):
        outs = apply_scan(body, values[:nc], values[nc:nc + nx], values[nc + nx:],
                          p["length"], p["reverse"], **mode)
        return outs, [False] * len(outs)
    flags = _scan_flags(p, batched)
    carry_b, xs_b, k_b, y_b = flags[:nc], batched[nc:nc + nx], batched[nc + nx:], flags[nc:]
    init = [_broadcast(x, B) if c and not b else x
            for x, c, b in zip(values[:nc], carry_b, batched[:nc])]
    xs = [_move_axis(x, 0, 1) if b else x for x, b in zip(values[nc:nc + nx], xs_b)]
    consts = values[nc + nx:]

    def step(inputs):
        outs, out_b = evaluate(body, inputs, carry_b + xs_b, consts, k_b, B)
        assert out_b[nc:] == y_b and all(c or not o for c, o in zip(carry_b, out_b[:nc]))
        return [_broadcast(o, B, v.dtype) if c and not b else o
                for o, b, c, v in zip(outs[:nc], out_b, carry_b, body.invars)] + outs[nc:]

    avals = [((B,) + v.shape if b else v.shape, v.dtype)
             for v, b in zip(body.invars, carry_b + xs_b)]
    # The device of the data, not body.device: a cached body serves every device.
    device = next(x.device for x in values if isinstance(x, Tensor))
    graph, _, _ = trace_function(step, avals, pytree.flatten([0] * len(avals))[1],
                                 device=device, hints=[v.hint for v in body.invars],
                                 name=body.name, interpret=mode["interpret"])
    outs = apply_scan(canonical(graph), init, xs, graph.consts, p["length"], p["reverse"],
                      **mode)
    ys = [_move_axis(y, 1, 0) if b else y for y, b in zip(outs[nc:], y_b)]
    return outs[:nc] + ys, carry_b + y_b


def _broadcast(x, B, dtype=None):
    """x (unbatched: the same for every example) with a batch axis in front."""
    if not isinstance(x, Tensor):
        x = Tensor(np.asarray(x, dtype))
    return broadcast_to_p(x, shape=(B,) + tuple(x.shape))
