"""Data-parallel collectives between processes over MPI (mpi4py): rank, size, barrier, and
allreduce and broadcast of pytrees of Tensors and arrays, the leaves of each dtype in one
buffer reduced in place. Needs the `[mpi]` extra (`pip install 'scanlib-autodiff[mpi]'`);
`import scanlib` does not import it: `import scanlib.distributed as dist`.

Imports backends, tape, ops and pytree; mpi4py on first use.
"""

from __future__ import annotations

from typing import Any

import functools
import hashlib

import numpy as np

from . import backends, pytree
from .ops import zeros_like
from .ops.primitive import Primitive, bind
from .tape import Tensor
from .tape.state import STATE

__all__ = ["rank", "size", "barrier", "allreduce", "broadcast"]

OPS = ("sum", "mean", "max", "min")
_INSTALL = ("pip install 'scanlib-autodiff[mpi]' (mpi4py with an MPI library from the package "
            "index), or pip install mpi4py on a cluster whose MPI is loaded")


def _mpi():
    """mpi4py's MPI module (importing it initialises MPI), or ImportError saying how to get it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"scanlib.distributed needs mpi4py and an MPI library: {_INSTALL}. "
                          f"({type(e).__name__}: {e})") from None
    return MPI


def _comm(comm, who):
    MPI = _mpi()
    if comm is None:
        return MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm):
        raise TypeError(f"{who}: comm must be an mpi4py communicator (MPI.COMM_WORLD, or one "
                        f"made by comm.Split), got {type(comm).__name__}")
    return comm


def rank(comm=None) -> int:
    """This process's rank in comm (MPI.COMM_WORLD by default), from 0 to size(comm) - 1.

    >>> from scanlib import distributed as dist
    >>> dist.rank() < dist.size()
    True
    """
    return _comm(comm, "rank").Get_rank()


def size(comm=None) -> int:
    """The number of processes in comm (MPI.COMM_WORLD by default); 1 without mpiexec.

    >>> from scanlib import distributed as dist
    >>> dist.size()
    1
    """
    return _comm(comm, "size").Get_size()


def barrier(comm=None) -> None:
    """Wait until every process of comm (MPI.COMM_WORLD by default) has called barrier.

    >>> from scanlib import distributed as dist
    >>> dist.barrier()
    """
    _comm(comm, "barrier").Barrier()


# --- the check that every rank passes the same layout ---------------------------------------
# A rank cannot know alone that the others did not change their tree, so every call makes one
# 24-byte reduction of a fingerprint of (who, op or root, structure, shapes, dtypes) and of a
# "this rank has a problem" flag; the fingerprint of a layout is computed once and cached. Only
# when the fingerprints differ or a rank has a problem do the ranks exchange descriptions, so
# that every rank raises the same error instead of hanging in a mismatched collective.
@functools.lru_cache(maxsize=1024)
def _fingerprint(key) -> int:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2  # it and its negative fit in an int64


def _agree(comm, who, key, describe, problem):
    """Raise on every rank when a rank has a problem or the ranks' keys differ."""
    MPI = _mpi()
    fp = _fingerprint(key)
    flags = np.array([fp, -fp, problem is not None], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
    if flags[0] == -flags[1] and not flags[2]:
        return
    reports = comm.allgather((problem, describe()))
    failed = [(r, p) for r, (p, _) in enumerate(reports) if p is not None]
    if failed:
        r, (kind, text) = failed[0]
        if r == comm.Get_rank():
            raise kind(text)
        raise kind(f"{who} failed on rank {r} of {len(reports)}, so on every rank: {text}")
    raise TypeError(_mismatch(who, [d for _, d in reports]))


def _mismatch(who, descriptions) -> str:
    """Where the ranks' trees first differ, with both sides' values."""
    first = descriptions[0]
    r, other = next((r, d) for r, d in enumerate(descriptions) if d != first)
    fix = (f" Every rank must pass {who} a tree of the same structure, shapes and dtypes (a "
           "collective combines them element by element): give each rank's shard the same "
           "parameter shapes, and keep ragged data out of the tree.")
    if first["param"] != other["param"]:
        name = "op" if who == "allreduce" else "root"
        return (f"{who}: rank 0 passed {name}={first['param']!r} but rank {r} passed "
                f"{name}={other['param']!r}; every rank must pass the same {name}.")
    if first["structure"] != other["structure"]:
        return (f"{who}: the trees differ across ranks: rank 0's is {first['structure']} and "
                f"rank {r}'s is {other['structure']} (structures differ)." + fix)
    for (path, t0), (_, t1) in zip(first["leaves"], other["leaves"]):
        if t0 != t1:
            what = "shapes" if t0[0] != t1[0] else "dtypes"
            return (f"{who}: the trees differ across ranks: on rank 0 {path} is "
                    f"{_type(*t0)} and on rank {r} it is {_type(*t1)} ({what} differ)." + fix)
    return f"{who}: the trees differ across ranks (rank 0 and rank {r})." + fix


def _type(shape, dtype):
    return f"{np.dtype(dtype).name}[{','.join(map(str, shape))}]"


# --- what each rank checks alone ------------------------------------------------------------
def _leaf_problem(who, path, leaf, op):
    """Why this leaf cannot be reduced (as (exception type, message)), or None."""
    value = leaf._value if isinstance(leaf, Tensor) else leaf
    if backends.is_array(value) and backends.device_of(value) != "cpu":
        return TypeError, (
            f"{who}: {path} is on {backends.device_of(value)}; GPU collectives are not "
            "supported yet (they run on host memory through MPI). Move the tree to the host "
            "first, sl.tree.map(lambda t: t.to('cpu'), tree) (cupy.asnumpy for a CuPy array), "
            "and back with .to('cuda') after.")
    if not isinstance(value, (np.ndarray, np.generic, bool, int, float, complex)):
        return TypeError, (f"{who}: {path} is a {type(value).__name__}; the leaves must be "
                           "Tensors, NumPy arrays or Python numbers.")
    dtype = np.asarray(value).dtype
    if dtype.kind not in "biufc" or dtype.itemsize > 16 or dtype == np.float16:
        return TypeError, (f"{who}: {path} has dtype {dtype}, which MPI does not reduce; "
                           "convert it to float32 or float64 first.")
    if op == "mean" and dtype.kind not in "fc":
        return TypeError, (f"{who}: op='mean' of {path}, of dtype {dtype}, would change its "
                           "dtype; use op='sum' and divide, or convert it to a float first.")
    if op == "sum" and dtype.kind == "b":
        return TypeError, (f"{who}: op='sum' of {path}, a boolean; use op='max' (any rank "
                           "true) or op='min' (every rank true), or convert it to int first.")
    if op in ("max", "min") and dtype.kind == "c":
        return TypeError, f"{who}: op={op!r} of {path}, complex: complex numbers are not ordered."
    if (op in ("max", "min") and isinstance(leaf, Tensor) and leaf.requires_grad
            and STATE.grad_enabled):
        return TypeError, (
            f"{who}: op={op!r} of {path}, a tensor being differentiated: the max or min across "
            "ranks has no derivative rule here. Reduce its value without a gradient, "
            f"{who}(sl.stop_gradient(tree), op={op!r}), or use op='sum' or op='mean'.")
    return None


def _prepare(who, tree, param, comm, problem):
    """(leaves, treedef) of tree, after every rank has agreed that all ranks' trees have one
    layout and none has a problem (given, or found in a leaf); raises the same error on every
    rank otherwise."""
    if STATE.builders:  # every rank traces the same function, so every rank raises here
        raise TypeError(
            f"scanlib.distributed.{who} inside a traced function (jit, vmap, scan, a loop body "
            "or make_graph): a collective between processes runs eagerly only. Call it "
            "outside, on the values a traced function returns (e.g. the gradient grad gives).")
    paths, leaves, treedef = pytree.flatten_with_paths(tree, "tree")
    for path, leaf in zip(paths, leaves):
        problem = problem or _leaf_problem(who, path, leaf, param if who == "allreduce" else None)
    layout = () if problem else tuple((np.shape(v), _dtype_str(v)) for v in leaves)
    key = (who, repr(param), treedef, layout)  # param may be anything a user passed

    def describe():
        return {"param": param, "structure": pytree.structure_str(treedef),
                "leaves": [(p, (np.shape(v), _dtype_str(v))) for p, v in zip(paths, leaves)]}

    _agree(comm, who, key, describe, problem)
    return leaves, treedef


def _dtype_str(v):
    try:
        return np.result_type(v).str
    except TypeError:
        return "O"


# --- the collectives on arrays --------------------------------------------------------------
def _groups(values):
    """Positions of the leaves of each dtype, in order of first appearance."""
    groups: dict = {}
    for i, v in enumerate(values):
        groups.setdefault(v.dtype, []).append(i)
    return groups.items()


def reduce_arrays(values, op, comm, packed=True):
    """The reduction of NumPy arrays across comm's ranks, as new arrays (the inputs are not
    written): with packed, one buffer and one MPI_Allreduce per dtype; else one per leaf."""
    MPI = _mpi()
    # MPI's logical type takes logical ops only (a boolean's sum and mean are refused above)
    ops = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
    logical = {"max": MPI.LOR, "min": MPI.LAND}
    values = [np.asarray(v) for v in values]
    outs = [None] * len(values)
    for dtype, idx in _groups(values):
        mpi_op = logical[op] if dtype.kind == "b" else ops[op]
        buffers = [np.concatenate([values[i].ravel() for i in idx])] if packed else [
            np.array(values[i], order="C").ravel() for i in idx]
        for buf in buffers:
            if buf.size:
                comm.Allreduce(MPI.IN_PLACE, buf, op=mpi_op)
            if op == "mean":
                buf /= comm.Get_size()
        _unpack(values, idx, buffers, outs, packed)
    return outs


def broadcast_arrays(values, root, comm):
    """root's arrays on every rank of comm, one buffer and one MPI_Bcast per dtype; the other
    ranks' values give only the shapes and dtypes."""
    values = [np.asarray(v) for v in values]
    outs = [None] * len(values)
    mine = comm.Get_rank() == root
    for dtype, idx in _groups(values):
        if mine:
            buf = np.concatenate([values[i].ravel() for i in idx])
        else:
            buf = np.empty(sum(values[i].size for i in idx), dtype)
        if buf.size:
            comm.Bcast(buf, root=root)
        _unpack(values, idx, [buf], outs, True)
    return outs


def _unpack(values, idx, buffers, outs, packed):
    """Views into the reduced buffers, in each leaf's shape."""
    if not packed:
        for i, buf in zip(idx, buffers):
            outs[i] = buf.reshape(values[i].shape)
        return
    start = 0
    for i in idx:
        n = values[i].size
        outs[i] = buffers[0][start:start + n].reshape(values[i].shape)
        start += n


# --- as primitives, so that a differentiated Tensor keeps its gradient ----------------------
def _allreduce_vjp(cts, outs, *inputs, op, comm, _saved=None):
    # The transpose of a sum over ranks is a sum over ranks of the cotangents (JAX's psum,
    # mpi4jax's allreduce): the objective is the sum of every rank's output. Every rank runs
    # it, in the same order, since every rank walks the same tape.
    cts = [zeros_like(o) if c is None else c for c, o in zip(cts, outs)]
    summed = allreduce(cts, op=op, comm=comm)
    return [g if np.dtype(x.dtype).kind in "fc" else None for g, x in zip(summed, inputs)]


allreduce_p = Primitive(
    "mpi_allreduce", lambda *xs, op, comm: reduce_arrays(xs, op, comm),
    vjp=_allreduce_vjp, multiple_results=True)


def _broadcast_vjp(cts, outs, *inputs, root, comm, _saved=None):
    # Every rank's output is root's input: root's cotangent is the sum of all ranks'
    # cotangents, and the other ranks' inputs, whose values are not used, get zeros.
    cts = [zeros_like(o) if c is None else c for c, o in zip(cts, outs)]
    summed = allreduce(cts, op="sum", comm=comm)
    if comm.Get_rank() != root:
        summed = [zeros_like(g) for g in summed]
    return [g if np.dtype(x.dtype).kind in "fc" else None for g, x in zip(summed, inputs)]


broadcast_p = Primitive(
    "mpi_broadcast", lambda *xs, root, comm: broadcast_arrays(xs, root, comm),
    vjp=_broadcast_vjp, multiple_results=True)


def _run(prim, leaves, treedef, **params):
    """Bind prim on the leaves (recorded on the tape when a Tensor is among them); a Tensor
    leaf comes back as a Tensor, any other as a NumPy array."""
    if not any(isinstance(x, Tensor) for x in leaves):
        return pytree.unflatten(treedef, prim.impl(*leaves, **params))
    outs = bind(prim, *[x if isinstance(x, Tensor) else np.asarray(x) for x in leaves],
                **params)
    return pytree.unflatten(treedef, [o if isinstance(x, Tensor) else o._value
                                      for o, x in zip(outs, leaves)])


def allreduce(tree: Any, op: str = "sum", comm=None) -> Any:
    """The leaves of tree combined across the ranks of comm (MPI.COMM_WORLD by default) by op,
    "sum", "mean", "max" or "min", as MPI_Allreduce: every rank gets the result.

    tree is any pytree of Tensors, NumPy arrays and numbers with one structure, shapes and
    dtypes on every rank (a rank that differs, an unknown op or a tensor on a GPU raises the
    same error on every rank, naming the leaf); Tensors come back as Tensors, other leaves as
    NumPy arrays, and no input is written. The leaves of each dtype travel in one buffer, one
    collective per dtype. A differentiated Tensor keeps its gradient: the VJP of "sum" is the
    sum across ranks of the cotangents ("mean": their mean), as JAX's psum and mpi4jax's
    allreduce, so every rank must take the derivative through it; "max" and "min" raise.

    A collective: every rank must call it, in the same order. In data-parallel training each
    rank takes the gradient of its shard's loss and averages the gradients:

    >>> from scanlib import distributed as dist
    >>> grads = {"w": sl.tensor([1.0, 2.0])}           # this rank's gradient
    >>> dist.allreduce(grads, op="mean")["w"]          # the same on every rank
    tensor([1., 2.], dtype=float64)
    """
    comm = _comm(comm, "allreduce")
    problem = None if isinstance(op, str) and op in OPS else (ValueError, (
        f"allreduce: op={op!r} is not known; use one of {', '.join(map(repr, OPS))}."))
    leaves, treedef = _prepare("allreduce", tree, op, comm, problem)
    return _run(allreduce_p, leaves, treedef, op=op, comm=comm)


def broadcast(tree: Any, root: int = 0, comm=None) -> Any:
    """Rank root's tree on every rank of comm (MPI.COMM_WORLD by default), as MPI_Bcast.

    Every rank passes a tree of the same structure, shapes and dtypes (the others' values are
    not used, as mpi4jax's bcast); Tensors come back as Tensors, other leaves as NumPy arrays.
    Its VJP gives root the sum of every rank's cotangent and the other ranks zeros.

    >>> from scanlib import distributed as dist
    >>> params = dist.broadcast({"w": sl.tensor([0.5, -0.5])})  # rank 0's initial values
    >>> params["w"]
    tensor([ 0.5, -0.5], dtype=float64)
    """
    comm = _comm(comm, "broadcast")
    n = comm.Get_size()
    problem = None
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < n:
        problem = ValueError, (f"broadcast: root={root!r} is not a rank of this communicator "
                               f"(its ranks are 0 to {n - 1}).")
    leaves, treedef = _prepare("broadcast", tree, root, comm, problem)
    return _run(broadcast_p, leaves, treedef, root=int(root), comm=comm)
