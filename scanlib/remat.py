"""`checkpoint(f)` (alias `remat`), as `jax.checkpoint`: f's outputs without keeping its
intermediates; differentiating them runs f again. f is traced once per call into a Graph, and
one `checkpoint` primitive stands for it on the tape (and in traced scan bodies): its forward
evaluates the graph on arrays, recording nothing; its VJP replays the graph on the tape and
walks back over that replay, so only the inputs are kept between the two passes.

Imports backends, tape, ops, pytree, tracing and vmap's interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import functools

import numpy as np

from . import backends, pytree
from .interpreters.batching import batched_graph, batched_outputs
from .interpreters.forward import eval_with_tangents
from .interpreters.reverse import walk_back
from .ops import as_tensor
from .ops import elementwise as ew
from .ops.primitive import Primitive, bind
from .tape import (Graph, Literal, Tensor, Var, backward_pass, current_builder, enable_grad,
                   grad_enabled)
from .tape.state import replaying_differentiated
from .tape.backward import fit_cotangent
from .tape.graph import (dependent_outputs, differentiated_graph, eval_graph, reached_inputs,
                         stand_ins_for, used_vars)
from .tape.tensor import is_differentiable_dtype
from .tracing import abstract_leaf, closure_names, int_positions, trace_function

if TYPE_CHECKING:
    from .tape.types import PyTree

__all__ = ["checkpoint", "remat", "checkpoint_name"]

_PYTHON_NUMBER = (bool, int, float, complex)  # exact types: np.float64 is typed


def checkpoint(f: Callable[..., Any], *, prevent_cse: bool = True,
               policy: Callable[..., bool] | None = None,
               static_argnums: int | tuple[int, ...] = ()) -> Callable[..., Any]:
    """`checkpoint(f)(*args)` computes f(*args) but keeps none of f's intermediates for the
    backward pass: differentiating the result runs f again, like `jax.checkpoint`.

    Memory traded for time: between the forward and the backward pass only f's inputs are
    kept (the tensors f closes over are inputs too, and get gradients). Where `jvp` runs by
    forward mode (see jvp), f runs once, with its tangents. Values and gradients of any
    order are those of f itself. It works on the tape, under grad/vjp, inside scan
    bodies (the recomputation then runs in the backward scan's step) and nested (a
    checkpointed function calling another recomputes that one again when it is itself
    recomputed). f is traced once per call, so use scanlib ops in it and no Python control
    flow on values, as in a scan body. Arguments are pytrees of Tensors, arrays or Python
    numbers, given positionally; a Python number reaches f as itself (so it keeps Python's
    weak typing and can be an axis), and has no gradient. The arguments at `static_argnums`
    (an int or a tuple of ints, as in JAX) reach f exactly as given, whatever they are (a
    string, a tuple of sizes, a function), and get no gradient; a Tensor among them is a
    constant f closes over (it still gets its gradient, as a closed-over tensor does).
    `policy`, as jax.checkpoint's, chooses values to keep instead of recompute: it is called
    as `policy(prim, *avals, **params)` on each equation of f's trace and returns True to
    keep that equation's output; `scanlib.checkpoint_policies` has JAX's (dots_saveable,
    dots_with_no_batch_dims_saveable, save_only_these_names with `checkpoint_name`, ...).
    Values and gradients do not depend on it. `prevent_cse` is accepted for JAX's signature
    (nothing here merges the two passes).

    >>> import scanlib as sl
    >>> W = sl.tensor([[0.5, -1.0], [2.0, 0.1]], requires_grad=True)
    >>> step = sl.checkpoint(lambda h: sl.tanh(h @ W))
    >>> sl.grad(lambda h: step(step(h)).sum())(sl.ones(2)).shape
    (2,)
    """
    if not callable(f):
        raise TypeError(f"checkpoint: f must be callable, got {type(f).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be None or a function policy(prim, *avals, "
                        f"**params) -> bool (see scanlib.checkpoint_policies), got {policy!r}")
    static_nums = int_positions("checkpoint", "static_argnums", static_argnums)
    if not isinstance(prevent_cse, (bool, np.bool_)):
        raise TypeError(f"checkpoint: prevent_cse must be True or False, got {prevent_cse!r}")

    @functools.wraps(f)
    def checkpointed(*args, **kwargs):
        if kwargs:
            raise TypeError(f"checkpoint: pass the arguments of the checkpointed function "
                            f"positionally (got keyword arguments {sorted(kwargs)}), or close "
                            "over them.")
        fixed = _static_positions(static_nums, len(args))
        # a static argument as None: no leaves, and the others keep their paths (args[i])
        shown = tuple(None if i in fixed else a for i, a in enumerate(args))
        paths, leaves, in_tree = pytree.flatten_with_paths(shown, "args")
        # Python numbers stay Python numbers (f sees them as given: weakly typed, usable as
        # an axis); f is traced per call anyway. Everything else is a traced input.
        static = {i: x for i, x in enumerate(leaves) if type(x) in _PYTHON_NUMBER}
        inputs = [_input(x, p) for i, (p, x) in enumerate(zip(paths, leaves))
                  if i not in static]
        device = _device_of(inputs, [p for i, p in enumerate(paths) if i not in static])
        outs_static = []

        def traced(*tracers):
            it = iter(tracers)
            full = [static[i] if i in static else next(it) for i in range(len(leaves))]
            rebuilt = pytree.unflatten(in_tree, full)
            out = f(*[args[i] if i in fixed else a for i, a in enumerate(rebuilt)])
            out_leaves, out_tree = pytree.flatten(out)
            outs_static.append((out_tree, {i: x for i, x in enumerate(out_leaves)
                                           if type(x) in _PYTHON_NUMBER}))
            return [x for x in out_leaves if type(x) not in _PYTHON_NUMBER]

        graph, _, _ = trace_function(
            traced, [(x.shape, x.dtype) for x in inputs], pytree.flatten(tuple(inputs))[1],
            device=device, name=getattr(f, "__name__", "f").replace("<lambda>", "f"),
            split_args=True, const_names=closure_names(f))
        out_tree, out_numbers = outs_static[0]
        consts = graph.consts
        # The graph is a param; the tensors it closed over are inputs of the equation instead,
        # so that they get gradients and a cached scan body holding it keeps no values alive.
        keep = _saved_by(policy, graph) if policy is not None and graph.outvars else []
        graph = Graph(graph.invars, graph.constvars, [None] * len(consts), graph.eqns,
                      graph.outvars + keep, graph.name, graph.device)
        results = bind(checkpoint_p, *inputs, *consts, graph=graph, num_args=len(inputs),
                       num_saved=len(keep)) if graph.outvars else []
        _hold_kept(results, len(keep))
        outs = iter(results)
        n_out = out_tree.num_leaves
        return pytree.unflatten(out_tree, [out_numbers[i] if i in out_numbers else next(outs)
                                           for i in range(n_out)])

    return checkpointed


remat = checkpoint


def checkpoint_name(x: PyTree, name: str) -> PyTree:
    """x itself, marked with `name` for a checkpoint's saving policy, as JAX's
    `jax.ad_checkpoint.checkpoint_name`: `checkpoint(f, policy=checkpoint_policies.
    save_only_these_names("h"))` keeps the values f marks "h" instead of recomputing them.
    Outside a checkpoint it changes nothing.

    >>> import scanlib as sl
    >>> sl.checkpoint_name(sl.tensor([1.0, 2.0]), "h")
    tensor([1., 2.], dtype=float64)
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a string, got {name!r}")
    return ew.checkpoint_name_p(as_tensor(x), name=name)


