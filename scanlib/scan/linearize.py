"""Builds scan's backward body and decides what the forward pass saves for it.

The backward body is traced by walking the forward body's equations in reverse and calling
each primitive's VJP rule on traced values. Every forward value a rule might read starts as
a candidate input; dead-code elimination then keeps only the ones actually read: these are the
residuals, each with its policy and where the backward pass gets it (residuals.py). Which
values carry a derivative at all is `active_values`; which are the same at every step, and so
recomputed once rather than saved, `const_only_values`.

Imports backends, tape, ops and tracing, and residuals.py.
"""

from __future__ import annotations

from ..interpreters.reverse import walk_back
from ..ops import as_tensor, zeros
from ..ops.elementwise import add
from ..ops.structural import (concatenate_p, scatter_add_p)
from ..ops.primitive import bind
from ..tape import Eqn, GraphBuilder, Graph, Literal, Var, tracing
from ..tape.backward import fit_cotangent
from ..tape.levels import calls_own_level
from ..tape.state import STATE
from ..tape.graph import has_effect, reached_inputs, used_vars
from ..tape.tensor import is_differentiable_dtype
from .residuals import (CLONE, KEEP, REMOVE_ADDITIONAL_INPUTS, REMOVE_XS, Kind, Linearization,
                        Residual)


def linearize(body: Graph, num_carry: int, x_needs, k_needs, given=None,
              one_step=False, carries=None) -> Linearization:
    """Linearize `body` for cotangents flowing to carries, xs[j] where x_needs[j] and
    closed-over inputs where k_needs[l]. `given[i]` says whether the i-th output (carries,
    then ys) of the whole scan has a cotangent (None: all do). An output without one gets no
    cotangent input, not a zero one: a zero meeting an infinite partial is NaN, and the loop
    never forms that product. Which carries take a cotangent: by default those that have
    one at some step (a fixpoint over steps); with `carries`, exactly those, in and out (a
    pattern that stays, see carry_patterns); with one_step, the backward body of one step
    whose carry cotangents are exactly the given ones, returning cotangents for the carries
    the walk reaches (`ct_carry_out`; it is replayed, not scanned). Cached on the body."""
    as_fwd = custom_as_fwd(body)
    key = (num_carry, tuple(x_needs), tuple(k_needs), None if given is None else tuple(given),
           one_step, None if carries is None else tuple(carries), as_fwd)
    cache = body.__dict__.setdefault("_linearizations", {})
    if key not in cache:
        cache[key] = _linearize(body, num_carry, list(x_needs), list(k_needs), given,
                                one_step, carries)
        cache[key].as_fwd = as_fwd
    return cache[key]


def custom_as_fwd(body):
    """How body's custom calls are differentiated now: through their operations (the walk's
    mode, STATE.custom_as_fwd, where it is of another level than theirs and body holds one,
    see tape/levels.py), or by their rules (False)."""
    return STATE.custom_as_fwd if STATE.custom_as_fwd and calls_own_level(body) else False


def carry_patterns(body, nc, x_needs, k_needs, given, limit):
    """Which carries have a cotangent entering each backward step, from the last forward
    step on: the given ones, then those the step before's walk reached (its one-step
    backward body's `ct_carry_out`), until the pattern repeats itself or there are `limit`
    patterns. A pattern that stays is what a backward scan over the remaining steps can
    carry without a zero cotangent standing for an absent one."""
    key = (nc, tuple(x_needs), tuple(k_needs), tuple(given), custom_as_fwd(body))
    cache = body.__dict__.setdefault("_carry_patterns", {})
    hit = cache.get(key)  # a pattern that settles, found before (every call of a scan asks)
    if hit is not None and len(hit) <= limit:
        return hit
    floats = [is_differentiable_dtype(v.dtype) for v in body.invars[:nc]]
    ys_given = list(given[nc:])
    patterns = [[g and f for g, f in zip(given[:nc], floats)]]
    while len(patterns) < limit:
        step = linearize(body, nc, x_needs, k_needs, patterns[-1] + ys_given, one_step=True)
        if step.ct_carry_out == patterns[-1]:
            cache[key] = patterns
            break
        patterns.append(step.ct_carry_out)
    return patterns


def _carries_with_cotangents(body, nc, given):
    """Which carries have a cotangent in some step: those the scan's result gives one, and,
    to a fixpoint, those whose incoming value reaches (through differentiable equations,
    and through a nested loop only along its own paths) an output that has one."""
    floats = [is_differentiable_dtype(v.dtype) for v in body.invars[:nc]]
    return reached_inputs(body, given, nc, floats)[1]


