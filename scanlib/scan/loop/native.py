"""The second printer: the same LoopProgram as emit.py, its per-step loop written as one numba
kernel instead of Python (`scan(..., compiler="numba")`). Everything outside the step loop
(constants, each chunk's batched work, the accumulators) stays the NumPy code emit.py prints;
only `for t in range(t0, t1): ...` becomes `c0, c1 = _kernel(t0, t1, c0, c1, X0, ...)`.

Nothing fires that is not proved: a body with a primitive (or a form of one) that
native_rules.py cannot write raises Unsupported here, before anything runs; and before a
kernel first runs on arguments of new types, the dtype and rank numba inferred for every
value of the step are compared with the graph's (a float32 promoted to float64 by numba's
typing would be a silent change), and a mismatch raises NotProved. The executor then runs the
NumPy loop, with a warning. Kernels are cached on disk by numba (keyed by their source) under
SCANLIB_CACHE_DIR (default ~/.cache/scanlib), so a new process compiles nothing it compiled
before. Under compiler="auto" the compile and its proof are made by a background process
(native_background.py): until it answers, a kernel raises NotReady and the caller runs its
NumPy code; then TierChoice keeps whichever of the two measures faster.

Imports numba (lazily: the tier is an extra), the loop IR, emit.py and native_rules.py, and
the logger (logs.py).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import threading
import time

import numpy as np

from ... import generated, logs
from ...ops.prng_kernel import cache_dir as _cache_dir  # one home for kernels' cache
from ...tape.tensor import type_str
from . import native_background
from . import native_nests as nests
from .emit import LoopWriter
from .ir import STEP, is_var
from .native_rules import (VIEWS, Arg, Fusion, Scope, Unsupported, literal_code,
                           logistic_chains, rows_times_matrix)

__all__ = ["VIEWS", "Unsupported", "NotProved", "NotReady", "KERNEL_ERRORS", "NativeLoop",
           "TierChoice", "build", "available", "missing",
           "numpy_loop_is_faster"]


# Which loop runs a step of large values (executor.py; fused.py asks the same of a whole
# body). A kernel's nests are scalar loops: NumPy's vectorised ones over a large value, and
# BLAS for a product, are faster, but a step of many small NumPy calls pays their fixed cost
# (about a microsecond each) each step. Between SMALL_STEP and LARGE_STEP elements, and for
# a step with a product of more than nests.SMALL multiply-adds, the choice is an estimate of
# both (_step_cost). Measured (bench/NOTES.md): an rnn step,
# tanh(h @ W + x) on [40, 40] float64, took 2x as long as a kernel; the CTC port's alpha
# recursion (about 40 operations on [8, 81] values, a few exp and log) half as long; the PPO
# port's jitted call, whose minibatch step has 449 operations on values up to its 64 x 64
# weights, 0.86x (its three bodies as kernels).
SMALL_STEP = 1024  # elements: up to this, the kernel
LARGE_STEP = 16384  # elements: above this, the NumPy loop
# Under "auto", which times the kernel against the NumPy loop on a body's calls (TierChoice)
# and keeps the faster, the estimate decides up to this: the HMC port's gradient (a step of
# 20,000 elements) ran 18 % faster with its backward body a kernel. Above it, the size alone
# decides, as LARGE_STEP does for the numba tier: the compile, and the slower tier's trial
# calls, grow with the step.
MEASURED_STEP = 65536
# Nanoseconds, measured on an x86-64 with AVX-512 (bench/NOTES.md): a NumPy call's fixed cost
# in the generated loop; per element, an arithmetic operation and a transcendental function
# (NumPy's SIMD loops; numba calls libm's scalar exp, log, tanh at 5-10 ns); per
# multiply-add, BLAS and a kernel's loop nest (numba's @ has no batch axes).
NUMPY_CALL_NS = 1000.0
NUMPY_NS = {"arithmetic": 0.4, "transcendental": 1.5}
KERNEL_NS = {"arithmetic": 0.3, "transcendental": 7.0}
BLAS_NS, NEST_NS = 0.1, 1.0
TRANSCENDENTAL = frozenset({
    "exp", "expm1", "log", "log1p", "log2", "log10", "logaddexp", "pow", "tanh", "sinh",
    "cosh", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "arcsinh",
    "arccosh", "arctanh", "sigmoid", "softplus", "softplus_grad", "erf", "erfc", "cbrt"})
_PRODUCTS = {"matmul", "einsum", "vdot"}


def numpy_loop_is_faster(eqns, carries=(), measured=False):
    """Why a step (its equations, the carries it reads) runs faster as the NumPy loop than
    as a kernel, or None: a value above LARGE_STEP elements (MEASURED_STEP where the two
    will be `measured`, under "auto"); or, above SMALL_STEP, float32 work (NumPy's SIMD
    loops); or, above SMALL_STEP or with a product of more than nests.SMALL multiply-adds,
    NumPy's calls estimated faster than the kernel."""
    values = [v for e in eqns for v in e.outvars] + [v for v in carries if is_var(v)]
    large = max((size(v) for v in values), default=0)
    if large <= SMALL_STEP and not any(e.prim.name in _PRODUCTS and _product_work(e) >
                                       nests.SMALL for e in eqns):
        return None  # (a batched product's work can be far above its values' size)
    limit = MEASURED_STEP if measured else LARGE_STEP
    if large > limit:
        return f"its step works on values of {large} elements (more than {limit})"
    for e in eqns:
        if any(np.dtype(v.dtype) in (np.float16, np.float32) and size(v) > SMALL_STEP
               for v in e.outvars):
            return (f"its step works on {np.dtype(e.outvars[0].dtype).name} values of up to "
                    f"{large} elements, which NumPy's SIMD loops do faster")
    estimate = numpy_calls_are_faster(eqns)
    return None if estimate is None else f"its step on values of up to {large} elements " \
        + estimate


