"""The `scanlib` logger: silent by default (warnings aside); at INFO each jit trace and each
numba compile (its start, then its time and cache); at WARNING each fallback, once."""

import logging
import subprocess
import sys
import warnings

import numpy as np
import pytest

import scanlib as sl


def test_a_jit_trace_is_logged_with_its_signature(caplog):
    def step(x, n):
        return x * n

    jitted = sl.jit(step)
    with caplog.at_level(logging.INFO, logger="scanlib"):
        jitted(np.ones(3), 2)
        jitted(np.zeros(3), 2)  # replayed: no record
        jitted(np.ones(3, np.float32), 2)
    traces = [r for r in caplog.records if r.name == "scanlib.jit"]
    assert [r.levelno for r in traces] == [logging.INFO, logging.INFO]
    assert traces[0].getMessage().startswith(
        "jit(step): traced for (args[0]: f64[3], args[1]=2) in ")
    assert "(trace 1; 1 cached)" in traces[0].getMessage()
    assert "args[0]: f32[3]" in traces[1].getMessage()
    assert "(trace 2; 2 cached)" in traces[1].getMessage()


def test_a_numba_compile_logs_its_start_and_its_time_and_cache(caplog, tmp_path, monkeypatch):
    numba = pytest.importorskip("numba")
    monkeypatch.setenv("SCANLIB_CACHE_DIR", str(tmp_path))  # an empty cache
    xs = np.arange(5.0)
    with caplog.at_level(logging.INFO, logger="scanlib"):
        # a constant no other test uses: a kernel source this process has not compiled
        sl.scan(lambda c, x: (c * 0.73452 + x, c), 0.0, xs, compiler="numba")
    records = [r for r in caplog.records if r.name == "scanlib.numba"]
    messages = [r.getMessage() for r in records]
    assert len(messages) == 2, messages
    assert all(r.levelno == logging.INFO for r in records)
    assert messages[0].startswith("compiling the step loop of scan body 'body' "
                                  "(carry f64[]; x f64[]) (seconds")
    assert messages[1].startswith("compiled the step loop of scan body 'body' "
                                  "(carry f64[]; x f64[]) in ")
    assert messages[1].endswith(f"cached in {numba.config.CACHE_DIR or tmp_path}")


def test_a_numba_fallback_warns_once_and_is_logged_once(caplog):
    pytest.importorskip("numba")

    def f(c, x):  # a body no other test uses (a body's compiled loop is shared by its
        return sl.erf(c * 0.61 + x), sl.sort(x)  # equals, and warns once)

    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        for _ in range(3):
            sl.scan(f, np.ones(3), np.ones((4, 3)), compiler="numba")
    fallbacks = [w for w in caught if w.category is sl.NumbaFallbackWarning]
    records = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(fallbacks) == 1 and len(records) == 1
    assert records[0].name == "scanlib.numba"
    assert records[0].getMessage() == str(fallbacks[0].message)
    assert "erf (no numba rule)" in records[0].getMessage()


def test_nothing_is_printed_by_default_but_a_warning_once():
    # A process of its own: pytest installs logging handlers of its own.
    code = (
        "import numpy as np, scanlib as sl\n"
        "f = sl.jit(lambda x: sl.sum(x * x))\n"
        "f(np.ones(2)); f(np.ones(3))\n"  # traces: INFO records, not printed
        "w = sl.tensor(np.ones(2), requires_grad=True)\n"
        "f(w); f(w)\n"  # eager: one warning, and a WARNING record not printed
        "print(f.cache_info())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout == "CacheInfo(hits=0, misses=2, eager=2, maxsize=256, currsize=2)\n"
    assert out.stderr.count("requires grad") == 1, out.stderr  # the warning, printed once
    assert "JitFallbackWarning: jit(f): args[0] requires grad" in out.stderr
    assert "traced" not in out.stderr and "scanlib.jit" not in out.stderr
