"""scanlib.distributed's allreduce: the leaves of each dtype packed into one buffer (one
MPI_Allreduce per dtype) against one MPI_Allreduce per leaf, and the cost of the layout check
every call makes. Run under MPI with 2 ranks (it prints on rank 0):

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpi4py bench/allreduce_packing.py

Trees: the char LM's LSTM parameters (6 float64 leaves, 27k numbers), 64 small leaves of 100
numbers each, and 4 large leaves of 250k numbers each. Times are medians of 5 repeats of 50
calls, after a barrier, in microseconds per call (rank 0's clock).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

import scanlib.distributed as dist

COMM = dist._comm(None, "bench")
TREES = {
    "lstm params (6 leaves, 27k)": [np.ones((96, 256)), np.ones((64, 256)), np.ones(256),
                                    np.ones((64, 96)), np.ones(96), np.ones((64,))],
    "64 small leaves (100 each)": [np.ones(100) for _ in range(64)],
    "4 large leaves (250k each)": [np.ones(250_000) for _ in range(4)],
}


def timed(fn, calls=50, repeats=5):
    out = []
    for _ in range(repeats):
        dist.barrier()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t) / calls)
    return 1e6 * float(np.median(out))


def main() -> int:
    rank, size = dist.rank(), dist.size()
    rows = []
    for name, leaves in TREES.items():
        packed = timed(lambda ls=leaves: dist.reduce_arrays(ls, "sum", COMM, packed=True))
        per_leaf = timed(lambda ls=leaves: dist.reduce_arrays(ls, "sum", COMM, packed=False))
        whole = timed(lambda ls=leaves: dist.allreduce(ls, op="sum"))
        rows.append((name, packed, per_leaf, whole))
    check = timed(lambda: dist._agree(COMM, "allreduce", ("bench",), dict, None))
    if rank == 0:
        print(f"{size} ranks, load average {os.getloadavg()[0]:.2f}; microseconds per call")
        print(f"{'tree':<30} {'packed':>9} {'per leaf':>9} {'allreduce()':>12}")
        for name, packed, per_leaf, whole in rows:
            print(f"{name:<30} {packed:9.1f} {per_leaf:9.1f} {whole:12.1f}")
        print(f"the layout check alone (a 24-byte allreduce): {check:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