def numpy_calls_are_faster(eqns):
    """Where these equations, run once, are estimated faster as one NumPy call each than as
    kernel code: what the estimate says (is estimated at ... us as NumPy calls and ... us as a
    kernel); else None."""
    numpy_ns, kernel_ns = _step_cost(eqns)
    if numpy_ns >= kernel_ns:
        return None
    heavy = sorted({e.prim.name for e in eqns if e.prim.name in TRANSCENDENTAL | _PRODUCTS
                    and elements(e) > SMALL_STEP})
    return (f"is estimated at {numpy_ns / 1e3:.0f} us as NumPy calls and "
            f"{kernel_ns / 1e3:.0f} us as a kernel"
            + (f" ({', '.join(heavy)} on large values)" if heavy else ""))


def _step_cost(eqns):
    """(NumPy's, the kernel's) estimated nanoseconds for one step of these equations. A
    kernel computes exp(-|x|) once for every sigmoid and softplus of x and of its negations
    (native_rules.Fusion): after the first of them, each is arithmetic there."""
    numpy_ns = kernel_ns = 0.0
    shared, seen = set(), set()
    for e, chain in logistic_chains(eqns):
        if chain[-1] in seen:
            shared.add(id(e))
        seen.add(chain[-1])
    for e in eqns:
        numpy_ns += NUMPY_CALL_NS
        if e.prim.name in _PRODUCTS:
            work = _product_work(e)
            nest = work <= nests.SMALL or not rows_times_matrix(e) and any(
                len(v.shape) > 2 for v in e.invars if is_var(v))
            numpy_ns += work * BLAS_NS
            kernel_ns += work * (NEST_NS if nest else BLAS_NS)
            continue
        kind = "transcendental" if e.prim.name in TRANSCENDENTAL else "arithmetic"
        numpy_ns += elements(e) * NUMPY_NS[kind]
        kernel_ns += elements(e) * KERNEL_NS["arithmetic" if id(e) in shared else kind]
    return numpy_ns, kernel_ns


def elements(eqn):
    """The most elements an equation reads or writes (is_var: not literals)."""
    return max((size(v) for v in list(eqn.invars) + list(eqn.outvars) if is_var(v)),
               default=1)


def size(v):
    return int(np.prod(v.shape, dtype=np.int64))


def _product_work(eqn):
    """Multiply-adds of a matmul, einsum or vdot equation: its output's size times the
    length it sums over (for einsum, the product of every index's length)."""
    if eqn.prim.name == "einsum":
        ins = eqn.params["spec"].split("->")[0].split(",")
        sizes = {}
        for sub, x in zip(ins, eqn.invars):
            sizes.update(zip(sub, x.shape))
        return int(np.prod(list(sizes.values()), dtype=np.int64))
    summed = eqn.invars[0].shape[-1] if eqn.invars[0].shape else 1
    return max(size(eqn.outvars[0]), 1) * int(summed)


class NotProved(Exception):
    """numba typed a value of the step other than the graph says it is."""


class NotReady(Exception):
    """A kernel compiling in the background process is not ready yet: run NumPy's code this
    call (compiler="auto")."""


_PROVING = threading.RLock()  # NativeKernel: loading and proving, one thread at a time


