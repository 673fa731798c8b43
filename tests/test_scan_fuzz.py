"""Differential fuzzing of scan's loop compiler against two oracles.

Every body is generated as data (a `Body`: typed carries and xs, a list of ops over a pool of
values, how each carry is updated, which values become ys, what the loss reads) and run three
ways:

  loop      the Python loop that defines scan, on the tape (test_scan_oracle.loop_scan);
  interp    `sl.scan(..., interpret=True)`: the traced body one primitive at a time, forward
            and backward, with no loop compiler;
  compiled  `sl.scan(...)`: the loop compiler (scanlib/scan/loop/) and the executor.

compiled must agree with both oracles in values (integer and bool leaves exactly, floats to a
tolerance set by the lowest float precision in the body), in the first-order gradients of a
random weighted sum of the outputs w.r.t. the float init leaves, the float xs and the
closed-over tensors, and, for float64 bodies, in a Hessian-vector product. loop and interp
must agree with each other too: where only they disagree, tracing or linearization (shared by
interp and compiled) or this file is wrong. A failure names the stage, the pair that
disagrees, the leaf, wrong and right values, and prints the body as Python-like code together
with its `Body(...)` data, ready to paste into REGRESSIONS.

The generator reaches what test_scan_hypothesis.py never builds:
- carries of mixed shapes ((B, D), (), (D,), (D, D)) and dtypes (float64/32/16, int8/32/64,
  bool) in one body; integer and bool carries as `acc + x_int`, `acc + (h > 0.1)`,
  `fold(c * 2 + 1)` (kept in int8 range), lags and copies; scalar carries whose init is a
  Python number;
- reductions and products into carries: `acc + sum(h)`, `acc + (h * x).sum()`, mean,
  logsumexp, vdot, `acc + sum(h, axis=0)`, `max(h, axis=0)`, `acc + x @ W`, `acc + x.T @ h`,
  einsum, `acc + x @ C` with C another carry, `acc + E[i]`; carries set from closed-over
  tensors only;
- one value in two roles: an accumulator term or a new carry that is also a y, a carry
  returned as a y, the incoming carry as another carry, closed-over tensors and Python numbers
  as ys; lags, swaps and one value as two carries;
- `with sl.no_grad()`, `.detach()`, `sl.stop_gradient` and `sl.tensor` inside the body;
  `sl.grad` inside the body at a carry and w.r.t. the closed-over W and v, `sl.vjp` inside;
  scans nested in the body (reading v and K);
- a (D, D) buffer carry updated one row per step (`c.at[i % D].set(v)` and `.add(v)`, the
  loop compiler's in-place updates), read by other ops and returned as a y;
- embedding lookups `E[i]` by integer xs (random rows, or the step-index idiom: i = t or
  T - 1 - t), integer xs in float arithmetic, slices (negative
  steps, rows, rolls, reshapes); more elementwise ops (clip, softplus, abs, pow, min, ...);
- ys the loss never reads whose partials are not finite at the data (`log(x)`, `sqrt(|x|)`
  with zeros in x), and random subsets of outputs read by the loss;
- T in {0, 1, 2, 15, 16, 17, 31, 33} around the executor's MIN_CHUNK, reverse both ways, and
  (B, D) = (32, 64) bodies with T up to 64 whose per-step bytes make the executor split T
  into several chunks.
REGRESSIONS holds a small hand-written body for each of these corners.

Budget: SCANLIB_FUZZ_EXAMPLES examples (default 250) for the main random test, a third of
that for the float64 second-order test and a sixth for the several-chunk test, and
SCANLIB_FUZZ_NUMBA (default a fiftieth) for bodies also run with compiler="numba" (when numba
is installed; that tier must agree with the loop and the NumPy loop, and the report counts
the bodies whose kernels ran rather than fell back), as many with each step's carry computed
by a one-trip while_loop under the loop compiler numba (while_loop's kernel), and half as
many under jit with every scan's compiler numba (jit's fused kernel where it applies), as
many again without the fused kernel and with every run of arithmetic outside the scans as a
region kernel (scan/regions.py, forced at every size), and SCANLIB_FUZZ_AUTO (default a
third of SCANLIB_FUZZ_NUMBA) under compiler="auto" (each run twice, the kernels compiled by
the background process in between); derandomized,
so CI runs the same bodies every time. A longer hunt:

    SCANLIB_FUZZ_EXAMPLES=2000 python -m pytest -n 0 -s tests/test_scan_fuzz.py

(in one process, `-n 0`, so that the count of bodies it prints at the end shows).

A failing random body is reported as found (its code and `Body(...)` are in the message);
SCANLIB_FUZZ_SHRINK=1 lets hypothesis shrink it first, which can take minutes. Each body
starts with scan's graph cache cleared, so the printed Body reproduces the failure alone; it
runs without gradients first and with them after, so the second run reuses cached graphs
traced by the first (that is how a stale nested-scan linearization was found).
The last test prints how many bodies ran (shown without -s too).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import sys
import traceback
import warnings
from unittest import mock

import numpy as np
import pytest
from test_scan_hypothesis import BINARY, UNARY
from test_scan_oracle import as_np, loop_scan

import scanlib as sl
from scanlib.scan import cache as scan_cache
from scanlib.scan.loop import native

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("SCANLIB_FUZZ_EXAMPLES", "250"))
# Under scanlib.jit (every fourth of them to second order).
JIT_EXAMPLES = int(os.environ.get("SCANLIB_FUZZ_JIT", str(max(1, EXAMPLES // 5))))
# compiler="numba": each body compiles its kernels (about a second each), so fewer of them.
NUMBA_EXAMPLES = int(os.environ.get("SCANLIB_FUZZ_NUMBA", str(max(1, EXAMPLES // 50))))
# compiler="auto" (kernels compiled by the background process, then loaded): fewer still.
AUTO_EXAMPLES = int(os.environ.get("SCANLIB_FUZZ_AUTO", str(max(1, NUMBA_EXAMPLES // 3))))
HAVE_NUMBA = native.missing() is None
# Shrinking a failing body can take hypothesis minutes: only on request.
SHRINK = os.environ.get("SCANLIB_FUZZ_SHRINK", "") not in ("", "0")
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    print_blob=False, phases=tuple(Phase) if SHRINK else
                    (Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
BODIES_RUN = collections.Counter()  # kind of test -> bodies checked against both oracles

FLOATS = ("float64", "float32", "float16")
INTS = ("int8", "int32", "int64", "bool")
# Around MIN_CHUNK = 16; hypothesis favours (and shrinks towards) the first, so 17 leads.
T_CHOICES = (17, 2, 16, 1, 15, 31, 33, 0)
BIG_T = (17, 33, 47, 64)
BIG_SHAPE = (32, 64)  # 16 KiB per float64 value: batched work comes in several chunks
VOCAB = 5  # rows of the embedding E that integer xs index
# More elementwise ops than test_scan_hypothesis uses (clip, softplus, abs, pow, div, ...).
MORE_UNARY = {
    "clip": lambda a: sl.clip(a, -0.5, 0.5),
    "softplus": sl.softplus,
    # a logistic regression's terms: sigmoid and softplus of a value and of its negation,
    # which a numba kernel computes from one exp(-|a|) (softplus(a) - softplus(-a) is a)
    "logistic": lambda a: sl.sigmoid(-a) + 0.1 * (sl.softplus(a) - sl.softplus(-a)),
    "abs": sl.abs,
    "rational": lambda a: a / (1.0 + a * a),
    "cube": lambda a: a ** 3,
    "center": lambda a: a - sl.mean(a, axis=-1, keepdims=True),
    "log_softmax": lambda a: a - sl.logsumexp(a, axis=-1, keepdims=True),
    "flat_rev": lambda a: sl.reshape(sl.reshape(a, (-1,))[::-1], a.shape),
}
MORE_BINARY = {
    "min": sl.minimum,
    "pow": lambda a, b: (1.0 + sl.sigmoid(a)) ** sl.tanh(b),  # in (0.5, 2): no overflow
    "div": lambda a, b: a / (1.0 + b * b),
    "stack_sum": lambda a, b: sl.stack([a, b * 0.5], axis=-1).sum(-1),
}
ALL_UNARY, ALL_BINARY = {**UNARY, **MORE_UNARY}, {**BINARY, **MORE_BINARY}
SQUASHING = {"tanh", "sin", "cos", "exp_tanh", "sigmoid", "softmax", "clip", "rational", "pow"}
SHORT = {"float64": "f64", "float32": "f32", "float16": "f16", "int8": "i8", "int32": "i32",
         "int64": "i64", "bool": "bool", "idx": "idx"}


# --- a body as data ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Body:
    """carries, xs: ((dtype, shape kind), ...); shape kinds "S" = (B, D), "()", "D", "DD";
    xs dtype "idx" is an int64 index into E, one per step. ops: pool ops (POOL_OPS);
    updates: one per carry (UPDATES); ys: YS entries or None; loss: which outputs (carries,
    then ys) the loss reads, None for every float one but the log/sqrt ys; weak: carries
    whose init is a Python number, which takes its dtype from f as the loop's steps do."""

    carries: tuple
    xs: tuple = ()
    ops: tuple = ()
    updates: tuple = ()
    ys: tuple = ()
    T: int = 17
    reverse: bool = False
    B: int = 2
    D: int = 3
    loss: tuple | None = None
    weak: tuple = ()  # scalar carries whose init is a Python number (not differentiated)
    seed: int = 0
    name: str = ""

    def shape(self, kind):
        return {"S": (self.B, self.D), "()": (), "D": (self.D,), "DD": (self.D, self.D)}[kind]

    def pool_inputs(self):
        """The pool starts with the float (B, D) carries, then the float xs."""
        return ([("c", k) for k, (dt, sh) in enumerate(self.carries)
                 if dt in FLOATS and sh == "S"]
                + [("x", i) for i, (dt, _) in enumerate(self.xs) if dt in FLOATS])

    def float64_only(self):
        return all(dt not in ("float32", "float16") for dt, _ in self.carries + self.xs)

    def reads(self):
        """Per output (carries, then ys): whether the loss reads it."""
        unread = [y is not None and y[0] in ("log", "sqrt_abs") for y in self.ys]
        if self.loss is not None:
            return tuple(r and not u for r, u in zip(self.loss, [False] * len(self.carries)
                                                      + unread))
        return tuple([True] * len(self.carries) + [not u for u in unread])


