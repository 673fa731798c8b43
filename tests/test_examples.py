"""Smoke tests: every example runs end to end with tiny sizes, prints what it promises and
reports its own checks through its exit status."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

import pytest

import scanlib as sl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


@pytest.fixture(scope="module", autouse=True)
def examples_on_path():
    sys.path.insert(0, EXAMPLES)
    yield
    sys.path.remove(EXAMPLES)


def run(name, argv, capsys):
    module = importlib.import_module(name)
    status = module.main(argv)
    return status, capsys.readouterr().out


def test_char_lm_tiny(tmp_path, capsys):
    status, out = run("char_lm", ["--steps", "12", "--hidden", "8", "--seq-len", "8",
                                  "--batch", "4", "--evals", "2", "--sample-len", "12",
                                  "--out-dir", str(tmp_path)], capsys)
    assert status == 0, out
    assert "[ok] loss gradient matches" in out
    assert "[ok] validation loss fell" in out
    assert "samples (temperature" in out and "| Return the " in out
    assert "12/12" in out  # the progress bar reached the end
    png = tmp_path / "char_lm_loss.png"
    assert png.exists() or "matplotlib is not installed" in out


def test_char_lm_corpus_is_deterministic_english():
    char_lm = importlib.import_module("char_lm")
    text = char_lm.gather_docstrings()
    assert len(text) > 100_000
    assert text == char_lm.gather_docstrings()
    assert text.count(" the ") > 1000


def test_char_lm_cuda_without_gpu_is_one_line(tmp_path):
    if sl.cuda_available():
        pytest.skip("a GPU is present; the missing-CuPy message cannot be shown here")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "char_lm.py"), "--device",
                           "cuda"], capture_output=True, text=True, env=env, timeout=60,
                          check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "CuPy" in lines[0] and "--device cpu" in lines[0]


def test_char_lm_bad_argument_exits_2(capsys):
    char_lm = importlib.import_module("char_lm")
    with pytest.raises(SystemExit) as e:
        char_lm.main(["--steps", "0"])
    assert e.value.code == 2
    assert "--steps must be at least 1" in capsys.readouterr().err
    assert char_lm.main(["--seq-len", "10000000"]) == 2
    assert "--seq-len 10000000 is longer than the validation text" in capsys.readouterr().err


def test_kalman_tiny(capsys):
    status, out = run("kalman", ["--length", "15", "--sequences", "2", "--steps", "6",
                                 "--recovery-tol", "100"], capsys)
    assert status == 0, out
    assert "[ok] d loglik / d theta matches" in out
    assert "[ok] the log-likelihood rose" in out
    for name in ("rho", "omega", "q", "r"):
        assert f"\n{name:>6} " in out


def test_kalman_failed_check_exits_1(capsys):
    status, out = run("kalman", ["--length", "15", "--sequences", "2", "--steps", "2",
                                 "--recovery-tol", "0"], capsys)
    assert status == 1
    assert "[FAILED] every parameter within 0% of the truth" in out


def test_hmm_tiny(capsys):
    status, out = run("hmm", ["--sequences", "3", "--length", "8", "--steps", "6",
                              "--gap", "100"], capsys)
    assert status == 0, out
    assert "[ok] d loglik / d logits matches" in out
    assert "[ok] the log-likelihood rose" in out
    assert "transition matrix, true:" in out


def test_pendulum_tiny(tmp_path, capsys):
    status, out = run("pendulum_ode", ["--length", "15", "--steps", "6", "--recovery-tol",
                                       "100", "--out-dir", str(tmp_path)], capsys)
    assert status == 0, out
    assert "[ok] d loss / d (log omega, log gamma) matches" in out
    assert "[ok] the error fell" in out
    png = tmp_path / "pendulum_fit.png"
    assert png.exists() or "matplotlib is not installed" in out


def test_walkthrough_tiny(capsys):
    status, out = run("walkthrough", ["--batch", "2", "--hidden", "3", "--inputs", "2",
                                      "--length", "4"], capsys)
    assert status == 0, out
    assert "def predict(w: f64[3,2], x: f64[4,3]):" in out
    assert "def body(" in out and "tanh(" in out
    assert "def backward_body(" in out
    table = out.split("residuals (saved for backward):", 1)[1]
    for name, policy in (("f", "KEEP"), ("x", "REMOVE_XS"), ("carry", "CLONE"),
                         ("W", "REMOVE_ADDITIONAL_INPUTS")):
        assert re.search(rf"^\s+{name}\s+{policy}\s", table, re.MULTILINE), (name, policy)
    assert "[ok] scan and loop agree" in out


def test_custom_rules_tiny(capsys):
    status, out = run("custom_rules", ["--size", "500", "--steps", "20", "80"], capsys)
    assert status == 0, out
    assert out.count("[ok]") == 4
    assert "naive [0.5" in out and "nan]" in out
    assert "through the solver: peak memory" in out and "adjoint: peak memory" in out


def test_hvp_tiny(capsys):
    status, out = run("hvp", ["--hidden", "3", "--inputs", "2", "--length", "5"], capsys)
    assert status == 0, out
    assert out.count("[ok]") == 4
    assert "full 18x18 Hessian" in out


def test_kalman_rts_tiny(capsys):
    for solver in ("solve", "cholesky"):
        status, out = run("kalman_rts", ["--length", "15", "--sequences", "2", "--steps", "4",
                                         "--solver", solver, "--recovery-tol", "100"], capsys)
        assert status == 0, out
        assert "[ok] filter log-likelihood and RTS smoother match dense Gaussian" in out
        assert "[ok] d loglik / d theta matches" in out
        assert "[ok] the log-likelihood rose" in out
        assert "[ok] smoothing helps" in out
        for name in ("rho", "omega1", "omega2", "q", "r", "c"):
            assert f"\n{name:>6} " in out


def test_newton_fit_tiny(capsys):
    status, out = run("newton_fit", ["--points", "20", "--steps", "5", "--recovery-tol", "100"],
                      capsys)
    assert status == 0, out
    assert "[ok] dE/de and dE/dM through the while_loop equal the implicit-function" in out
    assert "[ok] d loss / d theta through the while_loop equals the implicit-function" in out
    assert "[ok] the error fell" in out
    assert "Newton steps)" in out
    for name in ("a", "e", "P", "M0", "w"):
        assert f"\n{name:>6} " in out


def test_long_sequence_tiny(capsys):
    status, out = run("long_sequence", ["--length", "60", "--batch", "2", "--hidden", "4",
                                        "--steps", "2", "--revolve", "3", "--min-ratio", "1"],
                      capsys)
    assert status == 0, out
    for name in ("None", "sqrt", "revolve, 3"):
        assert re.search(rf"^\s+{name}\s+\d+\.\d\d\s+\d+\.\d\d\s+(yes|no)$", out, re.MULTILINE)
    assert "[ok] the gradients of every schedule agree to rounding" in out
    assert "[ok] the loss fell" in out


def test_long_sequence_failed_check_exits_1(capsys):
    status, out = run("long_sequence", ["--length", "20", "--batch", "1", "--hidden", "2",
                                        "--steps", "1", "--min-ratio", "1000"], capsys)
    assert status == 1
    assert "[FAILED] 'sqrt' uses at most 1/1000 of checkpoint=None's memory" in out


def test_hmc_holt_winters_tiny(capsys):
    status, out = run("hmc_holt_winters", ["--draws", "6", "--leapfrog", "3", "--length", "12",
                                           "--tolerance", "10"], capsys)
    assert "[ok] jit(value_and_grad) equals value_and_grad, bit for bit" in out, out
    assert "ms jitted" in out and "acceptance rate" in out, out
    assert sl.set_loop_compiler("numpy") == "numpy"  # main put the default back
    assert status in (0, 1), out  # six draws: the acceptance check may go either way