def _unlock_in_child():
    """A child forked while another thread proved a kernel: that thread is not in it."""
    global _PROVING
    _PROVING = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_unlock_in_child)


SLOW_COMPILE_S = 10  # seconds: a compile still running then is logged at WARNING
STATS = collections.Counter()  # "kernel calls": how often a kernel was called (tests read it)
log = logs.get("numba")

# What a kernel raises where NumPy's loop would raise (or not) its own way: the executor then
# runs that loop. Anything else is a bug here, and surfaces.
KERNEL_ERRORS = (np.linalg.LinAlgError, IndexError, ValueError, ZeroDivisionError,
                 FloatingPointError)
# NumPy error modes a kernel cannot honour (it raises no FloatingPointError and calls no
# handler): under them the NumPy code runs. Its default, "warn", only warns: kernels give the
# same values without NumPy's RuntimeWarnings (docs/internals.md).
NUMPY_ONLY_ERRSTATES = ("raise", "call", "log")


def numpy_errstate_forbids():
    """Whether NumPy's error state asks for what only NumPy's own loops do."""
    return any(mode in NUMPY_ONLY_ERRSTATES for mode in np.geterr().values())


def missing():
    """None when numba imports, else how to install it."""
    try:
        import numba  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or a broken install
        return (f"compiler='numba' needs numba ({type(e).__name__}: {e}); install it with "
                "`pip install 'scanlib-autodiff[jit]'` (numba and scipy), or use compiler='numpy'")
    return None


def available():
    return missing() is None


class _NativeWriter(LoopWriter):
    """emit.py's writer with the step loop printed as a numba kernel (`kernel_source`)."""

    def ref_step(self, v):
        if not is_var(v):
            return literal_code(v.value, None)
        return super().ref_step(v)

    def step_work(self):
        prog, mem, names = self.prog, self.mem, self.names
        if prog.in_place or prog.copied:
            raise Unsupported("an in-place indexed update (.at[...]) of a carry")
        self.scope = Scope("n")  # a nested scan's loop and its values (n0, nx1, nt2, ...)
        self.loop_carries = [i for i in range(prog.num_carry) if i not in prog.accumulators]
        # The step reads each carry by a name assigned once (Scope.step_aliases says why).
        carry_names = {v: names[v] for v in prog.carry_in}
        self.aliases = {f"s{i}" for i in self.loop_carries}
        for i in self.loop_carries:
            names[prog.carry_in[i]] = f"s{i}"
            self.step.append(f"s{i} = c{i}")
        step = prog.in_section(STEP)
        write = Fusion([prog.eqns[n] for n in step], self._read_elsewhere(step))
        for n in step:
            eqn = prog.eqns[n]
            args = [Arg(self.ref_step(a), a) for a in eqn.invars]
            self.step += write(eqn, args, [names[v] for v in eqn.outvars], self.scope)
        self.step += write.flush()
        for v, targets in mem.slots.items():
            for target in map(str, targets):
                shape = tuple(v.shape) if is_var(v) else ()
                self.step += nests.store(target, self.ref_step(v), shape, len(self.step))
        if self.loop_carries:
            self.step.append(", ".join(f"c{i}" for i in self.loop_carries) + " = "
                             + ", ".join(self._carry_out(i) for i in self.loop_carries))
        names.update(carry_names)
        # The kernel's carries are its own arrays (numba types one array per variable).
        self.prologue += [f"c{i} = xp.array(c{i}, copy=True)" for i in self.loop_carries
                          if prog.carry_in[i].shape]

    def _read_elsewhere(self, step):
        """The values a step computes that something besides its equations reads: the body's
        outputs, the rows stored, the accumulators' terms, other sections' equations."""
        prog, inside = self.prog, set(step)
        read = set(prog.graph.outvars) | set(self.mem.slots)
        for acc in prog.accumulators.values():
            read.update(acc.how.reads())
        for n, eqn in enumerate(prog.eqns):
            if n not in inside:
                read.update(eqn.invars)
        return read

    def _carry_out(self, i):
        """The next carry i, a fresh array (a view of an input would change its type), or the
        carry's own array where the body passes it through (nothing writes into it)."""
        v, like = self.prog.carry_out[i], self.prog.carry_in[i]
        if not is_var(v):
            return literal_code(v.value, like.dtype)
        code = self.ref_step(v)
        if v is like:
            return code
        n = self.prog.producer.get(v)
        fresh = n is not None and self.prog.section.get(n) is STEP and \
            self.prog.eqns[n].prim.name not in VIEWS
        return code if fresh or not like.shape else f"{code}.copy()"

    # --- the kernel and its call -----------------------------------------------------------
    def step_loop(self, steps):
        prog = self.prog
        defined = set(self.names[v] for n in prog.in_section(STEP)
                      for v in prog.eqns[n].outvars) | set(self.step_slices.values())
        known = defined | self.aliases
        by_name = {name: v for v, name in self.names.items()}
        used = []
        for line in self.step:
            for word in re.findall(r"\b[A-Za-z_]\w*\b", line):
                if (word in by_name or re.fullmatch(r"[XYHS]\d+", word)) and \
                        word not in known and word not in used:
                    used.append(word)
        carries = [f"c{i}" for i in self.loop_carries]
        inputs = carries + [w for w in used if w not in carries]
        self.kernel_params = ["t0", "t1"] + inputs
        body = [f"for t in {steps}:"] + ["    " + s for s in self.step]
        body.append(f"return ({', '.join(carries)}{',' if carries else ''})")
        self.kernel_body = body
        self.expected = {**self._expected(by_name, defined | set(carries)),
                         **self.scope.expected}
        args = ["t0", "t1"] + [f"{w}[()]" if w in by_name and not by_name[w].shape else w
                               for w in inputs]
        call = f"_kernel({', '.join(args)})"
        lines = [f"{', '.join(carries)}, = {call}" if carries else call]
        for i in self.loop_carries:  # numba hands back a 0-d carry as a Python scalar
            if not prog.carry_in[i].shape:
                self.env[f"_d{i}"] = prog.carry_in[i].dtype.type
                lines.append(f"c{i} = _d{i}(c{i})")
        return lines

    def _expected(self, by_name, names):
        """name -> (dtype, ndim) for every value the kernel computes or carries (a step's
        slice of an xs or batched value has the graph's per-step shape)."""
        slices = {s: v for v, s in self.step_slices.items()}
        out = {}
        for name in names:
            v = by_name.get(name) or slices[name]
            out[name] = (np.dtype(v.dtype), len(v.shape))
        return out

    def step_locals(self):
        return []  # the kernel's own

    def epilogue(self):
        return [f"c{i} = xp.asarray(c{i})" for i in self.loop_carries
                if not self.prog.carry_in[i].shape]

    def kernel_source(self):
        return kernel_module(self.kernel_params, ["    " + s for s in self.kernel_body])


