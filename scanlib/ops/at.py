"""`x.at[index]`: JAX's functional indexed updates (`.set(v)`, `.add(v)`, `.multiply(v)`,
`.divide(v)`, `.get()`), differentiable in x and v; Tensors stay immutable, so each returns a
new tensor.

Imports backends, tape and ops.structural/elementwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from .structural import (Slot, concatenate_p, fill_index, getitem_p, last_writers_p,
                         may_repeat, scatter_add_p, scatter_set_p, split_index)

if TYPE_CHECKING:
    from ..tape.types import ArrayLike


class IndexUpdate:
    """What `x.at` returns: index it to choose the entries an update touches."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, index: Any) -> IndexedUpdate:
        return IndexedUpdate(self.x, index)

    def __repr__(self):
        return f"_IndexUpdate({self.x!r})"


_HINTS = ("indices_are_sorted", "unique_indices")  # JAX's promises; nothing relies on them


def _check_options(who, mode, fill_value, hints):
    unknown = set(hints) - set(_HINTS)
    if unknown:
        raise TypeError(f"x.at[...].{who}() got unexpected keyword(s) {sorted(unknown)}")
    if mode is not None or fill_value is not None:
        raise NotImplementedError(
            f"x.at[...].{who}(mode={mode!r}): scanlib indexes as NumPy does (an index out of "
            "range raises IndexError, negative indices count from the end); clip the indices "
            "yourself, or read with scanlib.take(x, i, mode='clip').")


def _axes_of(template, ndim):
    """The axis of x each entry of an index template reads (None for None, a bool and
    Ellipsis, which read no single axis)."""
    consuming = sum(1 for e in template if not (e is None or type(e) is bool or e is Ellipsis))
    axes, axis = [], 0
    for e in template:
        if e is None or type(e) is bool:
            axes.append(None)
        elif e is Ellipsis:
            axes.append(None)
            axis += ndim - consuming
        else:
            axes.append(axis)
            axis += 1
    return axes


def _fill_value(dtype, fill_value):
    """JAX's default fill for mode="fill": NaN, the most negative or the largest integer,
    True."""
    dtype = np.dtype(dtype)
    if fill_value is not None:
        return fill_value
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    return True


