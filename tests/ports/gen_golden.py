"""Write (or check) JAX's results for the ported programs: golden/<name>.npz.

    python tests/ports/gen_golden.py            # every program
    python tests/ports/gen_golden.py gae vtrace
    python tests/ports/gen_golden.py --check    # compare live JAX with the stored files

Needs JAX (and optax for the programs that use it); runs in float64 (`jax_enable_x64`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ports import harness  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    failed = 0
    for name in args.names or harness.names():
        results = harness.run(name, "jax")
        path = harness.GOLDEN / f"{name}.npz"
        if args.check:
            problems = harness.compare(results, harness.read_golden(name), rtol=1e-12, atol=0)
            failed += bool(problems)
            print(f"{name}: {'; '.join(problems) or 'agrees'}")
        else:
            np.savez(path, **results)
            print(f"{name}: wrote {len(results)} arrays to {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
