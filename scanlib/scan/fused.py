"""A whole traced graph, its scans included, as one numba kernel: what `scanlib.jit` replays
when every scan in the graph asked for compiler="numba" (or "auto") and its steps are small.

The per-scan tier (loop/native.py) compiles each scan's step loop and leaves the rest in
Python: the forward and the backward scan each pay an executor call, the batched work the
loop compiler moved out of the step runs as NumPy calls on a handful of elements, and the
equations between the scans are one NumPy call each. For a short scan with a tiny state
(a T=60 scalar likelihood) that fixed cost is most of the call. Here the graph is printed
as straight-line numba code, equation by equation with the per-scan tier's rules
(loop/native_rules.py), and each scan as a plain loop over its body (native_rules.Scope):
the loop that defines scan, with no schedule, batching or reordering (numba compiles the
step, not the compiler's passes). A gradient accumulator then sums in the loop's order, as
the Python loop does.

It fires only when it is proved, as the per-scan tier does: a primitive without a rule raises
Unsupported when the graph is built (jit then replays its straight-line code); before the
kernel first runs on new argument types, numba's inferred dtype and rank of every value are
compared with the graph's (NotProved: the straight-line code from then on); and where the
kernel raises (an index out of range, a singular matrix) the straight-line code runs the
call instead and raises its own error. It is not used where a scan body's step is faster
as the NumPy loop (loop/native.py's numpy_loop_is_faster: large values with BLAS or SIMD
work) or the scans are long (more than MAX_STEPS steps in all): there the loop compiler's
batched work across steps is faster than the same work one step at a time, and a call's
fixed cost is a small part of it. Nor is it used where the equations outside the scans are
estimated faster as NumPy calls (numpy_is_faster).

Imports the scan primitive, the loop compiler's numba printer and rules; numba only when
a kernel is built.
"""

from __future__ import annotations

import time

import numpy as np

from ..tape import Literal
from ..tape.tensor import type_str
from .loop import native  # numba itself only when a kernel is built or run
from .loop.native_rules import Scope, Unsupported, owned
from .primitive import scan_p

# Where the fixed cost of a call (what the fused kernel saves: ~0.1-0.2 ms) is not most of it,
# the loop compiler's batched work across steps, which the kernel gives up, is worth more:
# an HMM with K=8 over T=2,000 (8,000 steps forward and back) is 1.4x slower fused.
MAX_STEPS = 4096  # steps of all the graph's scans: more keep the per-scan tier
# More equations outside the loops than this, estimated faster as NumPy calls, keep the
# per-scan tier (numpy_is_faster); each is about ten lines of kernel.
MAX_OUTSIDE = 256
# Lines of kernel source: past them numba's compile takes minutes (the parallel Kalman
# filter's 2,972 lines: 5.5 minutes) or fails (a 3,006-line kernel of an associative scan's
# levels: Python's recursion limit, after 45 s), and each scan keeps its own kernel.
MAX_LINES = 3000
# Lines of kernel source (its loops written in place) past which each distinct loop of a
# kernel of several loops is a function of its own (Scope.loop_function), nested ones too
# where they run at most native_rules.FUNCTION_RUNS times a call: numba's compile time
# grows faster than a function's length (the PPO update's kernel, its epochs' and
# minibatches' loops as functions: 107 -> 77 s), and it compiles a loop called several
# times (jacfwd's columns) once. A kernel of one loop call (the PPO update's outermost loop
# alone as a function: 105 -> 119 s) or a short one gains nothing, and keeps its loops in
# place: unoptimised (NUMBA_OPT=0, as the test suite compiles), numba does not cache a
# kernel that calls another numba function.
LOOP_FUNCTIONS_FROM = 1000
ENABLED = True  # False: jit replays its straight-line code (the bench's per-scan column)


