"""What a contender is: a name, whether it can run here, and how to build a runner for one
workload. A runner's `run()` does one forward + full backward and returns its own result;
`to_numpy(result)` turns that into (loss, {flat name: NumPy gradient}) for the agreement check,
outside the timed region. Imports nothing but the standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Runner:
    run: Callable[[], Any]
    to_numpy: Callable[[Any], tuple]


def _always(*_args):
    return None


@dataclass
class Contender:
    name: str
    family: str
    build: Callable[..., Runner]  # (workload, inputs, consts) -> Runner
    available: Callable[[], str | None] = _always  # None, or why it cannot run here
    supports: Callable[[Any], str | None] = _always  # (workload) -> None, or why not
    too_slow: Callable[[Any, str], str | None] = _always  # (workload, size) -> None, or why
    memory_visible: bool = True  # tracemalloc sees its allocations (NumPy-backed)
    note: str = ""
