"""The everyday array functions of jax.numpy that move, pad and join: reordering (flip, roll,
moveaxis), padding and repeating, creation (linspace, meshgrid) and joins/splits/shapes, all
composites of the structural primitives; also the small helpers that ops.reductions and
ops.gathers share with them.

Imports backends, tape and the primitive modules of ops (and functions' wrappers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import builtins
import operator

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .functions import one_axis, as_tensor, concatenate, transpose
from .promotion import inexact_dtype
from .structural import broadcast_to_p, getitem, normalize_axis, reshape_p, split_p

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any
    from ..tape.types import ArrayLike, Axis, DTypeLike, Device

__all__ = [
    "flip", "roll", "pad", "tile", "repeat", "linspace", "vstack", "hstack", "moveaxis", "split",
    "diff", "ravel", "atleast_1d", "atleast_2d", "meshgrid",
]


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _constant(like, shape, value, dtype=None):
    """A constant Tensor (no gradient) of `shape` on like's device, in like's dtype."""
    xp = backends.namespace(like.device)
    with backends.on_device(like.device):
        return Tensor(xp.full(shape, value, dtype=dtype or like.dtype))


def _along(axis, index):
    """An index that applies `index` to axis `axis` and keeps every other axis whole."""
    return (slice(None),) * axis + (index,)


def _flat(x):
    return reshape_p(x, shape=(x.size,)) if x.ndim != 1 else x


def _is_one_int_axis_of_0d(a, axis):
    """NumPy reads axis 0 (or -1) of a 0-d array as the axis of its one element (np.cumsum,
    np.argsort, np.take, np.prod and np.argmax take it): True for that case."""
    return (a.ndim == 0 and isinstance(axis, (int, np.integer)) and not isinstance(axis, bool)
            and axis in (0, -1))


def _zero_d_as_1d(a, axis):
    """(a, axis), with a 0-d `a` and axis 0 or -1 made shape (1,) and axis 0, as NumPy does."""
    return (reshape_p(a, shape=(1,)), 0) if _is_one_int_axis_of_0d(a, axis) else (a, axis)


def _is_graph_tensor(x):
    return isinstance(x, Tensor) and (x._trace is not None or x.requires_grad)


def _static_ints(value, what):
    """value (an int or a sequence of ints known now) as a tuple; traced tensors refused."""
    if _is_graph_tensor(value) and value._trace is not None:
        raise TypeError(f"{what} must be known now, but got a tensor traced inside a scan body "
                        "or jit (its values are not known while tracing); pass Python ints "
                        "(under jit, mark the argument static: static_argnums=...).")
    if isinstance(value, Tensor):
        value = value.numpy()
    arr = backends.to_numpy(value) if backends.is_array(value) else np.asarray(value)
    if arr.dtype.kind not in "iub" or arr.dtype == np.bool_:
        raise TypeError(f"{what} must be integers, got {value!r}")
    return tuple(int(v) for v in arr.ravel()), arr.shape


def _on_device_of(value, like):
    """value as a Tensor on like's device: Tensors stay as they are, arrays and lists move."""
    if isinstance(value, Tensor):
        return value
    if backends.is_array(value):
        return Tensor(backends.to_device(value, like.device))
    return Tensor(backends.asarray_on(np.asarray(value), like.device))


# --- reordering -----------------------------------------------------------------------------
def flip(m: ArrayLike, axis: Axis = None) -> Tensor:
    """m with the order of elements reversed along axis (every axis when None).

    >>> sl.flip(sl.tensor([1.0, 2.0, 3.0]))
    """
    m = as_tensor(m)
    axes = normalize_axis(axis, m.ndim)
    axes = range(m.ndim) if axes is None else axes
    return getitem(m, tuple(slice(None, None, -1) if i in axes else slice(None)
                            for i in range(m.ndim)))