def _no_grad_sin(a):
    with sl.no_grad():
        return sl.sin(a)


CUTS = {  # values with no gradient history, as the loop sees them
    "no_grad": (_no_grad_sin, "no_grad: sin({})"),
    "detach": (lambda a: a.detach(), "{}.detach()"),
    "stop_gradient": (sl.stop_gradient, "stop_gradient({})"),
    "tensor": (sl.tensor, "sl.tensor({})"),
}
SLICES = {
    "rev": (lambda a: a[..., ::-1], "{0}[..., ::-1]"),
    "head": (lambda a: a * a[..., :1], "{0} * {0}[..., :1]"),
    "row0": (lambda a: a - a[:1], "{0} - {0}[:1]"),
    "roll0": (lambda a: sl.concatenate([a[1:], a[:1]], axis=0), "concat({0}[1:], {0}[:1])"),
}


def _grad_closed(a, which, e):
    """sl.grad inside the body w.r.t. a closed-over tensor, applied back to a."""
    if which == "W":
        return a @ sl.grad(lambda u: sl.tanh(a @ u).sum())(e.W) * 0.2
    return a * sl.grad(lambda u: sl.sin(a * u).sum())(e.v)


GRAD_CLOSED_TEXT = {"W": "{0} @ grad(lambda u: sum(tanh({0} @ u)))(W) * 0.2",
                    "v": "{0} * grad(lambda u: sum(sin({0} * u)))(v)"}


def _inner_scan(e, a, b, reverse):
    """A scan nested in the body, two steps long: loops in the loop, compiled scans (or the
    interpreter, inherited) in the others. Its body reads the closed-over v and K."""
    c, ys = e.scan(lambda ci, xi: (sl.tanh(ci * e.v + xi), sl.cos(ci) * xi), a.astype("float64"),
                   sl.stack([b, sl.sin(b) * e.closed["K"]]), reverse=reverse)
    return c + ys.sum(0)

# kind -> (compute(env, *args), text(names, *args)); a, b index the pool, k a carry, i an xs.
POOL_OPS = {
    "unary": (lambda e, f, a: ALL_UNARY[f](e.p[a]), lambda n, f, a: f"{f}({n.p[a]})"),
    "binary": (lambda e, f, a, b: ALL_BINARY[f](e.p[a], e.p[b]),
               lambda n, f, a, b: f"{f}({n.p[a]}, {n.p[b]})"),
    "closed": (lambda e, f, a, k: BINARY[f](e.p[a], e.closed[k]),
               lambda n, f, a, k: f"{f}({n.p[a]}, {n.closed[k]})"),
    "matmul": (lambda e, a: e.p[a] @ e.W, lambda n, a: f"{n.p[a]} @ W"),
    "mul_carry": (lambda e, k, a: e.p[a] * e.c[k], lambda n, k, a: f"{n.p[a]} * {n.c[k]}"),
    "matmul_carry": (lambda e, k, a: e.p[a] @ e.c[k], lambda n, k, a: f"{n.p[a]} @ {n.c[k]}"),
    "add_int": (lambda e, k, a: e.p[a] + e.c[k] * 0.25,
                lambda n, k, a: f"{n.p[a]} + {n.c[k]} * 0.25"),
    "where_bool": (lambda e, k, a: sl.where(e.c[k], e.p[a], -e.p[a]),
                   lambda n, k, a: f"where({n.c[k]}, {n.p[a]}, -{n.p[a]})"),
    "embed": (lambda e, i: e.E[e.x[i]], lambda n, i: f"E[{n.x[i]}]"),
    "add_xint": (lambda e, i, a: e.p[a] + e.x[i] * 0.25,
                 lambda n, i, a: f"{n.p[a]} + {n.x[i]} * 0.25"),
    "slice": (lambda e, s, a: SLICES[s][0](e.p[a]), lambda n, s, a: SLICES[s][1].format(n.p[a])),
    "cut": (lambda e, how, a, b: CUTS[how][0](e.p[a]) * e.p[b],
            lambda n, how, a, b: f"{CUTS[how][1].format(n.p[a])} * {n.p[b]}"),
    "grad_at": (lambda e, a, b: sl.grad(lambda z: (sl.sin(z) * e.p[b]).sum())(e.p[a]),
                lambda n, a, b: f"grad(lambda z: sum(sin(z) * {n.p[b]}))({n.p[a]})"),
    "grad_closed": (lambda e, which, a: _grad_closed(e.p[a], which, e),
                    lambda n, which, a: GRAD_CLOSED_TEXT[which].format(n.p[a])),
    "vjp_at": (lambda e, a, b: sl.vjp(lambda z: sl.tanh(z @ e.W), e.p[a])[1](
        e.p[b].astype("float64"))[0],
               lambda n, a, b: f"vjp(lambda z: tanh(z @ W), {n.p[a]})[1]({n.p[b]})[0]"),
    "inner": (lambda e, a, b, rev: _inner_scan(e, e.p[a], e.p[b], rev),
              lambda n, a, b, rev: f"inner_scan({n.p[a]}, {n.p[b]}, reverse={rev})"),
    # a gather at [B, 1] index arrays (fixed_indices, then x[i, j]; a scatter in the VJP)
    "pick": (lambda e, i, a: e.p[a] * sl.take_along_axis(e.p[a], sl.broadcast_to(
        sl.minimum(e.x[i], e.shape("S")[1] - 1), (e.shape("S")[0], 1)), axis=-1),
             lambda n, i, a: f"{n.p[a]} * take_along_axis({n.p[a]}, "
                             f"broadcast_to(minimum({n.x[i]}, D - 1), (B, 1)), axis=-1)"),
    # x[rows, cols] at index arrays broadcast together ([B, 1] and [D], repeated columns: the
    # VJP adds them up), and x[:, i] at a 0-d index
    "regather": (lambda e, i, a: e.p[a] * e.p[a][np.arange(e.shape("S")[0])[:, None], (
        e.x[i] * np.arange(e.shape("S")[1])) % e.shape("S")[1]] + e.p[a][:, e.x[i] % (
            e.shape("S")[1])][:, None],
                 lambda n, i, a: f"{n.p[a]} * {n.p[a]}[arange(B)[:, None], ({n.x[i]} * "
                                 f"arange(D)) % D] + {n.p[a]}[:, {n.x[i]} % D][:, None]"),
}


# Accumulator terms, by the shape kind of the carry they are added to.
TERMS = {
    "val": (lambda e, j: e.p[j], lambda n, j: n.p[j]),
    "xW": (lambda e, j: e.p[j] @ e.W, lambda n, j: f"{n.p[j]} @ W"),
    "carry_mat": (lambda e, k, j: e.p[j] @ e.c[k], lambda n, k, j: f"{n.p[j]} @ {n.c[k]}"),
    "embed": (lambda e, i: e.E[e.x[i]], lambda n, i: f"E[{n.x[i]}]"),
    "sum": (lambda e, j: sl.sum(e.p[j]), lambda n, j: f"sl.sum({n.p[j]})"),
    "mean": (lambda e, j: sl.mean(e.p[j]), lambda n, j: f"sl.mean({n.p[j]})"),
    "lse": (lambda e, j: sl.logsumexp(e.p[j]), lambda n, j: f"sl.logsumexp({n.p[j]})"),
    "vdot": (lambda e, i, j: sl.vdot(e.p[i], e.p[j]),
             lambda n, i, j: f"sl.vdot({n.p[i]}, {n.p[j]})"),
    "max0": (lambda e, j: sl.max(e.p[j], axis=0), lambda n, j: f"sl.max({n.p[j]}, axis=0)"),
    "einsum": (lambda e, i, j: sl.einsum("bi,bj->ij", e.p[i], e.p[j]),
               lambda n, i, j: f"sl.einsum('bi,bj->ij', {n.p[i]}, {n.p[j]})"),
    "dot": (lambda e, i, j: (e.p[i] * e.p[j]).sum(),
            lambda n, i, j: f"({n.p[i]} * {n.p[j]}).sum()"),
    "sum0": (lambda e, j: sl.sum(e.p[j], axis=0), lambda n, j: f"sl.sum({n.p[j]}, axis=0)"),
    "outer": (lambda e, i, j: e.p[i].T @ e.p[j], lambda n, i, j: f"{n.p[i]}.T @ {n.p[j]}"),
    "xint": (lambda e, i: e.x[i], lambda n, i: n.x[i]),
    # Compared with 0.1, not 0: a sum that cancels to 0 (a centred row) has a sign set by
    # rounding, which batched work may change.
    "pos": (lambda e, j: e.p[j] > 0.1, lambda n, j: f"({n.p[j]} > 0.1)"),
    "pos_sum": (lambda e, j: sl.sum(e.p[j]) > 0.1, lambda n, j: f"(sl.sum({n.p[j]}) > 0.1)"),
}
TERMS_FOR = {"S": ("val", "xW", "carry_mat", "embed"),
             "()": ("sum", "sum", "dot", "mean", "lse", "vdot"), "D": ("sum0", "sum0", "max0"),
             "DD": ("outer", "outer", "einsum")}


def _fold(v):
    """c * 2 + 1 for c in [-30, 30] back into [-30, 30]; no branch leaves int8's range."""
    return sl.where(v > 30, v - 61, sl.where(v < -30, v + 61, v))


