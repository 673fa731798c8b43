"""What type checkers see: Tensor's operators and methods, attached at run time by scanlib.ops,
are declared once for them (scanlib/tape/declared.py) and the two lists stay equal; with mypy
installed, ordinary scanlib code checks clean and an obvious mistake is reported."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import textwrap

import pytest

import scanlib as sl
from scanlib.tape.declared import TensorMethods

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _defined_in_the_class_body() -> set[str]:
    """Names Tensor's own class statement defines (tape/tensor.py), its slots included."""
    with open(os.path.join(ROOT, "scanlib", "tape", "tensor.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor").body
    names = {"__module__", "__qualname__", "__doc__", "__firstlineno__", "__static_attributes__",
             "__dict__", "__weakref__"}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.add(target.id)
                if target.id == "__slots__":
                    names.update(ast.literal_eval(node.value))
    return names


def _attached() -> dict:
    """What scanlib.ops (and the tape's backward) attach to Tensor at run time."""
    own = _defined_in_the_class_body()
    return {n: v for n, v in vars(sl.Tensor).items() if n not in own}


def _declared() -> dict:
    return {n: v for n, v in vars(TensorMethods).items()
            if inspect.isfunction(v) or isinstance(v, property)}


def test_the_body_parser_sees_tensor():
    # Guard against a test that passes because it reads nothing.
    own = _defined_in_the_class_body()
    assert {"item", "numpy", "detach", "shape", "__slots__", "_value", "__bool__"} <= own
    assert {"__add__", "sum", "at", "backward"} <= set(_attached())


def test_every_attached_method_is_declared_for_type_checkers():
    attached, declared = _attached(), _declared()
    missing = sorted(set(attached) - set(declared))
    assert not missing, (f"Tensor gets {missing} at run time but scanlib/tape/declared.py does "
                         "not declare them: type checkers would reject code that uses them. "
                         "Add a typed declaration to TensorMethods.")
    stale = sorted(set(declared) - set(attached))
    assert not stale, (f"scanlib/tape/declared.py declares {stale}, which Tensor does not get "
                       "at run time (or defines in its own class body): remove them there.")


def test_properties_are_declared_as_properties():
    attached, declared = _attached(), _declared()
    for name, value in declared.items():
        assert isinstance(value, property) == isinstance(attached[name], property), name


def test_tensor_derives_from_the_declarations_only_for_type_checkers():
    assert sl.Tensor.__mro__ == (sl.Tensor, object)
    assert "scanlib.tape.declared" in sys.modules  # imported by this test alone
    code = "import sys, scanlib; print('scanlib.tape.declared' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


ORDINARY = """
    import numpy as np
    import scanlib as sl

    w = sl.tensor([1.0, 2.0], requires_grad=True)
    a = w + w
    b = w @ w
    c = w ** 2
    d = w[0]
    e = -w
    f = w.sum()
    g = 0 < w
    h = w.at[0].set(3.0)
    i = 2.0 * w - np.ones(2) / w
    j = w.mean(axis=0, keepdims=True).reshape(1, 1).T
    k = sl.sum(w, axis=0) + sl.exp(w).max() + sl.square(w).std() + sl.argmax(w)
    print(w.shape, w.astype("float32").to("cpu").detach().numpy(), float(w[0]), round(w, 2))


    def step(h: sl.Tensor, x: sl.Tensor) -> tuple[sl.Tensor, sl.Tensor]:
        h = sl.tanh(h * 0.5 + x)
        return h, h


    carry, ys = sl.scan(step, sl.zeros(2), sl.zeros((5, 2)))
    params = {"w": w}
    grads = sl.grad(lambda p: (p["w"] ** 2).sum())(params)
    opt = sl.optim.adam(1e-3)
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    params = sl.optim.apply_updates(params, updates)
    params, state = opt.step(grads, state, params)
    opt2 = sl.optim.chain(sl.optim.clip_by_global_norm(1.0), sl.optim.sgd(0.1, momentum=0.9))
    reveal_type(f)
    reveal_type(sl.sum(w))
"""

MISTAKES = """
    import scanlib as sl

    x = sl.zeros(2)
    sl.scan(1, 2)
    sl.exp(x, x)
    sl.optim.adam("fast")
"""


def _mypy(tmp_path, code: str) -> str:
    pytest.importorskip("mypy")
    path = tmp_path / "user_code.py"
    path.write_text(textwrap.dedent(code))
    # MYPYPATH: scanlib from this checkout, as an installed package would be found
    env = dict(os.environ, MYPYPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental",
                          "--follow-imports=silent", "--cache-dir=/dev/null", str(path)],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    return out.stdout + out.stderr


def test_mypy_accepts_ordinary_code_and_sees_tensors(tmp_path):
    out = _mypy(tmp_path, ORDINARY)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not errors, out
    assert out.count('Revealed type is "scanlib.tape.tensor.Tensor"') == 2, out


def test_mypy_reports_obvious_mistakes(tmp_path):
    out = _mypy(tmp_path, MISTAKES)
    assert 'Argument 1 to "scan" has incompatible type "int"' in out, out
    assert 'Too many arguments for "exp"' in out, out
    assert 'Argument 1 to "adam" has incompatible type "str"' in out, out
