"""Forward mode: `forward_jvp` runs f once with a tangent beside every value (JAX's JVP
trace), and `eval_with_tangents` runs a graph's equations the same way. Each primitive's
tangents come from its rule, `jvp_of`: the primitive's own `jvp` (scan's runs one scan over
primal and tangent carries), else one built from what it declares (its `tangent` rule, the
fact that it is `linear` or `multilinear`), else the transpose of its VJP, which is linear in
its cotangent, so a primitive that declares nothing still has a tangent. The public jvp
(transforms.py) uses forward_jvp where its result is not differentiated again.

Imports backends, tape, ops, pytree and autodiff.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import autodiff, backends, pytree
from ..ops import elementwise as ew
from ..ops import zeros
from ..ops.primitive import bind
from ..ops.structural import broadcast_to_p
from ..tape import (GraphBuilder, Literal, Tensor, Var, backward_pass, current_builder,
                    enable_grad, is_differentiable_dtype, tracing)
from ..tape import state as _state
from ..tape.backward import fit_cotangent
from ..tape.levels import ForwardModeEncloses, holds, level_of


def leaf_info(x):
    """(shape, dtype, device) of a pytree leaf, or None when it is not array-like."""
    if isinstance(x, Tensor):
        return tuple(x.shape), np.dtype(x.dtype), x.device
    if backends.is_array(x):
        return tuple(x.shape), np.dtype(x.dtype), backends.device_of(x)
    if isinstance(x, (bool, int, float, complex)):
        return (), np.asarray(x).dtype, "cpu"
    return None


def _dummy_cotangent(o):
    """A zero cotangent for o that requires grad: recording a VJP at it records the VJP as a
    linear function of it. Inside a trace it is a value of that graph (dead once the
    transposed walk has run, so the loop never computes it)."""
    z = zeros(tuple(o.shape), o.dtype, o.device)
    builder = current_builder()
    if builder is not None:
        z = builder.lift(z)
    return Tensor(z._value, True, _trace=z._trace, _var=z._var)


def transposed_vjp(prim, ins, outs, tangents, params):
    """The tangents of prim's outputs `outs` at inputs `ins` for input tangents (None: zero),
    one per output (None: zero): the transpose of prim's VJP, which is linear in its
    cotangent, walked back from the input cotangents with the tangents as theirs."""
    outs = list(outs) if prim.multiple_results else [outs]
    gs = [_dummy_cotangent(o) if is_differentiable_dtype(o.dtype) else None for o in outs]
    with enable_grad():
        in_cts = prim.cotangents(gs, outs, ins, params)
    roots, cts = [], []
    for x, c, t in zip(ins, in_cts, tangents):
        if t is not None and isinstance(c, Tensor) and c.requires_grad:
            roots.append(fit_cotangent(c, x))
            cts.append(t)
    targets = [g for g in gs if g is not None]
    if not roots or not targets:
        return [None] * len(outs)
    found = iter(backward_pass(roots, cts, targets=targets,
                               create_graph=current_builder() is not None))
    return [next(found) if g is not None else None for g in gs]


def product_rule(prim, ins, tangents, params):
    """The tangent of a primitive linear in each input separately (mul, matmul, vdot: over the
    reals, vdot conjugates its first): the sum of prim with one tangent in place of its
    input, at the cost of the op itself (transposing the VJP would also compute full-size
    products at the dummy cotangent)."""
    total = None
    for i, t in enumerate(tangents):
        if t is not None:
            term = bind(prim, *ins[:i], t, *ins[i + 1:], **params)
            total = term if total is None else ew.add(total, term)
    return total


def linear_rule(prim, ins, tangents, params):
    """The tangents of a primitive linear in the inputs `prim.linear` names (True: all): prim
    applied to their tangents (zeros where None: a Python 0 for an elementwise primitive,
    which broadcasts), its other inputs (index arrays, a mask) as they are."""
    args = list(ins)
    for i in range(len(ins)) if prim.linear is True else prim.linear:
        if tangents[i] is not None:
            args[i] = tangents[i]
        elif prim.elementwise:
            args[i] = 0.0
        else:
            args[i] = _zero_like(ins[i])
    found = bind(prim, *args, **params)
    return found if prim.multiple_results else [found]


def _zero_like(x):
    if isinstance(x, Tensor):
        return zeros(tuple(x.shape), x.dtype, x.device)
    if backends.is_array(x):
        return zeros(tuple(x.shape), x.dtype, backends.device_of(x))
    return type(x)(0)  # a Python number (a scatter's fill value)


def fit_tangent(t, out):
    """t as the tangent of out: None where out has no tangent (an integer result), else
    broadcast to out's shape and cast to its dtype (a rule may return a tangent of one
    input's shape, `add` with one tangent, or a real tangent of a complex result)."""
    if t is None or not is_differentiable_dtype(out.dtype):
        return None
    if tuple(t.shape) != tuple(out.shape):
        t = broadcast_to_p(t, shape=tuple(out.shape))
    if t.dtype != out.dtype:
        t = ew.real(t) if t.dtype.kind == "c" and np.dtype(out.dtype).kind != "c" else t
        t = ew.astype(t, dtype=np.dtype(out.dtype)) if t.dtype != out.dtype else t
    return t


