"""The measurement: for each workload, build every contender, time its first call, check its
gradients against numpy-manual, then time forward + backward interleaved (round robin, the
order rotating each round) and measure the peak extra memory of one call with tracemalloc.

Imports NumPy and bench's own modules; the contenders' libraries only through them.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from . import env, numpy_contenders, peers, scanlib_impl
from .workloads import WORKLOADS, make_data

REFERENCE = "numpy-manual"
CONTENDERS = [*numpy_contenders.CONTENDERS, *scanlib_impl.CONTENDERS, *peers.CONTENDERS]
BY_CONTENDER = {c.name: c for c in CONTENDERS}
# Gradients agree when max|g - g_ref| / max|g_ref| stays under this, array by array.
TOLERANCE = {"float32": 1e-4, "float64": 1e-9}


@dataclass
class Config:
    size: str = "full"
    workloads: tuple = tuple(w.name for w in WORKLOADS)
    contenders: tuple = tuple(c.name for c in CONTENDERS)
    budget: float = 2.0  # seconds of timed calls per contender and workload
    min_reps: int = 5
    max_reps: int = 200
    warmup: int = 2
    slow_limit: float = 20.0  # a contender whose first call is slower is timed once only
    seed: int = 0
    verbose: bool = True


def _say(cfg, *args):
    if cfg.verbose:
        print(*args, flush=True)


def rel_diff(got: dict, ref: dict):
    """(largest max|g - r| / max|r| over the arrays, the array it came from)."""
    worst, where = 0.0, None
    for name, r in ref.items():
        if name not in got:
            return float("inf"), f"{name} missing"
        g, r = np.asarray(got[name], np.float64), np.asarray(r, np.float64)
        if g.shape != r.shape:
            return float("inf"), f"{name}: shape {g.shape}, expected {r.shape}"
        if r.size == 0:
            continue
        scale = max(float(np.max(np.abs(r))), np.finfo(np.float64).tiny)
        d = float(np.max(np.abs(g - r))) / scale
        if not d <= worst:  # also catches NaN
            worst, where = d, name
    return worst, where


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def median_cpu_time(fn, reps=7):
    """Median process CPU seconds of fn over reps calls, after two warm-up calls."""
    fn()
    fn()
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return float(np.median(times))


def median_cpu_times(fns: dict, reps=7) -> dict:
    """{name: median process CPU seconds} of each fn over reps interleaved rounds, after two
    warm-up rounds (a busy machine's drift then hits them alike)."""
    for _ in range(2):
        for fn in fns.values():
            fn()
    times = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t0 = time.process_time()
            fn()
            times[k].append(time.process_time() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def peak_extra_bytes(fn) -> int:
    """Peak traced memory during one call, above what was allocated before it."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
        del out
    finally:
        if started:
            tracemalloc.stop()
    return peak - before


def available_contenders(names):
    chosen, skipped = [], []
    for name in names:
        c = BY_CONTENDER[name]
        reason = c.available()
        if reason:
            skipped.append({"contender": name, "reason": reason})
        else:
            chosen.append(c)
    return chosen, skipped


def _build_and_check(cfg, wl, contenders, inputs, consts):
    """Build each runner, time its first call, and compare its gradients with the reference."""
    T = wl.dims(cfg.size)["T"]
    records, runners, grads = {}, {}, {}
    for c in contenders:
        rec = records[c.name] = {"workload": wl.name, "contender": c.name, "dtype": wl.dtype,
                                 "T": T, "status": "ok", "note": c.note}
        reason = c.supports(wl) or c.too_slow(wl, cfg.size)
        if reason:
            rec.update(status="skipped", note=reason)
            continue
        try:
            runner = c.build(wl, inputs, consts)
            rec["first_call_s"], out = _timed(runner.run)
            rec["loss"], grads[c.name] = runner.to_numpy(out)
            del out
        except Exception as e:  # noqa: BLE001 - a contender failing is a result, not a crash
            rec.update(status="error", note=f"{type(e).__name__}: {e}"[:400])
            _say(cfg, f"  {c.name}: ERROR {rec['note']}")
            continue
        runners[c.name] = runner
    ref = grads.get(REFERENCE)
    tol = TOLERANCE[wl.dtype]
    for name, g in grads.items():
        rec = records[name]
        if ref is None:
            rec["grad_ok"] = None
            continue
        rec["grad_max_rel"], rec["grad_worst"] = rel_diff(g, ref)
        ref_loss = records[REFERENCE]["loss"]
        rec["loss_rel"] = abs(rec["loss"] - ref_loss) / max(abs(ref_loss), 1e-300)
        rec["grad_ok"] = bool(rec["grad_max_rel"] <= tol)
        _say(cfg, f"  grads {name:14s} max rel diff {rec['grad_max_rel']:.2e}"
                  f" ({rec['grad_worst']})  loss rel diff {rec['loss_rel']:.1e}"
                  f"  {'ok' if rec['grad_ok'] else f'DISAGREES (tolerance {tol:g})'}")
    return records, runners


def _time_interleaved(cfg, records, runners):
    """Warm up, then round-robin timed calls until each runner has its repetitions."""
    est, reps = {}, {}
    for name, runner in runners.items():
        first = records[name]["first_call_s"]
        if first > cfg.slow_limit:
            est[name], reps[name] = first, 0
            records[name]["note"] += f"; first call {first:.1f} s > slow limit: timed once"
            continue
        t = first
        for _ in range(cfg.warmup):
            t, out = _timed(runner.run)
            del out
        est[name] = t
        reps[name] = int(min(cfg.max_reps, max(cfg.min_reps, cfg.budget / max(t, 1e-9))))
        if t * cfg.min_reps > 3 * cfg.budget:  # too slow for min_reps within reason
            reps[name] = max(1, int(3 * cfg.budget / t))
    env.settle(*(r.run for r in runners.values()))  # under "auto": the kernels in, chosen
    samples = {name: [] for name in runners}
    cpu = {name: [] for name in runners}  # process CPU time: less hurt by other processes
    order = list(runners)
    rnd = 0
    while any(len(samples[n]) < reps[n] for n in order):
        k = rnd % len(order)
        for name in order[k:] + order[:k]:
            if len(samples[name]) < reps[name]:
                c0 = time.process_time()
                t, out = _timed(runners[name].run)
                cpu[name].append(time.process_time() - c0)
                del out
                samples[name].append(t)
        rnd += 1
    for name in runners:
        s = np.asarray(samples[name] or [records[name]["first_call_s"]])
        records[name].update(
            median_s=float(np.median(s)), p25_s=float(np.percentile(s, 25)),
            p75_s=float(np.percentile(s, 75)), min_s=float(s.min()), reps=len(samples[name]),
            cpu_median_s=float(np.median(cpu[name])) if cpu[name] else None)
        if not samples[name]:
            records[name]["reps"] = 1


def run_workload(cfg, wl, contenders):
    """One workload, every contender: {contender name: result record}."""
    inputs, consts = make_data(wl, cfg.size, cfg.seed)
    # One untimed call of the reference first: BLAS start-up and the first touch of memory of
    # these sizes would otherwise land in whichever first call happens to come first.
    BY_CONTENDER[REFERENCE].build(wl, inputs, consts).run()
    records, runners = _build_and_check(cfg, wl, contenders, inputs, consts)
    _time_interleaved(cfg, records, runners)
    for c in contenders:
        if c.name in runners and c.memory_visible:  # else tracemalloc's number means nothing
            records[c.name]["peak_bytes"] = peak_extra_bytes(runners[c.name].run)
    ref = records.get(REFERENCE, {}).get("median_s")
    T = wl.dims(cfg.size)["T"]
    for rec in records.values():
        if "median_s" in rec:
            rec["us_per_step"] = rec["median_s"] / T * 1e6
            rec["ratio"] = rec["median_s"] / ref if ref else None
            ref_cpu = records.get(REFERENCE, {}).get("cpu_median_s")
            if rec.get("cpu_median_s") and ref_cpu:
                rec["cpu_ratio"] = rec["cpu_median_s"] / ref_cpu
            rec["first_call_extra_s"] = rec["first_call_s"] - rec["median_s"]
    del runners
    gc.collect()
    return records


def run(cfg: Config) -> dict:
    """Every selected workload for every available contender: the records and the skips."""
    contenders, skipped = available_contenders(cfg.contenders)
    for s in skipped:
        _say(cfg, f"skipping {s['contender']}: {s['reason']}")
    results = []
    for wname in cfg.workloads:
        wl = next(w for w in WORKLOADS if w.name == wname)
        _say(cfg, f"\n== {wl.name} ({wl.dtype}, {wl.dims(cfg.size)}): {wl.note}")
        results.extend(run_workload(cfg, wl, contenders).values())
    return {"results": results, "skipped": skipped}
