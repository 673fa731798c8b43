"""Which values of a loop program may share memory with a carry buffer, and whether an indexed
update of that buffer may write into it in place. The passes (passes.py) decide with these
functions and the verifier (ir.py) checks with them, so both read the same rules.

A value aliases a buffer when it is the buffer, or the output of an equation that reads an
alias and is not known to return a fresh array (views, `copy`, `real`, nested scans: anything
without a ufunc or operator behind it). Imports tape and ops.
"""

from __future__ import annotations

from ...ops.elementwise import add as add_p
from ...ops.structural import scatter_add_p, scatter_set_p
from ...tape import Literal

_FRESH = (scatter_set_p, scatter_add_p)  # copy their input (when not run in place)


def is_var(v):
    return not isinstance(v, Literal)


def returns_fresh(eqn):
    """Whether eqn's outputs are new arrays, never its inputs or views of them."""
    prim = eqn.prim
    return not prim.view and not prim.multiple_results and bool(
        prim.ufunc or prim.inline or prim in _FRESH)


def aliases(prog, v, through=None, copied=frozenset()):
    """The values that may share v's memory: v, and outputs of the computed equations that
    read one and are not fresh (equation `through`, the next write into v, excepted; the
    equations in `copied` have their result copied, so they end an alias chain)."""
    out = {v}
    for n, eqn in enumerate(prog.eqns):
        if n == through or n in copied or prog.section.get(n) is None:
            continue
        if not returns_fresh(eqn) and any(u in out for u in eqn.invars if is_var(u)):
            out.update(eqn.outvars)
    return out


def scatter_of(prog, v):
    """The index of the equation `scatter_add(g, *arrays)` that computes v, or None."""
    m = prog.producer.get(v) if is_var(v) else None
    return m if m is not None and prog.eqns[m].prim is scatter_add_p else None


def write_into(prog, n, b):
    """When equation n is an indexed update of buffer b, `(scatter, reads)`: the scatter_add
    equation an add-update replaces (None for a set), and what the update reads besides b.
    None when n is no such update: `scatter_set(b, v, *arrays)`, or `add(b, s)` / `add(s, b)`
    with `s = scatter_add(v, *arrays)` of b's own shape and dtype."""
    eqn = prog.eqns[n]
    if eqn.prim is scatter_set_p and eqn.invars[0] is b:
        return None, tuple(eqn.invars[1:])
    if eqn.prim is not add_p or b not in eqn.invars:
        return None
    a, c = eqn.invars
    s = c if a is b else a
    m = scatter_of(prog, s)
    out = eqn.outvars[0]
    if m is None or s is b or any((u.shape, u.dtype) != (b.shape, b.dtype) for u in (s, out)):
        return None
    return m, tuple(prog.eqns[m].invars)


def reads_of(prog, n):
    """What equation n reads when it runs: its inputs, but for an in-place add the inputs of
    the scatter_add it replaces instead of that scatter's result."""
    eqn = prog.eqns[n]
    rec = prog.in_place.get(n)
    if rec is None or rec.scatter is None:
        return eqn.invars
    s = prog.eqns[rec.scatter]
    return [v for v in eqn.invars if v is not s.outvars[0]] + list(s.invars)


def readers(prog, values, index=None):
    """Indices of the computed equations that read any of `values`, in order; `index`, from
    reader_index(prog), answers without a walk over every equation."""
    if index is not None:
        return sorted({n for v in values for n in index.get(v, ())})
    return [n for n in range(len(prog.eqns)) if prog.section.get(n) is not None
            and any(is_var(u) and u in values for u in reads_of(prog, n))]


def in_place_chains(prog):
    """{carry: the indices of its in-place updates, in order}."""
    chains = {}
    for n, rec in sorted(prog.in_place.items()):
        chains.setdefault(rec.carry, []).append(n)
    return chains


