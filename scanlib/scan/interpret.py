"""The reference interpreter: a scan body run step by step, one primitive at a time, with no
schedule, batching, fusion or generated code. It is the compiled loop's oracle in the tests,
and what `scan(..., interpret=True)` runs for a user who suspects the compiler.

Imports backends and tape.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..tape.graph import eval_graph


def run_interpreted(body, length, init, xs, consts, reverse, num_carry):
    """(final carry, ys) of the loop that defines scan, over arrays."""
    xp = backends.xp_of(*init, *xs, *consts) if (init or xs or consts) else np
    carry = list(init)
    y_vars = body.outvars[num_carry:]
    ys = [[None] * length for _ in y_vars]
    for t in (reversed(range(length)) if reverse else range(length)):
        try:
            outs = eval_graph(body, carry + [x[t] for x in xs], consts)
        except IndexError as e:
            raise IndexError(
                f"scan: an index inside f is out of range at step t={t} (of T={length} "
                f"steps): {e}. NumPy raises here, where JAX under jit clamps the index "
                "silently: read with scanlib.take(x, i, axis=..., mode='clip') to clamp it "
                "as JAX does, or fix the index (or the scan's length).") from None
        carry = outs[:num_carry]
        for j, y in enumerate(outs[num_carry:]):
            ys[j][t] = y
    carry = [_as_array(c, v, xp) for c, v in zip(carry, body.outvars[:num_carry])]
    stacked = [xp.stack([_as_array(y, v, xp) for y in rows]) if length
               else xp.empty((0,) + v.shape, v.dtype) for rows, v in zip(ys, y_vars)]
    return carry, stacked


def _as_array(value, var, xp):
    """A step's result as an array of its variable's dtype (a Literal output is a Python
    number; NumPy returns 0-d results as scalars)."""
    return xp.asarray(value, dtype=getattr(var, "dtype", None))