def jvp_of(prim, ins, tangents, params):
    """(prim's outputs at ins as bind returns them, one tangent per output (None: zero)) for
    input tangents (None: zero), by prim's rule."""
    if (prim.vjp is None and prim.jvp is None) or all(t is None for t in tangents):
        return bind(prim, *ins, **params), ()
    if prim.jvp is not None:
        return prim.jvp(list(ins), list(tangents), **params)
    outs = bind(prim, *ins, **params)
    listed = outs if prim.multiple_results else [outs]
    if not any(is_differentiable_dtype(o.dtype) for o in listed):
        return outs, [None] * len(listed)  # an integer or bool result has no tangent
    if prim.tangent is not None:
        found = prim.tangent(list(tangents), outs, *ins, **params)
        found = found if prim.multiple_results else [found]
    elif prim.linear:
        found = linear_rule(prim, ins, tangents, params)
    elif prim.multilinear:
        found = [product_rule(prim, ins, tangents, params)]
    else:
        return outs, transposed_vjp(prim, ins, outs, tangents, params)
    return outs, [fit_tangent(t, o) for t, o in zip(found, listed)]


# --- forward mode: a graph's equations ---------------------------------------------------------
def _read(env, v):
    return v.value if isinstance(v, Literal) else env[v]


def equation_jvp(prim, ins, t_in, params):
    """jvp_of for an equation whose inputs with tangents carry a derivative: a custom call
    computes its rule's primal output (a loop's, in its body: the `differentiated` rule), and
    a loop's results its tangents do not reach get none (zero, as JAX's symbolic zeros: its
    `depends` rule). Returns (outs, a list of tangents, one per output)."""
    flags = [t is not None for t in t_in]
    if prim.differentiated is not None and any(flags):
        params = prim.differentiated(params, flags) or params
    outs, t_out = jvp_of(prim, ins, t_in, params)
    t_out = list(t_out) or [None] * (len(outs) if prim.multiple_results else 1)
    if prim.depends is not None:
        t_out = [t if f else None
                 for t, f in zip(t_out, prim.depends(params, flags), strict=True)]
    return outs, t_out


def eval_with_tangents(eqns, env, tan):
    """Run eqns on the values in env (Var -> Tensor), and their tangents beside them in tan
    (Var -> Tensor; a Var without one has tangent zero)."""
    for eqn in eqns:
        ins = [_read(env, v) for v in eqn.invars]
        t_in = [tan.get(v) if isinstance(v, Var) else None for v in eqn.invars]
        outs, t_out = equation_jvp(eqn.prim, ins, t_in, eqn.params)
        env.update(zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]))
        tan.update((v, t) for v, t in zip(eqn.outvars, t_out) if t is not None)


# --- forward mode: f on values that carry tangents ----------------------------------------------
class _ForwardTrace(GraphBuilder):
    """Runs f with each value's tangent kept beside it: every equation f executes is
    differentiated as it runs (JAX's JVP trace), by its rule, with this trace paused. Eagerly
    its tracers hold real values and their tangents are plain Tensors; inside another trace
    (jit's, vmap's, a loop body's) each stands for a value of that trace, which the rules'
    equations are recorded in, and its tangent is one too. Builds no graph of its own. Used
    only where jvp's result is not differentiated again (it records no backward)."""

    abstract = False  # its tracers hold real values (eagerly; an enclosing trace's inside one)

    def __init__(self, device, outer=None):
        super().__init__(device)
        self.tangents = {}  # Var -> tangent (a plain Tensor, or a value of `outer`)
        # The trace this one runs inside (jit's, a loop body's), or None: eagerly. Inside
        # one, each value is that trace's value (`primals`), and so is each tangent: the
        # rules' equations are recorded there.
        self.outer = outer
        self.primals = {}  # Var -> the enclosing trace's value (inside one only)
        if outer is not None:
            self.abstract = outer.abstract

    def new_value(self, value, tangent, weak=False):
        """The tracer of a primal (an array, or inside another trace its value), weakly typed
        where the primal was (a Python number, a weak tensor), as JAX's."""
        var = Var(np.shape(value), value.dtype)
        self.invars.append(var)
        self.tangents[var] = tangent
        if isinstance(value, Tensor):  # a value of the enclosing trace
            self.primals[var] = value
            value = value._value
        tracer = self._tracer(var, value)
        tracer._weak = weak
        return tracer

    def _wrap(self, outs, tangents):
        tracers = []
        for o, t in zip(outs, tangents):
            v = o._value
            tracer = self._tracer(Var(np.shape(v), v.dtype), v)
            tracer._weak = o._weak  # a weakly typed result stays weak, as f computes it
            if self.outer is not None:
                self.primals[tracer._var] = o
            if t is not None:
                self.tangents[tracer._var] = t
            tracers.append(tracer)
        return tracers

    def outer_value(self, a):
        """a (this trace's value, or anything else bind passes) as the rules see it: a plain
        Tensor eagerly; inside another trace, that trace's value."""
        if not (isinstance(a, Tensor) and a._trace is self):
            return a
        if self.outer is None:
            return Tensor(a._value)
        found = self.primals.get(a._var)
        if found is None:  # a constant lifted into this trace: the value it stands for
            found = self.consts[self.constvars.index(a._var)]
            self.primals[a._var] = found
        return found

    @contextlib.contextmanager
    def _paused(self):
        stack = _state.STATE.builders
        stack.pop()
        try:
            yield
        finally:
            stack.append(self)

    def _plain(self, args):
        values = [self.outer_value(a) for a in args]
        tangents = [self.tangents.get(a._var) if isinstance(a, Tensor) else None for a in args]
        return values, tangents

    def process_primitive(self, prim, args, params):
        """bind's hook: prim's outputs and their tangents by its rule, computed with the
        trace paused (a scan with tangents runs as its JVP scan alone)."""
        if prim.own_level is not None and holds(prim, params) and level_of(args) is not None:
            raise ForwardModeEncloses  # a custom rule inside a grad of its own (tape.levels)
        ins, t_in = self._plain(args)
        with self._paused():
            outs, t_out = equation_jvp(prim, ins, t_in, params)
        listed = outs if prim.multiple_results else [outs]
        values = [o._value for o in listed]
        tracers = self._wrap(listed, t_out)
        return (values, tracers) if prim.multiple_results else (values[0], tracers[0])


