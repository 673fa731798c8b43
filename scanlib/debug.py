"""scanlib.debug: debug.print, as jax.debug.print, for values that are known when it runs.

Imports tape and pytree.
"""

from __future__ import annotations

import numpy as np

from . import pytree
from .tape import Tensor
from .tape.state import STATE

__all__ = ["print"]

_print = print


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Print fmt.format(*args, **kwargs) with each tensor shown as its NumPy array
    (`[1. 2.]`, and format specs such as `{x:.3f}` work on 0-d ones), as jax.debug.print.

    It prints at once wherever the values are real: in plain code, under grad, value_and_grad,
    vjp, jvp and jacfwd (the primal values). Inside a traced body (a scan or while_loop body,
    a jitted or vmapped function) the values are placeholders while the body is traced once,
    and the print would not run at each step, so there it raises a TypeError instead: return
    the values (a scan's ys, a jitted function's outputs) and print them after. `ordered` is
    accepted, as JAX's (prints here always come in program order).

    >>> sl.debug.print("x = {}, loss = {loss:.3f}", sl.tensor([1.0, 2.0]), loss=sl.tensor(0.25))
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: the format must be a str, got {type(fmt).__name__}; "
                        "write debug.print('{}', x) to print x")
    traced = any(b.process_primitive is None for b in STATE.builders)
    leaves = pytree.leaves((args, kwargs))
    if traced or any(isinstance(x, Tensor) and x._trace is not None
                     and x._trace.process_primitive is None for x in leaves):
        raise TypeError(
            "debug.print inside a traced body (a scan, fori_loop or while_loop body, or a "
            "function under jit or vmap): its values are placeholders while the body is traced "
            "once, so it cannot print them at each step. Return the values instead (as a "
            "scan's ys, or an output of the jitted function) and print them afterwards, or "
            "run the function without jit.")
    args, kwargs = pytree.tree_map(_shown, (args, kwargs))
    _print(fmt.format(*args, **kwargs))


def _shown(x):
    if isinstance(x, Tensor):
        return np.array(x._value) if not hasattr(x._value, "get") else x._value.get()
    return x
