"""Loops with JAX's signatures and pytree carries: `fori_loop` (a scan over the index, or a
while_loop when its bounds are traced) and `while_loop` (cond_fun and body_fun traced once and
run as one generated Python loop; differentiated as a scan of the trip count). Inside a traced
body a while_loop is the primitive `while_p` (loops.py, with the generated loop).

Imports backends, tape, ops, pytree, tracing and scan (the layers below scanlib/__init__).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from . import backends, pytree
from .ops import arange, as_tensor, concatenate
from .scan import scan
from .scan.cache import canonical
from .scan.api import adopt_weak_dtypes, default_compiler
from .scan.primitive import apply_scan, linearized, record_scan
from .tape import (Tensor, current_builder, enable_grad, grad_enabled,
                   is_differentiable_dtype, no_grad, type_str)
from .loops import as_arrays, counted_carries, runner, too_many_steps, while_p
from .tape.graph import used_vars
from .tracing import closure_names, trace_function

if TYPE_CHECKING:
    from .tape.types import ArrayLike, PyTree

__all__ = ["fori_loop", "while_loop"]


# --- fori_loop ------------------------------------------------------------------------------
def fori_loop(lower: ArrayLike, upper: ArrayLike, body_fun: Callable[[Any, PyTree], PyTree],
              init_val: PyTree, *, unroll: int | bool | None = None) -> PyTree:
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
    The bounds are Python ints or 0-d integer Tensors. Inside a scan body, bounds computed
    from the traced values make it a `while_loop` over (i, val), its count found at every
    step of the enclosing loop. upper <= lower runs no step and returns init_val. `unroll`
    is scan's (the same values; with known bounds only, as in JAX).

    >>> import scanlib as sl
    >>> sl.fori_loop(0, 4, lambda i, v: v * 2.0 + i, sl.tensor(1.0))
    tensor(27., dtype=float64)
    """
    if not callable(body_fun):
        raise TypeError(f"fori_loop: body_fun must be callable as body_fun(i, val) -> val, "
                        f"got {type(body_fun).__name__}")
    if any(isinstance(b, Tensor) and b._trace is not None for b in (lower, upper)):
        if unroll is not None:
            raise ValueError("fori_loop: unroll needs bounds known when the loop is built, but "
                             "lower or upper is a traced value; leave unroll=None.")
        return _fori_traced(lower, upper, body_fun, init_val)
    (lo, hi), dtype = _bounds(lower, upper)
    device = _device_of(init_val, lower, upper)
    index = arange(lo, max(lo, hi), dtype=dtype, device=device)
    try:
        val, _ = scan(lambda v, i: (body_fun(i, v), None), init_val, index,
                      unroll=1 if unroll is None else unroll)
    except TypeError as e:
        if "must match init" not in str(e):
            raise
        raise TypeError(f"fori_loop: {e} The index i is a 0-d {index.dtype} tensor: with an "
                        f"integer carry of fewer bits it widens the carry to {index.dtype} (a "
                        "Python int i would not): cast it in body_fun, e.g. "
                        "i.astype(v.dtype).") from None
    return val


