"""Forward mode: `forward_jvp` runs f once with a tangent beside every value (JAX's JVP
trace). Each primitive's tangent is the transpose of its own VJP (linear in the cotangent, so
no rule per primitive is needed), or the product rule where that is cheaper (mul, matmul,
vdot); a scan's is one scan over primal and tangent carries, traced once per body. The
public jvp (transforms.py) uses it where its result is not differentiated again.

Imports the layers below scanlib/__init__ (autodiff, pytree, scan, ops, tape, backends).
"""

from __future__ import annotations

import contextlib

import numpy as np

from . import autodiff, backends, pytree
from .ops import elementwise as ew
from .ops import zeros
from .ops.linalg import matmul_p, vdot_p
from .ops.primitive import bind
from .scan.primitive import _mode, apply_scan, scan_p
from .tape import (Graph, GraphBuilder, Literal, Tensor, Var, backward_pass, current_builder,
                   enable_grad, is_differentiable_dtype, tracing)
from .tape import state as _state
from .tape.backward import fit_cotangent
from .tape.graph import used_vars

def leaf_info(x):
    """(shape, dtype, device) of a pytree leaf, or None when it is not array-like."""
    if isinstance(x, Tensor):
        return tuple(x.shape), np.dtype(x.dtype), x.device
    if backends.is_array(x):
        return tuple(x.shape), np.dtype(x.dtype), backends.device_of(x)
    if isinstance(x, (bool, int, float, complex)):
        return (), np.asarray(x).dtype, "cpu"
    return None


# --- forward mode: one primitive's tangents ---------------------------------------------------
def _dummy_cotangent(o):
    """A zero cotangent for o that requires grad: recording a VJP at it records the VJP as a
    linear function of it. Inside a trace it is a value of that graph (dead once the
    transposed walk has run, so the loop never computes it)."""
    z = zeros(tuple(o.shape), o.dtype, o.device)
    builder = current_builder()
    if builder is not None:
        z = builder.lift(z)
    return Tensor(z._value, True, _trace=z._trace, _var=z._var)


def _tangents_of(prim, ins, outs, tangents, params):
    """The tangents of prim's outputs `outs` at inputs `ins` for input tangents (None: zero),
    one per output (None: zero): the transpose of prim's VJP, which is linear in its
    cotangent, walked back from the input cotangents with the tangents as theirs."""
    if prim in _MULTILINEAR:
        return [_product_rule(prim, ins, tangents, params)]
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


# Primitives linear in each input separately (over the reals: vdot conjugates its first):
# the product rule gives their tangents at the cost of the op itself, where transposing the
# VJP would also compute full-size products at the dummy cotangent (vdot's loss on ys).
_MULTILINEAR = frozenset({ew.mul, matmul_p, vdot_p})


def _product_rule(prim, ins, tangents, params):
    total = None
    for i, t in enumerate(tangents):
        if t is not None:
            term = bind(prim, *ins[:i], t, *ins[i + 1:], **params)
            total = term if total is None else ew.add(total, term)
    return total


# --- forward mode: scan -----------------------------------------------------------------------
def _scan_jvp(ins, tangents, *, body, length, reverse, num_carry, num_xs, interpret=False,
              sum_carries=(), compiler="numpy", _lin=None):
    """(outs, tangents of outs) of a scan equation: one scan whose carries are the primal
    carries and the tangents of those that have one, and whose ys likewise (JAX's JVP of
    scan). The primal is computed again in it, so it replaces the forward scan."""
    nc, nx = num_carry, num_xs
    given = [t is not None for t in tangents]
    device = next((a.device for a in ins if isinstance(a, Tensor)), body.device)
    jb = _jvp_body(body, nc, given[:nc], given[nc:nc + nx], given[nc + nx:], device)
    init, xs, consts = list(ins[:nc]), list(ins[nc:nc + nx]), list(ins[nc + nx:])
    d_init = [tangents[i] if tangents[i] is not None else _zeros_like(init[i])
              for i, m in enumerate(jb.carry_mask) if m]
    d_xs = [t for t in tangents[nc:nc + nx] if t is not None]
    d_consts = [t for t in tangents[nc + nx:] if t is not None]
    res = apply_scan(jb.graph, init + d_init, xs + d_xs, consts + d_consts + jb.extra_consts,
                     length, reverse, interpret, compiler=compiler)
    n_dc, ny = len(d_init), len(body.outvars) - nc
    d_carry, d_ys = iter(res[nc:nc + n_dc]), iter(res[nc + n_dc + ny:])
    outs = res[:nc] + res[nc + n_dc:nc + n_dc + ny]
    t_out = [next(d_carry) if m else None for m in jb.carry_mask]
    t_out += [next(d_ys) if m else None for m in jb.y_mask]
    return outs, t_out