class _Aval:
    """An equation input as a policy sees it (JAX passes abstract values)."""

    __slots__ = ("shape", "dtype", "ndim")

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)


def _saved_by(policy, graph):
    """The values of f's trace that `policy` saves: outputs of single-result, differentiable
    equations that f's outputs need and that are not f's outputs already (those are kept)."""
    needed, _ = used_vars(graph.eqns, graph.outvars)
    outs = {v for v in graph.outvars if isinstance(v, Var)}
    keep = []
    for eqn in needed:
        v = eqn.outvars[0]
        if (eqn.prim.multiple_results or eqn.prim.vjp is None or v in outs
                or not is_differentiable_dtype(v.dtype)):
            continue
        avals = [_Aval(np.shape(a.value), np.asarray(a.value).dtype) if isinstance(a, Literal)
                 else _Aval(a.shape, a.dtype) for a in eqn.invars]
        if policy(eqn.prim, *avals, **eqn.params):
            keep.append(v)
    return keep


def _static_positions(nums, n_args):
    """The positions static_argnums names in a call with n_args arguments (negative ones
    count from the end, as in JAX)."""
    bad = [n for n in nums if not -n_args <= n < n_args]
    if bad:
        raise ValueError(f"checkpoint: static_argnums {nums} names position {bad[0]}, but the "
                         f"checkpointed function was called with {n_args} positional "
                         "arguments.")
    return {n % n_args for n in nums}


