"""scanlib's contenders: scanlib-scan (the library's scan) and scanlib-loop (the same
recurrence as a Python loop on the tape, ys stacked with scanlib.stack).

Both differentiate with scanlib.value_and_grad and define the body afresh on every call, as
inside a training step. scanlib-loop takes xs as a list of per-step arrays, as the other
loop contenders do (see NOTES.md on xs[t]). Imports scanlib, NumPy and bench's own modules.
"""

from __future__ import annotations

import types

import numpy as np

from .contender import Contender, Runner
from .workloads import flatten, length, loop_loss, loss, map_tree, split_xs, step


def _scanlib():
    import scanlib

    return scanlib


def _ops(sl):
    return types.SimpleNamespace(tanh=sl.tanh, sigmoid=sl.sigmoid, vdot=sl.vdot, stack=sl.stack)


def _to_numpy(result):
    value, g = result
    return float(value.item()), flatten(map_tree(np.asarray, g))


def _restack(steps):
    """Per-step gradient tensors -> one (T, ...) NumPy array (a dict of them for dict xs)."""
    if isinstance(steps[0], dict):
        return {k: np.stack([s[k].numpy() for s in steps]) for k in steps[0]}
    return np.stack([s.numpy() for s in steps])


def build_loop(wl, inputs, consts):
    sl = _scanlib()
    ops = _ops(sl)
    args = {"params": inputs["params"], "init": inputs["init"],
            "xs": split_xs(inputs["xs"], length(inputs))}
    c = map_tree(sl.tensor, consts)

    def f(a):
        return loop_loss(wl.kind, ops, a["params"], a["init"], a["xs"], c)

    vg = sl.value_and_grad(f)

    def run():
        value, g = vg(args)
        return value, {"params": g["params"], "init": g["init"], "xs": _restack(g["xs"])}

    return Runner(run, _to_numpy)


def build_scan(wl, inputs, consts):
    sl = _scanlib()
    ops = _ops(sl)
    c = map_tree(sl.tensor, consts)

    def f(a):
        params = a["params"]

        def body(carry, x):  # a fresh closure on every call, as in a training step
            return step(wl.kind, ops, params, carry, x)

        carry, ys = sl.scan(body, a["init"], a["xs"])
        return loss(ops, ys, carry, c)

    vg = sl.value_and_grad(f)
    return Runner(lambda: vg(inputs), _to_numpy)


def _scan_available():
    try:
        sl = _scanlib()
    except ImportError as e:  # pragma: no cover - scanlib is this repository
        return f"scanlib does not import: {e}"
    return None if hasattr(sl, "scan") else "scanlib.scan does not exist yet"


CONTENDERS = [
    Contender("scanlib-scan", "scanlib", build_scan, available=_scan_available,
              note="scanlib.scan + value_and_grad"),
    Contender("scanlib-loop", "scanlib", build_loop,
              note="Python loop on the tape, scanlib.stack; xs as per-step leaves"),
]
