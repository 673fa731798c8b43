"""The printer of the loop compiler: a LoopProgram whose passes have run (loop/), memory plan
included, becomes straight-line Python, one function
`run(xp, T, C, *init, *xs, *consts, *ys_stacks, *histories, *scratch)` whose only loop is the
per-step work (`CompiledBody.source` shows it). It decides nothing: each section's equations
in order, each computed where the memory plan says (`xp.tanh(a, out=H0[t + 1])`, or over a
dead input), then the slots, the accumulators and the carries; a chunk's arrays are freed
before the next chunk allocates its own.
Imports backends and the loop IR.
"""

from __future__ import annotations

import numpy as np

from ... import backends, generated
from . import inplace
from .ir import CHUNK, CONST, POST, PRE, STEP, XS, RunningSum, SumAB, SumAtB, SumScatter, \
    SumStepsAxes, is_var


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


def generate(prog):
    """(source, run function) for a LoopProgram with its memory plan."""
    w = LoopWriter(prog)
    source = w.source()
    generated.exec_source(source, f"scan loop over {prog.graph.name}", w.env)
    return source, w.env["run"]


class LoopWriter:
    """Prints one LoopProgram. Values are named by role: c carries, X xs, k constants,
    v<n>_<j> results of equation n, Y stacked ys, H carry histories, S per-chunk scratch
    stacks, A accumulators; the functions and literals the code calls live in `env` (_f
    impls, _b batched, _o batched into out=, _w written into out=, _p params, _l literals)."""

    def __init__(self, prog):
        self.prog, self.mem = prog, prog.storage
        names = self.names = {}
        for i, v in enumerate(prog.carry_in):
            names[v] = f"c{i}"
        for j, v in enumerate(prog.x_in):
            names[v] = f"X{j}"
        for i, v in enumerate(prog.graph.constvars):
            names[v] = f"k{i}"
        for n, e in enumerate(prog.eqns):
            for j, v in enumerate(e.outvars):
                names[v] = f"v{n}_{j}"
        self.env = {"_accumulate": _accumulate_in_place, "_running_sum": _running_sum}
        self.prologue, self.chunk_pre, self.step, self.chunk_post = [], [], [], []
        self.step_slices, self.chunk_slices = {}, {}
        self.chunk_names = []  # a chunk's arrays, deleted at its end

    # --- how the code refers to a value -------------------------------------------------------
    def literal(self, v):
        name = f"_l{len(self.env)}"
        self.env[name] = v.value
        return name

    def ref_step(self, v):
        """v as the per-step body reads it (the step's row of an xs or batched value)."""
        if not is_var(v):
            return self.literal(v)
        if self.prog.kind[v] == XS:
            if v not in self.step_slices:
                x_in = self.prog.x_in
                j = x_in.index(v) if v in x_in else None
                self.step_slices[v] = f"x{j}" if j is not None else self.names[v] + "_t"
                src = f"X{j}[t]" if j is not None else f"{self.names[v]}[t - t0]"
                self.step.append(f"{self.step_slices[v]} = {src}")
            return self.step_slices[v]
        return self.names[v]

    def ref_batch(self, v):
        """v as work on a whole chunk reads it (a step value through its history or
        scratch rows)."""
        prog = self.prog
        if not is_var(v):
            return self.literal(v)
        if prog.kind[v] == CONST:
            return self.names[v]
        if v in prog.x_in:
            if v not in self.chunk_slices:
                self.chunk_slices[v] = f"Xc{prog.x_in.index(v)}"
                self.chunk_pre.insert(0, f"{self.chunk_slices[v]} = {self.names[v]}[t0:t1]")
            return self.chunk_slices[v]
        if prog.is_step_value(v):
            hist = self.mem.history_rows(prog, v)
            if hist is not None:  # written at H[t+1] (forward) or H[t] (reverse); read one off
                i, which = hist
                late = (which == "out") != prog.reverse
                return f"H{i}[t0 + 1:t1 + 1]" if late else f"H{i}[t0:t1]"
            return f"S{self.mem.scratch.index(v)}[:t1 - t0]"
        return self.names[v]

    def call(self, n, eqn, args, out=None):
        """The statement computing equation n, into `out` where given."""
        lhs = ", ".join(self.names[v] for v in eqn.outvars) + (
            "," if eqn.prim.multiple_results else "")
        prim, name = eqn.prim, eqn.prim.name
        extra = f", **_p{n}" if eqn.params else ""
        if eqn.params:
            self.env[f"_p{n}"] = eqn.params
        if out is not None:
            if prim.ufunc and prim.out_impl is None:  # out_impl: the ufunc is not impl's
                return f"xp.{prim.ufunc}({', '.join(args)}, out={out})"
            self.env[f"_w{n}"] = prim.out_impl
            return f"_w{n}({', '.join(args)}, out={out}{extra})  # {name}"
        template = prim.inline_for(eqn.params)
        if template is not None:
            return f"{lhs} = {template.format(*args)}"
        if prim.ufunc and prim.out_impl is None and not eqn.params:  # impl is this call
            return f"{lhs} = xp.{prim.ufunc}({', '.join(args)})"
        self.env[f"_f{n}"] = prim.impl
        parts = [*args, f"**_p{n}"] if eqn.params else list(args)  # no inputs: debug_print
        return f"{lhs} = _f{n}({', '.join(parts)})  # {name}"

    # --- the sections -------------------------------------------------------------------------
    def batch_work(self):
        """Constants once, carry-independent work before each chunk's steps, deferred work
        and the batched ys' copies after them."""
        prog = self.prog
        for n in prog.in_section(PRE):
            eqn = prog.eqns[n]
            self.prologue.append(self.call(n, eqn, [self.ref_batch(v) for v in eqn.invars]))
            if n in prog.contiguous:
                v = self.names[eqn.outvars[0]]
                self.prologue.append(f"{v} = xp.ascontiguousarray({v})")
        for n in prog.in_section(CHUNK):
            self.chunk_pre.append(self._batched(n, "for steps t0..t1-1"))
        for n in prog.in_section(POST):
            self.chunk_post.append(self._batched(n, "deferred, for steps t0..t1-1"))
        self.chunk_post += [f"Y{k}[t0:t1] = {self.ref_batch(v)}" for k, v in self.mem.y_copies]

    def _batched(self, n, note):
        """The statement for batched equation n: into its stack, over a dead input, or new."""
        eqn = self.prog.eqns[n]
        v = eqn.outvars[0]
        args = ", ".join(self.ref_batch(u) for u in eqn.invars)
        target = self.mem.into.get(n)
        target = str(target) if target is not None else None
        if n in self.mem.batch_over:
            target = self.names[self.mem.batch_over[n]]
        self.chunk_names.append(self.names[v])
        note = f"{eqn.prim.name}, {note}"
        if target is None:
            self.env[f"_b{n}"] = self.prog.batch[n]
            return f"{self.names[v]} = _b{n}({args})  # {note}"
        self.env[f"_o{n}"] = self.prog.batched_into(n)
        return f"{self.names[v]} = _o{n}({args}, out={target})  # {note}"

    def accumulators(self):
        """The running sums (one cumulative sum per chunk, in the loop's order, into the
        carry's history where it has one) and the per-chunk sums of gradient accumulators."""
        prog = self.prog
        for i, acc in prog.accumulators.items():
            if not isinstance(acc.how, RunningSum):
                continue
            term = self.ref_batch(acc.how.term)
            if i not in self.mem.hist:
                self.chunk_pre.append(f"A{i} = _running_sum(A{i}, {term}, {prog.reverse})")
            elif prog.reverse:
                self.chunk_pre += [f"H{i}[t0:t1] = {term}",
                                   f"_accumulate(H{i}[t0:t1 + 1][::-1])", f"A{i} = H{i}[t0]"]
            else:
                self.chunk_pre += [f"H{i}[t0 + 1:t1 + 1] = {term}",
                                   f"_accumulate(H{i}[t0:t1 + 1])", f"A{i} = H{i}[t1]"]
        for i, acc in prog.accumulators.items():
            if isinstance(acc.how, SumScatter):
                self.chunk_post.append(self._scatter_sum(i, acc.how))
            elif not isinstance(acc.how, RunningSum):
                self.chunk_post.append(
                    f"A{i} = A{i} + {_chunk_sum(acc.how, self.ref_batch, self.env)}")

    def _scatter_sum(self, i, how):
        """The statement adding a chunk's scatter_add terms into accumulator i in place."""
        prog = self.prog
        batched = [is_var(v) and prog.kind[v] != CONST for v in how.arrays]
        g = how.g
        row_ndim = len(_indexed_shape(prog.carry_in[i].shape, how))
        self.env[f"_g{i}"] = inplace.chunk_scatter(
            how.index, batched, is_var(g) and prog.kind[g] != CONST,
            len(g.shape) if is_var(g) else 0, row_ndim)
        args = ", ".join(self.ref_batch(v) for v in (g, *how.arrays))
        return f"_g{i}(A{i}, {args})  # scatter_add into A{i}, in place"

    def step_work(self):
        """The per-step body: each step equation into its slot, over a dead temporary, or
        new; then the slots it did not compute into; then the next carries."""
        prog, mem, names, step = self.prog, self.mem, self.names, self.step
        written = set()
        for n in prog.in_section(STEP):
            eqn = prog.eqns[n]
            v = eqn.outvars[0]
            if n in prog.in_place:
                step += self._in_place(n)
                continue
            args = [self.ref_step(a) for a in eqn.invars]
            if n in mem.step_into:
                target = str(mem.step_into[n])  # take the slot's view once, compute into it
                step += [f"{names[v]} = {target}", self.call(n, eqn, args, out=names[v])]
                written.add((v, target))
            elif n in mem.step_over:
                over = names[mem.step_over[n]]
                step += [self.call(n, eqn, args, out=over), f"{names[v]} = {over}"]
            else:
                step.append(self.call(n, eqn, args))
            if n in prog.copied:  # a view that outlives an in-place update of its buffer
                step.append(f"{names[v]} = {names[v]}.copy()")
        for v, targets in mem.slots.items():
            for target in map(str, targets):
                if (v, target) not in written:
                    step.append(f"{target} = {self.ref_step(v)}")
        loop_carries = [i for i in range(prog.num_carry) if i not in prog.accumulators]
        if loop_carries:
            step.append(", ".join(f"c{i}" for i in loop_carries) + " = "
                        + ", ".join(self.ref_step(prog.carry_out[i]) for i in loop_carries))

    def _in_place(self, n):
        """The statements of in-place update n: rows written into the buffer, which then is
        the update's result."""
        prog, eqn = self.prog, self.prog.eqns[n]
        rec = prog.in_place[n]
        if rec.scatter is None:
            buf, reads, params, fn = eqn.invars[0], eqn.invars[1:], eqn.params, inplace.set_rows
        else:
            s = prog.eqns[rec.scatter]
            buf = next(v for v in eqn.invars if v is not s.outvars[0])
            reads, params, fn = s.invars, s.params, inplace.add_rows
        self.env[f"_i{n}"], self.env[f"_p{n}"] = fn, params
        args = ", ".join(self.ref_step(v) for v in (buf, *reads))
        return [f"_i{n}({args}, **_p{n})  # {eqn.prim.name}, in place",
                f"{self.names[eqn.outvars[0]]} = {self.ref_step(buf)}"]

    def step_loop(self, steps):
        """The lines running one chunk's steps (a second printer replaces this loop)."""
        return [f"for t in {steps}:"] + ["    " + s for s in self.step]

    def step_locals(self):
        """The names the step loop defines in `run` that outlive it (its rows of batched
        values; an xs row is rebound every step anyway)."""
        return [self.step_slices[v] for v in self.step_slices if v not in self.prog.x_in]

    def epilogue(self):
        """Lines after the last chunk, before the return."""
        return []

    def source(self):
        """The function `run`."""
        prog, mem = self.prog, self.mem
        broadcast = [self.ref_batch(v) if is_var(v) else self.literal(v)
                     for v, place in zip(prog.y_out, mem.ys) if place.kind == "broadcast"]
        self.batch_work()
        self.accumulators()
        self.step_work()
        params = (["xp", "T", "C"] + [f"c{i}" for i in range(prog.num_carry)]
                  + [f"X{j}" for j in range(prog.num_xs)]
                  + [f"k{i}" for i in range(len(prog.graph.constvars))]
                  + [f"Y{k}" for k in range(len(mem.stacked))]
                  + [f"H{i}" for i in mem.hist] + [f"S{k}" for k in range(len(mem.scratch))])
        if prog.reverse:
            chunks, steps = "range((T - 1) // C * C, -1, -C)", "range(t1 - 1, t0 - 1, -1)"
        else:
            chunks, steps = "range(0, T, C)", "range(t0, t1)"
        lines = [f"def run({', '.join(params)}):"]
        lines += ["    " + s for s in self.prologue]
        # The buffers the loop writes into are its own, never the caller's arrays.
        owned = sorted({rec.carry for rec in prog.in_place.values()})
        if owned or any(isinstance(a.how, SumScatter) for a in prog.accumulators.values()):
            self.env["_owned"] = inplace.owned_copy
        lines += [f"    c{i} = _owned(c{i})" for i in owned]
        lines += [f"    A{i} = _owned(c{i})" if isinstance(prog.accumulators[i].how, SumScatter)
                  else f"    A{i} = c{i}" for i in sorted(prog.accumulators)]
        lines += [f"    for t0 in {chunks}:", "        t1 = min(t0 + C, T)"]
        lines += ["        " + s for s in self.chunk_pre]
        if self.step:
            lines += ["        " + s for s in self.step_loop(steps)]
        lines += ["        " + s for s in self.chunk_post]
        # Drop this chunk's arrays before the next chunk makes its own, so that two chunks'
        # temporaries are never alive at once (views of them included).
        dropped = self.chunk_names + self.step_locals()
        if dropped:
            lines.append(f"        del {', '.join(dropped)}")
        lines += ["    " + s for s in self.epilogue()]
        ret = [f"A{i}" if i in prog.accumulators else f"c{i}" for i in range(prog.num_carry)]
        ret += broadcast
        lines.append(f"    return ({', '.join(ret)}{',' if ret else ''})")
        return "\n".join(lines)


def _indexed_shape(shape, how):
    """The shape of acc[index] for a SumScatter (index arrays stand in as zeros)."""
    probe = np.broadcast_to(np.zeros((), bool), shape)
    zeros = [np.zeros(a.shape if is_var(a) else np.shape(a.value), np.int64)
             for a in how.arrays]
    return probe[inplace.fill_index(how.index, zeros)].shape


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
