"""The memory plan, the loop compiler's last pass: where every value that outlives its
statement lives, and which results are computed straight into their place (`out=`) or over
an input that nothing else reads. The printer (emit.py) prints this plan; it decides nothing.

Buffers (allocated by the executor, named as the generated code names them):
  Y[k]  [T, ...]    the stack of the k-th distinct stacked y
  H[i]  [T + 1, ...] the history of carry i, where a y is that carry (in or out): the carry
                    is written there each step and the y is a view of it, never a copy
  S[k]  [C, ...]    a chunk's rows of a step value that batched work reads (scratch)

Imports the loop IR.
"""

from __future__ import annotations

import dataclasses

from .ir import CHUNK, CONST, POST, STEP, STEP_VALUE, RunningSum, is_var


@dataclasses.dataclass(frozen=True)
class Slot:
    """Rows of a buffer: `buffer` is "Y", "H" or "S", `index` which one, `rows` the index
    expression in the generated code ("t", "t + 1", "t - t0", "t0:t1")."""
    buffer: str
    index: int
    rows: str

    def __str__(self):
        return f"{self.buffer}{self.index}[{self.rows}]"


@dataclasses.dataclass(frozen=True)
class YPlace:
    """Where a y's [T, ...] array comes from: "stack" (Y[index]), "xs" (xs[index] itself),
    "hist_in"/"hist_out" (a view of carry index's history), "broadcast" (a constant)."""
    kind: str
    index: int = -1


@dataclasses.dataclass
class Storage:
    ys: tuple  # YPlace per y
    stacked: tuple  # the Var of each Y buffer
    hist: tuple  # the carries with an H buffer, ascending
    scratch: tuple  # the Var of each S buffer
    slots: dict  # per-step Var -> the Slots it fills each step, in order
    into: dict  # batched eqn index -> the Y Slot it computes into
    y_copies: tuple  # (k, Var): batched y values copied into Y[k] after each chunk
    batch_over: dict  # batched eqn index -> the input Var whose array it overwrites
    step_into: dict  # step eqn index -> the Slot it computes into
    step_over: dict  # step eqn index -> the input Var whose array it overwrites
    per_step_bytes: int  # bytes per step of a chunk's own arrays: sets the chunk length

    def describe(self, prog, name):
        """Lines for format_loop: each buffer, and what is computed in place."""
        out = [f"ys[{j}] <- " + {"stack": f"Y{p.index}", "xs": f"xs[{p.index}] itself",
                                 "hist_in": f"H{p.index}, the incoming carry",
                                 "hist_out": f"H{p.index}, the new carry",
                                 "broadcast": "a constant, broadcast"}[p.kind]
               for j, p in enumerate(self.ys)]
        for v, slots in self.slots.items():
            out.append(f"{name(v)} -> {', '.join(map(str, slots))} each step")
        for n, s in self.into.items():
            out.append(f"{name(prog.eqns[n].outvars[0])} computed into {s}")
        for table in (self.batch_over, self.step_over):
            for n, u in table.items():
                out.append(f"{name(prog.eqns[n].outvars[0])} computed over {name(u)}")
        out.append(f"{self.per_step_bytes:,} bytes per step of batched temporaries")
        return out

    def history_rows(self, prog, v):
        """(i, "in" | "out") when v is read from carry i's history, else None."""
        for i in self.hist:
            if isinstance(getattr(prog.accumulators.get(i), "how", None), RunningSum):
                continue
            if v is prog.carry_out[i]:
                return i, "out"
            if v is prog.carry_in[i]:
                return i, "in"
        return None