_LOOP_FUNCTION = re.compile(r"_\w*loop\d+")  # the names Scope.loop_function gives


def kernel_module(params, body_lines, what="kernel", functions=()):
    """The source of a kernel module: `kernel(*params)` with the given (indented) lines, the
    helpers imported, and before it the source lines of the `functions` it calls (its loops:
    Scope.loop_function). Its hash is the kernel's cache key, so the helpers' digest is in
    it (a changed helper: a new key)."""
    return "\n".join([
        f"# scanlib {what}; helpers {_helpers_digest()}",
        "import numba",
        "import numpy as np",
        "",
        "from scanlib.scan.loop.native_kernels import _cholesky_stack, _row, _rows_extreme, "
        "_scatter1, _scatter2, _sigmoid, _sigmoid1, _sigmoid_from, _softplus, _softplus1, "
        "_softplus_from, _solve, _solve_stack, _take1, _take2, "
        "_triangular_solve, _triangular_solve_stack",
        "from scanlib.scan.loop.native_prng import _argmax_rows, _fixed_indices, _prng_bits32, "
        "_prng_bits64, _prng_fold_in, _prng_shuffle, _prng_split, _prng_unit32, _prng_unit64",
        "",
        "",
        *[line for function in functions for line in function],
        "@numba.njit(cache=CACHE, nogil=True, error_model='numpy')",
        f"def kernel({', '.join(params)}):",
        *nests.double_buffer_carries(nests.hoist_buffers(body_lines)), ""])