def _set(e, shape, i, j):
    p = e.p
    return {"S": lambda: sl.tanh(p[i]), "()": lambda: sl.tanh(sl.sum(p[i])),
            "D": lambda: sl.tanh(sl.sum(p[i], axis=0)), "DD": lambda: sl.tanh(p[i].T @ p[j])
            }[shape]()


SET_TEXT = {"S": "tanh({0})", "()": "tanh(sl.sum({0}))", "D": "tanh(sl.sum({0}, axis=0))",
            "DD": "tanh({0}.T @ {1})"}


def _set_const(e, k):
    """A new carry from closed-over tensors only (computed once, before the loop)."""
    v, W, shape = e.v, e.W, e.spec[k][1]
    return {"S": lambda: sl.broadcast_to(sl.tanh(v), e.shape("S")),
            "()": lambda: sl.tanh(sl.sum(v)), "D": lambda: sl.tanh(v), "DD": lambda: sl.tanh(W)
            }[shape]()


CONST_TEXT = {"S": "broadcast_to(tanh(v), (B, D))", "()": "tanh(sl.sum(v))", "D": "tanh(v)",
              "DD": "tanh(W)"}

# kind -> (compute(env, k, *args) -> new carry before the cast, text(names, k, *args)).
UPDATES = {
    "set": (lambda e, k, i, j: _set(e, e.spec[k][1], i, j),
            lambda n, k, i, j: SET_TEXT[n.spec[k][1]].format(n.p[i], n.p[j])),
    "set_raw": (lambda e, k, i: e.p[i], lambda n, k, i: n.p[i]),  # a carry straight from x
    "set_const": (_set_const, lambda n, k: CONST_TEXT[n.spec[k][1]]),
    "acc": (lambda e, k, term, cast: e.c[k] + e.term(k, term, cast),  # cast: term.astype
            lambda n, k, term, cast: f"{n.c[k]} + {n.term(k, term, cast)}"),
    "double": (lambda e, k: ~e.c[k] if e.spec[k][0] == "bool" else _fold(e.c[k] * 2 + 1),
               lambda n, k: f"~{n.c[k]}" if n.spec[k][0] == "bool"
               else f"fold({n.c[k]} * 2 + 1)"),
    "copy": (lambda e, k, k2: e.c[k2], lambda n, k, k2: n.c[k2]),  # lag, swap, identity
    "dup": (lambda e, k, k2: e.new[k2], lambda n, k, k2: n.new[k2]),  # one value, two carries
    # A (D, D) buffer carry updated one row per step, at an integer xs (a step counter, its
    # reverse, or random rows; see Data): the loop compiler writes it in place.
    "row_set": (lambda e, k, i, j: e.c[k].at[e.x[i] % e.shape("DD")[0]].set(
        sl.tanh(sl.sum(e.p[j], axis=0))),
        lambda n, k, i, j: f"{n.c[k]}.at[{n.x[i]} % D].set(tanh(sl.sum({n.p[j]}, axis=0)))"),
    "row_add": (lambda e, k, i, j: e.c[k].at[e.x[i] % e.shape("DD")[0]].add(
        sl.tanh(sl.sum(e.p[j], axis=0))),
        lambda n, k, i, j: f"{n.c[k]}.at[{n.x[i]} % D].add(tanh(sl.sum({n.p[j]}, axis=0)))"),
}

YS = {
    "pool": (lambda e, j: e.p[j], lambda n, j: n.p[j]),
    "carry_in": (lambda e, k: e.c[k], lambda n, k: n.c[k]),
    "carry_out": (lambda e, k: e.new[k], lambda n, k: n.new[k]),
    "term": (lambda e, k: e.terms[k], lambda n, k: n.terms[k]),
    "x": (lambda e, i: e.x[i], lambda n, i: n.x[i]),
    "log": (lambda e, i: sl.log(e.x[i]), lambda n, i: f"sl.log({n.x[i]})"),
    "sqrt_abs": (lambda e, i: sl.sqrt(sl.abs(e.x[i])), lambda n, i: f"sl.sqrt(abs({n.x[i]}))"),
    "const": (lambda e, which: e.v if which == "v" else sl.tanh(e.v) @ e.W,
              lambda n, which: "v" if which == "v" else "tanh(v) @ W"),
    "literal": (lambda e: 1.5, lambda n: "1.5"),  # a Python number
}


class Env:
    """What a body's ops read: carries c, xs x, the pool p, new carries, accumulator terms and
    the closed-over tensors. `Names` is the same with names in place of values, to print."""

    def __init__(self, body, c, x, W, v, E, K, scan=None):
        self.spec, self.c, self.x, self.W, self.v, self.E = body.carries, c, x, W, v, E
        self.shape, self.scan = body.shape, scan  # scan: what nested scans run with
        self.closed = {"v": v, "K": K, "scalar": 0.7}
        self.p = [c[i] if w == "c" else x[i] for w, i in body.pool_inputs()]
        self.new, self.terms = [None] * len(c), {}

    def term(self, k, spec, cast):
        t = self.terms[k] = TERMS[spec[0]][0](self, *spec[1:])
        return t.astype(self.spec[k][0]) if cast else t

    def cast(self, k, value):
        return value.astype(self.spec[k][0])


class Names(Env):
    def __init__(self, body):
        c = [f"c{k}" for k in range(len(body.carries))]
        x = [f"x{i}" for i in range(len(body.xs))]
        super().__init__(body, c, x, "W", "v", "E", "K")
        self.closed["scalar"] = "0.7"
        self.new = [f"n{k}" for k in range(len(c))]
        self.lines = []

    def term(self, k, spec, cast):
        self.terms[k] = f"t{k}"
        self.lines.append(f"t{k} = {TERMS[spec[0]][1](self, *spec[1:])}")
        return f"t{k}.astype({SHORT[self.spec[k][0]]})" if cast else f"t{k}"

    def cast(self, k, text):
        return text  # casts are implied by the carry's dtype


def run_body(body, e):
    """The body's ops on env e (values or Names); returns (new carries, ys)."""
    for kind, *args in body.ops:
        e.p.append(POOL_OPS[kind][0 if type(e) is Env else 1](e, *args))
        if type(e) is Names:
            e.lines.append(f"p{len(e.p) - 1} = {e.p[-1]}")
            e.p[-1] = f"p{len(e.p) - 1}"
    which = 0 if type(e) is Env else 1
    for k, (kind, *args) in enumerate(body.updates):
        value = e.cast(k, UPDATES[kind][which](e, k, *args))
        if which:
            e.lines.append(f"n{k} = {value}")
        else:
            e.new[k] = value
    ys = [None if y is None else YS[y[0]][which](e, *y[1:]) for y in body.ys]
    return tuple(e.new), (ys or None)


def make_f(body, params, K, inner_scan):
    def f(carry, x):
        env = Env(body, tuple(carry), tuple(x or ()), params["W"], params["v"],
                  params.get("E"), K, inner_scan)
        return run_body(body, env)

    return f


def render(body):
    """The body as Python-like code, for failure messages."""
    n = Names(body)
    new, ys = run_body(body, n)
    sig = ", ".join(f"c{k}: {SHORT[dt]}{list(body.shape(sh))}"
                    for k, (dt, sh) in enumerate(body.carries))
    xsig = ", ".join(f"x{i}: {SHORT[dt]}{list(body.shape(sh))}" for i, (dt, sh) in
                     enumerate(body.xs))
    reads = [name for name, r in zip([f"carry[{k}]" for k in range(len(body.carries))]
                                     + [f"y[{j}]" for j in range(len(body.ys))], body.reads())
             if r]
    head = f"body {body.name} T={body.T} reverse={body.reverse} (B, D)=({body.B}, {body.D})"
    out = [head, f"  def f(carry=({sig}), x=({xsig})):  # each n_k is cast to c_k's dtype"]
    out += [f"      {line}" for line in n.lines]
    out.append(f"      return ({', '.join(new)}), "
               f"{'None' if ys is None else '[' + ', '.join(map(str, ys)) + ']'}")
    out.append(f"  loss reads: {', '.join(reads) or 'nothing'}")
    return "\n".join(out)


# --- data, runs and comparisons --------------------------------------------------------------
class Data:
    """The arrays of one body: float init and xs (differentiated), integer ones (fixed),
    closed-over params W, v (and E) and a NumPy constant K."""

    def __init__(self, body):
        rng = np.random.default_rng(body.seed)
        self.init = [sl.tensor(self._init(rng, dt, body.shape(sh))) for dt, sh in body.carries]
        for k in body.weak:  # a Python float, int or bool
            self.init[k] = self.init[k].numpy().item()
        zeros = {y[1] for y in body.ys if y is not None and y[0] in ("log", "sqrt_abs")}
        self.xs = [sl.tensor(self._xs(rng, dt, (body.T,) + body.shape(sh), i in zeros))
                   for i, (dt, sh) in enumerate(body.xs)]
        D = body.D
        self.params = {"W": sl.tensor(0.8 / np.sqrt(D) * rng.standard_normal((D, D))),
                       "v": sl.tensor(rng.standard_normal(D))}
        if any(dt == "idx" for dt, _ in body.xs):
            E = rng.standard_normal((VOCAB, body.B, D))
            extra = np.random.default_rng(body.seed + 1).standard_normal(
                (max(body.T - VOCAB, 0), body.B, D))  # rows for a step counter: E[t]
            self.params["E"] = sl.tensor(np.concatenate([E, extra]))
        self.K = rng.standard_normal(D)
        self.fk = [k for k, (dt, _) in enumerate(body.carries)
                   if dt in FLOATS and k not in body.weak]
        self.fi = [i for i, (dt, _) in enumerate(body.xs) if dt in FLOATS]

    @staticmethod
    def _init(rng, dt, shape):
        if dt in FLOATS:
            return (0.5 * rng.standard_normal(shape)).astype(dt)
        if dt == "bool":
            return rng.random(shape) < 0.5
        return rng.integers(-5, 6, size=shape).astype(dt)

    @staticmethod
    def _xs(rng, dt, shape, with_zeros):
        if dt in FLOATS:
            a = rng.standard_normal(shape)
            if with_zeros:
                a[rng.random(shape) < 0.3] = 0.0
            return a.astype(dt)
        if dt == "idx":  # random rows (repeats), or the step-index idiom: t, or T - 1 - t
            rows = rng.integers(0, VOCAB, size=shape[:1])
            how = int(np.random.default_rng(int(rows.sum()) + len(rows)).integers(3))
            return [rows, np.arange(len(rows)), np.arange(len(rows))[::-1].copy()][how]
        if dt == "bool":
            return rng.random(shape) < 0.5
        return rng.integers(-1, 2, size=shape).astype(dt)

    def args(self):
        """(float init, float xs, params): what the gradients are taken with respect to."""
        return (tuple(self.init[k] for k in self.fk), tuple(self.xs[i] for i in self.fi),
                self.params)

    def merge(self, finit, fxs):
        init, xs = list(self.init), list(self.xs)
        for k, c in zip(self.fk, finit):
            init[k] = c
        for i, x in zip(self.fi, fxs):
            xs[i] = x
        return tuple(init), tuple(xs)