def _zeros_like(x):
    return zeros(tuple(x.shape), x.dtype, x.device)


class _JvpBody:
    """A scan body's JVP graph: inputs carries, carry tangents (where carry_mask), xs, xs
    tangents; constvars the body's, the tangents of those that have one, then extra_consts;
    outputs carries, carry tangents, ys, y tangents (where y_mask)."""

    def __init__(self, graph, carry_mask, y_mask, extra_consts):
        self.graph, self.carry_mask, self.y_mask = graph, carry_mask, y_mask
        self.extra_consts = extra_consts


def _jvp_body(body, nc, c_given, x_given, k_given, device):
    """The JVP of `body` for tangents of the given carries, xs and constants; cached on the
    body graph (a loop traces and compiles it once) per device (its constants live there)."""
    key = (nc, tuple(c_given), tuple(x_given), tuple(k_given), device)
    cache = body.__dict__.setdefault("_jvp_bodies", {})
    if key not in cache:
        cache[key] = _trace_jvp_body(body, nc, c_given, x_given, k_given, device)
    return cache[key]


def _active(body, seeds):
    """The values of body that depend, through differentiable equations, on seeds."""
    active = set(seeds)
    for eqn in body.eqns:
        if eqn.prim.vjp is not None and any(isinstance(v, Var) and v in active
                                            for v in eqn.invars):
            active.update(v for v in eqn.outvars if is_differentiable_dtype(v.dtype))
    return active


def _tangent_carries(body, nc, c_given, x_given, k_given):
    """(which carries have a tangent in some step, the active values): those given one, and,
    to a fixpoint, those whose next value depends on an active value."""
    carry_in, carry_out = body.invars[:nc], body.outvars[:nc]
    floats = [is_differentiable_dtype(v.dtype) for v in carry_in]
    has = [g and f for g, f in zip(c_given, floats)]
    fixed = [v for v, g in zip(body.invars[nc:], x_given) if g]
    fixed += [v for v, g in zip(body.constvars, k_given) if g]
    for _ in range(nc + 1):
        active = _active(body, fixed + [v for v, h in zip(carry_in, has) if h])
        new = [h or (f and isinstance(v, Var) and v in active)
               for h, f, v in zip(has, floats, carry_out)]
        if new == has:
            return has, active
        has = new
    raise AssertionError("carry tangents: fixpoint not reached")


