"""Per-operation cost of an op on small tensors (0-d, a 2-vector, 2x2), for comparing two
checkouts side by side: `python bench/op_overhead.py OLD_CHECKOUT` and
`python bench/op_overhead.py NEW_CHECKOUT`, alternated (the scanlib imported is the one under
the path given). The best of 7 rounds, in microseconds of this process's CPU time per call
(time.process_time: on a shared machine wall time counts the waits for a core too)."""
import sys
import time
import timeit

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402

import scanlib as sl  # noqa: E402

assert sl.__file__.startswith(sys.argv[1]), sl.__file__
SHAPES = {"0-d": (), "2": (2,), "2x2": (2, 2)}
print(f"{'op':22s}" + "".join(f"{k:>9s}" for k in SHAPES) + "   (us per call)")
for name, make in [("mul(t, t)", lambda x, y: lambda: x * y),
                   ("mul(t, 2.0)", lambda x, y: lambda: x * 2.0),
                   ("exp(t)", lambda x, y: lambda: sl.exp(x)),
                   ("where(t > 0, t, 0.0)", lambda x, y: lambda: sl.where(x > 0, x, 0.0)),
                   ("t[0] / t[()]", lambda x, y: lambda: x[0] if x.ndim else x[()])]:
    row = []
    for shape in SHAPES.values():
        x = sl.tensor(np.full(shape, 0.5))
        y = sl.tensor(np.full(shape, 1.5))
        best = min(timeit.repeat(make(x, y), number=20000, repeat=7,
                                 timer=time.process_time)) / 20000
        row.append(f"{best * 1e6:9.2f}")
    print(f"{name:22s}" + "".join(row))