def wanted(graph):
    """Whether the graph asks for the fused kernel: ENABLED; it has a scan; every scan in it
    (nested ones too) asked for compiler="numba" and none for the interpreter; no scan or
    while_loop body is one whose step the NumPy loop runs faster; and the scans run at most
    MAX_STEPS steps in all (a nested scan's times its outer's)."""
    found = list(scans(graph, 1))
    return ENABLED and bool(found) and sum(steps for _, steps in found) <= MAX_STEPS and all(
        eqn.params.get("compiler") in ("numba", "auto") and not eqn.params.get("interpret")
        for eqn, _ in found) and not any(
        native.numpy_loop_is_faster(body.eqns) for body in _bodies(graph))


def numpy_is_faster(graph):
    """Why the graph's many equations outside its loops (more than MAX_OUTSIDE) should run as
    the straight-line code's NumPy calls, estimated faster than in the kernel
    (native.numpy_calls_are_faster); or None. Such a graph (an associative scan's levels,
    batched products over a long sequence) keeps the per-scan tier: in one kernel that work
    gains nothing, and numba's compile time grows faster than a kernel's length (the parallel
    Kalman filter's, 3,000 lines, took 5.5 minutes to compile, its scans' own kernels 20 s,
    and ran no faster). A few such equations do not decide it: the estimate is rough (an
    HMM's were estimated 3 % faster as NumPy calls, and its fused kernel ran 19 % faster)."""
    outside = [eqn for eqn in graph.eqns if not hasattr(eqn.params.get("body"), "eqns")]
    if len(outside) <= MAX_OUTSIDE:
        return None
    why = native.numpy_calls_are_faster(outside)
    return None if why is None else (f"its {len(outside)} equations outside the scans: that "
                                     f"work {why}")


def _bodies(graph):
    """The bodies (and while_loop conditions) of the loops in graph, nested ones too."""
    for eqn in graph.eqns:
        for name in ("cond", "body"):
            inner = eqn.params.get(name) if eqn.prim.multiple_results else None
            if hasattr(inner, "eqns"):
                yield inner
                yield from _bodies(inner)


def scans(graph, outer_steps):
    """(scan equation, the steps it runs in one run of the graph) for every scan in it."""
    for eqn in graph.eqns:
        if eqn.prim is scan_p:
            steps = outer_steps * eqn.params["length"]
            yield eqn, steps
            yield from scans(eqn.params["body"], steps)


class FusedKernel:
    """Call with the graph's input and constant arrays: its outputs, or None where the
    straight-line code must run (see the module's docstring)."""

    def __init__(self, source, kernel, plan, measured=False, stat="fused calls"):
        self.source, self.kernel, self._plan, self._stat = source, kernel, plan, stat
        self.note = None  # why it stopped running, once it has
        self.raised = False  # in this call, the kernel raised and the straight-line code ran
        # compiler="auto" (or `measured`): the kernel or the straight-line code, whichever
        # measures faster
        self.choice = native.TierChoice(kernel.what, "call") \
            if kernel.background or measured else None
        self._asked = False  # (under "auto") the first call has run: the kernel may be asked for

    def run(self, arrays, consts, straight_line):
        """The graph's outputs: from the kernel where it runs (and, under "auto", is the
        faster), else from `straight_line(*arrays)`. Under "auto" the first call is the
        straight-line code's, so that its scans ask the background process for their own
        kernels before this one: theirs compile sooner (a Kalman filter's in 34 s, the one
        kernel in 88 s) and run the calls until it is ready, and it is then measured against
        them, not against NumPy's loops (the Kalman filter's scans' kernels ran its call in
        15.4 ms, the one kernel in 18.1)."""
        choice, start, self.raised = self.choice, time.perf_counter(), False
        if choice is not None and not self._asked:
            self._asked = True
            outs = straight_line(*arrays)
            choice.record("numpy", time.perf_counter() - start)
            return outs
        if choice is None or choice.kernel_turn():
            outs = self(arrays, consts)
            if outs is not None:
                if choice is not None:
                    choice.record("kernel", time.perf_counter() - start)
                return outs
        if choice is None or self.kernel is None or choice.decided == "numpy":
            return straight_line(*arrays)
        numpy_start = time.perf_counter()
        outs = straight_line(*arrays)
        # A kernel that raised and left the call to the straight-line code cost both.
        choice.record(*("kernel", time.perf_counter() - start) if self.raised else
                      ("numpy", time.perf_counter() - numpy_start))
        return outs

    def __call__(self, arrays, consts):
        if self.kernel is None or native.numpy_errstate_forbids() or self.kernel.waiting():
            return None  # np.errstate raise/call/log: NumPy's own loops honour those
        values = [a[()] if not a.shape else a for a in (*arrays, *consts)]
        try:
            res = self.kernel(*values)
        except native.NotReady:  # compiling in the background
            return None
        except native.NotProved as e:
            self.kernel, self.note = None, str(e)
            native.log.info("jit runs its straight-line code, each scan on its own, "
                             "instead of one fused kernel: %s", e)
            return None
        except native.KERNEL_ERRORS:  # the straight-line code raises its own error
            self.raised = True
            return None
        native.STATS[self._stat] += 1
        out = []
        for kind, x, dtype in self._plan:
            if kind == "kernel":
                value = res[x]
                out.append(value if dtype is None else np.asarray(value, dtype))
            elif kind == "input":
                out.append(arrays[x] if x < len(arrays) else consts[x - len(arrays)])
            else:
                out.append(x)
        return out