def _trace_jvp_body(body, nc, c_given, x_given, k_given, device):
    carry_mask, active = _tangent_carries(body, nc, c_given, x_given, k_given)
    carry_in, x_in = body.invars[:nc], body.invars[nc:]
    carry_out, y_out = body.outvars[:nc], body.outvars[nc:]
    y_mask = [isinstance(v, Var) and v in active for v in y_out]
    b = GraphBuilder(device)
    with tracing(b):
        c = [b.new_input(v.shape, v.dtype, v.hint) for v in carry_in]
        dc = [b.new_input(v.shape, v.dtype) for v, m in zip(carry_in, carry_mask) if m]
        x = [b.new_input(v.shape, v.dtype, v.hint) for v in x_in]
        dx = [b.new_input(v.shape, v.dtype) for v, g in zip(x_in, x_given) if g]
        k = [b.new_constvar(v.shape, v.dtype, None if value is None else value._value, v.hint)
             for v, value in zip(body.constvars, body.consts)]
        dk = [b.new_constvar(v.shape, v.dtype) for v, g in zip(body.constvars, k_given) if g]
        env = dict(zip(carry_in + x_in + body.constvars, c + x + k))
        tan = dict(zip([v for v, m in zip(carry_in, carry_mask) if m], dc))
        tan.update(zip([v for v, g in zip(x_in, x_given) if g], dx))
        tan.update(zip([v for v, g in zip(body.constvars, k_given) if g], dk))
        _eval_with_tangents(body.eqns, env, tan)

        def tangent(v):
            t = tan.get(v) if isinstance(v, Var) else None
            return t if t is not None else zeros(v.shape if isinstance(v, Var) else (),
                                                  v.dtype if isinstance(v, Var)
                                                  else np.asarray(v.value).dtype, device)

        outs = [_read(env, v) for v in carry_out]
        outs += [tangent(v) for v, m in zip(carry_out, carry_mask) if m]
        outs += [_read(env, v) for v in y_out]
        outs += [tangent(v) for v, m in zip(y_out, y_mask) if m]
        graph = b.build(outs, name="jvp_body")
    eqns, live = used_vars(graph.eqns, graph.outvars)  # the dummy cotangents' work is dead
    n_k = len(k) + len(dk)
    extra = [i for i in range(n_k, len(graph.constvars)) if graph.constvars[i] in live]
    kept = list(range(n_k)) + extra
    jvp = Graph(graph.invars, [graph.constvars[i] for i in kept],
                [graph.consts[i] for i in kept], eqns, graph.outvars, "jvp_body", device)
    return _JvpBody(jvp, carry_mask, y_mask, [graph.consts[i] for i in extra])


def _read(env, v):
    return v.value if isinstance(v, Literal) else env[v]


def _eval_with_tangents(eqns, env, tan):
    """Run eqns on the values in env (Var -> Tensor), and their tangents beside them in tan
    (Var -> Tensor; a Var without one has tangent zero)."""
    for eqn in eqns:
        ins = [_read(env, v) for v in eqn.invars]
        t_in = [tan.get(v) if isinstance(v, Var) else None for v in eqn.invars]
        outs, t_out = _apply_with_tangents(eqn.prim, ins, t_in, eqn.params)
        env.update(zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]))
        tan.update((v, t) for v, t in zip(eqn.outvars, t_out) if t is not None)


def _apply_with_tangents(prim, ins, t_in, params):
    """(prim's outputs at ins, their tangents for input tangents t_in (None: zero))."""
    if prim.vjp is None or all(t is None for t in t_in):
        return bind(prim, *ins, **params), ()
    if prim is scan_p:
        return _scan_jvp(ins, t_in, **params)
    outs = bind(prim, *ins, **params)
    return outs, _tangents_of(prim, ins, outs, t_in, params)


