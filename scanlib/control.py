"""Loops with JAX's signatures: `fori_loop` (a scan over the index) and `while_loop` (the trip
count found by running the loop without recording, then a scan of that many steps, so the
gradient is scan's). Both carry pytrees.

Imports backends, tape, ops, pytree and scan (the layers below scanlib/__init__).
"""

from __future__ import annotations

import numpy as np

from . import backends, pytree
from .ops import arange, as_tensor
from .scan import scan
from .tape import Tensor, current_builder, enable_grad, grad_enabled, no_grad, type_str

__all__ = ["fori_loop", "while_loop"]


# --- fori_loop ------------------------------------------------------------------------------
def fori_loop(lower, upper, body_fun, init_val):
    """Loop `val = body_fun(i, val)` for i in range(lower, upper), like `jax.lax.fori_loop`.

    Its meaning is exactly this loop::

        val = init_val
        for i in range(lower, upper):
            val = body_fun(i, val)
        return val

    It runs as `scan` over `arange(lower, upper)`, so body_fun is traced once (use scanlib
    ops in it, no Python control flow on values), the loop is compiled, and gradients with
    respect to init_val and the tensors body_fun closes over come from scan's VJP (any
    order). i is a 0-d integer Tensor: int64 for Python-int bounds, else the bounds' dtype.
    The bounds are Python ints or concrete 0-d integer Tensors; inside a scan body they must
    not depend on the traced values (a Python int there is fine: it is a nested scan).
    upper <= lower runs no step and returns init_val (as scan with length 0 does).

    >>> import scanlib as sl
    >>> sl.fori_loop(0, 4, lambda i, v: v * 2.0 + i, sl.tensor(1.0))
    tensor(27., dtype=float64)
    """
    if not callable(body_fun):
        raise TypeError(f"fori_loop: body_fun must be callable as body_fun(i, val) -> val, "
                        f"got {type(body_fun).__name__}")
    (lo, hi), dtype = _bounds(lower, upper)
    device = _device_of(init_val, lower, upper)
    index = arange(lo, max(lo, hi), dtype=dtype, device=device)
    try:
        val, _ = scan(lambda v, i: (body_fun(i, v), None), init_val, index)
    except TypeError as e:
        if "must match init" not in str(e):
            raise
        raise TypeError(f"fori_loop: {e} The index i is a 0-d {index.dtype} tensor, and NumPy "
                        f"promotes float32 + {index.dtype} to float64 (a Python int i would "
                        "not): cast it in body_fun, e.g. i.astype(v.dtype).") from None
    return val


def _bounds(lower, upper):
    """((lo, hi) as Python ints, the index dtype): int64 for Python ints, else the bounds'."""
    values, dtypes = [], []
    for name, b in (("lower", lower), ("upper", upper)):
        value, dtype = _bound(name, b, lower, upper)
        values.append(value)
        if dtype is not None:
            dtypes.append(dtype)
    return tuple(values), np.result_type(*dtypes) if dtypes else np.dtype(np.int64)


def _bound(name, b, lower, upper):
    if isinstance(b, bool) or isinstance(b, np.bool_):
        raise TypeError(f"fori_loop: {name} must be an integer, got the bool {b!r}")
    if isinstance(b, int):
        return b, None
    if isinstance(b, np.integer):
        return int(b), b.dtype
    if isinstance(b, Tensor) or backends.is_array(b):
        shape, dtype = tuple(b.shape), np.dtype(b.dtype)
        if shape != () or dtype.kind not in "iu":
            raise TypeError(f"fori_loop: {name} must be a Python int or a 0-d integer tensor, "
                            f"got {type_str(shape, dtype)}")
        if isinstance(b, Tensor) and b._trace is not None:
            raise TypeError(
                f"fori_loop: {name} is traced (it depends on values inside a scan body or "
                f"make_graph), so the number of steps is not known when the body is traced. "
                f"Make the bounds Python ints (fori_loop(0, n, ...)); for a count that varies "
                f"per step, loop to the largest count and mask the extra steps with "
                f"scanlib.where(i < count, new_val, val).")
        return int(backends.to_numpy(b._value if isinstance(b, Tensor) else b)), dtype
    raise TypeError(f"fori_loop: {name} must be a Python int or a 0-d integer tensor, got "
                    f"{type(b).__name__} ({lower=!r}, {upper=!r})")


def _device_of(*trees):
    """The device of the first array leaf (the index tensor goes there); cpu if none."""
    for tree in trees:
        for leaf in pytree.flatten(tree)[0]:
            if isinstance(leaf, Tensor):
                return leaf.device
            if backends.is_array(leaf):
                return backends.device_of(leaf)
    return "cpu"