def build(graph, background=None, what=None, measured=False, stat="fused calls"):
    """The FusedKernel of a graph that `wanted` (or of a run of jit's equations,
    scan/regions.py); raises Unsupported when a primitive (or a form of one) has no numba
    rule. Where a scan asked for compiler="auto" (or `background` says so), the kernel
    compiles in the background process (native.NativeKernel); `what` names it in the log;
    `measured`: it runs only where it measures faster than the straight-line code, as under
    "auto"; `stat`: what native.STATS counts its calls as."""
    if background is None:
        background = any(eqn.params.get("compiler") == "auto" for eqn, _ in scans(graph, 1))
    why = None if background else native.missing()  # ("auto" found numba installed)
    if why is not None:
        raise Unsupported(why)
    # numba types only native byte order (older releases refuse the others at the call)
    foreign = [v for v in (*graph.invars, *graph.constvars)
               if getattr(v, "dtype", None) is not None and not np.dtype(v.dtype).isnative]
    if foreign:
        raise Unsupported(f"an input of non-native byte order ({np.dtype(foreign[0].dtype)})")
    ksource, w, plan = _source(graph, None)
    length = ksource.count("\n")
    if length > MAX_LINES:
        raise Unsupported(f"a kernel of {length} lines (more than {MAX_LINES}), which numba "
                          "would take minutes to compile, or fail to")
    if length > LOOP_FUNCTIONS_FROM:
        split = _source(graph, [])
        if split[1].loop_calls > 1:
            ksource, w, plan = split
    ins = ", ".join(type_str(v.shape, v.dtype) for v in graph.invars)
    what = f"jit({graph.name}) as one fused kernel" if what is None else what
    kernel = native.new_kernel(ksource, w.expected, graph.name, f"{what} ({ins})", background)
    return FusedKernel(ksource, kernel, plan, measured, stat)


def _source(graph, functions):
    """(the kernel module's source, its Scope, the plan of its outputs): its loops written
    where they are (`functions` None) or each distinct one as a function of its own (a list:
    Scope.loop_function)."""
    w = Scope(functions=functions)
    params = [f"a{i}" for i in range(len(graph.invars))]
    params += [f"k{i}" for i in range(len(graph.constvars))]
    lines, results = w.graph(graph, params[:len(graph.invars)], params[len(graph.invars):],
                             "    ")
    inputs = {**{v: i for i, v in enumerate(graph.invars)},
              **{v: len(graph.invars) + i for i, v in enumerate(graph.constvars)}}
    plan, returned = [], []
    for v, (code, fresh) in zip(graph.outvars, results):
        if isinstance(v, Literal):
            plan.append(("literal", v.value, None))
        elif v in inputs:
            plan.append(("input", inputs[v], None))
        else:
            plan.append(("kernel", len(returned), None if v.shape else np.dtype(v.dtype)))
            returned.append(owned(code, fresh, v))
    ksource = native.kernel_module(
        params, lines + [f"    return ({''.join(r + ', ' for r in returned)})"],
        "fused kernel", w.functions or ())
    return ksource, w, plan
