"""What the benchmark prints and writes: the gradient and timing tables, the JSON record and a
PNG chart (when matplotlib is installed; otherwise a note says it was skipped).

Imports the standard library, and matplotlib inside `write_chart` only.
"""

from __future__ import annotations

import json
import os


def _ms(s):
    return "-" if s is None else f"{s * 1e3:.3f}" if s < 0.01 else f"{s * 1e3:.2f}"


def _mb(rec):
    if rec.get("peak_bytes") is None:
        return "-"
    return f"{rec['peak_bytes'] / 2**20:.2f}"


def table(results) -> str:
    """One row per workload and contender: medians, spread, ratios, first call, memory."""
    head = ("workload", "contender", "median ms", "IQR %", "reps", "x manual", "cpu x",
            "us/step", "first ms", "peak MiB", "grad rel", "")
    rows = [head]
    for r in results:
        if r["status"] != "ok" or "median_s" not in r:
            rows.append((r["workload"], r["contender"], r["status"], *[""] * 8, r["note"][:70]))
            continue
        iqr = 100 * (r["p75_s"] - r["p25_s"]) / r["median_s"]
        grad = r.get("grad_max_rel")
        flag = "" if r.get("grad_ok") in (True, None) else "GRAD MISMATCH"
        if r["contender"].startswith("jax"):
            flag = (flag + f" compile+trace {r['first_call_extra_s'] * 1e3:.0f} ms").strip()
        rows.append((r["workload"], r["contender"], _ms(r["median_s"]), f"{iqr:.0f}",
                     str(r["reps"]), "-" if r.get("ratio") is None else f"{r['ratio']:.2f}",
                     "-" if r.get("cpu_ratio") is None else f"{r['cpu_ratio']:.2f}",
                     f"{r['us_per_step']:.2f}", _ms(r["first_call_s"]), _mb(r),
                     "-" if grad is None else f"{grad:.1e}", flag))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for k, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i < 2 or i == len(row) - 1 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            lines.append("-" * len(lines[0]))
    lines.append("x manual: median / numpy-manual's median in this run. peak MiB: tracemalloc, "
                 "one forward+backward, above what was allocated before\n"
                 "(torch and JAX allocate outside tracemalloc's view: '-'). IQR %: "
                 "interquartile range / median.\n"
                 "cpu x: the same ratio of process CPU time (all threads), which other "
                 "processes on the machine disturb less than wall time.")
    return "\n".join(lines)


def write_json(path, payload):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=1, default=float)


