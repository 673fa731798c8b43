"""scan's batching rule (`scan_p.vmap`): one scan over batched carries, its body the scan body
run by vmap's interpreter (interpreters/batching.py) on the batch, traced once per call. A
carry is batched when its init is, or when the body makes it so from batched inputs.

Imports pytree, tape, tracing, the interpreters and scan.primitive (which imports this
module to build scan_p: it is read as a module, at call time).
"""

from __future__ import annotations

from .. import pytree
from ..interpreters.batching import batched_outputs, broadcast_batch, evaluate, move_axis
from ..tape import Tensor
from ..tracing import trace_function
from . import primitive
from .cache import canonical


def scan_vmap_flags(params, flags):
    """Batched flags of a scan's carries and ys: a carry is batched when its init is, or when
    the body makes it so from batched inputs (repeated until nothing changes, as in JAX: at
    most once per carry)."""
    nc, nx, body = params["num_carry"], params["num_xs"], params["body"]
    carry, xs, consts = list(flags[:nc]), list(flags[nc:nc + nx]), list(flags[nc + nx:])
    for _ in range(nc + 1):
        out = batched_outputs(body, carry + xs, consts)
        grown = [c or o for c, o in zip(carry, out[:nc])]
        if grown == carry:
            return carry + out[nc:]
        carry = grown
    raise AssertionError("vmap of scan: batched carries, fixpoint not reached")


def scan_vmap(values, batched, B, *, body, length, reverse, num_carry, num_xs,
              interpret=False, sum_carries=(), compiler="numpy", _lin=None):
    """(outs, batched flags) of a scan equation on a batch: the scan of the batched body,
    xs batched along their second axis (the first is time)."""
    nc, nx = num_carry, num_xs
    mode = {"interpret": interpret, "sum_carries": sum_carries, "compiler": compiler}
    flags = scan_vmap_flags(dict(body=body, num_carry=nc, num_xs=nx), batched)
    carry_b, xs_b, k_b, y_b = flags[:nc], batched[nc:nc + nx], batched[nc + nx:], flags[nc:]
    init = [broadcast_batch(x, B) if c and not b else x
            for x, c, b in zip(values[:nc], carry_b, batched[:nc])]
    xs = [move_axis(x, 0, 1) if b else x for x, b in zip(values[nc:nc + nx], xs_b)]
    consts = values[nc + nx:]

    def step(inputs):
        outs, out_b = evaluate(body, inputs, carry_b + xs_b, consts, k_b, B)
        assert out_b[nc:] == y_b and all(c or not o for c, o in zip(carry_b, out_b[:nc]))
        return [broadcast_batch(o, B, v.dtype) if c and not b else o
                for o, b, c, v in zip(outs[:nc], out_b, carry_b, body.invars)] + outs[nc:]

    avals = [((B,) + v.shape if b else v.shape, v.dtype)
             for v, b in zip(body.invars, carry_b + xs_b)]
    # The device of the data, not body.device: a cached body serves every device.
    device = next(x.device for x in values if isinstance(x, Tensor))
    graph, _, _ = trace_function(step, avals, pytree.flatten([0] * len(avals))[1],
                                 device=device, hints=[v.hint for v in body.invars],
                                 name=body.name, interpret=interpret)
    outs = primitive.apply_scan(canonical(graph), init, xs, graph.consts, length, reverse,
                                **mode)
    ys = [move_axis(y, 1, 0) if b else y for y, b in zip(outs[nc:], y_b)]
    return outs[:nc] + ys, carry_b + y_b
