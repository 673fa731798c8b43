"""`jit(f)`: trace f once per signature into a graph and replay that graph, as `jax.jit`
caches its traces. What it saves is the Python around the arrays: tracing f, the tape,
linearizing scans and walking back through them, which for a short scan called thousands of
times (a sampler's likelihood) is most of a call.

A call looks up its signature (the pytree structure of the arguments, each leaf's shape,
dtype and device, the static arguments' values, the scan compiler default and whether grad
is on); a new one traces f on tracers, an old one runs the graph's primitives in order from
generated straight-line Python, without a tape.
Imports backends, tape, pytree, tracing, scan and the logger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import collections
import contextlib
import contextvars
import functools
import inspect
import threading
import time
import weakref

import numpy as np

from . import backends, generated, logs, pytree, while_replay
from .scan import fused, regions
from .scan.api import default_compiler
from .tape import Tensor, current_builder, grad_enabled
from .tape.graph import (Literal, Var, merge_rebound, param_fingerprint,
                          prune_outputs)
from .tape.tensor import type_str
from .tracing import closure_names, int_positions, trace_function

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Iterator

_MAX_TRACES = 256  # per jitted function; the least recently used trace goes first
_RETRACES = 8  # traces that differ only in Python numbers' values: then a warning, once
_PY_SCALARS = (bool, int, float, complex)
_log = logs.get("jit")

CacheInfo = collections.namedtuple("CacheInfo", "hits misses eager maxsize currsize")
CacheInfo.__doc__ = """A jitted function's counts (`jitted.cache_info()`), as functools.lru_cache's:
hits (calls that ran a cached trace), misses (traces made: calls with a new signature, or
`.trace` of one), eager (calls that ran f itself, with a JitFallbackWarning the first time
for each reason), maxsize (the traces kept; the least recently used goes first) and
currsize (the traces cached now)."""


class JitFallbackWarning(UserWarning):
    """`jit` runs f itself, eagerly, instead of its trace (the same values, none of the
    speed): an argument or a tensor f reads requires grad, or the arguments are on different
    devices; or it keeps tracing f again, for each new value of a Python-number argument
    (static, as documented). Warned once per jitted function and reason;
    `jitted.cache_info()` counts eager calls and traces. Silence it with the warnings module:

    >>> import scanlib as sl
    >>> sl.JitFallbackWarning.__mro__[1].__name__  # warnings.simplefilter("ignore", it)
    'UserWarning'
    """


def jit(f: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        donate_argnames: str | Sequence[str] = (), keep_unused: bool = False,
        inline: bool = False) -> Callable[..., Any]:
    """f compiled once per signature, like `jax.jit`: the same results as f, faster to call
    again; `jitted.cache_info()` counts its traces, replays and eager calls.

    The first call with a new signature (the arguments' pytree structure, each array's
    shape, dtype and device, the values of static arguments and of Python-number leaves)
    traces f into a graph, as scan traces its body; later calls run that graph, without
    tracing f, building a tape or linearizing the scans inside. `jit(value_and_grad(loss))`
    is the form a sampler or an optimiser loop wants.

    As in JAX, f must be a function of its arguments: what else it reads (globals, closed-over
    arrays, Python state) is read once, when it is traced (a writable closed-over NumPy array
    is copied then), and Python control flow on argument values raises (use `scanlib.where`,
    `fori_loop`, `while_loop`). Arrays, NumPy scalars (np.float64(x), what the gradient of a
    0-d parameter holds) and Tensors are traced by shape and dtype, as JAX traces its arrays:
    f sees them as Tensors, and a new value runs the same trace. Python numbers among the
    arguments are static (a new value traces again), unlike JAX's weakly typed traced ones:
    a traced 0-d array would lose NumPy 2's weak promotion of Python numbers, and `x * c`
    with a float32 x would then give float64 where f gives float32. Pass a value that
    changes from call to call (a learning rate) as a NumPy scalar or 0-d array of the dtype
    it should compute in (np.float32(lr) beside float32 parameters: np.float64(lr) would make
    them float64, as it does outside jit); the eighth trace that differs only in Python
    numbers' values warns (JitFallbackWarning).
    `static_argnums` / `static_argnames`
    name the arguments that are static (hashable; part of the signature by value), by
    position or by name, as in JAX: numbers, tuples, frozensets and frozen dataclasses are
    compared by their contents' exact values (1 is not 1.0, -0.0 is not 0.0); another object
    by its `==`, which must then tell apart values that make f compute differently. A jitted
    method takes `self` as args[0] (static_argnums=0 for an object that is not a pytree of
    arrays). The order of a dict's keys is part of the signature too (f may iterate over it).

    The result holds no tape: f runs as itself, on the tape, when an argument requires grad
    or f reads a tensor that does (so gradients through a jitted call are those of f; jit
    the gradient, `jit(value_and_grad(f))`, to run it compiled), and when the arguments are
    on different devices; the first such call of each kind warns (JitFallbackWarning). Inside
    a scan body or another trace it is traced inline. `jitted.trace(*args)` returns the graph
    a signature runs (print it); `jitted.cache_info()` counts the traces made, the calls that
    replayed one and those that ran f eagerly. Each trace is logged at INFO on the
    `scanlib.jit` logger.

    The graph runs as the same NumPy calls f makes (the same bits), less those whose results
    nothing reads (the cotangent of an argument grad does not ask for), as XLA drops them
    under JAX's jit, except where they have an effect (a print); an error such a call would
    raise (a Cholesky factor of a matrix that is not positive definite) is then not raised,
    as under JAX's jit. Where every scan in it asked for compiler="numba" (or "auto", the
    default where numba is installed) and the scans are short and small (scan/fused.py),
    and its work outside the scans is not largely batched work NumPy does as fast (many
    equations on long arrays, as an associative scan's levels), the whole call runs as one
    numba kernel, each scan as the plain loop over its body, so a gradient's sums are taken
    in the loop's order and results agree with f's to rounding.
    Under "auto" the scans' own kernels compile first, in a background process while the
    NumPy calls run, then that kernel; it runs once it measures faster than the scans' own
    kernels (they compile sooner, and on some calls run faster: a Kalman filter's).
    Otherwise, with those compilers, each stretch of arithmetic on large arrays between the
    scans (a softmax's max and sums over a few actions, a tanh layer's backward) runs as a
    small numba kernel, once it measures faster than its NumPy calls (scan/regions.py).

    `donate_argnums`, `donate_argnames`, `keep_unused` and `inline` are accepted, as JAX's
    hints, and change nothing: scanlib never writes into an argument's buffer (a donated
    array stays valid, where JAX may delete it), and every argument is kept.

    >>> import scanlib as sl
    >>> f = sl.jit(sl.value_and_grad(lambda w: sl.sum(sl.tanh(w) ** 2)))
    >>> value, g = f(sl.tensor([0.5, -1.0]))
    >>> round(value.item(), 6), f.trace(sl.tensor([0.5, -1.0])).name
    (0.793578, 'f')
    >>> _ = f(sl.tensor([2.0, 3.0]))  # a new value of the same signature: replayed
    >>> f.cache_info()
    CacheInfo(hits=1, misses=1, eager=0, maxsize=256, currsize=1)
    """
    int_positions("jit", "donate_argnums", donate_argnums)  # checked, as JAX checks them
    if not isinstance(donate_argnames, str) and not all(
            isinstance(n, str) for n in donate_argnames):
        raise TypeError(f"jit: donate_argnames must be strings, got {donate_argnames!r}")
    if f is None:  # @jit(static_argnums=...)
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames)
    return Jitted(f, static_argnums, static_argnames)


_DISABLED = contextvars.ContextVar("scanlib_jit_disabled", default=False)


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within it, jitted functions run f itself, eagerly (print and inspect values inside
    f, step through it in a debugger), as `jax.disable_jit()`; the results are the same.

    >>> f = sl.jit(lambda x: x * 2)
    >>> with sl.disable_jit():
    ...     y = f(np.ones(2))
    >>> f.cache_info().misses
    0
    """
    token = _DISABLED.set(bool(disable))
    try:
        yield
    finally:
        _DISABLED.reset(token)


class Jitted:
    """A jitted function: call it as f. Holds one replayable trace per signature."""

    def __init__(self, f, static_argnums=(), static_argnames=()):
        if not callable(f):
            raise TypeError(f"jit: f must be callable, got {type(f).__name__}")
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        names = ((static_argnames,) if isinstance(static_argnames, str)
                 else tuple(static_argnames))
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in nums):
            raise TypeError(f"jit: static_argnums must be ints, got {static_argnums!r}")
        if not all(isinstance(n, str) for n in names):
            raise TypeError(f"jit: static_argnames must be strings, got {static_argnames!r}")
        # As JAX: a static parameter is static however it is passed, by position or by name.
        positional = _positional_names(f)
        names += tuple(positional[n] for n in nums
                       if -len(positional) <= n < len(positional) and positional[n])
        nums += tuple(positional.index(k) for k in names if k in positional)
        self.fun, self.static_argnums = f, tuple(dict.fromkeys(nums))
        self.static_argnames, self._n_positional = tuple(dict.fromkeys(names)), len(positional)
        self._traces = collections.OrderedDict()
        self._snapshots = {}  # id(closed-over array) -> (weakref, copy): one per value
        self._lock = threading.Lock()
        self._hits = self._misses = self._eager = 0
        self._warned = set()  # the reasons already warned of (JitFallbackWarning)
        self._by_numbers = collections.Counter()  # signature less numbers' values -> traces
        # A call whose arguments are arrays or pytrees of them, positional, none static (the
        # common case): its trace by their structure, shapes and dtypes, found without
        # building a _Signature, whose key those decide then (see _arrays_key).
        self._by_arrays = {}
        self._arrays_only = not (self.static_argnums or self.static_argnames)
        functools.update_wrapper(self, f, updated=())  # not f.__dict__: a Jitted f has ours

    def _static_positions(self, nargs):
        """The positions among nargs positional arguments that are static, in order."""
        nums = set()
        for n in self.static_argnums:
            if -nargs <= n < nargs:
                nums.add(n % nargs)
            elif not 0 <= n < self._n_positional:  # else: left to its default, or a keyword
                raise ValueError(f"jit: static_argnums {self.static_argnums!r} is out of "
                                 f"range for {nargs} positional arguments")
        return sorted(nums)

    def __call__(self, *args, **kwargs):
        if current_builder() is not None:  # inside a scan body or another trace: inline
            return self.fun(*args, **kwargs)
        if _DISABLED.get():
            return self._call_eagerly(args, kwargs)
        found = _arrays_key(args) if self._arrays_only and not kwargs else None
        if found is not None:
            trace = self._by_arrays.get(found[0])
            if trace is not None and not (trace._tensor_consts and trace.reads_grad_tensor()):
                self._hits += 1
                return trace(found[1], found[2])
        sig = _Signature(self, args, kwargs)
        if sig.eager is not None:
            self._fall_back(*sig.eager)
            return self.fun(*args, **kwargs)
        trace, hit = self._trace_for(sig)
        if trace._tensor_consts and trace.reads_grad_tensor():  # the tape must see f on it
            names = closure_names(self.fun)
            read = ", ".join(sorted({names.get(id(c), "a tensor") for c in trace._tensor_consts
                                     if c.requires_grad}))
            self._fall_back("closed-over grad", read)
            return self.fun(*args, **kwargs)
        self._hits += hit
        if found is not None:
            if len(self._by_arrays) >= _MAX_TRACES:
                self._by_arrays.clear()
            self._by_arrays[found[0]] = trace
        return trace(sig.arrays, sig.callers)

    def _call_eagerly(self, args, kwargs):
        """f on args as a trace would see them (arrays as Tensors, static ones as given),
        under disable_jit."""
        static = set(self._static_positions(len(args)))

        def seen(leaf):
            return Tensor(leaf) if isinstance(leaf, (np.ndarray, np.generic)) else leaf

        args = [a if i in static else pytree.tree_map(seen, a) for i, a in enumerate(args)]
        kwargs = {k: v if k in self.static_argnames else pytree.tree_map(seen, v)
                  for k, v in kwargs.items()}
        return self.fun(*args, **kwargs)

    def _fall_back(self, reason, where):
        """Count a call that runs f eagerly, and say why the first time for each reason."""
        self._eager += 1
        name = _name(self.fun)
        if reason == "tracer":  # an escaped tracer: f raises, saying so
            return
        if reason == "grad":
            why = (f"{where} requires grad, so {name} runs eagerly, on the tape, at each such "
                   f"call (a trace records no tape; the gradient is then {name}'s own). To run "
                   f"the gradient compiled, jit the gradient: jit(value_and_grad({name})), "
                   "called with arrays or detached tensors.")
        elif reason == "closed-over grad":
            why = (f"{name} reads {where}, which requires grad, from outside its arguments, so "
                   "it runs eagerly on the tape at each such call. Pass it as an argument "
                   "of jit(value_and_grad(f)) instead, or .detach() it.")
        else:
            why = (f"the arguments are on different devices ({where}), so {name} runs "
                   "eagerly, where its operations say what that means. Move them to one "
                   "device (tensor.to(...)).")
        logs.warn_once(self._warned, reason, f"jit({name}): {why}", JitFallbackWarning, _log,
                       stacklevel=3)

    def cache_info(self) -> CacheInfo:
        """The counts of this jitted function's calls and traces, as functools.lru_cache's
        `cache_info()`: hits, misses (traces made), eager (calls that ran f itself), maxsize,
        currsize.

        >>> import numpy as np, scanlib as sl
        >>> f = sl.jit(lambda x: sl.sum(x * x))
        >>> for x in [np.ones(3), np.zeros(3), np.ones(4)]:
        ...     _ = f(x)
        >>> f.cache_info()
        CacheInfo(hits=1, misses=2, eager=0, maxsize=256, currsize=2)
        """
        return CacheInfo(self._hits, self._misses, self._eager, _MAX_TRACES, len(self._traces))

    def cache_clear(self):
        """Drop every trace and zero the counts (the next call traces again)."""
        with self._lock:
            self._traces.clear()
            self._by_arrays.clear()
            self._by_numbers.clear()
            self._hits = self._misses = self._eager = 0

    def trace(self, *args, **kwargs):
        """The Graph that calls with these arguments' signature run (traced now if new)."""
        return self._trace_for(_Signature(self, args, kwargs))[0].graph

    def _trace_for(self, sig):
        """(the Trace of sig's signature, whether it was cached)."""
        with self._lock:
            hit = self._traces.get(sig.key)
            if hit is not None:
                self._traces.move_to_end(sig.key)
                return hit, True
        start = time.perf_counter()
        trace = Trace(self.fun, sig, self._snapshots)
        with self._lock:
            self._misses += 1
            self._traces[sig.key] = trace
            if len(self._traces) > _MAX_TRACES:
                self._traces.popitem(last=False)
            cached = len(self._traces)
            numbers = sig.number_paths()
            if numbers:
                self._by_numbers[sig.key_without_numbers()] += 1
                retraces = self._by_numbers[sig.key_without_numbers()]
        if numbers and retraces == _RETRACES:
            name = _name(self.fun)
            logs.warn_once(
                self._warned, "numbers", f"jit({name}): traced {name} {_RETRACES} times for "
                f"new values of its Python-number arguments ({', '.join(numbers)}): a Python "
                "number is static, part of the signature by its value. Pass a value that "
                "changes from call to call as a NumPy scalar or 0-d array of the dtype it "
                "should compute in (np.float32(x) beside float32 arrays: np.float64(x) would "
                "make them float64), which is traced once for all its values.",
                JitFallbackWarning, _log,
                stacklevel=3)
        if _log.isEnabledFor(logs.logging.INFO):
            _log.info("jit(%s): traced for %s in %.1f ms (trace %d; %d cached)%s",
                      _name(self.fun), sig.describe(), 1e3 * (time.perf_counter() - start),
                      self._misses, cached,
                      "; runs as one numba kernel" if trace.fused is not None else "")
        return trace, False

    def __get__(self, obj, objtype=None):  # a method: jit of it, with obj as args[0]
        return self if obj is None else functools.partial(self, obj)

    def __reduce__(self):  # copy.deepcopy, pickle: the function and options, a new cache
        return (Jitted, (self.fun, self.static_argnums, self.static_argnames))

    def _cache_size(self):
        """How many signatures have a trace (JAX's private name; cache_info().currsize)."""
        return len(self._traces)

    def __repr__(self):
        return f"jit({getattr(self.fun, '__name__', self.fun)!r})"


