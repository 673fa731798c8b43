"""jax.lax's selection and dynamic indexing: `select`, `complex`, and `dynamic_slice` /
`dynamic_update_slice` with their `_in_dim` forms, whose start indices may be traced values.
Starts are clamped so that the slice fits, after a negative start counts from the end, as
JAX does. A known start is a basic slice; a traced one, an index built from it (a gather
whose VJP scatters back, an `.at[...].set` for updates).

Imports tape and ops' functions and structural modules (scanlib.lax re-exports these).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..tape import Tensor, type_str
from . import elementwise as ew
from .functions import arange, as_tensor, clip, expand_dims, squeeze, where
from .structural import getitem

if TYPE_CHECKING:
    from ..tape.types import ArrayLike

__all__ = ["select", "complex", "dynamic_slice", "dynamic_update_slice", "dynamic_slice_in_dim",
           "dynamic_index_in_dim", "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim"]

_PYTHON_NUMBER = (bool, int, float, complex)


def select(pred: ArrayLike, on_true: ArrayLike, on_false: ArrayLike) -> Tensor:
    """on_true where pred, else on_false, elementwise, like `jax.lax.select`.

    pred is a bool scalar or has the cases' shape; on_true and on_false have one shape and
    one dtype (a Python number takes the other's dtype). Nothing broadcasts otherwise, as in
    JAX (use `where` for NumPy's broadcasting). The gradient reaches each case where it is
    chosen.

    >>> import scanlib as sl
    >>> sl.lax.select(sl.tensor([True, False]), sl.tensor([1.0, 2.0]), sl.tensor([3.0, 4.0]))
    tensor([1., 4.], dtype=float64)
    """
    t_num, f_num = type(on_true) in _PYTHON_NUMBER, type(on_false) in _PYTHON_NUMBER
    pred, on_true, on_false = as_tensor(pred), as_tensor(on_true), as_tensor(on_false)
    if t_num and not f_num:
        on_true = on_true.astype(on_false.dtype)
    elif f_num and not t_num:
        on_false = on_false.astype(on_true.dtype)
    if on_true.shape != on_false.shape or on_true.dtype != on_false.dtype:
        raise TypeError(f"select: on_true and on_false must have one shape and dtype, got "
                        f"{type_str(on_true.shape, on_true.dtype)} and "
                        f"{type_str(on_false.shape, on_false.dtype)}. Cast with .astype() or "
                        f"broadcast first (or use where, which broadcasts).")
    if pred.dtype != np.bool_ or pred.shape not in ((), on_true.shape):
        raise TypeError(f"select: pred must be bool, of shape () or the cases' shape "
                        f"{type_str(on_true.shape, on_true.dtype)}, got "
                        f"{type_str(pred.shape, pred.dtype)}. Compare to get a bool (x > 0).")
    return where(pred, on_true, on_false)


def complex(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x + iy elementwise, like `jax.lax.complex`: x and y are floats of one dtype (a Python
    number takes the other's; shapes broadcast), the result complex64 of float32 parts,
    complex128 of float64 ones. The parts are set, not computed (x + 1j * inf is x + inf j, where
    `x + 1j * y` gives nan in the real part). The gradient of a real function reaches x as the
    real part of the cotangent, y as minus its imaginary part (JAX's convention).

    >>> import scanlib as sl
    >>> sl.lax.complex(sl.tensor([1.0, 0.0]), sl.tensor([2.0, float("inf")]))
    tensor([1. +2.j, 0.+infj], dtype=complex128)
    """
    x_num, y_num = type(x) in _PYTHON_NUMBER, type(y) in _PYTHON_NUMBER
    x, y = as_tensor(x), as_tensor(y)
    if x_num and not y_num:
        x = x.astype(y.dtype)
    elif y_num and not x_num:
        y = y.astype(x.dtype)
    if x.dtype != y.dtype or np.dtype(x.dtype).kind != "f":
        raise TypeError(f"complex: x and y must be floats of one dtype, got "
                        f"{type_str(x.shape, x.dtype)} and {type_str(y.shape, y.dtype)}. Cast "
                        f"with .astype('float64').")
    return ew.complex_p(x, y)


# --- start indices ----------------------------------------------------------------------------
def _known(s):
    """A start's value as an int when it is known now (not a value of a trace), else None."""
    if isinstance(s, Tensor):
        return None if s._trace is not None else int(np.asarray(s._value))
    return int(s)


def _starts(who, start_indices, ndim):
    """The start indices as a list of scalars (ints or 0-d integer Tensors), checked."""
    if isinstance(start_indices, Tensor) or hasattr(start_indices, "shape"):
        t = as_tensor(start_indices)
        if t.ndim != 1:
            raise TypeError(f"{who}: start_indices must be a sequence of scalars or a 1-d "
                            f"array, got {type_str(t.shape, t.dtype)}")
        starts = [t[i] for i in range(t.shape[0])]
    else:
        try:
            starts = list(start_indices)
        except TypeError:
            raise TypeError(f"{who}: start_indices must be a sequence with one index per "
                            f"axis, got {start_indices!r}") from None
    if len(starts) != ndim:
        raise TypeError(f"{who}: start_indices has {len(starts)} entries for an operand of "
                        f"{ndim} axes; give one start per axis")
    checked = []
    for i, s in enumerate(starts):
        if isinstance(s, (bool, np.bool_)):
            raise TypeError(f"{who}: start_indices[{i}] must be an integer, got {s!r}")
        if isinstance(s, (int, np.integer)):
            checked.append(int(s))
            continue
        t = as_tensor(s)
        if t.shape != () or np.dtype(t.dtype).kind not in "iu":
            raise TypeError(f"{who}: start_indices[{i}] must be a scalar integer, got "
                            f"{type_str(t.shape, t.dtype)}")
        checked.append(t)
    return checked


def _sizes(who, sizes, shape, what):
    sizes = tuple(sizes)
    if len(sizes) != len(shape) or any(not isinstance(n, (int, np.integer)) or n < 0
                                       or n > d for n, d in zip(sizes, shape)):
        raise TypeError(f"{who}: {what} must be {len(shape)} non-negative ints no larger than "
                        f"the operand's shape {shape}, got {sizes}")
    return tuple(int(n) for n in sizes)


def _index(starts, sizes, shape, allow_negative):
    """The index of the window: basic slices when every start is known, else one integer
    array per axis (an open mesh) built from the clamped starts."""
    if isinstance(allow_negative, bool):
        allow_negative = [allow_negative] * len(shape)
    known = [_known(s) for s in starts]
    clamped = []
    for s, k, n, d, neg in zip(starts, known, sizes, shape, allow_negative):
        if k is not None:
            k = k + d if neg and k < 0 else k
            clamped.append(min(max(k, 0), d - n))
        else:
            s = where(ew.less(s, 0), ew.add(s, d), s) if neg else s
            clamped.append(clip(s, 0, d - n))
    if all(isinstance(c, int) for c in clamped):
        return tuple(slice(c, c + n) for c, n in zip(clamped, sizes))
    index = []
    for i, (c, n) in enumerate(zip(clamped, sizes)):
        mesh = [1] * len(shape)
        mesh[i] = n
        if isinstance(c, int):
            index.append(np.arange(c, c + n).reshape(mesh))
        else:
            index.append(ew.add(arange(n, dtype=c.dtype, device=c.device), c).reshape(mesh))
    return tuple(index)


# --- slices and updates -------------------------------------------------------------------------
def dynamic_slice(operand: ArrayLike, start_indices: Sequence[ArrayLike] | ArrayLike,
                  slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Tensor:
    """The window of operand of shape slice_sizes starting at start_indices, like
    `jax.lax.dynamic_slice`: the starts may be traced (a scan's step index), the sizes are
    ints. A negative start counts from the end (when allow_negative_indices), then each start
    is clamped so that the window fits, as JAX does: no error for an out-of-range start.

    >>> import scanlib as sl
    >>> sl.lax.dynamic_slice(sl.arange(10.0), (8,), (3,))  # clamped to start 7
    tensor([7., 8., 9.], dtype=float64)
    """
    x = as_tensor(operand)
    starts = _starts("dynamic_slice", start_indices, x.ndim)
    sizes = _sizes("dynamic_slice", slice_sizes, x.shape, "slice_sizes")
    return getitem(x, _index(starts, sizes, x.shape, allow_negative_indices))


def dynamic_update_slice(operand: ArrayLike, update: ArrayLike,
                         start_indices: Sequence[ArrayLike] | ArrayLike, *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Tensor:
    """operand with the window at start_indices replaced by update, like
    `jax.lax.dynamic_update_slice` (a new tensor; differentiable in operand and update).
    update has operand's rank and dtype; starts are clamped as in dynamic_slice.

    >>> import scanlib as sl
    >>> sl.lax.dynamic_update_slice(sl.zeros(4), sl.ones(2), (3,))  # clamped to start 2
    tensor([0., 0., 1., 1.], dtype=float64)
    """
    x = as_tensor(operand)
    u = as_tensor(update).astype(x.dtype) if type(update) in _PYTHON_NUMBER else \
        as_tensor(update)
    if u.dtype != x.dtype or u.ndim != x.ndim:
        raise TypeError(f"dynamic_update_slice: update must have operand's rank and dtype, "
                        f"got {type_str(u.shape, u.dtype)} for operand "
                        f"{type_str(x.shape, x.dtype)}. Cast with .astype() or reshape it.")
    starts = _starts("dynamic_update_slice", start_indices, x.ndim)
    sizes = _sizes("dynamic_update_slice", u.shape, x.shape, "update's shape")
    return x.at[_index(starts, sizes, x.shape, allow_negative_indices)].set(u)


def _along(value, axis, ndim, fill):
    out = [fill] * ndim
    out[axis] = value
    return out


def _axis(who, axis, ndim):
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"{who}: axis {axis!r} is out of range for an operand of {ndim} axes")
    return int(axis) % ndim


def dynamic_slice_in_dim(operand: ArrayLike, start_index: ArrayLike, slice_size: int,
                         axis: int = 0, *, allow_negative_indices: bool = True) -> Tensor:
    """dynamic_slice along one axis (the others whole), like `jax.lax.dynamic_slice_in_dim`.

    >>> import scanlib as sl
    >>> sl.lax.dynamic_slice_in_dim(sl.arange(6.0).reshape(3, 2), 1, 2).shape
    (2, 2)
    """
    x = as_tensor(operand)
    axis = _axis("dynamic_slice_in_dim", axis, x.ndim)
    sizes = list(x.shape)
    sizes[axis] = slice_size
    return dynamic_slice(x, _along(start_index, axis, x.ndim, 0), sizes,
                         allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand: ArrayLike, index: ArrayLike, axis: int = 0,
                         keepdims: bool = True, *, allow_negative_indices: bool = True) -> Tensor:
    """The entry at index along axis (kept as an axis of size 1 when keepdims), like
    `jax.lax.dynamic_index_in_dim`; index is clamped as in dynamic_slice.

    >>> import scanlib as sl
    >>> sl.lax.dynamic_index_in_dim(sl.arange(4.0), -1, keepdims=False)
    tensor(3., dtype=float64)
    """
    x = as_tensor(operand)
    axis = _axis("dynamic_index_in_dim", axis, x.ndim)
    out = dynamic_slice_in_dim(x, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, axis)


def dynamic_update_slice_in_dim(operand: ArrayLike, update: ArrayLike, start_index: ArrayLike,
                                axis: int, *, allow_negative_indices: bool = True) -> Tensor:
    """dynamic_update_slice along one axis, like `jax.lax.dynamic_update_slice_in_dim`.

    >>> import scanlib as sl
    >>> sl.lax.dynamic_update_slice_in_dim(sl.zeros((3, 2)), sl.ones((1, 2)), -1, 0)
    tensor([[0., 0.],
            [0., 0.],
            [1., 1.]], dtype=float64)
    """
    x = as_tensor(operand)
    axis = _axis("dynamic_update_slice_in_dim", axis, x.ndim)
    return dynamic_update_slice(x, update, _along(start_index, axis, x.ndim, 0),
                                allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand: ArrayLike, update: ArrayLike, index: ArrayLike,
                                axis: int, *, allow_negative_indices: bool = True) -> Tensor:
    """operand with the entry at index along axis replaced by update (of operand's rank, or
    one less), like `jax.lax.dynamic_update_index_in_dim`.

    >>> import scanlib as sl
    >>> sl.lax.dynamic_update_index_in_dim(sl.zeros(3), 5.0, 1, 0)
    tensor([0., 5., 0.], dtype=float64)
    """
    x = as_tensor(operand)
    axis = _axis("dynamic_update_index_in_dim", axis, x.ndim)
    u = as_tensor(update).astype(x.dtype) if type(update) in _PYTHON_NUMBER else \
        as_tensor(update)
    if u.ndim == x.ndim - 1:
        u = expand_dims(u, axis)
    return dynamic_update_slice_in_dim(x, u, index, axis,
                                       allow_negative_indices=allow_negative_indices)
