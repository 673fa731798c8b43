"""jit's replay of a while_loop and its gradient in one call: the loop keeps its tape for the
gradient, as eager does, instead of the gradient running the loop again.

A jitted `value_and_grad` through a while_loop traces two equations: the loop (while_p,
which runs it without saving anything) and, in the backward part, its VJP (while_grad_p,
which recomputes the loop as a scan of its trip count, saving residuals, and walks back
through it). Replayed as they are, the loop's forward runs twice, where eager runs it once
(`control.loop_on_tape`): jit was up to 1.5x slower than eager on such calls. `pair`
rewrites the replay's graph so that the loop runs as eager's does, on the tape, and hands
that tape to its VJP equation, which walks back through it. The values and gradients are
then eager's own.

Only where the pairing is certain: one first-order VJP equation reading exactly that loop's
inputs and trip count (a second reader, vmap's lanes or a higher order keep the recomputing
equation). The rewritten graph is run only, never traced again nor transformed.
Imports backends, tape, ops.primitive, loops and control.
"""

from __future__ import annotations

import numpy as np

from . import backends
from .control import loop_on_tape
from .loops import walk_back, while_grad_p, while_p
from .ops.primitive import Primitive
from .tape import Eqn, Graph, Literal, Tensor, Var, enable_grad, is_differentiable_dtype
from .tape.levels import own_levels


def pair(graph):
    """The graph with each while_loop whose gradient it also computes run once, keeping its
    tape for that gradient (the same graph where there is none)."""
    loops = {}  # the trip count's Var -> the loop's equation index
    for i, eqn in enumerate(graph.eqns):
        if eqn.prim is while_p:
            loops[eqn.outvars[eqn.params["num_carry"]]] = i
    readers = {}  # the trip count's Var -> the indices of the equations reading it
    for j, eqn in enumerate(graph.eqns):
        for v in eqn.invars:
            if v in loops:
                readers.setdefault(v, []).append(j)
    pairs = {}  # loop index -> its VJP's index
    for n, (j, *more) in readers.items():
        if not more and n not in graph.outvars and _is_its_vjp(graph.eqns[loops[n]],
                                                               graph.eqns[j]):
            pairs[loops[n]] = j
    if not pairs:
        return graph
    read = {v for eqn in graph.eqns for v in eqn.invars} | set(graph.outvars)
    eqns = list(graph.eqns)
    for i, j in pairs.items():
        loop, vjp = eqns[i], eqns[j]
        kept = Var((), np.dtype(object), "tape")
        # Which inputs' cotangents are read: only those require grad on the tape (a closed-
        # over array's cotangent, which nothing reads, would be a scatter at every step).
        found = iter(vjp.outvars)
        nc, nq = loop.params["num_carry"], loop.params["num_cond_consts"]
        wanted = tuple(is_differentiable_dtype(v.dtype) and next(found) in read
                       for v in list(loop.invars[:nc]) + list(loop.invars[nc + nq:]))
        eqns[i] = Eqn(_loop_keeping_tape_p, loop.invars, {**loop.params, "wanted": wanted},
                      list(loop.outvars) + [kept])
        eqns[j] = Eqn(_vjp_from_tape_p, list(vjp.invars) + [kept], vjp.params, vjp.outvars)
    return Graph(graph.invars, graph.constvars, graph.consts, eqns, graph.outvars,
                 name=graph.name, device=graph.device)


def _is_its_vjp(loop, vjp):
    """Whether vjp is while_grad_p's first-order VJP of exactly this loop: its primals are the
    loop's carries, body constants and trip count."""
    if vjp.prim is not while_grad_p or vjp.params.get("lanes"):
        return False
    p = loop.params
    nc, nq = p["num_carry"], p["num_cond_consts"]
    if vjp.params["body"] is not p["body"] or vjp.params["num_cts"] != (nc,):
        return False
    primals = list(loop.invars[:nc]) + list(loop.invars[nc + nq:]) + [loop.outvars[nc]]
    read = vjp.invars[nc:]
    return len(read) == len(primals) and all(
        a is b and not isinstance(a, Literal) for a, b in zip(read, primals))


def _loop_keeping_tape(*values, cond, body, num_carry, num_cond_consts, max_steps, wanted):
    """while_p's outputs (carries, trip count), then (the loop's inputs, its carries) on the
    tape, for _vjp_from_tape. wanted[i]: whether the i-th input (carries, then the body's
    constants) requires grad."""
    nc, nq = num_carry, num_cond_consts
    inputs = [Tensor(v, w) for v, w in zip(list(values[:nc]) + list(values[nc + nq:]), wanted)]
    with enable_grad(), own_levels():
        outs, n = loop_on_tape(cond, body, inputs[:nc], list(values[nc:nc + nq]),
                               inputs[nc:], max_steps)
    device = backends.device_of(values[0]) if values else "cpu"
    return ([o._value for o in outs] + [backends.asarray_on(n, device, np.int64)]
            + [(inputs, outs)])


def _vjp_from_tape(*values, body, num_carry, num_cts, given, wrt=None):
    """while_grad_p's first-order outputs (one cotangent per differentiable primal, zeros
    where none arrives, None where nothing reads it), walking back through the tape
    _loop_keeping_tape kept."""
    del body, num_cts, wrt  # the loop's tape marks what requires grad (`wanted`)
    inputs, outs = values[-1]
    cts = [Tensor(c) for c in values[:num_carry]]
    with enable_grad(), own_levels():
        found = iter(walk_back(outs, cts, given[0], [x for x in inputs if x.requires_grad]))
    # nothing reads the cotangent of a differentiable input that does not require grad (pair)
    return [next(found)._value if x.requires_grad else None for x in inputs
            if is_differentiable_dtype(x.dtype)]


# Made by `pair` after tracing, for the replay only: never bound, traced or transformed.
_loop_keeping_tape_p = Primitive("while_loop_keeping_tape", _loop_keeping_tape,
                                 multiple_results=True)
_vjp_from_tape_p = Primitive("while_loop_vjp_from_tape", _vjp_from_tape,
                             multiple_results=True)