# --- map ----------------------------------------------------------------------------------------
# Not in __all__: `scanlib.map` would shadow Python's map for `from scanlib import *`; it is
# public as scanlib.lax.map.
def map(f: Callable[[PyTree], PyTree], xs: PyTree, *,
        batch_size: int | None = None) -> PyTree:
    """`f` applied to each slice of xs along its leading axis, the results stacked, like
    `jax.lax.map`: a scan over xs (f traced once, run as a loop; gradients from scan's
    VJP). With batch_size, `vmap(f)` runs on batch_size slices per step (the remainder in
    one more call): the same values, fewer steps.

    >>> import scanlib as sl
    >>> sl.lax.map(lambda x: x @ x, sl.ones((3, 2)))
    tensor([2., 2., 2.], dtype=float64)
    """
    if not callable(f):
        raise TypeError(f"map: f must be callable, got {type(f).__name__}")
    if batch_size is None:
        return scan(lambda _, x: (None, f(x)), None, xs)[1]
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"map: batch_size must be None or a positive int, got {batch_size!r}")
    from .vmap import vmap  # vmap imports the interpreters, built on this layer

    leaves, tree = pytree.flatten(xs)
    n = int(as_tensor(leaves[0]).shape[0]) if leaves else 0
    full, rest = n - n % batch_size, n % batch_size
    parts = []
    if full:
        blocks = [as_tensor(x)[:full].reshape((full // batch_size, batch_size)
                                              + tuple(as_tensor(x).shape[1:])) for x in leaves]
        ys = scan(lambda _, x: (None, vmap(f)(x)), None, pytree.unflatten(tree, blocks))[1]
        parts.append(pytree.tree_map(lambda y: y.reshape((full,) + tuple(y.shape[2:])), ys))
    if rest:
        parts.append(vmap(f)(pytree.unflatten(tree, [as_tensor(x)[full:] for x in leaves])))
    if len(parts) == 1:
        return parts[0]
    return pytree.tree_map(lambda a, b: concatenate([a, b]), parts[0], parts[1])


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
            return b, dtype
        return int(backends.to_numpy(b._value if isinstance(b, Tensor) else b)), dtype
    raise TypeError(f"fori_loop: {name} must be a Python int or a 0-d integer tensor, got "
                    f"{type(b).__name__} ({lower=!r}, {upper=!r})")


def _fori_traced(lower, upper, body_fun, init_val):
    """fori_loop with a traced bound (inside a scan body): a while_loop over (i, val), since
    the count is only known when the enclosing loop runs."""
    _, dtype = _bounds(lower, upper)
    lo = as_tensor(lower).astype(dtype)

    def body(c):
        return c[0] + 1, body_fun(c[0], c[1])

    return while_loop(lambda c: c[0] < upper, body, (lo, init_val))[1]


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
def while_loop(cond_fun: Callable[[PyTree], Any], body_fun: Callable[[PyTree], PyTree],
               init_val: PyTree, *, max_steps: int | None = None) -> PyTree:
    """Loop `val = body_fun(val)` while `cond_fun(val)` is True, like `jax.lax.while_loop`.

    Its meaning is exactly this loop::

        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val

    cond_fun returns a 0-d bool (a Tensor, array or Python bool). Unlike JAX, the result is
    reverse-differentiable: gradients (any order) with respect to init_val and the tensors
    body_fun closes over equal those of that Python loop on the tape; the stopping decision
    has no gradient, as in that loop. cond_fun and body_fun are traced once each (so use
    scanlib ops, no Python control flow on values, and keep body_fun deterministic: random
    keys ride in the carry), then the loop runs on arrays. When a gradient is needed, the
    loop is a `scan` of its trip count n, whose VJP gives the gradient. With a step counter
    in cond_fun, n is found first by running only the part of the body cond_fun depends on,
    then scan's compiled loop runs the body; when finding n takes most of the body (cond_fun
    reads the state), one loop finds it and saves what scan's backward reads on the way.
    That scan and its backward use the loop compiler, as `scan` does. Without a gradient
    the loop's own result is returned.
    Under `set_loop_compiler("numba")` or "auto" (the default where numba is installed) the
    loop (the one that saves residuals too) runs as one numba kernel where every operation
    has a numba form and its step is small enough (as a scan's step, where NumPy's loop is
    the faster), giving the NumPy loop's values to rounding (numba's exp and log are not
    NumPy's); under "auto" once a background process has compiled it. Its trip count is the
    kernel's: a cond_fun that depends on such values and lands within a rounding error of
    its threshold can stop a step earlier or later than NumPy's loop (also between a call,
    its gradient, whose count may come from a kernel while the body runs as NumPy's loop,
    and its vmap, which runs NumPy's loop); compiler "numpy" always gives the Python loop's.

    Where `jvp` runs by forward mode (see jvp; `jacfwd` too), it is one loop over the
    carries and their tangents, as JAX's JVP of while_loop: the body runs once a step.
    It works inside a scan body and inside another while_loop too: there the trip count is
    found anew at every step of the enclosing loop, and the gradient recomputes the inner
    loop from its input. `max_steps`: if cond_fun is still True after that many steps, a
    RuntimeError instead of a runaway loop. Under `vmap`, examples that stop at different
    steps run as one loop over the examples still running (cond_fun and body_fun see only
    those, never a state their own loop does not reach), and so does its gradient, also
    inside jit and scan bodies.

    >>> import scanlib as sl
    >>> sl.while_loop(lambda v: v < 100.0, lambda v: v * 3.0, sl.tensor(1.0))
    tensor(243., dtype=float64)
    """
    _check_while_args(cond_fun, body_fun, max_steps)
    paths, leaves, tree = pytree.flatten_with_paths(init_val, "init_val")
    traced = current_builder() is not None or any(
        isinstance(x, Tensor) and x._trace is not None for x in leaves)
    if not traced and any(type(x) in _PYTHON_NUMBER for x in leaves):
        return _while_weak(cond_fun, body_fun, init_val, max_steps)  # dtypes settle as it runs
    init_t = [as_tensor(x) for x in leaves]
    if any(_weakly_typed(x) for x in leaves):  # Python numbers here only when traced
        init_t = _typed_numbers(body_fun, init_t, leaves, paths, tree)
    cond, cond_consts, body, body_consts = _trace_loop(cond_fun, body_fun, tree, init_t)
    nc = len(init_t)
    if traced:
        outs = while_p(*init_t, *cond_consts, *body_consts, cond=cond, body=body,
                       num_carry=nc, num_cond_consts=len(cond_consts), max_steps=max_steps)
        if outs[nc]._node is not None:  # the VJP reads the trip count; the user drops it
            outs[nc]._node.saved = [outs[nc]]
        return pytree.unflatten(tree, outs[:nc])
    values = [x._value for x in init_t]
    q_values, k_values = [k._value for k in cond_consts], [k._value for k in body_consts]
    if not (grad_enabled() and any(_needs_grad(x) for x in init_t + body_consts)):
        carry, _, _ = runner(cond, body, tuple(range(nc)))(values, q_values, k_values,
                                                            max_steps)
        return pytree.unflatten(tree, [Tensor(c) for c in as_arrays(carry, body.outvars)])
    return pytree.unflatten(tree, loop_on_tape(cond, body, init_t, q_values, body_consts,
                                               max_steps)[0])


def loop_on_tape(cond, body, init_t, q_values, body_consts, max_steps):
    """(the final carries on the tape, the trip count n): the loop as a scan of n steps whose
    VJP gives the gradient. Either n is found first (by the part of the body cond reads) and
    the scan then runs, or, where that part is most of the body, one loop finds n and saves
    what the scan's backward reads on the way. Also jit's replay of a loop and its gradient
    (while_replay)."""
    nc = len(init_t)
    counted, saving = _count_plan(cond, body, nc)
    compiler = default_compiler()
    if saving:
        return _saving_loop(cond, body, init_t, q_values, body_consts, max_steps)
    _, n, _ = runner(cond, body, counted)([init_t[i]._value for i in counted], q_values,
                                           [k._value for k in body_consts], max_steps)
    if n == 0:  # Tensors, as every other path returns
        return init_t, 0
    return apply_scan(body, init_t, [], body_consts, n, False, compiler=compiler), n


def _count_plan(cond, body, nc):
    """(the counted carries, whether to take the saving loop), worked out once per pair of
    graphs: the canonical ones of every call of the same loop are the same objects."""
    plans = body.__dict__.setdefault("_while_count_plans", {})
    plan = plans.get((cond, nc))
    if plan is None:
        counted = counted_carries(cond, body, nc)
        plan = plans[(cond, nc)] = (counted, _count_costs_a_forward(body, counted))
    return plan


def _count_costs_a_forward(body, counted):
    """Whether finding the trip count runs at least half of the body's equations. Then one
    pass saving the residuals (_saving_loop) beats the count followed by scan's forward,
    which would run that part twice; a counter condition costs nearly nothing to count, and
    scan's compiled loop (which batches work across steps) is the faster forward."""
    need = used_vars(body.eqns, [body.outvars[i] for i in counted])[0]
    return 2 * len(need) >= len(body.eqns)


def _saving_loop(cond, body, init_t, q_values, body_consts, max_steps):
    """The loop once, as scan's forward with residuals would run it but stopping where cond
    says: each step's residuals are kept, stacked (by the NumPy loop at the end, by a numba
    kernel as it goes), and recorded as the outputs of a scan of n steps, whose VJP gives
    the gradient. One pass instead of the count and then scan's forward (which would run the
    body twice when cond reads the whole state)."""
    nc = len(init_t)
    lin = linearized(body, body_consts)
    aug = lin.aug_body
    collect = tuple(range(nc, len(aug.outvars)))
    carry, n, rows = runner(cond, aug, tuple(range(nc)), collect)(
        [x._value for x in init_t], q_values, [k._value for k in body_consts], max_steps)
    if n == 0:  # Tensors, as every other path returns
        return init_t, 0
    carry = as_arrays(carry, aug.outvars[:nc])
    xp = backends.xp_of(*carry)
    stacks = []
    for r, v in zip(rows, aug.outvars[nc:]):
        if isinstance(r, list):  # the NumPy loop's
            stacks.append(xp.asarray(xp.stack(r), dtype=v.dtype))
            r.clear()  # one residual in two copies at a time, not all of them
        else:
            stacks.append(r)
    return record_scan(lin, init_t, body_consts, n, carry + stacks, default_compiler()), n


_PYTHON_NUMBER = (bool, int, float, complex)  # exact types: np.float64 is typed


def _weakly_typed(x):
    return type(x) in _PYTHON_NUMBER or (isinstance(x, Tensor) and x._weak)


def _typed_numbers(body_fun, init_t, leaves, paths, tree):
    """Inside a trace the loop cannot settle a Python number's dtype as it runs (the
    _while_weak path), nor anywhere a weakly typed tensor's: give it the dtype body_fun makes
    of it, as scan does for its init (0.0 + float32 data -> float32, which every step of the
    Python loop computes)."""
    weak = [_weakly_typed(x) for x in leaves]
    device = next((t.device for t, w in zip(init_t, weak) if not w),
                  getattr(current_builder(), "device", "cpu"))
    return adopt_weak_dtypes(lambda c, _: (body_fun(c), None), init_t, weak, leaves, paths, [],
                             tree, pytree.flatten(None)[1], device)


def _needs_grad(x):
    return isinstance(x, Tensor) and x.requires_grad and is_differentiable_dtype(x.dtype)


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


# --- tracing cond_fun and body_fun ----------------------------------------------------------
def _trace_loop(cond_fun, body_fun, tree, init_t):
    """(cond graph, its consts, body graph, its consts), both traced once on the carry's
    shapes and dtypes; the graphs are the canonical (cached) ones, their consts passed apart."""
    device = _device_of(init_t)
    avals = [(x.shape, x.dtype) for x in init_t]
    carry_types = _carry_type(pytree.unflatten(tree, init_t))[1]

    def cond_fn(val):
        return [_cond_leaf(cond_fun(val))]

    def body_fn(val):
        new = body_fun(val)
        _check_carry(tree, carry_types, new)
        return [_on_device(x, device, dtype) for x, (_, dtype) in
                zip(pytree.flatten(new)[0], avals)]

    cond = trace_function(cond_fn, avals, tree, device=device, name="cond",
                          const_names=closure_names(cond_fun))[0]
    body = trace_function(body_fn, avals, tree, device=device, name="body",
                          const_names=closure_names(body_fun))[0]
    return canonical(cond), cond.consts, canonical(body), body.consts


def _cond_leaf(c):
    """cond_fun's result, checked to be a 0-d bool (an error naming what it is otherwise)."""
    if isinstance(c, (bool, np.bool_)):
        return bool(c)
    if isinstance(c, Tensor) or backends.is_array(c):
        shape, dtype = tuple(c.shape), np.dtype(c.dtype)
        if shape == () and dtype == np.bool_:
            return c
        what = type_str(shape, dtype)
    else:
        what = f"{type(c).__name__} {c!r}"
    raise TypeError(
        f"while_loop: cond_fun must return a 0-d bool (a bool Tensor of shape ()), but it "
        f"returned {what}. Compare to get a bool (v < tol), and reduce arrays with .all() "
        f"or .any().")


def _on_device(x, device, dtype):
    """A returned carry leaf as a Tensor; a Python number takes its init leaf's dtype."""
    if type(x) in _PYTHON_NUMBER:
        return Tensor(backends.asarray_on(x, device, dtype))
    return as_tensor(x)


# --- a while_loop whose init_val holds Python numbers ---------------------------------------
def _while_weak(cond_fun, body_fun, init_val, max_steps):
    """The loop op by op without recording (a Python number in init_val takes the dtype the
    body gives it, as in the Python loop), then a scan of its trip count when a gradient can
    flow."""
    val, n, differentiable = _run_loop(cond_fun, body_fun, init_val, max_steps)
    if n and not differentiable:
        return val
    val, _ = scan(lambda v, _: (body_fun(v), None), init_val, length=n)
    return val


def _run_loop(cond_fun, body_fun, init_val, max_steps):
    """(final val, trip count n, whether a gradient can flow) of the plain loop, with the
    carry's structure checked at the first step. Only that step is recorded, to see whether
    body_fun reaches a tensor that requires grad (its ops are the same at every step)."""
    val, n, differentiable, recording = init_val, 0, False, grad_enabled()
    tree, avals = _carry_type(init_val)
    with no_grad():
        while _truth(cond_fun(val)):
            if max_steps is not None and n >= max_steps:
                raise too_many_steps(max_steps)
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


def _truth(c):
    c = _cond_leaf(c)
    return c if isinstance(c, bool) else bool(backends.to_numpy(_data(c)))


# --- carry types --------------------------------------------------------------------------
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
        # (not `new_dtype not in (None, dtype)`: NumPy reads dtype == None as float64)
        if new_shape != shape or (dtype is not None and new_dtype is not None
                                  and new_dtype != dtype):
            raise TypeError(
                f"while_loop: body_fun must keep each carry leaf's shape and dtype, but "
                f"{path} is {_type(shape, dtype)} and the returned {new_path} is "
                f"{_type(new_shape, new_dtype)}. Cast with .astype() or reshape in body_fun.")


def _type(shape, dtype):
    return "a Python number" if dtype is None else type_str(shape, dtype)
