"""`custom_vjp` and `custom_jvp`, as JAX's: a function with a derivative rule of its own. Each
call is one primitive, `custom_vjp_call` or `custom_jvp_call`, whose params are the traced
function (a Graph, run when no derivative is taken) and the user's rules; its VJP rule calls
`bwd` on fwd's residuals, or transposes the user's JVP rule, so every transformation treats
it as any other op.

Imports backends, tape, ops, pytree, tracing, interpreters, remat (its replay of a graph),
scan's numba rules (a custom call in a compiled loop is its function's statements) and vmap
(a custom call is batched by vmapping its function and rules).
"""

from __future__ import annotations

from typing import Any, Callable

import contextlib
import dataclasses
import functools
import inspect

import numpy as np

from . import backends, logs, pytree
from .interpreters.batching import broadcast_batch
from .ops import as_tensor, zeros
from .ops.primitive import Primitive, bind
from .remat import replay, walk_start
from .scan.loop import native_rules
from .scan.loop.native import VIEWS
from .tape import (Graph, Tensor, backward_pass, current_builder, enable_grad, grad_enabled,
                   is_differentiable_dtype, record)
from .tape.backward import watching
from .tape.graph import Var, stand_ins_for, used_vars
from .tape.levels import FORWARD_MODE, ForwardModeEncloses, at_enclosing_levels
from .tape.state import STATE
from .tracing import closure_names, int_positions, trace_function
from .vmap import vmap

__all__ = ["custom_vjp", "custom_jvp"]

_log = logs.get("custom")

_NUMBERS = (bool, int, float, complex)  # exact types: a NumPy scalar is typed, so traced


class custom_vjp:
    """`f = custom_vjp(fun)` computes fun, with the VJP given by `f.defvjp(fwd, bwd)`, as
    `jax.custom_vjp`.

    `fwd(*args)` returns `(out, residuals)`: fun's output and any pytree of values bwd needs.
    `bwd(residuals, g)` takes the cotangent g of out (zeros where nothing reads an output)
    and returns a tuple with one cotangent per argument of fun, each with that argument's
    pytree structure, shapes and dtypes; None stands for zeros (for an argument or any
    subtree of it). The arguments at `nondiff_argnums` (functions, sizes, flags) get no
    cotangent: they are passed to fwd as given and to bwd first, `bwd(*nondiff, res, g)`.

    Under grad, vjp and value_and_grad the output is fwd's (also in a scan, loop or checkpoint
    body, where fwd is traced beside fun) and the cotangents bwd's. Only the residuals are kept
    between the two passes, not fwd's intermediates (an adjoint method stays O(1) in memory). As
    in JAX, bwd differentiates the call at one level only (the innermost grad or vjp whose
    inputs it depends on); a derivative of the gradient (grad of grad, jvp of grad, a hessian)
    differentiates fwd's and bwd's own operations. Forward mode at the call's own level (jvp,
    jacfwd or linearize of a function that calls it) raises TypeError, as in JAX: define a
    custom_jvp instead. A `Tensor.backward` walk (PyTorch's API) has no level: it applies bwd at
    every order, as a torch.autograd.Function. It works under vmap and jit and inside scan,
    fori_loop, while_loop and checkpoint bodies. A tensor that fun reads from outside its
    arguments gets no cotangent from the rule, so one a derivative may reach raises TypeError:
    pass it as an argument instead.

    >>> import scanlib as sl
    >>> clip_gradient = sl.custom_vjp(lambda x: x)
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (sl.clip(g, -1.0, 1.0),))
    >>> sl.grad(lambda x: (3.0 * clip_gradient(x)).sum())(sl.tensor([1.0, 2.0]))
    tensor([1., 1.], dtype=float64)
    """

    # True where the rule is fun's own derivative at every order (lax.custom_root's and
    # custom_linear_solve's): the call then takes part in no level (tape/levels.py).
    _exact = False

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()):
        if not callable(fun):
            raise TypeError(f"custom_vjp: fun must be callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums = fun, _argnums("custom_vjp", nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any],
               symbolic_zeros: bool = False) -> None:
        """Give the rule: `fwd(*args) -> (out, residuals)`, `bwd(*nondiff, residuals, g) ->
        one cotangent per differentiable argument` (see custom_vjp)."""
        if not (callable(fwd) and callable(bwd)):
            raise TypeError(f"custom_vjp: defvjp(fwd, bwd) takes two functions, got "
                            f"{type(fwd).__name__} and {type(bwd).__name__}")
        if symbolic_zeros:
            raise NotImplementedError("custom_vjp: symbolic_zeros=True is not supported; bwd "
                                      "receives zeros for outputs nothing reads")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {_name(self.fun)} "
                                 "using defvjp.")
        call = _Call("custom_vjp", self.fun, self.nondiff_argnums, args, kwargs)
        rules = dict(fwd=self.fwd, bwd=self.bwd, jvp=None, exact=self._exact)
        return call.apply(custom_vjp_call_p, rules)

    def __get__(self, obj, objtype=None):  # a method: with obj as the first argument
        return self if obj is None else functools.partial(self, obj)


