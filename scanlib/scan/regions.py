"""Runs of a jitted call's arithmetic on large arrays, each as a small numba kernel: where
jit's straight-line code runs (the whole call is not one fused kernel, scan/fused.py) and the
call's scans asked for compiler="numba" or "auto".

A chain such as `(a + b) * (1 - h * h)` and its sum is one NumPy call per operation, each a
pass over memory and a new array; a softmax's max and sums over a short last axis (a few
actions) are NumPy reductions that pay per row. In a loop nest (loop/native_nests.py) the
chain is one pass, with each value that one operation reads computed in its reader's loop.
Only arithmetic, comparisons, selections, reductions and reshapes of arrays above
SMALL_ELEMENTS join a run, with the small work between them (a mean's division, a scalar's
square root): NumPy's own SIMD loops are faster at tanh, exp and log on large arrays (numba
calls libm's scalar functions), and BLAS at products, so those stay NumPy calls and end a
run. A run is a stretch of consecutive equations of the graph (its order is the trace's, a
topological one), so it reads nothing computed after it.

What a kernel computes is what the straight-line code computes, element by element, with
the same scalar arithmetic; sums add in the order of the elements (NumPy's adds pairwise),
so a sum may differ in its last bits, and a max or min of +0.0s and -0.0s is the first of
them where NumPy's SIMD lanes pick one by the CPU, as on the per-scan numba tier. Each run
is proved as a fused kernel is (scan/fused.FusedKernel): numba's types are compared with the
graph's before it first runs, and an np.errstate that asks NumPy to raise or warn runs the
NumPy calls. On every tier each run's kernel and NumPy calls are timed, and the faster
kept (a nest on a strided input can be several times slower than NumPy).

Imports the fused kernel's builder; numba only when a kernel is built.
"""

from __future__ import annotations

import numpy as np

from ..ops.primitive import Primitive
from ..tape.graph import Eqn, Graph, Literal
from . import fused
from .loop import native
from .loop.native_rules import Unsupported

# An equation joins a run when one of its values has more elements than this (smaller ones
# only between such equations): below it NumPy's fixed cost per call is the most of its work,
# and a kernel call costs about as much.
SMALL_ELEMENTS = native.SMALL_STEP
# What a loop nest computes as NumPy does, at least as fast: elementwise arithmetic,
# comparisons and selections, reductions, and shape changes of those values.
ARITHMETIC = frozenset({
    "add", "sub", "mul", "div", "neg", "square", "abs", "maximum", "minimum", "where",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
    "sum", "max", "min", "broadcast_to", "reshape", "stop_gradient", "copy"})
REDUCTIONS = frozenset({"sum", "max", "min"})
VIEWS = frozenset({"broadcast_to", "reshape", "stop_gradient", "copy"})
# Work that joins a run only on small values (between large ones).
SMALL_ONLY = native.TRANSCENDENTAL | {"sqrt", "rsqrt", "reciprocal"}
SHORT_REDUCTION = 64  # elements a large array's reduction sums per result, at most
# float64 and complex128 as the graph's (numba computes narrower floats and integers wider
# where a literal meets them), and bool comparisons and selections.
DTYPES = frozenset(map(np.dtype, ("float64", "complex128", "bool")))
# The estimate (_kernel_is_faster), in nanoseconds, measured on an x86-64 with AVX-512
# (bench/NOTES.md). Per element: a NumPy call's pass over memory; a kernel's arithmetic in
# registers, and its pass writing an array (slower than NumPy's SIMD loop: one add of
# [4, 1024, 32] took 41 us in a nest, 33 us in NumPy); a kernel's reduction step (a dependent
# addition, about 4 cycles). Per call: a kernel's (its arguments' checks, numba's dispatch).
# Per result row: NumPy's reduction starting its inner loop (a max over the last axis of
# [8192, 4]: 340 us as NumPy's call, 23 us as a nest).
NUMPY_PASS_NS = {"arithmetic": 0.25, "transcendental": native.NUMPY_NS["transcendental"]}
KERNEL_NS = {"arithmetic": 0.05, "transcendental": native.KERNEL_NS["transcendental"]}
KERNEL_PASS_NS = 0.4
KERNEL_REDUCTION_NS = 1.3
KERNEL_CALL_NS = 10000.0
NUMPY_ROW_NS = {"sum": 20.0, "max": 40.0, "min": 40.0}
ENABLED = True
# False: a run's kernel runs wherever it is proved, from its first call, without being timed
# against the NumPy calls (the differential fuzzer's setting, so that every kernel runs).
MEASURED = True


