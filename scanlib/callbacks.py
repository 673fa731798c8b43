"""pure_callback, as jax.pure_callback: a Python function of NumPy arrays (scipy's, say)
called from differentiable, traced code. Inside a trace (jit, a scan or while body, vmap) it
is an equation, the primitive pure_callback_p, that calls the function each time it runs,
with the shapes and dtypes the caller declared standing in while tracing. It has no
derivative, as in JAX: a gradient or tangent that reaches it raises (give it one with
custom_jvp or custom_vjp).

Imports backends, tape, ops and pytree.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import backends, pytree
from .interpreters.batching import broadcast_batch
from .ops import as_tensor, stack
from .ops.primitive import Primitive
from .tape.graph import on_stand_ins

__all__ = ["pure_callback"]

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None, **kwargs: Any) -> Any:
    """callback(*args, **kwargs) on NumPy arrays, returning arrays shaped as
    result_shape_dtypes says (a pytree of ShapeDtypeStruct, or of arrays), as
    jax.pure_callback. It may run any number of times, or not at all when its result is not
    used, as JAX's. Under vmap, vmap_method says how: "sequential" (once per example),
    "expand_dims" (once, the unbatched arguments with a leading axis of 1) or
    "broadcast_all" (once, every argument with the batch in front); without it vmap raises.
    No derivative: grad, jvp or jacfwd through it raise, as in JAX.

    >>> def bessel_i0(x):  # NumPy's, on the arrays it is given
    ...     return sl.pure_callback(np.i0, sl.ShapeDtypeStruct(x.shape, x.dtype), x)
    >>> sl.jit(bessel_i0)(sl.tensor([0.5, 1.0]))
    """
    if vmap_method is not None and vmap_method not in _VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {_VMAP_METHODS} or None, "
                         f"got {vmap_method!r}")
    if sharding is not None:
        raise NotImplementedError("pure_callback: sharding= is not supported (one device).")
    out_leaves, out_tree = pytree.flatten(result_shape_dtypes)
    avals = []
    for i, leaf in enumerate(out_leaves):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"pure_callback: result_shape_dtypes leaf {i} is "
                            f"{type(leaf).__name__}; each leaf must have a shape and a dtype "
                            "(sl.ShapeDtypeStruct(shape, dtype), or an array).")
        avals.append((tuple(int(n) for n in leaf.shape), np.dtype(leaf.dtype)))
    in_leaves, in_tree = pytree.flatten(args)
    tensors = [as_tensor(x) for x in in_leaves]
    name = getattr(callback, "__name__", type(callback).__name__)

    def call(arrays):
        found = callback(*pytree.unflatten(in_tree, arrays), **kwargs)
        leaves, tree = pytree.flatten(found)
        if tree != out_tree:
            raise TypeError(f"pure_callback: {name} returned {pytree.structure_str(tree)}, "
                            f"but result_shape_dtypes is {pytree.structure_str(out_tree)}")
        return leaves

    call.__name__ = name
    outs = pure_callback_p(*tensors, fn=call, avals=tuple(avals), vmap_method=vmap_method)
    return pytree.unflatten(out_tree, outs)


def _impl(*values, fn, avals, vmap_method):
    if on_stand_ins():  # being traced: the shapes declared stand in
        return [np.zeros(shape, dtype) for shape, dtype in avals]
    on_gpu = any(backends.is_array(v) and not isinstance(v, (np.ndarray, np.generic))
                 for v in values)
    found = fn([backends.to_numpy(v) if on_gpu else np.asarray(v) for v in values])
    outs = []
    for k, (leaf, (shape, dtype)) in enumerate(zip(found, avals)):
        got = np.asarray(backends.to_numpy(leaf) if backends.is_array(leaf) else leaf)
        if got.shape != shape or got.dtype != dtype:
            raise TypeError(f"pure_callback: {fn.__name__} returned leaf {k} as "
                            f"{got.dtype.name}{list(got.shape)}, but result_shape_dtypes "
                            f"says {dtype.name}{list(shape)}; they must match (convert "
                            "in the callback: np.asarray(y, dtype))")
        outs.append(got.copy() if any(got is v for v in values) else got)
    if on_gpu:
        xp = backends.xp_of(*values)
        outs = [xp.asarray(o) for o in outs]
    return outs


_NO_DERIVATIVE = ("pure_callback: {name} has no derivative (JAX's pure_callback has none "
                  "either); wrap the call in a custom_jvp or custom_vjp function that gives "
                  "one, or stop_gradient its inputs.")


def _no_vjp(cts, outs, *values, _saved=None, fn, avals, vmap_method):
    raise TypeError(_NO_DERIVATIVE.format(name=fn.__name__))


def _no_jvp(primals, tangents, *, fn, avals, vmap_method):
    raise TypeError(_NO_DERIVATIVE.format(name=fn.__name__))


def _vmap(values, batched, B, *, fn, avals, vmap_method):
    if vmap_method is None:
        raise NotImplementedError(
            f"pure_callback: {fn.__name__} under vmap needs vmap_method= ('sequential': once "
            "per example; 'expand_dims' or 'broadcast_all': once, on the batch), as JAX's.")
    if vmap_method.startswith("sequential"):
        per_example = [pure_callback_p(*[v[b] if f else v for v, f in zip(values, batched)],
                                       fn=fn, avals=avals, vmap_method=vmap_method)
                       for b in range(B)]
        return [stack(list(outs)) for outs in zip(*per_example)], [True] * len(avals)
    if vmap_method == "expand_dims":
        values = [v if f else as_tensor(v)[None] for v, f in zip(values, batched)]
    else:
        values = [v if f else broadcast_batch(v, B) for v, f in zip(values, batched)]
    outs = pure_callback_p(*values, fn=fn, avals=tuple(((B,) + s, d) for s, d in avals),
                           vmap_method=vmap_method)
    return list(outs), [True] * len(avals)


pure_callback_p = Primitive(
    "pure_callback", _impl, _no_vjp, multiple_results=True, jvp=_no_jvp, vmap=_vmap,
    doc="pure_callback(*arrays, fn, avals, vmap_method): fn's arrays, each time it runs.")