def _input(x, path):
    if isinstance(x, Tensor):
        return x
    if backends.is_array(x) or isinstance(x, (bool, int, float, complex, np.generic)):
        return as_tensor(x)
    raise TypeError(f"checkpoint: {path} is a {type(x).__name__}; the arguments of a "
                    "checkpointed function must be pytrees of Tensors, arrays or numbers (close "
                    "over other values instead).")


def _device_of(inputs, paths):
    devices = {}
    for p, x in zip(paths, inputs):
        devices.setdefault(abstract_leaf(x, p)[2], p)
    if len(devices) > 1:
        (d1, p1), (d2, p2) = list(devices.items())[:2]
        raise ValueError(f"checkpoint: arguments live on different devices: {p1} is on {d1} "
                         f"and {p2} on {d2}. Move them to one device first.")
    return next(iter(devices), "cpu")


# --- the primitive ------------------------------------------------------------------------
def _checkpoint_impl(*values, graph, num_args, num_saved=0):
    zeros = stand_ins_for(graph.outvars)
    if zeros is not None:  # being traced: nested levels would each run f on zeros
        return zeros
    outs = eval_graph(graph, values[:num_args], values[num_args:])
    xp = backends.xp_of(*values) if values else np
    # A Python number f returned (a Literal) or NumPy's 0-d scalar, as an array.
    return [xp.asarray(o) if isinstance(v, Literal) else
            xp.asarray(o, dtype=v.dtype) if np.ndim(o) == 0 else o
            for o, v in zip(outs, graph.outvars)]


def _checkpoint_vjp(cts, outs, *inputs, _saved, graph, num_args, num_saved=0):
    """Recompute f from the inputs (and the outputs a policy saved: the last num_saved of
    graph's), then differentiate that replay. Inside a trace (a scan's backward body being
    built) the replay and the rules' results are equations of that body, differentiated
    again as they are; on the tape, the replay is recorded and walked back."""
    kept = list(outs[len(outs) - num_saved:]) if num_saved else []
    if num_saved and any(k is None for k in kept):  # on the tape the node holds them
        kept = list(_saved) if _saved else []  # (bound where nothing held them: recompute)
    reuse = dict(zip(graph.outvars[len(graph.outvars) - num_saved:], kept))
    if current_builder() is not None:
        return traced_vjp(cts, inputs, graph, num_args, reuse)
    return _tape_vjp(cts, inputs, graph, num_args, reuse)


