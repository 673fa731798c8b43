"""Run a JAX program on scanlib by changing its imports alone, and compare with JAX.

A program in `programs/` is written for JAX (`import jax`, `import jax.numpy as jnp`,
`import optax`, ...). `load(name, "scanlib")` rewrites its import lines, and only those, by the
import block that README and docs/porting.md give a port:

    import jax                 ->  import scanlib as jax
    import jax.numpy as jnp    ->  import scanlib.numpy as jnp
    from jax import lax        ->  from scanlib import lax
    from jax.scipy.x import y  ->  from scanlib.scipy.x import y
    import optax               ->  import scanlib.optim as optax

and runs the result as a module. `load(name, "jax")` runs the program as written.

A case in `cases.py` drives a program: it builds inputs with NumPy (the same on both sides),
calls the program through the `jax` and `jnp` it is given, and returns a pytree of results
(values and gradients). `golden/<name>.npz` holds JAX's results (float64, `jax_enable_x64`),
written by `python tests/ports/gen_golden.py`, so that the tests compare with JAX where JAX is
not installed.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
PROGRAMS = HERE / "programs"
GOLDEN = HERE / "golden"

_IMPORT_LINE = re.compile(r"^(\s*)(import|from)\s+(.*)$")


def _port_module(name: str) -> str:
    """The scanlib module a JAX module name maps to ("jax.numpy" -> "scanlib.numpy")."""
    if name == "optax" or name.startswith("optax."):
        return "scanlib.optim" + name[len("optax"):]
    if name == "jax" or name.startswith("jax."):
        return "scanlib" + name[len("jax"):]
    return name


def translate(source: str) -> str:
    """The program with its JAX import lines replaced by scanlib's, every other line as is."""
    out = []
    for line in source.splitlines(keepends=True):
        m = _IMPORT_LINE.match(line)
        if m is None:
            out.append(line)
            continue
        indent, kind, rest = m.groups()
        if kind == "from":
            module, _, names = rest.partition(" import ")
            ported = _port_module(module.strip())
            if ported != module.strip():
                line = f"{indent}from {ported} import {names}"
                line = line if line.endswith("\n") else line + "\n"
        else:
            parts = []
            for item in rest.split(","):
                module, _, alias = item.strip().partition(" as ")
                ported = _port_module(module)
                if ported == module:
                    parts.append(item.strip())
                elif alias:
                    parts.append(f"{ported} as {alias}")
                else:  # `import jax.numpy` binds the name `jax`, as `import jax` does
                    top = module.split(".")[0]
                    parts.append(f"{_port_module(top)} as {top}")
            line = f"{indent}import {', '.join(parts)}\n"
        out.append(line)
    return "".join(out)


def names() -> list[str]:
    return sorted(p.stem for p in PROGRAMS.glob("*.py") if not p.stem.startswith("_"))


def load(name: str, backend: str) -> types.ModuleType:
    """The program `name` as a fresh module, on "jax" (as written) or "scanlib" (ported)."""
    source = (PROGRAMS / f"{name}.py").read_text()
    if backend == "scanlib":
        source = translate(source)
    elif backend != "jax":
        raise ValueError(f"backend must be 'jax' or 'scanlib', not {backend!r}")
    module = types.ModuleType(f"ports_{name}_{backend}")
    module.__file__ = str(PROGRAMS / f"{name}.py")
    sys.modules[module.__name__] = module  # dataclasses and pickling look modules up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def frameworks(backend: str):
    """(jax, jnp) for a case: JAX's own, or the scanlib modules the import block names."""
    if backend == "jax":
        return importlib.import_module("jax"), importlib.import_module("jax.numpy")
    return importlib.import_module("scanlib"), importlib.import_module("scanlib.numpy")


def flatten(tree, prefix: str = "") -> dict[str, np.ndarray]:
    """A case's results as {"grad/0/W": array}: dicts by key, sequences by index."""
    if isinstance(tree, dict):
        items = sorted(tree.items())
    elif isinstance(tree, (list, tuple)):
        items = list(enumerate(tree))
    else:
        return {prefix or "value": np.asarray(tree)}
    flat = {}
    for key, sub in items:
        flat.update(flatten(sub, f"{prefix}/{key}" if prefix else str(key)))
    return flat


def run(name: str, backend: str) -> dict[str, np.ndarray]:
    from . import cases

    jax, jnp = frameworks(backend)
    # JAX in float64, as scanlib computes by default; scoped, so that other tests' JAX stays
    # in its default float32.
    with jax.enable_x64(True) if backend == "jax" else contextlib.nullcontext():
        program = load(name, backend)
        return flatten(cases.CASES[name](program, jax, jnp))


def read_golden(name: str) -> dict[str, np.ndarray]:
    with np.load(GOLDEN / f"{name}.npz") as f:
        return {k: f[k] for k in f.files}


def compare(got: dict, want: dict, *, rtol: float, atol: float) -> list[str]:
    """What differs, one line each (empty when the results agree)."""
    problems = []
    if sorted(got) != sorted(want):
        problems.append(f"results {sorted(got)} != JAX's {sorted(want)}")
    for key in sorted(set(got) & set(want)):
        g, w = got[key], want[key]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{key}: {g.dtype}{list(g.shape)} != JAX's {w.dtype}{list(w.shape)}")
        elif not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            err = np.max(np.abs(g - w) / (atol + rtol * np.abs(w)))
            problems.append(f"{key}: differs from JAX's ({err:.3g} x the tolerance)")
    return problems
