"""Writing golden files, or checking them (`--check`): shared by gen_loops.py and
gen_linearizations.py."""

from __future__ import annotations

import os
import sys


def write_or_check(argv, out_dir, names, render, script):
    """Render each name's file into out_dir (`render(name)` gives its text); with --check in
    argv, write nothing and return 1 when a file differs or is missing, or when a file no name
    writes is left over (a renamed or removed body), saying how to regenerate them."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    os.makedirs(out_dir, exist_ok=True)
    here = os.path.dirname(out_dir)
    stale = [os.path.join(os.path.basename(out_dir), f) for f in sorted(os.listdir(out_dir))
             if f.endswith(".txt") and f[:-4] not in names]
    if stale and not check:
        for f in stale:
            os.remove(os.path.join(here, f))
        stale = []
    for name in names:
        path = os.path.join(out_dir, f"{name}.txt")
        new = render(name)
        old = open(path).read() if os.path.exists(path) else None
        if new != old:
            stale.append(os.path.relpath(path, here))
            if not check:
                with open(path, "w") as fh:
                    fh.write(new)
    if check and stale:
        print(f"out of date: {', '.join(stale)}. If the change is intended, run python "
              f"tests/golden/{script} and review the diff of tests/golden/"
              f"{os.path.basename(out_dir)}/ before committing it", file=sys.stderr)
        return 1
    return 0
