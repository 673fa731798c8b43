"""Per-thread recording state: is grad recording on, which graph is being traced, how deep
inside grad/vjp we are. This is the only mutable global state of scanlib.

Imports nothing from scanlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import threading

if TYPE_CHECKING:
    from collections.abc import Iterator


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.builders = []  # stack of GraphBuilder being traced (innermost last)
        self.diff_depth = 0  # > 0 while inside grad/vjp: their backward must then be recorded
        # One entry per grad/vjp/jvp call whose f is running (innermost last): the inputs it
        # differentiates, so that converting a value that depends on them to a Python number
        # can be refused (backward.differentiated_by).
        self.watched = []
        # Levels (tape/levels.py): the walk running now (its grad/vjp call's _Watch; None: a
        # Tensor.backward walk, or none); the level of the node whose rule it runs, and
        # whether that node is in levels.MIXED; whether the walk is of another level than
        # that node's, so that a custom_vjp differentiates fwd's operations, not by bwd
        # ("graph": the node runs graphs, a loop's body); whether a custom rule's own code
        # runs for a walk; and level_of's memo, (the watches, node -> level).
        self.walking = None
        self.rule_level = None
        self.rule_mixed = False
        self.custom_as_fwd = False
        self.rule_code = False
        self.level_memo = (None, None)
        # debug.print inside a custom_jvp's rule where it is differentiated (custom.py):
        # None prints; "silent" prints nothing and sets rule_printed (the rule run for its
        # linear map, or a first run for its primal output); "primal" prints only what does
        # not read the rule's tangents, which then require grad, as JAX's linearize does.
        self.rule_prints = None
        self.rule_printed = False
        # a custom call's rule is being traced beside its fun (custom.py): the calls inside
        # it compute fun, as where nothing differentiates them, and trace no rule of theirs
        self.tracing_rule = False
        # a graph whose custom calls were differentiated when its equation was (graph.
        # differentiated_graph) is replayed for its VJP (remat.py): bind takes its
        # equations as they are, whatever the replay's walk marks as requiring grad
        self.replaying_differentiated = False


STATE = _State()


def grad_enabled() -> bool:
    return STATE.grad_enabled


def current_builder():
    b = STATE.builders
    return b[-1] if b else None


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Context manager: ops inside record nothing for backward (like torch.no_grad)."""
    old = STATE.grad_enabled
    STATE.grad_enabled = False
    try:
        yield
    finally:
        STATE.grad_enabled = old


@contextlib.contextmanager
def enable_grad(enabled: bool = True) -> Iterator[None]:
    """Context manager: turn recording on (or off with enabled=False) inside a no_grad()."""
    old = STATE.grad_enabled
    STATE.grad_enabled = enabled
    try:
        yield
    finally:
        STATE.grad_enabled = old


@contextlib.contextmanager
def replaying_differentiated() -> Iterator[None]:
    """See _State.replaying_differentiated."""
    old = STATE.replaying_differentiated
    STATE.replaying_differentiated = True
    try:
        yield
    finally:
        STATE.replaying_differentiated = old


@contextlib.contextmanager
def differentiating():
    """Marks code run inside grad/vjp, whose own backward must be recorded for higher order."""
    STATE.diff_depth += 1
    try:
        yield
    finally:
        STATE.diff_depth -= 1


@contextlib.contextmanager
def tracing(builder):
    """Make builder the innermost trace. On leaving, it is closed: a tracer of it that escaped
    (kept in a list, a global) has no value and must not compute (bind checks)."""
    builder.grad_at_start = STATE.grad_enabled
    STATE.builders.append(builder)
    try:
        yield builder
    finally:
        STATE.builders.pop()
        builder.closed = True
