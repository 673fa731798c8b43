"""Programs written for JAX run on scanlib with their imports changed alone (tests/ports/):
each gives JAX's values and gradients, stored in tests/ports/golden by gen_golden.py, and
JAX's live where JAX is installed."""

from __future__ import annotations

import importlib.util
import os

import pytest

from ports import cases, harness

RTOL, ATOL = 1e-10, 1e-12

# name -> why the program does not agree with JAX yet (each one an xfail(strict=True), so that
# the entry goes once it does)
KNOWN_FAILURES: dict[str, str] = {}  # name -> why it does not agree with JAX yet


def _programs():
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[name]))
            if name in KNOWN_FAILURES else name for name in harness.names()]


def test_translation_changes_import_lines_only():
    source = (
        "import jax\nimport jax.numpy as jnp\nfrom jax import lax, vmap\n"
        "from jax.scipy.special import logsumexp\nimport optax\nimport numpy as np\n"
        "import jax.random as jr, functools\n  from jax.tree_util import tree_map\n"
        "x = jax.numpy.ones(3)  # import jax\n"
    )
    assert harness.translate(source) == (
        "import scanlib as jax\nimport scanlib.numpy as jnp\nfrom scanlib import lax, vmap\n"
        "from scanlib.scipy.special import logsumexp\nimport scanlib.optim as optax\n"
        "import numpy as np\nimport scanlib.random as jr, functools\n"
        "  from scanlib.tree_util import tree_map\nx = jax.numpy.ones(3)  # import jax\n"
    )


def test_every_program_has_a_case_and_jax_results():
    assert harness.names(), "no programs in tests/ports/programs"
    for name in harness.names():
        assert name in cases.CASES, f"tests/ports/cases.py has no case for {name}"
        assert (harness.GOLDEN / f"{name}.npz").exists(), (
            f"no JAX results for {name}: run python tests/ports/gen_golden.py {name}")


@pytest.mark.parametrize("name", _programs())
def test_port_agrees_with_jax(name):
    rtol, atol = cases.TOLERANCES.get(name, (RTOL, ATOL))
    got = harness.run(name, "scanlib")
    problems = harness.compare(got, harness.read_golden(name), rtol=rtol, atol=atol)
    assert not problems, f"{name} on scanlib:\n" + "\n".join(problems)


# JAX compiles each program for seconds (minutes for all): run where asked, as
# `SCANLIB_TEST_JAX_PORTS=1 python -m pytest tests/test_ports.py`, or gen_golden.py --check.
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
@pytest.mark.skipif(not os.environ.get("SCANLIB_TEST_JAX_PORTS"),
                    reason="set SCANLIB_TEST_JAX_PORTS=1 to rerun the programs on JAX")
@pytest.mark.parametrize("name", harness.names())
def test_golden_is_jax_today(name):
    problems = harness.compare(harness.run(name, "jax"), harness.read_golden(name),
                               rtol=1e-9, atol=1e-12)
    assert not problems, f"{name}: JAX's results moved; rerun gen_golden.py\n" + "\n".join(problems)