def wanted(graph):
    """Whether jit's straight-line code of this graph runs its large arithmetic as kernels:
    ENABLED, and the graph has a scan and every scan in it asked for compiler "numba" or
    "auto" (the interpreter for none)."""
    scans = [eqn for eqn, _ in fused.scans(graph, 1)]
    return ENABLED and bool(scans) and all(
        eqn.params.get("compiler") in ("numba", "auto") and not eqn.params.get("interpret")
        for eqn in scans)


def _large(eqn):
    return native.elements(eqn) > SMALL_ELEMENTS


def _joins(eqn):
    """Whether an equation may be in a run (True), only between large ones ("small"), or
    ends one (False)."""
    if eqn.prim.multiple_results or eqn.prim.effect or not all(
            np.dtype(v.dtype) in DTYPES for v in (*eqn.invars, *eqn.outvars)
            if not isinstance(v, Literal)):
        return False
    if eqn.prim.name in REDUCTIONS and _large(eqn):
        return _short_trailing(eqn)
    if eqn.prim.name in ARITHMETIC:
        return True if _large(eqn) else "small"
    if eqn.prim.name in SMALL_ONLY and not _large(eqn):
        return "small"
    return False


def _short_trailing(eqn):
    """Whether a reduction of a large array is over its last axes, at most SHORT_REDUCTION
    elements each: a loop over rows summing a few elements each, where NumPy pays per row.
    A long sum is one chain of dependent additions in a nest (NumPy's pairwise SIMD sum is
    several times faster), and a sum over leading axes would read memory out of order."""
    x = eqn.invars[0]
    axes = eqn.params.get("axis")
    nd = len(x.shape)
    axes = tuple(range(nd)) if axes is None else tuple(sorted(a % nd for a in axes))
    length = 1
    for a in axes:
        length *= x.shape[a]
    return axes == tuple(range(nd - len(axes), nd)) and length <= SHORT_REDUCTION


def runs(graph, last_read=None):
    """[(start, stop)] of the graph's equations that run as kernels: maximal stretches of
    equations that join, trimmed of small work and views at their ends, estimated faster as
    one kernel (_kernel_is_faster). `last_read`: _last_reads(graph), where it is known."""
    found, start = [], None
    last_read = _last_reads(graph) if last_read is None else last_read
    for i, eqn in enumerate([*graph.eqns, None]):
        joins = eqn is not None and _joins(eqn)
        if joins and start is None:
            start = i
        if not joins and start is not None:
            stop = i
            while start < stop and _trimmed(graph.eqns[stop - 1]):
                stop -= 1
            while start < stop and _trimmed(graph.eqns[start]):
                start += 1
            if start < stop and _kernel_is_faster(graph.eqns[start:stop], last_read, stop):
                found.append((start, stop))
            start = None
    return found


