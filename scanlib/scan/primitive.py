"""The scan primitive on the tape: its forward is the compiled loop (executor.py) and its VJP
is another scan, run in the opposite direction over the saved residuals (linearize.py).
Because that backward scan goes through this same primitive, it can be differentiated again.

Imports backends, tape, ops and the scan modules below it.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..ops import concatenate, stack
from ..ops.primitive import Primitive, bind
from ..remat import replay
from ..tape import Tensor, current_builder, grad_enabled, record
from ..tape.state import STATE
from ..tape.graph import (Graph, dependent_outputs, differentiated_graph, prune_outputs,
                          reached_inputs, stand_ins_for, used_vars)
from ..tape.tensor import is_differentiable_dtype
from . import batching, jvp
from .cache import canonical
from .executor import compiled
from .interpret import run_interpreted
from .linearize import carry_patterns, custom_as_fwd, linearize
from .residuals import Kind


def _scan_impl(*values, body, length, reverse, num_carry, num_xs, interpret=False,
               sum_carries=(), compiler="numpy", _lin=None):
    nc, nx = num_carry, num_xs
    if current_builder() is not None:
        zeros = stand_ins_for(body.outvars, [()] * nc + [(length,)] * (len(body.outvars) - nc))
        if zeros is not None:  # a nested scan being traced: its values would be unused
            return zeros
    init, xs, consts = list(values[:nc]), list(values[nc:nc + nx]), list(values[nc + nx:])
    if interpret:
        carry, ys = run_interpreted(body, length, init, xs, consts, reverse, nc)
    else:
        carry, ys = compiled(body, nc, nx, reverse, sum_carries, compiler)(length, init, xs,
                                                                          consts)
    out = carry + ys
    # The residual outputs of a scan bound with them reach no user: only its VJP reads them.
    n_user = len(out) if _lin is None else nc + _lin.num_ys
    return [_read_only(a) for a in out[:n_user]] + out[n_user:]


def _read_only(a):
    """A read-only view of a result: ys share memory with the carry history, the final carry,
    xs and the residuals the backward pass reads, so writing into one through `.numpy()`
    would change the others. (CuPy arrays have no such flag.)"""
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _needs_grad(x):
    return (isinstance(x, Tensor) and is_differentiable_dtype(x.dtype)
            and (x.requires_grad or x._trace is not None))


def _scan_vjp(cts, outs, *inputs, _saved, body, length, reverse, num_carry, num_xs,
              interpret=False, sum_carries=(), compiler="numpy", _lin=None):
    nc, nx = num_carry, num_xs
    xs, consts = inputs[nc:nc + nx], inputs[nc + nx:]
    if length == 0:  # no step runs: the carries pass through, an absent cotangent stays absent
        return list(cts[:nc]) + [None] * (len(inputs) - nc)
    x_needs, k_needs = [_needs_grad(x) for x in xs], [_needs_grad(k) for k in consts]
    lin = _lin
    if lin is None or any(ct is not None for ct in cts[nc + lin.num_ys:]) or not (
            _covers(lin.x_needs, x_needs) and _covers(lin.k_needs, k_needs)) or (
            lin.as_fwd != custom_as_fwd(body)):
        # Bound without residuals (inside a traced body); or the residual outputs themselves
        # have cotangents (a higher-order derivative); or the linearization was made for
        # fewer inputs than need gradients now (a nested scan's equation in a cached body
        # graph, first traced when a closed-over tensor did not require grad). Linearize the
        # body as bound, its residual outputs being ordinary ys, and recompute the forward if
        # that needs more. Likewise where a walk of another level than the linearization's
        # differentiates the body's custom_vjp calls (see linearize.custom_as_fwd). Outputs
        # without a cotangent get none, not zeros (see linearize).
        given = [ct is not None for ct in cts[:len(body.outvars)]]
        lin = linearize(body, nc, x_needs, k_needs, None if all(given) else given)
        if len(lin.aug_body.outvars) > len(body.outvars) or not _kept(
                _residuals(lin, outs, xs), lin):
            outs = _bind_linearized(inputs, lin, length, reverse, interpret, sum_carries,
                                    compiler)
    saved = _residuals(lin, outs, xs)
    given = [ct is not None for ct in cts[:nc + lin.num_ys]]
    if not all(given):  # outputs without a cotangent get none, not zeros (see linearize)
        lin = linearize(lin.body, nc, lin.x_needs, lin.k_needs, given)
        if not _kept(saved, lin):
            # Its residuals are not all among those the forward kept: run the forward again
            # for them, rather than give the unread outputs zero cotangents (0 * inf: NaN).
            outs = _bind_linearized(inputs, lin, length, reverse, interpret, sum_carries,
                                    compiler)
            saved = _residuals(lin, outs, xs)

    # Every carry the backward scan carries is given a cotangent, and its walk reaches each:
    # the pattern holds at every step (the usual case: the loss reads the final carry).
    settled = all(given[i] for i in range(nc) if lin.ct_carry[i]) and not any(lin.zero_carries)
    if length and not settled:
        patterns = carry_patterns(lin.body, nc, lin.x_needs, lin.k_needs, given, length + 1)
        if len(patterns) > 1 or patterns[0] != lin.ct_carry:
            # carries whose cotangent is absent at some steps (see _peeled_vjp)
            return _peeled_vjp(cts, inputs, lin, saved, given, patterns, length, reverse,
                               interpret, sum_carries, compiler)

    xp = backends.xp_of(*[a._value for a in inputs])
    out_vars = lin.body.outvars
    ct_carry = [_ct_or_zeros(cts[i], out_vars[i], xp, ())
                for i, f in enumerate(lin.ct_carry) if f]
    accs = [_ct_or_zeros(None, k, xp, ()) for k, n in zip(consts, lin.k_needs) if n]
    ct_ys = [_ct_or_zeros(cts[nc + j], out_vars[nc + j], xp, (length,))
             for j, g in enumerate(lin.ct_ys) if g]
    residuals = [saved[r.var] for r in lin.per_step_residuals]
    bwd_init, bwd_xs = ct_carry + accs, ct_ys + residuals
    n_ct = len(ct_carry)
    res = apply_scan(lin.bwd_body, bwd_init, bwd_xs, list(consts) + lin.bwd_extra_consts,
                     length, not reverse, interpret,
                     sum_carries=lin.bwd_sum_carries, compiler=compiler)
    carry_ct_iter = iter(res[:n_ct])
    acc_iter = iter(res[n_ct:len(bwd_init)])
    xs_ct_iter = iter(res[len(bwd_init):])
    out = [next(carry_ct_iter) if f else None for f in lin.ct_carry]
    out += [_unless(z, next(xs_ct_iter)) if n else None for n, z in zip(lin.x_needs, lin.zero_xs)]
    out += [_unless(z, next(acc_iter)) if n else None for n, z in zip(lin.k_needs, lin.zero_ks)]
    return out


def _unless(zero, ct):
    """None for an input whose cotangent is zero by construction (no path reaches it), as
    the loop gives none: a zero passed on would meet the partials of whatever made it."""
    return None if zero else ct


def _peeled_vjp(cts, inputs, lin, saved, given, patterns, length, reverse, interpret,
                sum_carries, compiler):
    """The VJP where the carries that have a cotangent change over the first backward steps
    (an unread final carry that reaches a read y gets one only from the step before the
    last): a backward scan would carry zeros for the absent ones, and a zero meeting an
    infinite partial is NaN where the loop never forms the product. Those steps run one at
    a time, each its own backward body for exactly the cotangents present (replayed on the
    tape), until the pattern stays (`patterns[-1]`); a backward scan takes the rest."""
    nc, nx = len(lin.ct_carry), len(lin.x_needs)
    xs, consts = inputs[nc:nc + nx], list(inputs[nc + nx:])
    xp = backends.xp_of(*[a._value for a in inputs])
    peel = len(patterns) - 1
    rest = length - peel
    ys_given = list(given[nc:])
    step_lins = [linearize(lin.body, nc, lin.x_needs, lin.k_needs, g + ys_given, one_step=True)
                 for g in patterns[:peel]]
    main = linearize(lin.body, nc, lin.x_needs, lin.k_needs, patterns[-1] + ys_given,
                     carries=patterns[-1]) if rest else None
    for needed in step_lins + ([main] if main else []):
        if not _kept(saved, needed):
            # Bound without _lin: a one-step linearization is no scan's; a higher order
            # relinearizes this forward as bound.
            outs = bind(scan_p, *inputs, body=needed.aug_body, length=length, reverse=reverse,
                        num_carry=nc, num_xs=nx, **_mode(interpret, sum_carries, compiler))
            saved = {**saved, **_residuals(needed, outs, xs)}

    def per_step(lin_s, t):
        return [saved[r.var][t] for r in lin_s.per_step_residuals]

    carry = {i: cts[i] for i in range(nc) if patterns[0][i]}
    accs = [_ct_or_zeros(None, k, xp, ()) for k, n in zip(consts, lin.k_needs) if n]
    steps = list(range(peel)) if reverse else [length - 1 - i for i in range(peel)]
    x_steps = []  # per peeled step, the cotangent of each xs that needs one
    for lin_s, t in zip(step_lins, steps):
        args = [carry[i] for i in range(nc) if lin_s.ct_carry[i]] + accs
        args += [cts[nc + j][t] for j, g in enumerate(ys_given) if g] + per_step(lin_s, t)
        res = replay(lin_s.bwd_body, args, consts + lin_s.bwd_extra_consts)
        n_ct = sum(lin_s.ct_carry_out)
        found = iter(res[:n_ct])
        carry = {i: next(found) for i in range(nc) if lin_s.ct_carry_out[i]}
        accs, x_steps = res[n_ct:n_ct + len(accs)], x_steps + [res[n_ct + len(accs):]]
    x_main = None
    if main is not None:  # the steps before (after, for a reverse scan) the peeled ones
        kept = slice(peel, length) if reverse else slice(0, rest)
        init = [carry[i] for i in range(nc) if main.ct_carry[i]] + accs
        bwd_xs = [cts[nc + j][kept] for j, g in enumerate(ys_given) if g]
        bwd_xs += [saved[r.var][kept] for r in main.per_step_residuals]
        res = apply_scan(main.bwd_body, init, bwd_xs, consts + main.bwd_extra_consts, rest,
                         not reverse, interpret, sum_carries=main.bwd_sum_carries,
                         compiler=compiler)
        n_ct = sum(main.ct_carry)
        found = iter(res[:n_ct])
        carry = {i: next(found) for i in range(nc) if main.ct_carry[i]}
        accs, x_main = res[n_ct:len(init)], res[len(init):]
    x_cts = []
    for j in range(sum(lin.x_needs)):
        rows = [step[j] for step in x_steps]
        pieces = [stack(rows if reverse else rows[::-1])] if rows else []  # in t order
        if x_main is not None:
            pieces = pieces + [x_main[j]] if reverse else [x_main[j]] + pieces
        x_cts.append(pieces[0] if len(pieces) == 1 else concatenate(pieces, axis=0))
    # An input whose cotangent is zero by construction at every step gets none.
    lins = step_lins + ([main] if main is not None else [])
    x_zero = [all(zs) for zs in zip(*[[z for z, n in zip(ln.zero_xs, ln.x_needs) if n]
                                      for ln in lins])]
    k_zero = [all(zs) for zs in zip(*[[z for z, n in zip(ln.zero_ks, ln.k_needs) if n]
                                      for ln in lins])]
    x_out = iter([_unless(z, ct) for ct, z in zip(x_cts, x_zero)])
    k_out = iter([_unless(z, ct) for ct, z in zip(accs, k_zero)])
    out = [carry.get(i) for i in range(nc)]
    out += [next(x_out) if n else None for n in lin.x_needs]
    out += [next(k_out) if n else None for n in lin.k_needs]
    return out


def _bind_linearized(inputs, lin, length, reverse, interpret, sum_carries, compiler):
    """The outputs of the scan of lin's body extended with its residuals (bound on the tape:
    the VJP of a VJP differentiates through it; its node keeps the residuals)."""
    outs = bind(scan_p, *inputs, body=lin.aug_body, length=length, reverse=reverse,
                num_carry=len(lin.ct_carry), num_xs=len(lin.x_needs), _lin=lin,
                **_mode(interpret, sum_carries, compiler))
    return _keep_residuals(outs, lin, len(lin.ct_carry))


def _residuals(lin, outs, xs):
    """residual var -> its value, from the outputs of a scan bound with lin's residuals."""
    nc, ny = len(lin.ct_carry), lin.num_ys
    sources = {Kind.AUG: outs[nc + ny:], Kind.XS: xs, Kind.YS: outs[nc:nc + ny]}
    return {r.var: sources[r.kind][r.index] for r in lin.per_step_residuals}


