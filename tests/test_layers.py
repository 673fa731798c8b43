"""Layers point one way (STYLE.md): backends <- tape <- ops <- (tracing, autodiff) <- scan <-
the public API. Read from the source with ast, so a lazy import inside a function counts too;
an import under `if TYPE_CHECKING:` never runs and names types only, so it does not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "scanlib"

# A module may import scanlib modules of its own rank or lower.
RANKS = {"backends": 0, "logs": 0, "tape": 1, "ops": 2, "pytree": 2, "autodiff": 3, "tracing": 3,
         "testing": 3, "linalg": 3, "random": 3, "optim": 3, "remat": 3,
         "checkpoint_policies": 3, "interpreters": 3, "scan": 4,
         "transforms": 5, "associative": 5, "control": 5, "loops": 5, "vmap": 5,
         "jit": 5,
         "": 6}


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        yield ".".join(parts), is_pkg, path


def _exists(dotted: str) -> bool:
    p = ROOT.parent.joinpath(*dotted.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _is_type_checking(node) -> bool:
    """`if TYPE_CHECKING:` (or `if typing.TYPE_CHECKING:`)."""
    return isinstance(node, ast.If) and (
        getattr(node.test, "id", None) == "TYPE_CHECKING"
        or getattr(node.test, "attr", None) == "TYPE_CHECKING")


def imports_of(name: str, is_pkg: bool, path: Path) -> set[str]:
    """Absolute names of every module `path` imports (scanlib's and third-party)."""
    package = name if is_pkg else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    for_types = {id(n) for node in ast.walk(tree) if _is_type_checking(node)
                 for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in for_types:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            # `from pkg import sub` imports the submodule pkg.sub when there is one.
            subs = [f"{mod}.{a.name}" for a in node.names if _exists(f"{mod}.{a.name}")]
            found.update(subs or [mod])
            if len(subs) < len(node.names):
                found.add(mod)
    return found


MODULES = list(_modules())
IMPORTS = {name: imports_of(name, is_pkg, path) for name, is_pkg, path in MODULES}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _scanlib(imports):
    return {m for m in imports if m == "scanlib" or m.startswith("scanlib.")}


def test_the_parser_sees_the_imports():
    # Guard against a test that passes because it reads nothing.
    assert len(MODULES) >= 15
    assert "scanlib.backends" in IMPORTS["scanlib.tape.backward"]
    assert "scanlib.tape.state" in IMPORTS["scanlib.tape.backward"]
    assert "scanlib.ops.primitive" in IMPORTS["scanlib.ops.elementwise"]
    assert "numpy" in IMPORTS["scanlib.backends"]
    assert "cupy" in IMPORTS["scanlib.backends._cupy"]
    # tensor.py names its declared methods (ops.at's IndexUpdate) for type checkers only
    assert "scanlib.tape.declared" not in IMPORTS["scanlib.tape.tensor"]
    assert "scanlib.tape.state" in IMPORTS["scanlib.tape.tensor"]


@pytest.mark.parametrize("name", [n for n, _, _ in MODULES if _layer(n) == "backends"])
def test_backends_import_nothing_from_scanlib(name):
    outside = {m for m in _scanlib(IMPORTS[name]) if _layer(m) != "backends"}
    assert not outside, f"{name} imports {sorted(outside)}"


@pytest.mark.parametrize("name", [n for n, _, _ in MODULES if _layer(n) == "tape"])
def test_tape_imports_only_backends(name):
    bad = {m for m in _scanlib(IMPORTS[name]) if _layer(m) not in ("backends", "tape")}
    assert not bad, f"{name} imports {sorted(bad)}"


@pytest.mark.parametrize("name", [n for n, _, _ in MODULES if _layer(n) == "ops"])
def test_ops_import_only_backends_tape_and_ops(name):
    bad = {m for m in _scanlib(IMPORTS[name]) if _layer(m) not in ("backends", "tape", "ops")}
    assert not bad, f"{name} imports {sorted(bad)}"


@pytest.mark.parametrize("name", [n for n, _, _ in MODULES])
def test_no_module_imports_a_higher_layer(name):
    rank = RANKS.get(_layer(name))
    assert rank is not None, f"{name}: a new top-level module needs a rank in RANKS"
    bad = {m for m in _scanlib(IMPORTS[name]) if RANKS.get(_layer(m), 99) > rank}
    assert not bad, f"{name} (rank {rank}) imports {sorted(bad)}"


@pytest.mark.parametrize("name", [n for n, _, _ in MODULES if _layer(n) != "backends"])
def test_only_backends_import_cupy(name):
    cupy = {m for m in IMPORTS[name] if m == "cupy" or m.startswith("cupy.")}
    assert not cupy, f"{name} imports {sorted(cupy)}; only scanlib/backends may"


def test_import_scanlib_does_not_import_cupy():
    import subprocess
    import sys

    code = "import sys, scanlib; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT.parent, check=True)
    assert out.stdout.strip() == "False"