class IndexedUpdate:
    """`x.at[index]`: the updates of JAX (set, add, multiply, divide, get), each a new tensor.

    Repeated indices: `add` accumulates every value (as JAX and np.add.at), `set` keeps the last
    value as NumPy's assignment does (its gradient reaches only that value), and `multiply` and
    `divide` raise a ValueError. An out-of-range index raises IndexError.

    >>> import scanlib as sl
    >>> x = sl.zeros(4)
    >>> x.at[1].set(5.0).at[[0, 0]].add(1.0)
    tensor([2., 5., 0., 0.], dtype=float64)
    """

    __slots__ = ("x", "index")

    def __init__(self, x, index):
        self.x, self.index = x, index

    def _parts(self):
        template, arrays = split_index(self.index)
        device = self.x.device
        arrays = [a if isinstance(a, Tensor) else backends.to_device(a, device) for a in arrays]
        return template, arrays

    def _target_shape(self, template, arrays):
        """The shape of x[index] (index arrays stand in as zeros: only their shapes matter)."""
        probe = np.broadcast_to(np.zeros((), bool), self.x.shape)
        return probe[fill_index(template, [np.zeros(a.shape, np.int64) for a in arrays])].shape

    def _fitted(self, v, template, arrays, who):
        """v with leading length-1 axes beyond x[index]'s rank dropped, as NumPy's assignment
        drops them, so that its cotangent can be summed back to v's shape."""
        v = self._value(v, who)
        shape = self._target_shape(template, arrays)
        extra = v.ndim - len(shape)
        if extra > 0:
            if any(n != 1 for n in v.shape[:extra]):
                raise ValueError(f"x.at[...].{who}(v): v of shape {v.shape} does not fit "
                                 f"x[index] of shape {shape}")
            from .structural import reshape_p
            v = reshape_p(v, shape=v.shape[extra:])
        return v

    def _check_kind(self, result_dtype, who):
        """An update that would need another dtype for x is refused, as NumPy's in-place
        np.add.at(x, i, 2.5) on integers is (same_kind casting), instead of truncating."""
        if result_dtype != self.x.dtype and not np.can_cast(result_dtype, self.x.dtype,
                                                            "same_kind"):
            raise TypeError(f"x.at[...].{who}: the result is {result_dtype} but x is "
                            f"{self.x.dtype}, and casting it back would change values; cast x "
                            f"first (x.astype('{result_dtype}')).")

    def _value(self, v, who="set"):
        """v in x's dtype (as JAX casts it; NumPy's assignment does the same)."""
        v = v if isinstance(v, Tensor) else Tensor(backends.asarray_on(v, self.x.device))
        if who != "set":
            self._check_kind(np.result_type(self.x.dtype, v.dtype), who)
        if v.dtype != self.x.dtype:
            if np.dtype(v.dtype).kind == "c" and np.dtype(self.x.dtype).kind != "c":
                raise TypeError(f"x.at[...]: a complex value ({v.dtype}) cannot update a "
                                f"{self.x.dtype} tensor without dropping its imaginary part; "
                                "cast x to a complex dtype first.")
            v = ew.astype(v, dtype=self.x.dtype)
        return v

    def get(self, *, mode: str | None = None, fill_value: Any = None,
            **hints: Any) -> Tensor:
        """x[index]. mode="fill" gives fill_value (by default NaN for floats, the most
        negative integer, the largest unsigned one, True) where an index is out of range,
        mode="clip" reads the nearest entry, as JAX's; by default (and "promise_in_bounds")
        an index out of range raises IndexError, as NumPy's."""
        if mode in ("fill", "clip"):
            unknown = set(hints) - set(_HINTS)
            if unknown:
                raise TypeError(f"x.at[...].get() got unexpected keyword(s) {sorted(unknown)}")
            if fill_value is not None and mode != "fill":
                raise ValueError("x.at[...].get(mode='clip'): fill_value applies to "
                                 "mode='fill' only.")
            return self._get_out_of_range(mode, fill_value)
        _check_options("get", None if mode == "promise_in_bounds" else mode, fill_value, hints)
        template, arrays = self._parts()
        return getitem_p(self.x, *arrays, index=template)

    def _get_out_of_range(self, mode, fill_value):
        """get's fill and clip modes. Each index into an axis (an int or an integer array) is
        made non-negative; clip clamps it into the axis, fill points it past the axis' end,
        where one entry of fill_value is appended (so NumPy's gather puts the fill values
        wherever the result's axes go, and the gradient reaches x through the append)."""
        template, arrays = self._parts()
        x, arrays, entries = self.x, list(arrays), []
        padded = []
        for entry, axis in zip(template, _axes_of(template, x.ndim)):
            if axis is None or isinstance(entry, slice):
                entries.append(entry)
                continue
            n = x.shape[axis]
            if isinstance(entry, Slot):
                i = arrays[entry.i]
                i = i if isinstance(i, Tensor) else Tensor(i)
                if i.dtype != np.int64:  # i + n must not wrap (int8 indices, n = 200)
                    i = ew.astype(i, dtype=np.int64)
                inside = ew.logical_and(ew.greater_equal(i, -n), ew.less(i, n))
                i = ew.where(ew.less(i, 0), i + n, i)
                if mode == "clip":
                    i = ew.minimum(ew.maximum(i, 0), max(n - 1, 0))
                else:
                    i = ew.where(inside, i, n)
                    padded.append(axis)
                arrays[entry.i] = i
                entries.append(entry)
                continue
            i = entry + n if -n <= entry < 0 else entry  # a static int
            if not 0 <= i < n:
                i = min(max(i, 0), n - 1) if mode == "clip" else n
                if mode == "fill":
                    padded.append(axis)
            entries.append(i)
        for axis in sorted(set(padded)):
            shape = list(x.shape)
            shape[axis] = 1
            block = np.full(shape, _fill_value(x.dtype, fill_value), dtype=x.dtype)
            x = concatenate_p(x, Tensor(backends.asarray_on(block, x.device)), axis=axis)
        return getitem_p(x, *arrays, index=tuple(entries))

    def set(self, v: ArrayLike, *, mode: str | None = None, **hints: Any) -> Tensor:
        """x with x[index] replaced by v (broadcast to x[index]'s shape)."""
        _check_options("set", mode, None, hints)
        template, arrays = self._parts()
        v = self._fitted(v, template, arrays, "set")
        return scatter_set_p(self.x, v, *arrays, index=template, unique=False)

    def add(self, v: ArrayLike, *, mode: str | None = None, **hints: Any) -> Tensor:
        """x with v added at index; repeated indices add every value."""
        _check_options("add", mode, None, hints)
        template, arrays = self._parts()
        # np.add.at broadcasts v; the walk sums its cotangent back to v's shape
        v = self._fitted(v, template, arrays, "add")
        update = scatter_add_p(v, *arrays, index=template, shape=self.x.shape)
        return ew.add(self.x, update)

    def multiply(self, v: ArrayLike, *, mode: str | None = None, **hints: Any) -> Tensor:
        """x with x[index] multiplied by v; an index named twice is a ValueError."""
        _check_options("multiply", mode, None, hints)
        return self._combine(v, ew.mul, "x.at[...].multiply")

    def divide(self, v: ArrayLike, *, mode: str | None = None, **hints: Any) -> Tensor:
        """x with x[index] divided by v; an index named twice is a ValueError."""
        _check_options("divide", mode, None, hints)
        return self._combine(v, ew.div, "x.at[...].divide")

    def _combine(self, v, op, who):
        template, arrays = self._parts()
        if may_repeat(arrays) and not any(isinstance(a, Tensor) and a._trace is not None
                                          for a in arrays):  # known now: say so here
            values = [a._value if isinstance(a, Tensor) else a for a in arrays]
            shape = np.shape(np.broadcast_to(np.zeros((), bool), self.x.shape)[
                fill_index(template, [backends.to_numpy(a) for a in values])])
            if not bool(last_writers_p(*arrays, index=template, shape=self.x.shape,
                                       out_shape=shape)._value.all()):
                raise ValueError(f"{who}: the index names a position more than once, which "
                                 "is not supported (JAX leaves it undefined); combine the "
                                 "factors of each position first.")
        current = getitem_p(self.x, *arrays, index=template)
        operand = v if isinstance(v, Tensor) else Tensor(backends.asarray_on(v, self.x.device))
        new = op(current, operand)
        self._check_kind(new.dtype, who.rpartition(".")[2])
        new = self._value(new)
        return scatter_set_p(self.x, new, *arrays, index=template, unique=who)

    def __repr__(self):
        return f"_IndexedUpdate({self.x!r}, {self.index!r})"
