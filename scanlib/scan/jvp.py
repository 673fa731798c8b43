"""scan's forward-mode rule (`scan_p.jvp`): one scan whose carries are the primal carries and
the tangents of those that have one, and whose ys likewise (JAX's JVP of scan). Its body is
the scan body run by forward mode's evaluator (interpreters/forward.py), traced once per
body and set of tangents.

Imports tape, ops, the interpreters and scan.primitive (which imports this module to build
scan_p: it is read as a module, at call time).
"""

from __future__ import annotations

import numpy as np

from ..interpreters.forward import eval_with_tangents
from ..ops import zeros
from ..tape import Graph, GraphBuilder, Literal, Tensor, Var, is_differentiable_dtype, tracing
from ..tape.graph import dependent_values, used_vars
from . import primitive


def scan_jvp(ins, tangents, *, body, length, reverse, num_carry, num_xs, interpret=False,
              sum_carries=(), compiler="numpy", _lin=None):
    """(outs, tangents of outs) of a scan equation: one scan whose carries are the primal
    carries and the tangents of those that have one, and whose ys likewise (JAX's JVP of
    scan). The primal is computed again in it, so it replaces the forward scan."""
    nc, nx = num_carry, num_xs
    given = [t is not None for t in tangents]
    device = next((a.device for a in ins if isinstance(a, Tensor)), body.device)
    jb = jvp_body(body, nc, given[:nc], given[nc:nc + nx], given[nc + nx:], device)
    init, xs, consts = list(ins[:nc]), list(ins[nc:nc + nx]), list(ins[nc + nx:])
    d_init = [tangents[i] if tangents[i] is not None else _zeros_like(init[i])
              for i, m in enumerate(jb.carry_mask) if m]
    d_xs = [t for t in tangents[nc:nc + nx] if t is not None]
    d_consts = [t for t in tangents[nc + nx:] if t is not None]
    res = primitive.apply_scan(jb.graph, init + d_init, xs + d_xs,
                               consts + d_consts + jb.extra_consts,
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


def jvp_body(body, nc, c_given, x_given, k_given, device):
    """The JVP of `body` for tangents of the given carries, xs and constants; cached on the
    body graph (a loop traces and compiles it once) per device (its constants live there).
    while_loop's JVP (loops.py) uses it too, with no xs."""
    key = (nc, tuple(c_given), tuple(x_given), tuple(k_given), device)
    cache = body.__dict__.setdefault("_jvp_bodies", {})
    if key not in cache:
        cache[key] = _trace_jvp_body(body, nc, c_given, x_given, k_given, device)
    return cache[key]


def _tangent_carries(body, nc, c_given, x_given, k_given):
    """(which carries have a tangent in some step, the active values): those given one, and,
    to a fixpoint, those whose next value depends on an active value (graph.dependent_values:
    along a nested loop's own paths)."""
    floats = [is_differentiable_dtype(v.dtype) for v in body.invars[:nc]]
    given = [g and f for g, f in zip(c_given, floats)] + list(x_given) + list(k_given)
    flags, active = dependent_values(body, given, nc)
    return [h and f for h, f in zip(flags[:nc], floats)], active


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
        eval_with_tangents(body.eqns, env, tan)

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