def interp_scan(*args, **kw):
    return sl.scan(*args, interpret=True, **kw)


def numba_scan(*args, **kw):
    return sl.scan(*args, compiler="numba", **kw)


def jit_scan(*args, **kw):
    return sl.scan(*args, **kw)


jit_scan.jit = True  # Check runs the whole forward, gradient or HVP under scanlib.jit


def jit_numba_scan(*args, **kw):
    return sl.scan(*args, **kw)


# Under scanlib.jit with every scan's compiler "numba" (nested ones too): jit's fused kernel
# where it applies (scan/fused.py), else the per-scan numba tier.
jit_numba_scan.jit, jit_numba_scan.compiler = True, "numba"


def jit_regions_scan(*args, **kw):
    return sl.scan(*args, **kw)


# Under scanlib.jit with every scan's compiler "numba", never one fused kernel: every stretch of
# arithmetic outside the scans that may join a run (scan/regions.py), at any size, runs as its
# kernel from the first call, and the kernels store shared work at any size (_forcing_regions).
jit_regions_scan.jit, jit_regions_scan.compiler, jit_regions_scan.regions = True, "numba", True


def while_numba_scan(f, init, xs=None, length=None, reverse=False):
    """scan with each step's new carry computed by a while_loop of one trip inside the body
    (its ys by f outside it): under the loop compiler numba that while_loop runs as its
    numba kernel (scan/loop/native_while.py) where the body's operations have rules, and
    its gradient goes through while_loop's VJP."""
    def step(c, x):
        new = sl.while_loop(lambda s: s[0] < 1, lambda s: (s[0] + 1, f(s[1], x)[0]),
                            (sl.tensor(0), c))[1]
        return new, f(c, x)[1]
    return sl.scan(step, init, xs, length=length, reverse=reverse)


while_numba_scan.compiler = "numba"


def auto_scan(*args, **kw):
    return sl.scan(*args, compiler="auto", **kw)


# compiler="auto": run_all runs the whole computation once (the NumPy loop, its kernels sent to
# the background process), waits for that process, and runs it again (the kernels run).
auto_scan.compiler, auto_scan.settle = "auto", True


def wait_for_background(timeout=300.0):
    """Until the background compile process has answered every kernel sent to it."""
    from scanlib.scan.loop import native_background

    if not native_background.wait_idle(timeout):
        raise AssertionError("the background compile process did not answer in time")


def outer(scan_fn):
    """scanlib.jit for the jit tier, else nothing: what Check wraps each computation in."""
    if getattr(scan_fn, "regions", False):
        return lambda f: _forcing_regions(sl.jit(f))
    return sl.jit if getattr(scan_fn, "jit", False) else (lambda f: f)


def _forcing_regions(jitted):
    """jitted, traced and called with regions at every size, unmeasured, no fused kernel, and
    work read twice stored by its first reader's nest at every size (native_nests.STORED_MIN),
    in the scans' kernels too."""
    regions = sys.modules["scanlib.scan.regions"]

    def call(*args):
        with mock.patch.object(regions, "SMALL_ELEMENTS", -1), \
                mock.patch.object(sys.modules["scanlib.scan.loop.native_nests"], "STORED_MIN",
                                  0), \
                mock.patch.object(regions, "MEASURED", False), \
                mock.patch.object(regions, "_kernel_is_faster", lambda *a: True), \
                mock.patch.object(sys.modules["scanlib.scan.fused"], "ENABLED", False):
            return jitted(*args)
    return call


SCANS = {"loop": loop_scan, "interp": interp_scan, "compiled": sl.scan, "numba": numba_scan,
         "jit": jit_scan, "jit-numba": jit_numba_scan, "jit-regions": jit_regions_scan,
         "while-numba": while_numba_scan,
         "auto": auto_scan}
PAIRS = (("compiled", "loop"), ("compiled", "interp"), ("interp", "loop"))
EXTRA_PAIRS = {"numba": (("numba", "loop"), ("numba", "compiled")),
               "jit": (("jit", "loop"), ("jit", "compiled")),
               "jit-numba": (("jit-numba", "loop"), ("jit-numba", "compiled")),
               "jit-regions": (("jit-regions", "loop"), ("jit-regions", "compiled")),
               "while-numba": (("while-numba", "loop"), ("while-numba", "compiled")),
               "auto": (("auto", "loop"), ("auto", "compiled"))}
TIERS = ("interp", "compiled")


def run_scan(scan_fn, body, data, finit, fxs, params):
    init, xs = data.merge(finit, fxs)
    # Nested scans: loops in the loop; in interp they inherit the reference interpreter.
    f = make_f(body, params, data.K, loop_scan if scan_fn is loop_scan else sl.scan)
    if xs:
        return scan_fn(f, init, xs, reverse=body.reverse)
    return scan_fn(f, init, length=body.T, reverse=body.reverse)


def named_outputs(out):
    carry, ys = out
    items = [(f"carry[{k}]", c) for k, c in enumerate(carry)]
    return items + [(f"y[{j}]", y) for j, y in enumerate(ys or ()) if y is not None]


def named_grads(body, data, g):
    ginit, gxs, gparams = g
    return ([(f"d/d init[c{k}]", v) for k, v in zip(data.fk, ginit)]
            + [(f"d/d xs[x{i}]", v) for i, v in zip(data.fi, gxs)]
            + [(f"d/d {name}", v) for name, v in sorted(gparams.items())])


class Raised:
    """An exception a scan raised, kept to report it with the others."""

    def __init__(self, e):
        where = traceback.extract_tb(e.__traceback__)[-1]
        self.text = (f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
                     f"({os.path.relpath(where.filename)}:{where.lineno})")


def quiet(fn):
    @functools.wraps(fn)
    def wrapped(*a, **kw):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", sl.NumbaFallbackWarning)
            return fn(*a, **kw)

    return wrapped


def tolerance(body):
    if any(dt == "float16" for dt, _ in body.carries):
        return 2e-2
    if any(dt == "float32" for dt, _ in body.carries + body.xs):
        return 2e-5
    return 1e-9


def _short(a):
    flat = np.asarray(a).ravel()
    text = np.array2string(flat[:6], precision=6, separator=", ")
    return text[:-1] + ", ...]" if flat.size > 6 else text


def leaf_mismatch(name, got, want, tol):
    """None if got matches want: shape, dtype, and value (exact for integers and bools; for
    floats to tol relative to each element and to the leaf's largest magnitude, since sums
    of large terms in another order move the small elements by ulps of the large ones)."""
    g, w = as_np(got), as_np(want)
    if g.shape != w.shape:
        return f"{name}: shape {g.shape} != {w.shape}"
    # A Python number (the loop's carry for a Python-number init when T == 0) has no dtype.
    typed = isinstance(got, sl.Tensor) and isinstance(want, sl.Tensor)
    if typed and g.dtype != w.dtype:
        return f"{name}: dtype {g.dtype} != {w.dtype}"
    if not typed:
        g, w = g.astype(np.float64), w.astype(np.float64)
    if g.dtype.kind in "fc":
        tol = max(tol, {2: 2e-2, 4: 2e-5}.get(g.dtype.itemsize, 0.0))
        finite = np.abs(w[np.isfinite(w)])
        atol = tol * max(1.0, float(finite.max()) if finite.size else 1.0)
        with np.errstate(all="ignore"):
            bad = ~np.isclose(g, w, rtol=tol, atol=atol, equal_nan=True)
    else:
        bad = g != w
    if not np.any(bad):
        return None
    first = tuple(np.argwhere(bad)[0])
    return (f"{name}: {int(np.sum(bad))}/{g.size} differ; got {_short(g)}, want {_short(w)}"
            + ("" if g.size <= 6 else f" (first at {[int(i) for i in first]}: {g[first]} vs "
                                      f"{w[first]})"))


def mismatches(got, want, tol, only_want_names=False):
    """Messages for each leaf of named lists that differ (missing and extra names too)."""
    g, w = dict(got), dict(want)
    out = [f"{n}: missing" for n in w if n not in g]
    if not only_want_names:
        out += [f"{n}: unexpected" for n in g if n not in w]
    out += [m for n in w if n in g for m in [leaf_mismatch(n, g[n], w[n], tol)] if m]
    return out


