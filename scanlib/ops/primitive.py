"""Primitive: a named operation with its NumPy/CuPy implementation and its VJP rule, and
`bind`, the one function through which every op runs.

bind computes the result on the data's own backend, checks devices, records an equation when
a graph is being traced (scan bodies, make_graph) and a tape Node when an input requires grad.
Imports backends and tape.
"""

from __future__ import annotations

import inspect

import numpy as np

from .. import backends
from ..tape import Tensor, levels, record, type_str
from ..tape.graph import escaped_tracer_error
from . import batching, shapes
from ..tape.state import STATE as _STATE
from ..tape.tensor import is_differentiable_dtype
from .promotion import (alike, as_inexact_args, lists_as_tensors, marked_weak, promoted,
                        weak_rank)


class Primitive:
    """`impl(*arrays, **params)` computes; `vjp(g, out, *inputs, **params)` returns one
    cotangent (or None) per input, written with scanlib's own ops so it can be differentiated
    again. A primitive without vjp is not differentiable (comparisons, sign, stop_gradient).

    What the loop compiler may do with it is declared here too, never looked up by name:
    `elementwise` (NumPy broadcasting, one output element from the same elements of each
    input, so it batches over steps by aligning ranks), `batch` (the batching rule of a
    non-elementwise primitive, see ops/batching.py), `ufunc` (the array-namespace function
    that computes it into `out=`), `out_impl` (the same where no such function exists, or
    where it is not quite impl: pow's np.power is not `**`; NumPy's loop then uses it),
    `view` (its result may be a view of its input: costs no bytes, never written into),
    `inline` (the Python expression the generated code writes instead of a call: a template
    of the arguments, `"({0} + {1})"`, or a function of the params giving one or None) and,
    for a multiple-result primitive, `prune(params, used) -> (params, kept_inputs,
    kept_outputs)` or None: the same equation computing only the results that are read
    (`used`, one flag per output; it may keep more), reading only the kept inputs (see
    graph.prune_outputs); and `reach(params, out_flags) -> in_flags`, for one that runs a
    loop or graph: which inputs a cotangent of the flagged outputs reaches (without it, all
    of them: a carry that never reaches the loss must not be given a zero cotangent, see
    graph.reached_inputs). `own_level`: "vjp" or "jvp" for a call whose rule holds for one
    level of differentiation (custom_vjp's, custom_jvp's: tape/levels.py), "graphs" (the
    default with `reach`) for one that runs graphs that may hold such a call.

    How each transformation interprets it is a rule declared here too, so that no
    transformation tests which primitive it holds (JAX registers the same rules beside each
    primitive):
    - `jvp(primals, tangents, **params) -> (outs, tangents_out)`: forward mode's rule;
      tangents None for zero, outs as bind returns them, one tangent (or None) per output.
      Most primitives declare something smaller, and forward mode (interpreters/forward.py)
      builds the rule from it, in this order: `tangent(ts, out, *inputs, **params)`, the
      output's tangent (a list of them for several results; None: zero) from the input
      tangents ts (None: zero) with the primal output at hand, as vjp has it (JAX's
      defjvp2; written with scanlib's ops, beside the vjp, and fitted to the output's shape
      and dtype by forward mode); `linear`, True where the
      primitive is linear in all its inputs jointly (reshape, concatenate), or the positions
      of the inputs it is linear in, the others held as they are (getitem's x, not its index
      arrays; where's two branches, not its mask): the tangent is the primitive applied to
      the tangents, zeros for None; `multilinear`, linear in each input separately (mul,
      matmul, einsum): the product rule. Without any of them, the transpose of the VJP.
    - `vmap(values, batched, B, **params) -> (outs, out_flags)`: vmap's rule for a
      primitive that runs a graph (scan, while_loop, checkpoint), on Tensors with the batch
      axis first where batched; `vmap_flags(params, in_flags) -> out_flags` says which
      outputs it batches (without it: all, when any input is). Other primitives batch
      through `batch`.
    - `bind_recorded(*inputs, **params)`: how an equation of a graph binds when it is run
      again on Tensors (checkpoint's replay, vmap's unbatched equations): scan's keeps its
      residuals for its VJP. `rebind` calls it, or bind.
    - `rebinding(params) -> (key, extended_key)`: for jit's merging of an equation bound
      again, extended, by a derivative (tape/graph.py merge_rebound): scan's.

    `promote`: which inputs take part in JAX's promotion of integers with floats (True: all;
    a tuple of positions, as where's (1, 2), whose mask does not): an integer array among them
    is cast to the dtype of the float arrays among them, where NumPy would widen int64 with
    float32 to float64. Python numbers stay weak, as in both. Elementwise primitives default
    to True; others promote nothing unless they say so (matmul, concatenate).

    `inexact`: the primitive computes in floating point (sqrt, exp, true division, ...): where
    its inputs combine into an integer or bool dtype, they are cast first to JAX's float for
    it, float32 for types of 32 bits or fewer and float64 for 64-bit ones, where NumPy would
    compute int32 in float64 and int8 or bool in float16 (`inexact_dtype`).

    `keeps_weak`: whether a result may be weakly typed (JAX's weak types): it is when an
    operand is a Python number or a weakly typed tensor (`jnp.array(0.5)`, `jnp.sqrt(2.0)`)
    whose kind (bool < integer < float < complex) is above every typed operand's. A weakly
    typed operand beside typed ones takes their dtype where it can hold its kind, as a Python
    number does (float32 data times `jnp.array(0.5)` is float32). astype's result is typed.

    `shape_of(*inputs, **params) -> shape` (None: not these inputs): the result's shape
    without computing it, so that an abstract trace (jit's, a scan body's) gives a large
    result zeros as its stand-in instead of running the impl on stand-ins (ops/shapes.py).
    Elementwise primitives default to NumPy broadcasting.

    `differentiated(params, in_flags, settle=False) -> params | None`: the equation's params
    where the inputs flagged carry a derivative, when it computes otherwise there: a custom
    call computes its rule's primal output (fwd's), as JAX's; a loop, cond or checkpoint, its
    graphs with those calls so (graph.differentiated_graph). bind applies it to an
    equation recorded on the tape, forward mode to one with tangents. With settle (the
    level that differentiated it has ended inside the trace holding it, tape/levels.py
    `settle`), the calls so reached in the graphs become their functions' equations, and a
    scan drops what only that level's walk reads (`_lin`). `depends(params,
    in_flags) -> out_flags`: which outputs depend on the flagged inputs along the graphs' own
    paths (a loop's; without it, all), for graph.dependent_values.
    `keep_residuals(params, traced) -> (key, params, extra outputs) | None`: the equation
    bound so that it also outputs what its VJP reads, where the graph holding it is
    linearized (`traced` flags the inputs that are values, not literals): scan's, bound with
    its residuals, so that the forward saves them and its VJP does not run its forward
    again. The extra outputs are (shape, dtype, hint); `key` is the object they follow from
    (scan's linearization), held by the new params: the same key, the same outputs.
    `effect`: the primitive is run for what it does, not for its result (debug printing):
    dead-code elimination keeps its equations (graph.used_vars), and a loop runs them at every
    step, never once for all steps; so too an equation with one in a graph among its params
    (a loop whose body prints, at any depth: graph.has_effect).

    Called, a primitive reads as the function it is: `inspect.signature` and `help()` show its
    inputs (positional-only, named after impl's) and that it returns a Tensor, and
    scanlib/__init__.pyi gives editors the same.
    """

    def __init__(self, name, impl, vjp=None, multiple_results=False, sparse_index=None,
                 doc=None, *, elementwise=False, batch=None, ufunc=None, out_impl=None,
                 view=False, inline=None, prune=None, reach=None, multilinear=False,
                 linear=False, tangent=None, jvp=None, vmap=None, vmap_flags=None,
                 bind_recorded=None, rebinding=None, effect=False, promote=None,
                 inexact=False, keeps_weak=True, shape_of=None, own_level=None,
                 differentiated=None, depends=None, keep_residuals=None):
        self.name = self.__name__ = self.__qualname__ = name
        if doc:
            self.__doc__ = doc
        self.__signature__ = _call_signature(impl, multiple_results)
        self.impl = impl
        self.vjp = vjp
        self.multiple_results = multiple_results
        # For indexing: sparse_index(*arrays, **params) is the index whose entries the output
        # reads, so the walk can add g there in place (`ct[index] += g`) when not recording.
        self.sparse_index = sparse_index
        self.elementwise, self.ufunc, self.out_impl = elementwise, ufunc, out_impl
        self.view, self.inline, self.prune, self.reach = view, inline, prune, reach
        self.batch = batching.elementwise_rule if elementwise and batch is None else batch
        self.multilinear, self.jvp = multilinear, jvp
        self.linear, self.tangent = linear, tangent
        self.vmap, self.vmap_flags = vmap, vmap_flags
        self.bind_recorded, self.rebinding = bind_recorded, rebinding
        self.effect = effect
        self.promote = elementwise if promote is None else promote
        self.inexact = inexact
        self.keeps_weak = keeps_weak
        if shape_of is None and elementwise and not view and not multiple_results:
            shape_of = shapes.elementwise
        self.shape_of = shape_of
        # "vjp", "jvp": the rule holds for one level of differentiation (custom_vjp's bwd,
        # custom_jvp's rule; see tape/levels.py); "graphs": it runs graphs from its params
        # that may hold such a call (every primitive that declares `reach`).
        self.own_level = own_level if own_level is not None else (
            "graphs" if reach is not None else None)
        # differentiated(params, in_flags) -> params or None; depends(params, in_flags) ->
        # out_flags: see the class docstring.
        self.differentiated, self.depends = differentiated, depends
        self.keep_residuals = keep_residuals

    def __call__(self, *args, **params):
        return bind(self, *args, **params)

    def __get__(self, obj, objtype=None):
        # Not a method: an instance of a class never binds to it. Having __get__ makes
        # inspect.isroutine true, so help() documents a primitive as the function it is.
        return self

    def rebind(self, *args, **params):
        """Bind an equation of a recorded graph again, on Tensors: as `bind_recorded` says
        where the primitive declares it (a scan keeps its residuals), else as bind."""
        if self.bind_recorded is not None:
            return self.bind_recorded(*args, **params)
        return bind(self, *args, **params)

    def inline_for(self, params):
        """The template the generated code writes for an equation with these params (its
        arguments as {0}, {1}, ...), or None: then it calls impl."""
        if callable(self.inline):
            return self.inline(params)
        return self.inline if self.inline and not params else None

    def cotangents(self, cts, outs, ins, params, saved=None):
        """The rule's input cotangents, with cts and outs as lists (one per output) whether
        or not it has several results (the graph walks of scan's linearization, checkpoint
        and forward mode call rules this way; the tape walk passes its saved values)."""
        if self.multiple_results:
            return self.vjp(cts, outs, *ins, _saved=saved, **params)
        return self.vjp(cts[0], outs[0], *ins, **params)

    def __repr__(self):
        return f"Primitive({self.name})"


