"""The nan-skipping reductions and scans of jax.numpy: nanmax, nanmin, nanprod, nanvar, nanstd,
nanargmax, nanargmin, nancumsum, nancumprod (nansum and nanmean sit in named.py, the quantiles
in statistics.py). Each replaces nan by the reduction's identity with `where`, as JAX does, so a
nan element gets a zero gradient; integer and bool inputs have no nans and reduce as they are.

Imports tape and ops.elementwise/functions/reductions/special/statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .functions import as_inexact, as_tensor, max, min, sum, where_mask
from .named import nanmean
from .reductions import all, argmax, argmin, cumprod, cumsum, prod
from .special import isnan

if TYPE_CHECKING:
    from ..tape.types import ArrayLike, Axis, DTypeLike

__all__ = ["nanmax", "nanmin", "nanprod", "nanvar", "nanstd", "nanargmax", "nanargmin",
           "nancumsum", "nancumprod"]


def _has_nans(a):
    return a.dtype.kind in "fc"


def _filled(a, value):
    return ew.where(isnan(a), value, a)


def _extremum(reduce, fill, name):
    def public(a: ArrayLike, axis: Axis = None, keepdims: bool = False, *,
               initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
        a = as_tensor(a)
        if not _has_nans(a):
            return reduce(a, axis, keepdims, initial=initial, where=where)
        out = reduce(_filled(a, fill), axis, keepdims, initial=initial, where=where)
        return ew.where(all(isnan(a), axis, keepdims), np.nan, out)

    which = "maximum" if fill < 0 else "minimum"
    public.__name__ = public.__qualname__ = name
    public.__doc__ = (
        f"The {which} over axis of the elements that are not nan (nan where all are), as "
        f"jnp.{name} (with its `initial` and `where`, as in {reduce.__name__}); nan elements get "
        f"no gradient, and ties share it as in {reduce.__name__}."
        f"\n\n    >>> sl.{name}(sl.tensor([1.0, np.nan, 3.0]))\n    ")
    return public


nanmax = _extremum(max, -np.inf, "nanmax")
nanmin = _extremum(min, np.inf, "nanmin")


def nanprod(a: ArrayLike, axis: Axis = None, keepdims: bool = False, *,
            dtype: DTypeLike = None, initial: ArrayLike | None = None,
            where: ArrayLike | None = None) -> Tensor:
    """Product over axis with nan read as 1, as jnp.nanprod (1 where all are nan; `initial`
    and `where` as in prod).

    >>> sl.nanprod(sl.tensor([2.0, np.nan, 3.0]))
    """
    a = as_tensor(a)
    return prod(_filled(a, 1) if _has_nans(a) else a, axis, keepdims, dtype=dtype,
                initial=initial, where=where)


def nanvar(a: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False, *,
           where: ArrayLike | None = None) -> Tensor:
    """Variance over axis of the elements that are not nan, sum((a - nanmean)**2) / (n - ddof)
    with n their count, as jnp.nanvar: nan where n - ddof <= 0 (and so for a slice of nans).
    The bool mask `where` leaves out the elements where it is False. Integers compute in
    float (float32 for int32, as JAX).

    >>> sl.nanvar(sl.tensor([1.0, np.nan, 3.0]))
    """
    a = as_inexact(a)
    if a.dtype.kind == "c":
        raise TypeError(f"nanvar/nanstd of complex input ({a.dtype}) is not supported; take "
                        "nanvar of the real and imaginary parts and add them.")
    nans = isnan(a)
    if where is not None:  # a masked-out element is read as a nan
        nans = ew.logical_or(nans, ew.logical_not(where_mask(where, a, "nanvar")))
        a = ew.where(nans, np.nan, a)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = nanmean(a, axis, keepdims=True)
    centered = ew.where(nans, 0.0, ew.sub(a, mean))
    n = ew.sub(sum(ew.logical_not(nans), axis, keepdims), int(ddof))
    empty = ew.less_equal(n, 0)
    total = ew.where(empty, np.nan, sum(ew.mul(centered, centered), axis, keepdims))
    return ew.div(total, ew.astype(ew.where(empty, 1, n), dtype=a.dtype))


def nanstd(a: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False, *,
           where: ArrayLike | None = None) -> Tensor:
    """Standard deviation over axis of the elements that are not nan: sqrt(nanvar(...)), as
    jnp.nanstd.

    >>> sl.nanstd(sl.tensor([1.0, np.nan, 3.0]))
    """
    return ew.sqrt(nanvar(a, axis, ddof, keepdims, where=where))


def _arg_extremum(arg, fill, name):
    def public(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
        a = as_tensor(a)
        if not _has_nans(a):
            return arg(a, axis, keepdims)
        nans = isnan(a)
        found = arg(_filled(a, fill), axis, keepdims)
        return ew.where(all(nans, axis, keepdims), -1, found)

    which = "largest" if fill < 0 else "smallest"
    public.__name__ = public.__qualname__ = name
    public.__doc__ = (
        f"Index (int64) of the {which} element along axis that is not nan, as jnp.{name}: -1 "
        f"where all are nan (NumPy raises there). Not differentiable.\n\n"
        f"    >>> sl.{name}(sl.tensor([1.0, np.nan, 3.0]))\n    ")
    return public


nanargmax = _arg_extremum(argmax, -np.inf, "nanargmax")
nanargmin = _arg_extremum(argmin, np.inf, "nanargmin")


def _jax_accumulation(a, dtype):
    """The dtype jnp.nancumsum and jnp.nancumprod accumulate in: an integer keeps its dtype
    (int8 stays int8, unlike jnp.cumsum's), a bool becomes int64."""
    if dtype is None and a.dtype.kind in "iu":
        return a.dtype
    return dtype


def nancumsum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Tensor:
    """Cumulative sum along axis (of the flattened tensor when axis is None) with nan read as 0,
    as jnp.nancumsum.

    >>> sl.nancumsum(sl.tensor([1.0, np.nan, 2.0]))
    """
    a = as_tensor(a)
    return cumsum(_filled(a, 0) if _has_nans(a) else a, axis, _jax_accumulation(a, dtype))


def nancumprod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Tensor:
    """Cumulative product along axis (of the flattened tensor when axis is None) with nan read
    as 1, as jnp.nancumprod.

    >>> sl.nancumprod(sl.tensor([2.0, np.nan, 3.0]))
    """
    a = as_tensor(a)
    return cumprod(_filled(a, 1) if _has_nans(a) else a, axis, _jax_accumulation(a, dtype))


NUMPY_FUNCTIONS: dict = {
    np.nanmax: lambda a, axis=None, keepdims=False: nanmax(a, axis, keepdims),
    np.nanmin: lambda a, axis=None, keepdims=False: nanmin(a, axis, keepdims),
    np.nanprod: lambda a, axis=None, dtype=None, keepdims=False: nanprod(a, axis, keepdims,
                                                                          dtype=dtype),
    np.nanvar: lambda a, axis=None, ddof=0, keepdims=False: nanvar(a, axis, ddof, keepdims),
    np.nanstd: lambda a, axis=None, ddof=0, keepdims=False: nanstd(a, axis, ddof, keepdims),
    np.nancumsum: lambda a, axis=None, dtype=None: nancumsum(a, axis, dtype),
    np.nancumprod: lambda a, axis=None, dtype=None: nancumprod(a, axis, dtype),
}