def _kept(saved, lin):
    """Whether `saved` holds every residual lin's backward reads. One it lacks: a residual of
    another linearization; or a y read as one (a scan bound with residuals, differentiated
    again as bound, reads its ys so) that nobody holds any more, the tape holding outputs
    weakly. Then the forward runs again for them."""
    return all(saved.get(r.var) is not None for r in lin.per_step_residuals)


def _covers(had, needed):
    return all(h or not n for h, n in zip(had, needed))


def _ct_or_zeros(ct, like, xp, lead):
    """ct, or zeros shaped like `like` (a Tensor or Var) with `lead` axes in front. A y that
    the loss never read gets a stride-0 view of one zero, not a [T, ...] allocation."""
    if ct is not None:
        return ct
    return Tensor(xp.broadcast_to(xp.zeros((), like.dtype), lead + tuple(like.shape)))


def _prune_scan(params, used):
    """The scan computing only the used carries and ys, and the carries those read (to a
    fixpoint), over a body cut down to them; xs and consts it no longer reads are dropped.
    Graphs are pruned only to be run (a jitted call's replay, a loop's body), never
    differentiated, so a scan bound with its residuals (`_lin`) loses them: when none is
    read it is the scan of its plain body, else of its residual-extended body, whose
    residuals are then outputs like its ys (a backward graph that reads some residuals and
    not the forward's ys: those are never stored)."""
    lin = params.get("_lin")
    if lin is not None:
        n_user = params["num_carry"] + lin.num_ys
        params = {k: v for k, v in params.items() if k != "_lin"}
        if any(used[n_user:]):
            return _prune_scan(params, used)
        params["body"] = lin.body
        found = _prune_scan(params, used[:n_user])
        if found is None:
            return params, [True] * len(lin.body.invars + lin.body.constvars), \
                [True] * n_user + [False] * (len(used) - n_user)
        new, keep_in, keep_out = found
        return new, keep_in, keep_out + [False] * (len(used) - n_user)
    body, nc, nx = params["body"], params["num_carry"], params["num_xs"]
    need = {i for i, u in enumerate(used) if u}
    for _ in range(nc + 1):  # each round adds a carry or ends
        outs = [body.outvars[i] for i in sorted(need)]
        # The body's own scans computing only what these outputs read (a backward body's
        # inner backward scan, say, no longer summing a cotangent that was dropped here).
        cut = Graph(body.invars, body.constvars, body.consts, body.eqns, outs, body.name,
                    body.device)
        inner = prune_outputs(cut)
        eqns, live = used_vars(inner.eqns, outs)
        more = need | {i for i in range(nc) if body.invars[i] in live}
        if more == need:
            break
        need = more
    else:
        raise AssertionError("scan's prune: the carries read, fixpoint not reached")
    keep_in = ([i in need for i in range(nc)] + [v in live for v in body.invars[nc:]]
               + [v in live for v in body.constvars])
    if len(need) == len(body.outvars) and all(keep_in) and inner is cut:
        return None
    keep_out = [i in need for i in range(len(body.outvars))]
    carries = [i for i in range(nc) if i in need]
    consts = [c for c, k in zip(body.constvars, keep_in[nc + nx:]) if k]
    pruned = Graph([v for v, k in zip(body.invars, keep_in) if k], consts, [None] * len(consts),
                   eqns, [v for v, k in zip(body.outvars, keep_out) if k], body.name,
                   body.device)
    new = dict(params, body=canonical(pruned), num_carry=len(carries),
               num_xs=sum(keep_in[nc:nc + nx]))
    if params.get("sum_carries"):
        new["sum_carries"] = tuple(carries.index(i) for i in params["sum_carries"]
                                   if i in need)
        if not new["sum_carries"]:
            del new["sum_carries"]
    return new, keep_in, keep_out