def disagreements(stage, results, body):
    """results: scan name -> named leaves or Raised. Lines naming what disagrees."""
    lines = [f"[{stage}] {name} raised {r.text}" for name, r in results.items()
             if isinstance(r, Raised)]
    pairs = PAIRS + sum((p for tier, p in EXTRA_PAIRS.items() if tier in results), ())
    for a, b in pairs:
        if isinstance(results[a], Raised) or isinstance(results[b], Raised):
            continue
        # For T == 0 the loop has no ys (it never calls f); compare what it has.
        for m in mismatches(results[a], results[b], tolerance(body),
                            only_want_names=(b == "loop" and body.T == 0))[:4]:
            lines.append(f"[{stage}] {a} vs {b}: {m}")
    return lines


class Overflow(Exception):
    """The loop overflowed: inf and nan inside the body make any two answers arbitrary."""


def run_all(fn, tiers=TIERS):
    """fn(scan) for the loop and each of `tiers`; the loop (the definition) must not raise."""
    try:
        with np.errstate(over="raise"):
            results = {"loop": fn(loop_scan)}
    except FloatingPointError as e:
        raise Overflow(str(e)) from e
    for name in tiers:
        scan_fn = SCANS[name]
        old = sl.set_loop_compiler(getattr(scan_fn, "compiler", None))
        try:
            if getattr(scan_fn, "settle", False):
                fn(scan_fn)
                wait_for_background()
            results[name] = fn(scan_fn)
        except Exception as e:  # noqa: BLE001 - a scan that raises is a disagreement too
            results[name] = Raised(e)
        finally:
            sl.set_loop_compiler(old)
    return results


class Check:
    """One body run by the three scans: forward values, gradients and (optionally) an HVP."""

    def __init__(self, body):
        self.body, self.data = body, Data(body)
        self.args = self.data.args()

    def outputs(self, scan_fn, *args):
        return run_scan(scan_fn, self.body, self.data, *args)

    def forward(self, scan_fn):
        return named_outputs(outer(scan_fn)(lambda *a: self.outputs(scan_fn, *a))(*self.args))

    def make_loss(self, loop_outputs):
        rng = np.random.default_rng(self.body.seed + 1)
        reads = dict(zip([f"carry[{k}]" for k in range(len(self.body.carries))]
                         + [f"y[{j}]" for j in range(len(self.body.ys))], self.body.reads()))
        self.cts = {n: sl.tensor(rng.standard_normal(np.shape(v))) for n, v in loop_outputs
                    if reads[n] and as_np(v).dtype.kind == "f"}

    def loss(self, scan_fn):
        def f(*args):
            total = 0.0
            for name, v in named_outputs(self.outputs(scan_fn, *args)):
                if name in self.cts:
                    total = total + (sl.as_tensor(v).astype("float64") * self.cts[name]).sum()
            return total

        return f

    def grads(self, scan_fn):
        value_and_grad = sl.value_and_grad(self.loss(scan_fn), argnums=(0, 1, 2))
        value, g = outer(scan_fn)(value_and_grad)(*self.args)
        return [("loss", value)] + named_grads(self.body, self.data, g)

    def hvp(self, scan_fn):
        grad = sl.grad(self.loss(scan_fn), argnums=(0, 1, 2))
        rng = np.random.default_rng(self.body.seed + 2)
        tangents = [rng.standard_normal(as_np(a).shape) for a in _leaves(self.args)]

        def directional(*args):
            return sum(((g * u).sum() for g, u in zip(_leaves(grad(*args)), tangents)), 0.0)

        return named_grads(self.body, self.data,
                           outer(scan_fn)(sl.grad(directional, argnums=(0, 1, 2)))(*self.args))


def _leaves(args):
    finit, fxs, params = args
    return list(finit) + list(fxs) + [params[k] for k in sorted(params)]


@quiet
def check_body(body, kind, second_order=False, tiers=TIERS):
    """Compiled scan vs the loop and the interpreter (and the numba loop, when in `tiers`);
    raises one AssertionError naming every disagreement and the body."""
    BODIES_RUN[kind] += 1
    kernels, fused_calls = native.STATS["kernel calls"], native.STATS["fused calls"]
    region_calls = native.STATS["region calls"]
    while_kernels = native.STATS["while_loop kernel calls"]
    # Bodies share scan's graph cache; start empty so that a failure reproduces from the
    # printed Body alone (and hypothesis' shrinking is not fooled by earlier examples).
    scan_cache.clear()
    c = Check(body)
    try:
        results = run_all(c.forward, tiers)
        c.make_loss(results["loop"])
        stages = [("forward", results), ("grad", run_all(c.grads, tiers))]
        if second_order:
            stages.append(("hvp", run_all(c.hvp, tiers)))
    except Overflow:
        raise
    except Exception as e:  # the loop failed: a bug in this file or in the tape
        raise AssertionError(f"the loop oracle raised {Raised(e).text} on\n{render(body)}\n"
                             f"{body!r}") from e
    if native.STATS["kernel calls"] > kernels:
        BODIES_RUN[f"{kind}, of them ran numba kernels"] += 1
    if native.STATS["while_loop kernel calls"] > while_kernels:
        BODIES_RUN[f"{kind}, of them ran while_loop kernels"] += 1
    if native.STATS["fused calls"] > fused_calls:
        BODIES_RUN[f"{kind}, of them ran jit's fused kernel"] += 1
    if native.STATS["region calls"] > region_calls:
        BODIES_RUN[f"{kind}, of them ran region kernels"] += 1
    lines = [m for stage, res in stages for m in disagreements(stage, res, body)]
    if lines:
        raise AssertionError(f"scan fuzz: {suspect(lines)}\n  " + "\n  ".join(lines)
                             + f"\n{render(body)}\n{body!r}")


def suspect(lines):
    """Which part the disagreements point at."""
    text = "\n".join(lines)
    loop_only = "interp vs loop" in text and "compiled vs interp" not in text \
        and "raised" not in text
    if loop_only:
        return ("interp and compiled agree, the loop differs: suspect what they share "
                "(tracing, linearize, the graph cache) or the loop's own tape autodiff")
    if "interp vs loop" not in text and "interp raised" not in text:
        return "the loop compiler disagrees with both oracles, which agree"
    return "the compiled scan and the oracles disagree (see each pair)"


# --- the generator ---------------------------------------------------------------------------
class Draft:
    """A body being drawn: tracks the pool and which values are bounded (safe to accumulate or
    to feed back into a carry without growing step over step)."""

    def __init__(self, draw, big, float64_only):
        self.draw, self.float64_only, self.big = draw, float64_only, big
        self.B, self.D = BIG_SHAPE if big else (draw(st.integers(1, 3)), draw(st.integers(1, 4)))
        self.carries, self.xs, self.ops = [], [], []

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def index(self, n):
        return self.draw(st.integers(0, n - 1))

    def add_xs(self, dt, shape):
        self.xs.append((dt, shape))
        return len(self.xs) - 1

    def start_pool(self, kinds):
        """Pool inputs; a float carry is bounded when it is set through tanh."""
        self.pool, self.bounded = [], []
        for k, (dt, sh) in enumerate(self.carries):
            if dt in FLOATS and sh == "S":
                self.pool.append(("c", k))
                self.bounded.append(kinds[k] == "set")
        for i, (dt, _) in enumerate(self.xs):
            if dt in FLOATS:
                self.pool.append(("x", i))
                self.bounded.append(True)
        self.n_inputs = len(self.pool)

    def push(self, op, bounded):
        self.ops.append(op)
        self.pool.append(op)
        self.bounded.append(bounded)
        return len(self.pool) - 1

    def bounded_value(self, j):
        """j if bounded, else a new tanh(pool[j])."""
        return j if self.bounded[j] else self.push(("unary", "tanh", j), True)


def _carry_types(d):
    dtypes = ("float64",) * 3 + ("float32", "float16") + INTS
    if d.float64_only:
        dtypes = ("float64",) * 3 + INTS
    dt = d.pick(dtypes)
    shape = d.pick(("S", "S", "()", "D", "DD") if dt in FLOATS else ("S", "()"))
    return dt, shape


def _update_kind(d, k):
    dt, sh = d.carries[k]
    same = [k2 for k2, (dt2, sh2) in enumerate(d.carries)
            if sh2 == sh and (dt2 in FLOATS) == (dt in FLOATS)]
    earlier = [k2 for k2 in same if k2 < k and d.carries[k2][0] == dt]
    kinds = ["set", "set", "acc", "acc", "copy", "set_const"] if dt in FLOATS else \
        ["acc_x", "acc_pos", "double", "copy"]
    if dt in FLOATS and sh == "DD":
        kinds += ["row_set", "row_add"]
    if earlier:
        kinds.append("dup")
    kind = d.pick(kinds)
    arg = d.pick(same) if kind == "copy" else d.pick(earlier) if kind == "dup" else None
    return kind, arg


