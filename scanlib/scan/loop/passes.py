"""The loop compiler's passes: each a function from one LoopProgram to the next, in the order
`PASSES` lists them. The first program runs every equation per step (the body as traced);
each pass moves work out of the step or replaces it, and says in its docstring when it must
not fire. With CHECKS on (the default), `verify` runs after every pass.

Imports tape, ops and the loop IR.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq

from ...ops.elementwise import add as add_p
from ...ops.linalg import matmul_p
from ...ops.structural import sum_p, transpose_p
from ...tape.graph import (Eqn, Graph, has_effect, merge_rebound, param_fingerprint,
                           prune_outputs, used_vars)
from . import alias
from .batch import batched_impl
from .memory import plan_memory
from .ir import (BATCHED, CHUNK, CONST, POST, PRE, STEP, STEP_VALUE, XS, Accumulator, InPlace,
                 LoopProgram, RunningSum, SumAB, SumAtB, SumScatter, SumSteps, SumStepsAxes,
                 batched_flags, is_var, verify)

CHECKS = True  # verify the program after every pass (cheap: linear in the body's size)


def from_body(graph, num_carry, num_xs, reverse, sum_carries=()):
    """The body as a loop that runs every equation its outputs need, per step."""
    eqns, _ = used_vars(graph.eqns, graph.outvars)
    kind = {v: STEP_VALUE for v in graph.invars[:num_carry]}
    kind.update({v: XS for v in graph.invars[num_carry:]})
    kind.update({v: CONST for v in graph.constvars})
    kind.update({v: STEP_VALUE for e in eqns for v in e.outvars})
    return LoopProgram(graph, num_carry, num_xs, reverse, frozenset(sum_carries), tuple(eqns),
                       kind, {n: STEP for n in range(len(eqns))}, {}, {})


def prune_nested_results(prog):
    """A multiple-result equation of the body (a nested scan, often the backward scan of a
    checkpointed segment) computes only the results the body reads: the cotangents of the
    inputs that need none are dropped with the work that made them (graph.prune_outputs;
    each primitive's `prune` rule says what it can drop, in its own body too). Must not fire
    where every result is read and every nested body computes only what it returns."""
    graph = prune_outputs(merge_rebound(prog.graph))
    if graph is prog.graph:
        return prog
    new = from_body(graph, prog.num_carry, prog.num_xs, prog.reverse, prog.sum_carries)
    return dataclasses.replace(new, fired=prog.fired + ("prune_nested_results",))


def eliminate_common_subexpressions(prog):
    """Equations that compute the same thing (same primitive, params and inputs, so the same
    result) are computed once, and their readers read the first; a backward body often asks
    for one transpose or product twice. Literals match by type and value; params by the
    graph fingerprint's rules. Must not merge anything whose inputs differ in any way."""
    seen, rename, eqns = {}, {}, []
    for n, eqn in enumerate(prog.eqns):
        invars = [rename.get(v, v) if is_var(v) else v for v in eqn.invars]
        key = (eqn.prim, tuple(_operand_key(v) for v in invars), _params_key(eqn.params))
        if has_effect(eqn):  # two prints of one value print twice
            key = (key, n)
        first = seen.get(key)
        if first is not None and all((a.shape, a.dtype) == (b.shape, b.dtype)
                                     for a, b in zip(first.outvars, eqn.outvars)):
            rename.update(zip(eqn.outvars, first.outvars))
            continue
        new = eqn if invars == list(eqn.invars) else Eqn(eqn.prim, invars, eqn.params,
                                                          eqn.outvars)
        seen.setdefault(key, new)
        eqns.append(new)
    if not rename:
        return prog
    g = prog.graph
    graph = Graph(g.invars, g.constvars, g.consts, eqns,
                  [rename.get(v, v) if is_var(v) else v for v in g.outvars], g.name, g.device)
    return prog.replace(graph=graph, eqns=tuple(eqns),
                        section={n: STEP for n in range(len(eqns))},
                        fired="eliminate_common_subexpressions")


def _operand_key(v):
    return ("lit", type(v.value).__name__, repr(v.value)) if not is_var(v) else id(v)


def _params_key(params):
    return tuple(sorted((k, param_fingerprint(p)) for k, p in params.items()
                        if not k.startswith("_")))


def _buffer_updates(prog, i, index=None):
    """Carry i's chain of indexed updates: from the carry in, each stage's last update (see
    alias.write_into), as (update index, the buffer stage it reads). `index`:
    alias.reader_index(prog)."""
    chain, b = [], prog.carry_in[i]
    for _ in range(len(prog.eqns)):
        found = [n for n in alias.readers(prog, {b}, index) if prog.section.get(n) is STEP
                 and alias.write_into(prog, n, b) is not None]
        if not found:
            break
        chain.append((found[-1], b))
        b = prog.eqns[found[-1]].outvars[0]
    return chain


def sink_buffer_updates(prog):
    """An indexed update of a carry buffer (`scatter_set(buf, v, t)`, or `buf +
    scatter_add(v, t)`) moves after every other equation that reads that stage of the buffer
    or a view of it, as far as the data allow, so that update_in_place can write into the
    buffer: those readers must see it before it changes. A backward body rebuilds its carry
    cotangent (`scatter_set(ct, 0, t)`) before it reads `ct[t]`; this puts the read first.
    Only reorders (the body's meaning is unchanged). Must not move an update past a reader
    that needs the update's own result (that buffer then stays functional), and leaves the
    order as it was when the constraints of several updates conflict."""
    after = collections.defaultdict(set)  # eqn -> equations that must run before it
    index = alias.reader_index(prog)
    for i in range(prog.num_carry):
        for n, b in _buffer_updates(prog, i, index):
            later = _downstream(prog, n)
            first = set(alias.readers(prog, alias.aliases(prog, b, through=n), index)) - {n}
            if not first & later:
                after[n] |= first
    if not after:
        return prog
    order = _topological(prog, after)
    if order is None or order == list(range(len(prog.eqns))):
        return prog
    eqns = tuple(prog.eqns[n] for n in order)
    return prog.replace(eqns=eqns, section={n: STEP for n in range(len(eqns))},
                        fired="sink_buffer_updates")


def _downstream(prog, n):
    """The equations that read equation n's results, directly or not."""
    reach, out = set(prog.eqns[n].outvars), set()
    for m in range(n + 1, len(prog.eqns)):
        if any(is_var(v) and v in reach for v in prog.eqns[m].invars):
            out.add(m)
            reach.update(prog.eqns[m].outvars)
    return out


def _topological(prog, after):
    """The equations in data order plus `after`, earliest first where free; None on a cycle."""
    need = {n: {prog.producer[v] for v in e.invars if is_var(v) and v in prog.producer}
            | after.get(n, set()) for n, e in enumerate(prog.eqns)}
    users = collections.defaultdict(list)
    for n, deps in need.items():
        for d in deps:
            users[d].append(n)
    left = {n: len(deps) for n, deps in need.items()}
    ready = [n for n, k in left.items() if k == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        n = heapq.heappop(ready)
        order.append(n)
        for u in users[n]:
            left[u] -= 1
            if left[u] == 0:
                heapq.heappush(ready, u)
    return order if len(order) == len(prog.eqns) else None


def hoist(prog):
    """Loop-invariant work leaves the step: an equation of constants only runs once (PRE);
    one of constants and xs only runs per chunk on all its steps at once (CHUNK), where its
    primitive has a batching rule for these inputs. Must not fire for anything that reads a
    carry, directly or through another equation."""
    kind, section, batch = dict(prog.kind), {}, {}
    for n, eqn in enumerate(prog.eqns):
        in_kinds = [kind[v] for v in eqn.invars if is_var(v)]
        where, k = STEP, STEP_VALUE
        if has_effect(eqn):  # debug printing (a loop that prints too): at every step
            pass
        elif all(x == CONST for x in in_kinds):
            where, k = PRE, CONST
        elif all(x in (CONST, XS) for x in in_kinds):
            fn = batched_impl(eqn, *batched_flags(kind, eqn))
            if fn is not None:
                where, k, batch[n] = CHUNK, XS, fn
        section[n] = where
        kind.update({v: k for v in eqn.outvars})
    return prog.replace(kind=kind, section=section, batch=batch, fired="hoist")


def find_accumulators(prog):
    """A carry updated as `acc + term` (same shape and dtype, the term not constant) and read
    by nothing else (no equation, no other carry: a lag or a copy is not an accumulator)
    becomes an Accumulator and its add leaves the step. A backward body's gradient
    accumulator that no y reads is summed per chunk (SumSteps), which reorders its additions:
    allowed there only (`sum_carries`), unless the term comes from control flow (nothing to
    batch there). Any carry whose term is carry-independent becomes a RunningSum, in the
    loop's order and dtype. Anything else stays a per-step carry."""
    carry_reads = collections.Counter(v for v in prog.carry_out if is_var(v))
    y_reads = collections.Counter(v for v in prog.y_out if is_var(v))
    accumulators, section = {}, dict(prog.section)
    for i, (cin, cout) in enumerate(zip(prog.carry_in, prog.carry_out)):
        n = prog.producer.get(cout) if is_var(cout) else None
        if n is None or prog.eqns[n].prim is not add_p or section.get(n) is not STEP:
            continue
        a, b = prog.eqns[n].invars
        term = b if a is cin else a if b is cin else None
        if (term is None or not is_var(term) or term is cin or term.shape != cin.shape
                or term.dtype != cin.dtype or prog.kind[term] == CONST
                or prog.uses[cin] != 1 or prog.uses[cout]
                or carry_reads[cin] or carry_reads[cout] != 1):
            continue
        if i in prog.sum_carries and not y_reads[cin] and not y_reads[cout]:
            if _made_per_step(prog, term):
                continue
            accumulators[i] = Accumulator(i, n, SumSteps(term))
        elif prog.kind[term] == XS:
            accumulators[i] = Accumulator(i, n, RunningSum(term))
        else:
            continue
        del section[n]
    return prog.replace(accumulators=accumulators, section=section, fired="find_accumulators")


def scatter_into_accumulators(prog):
    """A gradient accumulator summed per chunk whose term is `scatter_add(g, *arrays)` (the
    cotangent of `X[t]` on a closed-over X), read by nothing else, becomes a SumScatter: each
    step's g is added into the accumulator at its index, in place, instead of a
    zeros-shaped-like-X array per step that is then summed. Gradient accumulators only
    (SumSteps: their additions may be reordered); not for a 0-d accumulator, nor a term
    whose g and index arrays are all constants (that is no per-step term)."""
    accumulators, section = dict(prog.accumulators), dict(prog.section)
    for i, acc in prog.accumulators.items():
        if not isinstance(acc.how, SumSteps):
            continue
        term = acc.how.term
        m = alias.scatter_of(prog, term)
        if (m is None or section.get(m) is not STEP or prog.uses[term] != 1
                or prog.out_uses[term] or not prog.carry_in[i].shape):
            continue
        g, *arrays = prog.eqns[m].invars
        if all(not is_var(v) or prog.kind[v] == CONST for v in (g, *arrays)):
            continue
        accumulators[i] = Accumulator(i, acc.add, SumScatter(g, tuple(arrays),
                                                             prog.eqns[m].params["index"]))
        del section[m]
    return prog.replace(accumulators=accumulators, section=section,
                        fired="scatter_into_accumulators")


def _made_per_step(prog, term):
    """Whether term comes from control flow (a nested scan, a checkpoint), which runs one
    step at a time whatever the sections say: summing such terms per chunk would only stack
    C of them (a nested scan's weight gradients, C x the weights) to batch nothing."""
    n = prog.producer.get(term)
    return n is not None and prog.eqns[n].prim.multiple_results


def defer(prog):
    """Step work off the carry's chain (the critical path from the carries to the next
    carries) runs after each chunk's steps, on all of them at once (POST), where its
    primitive can batch; one that cannot stays per step, with all the step work it reads.
    Must not move anything a next carry depends on."""
    critical = set()

    def mark(v):  # v and the step work it depends on are on the critical path
        stack = [v]
        while stack:
            u = stack.pop()
            n = prog.producer.get(u) if is_var(u) else None
            if n is None or n in critical or prog.section.get(n) is not STEP:
                continue
            critical.add(n)
            stack.extend(w for w in prog.eqns[n].invars if is_var(w))

    for i, v in enumerate(prog.carry_out):
        if i not in prog.accumulators:
            mark(v)
    step = prog.in_section(STEP)
    for _ in range(len(step) + 1):  # each round marks at least one more equation critical
        deferred, stuck = {}, None
        for n in step:
            if n in critical:
                continue
            fn = batched_impl(prog.eqns[n], *batched_flags(prog.kind, prog.eqns[n]))
            if fn is None:
                stuck = n
                break
            deferred[n] = fn
        if stuck is None:
            break
        for v in prog.eqns[stuck].outvars:
            mark(v)
    else:
        raise AssertionError("defer: fixpoint not reached")
    section = {**prog.section, **{n: POST for n in deferred}}
    return prog.replace(section=section, batch={**prog.batch, **deferred}, fired="defer")


def fuse_accumulator_terms(prog):
    """A per-chunk sum whose term is batched work read by nothing else reads that work's
    inputs instead: `acc + sum(x, axes)` sums x over the steps and axes at once
    (SumStepsAxes); `acc + p @ q` of 2-d operands is one product over the chunk (SumAB), and
    one matmul of all the chunk's rows when p is a transpose (SumAtB). Must not fire when the
    term (or the transpose) is also a y, another carry or read by another equation."""
    accumulators, section = dict(prog.accumulators), dict(prog.section)

    def private(v):  # computed by batched work and read by nothing but this sum
        n = prog.producer.get(v)
        return (n is not None and section.get(n) in BATCHED and prog.uses[v] == 1
                and not prog.out_uses[v])

    for i, acc in prog.accumulators.items():
        if not isinstance(acc.how, SumSteps) or not private(acc.how.term):
            continue
        n = prog.producer[acc.how.term]
        eqn = prog.eqns[n]
        if eqn.prim is sum_p and not eqn.params["keepdims"]:
            x = eqn.invars[0]
            axes = tuple(range(len(x.shape))) if eqn.params["axis"] is None \
                else eqn.params["axis"]
            how, drop = SumStepsAxes(x, axes), [n]
        elif eqn.prim is matmul_p and all(is_var(v) and len(v.shape) == 2
                                          and prog.kind[v] != CONST for v in eqn.invars):
            p, q = eqn.invars
            pn = prog.producer.get(p)
            if (private(p) and prog.eqns[pn].prim is transpose_p
                    and prog.eqns[pn].params["axes"] == (1, 0)
                    and prog.kind[prog.eqns[pn].invars[0]] != CONST):
                how, drop = SumAtB(prog.eqns[pn].invars[0], q), [n, pn]
            else:
                how, drop = SumAB(p, q), [n]
        else:
            continue
        accumulators[i] = Accumulator(i, acc.add, how)
        for d in drop:
            del section[d]
    return prog.replace(accumulators=accumulators, section=section, fired="fuse_accumulator_terms")


def drop_dead(prog):
    """Work done once or per chunk (PRE, CHUNK) that nothing reads any more, since fusion
    replaced its readers, is not computed. Step and POST work always is (the defer pass
    chose it)."""
    reads = {v for v in prog.graph.outvars if is_var(v)}
    for acc in prog.accumulators.values():
        reads.update(v for v in acc.how.reads() if is_var(v))
    section = dict(prog.section)
    for n in reversed(range(len(prog.eqns))):
        where = section.get(n)
        if where is None:
            continue
        eqn = prog.eqns[n]
        if where in (STEP, POST) or any(v in reads for v in eqn.outvars):
            reads.update(v for v in eqn.invars if is_var(v))
        else:
            del section[n]
    return prog.replace(section=section, fired="drop_dead")


def update_in_place(prog):
    """A carry buffer updated by indexed updates (`buf.at[t].set(h)`, `.add(h)`) whose old
    value nothing else needs is written in place: the loop copies the carry's initial value
    once (it may be the user's array) and then writes each step's rows into that loop-owned
    buffer, O(row) per step instead of a copy of the buffer. A view of the buffer that
    outlives the step (a y, a residual, read by batched work) is copied when computed.

    Must not fire (alias.chain_problem says why) when: the buffer or a stage of it is a y, a
    residual or another carry; a view of it is read after the update that overwrites it or
    outside the step; the update reads the buffer itself (`buf.at[t].set(buf[t-1])`); an add
    at index arrays that may repeat a position, for a user's carry (np.add.at adds repeats
    one by one, the loop sums them into zeros first: another rounding; a gradient sum may);
    the buffer is 0-d or an accumulator. A set at a repeated position keeps the last value,
    exactly as the functional update. Signed zeros: `buf + scatter_add(v)` turns a -0.0
    elsewhere in buf into +0.0 and the in-place add does not (they compare equal)."""
    start = prog
    indexed = None  # (the program, its alias.reader_index): made again when prog changes
    for i in range(prog.num_carry):
        if i in prog.accumulators:
            continue
        if indexed is None or indexed[0] is not prog:
            indexed = (prog, alias.reader_index(prog))
        chain = [n for n, _ in _buffer_updates(prog, i, indexed[1])]
        if not chain or prog.eqns[chain[-1]].outvars[0] is not prog.carry_out[i]:
            continue
        stages = [prog.carry_in[i]] + [prog.eqns[n].outvars[0] for n in chain]
        copied = set(prog.copied)
        for _ in range(len(prog.eqns) + 1):  # each round copies one more view, or stops
            new = set()
            for b, n in zip(stages, chain + [None]):
                new |= alias.escaping_views(prog, b, n, frozenset(copied))
            if new <= copied:
                break
            copied |= new
        if alias.chain_problem(prog, i, chain, frozenset(copied)) is not None:
            continue
        records = {}
        section = dict(prog.section)
        for n, b in zip(chain, stages):
            scatter, _ = alias.write_into(prog, n, b)
            records[n] = InPlace(i, scatter)
            if scatter is not None:
                del section[scatter]
        candidate = prog.replace(in_place={**prog.in_place, **records}, section=section,
                                 copied=frozenset(copied))
        # Checked again on the rewritten program, every carry's chain as the verifier checks
        # them: with its scatter_adds replaced, a view of a buffer read before an update may
        # now be read after it (`c.at[:, 0].add(c[:, 2])`'s backward), which the check
        # before missed; and the view may be of another carry's buffer, updated in place
        # already (an add into carry 1 of a row of carry 0, read after carry 0's set).
        if any(alias.chain_problem(candidate, c, ch, candidate.copied) is not None
               for c, ch in alias.in_place_chains(candidate).items()):
            continue
        prog = candidate
    return start.replace(in_place=prog.in_place, section=prog.section, copied=prog.copied,
                         fired="update_in_place")


def copy_constant_views(prog):
    """A constant view (W.T) that a per-step matmul reads is copied once into C order: BLAS
    on a transposed operand was up to 1.6x slower per step at the benchmark's sizes. Only
    views of constants (PRE), only for step matmuls."""
    step_matmul_reads = {v for n in prog.in_section(STEP) if prog.eqns[n].prim is matmul_p
                         for v in prog.eqns[n].invars}
    contiguous = frozenset(n for n in prog.in_section(PRE) if prog.eqns[n].prim.view
                           and prog.eqns[n].outvars[0] in step_matmul_reads)
    return prog.replace(contiguous=contiguous, fired="copy_constant_views")


PASSES = (prune_nested_results, eliminate_common_subexpressions, sink_buffer_updates, hoist,
          find_accumulators, scatter_into_accumulators, defer, fuse_accumulator_terms,
          drop_dead, update_in_place, copy_constant_views, plan_memory)


def stages(graph, num_carry, num_xs, reverse, sum_carries=()):
    """[(name, program)] from the body as traced through every pass, each verified."""
    prog = verify(from_body(graph, num_carry, num_xs, reverse, sum_carries), "from_body")
    out = [("from_body", prog)]
    for run_pass in PASSES:
        prog = run_pass(prog)
        if CHECKS:
            verify(prog, run_pass.__name__)
        out.append((run_pass.__name__, prog))
    return out


def compile_program(graph, num_carry, num_xs, reverse, sum_carries=()):
    """The LoopProgram the code generator prints: the body through all the passes."""
    return stages(graph, num_carry, num_xs, reverse, sum_carries)[-1][1]