# --- forward mode: f on values that carry tangents ----------------------------------------------
class _ForwardTrace(GraphBuilder):
    """Runs f eagerly, on real values, with each value's tangent kept beside it: every
    equation f executes is differentiated as it runs (JAX's JVP trace). Its tracers hold real
    values; their tangents are plain Tensors, computed with the trace paused. Builds no graph.
    Used only where jvp's result is not differentiated again (it records nothing)."""

    abstract = False  # its tracers hold real values

    def __init__(self, device):
        super().__init__(device)
        self.tangents = {}  # Var -> tangent (a plain Tensor)

    def new_value(self, value, tangent):
        var = Var(np.shape(value), value.dtype)
        self.invars.append(var)
        self.tangents[var] = tangent
        return self._tracer(var, value)

    def _wrap(self, values, tangents):
        tracers = []
        for v, t in zip(values, tangents):
            tracer = self._tracer(Var(np.shape(v), v.dtype), v)
            if t is not None:
                self.tangents[tracer._var] = t
            tracers.append(tracer)
        return tracers

    @contextlib.contextmanager
    def _paused(self):
        stack = _state.STATE.builders
        stack.pop()
        try:
            yield
        finally:
            stack.append(self)

    def _plain(self, args):
        values = [Tensor(a._value) if isinstance(a, Tensor) else a for a in args]
        tangents = [self.tangents.get(a._var) if isinstance(a, Tensor) else None for a in args]
        return values, tangents

    def add_eqn(self, prim, args, params, out_values):
        outs = list(out_values) if prim.multiple_results else [out_values]
        ins, t_in = self._plain(args)
        t_out = [None] * len(outs)
        if prim.vjp is not None and any(t is not None for t in t_in):
            with self._paused():
                plain_outs = [Tensor(v) for v in outs]
                if prim is scan_p:
                    _, t_out = _scan_jvp(ins, t_in, **params)
                else:
                    t_out = _tangents_of(prim, ins, plain_outs if prim.multiple_results
                                         else plain_outs[0], t_in, params)
        tracers = self._wrap(outs, t_out)
        return tracers if prim.multiple_results else tracers[0]

    def bind_scan(self, body, init, xs, consts, length, reverse, interpret, sum_carries,
                  compiler="numpy"):
        """scan.primitive.apply_scan's hook: a scan with tangents runs as its JVP scan only
        (the primal comes out of it), not its forward and then the JVP scan."""
        args = [self.lift(a) if isinstance(a, Tensor) or backends.is_array(a) else a
                for a in list(init) + list(xs) + list(consts)]
        ins, t_in = self._plain(args)
        if all(t is None for t in t_in):
            return bind(scan_p, *args, body=body, length=length, reverse=reverse,
                        num_carry=len(init), num_xs=len(xs),
                        **_mode(interpret, sum_carries, compiler))
        with self._paused():
            outs, t_out = _scan_jvp(ins, t_in, body=body, length=length, reverse=reverse,
                                    num_carry=len(init), num_xs=len(xs), interpret=interpret,
                                    compiler=compiler)
        return self._wrap([o._value for o in outs], t_out)


def forward_jvp(f, primals, tangents, has_aux):
    """(out, tangents_out, aux) by forward mode, or None where that would be wrong: f read a
    closed-over tensor that requires grad (the result must then be recorded), or read a
    value as a Python number, which a traced value refuses."""
    p_leaves, p_tree = pytree.flatten(primals)
    t_leaves = pytree.flatten(tangents)[0]
    device = next((leaf_info(x)[2] for x in p_leaves), "cpu")
    trace = _ForwardTrace(device)
    try:
        # differentiating: code that asks whether it runs under a derivative (optim's updates,
        # which otherwise run off the tape as a training loop's) must see this one too
        with tracing(trace), _state.differentiating():
            inputs = [trace.new_value(_value_of(x, t), t) for x, t in zip(p_leaves, t_leaves)]
            found = f(*pytree.unflatten(p_tree, inputs))
    except TypeError as e:
        if "needs a concrete value" in str(e):
            return None
        raise
    if any(isinstance(c, Tensor) and c.requires_grad for c in trace.consts):
        return None
    out, aux = autodiff._split_aux(found, "jvp") if has_aux else (found, None)
    out_leaves, out_tree = pytree.flatten(out)
    values = [_concrete(o, trace) for o in out_leaves]
    tans = [_tangent_out(o, v, trace) for o, v in zip(out_leaves, values)]
    aux_leaves, aux_tree = pytree.flatten(aux)
    aux = pytree.unflatten(aux_tree, [_concrete(a, trace) for a in aux_leaves])
    return pytree.unflatten(out_tree, values), pytree.unflatten(out_tree, tans), aux


def _value_of(x, t):
    if isinstance(x, Tensor):
        return x._value
    return backends.asarray_on(x, t.device, dtype=t.dtype) if not backends.is_array(x) else x


def _concrete(o, trace):
    """An output leaf as the caller sees it: a traced value becomes a plain Tensor."""
    if isinstance(o, Tensor) and o._trace is trace:
        return Tensor(o._value)
    return o


def _tangent_out(o, value, trace):
    t = trace.tangents.get(o._var) if isinstance(o, Tensor) and o._trace is trace else None
    if t is not None:
        return t
    return zeros(*leaf_info(value))
