"""The tape and its backward walk.

Each differentiable op records a Node (primitive, inputs, params, weak refs to its outputs).
A node's `seq` grows with execution order, so sorting the reachable nodes by seq, newest
first, is a topological order: backward is a loop, never a recursion (a 100,000-op chain
works at the default recursion limit), cotangents are popped as the walk goes, and the
visited nodes drop their inputs afterwards so the graph's memory is released.

Imports tape.state and tape.tensor. The walk needs three differentiable ops (add, sum_to,
astype); scanlib.ops installs them in OPS, so that this layer never imports the one above.
"""

from __future__ import annotations

import itertools
import types
import weakref

from .. import backends
from . import state
from .tensor import Tensor, is_differentiable_dtype, type_str

OPS = types.SimpleNamespace(add=None, sum_to=None, astype=None)

_seq = itertools.count()


class Node:
    """One recorded application of a primitive."""

    __slots__ = ("prim", "inputs", "params", "out_refs", "saved", "seq", "__weakref__")

    def __init__(self, prim, inputs, params, saved=None):
        self.prim = prim
        self.inputs = inputs
        self.params = params
        self.out_refs = None
        self.saved = saved  # values the rule needs that are not inputs/outputs (held strongly)
        self.seq = next(_seq)


def record(prim, inputs, params, out_values, trace, out_vars, saved=None):
    """Wrap raw outputs as Tensors that remember `prim` was applied to `inputs`."""
    node = Node(prim, inputs, params, saved)
    outs = [Tensor(v, is_differentiable_dtype(v.dtype), _node=node, _index=i, _trace=trace,
                   _var=None if out_vars is None else out_vars[i])
            for i, v in enumerate(out_values)]
    node.out_refs = [weakref.ref(o) for o in outs]
    return outs


_RELEASED = (
    "this result's graph was already released by an earlier backward(); tensors are freed as "
    "backward walks. Call the first backward(retain_graph=True) to walk the same graph twice, "
    "or recompute the result."
)


def fit_cotangent(g, x):
    """Undo broadcasting and promotion: the cotangent of x has x's shape and dtype (x may be
    a Tensor or a graph Var)."""
    if g.shape != x.shape:
        g = OPS.sum_to(g, x.shape)
    if g.dtype != x.dtype:
        g = OPS.astype(g, x.dtype)
    return g


def backward_pass(roots, root_cts, targets=None, *, retain_graph=False, create_graph=False):
    """Propagate cotangents from `roots` back through the tape.

    With `targets`, return a list with the cotangent reaching each target (None where no path
    exists); the walk stops at targets. Without, accumulate into `.grad` of every leaf.
    """
    target_index = None if targets is None else {id(t): i for i, t in enumerate(targets)}
    target_cts = [None] * (0 if targets is None else len(targets))
    node_cts = {}
    leaves = {}  # id -> (leaf, cotangent)

    def add_ct(x, g):
        if target_index is not None and id(x) in target_index:
            i = target_index[id(x)]
            target_cts[i] = g if target_cts[i] is None else OPS.add(target_cts[i], g)
        elif x._node is not None:
            cts = node_cts.get(x._node)
            if cts is None:
                cts = node_cts[x._node] = [None] * len(x._node.out_refs)
            old = cts[x._index]
            cts[x._index] = g if old is None else OPS.add(old, g)
        elif target_index is None:
            old = leaves.get(id(x))
            leaves[id(x)] = (x, g if old is None else OPS.add(old[1], g))

    def stops(x):
        return target_index is not None and id(x) in target_index

    # Nodes reachable from the roots, found with an explicit stack (no recursion).
    seen, stack = set(), [r._node for r in roots if r._node is not None and not stops(r)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        if node.inputs is None:
            raise RuntimeError(_RELEASED)
        seen.add(node)
        for x in node.inputs:
            if type(x) is Tensor and x.requires_grad and x._node is not None and not stops(x):
                stack.append(x._node)
    order = sorted(seen, key=lambda n: n.seq, reverse=True)

    release = not (retain_graph or create_graph)
    held = {}
    with state.enable_grad(create_graph):
        for r, g in zip(roots, root_cts):
            add_ct(r, g)
        for node in order:
            cts = node_cts.pop(node, None)
            if cts is not None:
                prim, inputs = node.prim, node.inputs
                if prim.multiple_results:
                    outs = [ref() for ref in node.out_refs]
                    in_cts = prim.vjp(cts, outs, *inputs, _saved=node.saved, **node.params)
                else:
                    in_cts = prim.vjp(cts[0], node.out_refs[0](), *inputs, **node.params)
                for x, gx in zip(inputs, in_cts):
                    if gx is not None and type(x) is Tensor and x.requires_grad:
                        add_ct(x, fit_cotangent(gx, x))
            held.pop(node, None)
            if release:
                # An input made by a later-walked node must outlive this release: that node's
                # rule may read it as its `out`.
                for x in node.inputs:
                    if type(x) is Tensor and x._node is not None:
                        held.setdefault(x._node, []).append(x)
                node.inputs = None
                node.saved = None

    if targets is not None:
        return target_cts
    for leaf, g in leaves.values():
        if not create_graph:
            g = g.detach()
        leaf.grad = g if leaf.grad is None else OPS.add(leaf.grad, g)
    return None


def tensor_backward(self, cotangent=None, *, retain_graph=False, create_graph=False):
    """Accumulate d(self)/d(leaf) into `.grad` of every leaf that requires grad.

    `self` must be a scalar unless `cotangent` (same shape) is given, as in PyTorch.
    """
    if not self.requires_grad:
        raise RuntimeError(
            "backward() was called on a tensor that does not require grad: nothing it was "
            "computed from has requires_grad=True (or it was computed under no_grad()). Create "
            "the parameters with scanlib.tensor(..., requires_grad=True)."
        )
    if cotangent is None:
        if self.size != 1:
            raise RuntimeError(
                f"backward() without a cotangent needs a scalar, but this tensor has shape "
                f"{self.shape}. Reduce it first (loss.sum() or loss.mean()) or pass a "
                f"cotangent of shape {self.shape}: loss.backward(cotangent)."
            )
        cotangent = Tensor(backends.xp_of(self._value).ones_like(self._value))
    elif not isinstance(cotangent, Tensor):
        cotangent = Tensor(backends.asarray_on(cotangent, self.device))
    if cotangent.shape != self.shape:
        raise ValueError(
            f"backward(): the cotangent has shape {cotangent.shape} but the tensor has shape "
            f"{self.shape} ({type_str(self.shape, self.dtype)}); they must match."
        )
    backward_pass([self], [cotangent], retain_graph=retain_graph, create_graph=create_graph)


Tensor.backward = tensor_backward
