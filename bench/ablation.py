"""The measured effect of each scan optimisation: the same workloads timed at several git
revisions of scanlib, interleaved, each as a ratio to numpy-manual timed in the same process.

    python -m bench.ablation                      # the revisions in REVISIONS below
    python -m bench.ablation --rounds 5 --workloads rnn,lstm

Each revision is checked out once into a git worktree under /tmp; a child process per
(round, revision) imports scanlib from there and bench's workloads from this tree. Imports
NumPy and the standard library only; the child is bench/_ablation_child.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from . import env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = "/tmp/scanlib-ablation"

# (revision, what it added). Each row's effect is its ratio against the row above.
REVISIONS = [
    ("61a3a06", "first scan: body compiled to straight-line Python, xs work hoisted, "
                "history buffers"),
    ("c23420e", "+ compiled loops reused across calls by graph fingerprint"),
    ("2807dbd", "+ chunked loop, deferred off-path work, accumulators summed per chunk"),
    ("adb6f9a", "+ carry + xs-term carries as one cumulative sum"),
    ("bd10ea7", "+ slice adjoints joined by one concatenate"),
    ("a6cdfdc", "+ in-place sums in the walk; views recomputed, not saved"),
    ("be4a2f5", "+ results written into their slots (out=), dead temporaries reused, "
                "sum's broadcast 1 not multiplied"),
    ("abf5083", "(the code at the end of the first session; LSTM gate copy into its slot)"),
    ("9f7f186", "+ scanlib.vdot for the loss; batched results into their stacks or over a "
                "dead temporary; a chunk's arrays freed before the next"),
    ("3b2ec18", "+ chunk budget 512 KiB instead of 1 MiB"),
    ("8d34ac4", "+ x[T, ..., K] @ W as one 2-d product over all rows"),
    ("84846cc", "+ W.T read per step copied once into C order"),
]


def _worktree(rev):
    path = os.path.join(WORK, rev)
    if not os.path.isdir(path):
        os.makedirs(WORK, exist_ok=True)
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-f", path, rev],
                       check=True, capture_output=True)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.ablation", description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default="rnn,rnn-large,lstm,linrec,cumsum,rnn-t1")
    ap.add_argument("--reps", type=int, default=7, help="timed calls per child and workload")
    ap.add_argument("--revisions", default=None,
                    help="comma-separated git revisions to compare instead of REVISIONS "
                         "(e.g. a before/after pair)")
    args = ap.parse_args(argv)
    child = os.path.join(ROOT, "bench", "_ablation_child.py")
    chosen = REVISIONS if args.revisions is None else [
        (r, "") for r in args.revisions.split(",")]
    revs = [(r, d, _worktree(r)) for r, d in chosen]
    ratios = {(r, w): [] for r, _, _ in revs for w in args.workloads.split(",")}
    for k in range(args.rounds):
        order = revs[k % len(revs):] + revs[:k % len(revs)]
        for rev, _, path in order:
            out = subprocess.run([sys.executable, child, path, args.workloads, str(args.reps)],
                                 capture_output=True, text=True, env=dict(os.environ),
                                 check=True).stdout
            for w, r in json.loads(out.strip().splitlines()[-1]).items():
                ratios[(rev, w)].append(r)
    print(f"machine: {env.machine_info()}; load average {env.load_average()}; 1 BLAS thread")
    wls = args.workloads.split(",")
    print("scanlib-scan / numpy-manual (median over rounds), forward + backward:")
    print(f"{'revision':9} " + " ".join(f"{w:>9}" for w in wls) + "  what it added")
    for rev, desc, _ in revs:
        cells = " ".join(f"{statistics.median(ratios[(rev, w)]):9.2f}" for w in wls)
        print(f"{rev:9} {cells}  {desc}")
    print(f"command: python -m bench.ablation --rounds {args.rounds} --workloads "
          f"{args.workloads} --reps {args.reps}"
          + (f" --revisions {args.revisions}" if args.revisions else ""))


if __name__ == "__main__":
    main()
