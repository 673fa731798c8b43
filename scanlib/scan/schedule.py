"""Where each equation of a scan body runs: the analysis behind the compiled loop.

  const     closed-over values only: computed once, before the loop
  xs        xs and consts but not the carry: computed for a chunk of steps at once
  critical  on the path from carry to next carry: run per step, the only real loop work
  deferred  carry-dependent but off that path (a y, a gradient term): computed for a chunk
            of steps at once after its per-step loop, from stacked inputs

A carry updated as `acc + term` and read by nothing else is an accumulator. A backward body's
gradient accumulator is summed per chunk (`sum_t a_t.T @ b_t` becomes one large matmul); any
carry with a carry-independent term becomes a cumulative sum per chunk, in the loop's order.
Imports tape and scan.batching.
"""

from __future__ import annotations

import collections

from ..tape import Literal
from ..tape.graph import used_vars
from .batching import batched_impl, batched_into

CONST, XS, STEP = "const", "xs", "step"


def is_var(v):
    return not isinstance(v, Literal)


class Schedule:
    """The analysis of one body for the loop: kinds, accumulators, critical and deferred."""

    def __init__(self, graph, num_carry, num_xs, reverse, sum_carries=()):
        self.graph, self.num_carry, self.num_xs, self.reverse = graph, num_carry, num_xs, reverse
        self.sum_carries = frozenset(sum_carries)
        self.carry_in, self.x_in = graph.invars[:num_carry], graph.invars[num_carry:]
        self.carry_out, self.y_out = graph.outvars[:num_carry], graph.outvars[num_carry:]
        self.eqns, _ = used_vars(graph.eqns, graph.outvars)
        self._classify()
        self._find_accumulators()
        self._split_step_work()
        self._find_live()

    def is_step_value(self, v):
        """Computed per step (a carry input or a critical equation's output)."""
        n = self.producer.get(v)
        return self.kind[v] == STEP and (n is None or n in self.critical)

    def _classify(self):
        kind = {v: STEP for v in self.carry_in}
        kind.update({v: XS for v in self.x_in})
        kind.update({v: CONST for v in self.graph.constvars})
        self.batched = {}  # eqn index -> function of whole-chunk inputs
        for n, eqn in enumerate(self.eqns):
            in_kinds = [kind[v] for v in eqn.invars if is_var(v)]
            k = STEP
            if all(x == CONST for x in in_kinds):
                k = CONST
            elif all(x in (CONST, XS) for x in in_kinds):
                fn = self._batch_fn(eqn, kind)
                if fn is not None:
                    k, self.batched[n] = XS, fn
            for v in eqn.outvars:
                kind[v] = k
        self.kind = kind
        self.producer = {v: n for n, e in enumerate(self.eqns) for v in e.outvars}
        self.uses = collections.Counter(v for e in self.eqns for v in e.invars if is_var(v))
        self.out_uses = collections.Counter(v for v in self.graph.outvars if is_var(v))

    def _batch_fn(self, eqn, kind, rule=batched_impl):
        flags = [is_var(v) and kind[v] != CONST for v in eqn.invars]
        shapes = [v.shape if is_var(v) else () for v in eqn.invars]
        return rule(eqn, flags, shapes)

    def batched_into(self, n):
        """For a batched or deferred equation, its function that writes into a given array
        (`fn(*args, out=...)`), or None."""
        return self._batch_fn(self.eqns[n], self.kind, batched_into)

    def _find_accumulators(self):
        """Carries updated as `acc + term` and read by nothing else: no equation, no other
        carry (a lag or a copy), and the add's result only as this carry. A gradient
        accumulator of a backward body (`sum_carries`) that no y reads is summed per chunk
        (`acc`): that reorders its additions, which is allowed only there. Any carry whose
        term is carry-independent has its history computed as one cumulative sum per chunk
        (`prefix`), in the loop's order of additions and its dtype."""
        self.acc, self.prefix = {}, {}  # carry index -> (index of the add eqn, term var)
        carry_reads = collections.Counter(v for v in self.carry_out if is_var(v))
        y_reads = collections.Counter(v for v in self.y_out if is_var(v))
        for i, (cin, cout) in enumerate(zip(self.carry_in, self.carry_out)):
            n = self.producer.get(cout) if is_var(cout) else None
            if n is None or self.eqns[n].prim.name != "add":
                continue
            a, b = self.eqns[n].invars
            term = b if a is cin else a if b is cin else None
            if (term is None or not is_var(term) or term is cin or term.shape != cin.shape
                    or term.dtype != cin.dtype or self.kind[term] == CONST
                    or self.uses[cin] != 1 or self.uses[cout]
                    or carry_reads[cin] or carry_reads[cout] != 1):
                continue
            if i in self.sum_carries and not y_reads[cin] and not y_reads[cout]:
                self.acc[i] = (n, term)
            elif self.kind[term] == XS:
                self.prefix[i] = (n, term)

    def _split_step_work(self):
        acc_adds = {n for n, _ in list(self.acc.values()) + list(self.prefix.values())}
        step_eqns = [n for n, e in enumerate(self.eqns)
                     if self.kind[e.outvars[0]] == STEP and n not in acc_adds]
        critical = set()

        def mark(v):  # v and the step work it depends on are on the critical path
            stack = [v]
            while stack:
                u = stack.pop()
                n = self.producer.get(u) if is_var(u) else None
                if n is None or n in critical or self.kind[u] != STEP or n in acc_adds:
                    continue
                critical.add(n)
                stack.extend(w for w in self.eqns[n].invars if is_var(w))

        for i, v in enumerate(self.carry_out):
            if i not in self.acc and i not in self.prefix:
                mark(v)
        self.fused = self._fuse_accumulator_terms(critical)
        while True:  # step work off the critical path runs batched, if it can
            deferred = {}
            for n in step_eqns:
                if n in critical or n in self.fused_eqns:
                    continue
                fn = self._batch_fn(self.eqns[n], self.kind)
                if fn is None:
                    break
                deferred[n] = fn
            else:
                break
            for v in self.eqns[n].outvars:
                mark(v)
            self.fused = self._fuse_accumulator_terms(critical)
        self.critical, self.deferred = critical, deferred

    def _fuse_accumulator_terms(self, critical):
        """How each accumulator's sum over a chunk is taken; `fused_eqns` are skipped."""
        self.fused_eqns = set()
        plans = {}
        for i, (_, term) in self.acc.items():
            n = self.producer.get(term)
            plan = ("sum0", term)
            if (n is not None and n not in critical and self.uses[term] == 1
                    and not self.out_uses[term]):
                eqn = self.eqns[n]
                if eqn.prim.name == "sum" and not eqn.params["keepdims"]:
                    x = eqn.invars[0]
                    axes = tuple(range(len(x.shape))) if eqn.params["axis"] is None \
                        else eqn.params["axis"]
                    plan = ("sum", x, axes)
                    self.fused_eqns.add(n)
                elif eqn.prim.name == "matmul" and all(
                        is_var(v) and len(v.shape) == 2 and self.kind[v] != CONST
                        for v in eqn.invars):
                    p, q = eqn.invars
                    pn = self.producer.get(p)
                    if (pn is not None and pn not in critical and self.uses[p] == 1
                            and not self.out_uses[p] and self.eqns[pn].prim.name == "transpose"
                            and self.eqns[pn].params["axes"] == (1, 0)
                            and self.kind[self.eqns[pn].invars[0]] != CONST):
                        plan = ("atb", self.eqns[pn].invars[0], q)  # sum_t a_t.T @ q_t
                        self.fused_eqns.update((n, pn))
                    else:
                        plan = ("ab", p, q)
                        self.fused_eqns.add(n)
            plans[i] = plan
        return plans

    def _find_live(self):
        """`live`: the equations whose results something reads, once fusion has replaced
        some of them (a transpose only a fused matmul read is not computed at all)."""
        reads = {v for v in self.graph.outvars if is_var(v)}
        for plan in self.fused.values():
            reads.update(v for v in plan[1:] if is_var(v) and not isinstance(v, tuple))
        reads.update(term for _, term in self.prefix.values())
        summed = {n for n, _ in list(self.acc.values()) + list(self.prefix.values())}
        self.live = set()
        for n in reversed(range(len(self.eqns))):
            eqn = self.eqns[n]
            if n in summed or n in self.fused_eqns:
                continue
            if n in self.critical or n in self.deferred or any(v in reads for v in eqn.outvars):
                self.live.add(n)
                reads.update(v for v in eqn.invars if is_var(v))