def loop_reach(body, num_carry, out_flags):
    """The inputs of a loop over `body` (carries, xs, then its constants) that a cotangent
    of the flagged results (carries, then any ys) reaches, along the body's own paths."""
    floats = [is_differentiable_dtype(v.dtype) for v in body.invars[:num_carry]]
    return reached_inputs(body, out_flags[:len(body.outvars)], num_carry, floats)[0]


def carried_through(body, num_carry, out_flags):
    """The inputs (as loop_reach lists them) a cotangent of the flagged carries reaches
    through no step at all: each float carry its own init, nothing else."""
    floats = [bool(f) and is_differentiable_dtype(v.dtype)
              for f, v in zip(out_flags[:num_carry], body.invars[:num_carry])]
    return floats + [False] * (len(body.invars) + len(body.constvars) - num_carry)


def _reach_scan(params, out_flags):
    body, nc = params["body"], params["num_carry"]
    if params["length"] == 0:  # no step runs: the loop is the identity
        return carried_through(body, nc, out_flags)
    return loop_reach(body, nc, out_flags)


def _differentiated_scan(params, in_flags, settle=False):
    """The body with its custom calls as differentiated where the flagged inputs (carries,
    xs, constants) carry a derivative. A scan bound with its residuals (`_lin`) runs its
    linearization's body, made from such a body for the inputs its level differentiated;
    where other inputs reach other calls (a level around it: the custom call of an outer
    carry inside a gradient taken in a scan body), or where settled, it becomes a plain scan
    of that body (its residuals more ys), which the levels around linearize afresh."""
    body = differentiated_graph(params["body"], in_flags, params["num_carry"], settle)
    if body is params["body"]:
        return None
    return {**{k: v for k, v in params.items() if k != "_lin"}, "body": body}


