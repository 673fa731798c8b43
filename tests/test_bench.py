"""The benchmark in bench/ cannot rot: numpy-manual's hand-written BPTT (and the hoisted
variant) against central finite differences in float64, and `python -m bench --quick`,
whose every available contender must agree with numpy-manual and whose JSON must be written.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # bench/ is a folder of the repository, not an installed package

from bench import harness, numpy_manual
from bench import workloads as W


def _fd_errors(wl, fn, seed):
    """Per input array: |FD - analytic| / |FD| of the loss's slope along a random direction."""
    inputs, consts = W.make_data(wl, "tiny", seed)
    inputs, consts = W.astype_tree(inputs, np.float64), W.astype_tree(consts, np.float64)
    loss, grads = fn(inputs, consts)
    assert loss == pytest.approx(W.reference_loss(wl, inputs, consts), rel=1e-12)
    flat, gflat = W.flatten(inputs), W.flatten(grads)
    assert sorted(gflat) == sorted(flat)
    rng = np.random.default_rng(seed + 100)
    errors = {}
    for name, x in flat.items():
        assert np.shape(gflat[name]) == np.shape(x), name
        v = rng.standard_normal(np.shape(x))
        eps = 1e-6

        def at(s, name=name, x=x, v=v):
            moved = dict(flat, **{name: x + s * v})
            return W.reference_loss(wl, W.unflatten_like(inputs, moved), consts)

        fd = (at(eps) - at(-eps)) / (2 * eps)
        errors[name] = abs(fd - float(np.sum(gflat[name] * v))) / max(abs(fd), 1e-8)
    return errors


CASES = [(wl.name, variant) for wl in W.WORKLOADS for variant, table in
         (("manual", numpy_manual.MANUAL), ("hoisted", numpy_manual.HOISTED))
         if wl.kind in table]


@pytest.mark.parametrize("workload,variant", CASES)
def test_numpy_bptt_matches_finite_differences(workload, variant):
    wl = W.BY_NAME[workload]
    fn = (numpy_manual.MANUAL if variant == "manual" else numpy_manual.HOISTED)[wl.kind]
    for seed in (0, 1):
        errors = _fd_errors(wl, fn, seed)
        assert max(errors.values()) < 1e-6, errors


def test_a_wrong_gradient_is_caught():
    wl = W.BY_NAME["rnn"]

    def broken(inputs, consts):
        loss, g = numpy_manual.rnn_manual(inputs, consts)
        g["params"]["W"] = g["params"]["W"] * 1.001
        return loss, g

    assert _fd_errors(wl, broken, 0)["params.W"] > 1e-4
    ref = {"a": np.ones(3)}
    assert harness.rel_diff({"a": np.array([1.0, 1.0, 1.01])}, ref) == (pytest.approx(0.01), "a")
    assert harness.rel_diff({"a": np.array([1.0, np.nan, 1.0])}, ref)[1] == "a"
    assert harness.rel_diff({}, ref)[0] == float("inf")


def test_quick_benchmark_runs_and_every_contender_agrees(tmp_path):
    # --quick as the issue asks, with fewer timed calls: the test checks that it runs and
    # agrees, not how fast it is.
    cmd = [sys.executable, "-m", "bench", "--quick", "--budget", "0.005", "--warmup", "0",
           "--out", str(tmp_path)]
    proc = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "threads: 1 requested" in proc.stdout
    data = json.loads((tmp_path / "latest-quick.json").read_text())
    assert data["threads"]["requested"] == 1 and data["machine"]["cpu_count"]
    skipped = {s["contender"] for s in data["skipped"]}
    ran = {r["contender"] for r in data["results"]}
    assert {"numpy-manual", "scanlib-loop"} <= ran
    assert ran | skipped == {c.name for c in harness.CONTENDERS}
    by_workload = {}
    for r in data["results"]:
        by_workload.setdefault(r["workload"], []).append(r)
        assert r["status"] in ("ok", "skipped"), r
        if r["status"] == "ok":
            assert r["grad_ok"] is True, r
            assert r["grad_max_rel"] <= data["tolerance"][r["dtype"]], r
            assert r["median_s"] > 0 and r["reps"] >= 1
            assert r["contender"] != "numpy-manual" or r["ratio"] == 1.0
    assert set(by_workload) == {w.name for w in W.WORKLOADS}