def _tape_vjp(cts, inputs, graph, num_args, reuse):
    """The walk is recorded when the enclosing one is (grad is on here, a higher-order
    derivative) and then linked to the inputs that require grad. Recording the replay makes
    the scans in it keep their residuals, so their VJPs do not run them a third time."""
    def run(starts):
        with replaying_differentiated():
            return replay(graph, starts[:num_args], starts[num_args:], reuse)
    return vjp_by_replay(run, inputs, cts)


def vjp_by_replay(run, inputs, cts, skip=()):
    """The cotangents of inputs (None for those at `skip` and those no path reaches) by
    running `run(starts)` again on the tape, from walk_start copies of them, and walking
    back from its outputs with cts (one per output; None: none). The walk is recorded when
    the enclosing one is. Under a tape walk (some input requires grad: that is why the node
    exists) the others' cotangents would be dropped, so they are not computed; a direct call
    of the rule (the forward trace of jvp) gets every differentiable input's."""
    recording = grad_enabled()
    on_tape = any(isinstance(x, Tensor) and x.requires_grad for x in inputs)
    wanted = [i for i, x in enumerate(inputs) if i not in skip
              and differentiable(x) and (x.requires_grad or not on_tape)]
    starts = list(inputs)
    for i in wanted:
        starts[i] = walk_start(inputs[i], recording)
    with enable_grad():
        outs = run(starts)
    pairs = [(o, g) for o, g in zip(outs, cts)
             if g is not None and isinstance(o, Tensor) and o.requires_grad]
    result = [None] * len(inputs)
    if pairs and wanted:
        found = backward_pass([o for o, _ in pairs], [g for _, g in pairs],
                              targets=[starts[i] for i in wanted], create_graph=recording)
        for i, g in zip(wanted, found):
            result[i] = g
    return result


def traced_vjp(cts, inputs, graph, num_args, reuse):
    """The VJP as equations of the trace: replay the graph with bind, then call each
    equation's rule in reverse order, as scan's linearization does. No tape walk: a walk
    run without recording would cut the result from the graph (no_grad inside a trace
    stops gradients), and a recorded one would make nested scans keep residuals for a
    derivative nobody takes. A nested scan's rule runs its forward again with residuals;
    the replayed one without them is then dead code, which the loop compiler drops."""
    env = dict(zip(graph.invars, inputs[:num_args]))
    env.update(zip(graph.constvars, inputs[num_args:]))

    def read(v):
        return v.value if isinstance(v, Literal) else env[v]

    with replaying_differentiated():
        for eqn in graph.eqns:
            if eqn.outvars and eqn.outvars[0] in reuse:  # kept by the policy: a trace's value
                env[eqn.outvars[0]] = reuse[eqn.outvars[0]]
                continue
            out = bind(eqn.prim, *[read(v) for v in eqn.invars], **eqn.params)
            env.update(zip(eqn.outvars, out if eqn.prim.multiple_results else (out,)))
    ct = {}

    def add(v, g):
        if g is not None and isinstance(v, Var) and is_differentiable_dtype(v.dtype):
            g = fit_cotangent(as_tensor(g), v)
            ct[v] = g if v not in ct else ew.add(ct[v], g)

    for v, g in zip(graph.outvars, cts):
        add(v, g)
    walk_back(graph.eqns, read, ct, add)
    return [ct.get(v) if differentiable(x) else None
            for v, x in zip(graph.invars + graph.constvars, inputs)]


def differentiable(x):
    return isinstance(x, Tensor) and is_differentiable_dtype(x.dtype)


def walk_start(x, recording):
    """Where a walk over a replay stops for an input x whose cotangent is wanted (this VJP's,
    and revolve's over one reversed step): a new leaf
    holding x's value, or, when the walk is recorded and x requires grad, a node on x (so
    that the outer walk reaches x through the replay)."""
    if recording and x.requires_grad:
        return ew.copy(x)
    return Tensor(x._value, True, _trace=x._trace, _var=x._var)


