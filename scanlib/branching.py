"""`cond` and `switch` with jax.lax's signatures: a concrete predicate or index runs one branch,
as Python's `if` does; a traced one (inside scan bodies, jit, vmap) binds the primitive
`cond_p`, whose params are the branch graphs and whose rules sit beside it: VJP (a cond of the
branches' VJPs), JVP (a cond of their JVPs), vmap (a batched index runs every branch and
selects) and reach.

Imports backends, tape, ops, pytree, tracing, the interpreters and remat (below __init__).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from . import backends, pytree
from .interpreters.batching import batched_outputs, broadcast_batch, evaluate
from .interpreters.forward import eval_with_tangents
from .ops import zeros
from .ops import elementwise as ew
from .ops.functions import as_tensor, clip, stop_gradient, where
from .ops.primitive import Primitive
from .remat import traced_vjp, replay, vjp_by_replay
from .tape import Graph, Literal, Tensor, current_builder, is_differentiable_dtype, type_str
from .tape.graph import (dependent_outputs, differentiated_graph, eval_graph, on_stand_ins,
                         reached_inputs)
from .tracing import closure_names, trace_function

if TYPE_CHECKING:
    from .tape.types import ArrayLike

__all__ = ["cond", "switch", "platform_dependent"]

_PYTHON_NUMBER = (bool, int, float, complex)  # exact types: np.float64 is typed


class _NoOperand:
    """The default of `operand=`: none given (a repr that reads well in signatures)."""

    def __repr__(self):
        return "<no operand>"


_NO_OPERAND = _NoOperand()


def _legacy_operand(who, operands, operand):
    """JAX's older `operand=` keyword: one operand given by name."""
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(f"{who}: give the operands positionally or as operand=, not both")
    return (operand,)


def cond(pred: ArrayLike, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any, operand: Any = _NO_OPERAND) -> Any:
    """`true_fun(*operands)` if pred else `false_fun(*operands)`, like `jax.lax.cond`.

    A concrete pred (a Python bool or number, an array, a Tensor outside any trace) runs only
    the chosen branch, exactly as Python's `if`: its values, gradients and errors are that
    branch's. A traced pred (inside a scan body, jit or vmap) traces both branches, which
    must return the same pytree structure with the same shapes and dtypes (a Python number
    takes the other branch's dtype), and the chosen one runs when the value is known;
    gradients (any order) and forward mode go through the chosen branch, and under vmap a
    per-example pred runs both branches and selects, as JAX does. pred is a scalar bool or
    number (nonzero is True). `operand=` is JAX's older form of one operand.

    >>> import scanlib as sl
    >>> sl.lax.cond(sl.tensor(2.0) > 1, lambda x: x * 10, lambda x: x, sl.tensor(3.0))
    tensor(30., dtype=float64)
    """
    operands = _legacy_operand("cond", operands, operand)
    for name, fn in (("true_fun", true_fun), ("false_fun", false_fun)):
        if not callable(fn):
            raise TypeError(f"cond: {name} must be callable, got {type(fn).__name__}")
    if _is_traced(pred):
        pred = as_tensor(pred)
        _check_scalar("cond", "pred", pred, "bool or number")
        index = ew.astype(ew.not_equal(pred, 0) if pred.dtype != np.bool_ else pred,
                          dtype=np.dtype(np.int32))
        return _bind_tree(index, [false_fun, true_fun], operands, "cond",
                          ["false_fun", "true_fun"])
    value = _concrete_scalar("cond", "pred", pred, "bool or number")
    return true_fun(*operands) if value else false_fun(*operands)