def test_small_state_quick_scanlib_side(monkeypatch, capsys):
    # bench/small_state.py's quick mode with JAX hidden (the scanlib column alone), then each
    # workload's scan gradient against the same model run as a Python loop on the tape and
    # against a central difference along a random direction.
    from bench import small_state as S

    # numba hidden too: its kernels would take most of a minute to compile here, and
    # tests/test_numba_loop.py checks them.
    monkeypatch.setattr(S, "jax_missing", lambda: "JAX hidden by the test")
    monkeypatch.setattr(S, "numba_missing", lambda: "numba hidden by the test")
    monkeypatch.setitem(S.BUDGET_S, "quick", 0.005)
    assert S.main(["quick"]) == 0
    out = capsys.readouterr().out
    assert "JAX hidden by the test: printing the scanlib column only" in out
    assert all(out.count(f"| {name} |") == 2 for name in S.WORKLOADS), out  # and jit's table
    assert "| workload | numpy loop ms | jit ms | jit first ms |" in out, out
    rng = np.random.default_rng(0)
    for name in S.WORKLOADS:
        params, data = S.make_data(name, "quick")
        value, grads = S.scanlib_result(S.scanlib_runner(name, params, data)())
        loop_value, loop_grads = S.scanlib_result(S.scanlib_runner(name, params, data, True)())
        rel, where = S.max_rel_diff(value, grads, loop_value, loop_grads)
        assert rel < 1e-11, (name, rel, where)
        v = {k: rng.standard_normal(np.shape(p)) for k, p in params.items()}
        eps = 1e-6

        def at(s, params=params, v=v, data=data, name=name):
            moved = {k: params[k] + s * v[k] for k in params}
            return float(S.LOSSES[name](S.scanlib_ops(), moved, data).item())

        fd = (at(eps) - at(-eps)) / (2 * eps)
        slope = sum(float(np.sum(grads[k] * v[k])) for k in params)
        assert abs(fd - slope) <= 1e-6 * max(abs(fd), 1.0), (name, fd, slope)


def test_vmap_rules_quick(capsys):
    # bench/vmap_rules.py's quick mode: each section checks its contenders against the
    # per-lane results (and the Newton roots and their slopes against closed forms) before
    # timing, so running it is the test.
    from bench import vmap_rules

    assert vmap_rules.main(["quick"]) == 0
    out = capsys.readouterr().out
    for title in ("(a) newton while_loop", "(a2) newton-fixed", "(a3) matrix", "(b) ckpt-grad",
                  "(c) scan-grad", "(c) scan-fwd", "peak MiB: vmap grad B=64"):
        assert title in out, out
    assert out.count("vmap grad B=64") == 6, out


def test_ports_quick_scanlib_side(monkeypatch, capsys):
    # bench/ports.py's quick mode with JAX and numba hidden (numba's first compiles take
    # minutes; tests/test_numba_loop.py checks its kernels): every ported program's
    # value_and_grad eagerly and under jit, jit's values and gradients against eager's (main's
    # exit status), and both tables printed.
    from bench import ports as P

    monkeypatch.setattr(P, "jax_missing", lambda: "JAX hidden by the test")
    monkeypatch.setattr(P, "numba_missing", lambda: "numba hidden by the test")
    monkeypatch.setitem(P.BUDGET_S, "quick", 0.0)
    assert P.main(["quick"]) == 0
    out = capsys.readouterr().out
    assert "JAX hidden by the test: its columns are left out" in out, out
    assert "| program | eager ms | jit ms |" in out, out
    assert all(out.count(f"| {name} |") == 2 for name in P.NAMES), out
    assert "PROBLEM" not in out, out


def test_ports_flags_a_disagreeing_tier():
    from bench import ports as P

    rec = {"program": "hmm", "diff": {"jit": (0.0, None), "numba": (2e-7, "grad/0"),
                                      "jax": (float("nan"), "value")}}
    assert P.problems([rec]) == ["hmm: numba differs from scanlib eager by 2.00e-07 (grad/0)",
                                 "hmm: scanlib eager differs from JAX by nan (value)"]
