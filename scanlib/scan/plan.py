"""`scan_plan`: a printable account of what scan does for a given f, for learners and for
tests: the traced body, the backward body, and every residual with its policy, where it is
kept, and the bytes it adds beyond ys.

Imports tape, tracing and the scan modules below it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..tape import format_graph, type_str
from .api import prepare
from .executor import compiled
from .linearize import linearize, name_inner_residuals
from .residuals import CLONE, KEEP, Kind
from . import schedule as _schedule
from .loop import format_loop
from .primitive import _needs_grad

if TYPE_CHECKING:
    from ..tape.types import PyTree


class ScanPlan:
    """The body, backward body and residual table of one scan (print it). `forward_source`
    and `backward_source` are the Python the two loops actually run, generated from the
    bodies: work on closed-over values before the loop, carry-independent work once per
    chunk of steps, and only the carry's own chain per step. `forward_loop` and
    `backward_loop` are the loop compiler's programs those were printed from (sections,
    accumulators, and the passes that fired; see docs/internals.md)."""

    def __init__(self, body, backward_body, residuals, length, reverse, names, bwd_names):
        self.body, self.backward_body = body, backward_body
        self.residuals = residuals  # list of dicts: name, policy, type, storage, bytes
        self.length, self.reverse = length, reverse
        self._names, self._bwd_names = names, bwd_names
        self.forward_source = self.backward_source = ""  # the Python each loop runs
        self.forward_loop = self.backward_loop = None  # the LoopProgram each was printed from
        self.schedule = None  # lines on scan's checkpoint schedule, when one was asked for

    @property
    def residual_bytes(self) -> int:
        """Bytes the forward pass stores for backward beyond ys and the inputs."""
        return sum(r["bytes"] for r in self.residuals)

    def __str__(self):
        order = "t = T-1 ... 0" if not self.reverse else "t = 0 ... T-1"
        lines = [f"scan over T = {self.length} steps", "", "forward body (traced once):",
                 format_graph(self.body, 2, dict(self._names)), "",
                 f"backward body (a scan too, run {order}):",
                 format_graph(self.backward_body, 2, dict(self._bwd_names)), "",
                 "residuals (saved for backward):"]
        head = ("name", "policy", "type", "kept as", "extra bytes")
        rows = [head] + [(r["name"], r["policy"], r["type"], r["storage"], f"{r['bytes']:,}")
                         for r in self.residuals]
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        for row in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        lines.append(f"  total stored beyond ys: {self.residual_bytes:,} bytes")
        if self.forward_loop is not None:
            lines += ["", "loop compiler passes that fired (print forward_loop, backward_loop):"]
            for what, prog in (("forward", self.forward_loop), ("backward", self.backward_loop)):
                lines.append(f"  {what}: {', '.join(prog.fired) or 'none'}")
        if self.schedule:
            lines += ["", *self.schedule]
        return "\n".join(lines)

    __repr__ = __str__


class _Shown:
    """A LoopProgram that prints as format_loop (its fields stay readable)."""

    def __init__(self, prog, names):
        self.program, self.fired, self._names = prog, prog.fired, names

    def __str__(self):
        return format_loop(self.program, self._names)

    __repr__ = __str__


def scan_plan(f: Callable[..., tuple[PyTree, PyTree]], init: PyTree, xs: PyTree = None, *,
              length: int | None = None, reverse: bool = False, dim: int = 0,
              checkpoint: str | int | tuple[str, int] | None = None) -> ScanPlan:
    """What `scan(f, init, xs, ...)` traces, and what it saves when differentiated: the carry
    always carries a gradient; xs leaves and closed-over tensors do where they require grad
    (exactly as scan itself decides). With `checkpoint` (scan's option), the residual table
    is still that of one step, and `plan.schedule` (printed last) says what the schedule
    keeps between the passes and what the backward pass recomputes.

    >>> import scanlib as sl
    >>> W = sl.tensor([[0.5]], requires_grad=True)
    >>> plan = sl.scan_plan(lambda h, x: (sl.tanh(h @ W + x),) * 2, sl.zeros((1, 1)),
    ...                     sl.zeros((5, 1, 1)))
    >>> [r["policy"] for r in plan.residuals]
    ['KEEP', 'CLONE', 'REMOVE_ADDITIONAL_INPUTS']
    """
    schedule = _schedule.parse(checkpoint)
    body, consts, init_t, xs_t, T, _, _ = prepare(f, init, xs, length, reverse, dim)
    nc = len(init_t)
    x_needs = [_needs_grad(x) for x in xs_t]
    lin = linearize(body, nc, x_needs, [_needs_grad(k) for k in consts])
    run = compiled(lin.aug_body, nc, len(xs_t), reverse)
    places = [(p.kind, p.index) for p in run.program.storage.ys]
    user_plan, extra_plan = places[:lin.num_ys], places[lin.num_ys:]
    shared_with_ys = {i for what, i in user_plan if what in ("hist_in", "hist_out")}

    names = {}
    format_graph(body, 0, names)  # assigns the printed names the table uses
    name_inner_residuals(lin, names)
    rows, counted_hist = [], set()
    for r in lin.residuals:
        v = r.var
        row = {"name": names.get(v, "?"), "policy": r.policy, "type": type_str(v.shape, v.dtype)}
        if r.kind is Kind.AUG:
            what, i = extra_plan[r.index]
            if what in ("hist_in", "hist_out"):
                y_leaf = next(j for j, (w, k) in enumerate(user_plan)
                              if w in ("hist_in", "hist_out") and k == i) \
                    if i in shared_with_ys else None
                if y_leaf is not None:
                    row["storage"] = f"carry history, shared with ys[{y_leaf}]"
                    extra = v.nbytes
                else:
                    row["storage"] = f"carry history [T+1, ...] of carry {i}"
                    extra = (T + 1) * v.nbytes
                row["bytes"] = 0 if i in counted_hist else extra
                counted_hist.add(i)
            else:
                row["storage"] = "stacked [T, ...]" if what == "stack" else \
                    "computed for all steps at once"
                row["bytes"] = T * v.nbytes
        elif r.kind is Kind.YS:
            row["storage"], row["bytes"] = f"ys[{r.index}] (no copy)", 0
        elif r.kind is Kind.XS:
            row["storage"], row["bytes"] = f"xs[{r.index}] (no copy)", 0
        elif r.kind is Kind.CONST:
            row["storage"], row["bytes"] = "referenced once", 0
        else:  # Kind.RECOMPUTED
            row["storage"], row["bytes"] = "recomputed once per call", v.nbytes
        rows.append(row)
    bwd_names = {bv: names[fv] for bv, fv in lin.bwd_sources.items() if fv in names}
    plan = ScanPlan(body, lin.bwd_body, rows, T, reverse, names, bwd_names)
    n_bwd_carry = lin.num_bwd_carry
    bwd_run = compiled(lin.bwd_body, n_bwd_carry, len(lin.bwd_body.invars) - n_bwd_carry,
                       not reverse, lin.bwd_sum_carries)
    plan.forward_source, plan.backward_source = run.source, bwd_run.source
    plan.forward_loop = _Shown(run.program, names)
    plan.backward_loop = _Shown(bwd_run.program, bwd_names)
    if schedule is not None:
        carry_bytes = sum(x._value.nbytes for x in init_t)
        step_bytes = sum(r.var.nbytes for r in lin.residuals if r.policy in (CLONE, KEEP))
        plan.schedule = schedule.describe(T, carry_bytes, step_bytes)
    return plan
