"""vmap of a while_loop whose lanes stop at different steps, forward and gradient, against one
lane, in process CPU time (median of 15 calls after 2 warm-ups); the argument names the run
in the output line (run it from two checkouts to compare them):

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.while_lanes after

Newton's cube root of logspace(-3, 6, 64): 5 to 25 steps per lane; "1 lane" is the 25-step
lane. Imports scanlib and NumPy.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import scanlib as sl


def newton(a):
    def body(c):
        x, n = c
        return (x - (x * x * x - a) / (3.0 * x * x), n + 1)
    return sl.while_loop(lambda c: sl.abs(c[0] ** 3 - a) > 1e-12 * a, body, (a, 0))[0]


def main(label="run"):
    A = sl.tensor(np.logspace(-3, 6, 64))
    cases = [("fwd 1 lane", lambda: newton(A[-1])),
             ("vmap fwd 64", lambda: sl.vmap(newton)(A)),
             ("grad 1 lane", lambda: sl.grad(newton)(A[-1])),
             ("vmap grad 64", lambda: sl.vmap(sl.grad(newton))(A)),
             ("grad vmap 64", lambda: sl.grad(lambda A: sl.vmap(newton)(A).sum())(A))]
    ms = {}
    for name, fn in cases:
        fn()
        fn()
        times = []
        for _ in range(15):
            t = time.process_time()
            fn()
            times.append(time.process_time() - t)
        ms[name] = float(np.median(times)) * 1e3
    print(label, " ".join(f"{k}: {v:.2f} ms" for k, v in ms.items()),
          f"| to one lane: fwd {ms['vmap fwd 64'] / ms['fwd 1 lane']:.1f}x, "
          f"vmap grad {ms['vmap grad 64'] / ms['grad 1 lane']:.1f}x, "
          f"grad vmap {ms['grad vmap 64'] / ms['grad 1 lane']:.1f}x")


if __name__ == "__main__":
    main(*sys.argv[1:2])