class custom_jvp:
    """`f = custom_jvp(fun)` computes fun, with the JVP given by `f.defjvp(jvp)` (or one
    function per argument with `f.defjvps`), as `jax.custom_jvp`.

    `jvp(primals, tangents)` takes two tuples, one entry per argument of fun (tangents have
    the primals' structure; zeros for arguments not differentiated), and returns
    `(primal_out, tangent_out)`; tangent_out must be linear in the tangents. Forward mode
    (jvp, jacfwd, hessian) calls it; reverse mode (grad, vjp) transposes it, so it is also
    the function's gradient. As in JAX, the rule differentiates the call at one level (the
    innermost derivative whose inputs it depends on); a derivative around that one (grad of
    grad, a hessian) differentiates the rule's own operations. Where the call is
    differentiated its output is the rule's primal_out, as in JAX (in a scan, loop or
    checkpoint body too, where the rule is traced beside fun); elsewhere fun runs. There a
    `debug.print` in the rule prints once, and only what does not read the tangents, as JAX's
    linearize; forward mode prints them all. The arguments at
    `nondiff_argnums` get no tangent and come first: `jvp(*nondiff, primals, tangents)`. It
    works under vmap and jit and inside scan, fori_loop, while_loop and checkpoint bodies. A
    tensor that fun reads from outside its arguments gets no tangent from the rule, so one a
    derivative may reach raises TypeError: pass it as an argument instead.

    >>> import scanlib as sl
    >>> log1pexp = sl.custom_jvp(lambda x: sl.logaddexp(x, 0.0))
    >>> log1pexp.defjvps(lambda t, out, x: t * sl.sigmoid(x))
    >>> sl.grad(lambda x: log1pexp(x).sum())(sl.tensor([0.0, 1000.0]))
    tensor([0.5, 1. ], dtype=float64)
    """

    _exact = False  # as custom_vjp's

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()):
        if not callable(fun):
            raise TypeError(f"custom_jvp: fun must be callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums = fun, _argnums("custom_jvp", nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp: Callable[..., Any], symbolic_zeros: bool = False) -> Callable:
        """Give the rule `jvp(*nondiff, primals, tangents) -> (primal_out, tangent_out)`;
        returns jvp, so it works as a decorator."""
        if not callable(jvp):
            raise TypeError(f"custom_jvp: defjvp takes a function jvp(primals, tangents), got "
                            f"{type(jvp).__name__}")
        if symbolic_zeros:
            raise NotImplementedError("custom_jvp: symbolic_zeros=True is not supported; the "
                                      "rule receives zeros for tangents not given")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """One rule per argument: `jvps[i](t_i, primal_out, *primals)` is the tangent of the
        output for the tangent t_i of argument i (None: the output does not depend on it);
        the tangent out is their sum."""
        if self.nondiff_argnums:
            raise TypeError("custom_jvp: defjvps can't be used with nondiff_argnums; use "
                            "defjvp")
        for j in jvps:
            if j is not None and not callable(j):
                raise TypeError(f"custom_jvp: defjvps takes functions or None, got "
                                f"{type(j).__name__}")

        def jvp(primals, tangents):
            if len(jvps) != len(primals):
                raise TypeError(f"custom_jvp: defjvps was given {len(jvps)} rules, but "
                                f"{_name(self.fun)} was called with {len(primals)} arguments; "
                                "give one per argument (None for one with no tangent)")
            out = self(*primals)
            terms = [j(t, out, *primals) for j, t in zip(jvps, tangents) if j is not None]
            if not terms:
                return out, pytree.tree_map(lambda o: zeros(o.shape, o.dtype, o.device), out)
            return out, functools.reduce(
                lambda a, b: pytree.tree_map(lambda x, y: x + y, a, b), terms)

        jvp.__name__ = f"{_name(self.fun)}_jvps"
        self.jvp = jvp

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {_name(self.fun)} "
                                 "using defjvp.")
        call = _Call("custom_jvp", self.fun, self.nondiff_argnums, args, kwargs)
        return call.apply(custom_jvp_call_p, dict(fwd=None, bwd=None, jvp=self.jvp,
                                                  exact=self._exact))

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)


def _name(fun):
    return getattr(fun, "__name__", "f").replace("<lambda>", "f")


def _argnums(who, nums):
    nums = int_positions(who, "nondiff_argnums", nums)
    if any(n < 0 for n in nums):
        raise ValueError(f"{who}: nondiff_argnums {nums} has a negative position; count "
                         "positions from 0")
    return tuple(sorted(set(nums)))


# --- one call ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Rules:
    """An equation's rules and how to call them: the user's fwd and bwd (custom_vjp) or jvp
    (custom_jvp); the nondifferentiable arguments (position, value); the Python numbers among
    the differentiable leaves (index, value), which stay numbers; the structure of the
    differentiable arguments and of the output, and the output leaves' (shape, dtype). A
    scan body's cache compares params by these fields, so a rule given anew (defvjp again)
    is a different equation."""

    name: str
    fwd: Any
    bwd: Any
    jvp: Any
    nondiff: tuple
    statics: tuple
    in_tree: Any
    out_tree: Any
    out_avals: tuple
    in_rule: bool = False  # called by another custom function's rule that a walk runs
    fun: Any = None  # the user's function (a custom_jvp in linear code transposes it)
    # traced where nothing differentiates it (a loop body): fwd's output or the jvp rule's
    # primal output, a graph of the equation's inputs, which the call computes where the
    # body is differentiated (see _rule_primal_graph)
    differentiated: Any = None
    exact: bool = False  # the rule is fun's derivative at every order: it takes no level

    def __repr__(self):  # printed graphs: `rules={fwd: f_fwd, bwd: f_bwd}`
        fns = [(k, getattr(self, k)) for k in ("fwd", "bwd", "jvp")]
        return "{" + ", ".join(f"{k}: {_name(f)}" for k, f in fns if f is not None) + "}"

    def args(self, inputs, tangents=False):
        """fun's positional arguments from the equation's differentiable inputs; with
        `tangents`, the inputs are tangents and a Python number's tangent is a zero of its
        type (the number is a constant)."""
        leaves, it, statics = [], iter(inputs), dict(self.statics)
        for i in range(self.in_tree.num_leaves):
            if i in statics:
                leaves.append(type(statics[i])(0) if tangents else statics[i])
            else:
                leaves.append(next(it))
        diff = iter(pytree.unflatten(self.in_tree, leaves))
        nondiff = dict(self.nondiff)
        return tuple(nondiff[i] if i in nondiff else next(diff)
                     for i in range(len(self.nondiff) + self.in_tree.num_children))

    def diff_args(self, inputs, tangents=False):
        nondiff = dict(self.nondiff)
        return tuple(a for i, a in enumerate(self.args(inputs, tangents)) if i not in nondiff)

    def nondiff_values(self):
        return tuple(v for _, v in self.nondiff)


