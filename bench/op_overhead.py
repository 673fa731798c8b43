"""Per-operation cost of bind on 4-vectors, for comparing two checkouts side by side:
`python bench/op_overhead.py OLD_CHECKOUT` and `python bench/op_overhead.py NEW_CHECKOUT`,
alternated (the scanlib imported is the one under the path given)."""
import sys
import timeit

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402

import scanlib as sl  # noqa: E402

assert sl.__file__.startswith(sys.argv[1]), sl.__file__
x = sl.tensor(np.ones(4))
y = sl.tensor(np.ones(4))
for name, stmt in [("mul(t, t)", lambda: x * y), ("mul(t, 2.0)", lambda: x * 2.0),
                   ("exp(t)", lambda: sl.exp(x)), ("where(t > 0, t, 0.0)",
                                                    lambda: sl.where(x > 0, x, 0.0))]:
    best = min(timeit.repeat(stmt, number=20000, repeat=7)) / 20000
    print(f"{name:22s} {best * 1e6:.2f} us")