class NativeKernel:
    """A numba dispatcher that runs only on argument types it was proved for: compiled for
    them, then every value's inferred type checked against the graph's, then run. New types
    take that path again (compilation is disabled in between, so none slips through). A
    kernel numba loads from its disk cache has no types to read: its proof was recorded
    beside it (`proofs`, one line per signature) when it was first compiled and checked.

    `background` (compiler="auto"): a signature not yet compiled is compiled, checked and
    recorded by another process (native_background.py) while the caller runs NumPy's code
    (NotReady); once that process is done, it loads from numba's disk cache here."""

    def __init__(self, dispatcher, expected, name, proofs=None, what=None, background=False,
                 source=None):
        self.dispatcher, self.expected, self.name, self.proofs = \
            dispatcher, expected, name, proofs
        self.what = what or f"the kernel of {name!r}"  # how the log names it
        self.background, self.source = background, source  # dispatcher None: load source
        self._jobs = {}  # signature -> the background compile of it
        self.proved = set()
        self.compile_seconds = 0.0
        self._digest = hashlib.sha256(repr(sorted(
            (k, str(d), r) for k, (d, r) in expected.items())).encode()).hexdigest()[:16]
        if dispatcher is not None:
            self._disable_compile()

    def _disable_compile(self):
        # numba's own switch (disable_compile) refuses a dispatcher with no signature yet.
        self.dispatcher._can_compile = False

    def __call__(self, *args):
        STATS["kernel calls"] += 1
        if self.dispatcher is not None:
            try:
                return self.dispatcher(*args)
            except TypeError:  # not compiled for these types
                pass
            except RuntimeError as e:  # the same, found while another thread proved a kernel
                if "compilation disabled" not in str(e):
                    raise
        # One thread at a time loads, proves or asks for a kernel: numba's switch
        # (_can_compile) and the loaded kernels are shared by the threads.
        with _PROVING:
            if self.dispatcher is None:  # compiling in the background: not loaded here yet
                self._prove_in_background(args)
            else:
                sig = _signature(args)
                if sig not in self.proved:  # (proved: numba's own TypeError, again below)
                    if self.background:
                        self._prove_in_background(args, sig)
                    else:
                        self._prove(sig)
        return self.dispatcher(*args)

    def waiting(self):
        """Whether the kernel cannot run now: a compile of it is under way in the background
        process, or it is not loaded and the background queue is full
        (native_background.MAX_QUEUED). The caller then runs its NumPy code without trying
        it (a try would first do the work before the kernel's call, which NumPy's code then
        does again)."""
        if self.background and not self.proved and not self._jobs and native_background.full():
            return True
        return any(not job.done() for job in self._jobs.values())

    def _prove_in_background(self, args, sig=None):
        """Load the kernel for args' types if it is compiled and proved (by this process, the
        background one, or another before), else have the background process compile it and
        raise NotReady. Until then numba is not imported here: the job names the arguments'
        types by `argument_types` where it can (numba's start-up is half a second)."""
        types = argument_types(args) if sig is None else None
        if types is None and sig is None:
            sig = _signature(args)
        asked = types if types is not None else sig  # how the job names the types
        job = self._jobs.get(asked)
        if job is not None and job.pid != os.getpid():  # the parent's, before a fork: ask anew
            job = self._jobs.pop(asked) and None
        if job is None:
            if self.proofs is None:
                raise NotProved("it cannot be compiled in the background: no writable cache "
                                "directory (set SCANLIB_CACHE_DIR)")
            recorded = self._recorded()
            token = f"{self._digest} {sig}" if types is None else \
                f"{self._digest} args {types!r}"
            if token in recorded:  # compiled and proved before: on disk
                self._prove(sig if sig is not None else _signature(args))
                return
            if native_background.full():  # asked for again once the queue has room
                raise NotReady(self.what)
            self._jobs[asked] = native_background.submit(
                self.proofs[:-len(".proofs")] + ".py", asked, self.expected, self.name,
                self.what)
            raise NotReady(self.what)
        if not job.done():
            raise NotReady(self.what)
        if job.error is not None:
            raise NotProved(job.error)
        sig = sig if sig is not None else _signature(args)
        if f"{self._digest} {sig}" not in self._recorded():  # argument_types missed a type
            raise NotProved(f"the background process compiled it for other types than ({sig})")
        self._prove(sig)  # from numba's disk cache, with the proof the other process wrote

    def _prove(self, sig):
        if self.dispatcher is None:
            self.dispatcher, self.proofs = load_kernel(self.source)
            self._disable_compile()
        log.info("compiling %s (seconds, unless numba's disk cache has it)", self.what)
        log.debug("numba types of its arguments: (%s)", ", ".join(map(str, sig)))
        start = time.perf_counter()
        # A compile can take minutes on an empty cache: say so while it runs (WARNING).
        still = threading.Timer(SLOW_COMPILE_S, log.warning, (
            "still compiling %s after %d s: numba's first compile of a large kernel can take "
            "minutes; it is then cached on disk for later processes", self.what,
            SLOW_COMPILE_S))
        still.daemon = True
        still.start()
        from numba.core.compiler_lock import global_compiler_lock

        try:
            # Switched on only within numba's lock, which its compile takes before it reads
            # the switch: a call of another thread that finds it on cannot compile, unproved,
            # types of its own (it raises "compilation disabled", and is proved in turn).
            with global_compiler_lock:
                self.dispatcher._can_compile = True
                try:
                    self.dispatcher.compile(sig)
                finally:
                    self.dispatcher._can_compile = False
        except Exception as e:  # noqa: BLE001 - numba's typing and lowering errors
            log.info("%s does not compile (%.1f s)", self.what,
                      time.perf_counter() - start)
            raise NotProved(f"numba cannot compile it: {_numba_reason(e)}") from None
        finally:
            still.cancel()
        seconds = time.perf_counter() - start
        self.compile_seconds += seconds
        token = f"{self._digest} {sig}"
        typemap = getattr(self.dispatcher.overloads[sig].type_annotation, "typemap", None)
        if isinstance(typemap, dict):
            log.info("compiled %s in %.1f s; %s", self.what, seconds, self._cached_where(sig))
        else:
            log.info("loaded %s from numba's disk cache in %.2f s; %s", self.what, seconds,
                      self._cached_where(None))
        loops = self._loop_typemaps()
        if isinstance(typemap, dict) and all(isinstance(t, dict) for t in loops):
            for t in [typemap, *loops]:
                self._check(t)
            self._record(token)
        elif token not in self._recorded():
            raise NotProved("numba loaded it from its disk cache, where its types cannot be "
                            "read, and no check of them was recorded: delete "
                            f"{os.path.dirname(self.proofs or '') or 'the cache'} to compile "
                            "it again")
        self.proved.add(sig)

    def _loop_typemaps(self):
        """The typemap (None where numba loaded it from its disk cache) of each signature
        of the functions the kernel calls (its loops: Scope.loop_function), which numba
        compiled when it compiled the kernel."""
        found = []
        for name, fn in self.dispatcher.py_func.__globals__.items():
            if _LOOP_FUNCTION.fullmatch(name) and hasattr(fn, "overloads"):
                found += [getattr(o.type_annotation, "typemap", None)
                          for o in fn.overloads.values()]
        return found

    def _check(self, typemap):
        for var, typ in typemap.items():
            name = var.split(".")[0]
            want = self.expected.get(name)
            if want is None and name.endswith(nests.ELEMENT):  # a loop nest's element
                want = self.expected.get(name[:-len(nests.ELEMENT)])
                want = None if want is None else (want[0], 0)
            if want is not None:
                got = _dtype_and_rank(typ)
                if got != want:
                    raise NotProved(
                        f"numba types {name} as {typ}, the graph as {want[0]} with "
                        f"{want[1]} axes")

    def _cached_where(self, sig):
        """Where numba keeps the kernel of sig (None: loaded from there), for the log."""
        if self.proofs is None:
            return ("not cached (no writable cache directory: set SCANLIB_CACHE_DIR), so "
                    "each process compiles it again")
        import numba

        where = numba.config.CACHE_DIR or os.path.dirname(self.proofs)
        if sig is not None:
            try:  # numba declines some kernels (with a NumbaWarning): see that it is there
                saved = self.dispatcher._cache.load_overload(sig, self.dispatcher.targetctx)
            except Exception:  # noqa: BLE001 - numba's cache internals: say where it would be
                saved = True
            if saved is None:
                return ("not cached by numba (a NumbaWarning says why), so each process "
                        "compiles it again")
        return f"cached in {where}"

    def _recorded(self):
        try:
            with open(self.proofs) as fh:
                return set(fh.read().splitlines())
        except (OSError, TypeError):
            return set()

    def _record(self, token):
        if self.proofs is not None and token not in self._recorded():
            try:
                with open(self.proofs, "a") as fh:
                    fh.write(token + "\n")
            except OSError:
                pass