def _linearize(body, nc, x_needs, k_needs, given, one_step=False, carries=None):
    carry_in, x_in = body.invars[:nc], body.invars[nc:]
    given = [True] * len(body.outvars) if given is None else list(given)
    ct_in, ct_out = _carry_cotangents(body, nc, given, one_step, carries)
    ct_ys = given[nc:]
    active = active_values(body, ct_out, x_needs, k_needs)
    plain, body = body, _keeping_residuals(body, active)
    b = GraphBuilder(body.device)
    with tracing(b):
        seeds = [v for v, f in zip(body.outvars, ct_in + ct_ys) if f]
        cts = [b.new_input(v.shape, v.dtype, f"ct_{_hint(v, i)}")
               for i, (v, f) in enumerate(zip(carry_in, ct_in)) if f]
        accs = [b.new_input(k.shape, k.dtype, f"acc{i}")
                for i, (k, n) in enumerate(zip(body.constvars, k_needs)) if n]
        cts += [b.new_input(v.shape, v.dtype, f"ct_y{j}")
                for j, (v, g) in enumerate(zip(body.outvars[nc:], ct_ys)) if g]
        fwd = _ForwardValues(body, nc, b)
        ct = _walk_back(body, fwd, active, zip(seeds, cts), b)
        if one_step:  # the carries the walk reached (a rule may give an input none)
            ct_out = [f and v in ct for v, f in zip(carry_in, ct_out)]
        # Inputs whose cotangent is zero at every step by construction: none, not zeros.
        zero_carries = [f and v not in ct for v, f in zip(carry_in, ct_out)]
        zero_xs = [n and v not in ct for v, n in zip(x_in, x_needs)]
        zero_ks = [n and k not in ct for k, n in zip(body.constvars, k_needs)]
        outs = [ct.pop_or_zeros(v) for v, f in zip(carry_in, ct_out) if f]
        needed_k = [k for k, n in zip(body.constvars, k_needs) if n]
        outs += [add(acc, ct.pop(k)) if k in ct else acc for acc, k in zip(accs, needed_k)]
        outs += [ct.pop_or_zeros(v) for v, n in zip(x_in, x_needs) if n]
        graph = b.build(outs, name="backward_body")

    # Dead-code elimination decides the residuals.
    eqns, live = used_vars(graph.eqns, graph.outvars)
    residuals, extra = _residuals(body, nc, fwd, live)
    n_in = len(cts) + len(accs)
    invars = graph.invars[:n_in] + [fwd.traced[r.var]._var for r in residuals if r.per_step]
    bwd = Graph(invars, graph.constvars, graph.consts, eqns, graph.outvars, "backward_body",
                graph.device)
    aug = Graph(body.invars, body.constvars, body.consts, body.eqns, body.outvars + extra,
                body.name, body.device)
    return Linearization(
        body=plain, aug_body=aug, bwd_body=bwd, residuals=residuals, ct_carry=ct_in,
        ct_ys=ct_ys, x_needs=x_needs, k_needs=k_needs, num_ys=len(body.outvars) - nc,
        bwd_extra_consts=graph.consts[len(body.constvars):], ct_carry_out=ct_out,
        zero_carries=zero_carries, zero_xs=zero_xs, zero_ks=zero_ks,
        bwd_sources={t._var: v for v, t in fwd.traced.items()})


def _keeping_residuals(body, active):
    """body with each equation inside it that reads an active value and has a
    `keep_residuals` rule (a nested scan) bound as that rule says: with what its VJP reads
    as more outputs, which the forward then computes at every step and, where the backward
    body reads them, saves; the VJP reads them there instead of running the inner forward
    again (as JAX's partial evaluation keeps a nested scan's residuals; a print in the inner
    body runs once per step). Each rewritten equation is cached on body, so that every
    linearization of body (another `given`, one step) names the same residuals."""
    eqns, cache = list(body.eqns), body.__dict__.setdefault("_saving_inner", {})
    for i, eqn in enumerate(body.eqns):
        rule = eqn.prim.keep_residuals
        if rule is None or not any(isinstance(v, Var) and v in active for v in eqn.invars):
            continue
        found = rule(eqn.params, [isinstance(v, Var) for v in eqn.invars])
        if found is None:
            continue
        what, params, extra = found
        key = (i, id(what))  # (the cache holds params, which hold `what`: its id stays its own)
        if key not in cache:
            cache[key] = params, Eqn(eqn.prim, eqn.invars, params, eqn.outvars + [
                Var(shape, dtype, hint) for shape, dtype, hint in extra])
        eqns[i] = cache[key][1]
    if eqns == body.eqns:
        return body
    return Graph(body.invars, body.constvars, body.consts, eqns, body.outvars, body.name,
                 body.device)


