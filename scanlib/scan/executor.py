"""Runs a scan body T times: the forward loop of the scan primitive.

The body graph is compiled once into straight-line Python (shown by `source`): equations that
depend only on closed-over values run once before the loop, those that depend on xs but not on
the carry run once for all steps (batching.py), and only the rest runs per step. Outputs go
into preallocated stacks; a y that is the carry shares one "history" buffer with the carry
residuals, a y that is an x or a constant is a view, never a copy.
Imports backends, tape and scan.batching.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..tape import Literal
from .batching import batched_impl

# Operators written inline in generated code (saves a Python call per equation and step).
_INLINE = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
           "div": "({0} / {1})", "neg": "(-{0})", "matmul": "({0} @ {1})", "pow": "({0} ** {1})"}

CONST, XS, STEP = "const", "xs", "step"


class CompiledBody:
    """A body graph turned into a Python function `run(T, *init, *xs, *consts)`."""

    def __init__(self, graph, num_carry, num_xs, reverse):
        self.graph = graph
        self.num_carry, self.num_xs, self.reverse = num_carry, num_xs, reverse
        carry_in = graph.invars[:num_carry]
        x_in = graph.invars[num_carry:]
        kind = {v: STEP for v in carry_in}
        kind.update({v: XS for v in x_in})
        kind.update({v: CONST for v in graph.constvars})
        self.kind = kind
        names = {}
        for i, v in enumerate(carry_in):
            names[v] = f"c{i}"
        for i, v in enumerate(x_in):
            names[v] = f"X{i}"  # the whole [T, ...] array; per-step slices are x{i}
        for i, v in enumerate(graph.constvars):
            names[v] = f"k{i}"
        env = {"_np": np}
        prologue, loop = [], []
        sliced = {}  # XS var -> per-step name

        def ref(v, in_loop=True):
            if isinstance(v, Literal):
                name = f"_l{len(env)}"
                env[name] = v.value
                return name
            if in_loop and kind[v] == XS:
                if v not in sliced:
                    sliced[v] = names[v].lower() if v in x_in else names[v] + "_t"
                    loop.append(f"{sliced[v]} = {names[v]}[t]")
                return sliced[v]
            return names[v]

        for n, eqn in enumerate(graph.eqns):
            in_kinds = [kind[v] for v in eqn.invars if not isinstance(v, Literal)]
            for j, v in enumerate(eqn.outvars):
                names[v] = f"v{n}_{j}"
            if all(k == CONST for k in in_kinds):
                k = CONST
            elif all(k in (CONST, XS) for k in in_kinds):
                batched = [not isinstance(v, Literal) and kind[v] == XS for v in eqn.invars]
                shapes = [() if isinstance(v, Literal) else v.shape for v in eqn.invars]
                fn = batched_impl(eqn, batched, shapes)
                k = XS if fn is not None else STEP
            else:
                k = STEP
            for v in eqn.outvars:
                kind[v] = k
            lhs = ", ".join(names[v] for v in eqn.outvars)
            if eqn.prim.multiple_results:
                lhs += ","
            if k == XS:
                env[f"_b{n}"] = fn
                args = ", ".join(ref(v, False) for v in eqn.invars)
                prologue.append(f"{lhs} = _b{n}({args})")
                continue
            target = prologue if k == CONST else loop
            args = [ref(v, k == STEP) for v in eqn.invars]
            if eqn.prim.name in _INLINE and not eqn.params:
                target.append(f"{lhs} = {_INLINE[eqn.prim.name].format(*args)}")
            else:
                env[f"_f{n}"], env[f"_p{n}"] = eqn.prim.impl, eqn.params
                extra = f", **_p{n}" if eqn.params else ""
                target.append(f"{lhs} = _f{n}({', '.join(args)}{extra})")

        # Outputs: carries, then ys (each stacked, a history view, or a whole-array view).
        outvars = graph.outvars
        carry_out, y_out = outvars[:num_carry], outvars[num_carry:]
        self.y_plan = []  # per y: ("stack", slot) | ("hist_in", i) | ("hist_out", i) | ...
        hist = set()
        stacked = {}
        for v in y_out:
            if not isinstance(v, Literal) and v in carry_in:
                i = carry_in.index(v)
                hist.add(i)
                self.y_plan.append(("hist_in", i))
            elif not isinstance(v, Literal) and v in carry_out and kind[v] == STEP:
                i = carry_out.index(v)
                hist.add(i)
                self.y_plan.append(("hist_out", i))
            elif isinstance(v, Literal) or kind[v] == CONST:
                self.y_plan.append(("broadcast", ref(v, False)))
            elif kind[v] == XS:
                self.y_plan.append(("whole", ref(v, False)))
            else:
                if v not in stacked:
                    stacked[v] = len(stacked)
                    loop.append(f"Y{stacked[v]}[t] = {ref(v)}")
                self.y_plan.append(("stack", stacked[v]))
        self.stacked_vars = list(stacked)
        self.hist = sorted(hist)
        step = "t + 1" if not reverse else "t"
        for i in self.hist:
            loop.append(f"H{i}[{step}] = {ref(carry_out[i])}")
        new_carry = [ref(v) for v in carry_out]
        if num_carry:
            loop.append(", ".join(f"c{i}" for i in range(num_carry)) + " = "
                        + ", ".join(new_carry))
        broadcast_exprs = [p[1] for p in self.y_plan if p[0] in ("broadcast", "whole")]
        params = (["T"] + [f"c{i}" for i in range(num_carry)] + [f"X{i}" for i in range(num_xs)]
                  + [f"k{i}" for i in range(len(graph.constvars))]
                  + [f"Y{i}" for i in range(len(stacked))] + [f"H{i}" for i in self.hist])
        order = "range(T - 1, -1, -1)" if reverse else "range(T)"
        lines = [f"def run({', '.join(params)}):"]
        lines += ["    " + s for s in prologue]
        lines.append(f"    for t in {order}:")
        lines += ["        " + s for s in (loop or ["pass"])]
        ret = [f"c{i}" for i in range(num_carry)] + broadcast_exprs
        lines.append(f"    return ({', '.join(ret)}{',' if ret else ''})")
        self.source = "\n".join(lines)
        exec(compile(self.source, f"<scan body {graph.name}>", "exec"), env)
        self._run = env["run"]


    def __call__(self, length, init, xs, consts):
        """Run the loop; returns (final carry values, ys arrays)."""
        g, T = self.graph, length
        ref = (init + xs + consts)[0] if (init or xs or consts) else np.zeros(())
        xp = backends.xp_of(*(init + xs + consts)) if (init or xs or consts) else np
        ys_vars = g.outvars[self.num_carry:]
        stacks = [xp.empty((T,) + v.shape, v.dtype) for v in self.stacked_vars]
        hists = []
        for i in self.hist:
            v = g.invars[i]
            h = xp.empty((T + 1,) + v.shape, v.dtype)
            h[T if self.reverse else 0] = init[i]
            hists.append(h)
        del ref
        if T == 0:
            outs = list(init)
            extra = []
        else:
            res = self._run(T, *init, *xs, *consts, *stacks, *hists)
            outs, extra = list(res[:self.num_carry]), list(res[self.num_carry:])
        ys = []
        for (what, arg), v in zip(self.y_plan, ys_vars):
            if what == "stack":
                ys.append(stacks[arg])
            elif what in ("hist_in", "hist_out"):
                h = hists[self.hist.index(arg)]
                shifted = (what == "hist_out") != self.reverse
                ys.append(h[1:] if shifted else h[:T])
            elif T == 0:
                ys.append(xp.empty((0,) + v.shape, v.dtype))
            else:
                value = extra.pop(0)
                if what == "broadcast":
                    value = xp.broadcast_to(xp.asarray(value, dtype=v.dtype), (T,) + v.shape)
                ys.append(value)
        return outs, ys


def compiled(graph, num_carry, num_xs, reverse) -> CompiledBody:
    """The CompiledBody of a graph, built once and cached on it."""
    cache = graph._compiled
    if cache is None:
        cache = graph._compiled = {}
    key = (num_carry, num_xs, reverse)
    if key not in cache:
        cache[key] = CompiledBody(graph, num_carry, num_xs, reverse)
    return cache[key]