def _arrays_key(args):
    """(key, arrays, callers) of a call whose positional arguments are arrays, or pytrees of
    arrays, none static: NumPy arrays (exactly, not a subclass) or Tensors of them that need
    no tape; else None. The key is their structure, shapes and dtypes, and what else
    _Signature's key holds that can change between such calls (dict key orders, recording,
    the default loop compiler): _Signature's key for such a call is a function of it.
    callers: the caller's own arrays among them, as _Signature's."""
    if all(type(a) is np.ndarray for a in args):  # the commonest case: no pytree to open
        key = [(a.shape, a.dtype) for a in args]
        arrays = callers = args
    else:
        arrays, treedef = pytree.flatten(args)
        key = [treedef]
        callers = []
        for i, a in enumerate(arrays):
            if type(a) is np.ndarray:
                callers.append(a)
            elif (type(a) is Tensor and a._trace is None and not a.requires_grad
                  and not a._weak and type(a._value) is np.ndarray):
                arrays[i] = a = a._value
            else:
                return None
            key.append((a.shape, a.dtype))
        if pytree.has_key_orders(treedef):
            key.append(pytree.key_orders(args, treedef))
    key.append(grad_enabled())
    key.append(default_compiler())
    return tuple(key), list(arrays), callers


@functools.lru_cache(maxsize=1024)
def _arguments_have_key_orders(treedef) -> bool:
    """Whether an argument (a leaf below the two dicts _Signature makes) holds a dict."""
    return any(pytree.has_key_orders(arg) for d in treedef.children() for arg in d.children())