def name_inner_residuals(lin, names):
    """Printed names, added to `names` (format_graph's, of lin.body), for the residuals that
    the nested scans of lin's forward save (_keeping_residuals): `e.r0` is the
    first residual of the scan whose first result is `e`, stacked over its steps."""
    for plain, eqn in zip(lin.body.eqns, lin.aug_body.eqns):
        if eqn is not plain:
            head = names.get(plain.outvars[0], "?")
            for k, v in enumerate(eqn.outvars[len(plain.outvars):]):
                names.setdefault(v, f"{head}.r{k}")
    return names


def _carry_cotangents(body, nc, given, one_step, carries):
    """(which carries take a cotangent into a backward step, which get one out of it).
    one_step: in, exactly the given ones; out, those the walk reaches. With `carries`:
    exactly those, in and out. Otherwise those that have one at some step, in and out."""
    floats = [is_differentiable_dtype(v.dtype) for v in body.invars[:nc]]
    if one_step:
        reached = reached_inputs(body, given)[0][:nc]
        return ([g and f for g, f in zip(given[:nc], floats)],
                [r and f for r, f in zip(reached, floats)])
    if carries is not None:
        flags = [c and f for c, f in zip(carries, floats)]
        return flags, flags
    flags = _carries_with_cotangents(body, nc, given)
    return flags, flags


def active_values(body: Graph, carries, x_needs, k_needs) -> set:
    """The values of `body` that carry a derivative: the flagged carries (inputs), xs and
    closed-over inputs, and every float output of a differentiable equation that reads an
    active value. Only these take a cotangent in the backward walk."""
    active = {v for v, f in zip(body.invars, list(carries) + list(x_needs)) if f}
    active |= {k for k, n in zip(body.constvars, k_needs) if n}
    for eqn in body.eqns:
        if eqn.prim.vjp is not None and any(isinstance(v, Var) and v in active
                                            for v in eqn.invars):
            active.update(v for v in eqn.outvars if is_differentiable_dtype(v.dtype))
    return active


def const_only_values(body: Graph) -> set:
    """The closed-over inputs of `body` and the values computed from them alone: the same at
    every step, so the backward body recomputes them once instead of saving them."""
    const_only = set(body.constvars)
    for eqn in body.eqns:  # (a debug print is the forward pass's: never recomputed)
        if not has_effect(eqn) and all(v in const_only for v in eqn.invars
                                       if isinstance(v, Var)):
            const_only.update(eqn.outvars)
    return const_only


def _walk_back(body, fwd, active, seeds, builder):
    """The cotangents of body's inputs from those of its outputs (`seeds`: (output, traced
    cotangent) pairs): body's equations walked in reverse, each one's VJP rule called on the
    forward values it reads (`fwd`). Only active values take a cotangent."""
    ct = _Cotangents(builder)

    def accumulate(v, g):
        if isinstance(v, Var) and v in active and g is not None:
            ct.add(v, fit_cotangent(as_tensor(g), v))

    for v, g in seeds:
        accumulate(v, g)
    walk_back(body.eqns, fwd.__getitem__, ct, accumulate)
    return ct


class _ForwardValues:
    """The forward body's values as the backward body being traced reads them (`fwd[v]`):
    closed-over inputs are its constants and values of those alone are recomputed once;
    views are redone from the value they view; any other value becomes an input of the
    backward body, a candidate residual (dead-code elimination keeps the ones read)."""

    def __init__(self, body, nc, builder):
        self.builder, self.carry_in = builder, body.invars[:nc]
        self.traced = {}  # forward Var -> its Tensor in the backward body
        self.candidates = []  # the forward values made inputs, in the order first read
        self.const_only = const_only_values(body)
        self.producer = {v: e for e in body.eqns for v in e.outvars}
        for l, k in enumerate(body.constvars):
            value = body.consts[l]._value if body.consts[l] is not None else None
            self.traced[k] = builder.new_constvar(k.shape, k.dtype, value, k.hint)
        for eqn in body.eqns:
            if all(v in self.const_only for v in eqn.outvars):
                outs = bind(eqn.prim, *[self[v] for v in eqn.invars], **eqn.params)
                self.traced.update(zip(eqn.outvars,
                                       outs if eqn.prim.multiple_results else [outs]))

    def __getitem__(self, v):
        if isinstance(v, Literal):
            return v.value
        # Never save a reshape/transpose of a value: save the value, redo the views. A
        # loop, not a recursion: a body may chain a thousand views.
        views, u = [], v
        while u not in self.traced:
            eqn = self.producer.get(u)
            if eqn is None or not _is_view(eqn):
                views, u = _cut_buffer_views(views, u, self.carry_in)
                self.traced[u] = self.builder.new_input(u.shape, u.dtype, u.hint)
                self.candidates.append(u)
                break
            views.append((u, eqn))
            u = eqn.invars[0]
        for u, eqn in reversed(views):
            self.traced[u] = bind(eqn.prim, self.traced[eqn.invars[0]], **eqn.params)
        return self.traced[v]


