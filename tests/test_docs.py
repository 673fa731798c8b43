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
    for module in ("linalg", "random", "optim"):  # a section each, an entry per own name
        names = re.findall(rf"^### {module}\.(\S+)$", text, re.MULTILINE)
        sub = getattr(sl, module)
        # a nested module (optim.tree_utils) is one entry, its names entries of their own
        nested = [n for n in names if "." in n]
        names = [n for n in names if "." not in n]
        for n in nested:
            outer, _, inner = n.partition(".")
            assert outer in sub.__all__ and inner in getattr(sub, outer).__all__, n
        own = [n for n in sub.__all__  # a top-level object is listed, documented there
               if not any(getattr(sl, t, None) is getattr(sub, n) for t in sl.__all__)]
        assert names == own


def test_readme_quick_start_has_the_ci_command():
    readme = read("README.md")
    ci = read(".ci", "run")
    command = "pip install -q -e '.[test]' && python -m pytest"
    assert command in ci
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line for line in quick.splitlines() if line.startswith(("pip ", "python "))]
    assert commands == ["pip install -e '.[demo]' && python examples/char_lm.py", command]


def _walk_stages():
    """docs/internals.md's walk through the code: [(heading, stated total, [(file, stated
    lines)])], one entry per stage."""
    text = read("docs", "internals.md").split("## A walk through the code\n", 1)[1]
    text = text.split("\n## ", 1)[0]
    stages = []
    for part in re.split(r"^### ", text, flags=re.MULTILINE)[1:]:
        heading = part.splitlines()[0]
        total = re.search(r"\(about ([\d,]+) lines\)$", heading)
        rows = re.findall(r"^\| \d+ \| `(scanlib/[\w/]+\.py)` \| (\d+) \|", part, re.MULTILINE)
        stages.append((heading, total and int(total.group(1).replace(",", "")),
                       [(path, int(n)) for path, n in rows]))
    return stages


def _lines(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read().count(b"\n")  # as wc -l counts


def test_the_walk_through_the_code_states_true_line_counts():
    stages = _walk_stages()
    assert len(stages) == 5 and all(rows for _, _, rows in stages)  # the parser reads them
    wrong = []
    for heading, total, rows in stages:
        for path, stated in rows:
            assert os.path.exists(os.path.join(ROOT, path)), f"{path} is listed but missing"
            if abs(_lines(path) - stated) > 0.1 * _lines(path):
                wrong.append(f"{path}: {_lines(path)} lines, the table says {stated}")
        actual = sum(_lines(p) for p, _ in rows)
        if total is None or abs(actual - total) > 0.1 * actual:
            wrong.append(f"stage {heading!r}: {actual} lines in all, the heading says {total}")
    assert not wrong, "docs/internals.md, A walk through the code:\n" + "\n".join(wrong)