class _Call:
    """A call of a custom function, split into what its rules need: the nondifferentiable
    arguments, the differentiable ones' leaves as Tensors (Python numbers kept aside)."""

    def __init__(self, who, fun, nondiff_argnums, args, kwargs):
        self.who, self.fun = who, fun
        args = _resolve(who, fun, args, kwargs)
        bad = [n for n in nondiff_argnums if n >= len(args)]
        if bad:
            raise ValueError(f"{who}: nondiff_argnums {nondiff_argnums} names position "
                             f"{bad[0]}, but {_name(fun)} was called with {len(args)} "
                             "positional arguments")
        self.nondiff = tuple((i, args[i]) for i in nondiff_argnums)
        for i, v in self.nondiff:
            if any(isinstance(leaf, Tensor) for leaf in pytree.flatten(v)[0]):
                raise TypeError(f"{who}: argument {i} of {_name(fun)} is in nondiff_argnums "
                                "but holds a Tensor; pass tensors as differentiable arguments "
                                "(the rule may give them a None cotangent) or close over them")
        diff = tuple(a for i, a in enumerate(args) if i not in dict(self.nondiff))
        paths, leaves, self.in_tree = pytree.flatten_with_paths(diff, "args")
        self.statics = tuple((i, x) for i, x in enumerate(leaves) if type(x) in _NUMBERS)
        self.inputs = [_input(who, x, p) for x, p in zip(leaves, paths)
                       if type(x) not in _NUMBERS]

    def rules(self, given, out_tree, out_avals):
        return Rules(_name(self.fun), given["fwd"], given["bwd"], given["jvp"], self.nondiff,
                     self.statics, self.in_tree, out_tree, tuple(out_avals),
                     in_rule=STATE.rule_code, exact=given["exact"], fun=self.fun)

    def apply(self, prim, given):
        if current_builder() is None:
            return self._on_tape(prim, given)
        return self._traced(prim, given)

    def _on_tape(self, prim, given):
        """Outside any trace: fun runs as itself unless an input requires grad; then fwd
        (custom_vjp) or fun runs without recording and one node stands for the call,
        holding fwd's residuals. Run on detached inputs with recording on, a result that
        still requires grad read a tensor that requires grad from outside the arguments."""
        inputs = self.inputs
        recording = grad_enabled() and any(x.requires_grad for x in inputs)
        if recording and prim is custom_vjp_call_p:
            rules = self.rules(given, None, ())
            return pytree.unflatten(*_record_fwd(rules, None, list(inputs), len(inputs)))
        probe = self.rules(given, None, ())
        primal = _differentiated_primal(prim, probe) if recording else self.fun
        with _on_detached():
            out = primal(*probe.args([Tensor(x._value) for x in inputs]))
        out_leaves, out_tree = pytree.flatten(out)
        if grad_enabled():
            _refuse_closure(self.who, self.fun, out_leaves)
        if not recording:
            return out
        values = [_output(self.who, o)._value for o in out_leaves]
        rules = self.rules(given, out_tree, [(np.shape(v), np.dtype(v.dtype)) for v in values])
        outs = record(prim, list(inputs), dict(fun=None, rules=rules, num_args=len(inputs)),
                      values, None, None)
        return pytree.unflatten(out_tree, outs)

    def _traced(self, prim, given):
        """Inside a trace (a scan body, checkpoint, jit, vmap, jvp): fun traced into a Graph
        and bound as one equation; the tensors fun closed over become its last inputs."""
        inputs, outs_tree, residuals = self.inputs, [], []
        probe = self.rules(given, None, ())
        primal = self.fun
        differentiated = grad_enabled() and any(x.requires_grad for x in inputs)
        if differentiated:
            primal = _differentiated_primal(prim, probe)
        # Differentiated in a jit call's own trace, a custom_vjp call is fwd's graph, its
        # residuals (the tensors among them) extra outputs that its node keeps for bwd, as
        # JAX runs fwd once: the walk back does not run fwd again, nor print what fwd prints
        # a second time. (Elsewhere a graph may be batched or bound again: fwd runs again.)
        keep_residuals = (differentiated and prim is custom_vjp_call_p
                          and current_builder().whole_call)

        def traced(*tracers):
            if keep_residuals:
                out, res = _fwd_pair(probe.fwd, probe.fwd(*probe.args(list(tracers))))
                res_leaves, res_tree = pytree.flatten(res)
                held = [i for i, r in enumerate(res_leaves) if isinstance(r, Tensor)]
                residuals.append((res_tree, res_leaves, held))
            else:
                out = primal(*probe.args(list(tracers)))
            leaves, tree = pytree.flatten(out)
            outs_tree.append(tree)
            outs = [_output(self.who, o) for o in leaves]
            return outs + [res_leaves[i] for i in held] if keep_residuals else outs

        device = next((x.device for x in inputs), "cpu")
        graph, _, _ = trace_function(
            traced, [(x.shape, x.dtype) for x in inputs], pytree.flatten(tuple(inputs))[1],
            device=device, name=_name(getattr(primal, "rule", primal)), split_args=True,
            const_names=closure_names(getattr(primal, "rule", primal)))
        consts = graph.consts
        _refuse_traced_closure(self.who, self.fun, consts, prim is custom_vjp_call_p)
        graph = Graph(graph.invars, graph.constvars, [None] * len(consts), graph.eqns,
                      graph.outvars, graph.name, graph.device)
        n = outs_tree[0].num_leaves
        rules = self.rules(given, outs_tree[0], [(v.shape, v.dtype) for v in graph.outvars[:n]])
        # A trace that applies rules at once (forward mode's) keeps no equation for later.
        later = current_builder().process_primitive is None
        if later and not (differentiated or given["exact"] or STATE.tracing_rule):
            found = self._rule_primal_graph(prim, probe, inputs, device, graph.outvars)
            if found is not None:
                graph, rule_graph, rule_consts = _sharing_inputs(graph, *found)
                consts = list(consts) + rule_consts
                rules = dataclasses.replace(rules, differentiated=rule_graph)
        outs = bind(prim, *inputs, *consts, fun=graph, rules=rules, num_args=len(inputs))
        if keep_residuals:
            res_tree, res_leaves, held = residuals[0]
            res_leaves = list(res_leaves)
            for i, r in zip(held, outs[n:]):
                res_leaves[i] = r
            if outs and outs[0]._node is not None:  # "live": residuals this node outputs
                outs[0]._node.saved = (pytree.unflatten(res_tree, res_leaves), "live")
        return pytree.unflatten(outs_tree[0], outs[:n])

    def _rule_primal_graph(self, prim, probe, inputs, device, fun_outs):
        """A call traced where nothing differentiates it (a loop body, which may be
        differentiated later): what it computes where it is differentiated (fwd's output,
        the jvp rule's primal output) as a graph of the same inputs, with its constants.
        None where the rule cannot be traced here or gives other shapes or dtypes than fun:
        fun then serves there too, as it did."""
        primal = _differentiated_primal(prim, probe)
        rule = primal.rule

        def traced(*tracers):
            out = primal(*probe.args(list(tracers)))
            return [_output(self.who, o) for o in pytree.flatten(out)[0]]

        saved, STATE.tracing_rule = STATE.tracing_rule, True
        try:
            graph, _, _ = trace_function(
                traced, [(x.shape, x.dtype) for x in inputs], pytree.flatten(tuple(inputs))[1],
                device=device, name=_name(rule), split_args=True,
                const_names=closure_names(rule))
            _refuse_traced_closure(self.who, self.fun, graph.consts, False)
        except Exception as e:  # noqa: BLE001 (its own error shows where it is differentiated)
            _log.debug("%s: the rule of %s is not traced in this body (%s: %s); fun "
                       "computes it there", self.who, probe.name, type(e).__name__, e)
            return None
        finally:
            STATE.tracing_rule = saved
        if [(v.shape, v.dtype) for v in graph.outvars] != [(v.shape, v.dtype) for v in fun_outs]:
            return None
        eqns, live = used_vars(graph.eqns, graph.outvars)  # the tangents at zero: dead
        kept = [(v, c) for v, c in zip(graph.constvars, graph.consts) if v in live]
        return (Graph(graph.invars, [v for v, _ in kept], [c for _, c in kept], eqns,
                      graph.outvars, graph.name, graph.device), [c for _, c in kept])


