"""Golden linearizations: for each named body, what differentiating a scan of it builds
(scanlib/scan/linearize.py): the backward body as traced, before the loop compiler's passes;
its residuals (the forward value each reads, its policy, where the backward scan gets it, its
type); which carries, xs and closed-over inputs get a cotangent; and the same for outputs
without a cotangent (`given`), with the carry patterns of the first backward steps
(`carry_patterns`) and the one-step and settled linearizations those peel into. One file per
body under tests/golden/linearizations/. The bodies are the golden loops' corpus
(tests/test_loop_passes.py) plus those below. A change to linearize that alters one shows in
the diff of these files.

    python tests/golden/gen_linearizations.py           # rewrite the files
    python tests/golden/gen_linearizations.py --check   # exit 1 if a file is out of date
"""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/, for the corpus
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repository, for scanlib
sys.path.insert(0, HERE)  # golden_files

import scanlib as sl  # noqa: E402
from golden_files import write_or_check  # noqa: E402
from test_loop_passes import CORPUS, H, U, W, X, body_of  # noqa: E402

from scanlib.scan.linearize import carry_patterns, linearize, name_inner_residuals  # noqa: E402,E501
from scanlib.scan.primitive import _needs_grad  # noqa: E402
from scanlib.tape import format_graph, type_str  # noqa: E402
from scanlib.tape.tensor import is_differentiable_dtype  # noqa: E402

OUT = os.path.join(HERE, "linearizations")
LIMIT = 8  # carry patterns looked for (a scan of T steps asks for T + 1)

rng = np.random.default_rng(1)
W_grad = sl.tensor(rng.normal(0, 0.4, (4, 4)), requires_grad=True)
U_fixed = sl.tensor(rng.normal(0, 0.4, (3, 4)))


def int_carry(c, x):
    t, h = c  # an int counter, read by the float chain
    h = sl.tanh(h @ W + x @ U) * t
    return (t + 1, h), h


def closed_over(h, x):
    # W_grad needs a gradient, U_fixed does not; A and B are computed from them alone
    A = W_grad * 2.0
    B = U_fixed @ W_grad
    h = sl.tanh(h @ A + x @ U_fixed + x @ B)
    return h, sl.sum(h * h)


def nested_scan(h, x):
    def step(c, w):
        return sl.tanh(c @ W_grad + w), c

    c, ys = sl.scan(step, h, sl.stack([x @ U, x @ U * 0.5]))
    return c, sl.sum(ys)


def in_while_loop(h, x):
    def body(c):
        return sl.tanh(c[0] @ W_grad), c[1] + 1.0

    h, _ = sl.while_loop(lambda c: c[1] < 3.0, body, (h + x @ U, sl.zeros(())))
    return h, None


def in_checkpoint(h, x):
    f = sl.checkpoint(lambda a, b: sl.tanh(a @ W_grad + b @ U))
    return f(h, x), None


def unread_carry(c, x):
    h, u = c  # u never reaches h or a y: only the final carry can give it a cotangent
    return (sl.tanh(h @ W + x @ U), u * 0.5 + sl.sum(x)), h


def peel(c, x):
    a, b = c  # b is last step's a: an unread final b gets a cotangent one step before the end
    return (sl.tanh(a @ W + x @ U), a), sl.sin(b)


def sqrt_chain(c, x):
    a, b = c  # an infinite partial (sqrt at 0) on the path of a carry the loss may not read
    return (a + x[0], sl.sqrt(b) + a), a * 2.0


def buffer_at_t(c, x):
    buf, h, t = c  # a row per step, at a carried int index
    h = sl.tanh(h @ W + x @ U + buf[t] * 0.5)
    return (buf.at[t + 1].set(h), h, t + 1), None


def buffer_add_grad(c, x):
    buf, h = c
    buf = buf.at[0].add(h * x[0, 0])
    return (buf, sl.tanh(h @ W_grad + buf[1])), sl.sum(buf)


# name -> (f, init, xs); these take scan's own decision of what needs a gradient
# (Tensors that require grad), the golden loops' corpus every float xs and constant.
EXTRA = {
    "int_carry": (int_carry, (np.int64(1), H), X),
    "closed_over": (closed_over, H, X),
    "nested_scan": (nested_scan, H, X),
    "in_while_loop": (in_while_loop, H, X),
    "in_checkpoint": (in_checkpoint, H, X),
    "unread_carry": (unread_carry, (H, 0.0), X),
    "peel": (peel, (H, H), X),
    "sqrt_chain": (sqrt_chain, (np.zeros(3), np.zeros(3)), np.ones((6, 2, 3))),
    "buffer_at_t": (buffer_at_t, (sl.zeros((7, 2, 4)), H, np.int64(0)), X),
    "buffer_add_grad": (buffer_add_grad, (sl.zeros((3, 2, 4)), H), X),
}


