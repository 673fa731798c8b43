"""The tape and its backward walk.

Each differentiable op records a Node (primitive, inputs, params, weak refs to its outputs).
A node's `seq` grows with execution order, so sorting the reachable nodes by seq, newest
first, is a topological order: backward is a loop, never a recursion (a 100,000-op chain
works at the default recursion limit), cotangents are popped as the walk goes, and the
visited nodes drop their inputs afterwards so the graph's memory is released.

Imports tape.state, tape.levels (which walk differentiates a custom rule by it) and
tape.tensor. The walk needs four differentiable ops (add, sum_to, astype, real) and
Tensor.detach of a tracer needs stop_gradient; scanlib.ops installs them in OPS, so that this
layer never imports the one above.
"""

from __future__ import annotations

import contextlib
import itertools
import types
import weakref

import numpy as np

from .. import backends
from . import levels, state
from .tensor import Tensor, is_differentiable_dtype, type_str

OPS = types.SimpleNamespace(add=None, sum_to=None, astype=None, real=None,
                            stop_gradient=None)

_seq = itertools.count()


class Node:
    """One recorded application of a primitive."""

    __slots__ = ("prim", "inputs", "params", "out_refs", "saved", "seq", "level",
                 "__weakref__")

    def __init__(self, prim, inputs, params, saved=None):
        self.prim = prim
        self.inputs = inputs
        self.params = params
        self.out_refs = None
        self.saved = saved  # values the rule needs that are not inputs/outputs (held strongly)
        self.seq = next(_seq)
        self.level = None  # the level its rule holds for, if any (levels.py)


def record(prim, inputs, params, out_values, trace, out_vars, saved=None):
    """Wrap raw outputs as Tensors that remember `prim` was applied to `inputs`."""
    node = Node(prim, inputs, params, saved)
    if prim.own_level is not None and (state.STATE.watched
                                       or state.STATE.walking is not None):
        levels.assign(node, inputs)
    # A loop (a primitive with `depends`): only the results its inputs that require grad
    # reach along its graphs' paths require grad, as in its Python loop and in JAX.
    flags = (prim.depends(params, [type(x) is Tensor and x.requires_grad for x in inputs])
             if prim.depends is not None else None)
    if len(out_values) == 1:  # the common case, without the comprehensions
        v = out_values[0]
        out = Tensor(v, (flags is None or flags[0]) and is_differentiable_dtype(v.dtype),
                     _node=node, _index=0, _trace=trace,
                     _var=None if out_vars is None else out_vars[0])
        node.out_refs = [weakref.ref(out)]
        return [out]
    flags = [True] * len(out_values) if flags is None else flags
    outs = [Tensor(v, f and is_differentiable_dtype(v.dtype), _node=node, _index=i,
                   _trace=trace, _var=None if out_vars is None else out_vars[i])
            for i, (v, f) in enumerate(zip(out_values, flags, strict=True))]
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
    if g.dtype.kind == "c" and np.dtype(x.dtype).kind != "c":
        g = OPS.real(g)  # a real input's cotangent is the real part (JAX's convention)
    if g.dtype != x.dtype:
        g = OPS.astype(g, x.dtype)
    return g


