"""Builds scan's backward body and decides what the forward pass saves for it.

The backward body is traced by walking the forward body's equations in reverse and calling
each primitive's VJP rule on traced values. Every forward value a rule might read starts as
a candidate input; dead-code elimination then keeps only the ones actually read: these are the
residuals. Each gets a policy (the seed's names):

  CLONE                     the incoming carry (stored in a carry history buffer)
  KEEP                      an intermediate (stacked per step), unless it already is a y or
                            the next carry, which are stored anyway and only referenced
  REMOVE_XS                 a slice of xs: the xs array is referenced, nothing is stored
  REMOVE_ADDITIONAL_INPUTS  a closed-over tensor, or a value computed from closed-over
                            tensors only: referenced once (recomputed once, not per step)

Imports backends, tape, ops and tracing.
"""

from __future__ import annotations

from ..ops import as_tensor, zeros
from ..ops.elementwise import add
from ..ops.structural import (concatenate_p, scatter_add_p)
from ..ops.primitive import bind
from ..tape import GraphBuilder, Graph, Literal, Var, tracing
from ..tape.backward import fit_cotangent
from ..tape.graph import reached_inputs, used_vars
from ..tape.tensor import is_differentiable_dtype

CLONE, KEEP = "CLONE", "KEEP"
REMOVE_XS, REMOVE_ADDITIONAL_INPUTS = "REMOVE_XS", "REMOVE_ADDITIONAL_INPUTS"


class Residual:
    """One value the backward body reads, and where the backward pass gets it from.

    source: ("aug", k) the k-th extra output of the forward scan; ("xs", j) the scanned input
    xs[j]; ("ys", j) the j-th y output; ("const", l) the l-th closed-over input.
    """

    def __init__(self, var, policy, source):
        self.var, self.policy, self.source = var, policy, source


class Linearization:
    """What differentiating one scan needs: the forward body extended with the residuals it
    must output (`aug_body`), the backward body, and the residual list in backward-xs order."""

    def __init__(self, body, aug_body, bwd_body, residuals, ct_carry, ct_ys, x_needs, k_needs,
                 num_ys, bwd_extra_consts):
        self.body, self.aug_body, self.bwd_body = body, aug_body, bwd_body
        self.residuals = residuals
        # Which carries and ys have a cotangent (a backward carry, a backward xs) at all.
        self.ct_carry, self.ct_ys = ct_carry, ct_ys
        self.x_needs, self.k_needs = x_needs, k_needs
        self.num_ys = num_ys
        self.bwd_extra_consts = bwd_extra_consts

    @property
    def num_bwd_carry(self) -> int:
        """The backward scan's carry: carry cotangents, then one accumulator per constant."""
        return sum(self.ct_carry) + sum(self.k_needs)

    @property
    def bwd_sum_carries(self) -> tuple:
        """The backward carries that are gradient accumulators (may be summed reordered)."""
        return tuple(range(sum(self.ct_carry), self.num_bwd_carry))


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
    key = (num_carry, tuple(x_needs), tuple(k_needs), None if given is None else tuple(given),
           one_step, None if carries is None else tuple(carries))
    cache = body.__dict__.setdefault("_linearizations", {})
    if key not in cache:
        cache[key] = _linearize(body, num_carry, list(x_needs), list(k_needs), given,
                                one_step, carries)
    return cache[key]