def _draw_op(d, kinds):
    n, bounded = len(d.pool), d.bounded
    kind = d.pick(sorted(set(POOL_OPS) - {"mul_carry", "matmul_carry", "add_int", "where_bool"})
                  + ["read_carry"] * 2 + ["unary", "binary"])
    a, b = d.index(n), d.index(n)
    if kind == "unary":
        f = d.pick(sorted(ALL_UNARY))
        return d.push((kind, f, a), f in SQUASHING or bounded[a])
    if kind == "binary":
        f = d.pick(sorted(ALL_BINARY))
        ok = f in SQUASHING or {"div": bounded[a]}.get(f, bounded[a] and bounded[b])
        return d.push((kind, f, a, b), ok)
    if kind == "closed":
        return d.push((kind, d.pick(sorted(BINARY)), a, d.pick(("v", "K", "scalar"))),
                      bounded[a])
    if kind == "matmul":
        return d.push((kind, a), bounded[a])
    if kind == "embed":
        return d.push((kind, d.add_xs("idx", "()")), True)
    if kind == "slice":
        return d.push((kind, d.pick(sorted(SLICES)), a), bounded[a])
    if kind == "cut":
        return d.push((kind, d.pick(sorted(CUTS)), a, b), bounded[a] and bounded[b])
    if kind == "grad_at":  # mostly at a carry
        carries = [j for j, src in enumerate(d.pool[:d.n_inputs]) if src[0] == "c"]
        a = d.pick(carries) if carries and d.draw(st.booleans()) else a
        return d.push((kind, a, b), bounded[b])
    if kind == "grad_closed":
        return d.push((kind, d.pick(("W", "v")), a), bounded[a])
    if kind == "vjp_at":
        return d.push((kind, a, b), bounded[b])
    if kind == "inner":
        return d.push((kind, a, b, d.draw(st.booleans())), bounded[b])
    if kind in ("pick", "regather"):
        return d.push((kind, d.add_xs("idx", "()"), a), bounded[a])
    if kind == "add_xint":
        ints = [i for i, (dt, _) in enumerate(d.xs) if dt in INTS]
        i = d.pick(ints) if ints and d.draw(st.booleans()) else d.add_xs(d.pick(INTS),
                                                                         d.pick(("S", "()")))
        return d.push((kind, i, a), bounded[a])
    return _draw_read(d, kinds, a)


def _draw_read(d, kinds, a):
    """A pool value that reads a carry that is not itself in the pool."""
    others = [k for k, (dt, sh) in enumerate(d.carries) if not (dt in FLOATS and sh == "S")]
    if not others:
        return d.push(("unary", "tanh", a), True)
    k = d.pick(others)
    dt, sh = d.carries[k]
    if dt == "bool":
        return d.push(("where_bool", k, a), d.bounded[a])
    if dt in INTS:
        return d.push(("add_int", k, a), d.bounded[a])
    carry_ok = kinds[k] == "set"
    return d.push(("matmul_carry" if sh == "DD" else "mul_carry", k, a),
                  d.bounded[a] and carry_ok)


def _draw_term(d, k):
    """An accumulator term for carry k, from bounded values."""
    dt, sh = d.carries[k]
    if dt in INTS:
        return None
    # Sums over a (32, 64) value for 64 steps leave float16's range: means instead.
    kind = d.pick(("mean", "lse") if dt == "float16" and sh == "()" and d.big else
                  TERMS_FOR[sh])
    n = len(d.pool)
    if kind == "carry_mat":
        mats = [k2 for k2, (dt2, sh2) in enumerate(d.carries) if sh2 == "DD" and dt2 in FLOATS]
        if not mats:
            kind = "xW"
        else:
            return (kind, d.pick(mats), d.bounded_value(d.index(n)))
    if kind == "embed":
        return (kind, d.add_xs("idx", "()"))
    if kind in ("dot", "outer", "vdot", "einsum"):
        return (kind, d.bounded_value(d.index(n)), d.bounded_value(d.index(n)))
    return (kind, d.bounded_value(d.index(n)))


# The integer xs an integer carry can add without changing its dtype.
XINT_FOR = {"bool": ("bool",), "int8": ("int8", "bool"), "int32": ("int8", "int32", "bool"),
            "int64": ("int8", "int32", "int64", "bool")}


def _draw_int_update(d, k, kind):
    dt, sh = d.carries[k]
    cast = d.draw(st.booleans())
    if kind == "acc_x":
        return ("acc", ("xint", d.add_xs(d.pick(XINT_FOR[dt]), sh)), cast)
    if not d.pool:
        return ("double",)
    j = d.index(len(d.pool))
    return ("acc", ("pos" if sh == "S" else "pos_sum", j), cast)


def _draw_update(d, k, kind, arg):
    sh = d.carries[k][1]
    if kind in ("copy", "dup"):
        return (kind, arg)
    if kind == "set_const":
        return ("set_const",)
    if kind == "double":
        return ("double",)
    if kind in ("acc_x", "acc_pos"):
        return _draw_int_update(d, k, kind)
    if kind in ("row_set", "row_add"):
        return (kind, d.add_xs("idx", "()"), d.index(len(d.pool)))
    if kind == "acc":
        return ("acc", _draw_term(d, k), d.draw(st.booleans()))
    xs_in_pool = [j for j, src in enumerate(d.pool[:d.n_inputs]) if src[0] == "x"]
    if sh == "S" and xs_in_pool and d.draw(st.integers(0, 4)) == 0:
        return ("set_raw", d.pick(xs_in_pool))  # a carry straight from x
    n = len(d.pool)
    return ("set", d.index(n), d.index(n))


def _draw_ys(d, updates):
    n = len(d.carries)
    options = ["pool", "pool", "carry_in", "carry_out", "x", "log", "sqrt_abs", "none", "const",
               "literal"]
    if any(u[0] == "acc" for u in updates):
        options += ["term", "term"]
    ys = []
    for _ in range(d.draw(st.integers(0, 3))):
        kind = d.pick(options)
        float_xs = [i for i, (dt, _) in enumerate(d.xs) if dt in FLOATS]
        if kind == "none":
            ys.append(None)
        elif kind == "const":
            ys.append(("const", d.pick(("v", "vW"))))
        elif kind == "literal":
            ys.append(("literal",))
        elif kind == "pool":
            ys.append(("pool", d.index(len(d.pool))))
        elif kind in ("carry_in", "carry_out"):
            ys.append((kind, d.index(n)))
        elif kind == "term":
            ys.append(("term", d.pick([k for k, u in enumerate(updates) if u[0] == "acc"])))
        elif kind == "x" and d.xs:
            ys.append(("x", d.index(len(d.xs))))
        elif kind in ("log", "sqrt_abs") and float_xs:  # xs added now would shift the pool
            ys.append((kind, d.pick(float_xs)))
    return ys


@st.composite
def bodies(draw, big=False, float64_only=False):
    """A random Body (see the module docstring for what it reaches)."""
    d = Draft(draw, big, float64_only)
    d.carries = [_carry_types(d) for _ in range(draw(st.integers(1, 4)))]
    for _ in range(draw(st.integers(0, 2))):
        d.add_xs("float64" if float64_only else d.pick(("float64", "float64", "float32")), "S")
    if not any(dt in FLOATS and sh == "S" for dt, sh in d.carries + d.xs):
        d.add_xs("float64", "S")  # the pool needs a value to start from
    kinds = [_update_kind(d, k) for k in range(len(d.carries))]
    d.start_pool([kind for kind, _ in kinds])
    for _ in range(draw(st.integers(0, 6))):
        _draw_op(d, [kind for kind, _ in kinds])
    updates = [_draw_update(d, k, kind, arg) for k, (kind, arg) in enumerate(kinds)]
    ys = _draw_ys(d, updates)
    n_out = len(d.carries) + len(ys)
    loss = tuple(draw(st.lists(st.booleans(), min_size=n_out, max_size=n_out))) \
        if draw(st.booleans()) else None
    return Body(carries=tuple(d.carries), xs=tuple(d.xs), ops=tuple(d.ops),
                updates=tuple(updates), ys=tuple(ys), T=draw(st.sampled_from(
                    BIG_T if big else T_CHOICES)), reverse=draw(st.booleans()), B=d.B, D=d.D,
                loss=loss, weak=_draw_weak(d, updates, ys), seed=draw(st.integers(0, 2**16)))


def _draw_weak(d, updates, ys):
    """Scalar carries to start from a Python number: ones that only their own update reads
    raw (a copy or a y of the number itself would be the number, not a tensor, in the loop)."""
    read_raw = {u[1] for u in updates if u[0] == "copy"}
    read_raw |= {y[1] for y in ys if y is not None and y[0] == "carry_in"}
    ok = [k for k, ((dt, sh), u) in enumerate(zip(d.carries, updates))
          if sh == "()" and k not in read_raw and not (dt == "bool" and u[0] == "double")
          and u[0] not in ("copy", "dup")]
    return tuple(k for k in ok if d.draw(st.integers(0, 3)) == 0)


# --- hand-written regression bodies, one or more per corner ----------------------------------
F64, F32, F16 = "float64", "float32", "float16"
S, SCALAR, VEC, MAT = "S", "()", "D", "DD"


def case(name, carries, updates, xs=(), ops=(), ys=(), **kw):
    """A Body by hand. Pool indices: float (B, D) carries first, then float xs, then ops."""
    body = Body(carries=tuple(carries), xs=tuple(xs), ops=tuple(ops), updates=tuple(updates),
                ys=tuple(ys), name=name, **kw)
    return pytest.param(body, id=name)


# h = tanh(c1 @ W + x0) for bodies whose pool is [c1, x0] (indices 0, 1): h is pool[4].
H_OPS = (("matmul", 0), ("binary", "add", 2, 1), ("unary", "tanh", 3))
CUT_BODY = {"carries": [(F64, S)], "xs": [(F64, S)], "ys": [("pool", 3)]}  # pool: c0, x0


def cut_case(how):
    # p2 = cut(c0) * x0; p3 = p2 + c0; return tanh(p3), [p3]
    return case(f"{how}_in_body", updates=[("set", 3, 3)],
                ops=[("cut", how, 0, 1), ("binary", "add", 2, 0)], **CUT_BODY)