def _kernel_is_faster(eqns, last_read, stop):
    """Whether these equations are estimated faster as one kernel call than as NumPy calls
    (`last_read`: where each value is read last; `stop`: where they end). NumPy: per
    equation its fixed cost and a pass over memory, and per row of a reduction its inner
    loop's start. The kernel: its call (its arguments' checks, numba's dispatch), a pass for
    each array it writes (its outputs, and what a reduction or a broadcasting reader reads;
    the rest is computed in its readers' nests), and a reduction's chain of dependent
    additions or comparisons."""
    numpy_ns, kernel_ns = 0.0, KERNEL_CALL_NS
    written = set()
    for e in eqns:
        numpy_ns += native.NUMPY_CALL_NS
        if e.prim.name in VIEWS:
            continue
        kind = "transcendental" if e.prim.name in native.TRANSCENDENTAL else "arithmetic"
        elements = native.elements(e)
        numpy_ns += elements * NUMPY_PASS_NS[kind]
        kernel_ns += elements * KERNEL_NS[kind]
        out_shape = tuple(e.outvars[0].shape)
        for v in e.invars:
            if not isinstance(v, Literal) and tuple(v.shape) != out_shape:
                written.add(v)
        if e.prim.name in REDUCTIONS:
            numpy_ns += native.size(e.outvars[0]) * NUMPY_ROW_NS[e.prim.name]
            kernel_ns += elements * KERNEL_REDUCTION_NS
    made = {v for e in eqns for v in e.outvars}
    written = (written & made) | {v for v in made if last_read.get(v, -1) >= stop}
    kernel_ns += sum(native.size(v) for v in written) * KERNEL_PASS_NS
    return kernel_ns < numpy_ns


def _trimmed(eqn):
    """Small work, or a view, at a run's end: nothing for a kernel to save (a kernel would
    copy a reshaped input)."""
    return _joins(eqn) == "small" or eqn.prim.name in VIEWS


def _run_region(*arrays, kernel, straight):
    return kernel.run(list(arrays), [], straight)


region_p = Primitive("fused_region", _run_region, multiple_results=True,
                     doc="A run of a jitted call's equations as one numba kernel "
                         "(scan/regions.py); only in jit's replay, never traced.")


def rewrite(graph, straight_line):
    """(the graph with each run of `runs` as one region_p equation, for jit's straight-line
    code to call; their FusedKernels). `straight_line(graph)` compiles a run's own NumPy code
    (what the region runs where its kernel does not). A run with no numba rule stays as it
    was. Where a scan asked for "auto", the kernels compile in the background process."""
    last_read = _last_reads(graph)
    found = runs(graph, last_read)
    if not found:
        return graph, []
    background = any(eqn.params.get("compiler") == "auto" for eqn, _ in fused.scans(graph, 1))
    eqns, built, done = [], [], 0
    for k, (start, stop) in enumerate(found):
        eqns += graph.eqns[done:start]
        done = stop
        part = graph.eqns[start:stop]
        made = {v for e in part for v in e.outvars}
        ins = []
        for e in part:
            for v in e.invars:
                if not isinstance(v, Literal) and v not in made and v not in ins:
                    ins.append(v)
        outs = [v for e in part for v in e.outvars if last_read.get(v, -1) >= stop]
        sub = Graph(ins, [], [], part, outs, name=f"{graph.name}_region{k}",
                    device=graph.device)
        try:
            kernel = fused.build(sub, background=background, measured=MEASURED,
                                 stat="region calls",
                                 what=f"jit({graph.name}): equations {start}-{stop - 1} as "
                                      f"one kernel")
        except Unsupported as e:
            native.log.info("jit(%s): equations %d-%d stay NumPy calls: %s", graph.name,
                            start, stop - 1, e)
            eqns += part
            continue
        eqns.append(Eqn(region_p, ins, {"kernel": kernel, "straight": straight_line(sub)},
                         outs))
        built.append(kernel)
    new = Graph(graph.invars, graph.constvars, graph.consts, eqns + graph.eqns[done:],
                graph.outvars, name=graph.name, device=graph.device)
    return new, built


def _last_reads(graph):
    """{var: the index of the last equation reading it}, len(graph.eqns) for the graph's
    outputs."""
    last = {}
    for i, eqn in enumerate(graph.eqns):
        for v in eqn.invars:
            if not isinstance(v, Literal):
                last[v] = i
    for v in graph.outvars:
        if not isinstance(v, Literal):
            last[v] = len(graph.eqns)
    return last
