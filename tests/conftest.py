"""Shared fixtures: the `backend` fixture runs a test on NumPy and, where a GPU is usable, on
CuPy. SCANLIB_TEST_BACKEND=numpy|cupy restricts the run to one backend (bench/gpu_check.sh
sets it to cupy). What was alive before each test (and after each collected module) is frozen
out of Python's cyclic garbage collector, which would otherwise walk it again and again.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

# numba (compiler="numba" tests) reads these when first imported, after this module. Its
# optimisation level changes compile time (about 40% of the numba tests' time here), not
# typing (which the tier's proofs read) or float semantics (no fast-math); machine code
# compiled this way must not land in the package's or the user's caches.
os.environ.setdefault("NUMBA_OPT", "0")


def _test_cache():
    """Where the code the tests compile (numba's kernels, JAX's programs) is kept: by default
    .cache/tests/<versions> in this checkout (ignored by git), so that a second run loads what
    the first compiled (compiling was more than half of a cold run's time here); one directory
    per Python, NumPy, numba and JAX, so no environment loads another's machine code. A fresh
    checkout (CI) starts empty. SCANLIB_TEST_CACHE=fresh compiles everything again, in a
    directory of this run; SCANLIB_TEST_CACHE=DIR names another."""
    import sys
    import tempfile
    from importlib import metadata

    chosen = os.environ.get("SCANLIB_TEST_CACHE", "")
    if chosen == "fresh":
        return tempfile.mkdtemp(prefix="scanlib-test-cache-")
    if chosen:
        return chosen
    versions = [f"py{sys.version_info[0]}.{sys.version_info[1]}"]
    for package in ("numpy", "numba", "jax", "jaxlib"):
        try:
            versions.append(f"{package}{metadata.version(package)}")
        except metadata.PackageNotFoundError:
            pass
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        ".cache", "tests")
    if "PYTEST_XDIST_WORKER" not in os.environ:  # the controller, before any worker starts
        _bounded(root, 2 << 30)
    return os.path.join(root, "-".join(versions))


def _bounded(root, limit):
    """root emptied when its files pass `limit` bytes (each change of the code generators
    leaves the kernels it no longer writes behind)."""
    import shutil

    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    if total > limit:
        shutil.rmtree(root, ignore_errors=True)


_CACHE = os.environ.setdefault("SCANLIB_TEST_CACHE_DIR", _test_cache())  # the workers' too
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(_CACHE, "numba"))
# JAX's persistent cache (the comparisons with JAX compile each operation), every program
# kept however quick its compile: with it a second run's JAX calls take a fifth of the time.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(_CACHE, "jax"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

# The suite runs on the NumPy loop unless a test names its compiler: "auto" (the default
# where numba is installed) would compile kernels in background processes all through it.
# Subprocesses the tests start (examples, MPI ranks) inherit this.
os.environ.setdefault("SCANLIB_LOOP_COMPILER", "numpy")

import scanlib as sl  # noqa: E402

_ALL = ("numpy", "cupy")


@pytest.fixture(autouse=True, scope="session")
def _numba_kernel_cache():
    """scan(..., compiler="numba") kernels compile into the tests' cache (_test_cache), not
    the user's (~/.cache/scanlib)."""
    old = os.environ.get("SCANLIB_CACHE_DIR")
    os.environ["SCANLIB_CACHE_DIR"] = os.path.join(_CACHE, "kernels")
    yield
    if old is None:
        os.environ.pop("SCANLIB_CACHE_DIR", None)
    else:
        os.environ["SCANLIB_CACHE_DIR"] = old


@pytest.fixture
def fresh_kernel_cache(tmp_path, monkeypatch):
    """An empty kernel cache for a test that watches a kernel being compiled (its first call
    on NumPy's loop, a background compile, a proof refused), which a kernel an earlier run
    compiled would skip."""
    monkeypatch.setenv("SCANLIB_CACHE_DIR", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


@pytest.fixture(autouse=True)
def _freeze_what_earlier_tests_left():
    """Each test starts with the objects alive then (imported libraries, compiled kernels,
    caches: about two million by the end of a run) frozen out of Python's cyclic garbage
    collector, which otherwise walks them all in each full collection: about 100 s of a whole
    run here. Garbage is collected first; what a test makes is collected as usual, and
    gc.get_objects() lists only what was made since."""
    gc.collect()
    gc.freeze()
    yield


def pytest_collectreport(report):
    """The same while collecting: after each collector (a test module imports JAX, numba,
    hypothesis, ...), a third of collection's time here."""
    gc.collect()
    gc.freeze()


def _selected():
    only = os.environ.get("SCANLIB_TEST_BACKEND", "").strip().lower()
    if not only:
        return _ALL
    if only not in _ALL:
        raise pytest.UsageError(f"SCANLIB_TEST_BACKEND must be numpy or cupy, got {only!r}")
    return (only,)


class Backend:
    """Makes test data on one backend's device and reads it back as NumPy."""

    def __init__(self, name: str):
        self.name = name
        self.device = "cpu" if name == "numpy" else "cuda"

    def __repr__(self):
        return f"Backend({self.name})"

    def tensor(self, data, **kw) -> sl.Tensor:
        """scanlib.tensor on this backend's device."""
        return sl.tensor(data, device=self.device, **kw)

    def array(self, data, dtype=None):
        """A raw NumPy or CuPy array on this backend's device."""
        return sl.tensor(np.asarray(data, dtype=dtype), device=self.device)._value

    def tree(self, tree):
        """Every NumPy array leaf of a pytree moved to this device as a raw array."""
        import optree

        return optree.tree_map(lambda a: self.array(a) if isinstance(a, np.ndarray) else a, tree)

    @staticmethod
    def numpy(x) -> np.ndarray:
        """Tensor, CuPy or NumPy data as NumPy."""
        if isinstance(x, sl.Tensor):
            return x.numpy()
        if hasattr(x, "get"):
            return x.get()
        return np.asarray(x)

    def check_device(self, t: sl.Tensor):
        want = "cpu" if self.device == "cpu" else "cuda:0"
        assert t.device == want, f"result lives on {t.device}, expected {want}"


@pytest.fixture(params=_selected())
def backend(request) -> Backend:
    if request.param == "cupy" and not sl.cuda_available():
        pytest.skip("CuPy with a usable CUDA GPU is not available")
    return Backend(request.param)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def _jax_x64():
    import sys

    jax = sys.modules.get("jax")
    return None if jax is None else bool(jax.config.read("jax_enable_x64"))


@pytest.fixture(autouse=True)
def _jax_x64_is_not_left_on():
    """A test that switches JAX's 64-bit mode on globally changes every later comparison with
    JAX's float32 (optax's trajectories, random bits): use `with jax.enable_x64(True):`."""
    before = _jax_x64()
    yield
    after = _jax_x64()
    assert before is None or after == before, "this test left jax_enable_x64 switched"
    assert not (before is None and after), "this test switched jax_enable_x64 on globally"


def pytest_terminal_summary(terminalreporter):
    """The versions tested, under the pass counts (CI runs the suite on the newest NumPy and on
    the declared minimum versions)."""
    import platform

    import optree
    terminalreporter.write_line(f"tested on Python {platform.python_version()}, NumPy "
                                f"{np.__version__}, optree {optree.__version__}")