class _Cotangents:
    """Where the walk keeps cotangents: per node output, per leaf, or per target.

    When the walk is not recorded, sums go in place into arrays the walk allocated itself
    (never into one a rule returned, which may be shared), and the adjoint of indexing adds
    g into one such array instead of building a zero-padded copy per use: a loop over xs[t]
    then costs O(T), not O(T^2).
    """

    def __init__(self, targets, in_place):
        self.target_index = None if targets is None else {id(t): i for i, t in enumerate(targets)}
        self.targets = [None] * (0 if targets is None else len(targets))
        self.nodes, self.leaves = {}, {}  # node -> [ct per output]; id(leaf) -> (leaf, ct)
        # id -> the array-holding Tensor the walk allocated itself and may add into. The
        # Tensor is held, so that its id cannot be reused by another while it is listed.
        self.in_place, self.owned = in_place, {}

    def stops(self, x):
        return self.target_index is not None and id(x) in self.target_index

    def get(self, x):
        if self.stops(x):
            return self.targets[self.target_index[id(x)]]
        if x._node is not None:
            cts = self.nodes.get(x._node)
            return None if cts is None else cts[x._index]
        entry = self.leaves.get(id(x))
        return None if entry is None else entry[1]

    def _set(self, x, g):
        if self.stops(x):
            self.targets[self.target_index[id(x)]] = g
        elif x._node is not None:
            cts = self.nodes.get(x._node)
            if cts is None:
                cts = self.nodes[x._node] = [None] * len(x._node.out_refs)
            cts[x._index] = g
        elif self.target_index is None:
            self.leaves[id(x)] = (x, g)

    def add(self, x, g):
        old = self.get(x)
        if old is None:
            self._set(x, g)
        elif id(old) in self.owned and hasattr(old._value, "__iadd__") and old._value.ndim:
            old._value += g._value
        else:
            total = OPS.add(old, g)
            self.owned.pop(id(old), None)
            if self.in_place:
                self.owned[id(total)] = total
            self._set(x, total)

    def add_at(self, x, index, g):
        """ct(x)[index] += g, into an array the walk owns."""
        old = self.get(x)
        if old is None or id(old) not in self.owned:
            xp = backends.xp_of(g._value)
            buf = Tensor(xp.zeros(x.shape, x.dtype))
            if old is not None:
                buf._value += old._value
            self.owned[id(buf)] = buf
            self._set(x, buf)
            old = buf
        value = g._value
        if value.dtype.kind == "c" and np.dtype(x.dtype).kind != "c":
            value = value.real  # as fit_cotangent
        value = value.astype(x.dtype, copy=False)
        if any(not isinstance(i, (int, slice, type(None), type(Ellipsis))) for i in index):
            backends.xp_of(value).add.at(old._value, index, value)  # repeats accumulate
        else:
            old._value[index] += value

    def pop_node(self, node):
        cts = self.nodes.pop(node, None)
        if cts is not None and self.owned:
            for c in cts:  # handed to a rule now: no longer the walk's to change in place
                self.owned.pop(id(c), None)
        return cts


def reaches_other_leaves(roots, inputs):
    """Whether the graph behind `roots` reaches a leaf that requires grad other than through
    `inputs`: a closed-over parameter, say. A gradient or value derived from the roots must
    then be recorded, or a later backward() would silently miss that leaf."""
    stop = {id(x) for x in inputs}
    seen, stack = set(), [r for r in roots if type(r) is Tensor and r.requires_grad]
    while stack:
        x = stack.pop()
        if id(x) in stop:
            continue
        node = x._node
        if node is None:
            if getattr(x, "_scratch", False):  # an inner grad's own input: it has returned
                continue
            return True
        if node in seen or node.inputs is None:
            continue
        seen.add(node)
        stack.extend(i for i in node.inputs if type(i) is Tensor and i.requires_grad)
    return False


class _Watch:
    """The inputs of one running grad/vjp/jvp call (`who`), the first node number it could
    have recorded (a value made before it started cannot depend on them), and how many such
    calls enclose it (`depth`)."""

    __slots__ = ("who", "ids", "inputs", "first_seq", "depth", "forward", "transpose",
                 "parent")

    def __init__(self, who, inputs, depth, forward=False, transpose=False, parent=None):
        self.who, self.inputs = who, list(inputs)  # held: their ids stay theirs
        self.ids = {id(x) for x in self.inputs}
        self.first_seq = next(_seq)
        self.depth = depth
        self.forward = forward  # forward mode's level (jvp as the transpose of a VJP)
        self.transpose = transpose  # tangents a custom_jvp's rule maps, to be transposed
        self.parent = parent  # the call it runs inside, if any


@contextlib.contextmanager
def watching(who, inputs, forward=False, transpose=False):
    """While f runs under `who` (grad, vjp, jvp, ...): the inputs being differentiated, which
    Tensor refuses to convert to a Python number (see differentiated_by). Yields the watch,
    which names the level of that call's walk back (backward_pass's `level`); `forward`: the
    walk is forward mode's (jvp, jacfwd as the transpose of a VJP); `transpose`: the inputs
    are tangents that a custom_jvp's rule maps, and its VJP transposes (levels.py)."""
    watched = state.STATE.watched
    watch = _Watch(who, inputs, len(watched), forward, transpose,
                   watched[-1] if watched else None)
    state.STATE.watched.append(watch)
    try:
        yield watch
    finally:
        state.STATE.watched.pop()
        state.STATE.level_memo = (None, None)  # it held the watches, and so their inputs


