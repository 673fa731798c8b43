"""`python -m bench`: every workload for every contender, in one process, interleaved.

Parses the arguments and sets the thread count before NumPy is imported; the measurement is in
harness.py, the output in report.py.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes; runs in seconds")
    p.add_argument("--size", choices=("full", "quick", "tiny"), default=None,
                   help="problem sizes (default full; --quick means quick)")
    p.add_argument("--workloads", default=None, help="comma-separated names (default: all)")
    p.add_argument("--contenders", default=None, help="comma-separated names (default: all)")
    p.add_argument("--threads", type=int, default=1, help="BLAS/XLA/torch threads (default 1)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timed calls per contender and workload (2, quick 0.1)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls after the first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compiler", choices=("numpy", "numba", "auto"), default=None,
                   help="scanlib's loop compiler (default: the library's, auto where numba "
                        "is installed); under auto, timing waits for the background compiles")
    p.add_argument("--jit", action="store_true",
                   help="scanlib-scan and scanlib-assoc under scanlib.jit")
    p.add_argument("--out", default=os.path.join(HERE, "results"),
                   help="folder for the JSON and PNG (default bench/results)")
    p.add_argument("--no-chart", action="store_true")
    p.add_argument("--list", action="store_true", help="list workloads and contenders")
    args = p.parse_args(argv)
    if args.size is None:
        args.size = "quick" if args.quick else "full"
    return args


def _names(arg, known, what):
    if arg is None:
        return tuple(known)
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    bad = [n for n in names if n not in known]
    if bad:
        raise SystemExit(f"unknown {what} {', '.join(bad)}; choose from {', '.join(known)}")
    return names


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from . import env

    how = env.set_threads(args.threads)  # before NumPy is imported, where possible
    from . import harness, report, scanlib_impl
    from .workloads import WORKLOADS

    known_w = [w.name for w in WORKLOADS]
    known_c = [c.name for c in harness.CONTENDERS]
    if args.list:
        for w in WORKLOADS:
            print(f"workload  {w.name:10s} {w.dtype:8s} {w.dims(args.size)}  {w.note}")
        for c in harness.CONTENDERS:
            print(f"contender {c.name:14s} {c.available() or 'available'}  {c.note}")
        return 0
    quick = args.size != "full"
    cfg = harness.Config(
        size=args.size, workloads=_names(args.workloads, known_w, "workload"),
        contenders=_names(args.contenders, known_c, "contender"),
        budget=args.budget if args.budget is not None else (0.1 if quick else 2.0),
        warmup=args.warmup if args.warmup is not None else (1 if quick else 2),
        min_reps=3 if quick else 5, max_reps=30 if quick else 200, seed=args.seed)
    if harness.REFERENCE not in cfg.contenders:
        cfg.contenders = (harness.REFERENCE, *cfg.contenders)  # ratios and agreement need it
    if any(c.startswith("torch") for c in cfg.contenders) and not harness.BY_CONTENDER[
            "torch-loop"].available():
        env.set_torch_threads(args.threads)
    machine = env.machine_info()
    threads = env.thread_info(args.threads, how)
    print(env.describe(machine, threads), flush=True)
    if any(c.startswith("scanlib") for c in cfg.contenders):
        env.tier_from([args.compiler] * (args.compiler is not None) + ["jit"] * args.jit)
        scanlib_impl.JIT[0] = args.jit
    warnings = [w for w in [env.busy_warning(machine, machine["load_average_at_start"])] if w]

    t0 = time.perf_counter()
    out = harness.run(cfg)
    results = out["results"]
    print("\n" + report.table(results))
    checks = report.targets(results)
    scope = "" if args.size == "full" else " (they are stated for the full sizes)"
    print(f"\nscanlib-scan's performance targets, this run{scope}:\n" + report.targets_text(checks))
    machine["load_average_at_end"] = env.load_average()
    end = env.busy_warning(machine, machine["load_average_at_end"])
    warnings += [end] if end and not warnings else []
    for w in warnings:
        print(w)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s; command: python -m bench "
          + " ".join(sys.argv[1:] if argv is None else argv))

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    payload = {
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "created": stamp, "size": args.size, "machine": machine, "threads": threads,
        "config": {k: v for k, v in vars(cfg).items() if k != "verbose"},
        "tolerance": harness.TOLERANCE, "skipped": out["skipped"], "warnings": warnings,
        "targets": checks, "results": results,
    }
    for name in (f"bench-{args.size}-{stamp}", f"latest-{args.size}"):
        report.write_json(os.path.join(args.out, name + ".json"), payload)
    with open(os.path.join(args.out, f"latest-{args.size}.md"), "w") as f:
        f.write(report.markdown(payload))
    print(f"json: {os.path.join(args.out, f'latest-{args.size}.json')} (and .md)")
    if not args.no_chart:
        print(report.write_chart(os.path.join(args.out, f"latest-{args.size}.png"), results))
    bad = [r for r in results if r.get("grad_ok") is False or r["status"] == "error"]
    for r in bad:
        print(f"PROBLEM: {r['workload']} / {r['contender']}: "
              f"{r['note'] if r['status'] == 'error' else 'gradients disagree'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
