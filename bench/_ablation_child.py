"""Child of bench/ablation.py: time scanlib-scan and numpy-manual on some workloads with the
scanlib found at argv[1]; print {workload: ratio} as one JSON line.

Loads bench's workloads.py and numpy_manual.py from this tree by file path, so that the
revision under test supplies only scanlib.
"""

import functools
import importlib.util
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[1])

import numpy as np  # noqa: E402

import scanlib as sl  # noqa: E402


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


W, M = _load("workloads"), _load("numpy_manual")
# Revisions before scanlib.vdot (9f7f186) write the loss as sum(a * b), as they were measured.
_vdot = getattr(sl, "vdot", None) or (lambda a, b: sl.sum(a * b))
OPS = type("ops", (), {"tanh": staticmethod(sl.tanh), "sigmoid": staticmethod(sl.sigmoid),
                       "vdot": staticmethod(_vdot), "stack": staticmethod(sl.stack)})


def scan_call(wl, inputs, consts):
    c = W.map_tree(sl.tensor, consts)

    def f(a):
        def body(carry, x):
            return W.step(wl.kind, OPS, a["params"], carry, x)

        carry, ys = sl.scan(body, a["init"], a["xs"])
        return W.loss(OPS, ys, carry, c)

    vg = sl.value_and_grad(f)
    return lambda: vg(inputs)


def main():
    out = {}
    for name in sys.argv[2].split(","):
        wl = W.BY_NAME[name]
        inputs, consts = W.make_data(wl, "full")
        fns = {"scan": scan_call(wl, inputs, consts),
               "manual": functools.partial(getattr(M, wl.kind + "_manual"), inputs, consts)}
        times = {k: [] for k in fns}
        for f in fns.values():
            f()
        for _ in range(int(sys.argv[3])):
            for k, f in fns.items():
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
        out[name] = float(np.median(times["scan"]) / np.median(times["manual"]))
    print(json.dumps(out))


main()
