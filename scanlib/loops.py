"""The machinery of while_loop (control.py has the API): cond_fun and body_fun's graphs run
as one generated Python loop on arrays, and, inside a traced body, the primitive `while_p`,
whose VJP `while_grad_p` recomputes the inner loop as a scan of its trip count from its input
and is itself differentiable (any order).

Imports backends, tape, ops and scan.primitive (the layers below scanlib/__init__).
"""

from __future__ import annotations

import contextlib

import time
import warnings

import numpy as np

from . import backends, generated, logs
from .interpreters.batching import batched_graph, batched_outputs, broadcast_batch
from . import ops
from .ops import zeros
from .ops.elementwise import where
from .ops.structural import concatenate_p, reshape_p, scatter_add_p, scatter_set_p
from .ops.primitive import Primitive
from .scan.api import default_compiler
from .scan import jvp as scan_jvp
from .scan.cache import canonical
from .scan.executor import NumbaFallbackWarning
from .scan.primitive import apply_scan, carried_through, loop_reach
from .remat import replay, vjp_by_replay
from .tape import (Literal, Tensor, Var, backward_pass, current_builder, enable_grad,
                   is_differentiable_dtype, no_grad)
from .tape.graph import (Graph, dependent_values, differentiated_graph, eval_graph, on_stand_ins,
                         stand_ins_for, used_vars)
from .tape.backward import watching
from .tape.levels import own_levels


_numba_log = logs.get("numba")


# --- the loop on arrays ---------------------------------------------------------------------
def counted_carries(cond, body, nc):
    """The carries the trip count depends on: those cond reads and, to a fixpoint, those the
    body computes them from. Running only these finds the same count, often far cheaper."""
    need = {i for i, v in enumerate(cond.invars) if v in used_vars(cond.eqns, cond.outvars)[1]}
    for _ in range(nc + 1):  # each round adds a carry or ends
        live = used_vars(body.eqns, [body.outvars[i] for i in need])[1]
        more = need | {i for i, v in enumerate(body.invars) if v in live}
        if more == need:
            return tuple(sorted(need))
        need = more
    raise AssertionError("while_loop's counted carries: fixpoint not reached")


def runner(cond, body, carries, collect=()):
    """The loop over the given carries as one generated Python function (cached on body):
    `run(carry values, cond consts, body consts, max_steps) -> (carry values, n, rows)`. Its
    statements call each equation's impl, as bind does outside a trace, but without bind's
    per-op work; only the equations the given carries need are run. `collect`: indices of
    body outputs beyond the carries whose value at every step is kept, one entry per index
    in `rows` (the residuals a scan's backward reads, for while_loop's gradient): a list of
    the steps' values from the NumPy loop, their stacked array from a numba kernel."""
    cache = body.__dict__.setdefault("_while_runners", {})
    compiler = default_compiler()
    key = (cond, carries, collect, compiler)
    if key not in cache:
        run = _generate(cond, body, carries, collect)
        cache[key] = (_Compiled(cond, body, carries, run, compiler == "auto", collect)
                      if compiler in ("numba", "auto") else run)
    return cache[key]


class _Compiled:
    """The loop as a numba kernel (scan/loop/native_while.py) where every statement has a
    rule and numba's types are proved to be the graph's, else the NumPy loop `numpy_run`
    (with a NumbaFallbackWarning, once); a step of large values, where NumPy is faster
    (native.numpy_loop_is_faster, as for a scan), runs as the NumPy loop without one. An
    error the kernel raises where NumPy's loop raises its own (or none) is left to that
    loop, which runs the call again."""

    def __init__(self, cond, body, carries, numpy_run, background=False, collect=()):
        from .scan.loop import native, native_while

        self.numpy_run, self.kernel, self.body, self.choice = numpy_run, None, body, None
        self.quiet = background  # "auto": compiled in the background, fallbacks only logged
        why = None if background else native.missing()  # (as in scan's executor)
        if why is not None:
            raise ImportError(f"while_loop: {why}")
        faster = native.numpy_loop_is_faster(cond.eqns + body.eqns,
                                             [body.invars[i] for i in carries],
                                             measured=background)
        if faster is not None:  # as scan's executor decides for a scan's step
            _numba_log.info("while_loop body %r runs as the NumPy loop: %s, where the NumPy "
                            "loop is faster", body.name, faster)
            return
        try:
            self.kernel, self.source = native_while.build(cond, body, carries, background,
                                                          collect)
        except native.Unsupported as e:
            self._fall_back(f"it has {e}")
        # "auto": the kernel or the NumPy loop, whichever measures faster a step
        self.choice = (native.TierChoice(self.kernel.kernel.what)
                       if background and self.kernel is not None else None)

    def _fall_back(self, why):
        self.kernel = None
        if self.quiet:
            _numba_log.info("while_loop body %r runs as the NumPy loop: numba does not "
                            "compile it: %s", self.body.name, why)
            return
        message = (f"while_loop: the loop compiler 'numba' does not compile the loop of body "
                   f"{self.body.name!r}: {why}. It runs as the NumPy loop (the same values, "
                   "slower).")
        _numba_log.warning("%s", message)
        warnings.warn(message, NumbaFallbackWarning, stacklevel=5)

    def __call__(self, carry, q, k, max_steps):
        choice, start, raised = self.choice, time.perf_counter(), False
        if self.kernel is not None and not self.kernel.kernel.waiting() and \
                (choice is None or choice.kernel_turn()) and backends.xp_of(*carry, *q, *k) is np:
            from .scan.loop import native, native_while

            if not native.numpy_errstate_forbids():
                try:
                    out = self.kernel(carry, q, k, max_steps)
                    if choice is not None:
                        choice.record("kernel", time.perf_counter() - start, out[1])
                    return out
                except native_while.TooManySteps:
                    raise too_many_steps(max_steps) from None
                except native.NotReady:  # compiling in the background
                    pass
                except native.NotProved as e:
                    self._fall_back(str(e))
                except native.KERNEL_ERRORS:  # NumPy's loop raises its own error (or not)
                    raised = True
        numpy_start = time.perf_counter()
        out = self.numpy_run(carry, q, k, max_steps)
        if choice is not None and self.kernel is not None:
            # A kernel that raised and left the call to NumPy's loop cost both.
            choice.record(*("kernel", time.perf_counter() - start) if raised else
                          ("numpy", time.perf_counter() - numpy_start), out[1])
        return out