def argument_types(args):
    """The types numba gives the arguments, without numba: per argument (kind, ...) as
    `proxy` reads it back, or None for an argument it does not describe (numba's own typeof
    is then needed). numba types an array by dtype, rank, layout (C, F or A, read from the
    flags as here) and whether it is writable; a Python int below 2**63 in magnitude as
    int64."""
    types = []
    for a in args:
        if isinstance(a, np.ndarray):
            dt = a.dtype
            if not a.flags.aligned or not dt.isnative or dt.hasobject or dt.fields:
                return None
            layout = "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"
            types.append(("array", dt.str, a.ndim, layout, bool(a.flags.writeable)))
        elif isinstance(a, np.generic) and a.dtype.isnative and not a.dtype.hasobject:
            types.append(("scalar", a.dtype.str))
        elif type(a) in (bool, float, complex):
            types.append((type(a).__name__,))
        elif type(a) is int and a.bit_length() < 64:
            types.append(("int",))
        else:
            return None
    return tuple(types)


def proxy(kind):
    """A value numba types as `kind` (an entry of argument_types)."""
    if kind[0] == "array":
        _, dtype, ndim, layout, writeable = kind
        if layout == "C":
            a = np.zeros((1,) * ndim, dtype)
        elif layout == "F":
            a = np.zeros((2,) * ndim, dtype, order="F")
        else:  # every other element: contiguous in no order
            a = np.zeros((4,) * ndim, dtype)[(slice(None, None, 2),) * ndim]
        a.flags.writeable = writeable
        return a
    if kind[0] == "scalar":
        return np.dtype(kind[1]).type(0)
    return {"bool": False, "int": 0, "float": 0.0, "complex": 0j}[kind[0]]