def _depends_scan(params, in_flags):
    """The carries and ys that depend on the flagged inputs (carries, xs, constants)."""
    nc = params["num_carry"]
    if params["length"] == 0:  # no step runs: the carries are init
        return list(in_flags[:nc]) + [False] * (len(params["body"].outvars) - nc)
    return dependent_outputs(params["body"], in_flags, nc)


def _bound_with_residuals(params, traced):
    """scan's `keep_residuals` rule: the scan bound with its residuals (`_lin`), linearized as
    its VJP asks in a traced backward body, where every float input is a traced value and so
    needs a gradient; its residual outputs stacked over its steps. None for a scan bound so
    already, or of no step."""
    if params.get("_lin") is not None or not params["length"]:
        return None
    body, nc, nx = params["body"], params["num_carry"], params["num_xs"]
    avals = body.invars[nc:] + body.constvars
    needs = [t and is_differentiable_dtype(v.dtype) for t, v in zip(traced[nc:], avals)]
    lin = linearize(body, nc, needs[:nx], needs[nx:])
    extra = lin.aug_body.outvars[len(body.outvars):]
    return lin, dict(params, body=lin.aug_body, _lin=lin), [
        ((params["length"],) + tuple(v.shape), v.dtype, v.hint) for v in extra]


def _bind_recorded(*inputs, body, length, reverse, num_carry, num_xs, interpret=False,
                   sum_carries=(), compiler="numpy", _lin=None):
    """How a replayed scan equation (scanlib.remat) binds: through apply_scan, so that when
    it is recorded its residuals are kept at once instead of recomputed by its VJP. An
    equation already bound with its residuals (`_lin`) binds as it was."""
    if _lin is not None:
        outs = bind(scan_p, *inputs, body=body, length=length, reverse=reverse,
                    num_carry=num_carry, num_xs=num_xs, _lin=_lin,
                    **_mode(interpret, sum_carries, compiler))
        return _keep_residuals(outs, _lin, num_carry)
    nc, nx = num_carry, num_xs
    return apply_scan(body, inputs[:nc], inputs[nc:nc + nx], inputs[nc + nx:], length,
                      reverse, interpret, sum_carries, compiler)


