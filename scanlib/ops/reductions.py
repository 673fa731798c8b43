"""Scans along an axis (cumsum, cumprod) and reductions (prod, var, std, argmax/argmin,
any/all) in the manner of jax.numpy: composites of the structural primitives, and the few
primitives here sit with their VJPs.

Imports tape, the primitive modules of ops, functions' wrappers and ops.arrays' helpers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import batching, shapes
from . import elementwise as ew
from .arrays import _along, _constant, _flat, _is_one_int_axis_of_0d, _xp, _zero_d_as_1d
from .functions import (as_tensor, concatenate, keepdims_flag, masked, one_axis, reshape, transpose,
                        where_mask, with_initial)
from .primitive import Primitive
from .promotion import inexact_dtype
from .structural import getitem, normalize_axis, reshape_p, sum_p

if TYPE_CHECKING:
    from ..tape.types import ArrayLike, Axis, DTypeLike

__all__ = ["cumsum", "cumprod", "prod", "var", "std", "argmax", "argmin", "any", "all"]


def _accumulated_dtype(dtype, fn):
    """The dtype NumPy's fn (cumsum, prod, ...) returns for input dtype: small integers and bools
    become the platform integer."""
    return fn(np.zeros(1, dtype)).dtype


# --- scans along an axis --------------------------------------------------------------------
def _cumsum_impl(x, axis, reverse):
    # dtype=x.dtype: the input is already in the dtype asked for, and NumPy would widen
    # small integers and bools again (an int8 cumsum with dtype='int8' wraps around).
    xp = _xp(x)
    if reverse:
        return xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return xp.cumsum(x, axis=axis, dtype=x.dtype)


# The VJP of a running sum is the running sum of g taken from the other end.
cumsum_p = Primitive(
    "cumsum", _cumsum_impl,
    lambda g, out, x, axis, reverse: (cumsum_p(g, axis=axis, reverse=not reverse),),
    batch=batching.axis_rule, linear=True, keeps_weak=False)


def _scan_prep(a, axis, dtype, fn):
    a, axis = _zero_d_as_1d(as_tensor(a), axis)
    if axis is None:
        a, axis = _flat(a), 0
    else:
        axis = one_axis(axis, a.ndim, fn.__name__)
    want = np.dtype(dtype) if dtype is not None else _accumulated_dtype(a.dtype, fn)
    return (ew.astype(a, dtype=want) if want != a.dtype else a), axis


def cumsum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Tensor:
    """Cumulative sum along axis (of the flattened tensor when axis is None), as numpy.cumsum.

    Small integers and bools accumulate in int64 as in NumPy, unless dtype is given: then the
    sum is taken in that dtype (int8 wraps around, bools saturate at True), as in NumPy. The
    VJP is a cumsum of the cotangent from the other end.

    >>> sl.cumsum(sl.tensor([1.0, 2.0, 3.0]))
    """
    a, axis = _scan_prep(a, axis, dtype, np.cumsum)
    return cumsum_p(a, axis=axis, reverse=False)


def _shifted(x, d, axis, fill):
    """x moved d places along axis, the first d places filled with `fill`."""
    n = x.shape[axis]
    head = _constant(x, x.shape[:axis] + (d,) + x.shape[axis + 1:], fill)
    return concatenate([head, getitem(x, _along(axis, slice(0, n - d)))], axis)


def cumprod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Tensor:
    """Cumulative product along axis (of the flattened tensor when axis is None).

    Built from log2(n) shifted products (a Hillis-Steele scan), so its gradient is exact with
    zeros in the input (nothing divides by x) and can be differentiated again.

    >>> sl.cumprod(sl.tensor([1.0, 2.0, 3.0]))
    """
    a, axis = _scan_prep(a, axis, dtype, np.cumprod)
    d = 1
    while d < a.shape[axis]:
        a = ew.mul(a, _shifted(a, d, axis, 1))
        d *= 2
    return a


# --- reductions -----------------------------------------------------------------------------
def _to_last_axis(x, axes):
    """x with the axes to reduce moved to the end and merged into one."""
    keep = [] if axes is None else [i for i in range(x.ndim) if i not in axes]
    moved = [i for i in range(x.ndim) if i not in keep]
    x = transpose(x, tuple(keep + moved))
    n = int(np.prod([x.shape[i] for i in range(len(keep), x.ndim)]))
    return reshape(x, tuple(x.shape[: len(keep)]) + (n,))


def prod(a: ArrayLike, axis: Axis = None, keepdims: bool = False, *,
         dtype: DTypeLike = None, initial: ArrayLike | None = None,
         where: ArrayLike | None = None) -> Tensor:
    """Product over axis (an int, a tuple, or None for all axes), as numpy.prod. As in
    jnp.prod, the elements where the bool mask `where` is False count as 1, and the product is
    multiplied by `initial`.

    Multiplies halves pairwise (log2(n) products), so the gradient is exact with zeros in the
    input (no division by x) and second order works.

    >>> sl.prod(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1)
    """
    a = as_tensor(a)
    keepdims = keepdims_flag(keepdims, "prod")
    a = masked(a, where_mask(where, a, "prod"), 1)
    axes = None if _is_one_int_axis_of_0d(a, axis) else normalize_axis(axis, a.ndim)
    want = np.dtype(dtype) if dtype is not None else _accumulated_dtype(a.dtype, np.prod)
    x = _to_last_axis(ew.astype(a, dtype=want) if want != a.dtype else a, axes)
    if x.shape[-1] == 0:  # the empty product
        x = concatenate([x, _constant(x, x.shape[:-1] + (1,), 1)], -1)
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = concatenate([x, _constant(x, x.shape[:-1] + (1,), 1)], -1)
        half = x.shape[-1] // 2
        x = ew.mul(getitem(x, (..., slice(0, half))), getitem(x, (..., slice(half, None))))
    out_shape = tuple(1 if axes is None or i in axes else s for i, s in enumerate(a.shape))
    if not keepdims:
        out_shape = tuple(s for i, s in enumerate(a.shape) if axes is not None and i not in axes)
    return with_initial(reshape_p(x, shape=out_shape), initial, ew.mul, "prod")


def var(a: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False, *,
        dtype: DTypeLike = None, where: ArrayLike | None = None) -> Tensor:
    """Variance over axis, sum((a - mean)**2) / (n - ddof), as numpy.var (integers give
    float32 for int32 and float64 for int64, as in JAX). With n - ddof <= 0 the result is inf
    or nan, as in NumPy. With a bool mask `where`, the variance of the elements where it is
    True, as jnp.var (nan where n - ddof <= 0); the others get no gradient.

    >>> sl.var(sl.tensor([1.0, 2.0, 4.0]))
    """
    a = as_tensor(a) if dtype is None else as_tensor(a).astype(dtype)
    keepdims = keepdims_flag(keepdims, "var")
    if isinstance(ddof, (np.dtype, type, str)):
        raise TypeError(f"var/std: ddof must be a number, got {ddof!r}. jax.numpy's var takes "
                        "dtype (and out) before ddof: pass dtype= and ddof= by keyword.")
    if a.dtype.kind == "c":
        raise TypeError(f"var/std of complex input ({a.dtype}) is not supported; take "
                        "var of the real and imaginary parts and add them.")
    if a.dtype.kind not in "f":
        a = ew.astype(a, dtype=inexact_dtype(a.dtype))
    axes = normalize_axis(axis, a.ndim)
    mask = where_mask(where, a, "var")
    if mask is not None:
        return _masked_var(a, mask, axes, ddof, bool(keepdims))
    n = a.size if axes is None else int(np.prod([a.shape[i] for i in axes]))
    mean = ew.div(sum_p(a, axis=axes, keepdims=True), float(n))
    d = ew.sub(a, mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ew.div(sum_p(ew.mul(d, d), axis=axes, keepdims=bool(keepdims)),
                      float(max(n - ddof, 0)))


def _masked_var(a, mask, axes, ddof, keepdims):
    a = masked(a, mask, 0)
    count = sum_p(ew.astype(mask, dtype=a.dtype), axis=axes, keepdims=True)
    mean = ew.div(sum_p(a, axis=axes, keepdims=True), ew.where(ew.greater(count, 0), count, 1))
    d = masked(ew.sub(a, mean), mask, 0)
    n = ew.sub(sum_p(ew.astype(mask, dtype=a.dtype), axis=axes, keepdims=keepdims), ddof)
    some = ew.greater(n, 0)
    total = sum_p(ew.mul(d, d), axis=axes, keepdims=keepdims)
    return ew.where(some, ew.div(total, ew.where(some, n, 1)), np.nan)


def std(a: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False, *,
        dtype: DTypeLike = None, where: ArrayLike | None = None) -> Tensor:
    """Standard deviation over axis: sqrt(var(a, axis, ddof, keepdims, where=where)), as
    numpy.std.

    Where the variance is 0 the gradient is nan, as in JAX: sqrt's rule at 0 gives inf, which
    meets the zero deviations.

    >>> sl.std(sl.tensor([1.0, 2.0, 4.0]))
    """
    return ew.sqrt(var(a, axis, ddof, keepdims, dtype=dtype, where=where))


def _arg_reduction(name):
    def impl(x, axis, keepdims):
        fn = getattr(_xp(x), name)
        return fn(x, axis=axis, keepdims=keepdims).astype(np.int64, copy=False)

    prim = Primitive(name, impl, batch=batching.index_reduce_rule)  # indices: no gradient

    def public(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
        a = as_tensor(a)
        if _is_one_int_axis_of_0d(a, axis):
            axis = None  # NumPy takes axis 0 of a 0-d array: its one element
        if axis is not None:
            axis = one_axis(axis, a.ndim, name)
        if (a.size if axis is None else a.shape[axis]) == 0:  # other empty axes are fine
            raise ValueError(f"{name}: attempt to get {name} of an empty sequence "
                             f"(shape {a.shape}, axis {axis})")
        return prim(a, axis=axis, keepdims=keepdims_flag(keepdims, name))

    public.__name__ = public.__qualname__ = name
    which = "largest" if name == "argmax" else "smallest"
    public.__doc__ = (
        f"Index (int64) of the {which} value along axis (of the flattened tensor when axis is "
        f"None); ties give the first, as in NumPy. Not differentiable.\n\n"
        f"    >>> sl.{name}(sl.tensor([1.0, 3.0, 3.0]))\n")
    return public


argmax = _arg_reduction("argmax")
argmin = _arg_reduction("argmin")


def _logical_reduction(name):
    def impl(x, axis, keepdims):
        if type(x) is np.ndarray:  # the method np.all calls, without its dispatch (2 us)
            if axis is None and not keepdims:  # its keywords cost another 0.6 us
                return getattr(x, name)()
            return getattr(x, name)(axis=axis, keepdims=keepdims)
        return getattr(_xp(x), name)(x, axis=axis, keepdims=keepdims)

    prim = Primitive(name, impl, batch=batching.reduce_rule, shape_of=shapes.reduction)

    def public(a: ArrayLike, axis: Axis = None, keepdims: bool = False, *,
               where: ArrayLike | None = None) -> Tensor:
        a = as_tensor(a)
        a = masked(a, where_mask(where, a, name), 1 if name == "all" else 0)
        axes = None if _is_one_int_axis_of_0d(a, axis) else normalize_axis(axis, a.ndim)
        return prim(a, axis=axes, keepdims=keepdims_flag(keepdims, name))

    public.__name__ = public.__qualname__ = name
    which = "any element" if name == "any" else "every element"
    public.__doc__ = (f"True where {which} along axis is true (nonzero); a bool tensor. The "
                      f"elements where the bool mask `where` is False are left out, as in "
                      f"jnp.{name}.\n\n"
                      f"    >>> sl.{name}(sl.tensor([0.0, 1.0]))\n")
    return prim, public


any_p, any = _logical_reduction("any")
all_p, all = _logical_reduction("all")


# NumPy functions (np.f called on a Tensor, NEP 18) and ufuncs that run these ops; each
# callable takes NumPy's parameter names (numpy_interop refuses other keywords).
NUMPY_FUNCTIONS: dict = {
    np.cumsum: lambda a, axis=None, dtype=None: cumsum(a, axis, dtype),
    np.cumprod: lambda a, axis=None, dtype=None: cumprod(a, axis, dtype),
    np.prod: lambda a, axis=None, dtype=None, keepdims=False: prod(a, axis, keepdims,
                                                                    dtype=dtype),
    np.var: lambda a, axis=None, ddof=0, keepdims=False: var(a, axis, ddof, keepdims),
    np.std: lambda a, axis=None, ddof=0, keepdims=False: std(a, axis, ddof, keepdims),
    np.argmax: lambda a, axis=None, keepdims=False: argmax(a, axis, keepdims),
    np.argmin: lambda a, axis=None, keepdims=False: argmin(a, axis, keepdims),
    np.any: lambda a, axis=None, keepdims=False: any(a, axis, keepdims),
    np.all: lambda a, axis=None, keepdims=False: all(a, axis, keepdims),
}
NUMPY_UFUNCS: dict = {}
