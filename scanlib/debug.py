"""scanlib.debug: debug.print, as jax.debug.print: it prints at once where its values are known,
and inside a traced body (scan, while_loop, jit, vmap) it is an equation of the body, the
primitive debug_print_p, that prints each time the body runs (at every step of a loop).

Imports backends, tape, ops and pytree.
"""

from __future__ import annotations

import numpy as np

from . import backends, pytree
from .ops.primitive import Primitive
from .tape import Tensor
from .tape.state import STATE

__all__ = ["print"]

_print = print


def _shown(x):
    """A leaf as jax.debug.print shows it: an array as NumPy prints it ([1. 2.])."""
    if isinstance(x, Tensor):
        x = x._value
    if backends.is_array(x) and not isinstance(x, np.ndarray):
        return backends.to_numpy(x)
    return x


def _format(fmt, treedef, leaves):
    args, kwargs = pytree.unflatten(treedef, [_shown(x) for x in leaves])
    return fmt.format(*args, **kwargs)


def _impl(*arrays, fmt, treedef, statics):
    # While a body is traced its values are stand-ins: the print happens when it runs.
    if not STATE.builders:
        leaves, it = [], iter(arrays)
        for static in statics:
            leaves.append(next(it) if static is _ARRAY else static)
        _print(_format(fmt, treedef, leaves))
    return np.zeros((), np.int32)


class _Array:
    """Marks, in debug_print_p's statics, the place of an array input."""

    def __repr__(self):
        return "<array>"


_ARRAY = _Array()


def _vmap(values, batched, B, *, fmt, treedef, statics):
    """Under vmap each example prints on its own line, in order, as JAX prints: the equation
    once per example, on its slices of the batched values."""
    out = None
    for b in range(B):
        out = debug_print_p(*[v[b] if f else v for v, f in zip(values, batched)], fmt=fmt,
                            treedef=treedef, statics=statics)
    return [out], [False]


debug_print_p = Primitive(
    "debug_print", _impl, effect=True, vmap=_vmap,
    doc="debug_print(*arrays, fmt, treedef, statics): prints, each time it runs.")


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Print fmt.format(*args, **kwargs) with each tensor shown as its NumPy array
    (`[1. 2.]`; format specs such as `{x:.3f}` work on 0-d ones), as jax.debug.print.

    Where the values are known it prints at once: in plain code and under grad,
    value_and_grad, vjp, jvp (the primal values). Inside a traced body (a scan, fori_loop or
    while_loop body, a function under jit or vmap) it prints each time the body runs: at every
    step of a loop, at every call of a jitted function, once per example under vmap (as
    JAX). A scan that asked for compiler="numba" or "auto" runs a body that prints as the
    NumPy loop (a NumbaFallbackWarning, or under "auto" the log, says so). Where a
    derivative runs the body again (a checkpointed scan's backward pass) it prints again, as
    JAX's may. In a custom_jvp rule differentiated in reverse mode it prints once, and only
    what does not read the tangents, as JAX's linearize. `ordered` is accepted, as JAX's:
    prints here come in program order.

    >>> sl.debug.print("x = {}, loss = {loss:.3f}", sl.tensor([1.0, 2.0]), loss=sl.tensor(0.25))
    >>> def step(c, x):
    ...     sl.debug.print("c = {}", c)
    ...     return c + x, None
    >>> _ = sl.scan(step, 0.0, sl.tensor([1.0, 2.0]))
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: the format must be a str, got {type(fmt).__name__}; "
                        "write debug.print('{}', x) to print x")
    leaves, treedef = pytree.flatten((args, kwargs))
    if STATE.rule_prints == "silent":
        STATE.rule_printed = True
        return
    if STATE.rule_prints == "primal" and any(
            isinstance(x, Tensor) and x.requires_grad for x in leaves):
        return  # it reads a custom_jvp rule's tangents, where the call is differentiated
    traced = any(b.process_primitive is None for b in STATE.builders) or any(
        isinstance(x, Tensor) and x._trace is not None and x._trace.process_primitive is None
        for x in leaves)
    if not traced:
        _print(_format(fmt, treedef, leaves))
        return
    arrays = [x for x in leaves if isinstance(x, Tensor) or backends.is_array(x)]
    statics = tuple(_ARRAY if isinstance(x, Tensor) or backends.is_array(x) else x
                    for x in leaves)
    debug_print_p(*arrays, fmt=fmt, treedef=treedef, statics=statics)
