"""Layers point one way (STYLE.md): backends <- tape <- ops <- (tracing, autodiff) <- scan <-
the public API. Read from the source with ast, so a lazy import inside a function counts too;
an import under `if TYPE_CHECKING:` never runs and names types only, so it does not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "scanlib"

# A module may import scanlib modules of its own rank or lower. optim is 5: its linesearch
# loops with while_loop and cond (control, branching).
RANKS = {"backends": 0, "logs": 0, "generated": 0, "tape": 1, "ops": 2, "pytree": 2,
         "autodiff": 3, "tracing": 3,
         "testing": 3, "linalg": 3, "random": 3, "distributions": 3, "optim": 5, "remat": 3,
         "checkpoint_policies": 3, "interpreters": 3, "numpy": 6, "distributed": 3, "scan": 4,
         "transforms": 5, "associative": 5, "control": 5, "loops": 5, "vmap": 5,
         "jit": 5, "while_replay": 5, "vectorizing": 5, "custom": 5, "closure": 5,
         "custom_derivatives": 5, "ad_checkpoint": 3, "branching": 5, "implicit": 5, "lax": 6,
         "experimental": 6, "callbacks": 3,
         "tree_util": 2, "tree": 2, "flatten_util": 3, "scipy": 3, "debug": 3, "nn": 3,
         "runtime": 6, "typing": 1,
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


# Inside a folder, the same rule by folder-level rank. scan/: helpers, then the loop compiler,
# then what runs and differentiates a body, then the primitive and its rules (jvp, batching:
# they read scan_p's module at call time), then the API on top of it.
# scan/loop/ (the loop compiler): the primitives' facts, then the form (ir), then the passes
# over it, then its interpreter and printers.
INNER_RANKS = {
    "scanlib.scan": {"schedule": 0, "cache": 0, "interpret": 0, "loop": 1, "executor": 2,
                     "linearize": 2, "residuals": 0, "primitive": 3, "jvp": 3, "batching": 3,
                     "revolve": 4, "fused": 4, "regions": 5, "api": 5,
                     "plan": 6, "": 7},
    "scanlib.scan.loop": {"batch": 0, "inplace": 0, "native_kernels": 0, "native_nests": 0,
                          "native_prng": 0, "native_background": 0, "native_rules": 1,
                          "ir": 1, "alias": 1, "memory": 2, "passes": 2, "interp": 3,
                          "emit": 3, "native": 4, "native_while": 5, "native_worker": 5,
                          "": 6},
}
# What a folder may import from scanlib outside it: layers up to this rank. The loop compiler
# reads graphs and primitives (tape, ops); it knows nothing of tracing, remat or scan's API.
OUTER_LIMIT = {"scanlib.scan.loop": 2}


def _inner(module: str, folder: str) -> str | None:
    """The part of `module` right below `folder` ("" for the folder's package itself); None
    when the module is outside the folder."""
    if module == folder:
        return ""
    if module.startswith(folder + "."):
        return module[len(folder) + 1:].split(".")[0]
    return None


@pytest.mark.parametrize("folder,name", [(f, n) for f in INNER_RANKS for n, _, _ in MODULES
                                         if _inner(n, f) is not None])
def test_no_module_imports_a_higher_module_of_its_folder(folder, name):
    ranks = INNER_RANKS[folder]
    rank = ranks.get(_inner(name, folder))
    assert rank is not None, f"{name}: a new module of {folder} needs a rank in INNER_RANKS"
    inside = {m for m in _scanlib(IMPORTS[name]) if _inner(m, folder) is not None}
    bad = {m for m in inside if ranks.get(_inner(m, folder), 99) > rank}
    assert not bad, f"{name} (rank {rank} in {folder}) imports {sorted(bad)}"


@pytest.mark.parametrize("folder,name", [(f, n) for f in OUTER_LIMIT for n, _, _ in MODULES
                                         if _inner(n, f) is not None])
def test_a_folder_imports_only_low_layers_from_outside(folder, name):
    outside = {m for m in _scanlib(IMPORTS[name]) if _inner(m, folder) is None}
    bad = {m for m in outside if RANKS.get(_layer(m), 99) > OUTER_LIMIT[folder]}
    assert not bad, (f"{name} imports {sorted(bad)}; {folder} may import only layers of rank "
                     f"{OUTER_LIMIT[folder]} or lower (see RANKS)")


def private_uses(name: str, is_pkg: bool, path: Path) -> set[tuple[str, str]]:
    """(module, name) of each private name of another scanlib module that `path` reads: by
    `from module import _name`, or as `module._name` on a module it imported. A package's
    own private submodule (backends' `_cupy`) is its own business."""
    package = name if is_pkg else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    found, modules = set(), {}

    def private(n):
        return n.startswith("_") and not n.startswith("__")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                mod = ".".join(base[: len(base) - (node.level - 1)]
                               + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not (mod == "scanlib" or mod.startswith("scanlib.")):
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                if _exists(sub):
                    modules[a.asname or a.name] = sub
                    if private(a.name) and mod != name:
                        found.add((mod, a.name))
                elif private(a.name) and mod != name:
                    found.add((mod, a.name))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name.startswith("scanlib."):
                    modules[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and private(node.attr)):
            found.add((modules[node.value.id], node.attr))
    return found


# Private names that cross a module border today, each with why it still does. A new one is
# a seam: give it a public name in its home module (or add it here with its reason).
PRIVATE_USES_ALLOWED = {
    ("scanlib.ops.gathers", "scanlib.ops.arrays"):
        ({"_along", "_flat", "_on_device_of", "_xp", "_zero_d_as_1d"},
         "arrays.py's argument helpers, shared by the op modules split from it"),
    ("scanlib.ops.reductions", "scanlib.ops.arrays"):
        ({"_along", "_constant", "_flat", "_is_one_int_axis_of_0d", "_xp", "_zero_d_as_1d"},
         "arrays.py's argument helpers, shared by the op modules split from it"),
    ("scanlib.distributions", "scanlib.random"):
        ({"_check_key", "_check_shape", "_float_dtype", "_param", "_shape", "_shape_of"},
         "random's argument checks: distributions.py is scanlib.random's second half"),
    ("scanlib.optim.transforms", "scanlib.optim.core"):
        ({"_FIX_STATE", "_a", "_count_zero", "_moments", "_number", "_rebuild", "_type"},
         "optim's own helpers: core.py and transforms.py are one package's two halves"),
    ("scanlib.optim.scaling", "scanlib.optim.core"):
        ({"_count_zero", "_moments", "_number", "_rebuild"},
         "optim's stage helpers (checked flat leaves), shared by its stage modules"),
    ("scanlib.optim.scaling", "scanlib.optim.transforms"):
        ({"_check_state"}, "optim's stage helpers, shared by its stage modules"),
    ("scanlib.optim.blockwise", "scanlib.optim.core"):
        ({"_FIX_STATE", "_count_zero", "_flatten", "_moments", "_rebuild", "_select", "_type"},
         "optim's stage helpers (checked flat leaves), shared by its stage modules"),
    ("scanlib.optim.blockwise", "scanlib.optim.scaling"):
        ({"_no_mu_dtype", "_numbers", "_zeros"},
         "scaling.py's argument helpers, shared with the stages split from it"),
    ("scanlib.optim.blockwise", "scanlib.optim.transforms"):
        ({"_check_state", "_empty_init", "_scaled", "_schedule_value"},
         "optim's stage helpers, shared by its stage modules"),
    ("scanlib.optim.stages", "scanlib.optim.core"):
        ({"_count_zero", "_extra", "_moments", "_number", "_rebuild", "_select_tree"},
         "optim's stage helpers (checked flat leaves), shared by its stage modules"),
    ("scanlib.optim.stages", "scanlib.optim.scaling"):
        ({"_debias"}, "optax's bias correction, written once for ema and the scale_by_* stages"),
    ("scanlib.optim.stages", "scanlib.optim.transforms"):
        ({"_check_state", "_empty_init", "_sum_of_squares"},
         "optim's stage helpers, shared by its stage modules"),
    ("scanlib.optim.linesearch", "scanlib.optim.core"):
        ({"_FIX_STATE", "_check_like", "_count_zero", "_extra", "_flatten", "_moments",
          "_number", "_rebuild"},
         "optim's stage helpers (checked flat leaves), shared by its stage modules"),
    ("scanlib.optim.linesearch", "scanlib.optim.transforms"):
        ({"_check_state", "_sum_of_squares"}, "optim's stage helpers, shared by its stage "
         "modules"),
    ("scanlib.optim.wrappers", "scanlib.optim.core"):
        ({"_Flat", "_a", "_count_zero", "_differentiating", "_flatten", "_moments", "_number",
          "_recording", "_rebuild", "_select_tree"},
         "a wrapper runs its inner stages on checked flat leaves, core's own form"),
    ("scanlib.scan.api", "scanlib.scan.primitive"):
        ({"_needs_grad"}, "scan_p's own test of what needs a gradient, to become its rule"),
    ("scanlib.scan.plan", "scanlib.scan.primitive"):
        ({"_needs_grad"}, "scan_p's own test of what needs a gradient, to become its rule"),
    ("scanlib.scan.revolve", "scanlib.scan.primitive"):
        ({"_mode", "_scan_impl", "_scan_vjp", "_differentiated_scan", "_depends_scan"},
         "revolve_scan is scan_p with another VJP schedule: it runs scan_p's impl and VJP, "
         "and its body is differentiated, and its outputs depend, as scan_p's"),
}


PRIVATE_USES = {name: private_uses(name, is_pkg, path) for name, is_pkg, path in MODULES}


def test_the_private_name_check_sees_them():
    assert ("scanlib.scan.primitive", "_scan_vjp") in PRIVATE_USES["scanlib.scan.revolve"]
    assert ("scanlib.backends._cupy", "_cupy") not in PRIVATE_USES["scanlib.backends"]


@pytest.mark.parametrize("name", [n for n, _, _ in MODULES])
def test_private_names_do_not_cross_module_borders(name):
    new = set()
    for owner, attr in PRIVATE_USES[name]:
        allowed, _reason = PRIVATE_USES_ALLOWED.get((name, owner), (set(), ""))
        if attr not in allowed:
            new.add(f"{owner}.{attr}")
    assert not new, (f"{name} uses private names of other modules: {sorted(new)}. Give each "
                     "a public name in its module where it is a seam between the two, or add "
                     "it to PRIVATE_USES_ALLOWED with the reason it stays private.")


def test_the_allow_list_has_no_stale_entries():
    for (name, owner), (attrs, reason) in PRIVATE_USES_ALLOWED.items():
        assert reason, (name, owner)
        used = {a for o, a in PRIVATE_USES.get(name, ()) if o == owner}
        assert attrs <= used, f"{name} no longer uses {sorted(attrs - used)} of {owner}"


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
