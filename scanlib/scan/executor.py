"""Runs a scan body T times: the forward loop of the scan primitive.

The body graph is compiled once into straight-line Python (`CompiledBody.source` shows it).
Its equations are sorted by what they depend on:

  const     closed-over values only: computed once, before the loop
  xs        xs and consts but not the carry: computed for a chunk of steps at once
  critical  on the path from carry to next carry: run per step, the only real loop work
  deferred  carry-dependent but off that path (a y, a gradient term): computed for a chunk
            of steps at once after its per-step loop, from stacked inputs

A carry updated as `acc + term` and read nowhere else (the gradient accumulators of a
backward body) is summed once per chunk; `sum_t a_t.T @ b_t` becomes one large matmul.
Outputs go into preallocated stacks; a y that is the carry shares one history buffer with
the carry residuals, a y that is an x is the xs array itself, never a copy.
Imports backends, tape and scan.batching.
"""

from __future__ import annotations

import collections

import numpy as np

from .. import backends
from ..tape import Literal
from ..tape.graph import used_vars
from .batching import batched_impl

# Operators written inline in generated code (saves a Python call per equation and step).
_INLINE = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
           "div": "({0} / {1})", "neg": "(-{0})", "matmul": "({0} @ {1})", "pow": "({0} ** {1})"}

CONST, XS, STEP = "const", "xs", "step"
CHUNK_BYTES = 1 << 20  # budget for the per-chunk temporaries of batched work
MIN_CHUNK = 16


def _is_var(v):
    return not isinstance(v, Literal)


def _accumulate_in_place(a):
    """a[t] += a[t-1] along axis 0, in the loop's order of additions."""
    xp = backends.xp_of(a)
    if xp is np:
        np.add.accumulate(a, axis=0, out=a)
    else:  # a GPU scan kernel need not support its output overlapping its input
        a[...] = xp.add.accumulate(a, axis=0)


