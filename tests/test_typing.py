"""What type checkers see: Tensor's operators and methods, attached at run time by scanlib.ops,
are declared once for them (scanlib/tape/declared.py) and the two lists stay equal; with mypy
installed, ordinary scanlib code checks clean and an obvious mistake is reported."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys


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
