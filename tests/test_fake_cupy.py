"""The CuPy code paths, on a machine without a GPU: the scan and op tests run again with the
strict NumPy-backed fake in tests/fake_cupy standing in for CuPy (skipped where a real CuPy
imports; there the `backend` fixture runs them on the GPU instead)."""

import importlib.util
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _run_on_the_fake(files, *options):
    env = dict(os.environ, SCANLIB_TEST_BACKEND="cupy",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "fake_cupy"),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
         *options, *[os.path.join(HERE, f) for f in files]],
        env=env, capture_output=True, text=True, timeout=600)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail, tail


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None,
                    reason="a real CuPy is installed: the backend fixture covers it")
def test_scan_and_ops_on_the_fake_cupy_backend():
    # Less the stress tests of recursion depth and memory growth (20 s here), which test the
    # tape, not devices, and run on NumPy in the main suite; and less test_scan_hypothesis.py,
    # whose random bodies make their tensors on the CPU (no `backend` fixture): here they
    # would repeat the main suite's NumPy runs (4 s).
    _run_on_the_fake(["test_scan.py", "test_scan_errors.py", "test_scan_plan.py",
                      "test_ops.py", "test_autodiff.py", "test_tape.py",
                      "test_engine_errors.py"],
                     "-k", "not recursion_limit and not memory_does_not_grow and not long_chain")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None,
                    reason="a real CuPy is installed: the backend fixture covers it")
def test_linalg_everyday_ops_random_and_optim_on_the_fake_cupy_backend():
    """Dispatch and device discipline of the newer op families; their finite-difference and
    float32-vs-float64 checks, which test numerics rather than devices, run on NumPy only."""
    _run_on_the_fake(["test_linalg.py", "test_linalg_more.py", "test_fft.py",
                      "test_ops_special.py", "test_ops_arrays.py", "test_random.py",
                      "test_random_more.py", "test_at.py", "test_complex.py", "test_optim.py",
                      "test_lax_names.py"],
                     "-k", "not finite_differences and not float32_matches_float64 and not jax")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None,
                    reason="a real CuPy is installed: the backend fixture covers it")
def test_custom_derivatives_lax_and_nn_on_the_fake_cupy_backend():
    _run_on_the_fake(["test_custom.py", "test_lax.py", "test_nn.py"],
                     "-k", "device_of_their_data or device_of_the_data")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None,
                    reason="a real CuPy is installed")
def test_demo_runs_with_device_cuda_on_the_fake_cupy(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "fake_cupy"),
                                           os.environ.get("PYTHONPATH", "")]))
    demo = os.path.join(os.path.dirname(HERE), "examples", "char_lm.py")
    proc = subprocess.run([sys.executable, demo, "--device", "cuda", "--steps", "5",
                           "--hidden", "8", "--seq-len", "8"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "on cuda" in proc.stdout, proc.stdout[-2000:]