def write_chart(path, results) -> str:
    """Ratios to numpy-manual, one panel per workload (log scale). Returns what happened."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "chart skipped: matplotlib is not installed"
    workloads = list(dict.fromkeys(r["workload"] for r in results))
    timed = [r for r in results if r.get("ratio")]
    if not timed:
        return "chart skipped: nothing was timed"
    cols = min(4, len(workloads))
    rows = -(-len(workloads) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 0.35 * 10 * rows + 1),
                             squeeze=False)
    for ax, w in zip(axes.flat, workloads):
        rs = [r for r in timed if r["workload"] == w]
        names = [r["contender"] for r in rs]
        ratios = [r["ratio"] for r in rs]
        colors = ["tab:orange" if n.startswith("scanlib") else
                  "tab:gray" if n.startswith("numpy") else "tab:blue" for n in names]
        ax.barh(range(len(rs)), ratios, color=colors)
        ax.set_yticks(range(len(rs)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no crowded labels
        ax.axvline(1.0, color="k", lw=0.8)
        for i, v in enumerate(ratios):
            ax.text(v, i, f" {v:.2f}", va="center", fontsize=7)
        ref = next((r for r in rs if r["contender"] == "numpy-manual"), None)
        ax.set_title(f"{w}" + (f" (manual {ref['median_s'] * 1e3:.2f} ms)" if ref else ""),
                     fontsize=9)
    for ax in list(axes.flat)[len(workloads):]:
        ax.axis("off")
    fig.suptitle("forward + backward time / numpy-manual (lower is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"chart: {path}"


def _find(results, workload, contender):
    return next((r for r in results if r["workload"] == workload
                 and r["contender"] == contender and "median_s" in r), None)


def targets(results) -> list:
    """The performance targets for scanlib-scan (and scanlib-loop), checked against this run.

    Each entry: {"target", "value", "met"} (met is None where a number is missing).
    """
    out = []

    def check(text, value, limit, fmt):
        out.append({"target": text, "value": None if value is None else fmt.format(value),
                    "met": None if value is None else bool(value <= limit)})

    def field(w, c, key):
        r = _find(results, w, c)
        return None if r is None else r.get(key)

    for w in ("rnn", "rnn-large", "lstm"):
        check(f"{w}: scanlib-scan <= 1.0x numpy-manual", field(w, "scanlib-scan", "ratio"),
              1.0, "{:.2f}x")
    check("linrec: scanlib-scan <= 1.5x numpy-manual", field("linrec", "scanlib-scan", "ratio"),
          1.5, "{:.2f}x")
    check("cumsum: scanlib-scan <= 1 us/step", field("cumsum", "scanlib-scan", "us_per_step"),
          1.0, "{:.2f} us/step")
    mem, ref = field("rnn", "scanlib-scan", "peak_bytes"), field("rnn", "numpy-manual",
                                                                "peak_bytes")
    check("rnn: scanlib-scan peak memory <= 1.2x numpy-manual",
          mem / ref if mem is not None and ref else None, 1.2, "{:.2f}x")
    extra = field("rnn", "scanlib-scan", "first_call_extra_s")
    check("rnn: scanlib-scan first call <= 10 ms more than the median",
          None if extra is None else extra * 1e3, 10.0, "{:+.1f} ms")
    t1 = field("rnn-t1", "scanlib-scan", "median_s")
    check("rnn-t1: one scan call (T=1, fresh closure) <= 1 ms",
          None if t1 is None else t1 * 1e3, 1.0, "{:.2f} ms")
    for w in dict.fromkeys(r["workload"] for r in results):
        loop = field(w, "scanlib-loop", "median_s")
        for peer in ("autograd", "mygrad"):
            other = field(w, peer, "median_s")
            if loop is not None and other is not None:
                check(f"{w}: scanlib-loop faster than {peer}", loop / other, 1.0,
                      "{:.2f}x " + peer)
    return out


def targets_text(checks) -> str:
    mark = {True: "met ", False: "MISS", None: "n/a "}
    return "\n".join(f"  [{mark[c['met']]}] {c['target']}: {c['value'] or 'not measured'}"
                     for c in checks)


def markdown(payload) -> str:
    """The run as Markdown: where it ran, then one table (for NOTES.md or the README)."""
    m, th = payload["machine"], payload["threads"]
    pools = th["pools"]
    pool_s = (", ".join(f"{p['internal_api']} {p['version']} x{p['num_threads']}" for p in pools)
              if isinstance(pools, list) else pools)
    git = m.get("git") or {}
    modified = git.get("modified_files")
    code = f"code at commit {git.get('commit', '?')}" + (
        f", modified: {', '.join(modified)}" if modified else "")
    where = (f"{m['cpu']}, {m['usable_cpus']} usable CPUs, {m['platform']}, Python "
             f"{m['python']}; threads {th['requested']} ({pool_s}); load average "
             f"{m['load_average_at_start']} at start, {m.get('load_average_at_end')} at end.")
    head = ("| workload | contender | median ms | IQR % | x manual | cpu x | us/step | "
            "first ms | peak MiB | grad rel |")
    lines = [f"`{payload['command'].strip()}` ({payload['created']}; {code})", "", where, "",
             head, "|---|---|" + "---:|" * 8]
    for r in payload["results"]:
        if "median_s" not in r:
            lines.append(f"| {r['workload']} | {r['contender']} | {r['status']}: "
                         f"{r['note'][:60]} | | | | | | | |")
            continue
        iqr = 100 * (r["p75_s"] - r["p25_s"]) / r["median_s"]
        lines.append(
            f"| {r['workload']} | {r['contender']} | {_ms(r['median_s'])} | {iqr:.0f} | "
            f"{r['ratio']:.2f} | {r.get('cpu_ratio') or 0:.2f} | {r['us_per_step']:.2f} | "
            f"{_ms(r['first_call_s'])} | {_mb(r)} | {r.get('grad_max_rel', 0):.1e} |")
    if payload.get("targets"):
        mark = {True: "met", False: "MISS", None: "n/a"}
        lines += ["", "Performance targets in this run:", ""]
        lines += [f"- {mark[c['met']]}: {c['target']}: {c['value'] or 'not measured'}"
                  for c in payload["targets"]]
    return "\n".join(lines) + "\n"
