"""Turns a Schedule into straight-line Python: one function
`run(xp, T, C, *init, *xs, *consts, *ys_stacks, *histories, *scratch)` whose only loop is the
per-step critical work (`CompiledBody.source` shows it).

Per step it allocates as little as NumPy allows: a value that ends in a stack or history
buffer is computed straight into its slot (`xp.tanh(a, out=H0[t + 1])`), and an elementwise
result may reuse the array of a temporary that nothing else reads.
Imports backends and the scan modules below it.
"""

from __future__ import annotations

import collections

import numpy as np

from .. import backends
from .batching import UFUNCS
from .schedule import CONST, STEP, XS, is_var

# Operators written inline (saves a Python call per equation and step).
_INLINE = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
           "div": "({0} / {1})", "neg": "(-{0})", "matmul": "({0} @ {1})", "pow": "({0} ** {1})"}
# Primitives whose result is a view of their input: no bytes of their own.
_VIEWS = {"reshape", "transpose", "broadcast_to", "getitem", "copy", "stop_gradient"}
# Primitives that can write into a given array: their ufunc in the array namespace.
_UFUNC = {**UFUNCS, "matmul": "matmul"}


def _sigmoid_out(x, out):
    """sigmoid written into out, the same arithmetic as its primitive's impl."""
    xp = backends.xp_of(x)
    xp.multiply(x, 0.5, out=out)
    xp.tanh(out, out=out)
    out += 1
    out *= 0.5
    return out


def _accumulate_in_place(a):
    """a[t] += a[t-1] along axis 0, in the loop's order of additions."""
    xp = backends.xp_of(a)
    if xp is np:
        np.add.accumulate(a, axis=0, out=a)
    else:  # a GPU scan kernel need not support its output overlapping its input
        a[...] = xp.add.accumulate(a, axis=0)


class Layout:
    """Where outputs live: one entry per y (see CompiledBody.__call__), the stacked ys, the
    carries with a history buffer, and the per-chunk scratch stacks."""

    def __init__(self, y_plan, stacked_ys, hist, stack_vars, per_step_bytes):
        self.y_plan, self.stacked_ys, self.hist = y_plan, stacked_ys, hist
        self.stack_vars, self.per_step_bytes = stack_vars, per_step_bytes


