"""The docs stay true: docs/api.md covers every public name and, like docs/tutorial.md, shows
the output its examples really print; the README's test command is the one CI runs."""

from __future__ import annotations

import importlib.util
import os
import re

import scanlib as sl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(*parts) -> str:
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def load_gen_api():
    spec = importlib.util.spec_from_file_location("gen_api", os.path.join(ROOT, "docs",
                                                                          "gen_api.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_and_tutorial_are_up_to_date(capsys):
    status = load_gen_api().main(["--check"])
    assert status == 0, capsys.readouterr().err


def test_api_reference_covers_every_public_name():
    text = read("docs", "api.md")
    headings = re.findall(r"^## (\S+)$", text, re.MULTILINE)
    assert headings == [*sl.__all__, "pytree"]  # then the pytree helpers' section
    members = re.findall(r"^### Tensor\.(\S+)$", text, re.MULTILINE)
    for name in ("at", "detach", "to", "astype", "item", "numpy", "backward", "grad",
                 "requires_grad", "shape", "dtype", "device"):
        assert name in members, f"Tensor.{name} is not documented"
    assert "retain_graph" in text.split("### Tensor.backward", 1)[1].split("###", 1)[0]
    assert "<summary>Full docstring</summary>" in text.split("## scan\n", 1)[1].split("## ")[0]
    for module in ("linalg", "random", "optim"):  # a section each, an entry per name
        names = re.findall(rf"^### {module}\.(\S+)$", text, re.MULTILINE)
        assert names == list(getattr(sl, module).__all__)


def test_readme_quick_start_has_the_ci_command():
    readme = read("README.md")
    ci = read(".ci", "run")
    command = "pip install -q -e '.[test]' && python -m pytest"
    assert command in ci
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line for line in quick.splitlines() if line.startswith(("pip ", "python "))]
    assert commands == ["pip install -e '.[demo]' && python examples/char_lm.py", command]