def _key_orders(dynamic, treedef):
    """pytree.key_orders of a call's (positional, keyword) arguments: nothing where no argument
    holds a dict, since the two dicts around them are made in an order the key holds (the
    positions ascending, as the treedef sorts them; the keywords as tuple(kwargs))."""
    return pytree.key_orders(dynamic, treedef) if _arguments_have_key_orders(treedef) else ()


class _Signature:
    """A call's arguments split into traced leaves (arrays) and static parts, and its key."""

    def __init__(self, jitted, args, kwargs):
        nums = jitted._static_positions(len(args)) if jitted.static_argnums else []
        static = []
        if nums or jitted.static_argnames:
            static = [(f"args[{i}]", args[i]) for i in nums]
            static += [(f"{k}=", kwargs[k]) for k in jitted.static_argnames if k in kwargs]
            kwargs_dyn = {k: v for k, v in kwargs.items() if k not in jitted.static_argnames}
        else:
            kwargs_dyn = kwargs
        # Positional arguments keyed by their index, so that paths name them as f sees them.
        dynamic = ({i: a for i, a in enumerate(args) if i not in nums}, kwargs_dyn)
        leaves, self.treedef = pytree.flatten(dynamic)
        self.args, self.kwargs, self.leaves = args, kwargs, leaves
        # arrays: the traced leaves' values; callers: those that are the caller's own arrays
        # eager: None, or (reason, where) when f must run itself (Jitted._fall_back)
        self.arrays, self.callers, self.eager = [], [], None
        self.weak = set()  # positions in arrays of weakly typed tensors (part of the key)
        self._dynamic = dynamic
        leaf_keys, devices = [], set()
        for i, leaf in enumerate(leaves):
            if type(leaf) is np.ndarray:  # the common case first: this runs every call
                self.arrays.append(leaf)
                self.callers.append(leaf)
                leaf_keys.append((leaf.shape, leaf.dtype))
                continue
            if isinstance(leaf, Tensor):
                if leaf._trace is not None:  # a tracer that escaped its trace: f raises
                    self.eager = self.eager or ("tracer", None)
                elif leaf.requires_grad and grad_enabled() and self.eager is None:
                    path = pytree.flatten_with_paths(dynamic, "args")[0][i]
                    self.eager = ("grad", _where(path))  # the caller's tape needs f's ops
                value = leaf._value
                if isinstance(value, np.generic):  # a 0-d result of NumPy: a 0-d array
                    value = np.asarray(value)
                if leaf._weak:
                    self.weak.add(len(self.arrays))
            elif backends.is_array(leaf):
                if isinstance(leaf, np.ma.MaskedArray):
                    path = pytree.flatten_with_paths(dynamic, "args")[0][i]
                    raise TypeError(f"jit: {_where(path)} is a masked array; its mask would be "
                                    "ignored (as JAX refuses them): pass np.ma.filled(x, v) "
                                    "or the mask as an array of its own.")
                value = np.asarray(leaf)  # np.matrix too: f sees a Tensor, elementwise
                self.callers.append(value)
            elif _static_number(leaf):
                leaf_keys.append(("static", param_fingerprint(leaf)))
                continue
            else:
                path = pytree.flatten_with_paths(dynamic, "args")[0][i]
                raise TypeError(f"jit: {_where(path)} is a {type(leaf).__name__}; traced "
                                "arguments must be Tensors, arrays or Python numbers. Mark it "
                                "static (static_argnums=/static_argnames=) if f uses it as a "
                                "Python value.")
            weak = len(self.arrays) in self.weak  # one key per leaf, its weak type in it
            self.arrays.append(value)
            if type(value) is np.ndarray:
                leaf_keys.append((value.shape, value.dtype, "weak") if weak
                                 else (value.shape, value.dtype))
            else:
                device = backends.device_of(value)
                devices.add(device)
                leaf_keys.append((value.shape, value.dtype, device, weak))
        if devices:  # any CuPy data (NumPy's is on the CPU)
            on_cpu = any(type(a) is np.ndarray for a in self.arrays)
            if len(devices) + on_cpu > 1:  # f itself says what mixing them means (an error)
                names = sorted(devices | ({"cpu"} if on_cpu else set()), key=str)
                self.eager = self.eager or ("devices", " and ".join(map(str, names)))
            self.device = "cpu" if on_cpu else next(iter(devices))
        else:
            self.device = "cpu"
        self._static = static
        static_keys = tuple((where, _static_key(v, where)) for where, v in static)
        self.key = (self.treedef, _key_orders(dynamic, self.treedef), tuple(kwargs),
                    tuple(leaf_keys), static_keys, grad_enabled(), default_compiler())

    def number_paths(self):
        """Where the Python-number leaves are (static: each value its own trace)."""
        if not any(_static_number(leaf) for leaf in self.leaves):
            return []
        paths, leaves, _ = pytree.flatten_with_paths(self._dynamic, "args")
        return [_where(p) for p, leaf in zip(paths, leaves) if _static_number(leaf)]

    def key_without_numbers(self):
        """The key with each Python number's value left out (its type kept)."""
        leaf_keys = tuple(("static", type(leaf)) if _static_number(leaf) else k
                          for leaf, k in zip(self.leaves, self.key[3]))
        return self.key[:3] + (leaf_keys,) + self.key[4:]

    def describe(self):
        """The signature as the log shows it: each leaf's path and type, or static value."""
        paths, leaves, _ = pytree.flatten_with_paths(self._dynamic, "args")
        values, parts = iter(self.arrays), []
        for path, leaf in zip(paths, leaves):
            if _static_number(leaf):
                parts.append(f"{_where(path)}={leaf!r}")
            else:
                v = next(values)
                parts.append(f"{_where(path)}: {type_str(tuple(v.shape), v.dtype)}")
        parts += [f"{where.rstrip('=')}={v!r} (static)" for where, v in self._static]
        return "(" + ", ".join(parts) + ")"

    @property
    def avals(self):
        return [(tuple(a.shape), np.dtype(a.dtype)) for a in self.arrays]

    def call_with(self, traced_values):
        """f's arguments with the traced leaves replaced (the tracers, while tracing)."""
        values = iter(traced_values)
        leaves = [leaf if _static_number(leaf) else next(values) for leaf in self.leaves]
        positional, traced = pytree.unflatten(self.treedef, leaves)
        args = [positional[i] if i in positional else a for i, a in enumerate(self.args)]
        # In the caller's order, static keywords among them (f may iterate over **kwargs).
        kwargs = {k: traced[k] if k in traced else v for k, v in self.kwargs.items()}
        return args, kwargs


