"""The minimum versions CI's second environment tests (.ci/min-versions.txt) are the floors
pyproject.toml declares: Python's, and each of scanlib's dependencies'; a NumPy below the floor
is refused at import."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # packaging: a dependency of pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _project_table():
    """requires-python, dependencies and the test extra from pyproject.toml (tomllib is
    Python 3.11+)."""
    text = (ROOT / "pyproject.toml").read_text()
    if sys.version_info >= (3, 11):
        import tomllib
        project = tomllib.loads(text)["project"]
        return (project["requires-python"], project["dependencies"],
                project["optional-dependencies"]["test"])
    body = text.split("[project]", 1)[1].split("\n[", 1)[0]  # Python 3.10: read the keys
    python = re.search(r'^requires-python\s*=\s*"([^"]+)"', body, re.M).group(1)
    deps = re.search(r"^dependencies\s*=\s*\[([^\]]*)\]", body, re.M).group(1)
    extras = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    test = re.search(r"^test\s*=\s*\[([^\]]*)\]", extras, re.M).group(1)
    return python, re.findall(r'"([^"]+)"', deps), re.findall(r'"([^"]+)"', test)


def _floor(specifier: SpecifierSet, what: str) -> Version:
    floors = [Version(s.version) for s in specifier if s.operator == ">="]
    assert len(floors) == 1, f"{what} declares no single >= floor: {specifier}"
    return floors[0]


def _min_versions():
    """{name: pinned version} and the Python version written in .ci/min-versions.txt."""
    pins, python = {}, None
    for line in (ROOT / ".ci" / "min-versions.txt").read_text().splitlines():
        found = re.fullmatch(r"#\s*python\s+(\S+)\s*", line)
        if found:
            python = Version(found.group(1))
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f".ci/min-versions.txt pins with ==: {line!r}"
            pins[req.name.lower()] = Version(spec.version)
    return pins, python


def test_ci_min_versions_are_the_declared_floors():
    """Every dependency is pinned at its floor; a pinned test tool (numba, scipy: the numba
    tier's) at the floor the test extra declares."""
    requires_python, dependencies, test_extra = _project_table()
    pins, python = _min_versions()
    assert python == _floor(SpecifierSet(requires_python), "requires-python"), (
        f".ci/min-versions.txt tests Python {python}, pyproject.toml requires {requires_python}")
    declared = {}
    for dep in dependencies:
        req = Requirement(dep)
        declared[req.name.lower()] = _floor(req.specifier, req.name)
    tools = {}
    for dep in test_extra:
        req = Requirement(dep)
        if req.name.lower() in pins and req.name.lower() not in declared:
            tools[req.name.lower()] = _floor(req.specifier, req.name)
    assert pins == {**declared, **tools}, (
        f".ci/min-versions.txt pins {pins}, pyproject.toml's floors are {declared} and {tools}")


def test_an_older_numpy_is_refused_at_import_rather_than_giving_other_dtypes():
    from scanlib import backends
    for old in ("1.24.4", "1.26.4", "2.0.0rc1"):
        with pytest.raises(ImportError, match=rf"NumPy 2\.0 or later, but NumPy {old} .*pip"):
            backends.require_numpy_2(old)
    for new in ("2.0.0", "2.4.6", "3.0.0.dev0"):
        backends.require_numpy_2(new)