def _generate(cond, body, carries, collect):
    env, names = {"too_many_steps": too_many_steps}, {}
    for i in carries:
        names[cond.invars[i]] = names[body.invars[i]] = f"c{i}"
    names.update({v: f"q{j}" for j, v in enumerate(cond.constvars)})
    names.update({v: f"k{j}" for j, v in enumerate(body.constvars)})

    def ref(v):
        if isinstance(v, Literal):
            env[f"_l{len(env)}"] = v.value
            return f"_l{len(env) - 1}"
        return names[v]

    def statements(graph, outvars, tag):
        lines = []
        for n, eqn in enumerate(used_vars(graph.eqns, outvars)[0]):
            for j, v in enumerate(eqn.outvars):
                names[v] = f"{tag}{n}_{j}"
            args = [ref(v) for v in eqn.invars]
            lhs = ", ".join(names[v] for v in eqn.outvars) + (
                "," if eqn.prim.multiple_results else "")
            written = _static_scatter(eqn, args, lhs, env, f"_i{tag}{n}")
            if written is not None:
                lines += written
                continue
            template = eqn.prim.inline_for(eqn.params) or _namespace_call(eqn)
            if template is not None:
                lines.append(f"{lhs} = {template.format(*args)}")
                continue
            if eqn.prim.ufunc and not eqn.params:  # its impl is that ufunc: skip the lookup
                lines.append(f"{lhs} = xp.{eqn.prim.ufunc}({', '.join(args)})")
                continue
            env[f"_f{tag}{n}"], env[f"_p{tag}{n}"] = eqn.prim.impl, eqn.params
            extra = f", **_p{tag}{n}" if eqn.params else ""
            lines.append(f"{lhs} = _f{tag}{n}({', '.join(args)}{extra})  # {eqn.prim.name}")
        return lines

    new = [body.outvars[i] for i in carries]
    rows = [body.outvars[i] for i in collect]
    cs = "".join(f"c{i}, " for i in carries)
    qs = "".join(f"q{j}, " for j in range(len(cond.constvars)))
    ks = "".join(f"k{j}, " for j in range(len(body.constvars)))
    rs = "".join(f"r{m}, " for m in range(len(rows)))
    lines = [f"def run(xp, {cs}{qs}{ks}max_steps):", "    n = 0"]
    lines += [f"    r{m} = []" for m in range(len(rows))]
    lines += ["    while True:"]
    lines += ["        " + s for s in statements(cond, cond.outvars, "a")]
    lines += [f"        if not {ref(cond.outvars[0])}:", f"            return ({cs}), n, ({rs})",
              "        if n == max_steps:", "            raise too_many_steps(max_steps)"]
    lines += ["        " + s for s in statements(body, new + rows, "b")]
    lines += [f"        r{m}.append({ref(v)})" for m, v in enumerate(rows)]
    if carries:
        lines.append(f"        {cs}= {', '.join(ref(v) for v in new)},")
    lines.append("        n += 1")
    source = "\n".join(lines)
    generated.exec_source(source, f"while_loop {body.name}", env)
    run = env["run"]

    def run_loop(carry, q, k, max_steps):
        return run(backends.xp_of(*carry, *q, *k), *carry, *q, *k, max_steps)
    run_loop.source = source
    return run_loop


def _namespace_call(eqn):
    """The template of an equation whose impl is one call of the array namespace or one
    method, written with the loop's own `xp` (the impl would look it up at every step), or
    None. A reshape to the shape its input has is that input."""
    prim, params, x = eqn.prim, eqn.params, eqn.invars[0] if eqn.invars else None
    if prim is reshape_p and isinstance(x, Var):
        shape = tuple(params["shape"])
        return "{0}" if tuple(x.shape) == shape else f"{{0}}.reshape({shape!r})"
    if prim is where:
        return "xp.where({0}, {1}, {2})"
    if prim is concatenate_p:
        ins = "".join(f"{{{i}}}, " for i in range(len(eqn.invars)))
        return f"xp.concatenate(({ins}), axis={int(params['axis'])})"
    return None