def _name(f):
    return getattr(f, "__name__", type(f).__name__).replace("<lambda>", "f")


def _static_number(leaf):
    """A Python number among the arguments (static), not a NumPy scalar (np.float64 is a
    float too, and is traced as a 0-d array)."""
    return isinstance(leaf, _PY_SCALARS) and not isinstance(leaf, (Tensor, np.generic))


def _positional_names(f):
    """The names of f's parameters that can be passed by position (None for positional-only
    ones, which have no keyword), or [] when f has no signature Python can read."""
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name if p.kind == p.POSITIONAL_OR_KEYWORD else None for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _where(path):
    return path.replace("args[1][", "kwargs[").replace("args[0][", "args[", 1)


def _static_key(value, where):
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"jit: the static argument {where} is a {type(value).__name__}, which "
                        "is not hashable; static arguments are part of the cache key by "
                        "value (use a tuple for a list), or pass arrays as traced "
                        "arguments.") from None
    return param_fingerprint(value)


class Trace:
    """One signature's graph and the straight-line code that runs it."""

    def __init__(self, fun, sig, snapshots=None):
        flat_tree = pytree.flatten(tuple(range(len(sig.avals))))[1]

        def flat(tracers):
            args, kwargs = sig.call_with(tracers)
            return fun(*args, **kwargs)

        name = getattr(fun, "__name__", "f").replace("<lambda>", "f")
        self.graph, self.out_tree, out_leaves = trace_function(
            flat, sig.avals, flat_tree, device=sig.device, name=name,
            const_names=closure_names(fun), weak=sig.weak, whole_call=True)
        self._weak_out = [i for i, t in enumerate(out_leaves) if type(t) is Tensor and t._weak]
        for v in self.graph.outvars:
            if isinstance(v, Literal) and not (backends.is_array(v.value)
                                               or isinstance(v.value, _PY_SCALARS)):
                raise TypeError(f"jit: f returned a {type(v.value).__name__}; a jitted "
                                "function returns pytrees of arrays, tensors and numbers (the "
                                "same object would come back from every call).")
        self._tensor_consts = [c for c in self.graph.consts if isinstance(c, Tensor)]
        # An array f returns without computing it (a NumPy view of a closed-over array) is,
        # like a constant, the value it had when traced.
        self.graph.outvars = [Literal(v.value.copy()) if isinstance(v, Literal)
                              and isinstance(v.value, np.ndarray) else v
                              for v in self.graph.outvars]
        self.graph = prune_outputs(merge_rebound(self.graph))
        self._consts = _const_values(self.graph, {} if snapshots is None else snapshots)
        run_graph = while_replay.pair(self.graph)  # what the replay runs, never traced again
        self._run = straight_line(run_graph, self._consts)
        # A writable constant was copied when traced; a read-only one may be a view of an
        # array its owner still writes into: an output that is a view of it is copied.
        self._const_roots = {id(_root(c)) for c in self._consts
                             if isinstance(c, np.ndarray) and not c.flags.writeable}
        self.fused, self.fused_note = None, None  # the whole graph as one numba kernel
        self.regions = []  # else runs of its large arithmetic, each as a numba kernel
        if sig.device != "cpu":
            return
        if fused.wanted(self.graph):
            self.fused_note = fused.numpy_is_faster(self.graph)
            if self.fused_note is None:
                try:
                    self.fused = fused.build(self.graph)
                except fused.Unsupported as e:
                    self.fused_note = str(e)
            if self.fused_note is not None:
                _log.info("jit(%s): not one fused numba kernel (%s): each scan runs on its "
                          "own", name, self.fused_note)
        if self.fused is None and regions.wanted(self.graph):
            run_graph, self.regions = regions.rewrite(run_graph,
                                                      lambda sub: straight_line(sub, []))
            if self.regions:
                self._run = straight_line(run_graph, self._consts)

    def reads_grad_tensor(self):
        """f read a tensor that requires grad now: its result must be on the tape."""
        return grad_enabled() and any(c.requires_grad for c in self._tensor_consts)

    def __call__(self, arrays, callers=()):
        if self.fused is None:
            outs = self._run(*arrays)
        else:
            outs = self.fused.run(arrays, self._consts, self._run)
        if callers or self._const_roots:
            outs = _not_sharing(outs, callers, self._const_roots)
        leaves = [Tensor(o) if not isinstance(v, Literal) else Tensor(o.copy())
                  if backends.is_array(o) else o for v, o in zip(self.graph.outvars, outs)]
        for i in self._weak_out:  # weakly typed as f's own result would be
            leaves[i]._weak = True
        return pytree.unflatten(self.out_tree, leaves)