def reader_index(prog):
    """{value: indices of the computed equations that read it}: for a pass that asks
    `readers` once per carry (a long backward body has hundreds)."""
    index = {}
    for n in range(len(prog.eqns)):
        if prog.section.get(n) is not None:
            for u in reads_of(prog, n):
                if is_var(u):
                    found = index.setdefault(u, [])
                    if not found or found[-1] != n:
                        found.append(n)
    return index


def batched_reads(prog):
    """Values read by work on whole chunks (POST, CHUNK) or by accumulator reductions: step
    values those read are copied into scratch rows at the end of each step."""
    from .ir import BATCHED  # ir imports this module

    out = {v for n, e in enumerate(prog.eqns) if prog.section.get(n) in BATCHED
           for v in e.invars if is_var(v)}
    for acc in prog.accumulators.values():
        out.update(v for v in acc.how.reads() if is_var(v))
    return out


def escaping_views(prog, b, through, copied):
    """The per-step equations whose results alias buffer b and outlive the step (outputs of
    the body, or read by batched work): copying their results keeps them right."""
    from .ir import STEP  # ir imports this module

    late = batched_reads(prog)
    outs = {v for v in prog.graph.outvars if is_var(v)}
    return {prog.producer[v] for v in aliases(prog, b, through, copied) - {b}
            if (v in late or v in outs) and prog.section.get(prog.producer[v]) is STEP
            and len(prog.eqns[prog.producer[v]].outvars) == 1}


def chain_problem(prog, i, chain, copied):
    """Why carry i's buffer cannot be updated in place by `chain` (the indices of its update
    equations, in order, the last computing carry i's next value), or None when it can.

    Each stage b of the buffer (the carry in, then each update's result) must be read only
    by per-step work that runs before the update that overwrites it; no alias of it may
    outlive the step (an output of the body, or read by batched work, whose rows are copied
    after the step); the update's other inputs must not alias it; and b itself is an output
    only as the final carry i."""
    from .ir import STEP  # ir imports this module

    outs = [v for v in prog.graph.outvars if is_var(v)]
    cin, cout = prog.carry_in[i], prog.carry_out[i]
    if not chain or prog.eqns[chain[-1]].outvars[0] is not cout:
        return "the updates do not compute the next carry"
    if len(cin.shape) == 0:
        return "the buffer is 0-d"
    late = batched_reads(prog)
    b = cin
    for n in chain + [None]:
        if n is not None:
            if prog.section.get(n) is not STEP:
                return f"update {n} does not run per step"
            found = write_into(prog, n, b)
            if found is None:
                return f"equation {n} is not an indexed update of the buffer"
        al = aliases(prog, b, through=n, copied=copied)
        final = n is None
        if sum(v is b for v in outs) != (1 if final else 0):
            return "the buffer is also a y, a residual or another carry"
        if b in late or any(v in late or v in outs for v in al - {b}):
            return "a view of the buffer outlives the step"
        for r in readers(prog, al):
            if r == n:
                continue
            if prog.section.get(r) is not STEP:
                return f"equation {r} reads the buffer outside the step"
            if n is not None and r > n:
                return f"equation {r} reads the buffer after update {n} overwrites it"
        if n is None:
            return None
        scatter, reads = found
        if any(is_var(u) and u in al for u in reads):
            return f"update {n} reads the buffer it writes"
        if scatter is not None:
            s = prog.eqns[scatter].outvars[0]
            if prog.uses[s] != 1 or prog.out_uses[s] or prog.section.get(scatter) not in (
                    STEP, None):  # None: already replaced by the update
                return f"the scatter_add of update {n} is read elsewhere"
            arrays = prog.eqns[scatter].invars[1:]
            if i not in prog.sum_carries and any(is_var(a) and a.shape != () for a in arrays):
                # add.at into the buffer sums repeated positions one at a time; the loop sums
                # them into zeros first: another rounding, allowed for gradient sums only
                return "an add at an index array that may repeat positions"
        b = prog.eqns[n].outvars[0]
    return None
