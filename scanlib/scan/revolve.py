"""`scan(..., checkpoint=("revolve", s))` on the tape: the primitive `revolve_scan`. Its forward
is the plain compiled loop, saving nothing but its inputs; its VJP runs Griewank's binomial
schedule (schedule.py) over arrays: from a kept carry it advances without residuals to the
next carry it keeps, and reverses one step at a time (that step's residuals only), so at most
s carries (along the recursion) and one step's residuals are alive at once.

Its VJP is written with the tape's own operations (scans, the walk), so it is differentiable
again: when the walk records (a second-order derivative) everything it computes is recorded,
and the memory bound no longer holds for that derivative. Inside a trace (a scan body, jit,
vmap, jvp) the schedule runs as nested checkpointed scans instead (api.py); a scan recorded
here whose gradient is then traced (vmap of a vjp function) takes scan's own VJP.

Imports tape, ops and the scan modules below it.
"""

from __future__ import annotations

from ..ops import concatenate, zeros
from ..ops import elementwise as ew
from ..ops.primitive import Primitive, bind
from ..remat import differentiable, walk_start
from ..tape import Graph, Tensor, backward_pass, current_builder, enable_grad, grad_enabled
from ..tape.graph import used_vars
from .cache import canonical
from .primitive import (_depends_scan, _differentiated_scan, _mode, _scan_impl, _scan_vjp,
                        apply_scan, loop_reach)
from .schedule import Revolve, binomial_split


def revolve_scan(body, init, xs, consts, length, snapshots, interpret=False,
                 compiler="numpy"):
    """carry + ys of the scan of `body` (no reverse: the caller flips xs), differentiated by
    the binomial schedule with `snapshots` kept carries."""
    return bind(revolve_p, *init, *xs, *consts, body=body, length=length, snapshots=snapshots,
                repetitions=Revolve(snapshots).repetitions(length), num_carry=len(init),
                num_xs=len(xs), **_mode(interpret, (), compiler))


def _impl(*values, body, length, snapshots, repetitions, num_carry, num_xs, **mode):
    return _scan_impl(*values, body=body, length=length, reverse=False, num_carry=num_carry,
                      num_xs=num_xs, **mode)


def _vjp(cts, outs, *inputs, _saved, body, length, snapshots, repetitions, num_carry, num_xs,
         interpret=False, compiler="numpy"):
    if current_builder() is not None:
        # The walk is being traced (vmap or jit of a vjp function recorded outside): scan's
        # own VJP, which traces (it saves every step's residuals, as such a trace would).
        return _scan_vjp(cts, outs, *inputs, _saved=None, body=body, length=length,
                         reverse=False, num_carry=num_carry, num_xs=num_xs,
                         **_mode(interpret, (), compiler))
    nc, nx = num_carry, num_xs
    init, xs, consts = inputs[:nc], inputs[nc:nc + nx], inputs[nc + nx:]
    recording = grad_enabled()  # a higher-order derivative: record the schedule
    on_tape = any(isinstance(x, Tensor) and x.requires_grad for x in inputs)

    def wanted(x):  # as checkpoint's VJP: on the tape, only what requires grad
        return differentiable(x) and (x.requires_grad or not on_tape)

    mode = dict(interpret=interpret, compiler=compiler)
    k_wanted = [wanted(k) for k in consts]
    x_wanted = [wanted(x) for x in xs]
    k_starts = [walk_start(k, recording) if w else k for k, w in zip(consts, k_wanted)]
    k_cts = [None] * len(consts)
    x_rows = [[None] * length if w else None for w in x_wanted]
    carries_only = _carries_only(body, nc)

    def advance(carry, a, b):  # steps a..b-1 without residuals (recorded when recording)
        return apply_scan(carries_only, carry, [x[a:b] for x in xs], consts, b - a, False,
                          **mode)

    def reverse_step(carry, t, ct):
        """The cotangent of step t's carry, given its result's; adds the consts' and keeps
        xs[t]'s."""
        c_starts = [walk_start(c, recording) if differentiable(c) else c for c in carry]
        rows = [x[t:t + 1] for x in xs]
        x_starts = [walk_start(r, recording) if w else r for r, w in zip(rows, x_wanted)]
        with enable_grad():
            step = apply_scan(body, c_starts, x_starts, k_starts, 1, False, **mode)
        roots, root_cts = [], []
        for o, g in zip(step[:nc], ct):
            if g is not None and o.requires_grad:
                roots.append(o)
                root_cts.append(g)
        for o, g in zip(step[nc:], cts[nc:]):
            if g is not None and o.requires_grad:
                roots.append(o)
                root_cts.append(g[t:t + 1])
        targets = ([c for c in c_starts if differentiable(c)]
                   + [x for x, w in zip(x_starts, x_wanted) if w]
                   + [k for k, w in zip(k_starts, k_wanted) if w])
        found = iter(backward_pass(roots, root_cts, targets=targets, create_graph=recording)
                     if roots else [None] * len(targets))
        new_ct = [next(found) if differentiable(c) else None for c in c_starts]
        for j, w in enumerate(x_wanted):
            if w:
                x_rows[j][t] = next(found)
        for l, w in enumerate(k_wanted):
            if w:
                g = next(found)
                if g is not None:
                    k_cts[l] = g if k_cts[l] is None else ew.add(k_cts[l], g)
        return new_ct

    def reverse(carry, a, b, s, r, ct_box):
        """The cotangent of the carry at step a, given the one at b (taken out of ct_box,
        so that the frames up the recursion do not keep every level's cotangent alive): the
        range a..b-1 reversed with s snapshots and r recomputations (schedule.Revolve)."""
        if b - a <= 1:
            return reverse_step(carry, a, ct_box.pop()) if b - a == 1 else ct_box.pop()
        m = binomial_split(b - a, s, r)
        mid_box = [reverse(advance(carry, a, a + m), a + m, b, s - 1, r, ct_box)]
        return reverse(carry, a, a + m, s, r - 1, mid_box)

    ct_init = reverse(list(init), 0, length, snapshots, repetitions, [list(cts[:nc])])
    result = [g if wanted(x) else None for g, x in zip(ct_init, init)]
    for x, rows in zip(xs, x_rows):
        result.append(None if rows is None else concatenate(
            [g if g is not None else zeros((1,) + tuple(x.shape[1:]), x.dtype, x.device)
             for g in rows], axis=0) if rows else None)
    return result + [g if w else None for g, w in zip(k_cts, k_wanted)]


def _carries_only(body, nc):
    """body without its ys (advancing needs the carries only), cached on body."""
    found = body.__dict__.get("_carries_only")
    if found is None:
        outvars = body.outvars[:nc]
        found = body._carries_only = canonical(Graph(
            body.invars, body.constvars, [None] * len(body.constvars),
            used_vars(body.eqns, outvars)[0], outvars, body.name, body.device))
    return found


# Its body, its outputs' dependence and its custom calls' rules are a scan's.
revolve_p = Primitive("revolve_scan", _impl, _vjp, multiple_results=True,
                     reach=lambda params, flags: loop_reach(params["body"],
                                                            params["num_carry"], flags),
                     differentiated=_differentiated_scan, depends=_depends_scan)