def carry_patterns(body, nc, x_needs, k_needs, given, limit):
    """Which carries have a cotangent entering each backward step, from the last forward
    step on: the given ones, then those the step before's walk reached (its one-step
    backward body's `ct_carry_out`), until the pattern repeats itself or there are `limit`
    patterns. A pattern that stays is what a backward scan over the remaining steps can
    carry without a zero cotangent standing for an absent one."""
    key = (nc, tuple(x_needs), tuple(k_needs), tuple(given))
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
    carry_out, y_out = body.outvars[:nc], body.outvars[nc:]
    given = [True] * len(body.outvars) if given is None else list(given)
    floats = [is_differentiable_dtype(v.dtype) for v in carry_in]
    if one_step:  # cotangents in: exactly the given ones; out: the carries those reach
        carry_has_ct = [g and f for g, f in zip(given[:nc], floats)]
        carry_out_ct = [r and f for r, f in zip(reached_inputs(body, given)[0][:nc], floats)]
    elif carries is not None:
        carry_has_ct = carry_out_ct = [c and f for c, f in zip(carries, floats)]
    else:
        carry_has_ct = carry_out_ct = _carries_with_cotangents(body, nc, given)
    ct_ys_mask = given[nc:]

    # Which values carry a derivative, and which are fixed for the whole scan.
    active = {v for v, f in zip(carry_in, carry_out_ct) if f}
    active |= {v for v, n in zip(x_in, x_needs) if n}
    active |= {v for v, n in zip(body.constvars, k_needs) if n}
    const_only = set(body.constvars)
    for eqn in body.eqns:
        ins = [v for v in eqn.invars if isinstance(v, Var)]
        if eqn.prim.vjp is not None and any(v in active for v in ins):
            active.update(v for v in eqn.outvars if is_differentiable_dtype(v.dtype))
        if all(v in const_only for v in ins):
            const_only.update(eqn.outvars)

    device = body.device
    b = GraphBuilder(device)
    fwd, candidates = {}, []
    with tracing(b):
        ct_carry = [b.new_input(v.shape, v.dtype, f"ct_{_hint(v, i)}")
                    for i, (v, f) in enumerate(zip(carry_in, carry_has_ct)) if f]
        accs = [b.new_input(k.shape, k.dtype, f"acc{i}")
                for i, (k, n) in enumerate(zip(body.constvars, k_needs)) if n]
        ct_ys = [b.new_input(v.shape, v.dtype, f"ct_y{j}")
                 for j, (v, g) in enumerate(zip(y_out, ct_ys_mask)) if g]
        for l, k in enumerate(body.constvars):
            value = body.consts[l]._value if body.consts[l] is not None else None
            fwd[k] = b.new_constvar(k.shape, k.dtype, value, k.hint)
        for eqn in body.eqns:  # values of closed-over inputs only: recomputed once, not saved
            if all(v in const_only for v in eqn.outvars):
                outs = bind(eqn.prim, *[_read(fwd, v) for v in eqn.invars], **eqn.params)
                fwd.update(zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]))

        producer = {v: e for e in body.eqns for v in e.outvars}

        def get(v):
            if isinstance(v, Literal):
                return v.value
            # Never save a reshape/transpose of a value: save the value, redo the views. A
            # loop, not a recursion: a body may chain a thousand views.
            views, u = [], v
            while u not in fwd:
                eqn = producer.get(u)
                if eqn is None or not _is_view(eqn):
                    views, u = _cut_buffer_views(views, u, carry_in)
                    fwd[u] = b.new_input(u.shape, u.dtype, u.hint)
                    candidates.append(u)
                    break
                views.append((u, eqn))
                u = eqn.invars[0]
            for u, eqn in reversed(views):
                fwd[u] = bind(eqn.prim, fwd[eqn.invars[0]], **eqn.params)
            return fwd[v]

        ct = _Cotangents(b)

        def accumulate(v, g):
            if isinstance(v, Var) and v in active and g is not None:
                ct.add(v, fit_cotangent(as_tensor(g), v))

        for v, g in zip([v for v, f in zip(carry_out, carry_has_ct) if f], ct_carry):
            accumulate(v, g)
        for v, g in zip([v for v, g in zip(y_out, ct_ys_mask) if g], ct_ys):
            accumulate(v, g)
        for eqn in reversed(body.eqns):
            if not any(v in ct for v in eqn.outvars):
                continue
            gs = [ct.pop(v, None) for v in eqn.outvars]
            ins = [get(v) for v in eqn.invars]
            in_cts = eqn.prim.cotangents(gs, [get(v) for v in eqn.outvars], ins, eqn.params)
            for v, g in zip(eqn.invars, in_cts):
                accumulate(v, g)

        def ct_or_zeros(v):
            return ct.pop(v) if v in ct else zeros(v.shape, v.dtype, device)

        if one_step:  # the carries the walk reached (a rule may give an input none)
            carry_out_ct = [f and v in ct for v, f in zip(carry_in, carry_out_ct)]
        # Inputs whose cotangent is zero at every step by construction: none, not zeros.
        zero_carries = [f and v not in ct for v, f in zip(carry_in, carry_out_ct)]
        zero_xs = [n and v not in ct for v, n in zip(x_in, x_needs)]
        zero_ks = [n and k not in ct for k, n in zip(body.constvars, k_needs)]
        outs = [ct_or_zeros(v) for v, f in zip(carry_in, carry_out_ct) if f]
        needed_k = [k for k, n in zip(body.constvars, k_needs) if n]
        outs += [add(acc, ct.pop(k)) if k in ct else acc for acc, k in zip(accs, needed_k)]
        outs += [ct_or_zeros(v) for v, n in zip(x_in, x_needs) if n]
        graph = b.build(outs, name="backward_body")

    # Dead-code elimination decides the residuals.
    eqns, live = used_vars(graph.eqns, graph.outvars)
    used = [v for v in candidates if fwd[v]._var in live]
    residuals, extra = [], []
    for v in used:
        if v in carry_in:
            residuals.append(Residual(v, CLONE, ("aug", len(extra))))
            extra.append(v)
        elif v in x_in:
            residuals.append(Residual(v, REMOVE_XS, ("xs", x_in.index(v))))
        elif v in y_out:
            residuals.append(Residual(v, KEEP, ("ys", y_out.index(v))))
        elif v in carry_out:
            residuals.append(Residual(v, KEEP, ("aug", len(extra))))
            extra.append(v)
        else:
            residuals.append(Residual(v, KEEP, ("aug", len(extra))))
            extra.append(v)
    for l, k in enumerate(body.constvars):
        if fwd[k]._var in live:
            residuals.append(Residual(k, REMOVE_ADDITIONAL_INPUTS, ("const", l)))
    for v in (v for e in body.eqns for v in e.outvars if v in const_only):
        if fwd[v]._var in live:
            residuals.append(Residual(v, REMOVE_ADDITIONAL_INPUTS, None))

    n_in = len(ct_carry) + len(accs) + len(ct_ys)
    invars = graph.invars[:n_in] + [fwd[r.var]._var for r in residuals if r.source and
                                    r.source[0] != "const"]
    bwd = Graph(invars, graph.constvars, graph.consts, eqns, graph.outvars, "backward_body",
                graph.device)
    aug = Graph(body.invars, body.constvars, body.consts, body.eqns, body.outvars + extra,
                body.name, body.device)
    n_fwd_consts = len(body.constvars)
    lin = Linearization(body, aug, bwd, residuals, carry_has_ct, ct_ys_mask, x_needs, k_needs,
                        len(y_out), graph.consts[n_fwd_consts:])
    lin.ct_carry_out, lin.zero_xs, lin.zero_ks = carry_out_ct, zero_xs, zero_ks
    lin.zero_carries = zero_carries  # flagged carries the walk never reached
    lin.bwd_sources = {fwd[v]._var: v for v in list(fwd) if isinstance(v, Var)}
    return lin


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


def _read(fwd, v):
    return v.value if isinstance(v, Literal) else fwd[v]


def _hint(v, i):
    return v.hint if v.hint and v.hint.isidentifier() else f"c{i}"