def _call_signature(impl, multiple_results):
    """How a primitive is called: impl's array inputs, positional-only (bind records
    positional inputs only), returning a Tensor; a primitive of several results (control
    flow, called through its own function) keeps impl's signature."""
    sig = inspect.signature(impl)
    if multiple_results:
        return sig
    P = inspect.Parameter
    inputs = [P(p.name, P.POSITIONAL_ONLY, annotation="ArrayLike")
              for p in sig.parameters.values()
              if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD) and p.default is P.empty]
    params = [p.replace(kind=P.KEYWORD_ONLY) for p in sig.parameters.values()
              if p.kind == P.KEYWORD_ONLY or (p.kind == P.POSITIONAL_OR_KEYWORD
                                              and p.default is not P.empty)]
    return inspect.Signature(inputs + params, return_annotation="Tensor")


_SCALARS = (int, float, bool, complex)


def _describe(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, Tensor):
            parts.append(type_str(a.shape, a.dtype) + ("" if a.device == "cpu" else f"@{a.device}"))
        elif hasattr(a, "shape") and hasattr(a, "dtype"):
            parts.append(type_str(a.shape, a.dtype))
        else:
            parts.append(repr(a))
    return ", ".join(parts)


def _check_devices(prim, args, values):
    devices = {backends.device_of(v) for v in values if not isinstance(v, _SCALARS)}
    if len(devices) > 1:
        raise ValueError(
            f"{prim.name}: inputs live on different devices ({_describe(args)}: "
            f"{', '.join(sorted(devices))}). Move them to one device first, e.g. x.to('cpu') "
            "or x.to('cuda')."
        )