def _static_scatter(eqn, args, lhs, env, index_name):
    """The statements of a scatter_add or scatter_set at an index without arrays, its impl's
    own (zeros with g written in, or a copy of x with v written in) without the call and
    the index filled at every step; None for any other equation."""
    prim = eqn.prim
    if prim not in (scatter_add_p, scatter_set_p) or len(eqn.invars) != (
            1 if prim is scatter_add_p else 2) or isinstance(eqn.invars[0], Literal):
        return None
    env[index_name] = tuple(eqn.params["index"])
    out = lhs.rstrip(",")
    if prim is scatter_add_p:
        first = f"{out} = xp.zeros({tuple(eqn.params['shape'])!r}, dtype={args[0]}.dtype)"
        return [first, f"{out}[{index_name}] = {args[0]}"]
    return [f"{out} = {args[0]}.copy()", f"{out}[{index_name}] = {args[1]}"]


def as_arrays(values, outvars):
    """Loop results as arrays of their variables' dtypes (NumPy makes 0-d results scalars)."""
    xp = backends.xp_of(*values)
    return [xp.asarray(a, dtype=v.dtype) for a, v in zip(values, outvars)]


# --- the primitives: a while_loop inside a traced body, and its derivatives -----------------
# At trace time (a scan body, make_graph) the inputs are stand-in zeros, on which the loop
# may never stop; and a scan traced inside a body runs its compiled loop on such stand-ins
# too, calling impl directly. So under any trace, impl only says what it would return.

def _while_impl(*values, cond, body, num_carry, num_cond_consts, max_steps):
    nc, nq = num_carry, num_cond_consts
    device = backends.device_of(values[0]) if values else "cpu"
    if on_stand_ins():
        carry, n = [_zeros(v, device) for v in body.outvars[:nc]], 0
    else:
        carry, n, _ = runner(cond, body, tuple(range(nc)))(
            values[:nc], values[nc:nc + nq], values[nc + nq:], max_steps)
        carry = as_arrays(carry, body.outvars[:nc])
    return carry + [backends.asarray_on(n, device, np.int64)]


def _zeros(v, device):
    with backends.on_device(device):
        return backends.namespace(device).zeros(v.shape, v.dtype)


def _while_vjp(cts, outs, *inputs, _saved, cond, body, num_carry, num_cond_consts, max_steps):
    """The cotangents of init_val and body_fun's tensors: the VJP of a scan of n steps (n the
    trip count output), as a primitive that recomputes that scan from the loop's input."""
    nc, nq = num_carry, num_cond_consts
    if all(c is None for c in cts[:nc]):
        return [None] * len(inputs)
    n = outs[nc] if outs[nc] is not None else _saved[0] if _saved else None
    if n is None:  # bound where nobody kept the count (a checkpoint's replay, vmap): recount
        with no_grad():
            n = while_p(*inputs, cond=cond, body=body, num_carry=nc, num_cond_consts=nq,
                        max_steps=max_steps)[nc]
    count = _count(n)
    if count is not None and current_builder() is None:
        return _tape_while_vjp(cts, inputs, body, nc, nq, count)
    # Inside a trace: an absent cotangent is passed as zeros but marked absent (`given`):
    # the recomputed scan's VJP then gets none for it, as the loop would (a zero meeting an
    # infinite partial is NaN).
    given = tuple(c is not None for c in cts[:nc])
    ct = [_ct_or_zeros(c, v, inputs) for c, v in zip(cts[:nc], body.outvars[:nc])]
    primals = list(inputs[:nc]) + list(inputs[nc + nq:]) + [n]
    g = _scan_grads(ct, primals, body, nc, (nc,), (given,), wrt=_differentiated_inputs(primals))
    # Inputs no path from a present cotangent reaches get none (the derivative gives zeros).
    reached = _reached_in_n_steps(body, nc, list(given), count)
    g = [x if r else None for x, r in zip(g[:-1], reached)]
    return g[:nc] + [None] * nq + g[nc:]


def _tape_while_vjp(cts, inputs, body, nc, nq, n):
    """On the tape (a checkpoint's replay, a graph run eagerly) the trip count is known:
    differentiate the scan of n steps itself (as checkpoint's VJP its replay), so every
    order is the tape's and inputs no path reaches get none, exactly as in the Python loop.
    The cond's constants get none."""
    def run(starts):
        return apply_scan(body, starts[:nc], [], starts[nc + nq:], n, False,
                          compiler=default_compiler()) if n else starts[:nc]
    return vjp_by_replay(run, inputs, cts[:nc], skip=range(nc, nc + nq))


def _count(n):
    """The trip count as an int, or None inside a trace (known only when the loop runs)."""
    if isinstance(n, Tensor) and n._trace is not None:
        return None
    return int(backends.to_numpy(n._value if isinstance(n, Tensor) else n))


def _reached_in_n_steps(body, nc, out_flags, n=None):
    """The inputs (carries, then the body's constants) a cotangent of the flagged carries
    reaches through n steps of body. After 0 steps the loop is the identity: each flagged
    carry reaches its own init and nothing else; after n >= 1 steps, along the body's paths
    (loop_reach). With n unknown (None: a trace), both, since giving an input that may be
    reached none would drop its gradient (cond False at once is an everyday case)."""
    identity = carried_through(body, nc, out_flags)
    if n == 0:
        return identity
    steps = loop_reach(body, nc, out_flags[:nc])
    return steps if n is not None else [a or b for a, b in zip(steps, identity)]


