"""Forward mode and Jacobians, with JAX's signatures: jvp, linearize, jacfwd, jacrev, hessian.

jvp runs f once with a tangent beside every value (forward mode): each primitive's tangent is
the transpose of its VJP (linear in the cotangent), and a scan's is one scan over primal and
tangent carries. Where jvp's result may itself be differentiated, and for linearize and
jacfwd (one linearization, many tangents), it is the transpose of f's whole VJP ("double VJP").
Imports the layers below scanlib/__init__ (autodiff, pytree, scan, ops, tape, backends).
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np

from . import autodiff, backends, pytree
from .ops import elementwise as ew
from .ops import reshape, stack, zeros
from .ops.linalg import matmul_p, vdot_p
from .ops.primitive import bind
from .scan.primitive import _mode, apply_scan, scan_p
from .tape import (Graph, GraphBuilder, Literal, Tensor, Var, backward_pass, current_builder,
                   enable_grad, is_differentiable_dtype, tracing)
from .tape import state as _state
from .tape.backward import fit_cotangent
from .tape.graph import used_vars

__all__ = ["jvp", "linearize", "jacfwd", "jacrev", "hessian"]


# --- leaves: shape, dtype, device, checks -----------------------------------------------------
def _leaf_info(x):
    """(shape, dtype, device) of a pytree leaf, or None when it is not array-like."""
    if isinstance(x, Tensor):
        return tuple(x.shape), np.dtype(x.dtype), x.device
    if backends.is_array(x):
        return tuple(x.shape), np.dtype(x.dtype), backends.device_of(x)
    if isinstance(x, (bool, int, float, complex)):
        return (), np.asarray(x).dtype, "cpu"
    return None


def _describe(info):
    shape, dtype, _ = info
    return f"{dtype}{list(shape)}"


def _check_float(who, paths, leaves, what, allow_complex=True):
    """Forward mode differentiates float (or complex) leaves only: say which one is not."""
    kinds = "fc" if allow_complex else "f"
    for path, x in zip(paths, leaves):
        info = _leaf_info(x)
        if info is None:
            raise TypeError(f"{who}: {path} is a {type(x).__name__}; {what} leaves must be "
                            "Tensors, arrays or Python floats.")
        if info[1].kind not in kinds:
            hint = ("pass a float array (x.astype('float64')), or close over it (or choose "
                    "other argnums) if it is not meant to be differentiated"
                    if what == "input" else
                    "return it through has_aux=True, or cast it with .astype('float64')")
            if info[1].kind == "c":
                raise TypeError(f"{who}: {path} is complex ({info[1]}); {who} supports real "
                                "inputs and outputs only (use scanlib.jvp for complex ones).")
            raise TypeError(f"{who}: {path} has dtype {info[1]}, which has no tangent space "
                            f"(JAX would use float0 tangents, scanlib refuses); {hint}.")


def _check_tangents(who, primals, tangents):
    """tangents as Tensors, after checking that they match primals leaf by leaf."""
    if not isinstance(tangents, (tuple, list)):
        raise TypeError(f"{who}: tangents must be a tuple with one entry per primal (as "
                        f"jax.jvp), got {type(tangents).__name__}")
    p_paths, p_leaves, p_tree = pytree.flatten_with_paths(tuple(primals), "primals")
    t_paths, t_leaves, t_tree = pytree.flatten_with_paths(tuple(tangents), "tangents")
    if p_tree != t_tree:
        raise TypeError(f"{who}: tangents must have the structure of primals, but primals is "
                        f"{pytree.structure_str(p_tree)} and tangents is "
                        f"{pytree.structure_str(t_tree)}")
    out = []
    for t_path, p, t in zip(t_paths, p_leaves, t_leaves):
        p_info, t_info = _leaf_info(p), _leaf_info(t)
        if t_info is None:
            raise TypeError(f"{who}: {t_path} is a {type(t).__name__}; tangents must be "
                            "Tensors, arrays or Python floats")
        weak = isinstance(t, (int, float)) and not isinstance(t, bool) and p_info[0] == ()
        if t_info[0] != p_info[0] or (t_info[1] != p_info[1] and not weak):
            raise TypeError(f"{who}: {t_path} is {_describe(t_info)} but its primal is "
                            f"{_describe(p_info)}; a tangent must have its primal's shape and "
                            "dtype (cast it with .astype or reshape it).")
        if isinstance(t, Tensor):
            out.append(t)
        else:
            out.append(Tensor(backends.asarray_on(t, p_info[2], dtype=p_info[1])))
    return pytree.unflatten(t_tree, out)


def _detach_tree(tree):
    leaves, treedef = pytree.flatten(tree)
    return pytree.unflatten(treedef, [x.detach() if isinstance(x, Tensor) else x
                                      for x in leaves])


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
        if prim.multiple_results:
            in_cts = prim.vjp(gs, outs, *ins, _saved=None, **params)
        else:
            in_cts = prim.vjp(gs[0], outs[0], *ins, **params)
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
              sum_carries=(), _lin=None):
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
                     length, reverse, interpret)
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

    def bind_scan(self, body, init, xs, consts, length, reverse, interpret, sum_carries):
        """scan.primitive.apply_scan's hook: a scan with tangents runs as its JVP scan only
        (the primal comes out of it), not its forward and then the JVP scan."""
        args = [self.lift(a) if isinstance(a, Tensor) or backends.is_array(a) else a
                for a in list(init) + list(xs) + list(consts)]
        ins, t_in = self._plain(args)
        if all(t is None for t in t_in):
            return bind(scan_p, *args, body=body, length=length, reverse=reverse,
                        num_carry=len(init), num_xs=len(xs), **_mode(interpret, sum_carries))
        with self._paused():
            outs, t_out = _scan_jvp(ins, t_in, body=body, length=length, reverse=reverse,
                                    num_carry=len(init), num_xs=len(xs), interpret=interpret)
        return self._wrap([o._value for o in outs], t_out)


def _forward_jvp(f, primals, tangents, has_aux):
    """(out, tangents_out, aux) by forward mode, or None where that would be wrong: f read a
    closed-over tensor that requires grad (the result must then be recorded), or read a
    value as a Python number, which a traced value refuses."""
    p_leaves, p_tree = pytree.flatten(primals)
    t_leaves = pytree.flatten(tangents)[0]
    device = next((_leaf_info(x)[2] for x in p_leaves), "cpu")
    trace = _ForwardTrace(device)
    try:
        with tracing(trace):
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
    return zeros(*_leaf_info(value))


# --- the double VJP ---------------------------------------------------------------------------
def _linearized(f, primals, has_aux, who):
    """(out, aux, push): push(tangents shaped like primals) is the JVP of f at primals.

    vjp_fn(u) is linear in u; recording it once at a dummy u and walking back from its result
    with the tangent as cotangent gives J @ tangent (the transpose of the transpose).
    """
    paths, leaves, _ = pytree.flatten_with_paths(tuple(primals), "primals")
    _check_float(who, paths, leaves, "input")
    found = autodiff.vjp(f, *primals, has_aux=has_aux)
    out, vjp_fn = found[0], found[1]
    aux = found[2] if has_aux else None
    out_paths, out_leaves, out_tree = pytree.flatten_with_paths(out, "out")
    _check_float(who, out_paths, out_leaves, "output")
    # The dummy's value is never read by the result (g is linear in it): zeros do.
    dummy = pytree.unflatten(out_tree, [zeros(*_leaf_info(o)) for o in out_leaves])
    # Record the transposed walk exactly when the first one is recorded (an input or a
    # closed-over tensor requires grad, or an enclosing differentiation): the dummy and the
    # first VJP's own inputs are no reason to.
    _, transpose = autodiff.vjp_recording(vjp_fn, (dummy,), False, vjp_fn.records)

    def push(tangents):
        (tangents_out,) = transpose(tangents)
        return tangents_out

    if not vjp_fn.records:
        out = _detach_tree(out)
    return out, aux, push


def jvp(f, primals, tangents, has_aux=False):
    """(f(*primals), the JVP of f at primals applied to tangents), as jax.jvp.

    primals and tangents are tuples with one pytree per positional argument of f; each
    tangent leaf has its primal's shape and dtype. Inputs must be float (or complex):
    integer or bool primals raise TypeError (JAX would take float0 tangents). With
    has_aux=True, f returns (output, aux) and jvp returns (out, tangent_out, aux).
    Computed as the transpose of the VJP, so it works through everything that has a VJP
    (scan, nested scans); it costs a forward, a recorded backward and one walk back over it.

    >>> import scanlib as sl
    >>> x = sl.tensor([1.0, 2.0])
    >>> sl.jvp(lambda x: x ** 3, (x,), (sl.tensor([1.0, 0.0]),))
    (tensor([1., 8.], dtype=float64), tensor([3., 0.], dtype=float64))
    """
    if not isinstance(primals, (tuple, list)):
        raise TypeError(f"jvp: primals must be a tuple with one entry per positional argument "
                        f"of f (as jax.jvp), got {type(primals).__name__}; write (x,).")
    primals = tuple(primals)
    paths, leaves, _ = pytree.flatten_with_paths(primals, "primals")
    _check_float("jvp", paths, leaves, "input")  # before the tangents: the better message
    tangents = _check_tangents("jvp", primals, tangents)
    found = None
    if not autodiff._should_record(leaves, pytree.flatten(tangents)[0]):
        found = _forward_jvp(f, primals, tangents, has_aux)
        if found is not None:
            out_paths, out_leaves, _ = pytree.flatten_with_paths(found[0], "out")
            _check_float("jvp", out_paths, out_leaves, "output")
    if found is None:  # the result may be differentiated again: the double VJP records it
        out, aux, push = _linearized(f, primals, has_aux, "jvp")
        found = out, push(tangents), aux
    out, tangents_out, aux = found
    return (out, tangents_out, aux) if has_aux else (out, tangents_out)


def linearize(f, *primals):
    """(f(*primals), f_jvp), where f_jvp(*tangents) is the JVP at primals, as jax.linearize.

    f runs once (with its backward recorded); each f_jvp call then costs one walk over that
    record, so many tangents at one point (a Jacobian's columns) share the forward.

    >>> import scanlib as sl
    >>> out, f_jvp = sl.linearize(lambda x: sl.sin(x), sl.tensor([0.0, 1.0]))
    >>> f_jvp(sl.tensor([1.0, 1.0]))
    tensor([1.        , 0.54030231], dtype=float64)
    """
    out, _, push = _linearized(f, primals, False, "linearize")

    def f_jvp(*tangents):
        return push(_check_tangents("linearize", primals, tangents))

    return out, f_jvp


# --- Jacobians --------------------------------------------------------------------------------
def _argnums(argnums, nargs, who):
    """(the chosen argument indices, whether argnums was a tuple), checked as JAX does."""
    multiple = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multiple else (argnums,)
    for n in nums:
        if isinstance(n, bool) or not isinstance(n, int) or not -nargs <= n < nargs:
            raise ValueError(f"{who}: argnums {argnums!r} is out of range for {nargs} "
                             "positional arguments")
    return tuple(n % nargs for n in nums), multiple


def _of_chosen(f, args, nums):
    """f as a function of args[nums] only, the other arguments held fixed."""
    def g(*chosen):
        call = list(args)
        for n, v in zip(nums, chosen):
            call[n] = v
        return f(*call)
    return g


def _basis(info, j):
    """The j-th unit vector of a leaf's space, as a Tensor of its shape, dtype and device."""
    shape, dtype, device = info
    xp = backends.namespace(device)
    with backends.on_device(device):
        e = xp.zeros(int(np.prod(shape, dtype=np.int64)), dtype=dtype)
        e[j] = 1
        return Tensor(e.reshape(shape))


def _assemble(pieces, axis, out_info, in_info):
    """Stack the per-element results into one leaf of shape out.shape + in.shape."""
    shape = out_info[0] + in_info[0]
    if not pieces:  # a zero-size input or output
        return zeros(shape, out_info[1] if axis == -1 else in_info[1], out_info[2])
    return reshape(stack(pieces, axis=axis), shape)


def _nest(out_tree, in_tree, blocks, multiple):
    """JAX's nesting: the output's structure outside, the chosen arguments' inside."""
    per_out = []
    for row in blocks:
        inner = pytree.unflatten(in_tree, row)
        per_out.append(inner if multiple else inner[0])
    return pytree.unflatten(out_tree, per_out)


def jacfwd(f, argnums=0, has_aux=False):
    """The Jacobian of f with respect to args[argnums] by forward mode, as jax.jacfwd.

    One JVP per input element (columns), sharing one linearization. Each leaf of the result
    has shape out.shape + in.shape; the result has the output's structure with, at each leaf,
    the structure of the chosen argument (a tuple of them when argnums is a tuple). Real
    float inputs and outputs only (a TypeError otherwise). With has_aux=True, f returns
    (output, aux) and the function returns (jacobian, aux).

    >>> import scanlib as sl
    >>> sl.jacfwd(lambda x: x * x)(sl.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]], dtype=float64)
    """
    @functools.wraps(f)
    def wrapped(*args):
        nums, multiple, chosen, in_leaves, in_tree = _chosen_inputs("jacfwd", argnums, args)
        out, aux, push = _linearized(_of_chosen(f, args, nums), chosen, has_aux, "jacfwd")
        out_leaves, out_tree = _real_outputs("jacfwd", out)
        in_infos = [_leaf_info(x) for x in in_leaves]
        out_infos = [_leaf_info(o) for o in out_leaves]
        columns = _images_of_units(push, in_tree, in_infos)  # [input leaf][unit][output leaf]
        blocks = [[_assemble([c[o] for c in columns[i]], -1, out_infos[o], in_infos[i])
                   for i in range(len(in_leaves))] for o in range(len(out_leaves))]
        jac = _nest(out_tree, in_tree, blocks, multiple)
        return (jac, aux) if has_aux else jac

    return wrapped


def _chosen_inputs(who, argnums, args):
    """args[argnums] (nums, whether argnums is a tuple, the chosen tuple, its leaves and
    treedef), checked to be real floats, as a Jacobian's inputs must be."""
    nums, multiple = _argnums(argnums, len(args), who)
    chosen = tuple(args[n] for n in nums)
    paths, leaves, tree = pytree.flatten_with_paths(chosen, "args")
    _check_float(who, paths, leaves, "input", allow_complex=False)
    return nums, multiple, chosen, leaves, tree


def _real_outputs(who, out):
    """out's leaves and treedef, checked to be real floats."""
    paths, leaves, tree = pytree.flatten_with_paths(out, "out")
    _check_float(who, paths, leaves, "output", allow_complex=False)
    return leaves, tree


def _images_of_units(linear, tree, infos):
    """The images under `linear` of every unit vector of every leaf of `tree` (the other
    leaves zero), each flattened to its leaves: [leaf][unit][image leaf]. jacfwd pushes
    tangents through a JVP this way (columns), jacrev cotangents through a VJP (rows)."""
    zero = [zeros(*info) for info in infos]
    images = []
    for i, info in enumerate(infos):
        per_unit = []
        for j in range(int(np.prod(info[0], dtype=np.int64))):
            unit = list(zero)
            unit[i] = _basis(info, j)
            per_unit.append(pytree.flatten(linear(pytree.unflatten(tree, unit)))[0])
        images.append(per_unit)
    return images


def jacrev(f, argnums=0, has_aux=False):
    """The Jacobian of f with respect to args[argnums] by reverse mode, as jax.jacrev.

    One VJP per output element (rows), sharing one forward pass. Shapes and nesting as
    jacfwd (out.shape + in.shape; output's structure outside, the arguments' inside). Real
    float inputs and outputs only. With has_aux=True, f returns (output, aux) and the
    function returns (jacobian, aux).

    >>> import scanlib as sl
    >>> sl.jacrev(lambda x: sl.sum(x * x))(sl.tensor([1.0, 2.0]))
    tensor([2., 4.], dtype=float64)
    """
    @functools.wraps(f)
    def wrapped(*args):
        nums, multiple, chosen, in_leaves, in_tree = _chosen_inputs("jacrev", argnums, args)
        found = autodiff.vjp(_of_chosen(f, args, nums), *chosen, has_aux=has_aux)
        out, vjp_fn = found[0], found[1]
        out_leaves, out_tree = _real_outputs("jacrev", out)
        in_infos = [_leaf_info(x) for x in in_leaves]
        out_infos = [_leaf_info(o) for o in out_leaves]
        rows = _images_of_units(vjp_fn, out_tree, out_infos)  # [output leaf][unit][input leaf]
        blocks = [[_assemble([r[i] for r in rows[o]], 0, out_infos[o], in_infos[i])
                   for i in range(len(in_leaves))] for o in range(len(out_leaves))]
        jac = _nest(out_tree, in_tree, blocks, multiple)
        return (jac, found[2]) if has_aux else jac

    return wrapped


def hessian(f, argnums=0, has_aux=False):
    """The Hessian of scalar f with respect to args[argnums]: jacfwd(jacrev(f)), as JAX.

    Each leaf has shape out.shape + in.shape + in.shape, nested output / argument / argument
    (for argnums=(0, 1), hess[i][j] is the block of d^2 f / d args[i] d args[j]).

    >>> import scanlib as sl
    >>> sl.hessian(lambda x: sl.sum(x ** 3))(sl.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]], dtype=float64)
    """
    return jacfwd(jacrev(f, argnums, has_aux=has_aux), argnums, has_aux=has_aux)