def _signature(args):
    """numba's types of a kernel's arguments (NotProved where it has none, or where numba
    does not import: a kernel recorded in the cache by a numba that a NumPy upgrade broke)."""
    try:
        import numba
    except Exception as e:  # noqa: BLE001 - ImportError, or a broken install
        raise NotProved(f"numba does not import ({type(e).__name__}: {e})") from None
    try:
        return tuple(numba.typeof(a) for a in args)
    except Exception as e:  # noqa: BLE001 - a big-endian array, an object numba lacks
        raise NotProved(f"numba cannot type an argument: {_numba_reason(e)}") from None


def new_kernel(ksource, expected, name, what, background=False):
    """The NativeKernel of a kernel module's source. `background`: compiled in another
    process; the module is then only written to the cache directory here, and loaded once
    it is compiled (numba's start-up, about half a second, is not paid before)."""
    if background:
        path = kernel_file(ksource)
        proofs = None if path is None else path[:-3] + ".proofs"
        return NativeKernel(None, expected, name, proofs, what, True, ksource)
    dispatcher, proofs = load_kernel(ksource)
    return NativeKernel(dispatcher, expected, name, proofs, what)


def _numba_reason(e):
    """The telling lines of a numba error (its first line only names the compiler stage)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    telling = [ln for ln in lines if not ln.startswith(("Failed in", "During:", "File ", "^"))
               and "kernel(" not in ln]
    return " ".join((telling or lines or [type(e).__name__])[:2])[:300]


def _dtype_and_rank(typ):
    from numba.core import types
    from numba.np.numpy_support import as_dtype

    typ = types.unliteral(typ)
    try:
        if isinstance(typ, types.Array):
            return (np.dtype(as_dtype(typ.dtype)), typ.ndim)
        return (np.dtype(as_dtype(typ)), 0)
    except Exception:  # noqa: BLE001 - a tuple, None, ...: not a value of the graph
        return (None, None)


class TierChoice:
    """Under compiler="auto": which of a kernel and NumPy's code is faster for one body,
    measured on its calls. Each call's seconds (per step, for a scan) are recorded for the
    tier that ran it; the kernel's first call is left out (it loads the kernel). Once each
    has SAMPLES, the faster runs from then on (a kernel slower than NumPy's loop on large
    values, or by its numba-compiled libm). Both give the loop's values, to rounding."""

    SAMPLES = 3

    def __init__(self, what, unit="step"):
        self.what, self.unit, self.decided = what, unit, None
        self.seconds = {"kernel": [], "numpy": []}
        self._skipped_first = False

    def kernel_turn(self):
        """Whether this call should try the kernel."""
        if self.decided is not None:
            return self.decided == "kernel"
        return len(self.seconds["kernel"]) < self.SAMPLES or \
            len(self.seconds["numpy"]) >= self.SAMPLES

    def record(self, tier, seconds, steps=1):
        if self.decided is not None:
            return
        if tier == "kernel" and not self._skipped_first:
            self._skipped_first = True
            return
        self.seconds[tier].append(seconds / max(steps, 1))
        if all(len(v) >= self.SAMPLES for v in self.seconds.values()):
            kernel, numpy = min(self.seconds["kernel"]), min(self.seconds["numpy"])
            self.decided = "kernel" if kernel <= numpy else "numpy"
            log.info("%s: %s (the kernel %.3g us a %s, NumPy's code %.3g us)", self.what,
                     "the kernel runs it" if self.decided == "kernel" else
                     "NumPy's code runs it, faster than the kernel", kernel * 1e6, self.unit,
                     numpy * 1e6)


class NativeLoop:
    """The Python `run` (emit.py's, its step loop a kernel call) and its kernel."""

    def __init__(self, source, run, kernel_source, kernel):
        self.source, self.run = source, run
        self.kernel_source, self.kernel = kernel_source, kernel