def _not_sharing(outs, callers, const_roots=frozenset()):
    """outs, with a copy of each that is (a view of) one of the caller's own arrays or of a
    constant of the trace: f made it with sl.tensor (which copies) or a view of a tensor, and
    writing into the caller's array afterwards must not change the result."""
    roots = {id(_root(a)) for a in callers} | const_roots
    return [o.copy() if backends.is_array(o) and id(_root(o)) in roots else o for o in outs]


def _root(a):
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def _signs(a):
    """The sign bits of a's numbers (of both parts of a complex number), which equality
    does not see (-0.0 == 0.0); none for an array of strings or objects."""
    if a.dtype.kind == "c":
        return np.signbit(np.stack([a.real, a.imag]))
    return np.signbit(a) if a.dtype.kind in "biuf" else np.zeros(0, bool)


def _snapshot(value, snapshots):
    """A writable closed-over array as read now (a copy), shared by the traces of one jitted
    function while its value stays the same."""
    hit = snapshots.get(id(value))
    if (hit is not None and hit[0]() is value and hit[1].shape == value.shape
            and hit[1].dtype == value.dtype and np.array_equal(hit[1], value, equal_nan=True)
            and np.array_equal(_signs(hit[1]), _signs(value))):
        return hit[1]
    for key in [k for k, (ref, _) in snapshots.items() if ref() is None]:
        del snapshots[key]  # arrays gone: the traces that read them keep their copies
    copy = value.copy()
    snapshots[id(value)] = (weakref.ref(value), copy)
    return copy