def _explained(e, prim, args, params):
    """e, restated with the primitive and its inputs' types, and, for an error that may be
    about shapes, how broadcasting works (not for a singular matrix: LinAlgError is a
    ValueError too)."""
    shown = ", ".join(f"{k}={v!r}" for k, v in params.items() if not k.startswith("_"))
    hint = ("" if isinstance(e, np.linalg.LinAlgError) else
            " Check the shapes above; broadcasting follows NumPy's rules (trailing axes must "
            "match or be 1).")
    message = (f"{prim.name} failed on inputs ({_describe(args)})"
               + (f" with {shown}" if shown else "")
               + f": {str(e).rstrip('.')}." + hint)
    try:
        return type(e)(message)
    except TypeError:  # a class that takes more than a message (NumPy's _UFuncNoLoopError)
        return next(c for c in (ValueError, TypeError, IndexError) if isinstance(e, c))(message)


def _run_impl(prim, args, values, params):
    if prim.multiple_results:  # control flow (scan) reports its own errors
        return prim.impl(*values, **params)
    try:
        return prim.impl(*values, **params)
    except (ValueError, TypeError, IndexError) as e:
        raise _explained(e, prim, args, params) from None


# Types whose values need no device check (NumPy data or Python numbers); others are looked at.
_CPU_TYPES = frozenset({np.ndarray, float, int, bool, complex, np.float64, np.float32,
                        np.float16, np.int64, np.int32, np.bool_})