def roll(a: ArrayLike, shift: int | Sequence[int], axis: Axis = None) -> Tensor:
    """a with elements shifted along axis, those that fall off one end coming back at the
    other (of the flattened tensor when axis is None, reshaped back).

    >>> sl.roll(sl.tensor([1.0, 2.0, 3.0]), 1)
    """
    a = as_tensor(a)
    shifts, _ = _static_ints(shift, "roll: shift")
    if axis is None:
        if len(shifts) != 1:
            raise ValueError(f"roll: with axis=None, shift must be one int, got {shift!r}")
        return reshape_p(roll(_flat(a), shifts[0], 0), shape=a.shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = [one_axis(ax, a.ndim, "roll") for ax in axes]
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift {shift!r} and axis {axis!r} must have one length")
    total = {}
    for s, ax in zip(shifts, axes):  # shifts of one axis add up, as in NumPy
        total[ax] = total.get(ax, 0) + s
    for ax, s in total.items():
        n = a.shape[ax]
        s = s % n if n else 0
        if s:
            a = concatenate([getitem(a, _along(ax, slice(n - s, None))),
                             getitem(a, _along(ax, slice(0, n - s)))], ax)
    return a


def moveaxis(a: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """a with the axes `source` moved to positions `destination`, the others keeping order.

    >>> sl.moveaxis(sl.zeros((2, 3, 4)), 0, -1).shape
    """
    a = as_tensor(a)

    def axes_of(value, what):
        items = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
        out = [one_axis(v, a.ndim, f"moveaxis: {what}") for v in items]
        if len(set(out)) != len(out):
            raise ValueError(f"moveaxis: repeated axis in `{what}` argument {value!r}")
        return out

    src, dst = axes_of(source, "source"), axes_of(destination, "destination")
    if len(src) != len(dst):
        raise ValueError("moveaxis: `source` and `destination` arguments must have the same "
                         f"number of elements, got {source!r} and {destination!r}")
    order = [i for i in range(a.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, tuple(order))


# --- padding and repeating ------------------------------------------------------------------
def _pairs(value, ndim, what, as_index):
    arr = np.asarray(value)
    if as_index:
        if arr.dtype.kind not in "iu":
            raise TypeError(f"pad: {what} must be integers, got {value!r}")
        if (arr < 0).any():
            raise ValueError(f"pad: {what} must not be negative, got {value!r}")
    try:
        return np.broadcast_to(arr, (ndim, 2)).tolist()
    except ValueError:
        raise ValueError(f"pad: {what} {value!r} cannot be read as an int, a (before, after) "
                         f"pair or one pair per axis for {ndim} axes") from None


def _tensor_pairs(value, ndim):
    """A Tensor of constant values read as numpy.pad reads them: broadcast to one (before,
    after) pair per axis; each entry a 0-d Tensor, so the gradient reaches the one it came
    from."""
    if value.ndim == 0:
        return [[value] * 2] * ndim
    try:
        if value.ndim > 2:
            raise ValueError
        np.broadcast_shapes(value.shape, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad: constant_values of shape {value.shape} cannot be read as a "
                         f"value, a (before, after) pair or one pair per axis for {ndim} "
                         "axes") from None
    pairs = broadcast_to_p(value, shape=(ndim, 2))
    return [[getitem(pairs, (axis, side)) for side in (0, 1)] for axis in range(ndim)]


def _source_index(positions, n, mode):
    """For each output position (relative to the original start), the input index it copies."""
    if mode == "edge":
        return np.clip(positions, 0, n - 1)
    if mode == "wrap":
        return np.mod(positions, n)
    if mode == "symmetric":
        m = np.mod(positions, 2 * n)
        return np.where(m >= n, 2 * n - 1 - m, m)
    if n == 1:  # reflect about a single element: it repeats
        return np.zeros_like(positions)
    m = np.mod(positions, 2 * n - 2)
    return np.where(m >= n, 2 * n - 2 - m, m)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def pad(array: ArrayLike, pad_width: int | Sequence[Any], mode: str = "constant",
        constant_values: ArrayLike = 0) -> Tensor:
    """array padded on each axis by pad_width (an int, a (before, after) pair, or one pair per
    axis), as numpy.pad with mode 'constant', 'edge', 'reflect', 'symmetric' or 'wrap'.

    Differentiable in array (and in constant_values when it is a tensor).

    >>> sl.pad(sl.tensor([1.0, 2.0]), (1, 2))
    """
    x = as_tensor(array)
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; scanlib pads with "
                                  f"one of {', '.join(_PAD_MODES)}")
    widths = _pairs(pad_width, x.ndim, "pad_width", as_index=True)
    if mode == "constant":
        if isinstance(constant_values, Tensor):
            values = _tensor_pairs(constant_values, x.ndim)
        else:
            values = _pairs(constant_values, x.ndim, "constant_values", as_index=False)
    for axis, (before, after) in enumerate(widths):  # axis by axis, as NumPy: corners last
        if not before and not after:
            continue
        n = x.shape[axis]
        if mode != "constant":
            if n == 0:
                raise ValueError(f"pad: can't extend empty axis {axis} using mode {mode!r}; "
                                 "use mode='constant'")
            index = _source_index(np.arange(-before, n + after), n, mode)
            x = getitem(x, _along(axis, index))
            continue
        pieces = []
        for width, value in ((before, values[axis][0]), (after, values[axis][1])):
            shape = x.shape[:axis] + (width,) + x.shape[axis + 1:]
            if isinstance(value, Tensor):
                pieces.append(broadcast_to_p(ew.astype(value, dtype=x.dtype), shape=shape))
            else:
                pieces.append(_constant(x, shape, value))
        x = concatenate([pieces[0], x, pieces[1]], axis)
    return x


def tile(A: ArrayLike, reps: int | Sequence[int]) -> Tensor:
    """A repeated reps[i] times along each axis, as numpy.tile (reps an int or a tuple).

    >>> sl.tile(sl.tensor([1.0, 2.0]), 2)
    """
    A = as_tensor(A)
    reps, _ = _static_ints(reps, "tile: reps")
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must not be negative, got {reps}")
    ndim = max(A.ndim, len(reps))
    reps = (1,) * (ndim - len(reps)) + reps
    shape = (1,) * (ndim - A.ndim) + A.shape
    # Each axis gets a new axis of length 1 in front, broadcast to reps and merged with it.
    spread = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    out = broadcast_to_p(reshape_p(A, shape=spread), shape=wide)
    return reshape_p(out, shape=tuple(r * s for r, s in zip(reps, shape)))


def repeat(a: ArrayLike, repeats: ArrayLike, axis: Axis = None, *,
           total_repeat_length: int | None = None) -> Tensor:
    """Each element of a repeated along axis (of the flattened a when None); repeats is an
    int or one int per element, known now (the result's shape depends on it). With
    `total_repeat_length`, as JAX's: the result has that many entries along axis, whatever
    repeats holds (it may then be traced): cut short, or padded with a's last element.

    >>> sl.repeat(sl.tensor([1.0, 2.0]), [1, 3])
    >>> sl.repeat(sl.tensor([1.0, 2.0, 3.0]), sl.tensor([2, 0, 1]), total_repeat_length=5)
    """
    a = as_tensor(a)
    if axis is None:
        a, axis = _flat(a), 0
    axis = one_axis(axis, a.ndim, "repeat")
    if total_repeat_length is not None:
        return _repeat_to_length(a, repeats, axis, operator.index(total_repeat_length))
    counts, shape = _static_ints(repeats, "repeat: repeats")
    if builtins.any(c < 0 for c in counts):
        raise ValueError(f"repeat: repeats must not be negative, got {repeats!r}")
    n = a.shape[axis]
    if len(shape) > 1 or len(counts) not in (1, n):
        raise ValueError(f"repeat: repeats must be an int or have one entry per element "
                         f"({n} along axis {axis}), got shape {shape}")
    if len(counts) == 1:
        r = counts[0]
        spread = a.shape[: axis + 1] + (1,) + a.shape[axis + 1:]
        wide = a.shape[: axis + 1] + (r,) + a.shape[axis + 1:]
        out = broadcast_to_p(reshape_p(a, shape=spread), shape=wide)
        return reshape_p(out, shape=a.shape[:axis] + (n * r,) + a.shape[axis + 1:])
    return getitem(a, _along(axis, np.repeat(np.arange(n), counts)))


def _repeat_to_length(a, repeats, axis, total):
    """repeat with total_repeat_length, by JAX's algorithm, so that repeats may be traced:
    a count of the runs that start at each entry (a start past the end dropped), whose sum
    less one is the element each entry takes (past the last run: the last element)."""
    from .gathers import take  # noqa: PLC0415 (gathers and reductions import this module)
    from .reductions import cumsum  # noqa: PLC0415
    n = a.shape[axis]
    if total < 0:
        raise ValueError(f"repeat: total_repeat_length must not be negative, got {total}")
    if n == 0 and total:
        raise ValueError("repeat: an empty array cannot fill a total_repeat_length of "
                         f"{total}")
    counts = ew.astype(as_tensor(repeats), np.dtype(np.int64))
    if counts.ndim > 1 or counts.shape not in ((), (1,), (n,)):
        raise ValueError(f"repeat: repeats must be an int or have one entry per element "
                         f"({n} along axis {axis}), got shape {tuple(counts.shape)}")
    counts = broadcast_to_p(reshape_p(counts, shape=(-1,)) if counts.ndim else counts,
                            shape=(n,))
    ends = cumsum(counts)
    starts = concatenate([as_tensor(np.zeros(1, np.int64)), ends[:-1]]) if n else ends
    # one slot more, where the starts past the end land and are dropped
    past = ew.minimum(starts, total)
    marks = as_tensor(np.zeros(total + 1, np.int64)).at[past].add(1)[:total]
    return take(a, cumsum(marks) - 1, axis=axis)


# --- creation -------------------------------------------------------------------------------
def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             dtype: DTypeLike = None, device: Device | None = None) -> Tensor:
    """num evenly spaced values from start to stop (stop included unless endpoint=False), as
    numpy.linspace: float64 unless dtype is given or start/stop are float32 (or int32) tensors.

    Tensors that require grad (or are traced) for start/stop are differentiable, computed as
    NumPy does: arange(num) * step + start, with the last value set to stop.

    >>> sl.linspace(0.0, 1.0, 5)
    """
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: num must not be negative, got {num}")
    tensors = [t for t in (start, stop) if isinstance(t, Tensor)]
    if device is None:
        device = tensors[0].device if tensors else "cpu"
    device = backends.parse_device(device)
    if not builtins.any(_is_graph_tensor(t) for t in tensors):
        host = [t.numpy() if isinstance(t, Tensor) else t for t in (start, stop)]
        if dtype is None and np.result_type(*host).kind in "biu":
            dtype = inexact_dtype(np.result_type(*host))  # int32 ends: float32, as in JAX
        values = np.linspace(*host, num, endpoint=endpoint, dtype=dtype)
        return Tensor(backends.asarray_on(values, device))
    return _linspace_traced(start, stop, num, endpoint, dtype, device)


def _linspace_traced(start, stop, num, endpoint, dtype, device):
    # Python numbers are weak, as in NumPy 2: a float32 start with stop=3.0 stays float32.
    dt = np.result_type(*(t.dtype if isinstance(t, Tensor) else t for t in (start, stop)))
    dt = inexact_dtype(dt)
    start, stop = (t if isinstance(t, Tensor) else Tensor(backends.asarray_on(t, device, dt))
                   for t in (start, stop))
    if dtype is not None and np.dtype(dtype).kind not in "fc":
        raise TypeError(f"linspace: dtype {np.dtype(dtype)} with tensors that require grad or "
                        "are traced is not supported (NumPy floors, which has no gradient); "
                        "compute in float and cast.")
    start, stop = (ew.astype(t, dtype=dt) if t.dtype != dt else t for t in (start, stop))
    start, stop = start.to(device), stop.to(device)  # differentiable moves, when needed
    div = num - 1 if endpoint else num
    delta = ew.sub(stop, start)
    ramp = np.arange(num, dtype=dt).reshape((-1,) + (1,) * delta.ndim)
    steps = Tensor(backends.asarray_on(ramp, device))
    y = ew.add(ew.mul(steps, ew.div(delta, float(div)) if div > 0 else delta), start)
    if endpoint and num > 1:
        last = reshape_p(broadcast_to_p(stop, shape=y.shape[1:]), shape=(1,) + y.shape[1:])
        y = concatenate([getitem(y, slice(0, num - 1)), last], 0)
    return y if dtype is None or np.dtype(dtype) == dt else ew.astype(y, dtype=np.dtype(dtype))


def meshgrid(*xi: ArrayLike, indexing: str = "xy") -> tuple:
    """Coordinate grids from 1-d coordinate vectors, as numpy.meshgrid ('xy': the first two
    axes swapped, as for plotting; 'ij': matrix indexing). Returns a tuple.

    >>> X, Y = sl.meshgrid(sl.tensor([1.0, 2.0]), sl.tensor([3.0, 4.0, 5.0]))
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [_flat(as_tensor(x)) for x in xi]
    ndim = len(xs)
    sizes = [x.shape[0] for x in xs]
    if indexing == "xy" and ndim > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(xs):
        place = (1 - i if i < 2 else i) if indexing == "xy" and ndim > 1 else i
        shape = [1] * ndim
        shape[place] = x.shape[0]
        out.append(broadcast_to_p(reshape_p(x, shape=tuple(shape)), shape=tuple(sizes)))
    return tuple(out)


# --- joining, splitting and shapes ----------------------------------------------------------
def ravel(a: ArrayLike, order: str = "C") -> Tensor:
    """a as a 1-d tensor, in row-major order ('C') or column-major order ('F'), as jnp.ravel.

    'A' and 'K' (NumPy's memory-layout orders) are refused, as in JAX: a tensor's layout is
    not part of its value.

    >>> sl.ravel(sl.zeros((2, 3))).shape, sl.ravel(sl.tensor([[1, 2], [3, 4]]), "F")
    """
    a = as_tensor(a)
    if order == "F":
        return _flat(transpose(a))
    if order != "C":
        raise ValueError(f"ravel/flatten: order must be 'C' (row-major) or 'F' (column-major), "
                         f"got {order!r}; NumPy's 'A' and 'K' follow the memory layout, which "
                         "a scanlib Tensor does not expose (as in JAX).")
    return _flat(a)


def _atleast(ndim_of, arys):
    out = tuple(ndim_of(as_tensor(a)) for a in arys)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys: ArrayLike) -> Any:
    """Each input with at least one axis (a 0-d one becomes shape (1,)); one tensor for one
    input, else a tuple.

    >>> sl.atleast_1d(sl.tensor(2.0)).shape
    """
    return _atleast(lambda a: reshape_p(a, shape=(1,)) if a.ndim == 0 else a, arys)


def _as_2d(a):
    if a.ndim >= 2:
        return a
    return reshape_p(a, shape=(1, a.size if a.ndim else 1))


def atleast_2d(*arys: ArrayLike) -> Any:
    """Each input with at least two axes (a 1-d one of length n becomes shape (1, n)); one
    tensor for one input, else a tuple.

    >>> sl.atleast_2d(sl.tensor([1.0, 2.0])).shape
    """
    return _atleast(_as_2d, arys)


def vstack(tup: Sequence[ArrayLike]) -> Tensor:
    """Stack tensors row-wise: 1-d ones become rows (1, n), then join along axis 0.

    >>> sl.vstack([sl.tensor([1.0, 2.0]), sl.tensor([3.0, 4.0])]).shape
    """
    return concatenate([_as_2d(as_tensor(t)) for t in tup], 0)


def hstack(tup: Sequence[ArrayLike]) -> Tensor:
    """Stack tensors column-wise: join along axis 1, or along axis 0 for 1-d tensors.

    >>> sl.hstack([sl.tensor([1.0, 2.0]), sl.tensor([3.0])]).shape
    """
    xs = [atleast_1d(t) for t in tup]
    if not xs:
        raise ValueError("hstack needs at least one tensor")
    return concatenate(xs, 0 if xs[0].ndim == 1 else 1)


def split(ary: ArrayLike, indices_or_sections: int | Sequence[int], axis: Axis = 0) -> list:
    """ary split along axis into a list of tensors: N equal sections (N must divide the
    axis) or pieces between the given indices, as numpy.split.

    >>> a, b = sl.split(sl.tensor([1.0, 2.0, 3.0, 4.0]), 2)
    """
    ary = as_tensor(ary)
    if ary.ndim == 0:
        raise ValueError("split: cannot split a 0-d tensor")
    axis = one_axis(axis, ary.ndim, "split")
    n = ary.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ValueError(f"split: array split does not result in an equal division "
                             f"({n} along axis {axis} into {sections} sections)")
        bounds = [k * (n // sections) for k in range(sections + 1)]
    else:
        cuts, _ = _static_ints(indices_or_sections, "split: indices")
        bounds = [0, *cuts, n]
    pieces = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    spans = [range(n)[s] for s in pieces]  # Python's slice rules, as NumPy's split uses
    # Increasing cuts partition the axis: one split equation; others may overlap or be empty.
    chained = builtins.all(a.stop == b.start for a, b in zip(spans, spans[1:]))
    if chained and builtins.sum(len(r) for r in spans) == n:
        return split_p(ary, sizes=tuple(len(r) for r in spans), axis=axis)
    return [getitem(ary, _along(axis, s)) for s in pieces]


def diff(a: ArrayLike, n: int = 1, axis: Axis = -1, prepend: ArrayLike | None = None,
         append: ArrayLike | None = None) -> Tensor:
    """The n-th discrete difference along axis, a[1:] - a[:-1] applied n times, as numpy.diff
    (bools give a[1:] != a[:-1]); prepend/append are joined on first.

    >>> sl.diff(sl.tensor([1.0, 4.0, 9.0]))
    """
    a = as_tensor(a)
    if a.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = one_axis(axis, a.ndim, "diff")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"diff: order must be non-negative, got n={n}")
    if n == 0:
        return a
    parts = []
    for extra in (prepend, a, append):
        if extra is None:
            continue
        extra = _on_device_of(extra, a)
        if extra.ndim == 0:
            extra = broadcast_to_p(extra, shape=a.shape[:axis] + (1,) + a.shape[axis + 1:])
        parts.append(extra)
    if len(parts) > 1:
        a = concatenate(parts, axis)
    op = ew.not_equal if a.dtype == np.bool_ else ew.sub
    for _ in range(n):
        m = a.shape[axis]
        a = op(getitem(a, _along(axis, slice(1, m))), getitem(a, _along(axis, slice(0, m - 1))))
    return a


# NumPy functions (np.f called on a Tensor, NEP 18) and ufuncs that run these ops; each
# callable takes NumPy's parameter names (numpy_interop refuses other keywords).
def _np_atleast(fn):
    return lambda *arys: fn(*arys)


NUMPY_FUNCTIONS: dict = {
    np.flip: lambda m, axis=None: flip(m, axis),
    np.roll: lambda a, shift, axis=None: roll(a, shift, axis),
    np.pad: lambda array, pad_width, mode="constant", constant_values=0: pad(
        array, pad_width, mode, constant_values),
    np.tile: lambda A, reps: tile(A, reps),
    np.repeat: lambda a, repeats, axis=None: repeat(a, repeats, axis),
    np.vstack: lambda tup: vstack(tup),
    np.hstack: lambda tup: hstack(tup),
    np.moveaxis: lambda a, source, destination: moveaxis(a, source, destination),
    np.split: lambda ary, indices_or_sections, axis=0: split(ary, indices_or_sections, axis),
    np.diff: lambda a, n=1, axis=-1, prepend=None, append=None: diff(a, n, axis, prepend,
                                                                     append),
    np.ravel: lambda a, order="C": ravel(a, order),
    np.atleast_1d: _np_atleast(atleast_1d),
    np.atleast_2d: _np_atleast(atleast_2d),
    np.linspace: lambda start, stop, num=50, endpoint=True, dtype=None, device=None: linspace(
        start, stop, num, endpoint, dtype, device),
    np.meshgrid: lambda *xi, indexing="xy": meshgrid(*xi, indexing=indexing),
}
NUMPY_UFUNCS: dict = {}
