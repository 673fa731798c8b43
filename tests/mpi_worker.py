"""Run by tests/test_distributed.py under `mpiexec -n 2 python -m mpi4py`: the checks that need
two processes. Each check prints `ok <name> rank <r>` on success; a failed check raises, which
python -m mpi4py turns into an abort of every rank, so the test fails instead of hanging.
"""

import sys

import numpy as np

import scanlib as sl
import scanlib.distributed as dist

rank, size = dist.rank(), dist.size()
assert size == 2, f"expected 2 ranks, got {size}: mpiexec and mpi4py use different MPIs?"


def ok(name):
    print(f"ok {name} rank {rank}", flush=True)


def raises(kind, words, f):
    try:
        f()
    except kind as e:
        for w in words:
            assert w in str(e), f"{w!r} not in: {e}"
        return str(e)
    raise AssertionError(f"no {kind.__name__} raised")


# --- averaged shard gradients are the full-batch gradient ------------------------------------
rng = np.random.default_rng(0)  # the same data on every rank
B, T, H = 8, 6, 5
xs_all = rng.normal(size=(T, B, 3))
ys_all = rng.normal(size=(B,))
params = {"W": sl.tensor(rng.normal(size=(H, H)) * 0.4), "U": sl.tensor(rng.normal(size=(3, H))),
          "v": sl.tensor(rng.normal(size=(H,)))}


def loss(p, xs, ys):
    """The mean over a batch of an RNN's squared error: a scan over time."""
    def step(h, x):
        h = sl.tanh(h @ p["W"] + x @ p["U"])
        return h, None
    h, _ = sl.scan(step, sl.zeros((xs.shape[1], H)), sl.tensor(xs))
    return sl.mean((h @ p["v"] - sl.tensor(ys)) ** 2)


shard = slice(rank * B // 2, (rank + 1) * B // 2)
g_shard = sl.grad(loss)(params, xs_all[:, shard], ys_all[shard])
g_mean = dist.allreduce(g_shard, op="mean")
g_full = sl.grad(loss)(params, xs_all, ys_all)
for k in params:
    err = np.max(np.abs(g_mean[k].numpy() - g_full[k].numpy()))
    scale = np.max(np.abs(g_full[k].numpy()))
    assert err <= 1e-12 * scale, (k, err, scale)
    assert g_mean[k].dtype == np.float64
assert not np.allclose(g_shard["W"].numpy(), g_full["W"].numpy())  # the shards differ
ok("averaged shard gradients")

# packed (one buffer per dtype) and per-leaf reductions agree bit for bit, inputs untouched
leaves = [np.full((2, 3), rank + 1.0), np.arange(4) * (rank + 1), np.float32([rank, 2.5])]
copies = [x.copy() for x in leaves]
packed = dist.reduce_arrays(leaves, "sum", dist._comm(None, "test"), packed=True)
per_leaf = dist.reduce_arrays(leaves, "sum", dist._comm(None, "test"), packed=False)
for a, b, x, c in zip(packed, per_leaf, leaves, copies):
    assert a.dtype == b.dtype == x.dtype and np.array_equal(a, b) and np.array_equal(x, c)
assert np.array_equal(packed[0], np.full((2, 3), 3.0)) and list(packed[1]) == [0, 3, 6, 9]
out = dist.allreduce({"a": leaves[0], "n": 3, "f": np.float32(rank)}, op="max")
assert np.array_equal(out["a"], np.full((2, 3), 2.0)) and out["n"] == 3
assert out["f"] == 1 and out["f"].dtype == np.float32
ok("sum max and packing")

# --- broadcast: rank 1's values everywhere, Tensors stay Tensors ------------------------------
mine = {"w": sl.tensor([rank + 0.5, -rank]), "k": np.array([rank], dtype=np.int32)}
got = dist.broadcast(mine, root=1)
assert isinstance(got["w"], sl.Tensor) and got["w"].tolist() == [1.5, -1.0]
assert got["k"].dtype == np.int32 and got["k"].tolist() == [1]
ok("broadcast")

# --- the VJPs: allreduce-sum's is the sum of the cotangents; broadcast's goes to root ---------
c, w = rank + 2.0, 10.0 ** rank  # different on each rank: 2, 1 and 3, 10


def f(x):
    y = dist.allreduce({"y": c * x}, op="sum")["y"]
    return (w * y).sum()


gx = sl.grad(f)(sl.tensor([1.0, 2.0]))
assert gx.tolist() == [c * 11.0] * 2, gx  # d/dx_r of sum_r' w_r' (sum_r c_r x_r)
gb = sl.grad(lambda x: (w * dist.broadcast(x * x, root=0)).sum())(sl.tensor([1.0, 3.0]))
assert gb.tolist() == ([22.0, 66.0] if rank == 0 else [0.0, 0.0]), gb
ok("vjp")

# --- errors on every rank, never a hang: each check is followed by a collective that works ----
text = raises(TypeError, ["tree['b']", "float64[2]", "float64[3]", "shapes differ", "rank 1"],
              lambda: dist.allreduce({"a": np.ones(2), "b": np.ones(2 + rank)}))
assert "on rank 0 tree['b'] is float64[2] and on rank 1 it is float64[3]" in text, text
raises(TypeError, ["dtypes differ"],
       lambda: dist.allreduce([np.ones(2, dtype=[np.float64, np.float32][rank])]))
raises(TypeError, ["structures differ"],
       lambda: dist.allreduce({"a": 1.0} if rank == 0 else {"a": 1.0, "b": 2.0}))
raises(TypeError, ["op='sum'", "op='max'"],
       lambda: dist.allreduce(np.ones(2), op=["sum", "max"][rank]))
# a problem on one rank only: that rank says what, the other which rank failed
raises(ValueError, ["op='avg' is not known"] + (["failed on rank 1"] if rank == 0 else []),
       lambda: dist.allreduce(np.ones(2), op=["sum", "avg"][rank]))
raises(ValueError, ["root=5"], lambda: dist.broadcast(np.ones(2), root=[0, 5][rank]))
assert dist.allreduce(np.array([1.0]))[0] == 2.0  # still in step
ok("mismatches raise on every rank")

# --- a sub-communicator: each rank alone ------------------------------------------------------
from mpi4py import MPI

alone = MPI.COMM_WORLD.Split(color=rank, key=0)
assert dist.size(alone) == 1 and dist.allreduce(np.array([rank + 1.0]), comm=alone)[0] == rank + 1
alone.Free()
dist.barrier()
ok("sub-communicator")
sys.stdout.flush()