def _ct_or_zeros(ct, like, inputs):
    device = next((x.device for x in inputs if isinstance(x, Tensor)), "cpu")
    return ct if ct is not None else zeros(like.shape, like.dtype, device)


def _scan_grads(ct, primals, body, nc, num_cts, given, lanes=False, wrt=None):
    """Bind the derivative primitive on (ct, primals); one cotangent per primal (None for an
    integer one). given[k][i]: whether the i-th cotangent of level k is present. `lanes`:
    every input has a batch axis first and n holds each lane's trip count (vmap's). `wrt`:
    see _derivative."""
    extra = ({"lanes": True} if lanes else {}) | ({"wrt": wrt} if wrt is not None else {})
    found = iter(while_grad_p(*ct, *primals, body=body, num_carry=nc, num_cts=num_cts,
                              given=given, **extra))
    return [next(found) if is_differentiable_dtype(x.dtype) else None for x in primals]


def _differentiated_inputs(primals):
    """The first level's `wrt` (see _derivative): which primals its walk differentiates (a
    trace's values require grad only for a derivative taken in that trace), or None where
    that is all the float ones."""
    flags = tuple(isinstance(x, Tensor) and x.requires_grad for x in primals)
    floats = tuple(is_differentiable_dtype(x.dtype) for x in primals)
    return None if flags == floats or not any(flags) else (flags,)


def _grad_impl(*values, body, num_carry, num_cts, given, lanes=False, wrt=None):
    """D_k(values), k = len(num_cts): D_0(init, consts, n) is the carry after n steps of
    body, and D_k(ct, x) = vjp(D_(k-1), x)(ct), where ct has num_cts[0] entries."""
    primals = values[num_cts[0]:]
    if on_stand_ins():
        device = backends.device_of(values[0])
        return [_zeros(x, device) for x in primals if is_differentiable_dtype(x.dtype)]
    xs = [Tensor(v, is_differentiable_dtype(v.dtype)) for v in values]
    with enable_grad(), own_levels():
        return [g._value for g in _derivative(xs, body, num_carry, num_cts, given, False,
                                              lanes, wrt)]


def _derivative(xs, body, nc, num_cts, given, create_graph, lanes=False, wrt=None):
    """D_k(xs) on Tensors (see _grad_impl), differentiable when create_graph; an absent
    cotangent (given False) seeds nothing. wrt[j], where given: the primals the walk of
    level j differentiates (the others are constants to it, as to JAX's inner trace: a
    custom call of them alone is left to the levels around, which apply its rule); None
    (or no wrt): all."""
    if not num_cts:
        init, consts, n = xs[:nc], xs[nc:-1], xs[-1]
        if lanes:
            return replay_lanes(body, init, consts, [True] * len(consts), n._value)
        n = int(backends.to_numpy(n._value))
        return apply_scan(body, init, [], consts, n, False,
                          compiler=default_compiler()) if n else list(init)
    ct, primals = xs[:num_cts[0]], xs[num_cts[0]:]
    own = wrt[0] if wrt else None
    # each D_k is a level of its own: a custom_vjp in the body is differentiated by its bwd
    # in D_1's walk only, and through fwd in the walks of the D_k around it (tape.levels).
    # The primals outside `own` belong to the levels around: in the outermost walk, where
    # none is running, a level of their own stands for those (so a call of them alone is
    # not this walk's to apply its rule to); inside, the walk around holds them already.
    others = [x for x, w in zip(primals, own) if not w] if own is not None else []
    with contextlib.ExitStack() as stack:
        if others and not create_graph:
            stack.enter_context(watching("while_loop_constants", others))
        watched = primals if own is None else [x for x, w in zip(primals, own) if w]
        level = stack.enter_context(watching("while_loop_vjp", watched))
        outs = _derivative(primals, body, nc, num_cts[1:], given[1:], True, lanes,
                           wrt[1:] if wrt else None)
    targets = [x for x in primals if is_differentiable_dtype(x.dtype)]
    return walk_back(outs, ct, given[0], targets, create_graph, level)


def walk_back(outs, ct, given, targets, create_graph=False, level=None):
    """The cotangent of each target (zeros where none arrives) from the carries `outs` on
    the tape, seeded by ct where `given` says one is present (also while_replay's), by a
    walk of `level` (a watch of tape.backward; None: the walk in progress)."""
    pairs = [(o, c) for o, c, g in zip(outs, ct, given)
             if g and isinstance(o, Tensor) and o.requires_grad
             and is_differentiable_dtype(c.dtype)]
    at = {} if level is None else {"level": level}
    found = backward_pass([o for o, _ in pairs], [c for _, c in pairs], targets=targets,
                          create_graph=create_graph, **at) if pairs else [None] * len(targets)
    return [g if g is not None else zeros(x.shape, x.dtype, x.device)
            for g, x in zip(found, targets)]


