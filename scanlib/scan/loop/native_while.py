"""while_loop's loop as one numba kernel: cond_fun's and body_fun's graphs written with
native_rules.py's statements inside `while True:`, for the loop runner of loops.py when the
loop compiler is "numba" (`set_loop_compiler("numba")`).

`build(cond, body, carries)` returns `run(carry, q, k, max_steps) -> (carry, n, ())`, the
signature of loops.runner's NumPy loop, or raises Unsupported (a primitive or form without a
numba rule). As for a scan's kernel (native.py), the dtype and rank numba infers for every
value of a step are checked against the graph's before the kernel first runs on new types
(NotProved when they differ), and an error the kernel raises where NumPy's loop would raise
its own (KERNEL_ERRORS) is left to that loop: the caller then runs the NumPy loop.

Imports numpy, the graph helpers, native.py and native_rules.py (numba only through them).
"""

from __future__ import annotations

import numpy as np

from ...tape import Literal
from ...tape.graph import used_vars
from .native import STATS, VIEWS, kernel_module, new_kernel
from . import native_nests as nests
from .native_rules import Arg, Fusion, Unsupported, dtype_code, literal_code

__all__ = ["build", "TooManySteps"]

NO_LIMIT = -1  # max_steps=None as the kernel reads it


class TooManySteps(Exception):
    """cond_fun was still True after max_steps steps (loops.py raises the user's error)."""


def build(cond, body, carries, background=False, collect=()):
    """The loop over the given carries (indices into the body's carries) as a numba kernel
    and the Python function that calls it (its `kernel` attribute the NativeKernel);
    Unsupported when a statement has no rule. `background`: the kernel compiles in another
    process (NativeKernel). `collect`: indices of body outputs beyond the carries whose value
    at every step the kernel stores (the residuals of while_loop's gradient), returned as
    one array per index, stacked over the steps."""
    w = _Writer(cond, body, carries, collect)
    source = kernel_module(w.params, w.lines, "while_loop kernel")
    what = f"the while_loop of body {body.name!r} (carry {_types(body, carries)})"
    if collect:
        what += f", saving {len(collect)} residuals a step"
    kernel = new_kernel(source, w.expected, body.name, what, background)
    return _caller(kernel, w, carries, body), source


def _types(body, carries):
    from ...tape.tensor import type_str

    return ", ".join(type_str(body.invars[i].shape, body.invars[i].dtype)
                     for i in carries) or "none"


ROWS_AT_FIRST = 16  # steps the residual arrays hold, at least, before they first double


