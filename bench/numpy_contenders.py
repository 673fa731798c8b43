"""numpy-manual and numpy-hoisted as contenders (the functions live in numpy_manual.py).

Imports NumPy and bench's own modules.
"""

from __future__ import annotations

from . import numpy_manual as M
from .contender import Contender, Runner
from .workloads import flatten


def _build(table):
    def build(wl, inputs, consts):
        fn = table[wl.kind]
        return Runner(run=lambda: fn(inputs, consts),
                      to_numpy=lambda r: (r[0], flatten(r[1])))
    return build


def _has(table):
    return lambda wl: None if wl.kind in table else "no hoisting applies to this recurrence"


CONTENDERS = [
    Contender("numpy-manual", "numpy", _build(M.MANUAL),
              note="hand-written BPTT, per step, preallocated, out="),
    Contender("numpy-hoisted", "numpy", _build(M.HOISTED), supports=_has(M.HOISTED),
              note="numpy-manual plus hoisting and batched weight gradients"),
]
