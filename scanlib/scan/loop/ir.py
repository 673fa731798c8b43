"""The loop compiler's one intermediate form: a scan body's equations placed in the sections
of the loop that runs it, plus how each accumulator carry is summed. Every pass maps a
LoopProgram to a LoopProgram; `verify` checks one, `format_loop` prints one.

The sections, in the order the loop runs them:

  PRE    once, before the loop: work on closed-over values only
  CHUNK  once per chunk of steps, before its steps: carry-independent work, for all the
         chunk's steps at once (a batching rule)
  STEP   once per step: the carry's own chain, the only real loop work
  POST   once per chunk, after its steps: carry-dependent work off the carry's chain (a y, a
         gradient term), for all the chunk's steps at once, from their stacked values

An equation in no section is not computed: dead, or replaced by an accumulator's reduction.
Imports tape, and batch.py for the batching rules.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools

from ...tape import Literal, Var
from . import alias, batch
from ...tape.graph import format_graph, format_params

CONST, XS, STEP_VALUE = "const", "xs", "step"  # what a value depends on


class Section(enum.Enum):
    PRE = "once, before the loop"
    CHUNK = "per chunk, before its steps (all its steps at once)"
    STEP = "per step"
    POST = "per chunk, after its steps (all its steps at once)"


PRE, CHUNK, STEP, POST = Section.PRE, Section.CHUNK, Section.STEP, Section.POST
BATCHED = (CHUNK, POST)


def is_var(v):
    return not isinstance(v, Literal)


# --- how an accumulator carry `acc = acc + term` is computed ---------------------------------
@dataclasses.dataclass(frozen=True)
class RunningSum:
    """acc + term_t step after step, in the loop's order and acc's dtype (one cumulative sum
    per chunk); the carry's history is available to ys."""
    term: Var
    loop_order = True

    def reads(self):
        return (self.term,)

    def show(self, name):
        return f"running sum of {name(self.term)}, in the loop's order"


@dataclasses.dataclass(frozen=True)
class SumSteps:
    """acc + sum_t term_t, once per chunk (additions reordered: gradient accumulators only)."""
    term: Var
    loop_order = False

    def reads(self):
        return (self.term,)

    def show(self, name):
        return f"+= sum over the chunk's steps of {name(self.term)}"


@dataclasses.dataclass(frozen=True)
class SumStepsAxes:
    """acc + sum over steps and `axes` of x_t: a fused `acc + sum(x, axes)`."""
    x: Var
    axes: tuple
    loop_order = False

    def reads(self):
        return (self.x,)

    def show(self, name):
        return f"+= sum over the chunk's steps and axes {self.axes} of {name(self.x)}"


@dataclasses.dataclass(frozen=True)
class SumAtB:
    """acc + sum_t a_t.T @ q_t: one matmul over all the chunk's rows."""
    a: Var
    q: Var
    loop_order = False

    def reads(self):
        return (self.a, self.q)

    def show(self, name):
        return f"+= sum over the chunk's steps of {name(self.a)}.T @ {name(self.q)}"


@dataclasses.dataclass(frozen=True)
class SumAB:
    """acc + sum_t p_t @ q_t: one einsum over the chunk."""
    p: Var
    q: Var
    loop_order = False

    def reads(self):
        return (self.p, self.q)

    def show(self, name):
        return f"+= sum over the chunk's steps of {name(self.p)} @ {name(self.q)}"


@dataclasses.dataclass(frozen=True)
class SumScatter:
    """acc + sum_t scatter_add(g_t, *arrays_t, index=index): each step's rows added into acc
    where they belong, in place (a gradient of `X[t]` on a closed-over X), instead of a
    zeros-shaped-like-acc array per step."""
    g: Var
    arrays: tuple
    index: tuple
    loop_order = False

    def reads(self):
        return (self.g,) + tuple(self.arrays)

    def show(self, name):
        return (f"+= {format_scatter(self.g, self.arrays, self.index, name)} for each of "
                "the chunk's steps, added in place")


def format_scatter(g, arrays, index, name):
    return f"scatter_add({', '.join(name(v) for v in (g, *arrays))}, index={list(index)})"


@dataclasses.dataclass(frozen=True)
class InPlace:
    """An indexed update (scatter_set, or add of a scatter_add) run in place, into carry
    `carry`'s loop-owned buffer; `scatter` is the scatter_add equation an add replaces."""
    carry: int
    scatter: object = None  # int | None


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """Carry `carry` is `acc + term`, computed by `how` instead of its add equation `add`."""
    carry: int
    add: int
    how: object  # RunningSum | SumSteps | SumStepsAxes | SumAtB | SumAB | SumScatter


