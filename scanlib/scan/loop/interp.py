"""The program interpreter: runs a LoopProgram at any stage as its sections say (constants
once, batched work per chunk on whole chunks, step work per step, accumulators by their
reduction), with plain calls and no generated code. Comparing it with the body's own
step-by-step interpreter (../interpret.py) after every pass names the pass that changed a
result; comparing it with the generated loop checks the printer.

Imports backends, tape and the loop IR.
"""

from __future__ import annotations

import numpy as np

from ... import backends
from . import inplace
from .ir import CHUNK, CONST, POST, PRE, STEP, RunningSum, SumAB, SumAtB, SumScatter, SumSteps, \
    SumStepsAxes, is_var


def run_program(prog, length, init, xs, consts, chunk=16):
    """(final carry, ys) of the loop `prog` describes, over arrays, in chunks of `chunk`."""
    xp = backends.xp_of(*init, *xs, *consts) if (init or xs or consts) else np
    nc = prog.num_carry
    env = dict(zip(prog.graph.constvars, consts))
    for n in prog.in_section(PRE):
        _run(prog.eqns[n], env, prog.eqns[n].prim.impl)
    carry = list(init)
    for rec in prog.in_place.values():  # the loop's own buffer, written into in place
        carry[rec.carry] = xp.array(carry[rec.carry], copy=True)
    ys = [[None] * length for _ in prog.y_out]
    starts = list(range(0, length, chunk))
    for t0 in (reversed(starts) if prog.reverse else starts):
        t1 = min(t0 + chunk, length)
        cenv = dict(env)
        cenv.update({v: x[t0:t1] for v, x in zip(prog.x_in, xs)})
        for n in prog.in_section(CHUNK):
            _run(prog.eqns[n], cenv, prog.batch[n])
        rows = {}  # per-step values, by step, for the work after the steps
        steps = range(t0, t1)
        for t in (reversed(steps) if prog.reverse else steps):
            senv = dict(env)
            senv.update(zip(prog.carry_in, carry))
            senv.update({v: x[t] for v, x in zip(prog.x_in, xs)})
            senv.update({v: a[t - t0] for v, a in cenv.items()
                         if v not in env and v not in prog.x_in})
            for n in prog.in_section(STEP):
                if n in prog.in_place:
                    _run_in_place(prog, n, senv)
                else:
                    _run(prog.eqns[n], senv, prog.eqns[n].prim.impl)
                if n in prog.copied:
                    senv[prog.eqns[n].outvars[0]] = xp.array(senv[prog.eqns[n].outvars[0]],
                                                             copy=True)
            for acc in prog.accumulators.values():
                if isinstance(acc.how, RunningSum):  # the add, in its own operand order
                    _run(prog.eqns[acc.add], senv, prog.eqns[acc.add].prim.impl)
            for v, value in senv.items():
                if prog.is_step_value(v) or v in prog.carry_out:
                    rows.setdefault(v, {})[t] = value
            carry = [_read(senv, v) if i not in prog.accumulators
                     or isinstance(prog.accumulators[i].how, RunningSum) else carry[i]
                     for i, v in enumerate(prog.carry_out)]
            for j, v in enumerate(prog.y_out):
                if not (is_var(v) and prog.section.get(prog.producer.get(v)) is POST):
                    ys[j][t] = _read(senv, v)
        penv = dict(cenv)
        penv.update({v: xp.stack([r[t] for t in steps]) for v, r in rows.items()})
        for n in prog.in_section(POST):
            _run(prog.eqns[n], penv, prog.batch[n])
        for j, v in enumerate(prog.y_out):
            if is_var(v) and prog.section.get(prog.producer.get(v)) is POST:
                for t in steps:
                    ys[j][t] = penv[v][t - t0]
        for i, acc in prog.accumulators.items():
            if isinstance(acc.how, SumScatter):
                how = acc.how
                batched = [is_var(v) and prog.kind[v] != CONST for v in how.arrays]
                carry[i] = inplace.scatter_sum_reference(
                    carry[i], _read(penv, how.g), [_read(penv, v) for v in how.arrays],
                    how.index, batched, is_var(how.g) and prog.kind[how.g] != CONST)
            elif not isinstance(acc.how, RunningSum):
                carry[i] = carry[i] + _chunk_sum(acc.how, penv, xp)
    # No casts: a reduction that changed a dtype must show in the result.
    stacked = [xp.stack([xp.asarray(y) for y in col]) if length
               else xp.empty((0,) + v.shape, v.dtype) for col, v in zip(ys, prog.y_out)]
    return [xp.asarray(c) for c in carry[:nc]], stacked


def _run_in_place(prog, n, env):
    """In-place update n: its rows written into the buffer it reads, which is its result."""
    eqn, rec = prog.eqns[n], prog.in_place[n]
    if rec.scatter is None:
        buf = eqn.invars[0]
        inplace.set_rows(env[buf], *[_read(env, v) for v in eqn.invars[1:]], **eqn.params)
    else:
        s = prog.eqns[rec.scatter]
        buf = next(v for v in eqn.invars if v is not s.outvars[0])
        inplace.add_rows(env[buf], *[_read(env, v) for v in s.invars], **s.params)
    env[eqn.outvars[0]] = env[buf]


def _read(env, v):
    return v.value if not is_var(v) else env[v]


def _run(eqn, env, fn):
    out = fn(*[_read(env, v) for v in eqn.invars],
             **({} if fn is not eqn.prim.impl else eqn.params))
    env.update(zip(eqn.outvars, out if eqn.prim.multiple_results else (out,)))


def _chunk_sum(how, env, xp):
    """The sum over a chunk's steps that an accumulator's reduction stands for."""
    if isinstance(how, SumSteps):
        return env[how.term].sum(axis=0)
    if isinstance(how, SumStepsAxes):
        return env[how.x].sum(axis=(0,) + tuple(a + 1 for a in how.axes))
    if isinstance(how, SumAtB):
        return xp.einsum("tmn,tmk->nk", env[how.a], env[how.q])
    if isinstance(how, SumAB):
        return xp.einsum("tij,tjk->ik", env[how.p], env[how.q])
    raise TypeError(f"no meaning for the reduction {how!r}")
