"""Thread settings and a description of the machine, for the output and the JSON.

`set_threads` must run before NumPy is imported to take effect through the environment
(OpenBLAS/MKL read it once); after that it falls back to threadpoolctl where installed.
Imports only the standard library at module level.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
_LIMITER = []  # keeps a threadpoolctl limiter alive for the whole run


def set_threads(n: int) -> str:
    """Ask every BLAS/OpenMP pool (and XLA) for n threads; return how it was done."""
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    if n == 1 and "jax" not in sys.modules:
        flags = os.environ.get("XLA_FLAGS", "")
        if "intra_op_parallelism_threads" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false "
                                       "intra_op_parallelism_threads=1").strip()
    how = "environment, before NumPy was imported"
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            how = ("NumPy was already imported and threadpoolctl is not installed: the "
                   "thread setting may not have taken effect")
        else:
            _LIMITER.append(threadpool_limits(limits=n))
            how = "threadpoolctl (NumPy was already imported)"
    return how


def set_torch_threads(n: int) -> None:
    """torch keeps its own pools; called only when a torch contender runs."""
    import torch

    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # allowed once, before any parallel work
        pass


def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


def busy_warning(machine: dict, load) -> str | None:
    """A note when other work competes for the CPUs (the load counts this process too)."""
    if load and load[0] > machine["usable_cpus"] - 0.5:
        return (f"WARNING: load average {load[0]} on {machine['usable_cpus']} usable CPUs: "
                "other processes compete with the benchmark; expect noisy timings.")
    return None


def git_state() -> dict | None:
    """The commit the benchmarked code came from, and whether the working tree differed."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit, "modified_files": dirty.split()[1::2]}


def machine_info() -> dict:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    return {
        "cpu": _cpu_model(), "cpu_count": os.cpu_count(), "usable_cpus": usable,
        "load_average_at_start": load_average(), "git": git_state(),
        "platform": platform.platform(), "python": sys.version.split()[0],
        "versions": {n: _version(n) for n in ("numpy", "scanlib", "torch", "jax", "jaxlib",
                                                "autograd", "mygrad", "threadpoolctl")},
    }


def thread_info(requested: int, how: str) -> dict:
    info = {"requested": requested, "how": how,
            "env": {v: os.environ.get(v) for v in THREAD_VARS},
            "XLA_FLAGS": os.environ.get("XLA_FLAGS")}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        info["pools"] = "threadpoolctl not installed"
    else:
        info["pools"] = [{k: p.get(k) for k in ("user_api", "internal_api", "num_threads",
                                                 "version", "architecture")}
                         for p in threadpool_info()]
    if "torch" in sys.modules:
        info["torch_threads"] = sys.modules["torch"].get_num_threads()
    return info


def describe(machine: dict, threads: dict) -> str:
    pools = threads["pools"]
    pool_s = (", ".join(f"{p['internal_api']} {p['version']} x{p['num_threads']}"
                        for p in pools) if isinstance(pools, list) else pools)
    v = machine["versions"]
    return (f"machine: {machine['cpu']}, {machine['usable_cpus']} usable of "
            f"{machine['cpu_count']} CPUs, {machine['platform']}, Python {machine['python']}, "
            f"load average {machine['load_average_at_start']}\n"
            f"threads: {threads['requested']} requested via {threads['how']}; pools: {pool_s}"
            + (f"; torch {threads['torch_threads']}" if "torch_threads" in threads else "")
            + "\nversions: " + ", ".join(f"{k} {x}" for k, x in v.items() if x)
            + (f"\nmodified files: {' '.join(g['modified_files'])}"
               if (g := machine.get("git")) and g["modified_files"] else ""))


def loop_compiler_from(argv):
    """argv without a "numba" word; with it, scanlib's default loop compiler is set to numba
    (the compiled tier), after a warm-up call the benches' medians then time its kernels."""
    argv, _ = tier_from(argv)
    return argv


TIER_WORDS = ("numpy", "numba", "auto", "jit")


def tier_from(argv):
    """(argv without its tier words, whether "jit" was one). "numpy", "numba" or "auto" sets
    scanlib's default loop compiler (none of them: the library's default, "auto" where numba
    is installed); "jit" asks the bench to run its calls under scanlib.jit. Under "numba" the
    first calls compile and are not timed; under "auto" call `settle` before timing."""
    words = [a for a in argv if a in TIER_WORDS]
    compilers = [w for w in words if w != "jit"]
    if len(compilers) > 1:
        raise SystemExit(f"name at most one of numpy, numba, auto; got {', '.join(compilers)}")
    if compilers:
        import scanlib

        scanlib.set_loop_compiler(compilers[0])
    print(f"tier: {describe_tier('jit' in words)}", flush=True)
    return [a for a in argv if a not in TIER_WORDS], "jit" in words


def describe_tier(jit=False):
    from scanlib.scan.api import default_compiler

    compiler = {"numpy": "NumPy (eager)", "numba": "numba (first calls, which compile, are "
                "not timed)", "auto": "auto (kernels compiled in the background; timed once "
                "every kernel is in and each body's tier is chosen)"}[default_compiler()]
    return ("scanlib.jit, " if jit else "") + f"scan's compiler: {compiler}"


def settle(*calls, extra_calls=10, timeout_s=600.0):
    """Under compiler="auto": each call once, then wait for the background process to answer
    every kernel it was sent, then extra_calls more rounds, so that each body's choice between
    its kernel and NumPy's code is made before anything is timed. Elsewhere, nothing."""
    from scanlib.scan.api import default_compiler

    if default_compiler() != "auto":
        return
    from scanlib.scan.loop import native_background

    for c in calls:
        c()
    if not native_background.wait_idle(timeout_s):
        print(f"warning: background compiles still running after {timeout_s:.0f} s")
    for _ in range(extra_calls):
        for c in calls:
            c()