REGRESSIONS = [
    # integer and bool carries (compared exactly) next to float ones
    case("int8_acc_plus_xint",  # (tanh(c0 + x0), c1 + x1), [c0 + x0]
         [(F64, S), ("int8", S)], [("set", 2, 2), ("acc", ("xint", 1), False)],
         xs=[(F64, S), ("int8", S)], ops=[("binary", "add", 0, 1)], ys=[("pool", 2)], T=33),
    case("int8_acc_plus_xint_read_as_y",  # (c0 + x0), [n0]
         [("int8", S)], [("acc", ("xint", 0), False)], xs=[("int8", S)],
         ys=[("carry_out", 0)], T=33),
    case("int8_scalar_acc_bool",  # c0 + (sum(x0) > 0.1)
         [("int8", SCALAR)], [("acc", ("pos_sum", 0), False)], xs=[(F64, S)], T=33),
    case("int8_scalar_acc_cast",  # c0 + (sum(x0) > 0.1).astype(i8)
         [("int8", SCALAR)], [("acc", ("pos_sum", 0), True)], xs=[(F64, S)], T=33),
    case("bool_acc_positive",  # c0 + (x0 > 0.1)
         [("bool", S)], [("acc", ("pos", 0), False)], xs=[(F64, S)]),
    case("bool_scalar_acc_positive_read_as_y",  # c0 + (sum(x0) > 0.1), [c0]
         [("bool", SCALAR)], [("acc", ("pos_sum", 0), False)], xs=[(F64, S)],
         ys=[("carry_in", 0)]),
    case("bool_acc_plus_bool_xs",  # c0 + x1
         [("bool", S)], [("acc", ("xint", 1), False)], xs=[(F64, S), ("bool", S)]),
    case("int_double_fold",  # (fold(c0 * 2 + 1), fold(c1 * 2 + 1), tanh(c2 * x0))
         [("int64", SCALAR), ("int32", S), (F64, S)], [("double",), ("double",), ("set", 2, 2)],
         xs=[(F64, S)], ops=[("binary", "mul", 0, 1)], ys=[("carry_out", 0)], T=33),
    case("int32_lag",  # (c0 + x0, c0), [c1]
         [("int32", S), ("int32", S)], [("acc", ("xint", 0), False), ("copy", 0)],
         xs=[("int32", S)], ys=[("carry_in", 1)]),
    case("float16_float32_accumulators",  # (c0 + sum(x0), c1 + x0, tanh(c1)): pool c1, c2, x0
         [(F16, SCALAR), (F32, S), (F64, S)],
         [("acc", ("sum", 2), True), ("acc", ("val", 2), True), ("set", 0, 0)],
         xs=[(F64, S)], ys=[("carry_out", 0)], T=33),
    case("all_dtypes_in_one_body",  # pool: c0, c1, c2, x0; p4 = c0 + x0, p5 = tanh(c1)
         [(F64, S), (F32, S), (F16, S), ("int8", SCALAR), ("int32", S), ("int64", SCALAR),
          ("bool", S)],
         [("set", 4, 4), ("acc", ("val", 3), True), ("set", 5, 5),
          ("acc", ("pos_sum", 4), False), ("acc", ("xint", 1), False), ("double",),
          ("acc", ("pos", 5), False)],
         xs=[(F64, S), ("int32", S)], ops=[("binary", "add", 0, 3), ("unary", "tanh", 1)],
         ys=[("carry_out", 3), ("pool", 5), ("carry_in", 6)], T=17),
    # reductions and matrix products into carries; h = tanh(c1 @ W + x0)
    case("acc_plus_sum_h", [(F64, SCALAR), (F64, S)],
         [("acc", ("sum", 4), False), ("set", 3, 3)], xs=[(F64, S)], ops=H_OPS),
    case("acc_plus_sum_x", [(F64, SCALAR)], [("acc", ("sum", 0), False)], xs=[(F64, S)]),
    case("acc_plus_dot_h_x", [(F64, SCALAR), (F64, S)],
         [("acc", ("dot", 4, 1), False), ("set", 3, 3)], xs=[(F64, S)], ops=H_OPS),
    case("acc_plus_sum_h_axis0", [(F64, VEC), (F64, S)],
         [("acc", ("sum0", 4), False), ("set", 3, 3)], xs=[(F64, S)], ops=H_OPS),
    case("acc_plus_x_at_W", [(F64, S)], [("acc", ("xW", 1), False)], xs=[(F64, S)]),
    case("acc_plus_xT_at_h", [(F64, MAT), (F64, S)],
         [("acc", ("outer", 1, 4), False), ("set", 3, 3)], xs=[(F64, S)], ops=H_OPS),
    # a value in two roles
    case("acc_term_is_a_y",  # t = x0 @ c1; (c0 + t, tanh(x0.T @ c0)), [t]
         [(F64, S), (F64, MAT)], [("acc", ("carry_mat", 1, 1), False), ("set", 1, 0)],
         xs=[(F64, S)], ys=[("term", 0)]),
    case("new_carry_is_a_y",  # p2 = c0 + x0; n0 = tanh(p2); n1 = c1 + sum(x0); [n0, p2, n1]
         [(F64, S), (F64, SCALAR)], [("set", 2, 2), ("acc", ("sum", 1), False)],
         xs=[(F64, S)], ops=[("binary", "add", 0, 1)],
         ys=[("carry_out", 0), ("pool", 2), ("carry_out", 1)]),
    case("carry_is_a_y",  # (c0 + x0, c1 + sum(x0)), [c0, c1]
         [(F64, S), (F64, SCALAR)], [("acc", ("val", 1), False), ("acc", ("sum", 1), False)],
         xs=[(F64, S)], ys=[("carry_in", 0), ("carry_in", 1)]),
    # carries that read each other
    case("lagged_carry",  # (c0 + x0, c0), [c1]: pool c0, c1, x0
         [(F64, S), (F64, S)], [("acc", ("val", 2), False), ("copy", 0)], xs=[(F64, S)],
         ys=[("carry_in", 1)]),
    case("lagged_carry_through_tanh",  # (tanh(c0 + x0), c0)
         [(F64, S), (F64, S)], [("set", 3, 3), ("copy", 0)], xs=[(F64, S)],
         ops=[("binary", "add", 0, 2)]),
    case("swapped_carries", [(F64, S), (F64, S)], [("copy", 1), ("copy", 0)], T=17),
    case("swapped_carries_with_work",  # (c1, tanh(c0 + x0)), [c0]
         [(F64, S), (F64, S)], [("copy", 1), ("set", 3, 3)], xs=[(F64, S)],
         ops=[("binary", "add", 0, 2)], ys=[("carry_in", 0)]),
    case("one_value_two_carries",  # a = c0 + x0; (a, a), [a]
         [(F64, S), (F64, S)], [("acc", ("val", 2), False), ("dup", 0)], xs=[(F64, S)],
         ys=[("carry_out", 1)]),
    case("unchanged_carry_next_to_an_accumulator",  # (c0, c1 + x0 @ W)
         [(F64, S), (F64, S)], [("copy", 0), ("acc", ("xW", 2), False)], xs=[(F64, S)]),
    # gradient control inside the body
    cut_case("no_grad"), cut_case("detach"), cut_case("stop_gradient"), cut_case("tensor"),
    case("grad_at_a_carry",  # p2 = grad(z -> sum(sin(z) * x0))(c0); tanh(p2 + c0)
         [(F64, S)], [("set", 3, 3)], xs=[(F64, S)],
         ops=[("grad_at", 0, 1), ("binary", "add", 2, 0)]),
    case("grad_wrt_closed_W",  # p2 = c0 @ grad(u -> sum(tanh(c0 @ u)))(W); tanh(p2 + x0)
         [(F64, S)], [("set", 3, 3)], xs=[(F64, S)],
         ops=[("grad_closed", "W", 0), ("binary", "add", 2, 1)]),
    case("grad_wrt_closed_v",
         [(F64, S)], [("set", 3, 3)], xs=[(F64, S)],
         ops=[("grad_closed", "v", 0), ("binary", "add", 2, 1)]),
    # Found by this fuzzer: after a run without gradients, d/dv was zero (the graph cached
    # from that run kept the nested scan's linearization made when v needed no gradient).
    case("grad_wrt_closed_W_then_nested_scan_reading_v",  # p2 = x0 @ grad(...)(W) * 0.2
         [(F64, S)], [("set", 3, 3)], xs=[(F64, S)],
         ops=[("grad_closed", "W", 1), ("inner", 2, 2, False)], T=1),
    # integer indexing of a closed-over array, slices
    case("embedding_lookup",  # e = E[x0]; (tanh(e + c0 @ W), c1 + E[x0]), [e]
         [(F64, S), (F64, S)], [("set", 4, 4), ("acc", ("embed", 0), False)],
         xs=[("idx", SCALAR)], ops=[("embed", 0), ("matmul", 0), ("binary", "add", 2, 3)],
         ys=[("pool", 2)]),
    # a (D, D) buffer carry written one row per step (in place), read before the write
    # through matmul_carry, returned as a y; the step index read as E[t] (seed picks t,
    # T - 1 - t or random rows)
    case("buffer_row_set",  # pool c0; c1 = c1.at[x0 % D].set(tanh(sum(c0 @ c1, 0)))
         [(F64, S), (F64, MAT)], [("set", 1, 1), ("row_set", 0, 1)], xs=[("idx", SCALAR)],
         ops=[("matmul_carry", 1, 0)]),
    case("buffer_row_set_plain",  # c1 = c1.at[x0 % D].set(tanh(sum(c0, 0))): in place
         [(F64, S), (F64, MAT)], [("set", 0, 0), ("row_set", 0, 0)], xs=[("idx", SCALAR)]),
    case("buffer_row_add_as_y",
         [(F64, S), (F64, MAT)], [("set", 0, 0), ("row_add", 0, 0)], xs=[("idx", SCALAR)],
         ys=[("carry_out", 1)]),
    case("buffer_row_add_and_embed",
         [(F64, S), (F32, MAT)], [("set", 1, 1), ("row_add", 0, 1)], xs=[("idx", SCALAR)],
         ops=[("embed", 0)], seed=3),
    case("slices",  # pool c0, x0
         [(F64, S)], [("set", 6, 6)], xs=[(F64, S)], B=3, D=4,
         ops=[("slice", "rev", 0), ("slice", "head", 2), ("slice", "row0", 1),
              ("binary", "add", 3, 4), ("slice", "roll0", 5)]),
    # ys the loss never reads, whose partials are not finite at the data
    case("unread_log_y",  # (tanh(x0 @ W + c0)), [log(x0)]; x0 has zeros
         [(F64, S)], [("set", 3, 3)], xs=[(F64, S)],
         ops=[("matmul", 1), ("binary", "add", 2, 0)], ys=[("log", 0)]),
    case("unread_sqrt_y_next_to_read_y", [(F64, S)], [("set", 3, 3)], xs=[(F64, S)],
         ops=[("matmul", 1), ("binary", "add", 2, 0)], ys=[("sqrt_abs", 0), ("pool", 2)]),
    case("unread_log_y_accumulator", [(F64, SCALAR)], [("acc", ("sum", 0), False)],
         xs=[(F64, S)], ys=[("log", 0)]),
    # lengths: empty scans and chunks of several steps
    case("length_0", [(F64, S), ("int8", SCALAR), (F64, SCALAR)],
         [("set", 2, 2), ("acc", ("pos_sum", 1), False), ("acc", ("sum", 1), False)],
         xs=[(F64, S)], ops=[("binary", "add", 0, 1)], ys=[("pool", 2), ("carry_in", 1)],
         T=0),
    case("python_number_inits",  # init (0.3, 2, c2): the numbers take f16 and i8 from f
         [(F16, SCALAR), ("int8", SCALAR), (F64, S)],
         [("acc", ("sum", 1), True), ("acc", ("pos_sum", 1), False), ("set", 2, 2)],
         xs=[(F64, S)], ops=[("binary", "add", 0, 1)], weak=(0, 1)),
    case("length_0_python_number_init", [(F32, SCALAR), (F64, S)],
         [("acc", ("sum", 1), True), ("set", 2, 2)], xs=[(F64, S)],
         ops=[("binary", "add", 0, 1)], weak=(0,), T=0),
    case("length_0_no_xs", [(F64, S)], [("set", 1, 1)], ops=[("matmul", 0)],
         ys=[("pool", 1)], T=0),
    case("several_chunks",  # (B, D) = (16, 64), T = 47: more steps than one chunk holds
         [(F64, S), (F64, SCALAR), (F32, S), ("int8", SCALAR)],
         [("set", 6, 6), ("acc", ("sum", 6), False), ("acc", ("xW", 2), True),
          ("acc", ("pos_sum", 2), False)],
         xs=[(F64, S)], ops=[("matmul", 0), ("binary", "add", 3, 2), ("unary", "tanh", 4),
                             ("binary", "mul", 5, 1)],
         ys=[("pool", 6), ("term", 1)], B=16, D=64, T=47),
]


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("body", REGRESSIONS)
def test_regression_bodies(body, reverse):
    check_body(dataclasses.replace(body, reverse=reverse), "regression",
               second_order=body.float64_only() and body.B * body.D < 100)


