"""associative_scan's two structures side by side, interleaved in one process:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.assoc_structures [rounds] [numba]

On linrec-long, linrec and cumsum (bench/workloads.py, full size): numpy-manual, scanlib-scan
and the scanlib-assoc contender run once with each structure of scanlib/associative.py
(odd/even levels, one sequential scan) forced; median process CPU time of forward +
backward over the rounds, ratios to numpy-manual. Imports scanlib, NumPy and bench's modules.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from scanlib import associative
from bench import env, numpy_contenders, scanlib_impl
from bench.workloads import BY_NAME, make_data


def _forced(run, structure):
    def call():
        saved = associative._structure
        associative._structure = lambda leaves: structure
        try:
            return run()
        finally:
            associative._structure = saved
    return call


def measure(name, rounds):
    wl = BY_NAME[name]
    inputs, consts = make_data(wl, "full")
    manual = next(c for c in numpy_contenders.CONTENDERS if c.name == "numpy-manual")
    runs = {"numpy-manual": manual.build(wl, inputs, consts).run,
            "scanlib-scan": scanlib_impl.build_scan(wl, inputs, consts).run}
    for structure in associative.STRUCTURES:
        runs[f"assoc {structure}"] = _forced(
            scanlib_impl.build_assoc(wl, inputs, consts).run, structure)
    for run in runs.values():  # warm-up
        run()
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for k, run in runs.items():
            t0 = time.process_time()
            run()
            times[k].append(time.process_time() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def main(argv):
    argv = env.loop_compiler_from(argv)
    rounds = int(argv[0]) if argv else 7
    for name in ("linrec-long", "linrec", "cumsum"):
        med = measure(name, rounds)
        ref = med["numpy-manual"]
        print(f"{name:12s}" + "  ".join(f"{k} {t * 1e3:.1f} ms {t / ref:.2f}x"
                                        for k, t in med.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