# A scan's loop: what its outputs depend on besides its body and inputs.
_SAME_LOOP = ("length", "reverse", "num_carry", "num_xs", "interpret", "sum_carries", "compiler")


def _rebinding(params):
    """(what this scan computes, what the scan it extends computed): a scan bound with
    residuals (`_lin`) runs its linearization's body extended with more outputs, so it
    extends the scan of that body (see graph.merge_rebound)."""
    loop = tuple(params.get(k) for k in _SAME_LOOP)
    lin = params.get("_lin")
    extends = (id(lin.body), loop) if lin is not None and lin.aug_body is params["body"] \
        else None
    return (id(params["body"]), loop), extends


scan_p = Primitive("scan", _scan_impl, _scan_vjp, multiple_results=True, prune=_prune_scan,
                   reach=_reach_scan, differentiated=_differentiated_scan,
                   depends=_depends_scan, keep_residuals=_bound_with_residuals,
                   jvp=jvp.scan_jvp, vmap=batching.scan_vmap,
                   vmap_flags=batching.scan_vmap_flags, bind_recorded=_bind_recorded,
                   rebinding=_rebinding)


def _mode(interpret, sum_carries=(), compiler="numpy"):
    # Params given only when set, so that printed graphs show them only then; they are part
    # of the fingerprint, so a cached graph never changes a scan's mode.
    return {**({"interpret": True} if interpret else {}),
            **({"sum_carries": tuple(sum_carries)} if sum_carries else {}),
            **({"compiler": compiler} if compiler != "numpy" else {})}


