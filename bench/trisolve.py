"""Micro-benchmark of the triangular solve's forward (decompositions._triangular_impl, the
work one triangular_solve equation does in a replayed loop), by substitution and by LU on the
masked triangle (substitution switched off), rounds alternating, and of eager
scanlib.linalg.solve_triangular, on 2x2 to 32x32 lower systems, one matrix and a batch of 64,
float64, b [..., n, 1]. Prints microseconds per call (min of 7 rounds):
`python -m bench.trisolve`. With `ekf [quick|full] [TIER]`: the ported EKF (bench/ports.py,
value and gradient, jit tier by default) with and without substitution, calls alternating,
min and median of 7 rounds each."""

import statistics
import sys
import time
import timeit

import numpy as np

import scanlib as sl
from scanlib.ops import decompositions as D


def _case(n, batch, rng):
    a = rng.standard_normal(batch + (n, n)) + 4 * np.eye(n)
    b = rng.standard_normal(batch + (n, 1))
    return a, b


def main():
    rng = np.random.default_rng(0)
    saved = D._SUBSTITUTION_MAX_N, D._SUBSTITUTION_MAX_N_STACKED
    print(f"{'n':>3} {'batch':>6} {'subst us':>9} {'lu us':>9} {'lu/sub':>6} {'eager us':>9}"
          f"  (eager: substitution up to n={saved[0]}, stacked {saved[1]})")
    for n in (2, 4, 8, 16, 32):
        for batch in ((), (64,)):
            a, b = _case(n, batch, rng)
            ta, tb = sl.tensor(a), sl.tensor(b)
            number, times = 1000, {"subst": [], "lu": [], "eager": []}
            for _ in range(7):
                for name, limit in (("subst", 64), ("lu", 0)):
                    D._SUBSTITUTION_MAX_N = D._SUBSTITUTION_MAX_N_STACKED = limit
                    times[name].append(timeit.timeit(
                        lambda a=a, b=b: D._triangular_impl(a, b, True, False), number=number))
                D._SUBSTITUTION_MAX_N, D._SUBSTITUTION_MAX_N_STACKED = saved
                times["eager"].append(timeit.timeit(
                    lambda ta=ta, tb=tb: sl.linalg.solve_triangular(ta, tb, lower=True),
                    number=number))
            us = {k: min(v) / number * 1e6 for k, v in times.items()}
            print(f"{n:>3} {str(batch[0] if batch else 1):>6} {us['subst']:9.2f} "
                  f"{us['lu']:9.2f} {us['lu'] / us['subst']:6.2f} {us['eager']:9.2f}")


def ekf(size="quick", tier="jit"):
    from bench.ports import scanlib_runs

    run = scanlib_runs("ekf", size, [tier])[tier]
    run()
    saved = D._SUBSTITUTION_MAX_N, D._SUBSTITUTION_MAX_N_STACKED
    times = {"subst": [], "lu": []}
    for _ in range(7):
        for name, limits in (("subst", saved), ("lu", (0, 0))):
            D._SUBSTITUTION_MAX_N, D._SUBSTITUTION_MAX_N_STACKED = limits
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    D._SUBSTITUTION_MAX_N, D._SUBSTITUTION_MAX_N_STACKED = saved
    for name, t in times.items():
        print(f"ekf {tier} ({size}) {name:5s}: min {min(t) * 1e3:8.2f} ms, "
              f"median {statistics.median(t) * 1e3:8.2f} ms")
    print(f"lu / subst: min {min(times['lu']) / min(times['subst']):.3f}, median "
          f"{statistics.median(times['lu']) / statistics.median(times['subst']):.3f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["ekf"]:
        ekf(*sys.argv[2:])
    else:
        main()