def replay(graph, args, consts, reuse=None):
    """Run graph's equations on Tensors with `bind` (so the tape records them), from args for
    its invars and consts for its constvars; returns its outputs. A primitive that keeps
    extra values for its VJP when it is recorded (scan's residuals) says how to bind it so
    through its `bind_recorded` rule (`Primitive.rebind`). `reuse` maps variables to values
    kept from the forward pass: their equations are recorded with that value (reused_p)
    instead of computed."""
    env = dict(zip(graph.invars, args))
    env.update(zip(graph.constvars, consts))

    def read(v):
        return v.value if isinstance(v, Literal) else env[v]

    for eqn in graph.eqns:
        ins = [read(v) for v in eqn.invars]
        if reuse and eqn.outvars and eqn.outvars[0] in reuse:
            env[eqn.outvars[0]] = bind(reused_p, reuse[eqn.outvars[0]], *ins, of=eqn.prim,
                                       params=eqn.params)
            continue
        out = eqn.prim.rebind(*ins, **eqn.params)
        env.update(zip(eqn.outvars, out if eqn.prim.multiple_results else (out,)))
    return [read(v) for v in graph.outvars]


def _differentiated_checkpoint(params, in_flags, settle=False):
    """The graph with its custom calls as differentiated where the flagged inputs carry a
    derivative."""
    graph = differentiated_graph(params["graph"], in_flags, settle=settle)
    return None if graph is params["graph"] else dict(params, graph=graph)


def _reach_checkpoint(params, out_flags):
    return reached_inputs(params["graph"], out_flags)[0]


def _hold_kept(results, num_saved):
    """The node keeps the values a policy kept (the last num_saved results: nobody else
    refers to them). As Tensors, not arrays: inside a trace (forward mode over the walk)
    the VJP's replay reads them as values of the trace, whose tangents they carry. They
    refer back to the node, a cycle Python's collector frees once nothing else holds it."""
    if num_saved and results and results[0]._node is not None:
        results[0]._node.saved = results[len(results) - num_saved:]


def _bind_recorded(*inputs, graph, num_args, num_saved=0):
    """How a checkpoint's replay binds a nested checkpoint equation: as checkpointed() does,
    holding the kept values on the node. (Bound any other way, jit's graph on the tape, the
    kept values are gone when the VJP runs, and it recomputes them.)"""
    results = bind(checkpoint_p, *inputs, graph=graph, num_args=num_args, num_saved=num_saved)
    _hold_kept(results, num_saved)
    return results


def _reused_vjp(g, out, kept, *ins, of, params):
    """The rule of `of`, the primitive this node stands for (of(*ins), whose value was
    kept). `out` is this node's output, so a rule that reads it (exp's g * out) is
    differentiated again through of's dependence on ins; the kept value gets no cotangent."""
    return (None, *of.cotangents([g], [out], list(ins), params))


# An equation a saving policy kept, recorded in the replay: its value is the kept one, and
# its VJP is the primitive's. Only _tape_vjp's replay binds it, on the tape: never an equation
# of a traced graph (its params hold a dict and a primitive).
reused_p = Primitive("reused", lambda kept, *ins, of, params: kept, _reused_vjp)


def _checkpoint_vmap(values, batched, B, *, graph, num_args, num_saved=0):
    """One checkpoint over the batch: its graph run by vmap's interpreter, traced once (the
    recomputation in its VJP is then batched too)."""
    consts = values[num_args:]
    device = next(x.device for x in values if isinstance(x, Tensor))
    # The results batched as vmap_flags says (an unbatched one it flags is broadcast): a loop
    # holding this equation shapes its carries and ys by those flags.
    traced, out_flags = batched_graph(graph, batched[:num_args], consts, batched[num_args:], B,
                                      device, _checkpoint_vmap_flags(
                                          dict(graph=graph, num_args=num_args), batched))
    results = _bind_recorded(*values[:num_args], *traced.consts,
                             graph=Graph(traced.invars, traced.constvars,
                                         [None] * len(traced.consts), traced.eqns,
                                         traced.outvars, graph.name, device),
                             num_args=num_args, num_saved=num_saved)
    return results, out_flags