def build(prog, background=False):
    """The NativeLoop of a LoopProgram; None when it has no per-step work; Unsupported
    (raised) when its step loop has no numba translation. `background`: its kernel compiles
    in another process (NativeKernel)."""
    w = _NativeWriter(prog)
    source = w.source()
    if not w.step:
        return None  # no per-step work: the NumPy loop runs it in whole chunks already
    ksource = w.kernel_source()
    kernel = new_kernel(ksource, w.expected, prog.graph.name, describe(prog), background)
    w.env["_kernel"] = kernel
    generated.exec_source(source, f"scan loop over {prog.graph.name} (numba)", w.env)
    return NativeLoop(source, w.env["run"], ksource, kernel)


def describe(prog):
    """The step loop of a body as the log names it: its name and its values' types."""
    def types(vs):
        return ", ".join(type_str(v.shape, v.dtype) for v in vs) or "none"

    nc, nx = prog.num_carry, prog.num_xs
    ins = prog.graph.invars
    return (f"the step loop of scan body {prog.graph.name!r} (carry {types(ins[:nc])}; "
            f"x {types(ins[nc:nc + nx])}{'; reverse' if prog.reverse else ''})")


_loaded = {}


# Read into every kernel's cache key (_helpers_digest): the helpers numba inlines, and the
# code that checks a kernel's types and records the check beside it (.proofs), so that a
# record made by another version of the check is never trusted.
KEYED_SOURCES = ("native_kernels.py", "native_prng.py", "native.py", "native_background.py",
                 "native_worker.py")
_HERE = os.path.dirname(__file__)


@functools.lru_cache(maxsize=None)
def _helpers_digest(directory=_HERE):
    """numba's cache keeps a kernel's machine code, helpers inlined, until the kernel's own
    file changes: so the helpers' source and numba's version are part of every kernel's, and
    the checker's source (KEYED_SOURCES) too."""
    from ...ops import prng_kernel

    text = _numba_version().encode() + prng_kernel.SOURCE.encode()
    # Read, not imported: importing the helpers starts numba's compiler (half a second).
    for name in KEYED_SOURCES:
        with open(os.path.join(directory, name), "rb") as fh:
            text += fh.read()
    return hashlib.sha256(text).hexdigest()[:16]


def _numba_version():
    """numba's version from its metadata (importing it takes half a second), else its
    _version.py (an application frozen without the metadata), else "unknown"."""
    from importlib import metadata

    try:
        return metadata.version("numba")
    except Exception:  # noqa: BLE001 - PackageNotFoundError, a broken install
        pass
    try:
        origin = importlib.util.find_spec("numba").origin
        with open(os.path.join(os.path.dirname(origin), "_version.py")) as fh:
            return fh.read()
    except Exception:  # noqa: BLE001 - no such file: numba's own cache checks its version
        return "unknown"


def load_kernel(ksource):
    """(kernel function, the file of its recorded proofs or None) of a kernel module's source:
    from a file in the cache directory (so numba's own cache keeps its machine code across
    processes), or, when that directory cannot be written, compiled from the source in
    memory."""
    key = _key(ksource)
    if key in _loaded:
        return _loaded[key]
    path, namespace, proofs = kernel_file(ksource), None, None
    if path is not None:
        try:
            namespace, proofs = import_kernel(path), path[:-3] + ".proofs"
        except OSError:
            namespace = None
    if namespace is None:
        namespace = {}
        generated.exec_source(ksource.replace("cache=CACHE", "cache=False"),
                              f"scan kernel {key}", namespace)
    _loaded[key] = namespace["kernel"], proofs
    return _loaded[key]


def _key(ksource):
    return hashlib.sha256(ksource.encode()).hexdigest()[:24]


def kernel_file(ksource):
    """The path of the kernel module's file in the cache directory (written unless it is
    there with this source: a file changed on disk is written again, and numba, seeing it
    changed, compiles it again), or None when that directory cannot be written."""
    directory = _cache_dir()
    if directory is None:
        return None
    path = os.path.join(directory, f"scanlib_kernel_{_key(ksource)}.py")
    text = ksource.replace("cache=CACHE", "cache=True")
    try:
        try:
            with open(path) as fh:
                there = fh.read()
        except (FileNotFoundError, UnicodeDecodeError):
            there = None
        if there != text:
            fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
    except OSError:
        return None
    return path


def import_kernel(path):
    """The namespace of the kernel module at path (a file of the cache directory)."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # numba's cache finds the function through it
    spec.loader.exec_module(module)
    return vars(module)