def _grad_vjp(cts, outs, *xs, _saved, body, num_carry, num_cts, given, lanes=False, wrt=None):
    if all(c is None for c in cts):
        return [None] * len(xs)
    diff = [x for x in xs[num_cts[0]:] if is_differentiable_dtype(x.dtype)]
    ct = [c if c is not None else zeros(x.shape, x.dtype, x.device) for c, x in zip(cts, diff)]
    new = _differentiated_inputs(list(xs))
    if new is not None or wrt is not None:
        new = (new[0] if new else None,) + (tuple(wrt) if wrt else (None,) * len(num_cts))
    g = _scan_grads(ct, list(xs), body, num_carry, (len(diff),) + tuple(num_cts),
                    (tuple(c is not None for c in cts),) + tuple(given), lanes, new)
    # Inputs no present cotangent reaches get none: the derivative's zeros for them would
    # reach the loop's partials as present cotangents (0 * inf at second order).
    reached = _reach_grad(dict(body=body, num_carry=num_carry, num_cts=num_cts, given=given),
                          [c is not None for c in cts])
    return [x if r else None for x, r in zip(g, reached)]


def _reach_grad(params, out_flags):
    """Which inputs of D_k (k = len(num_cts): its cotangents, then D_(k-1)'s inputs, down to
    init, the body's constants and n) a cotangent of its flagged outputs (the gradients of
    D_(k-1)'s float inputs) reaches. D_1 = sum over the carries i with a present cotangent
    ct_i of ct_i * d carry_i / d(primals): each term reads only carry i's group, ct_i and
    the primals that reach carry i (over any trip count, 0 included: _reached_in_n_steps).
    Differentiating keeps the sum's terms apart, each reading its group and the new
    cotangents of the outputs in it. So an input is reached when it shares a group with a
    flagged output."""
    body, nc, num_cts, given = (params[k] for k in ("body", "num_carry", "num_cts", "given"))
    primal_vars = body.invars[:nc] + body.constvars
    active = [i for i in range(nc) if given[-1][i]]
    deps = {i: _reached_in_n_steps(body, nc, [j == i for j in range(nc)]) for i in active}
    # levels[m]: (groups, is-float) of each input of D_m; D_0's are the primals and n
    levels = [([frozenset(i for i in active if deps[i][q]) for q in range(len(primal_vars))]
               + [frozenset()],
               [is_differentiable_dtype(v.dtype) for v in primal_vars] + [False])]
    levels.append(([frozenset({i}) if given[-1][i] else frozenset() for i in range(nc)]
                   + levels[0][0],
                   [is_differentiable_dtype(v.dtype) for v in body.outvars[:nc]]
                   + levels[0][1]))
    for m in range(2, len(num_cts) + 1):  # D_m's cotangents: one per output of D_(m-1)
        groups, floats = levels[m - 2]
        outputs = [g for g, f in zip(groups, floats) if f]
        if len(outputs) != num_cts[-m]:
            raise AssertionError(f"while_loop_vjp: {num_cts[-m]} cotangents at level {m} "
                                 f"for {len(outputs)} outputs")
        cts = [g if present else frozenset() for g, present in zip(outputs, given[-m])]
        levels.append((cts + levels[m - 1][0], [True] * len(cts) + levels[m - 1][1]))
    groups, floats = levels[len(num_cts) - 1]
    outputs = [g for g, f in zip(groups, floats) if f]
    flagged = frozenset().union(*[g for g, f in zip(outputs, out_flags) if f])
    return [bool(g & flagged) for g in levels[len(num_cts)][0]]


def _reach_while(params, out_flags):
    """init (as the body's carries), the cond's constants (no gradient), the body's."""
    nc, body = params["num_carry"], params["body"]
    ins = _reached_in_n_steps(body, nc, out_flags[:nc])
    return ins[:nc] + [False] * params["num_cond_consts"] + ins[nc:]


# --- vmap of a while_loop ------------------------------------------------------------------
# With a stopping decision shared by every example (cond reads no batched value), one loop
# over the batched carries. With one decision per example, lanes stop at different steps:
# each step runs cond and then the body on the lanes still running only (gathered, then
# written back), so the body never sees a state its example's loop would not reach (an index
# past the end, a log of zero: errors and NaNs the loop does not have), and the work shrinks
# as lanes finish. Its derivative (while_loop_vjp with lanes=True) replays those lanes on a
# tape, with the trip counts the loop found, when it runs (eagerly, or in a traced body).

def _batched_carries(params, in_flags):
    """(carry flags, whether the stopping decision is batched): a carry is batched when its
    init is or when the body makes it so (to a fixpoint); with a batched decision all are."""
    nc, nq = params["num_carry"], params["num_cond_consts"]
    carry, q, k = list(in_flags[:nc]), list(in_flags[nc:nc + nq]), list(in_flags[nc + nq:])
    for _ in range(nc + 1):
        grown = [c or o for c, o in zip(carry, batched_outputs(params["body"], carry, k))]
        if grown == carry:
            break
        carry = grown
    else:
        raise AssertionError("vmap of while_loop: batched carries, fixpoint not reached")
    pred = batched_outputs(params["cond"], carry, q)[0]
    return ([True] * nc if pred else carry), pred