def apply_scan(body, init, xs, consts, length, reverse, interpret=False, sum_carries=(),
               compiler="numpy"):
    """Bind scan_p; when the result will be differentiated, bind the body extended with the
    residuals and keep them alive on the tape node. Returns carry + ys (no residuals).
    `interpret`: run it (and the backward scan) with the reference interpreter.
    `sum_carries`: carries that are gradient accumulators (a backward scan's), which the loop
    may sum in another order than the loop's; a user's carry never is one.
    `compiler`: "numpy", or "numba" for the step loops of it and its backward scan."""
    nc, nx = len(init), len(xs)
    builder = current_builder()
    inputs = list(init) + list(xs) + list(consts)
    flags = [isinstance(a, Tensor) and a.requires_grad and a._trace is builder for a in inputs]
    if not (grad_enabled() and any(flags)):
        return bind(scan_p, *inputs, body=body, length=length, reverse=reverse,
                    num_carry=nc, num_xs=nx, **_mode(interpret, sum_carries, compiler))
    if not STATE.replaying_differentiated:  # custom calls as the loop computes them
        body = differentiated_graph(body, flags, nc)
    lin = linearize(body, nc, [_needs_grad(x) for x in xs], [_needs_grad(k) for k in consts])
    outs = _bind_linearized(inputs, lin, length, reverse, interpret, sum_carries, compiler)
    return outs[:nc + lin.num_ys]


def _keep_residuals(outs, lin, nc):
    """outs, the outputs of a scan bound with its residuals (`_lin`), its tape node now
    holding those its VJP reads: they must outlive the references of whoever bound it (a
    VJP that used only some of them, a user who reads only the carry), since the tape
    holds outputs weakly and the VJP reads them by position."""
    n_user = nc + lin.num_ys
    node = next((o._node for o in outs if o._node is not None), None)
    if node is not None:
        keep = list(outs[n_user:])
        keep += [outs[nc + r.index] for r in lin.residuals if r.kind is Kind.YS]
        node.saved = keep
    return outs


def linearized(body, consts):
    """The linearization of a scan of `body` without xs, for gradients to the carry and to
    the consts that need one (see record_scan)."""
    return linearize(body, len(body.outvars), [], [_needs_grad(k) for k in consts])


def record_scan(lin, init, consts, length, values, compiler="numpy"):
    """Record on the tape the scan of lin.aug_body over `length` steps from init (no xs),
    whose outputs, carry + residual stacks, were computed elsewhere: while_loop's gradient
    runs the loop once, saving what this scan's backward reads, as it finds its trip count.
    The node is the one bind(scan_p, ...) would record, so its VJP (any order) is scan's,
    its backward run by `compiler` as apply_scan's. Returns the carry Tensors."""
    inputs = list(init) + list(consts)
    params = dict(body=lin.aug_body, length=length, reverse=False, num_carry=len(init),
                  num_xs=0, _lin=lin, **_mode(False, (), compiler))
    outs = record(scan_p, inputs, params, [_read_only(v) for v in values], None, None)
    return _keep_residuals(outs, lin, len(init))[:len(init) + lin.num_ys]