# --- the program ------------------------------------------------------------------------------
@dataclasses.dataclass
class LoopProgram:
    graph: object  # the traced body (a Graph)
    num_carry: int
    num_xs: int
    reverse: bool
    sum_carries: frozenset  # carries whose additions may be reordered (gradient accumulators)
    eqns: tuple  # the body's equations its outputs need, in order (indices name them)
    kind: dict  # Var -> CONST | XS | STEP_VALUE: what it depends on
    section: dict  # eqn index -> Section; absent: not computed
    batch: dict  # eqn index -> its function on whole chunks (CHUNK and POST equations)
    accumulators: dict  # carry index -> Accumulator
    contiguous: frozenset = frozenset()  # PRE views copied once into C order
    in_place: dict = dataclasses.field(default_factory=dict)  # eqn index -> InPlace
    copied: frozenset = frozenset()  # STEP views copied, as they outlive an in-place update
    storage: object = None  # the memory plan (memory.Storage), chosen last
    fired: tuple = ()  # the passes that changed the program, in order

    def replace(self, fired=None, **changes):
        """A new program with `changes`; `fired` names the pass if it changed anything."""
        new = dataclasses.replace(self, **changes)
        if fired is not None and any(getattr(self, k) != v for k, v in changes.items()):
            new.fired = self.fired + (fired,)
        return new

    # --- views of the body ----------------------------------------------------------------
    @property
    def carry_in(self):
        return self.graph.invars[:self.num_carry]

    @property
    def x_in(self):
        return self.graph.invars[self.num_carry:]

    @property
    def carry_out(self):
        return self.graph.outvars[:self.num_carry]

    @property
    def y_out(self):
        return self.graph.outvars[self.num_carry:]

    @functools.cached_property
    def producer(self):
        return {v: n for n, e in enumerate(self.eqns) for v in e.outvars}

    @functools.cached_property
    def uses(self):
        """How many equation inputs read each value (whatever their section)."""
        return collections.Counter(v for e in self.eqns for v in e.invars if is_var(v))

    @functools.cached_property
    def out_uses(self):
        return collections.Counter(v for v in self.graph.outvars if is_var(v))

    def in_section(self, section):
        """Indices of the equations in `section`, in order."""
        return [n for n in range(len(self.eqns)) if self.section.get(n) is section]

    def is_step_value(self, v):
        """Computed per step: a carry input or a STEP equation's output."""
        n = self.producer.get(v)
        return self.kind[v] == STEP_VALUE and (n is None or self.section.get(n) is STEP)

    def batched_into(self, n):
        """For a CHUNK or POST equation, its function that writes into a given array
        (`fn(*args, out=...)`), or None."""
        return batch.batched_into(self.eqns[n], *batched_flags(self.kind, self.eqns[n]))


def batched_flags(kind, eqn):
    """(batched, shapes) of an equation's inputs when it runs on whole chunks: every input
    that is not a constant has a leading axis of steps."""
    flags = [is_var(v) and kind[v] != CONST for v in eqn.invars]
    shapes = [v.shape if is_var(v) else () for v in eqn.invars]
    return flags, shapes


# --- the verifier -------------------------------------------------------------------------------
class InvalidLoop(AssertionError):
    """A pass produced a program that breaks the form's rules (a compiler bug)."""


# Which sections' values each section may read (besides constants, literals and PRE).
_READABLE = {
    PRE: set(),
    CHUNK: {"xs", CHUNK},
    STEP: {"xs", CHUNK, "carry", STEP},
    POST: {"xs", CHUNK, "carry", STEP, POST},
}


def verify(prog, after="?"):
    """Check the rules every stage keeps; raise InvalidLoop naming the pass `after`."""
    def fail(msg):
        raise InvalidLoop(f"loop compiler: after pass {after!r}: {msg}\n{format_loop(prog)}")

    origin = {v: "const" for v in prog.graph.constvars}
    origin.update({v: "carry" for v in prog.carry_in})
    origin.update({v: "xs" for v in prog.x_in})
    defined = set(origin)
    adds = {a.add: a for a in prog.accumulators.values()}
    for n, eqn in enumerate(prog.eqns):
        where = prog.section.get(n)
        if where is None:
            continue
        if n in adds:
            fail(f"equation {n} ({eqn.prim.name}) is carry {adds[n].carry}'s accumulator add "
                 "and also runs in a section")
        for v in alias.reads_of(prog, n):
            if not is_var(v):
                continue
            if v not in defined:
                fail(f"equation {n} ({eqn.prim.name}, {where.name}) reads a value no earlier "
                     "equation or input defines")
            src = origin[v]
            if src not in ("const", PRE) and src not in _READABLE[where]:
                fail(f"equation {n} ({eqn.prim.name}, {where.name}) reads a value of "
                     f"{getattr(src, 'name', src)}, which that section cannot see")
        if where in BATCHED and n not in prog.batch:
            fail(f"equation {n} ({eqn.prim.name}) runs on whole chunks but has no batch rule")
        for v in eqn.outvars:
            if v in defined:
                fail(f"equation {n} defines a value twice")
            defined.add(v)
            origin[v] = where
    for i, acc in prog.accumulators.items():
        cin, cout = prog.carry_in[i], prog.carry_out[i]
        add = prog.eqns[acc.add]
        if add.outvars[0] is not cout or cin not in add.invars:
            fail(f"carry {i}'s accumulator does not replace `carry + term`")
        if not acc.how.loop_order and i not in prog.sum_carries:
            fail(f"carry {i} is a user's carry, but its additions are reordered")
        for v in acc.how.reads():
            if is_var(v) and v not in defined:
                fail(f"carry {i}'s accumulator reads a value that is not computed")
        defined.add(cout)
    for i, (cin, cout) in enumerate(zip(prog.carry_in, prog.carry_out)):
        if is_var(cout) and (cout.shape, cout.dtype) != (cin.shape, cin.dtype):
            fail(f"carry {i} changes from {cin.type} to {cout.type}")
    for v in prog.graph.outvars:
        if is_var(v) and v not in defined:
            fail("an output of the body is not computed")
    _verify_in_place(prog, fail)
    if prog.storage is not None:
        _verify_storage(prog, fail)
    return prog