def _while_vmap_flags(params, in_flags):
    carry, pred = _batched_carries(params, in_flags)
    return carry + [pred]


def _while_vmap(values, batched, B, *, cond, body, num_carry, num_cond_consts, max_steps):
    nc, nq = num_carry, num_cond_consts
    params = dict(cond=cond, body=body, num_carry=nc, num_cond_consts=nq)
    carry_b, pred_b = _batched_carries(params, batched)
    init = [broadcast_batch(x, B) if c and not b else x
            for x, c, b in zip(values[:nc], carry_b, batched[:nc])]
    q, k = values[nc:nc + nq], values[nc + nq:]
    q_b, k_b = batched[nc:nc + nq], batched[nc + nq:]
    if pred_b:
        outs = while_lanes_p(*init, *q, *k, cond=cond, body=body, num_carry=nc,
                             num_cond_consts=nq, max_steps=max_steps, batched=tuple(q_b + k_b),
                             size=B)
    else:
        device = next(x.device for x in values if hasattr(x, "device"))
        c_graph = batched_graph(cond, carry_b, q, q_b, B, device)[0]
        b_graph = batched_graph(body, carry_b, k, k_b, B, device, out_flags=carry_b)[0]
        outs = while_p(*init, *c_graph.consts, *b_graph.consts, cond=canonical(c_graph),
                       body=canonical(b_graph), num_carry=nc,
                       num_cond_consts=len(c_graph.consts), max_steps=max_steps)
    if outs[nc]._node is not None:  # the VJP reads the trip counts; the user drops them
        outs[nc]._node.saved = [outs[nc]]
    return outs, carry_b + [pred_b]


def _lanes_impl(*values, cond, body, num_carry, num_cond_consts, max_steps, batched, size):
    """The carries (batch axis first) and each lane's trip count, lanes running until their
    own cond is False."""
    nc, nq = num_carry, num_cond_consts
    zeros_ = stand_ins_for(body.outvars[:nc] + [_COUNT], [(size,)] * (nc + 1))
    if zeros_ is not None:
        return zeros_
    xp = backends.xp_of(*values)
    device = backends.device_of(values[0]) if values else "cpu"
    carry = [xp.array(v, copy=True) for v in values[:nc]]  # written into, lane by lane
    counts = xp.zeros(size, np.int64)
    active = xp.arange(size)
    q, k = values[nc:nc + nq], values[nc + nq:]
    q_b, k_b = batched[:nq], batched[nq:]

    def step(graph, consts, flags, lanes):
        """graph's outputs on the given lanes, as arrays of m >= len(lanes) rows: the lanes
        padded to a power of two with copies of one of them (a state its loop does reach),
        so that a few batched graphs, each traced once, serve every step."""
        m = min(size, 1 << (int(lanes.size) - 1).bit_length())
        rows = xp.concatenate([lanes, xp.full(m - lanes.size, lanes[0])]) if m > lanes.size \
            else lanes
        batched_graph_, kept = _lanes_graph(graph, nc, flags, m, device)
        return eval_graph(batched_graph_, [c[rows] for c in carry]
                          + [v[rows] if f else v for v, f in zip(consts, flags)], kept)

    with no_grad():
        while active.size:
            (pred,) = step(cond, q, q_b, active)
            active = active[xp.broadcast_to(pred, (pred.shape[0],))[:active.size]]
            if not active.size:
                break
            if max_steps is not None and int(counts[active].max()) >= max_steps:
                raise too_many_steps(max_steps)
            new = step(body, k, k_b, active)
            for c, n in zip(carry, new):
                c[active] = n[:active.size]
            counts[active] += 1
    return carry + [counts]


def _lanes_graph(graph, nc, const_flags, m, device):
    """(graph on m lanes, the values of its own constants): its carries batched, its
    constants further inputs (batched where flagged), every output batched; traced once per
    lane count and cached on graph (its constants are inputs, so no value is baked in)."""
    cache = graph.__dict__.setdefault("_lanes_graphs", {})
    key = (m, tuple(const_flags), device)
    if key not in cache:
        opened = Graph(graph.invars + graph.constvars, [], [], graph.eqns, graph.outvars,
                       graph.name, device)
        traced, _ = batched_graph(opened, [True] * nc + list(const_flags), [], [], m, device,
                                  out_flags=[True] * len(graph.outvars))
        cache[key] = traced, [c._value if isinstance(c, Tensor) else c for c in traced.consts]
    return cache[key]


_COUNT = Var((), np.int64)


