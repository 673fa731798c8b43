"""vmap's interpreter: `evaluate` runs a graph's equations on Tensors whose batched ones
carry the batch axis first. Each equation with a batched input is bound on the whole batch by
its primitive's rule: `prim.vmap` for one that runs a graph (scan, while_loop, checkpoint,
beside their definitions; it may decline, returning None), else `prim.batch`, the batching
rule the loop compiler also uses (ops/batching.py), bound on Tensors so that the result is
differentiable, traceable and vmappable again. A primitive without a rule runs once per
example (exact, and B calls; FALLBACKS counts them).

Imports backends, tape, ops, pytree and tracing.
"""

from __future__ import annotations

import collections
import inspect

import numpy as np

from .. import backends, pytree
from ..ops import batching
from ..ops.primitive import bind
from ..ops.structural import broadcast_to_p, getitem_p, reshape_p, stack_p, transpose_p
from ..tape import Literal, Tensor, Var
from ..tape.graph import used_vars
from ..tracing import trace_function


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


def move_axis(x, source, dest):
    if source == dest:
        return x
    order = [i for i in range(x.ndim) if i != source]
    order.insert(dest, source)
    return transpose_p(x, axes=tuple(order))


def broadcast_batch(x, B, dtype=None):
    """x (unbatched: the same for every example) with a batch axis in front."""
    if not isinstance(x, Tensor):
        x = Tensor(np.asarray(x, dtype))
    return broadcast_to_p(x, shape=(B,) + tuple(x.shape))


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
        if not any(batched):
            outs = eqn.prim.rebind(*values, **eqn.params)
            outs, out_flags = (outs if eqn.prim.multiple_results else [outs]), None
        elif eqn.prim.vmap is not None:
            found = eqn.prim.vmap(list(values), list(batched), B, **eqn.params)
            outs, out_flags = found if found is not None else (_loop(eqn, values, batched, B),
                                                                None)
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


def batched_outputs(graph, flags, const_flags):
    """Which of graph's outputs depend on a batched input (the flags `evaluate` returns)."""
    batched = {v for v, f in zip(graph.invars, flags) if f}
    batched |= {v for v, f in zip(graph.constvars, const_flags) if f}
    for eqn in graph.eqns:
        ins = [v in batched for v in eqn.invars]
        if not any(ins):
            continue
        rule = eqn.prim.vmap_flags
        outs = rule(eqn.params, ins) if rule is not None else [True] * len(eqn.outvars)
        batched.update(v for v, f in zip(eqn.outvars, outs) if f)
    return [v in batched for v in graph.outvars]


def batched_graph(graph, flags, consts, const_flags, B, device, out_flags=None):
    """(a Graph of graph's outputs on a batch, their batched flags): traced once, inputs with
    the batch axis first where flags, graph's constants closed over (they become the new
    graph's consts). With `out_flags`, an output it flags but evaluate leaves unbatched is
    broadcast to the batch (a loop carry must keep one shape)."""
    found = []

    def step(inputs):
        outs, out_b = evaluate(graph, inputs, flags, consts, const_flags, B)
        if out_flags is not None:
            outs = [broadcast_batch(o, B, v.dtype) if f and not b else o
                    for o, b, f, v in zip(outs, out_b, out_flags, graph.outvars)]
            out_b = [b or f for b, f in zip(out_b, out_flags)]
        found.append(out_b)
        return outs

    avals = [((B,) + v.shape if f else v.shape, v.dtype) for v, f in zip(graph.invars, flags)]
    traced, _, _ = trace_function(step, avals, pytree.flatten([0] * len(avals))[1],
                                  device=device, hints=[v.hint for v in graph.invars],
                                  name=graph.name)
    return traced, found[0]