def _sharing_inputs(fun, rule, rule_consts):
    """fun's graph and the rule's, each taking the call's inputs, then fun's constants, then
    the rule's (an unused Var in the place of the other's); and the rule's constants."""
    def unused(vs):
        return [Var(v.shape, v.dtype, v.hint) for v in vs]

    n = len(fun.constvars) + len(rule.constvars)
    both_fun = Graph(fun.invars, fun.constvars + unused(rule.constvars), [None] * n, fun.eqns,
                     fun.outvars, fun.name, fun.device)
    both_rule = Graph(rule.invars, unused(fun.constvars) + rule.constvars, [None] * n,
                      rule.eqns, rule.outvars, rule.name, rule.device)
    return both_fun, both_rule, rule_consts


def _differentiated_call(params, in_flags, settle=False):
    """A custom call's `differentiated` rule: where its inputs carry a derivative, it computes
    fwd's output (custom_vjp) or its jvp rule's primal output (custom_jvp), as JAX's: the
    graph traced beside fun."""
    rules = params["rules"]
    if rules.differentiated is None:
        return None
    return dict(params, fun=rules.differentiated,
                rules=dataclasses.replace(rules, differentiated=None))


def _differentiated_primal(prim, rules):
    """What a call computes where it is differentiated, as JAX's: fwd's output (custom_vjp),
    or the jvp rule's primal_out at zero tangents (custom_jvp). A rule may compute it
    otherwise than fun (more stably, say); fun serves only calls nobody differentiates."""
    if prim is custom_vjp_call_p:
        def primal(*args):
            return _fwd_pair(rules.fwd, rules.fwd(*args))[0]
        primal.rule = rules.fwd
        return primal

    def primal(*args):
        nondiff = dict(rules.nondiff)
        primals = tuple(a for i, a in enumerate(args) if i not in nondiff)
        with _rule_prints("silent") as printed:
            found = rules.jvp(*rules.nondiff_values(), primals,
                              pytree.tree_map(_zero_tangent, primals))
        if printed():
            # It printed: again, with tangents that require grad, so that a print of what
            # reads them is dropped (JAX's linearize prints only the rule's primal values).
            builder = current_builder()
            with _rule_prints("primal"), enable_grad():
                found = rules.jvp(*rules.nondiff_values(), primals, pytree.tree_map(
                    lambda x: _zero_tangent(x, builder, probe=True), primals))
        if not (isinstance(found, (tuple, list)) and len(found) == 2):
            raise TypeError(f"custom_jvp: the jvp rule {_name(rules.jvp)} must return a pair "
                            f"(primal_out, tangent_out), got {type(found).__name__}")
        return found[0]
    primal.rule = rules.jvp
    return primal


def _zero_tangent(x, builder=None, probe=False):
    if type(x) in _NUMBERS:
        return type(x)(0)
    x = x if isinstance(x, Tensor) else as_tensor(x)
    if probe and is_differentiable_dtype(x.dtype):
        return _start_tangent(x, builder)
    return _zeros_like(x)


@contextlib.contextmanager
def _rule_prints(mode):
    """debug.print inside a custom_jvp's rule run where the call is differentiated (see
    STATE.rule_prints): yields whether the rule asked to print. An enclosing "silent" holds:
    a rule run for its linear map prints nothing, nor do the calls inside it."""
    saved = STATE.rule_prints, STATE.rule_printed
    if saved[0] != "silent":
        STATE.rule_prints = mode
    STATE.rule_printed = False
    printed = []
    try:
        yield lambda: bool(printed)
    finally:
        if STATE.rule_printed and saved[0] != "silent":
            printed.append(True)
        STATE.rule_prints, STATE.rule_printed = saved


def _resolve(who, fun, args, kwargs):
    """The arguments as positional ones, defaults filled in (JAX's resolve_kwargs)."""
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError):  # a builtin without one: positional arguments only
        if kwargs:
            raise TypeError(f"{who}: {_name(fun)} has no signature to place keyword "
                            "arguments by; pass them positionally") from None
        return tuple(args)
    try:
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{who}: the arguments of {_name(fun)} do not match its signature "
                        f"({e})") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{who}: {_name(fun)} takes keyword-only arguments "
                        f"{sorted(bound.kwargs)}; a custom function's arguments must be "
                        "positional or positional-or-keyword")
    return tuple(bound.args)


def _input(who, x, path):
    if isinstance(x, Tensor):
        return x
    if backends.is_array(x) or isinstance(x, np.generic):
        return as_tensor(x)
    raise TypeError(f"{who}: {path} is a {type(x).__name__}; the differentiable arguments of a "
                    "custom function are pytrees of Tensors, arrays or numbers (pass other "
                    "values through nondiff_argnums, or close over them)")


def _output(who, o):
    if isinstance(o, Tensor):
        return o
    if backends.is_array(o) or isinstance(o, (np.generic,) + _NUMBERS):
        return as_tensor(o)
    raise TypeError(f"{who}: the function returned a {type(o).__name__} leaf; a custom "
                    "function returns pytrees of Tensors, arrays or numbers")


