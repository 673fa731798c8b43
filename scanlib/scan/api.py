"""`scan(f, init, xs)`: argument checks with readable errors, tracing f once into a body
graph, and binding the scan primitive. `scan_plan` shows what differentiating it saves.

Imports backends, tape, ops, pytree, tracing and the scan modules below it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import TYPE_CHECKING, Callable

import numpy as np

from .. import backends, pytree
from ..ops import as_tensor, concatenate, transpose
from ..remat import checkpoint as _checkpoint
from ..tape import GraphBuilder, Tensor, current_builder, tracing, type_str
from ..tracing import closure_names, trace_function
from .cache import canonical
from .linearize import linearize
from .residuals import CLONE, KEEP
from .primitive import _needs_grad, apply_scan
from .revolve import revolve_scan
from . import schedule as _schedule

if TYPE_CHECKING:
    from ..tape.types import PyTree


def scan(f: Callable[..., tuple[PyTree, PyTree]], init: PyTree, xs: PyTree = None,
         length: int | None = None, reverse: bool = False, unroll: int | bool = 1, *,
         dim: int = 0, interpret: bool | None = None,
         checkpoint: str | int | tuple[str, int] | None = None,
         compiler: str | None = None) -> tuple[PyTree, PyTree]:
    """Loop f over xs carrying state, like `jax.lax.scan`, differentiably.

    `f(carry, x) -> (new_carry, y)`. Returns `(final_carry, ys)` where each leaf of ys stacks
    the y of every step on axis 0. Its meaning is exactly this loop::

        carry, out = init, [None] * T
        for t in (reversed(range(T)) if reverse else range(T)):
            carry, out[t] = f(carry, tree_map(lambda a: take(a, t, axis=dim), xs))
        ys = tree_map(lambda *leaves: stack(leaves), *out)

    init, xs, the carry and y are pytrees (tuples, lists, dicts, namedtuples, None) of
    Tensors, arrays or Python numbers. Every xs leaf is scanned along `dim` (negative counts
    from that leaf's end); with `xs=None`, give `length` and f receives `x=None`. ys stays
    aligned with xs when `reverse=True`. `length`, `reverse` and `unroll` may be passed by
    position, in JAX's order (`scan(f, init, None, 10)`); the rest are keywords. A
    Python-number leaf of init takes the dtype the loop's first steps give it (so `0.0` works
    as a float32 accumulator), as in JAX; to find it, f is traced once more per such leaf at
    most. A carry f keeps as a Python number at
    every step (`b * 2` with b = 0), or one f cannot take as a number (it calls a Tensor
    method on it), gets NumPy's default dtype: give it a typed init if that matters.

    f is traced once into a graph (print it with `scan_plan`), so inside f use scanlib ops
    and no Python control flow on values. Tensors f closes over get gradients too.

    `interpret=True` runs the traced body step by step with the reference interpreter (one
    primitive at a time, no loop compiler), forward and backward, and so do the scans nested
    in f unless they say otherwise: slower, for when you suspect the compiler.

    `checkpoint` trades time for memory when the scan is differentiated (values and
    gradients of any order stay those of the loop, to rounding): None keeps every step's
    residuals; an int k keeps only the carry at the start of every k steps and the backward
    pass recomputes one k-step segment at a time (all but the last, whose residuals the
    forward keeps); "sqrt" picks k near sqrt(T) (memory O(sqrt T), one extra forward pass
    of T - k steps); ("revolve", s) is Griewank's binomial schedule
    keeping at most s carries plus one step's residuals, at the cost of recomputing each
    step a few times (scan_plan shows how many). The segment schedules are scans of
    checkpointed scans (scanlib.checkpoint); revolve runs its schedule over arrays in the
    backward pass (scan/revolve.py), and as nested checkpoints inside a traced function.

    `unroll` (an int >= 1 or a bool, as JAX's) is accepted so that JAX code runs unchanged,
    and changes nothing: the compiled loop is already straight-line Python per step, and
    writing 2-8 steps out in one block measured within noise (bench/NOTES.md).

    `compiler` chooses how the per-step loop of this scan and of its backward scan runs:
    "numpy" (Python calling NumPy), "numba" (a compiled numba kernel, what small states, a
    few numbers per step over many steps, need; the optional extra,
    `pip install 'scanlib-autodiff[jit]'`), or "auto"; None takes the default
    (`set_loop_compiler`), "auto" unless changed. "auto" is "numba" without the waiting: a
    kernel compiles in a background process while the NumPy loop runs the calls that come
    before it is ready, then the faster of the two, as measured on the body's calls, runs it;
    where numba is not installed it is "numpy". A body numba cannot be proved to compute
    exactly as NumPy does (a primitive without a numba form, a dtype numba would change)
    runs as the NumPy loop: under "numba" with a NumbaFallbackWarning, under "auto" with a
    note on the log. A body whose step works on large values runs as the NumPy loop too,
    without a warning, where NumPy's own vectorised loops are faster than the kernel's: values
    of more than 16,384 elements, or of more than 1,024 with a matrix product BLAS does
    faster or float32 work NumPy does with SIMD (a carry the body returns unchanged is read,
    never worked on, and does not count). Values agree with the NumPy loop to rounding
    (numba's exp and log are not NumPy's). Under "numba" the first call of a new body
    compiles it and its backward body: about 1-3 s a kernel on an empty cache, up to tens
    of seconds for a whole jitted call compiled as one large kernel (bench/NOTES.md).
    Kernels are then cached on disk (SCANLIB_CACHE_DIR, ~/.cache/scanlib): a new process
    loads them after numba's own start-up, about half a second. Each compile is logged at
    INFO on the `scanlib.numba` logger (`logging.basicConfig(level=logging.INFO)`).

    >>> import scanlib as sl
    >>> carry, ys = sl.scan(lambda c, x: (c + x, c * x), 0.0, sl.tensor([1.0, 2.0, 3.0]))
    >>> carry, ys
    (tensor(6., dtype=float64), tensor([0., 2., 9.], dtype=float64))
    """
    if interpret is None:  # a scan nested in an interpreted one is interpreted too
        interpret = getattr(current_builder(), "interpret", False)
    if not isinstance(interpret, bool):
        raise TypeError(f"scan: interpret must be True, False or None, got {interpret!r}")
    _check_unroll(unroll)
    compiler = _check_compiler(compiler)
    plan = _schedule.parse(checkpoint)
    if plan is not None:
        return _checkpointed(f, init, xs, length, reverse, dim,
                             {"interpret": interpret, "compiler": compiler}, plan)
    body, consts, init_t, xs_t, T, init_tree, y_tree = prepare(f, init, xs, length, reverse,
                                                                dim, interpret)
    outs = apply_scan(body, init_t, xs_t, consts, T, reverse, interpret, compiler=compiler)
    nc = len(init_t)
    return pytree.unflatten(init_tree, outs[:nc]), pytree.unflatten(y_tree, outs[nc:])


# --- checkpoint schedules (schedule.py) as nested checkpointed scans ---------------------
def _checkpointed(f, init, xs, length, reverse, dim, loop, plan):
    """scan(f, init, xs) run as the schedule says. The segments see typed carries and xs
    with the steps on axis 0, in the order the loop visits them (reversed for reverse=True,
    and ys flipped back), so each piece is a plain forward scan."""
    _check_options(f, length, reverse, dim)
    body, init_t, xs_t, T, init_tree, xs_tree, y_tree = _typed_inputs(
        f, init, xs, length, reverse, dim, loop["interpret"])
    if reverse:
        xs_t = [x[::-1] for x in xs_t]
    carry = pytree.unflatten(init_tree, init_t)

    def run(carry, leaves, n):  # a plain scan of n steps over these xs leaves
        return scan(f, carry, pytree.unflatten(xs_tree, leaves) if leaves else None,
                    length=n, **loop)

    if T == 0:
        return scan(f, carry, pytree.unflatten(xs_tree, xs_t), length=length,
                    reverse=reverse, dim=0, **loop)
    if isinstance(plan, _schedule.Segments):
        k = plan.length(T, *_step_sizes(body, init_t, xs_t))
        carry, ys = _run_segments(run, carry, xs_t, T, k, loop)
    elif current_builder() is None:  # on the tape: the schedule over arrays (revolve.py)
        outs = revolve_scan(body[0], init_t, xs_t, body[1], T, plan.snapshots, **loop)
        nc = len(init_t)
        carry, ys = pytree.unflatten(init_tree, outs[:nc]), pytree.unflatten(y_tree, outs[nc:])
    else:  # inside a trace: as nested checkpointed scans, whose VJPs trace
        s = plan.snapshots
        carry, ys = _run_revolve(run, carry, xs_t, T, s, plan.repetitions(T))
    if reverse:
        ys = pytree.tree_map(lambda y: y[::-1], ys)
    return carry, ys


def _typed_inputs(f, init, xs, length, reverse, dim, interpret):
    """scan's checks and init dtypes (a Python number adopts the dtype f gives it), with
    xs moved to axis 0; the body graph and its constants come along for the schedule."""
    body, consts, init_t, xs_t, T, init_tree, y_tree = prepare(f, init, xs, length, reverse,
                                                                dim, interpret)
    xs_tree = pytree.flatten(xs)[1]
    return (body, consts), init_t, xs_t, T, init_tree, xs_tree, y_tree


def _step_sizes(traced, init_t, xs_t):
    """(bytes of one carry, bytes one step stores for the backward pass), which "sqrt"
    balances; the linearization is the one the plain scan would use (and is cached)."""
    body, consts = traced
    lin = linearize(body, len(init_t), [_needs_grad(x) for x in xs_t],
                    [_needs_grad(k) for k in consts])
    carry = sum(x._value.nbytes for x in init_t)
    return carry, sum(r.var.nbytes for r in lin.residuals if r.policy in (CLONE, KEEP))


def _run_segments(run, carry, xs, T, k, loop):
    """Checkpointed segments of k steps (the first one shorter where k does not divide T),
    then the last k steps as a plain scan. The backward pass reaches those first, so keeping
    their residuals from the forward pass holds about what recomputing them would (one
    segment's), and saves their recomputation, as PyTorch's checkpoint_sequential leaves its
    last segment unchecked."""
    k = min(k, T)
    n, rest = divmod(T - k, k)
    pieces = []
    if rest:
        carry, ys = _checkpoint(lambda c, leaves: run(c, leaves, rest))(
            carry, [x[:rest] for x in xs])
        pieces.append(ys)
    if n:
        main = [x[rest:rest + n * k].reshape((n, k) + tuple(x.shape[1:])) for x in xs]
        segment = _checkpoint(lambda c, leaves: run(c, leaves, k))
        carry, ys = scan(lambda c, leaves: segment(c, leaves), carry, main or None,
                         length=n, **loop)
        pieces.append(pytree.tree_map(lambda y: y.reshape((n * k,) + tuple(y.shape[2:])),
                                      ys))
    carry, ys = run(carry, [x[T - k:] for x in xs], k)
    pieces.append(ys)
    return carry, _joined(pieces)


def _run_revolve(run, carry, xs, T, s, r):
    """Reverse T steps with s snapshots and r recomputations: the first m steps are a
    checkpointed range (s snapshots, r - 1 recomputations: it keeps only its input, and is
    replayed when the backward pass reaches it) and the rest a range with one snapshot
    fewer. One step is a plain scan (its residuals are the one step the schedule keeps).
    The recursion is at most s + r deep."""
    if T <= 1:
        return run(carry, xs, T)
    m = _schedule.binomial_split(T, s, r)
    # The first part closes over its xs rather than taking them as arguments: a traced
    # argument would need stand-in zeros of its shape at every level, xs-sized in all.
    head = [x[:m] for x in xs]
    first = _checkpoint(lambda c: _run_revolve(run, c, head, m, s, r - 1))
    carry, ys_first = first(carry)
    carry, ys_rest = _run_revolve(run, carry, [x[m:] for x in xs], T - m, s - 1, r)
    return carry, _joined([ys_first, ys_rest])


def _joined(pieces):
    if len(pieces) == 1:
        return pieces[0]
    return pytree.tree_map(lambda *ys: concatenate(ys, axis=0), *pieces)


# --- argument checks -------------------------------------------------------------------------
def _check_options(f, length, reverse, dim):
    if not callable(f):
        raise TypeError(f"scan: f must be callable as f(carry, x) -> (new_carry, y), got "
                        f"{type(f).__name__}")
    if not isinstance(reverse, bool):
        raise TypeError(f"scan: reverse must be True or False, got {reverse!r}")
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"scan: dim must be an int (the axis of every xs leaf to scan along), "
                        f"got {dim!r}")
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool):
            raise TypeError(f"scan: length must be an int, got {length!r}")
        if length < 0:
            raise ValueError(f"scan: length must be >= 0, got {length}")


COMPILERS = ("auto", "numpy", "numba")


def _from_environment():
    """The default compiler: SCANLIB_LOOP_COMPILER where set, else "auto"."""
    name = os.environ.get("SCANLIB_LOOP_COMPILER", "").strip().lower() or "auto"
    if name not in COMPILERS:
        raise ValueError(f"scanlib: the environment variable SCANLIB_LOOP_COMPILER must be one "
                         f"of {COMPILERS} (or unset: 'auto'), got {name!r}")
    return name


_DEFAULT_COMPILER = [_from_environment()]  # read once, when scanlib is imported


def default_compiler() -> str:
    """The compiler of a scan that names none (`set_loop_compiler` sets it), "auto" resolved:
    "numpy" where numba is not installed."""
    name = _DEFAULT_COMPILER[0]
    return "numpy" if name == "auto" and not _numba_installed() else name


def set_loop_compiler(name: str) -> str:
    """Set the compiler of every scan that does not name one (`scan(..., compiler=None)`):

    - "auto" (the default): "numba" where the jit extra is installed, with each kernel
      compiled in a background process while the NumPy loop runs the calls that come before
      it is ready, and a body numba does not compile left to the NumPy loop with a note on
      the `scanlib.numba` logger (no warning); "numpy" where numba is not installed;
    - "numpy": Python calling NumPy, no compiler;
    - "numba" (needs `pip install 'scanlib-autodiff[jit]'`): each kernel compiled when first
      called, the call waiting for it, and a NumbaFallbackWarning for a body numba does not
      compile.

    Returns the previous one, so that `old = set_loop_compiler("numba"); ...;
    set_loop_compiler(old)` restores it. Process-wide; the scans already traced keep theirs.
    The environment variable SCANLIB_LOOP_COMPILER, read when scanlib is imported, sets it
    too. A `while_loop` reads it when it runs: under "numba" or "auto" its loop is one numba
    kernel where every operation of cond_fun and body_fun has a numba form and its step is
    small enough (as for a scan).

    >>> import scanlib as sl
    >>> old = sl.set_loop_compiler("numpy")  # "auto" is the default
    >>> sl.set_loop_compiler(old)
    'numpy'
    """
    name = _check_compiler(name)
    old, _DEFAULT_COMPILER[0] = _DEFAULT_COMPILER[0], name
    return old


@functools.lru_cache(maxsize=None)
def _numba_installed():
    return importlib.util.find_spec("numba") is not None


def _check_compiler(compiler):
    if compiler is None:
        compiler = _DEFAULT_COMPILER[0]
    if compiler not in COMPILERS:
        raise ValueError(f"scan: compiler must be one of {COMPILERS} or None (the default, "
                         f"{_DEFAULT_COMPILER[0]!r}), got {compiler!r}")
    if compiler == "auto" and not _numba_installed():
        return "numpy"
    if compiler == "numba":
        from .loop.native import missing

        why = missing()
        if why is not None:
            raise ImportError(f"scan: {why}")
    return compiler


def _check_unroll(unroll):
    if isinstance(unroll, bool):
        return
    if not isinstance(unroll, (int, np.integer)) or unroll < 1:
        raise ValueError(f"scan: unroll must be an int >= 1 or a bool (as in JAX), got "
                         f"{unroll!r}")


def _scan_length(paths, leaves, dim, length):
    if not leaves:
        if length is None:
            raise ValueError("scan: xs is None (or has no leaves), so pass length=T to say how "
                             "many steps to run.")
        return int(length), []
    moved, T, first = [], None, None
    for path, leaf in zip(paths, leaves):
        if isinstance(leaf, (bool, int, float, complex)) or (
                (isinstance(leaf, Tensor) or backends.is_array(leaf)) and np.ndim(
                    leaf._value if isinstance(leaf, Tensor) else leaf) == 0):
            raise TypeError(
                f"scan: {path} is a scalar (0-d), which has no axis to scan along. Every xs leaf "
                f"needs at least one axis; wrap a sequence with scanlib.tensor([...]), or close "
                f"over the value in f if it is the same at every step.")
        if not (isinstance(leaf, Tensor) or backends.is_array(leaf)):
            raise TypeError(f"scan: {path} is a {type(leaf).__name__}; xs leaves must be "
                            "Tensors or arrays")
        x = as_tensor(leaf)
        if not -x.ndim <= dim < x.ndim:
            raise ValueError(f"scan: dim={dim} is out of range for {path}, which has shape "
                             f"{x.shape} ({x.ndim} axes)")
        d = dim % x.ndim
        n = x.shape[d]
        if T is None:
            T, first = n, (path, x.shape)
        elif n != T:
            raise ValueError(
                f"scan: all xs leaves must have the same length along dim={dim}, but "
                f"{first[0]} has shape {first[1]} (length {T}) and {path} has shape {x.shape} "
                f"(length {n}). Trim or pad them to one length.")
        moved.append(x if d == 0 else transpose(x, (d,) + tuple(
            i for i in range(x.ndim) if i != d)))
    if length is not None and length != T:
        raise ValueError(f"scan: length={length} disagrees with xs, whose leaves have length "
                         f"{T} along dim={dim} ({first[0]} has shape {first[1]}).")
    return T, moved


_PYTHON_NUMBER = (bool, int, float, complex)  # exact types: np.float64 is a float, but typed


def adopt_weak_dtypes(f, init_t, weak, init_leaves, paths, xs_t, init_tree, xs_tree, device):
    """A Python number in init has no dtype of its own (JAX: weakly typed), nor has a weakly
    typed tensor (`jnp.array(0.0)`) a dtype that holds. The loop's first step computes with
    the number itself, and the carry takes the dtype of what f returns for it (0.0 + float32
    data -> float32, 0.0 + bool data -> float64); a carry that f returns weakly typed again
    (a lag, a swap) settles in a later step. So trace f with those leaves as the Python
    numbers (weakly typed tensors) themselves, settle the carries that come back typed, and
    repeat, as the loop's steps would; what never settles keeps its default dtype."""
    numbers = {i: leaf for i, (leaf, w) in enumerate(zip(init_leaves, weak)) if w}
    out = list(init_t)
    for _ in range(len(numbers) + 1):
        try:
            dtypes = _new_carry_dtypes(f, out, numbers, xs_t, init_tree, xs_tree, device)
        except OverflowError as e:  # 300 + uint8 data: the loop raises here too
            raise OverflowError(f"scan: a Python number in init does not fit the dtype f "
                                f"gives its carry: {e}") from None
        except Exception:  # noqa: BLE001  f needs array methods on its carry: defaults
            break
        settled = [i for i in numbers if i < len(dtypes) and dtypes[i] is not None]
        if not settled:
            break
        for i in settled:
            if isinstance(numbers[i], Tensor):  # cast differentiably: init may need a gradient
                out[i] = numbers.pop(i).astype(dtypes[i])
                continue
            try:
                out[i] = Tensor(backends.asarray_on(numbers.pop(i), device, dtypes[i]))
            except OverflowError:
                raise OverflowError(
                    f"scan: {paths[i]} is the Python number {init_leaves[i]!r}, but f makes "
                    f"this carry {dtypes[i]}, which cannot hold it; the Python loop would "
                    "raise here too. Give init a value in range, or a Tensor of the dtype "
                    "you mean.") from None
    return out


def _new_carry_dtypes(f, init_t, numbers, xs_t, init_tree, xs_tree, device):
    """The dtype of each new carry leaf f returns when the carries in `numbers` are those
    Python numbers (None where f returns a Python number again)."""
    builder = GraphBuilder(device)
    with tracing(builder):
        carry = [_weak_input(builder, numbers[i]) if i in numbers
                 else builder.new_input(x.shape, x.dtype) for i, x in enumerate(init_t)]
        x = [builder.new_input(v.shape[1:], v.dtype) for v in xs_t]
        new_carry = f(pytree.unflatten(init_tree, carry), pytree.unflatten(xs_tree, x))[0]
    leaves = pytree.flatten(new_carry)[0]
    return [None if type(v) in _PYTHON_NUMBER or (type(v) is Tensor and v._weak)
            else np.dtype(v.dtype) for v in leaves]


def _weak_input(builder, leaf):
    """A Python number itself; for a weakly typed tensor, a weakly typed traced input."""
    if not isinstance(leaf, Tensor):
        return leaf
    tracer = builder.new_input(leaf.shape, leaf.dtype)
    tracer._weak = True
    return tracer


def _init_leaf(leaf, path, device):
    """(Tensor, weak): a Python number becomes a 0-d tensor on the scan's device whose dtype
    may still adopt the one f returns for it."""
    if isinstance(leaf, Tensor):
        return leaf, leaf._weak
    if backends.is_array(leaf):
        return Tensor(np.asarray(leaf) if isinstance(leaf, np.generic) else leaf), False
    if isinstance(leaf, (bool, int, float, complex)):
        return Tensor(backends.asarray_on(leaf, device)), True
    raise TypeError(f"scan: {path} has type {type(leaf).__name__}; init leaves must be "
                    "Tensors, arrays or Python numbers (in tuples, lists, dicts, namedtuples)")


def _device_of_leaves(leaves, paths):
    """The one device of the array leaves (Python numbers follow it); two is an error."""
    found = {}
    for p, x in zip(paths, leaves):
        if isinstance(x, Tensor) or backends.is_array(x):
            d = x.device if isinstance(x, Tensor) else backends.device_of(x)
            found.setdefault(d, p)
    if len(found) > 1:
        (d1, p1), (d2, p2) = list(found.items())[:2]
        raise ValueError(f"scan: inputs live on different devices: {p1} is on {d1} and {p2} "
                         f"on {d2}. Move them to one device with .to('{d1}') or .to('{d2}').")
    return next(iter(found), "cpu")


def prepare(f, init, xs, length, reverse, dim, interpret=False):
    _check_options(f, length, reverse, dim)
    init_paths, init_leaves, init_tree = pytree.flatten_with_paths(init, "init")
    xs_paths, xs_leaves, xs_tree = pytree.flatten_with_paths(xs, "xs")
    T, xs_t = _scan_length(xs_paths, xs_leaves, dim, length)
    device = _device_of_leaves(init_leaves + xs_leaves, init_paths + xs_paths)
    init_t, weak = zip(*[_init_leaf(x, p, device) for p, x in zip(init_paths, init_leaves)]) \
        if init_leaves else ((), ())
    init_t, weak = list(init_t), list(weak)

    if any(weak):
        init_t = adopt_weak_dtypes(f, init_t, weak, init_leaves, init_paths, xs_t, init_tree,
                                    xs_tree, device)
    body, (carry_tree, y_tree) = _trace_body(f, init_t, xs_t, init_tree, xs_tree, device,
                                             interpret)
    if carry_tree != init_tree:
        raise TypeError(
            f"scan: the carry returned by f must have init's structure, but init is "
            f"{pytree.structure_str(init_tree)} and f returned "
            f"{pytree.structure_str(carry_tree)}. Return (new_carry, y) with new_carry "
            f"shaped like init.")
    for path, x, v in zip(init_paths, init_t, body.outvars):
        if (x.shape, x.dtype) != (v.shape, v.dtype):
            what = "shapes differ" if x.shape != v.shape else "dtypes differ"
            if x.shape == v.shape and np.dtype(x.dtype).newbyteorder("=") == v.dtype:
                what = (f"byte orders differ: {path} is {np.dtype(x.dtype).str!r}; pass it "
                        "as x.astype(x.dtype.newbyteorder('=')), in native order")
            carry_path = "carry" + path[len("init"):]
            raise TypeError(
                f"scan: the carry returned by f must match init, but {path} is "
                f"{type_str(x.shape, x.dtype)} and the returned {carry_path} is "
                f"{type_str(v.shape, v.dtype)} ({what}). The carry keeps one shape and dtype "
                f"for every step; return values that change shape through ys instead"
                + (", and cast with .astype() where dtypes differ." if what == "dtypes differ"
                   else "."))
    return canonical(body), body.consts, init_t, xs_t, T, init_tree, y_tree


def _trace_body(f, init_t, xs_t, init_tree, xs_tree, device, interpret=False):
    trees = []
    names = pytree.leaf_names(pytree.unflatten(init_tree, init_t), "carry")
    x_names = pytree.leaf_names(pytree.unflatten(xs_tree, xs_t), "x")

    def body_fn(args):
        carry, x = args
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan: f must return a pair (new_carry, y), got "
                            f"{_describe(out)}. Return (carry, None) when there is no y.")
        new_carry, y = out
        c_paths, c_leaves, c_tree = pytree.flatten_with_paths(new_carry, "carry")
        y_paths, y_leaves, y_tree = pytree.flatten_with_paths(y, "y")
        trees.extend([c_tree, y_tree])
        for p, leaf in zip(c_paths + y_paths, c_leaves + y_leaves):
            if not (isinstance(leaf, (Tensor, bool, int, float, complex))
                    or backends.is_array(leaf)):
                raise TypeError(f"scan: f returned {p} of type {type(leaf).__name__}; carry "
                                "and y leaves must be Tensors, arrays or numbers (return "
                                "other values through a closure, not through scan)")
        return [_on_device(x, device) for x in c_leaves + y_leaves]

    in_tree = pytree.flatten((pytree.unflatten(init_tree, init_t),
                              pytree.unflatten(xs_tree, xs_t)))[1]
    avals = [(x.shape, x.dtype) for x in init_t] + [(x.shape[1:], x.dtype) for x in xs_t]
    hints = [_short(n) for n in names] + [_short(n) for n in x_names]
    graph, _, _ = trace_function(body_fn, avals, in_tree, device=device, hints=hints,
                                 name="body", const_names=closure_names(f),
                                 interpret=interpret)
    return graph, trees


def _on_device(x, device):
    """f's outputs as tensors; a Python number f returns lives where the scan runs."""
    if isinstance(x, (bool, int, float, complex)):
        return Tensor(backends.asarray_on(x, device))
    return as_tensor(x)


def _short(name):
    # "carry" alone is the whole carry; "carry_h" -> "h"; "x_0" -> "x0"
    if name is None:
        return None
    for root in ("carry_", "x_"):
        if name.startswith(root) and name[len(root):].isidentifier():
            return name[len(root):]
    return name.replace("_", "") if name.replace("_", "").isidentifier() else name


def _describe(out):
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of length {len(out)}"
    if isinstance(out, Tensor):
        return f"a single Tensor ({type_str(out.shape, out.dtype)})"
    return f"a {type(out).__name__}"