def _cut(tracers, multiple):
    from .elementwise import stop_gradient  # elementwise imports this module

    cut = [stop_gradient(t) if is_differentiable_dtype(t.dtype) else t
           for t in (tracers if multiple else [tracers])]
    return cut if multiple else cut[0]


def bind(prim, *args, **params):
    """Apply `prim` to args (Tensors, arrays or Python scalars)."""
    if prim.inexact:
        args = as_inexact_args(args)
    promote = prim.promote
    if promote and len(args) > 1:
        if promote is True:
            if not (len(args) == 2 and alike(args[0], args[1])):
                args = promoted(promote, args)
        elif not (len(promote) == 2 and alike(args[promote[0]], args[promote[1]])):
            args = promoted(promote, args)
    weak = None
    if prim.keeps_weak and args:
        first = args[0]  # the common case decided at once: a typed float tensor first
        if type(first) is not Tensor or first._weak:
            weak = weak_rank(args)
        else:
            try:
                kind = first._value.dtype.kind
            except AttributeError:  # a comparison of Python numbers alone holds a Python bool
                kind = "b"
            if kind != "f" and kind != "c":
                weak = weak_rank(args)
    if (prim.differentiated is not None and _STATE.grad_enabled
            and not _STATE.replaying_differentiated):
        flags = [type(a) is Tensor and a.requires_grad for a in args]
        if any(flags):  # to be differentiated: a custom call computes its rule's primal
            params = prim.differentiated(params, flags) or params  # output (a loop, so)
    builders = _STATE.builders
    builder = builders[-1] if builders else None
    if builder is None:
        values = []
        for a in args:
            if type(a) is Tensor:
                if a._trace is not None:  # a tracer whose trace has ended
                    raise escaped_tracer_error(a)
                values.append(a._value)
            elif type(a) in (list, tuple):  # [t0, t1]: stacked, so no gradient is dropped
                return bind(prim, *lists_as_tensors(args), **params)
            else:
                values.append(a)
        for v in values:  # the common all-NumPy case costs one set lookup per argument
            if type(v) not in _CPU_TYPES and not isinstance(v, np.generic):
                _check_devices(prim, args, values)
                break
        try:
            out = prim.impl(*values, **params)
        except (ValueError, TypeError, IndexError) as e:
            if prim.multiple_results:
                raise
            raise _explained(e, prim, args, params) from None
        inputs, out_vars = args, None
    else:
        if any(type(a) in (list, tuple) for a in args):
            args = lists_as_tensors(args)
        inputs = [builder.lift(a) if isinstance(a, Tensor) or backends.is_array(a) else a
                  for a in args]
        if builder.process_primitive is not None:  # a trace that applies rules (jvp's)
            out, tracers = builder.process_primitive(prim, inputs, params)
        else:
            values = [a._value if type(a) is Tensor else a for a in inputs]
            for v in values:  # as above: one set lookup per argument when all are NumPy's
                if type(v) not in _CPU_TYPES and not isinstance(v, np.generic):
                    _check_devices(prim, inputs, values)
                    break
            with np.errstate(all="ignore"):  # stand-in zeros may divide by zero
                out = None
                if prim.shape_of is not None and builder.abstract:  # no work on stand-ins
                    out = shapes.stand_in(prim, values, params,
                                           builder.broadcast_zeros)
                if out is None:
                    out = _run_impl(prim, inputs, values, params)
            tracers = builder.add_eqn(prim, inputs, params, out)
        if (builder.grad_at_start and not _STATE.grad_enabled and prim.vjp is not None
                and not builder.whole_call):
            # no_grad() inside a traced body: the loop records no node here, so the graph
            # must cut the gradient too.
            tracers = _cut(tracers, prim.multiple_results)
        out_vars = [t._var for t in tracers] if prim.multiple_results else [tracers._var]

    result = None
    if prim.vjp is not None and _STATE.grad_enabled:
        for a in inputs:
            if type(a) is Tensor and a.requires_grad and a._trace is builder:
                outs = out if prim.multiple_results else [out]
                if prim.multiple_results or is_differentiable_dtype(outs[0].dtype):
                    recorded = record(prim, list(inputs), params, outs, builder, out_vars)
                    if prim.own_level is not None and builder is not None:
                        levels.settle(builder, recorded)
                    result = recorded if prim.multiple_results else recorded[0]
                break
    if result is None:
        if builder is not None:
            result = tracers
        elif prim.multiple_results:
            result = [Tensor(v) for v in out]
        else:
            result = Tensor(out)
    return result if weak is None else marked_weak(result, weak)
