"""Micro-benchmark of the triangular solve's forward (decompositions._triangular_impl, the
work one triangular_solve equation does in a replayed loop), by substitution and by LU on the
masked triangle (substitution switched off), rounds alternating, and of eager
scanlib.linalg.solve_triangular, on 2x2 to 32x32 lower systems, one matrix and a batch of 64,
float64, b [..., n, 1]. Prints microseconds per call (min of 7 rounds):
`python -m bench.trisolve`."""

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
                        lambda: D._triangular_impl(a, b, True, False), number=number))
                D._SUBSTITUTION_MAX_N, D._SUBSTITUTION_MAX_N_STACKED = saved
                times["eager"].append(timeit.timeit(
                    lambda: sl.linalg.solve_triangular(ta, tb, lower=True), number=number))
            us = {k: min(v) / number * 1e6 for k, v in times.items()}
            print(f"{n:>3} {str(batch[0] if batch else 1):>6} {us['subst']:9.2f} "
                  f"{us['lu']:9.2f} {us['lu'] / us['subst']:6.2f} {us['eager']:9.2f}")


if __name__ == "__main__":
    main()