# Found by test_random_bodies_under_jit_with_numba: traced under jit, the backward scan's
# linearization without cotangents for the unread ys wanted a residual the forward had not
# kept, and fell back to zero cotangents for them: 0 * (d sqrt|x| at 0 = inf) = NaN in d/d xs.
UNREAD_YS_UNDER_JIT = Body(
    carries=(("float64", "DD"), ("float32", "D")), xs=(("float64", "S"), ("idx", "()")),
    ops=(("grad_closed", "W", 0), ("unary", "clip", 1), ("vjp_at", 2, 2),
         ("inner", 3, 3, True), ("closed", "max", 0, "v")),
    updates=(("row_set", 1, 3), ("acc", ("max0", 4), False)),
    ys=(("sqrt_abs", 0), ("term", 1)), T=2, reverse=True, B=3, D=3, seed=65535,
    name="unread ys under jit")


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
def test_unread_ys_get_no_zero_cotangent_under_jit():
    check_body(UNREAD_YS_UNDER_JIT, "regression", tiers=TIERS + ("jit-numba",))


# Found by test_random_bodies_under_jit: traced, the dead inner scan's closed-over K is an
# input of the trace, so the first walk back bound the outer scan again with more residuals;
# the second walk back read one its backward scan had not (a None in the replay).
DEAD_INNER_HVP_UNDER_JIT = Body(
    carries=(("float32", S), ("bool", SCALAR), ("int32", S), (F64, S)),
    xs=(("float32", S), (F64, S), ("int32", S), ("idx", "()"), ("int8", S)),
    ops=(("inner", 1, 2, False), ("where_bool", 1, 2)),
    updates=(("set", 2, 0), ("copy", 1), ("acc", ("xint", 4), False), ("set", 5, 1)),
    T=2, B=1, D=1, name="second order of a body with a dead inner scan under jit")


def test_second_order_of_a_dead_inner_scan_under_jit():
    check_body(DEAD_INNER_HVP_UNDER_JIT, "regression", second_order=True,
               tiers=TIERS + ("jit",))


# x[rows, cols] at [B, 1] and [D] index arrays (a column repeated) and x[:, i] at a 0-d index,
# in the forward body; their scatter-adds in the backward one: the numba loop's kernels take
# both (before, any index but x[i] and x[i, j] at arrays of one shape kept the NumPy loop).
REGATHER = Body(
    carries=((F64, S), (F64, SCALAR)), xs=(("idx", "()"),), ops=(("regather", 0, 0),),
    updates=(("set", 1, 1), ("acc", ("sum", 1), False)), ys=(("pool", 1),), T=5, B=3, D=4,
    name="gathers at broadcast index arrays")


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
@pytest.mark.parametrize("tier", ["numba", "jit-numba"])
def test_gathers_at_broadcast_index_arrays_in_numba_kernels(tier):
    kind = f"regression {tier}"
    before = BODIES_RUN[f"{kind}, of them ran numba kernels"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        check_body(REGATHER, kind, second_order=True, tiers=TIERS + (tier,))
    if tier == "numba":
        assert BODIES_RUN[f"{kind}, of them ran numba kernels"] > before


SWEEP = Body(  # accumulators, a lag and an integer counter, for every interesting length
    carries=((F64, S), (F64, SCALAR), (F64, S), ("int32", SCALAR)),
    updates=(("set", 4, 4), ("acc", ("sum", 5), False), ("copy", 0),
             ("acc", ("pos_sum", 1), False)),
    xs=((F64, S),), ops=(("matmul", 0), ("binary", "add", 2, 1), ("unary", "sin", 3)),
    ys=(("pool", 4), ("term", 1), ("carry_in", 2)), name="sweep")


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("T", T_CHOICES)
def test_lengths_around_the_chunk_length(T, reverse):
    check_body(dataclasses.replace(SWEEP, T=T, reverse=reverse), "length sweep")


# --- random bodies -----------------------------------------------------------------------------
def check_random_body(body, kind, second_order=False, tiers=TIERS):
    """check_body, where a body whose loop overflows is not an example (values stay bounded
    by construction, but products of bounded values can still overflow float16)."""
    try:
        check_body(body, kind, second_order, tiers)
    except Overflow:
        BODIES_RUN[kind] -= 1
        BODIES_RUN["discarded: the loop overflowed"] += 1
        hypothesis.assume(False)


@SETTINGS
@given(bodies())
def test_random_bodies_agree_with_loop_and_interpreter(body):
    check_random_body(body, "random")


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 3))
@given(bodies(float64_only=True))
def test_random_float64_bodies_second_order(body):
    check_random_body(body, "random second order", second_order=True)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 6))
@given(bodies(big=True))
def test_random_bodies_over_several_chunks(body):
    check_random_body(body, "random several chunks")


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
@settings(SETTINGS, max_examples=NUMBA_EXAMPLES)
@given(bodies())
def test_random_bodies_numba_loop(body):
    check_random_body(body, "random numba", tiers=TIERS + ("numba",))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
@settings(SETTINGS, max_examples=NUMBA_EXAMPLES)
@given(bodies())
def test_random_bodies_while_loop_numba_kernel(body):
    check_random_body(body, "random while_loop numba", second_order=body.seed % 2 == 0,
                      tiers=TIERS + ("while-numba",))


@settings(SETTINGS, max_examples=JIT_EXAMPLES)
@given(bodies())
def test_random_bodies_under_jit(body):
    check_random_body(body, "random jit", second_order=body.seed % 4 == 0,
                      tiers=TIERS + ("jit",))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
@settings(SETTINGS, max_examples=max(1, NUMBA_EXAMPLES // 2))  # kernels of whole programs
@given(bodies())
def test_random_bodies_under_jit_with_numba(body):
    check_random_body(body, "random jit numba", second_order=body.seed % 4 == 0,
                      tiers=TIERS + ("jit-numba",))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
@settings(SETTINGS, max_examples=max(1, NUMBA_EXAMPLES // 2))
@given(bodies())
def test_random_bodies_under_jit_with_region_kernels(body):
    check_random_body(body, "random jit regions", second_order=body.seed % 4 == 0,
                      tiers=TIERS + ("jit-regions",))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
@settings(SETTINGS, max_examples=AUTO_EXAMPLES)
@given(bodies())
def test_random_bodies_auto_compiler(body):
    check_random_body(body, "random auto", tiers=TIERS + ("auto",))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (compiler='numba')")
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_numba_loop_over_the_length_sweep_body(reverse):
    check_body(dataclasses.replace(SWEEP, T=33, reverse=reverse), "numba sweep",
               tiers=TIERS + ("numba",))


def test_zz_report_how_many_bodies_ran(capsys):
    # Runs last (file order): the count covers the tests of this file run before it.
    total = sum(n for kind, n in BODIES_RUN.items() if not kind.startswith("discarded"))
    with capsys.disabled():
        print(f"\nscan fuzz: {total} bodies ran against loop and interpreter: "
              + ", ".join(f"{n} {kind}" for kind, n in sorted(BODIES_RUN.items())))