def switch(index: ArrayLike, branches: Sequence[Callable[..., Any]], *operands: Any,
           operand: Any = _NO_OPERAND) -> Any:
    """`branches[index](*operands)`, like `jax.lax.switch`: index is clamped to
    [0, len(branches) - 1], as JAX does.

    A concrete index runs only that branch (exactly, as Python would); a traced one (inside a
    scan body, jit or vmap) traces every branch, which must return the same pytree
    structure, shapes and dtypes, and runs the chosen one when the value is known, as `cond`
    does.

    >>> import scanlib as sl
    >>> sl.lax.switch(5, [lambda x: x + 1, lambda x: x * 2], sl.tensor(3.0))
    tensor(6., dtype=float64)
    """
    operands = _legacy_operand("switch", operands, operand)
    try:
        branches = list(branches)
    except TypeError:
        raise TypeError(f"switch: branches must be a sequence of functions, got "
                        f"{type(branches).__name__}") from None
    if not branches:
        raise ValueError("switch: branches is empty; give at least one function")
    for k, fn in enumerate(branches):
        if not callable(fn):
            raise TypeError(f"switch: branches[{k}] must be callable, got {type(fn).__name__}")
    if _is_traced(index):
        index = as_tensor(index)
        _check_scalar("switch", "index", index, "integer")
        return _bind_tree(index, branches, operands, "switch",
                          [f"branches[{k}]" for k in range(len(branches))])
    value = _concrete_scalar("switch", "index", index, "integer")
    return branches[min(max(value, 0), len(branches) - 1)](*operands)


def platform_dependent(*args: Any, default: Callable[..., Any] | None = None,
                       **per_platform: Callable[..., Any]) -> Any:
    """The branch for the platform the arguments live on, called on them, as
    `jax.lax.platform_dependent(*args, cpu=f, cuda=g, default=h)`: "cuda" for CuPy tensors,
    "cpu" otherwise (NumPy, or no tensor among args); `default` where that platform has no
    branch of its own.

    >>> import scanlib as sl
    >>> sl.lax.platform_dependent(sl.tensor(2.0), cpu=lambda x: x + 1, default=lambda x: x)
    tensor(3., dtype=float64)
    """
    for name, fn in [("default", default), *per_platform.items()]:
        if fn is not None and not callable(fn):
            raise TypeError(f"platform_dependent: {name} must be callable, got "
                            f"{type(fn).__name__}")
    devices = [x.device if isinstance(x, Tensor) else backends.device_of(x)
               for x in pytree.flatten(args)[0] if isinstance(x, Tensor) or backends.is_array(x)]
    platform = "cuda" if devices and str(devices[0]).startswith("cuda") else "cpu"
    fn = per_platform.get(platform, default)
    if fn is None:
        raise NotImplementedError(f"platform_dependent: no branch for the platform {platform!r} "
                                  f"(given: {sorted(per_platform)}) and no default")
    return fn(*args)


# --- the predicate or index ------------------------------------------------------------------
def _is_traced(x):
    return isinstance(x, Tensor) and x._trace is not None


def _kind_ok(dtype, kind):
    return dtype.kind in ("iu" if kind == "integer" else "biuf")


def _check_scalar(who, name, x, kind):
    shape, dtype = tuple(x.shape), np.dtype(x.dtype)
    if shape != () or not _kind_ok(dtype, kind):
        raise TypeError(f"{who}: {name} must be a scalar {kind} (shape ()), got "
                        f"{type_str(shape, dtype)}. Reduce it first (x.any(), x.sum()) or "
                        f"index one element.")


def _concrete_scalar(who, name, x, kind):
    """A concrete pred or index as a Python int, after the checks JAX makes."""
    if isinstance(x, (bool, np.bool_)):
        if kind == "integer":
            raise TypeError(f"{who}: {name} must be a scalar integer, got the bool {x!r}")
        return int(x)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, float) and kind != "integer":
        return int(x != 0)
    if isinstance(x, Tensor) or backends.is_array(x) or isinstance(x, np.generic):
        t = as_tensor(x)
        _check_scalar(who, name, t, kind)
        value = backends.to_numpy(t._value)
        return int(value != 0) if value.dtype.kind == "f" else int(value)
    raise TypeError(f"{who}: {name} must be a scalar {kind}, got {type(x).__name__} {x!r}")


# --- tracing the branches ----------------------------------------------------------------------
def _bind_tree(index, fns, operands, who, names):
    """The pytree the chosen fn returns on operands (a pytree): its array leaves become the
    cond's inputs, its Python numbers stay numbers (each fn sees them as given)."""
    paths, leaves, tree = pytree.flatten_with_paths(tuple(operands), "operands")
    slots = [k for k, x in enumerate(leaves) if type(x) not in _PYTHON_NUMBER]
    for k in slots:
        if not (isinstance(leaves[k], Tensor) or backends.is_array(leaves[k])):
            raise TypeError(f"{who}: {paths[k]} is a {type(leaves[k]).__name__}; operands "
                            f"must be pytrees of Tensors, arrays or Python numbers (close over "
                            f"other values in the branch functions)")
    args = [as_tensor(leaves[k]) for k in slots]

    def opened(fn):
        def flat(*xs):
            full = list(leaves)
            for k, x in zip(slots, xs):
                full[k] = x
            return fn(*pytree.unflatten(tree, full))
        flat.__wrapped__ = fn
        return flat

    return branch_call(index, [opened(fn) for fn in fns], args, who, names)