def differentiated_by(x):
    """The name of the innermost running transformation (grad, vjp, ...) whose inputs x
    depends on through the tape, or None. Walks only the nodes recorded since the outermost
    one started, with a stack (no recursion)."""
    watched = state.STATE.watched
    if not watched or not x.requires_grad or x._trace is not None:
        return None
    first = min(w.first_seq for w in watched)
    found, seen, stack = set(), set(), [x]
    while stack:
        t = stack.pop()
        found.update(i for i, w in enumerate(watched) if id(t) in w.ids)
        node = t._node
        if node is None or node in seen or node.seq < first:
            continue
        if node.inputs is None:  # freed by a backward() inside f: it may depend, so refuse
            found.add(len(watched) - 1)
            continue
        seen.add(node)
        stack.extend(i for i in node.inputs if type(i) is Tensor and i.requires_grad)
    return watched[max(found)].who if found else None


_SAME_LEVEL = object()


def backward_pass(roots, root_cts, targets=None, *, retain_graph=False, create_graph=False,
                  level=_SAME_LEVEL):
    """Propagate cotangents from `roots` back through the tape.

    With `targets`, return a list with the cotangent reaching each target (None where no path
    exists); the walk stops at targets. Without, accumulate into `.grad` of every leaf.
    `level`: the watch of the grad/vjp call walking (None: Tensor.backward); by default the
    walk in progress, for a walk a rule makes inside another (see levels.py).
    """
    st = state.STATE
    if level is not _SAME_LEVEL:
        walking, st.walking = st.walking, level
        try:
            return backward_pass(roots, root_cts, targets, retain_graph=retain_graph,
                                 create_graph=create_graph)
        finally:
            st.walking = walking
    ct = _Cotangents(targets, in_place=not create_graph and state.current_builder() is None)

    # Nodes reachable from the roots, found with an explicit stack (no recursion).
    seen, stack = set(), [r._node for r in roots if r._node is not None and not ct.stops(r)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        if node.inputs is None:
            raise RuntimeError(_RELEASED)
        seen.add(node)
        for x in node.inputs:
            if type(x) is Tensor and x.requires_grad and x._node is not None and not ct.stops(x):
                stack.append(x._node)
    order = sorted(seen, key=lambda n: n.seq, reverse=True)
    if targets is not None:
        # Only the nodes on a path to a target: the others (an enclosing computation that
        # reaches the roots without passing the targets) are neither walked nor released.
        leads = set()
        for node in reversed(order):  # inputs before the nodes that read them
            if any(type(x) is Tensor and (ct.stops(x) or x._node in leads)
                   for x in node.inputs):
                leads.add(node)
        order = [node for node in order if node in leads]

    release = not (retain_graph or create_graph)
    held = {}
    with state.enable_grad(create_graph):
        for r, g in zip(roots, root_cts):
            ct.add(r, g)
        for node in order:
            cts = ct.pop_node(node)
            if cts is not None:
                prim, inputs = node.prim, node.inputs
                if ct.in_place and prim.sparse_index is not None:
                    x = inputs[0]
                    if x.requires_grad:
                        values = [a._value if type(a) is Tensor else a for a in inputs]
                        ct.add_at(x, prim.sparse_index(*values, **node.params), cts[0])
                    in_cts = ()
                else:
                    # a node whose rule holds for one level (levels.py): the walk's state
                    saved = None if node.level is None else _enter_level(node, st)
                    try:
                        if prim.multiple_results:
                            outs = [ref() for ref in node.out_refs]
                            in_cts = prim.vjp(cts, outs, *inputs, _saved=node.saved,
                                              **node.params)
                        else:
                            in_cts = prim.vjp(cts[0], node.out_refs[0](), *inputs,
                                              **node.params)
                    finally:
                        if saved is not None:
                            st.custom_as_fwd, st.rule_level, st.rule_mixed = saved
                    if len(in_cts) != len(inputs):  # zip would drop the last ones silently
                        raise AssertionError(f"{prim.name}'s VJP gave {len(in_cts)} "
                                             f"cotangents for {len(inputs)} inputs")
                for x, gx in zip(inputs, in_cts):
                    if gx is not None and type(x) is Tensor and x.requires_grad:
                        ct.add(x, fit_cotangent(gx, x))
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
        # A traced walk's cotangents are graph values: copying one would cut it from the graph.
        traced = state.current_builder() is not None
        return ct.targets if create_graph or traced else _unshared(ct.targets)
    leaves = list(ct.leaves.values())
    grads = [g for _, g in leaves]
    if not create_graph:
        grads = [g.detach() for g in _unshared(grads)]
    for (leaf, _), g in zip(leaves, grads):
        leaf.grad = g if leaf.grad is None else OPS.add(leaf.grad, g)
    return None


def _enter_level(node, st):
    """Before a walk runs the rule of a node that has a level: a walk of another level (an
    enclosing one) differentiates its custom calls through their operations
    (STATE.custom_as_fwd), unless its calls may be of several levels (levels.MIXED); what
    its rule runs again (a replay) is of its level. Returns the state to restore."""
    saved = st.custom_as_fwd, st.rule_level, st.rule_mixed
    level, mixed = node.level, node in levels.MIXED
    if level.transpose:  # in the linear code of a custom_jvp's rule
        if level is st.walking:  # its transposition: through the functions, as JAX's
            st.custom_as_fwd, st.rule_level = "fun", level
            return saved
        level = levels.OUTER.get(node)
        if level is None:
            return saved
    if level is not st.walking or st.custom_as_fwd:
        if mixed:
            raise NotImplementedError(levels.MIXED_LEVELS)
        if not st.custom_as_fwd:
            st.custom_as_fwd = "graph" if node.prim.own_level == "graphs" else True
    st.rule_level, st.rule_mixed = level, mixed
    return saved


def _unshared(grads):
    """Rules may hand one array to several inputs (add's returns g twice): each gradient the
    walk returns gets memory of its own, so changing one in place cannot change another."""
    seen, out = set(), []
    for g in grads:
        if g is not None:
            owner = g._value
            while getattr(owner, "base", None) is not None:
                owner = owner.base
            if id(owner) in seen:
                g = Tensor(g._value.copy())
            seen.add(id(owner))
        out.append(g)
    return out


def tensor_backward(self, cotangent=None, *, retain_graph=False, create_graph=False):
    """Accumulate d(self)/d(leaf) into `.grad` of every leaf that requires grad.

    `self` must be a scalar unless `cotangent` (same shape) is given, as in PyTorch.
    """
    if self._trace is not None:
        raise TypeError(
            "backward() inside a trace (a scan body, jit or make_graph): .grad would have to "
            "change at every step of a loop that is compiled, not run. Compute the gradient with "
            "scanlib.grad (or vjp) inside f and return it through the carry or y, e.g. "
            "carry + scanlib.grad(loss_fn)(W).")
    if not self.requires_grad:
        raise RuntimeError(
            "backward() was called on a tensor that does not require grad: nothing it was "
            "computed from has requires_grad=True (or it was computed under no_grad()). Create "
            "the parameters with scanlib.tensor(..., requires_grad=True). Tensors are "
            "immutable: an update such as `w -= lr * w.grad` under no_grad() makes a new "
            "tensor that does not require grad; mark it, `w = (w - lr * w.grad)"
            ".requires_grad_()`, or use scanlib.optim's opt.step(grads, state, params)."
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
    if is_differentiable_dtype(self.dtype) and not is_differentiable_dtype(cotangent.dtype):
        # an integer cotangent of a float output counts in its dtype (never an int .grad)
        cotangent = Tensor(backends.xp_of(cotangent._value).asarray(cotangent._value,
                                                                    dtype=self.dtype))
    if cotangent.shape != self.shape:
        raise ValueError(
            f"backward(): the cotangent has shape {cotangent.shape} but the tensor has shape "
            f"{self.shape} ({type_str(self.shape, self.dtype)}); they must match."
        )
    backward_pass([self], [cotangent], retain_graph=retain_graph, create_graph=create_graph,
                  level=None)


Tensor.backward = tensor_backward