# --- while_loop -----------------------------------------------------------------------------
def while_loop(cond_fun, body_fun, init_val, *, max_steps=None):
    """Loop `val = body_fun(val)` while `cond_fun(val)` is True, like `jax.lax.while_loop`.

    Its meaning is exactly this loop::

        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val

    cond_fun returns a 0-d bool (a Tensor, array or Python bool). Unlike JAX, the result is
    reverse-differentiable: gradients (any order) with respect to init_val and the tensors
    body_fun closes over equal those of that Python loop on the tape; the stopping decision
    has no gradient, as in that loop. It runs in two passes: the loop above without recording,
    which finds the trip count n (cond_fun sees concrete values), then `scan` for n steps,
    whose compiled loop and VJP give the result and its gradient. The second pass is skipped
    (the first one's result returned) under `no_grad` or when neither init_val nor what
    body_fun computes from it requires grad. So body_fun must be deterministic (the same val
    gives the same result; random keys ride in the carry) and traceable by scan: scanlib ops,
    no Python control flow on values. The first pass runs op by op, so a while_loop costs
    more per step than a scan of the same length (see the report of issue 11).

    `max_steps`: if cond_fun is still True after that many steps, a RuntimeError instead of a
    runaway loop. Inside a scan body (traced values) the trip count is not known when the
    body is traced, so while_loop raises TypeError there: use fori_loop with a fixed count,
    or loop to a maximum count masking finished steps with scanlib.where.

    >>> import scanlib as sl
    >>> sl.while_loop(lambda v: v < 100.0, lambda v: v * 3.0, sl.tensor(1.0))
    tensor(243., dtype=float64)
    """
    _check_while_args(cond_fun, body_fun, max_steps)
    if current_builder() is not None or any(
            isinstance(x, Tensor) and x._trace is not None for x in pytree.flatten(init_val)[0]):
        raise TypeError(
            "while_loop cannot run inside a scan body (or make_graph) yet: its trip count "
            "depends on traced values, which are not known when the body is traced. Use "
            "fori_loop(0, n, ...) with a fixed count, or a fori_loop/scan over the largest "
            "count that freezes finished steps with scanlib.where(cond_fun(val), "
            "body_fun(val), val). (A differentiated while_loop runs its body as a scan, so a "
            "while_loop nested in its body is inside one too.)")
    val, n, differentiable = _run_loop(cond_fun, body_fun, init_val, max_steps)
    if n and not differentiable:  # nothing to differentiate: the loop's own result
        return val
    val, _ = scan(lambda v, _: (body_fun(v), None), init_val, length=n)
    return val


def _check_while_args(cond_fun, body_fun, max_steps):
    if not callable(cond_fun):
        raise TypeError(f"while_loop: cond_fun must be callable as cond_fun(val) -> bool, got "
                        f"{type(cond_fun).__name__}")
    if not callable(body_fun):
        raise TypeError(f"while_loop: body_fun must be callable as body_fun(val) -> val, got "
                        f"{type(body_fun).__name__}")
    if max_steps is not None and (not isinstance(max_steps, (int, np.integer))
                                  or isinstance(max_steps, bool) or max_steps < 0):
        raise ValueError(f"while_loop: max_steps must be None or an int >= 0, got "
                         f"{max_steps!r}")


def _run_loop(cond_fun, body_fun, init_val, max_steps):
    """(final val, trip count n, whether a gradient can flow) of the plain loop, with the
    carry's structure checked at the first step. Only that step is recorded, to see whether
    body_fun reaches a tensor that requires grad (its ops are the same at every step)."""
    val, n, differentiable, recording = init_val, 0, False, grad_enabled()
    tree, avals = _carry_type(init_val)
    with no_grad():
        while _truth(cond_fun(val)):
            if max_steps is not None and n >= max_steps:
                raise RuntimeError(
                    f"while_loop: cond_fun was still True after max_steps={max_steps} steps. "
                    f"Raise max_steps, or check that body_fun moves val towards the stopping "
                    f"condition.")
            if n == 0:
                with enable_grad(recording):
                    val = body_fun(val)
                _check_carry(tree, avals, val)
                differentiable = recording and (_requires_grad(init_val) or _requires_grad(val))
            else:
                val = body_fun(val)
            n += 1
    return val, n, differentiable


def _requires_grad(tree):
    return any(isinstance(x, Tensor) and x.requires_grad for x in pytree.flatten(tree)[0])


def _carry_type(val):
    paths, leaves, tree = pytree.flatten_with_paths(val, "init_val")
    avals = [(p, np.shape(_data(x)), _dtype(x)) for p, x in zip(paths, leaves)]
    return tree, avals


def _data(x):
    return x._value if isinstance(x, Tensor) else x


def _dtype(x):
    """None for a Python number: it adopts the dtype the body gives it, as in scan."""
    if isinstance(x, (bool, int, float, complex)):
        return None
    return np.dtype(as_tensor(x).dtype)


def _check_carry(tree, avals, val):
    paths, leaves, new_tree = pytree.flatten_with_paths(val, "val")
    if new_tree != tree:
        raise TypeError(
            f"while_loop: body_fun must return a carry with init_val's structure, but init_val "
            f"is {pytree.structure_str(tree)} and body_fun returned "
            f"{pytree.structure_str(new_tree)}.")
    for (path, shape, dtype), new_path, x in zip(avals, paths, leaves):
        new_shape, new_dtype = np.shape(_data(x)), _dtype(x)
        if new_shape != shape or (dtype is not None and new_dtype not in (None, dtype)):
            raise TypeError(
                f"while_loop: body_fun must keep each carry leaf's shape and dtype, but "
                f"{path} is {_type(shape, dtype)} and the returned {new_path} is "
                f"{_type(new_shape, new_dtype)}. Cast with .astype() or reshape in body_fun.")


def _type(shape, dtype):
    return "a Python number" if dtype is None else type_str(shape, dtype)


def _truth(c):
    """cond_fun's result as a Python bool; anything but a 0-d bool is an error naming it."""
    if isinstance(c, (bool, np.bool_)):
        return bool(c)
    if isinstance(c, Tensor) or backends.is_array(c):
        shape, dtype = tuple(c.shape), np.dtype(c.dtype)
        if shape == () and dtype == np.bool_:
            return bool(backends.to_numpy(_data(c)))
        what = type_str(shape, dtype)
    else:
        what = f"{type(c).__name__} {c!r}"
    raise TypeError(
        f"while_loop: cond_fun must return a 0-d bool (a bool Tensor of shape ()), but it "
        f"returned {what}. Compare to get a bool (v < tol), and reduce arrays with .all() "
        f"or .any().")