class _Writer:
    def __init__(self, cond, body, carries, collect=()):
        self.names, self.expected = {}, {}
        for i in carries:  # the body reads its own name of each carry (Scope.step_aliases)
            self.names[cond.invars[i]], self.names[body.invars[i]] = f"c{i}", f"s{i}"
            v = body.invars[i]
            self.expected[f"c{i}"] = self.expected[f"s{i}"] = (np.dtype(v.dtype), len(v.shape))
        self.names.update({v: f"q{j}" for j, v in enumerate(cond.constvars)})
        self.names.update({v: f"k{j}" for j, v in enumerate(body.constvars)})
        cs = [f"c{i}" for i in carries]
        new = [body.outvars[i] for i in carries]
        rows = [body.outvars[i] for i in collect]
        self.params = cs + [f"q{j}" for j in range(len(cond.constvars))] + [
            f"k{j}" for j in range(len(body.constvars))] + ["max_steps"] + (
            ["capacity"] if rows else [])
        produced = {}
        step = self._statements(cond, cond.outvars, "a", {})
        rs = "".join(f"r{m}[:n], " for m in range(len(rows)))
        ret = f"return ({''.join(c + ', ' for c in cs)}n, "
        step += [f"if not {self._ref(cond.outvars[0], None)}:", f"    {ret}False, {rs})",
                 "if n == max_steps:", f"    {ret}True, {rs})"]
        # n, like the carries, read only up here and assigned only at the end of the step
        step += ["n_next = n + 1"] + [f"s{i} = c{i}" for i in carries]
        step += self._statements(body, new + rows, "b", produced)
        step += self._row_stores(rows)
        if carries:
            outs = [self._carry_out(v, body.invars[i], produced) for i, v in zip(carries, new)]
            step.append(f"{', '.join(cs)}, = {', '.join(outs)},")
        step.append("n = n_next")
        if rows:  # the steps until the arrays are full, inside the loop that doubles them
            loop = ["while True:"] + ["    " + s for s in self._row_growth(rows)] + [
                "    while n < capacity:"] + ["        " + s for s in step]
        else:
            loop = ["while True:"] + ["    " + s for s in step]
        self.lines = ["    " + s for s in ["n = 0"] + self._row_arrays(rows) + loop]

    def _row_arrays(self, rows):
        """Each collected value's array over the steps, [capacity, *shape]."""
        return [f"r{m} = np.empty((capacity,) + {tuple(v.shape)}, {dtype_code(v.dtype)})"
                for m, v in enumerate(rows)]

    def _row_growth(self, rows):
        """The collected arrays doubled when full. Apart from the steps' own loop: an array
        assigned anew inside a step's loop costs that loop more than the work of its step
        (numba reloads it and counts its references at every step: 7 ns a step, against
        1-2 for a cumulative sum's)."""
        lines = ["if n == capacity:", "    capacity = 2 * n"]
        for m, v in enumerate(rows):
            lines += [f"    r{m}_more = np.empty((capacity,) + {tuple(v.shape)}, "
                      f"{dtype_code(v.dtype)})",
                      f"    r{m}_more[:n] = r{m}",
                      f"    r{m} = r{m}_more"]
        return lines

    def _row_stores(self, rows):
        """Step n's collected values into row n (the arrays have room: _row_growth)."""
        lines = []
        for m, v in enumerate(rows):
            if isinstance(v, Literal):
                raise Unsupported("a literal collected at every step")
            lines += nests.store(f"r{m}[n]", self.names[v], tuple(v.shape), f"r{m}")
        return lines

    def _ref(self, v, dtype):
        if isinstance(v, Literal):
            return literal_code(v.value, dtype)
        return self.names[v]

    def _statements(self, graph, outvars, tag, produced):
        lines, eqns = [], used_vars(graph.eqns, outvars)[0]
        write = Fusion(eqns, outvars)
        for n, eqn in enumerate(eqns):
            outs = []
            for j, v in enumerate(eqn.outvars):
                self.names[v] = name = f"{tag}{n}_{j}"
                self.expected[name] = (np.dtype(v.dtype), len(v.shape))
                produced[v] = eqn.prim.name
                outs.append(name)
            args = [Arg(None if isinstance(a, Literal) else self.names[a], a)
                    for a in eqn.invars]
            lines += write(eqn, args, outs)
        return lines + write.flush()

    def _carry_out(self, v, like, produced):
        """The next carry: a fresh array (numba gives a variable one type; a view, an input
        or a constant would bring another layout, or alias what the caller owns)."""
        if isinstance(v, Literal):
            if like.shape:
                raise Unsupported("a literal as a carry with axes")
            return literal_code(v.value, like.dtype)
        code = self.names[v]
        if not like.shape:
            return code
        return code if produced.get(v, "input") not in VIEWS + ("input",) else f"{code}.copy()"


def _caller(kernel, w, carries, body):
    nc = len(carries)
    scalar_carry = [not body.invars[i].shape for i in carries]
    scalar_types = [np.dtype(body.invars[i].dtype).type for i in carries]
    collects = "capacity" in w.params
    nk = len(w.params) - 1 - len(carries) - collects
    # The collected arrays start as long as the last call's trip count needed (the steps of
    # a training loop's calls are alike), so they need not grow.
    last_n = [ROWS_AT_FIRST - 1]

    def run(carry, q, k, max_steps):
        args = [t(c) if s else np.array(c, dtype=t, copy=True)
                for c, s, t in zip(carry, scalar_carry, scalar_types)]
        args += [x[()] if isinstance(x, np.ndarray) and not x.shape else x
                 for x in list(q) + list(k)]
        if len(args) != len(carry) + nk:
            raise AssertionError("while_loop kernel: argument count")
        STATS["while_loop kernel calls"] += 1
        # (the carries, n, whether it stopped at max_steps, the collected rows)
        args.append(NO_LIMIT if max_steps is None else int(max_steps))
        if collects:
            capacity = max(last_n[0] + 1, ROWS_AT_FIRST)
            args.append(capacity)
        got = kernel(*args)
        out, n, too_many, rows = got[:nc], got[nc], got[nc + 1], got[nc + 2:]
        if too_many:
            raise TooManySteps(max_steps)
        if collects:
            last_n[0] = n
            if 2 * n < capacity:  # views of arrays much longer: keep only their rows
                rows = tuple(r.copy() for r in rows)
        return [t(c) if s else c for c, s, t in zip(out, scalar_carry, scalar_types)], \
            int(n), tuple(rows)
    run.kernel = kernel
    return run