def plan_memory(prog):
    """Choose the storage of a program whose sections are final.

    A y that is a carry (in or out) computed per step lives in that carry's history; a y
    that is an x is xs itself; a per-step y fills its stack's row each step; a batched y that
    nothing else reads is computed into its stack. Batched work writes over an input only
    when it is elementwise (a matmul's output must not alias its input) and the input is a
    chunk array nothing else reads; step work likewise over a step temporary. Must not give
    one array two live owners. An in-place update (update_in_place) already has its array:
    the carry's buffer."""
    ys, stacked, hist, slots, into, y_copies = [], {}, set(), {}, {}, []

    def slot(v, s):
        slots.setdefault(v, []).append(s)

    for v in prog.y_out:
        if not is_var(v) or prog.kind[v] == CONST:
            ys.append(YPlace("broadcast"))
        elif v in prog.x_in:
            ys.append(YPlace("xs", prog.x_in.index(v)))
        elif v in prog.carry_in:
            hist.add(prog.carry_in.index(v))
            ys.append(YPlace("hist_in", prog.carry_in.index(v)))
        elif v in prog.carry_out and prog.kind[v] == STEP_VALUE and (
                prog.section.get(prog.producer.get(v)) is STEP
                or _running(prog, prog.carry_out.index(v))):
            hist.add(prog.carry_out.index(v))
            ys.append(YPlace("hist_out", prog.carry_out.index(v)))
        else:
            if v not in stacked:
                k = stacked[v] = len(stacked)
                n = prog.producer.get(v)
                if prog.is_step_value(v):
                    slot(v, Slot("Y", k, "t"))
                elif (n is not None and not prog.uses[v] and prog.out_uses[v] == 1
                      and prog.batched_into(n) is not None):
                    into[n] = Slot("Y", k, "t0:t1")
                else:
                    y_copies.append((k, v))
            ys.append(YPlace("stack", stacked[v]))
    hist = tuple(sorted(hist))
    at = "t" if prog.reverse else "t + 1"
    for i in hist:
        if not _running(prog, i):
            slot(prog.carry_out[i], Slot("H", i, at))

    storage = Storage(tuple(ys), tuple(stacked), hist, (), slots, into, tuple(y_copies),
                      {}, {}, {}, 0)
    scratch = []  # step values batched work reads, in the order the printer meets them
    batch_reads = [v for n in prog.in_section(POST) for v in prog.eqns[n].invars]
    batch_reads += [v for i, a in prog.accumulators.items() if not _running(prog, i)
                    for v in a.how.reads()]
    for v in batch_reads:
        if (is_var(v) and prog.is_step_value(v) and v not in scratch
                and storage.history_rows(prog, v) is None):
            scratch.append(v)
    for k, v in enumerate(scratch):
        slot(v, Slot("S", k, "t - t0"))

    batch_over, allocated, fresh = {}, [], set()
    for n in prog.in_section(CHUNK) + prog.in_section(POST):
        eqn, v = prog.eqns[n], prog.eqns[n].outvars[0]
        into_fn = prog.batched_into(n)
        over = None
        if n not in into and into_fn is not None and eqn.prim.elementwise:
            over = next((u for u in eqn.invars if u in fresh and prog.uses[u] == 1
                         and not prog.out_uses[u] and u.shape == v.shape
                         and u.dtype == v.dtype), None)
        if over is not None:
            batch_over[n] = over
            fresh.add(v)  # v owns the input's array now
        elif n not in into:
            if not eqn.prim.view:
                allocated.append(v)
            if into_fn is not None:
                fresh.add(v)

    step_into, step_over, fresh = {}, {}, set()
    for n in prog.in_section(STEP):
        if n in prog.in_place:  # it writes into its carry's buffer (update_in_place)
            continue
        eqn, v = prog.eqns[n], prog.eqns[n].outvars[0]
        prim = eqn.prim
        can_out = bool((prim.ufunc and not eqn.params or prim.out_impl)
                       and not prim.multiple_results and len(v.shape) > 0)
        over = next((u for u in eqn.invars if is_var(u) and u in fresh and prog.uses[u] == 1
                     and not prog.out_uses[u] and u not in slots and u.shape == v.shape
                     and u.dtype == v.dtype), None) if can_out and prim.elementwise else None
        if can_out and slots.get(v):
            step_into[n] = slots[v][0]  # take the slot's view once, then compute into it
        elif over is not None:
            step_over[n] = over
            fresh.add(v)
        elif can_out:
            fresh.add(v)

    per_step = sum(v.nbytes for v in allocated) + sum(v.nbytes for v in scratch)
    storage = dataclasses.replace(
        storage, scratch=tuple(scratch), slots={v: tuple(s) for v, s in slots.items()},
        batch_over=batch_over, step_into=step_into, step_over=step_over,
        per_step_bytes=per_step)
    return prog.replace(storage=storage, fired="plan_memory")


def _running(prog, i):
    return isinstance(getattr(prog.accumulators.get(i), "how", None), RunningSum)