def branch_call(index, fns, args, who="switch", names=None):
    """The outputs of `fns[index](*args)` (args a list of Tensors), as the pytree it returns:
    every fn traced on args' shapes and dtypes and bound as one cond_p equation."""
    names = names or [f"branches[{k}]" for k in range(len(fns))]
    device = next((a.device for a in args), getattr(current_builder(), "device", "cpu"))
    avals = [(tuple(a.shape), a.dtype) for a in args]
    in_tree = pytree.flatten([0] * len(args))[1]
    traced = []
    for k, fn in enumerate(fns):
        graph, tree, outs = trace_function(lambda xs, fn=fn: fn(*xs), avals, in_tree,
                                           device=device, name=f"branch{k}",
                                           const_names=closure_names(getattr(fn, "__wrapped__",
                                                                             fn)))
        traced.append((graph, tree, outs))
    out_types = _result_types(traced, who, names)
    graphs = [g for g, _, _ in traced]
    consts = [c for g in graphs for c in g.consts]
    outs = cond_p(as_tensor(index), *args, *consts,
                  branches=tuple(_without_consts(g) for g in graphs),
                  num_consts=tuple(len(g.consts) for g in graphs), _out_types=out_types)
    return pytree.unflatten(traced[0][1], outs)


def _without_consts(graph):
    """graph with its const slots empty: their values are cond_p's inputs, so an equation's
    params hold no tensor (a cached canonical graph would do too, but would print under the
    name of whichever body first had that fingerprint)."""
    return Graph(graph.invars, graph.constvars, [None] * len(graph.consts), graph.eqns,
                 graph.outvars, graph.name, graph.device)


def _leaf_type(x):
    """(shape, dtype, weak): a Python number is weak (it takes a typed branch's dtype)."""
    if type(x) in _PYTHON_NUMBER:
        return (), np.asarray(x).dtype, True
    if isinstance(x, Tensor) or backends.is_array(x):
        return tuple(x.shape), np.dtype(x.dtype), False
    raise TypeError(f"a branch returned a {type(x).__name__}; branches must return pytrees of "
                    f"Tensors, arrays or Python numbers")


_KIND_ORDER = "biufc"


def _result_types(traced, who, names):
    """One (shape, dtype) per output leaf, after checking that every branch returns the same
    structure, shapes and dtypes; a Python number takes a typed branch's dtype (as JAX's weak
    types do), else their common one."""
    tree0 = traced[0][1]
    for (_, tree, _), name in zip(traced[1:], names[1:]):
        if tree != tree0:
            raise TypeError(
                f"{who}: every branch must return the same pytree structure, but {names[0]} "
                f"returned {pytree.structure_str(tree0)} and {name} returned "
                f"{pytree.structure_str(tree)}.")
    paths = pytree.flatten_with_paths(pytree.unflatten(tree0, traced[0][2]), "output")[0]
    types = []
    for j, path in enumerate(paths):
        leaf_types = [_leaf_type(outs[j]) for _, _, outs in traced]
        strong = [(s, d, name) for (s, d, w), name in zip(leaf_types, names) if not w]
        shape0, dtype0, name0 = strong[0] if strong else (leaf_types[0][0], None, names[0])
        for (shape, dtype, weak), name in zip(leaf_types, names):
            if shape != shape0 or (not weak and dtype != dtype0) or (
                    weak and dtype0 is not None
                    and _KIND_ORDER.index(dtype.kind) > _KIND_ORDER.index(dtype0.kind)):
                raise TypeError(
                    f"{who}: every branch must return the same shapes and dtypes, but "
                    f"{name0} returned {path} as {type_str(shape0, dtype0 or dtype)} and "
                    f"{name} as {type_str(shape, dtype)}"
                    f"{' (a Python number)' if weak else ''}. Cast with .astype() or reshape "
                    f"in the branch.")
        if dtype0 is None:
            dtype0 = np.result_type(*[d for _, d, _ in leaf_types])
        types.append((shape0, np.dtype(dtype0)))
    return tuple(types)