def forward_jvp(f, primals, tangents, has_aux):
    """(out, tangents_out, aux) by forward mode, or None where that would be wrong: f read a
    closed-over tensor that requires grad (the result must then be recorded), read a value as
    a Python number, which a traced value refuses, or differentiates a custom call inside a
    grad of its own (tape.levels.ForwardModeEncloses)."""
    p_leaves, p_tree = pytree.flatten(primals)
    t_leaves = pytree.flatten(tangents)[0]
    device = next((leaf_info(x)[2] for x in p_leaves), "cpu")
    trace = _ForwardTrace(device, current_builder())
    recorded = len(trace.outer.eqns) if trace.outer is not None else 0
    try:
        # differentiating: code that asks whether it runs under a derivative (optim's updates,
        # which otherwise run off the tape as a training loop's) must see this one too
        with tracing(trace), _state.differentiating():
            inputs = [trace.new_value(_value_of(x, t, trace.outer), t, _is_weak(x))
                      for x, t in zip(p_leaves, t_leaves)]
            found = f(*pytree.unflatten(p_tree, inputs))
    except TypeError as e:
        if "needs a concrete value" in str(e):
            return _abandoned(trace, recorded)
        raise
    except ForwardModeEncloses:
        return _abandoned(trace, recorded)
    if any(isinstance(c, Tensor) and c.requires_grad for c in trace.consts):
        return _abandoned(trace, recorded)
    out, aux = autodiff.split_aux(found, "jvp") if has_aux else (found, None)
    out_leaves, out_tree = pytree.flatten(out)
    values = [_concrete(o, trace) for o in out_leaves]
    tans = [_tangent_out(o, v, trace) for o, v in zip(out_leaves, values)]
    aux_leaves, aux_tree = pytree.flatten(aux)
    aux = pytree.unflatten(aux_tree, [_concrete(a, trace) for a in aux_leaves])
    return pytree.unflatten(out_tree, values), pytree.unflatten(out_tree, tans), aux


def _is_weak(x):
    return x._weak if isinstance(x, Tensor) else isinstance(x, (bool, int, float, complex))


def _abandoned(trace, recorded):
    """None, for forward mode that does not apply after all: inside another trace, the
    equations its rules recorded there are taken back, so that f's effects (a print) are
    not run once for them and again by the double VJP that computes the result instead."""
    if trace.outer is not None:
        del trace.outer.eqns[recorded:]
    return None


def _value_of(x, t, outer):
    """A primal leaf as the trace's input: its array eagerly; inside another trace, a value
    of that trace."""
    if isinstance(x, Tensor):
        return x if outer is not None else x._value
    x = backends.asarray_on(x, t.device, dtype=t.dtype) if not backends.is_array(x) else x
    return outer.lift(x) if outer is not None else x


def _concrete(o, trace):
    """An output leaf as the caller sees it: a traced value becomes a plain Tensor (inside
    another trace, that trace's value)."""
    return trace.outer_value(o)


def _tangent_out(o, value, trace):
    t = trace.tangents.get(o._var) if isinstance(o, Tensor) and o._trace is trace else None
    if t is not None:
        return t
    info = leaf_info(value)  # None: not an array (a str); the caller's check says so
    return zeros(*info) if info is not None else None