def _fwd_pair(fwd, found):
    if not (isinstance(found, (tuple, list)) and len(found) == 2):
        raise TypeError(f"custom_vjp: the fwd rule {_name(fwd)} must return a pair (out, "
                        f"residuals), got {type(found).__name__}"
                        + (f" of length {len(found)}" if isinstance(found, (tuple, list))
                           else ""))
    return found


def _record_fwd(rules, fun, inputs, num_args):
    """fwd run without recording on detached copies of the inputs, and one node for the call
    on the tape, holding fwd's residuals: (out_tree, outputs). rules.out_tree None: not
    known yet (taken from fwd's output), else fwd's output must have it."""
    _refuse_const_grads(inputs, num_args, rules)
    plain = [Tensor(x._value) for x in inputs[:num_args]]
    with enable_grad(), _on_detached():  # a result that requires grad read one from outside
        out, res = _fwd_pair(rules.fwd, rules.fwd(*rules.args(plain)))
    out_leaves, out_tree = pytree.flatten(out)
    _refuse_closure("custom_vjp", rules, out_leaves + pytree.flatten(res)[0])
    if rules.out_tree is not None and out_tree != rules.out_tree:
        raise TypeError(f"custom_vjp: the fwd rule {_name(rules.fwd)} must return (out, "
                        f"residuals) with out as {rules.name} returns it, "
                        f"{pytree.structure_str(rules.out_tree)}, got "
                        f"{pytree.structure_str(out_tree)}")
    values = [_output("custom_vjp", o)._value for o in out_leaves]
    if rules.out_tree is None:
        rules = dataclasses.replace(rules, out_tree=out_tree, out_avals=tuple(
            (np.shape(v), np.dtype(v.dtype)) for v in values))
    outs = record(custom_vjp_call_p, list(inputs),
                  dict(fun=fun, rules=rules, num_args=num_args), values, None, None,
                  saved=(res,))
    return out_tree, outs


def _custom_vjp_bind_recorded(*inputs, fun, rules, num_args):
    """How a recorded graph's custom_vjp_call binds again on Tensors (checkpoint's replay,
    vmap's unbatched equations): on the tape, fwd runs and its residuals are kept."""
    if fun is not None and len(fun.outvars) != len(rules.out_avals):
        raise AssertionError(f"{rules.name}: a call with fwd's residuals as outputs, traced for "
                             "a jit call's own graph, is bound again")
    if (current_builder() is None and grad_enabled()
            and any(isinstance(x, Tensor) and x.requires_grad for x in inputs[:num_args])):
        return _record_fwd(rules, fun, list(inputs), num_args)[1]
    return bind(custom_vjp_call_p, *inputs, fun=fun, rules=rules, num_args=num_args)


@contextlib.contextmanager
def _on_detached():
    """fun or fwd running on detached copies of the inputs: nothing differentiates what they
    compute (the rule gives the derivative), so a vjp or grad inside them records its walk only
    where its own inputs or a closed-over tensor require grad, as it would alone. Otherwise
    an enclosing grad's mark would make such a result require grad, and it would read as a
    closed-over tensor."""
    depth, STATE.diff_depth = STATE.diff_depth, 0
    try:
        yield
    finally:
        STATE.diff_depth = depth


_CLOSURE = ("{who}: {name} reads a tensor from outside its arguments that a derivative may "
            "reach ({what}), but its rules give cotangents and tangents only for its "
            "arguments. Pass the tensor as an argument of {name} (and of its rules), or "
            ".detach() it.")


def _refuse_closure(who, fun, leaves):
    """fun is the user's function, or Rules (named after it)."""
    if any(isinstance(o, Tensor) and o.requires_grad for o in leaves):
        name = fun.name if isinstance(fun, Rules) else _name(fun)
        raise TypeError(_CLOSURE.format(who=who, name=name, what="one that requires grad"))


def _refuse_traced_closure(who, fun, consts, vjp):
    """A tensor fun closed over inside a trace, refused when a derivative reaches it: it
    requires grad (here or where it was lifted from) or carries a tangent (jvp's trace). A
    value computed in the enclosing trace (a scan body's carry) is refused only when the
    call is differentiated (_refuse_const_grads), since only then may it be reached."""
    for c in consts:
        what = _differentiated(c)
        if what == _TANGENT and vjp:
            raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")
        if what in (_TANGENT, _GRAD):
            raise TypeError(_CLOSURE.format(who=who, name=_name(fun), what=what))


_GRAD, _TANGENT = "one that requires grad", "a tangent"
_COMPUTED = "a value computed inside an enclosing scan body, jit or vmap"


def _differentiated(c, walking=False):
    """Why a derivative may reach the closed-over value c, following tracers lifted from an
    enclosing trace to what they stand for: _GRAD, _TANGENT, _COMPUTED (a float value of an
    enclosing trace's own), or None (a constant nothing differentiates). A tensor that
    requires grad counts where grad is on, and always during a walk (`walking`: the
    call's rule is running, whether or not the walk is recorded)."""
    for _ in range(1000):  # traces nest a few levels deep
        if not isinstance(c, Tensor):
            return None
        trace = c._trace
        if trace is None:
            return _GRAD if c.requires_grad and (walking or grad_enabled()) else None
        if c.requires_grad:
            return _GRAD
        if not is_differentiable_dtype(c.dtype):
            return None
        if not trace.abstract:  # jvp's trace on real values
            return _TANGENT if c._var in getattr(trace, "tangents", {}) else None
        if c._var not in trace.constvars:
            return _COMPUTED
        c = trace.consts[trace.constvars.index(c._var)]  # lifted from outside that trace
    raise AssertionError("custom function: traces nested over 1000 deep")


# --- the primitives --------------------------------------------------------------------------
def _call_impl(*values, fun, rules, num_args):
    if fun is None:
        raise AssertionError(f"{rules.name}: a custom call recorded on the tape has no graph "
                             "to run")
    stand_ins = stand_ins_for(fun.outvars)
    if stand_ins is not None:  # being traced: fun would run on zeros for nothing
        return stand_ins
    outs = _replay(fun)(*values)
    xp = backends.xp_of(*values) if values else np
    outs = [xp.asarray(o, dtype=v.dtype) for o, v in zip(outs, fun.outvars)]
    # Fresh memory, as for any primitive not declared a view: the loop compiler may write
    # into an output, which must then not be (a view of) an input (fun returning x or x.T).
    roots = {id(_root(v)) for v in values if backends.is_array(v)}
    return [o.copy() if id(_root(o)) in roots else o for o in outs]