def _verify_in_place(prog, fail):
    """Each carry's in-place updates form one chain from the carry in to the carry out that
    alias.chain_problem accepts; a replaced scatter_add is not computed; copies are of step
    work."""
    for n, rec in sorted(prog.in_place.items()):
        if rec.scatter is not None and prog.section.get(rec.scatter) is not None:
            fail(f"equation {rec.scatter} is replaced by in-place update {n} but still runs")
    for i, chain in alias.in_place_chains(prog).items():
        if i in prog.accumulators:
            fail(f"carry {i} is an accumulator and also updated in place")
        problem = alias.chain_problem(prog, i, chain, prog.copied)
        if problem:
            fail(f"carry {i} is updated in place, but {problem}")
    for n in prog.copied:
        if prog.section.get(n) is not STEP:
            fail(f"equation {n} is copied after it runs but is no step work")


def _verify_storage(prog, fail):
    """An array overwritten must be dead: one reader, not an output, same type, and the
    writer elementwise; a result computed into a stack must be read by nothing else."""
    mem = prog.storage
    for table, where in ((mem.batch_over, BATCHED), (mem.step_over, (STEP,))):
        for n, u in table.items():
            eqn, v = prog.eqns[n], prog.eqns[n].outvars[0]
            if prog.section.get(n) not in where or not eqn.prim.elementwise:
                fail(f"equation {n} ({eqn.prim.name}) writes over an input but may not")
            if (u not in eqn.invars or prog.uses[u] != 1 or prog.out_uses[u]
                    or (u.shape, u.dtype) != (v.shape, v.dtype)):
                fail(f"equation {n} ({eqn.prim.name}) writes over an array that is still live")
    for n in mem.into:
        v = prog.eqns[n].outvars[0]
        if prog.section.get(n) not in BATCHED or prog.uses[v] or prog.out_uses[v] != 1:
            fail(f"equation {n} is computed into a y's stack but something else reads it")


# --- the printer ------------------------------------------------------------------------------
def format_loop(prog, names=None):
    """The program as text: each section's equations with the body's printed names (or the
    given ones), then the accumulators and the passes that fired."""
    names = dict(names or {})
    format_graph(prog.graph, 0, names)  # names the values `names` does not

    def name(v):
        return repr(v.value) if not is_var(v) else names.get(v, "?")

    lines = [f"loop over {prog.graph.name} ({'reverse' if prog.reverse else 'forward'}), "
             f"passes fired: {', '.join(prog.fired) or 'none'}"]
    for section in Section:
        ns = prog.in_section(section)
        if not ns:
            continue
        lines.append(f"  {section.name.lower()}: {section.value}")
        for n in ns:
            eqn = prog.eqns[n]
            outs = ", ".join(f"{name(v)}: {v.type}" for v in eqn.outvars)
            copy = "  (copied into C order)" if n in prog.contiguous else ""
            copy += "  (copied: it outlives an in-place update)" if n in prog.copied else ""
            rec = prog.in_place.get(n)
            if rec is not None:
                copy += f"  (in place, into carry {rec.carry}'s buffer"
                if rec.scatter is not None:
                    s = prog.eqns[rec.scatter]
                    copy += (f", replacing {name(s.outvars[0])} = "
                             + format_scatter(s.invars[0], s.invars[1:], s.params["index"], name))
                copy += ")"
            args = [name(v) for v in eqn.invars] + format_params(eqn)
            lines.append(f"    {outs} = {eqn.prim.name}({', '.join(args)}){copy}")
    for i, acc in sorted(prog.accumulators.items()):
        lines.append(f"  carry {i} ({name(prog.carry_in[i])}): {acc.how.show(name)}")
    if prog.storage is not None:
        lines.append("  memory:")
        lines += [f"    {line}" for line in prog.storage.describe(prog, name)]
    return "\n".join(lines)