def _residuals(body, nc, fwd, live):
    """The residuals, in backward-xs order: the candidates the backward body reads (`live`),
    then the closed-over inputs and the values of those alone it reads. Returns them and
    the values the forward scan must output for them, in the order of their AUG indices."""
    carry_in, x_in, y_out = body.invars[:nc], body.invars[nc:], body.outvars[nc:]
    residuals, extra = [], []
    for v in fwd.candidates:
        if fwd.traced[v]._var not in live:
            continue
        if v in carry_in:
            residuals.append(Residual(v, CLONE, Kind.AUG, len(extra)))
        elif v in x_in:
            residuals.append(Residual(v, REMOVE_XS, Kind.XS, x_in.index(v)))
        elif v in y_out:
            residuals.append(Residual(v, KEEP, Kind.YS, y_out.index(v)))
        else:  # an intermediate, or the next carry (saved: the carry buffer is overwritten)
            residuals.append(Residual(v, KEEP, Kind.AUG, len(extra)))
        if residuals[-1].kind is Kind.AUG:
            extra.append(v)
    residuals += [Residual(k, REMOVE_ADDITIONAL_INPUTS, Kind.CONST, l)
                  for l, k in enumerate(body.constvars) if fwd.traced[k]._var in live]
    residuals += [Residual(v, REMOVE_ADDITIONAL_INPUTS, Kind.RECOMPUTED)
                  for e in body.eqns for v in e.outvars
                  if v in fwd.const_only and fwd.traced[v]._var in live]
    return residuals, extra


class _Cotangents:
    """Cotangents of forward values, summed when read. Pieces that are the adjoints of
    slices covering one axis (an LSTM's four gates) are joined with one concatenate instead
    of being added as four zero-padded arrays."""

    def __init__(self, builder):
        self.builder = builder
        self.parts = {}

    def __contains__(self, v):
        return v in self.parts

    def add(self, v, g):
        self.parts.setdefault(v, []).append((g, self._slice_of(g, v)))

    def pop(self, v, default=None):
        parts = self.parts.pop(v, None)
        if parts is None:
            return default
        pieces = [p for _, p in parts]
        if len(parts) > 1 and all(pieces) and len({p[0] for p in pieces}) == 1:
            axis = pieces[0][0]
            pieces.sort(key=lambda p: p[1])
            bounds = [(p[1], p[2]) for p in pieces]
            if bounds[0][0] == 0 and bounds[-1][1] == v.shape[axis] and all(
                    a[1] == b[0] for a, b in zip(bounds, bounds[1:])):
                return concatenate_p(*[p[3] for p in pieces], axis=axis)
        total = parts[0][0]
        for g, _ in parts[1:]:
            total = add(total, g)
        return total

    def pop_or_zeros(self, v):
        """The cotangent of v, or zeros where the walk gave it none."""
        return self.pop(v) if v in self.parts else zeros(v.shape, v.dtype, self.builder.device)

    def _slice_of(self, g, v):
        """(axis, start, stop, piece) when g = scatter_add(piece) into one basic slice of v."""
        eqns = self.builder.eqns
        if not eqns or eqns[-1].outvars[0] is not getattr(g, "_var", None):
            return None
        eqn = eqns[-1]
        if eqn.prim is not scatter_add_p or len(eqn.invars) != 1:
            return None
        index = eqn.params["index"]
        cut = [i for i, s in enumerate(index) if s != slice(None)]
        if len(index) > len(v.shape) or len(cut) != 1 or not isinstance(index[cut[0]], slice):
            return None
        axis, sl = cut[0], index[cut[0]]
        start, stop, step = sl.indices(v.shape[axis])
        if step != 1 or not isinstance(eqn.invars[0], Var):
            return None
        var = eqn.invars[0]
        piece = self.builder._tracer(var, self.builder._zeros(var.shape, var.dtype))
        return axis, start, stop, piece


def _cut_buffer_views(views, base, carry_in):
    """(views to redo, value to save) for a chain of views of `base`, which must be saved.
    Redoing views costs nothing and saving a reshape costs what saving its input does; but a
    carry buffer read through a smaller basic-indexed view (`buf[0]`) would be saved whole,
    a [T + 1, buffer] history, so save the smallest such view instead (O(row) per step). An
    index-array read (`buf[t]`) is no view here: its result is saved already."""
    if base not in carry_in or not views:
        return views, base
    k = min(range(len(views)), key=lambda j: (views[j][0].nbytes, -j))
    if views[k][0].nbytes >= base.nbytes:
        return views, base
    return views[:k], views[k][0]


def _is_view(eqn):
    """Equations that only rearrange one input's data (cheaper to redo than to store)."""
    return eqn.prim.view and len(eqn.invars) == 1 and isinstance(eqn.invars[0], Var)


def _hint(v, i):
    return v.hint if v.hint and v.hint.isidentifier() else f"c{i}"