def _replay(fun):
    """fun's equations as one generated Python function of its inputs, then its constants
    (jit's straight-line replay: each equation's impl, as eval_graph calls it), made once
    per graph: a custom function called at every step of a loop is not walked each time."""
    run = fun.__dict__.get("_replay")
    if run is None:
        from .jit import straight_line

        opened = Graph(fun.invars + fun.constvars, [], [], fun.eqns, fun.outvars, fun.name,
                       fun.device)
        run = fun.__dict__["_replay"] = straight_line(opened, [])
    return run


def _root(a):
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def _numba_statements(eqn, args, outs, scope=None):
    """A custom call in a numba kernel: its function's equations, inline (their own numba
    rules, a scan's or while_loop's by the kernel's `scope`; one without raises Unsupported
    and the loop runs as NumPy's). An output that is an input, or a view of one, is copied,
    as the primitive's impl does."""
    fun = eqn.params["fun"]
    env = dict(zip(fun.invars + fun.constvars, args))
    fresh = set()
    lines = []
    for n, inner in enumerate(fun.eqns):
        ins = [env[v] if isinstance(v, Var) else native_rules.Arg(None, v) for v in inner.invars]
        names = [f"{outs[0]}__c{n}_{j}" for j in range(len(inner.outvars))]
        lines += native_rules.statements(inner, ins, names, scope)
        env.update((v, native_rules.Arg(name, v)) for v, name in zip(inner.outvars, names))
        if inner.prim.name not in VIEWS:
            fresh.update(inner.outvars)
    for v, name in zip(fun.outvars, outs):
        if not isinstance(v, Var):
            lines.append(f"{name} = {native_rules.Arg(None, v).code}")
            continue
        copy = v.shape and v not in fresh
        lines.append(f"{name} = {env[v].code}" + (".copy()" if copy else ""))
    return lines


def _reach(params, out_flags):
    fun, num_args = params["fun"], params["num_args"]
    return [any(out_flags)] * num_args + [False] * len(fun.constvars)


def _zero_cts(cts, rules, inputs):
    device = next((x.device for x in inputs if isinstance(x, Tensor)), "cpu")
    return [c if c is not None else zeros(shape, dtype, device)
            for c, (shape, dtype) in zip(cts, rules.out_avals)]


def _refuse_const_grads(inputs, num_args, rules):
    """The closed-over values (the inputs after num_args) of a call being differentiated get
    no cotangent from the rule: refused where one may need one."""
    for c in inputs[num_args:]:
        what = _differentiated(c, walking=True)
        if what is not None:
            raise TypeError(_CLOSURE.format(who="custom function", name=rules.name, what=what))


def _custom_vjp_vjp(cts, outs, *inputs, _saved=None, fun, rules, num_args):
    """bwd on fwd's residuals: those the node kept, or, where none were kept (inside a
    trace) or the walk is itself differentiated (grad of grad), fwd run again from the
    inputs, recorded, so that the result is differentiated through fwd and bwd. A walk of
    an enclosing level (STATE.custom_as_fwd; see tape/levels.py) differentiates fwd's
    operations instead, as JAX does beyond the call's own level."""
    _refuse_const_grads(inputs, num_args, rules)
    n = len(rules.out_avals)
    out_cts, res_cts = cts[:n], cts[n:]
    args = list(inputs[:num_args])
    result = [None] * len(inputs)
    if STATE.custom_as_fwd:
        _refuse_nested_in_rule(rules)
        result[:num_args] = _through_fwd(rules, args, out_cts, res_cts)
        return result
    if any(c is not None for c in out_cts):
        ct = pytree.unflatten(rules.out_tree, _zero_cts(out_cts, rules, inputs))
        # saved residuals the walk may use: "live" ones are this call's outputs (a derivative
        # of bwd reaches the inputs through them, below); others were computed detached
        with at_enclosing_levels():
            if _saved and (len(_saved) > 1 or not grad_enabled()):
                res = _saved[0]
            else:
                res = _fwd_pair(rules.fwd, rules.fwd(*rules.args(args)))[1]
            found = rules.bwd(*rules.nondiff_values(), res, ct)
        result[:num_args] = _flatten_bwd(rules, found, args)
    if any(c is not None for c in res_cts):
        through = _through_fwd(rules, args, [None] * n, res_cts)
        result[:num_args] = [a if b is None else b if a is None else a + b
                             for a, b in zip(result[:num_args], through)]
    return result


_NESTED_IN_RULE = (
    "{name}, a custom function, is called by the rule of another one inside a scan, loop or "
    "checkpoint body, and a derivative of the gradient reaches it. JAX differentiates "
    "such a call by its own rule at the enclosing level; scanlib cannot tell that level apart "
    "inside a loop body, and stops rather than give another number. Call {name} outside the "
    "loop body, or write it without a custom rule.")


def _refuse_nested_in_rule(rules):
    if STATE.custom_as_fwd == "graph" and rules.in_rule:
        raise NotImplementedError(_NESTED_IN_RULE.format(name=rules.name))