class CompiledBody:
    """A body graph turned into `run(T, C, *init, *xs, *consts, *stacks)`."""

    def __init__(self, graph, num_carry, num_xs, reverse):
        self.graph, self.num_carry, self.num_xs, self.reverse = graph, num_carry, num_xs, reverse
        self.carry_in, self.x_in = graph.invars[:num_carry], graph.invars[num_carry:]
        self.carry_out, self.y_out = graph.outvars[:num_carry], graph.outvars[num_carry:]
        self.eqns, _ = used_vars(graph.eqns, graph.outvars)
        self._classify()
        self._find_accumulators()
        self._split_step_work()
        self._generate()

    # --- analysis ---------------------------------------------------------------------------
    def _classify(self):
        kind = {v: STEP for v in self.carry_in}
        kind.update({v: XS for v in self.x_in})
        kind.update({v: CONST for v in self.graph.constvars})
        self.batched = {}  # eqn index -> function of whole-chunk inputs
        for n, eqn in enumerate(self.eqns):
            in_kinds = [kind[v] for v in eqn.invars if _is_var(v)]
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
        self.uses = collections.Counter(v for e in self.eqns for v in e.invars if _is_var(v))
        self.out_uses = collections.Counter(v for v in self.graph.outvars if _is_var(v))

    def _batch_fn(self, eqn, kind):
        flags = [_is_var(v) and kind[v] != CONST for v in eqn.invars]
        shapes = [v.shape if _is_var(v) else () for v in eqn.invars]
        return batched_impl(eqn, flags, shapes)

    def _find_accumulators(self):
        """Carries updated as `acc + term` and read by no other equation. Without ys reading
        them they are summed per chunk (`acc`); when ys read them and the term is
        carry-independent, their history is one cumulative sum per chunk (`prefix`)."""
        self.acc, self.prefix = {}, {}  # carry index -> (index of the add eqn, term var)
        for i, (cin, cout) in enumerate(zip(self.carry_in, self.carry_out)):
            n = self.producer.get(cout) if _is_var(cout) else None
            if n is None or self.eqns[n].prim.name != "add":
                continue
            a, b = self.eqns[n].invars
            term = b if a is cin else a if b is cin else None
            if (term is None or not _is_var(term) or term is cin or term.shape != cin.shape
                    or term.dtype != cin.dtype or self.kind[term] == CONST
                    or self.uses[cin] != 1 or self.uses[cout]):
                continue
            if not self.out_uses[cin] and self.out_uses[cout] == 1:
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
                n = self.producer.get(u) if _is_var(u) else None
                if n is None or n in critical or self.kind[u] != STEP or n in acc_adds:
                    continue
                critical.add(n)
                stack.extend(w for w in self.eqns[n].invars if _is_var(w))

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
            if n is not None and n not in critical and self.uses[term] == 1:
                eqn = self.eqns[n]
                if eqn.prim.name == "sum" and not eqn.params["keepdims"]:
                    x = eqn.invars[0]
                    axes = tuple(range(x.ndim)) if eqn.params["axis"] is None \
                        else eqn.params["axis"]
                    plan = ("sum", x, axes)
                    self.fused_eqns.add(n)
                elif eqn.prim.name == "matmul" and all(
                        _is_var(v) and len(v.shape) == 2 and self.kind[v] != CONST
                        for v in eqn.invars):
                    p, q = eqn.invars
                    pn = self.producer.get(p)
                    if (pn is not None and pn not in critical and self.uses[p] == 1
                            and self.eqns[pn].prim.name == "transpose"
                            and self.eqns[pn].params["axes"] == (1, 0)
                            and self.kind[self.eqns[pn].invars[0]] != CONST):
                        plan = ("atb", self.eqns[pn].invars[0], q)  # sum_t a_t.T @ q_t
                        self.fused_eqns.update((n, pn))
                    else:
                        plan = ("ab", p, q)
                        self.fused_eqns.add(n)
            plans[i] = plan
        return plans

    # --- code generation ----------------------------------------------------------------------
    def _generate(self):
        g, kind = self.graph, self.kind
        names = {}
        for i, v in enumerate(self.carry_in):
            names[v] = f"c{i}"
        for j, v in enumerate(self.x_in):
            names[v] = f"X{j}"
        for l, v in enumerate(g.constvars):
            names[v] = f"k{l}"
        for n, e in enumerate(self.eqns):
            for j, v in enumerate(e.outvars):
                names[v] = f"v{n}_{j}"
        env = {"_np": np}
        prologue, chunk_pre, step, chunk_post = [], [], [], []
        step_slices, chunk_slices, stacks = {}, {}, {}

        def literal(v):
            name = f"_l{len(env)}"
            env[name] = v.value
            return name

        def ref_step(v):
            if not _is_var(v):
                return literal(v)
            if kind[v] == XS:
                if v not in step_slices:
                    step_slices[v] = (f"x{self.x_in.index(v)}" if v in self.x_in
                                      else names[v] + "_t")
                    src = f"X{self.x_in.index(v)}[t]" if v in self.x_in else f"{names[v]}[t - t0]"
                    step.append(f"{step_slices[v]} = {src}")
                return step_slices[v]
            return names[v]

        def ref_batch(v):
            if not _is_var(v):
                return literal(v)
            if kind[v] == CONST:
                return names[v]
            if v in self.x_in:
                if v not in chunk_slices:
                    chunk_slices[v] = f"Xc{self.x_in.index(v)}"
                    chunk_pre.insert(0, f"{chunk_slices[v]} = {names[v]}[t0:t1]")
                return chunk_slices[v]
            n = self.producer.get(v)
            if kind[v] == STEP and (n is None or n in self.critical):
                if v not in stacks:
                    stacks[v] = f"S{len(stacks)}"
                return f"{stacks[v]}[:t1 - t0]"
            return names[v]

        def call(n, eqn, args):
            lhs = ", ".join(names[v] for v in eqn.outvars) + (
                "," if eqn.prim.multiple_results else "")
            if eqn.prim.name in _INLINE and not eqn.params:
                return f"{lhs} = {_INLINE[eqn.prim.name].format(*args)}"
            env[f"_f{n}"], env[f"_p{n}"] = eqn.prim.impl, eqn.params
            extra = f", **_p{n}" if eqn.params else ""
            return f"{lhs} = _f{n}({', '.join(args)}{extra})"

        for n, eqn in enumerate(self.eqns):
            out_kind = kind[eqn.outvars[0]]
            if out_kind == CONST:
                prologue.append(call(n, eqn, [ref_batch(v) for v in eqn.invars]))
            elif out_kind == XS:
                env[f"_b{n}"] = self.batched[n]
                lhs = names[eqn.outvars[0]]
                chunk_pre.append(f"{lhs} = _b{n}({', '.join(ref_batch(v) for v in eqn.invars)})")
            elif n in self.critical:
                step.append(call(n, eqn, [ref_step(v) for v in eqn.invars]))
        for n, fn in self.deferred.items():
            eqn = self.eqns[n]
            env[f"_b{n}"] = fn
            chunk_post.append(f"{names[eqn.outvars[0]]} = "
                              f"_b{n}({', '.join(ref_batch(v) for v in eqn.invars)})")

        # Outputs.
        self.y_plan, stacked_ys = [], {}
        hist = set()
        for v in self.y_out:
            if not _is_var(v) or kind[v] == CONST:
                self.y_plan.append(("broadcast", ref_batch(v) if _is_var(v) else literal(v)))
            elif v in self.x_in:
                self.y_plan.append(("xs", self.x_in.index(v)))
            elif v in self.carry_in:
                hist.add(self.carry_in.index(v))
                self.y_plan.append(("hist_in", self.carry_in.index(v)))
            elif v in self.carry_out and kind[v] == STEP and (
                    self.producer[v] in self.critical
                    or self.carry_out.index(v) in self.prefix):
                hist.add(self.carry_out.index(v))
                self.y_plan.append(("hist_out", self.carry_out.index(v)))
            else:
                if v not in stacked_ys:
                    k = stacked_ys[v] = len(stacked_ys)
                    if kind[v] == STEP and self.producer[v] in self.critical:
                        step.append(f"Y{k}[t] = {ref_step(v)}")
                    else:
                        chunk_post.append(f"Y{k}[t0:t1] = {ref_batch(v)}")
                self.y_plan.append(("stack", stacked_ys[v]))
        self.stacked_ys, self.hist = list(stacked_ys), sorted(hist)
        at = "t" if self.reverse else "t + 1"
        for i in self.hist:
            if i not in self.prefix:
                step.append(f"H{i}[{at}] = {ref_step(self.carry_out[i])}")
        env["_accumulate"] = _accumulate_in_place
        for i, (_, term) in self.prefix.items():
            # The loop's own order of additions: H[t+1] = H[t] + term[t], as one cumsum.
            if i not in self.hist:
                chunk_pre.append(f"A{i} = A{i} + {ref_batch(term)}.sum(axis=0)")
            elif self.reverse:
                chunk_pre += [f"H{i}[t0:t1] = {ref_batch(term)}",
                              f"_accumulate(H{i}[t0:t1 + 1][::-1])", f"A{i} = H{i}[t0]"]
            else:
                chunk_pre += [f"H{i}[t0 + 1:t1 + 1] = {ref_batch(term)}",
                              f"_accumulate(H{i}[t0:t1 + 1])", f"A{i} = H{i}[t1]"]
        for i, plan in self.fused.items():
            chunk_post.append(f"A{i} = A{i} + {self._fused_expr(plan, ref_batch, env)}")
        for v, s in stacks.items():  # last: every batched reader above has asked for its stack
            step.append(f"{s}[t - t0] = {ref_step(v)}")
        summed = set(self.acc) | set(self.prefix)
        loop_carries = [i for i in range(self.num_carry) if i not in summed]
        if loop_carries:
            step.append(", ".join(f"c{i}" for i in loop_carries) + " = "
                        + ", ".join(ref_step(self.carry_out[i]) for i in loop_carries))
        self.stack_vars = list(stacks)

        params = (["T", "C"] + [f"c{i}" for i in range(self.num_carry)]
                  + [f"X{j}" for j in range(self.num_xs)]
                  + [f"k{l}" for l in range(len(g.constvars))]
                  + [f"Y{k}" for k in range(len(stacked_ys))] + [f"H{i}" for i in self.hist]
                  + [f"S{k}" for k in range(len(stacks))])
        if self.reverse:
            chunks = "range((T - 1) // C * C, -1, -C)"
            steps = "range(t1 - 1, t0 - 1, -1)"
        else:
            chunks, steps = "range(0, T, C)", "range(t0, t1)"
        lines = [f"def run({', '.join(params)}):"]
        lines += ["    " + s for s in prologue]
        lines += [f"    A{i} = c{i}" for i in sorted(summed)]
        lines += [f"    for t0 in {chunks}:", "        t1 = min(t0 + C, T)"]
        lines += ["        " + s for s in chunk_pre]
        if step:
            lines += [f"        for t in {steps}:"]
            lines += ["            " + s for s in step]
        lines += ["        " + s for s in chunk_post]
        ret = [f"A{i}" if i in summed else f"c{i}" for i in range(self.num_carry)]
        ret += [arg for what, arg in self.y_plan if what == "broadcast"]
        lines.append(f"    return ({', '.join(ret)}{',' if ret else ''})")
        self.source = "\n".join(lines)
        exec(compile(self.source, f"<scan body {g.name}>", "exec"), env)
        self._run = env["run"]
        # Bytes per step of what is batched per chunk: sets the chunk length.
        per_step = sum(v.nbytes for e in self.eqns for v in e.outvars
                       if kind[v] == XS or self.producer[v] in self.deferred)
        per_step += sum(v.nbytes for v in self.stack_vars)
        self.per_step_bytes = per_step

    def _fused_expr(self, plan, ref_batch, env):
        what = plan[0]
        if what == "sum":
            _, x, axes = plan
            return f"{ref_batch(x)}.sum(axis={(0,) + tuple(a + 1 for a in axes)})"
        if what == "atb":
            _, a, q = plan
            return (f"({ref_batch(a)}.reshape(-1, {a.shape[1]}).T @ "
                    f"{ref_batch(q)}.reshape(-1, {q.shape[1]}))")
        if what == "ab":
            _, p, q = plan
            env["_einsum"] = lambda P, Q: backends.xp_of(P, Q).einsum(
                "tij,tjk->ik", P, Q, optimize=True)
            return f"_einsum({ref_batch(p)}, {ref_batch(q)})"
        return f"{ref_batch(plan[1])}.sum(axis=0)"

    # --- running ------------------------------------------------------------------------------
    def chunk_length(self, T):
        if T <= MIN_CHUNK or not self.per_step_bytes:
            return max(T, 1)
        c = max(MIN_CHUNK, CHUNK_BYTES // self.per_step_bytes)
        n_chunks = -(-T // c)
        return -(-T // n_chunks)  # equal chunks

    def __call__(self, length, init, xs, consts):
        """Run the loop; returns (final carry values, ys arrays)."""
        T = length
        arrays = init + xs + consts
        xp = backends.xp_of(*arrays) if arrays else np
        ys_vars = self.y_out
        if T == 0:
            return list(init), [xp.empty((0,) + v.shape, v.dtype) for v in ys_vars]
        C = self.chunk_length(T)
        stacks = [xp.empty((T,) + v.shape, v.dtype) for v in self.stacked_ys]
        hists = []
        for i in self.hist:
            v = self.carry_in[i]
            h = xp.empty((T + 1,) + v.shape, v.dtype)
            h[T if self.reverse else 0] = init[i]
            hists.append(h)
        scratch = [xp.empty((C,) + v.shape, v.dtype) for v in self.stack_vars]
        res = self._run(T, C, *init, *xs, *consts, *stacks, *hists, *scratch)
        carry, broadcast = list(res[:self.num_carry]), list(res[self.num_carry:])
        ys = []
        for (what, arg), v in zip(self.y_plan, ys_vars):
            if what == "stack":
                ys.append(stacks[arg])
            elif what == "xs":
                ys.append(xs[arg])
            elif what in ("hist_in", "hist_out"):
                h = hists[self.hist.index(arg)]
                ys.append(h[1:] if (what == "hist_out") != self.reverse else h[:T])
            else:
                value = broadcast.pop(0)
                ys.append(xp.broadcast_to(xp.asarray(value, dtype=v.dtype), (T,) + v.shape))
        return carry, ys


def compiled(graph, num_carry, num_xs, reverse) -> CompiledBody:
    """The CompiledBody of a graph, built once and cached on it."""
    cache = graph._compiled
    if cache is None:
        cache = graph._compiled = {}
    key = (num_carry, num_xs, reverse)
    if key not in cache:
        cache[key] = CompiledBody(graph, num_carry, num_xs, reverse)
    return cache[key]
