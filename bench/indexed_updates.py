"""Step-indexed buffers in scan, forward + backward: time and peak memory (tracemalloc).

1. A carry buffer written one row per step (`buf.at[t].set(h)`, [T, B, H]) for several T,
   beside the same RNN returning h as ys (the reference).
2. The step-index idiom: a closed-over X [N, N] read as `X[t]` (`c * 0.5 + X[t]`), beside
   the same program with X as xs.

    python -m bench.indexed_updates            # the passes on (the default compiler)
    python -m bench.indexed_updates --before   # without them (update_in_place,
                                               # sink_buffer_updates, scatter_into_accumulators,
                                               # the batched X[t] gather): today's baseline
    python -m bench.indexed_updates --compiler numpy   # scan's compiler: numpy, numba or
                                                       # auto (default: the library's)
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np

import scanlib as sl
from bench.env import settle
from scanlib.ops import structural
from scanlib.scan.api import default_compiler
from scanlib.scan import cache
from scanlib.scan.loop import passes

B, H = 8, 32


def without_passes():
    """The compiler as before these passes: the step-indexed fast paths off."""
    off = {"sink_buffer_updates", "scatter_into_accumulators", "update_in_place"}
    passes.PASSES = tuple(p for p in passes.PASSES if p.__name__ not in off)
    rule = structural.getitem_p.batch

    def old_rule(prim, params, batched, shapes, out_shape):
        if any(type(i) is structural.Slot for i in params["index"]):
            return None
        return rule(prim, params, batched, shapes, out_shape)
    structural.getitem_p.batch = old_rule
    cache.clear()


def measure(fn, reps):
    """(best seconds, peak bytes) of fn() (the peak from one more run under tracemalloc)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        gc.collect()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return best, peak


def interleaved_best(fns, reps):
    """{key: best seconds} of each fn over reps interleaved rounds, after one warm-up round."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(reps):
        for k, fn in fns.items():
            gc.collect()
            t = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def buffer_case(T, as_ys):
    rng = np.random.default_rng(0)
    W = sl.tensor(rng.normal(0, 0.3, (H, H)), requires_grad=True)
    h0 = sl.tensor(rng.normal(size=(B, H)))

    def run():
        W.grad = None
        if as_ys:
            h, ys = sl.scan(lambda h, t: (sl.tanh(h @ W),) * 2, h0, sl.arange(T))
            loss = sl.sum(ys * ys) + sl.sum(h)
        else:
            def f(c, t):
                buf, h = c
                h = sl.tanh(h @ W)
                return (buf.at[t].set(h), h), None
            (buf, h), _ = sl.scan(f, (sl.zeros((T, B, H)), h0), sl.arange(T))
            loss = sl.sum(buf * buf) + sl.sum(h)
        loss.backward()
    return run


def index_case(N, by_index):
    rng = np.random.default_rng(0)
    X = sl.tensor(rng.normal(size=(N, N)), requires_grad=True)
    c0 = sl.zeros(N)

    def run():
        X.grad = None
        if by_index:
            c, _ = sl.scan(lambda c, t: (c * 0.5 + X[t], None), c0, sl.arange(N))
        else:
            c, _ = sl.scan(lambda c, x: (c * 0.5 + x, None), c0, X)
        sl.sum(c).backward()
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", action="store_true", help="without the in-place passes")
    ap.add_argument("--Ts", default="250,500,1000,2000")
    ap.add_argument("--N", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--compiler", choices=("numpy", "numba", "auto"), default=None)
    ap.add_argument("--only-index", action="store_true", help="only the X[t] rows")
    args = ap.parse_args(argv)
    if args.compiler:
        sl.set_loop_compiler(args.compiler)
    if args.before:
        without_passes()
    print(f"compiler: {'before (passes off)' if args.before else 'with the in-place passes'}")
    print(f"scan's compiler: {default_compiler()}")
    print(f"{'workload':<34} {'T':>6} {'fwd+bwd ms':>11} {'peak MiB':>9} {'ms/step':>8}")
    for T in (int(t) for t in args.Ts.split(",") if not args.only_index):
        for as_ys, name in ((False, f"buf.at[t].set(h) [T,{B},{H}]"),
                            (True, "h as ys (reference)")):
            best, peak = measure(buffer_case(T, as_ys), 1 if args.before and T > 500 else
                                 args.reps)
            print(f"{name:<34} {T:>6} {best * 1e3:>11.2f} {peak / 2**20:>9.2f} "
                  f"{best * 1e3 / T:>8.4f}")
    N = args.N
    cases = {by_index: index_case(N, by_index) for by_index in (True, False)}
    settle(*cases.values())
    bests = interleaved_best(cases, 1 if args.before else args.reps)
    for by_index, name in ((True, f"c*0.5 + X[t], X [{N},{N}]"), (False, "X as xs (reference)")):
        _, peak = measure(cases[by_index], 0)
        best = bests[by_index]
        print(f"{name:<34} {N:>6} {best * 1e3:>11.2f} {peak / 2**20:>9.2f} "
              f"{best * 1e3 / N:>8.4f}")


if __name__ == "__main__":
    main()