def generate(sch):
    """(source, run function, Layout) for a Schedule."""
    g, kind = sch.graph, sch.kind
    names = {}
    for i, v in enumerate(sch.carry_in):
        names[v] = f"c{i}"
    for j, v in enumerate(sch.x_in):
        names[v] = f"X{j}"
    for l, v in enumerate(g.constvars):
        names[v] = f"k{l}"
    for n, e in enumerate(sch.eqns):
        for j, v in enumerate(e.outvars):
            names[v] = f"v{n}_{j}"
    env = {"_sigmoid_out": _sigmoid_out, "_accumulate": _accumulate_in_place}
    prologue, chunk_pre, step, chunk_post = [], [], [], []
    step_slices, chunk_slices, stacks = {}, {}, {}

    def literal(v):
        name = f"_l{len(env)}"
        env[name] = v.value
        return name

    def ref_step(v):
        if not is_var(v):
            return literal(v)
        if kind[v] == XS:
            if v not in step_slices:
                j = sch.x_in.index(v) if v in sch.x_in else None
                step_slices[v] = f"x{j}" if j is not None else names[v] + "_t"
                src = f"X{j}[t]" if j is not None else f"{names[v]}[t - t0]"
                step.append(f"{step_slices[v]} = {src}")
            return step_slices[v]
        return names[v]

    def ref_batch(v):
        if not is_var(v):
            return literal(v)
        if kind[v] == CONST:
            return names[v]
        if v in sch.x_in:
            if v not in chunk_slices:
                chunk_slices[v] = f"Xc{sch.x_in.index(v)}"
                chunk_pre.insert(0, f"{chunk_slices[v]} = {names[v]}[t0:t1]")
            return chunk_slices[v]
        if sch.is_step_value(v):
            if v not in stacks:
                stacks[v] = f"S{len(stacks)}"
            return f"{stacks[v]}[:t1 - t0]"
        return names[v]

    def call(n, eqn, args, out=None):
        lhs = ", ".join(names[v] for v in eqn.outvars) + (
            "," if eqn.prim.multiple_results else "")
        name = eqn.prim.name
        if out is not None:
            if name == "sigmoid":
                return f"_sigmoid_out({args[0]}, {out})"
            if name == "concatenate":
                return (f"xp.concatenate(({', '.join(args)},), axis={eqn.params['axis']}, "
                        f"out={out})")
            return f"xp.{_UFUNC[name]}({', '.join(args)}, out={out})"
        if name in _INLINE and not eqn.params:
            return f"{lhs} = {_INLINE[name].format(*args)}"
        env[f"_f{n}"], env[f"_p{n}"] = eqn.prim.impl, eqn.params
        extra = f", **_p{n}" if eqn.params else ""
        return f"{lhs} = _f{n}({', '.join(args)}{extra})  # {name}"

    # Outputs: where each y lives, and the per-step slots values are written to. A y made
    # by batched work is computed straight into its stack (`into`) when nothing else reads it.
    y_plan, stacked_ys, hist = [], {}, set()
    slots = collections.defaultdict(list)
    into, y_copies = {}, []
    for v in sch.y_out:
        if not is_var(v) or kind[v] == CONST:
            y_plan.append(("broadcast", ref_batch(v) if is_var(v) else literal(v)))
        elif v in sch.x_in:
            y_plan.append(("xs", sch.x_in.index(v)))
        elif v in sch.carry_in:
            hist.add(sch.carry_in.index(v))
            y_plan.append(("hist_in", sch.carry_in.index(v)))
        elif v in sch.carry_out and kind[v] == STEP and (
                sch.producer[v] in sch.critical or sch.carry_out.index(v) in sch.prefix):
            hist.add(sch.carry_out.index(v))
            y_plan.append(("hist_out", sch.carry_out.index(v)))
        else:
            if v not in stacked_ys:
                k = stacked_ys[v] = len(stacked_ys)
                n = sch.producer.get(v)
                if sch.is_step_value(v):
                    slots[v].append(f"Y{k}[t]")
                elif (n is not None and not sch.uses[v] and sch.out_uses[v] == 1
                      and sch.batched_into(n) is not None):
                    into[n] = f"Y{k}[t0:t1]"
                else:
                    y_copies.append(f"Y{k}[t0:t1] = {ref_batch(v)}")
            y_plan.append(("stack", stacked_ys[v]))

    # Work outside the per-step loop. A batched result nothing else reads may be written
    # over by the one equation that reads it (`out=`), so a chunk holds fewer arrays.
    chunk_names, fresh_batch, allocated = [], set(), []

    def batch_stmt(n, eqn, note):
        v = eqn.outvars[0]
        args = ", ".join(ref_batch(u) for u in eqn.invars)
        target = into.get(n)
        if target is None and eqn.prim.name in UFUNCS:  # elementwise: in place is safe
            donor = next((u for u in eqn.invars if u in fresh_batch and sch.uses[u] == 1
                          and not sch.out_uses[u] and u.shape == v.shape
                          and u.dtype == v.dtype), None)
            if donor is not None:
                target = names[donor]
                fresh_batch.add(v)  # v owns the donor's array now
        chunk_names.append(names[v])
        if target is None:
            if eqn.prim.name not in _VIEWS:
                allocated.append(v)
            env[f"_b{n}"] = sch.batched[n] if n in sch.batched else sch.deferred[n]
            if sch.batched_into(n) is not None:
                fresh_batch.add(v)
            return f"{names[v]} = _b{n}({args})  # {note}"
        env[f"_o{n}"] = sch.batched_into(n)
        return f"{names[v]} = _o{n}({args}, out={target})  # {note}"

    # A constant view (W.T) that a per-step matmul reads is copied once into C order: BLAS
    # on a transposed operand was up to 1.6x slower per step at these sizes.
    step_matmul_reads = {v for n in sch.critical if sch.eqns[n].prim.name == "matmul"
                         for v in sch.eqns[n].invars}
    for n, eqn in enumerate(sch.eqns):
        out_kind = kind[eqn.outvars[0]]
        if n not in sch.live:
            continue
        if out_kind == CONST:
            prologue.append(call(n, eqn, [ref_batch(v) for v in eqn.invars]))
            v = eqn.outvars[0]
            if eqn.prim.name in _VIEWS and v in step_matmul_reads:
                prologue.append(f"{names[v]} = xp.ascontiguousarray({names[v]})")
        elif out_kind == XS:
            chunk_pre.append(batch_stmt(n, eqn, f"{eqn.prim.name}, for steps t0..t1-1"))
    for n in sch.deferred:
        eqn = sch.eqns[n]
        chunk_post.append(batch_stmt(n, eqn, f"{eqn.prim.name}, deferred, for steps t0..t1-1"))
    chunk_post += y_copies
    hist = sorted(hist)
    at = "t" if sch.reverse else "t + 1"
    for i in hist:
        if i not in sch.prefix:
            slots[sch.carry_out[i]].append(f"H{i}[{at}]")
    for i, (_, term) in sch.prefix.items():
        # The loop's own order of additions: H[t+1] = H[t] + term[t], as one cumsum.
        if i not in hist:
            chunk_pre.append(f"A{i} = A{i} + {ref_batch(term)}.sum(axis=0)")
        elif sch.reverse:
            chunk_pre += [f"H{i}[t0:t1] = {ref_batch(term)}",
                          f"_accumulate(H{i}[t0:t1 + 1][::-1])", f"A{i} = H{i}[t0]"]
        else:
            chunk_pre += [f"H{i}[t0 + 1:t1 + 1] = {ref_batch(term)}",
                          f"_accumulate(H{i}[t0:t1 + 1])", f"A{i} = H{i}[t1]"]
    for i, plan in sch.fused.items():
        chunk_post.append(f"A{i} = A{i} + {_fused_expr(plan, ref_batch, env)}")
    for v, s in stacks.items():  # every batched reader above has asked for its stack by now
        slots[v].append(f"{s}[t - t0]")

    # The per-step work.
    written, fresh = set(), set()

    def private(u):  # a temporary this step made and nothing else reads: its array is free
        return (is_var(u) and u in fresh and sch.uses[u] == 1 and not sch.out_uses[u]
                and u not in slots)

    for n, eqn in enumerate(sch.eqns):
        if n not in sch.critical:
            continue
        v, name = eqn.outvars[0], eqn.prim.name
        args = [ref_step(a) for a in eqn.invars]
        can_out = (((name in _UFUNC or name == "sigmoid") and not eqn.params
                    or name == "concatenate")
                   and not eqn.prim.multiple_results and len(v.shape) > 0)
        elementwise = name not in ("matmul", "concatenate")
        donor = next((u for u in eqn.invars if private(u) and u.shape == v.shape
                      and u.dtype == v.dtype), None) if can_out and elementwise else None
        if can_out and slots.get(v):
            target = slots[v][0]  # take the slot's view once, then compute into it
            step += [f"{names[v]} = {target}", call(n, eqn, args, out=names[v])]
            written.add((v, target))
        elif donor is not None:
            step += [call(n, eqn, args, out=names[donor]), f"{names[v]} = {names[donor]}"]
            fresh.add(v)
        else:
            step.append(call(n, eqn, args))
            if can_out:
                fresh.add(v)
    for v, targets in slots.items():
        for target in targets:
            if (v, target) not in written:
                step.append(f"{target} = {ref_step(v)}")
    summed = set(sch.acc) | set(sch.prefix)
    loop_carries = [i for i in range(sch.num_carry) if i not in summed]
    if loop_carries:
        step.append(", ".join(f"c{i}" for i in loop_carries) + " = "
                    + ", ".join(ref_step(sch.carry_out[i]) for i in loop_carries))

    params = (["xp", "T", "C"] + [f"c{i}" for i in range(sch.num_carry)]
              + [f"X{j}" for j in range(sch.num_xs)]
              + [f"k{l}" for l in range(len(g.constvars))]
              + [f"Y{k}" for k in range(len(stacked_ys))] + [f"H{i}" for i in hist]
              + [f"S{k}" for k in range(len(stacks))])
    if sch.reverse:
        chunks, steps = "range((T - 1) // C * C, -1, -C)", "range(t1 - 1, t0 - 1, -1)"
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
    # Drop this chunk's arrays before the next chunk makes its own, so that two chunks'
    # temporaries are never alive at once (views of them included).
    chunk_names += [step_slices[v] for v in step_slices if v not in sch.x_in]
    if chunk_names:
        lines.append(f"        del {', '.join(chunk_names)}")
    ret = [f"A{i}" if i in summed else f"c{i}" for i in range(sch.num_carry)]
    ret += [arg for what, arg in y_plan if what == "broadcast"]
    lines.append(f"    return ({', '.join(ret)}{',' if ret else ''})")
    source = "\n".join(lines)
    exec(compile(source, f"<scan body {g.name}>", "exec"), env)

    # Bytes per step of what is batched per chunk (views cost none): sets the chunk length.
    per_step = sum(v.nbytes for v in allocated) + sum(v.nbytes for v in stacks)
    layout = Layout(y_plan, list(stacked_ys), hist, list(stacks), per_step)
    return source, env["run"], layout


def _fused_expr(plan, ref_batch, env):
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