def _lanes_vjp(cts, outs, *inputs, _saved, cond, body, num_carry, num_cond_consts, max_steps,
               batched, size):
    """The VJP of each lane's own loop of its trip count's steps: the derivative primitive
    with every input given the batch axis (`lanes`), which replays the lanes (cond is not
    differentiated; the tape's walk or, in a trace, the loop's run computes it). A shared
    constant's cotangent is the sum of the lanes'. As in _while_vjp, an absent cotangent
    stays absent and inputs no present one reaches get none."""
    nc, nq = num_carry, num_cond_consts
    if all(c is None for c in cts[:nc]):
        return [None] * len(inputs)
    counts = outs[nc] if outs[nc] is not None else _saved[0] if _saved else None
    if counts is None:  # bound where nobody kept the counts (a replay): count again
        with no_grad():
            counts = while_lanes_p(*inputs, cond=cond, body=body, num_carry=nc,
                                   num_cond_consts=nq, max_steps=max_steps, batched=batched,
                                   size=size)[nc]
    k, k_b = list(inputs[nc + nq:]), batched[nq:]
    k_lanes = [x if f else broadcast_batch(x, size) for x, f in zip(k, k_b)]
    given = tuple(c is not None for c in cts[:nc])
    ct = [_ct_or_zeros(c, o, inputs) for c, o in zip(cts[:nc], inputs[:nc])]
    primals = list(inputs[:nc]) + k_lanes + [counts]
    g = _scan_grads(ct, primals, body, nc, (nc,), (given,), lanes=True,
                    wrt=_differentiated_inputs(primals))[:-1]
    g = g[:nc] + [x if f or x is None else ops.sum(x, axis=0) for x, f in zip(g[nc:], k_b)]
    reached = _reached_in_n_steps(body, nc, list(given))
    g = [x if r else None for x, r in zip(g, reached)]
    return g[:nc] + [None] * nq + g[nc:]


def replay_lanes(body, carry, consts, const_flags, counts):
    """The carries after each lane's own number of steps of body (`counts`, an array), bound
    on Tensors (recorded when they require grad): at step t, the lanes whose count is above
    t, gathered, stepped by the body batched for that many lanes (traced once per count,
    _lanes_graph) and written back. No lane is padded here: a copy's zero cotangent would
    meet the body's partials, which the loop never does."""
    carry, nc = list(carry), len(carry)
    xp = backends.xp_of(counts)
    device = backends.device_of(counts)
    for t in range(int(counts.max()) if counts.size else 0):
        index = Tensor(xp.nonzero(counts > t)[0])
        stepped, kept = _lanes_graph(body, nc, const_flags, int(index.shape[0]), device)
        new = replay(stepped, [c[index] for c in carry]
                     + [x[index] if f else x for x, f in zip(consts, const_flags)],
                     [Tensor(v) for v in kept])
        carry = [c.at[index].set(x) for c, x in zip(carry, new)]
    return carry


# --- a second vmap over lanes: the two batch axes merged into one --------------------------
def _merge_lanes(x, outer, inner, B, size):
    """x (per outer example: [size, ...] where inner, else shared by the lanes), with the
    outer batch axis first where outer, as [B * size, ...]: one lane per pair of examples."""
    lane = tuple(x.shape[1:] if outer else x.shape)[1 if inner else 0:]
    if inner:
        x = x if outer else broadcast_batch(x, B)
    else:  # outer: each outer example's value, the same for its lanes
        x = ops.broadcast_to(ops.reshape(x, (B, 1) + lane), (B, size) + lane)
    return ops.reshape(x, (B * size,) + lane)


def _split_lanes(x, B, size):
    return ops.reshape(x, (B, size) + tuple(x.shape[1:]))


def _lanes_vmap(values, outer, B, **params):
    """vmap of vmap of a while_loop whose lanes stop apart: the lanes of every outer example
    are lanes of one loop (each still runs its own loop, so the result is the per-example
    one), its inputs [B, size, ...] merged into [B * size, ...] and its outputs split back."""
    nc, size = params["num_carry"], params["size"]
    inner = [True] * nc + list(params["batched"])
    lanes = [o or i for o, i in zip(outer, inner)]
    merged = [_merge_lanes(x, o, i, B, size) if f else x
              for x, o, i, f in zip(values, outer, inner, lanes)]
    outs = while_lanes_p(*merged, **{**params, "batched": tuple(lanes[nc:]), "size": B * size})
    if outs[nc]._node is not None:  # the VJP reads the trip counts; the user drops them
        outs[nc]._node.saved = [outs[nc]]
    return [_split_lanes(x, B, size) for x in outs], [True] * len(outs)


# The lanes' derivative gives every shared input one copy per example (its gradient differs
# per example), read at every step. Where those copies are much larger than what each
# example has of its own (a closed-over weight matrix against a state vector), the loop
# over examples is cheaper: 64 lanes of h = tanh(h @ W), W [128, 128], took 87 ms as lanes
# against 31 ms as a loop of gradients (bench/vmap_rules.py (a3)); Newton's scalar
# constants are far below the bound.
_SHARED_PER_OWN = 8


def _copies_cost_more(values, batched):
    shared = sum(int(np.prod(x.shape)) for x, b in zip(values, batched)
                 if not b and is_differentiable_dtype(x.dtype))
    own = sum(int(np.prod(x.shape[1:])) for x, b in zip(values, batched) if b)
    return shared > _SHARED_PER_OWN * max(own, 1)


