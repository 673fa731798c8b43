"""How an equation of a scan body runs on a whole chunk of steps at once: the primitive's own
batching rule (declared with it, see ops/batching.py), and the variant that writes into a
given array. A primitive without a rule simply runs per step.

Imports backends and ops.
"""

from __future__ import annotations

from ... import backends
from ...ops.batching import aligned, rows_times


def batched_impl(eqn, batched, shapes):
    """A function computing eqn for all steps at once, or None if it has no batching rule."""
    prim = eqn.prim
    if prim.multiple_results or prim.batch is None:
        return None
    return prim.batch(prim, eqn.params, batched, shapes, eqn.outvars[0].shape)


def batched_into(eqn, batched, shapes):
    """Like batched_impl, but the function writes its result into a given array:
    fn(*args, out=array of the batched result's shape). None where no ufunc or matmul can."""
    prim = eqn.prim
    if prim.elementwise and prim.ufunc and not eqn.params:
        ufunc, fix = prim.ufunc, aligned(batched, shapes, len(eqn.outvars[0].shape))
        into = prim.out_impl  # where the ufunc is not quite impl (pow's)
        if into is None:
            def into(*args, out):
                return getattr(backends.xp_of(out), ufunc)(*args, out=out)
        if fix is None:
            return into

        def run(*args, out):
            return into(*fix(args), out=out)
        return run
    if prim.ufunc and not prim.elementwise:  # matmul: its rule, or the ufunc on all steps
        fn = batched_impl(eqn, batched, shapes)
        if fn is rows_times:
            return rows_times
        if fn is not None:
            ufunc = prim.ufunc
            return lambda *args, out: getattr(backends.xp_of(out), ufunc)(*args, out=out)
    return None
