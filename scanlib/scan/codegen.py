"""Prints a LoopProgram (loop/ir.py) as straight-line Python: one function
`run(xp, T, C, *init, *xs, *consts, *ys_stacks, *histories, *scratch)` whose only loop is the
per-step critical work (`CompiledBody.source` shows it).

Per step it allocates as little as NumPy allows: a value that ends in a stack or history
buffer is computed straight into its slot (`xp.tanh(a, out=H0[t + 1])`), and an elementwise
result may reuse the array of a temporary that nothing else reads. Work batched over a chunk
of steps does the same with whole chunks (`out=Y0[t0:t1]`), and a chunk's arrays are freed
before the next chunk allocates its own.
Imports backends and the scan modules below it.
"""

from __future__ import annotations

import collections

import numpy as np

from .. import backends
from .loop.ir import (CHUNK, CONST, POST, PRE, STEP, STEP_VALUE, XS, RunningSum, SumAB, SumAtB,
                      SumStepsAxes, is_var)


def _accumulate_in_place(a):
    """a[t] += a[t-1] along axis 0, in the loop's order of additions."""
    xp = backends.xp_of(a)
    if xp is np:
        np.add.accumulate(a, axis=0, out=a)
    else:  # a GPU scan kernel need not support its output overlapping its input
        a[...] = xp.add.accumulate(a, axis=0)


def _running_sum(acc, terms, reverse):
    """acc + terms[0] + terms[1] + ... (from the last row when reverse), in that order and in
    acc's dtype, as the loop adds them: `terms.sum(axis=0)` would pair them up (another float
    rounding) and promote small ints and bools."""
    xp = backends.xp_of(terms)
    buf = xp.empty((len(terms) + 1,) + acc.shape, acc.dtype)
    buf[0] = acc
    buf[1:] = terms[::-1] if reverse else terms
    _accumulate_in_place(buf)
    return buf[-1]


class Layout:
    """Where outputs live: one entry per y (see CompiledBody.__call__), the stacked ys, the
    carries with a history buffer, and the per-chunk scratch stacks."""

    def __init__(self, y_plan, stacked_ys, hist, stack_vars, per_step_bytes):
        self.y_plan, self.stacked_ys, self.hist = y_plan, stacked_ys, hist
        self.stack_vars, self.per_step_bytes = stack_vars, per_step_bytes


def generate(sch):
    """(source, run function, Layout) for a LoopProgram."""
    w = _LoopWriter(sch)
    w.place_outputs()
    w.batch_work()
    w.accumulators()
    w.step_work()
    source = w.source()
    exec(compile(source, f"<scan body {sch.graph.name}>", "exec"), w.env)
    return source, w.env["run"], w.layout()