def _const_values(graph, snapshots):
    """The values of the graph's constants as its replays read them: a writable closed-over
    array as it was when traced, as documented (and as JAX does)."""
    values = []
    for c in graph.consts:
        value = c._value if isinstance(c, Tensor) else c
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = _snapshot(value, snapshots)
        values.append(value)
    return values


def _last_reads(graph):
    """For each equation, the values it computes or reads that nothing after it reads (nor
    the graph's outputs): the replay deletes them there, so that a call holds no more arrays
    at once than f itself does."""
    seen = {v for v in graph.outvars if isinstance(v, Var)}
    seen.update(graph.invars, graph.constvars)
    frees = [[] for _ in graph.eqns]
    for i in range(len(graph.eqns) - 1, -1, -1):
        eqn = graph.eqns[i]
        for v in list(eqn.outvars) + list(eqn.invars):
            if isinstance(v, Var) and v not in seen:
                seen.add(v)
                frees[i].append(v)
    return frees


def straight_line(graph, consts):
    """A Python function of the graph's inputs computing its outputs: one line per equation,
    each a call of the primitive's impl (what bind calls outside a trace)."""
    names, ns = {}, {}

    def ref(v):
        if isinstance(v, Literal):
            name = f"_l{len(ns)}"
            ns[name] = v.value
            return name
        return names[v]

    for i, v in enumerate(graph.invars):
        names[v] = f"a{i}"
    for i, (v, value) in enumerate(zip(graph.constvars, consts)):
        names[v] = f"_k{i}"
        ns[f"_k{i}"] = value
    lines = [f"def run({', '.join(names[v] for v in graph.invars)}):"]
    frees = _last_reads(graph)
    for i, eqn in enumerate(graph.eqns):
        for j, v in enumerate(eqn.outvars):
            names[v] = f"v{i}_{j}"
        lhs = ", ".join(names[v] for v in eqn.outvars) + ("," if eqn.prim.multiple_results
                                                          else "") if eqn.outvars else "_"
        args = [ref(v) for v in eqn.invars]
        template = eqn.prim.inline_for(eqn.params)
        if template is not None:  # `a * b`, as the loop compiler writes it
            lines.append(f"    {lhs} = {template.format(*args)}")
        else:
            ns[f"_f{i}"], ns[f"_p{i}"] = eqn.prim.impl, eqn.params
            lines.append(f"    {lhs} = _f{i}({''.join(a + ', ' for a in args)}**_p{i})"
                         f"  # {eqn.prim.name}")
        if frees[i]:  # as eager's tape lets go of them: NumPy then reuses their memory
            lines.append(f"    del {', '.join(names[v] for v in frees[i])}")
    # Literal outputs are returned as they were (the caller reads them from the graph).
    lines.append(f"    return ({''.join(f'{ref(v)}, ' for v in graph.outvars)})")
    source = "\n".join(lines)
    generated.exec_source(source, f"jit replay {graph.name}", ns)
    run = ns["run"]
    run.source = source
    return run


__all__ = ["jit", "JitFallbackWarning"]