# --- the primitive ----------------------------------------------------------------------------
def _split(values, branches, num_consts):
    """(index, operands, [consts of each branch]) from cond_p's inputs."""
    n = len(branches[0].invars)
    index, ops, rest = values[0], list(values[1:n + 1]), list(values[n + 1:])
    consts, start = [], 0
    for m in num_consts:
        consts.append(rest[start:start + m])
        start += m
    return index, ops, consts


def _clamped(index, n):
    value = backends.to_numpy(index._value if isinstance(index, Tensor) else index)
    return min(max(int(value), 0), n - 1)


def _cond_impl(*values, branches, num_consts, _out_types):
    out_types = _out_types
    device = backends.device_of(values[0])
    if on_stand_ins():  # being traced: the index is a stand-in, no branch is chosen yet
        return [_zeros(shape, dtype, device) for shape, dtype in out_types]
    index, ops, consts = _split(values, branches, num_consts)
    k = _clamped(index, len(branches))
    outs = eval_graph(branches[k], ops, consts[k])
    results = []
    for o, (_, dtype) in zip(outs, out_types):
        a = backends.asarray_on(o, device, dtype)
        # An output that is an input comes back as a copy: a loop may reuse its buffers, and
        # an input is not this equation's to hand out.
        results.append(a.copy() if any(a is v for v in values) else a)
    return results


def _zeros(shape, dtype, device):
    with backends.on_device(device):
        return backends.namespace(device).zeros(shape, dtype)


def _concrete_index(index):
    """The index when its value is known now (not a value of a trace), else None."""
    if isinstance(index, Tensor) and index._trace is not None:
        return None
    return index


def _branch_inputs(inputs, branches, num_consts, k):
    _, ops, consts = _split(inputs, branches, num_consts)
    return ops + consts[k]


def _branch_vjp(cts, inputs, graph, num_ops):
    """Cotangents of one branch's inputs (operands, then its consts; None where none
    reaches): its replay walked back on the tape, or its equations' rules inside a trace."""
    if current_builder() is not None:
        return traced_vjp(cts, inputs, graph, num_ops, {})
    return vjp_by_replay(lambda starts: replay(graph, starts[:num_ops], starts[num_ops:]),
                         inputs, cts)


def _cond_vjp(cts, outs, *inputs, _saved, branches, num_consts, _out_types):
    """The chosen branch's VJP: exact, of that branch only, when the index is known; inside a
    trace, a cond whose branches are the branches' VJPs (each gives zeros for an input it
    does not reach; an input no branch reaches gets none)."""
    if all(c is None for c in cts):
        return [None] * len(inputs)
    n = len(branches[0].invars)
    index = inputs[0]
    spans = _const_spans(n, num_consts)
    if _concrete_index(index) is not None:
        k = _clamped(index, len(branches))
        g = _branch_vjp(list(cts), _branch_inputs(inputs, branches, num_consts, k),
                        branches[k], n)
        result = [None] * len(inputs)
        for pos, x in zip(list(range(1, n + 1)) + list(range(*spans[k])), g):
            result[pos] = x
        return result
    args = list(inputs[1:])
    reached = _cond_reach(dict(branches=branches, num_consts=num_consts),
                          [c is not None for c in cts])[1:]
    targets = [j for j, x in enumerate(args) if reached[j] and isinstance(x, Tensor)
               and is_differentiable_dtype(x.dtype)]
    present = [j for j, c in enumerate(cts) if c is not None]
    if not targets:
        return [None] * len(inputs)

    def vjp_fn(k):
        def fn(*xs):
            ins = xs[:len(args)]
            full = [None] * len(cts)
            for j, c in zip(present, xs[len(args):]):
                full[j] = c
            ops, own = list(ins[:n]), list(ins[spans[k][0] - 1:spans[k][1] - 1])
            g = _branch_vjp(full, ops + own, branches[k], n)
            by_arg = dict(zip(list(range(n)) + list(range(spans[k][0] - 1, spans[k][1] - 1)),
                              g))
            return [by_arg[j] if by_arg.get(j) is not None
                    else zeros(tuple(args[j].shape), args[j].dtype, args[j].device)
                    for j in targets]
        return fn

    found = branch_call(index, [vjp_fn(k) for k in range(len(branches))],
                        args + [as_tensor(cts[j]) for j in present], "cond's VJP")
    result = [None] * len(inputs)
    for j, g in zip(targets, found):
        result[j + 1] = g
    return result


