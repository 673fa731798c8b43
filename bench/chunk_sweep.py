"""How the scan loop's chunk budget trades time against memory.

    python -m bench.chunk_sweep                       # rnn, lstm, rnn-large, linrec
    python -m bench.chunk_sweep --workloads rnn --reps 20

The compiled loop runs carry-independent and deferred work for a chunk of steps at once, with
chunk temporaries of at most `executor.CHUNK_BYTES` (a floor of MIN_CHUNK steps). This times
scanlib-scan at several budgets, interleaved in one process, as a ratio to the 1 MiB budget,
and measures each budget's peak extra memory (tracemalloc, one call, MiB). Imports NumPy,
scanlib and bench's own modules.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

from . import env

BUDGETS = (1 << 18, 1 << 19, 1 << 20, 1 << 21)
REFERENCE = 1 << 20


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.chunk_sweep", description=__doc__)
    ap.add_argument("--workloads", default="rnn,lstm,rnn-large,linrec")
    ap.add_argument("--reps", type=int, default=12, help="timed calls per budget")
    args = ap.parse_args(argv)
    env.set_threads(1)
    from .harness import peak_extra_bytes
    from .scanlib_impl import build_scan
    from .workloads import BY_NAME, make_data

    executor = importlib.import_module("scanlib.scan.executor")
    default = executor.CHUNK_BYTES
    print(f"machine: {env.machine_info()}; load average {env.load_average()}; 1 BLAS thread")
    print(f"time / time at {REFERENCE >> 10} KiB (median of {args.reps}), peak MiB; "
          f"the library's budget is {default >> 10} KiB")
    try:
        for name in args.workloads.split(","):
            wl = BY_NAME[name]
            run = build_scan(wl, *make_data(wl, "full")).run
            times, peaks = {b: [] for b in BUDGETS}, {}
            for b in BUDGETS:
                executor.CHUNK_BYTES = b
                run()
                peaks[b] = peak_extra_bytes(run) / 2**20
            for _ in range(args.reps):
                for b in BUDGETS:
                    executor.CHUNK_BYTES = b
                    t0 = time.perf_counter()
                    run()
                    times[b].append(time.perf_counter() - t0)
            ref = statistics.median(times[REFERENCE])
            cells = "  ".join(f"{b >> 10:>5} KiB {statistics.median(times[b]) / ref:5.3f} "
                              f"{peaks[b]:6.2f} MiB" for b in BUDGETS)
            print(f"{name:10} {cells}   ({REFERENCE >> 10} KiB: {ref * 1e3:.2f} ms)")
    finally:
        executor.CHUNK_BYTES = default
    print(f"command: python -m bench.chunk_sweep --workloads {args.workloads} "
          f"--reps {args.reps}")


if __name__ == "__main__":
    main()