def _through_fwd(rules, args, out_cts, res_cts, fwd=None):
    """The cotangents of the inputs through fwd's own operations: of its output (out_cts, for
    a walk of an enclosing level) and of the residuals a call gave as outputs (res_cts, where
    a walk back is itself differentiated and reaches them). fwd runs again, recorded, from
    copies of the inputs that stay linked to them (a further derivative of the result reaches
    the inputs), and is walked back, as JAX differentiates fwd beyond the call's own level.
    A custom_vjp call inside fwd is differentiated by its own bwd here, as in JAX. `fwd`: in
    place of rules.fwd, a function of the same arguments giving (out, residuals) (a
    custom_jvp's rule at zero tangents)."""
    builder = current_builder()
    recording = grad_enabled() or builder is not None
    with enable_grad():
        starts = [walk_start(x, recording)
                  if isinstance(x, Tensor) and is_differentiable_dtype(x.dtype) else x
                  for x in args]
    for x in starts:
        if isinstance(x, Tensor) and x._node is None:
            x._scratch = True  # a leaf of this walk, not a parameter closed over
    # fwd runs at the level around the call's own (JAX runs fwd on the tracers of the trace
    # below): a custom_vjp call inside it is differentiated by its own rule there, and
    # through its fwd by the walks around that
    saved = STATE.custom_as_fwd, STATE.rule_level
    around = STATE.rule_level.parent if STATE.rule_level is not None else None
    STATE.custom_as_fwd, STATE.rule_level = False, around
    try:
        fwd = rules.fwd if fwd is None else fwd
        with enable_grad():
            out, res = _fwd_pair(fwd, fwd(*rules.args(starts)))
        held = [r for r in pytree.flatten(res)[0] if isinstance(r, Tensor)]
        roots, root_cts = [], []
        for r, c in zip(pytree.flatten(out)[0] + held, list(out_cts) + list(res_cts)):
            if c is not None and isinstance(r, Tensor) and r.requires_grad:
                roots.append(r)
                root_cts.append(c)
        wanted = [i for i, s in enumerate(starts) if isinstance(s, Tensor) and s.requires_grad]
        found = [None] * len(wanted)
        if roots:
            found = backward_pass(roots, root_cts, targets=[starts[i] for i in wanted],
                                  create_graph=recording)
    finally:
        STATE.custom_as_fwd, STATE.rule_level = saved
    through = [None] * len(args)
    for i, g in zip(wanted, found):
        through[i] = g
    return through


def _flatten_bwd(rules, found, args):
    """bwd's result as one cotangent per differentiable input (None: zero), checked against
    the arguments' structure, shapes and dtypes as JAX checks it."""
    primal = rules.diff_args(args)
    if isinstance(found, list) and len(found) == len(primal):
        found = tuple(found)
    if not isinstance(found, tuple) or len(found) != len(primal):
        got = (f"a tuple of length {len(found)}" if isinstance(found, tuple)
               else f"a {type(found).__name__}")
        raise TypeError(f"custom_vjp: the bwd rule {_name(rules.bwd)} must return a tuple with "
                        f"one cotangent per differentiable argument of {rules.name} "
                        f"({len(primal)}), got {got}. Write None for an argument with a zero "
                        "cotangent, and (g,) for a single one.")
    flat = []
    for k, (arg, g) in enumerate(zip(primal, found)):
        paths, leaves, tree = pytree.flatten_with_paths(arg, f"[{k}]")
        if g is None:
            flat += [None for x in leaves if type(x) not in _NUMBERS]
            continue
        try:
            gs = tree.flatten_up_to(g)
        except (ValueError, TypeError):
            raise TypeError(f"custom_vjp: the bwd rule {_name(rules.bwd)} returned output[{k}] "
                            f"with structure {pytree.structure_str(pytree.flatten(g)[1])}, but "
                            f"argument {k} of {rules.name} has structure "
                            f"{pytree.structure_str(tree)}; give it the argument's structure "
                            "(None for zeros)") from None
        for p, x, gx in zip(paths, leaves, gs):
            if type(x) in _NUMBERS:
                continue  # a Python number: no cotangent
            if gx is None or not is_differentiable_dtype(x.dtype):
                flat.append(None)
                continue
            gx = as_tensor(gx)
            if tuple(gx.shape) != tuple(x.shape) or np.dtype(gx.dtype) != np.dtype(x.dtype):
                raise ValueError(
                    f"custom_vjp: the bwd rule {_name(rules.bwd)} must give each argument a "
                    f"cotangent of its shape and dtype, but output{p} is "
                    f"{np.dtype(gx.dtype).name}{list(gx.shape)} for an argument of "
                    f"{np.dtype(x.dtype).name}{list(x.shape)}")
            flat.append(gx)
    return flat


def _custom_vjp_jvp(primals, tangents, **params):
    if params["rules"].exact:  # the transpose of its VJP is its JVP: forward_jvp takes that
        raise ForwardModeEncloses
    raise TypeError(FORWARD_MODE)


def _custom_jvp_vjp(cts, outs, *inputs, _saved=None, fun, rules, num_args):
    """The transpose of the user's JVP rule, which is linear in the tangents: the VJP of
    t -> jvp(x, t)[1] at t = 0, walked on the tape. Recorded when the enclosing walk is
    (then it depends on x through the rule, for higher orders)."""
    _refuse_const_grads(inputs, num_args, rules)
    if all(c is None for c in cts):
        return [None] * len(inputs)
    # The rule runs again for its linear map: what it prints was printed on the way forward.
    with _rule_prints("silent"):
        return _custom_jvp_transposed(cts, inputs, rules, num_args)


def _custom_jvp_transposed(cts, inputs, rules, num_args):
    args = list(inputs[:num_args])
    if STATE.custom_as_fwd:
        # an enclosing level: the rule's own operations for primal_out; a call in the linear
        # code of another's rule, transposed there: fun's, as JAX transposes it
        _refuse_nested_in_rule(rules)
        primal = (rules.fun if STATE.custom_as_fwd == "fun"
                  else _differentiated_primal(custom_jvp_call_p, rules))
        result = [None] * len(inputs)
        result[:num_args] = _through_fwd(rules, args, cts, [],
                                         fwd=lambda *a: (primal(*a), None))
        return result
    builder = current_builder()
    recording = grad_enabled()
    if builder is None and not recording:
        args = [Tensor(x._value) for x in args]
    wanted = [i for i, x in enumerate(args) if is_differentiable_dtype(x.dtype)]
    ts = [_start_tangent(x, builder) if i in wanted else _zeros_like(x)
          for i, x in enumerate(args)]
    with enable_grad(), at_enclosing_levels(), watching("custom_jvp", ts,
                                                          transpose=True) as linear_code:
        _, t_out = _jvp_call(rules, args, ts)
    roots, root_cts = [], []
    for t, c in zip(t_out, cts):
        if c is not None and isinstance(t, Tensor) and t.requires_grad:
            roots.append(t)
            root_cts.append(c)
    found = [None] * len(wanted)
    if roots:
        found = backward_pass(roots, root_cts, targets=[ts[i] for i in wanted],
                              create_graph=recording or builder is not None,
                              level=linear_code)
    result = [None] * len(inputs)
    for i, g in zip(wanted, found):
        result[i] = g
    return result