def _const_spans(n, num_consts):
    """[start, stop) of each branch's consts among cond_p's inputs (index first)."""
    spans, start = [], n + 1
    for m in num_consts:
        spans.append((start, start + m))
        start += m
    return spans


def _cond_jvp(primals, tangents, *, branches, num_consts, _out_types):
    """(outs, tangents): the chosen branch run with tangents beside its values when the index
    is known; inside a trace, a cond whose branches are the branches' JVPs (every float
    output has a tangent, zeros where a branch gives none)."""
    out_types = _out_types
    n = len(branches[0].invars)
    index, args = primals[0], list(primals[1:])
    spans = _const_spans(n, num_consts)

    def run(k, ins, t_ins):
        graph = branches[k]
        own = list(range(spans[k][0] - 1, spans[k][1] - 1))
        vars_ = graph.invars + graph.constvars
        env = dict(zip(vars_, [ins[j] for j in list(range(n)) + own]))
        tan = {v: t_ins[j] for v, j in zip(vars_, list(range(n)) + own)
               if t_ins[j] is not None}
        eval_with_tangents(graph.eqns, env, tan)
        outs, t_out = [], []
        for v, (_, dtype) in zip(graph.outvars, out_types):
            o = v.value if isinstance(v, Literal) else env[v]
            outs.append(o if isinstance(o, Tensor) and o.dtype == dtype
                        else as_tensor(o).astype(dtype))
            t = None if isinstance(v, Literal) else tan.get(v)
            t_out.append(t)
        return outs, t_out

    t_args = list(tangents[1:])
    if _concrete_index(index) is not None:
        return run(_clamped(index, len(branches)), args, t_args)
    present = [j for j, t in enumerate(t_args) if t is not None]
    floats = [j for j, (_, dtype) in enumerate(out_types) if is_differentiable_dtype(dtype)]

    def jvp_fn(k):
        def fn(*xs):
            t_full = [None] * len(args)
            for j, t in zip(present, xs[len(args):]):
                t_full[j] = t
            outs, t_out = run(k, list(xs[:len(args)]), t_full)
            return outs + [t_out[j] if t_out[j] is not None
                           else zeros(out_types[j][0], out_types[j][1], outs[j].device)
                           for j in floats]
        return fn

    found = branch_call(index, [jvp_fn(k) for k in range(len(branches))],
                        args + [t_args[j] for j in present], "cond's JVP")
    outs, t_found = found[:len(out_types)], iter(found[len(out_types):])
    return outs, [next(t_found) if j in floats else None for j in range(len(out_types))]


def _cond_vmap(values, batched, B, *, branches, num_consts, _out_types):
    """An unbatched index: one cond of the branches batched (an output batched in any branch
    is batched in all). A batched index: every branch runs on the batch and each example
    takes its own branch's result (a select, as JAX does)."""
    out_types = _out_types
    n = len(branches[0].invars)
    index, args, flags = values[0], list(values[1:]), list(batched[1:])
    spans = _const_spans(n, num_consts)

    def own(k, xs):
        return list(xs[spans[k][0] - 1:spans[k][1] - 1])

    out_flags = [False] * len(out_types)
    for k, graph in enumerate(branches):
        found = batched_outputs(graph, flags[:n], own(k, flags))
        out_flags = [a or b for a, b in zip(out_flags, found)]
    if batched[0]:
        out_flags = [True] * len(out_types)

    def batched_branch(k, xs, flags=flags):
        outs, out_b = evaluate(branches[k], list(xs[:n]), flags[:n], own(k, xs),
                               own(k, flags), B)
        # (a Python number an unbatched output returns stays one: it takes the dtype of the
        # other branches' output, as in the cond being batched)
        return [broadcast_batch(o, B, dtype) if f and not b else o
                for o, b, f, (_, dtype) in zip(outs, out_b, out_flags, out_types)]

    if not batched[0]:
        fns = [lambda *xs, k=k: batched_branch(k, xs) for k in range(len(branches))]
        return branch_call(index, fns, args, "vmap of cond"), out_flags
    k_index = clip(index, 0, len(branches) - 1) if len(branches) > 1 else index
    result = None
    for k in range(len(branches)):
        take = ew.equal(k_index, k)
        inputs, in_flags = _taken_only(args, flags, take, B, list(range(n)) + list(range(
            spans[k][0] - 1, spans[k][1] - 1)))
        outs = [o if isinstance(o, Tensor) and o.dtype == dtype else
                as_tensor(o).astype(dtype) for o, (_, dtype) in
                zip(batched_branch(k, inputs, in_flags), out_types)]
        if result is None:
            result = outs
            continue
        result = [where(take.reshape((B,) + (1,) * len(shape)), o, r)
                  for o, r, (shape, _) in zip(outs, result, out_types)]
    return result, out_flags


