"""Tracing Python functions into Graphs: `trace_function` (shared by scan and make_graph) and
the public `make_graph`, which shows a learner what the tape recorded.

Imports backends, tape, ops and pytree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import inspect

import numpy as np

from . import backends, pytree
from .tape import GraphBuilder, Tensor, tracing

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any
    from .tape.graph import Graph


def abstract_leaf(x, path):
    """(shape, dtype, device) of a leaf: a Tensor, array or Python scalar."""
    if isinstance(x, Tensor):
        return x.shape, x.dtype, x.device
    if backends.is_array(x):
        return tuple(x.shape), np.dtype(x.dtype), backends.device_of(x)
    if isinstance(x, (bool, int, float)):
        return (), np.asarray(x).dtype, "cpu"
    raise TypeError(f"{path} is a {type(x).__name__}; pytree leaves must be Tensors, arrays or "
                    "Python numbers")


def closure_names(fn) -> dict:
    """{id(value): name} for the Tensors and arrays fn reads from its closure or globals, so
    printed graphs call a closed-over weight `W`, not `a`."""
    names = {}
    code = getattr(fn, "__code__", None)
    if code is None:
        return names
    cells = zip(code.co_freevars, fn.__closure__ or ())
    pairs = [(n, c.cell_contents) for n, c in cells if _cell_full(c)]
    # Globals read by fn or by functions defined inside it (a scan body's lambda).
    codes, global_names = [code], []
    while codes:
        c = codes.pop()
        global_names += c.co_names
        codes += [k for k in c.co_consts if hasattr(k, "co_names")]
    pairs += [(n, fn.__globals__[n]) for n in global_names if n in fn.__globals__]
    for n, v in pairs:
        if isinstance(v, Tensor) or backends.is_array(v):
            names.setdefault(id(v), n)
    return names


def _cell_full(cell):
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def trace_function(fn, in_avals, in_tree, *, device="cpu", hints=None, name="f",
                   split_args=False, const_names=None, interpret=False, weak=(),
                   whole_call=False):
    """Run fn once on traced inputs with the given (shape, dtype) and record a Graph.

    Returns (graph, out_treedef, out_leaves) where out_leaves are the traced outputs (tracers
    or outside values the function returned unchanged). The inputs at positions in `weak`
    are weakly typed (JAX's weak types, ops/primitive.py).
    """
    builder = GraphBuilder(device)
    builder.const_names = const_names if const_names is not None else closure_names(fn)
    builder.interpret = interpret  # scans traced inside fn default to the reference interpreter
    builder.whole_call = whole_call
    hints = hints or [None] * len(in_avals)
    with tracing(builder):
        tracers = [builder.new_input(shape, dtype, hint)
                   for (shape, dtype), hint in zip(in_avals, hints)]
        for i in weak:
            tracers[i]._weak = True
        args = pytree.unflatten(in_tree, tracers)
        out = fn(*args) if split_args else fn(args)
        out_leaves, out_tree = pytree.flatten(out)
        graph = builder.build(out_leaves, name)
    return graph, out_tree, out_leaves


def make_graph(f: Callable[..., Any], *, name: str | None = None) -> Callable[..., Graph]:
    """`make_graph(f)(*args)` traces f on args' shapes and dtypes and returns its Graph.

    The Graph prints as straight-line code, one primitive per line:

    >>> import scanlib as sl
    >>> print(sl.make_graph(lambda x: sl.tanh(x) * 2)(sl.zeros((3,))))
    def f(x: f64[3]):
        a: f64[3] = tanh(x)
        b: f64[3] = mul(a, 2)
        return b
    """
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []

    def traced(*args):
        paths, leaves, treedef = pytree.flatten_with_paths(tuple(args), "args")
        avals, hints = [], []
        for i, arg in enumerate(args):
            root = params[i] if i < len(params) and params[i].isidentifier() else f"arg{i}"
            names = pytree.leaf_names(arg, root)
            hints.extend(names if len(names) > 1 else [root] * len(names))
        for path, leaf in zip(paths, leaves):
            shape, dtype, _ = abstract_leaf(leaf, path)
            avals.append((shape, dtype))
        devices = {abstract_leaf(leaf, p)[2] for p, leaf in zip(paths, leaves)}
        graph, _, _ = trace_function(
            f, avals, treedef, device=devices.pop() if len(devices) == 1 else "cpu",
            hints=hints, name=name or getattr(f, "__name__", "f").replace("<lambda>", "f"),
            split_args=True)
        return graph

    return traced


__all__ = ["abstract_leaf", "closure_names", "make_graph", "trace_function"]


def int_positions(who, what, nums):
    """`nums` (an int or a sequence of ints, as JAX takes static_argnums and nondiff_argnums)
    as a tuple of ints; anything else raises naming `who` and `what`."""
    if nums is None:
        return ()
    given = nums
    nums = (nums,) if isinstance(nums, (int, np.integer)) else nums
    try:
        nums = tuple(nums)
    except TypeError:
        nums = None
    if nums is None or not all(isinstance(n, (int, np.integer))
                               and not isinstance(n, (bool, np.bool_)) for n in nums):
        raise TypeError(f"{who}: {what} must be an int or a tuple of ints, got {given!r}")
    return tuple(int(n) for n in nums)
