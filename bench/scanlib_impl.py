"""scanlib's contenders: scanlib-scan (the library's scan) and scanlib-loop (the same
recurrence as a Python loop on the tape, ys stacked with scanlib.stack), on the CPU and, as
scanlib-scan-cuda and scanlib-loop-cuda, on a GPU through CuPy (the data moved there once,
outside the timed call; each call ends by reading the loss back, which waits for the GPU).
scanlib-assoc runs linrec and cumsum as scanlib.associative_scan.

Both differentiate with scanlib.value_and_grad and define the body afresh on every call, as
inside a training step. scanlib-loop takes xs as a list of per-step arrays, as the other
loop contenders do (see NOTES.md on xs[t]). `python -m bench --jit` runs scanlib-scan's and
scanlib-assoc's value_and_grad under scanlib.jit (JIT). Imports scanlib, NumPy and bench's own
modules.
"""

from __future__ import annotations

import functools
import types

from .contender import Contender, Runner
from .workloads import flatten, length, loop_loss, loss, map_tree, split_xs, step


JIT = [False]  # set by `python -m bench --jit`


def _scanlib():
    import scanlib

    return scanlib


def _ops(sl):
    return types.SimpleNamespace(tanh=sl.tanh, sigmoid=sl.sigmoid, vdot=sl.vdot, stack=sl.stack)


def _to_numpy(result):
    value, g = result
    return float(value.item()), flatten(map_tree(lambda t: t.numpy(), g))


def _on(sl, device):
    """NumPy data as the call takes it: the arrays themselves on the CPU, Tensors on a GPU."""
    return (lambda a: a) if device == "cpu" else (lambda a: sl.tensor(a, device=device))


def _synced(run, device):
    """On a GPU, a call ends when the loss is back on the host: the copy waits for every
    kernel queued before it, the backward's included."""
    if device == "cpu":
        return run

    def synced():
        out = run()
        out[0].item()
        return out
    return synced


def _restack(steps):
    """Per-step gradient tensors -> one (T, ...) tensor (a dict of them for dict xs)."""
    sl = _scanlib()
    if isinstance(steps[0], dict):
        return {k: sl.stack([s[k] for s in steps]) for k in steps[0]}
    return sl.stack(steps)


def build_loop(wl, inputs, consts, device="cpu"):
    sl = _scanlib()
    ops = _ops(sl)
    on = _on(sl, device)
    args = {"params": map_tree(on, inputs["params"]), "init": map_tree(on, inputs["init"]),
            "xs": [map_tree(on, x) for x in split_xs(inputs["xs"], length(inputs))]}
    c = map_tree(on, consts)

    def f(a):
        return loop_loss(wl.kind, ops, a["params"], a["init"], a["xs"], c)

    vg = sl.value_and_grad(f)

    def run():
        value, g = vg(args)
        return value, {"params": g["params"], "init": g["init"], "xs": _restack(g["xs"])}

    return Runner(_synced(run, device), _to_numpy)


def _timed_value_and_grad(f, sl, args, device):
    """The Runner every scanlib contender times: value_and_grad of f on args."""
    vg = sl.jit(sl.value_and_grad(f)) if JIT[0] else sl.value_and_grad(f)
    return Runner(_synced(lambda: vg(args), device), _to_numpy)


def _on_device(inputs, consts, device):
    sl = _scanlib()
    on = _on(sl, device)
    return sl, _ops(sl), map_tree(on, consts), map_tree(on, inputs)


def build_scan(wl, inputs, consts, device="cpu"):
    sl, ops, c, args = _on_device(inputs, consts, device)

    def f(a):
        params = a["params"]

        def body(carry, x):  # a fresh closure on every call, as in a training step
            return step(wl.kind, ops, params, carry, x)

        carry, ys = sl.scan(body, a["init"], a["xs"])
        return loss(ops, ys, carry, c)

    return _timed_value_and_grad(f, sl, args, device)


def _affine(e1, e2):
    """(a1, b1) then (a2, b2): h -> a2 * (a1 * h + b1) + b2 (see scanlib/associative.py)."""
    (a1, b1), (a2, b2) = e1, e2
    return a1 * a2, a2 * b1 + b2


def build_assoc(wl, inputs, consts, device="cpu"):
    """The recurrence as scanlib.associative_scan: linrec over pairs (a, b) with the initial
    carry folded into the first b (b_0 <- a_0 * h_0 + b_0), cumsum with +."""
    sl, ops, c, args = _on_device(inputs, consts, device)

    def f(a):
        if wl.kind == "cumsum":
            ys = sl.associative_scan(lambda x, y: x + y, a["xs"]) + a["init"]
        else:
            xs = a["xs"]
            b0, b_rest = sl.split(xs["b"], [1])
            a0 = sl.split(xs["a"], [1])[0]
            b = sl.concatenate([a0 * a["init"] + b0, b_rest])
            _, ys = sl.associative_scan(_affine, (xs["a"], b))
        return loss(ops, ys, sl.split(ys, [len(ys) - 1])[1][0], c)

    return _timed_value_and_grad(f, sl, args, device)


def _assoc_supports(wl):
    return None if wl.kind in ("linrec", "cumsum") else "not an associative recurrence"


def _assoc_available():
    reason = _scan_available()
    if reason:
        return reason
    return None if hasattr(_scanlib(), "associative_scan") else "no associative_scan yet"


def _scan_available():
    try:
        sl = _scanlib()
    except ImportError as e:  # pragma: no cover - scanlib is this repository
        return f"scanlib does not import: {e}"
    return None if hasattr(sl, "scan") else "scanlib.scan does not exist yet"


def _cuda_available():
    reason = _scan_available()
    if reason:
        return reason
    return None if _scanlib().cuda_available() else "no GPU that CuPy can use"


CONTENDERS = [
    Contender("scanlib-scan", "scanlib", build_scan, available=_scan_available,
              note="scanlib.scan + value_and_grad"),
    Contender("scanlib-loop", "scanlib", build_loop,
              note="Python loop on the tape, scanlib.stack; xs as per-step leaves"),
    Contender("scanlib-assoc", "scanlib", build_assoc, available=_assoc_available,
              supports=_assoc_supports, note="scanlib.associative_scan + value_and_grad"),
    Contender("scanlib-scan-cuda", "scanlib", functools.partial(build_scan, device="cuda"),
              available=_cuda_available, memory_visible=False,
              note="scanlib.scan on the GPU (CuPy)"),
    Contender("scanlib-loop-cuda", "scanlib", functools.partial(build_loop, device="cuda"),
              available=_cuda_available, memory_visible=False,
              note="Python loop on the tape on the GPU (CuPy)"),
]