def _taken_only(args, flags, take, B, positions):
    """args and their batch flags as a branch sees them under a batched index, as JAX's
    batching of cond gives them: each input at `positions` that may carry a gradient is,
    for the examples that take another branch, itself with its gradient stopped (batched
    first where it was not). Those examples' results are dropped by the select; without
    this, their zero cotangent would still meet the branch's partials there, and an
    infinite one (log or sqrt at 0 in the branch not taken) would make the gradient NaN."""
    args, flags = list(args), list(flags)
    for j in positions:
        x = args[j]
        if not (isinstance(x, Tensor) and is_differentiable_dtype(x.dtype)
                and (x.requires_grad or x._trace is not None)):
            continue
        if not flags[j]:
            x = broadcast_batch(x, B, x.dtype)
        mask = take.reshape((B,) + (1,) * (x.ndim - 1))
        args[j], flags[j] = where(mask, x, stop_gradient(x)), True
    return args, flags


def _cond_vmap_flags(params, in_flags):
    if in_flags[0]:
        return [True] * len(params["_out_types"])
    branches, n = params["branches"], len(params["branches"][0].invars)
    spans = _const_spans(n, params["num_consts"])
    out = [False] * len(params["_out_types"])
    for k, graph in enumerate(branches):
        found = batched_outputs(graph, in_flags[1:n + 1], in_flags[spans[k][0]:spans[k][1]])
        out = [a or b for a, b in zip(out, found)]
    return out


def _cond_reach(params, out_flags):
    """The index never; an operand when a cotangent of the flagged outputs reaches it in some
    branch; a branch's consts as that branch reaches them."""
    branches = params["branches"]
    n = len(branches[0].invars)
    ops = [False] * n
    consts = []
    for graph in branches:
        found = reached_inputs(graph, list(out_flags))[0]
        ops = [a or b for a, b in zip(ops, found[:n])]
        consts += found[n:]
    return [False] + ops + consts


def _differentiated_cond(params, in_flags, settle=False):
    """Each branch with its custom calls as differentiated where the flagged operands and
    its constants carry a derivative (the index never does)."""
    branches = params["branches"]
    n = len(branches[0].invars)
    ops, start, found = list(in_flags[1:n + 1]), n + 1, []
    for graph, m in zip(branches, params["num_consts"]):
        found.append(differentiated_graph(graph, ops + list(in_flags[start:start + m]),
                                          settle=settle))
        start += m
    if all(a is b for a, b in zip(found, branches)):
        return None
    return dict(params, branches=type(branches)(found))


def _depends_cond(params, in_flags):
    """The outputs that depend, in some branch, on the flagged operands and its constants
    (the index does not carry a derivative)."""
    branches = params["branches"]
    n = len(branches[0].invars)
    ops, start, outs = list(in_flags[1:n + 1]), n + 1, [False] * len(branches[0].outvars)
    for graph, m in zip(branches, params["num_consts"]):
        found = dependent_outputs(graph, ops + list(in_flags[start:start + m]))
        outs = [a or b for a, b in zip(outs, found)]
        start += m
    return outs


cond_p = Primitive("cond", _cond_impl, _cond_vjp, multiple_results=True, jvp=_cond_jvp,
                   vmap=_cond_vmap, vmap_flags=_cond_vmap_flags, reach=_cond_reach,
                   differentiated=_differentiated_cond, depends=_depends_cond)
