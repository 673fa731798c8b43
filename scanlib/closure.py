"""`closure_convert`, as jax.closure_convert: a function's closed-over values that a derivative
may reach, hoisted out as explicit arguments, so that a `custom_vjp` (an adjoint ODE solver's,
say) can give them cotangents. The function is traced once into a Graph; the converted
function replays it on the tape. Imports tape, ops, pytree, tracing and remat (its replay)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import pytree
from .ops import as_tensor
from .remat import replay
from .tape import Tensor
from .tracing import abstract_leaf, closure_names, trace_function

__all__ = ["closure_convert"]


def _hoisted(c) -> bool:
    """A closed-over value a derivative may reach: a float tensor being differentiated or
    traced (a value of an enclosing scan body, jit, vmap or jvp)."""
    return (isinstance(c, Tensor) and np.dtype(c.dtype).kind in "fc"
            and (c.requires_grad or c._trace is not None))


def closure_convert(fun: Callable[..., Any], *example_args: Any) -> tuple[Callable, list]:
    """`converted, consts = closure_convert(fun, *example_args)`: `converted(*args, *consts)`
    computes `fun(*args)` for args of example_args' structure, shapes and dtypes, with the
    tensors fun closes over that a derivative may reach (being differentiated, or traced in an
    enclosing scan body, jit or vmap) taken from `consts` instead, as jax.closure_convert.
    Other closed-over values (constants) stay inside. fun is traced once, on example_args'
    shapes, so Python control flow in it is fixed then, as in JAX.

    >>> W = sl.tensor([[0.0, 1.0], [-1.0, 0.0]])
    >>> f, consts = sl.closure_convert(lambda y: W @ y, sl.ones(2))
    >>> len(consts), f(sl.ones(2))
    (0, tensor([ 1., -1.], dtype=float64))
    """
    paths, leaves, treedef = pytree.flatten_with_paths(tuple(example_args), "example_args")
    avals = [abstract_leaf(leaf, path) for path, leaf in zip(paths, leaves)]
    devices = {device for _, _, device in avals}
    name = getattr(fun, "__name__", "f").replace("<lambda>", "f")
    graph, out_tree, _ = trace_function(
        fun, [(shape, dtype) for shape, dtype, _ in avals], treedef,
        device=devices.pop() if len(devices) == 1 else "cpu", name=name, split_args=True,
        const_names=closure_names(fun))
    hoist = [_hoisted(c) for c in graph.consts]
    consts = [c for c, h in zip(graph.consts, hoist) if h]
    num_args = len(example_args)

    def converted(*args):
        if len(args) != num_args + len(consts):
            raise TypeError(f"closure_convert({name}): the converted function takes fun's "
                            f"{num_args} argument(s) and then the {len(consts)} hoisted "
                            f"value(s), got {len(args)} arguments")
        given, values = args[:num_args], iter(args[num_args:])
        got_paths, got, tree = pytree.flatten_with_paths(tuple(given), "args")
        if tree != treedef:
            raise TypeError(f"closure_convert({name}): the arguments' structure {tree} differs "
                            f"from example_args' {treedef}; convert again for other arguments")
        for path, leaf, (shape, dtype, _) in zip(got_paths, got, avals):
            shape_, dtype_, _ = abstract_leaf(leaf, path)
            if (shape_, dtype_) != (shape, dtype):
                raise TypeError(f"closure_convert({name}): {path} is {dtype_}{list(shape_)} but "
                                f"fun was traced with {dtype}{list(shape)}; convert again for "
                                "arguments of other shapes or dtypes")
        full = [next(values) if h else c for c, h in zip(graph.consts, hoist)]
        outs = replay(graph, [as_tensor(a) for a in got], [as_tensor(c) for c in full])
        return pytree.unflatten(out_tree, outs)

    converted.__name__ = f"{name}_closure_converted"
    return converted, consts