def needs(name, xs_t, consts):
    if name in EXTRA:
        return [_needs_grad(x) for x in xs_t], [_needs_grad(k) for k in consts]
    floats = [is_differentiable_dtype(x.dtype) for x in xs_t]
    return floats, [is_differentiable_dtype(k.dtype) for k in consts]


def flags(bits):
    return "".join("T" if b else "." for b in bits) or "-"


def source_text(r):
    if r.index is None:
        return "recomputed once"
    return f"{r.kind.value}[{r.index}]"


def render_lin(lin, names):
    """The parts of one Linearization, as text (forward values by their printed names)."""
    nc = len(lin.ct_carry)
    lines = [
        f"  cotangents in: carries {flags(lin.ct_carry)}, ys {flags(lin.ct_ys)}",
        f"  cotangents out: carries {flags(lin.ct_carry_out)}, "
        f"xs {flags(lin.x_needs)}, consts {flags(lin.k_needs)}",
        f"  zero by construction: carries {flags(lin.zero_carries)}, "
        f"xs {flags(lin.zero_xs)}, consts {flags(lin.zero_ks)}",
        f"  backward carry: {lin.num_bwd_carry}, accumulators {lin.bwd_sum_carries}",
        "  forward saves: " + (", ".join(names.get(v, "?") for v in
                                         lin.aug_body.outvars[nc + lin.num_ys:]) or "nothing"),
        "  residuals:"]
    rows = [(names.get(r.var, "?"), r.policy, source_text(r), type_str(r.shape, r.dtype))
            for r in lin.residuals]
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
    lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
              for row in rows] or ["    none"]
    if lin.bwd_extra_consts:
        lines.append("  backward constants added: " + ", ".join(
            type_str(c.shape, c.dtype) for c in lin.bwd_extra_consts))
    lines.append(format_graph(lin.bwd_body, 2))
    return "\n".join(lines)


def givens(n):
    """Output patterns without the all-given one: every proper subset for up to 3 outputs,
    else each output alone, and every output but one."""
    if n <= 3:
        return [list(p) for p in itertools.product([True, False], repeat=n)
                if any(p) and not all(p)]
    alone = [[i == j for i in range(n)] for j in range(n)]
    return alone + [[i != j for i in range(n)] for j in range(n)]


def render(name):
    f, init, xs = CORPUS[name] if name in CORPUS else EXTRA[name]
    body, nc, consts, xs_t = body_of(f, init, xs)
    x_needs, k_needs = needs(name, xs_t, consts)
    names = {}
    parts = [f"# {name}", format_graph(body, 0, names), "",
             f"xs need a gradient: {flags(x_needs)}; closed-over inputs: {flags(k_needs)}"]
    seen = {}

    def show(label, lin):
        text = render_lin(lin, name_inner_residuals(lin, names))
        parts.extend(["", f"## {label}", f"  same as {seen[text]}" if text in seen else text])
        seen.setdefault(text, label)

    for given in [None] + givens(len(body.outvars)):
        label = "every output has a cotangent" if given is None else f"given {flags(given)}"
        lin = linearize(body, nc, x_needs, k_needs, given)
        show(label, lin)
        full = [True] * len(body.outvars) if given is None else given
        patterns = carry_patterns(body, nc, x_needs, k_needs, full, LIMIT)
        parts.append(f"  carry patterns: {' '.join(flags(p) for p in patterns)}")
        if len(patterns) > 1 or patterns[0] != lin.ct_carry:
            ys_given = full[nc:]
            for p in patterns[:-1]:
                show(f"{label}, one step from carries {flags(p)}",
                     linearize(body, nc, x_needs, k_needs, p + ys_given, one_step=True))
            show(f"{label}, then carries {flags(patterns[-1])}",
                 linearize(body, nc, x_needs, k_needs, patterns[-1] + ys_given,
                           carries=patterns[-1]))
    return "\n".join(parts) + "\n"


def main(argv=None):
    return write_or_check(argv, OUT, sorted(CORPUS) + sorted(EXTRA), render,
                          "gen_linearizations.py")


if __name__ == "__main__":
    sys.exit(main())
