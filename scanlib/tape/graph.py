"""Recorded graphs: a list of equations in execution order (JAX's jaxpr, simplified), the
builder that traces Python code into one, and the printer that shows it as straight-line code.

A Graph is what `make_graph` returns and what a scan body is. Imports backends, tape.state and
tape.tensor.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct

import numpy as np

from .. import backends
from .tensor import Tensor, is_differentiable_dtype, type_str


class Var:
    """A value in a graph: known only by its shape and dtype."""

    __slots__ = ("shape", "dtype", "hint")

    def __init__(self, shape, dtype, hint=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.hint = hint

    @property
    def type(self) -> str:
        return type_str(self.shape, self.dtype)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __repr__(self):
        return f"Var<{self.type}>"


class Literal:
    """A Python scalar written into a graph (it keeps NumPy's weak scalar promotion)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return repr(self.value)


class Eqn:
    __slots__ = ("prim", "invars", "params", "outvars")

    def __init__(self, prim, invars, params, outvars):
        self.prim, self.invars, self.params, self.outvars = prim, invars, params, outvars


class Graph:
    """invars -> eqns -> outvars, with constvars bound to `consts` (closed-over tensors)."""

    def __init__(self, invars, constvars, consts, eqns, outvars, name="f", device="cpu"):
        self.invars = list(invars)
        self.constvars = list(constvars)
        self.consts = list(consts)
        self.eqns = list(eqns)
        self.outvars = list(outvars)
        self.name = name
        self.device = device  # where its inputs live; a const slot may be None (bound later)
        self._compiled = None

    def __repr__(self):
        return format_graph(self)

    __str__ = __repr__


_ZERO_BYTES = bytes(64)  # read-only: an array over it cannot be written into


class GraphBuilder:
    """Collects the equations executed while it is the innermost trace (see tape.state)."""

    # Its values are stand-ins (zeros of the right shapes), so an impl that would run a loop
    # on them must not (while_loop's). A trace on real values (jvp's) says False.
    abstract = True
    # A trace that runs each primitive itself, by a rule, instead of recording an equation
    # (jvp's forward trace): process_primitive(prim, inputs, params) -> (values, tracers).
    process_primitive = None

    def __init__(self, device="cpu"):
        self.device = device
        self.invars, self.constvars, self.consts, self.eqns = [], [], [], []
        self._lifted = {}  # id(outer tensor or array) -> tracer standing for it
        self._keepalive = []
        self.const_names = {}  # id(outer value) -> the Python name f used for it
        self.interpret = False  # scans traced here run on the reference interpreter
        self.closed = False  # set when its trace ends (tape.state.tracing)
        self.grad_at_start = True  # recording was on when the trace began
        # A jit call's own trace: its graph is replayed as it is, never bound again on the
        # tape nor batched, so an equation may hand values to the walk back through its
        # node (custom_vjp's residuals).
        self.whole_call = False

    def _tracer(self, var, value):
        return Tensor(value, False, _trace=self, _var=var)

    def new_input(self, shape, dtype, hint=None) -> Tensor:
        """A traced input; its stand-in value is zeros (only shapes and dtypes are used)."""
        var = Var(shape, dtype, hint)
        self.invars.append(var)
        return self._tracer(var, self._zeros(shape, dtype))

    def _zeros(self, shape, dtype):
        with backends.on_device(self.device):
            return backends.namespace(self.device).zeros(shape, dtype)

    def broadcast_zeros(self, shape, dtype):
        """Zeros of a shape as a read-only broadcast of one zero: a stand-in that costs no
        memory and no time to make, however large (np.zeros costs a memset)."""
        dtype = np.dtype(dtype)
        if self.device == "cpu" and not dtype.hasobject and dtype.itemsize <= len(_ZERO_BYTES):
            return np.ndarray(shape, dtype, _ZERO_BYTES[:dtype.itemsize],
                              strides=(0,) * len(shape))  # np.broadcast_to costs 3x this
        with backends.on_device(self.device):
            xp = backends.namespace(self.device)
            return xp.broadcast_to(xp.zeros((), dtype), shape)

    def new_constvar(self, shape, dtype, value=None, hint=None) -> Tensor:
        """A constvar bound later (its `consts` slot is None); value stands in while tracing."""
        if value is None:
            value = self._zeros(shape, dtype)
        var = Var(shape, dtype, hint)
        self.constvars.append(var)
        self.consts.append(None)
        return self._tracer(var, value)

    def lift(self, x) -> Tensor:
        """The tracer for x: x itself if traced here, else a constvar bound to x."""
        if isinstance(x, Tensor) and x._trace is self:
            return x
        if isinstance(x, Tensor) and x._trace is not None and x._trace.closed:
            raise escaped_tracer_error(x)
        tracer = self._lifted.get(id(x))
        if tracer is None:
            const = x if isinstance(x, Tensor) else Tensor(x)
            var = Var(const.shape, const.dtype, self.const_names.get(id(x)))
            self.constvars.append(var)
            self.consts.append(const)
            self._keepalive.append(x)
            tracer = self._tracer(var, const._value)
            tracer._weak = const._weak
            self._lifted[id(x)] = tracer
        return tracer

    def add_eqn(self, prim, args, params, out_values):
        invars = [a._var if isinstance(a, Tensor) else Literal(a) for a in args]
        outs = out_values if prim.multiple_results else [out_values]
        outvars = [Var(np.shape(v), v.dtype) for v in outs]
        self.eqns.append(Eqn(prim, invars, params, outvars))
        tracers = [self._tracer(var, v) for var, v in zip(outvars, outs)]
        return tracers if prim.multiple_results else tracers[0]

    def build(self, outs, name="f") -> Graph:
        outvars = [self.lift(o)._var if isinstance(o, Tensor) else Literal(o) for o in outs]
        return Graph(self.invars, self.constvars, self.consts, self.eqns, outvars, name,
                     self.device)


def on_stand_ins() -> bool:
    """Whether the values at hand are an abstract trace's stand-in zeros (not jvp's real
    values): a check of values (an index named twice, a loop's trip count) must wait for the
    real ones."""
    from .state import current_builder  # state imports nothing; kept local to this helper

    builder = current_builder()
    return builder is not None and builder.abstract


def stand_ins_for(outvars, leading=None):
    """Zeros shaped like outvars when the innermost trace is abstract (its values are
    stand-ins that nothing reads), else None. A primitive that runs a whole loop or graph
    (checkpoint, scan, while) returns these while being traced instead of running it on
    zeros; under a trace on real values (jvp's) it runs. None too when an outvar is a
    Literal (no dtype of its own): then the impl runs. `leading[i]`: axes in front of
    outvars[i]'s shape (a scan's ys have the steps in front)."""
    from .state import current_builder  # state imports nothing; kept local to this helper

    builder = current_builder()
    if builder is None or not builder.abstract or any(isinstance(v, Literal) for v in outvars):
        return None
    leading = leading or [()] * len(outvars)
    return [builder.broadcast_zeros(tuple(lead) + tuple(v.shape), v.dtype)
            for v, lead in zip(outvars, leading)]


def escaped_tracer_error(x) -> TypeError:
    """The error for a tracer used after its trace ended (JAX: UnexpectedTracerError)."""
    return TypeError(
        f"a value ({type_str(x.shape, x.dtype)}) computed inside a trace (a scan body, jit "
        "or make_graph) "
        "escaped it and is used after the trace ended; there it stood for every step at "
        "once and has no value of its own. Return it from f through the carry or y instead "
        "of keeping it in a list, a global or an attribute.")


# --- printing -----------------------------------------------------------------------------

def _names():
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            yield "".join(combo)


def _fmt_param(value) -> str:
    if isinstance(value, Graph):
        return value.name
    if isinstance(value, np.dtype) or isinstance(value, type):
        return np.dtype(value).name
    if isinstance(value, tuple) and any(isinstance(v, slice) for v in value):
        return "[" + ", ".join(_fmt_index(v) for v in value) + "]"
    if isinstance(value, slice):
        return _fmt_index(value)
    if isinstance(value, np.ndarray):
        return f"array{type_str(value.shape, value.dtype)}"
    return repr(value)


def _fmt_index_param(index) -> str:
    items = index if isinstance(index, tuple) else (index,)
    return "[" + ", ".join(_fmt_index(v) for v in items) + "]"


def _fmt_index(v) -> str:
    if isinstance(v, slice):
        parts = ["" if p is None else str(p) for p in (v.start, v.stop, v.step)]
        text = ":".join(parts[:2]) if v.step is None else ":".join(parts)
        return text
    if v is None:
        return "None"
    if v is Ellipsis:
        return "..."
    return _fmt_param(v)


def format_params(eqn) -> list:
    """An equation's params as the printed graph shows them (`axis=(0,)`, `index=[:, 1:]`);
    nested graphs and private params are left out."""
    return [f"{k}={_fmt_index_param(p) if k == 'index' else _fmt_param(p)}"
            for k, p in eqn.params.items()
            if not k.startswith("_") and not isinstance(p, (Graph, list)) and not _graphs(p)]


def _graphs(p):
    """The graphs a param holds: itself, or a tuple of them (cond's branches)."""
    if isinstance(p, Graph):
        return [p]
    return list(p) if isinstance(p, tuple) and p and all(isinstance(g, Graph) for g in p) else []


def format_graph(graph: Graph, indent: int = 0, names=None) -> str:
    names = {} if names is None else names
    fresh = _names()
    used = set(names.values()) | {graph.name}

    def name(v):
        if isinstance(v, Literal):
            return repr(v.value)
        if v not in names:
            if v.hint and v.hint.isidentifier() and v.hint not in used:
                names[v] = v.hint
            else:
                n = next(fresh)
                while n in used:
                    n = next(fresh)
                names[v] = n
            used.add(names[v])
        return names[v]

    pad = " " * indent
    args = ", ".join(f"{name(v)}: {v.type}" for v in graph.invars)
    if graph.constvars:
        args += (", " if args else "") + "*, " + ", ".join(
            f"{name(v)}: {v.type}" for v in graph.constvars)
    lines = [f"{pad}def {graph.name}({args}):"]
    for eqn in graph.eqns:
        ins = [name(v) for v in eqn.invars]
        sub = [(k, g) for k, p in eqn.params.items() for g in _graphs(p)]
        params = format_params(eqn)
        outs = ", ".join(f"{name(v)}: {v.type}" for v in eqn.outvars)
        lines.append(f"{pad}    {outs} = {eqn.prim.name}({', '.join(ins + params)})")
        for _, body in sub:
            lines.append(format_graph(body, indent + 8, dict()))
    outs = ", ".join(name(v) for v in graph.outvars)
    lines.append(f"{pad}    return {outs}" if graph.outvars else f"{pad}    return ()")
    return "\n".join(lines)


def eval_graph(graph, args, consts):
    """The arrays `graph` computes from arrays `args` (its invars) and `consts`: each
    equation's impl in order, as `bind` would call it outside any trace."""
    env = dict(zip(graph.invars, args))
    env.update(zip(graph.constvars, consts))

    def read(v):
        return v.value if isinstance(v, Literal) else env[v]

    for eqn in graph.eqns:
        out = eqn.prim.impl(*[read(v) for v in eqn.invars], **eqn.params)
        env.update(zip(eqn.outvars, out if eqn.prim.multiple_results else (out,)))
    return [read(v) for v in graph.outvars]


def used_vars(eqns, outvars):
    """The eqns needed for outvars (in order) and every Var they read: dead-code elimination.
    An equation run for its effect (debug printing, or a loop whose body prints: has_effect)
    is always needed, unless a later equation binds it again (rebound_later): its effect
    runs there."""
    live = {v for v in outvars if isinstance(v, Var)}
    kept = []
    again = None
    for eqn in reversed(eqns):
        needed = any(v in live for v in eqn.outvars)
        if not needed and has_effect(eqn):
            again = rebound_later(eqns) if again is None else again
            needed = id(eqn) not in again
        if needed:
            kept.append(eqn)
            live.update(v for v in eqn.invars if isinstance(v, Var))
    kept.reverse()
    return kept, live


def rebound_later(eqns) -> set:
    """The ids of the equations that a later one binds again, on the same operands, as it is
    or extended (`prim.rebinding`; merge_rebound merges them): differentiating a loop inside
    a trace binds it once for its value and again with residuals, and a print in its body
    belongs to the one loop both stand for."""
    found, seen = set(), {}
    for eqn in reversed(eqns):
        if eqn.prim.rebinding is None:
            continue
        key, extended = eqn.prim.rebinding(eqn.params)
        ops = _operands(eqn)
        if (key, ops) in seen:
            found.add(id(eqn))
        seen[(key, ops)] = True
        if extended is not None:
            seen[(extended, ops)] = True
    return found


def has_effect(eqn) -> bool:
    """Whether eqn is run for what it does: its primitive's `effect` (debug printing), or an
    equation with one in a graph among its params (a loop whose body prints)."""
    return eqn.prim.effect or any(has_effect(e) for g in _graphs_in(eqn.params.values())
                                  for e in g.eqns)


def _graphs_in(values):
    for v in values:
        if isinstance(v, Graph):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from _graphs_in(v)


def prune_outputs(graph: Graph) -> Graph:
    """graph with each multiple-result equation computing only the results that are read
    (by a later live equation or as an output), where its primitive has a `prune` rule: a
    backward scan whose caller drops some cotangents (those of inputs that need none) then
    never computes them, nor, through the rule, do the scans in its body. An equation whose
    results nobody reads is dropped, and counts as no reader, unless it has an effect (a loop
    that prints), as XLA drops it under JAX's jit: a backward walk's cotangent of an input
    that needs none (matmul's VJP gives both operands theirs). The same graph when nothing
    is pruned."""
    read = {v for v in graph.outvars if isinstance(v, Var)}
    eqns, changed = [], False
    for eqn in reversed(graph.eqns):
        used = [v in read for v in eqn.outvars]
        if not any(used):
            if not has_effect(eqn):
                changed = True
                continue  # dead: reads nothing on anyone's behalf
        elif eqn.prim.prune is not None:  # all used: its body's own scans may still be cut
            pruned = eqn.prim.prune(eqn.params, used)
            if pruned is not None:
                params, keep_in, keep_out = pruned
                eqn = Eqn(eqn.prim, [v for v, k in zip(eqn.invars, keep_in) if k], params,
                          [v for v, k in zip(eqn.outvars, keep_out) if k])
                changed = True
        read.update(v for v in eqn.invars if isinstance(v, Var))
        eqns.append(eqn)
    if not changed:
        return graph
    return Graph(graph.invars, graph.constvars, graph.consts, eqns[::-1], graph.outvars,
                 graph.name, graph.device)


def reached_by(eqn, out_flags):
    """Which of eqn's inputs a cotangent of its flagged outputs reaches: none through a
    primitive without a VJP; through one with a `reach` rule (a loop or graph inside), the
    inputs its rule names; else all of them."""
    if eqn.prim.vjp is None or not any(out_flags):
        return [False] * len(eqn.invars)
    if eqn.prim.reach is None:
        return [True] * len(eqn.invars)
    flags = list(eqn.prim.reach(eqn.params, list(out_flags)))
    if len(flags) != len(eqn.invars):  # zip would drop the last inputs' paths silently
        raise AssertionError(f"{eqn.prim.name}'s reach rule gave {len(flags)} flags for "
                             f"{len(eqn.invars)} inputs")
    return flags


def reached_inputs(graph: Graph, out_flags, num_carry=0, carries=None):
    """Which of graph's inputs (invars, then constvars) a cotangent of its flagged outputs
    reaches through differentiable equations. With num_carry, graph is a loop body: its first
    num_carry outputs are its first num_carry inputs at the next step, so a carry whose input
    is reached has a cotangent at the step before (to a fixpoint over steps); `carries[i]`
    False says carry i takes none (it is not a float). Returns (inputs reached, carries that
    have a cotangent at some step)."""
    carries = [True] * num_carry if carries is None else list(carries)
    flags = [f and (i >= num_carry or carries[i]) for i, f in enumerate(out_flags)]
    for _ in range(num_carry + 1):
        reach = {v for v, f in zip(graph.outvars, flags) if f and isinstance(v, Var)}
        for eqn in reversed(graph.eqns):
            outs = [v in reach for v in eqn.outvars]
            if any(outs):
                reach.update(v for v, r in zip(eqn.invars, reached_by(eqn, outs))
                             if r and isinstance(v, Var))
        ins = [v in reach for v in graph.invars + graph.constvars]
        grown = [f or (i < num_carry and carries[i] and ins[i]) for i, f in enumerate(flags)]
        if grown == flags:
            return ins, flags[:num_carry]
        flags = grown
    raise AssertionError("reached_inputs: fixpoint not reached")


def differentiated_graph(graph: Graph, in_flags, num_carry=0, settle=False) -> Graph:
    """graph as it computes where the inputs flagged in `in_flags` (invars, then constvars)
    carry a derivative: an equation reading one (see dependent_values) takes its
    primitive's `differentiated` params, as the Python loop's custom_jvp call takes its
    rule's primal output where an input requires grad. With num_carry, graph is a loop body
    (see dependent_values). With settle, a custom call so reached becomes its function's
    equations (`settled_call`), at every depth: the level that differentiated it has ended
    (tape/levels.py settle); the calls not reached stay calls, with their rules. Returns
    graph itself where nothing changes."""
    key = (tuple(in_flags), num_carry, settle)
    memo = graph.__dict__.setdefault("_differentiated", {})
    if key not in memo:
        memo[key] = _differentiated_graph(graph, in_flags, num_carry, settle)
    return memo[key]


def _differentiated_graph(graph, in_flags, num_carry, settle):
    reached = dependent_values(graph, in_flags, num_carry)[1]
    eqns, renamed, changed = [], {}, False
    for eqn in graph.eqns:
        invars = [renamed.get(v, v) for v in eqn.invars]
        params = None
        eqn_flags = [isinstance(v, Var) and v in reached for v in eqn.invars]
        if eqn.prim.differentiated is not None and any(eqn_flags):
            params = eqn.prim.differentiated(eqn.params, eqn_flags, settle=settle)
            if settle:
                found = settled_call(eqn.prim, params or eqn.params, invars)
                if found is not None:
                    eqns += found[0]
                    renamed.update(zip(eqn.outvars, found[1]))
                    changed = True
                    continue
        if params is None and invars == eqn.invars:
            eqns.append(eqn)
        else:
            changed = True
            eqns.append(Eqn(eqn.prim, invars, params or eqn.params, eqn.outvars))
    if not changed:
        return graph
    return Graph(graph.invars, graph.constvars, graph.consts, eqns,
                 [renamed.get(v, v) for v in graph.outvars], graph.name, graph.device)


def settled_call(prim, params, invars):
    """A custom call (custom_vjp, custom_jvp; not an `exact` one, whose rule holds at every
    level) whose level has ended, as its function's equations on invars with fresh Vars:
    (the equations, the Vars of its outputs); None for any other equation."""
    if prim.own_level not in ("vjp", "jvp") or getattr(params.get("rules"), "exact", False):
        return None
    fun = params["fun"]
    env = dict(zip(fun.invars + fun.constvars, invars, strict=True))
    eqns = []
    for e in fun.eqns:
        outs = [Var(v.shape, v.dtype, v.hint) for v in e.outvars]
        env.update(zip(e.outvars, outs))
        eqns.append(Eqn(e.prim, [env.get(v, v) for v in e.invars], e.params, outs))
    return eqns, [env.get(v, v) for v in fun.outvars]


def dependent_values(graph: Graph, in_flags, num_carry=0):
    """(the input flags, the set of Vars) that depend on the inputs flagged in `in_flags`
    (invars, then constvars) through what carries a derivative: a float result of a
    differentiable equation, each output as its primitive's `depends` rule says (a loop's,
    along its body's paths; without one, all). Not what stop_gradient or a comparison makes,
    nor an integer, as in JAX. With num_carry, graph is a loop body: a carry its step makes
    from a flagged value is flagged at the next step (to a fixpoint), and so in the flags
    returned."""
    key = (tuple(in_flags), num_carry)
    memo = graph.__dict__.setdefault("_dependent_values", {})
    if key in memo:
        return memo[key]
    flags, ins = list(in_flags), graph.invars + graph.constvars
    for _ in range(num_carry + 1):
        reached = {v for v, f in zip(ins, flags) if f}
        for eqn in graph.eqns:
            if eqn.prim.vjp is None:
                continue
            eqn_flags = [isinstance(v, Var) and v in reached for v in eqn.invars]
            if not any(eqn_flags):
                continue
            outs = (eqn.prim.depends(eqn.params, eqn_flags) if eqn.prim.depends is not None
                    else [True] * len(eqn.outvars))
            reached.update(v for v, o in zip(eqn.outvars, outs)
                           if o and is_differentiable_dtype(v.dtype))
        grown = [f or (i < num_carry and graph.outvars[i] in reached)
                 for i, f in enumerate(flags)]
        if grown == flags:
            break
        flags = grown
    memo[key] = flags, reached
    return flags, reached


def dependent_outputs(graph: Graph, in_flags, num_carry=0):
    """Which of graph's outputs depend on its flagged inputs (see dependent_values)."""
    reached = dependent_values(graph, in_flags, num_carry)[1]
    return [isinstance(v, Var) and v in reached for v in graph.outvars]


def fingerprint(graph: Graph):
    """A hashable summary of everything that decides what a graph computes (primitives,
    params, literals, shapes, dtypes, wiring), but not its names or constant values. Two
    traces of the same function on same-shaped inputs have equal fingerprints. (Made at
    every call of a scan or loop: written for speed.)"""
    fp = graph.__dict__.get("_fingerprint")
    if fp is None:
        index = {}

        def ref(v):
            if type(v) is Literal:
                return ("lit", type(v.value).__name__, number_key(v.value))
            i = index.get(v)
            if i is None:
                i = index[v] = len(index)
            return i

        # Inputs and constants apart: a value scanned as xs and the same value closed over
        # are different bodies (their loops take different arguments).
        head = tuple(tuple((v.shape, v.dtype.str) for v in vs)
                     for vs in (graph.invars, graph.constvars))
        for v in graph.invars + graph.constvars:
            ref(v)
        body = []
        for eqn in graph.eqns:
            ins = tuple([ref(v) for v in eqn.invars])
            outs = tuple([(ref(v), v.shape, v.dtype.str) for v in eqn.outvars])
            params = eqn.params
            if params:
                params = tuple(sorted([(k, _param_fp(p)) for k, p in params.items()
                                       if not k.startswith("_")]))
            body.append((eqn.prim.name, id(eqn.prim), ins, outs, params or ()))
        fp = (head, tuple(body), tuple([ref(v) for v in graph.outvars]))
        graph._fingerprint = fp
    return fp


def merge_rebound(graph: Graph) -> Graph:
    """The graph with each equation that a later one binds again, extended, merged into that
    later one, for primitives that say so (`rebinding`, a rule on the primitive).

    Differentiating a loop inside a trace can bind it twice: first with the residuals its
    linearization then expected, then, when the walk back needs more, as the forward of a new
    linearization whose body is the first one's, with more residual outputs after the same
    leading outputs; a higher order binds it again. Replayed, each forward would run. Here the
    extended binding takes the place of the one it extends (its inputs are the same, so they
    were ready there), and an equation whose outputs a kept binding already computes (the
    same computation, or one it extends, on the same inputs) reads them from it.
    `prim.rebinding(params) -> (key, extended_key)`: what the equation computes, and what the
    binding it extends computed (None if none); outputs of equal keys lead the same way.
    Two bindings that extend the same one differently (a walk back of each order asking for
    other residuals) are not merged with each other: the second one stays where it is, since
    the one in its place computes outputs that it does not.
    """
    eqns, rename = list(graph.eqns), {}
    kept = {}  # (key, operands) -> position of the equation whose outputs begin with key's

    def alias(old, new):  # read new's values where old's were read
        nonlocal rename
        pairs = dict(zip(old, new))
        rename = {v: pairs.get(w, w) for v, w in rename.items()}  # and what pointed at old
        rename.update(pairs)

    for i, eqn in enumerate(eqns):
        if eqn.prim.rebinding is None:
            continue
        eqn = eqns[i] = _renamed(eqn, rename)
        ops = _operands(eqn)
        key, extended = eqn.prim.rebinding(eqn.params)
        j = kept.get((key, ops))
        if j is not None:
            alias(eqn.outvars, eqns[j].outvars)  # its outputs lead that equation's
            eqns[i] = None
            continue
        j = kept.get((extended, ops)) if extended is not None else None
        if j is not None and eqns[j].prim.rebinding(eqns[j].params)[0] == extended:
            alias(eqns[j].outvars, eqn.outvars)
            eqns[j], eqns[i] = eqn, None
            kept[(key, ops)] = j
        else:
            kept.setdefault((key, ops), i)
    if not rename:
        return graph
    return Graph(graph.invars, graph.constvars, graph.consts,
                 [_renamed(e, rename) for e in eqns if e is not None],
                 [rename.get(v, v) for v in graph.outvars], graph.name, graph.device)


def _renamed(eqn, rename):
    if not any(v in rename for v in eqn.invars if isinstance(v, Var)):
        return eqn
    return Eqn(eqn.prim, [rename.get(v, v) if isinstance(v, Var) else v for v in eqn.invars],
               eqn.params, eqn.outvars)


def _operands(eqn):
    return tuple(("lit", type(v.value).__name__, number_key(v.value)) if isinstance(v, Literal)
                 else id(v) for v in eqn.invars)


_PLAIN_PARAMS = frozenset({bool, int, str, type(None)})


def param_fingerprint(p):
    """A hashable stand-in for a param value that is equal exactly when the values are."""
    return _param_fp(p)


def number_key(x):
    """A number's exact identity: the bits of a float or complex (-0.0 is not 0.0, -nan is
    not nan, though Python's == and repr say so), repr for the others."""
    if isinstance(x, float):
        return struct.pack("<d", x)
    if isinstance(x, complex):
        return struct.pack("<dd", x.real, x.imag)
    if isinstance(x, np.generic) and x.dtype.kind in "fc":
        return x.tobytes()
    return repr(x)


def _param_fp(p):
    # Numbers by type and value, as literals are: True == 1 and 0.0 == -0.0 in Python, but
    # x[True, i] is not x[1, i], and copysign by -0.0 is not by 0.0.
    if type(p) in _PLAIN_PARAMS:  # the common case first (the same key as below)
        return (type(p).__name__, number_key(p))
    if isinstance(p, Graph):
        return ("graph", fingerprint(p))
    if isinstance(p, (tuple, list)):
        return (type(p).__name__,) + tuple(_param_fp(x) for x in p)
    if isinstance(p, slice):
        return ("slice", _param_fp(p.start), _param_fp(p.stop), _param_fp(p.step))
    if isinstance(p, np.dtype):
        return ("dtype", p.str)
    if isinstance(p, np.ndarray):  # by value: a repr elides the middle of a large array
        return ("array", p.dtype.str, p.shape, p.tobytes())
    if p is None or isinstance(p, (bool, int, float, complex, str, np.generic)):
        return (type(p).__name__, number_key(p))
    if isinstance(p, frozenset):
        return ("frozenset", frozenset(_param_fp(x) for x in p))
    if dataclasses.is_dataclass(p) and not isinstance(p, type):  # by its fields' keys
        return (type(p), tuple((f.name, _param_fp(getattr(p, f.name)))
                               for f in dataclasses.fields(p)))
    try:
        hash(p)
        return (type(p).__name__, p)
    except TypeError:  # unknown and unhashable: never equal to another trace's (no reuse)
        return ("object", id(p), type(p).__name__)