def _start_tangent(x, builder):
    """A zero tangent for x that requires grad (the walk's target): inside a trace a value
    of that graph."""
    z = _zeros_like(x)
    if builder is not None:
        z = builder.lift(z)
    return Tensor(z._value, True, _trace=z._trace, _var=z._var)


def _zeros_like(x):
    return zeros(tuple(x.shape), x.dtype, x.device)


def _jvp_call(rules, args, tangents):
    """(outs, tangents out) of the user's rule, flat, checked against fun's output."""
    primals, ts = rules.diff_args(args), rules.diff_args(tangents, tangents=True)
    found = rules.jvp(*rules.nondiff_values(), primals, ts)
    if not (isinstance(found, (tuple, list)) and len(found) == 2):
        raise TypeError(f"custom_jvp: the jvp rule {_name(rules.jvp)} must return a pair "
                        f"(primal_out, tangent_out), got {type(found).__name__}")
    out, t_out = found
    out_leaves, out_tree = pytree.flatten(out)
    t_leaves, t_tree = pytree.flatten(t_out)
    if out_tree != rules.out_tree or t_tree != rules.out_tree:
        raise TypeError(f"custom_jvp: the jvp rule {_name(rules.jvp)} must return primal_out "
                        f"and tangent_out with the structure of {rules.name}'s output, "
                        f"{pytree.structure_str(rules.out_tree)}, got "
                        f"{pytree.structure_str(out_tree)} and {pytree.structure_str(t_tree)}")
    outs, touts = [], []
    for k, (o, t, (shape, dtype)) in enumerate(zip(out_leaves, t_leaves, rules.out_avals)):
        o, t = as_tensor(o), as_tensor(t)
        for what, v in (("primal_out", o), ("tangent_out", t)):
            if tuple(v.shape) != tuple(shape) or np.dtype(v.dtype) != np.dtype(dtype):
                raise ValueError(
                    f"custom_jvp: the jvp rule {_name(rules.jvp)} gave {what} leaf {k} as "
                    f"{np.dtype(v.dtype).name}{list(v.shape)}, but {rules.name}'s output "
                    f"leaf {k} is {np.dtype(dtype).name}{list(shape)}; they must match")
        outs.append(o)
        touts.append(t)
    return outs, touts


def _custom_jvp_jvp(primals, tangents, *, fun, rules, num_args):
    """Forward mode: the user's rule, with zeros for tangents not given."""
    if any(t is not None for t in tangents[num_args:]):
        raise TypeError(_CLOSURE.format(who="custom_jvp", name=rules.name, what="a tangent"))
    args = list(primals[:num_args])
    ts = [t if t is not None else _zeros_like(x) for x, t in zip(args, tangents)]
    return _jvp_call(rules, args, ts)


def _custom_vmap(values, batched, B, *, fun, rules, num_args):
    """One custom call over the batch: its function, and fwd and bwd (or the jvp rule),
    vmapped, every differentiable input batched; the closed-over values stay unbatched. A
    call with a batched one, or one a derivative may reach, runs once per example instead,
    where the call's own checks see it."""
    if any(batched[num_args:]) or any(_differentiated(c) for c in values[num_args:]):
        return None
    args = [x if b else broadcast_batch(x, B) for x, b in zip(values[:num_args], batched)]
    call = _batched_call(fun, rules, num_args, len(values) - num_args)
    outs = call(*args, *values[num_args:])
    return outs, [True] * len(outs)


def _batched_call(fun, rules, n, k):
    """The custom function of an equation's flat inputs (n differentiable, then k closed-over
    values) on a batch (axis 0 of the first n), with the equation's rules vmapped. Kept on the
    rules themselves, so that a scan body batched twice holds the same rules (its cache
    compares them), and so that they, and the tensors they close over, go with the equation."""
    cache = rules.__dict__.get("_batched")
    if cache is None:
        cache = {}
        object.__setattr__(rules, "_batched", cache)  # frozen: not a field, never compared
    if (fun, n, k) not in cache:
        cache[fun, n, k] = _batched_rules(fun, rules, n, k)
    return cache[fun, n, k]


def _batched_rules(fun, rules, n, k):
    in_axes = (0,) * n + (None,) * k

    def fun_b(*xs):
        return vmap(lambda *a: replay(fun, a[:n], a[n:]), in_axes=in_axes)(*xs)

    fun_b.__name__ = f"{rules.name}_batched"
    if rules.jvp is not None:
        def jvp_b(primals, tangents):
            return vmap(lambda p, t: _jvp_call(rules, list(p[:n]), list(t[:n])),
                        in_axes=(in_axes, in_axes))(primals, tangents)

        jvp_b.__name__ = f"{_name(rules.jvp)}_batched"
        batched = custom_jvp(fun_b)
        batched.defjvp(jvp_b)
        batched._exact = rules.exact
        return batched

    def fwd_b(*xs):
        def one(*a):
            out, res = _fwd_pair(rules.fwd, rules.fwd(*rules.args(list(a[:n]))))
            return pytree.flatten(out)[0], (res, list(a[:n]))
        return vmap(one, in_axes=in_axes)(*xs)

    def bwd_b(res, g):
        def one(res, g):
            res, args = res
            found = rules.bwd(*rules.nondiff_values(), res, pytree.unflatten(rules.out_tree, g))
            return _flatten_bwd(rules, found, args)
        return tuple(vmap(one)(res, g)) + (None,) * k

    fwd_b.__name__, bwd_b.__name__ = f"{_name(rules.fwd)}_batched", f"{_name(rules.bwd)}_batched"
    batched = custom_vjp(fun_b)
    batched.defvjp(fwd_b, bwd_b)
    batched._exact = rules.exact
    return batched


custom_vjp_call_p = Primitive("custom_vjp_call", _call_impl, _custom_vjp_vjp,
                              multiple_results=True, reach=_reach, jvp=_custom_vjp_jvp,
                              vmap=_custom_vmap, bind_recorded=_custom_vjp_bind_recorded,
                              own_level="vjp", differentiated=_differentiated_call)
custom_jvp_call_p = Primitive("custom_jvp_call", _call_impl, _custom_jvp_vjp,
                              multiple_results=True, reach=_reach, jvp=_custom_jvp_jvp,
                              vmap=_custom_vmap, own_level="jvp",
                              differentiated=_differentiated_call)
native_rules.rule(custom_vjp_call_p, custom_jvp_call_p, scoped=True)(_numba_statements)