class _LoopWriter:
    """Writes the loop for one LoopProgram, section by section: the prologue (once), the work
    before and after each chunk's steps, and the per-step body. Values are named by role:
    c carries, X xs, k constants, v<n>_<j> results of equation n, Y stacked ys, H carry
    histories, S per-chunk scratch stacks, A accumulators; the functions and literals the
    code calls live in `env` (_f, _b, _o, _l)."""

    def __init__(self, sch):
        self.sch = sch
        self.critical = set(sch.in_section(STEP))
        self.prefix = {i: a.how.term for i, a in sch.accumulators.items()
                       if isinstance(a.how, RunningSum)}
        names = self.names = {}
        for i, v in enumerate(sch.carry_in):
            names[v] = f"c{i}"
        for j, v in enumerate(sch.x_in):
            names[v] = f"X{j}"
        for i, v in enumerate(sch.graph.constvars):
            names[v] = f"k{i}"
        for n, e in enumerate(sch.eqns):
            for j, v in enumerate(e.outvars):
                names[v] = f"v{n}_{j}"
        self.env = {"_accumulate": _accumulate_in_place, "_running_sum": _running_sum}
        self.prologue, self.chunk_pre, self.step, self.chunk_post = [], [], [], []
        self.step_slices, self.chunk_slices, self.stacks = {}, {}, {}
        # Where outputs go: filled by place_outputs.
        self.y_plan, self.stacked_ys, self.hist = [], {}, set()
        self.slots = collections.defaultdict(list)  # per-step value -> the slots it fills
        self.into = {}  # batched equation -> the stack slice it writes its result into
        self.y_copies = []
        # What a chunk allocates and frees: filled by batch_work and step_work.
        self.chunk_names, self.fresh_batch, self.allocated = [], set(), []

    # --- how the code refers to a value -------------------------------------------------------
    def literal(self, v):
        name = f"_l{len(self.env)}"
        self.env[name] = v.value
        return name

    def ref_step(self, v):
        """v as the per-step body reads it (the step's row of an xs or batched value)."""
        if not is_var(v):
            return self.literal(v)
        if self.sch.kind[v] == XS:
            if v not in self.step_slices:
                x_in = self.sch.x_in
                j = x_in.index(v) if v in x_in else None
                self.step_slices[v] = f"x{j}" if j is not None else self.names[v] + "_t"
                src = f"X{j}[t]" if j is not None else f"{self.names[v]}[t - t0]"
                self.step.append(f"{self.step_slices[v]} = {src}")
            return self.step_slices[v]
        return self.names[v]

    def ref_batch(self, v):
        """v as work on a whole chunk reads it (a step value through its scratch stack)."""
        sch = self.sch
        if not is_var(v):
            return self.literal(v)
        if sch.kind[v] == CONST:
            return self.names[v]
        if v in sch.x_in:
            if v not in self.chunk_slices:
                self.chunk_slices[v] = f"Xc{sch.x_in.index(v)}"
                self.chunk_pre.insert(0, f"{self.chunk_slices[v]} = {self.names[v]}[t0:t1]")
            return self.chunk_slices[v]
        if sch.is_step_value(v):
            rows = self._history_rows(v)
            if rows is not None:
                return rows
            if v not in self.stacks:
                self.stacks[v] = f"S{len(self.stacks)}"
            return f"{self.stacks[v]}[:t1 - t0]"
        return self.names[v]

    def _history_rows(self, v):
        """The chunk's rows of v in a carry history buffer, where v is kept there anyway (a
        carry that is also a y): read in place, not copied into a scratch stack per step.
        Asked only after place_outputs has chosen the histories."""
        sch = self.sch
        for i in self.hist:
            if i in self.prefix:
                continue
            if v is sch.carry_out[i]:  # written at H[t + 1] (forward) or H[t] (reverse)
                return f"H{i}[t0:t1]" if sch.reverse else f"H{i}[t0 + 1:t1 + 1]"
            if v is sch.carry_in[i]:  # read from H[t] (forward) or H[t + 1] (reverse)
                return f"H{i}[t0 + 1:t1 + 1]" if sch.reverse else f"H{i}[t0:t1]"
        return None

    def call(self, n, eqn, args, out=None):
        """The statement computing equation n, into `out` where given."""
        lhs = ", ".join(self.names[v] for v in eqn.outvars) + (
            "," if eqn.prim.multiple_results else "")
        prim, name = eqn.prim, eqn.prim.name
        extra = f", **_p{n}" if eqn.params else ""
        if eqn.params:
            self.env[f"_p{n}"] = eqn.params
        if out is not None:
            if prim.ufunc:
                return f"xp.{prim.ufunc}({', '.join(args)}, out={out})"
            self.env[f"_w{n}"] = prim.out_impl
            return f"_w{n}({', '.join(args)}, out={out}{extra})  # {name}"
        if prim.inline and not eqn.params:
            return f"{lhs} = {prim.inline.format(*args)}"
        self.env[f"_f{n}"] = prim.impl
        return f"{lhs} = _f{n}({', '.join(args)}{extra})  # {name}"

    # --- the sections -------------------------------------------------------------------------
    def place_outputs(self):
        """Where each y lives. A y that is the carry shares the carry's history buffer; a y
        made by batched work is computed straight into its stack (`into`) when nothing else
        reads it; a per-step y fills its stack's row."""
        sch = self.sch
        for v in sch.y_out:
            if not is_var(v) or sch.kind[v] == CONST:
                self.y_plan.append(("broadcast", self.ref_batch(v) if is_var(v)
                                    else self.literal(v)))
            elif v in sch.x_in:
                self.y_plan.append(("xs", sch.x_in.index(v)))
            elif v in sch.carry_in:
                self.hist.add(sch.carry_in.index(v))
                self.y_plan.append(("hist_in", sch.carry_in.index(v)))
            elif v in sch.carry_out and sch.kind[v] == STEP_VALUE and (
                    sch.producer[v] in self.critical or sch.carry_out.index(v) in self.prefix):
                self.hist.add(sch.carry_out.index(v))
                self.y_plan.append(("hist_out", sch.carry_out.index(v)))
            else:
                if v not in self.stacked_ys:
                    k = self.stacked_ys[v] = len(self.stacked_ys)
                    n = sch.producer.get(v)
                    if sch.is_step_value(v):
                        self.slots[v].append(f"Y{k}[t]")
                    elif (n is not None and not sch.uses[v] and sch.out_uses[v] == 1
                          and sch.batched_into(n) is not None):
                        self.into[n] = f"Y{k}[t0:t1]"
                    else:
                        self.y_copies.append(f"Y{k}[t0:t1] = {self.ref_batch(v)}")
                self.y_plan.append(("stack", self.stacked_ys[v]))

    def batch_work(self):
        """Work outside the per-step loop: constants once, carry-independent work before each
        chunk's steps, deferred work after them."""
        sch = self.sch
        for n, eqn in enumerate(sch.eqns):
            where = sch.section.get(n)
            if where is PRE:
                self.prologue.append(self.call(n, eqn, [self.ref_batch(v) for v in eqn.invars]))
                if n in sch.contiguous:
                    v = eqn.outvars[0]
                    self.prologue.append(f"{self.names[v]} = xp.ascontiguousarray("
                                         f"{self.names[v]})")
            elif where is CHUNK:
                self.chunk_pre.append(self._batched(n, eqn, "for steps t0..t1-1"))
        for n in sch.in_section(POST):
            self.chunk_post.append(self._batched(n, sch.eqns[n], "deferred, for steps t0..t1-1"))
        self.chunk_post += self.y_copies

    def _batched(self, n, eqn, note):
        """The statement for batched equation n. A batched result nothing else reads may be
        written over by the one elementwise equation that reads it (`out=`), so a chunk
        holds fewer arrays."""
        sch, v = self.sch, eqn.outvars[0]
        args = ", ".join(self.ref_batch(u) for u in eqn.invars)
        into_fn = sch.batched_into(n)
        target = self.into.get(n)
        if target is None and into_fn is not None and eqn.prim.elementwise:
            # elementwise, so writing over an input is safe (a matmul's would not be)
            donor = next((u for u in eqn.invars if u in self.fresh_batch
                          and sch.uses[u] == 1 and not sch.out_uses[u]
                          and u.shape == v.shape and u.dtype == v.dtype), None)
            if donor is not None:
                target = self.names[donor]
                self.fresh_batch.add(v)  # v owns the donor's array now
        self.chunk_names.append(self.names[v])
        note = f"{eqn.prim.name}, {note}"
        if target is None:
            if not eqn.prim.view:
                self.allocated.append(v)
            self.env[f"_b{n}"] = sch.batch[n]
            if into_fn is not None:
                self.fresh_batch.add(v)
            return f"{self.names[v]} = _b{n}({args})  # {note}"
        self.env[f"_o{n}"] = into_fn
        return f"{self.names[v]} = _o{n}({args}, out={target})  # {note}"

    def accumulators(self):
        """History slots of the carries, cumulative-sum carries, and the per-chunk sums of
        the gradient accumulators; then the scratch stacks the batched work asked for."""
        sch = self.sch
        self.hist = sorted(self.hist)
        at = "t" if sch.reverse else "t + 1"
        for i in self.hist:
            if i not in self.prefix:
                self.slots[sch.carry_out[i]].append(f"H{i}[{at}]")
        for i, term in self.prefix.items():
            # The loop's own order of additions: H[t+1] = H[t] + term[t], as one cumsum.
            if i not in self.hist:
                self.chunk_pre.append(f"A{i} = _running_sum(A{i}, {self.ref_batch(term)}, "
                                      f"{sch.reverse})")
            elif sch.reverse:
                self.chunk_pre += [f"H{i}[t0:t1] = {self.ref_batch(term)}",
                                   f"_accumulate(H{i}[t0:t1 + 1][::-1])", f"A{i} = H{i}[t0]"]
            else:
                self.chunk_pre += [f"H{i}[t0 + 1:t1 + 1] = {self.ref_batch(term)}",
                                   f"_accumulate(H{i}[t0:t1 + 1])", f"A{i} = H{i}[t1]"]
        for i, acc in sch.accumulators.items():
            if i not in self.prefix:
                self.chunk_post.append(
                    f"A{i} = A{i} + {_chunk_sum(acc.how, self.ref_batch, self.env)}")
        for v, s in self.stacks.items():  # every batched reader has asked for its stack by now
            self.slots[v].append(f"{s}[t - t0]")

    def step_work(self):
        """The per-step body: the critical equations, each written into its slot or over a
        temporary of this step that nothing else reads, then the slots, then the carries."""
        sch, names, step, slots = self.sch, self.names, self.step, self.slots
        written, fresh = set(), set()

        def private(u):  # a temporary this step made and nothing else reads: its array is free
            return (is_var(u) and u in fresh and sch.uses[u] == 1 and not sch.out_uses[u]
                    and u not in slots)

        for n, eqn in enumerate(sch.eqns):
            if n not in self.critical:
                continue
            v, prim = eqn.outvars[0], eqn.prim
            args = [self.ref_step(a) for a in eqn.invars]
            can_out = ((prim.ufunc and not eqn.params or prim.out_impl)
                       and not prim.multiple_results and len(v.shape) > 0)
            donor = next((u for u in eqn.invars if private(u) and u.shape == v.shape
                          and u.dtype == v.dtype), None) if can_out and prim.elementwise else None
            if can_out and slots.get(v):
                target = slots[v][0]  # take the slot's view once, then compute into it
                step += [f"{names[v]} = {target}", self.call(n, eqn, args, out=names[v])]
                written.add((v, target))
            elif donor is not None:
                step += [self.call(n, eqn, args, out=names[donor]),
                         f"{names[v]} = {names[donor]}"]
                fresh.add(v)
            else:
                step.append(self.call(n, eqn, args))
                if can_out:
                    fresh.add(v)
        for v, targets in slots.items():
            for target in targets:
                if (v, target) not in written:
                    step.append(f"{target} = {self.ref_step(v)}")
        loop_carries = [i for i in range(sch.num_carry) if i not in self._summed()]
        if loop_carries:
            step.append(", ".join(f"c{i}" for i in loop_carries) + " = "
                        + ", ".join(self.ref_step(sch.carry_out[i]) for i in loop_carries))

    def _summed(self):
        return set(self.sch.accumulators)

    def source(self):
        """The function `run`, from the sections."""
        sch, summed = self.sch, self._summed()
        params = (["xp", "T", "C"] + [f"c{i}" for i in range(sch.num_carry)]
                  + [f"X{j}" for j in range(sch.num_xs)]
                  + [f"k{i}" for i in range(len(sch.graph.constvars))]
                  + [f"Y{k}" for k in range(len(self.stacked_ys))]
                  + [f"H{i}" for i in self.hist] + [f"S{k}" for k in range(len(self.stacks))])
        if sch.reverse:
            chunks, steps = "range((T - 1) // C * C, -1, -C)", "range(t1 - 1, t0 - 1, -1)"
        else:
            chunks, steps = "range(0, T, C)", "range(t0, t1)"
        lines = [f"def run({', '.join(params)}):"]
        lines += ["    " + s for s in self.prologue]
        lines += [f"    A{i} = c{i}" for i in sorted(summed)]
        lines += [f"    for t0 in {chunks}:", "        t1 = min(t0 + C, T)"]
        lines += ["        " + s for s in self.chunk_pre]
        if self.step:
            lines += [f"        for t in {steps}:"]
            lines += ["            " + s for s in self.step]
        lines += ["        " + s for s in self.chunk_post]
        # Drop this chunk's arrays before the next chunk makes its own, so that two chunks'
        # temporaries are never alive at once (views of them included).
        dropped = self.chunk_names + [self.step_slices[v] for v in self.step_slices
                                      if v not in sch.x_in]
        if dropped:
            lines.append(f"        del {', '.join(dropped)}")
        ret = [f"A{i}" if i in summed else f"c{i}" for i in range(sch.num_carry)]
        ret += [arg for what, arg in self.y_plan if what == "broadcast"]
        lines.append(f"    return ({', '.join(ret)}{',' if ret else ''})")
        return "\n".join(lines)

    def layout(self):
        # Bytes per step of what is batched per chunk (views cost none): sets the chunk length.
        per_step = (sum(v.nbytes for v in self.allocated)
                    + sum(v.nbytes for v in self.stacks))
        return Layout(self.y_plan, list(self.stacked_ys), self.hist, list(self.stacks),
                      per_step)


def _chunk_sum(how, ref_batch, env):
    """The expression for an accumulator's sum over a chunk (loop/ir.py's reductions)."""
    if isinstance(how, SumStepsAxes):
        return f"{ref_batch(how.x)}.sum(axis={(0,) + tuple(a + 1 for a in how.axes)})"
    if isinstance(how, SumAtB):
        a, q = how.a, how.q
        return (f"({ref_batch(a)}.reshape(-1, {a.shape[1]}).T @ "
                f"{ref_batch(q)}.reshape(-1, {q.shape[1]}))")
    if isinstance(how, SumAB):
        env["_einsum"] = lambda P, Q: backends.xp_of(P, Q).einsum(
            "tij,tjk->ik", P, Q, optimize=True)
        return f"_einsum({ref_batch(how.p)}, {ref_batch(how.q)})"
    return f"{ref_batch(how.term)}.sum(axis=0)"