def _grad_vmap(values, batched, B, *, body, num_carry, num_cts, given, lanes=False,
               wrt=None):
    """vmap of a while_loop's derivative: each example's own, every input given the batch
    axis (a gradient per example, also of what the examples share) and n each lane's trip
    count, computed by replaying the lanes (replay_lanes); or once per example, where the
    shared inputs' copies would cost more (_copies_cost_more). Batched twice (vmap of vmap), the
    two batch axes are merged into one (every input of the lanes' derivative has its lanes'
    axis first)."""
    if lanes:
        size = next(x.shape[1] if b else x.shape[0] for x, b in zip(values, batched))
        merged = [_merge_lanes(x, b, True, B, size) for x, b in zip(values, batched)]
        outs = while_grad_p(*merged, body=body, num_carry=num_carry, num_cts=num_cts,
                            given=given, lanes=True, **({"wrt": wrt} if wrt else {}))
        return [_split_lanes(x, B, size) for x in outs], [True] * len(outs)
    if _copies_cost_more(values, batched):
        return None  # once per example: the lanes' copies of shared values would cost more
    values = [x if b else broadcast_batch(x, B) for x, b in zip(values, batched)]
    outs = while_grad_p(*values, body=body, num_carry=num_carry, num_cts=num_cts, given=given,
                        lanes=True, **({"wrt": wrt} if wrt else {}))
    return outs, [True] * len(outs)


def _differentiated_while(params, in_flags, settle=False):
    """The body with its custom calls as differentiated where the flagged inputs (init,
    cond's constants, the body's) carry a derivative. Not cond: as JAX's, it reads the
    primal values, computed as where nothing differentiates them."""
    nc, nq = params["num_carry"], params["num_cond_consts"]
    body = differentiated_graph(params["body"], in_flags[:nc] + in_flags[nc + nq:], nc, settle)
    return None if body is params["body"] else dict(params, body=body)


def _depends_while(params, in_flags):
    """The carries that depend on the flagged inputs (init, cond's constants, the body's):
    those the body's fixpoint flags (after any number of steps, none included); the trip
    count never."""
    nc, nq = params["num_carry"], params["num_cond_consts"]
    flags = dependent_values(params["body"], in_flags[:nc] + in_flags[nc + nq:], nc)[0]
    return flags[:nc] + [False]


def _while_jvp(primals, tangents, *, cond, body, num_carry, num_cond_consts, max_steps):
    """(outs, tangents): one while_loop whose carries are the primal carries and the tangents
    of those that have one (JAX's JVP of while_loop), its body scan's JVP body
    (scan/jvp.py), its cond the same cond reading the primal carries only. The body runs
    once a step; the transposed VJP, the rule otherwise, ran the loop and then a scan of
    its trip count again. The trip count and cond's constants have no tangent."""
    nc, nq = num_carry, num_cond_consts
    init, q, k = list(primals[:nc]), list(primals[nc:nc + nq]), list(primals[nc + nq:])
    c_given = [t is not None for t in tangents[:nc]]
    k_given = [t is not None for t in tangents[nc + nq:]]
    device = next((a.device for a in primals if isinstance(a, Tensor)), body.device)
    jb = scan_jvp.jvp_body(body, nc, c_given, [], k_given, device)
    d_init = [tangents[i] if tangents[i] is not None else zeros(tuple(x.shape), x.dtype,
                                                                  x.device)
              for i, (x, m) in enumerate(zip(init, jb.carry_mask)) if m]
    d_k = [t for t in tangents[nc + nq:] if t is not None]
    n_dc = len(d_init)
    res = while_p(*init, *d_init, *q, *k, *d_k, *jb.extra_consts,
                  cond=_cond_of_jvp(cond, jb.carry_mask),
                  body=jb.graph, num_carry=nc + n_dc, num_cond_consts=nq,
                  max_steps=max_steps)
    d_carry = iter(res[nc:nc + n_dc])
    return res[:nc] + [res[-1]], [next(d_carry) if m else None for m in jb.carry_mask] + [None]


def _cond_of_jvp(cond, carry_mask):
    """cond with the tangent carries as more inputs it does not read; one graph per cond and
    set of tangents (cached on cond: the loop's compiled runner is cached by it)."""
    cache = cond.__dict__.setdefault("_jvp_conds", {})
    key = tuple(carry_mask)
    if key not in cache:
        ignored = [Var(v.shape, v.dtype) for v, m in zip(cond.invars, carry_mask) if m]
        cache[key] = Graph(cond.invars + ignored, cond.constvars, cond.consts, cond.eqns,
                           cond.outvars, cond.name, cond.device)
    return cache[key]


while_p = Primitive("while_loop", _while_impl, _while_vjp, multiple_results=True,
                    reach=_reach_while, differentiated=_differentiated_while,
                    depends=_depends_while, jvp=_while_jvp,
                    vmap=_while_vmap, vmap_flags=_while_vmap_flags)
# vmap's while_loop whose examples stop at different steps (_while_vmap): carries, cond's
# constants, body's constants, those flagged in `batched` with the batch axis first.
while_lanes_p = Primitive("while_loop_lanes", _lanes_impl, _lanes_vjp, multiple_results=True,
                          reach=_reach_while, differentiated=_differentiated_while,
                          depends=_depends_while, vmap=_lanes_vmap)
while_grad_p = Primitive("while_loop_vjp", _grad_impl, _grad_vjp, multiple_results=True,
                         reach=_reach_grad, vmap=_grad_vmap)


def too_many_steps(max_steps):
    return RuntimeError(
        f"while_loop: cond_fun was still True after max_steps={max_steps} steps. Raise "
        f"max_steps, or check that body_fun moves val towards the stopping condition.")


