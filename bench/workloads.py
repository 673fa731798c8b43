"""The workloads: shapes, seeded data, the recurrence body and the scalar loss.

A body is written once, against an `ops` namespace (tanh, sigmoid, vdot, stack), so every
contender runs the same arithmetic with its own array library. Inputs are one dict,
{"params": {...}, "init": carry, "xs": xs}; every leaf of it is differentiated. The loss is
sum(ys * P) + sum(carry_T * Q) with fixed random P and Q ("consts"), so the cotangents of
both ys and the final carry are non-trivial; each contender writes it with its library's vdot
(or the nearest op with a gradient), as numpy-manual does, so no one has to form ys * P.
Imports NumPy only.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import numpy as np

SIZES = ("full", "quick", "tiny")


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # rnn | lstm | cumsum | linrec
    dtype: str
    sizes: dict = field(default_factory=dict)  # size name -> {"T": , "B": , "H": , "I": , "D": }
    note: str = ""

    def dims(self, size: str) -> dict:
        return self.sizes[size]


def _rnn_sizes(B, H, I, T):
    return {"full": {"B": B, "H": H, "I": I, "T": T},
            "quick": {"B": 8, "H": 32, "I": 16, "T": min(T, 20)},
            "tiny": {"B": 2, "H": 3, "I": 2, "T": min(T, 5)}}


WORKLOADS = [
    Workload("rnn", "rnn", "float32", _rnn_sizes(32, 128, 64, 200),
             "h = tanh(h @ W + x_t @ U + b)"),
    Workload("rnn-f64", "rnn", "float64", _rnn_sizes(32, 128, 64, 200), "rnn in float64"),
    Workload("rnn-large", "rnn", "float32", _rnn_sizes(64, 512, 64, 100), "rnn, B=64 H=512"),
    Workload("rnn-t1", "rnn", "float32", _rnn_sizes(32, 128, 64, 1),
             "rnn with T=1: the fixed cost of one call (body a fresh closure each call)"),
    Workload("lstm", "lstm", "float32", _rnn_sizes(32, 128, 64, 100), "standard LSTM cell"),
    Workload("cumsum", "cumsum", "float64",
             {"full": {"T": 10_000}, "quick": {"T": 500}, "tiny": {"T": 6}},
             "scalar c = c + x_t, y = c: pure per-step overhead"),
    Workload("linrec", "linrec", "float32",
             {"full": {"B": 16, "D": 1024, "T": 1000}, "quick": {"B": 4, "D": 64, "T": 50},
              "tiny": {"B": 2, "D": 3, "T": 5}},
             "elementwise h = a_t * h + b_t"),
    Workload("linrec-long", "linrec", "float32",
             {"full": {"B": 4, "D": 64, "T": 10_000}, "quick": {"B": 4, "D": 64, "T": 333},
              "tiny": {"B": 2, "D": 3, "T": 7}},
             "linrec with little work per step and many steps (associative_scan's case)"),
]
BY_NAME = {w.name: w for w in WORKLOADS}


# --- data -------------------------------------------------------------------------------------
def make_data(wl: Workload, size: str, seed: int = 0):
    """(inputs, consts) as NumPy arrays of wl.dtype, the same for every contender."""
    d = wl.dims(size)
    rng = np.random.default_rng(seed)
    dt = np.dtype(wl.dtype)

    def randn(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(dt)

    T = d["T"]
    if wl.kind == "rnn":
        B, H, I = d["B"], d["H"], d["I"]
        params = {"W": randn(H, H, scale=1 / np.sqrt(H)), "U": randn(I, H, scale=1 / np.sqrt(I)),
                  "b": randn(H, scale=0.1)}
        init, xs = randn(B, H, scale=0.5), randn(T, B, I)
        consts = {"P": randn(T, B, H), "Q": randn(B, H)}
    elif wl.kind == "lstm":
        B, H, I = d["B"], d["H"], d["I"]
        params = {"Wx": randn(I, 4 * H, scale=1 / np.sqrt(I)),
                  "Wh": randn(H, 4 * H, scale=1 / np.sqrt(H)), "b": randn(4 * H, scale=0.1)}
        init = {"h": randn(B, H, scale=0.5), "c": randn(B, H, scale=0.5)}
        xs = randn(T, B, I)
        consts = {"P": randn(T, B, H), "Q": {"h": randn(B, H), "c": randn(B, H)}}
    elif wl.kind == "cumsum":
        params = {}
        init, xs = np.asarray(rng.standard_normal(), dtype=dt), randn(T)
        consts = {"P": randn(T), "Q": np.asarray(rng.standard_normal(), dtype=dt)}
    elif wl.kind == "linrec":
        B, D = d["B"], d["D"]
        params = {}
        init = randn(B, D)
        # a_t in (0.5, 1): a decaying, stable recurrence, as in linear RNNs / SSMs.
        xs = {"a": rng.uniform(0.5, 1.0, (T, B, D)).astype(dt), "b": randn(T, B, D)}
        consts = {"P": randn(T, B, D), "Q": randn(B, D)}
    else:
        raise ValueError(f"unknown workload kind {wl.kind!r}")
    return {"params": params, "init": init, "xs": xs}, consts


def astype_tree(tree, dtype):
    """The same nested dicts with every array cast to dtype (for float64 gradient checks)."""
    if isinstance(tree, dict):
        return {k: astype_tree(v, dtype) for k, v in tree.items()}
    return np.asarray(tree).astype(dtype)


def flatten(tree, prefix=""):
    """{'params.W': array, 'init': array, 'xs.a': array, ...} in a fixed order."""
    if isinstance(tree, dict):
        out = {}
        for k in sorted(tree):
            out.update(flatten(tree[k], f"{prefix}.{k}" if prefix else k))
        return out
    return {prefix: tree}


def unflatten_like(template, flat, prefix=""):
    if isinstance(template, dict):
        return {k: unflatten_like(v, flat, f"{prefix}.{k}" if prefix else k)
                for k, v in template.items()}
    return flat[prefix]


def map_tree(fn, tree):
    if isinstance(tree, dict):
        return {k: map_tree(fn, v) for k, v in tree.items()}
    return fn(tree)


def length(inputs) -> int:
    xs = inputs["xs"]
    return len(next(iter(xs.values()))) if isinstance(xs, dict) else len(xs)


def split_xs(xs, T):
    """xs (an array or a dict of arrays, time first) as a list of T per-step slices."""
    if isinstance(xs, dict):
        return [{k: v[t] for k, v in xs.items()} for t in range(T)]
    return [xs[t] for t in range(T)]


# --- the recurrence, written once -------------------------------------------------------------
def step(kind, ops, params, carry, x):
    """One step: (new carry, y). `ops` supplies tanh and sigmoid; + - * @ are the operators."""
    if kind == "rnn":
        h = ops.tanh(carry @ params["W"] + x @ params["U"] + params["b"])
        return h, h
    if kind == "lstm":
        h, c = carry["h"], carry["c"]
        z = x @ params["Wx"] + h @ params["Wh"] + params["b"]
        H = h.shape[-1]
        i = ops.sigmoid(z[:, :H])
        f = ops.sigmoid(z[:, H:2 * H])
        g = ops.tanh(z[:, 2 * H:3 * H])
        o = ops.sigmoid(z[:, 3 * H:])
        c = f * c + i * g
        h = o * ops.tanh(c)
        return {"h": h, "c": c}, h
    if kind == "cumsum":
        c = carry + x
        return c, c
    if kind == "linrec":
        h = x["a"] * carry + x["b"]
        return h, h
    raise ValueError(kind)


def loss(ops, ys, carry, consts):
    """sum(ys * P) + sum(carry * Q) over every carry leaf, as ops.vdot."""
    total = ops.vdot(ys, consts["P"])
    Q = consts["Q"]
    if isinstance(Q, dict):
        for k in sorted(Q):
            total = total + ops.vdot(carry[k], Q[k])
    else:
        total = total + ops.vdot(carry, Q)
    return total


def loop_loss(kind, ops, params, init, xs_steps, consts):
    """The definition: a Python loop over the steps, ys stacked with ops.stack."""
    carry, ys = init, []
    for x in xs_steps:
        carry, y = step(kind, ops, params, carry, x)
        ys.append(y)
    return loss(ops, ops.stack(ys), carry, consts)


def _np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


NUMPY_OPS = types.SimpleNamespace(tanh=np.tanh, sigmoid=_np_sigmoid, vdot=np.vdot,
                                  stack=np.stack)


def reference_loss(wl: Workload, inputs, consts) -> float:
    """The loss by the plain NumPy loop: what finite differences of numpy-manual check."""
    T = length(inputs)
    return float(loop_loss(wl.kind, NUMPY_OPS, inputs["params"], inputs["init"],
                           split_xs(inputs["xs"], T), consts))
