"""The reverse walk over a graph's equations (JAX's backward_pass over a jaxpr): each
equation whose outputs hold a cotangent, last first, gives its inputs theirs by its
primitive's VJP rule. Scan's linearization (the backward body) and checkpoint's VJP inside a
trace walk their graphs with it; the tape's walk (tape/backward.py) is the same algorithm
over recorded nodes instead of equations.

Imports nothing of scanlib: the rules are the primitives'.
"""

from __future__ import annotations


def walk_back(eqns, read, ct, accumulate):
    """Walk eqns backwards. `ct` maps variables to cotangents (`in` and `pop(v, None)`); an
    equation none of whose outputs is in it is skipped (an absent cotangent is never a zero),
    the others' are popped and passed to the rule with the values `read(v)` gives for its
    outputs and inputs, and `accumulate(v, g)` receives each input's cotangent (None: none).
    What ct holds afterwards are the cotangents of the graph's inputs and constants."""
    for eqn in reversed(eqns):
        if not any(v in ct for v in eqn.outvars):
            continue
        gs = [ct.pop(v, None) for v in eqn.outvars]
        if eqn.prim.vjp is None:
            continue
        ins = [read(v) for v in eqn.invars]  # first: reading may trace (scan's residuals)
        in_cts = eqn.prim.cotangents(gs, [read(v) for v in eqn.outvars], ins, eqn.params)
        for v, g in zip(eqn.invars, in_cts):
            accumulate(v, g)