def _checkpoint_jvp(primals, tangents, *, graph, num_args, num_saved=0):
    """(outs, tangents): one checkpoint whose graph is the JVP of this one's, as JAX's remat
    of the JVP. f runs once, its values and tangents together, and reverse mode over the
    result still recomputes instead of keeping intermediates. (The transposed VJP, the rule
    otherwise, runs f once forward and again in the VJP's replay.) The values a policy kept
    stay kept, last; their tangents are recomputed. A constant f returned (a Literal) is
    not part of the JVP's graph: it is returned as the impl returns it, without a tangent."""
    present = [j for j, t in enumerate(tangents) if t is not None]
    computed = [i for i, v in enumerate(graph.outvars) if isinstance(v, Var)]
    n_values = len(computed) - num_saved  # then the kept ones (always computed: Vars)
    with_tangent = []  # which of the computed outputs have one (known once traced)

    def jvp_graph(*xs):
        ins = graph.invars + graph.constvars
        env = dict(zip(ins, xs[:len(primals)]))
        tan = {ins[j]: t for j, t in zip(present, xs[len(primals):])}
        eval_with_tangents(graph.eqns, env, tan)
        outs = [env[graph.outvars[i]] for i in computed]
        with_tangent.extend(k for k, i in enumerate(computed)
                            if tan.get(graph.outvars[i]) is not None)
        return (outs[:n_values] + [tan[graph.outvars[computed[k]]] for k in with_tangent]
                + outs[n_values:])

    avals = [(tuple(x.shape), np.dtype(x.dtype)) for x in primals]
    avals += [(tuple(tangents[j].shape), np.dtype(tangents[j].dtype)) for j in present]
    traced, _, _ = trace_function(jvp_graph, avals, pytree.flatten(tuple(range(len(avals))))[1],
                                  device=graph.device, name=f"jvp_{graph.name}",
                                  split_args=True, const_names={})
    consts = traced.consts
    found = _bind_recorded(*primals, *[tangents[j] for j in present], *consts,
                           graph=Graph(traced.invars, traced.constvars, [None] * len(consts),
                                       traced.eqns, traced.outvars, traced.name, traced.device),
                           num_args=len(primals) + len(present), num_saved=num_saved)
    n_t = len(with_tangent)
    values = found[:n_values] + found[n_values + n_t:]
    t_values = [None] * len(computed)
    for k, t in zip(with_tangent, found[n_values:n_values + n_t]):
        t_values[k] = t
    outs, t_out = [None] * len(graph.outvars), [None] * len(graph.outvars)
    for k, i in enumerate(computed):
        outs[i], t_out[i] = values[k], t_values[k]
    device = next((x.device for x in primals), graph.device)
    for i, v in enumerate(graph.outvars):
        if outs[i] is None:  # as the impl gives it, on the data's device
            outs[i] = Tensor(backends.asarray_on(np.asarray(v.value), device))
    return outs, t_out


def _checkpoint_vmap_flags(params, flags):
    """Which results are batched: those of the graph that depend on a batched input."""
    n = params["num_args"]
    return batched_outputs(params["graph"], flags[:n], flags[n:])


checkpoint_p = Primitive("checkpoint", _checkpoint_impl, _checkpoint_vjp, reach=_reach_checkpoint,
                         multiple_results=True, bind_recorded=_bind_recorded, jvp=_checkpoint_jvp,
                         vmap=_checkpoint_vmap, vmap_flags=_checkpoint_vmap_flags,
                         differentiated=_differentiated_checkpoint,
                         depends=lambda params, flags: dependent_outputs(params["graph"], flags))
