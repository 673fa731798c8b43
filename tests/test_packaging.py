"""The distribution's name and metadata: every instruction that installs from the package index
names the distribution `scanlib-autodiff` (the name `scanlib` on the index is an unrelated
project), and pyproject.toml declares that name, the license and the typing marker."""

from __future__ import annotations

import os
import re

from test_docs import load_gen_api  # docs/gen_api.py, loaded as a module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "scanlib-autodiff"

# Text a user reads or runs: the README, the docs, the package's docstrings and messages, the
# examples and the benchmark (tests are left out: they may quote the old name on purpose).
SCANNED = ("README.md", "CHANGELOG.md", "docs", "scanlib", "examples", "bench", ".ci")
SUFFIXES = (".md", ".py", ".pyi", ".sh", ".txt", ".toml", ".cfg", "run")

# `pip install scanlib`, `pip install 'scanlib[jit]'`, `"scanlib[cuda12]"`, `scanlib[jit]`:
# the taken name, with or without extras, not followed by more of a name (`scanlib-autodiff`).
TAKEN = re.compile(r"""(?<![\w.-])scanlib\[|pip3?\s+install\s+(?:-\S+\s+)*['"]?scanlib(?![\w.-])""")


def _files():
    for entry in SCANNED:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield path
        for folder, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "results", "out")]
            for n in names:
                if n.endswith(SUFFIXES):
                    yield os.path.join(folder, n)


def taken_name_instructions(text: str) -> list[tuple[int, str]]:
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1)
            if TAKEN.search(line)]


def test_the_pattern_finds_the_taken_name_and_passes_the_new_one():
    bad = ["pip install 'scanlib[jit]'", 'pip install "scanlib[cuda12]"',
           "pip install scanlib", "pip install -U scanlib", "extras: scanlib[cuda13]"]
    good = ["pip install 'scanlib-autodiff[jit]'", "pip install scanlib-autodiff",
            "pip install -e '.[test]'", "import scanlib", "scanlib.scan(f, init, xs)",
            "pip install -q -e '.[demo]'"]
    assert all(taken_name_instructions(t) for t in bad)
    assert not any(taken_name_instructions(t) for t in good)


def test_no_text_tells_users_to_install_the_taken_name():
    found = []
    for path in _files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found += [f"{os.path.relpath(path, ROOT)}:{i}: {line}"
                  for i, line in taken_name_instructions(text)]
    assert not found, (
        f"these lines install the distribution `scanlib`, an unrelated project on the package "
        f"index; write `{NAME}` (e.g. pip install '{NAME}[jit]'):\n" + "\n".join(found))


def _project_table() -> str:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    return text.split("[project]", 1)[1].split("\n[", 1)[0]


def test_pyproject_names_the_distribution_and_its_license():
    project = _project_table()
    assert re.search(rf'^name = "{NAME}"$', project, re.M), "pyproject's name"
    assert re.search(r'^license = "BSD-3-Clause"$', project, re.M), "an SPDX license string"
    assert re.search(r'^license-files = \["LICENSE"\]$', project, re.M)
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
        license_text = f.read()
    assert "Copyright (c) 2026, the scanlib developers" in license_text
    assert "Redistribution and use in source and binary forms" in license_text


def test_the_package_is_marked_typed():
    assert os.path.isfile(os.path.join(ROOT, "scanlib", "py.typed"))
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert "py.typed" in f.read(), "py.typed must be listed as package data so it ships"


def test_primitives_show_their_signature_at_run_time():
    import inspect
    import pydoc

    import scanlib as sl

    assert str(inspect.signature(sl.exp)) == "(x: 'ArrayLike', /) -> 'Tensor'"
    assert str(inspect.signature(sl.maximum)) == "(x: 'ArrayLike', y: 'ArrayLike', /) -> 'Tensor'"
    text = pydoc.render_doc(sl.tanh, renderer=pydoc.plaintext)
    assert "tanh(x: 'ArrayLike', /) -> 'Tensor'" in text and "hyperbolic tangent" in text
    # what help() shows does not change what a primitive is or does
    assert isinstance(sl.exp, sl.ops.Primitive) and sl.exp.name == "exp"

    class Holder:
        f = sl.exp  # a primitive as a class attribute does not bind like a method

    assert Holder().f is sl.exp and float(Holder().f(0.0)) == 1.0


def test_public_functions_are_annotated():
    import inspect

    import scanlib as sl

    sig = inspect.signature(sl.scan)
    # jax.lax.scan's positional order; scanlib's own options are keywords
    assert list(sig.parameters)[:6] == ["f", "init", "xs", "length", "reverse", "unroll"]
    assert sig.parameters["dim"].kind is inspect.Parameter.KEYWORD_ONLY
    # every public function, scanlib's and scanlib.optim's (an unannotated one is Any, unchecked,
    # to a type checker), and GradientTransformation's methods
    functions = [(f"sl.{n}", getattr(sl, n)) for n in sl.__all__]
    functions += [(f"sl.optim.{n}", getattr(sl.optim, n)) for n in sl.optim.__all__]
    functions += [(f"GradientTransformation.{n}", getattr(sl.optim.GradientTransformation, n))
                  for n in ("init", "update", "step")]
    checked = 0
    for name, obj in functions:
        if inspect.ismodule(obj) or inspect.isclass(obj) or not callable(obj):
            continue
        sig = inspect.signature(obj)
        assert sig.return_annotation is not inspect.Signature.empty, name
        assert all(p.annotation is not inspect.Parameter.empty
                   for p in sig.parameters.values() if p.name != "self"), name
        checked += 1
    assert checked > 150


def test_the_stub_matches_the_package_at_run_time():
    with open(os.path.join(ROOT, "scanlib", "__init__.pyi"), encoding="utf-8") as f:
        stub = f.read()
    assert stub == load_gen_api().stub_text(), ("scanlib/__init__.pyi is out of date; run "
                                            "python docs/gen_api.py")
    assert "def exp(x: ArrayLike, /) -> Tensor:" in stub
    assert "from .scan.api import scan as scan" in stub


# A commit hash (7-40 hex digits with a letter and a digit), or a note on how the code was made.
DEV_NOTE = re.compile(r"(?<![\w.])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?!\w)"
                      r"|\bsessions?\b|\bissue \d+|\badversarial\b")
# bench/NOTES.md is the benchmark's log; ablation.py takes git revisions as its input.
DEV_TEXT = ("bench/NOTES.md", "bench/ablation.py", "bench/_ablation_child.py")


def test_user_facing_text_has_no_commit_hashes_or_development_notes():
    found = []
    for path in _files():
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        if rel in DEV_TEXT or rel.startswith(".ci/"):
            continue
        with open(path, encoding="utf-8") as f:
            found += [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(f, 1)
                      if DEV_NOTE.search(line)]
    assert not found, ("user-facing text should say what the code does, not when or how it was "
                       "written (no commit hashes, sessions or issue numbers):\n"
                       + "\n".join(found))
