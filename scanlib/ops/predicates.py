"""jax.numpy's type predicates and comparisons of whole tensors: isscalar, iscomplexobj,
isrealobj, iscomplex, isreal, iterable, array_equal, array_equiv, can_cast, isdtype and
result_type (NumPy's promotion table, which scanlib's ops follow).

Imports tape and ops.elementwise/functions/reductions/special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from . import promotion
from .functions import as_tensor, tensor
from .reductions import all as all_of
from .special import isnan

if TYPE_CHECKING:
    from typing import Any

    from ..tape.types import ArrayLike, DTypeLike

__all__ = ["isscalar", "iscomplexobj", "isrealobj", "iscomplex", "isreal", "iterable",
           "array_equal", "array_equiv", "can_cast", "isdtype", "result_type"]


def _dtype_of(x):
    return x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype


def isscalar(element: Any) -> bool:
    """True for a Python or NumPy scalar and for a 0-d tensor, as jnp.isscalar.

    >>> sl.isscalar(sl.tensor(1.0)), sl.isscalar(sl.tensor([1.0]))
    """
    if isinstance(element, Tensor):
        return element.ndim == 0
    return bool(np.isscalar(element)) or (isinstance(element, np.ndarray)
                                          and element.ndim == 0)


def iscomplexobj(x: Any) -> bool:
    """x has a complex dtype, as jnp.iscomplexobj.

    >>> sl.iscomplexobj(sl.tensor([1.0 + 0j]))
    """
    return _dtype_of(x).kind == "c"


def isrealobj(x: Any) -> bool:
    """x has no complex dtype, as jnp.isrealobj.

    >>> sl.isrealobj(sl.tensor([1.0]))
    """
    return not iscomplexobj(x)


def iscomplex(x: ArrayLike) -> Tensor:
    """Elementwise: the imaginary part is nonzero (bool), as jnp.iscomplex.

    >>> sl.iscomplex(sl.tensor([1.0 + 1j, 2.0 + 0j]))
    """
    x = as_tensor(x)
    if x.dtype.kind != "c":
        return tensor(np.zeros(x.shape, np.bool_))
    return ew.not_equal(ew.imag(x), 0)


def isreal(x: ArrayLike) -> Tensor:
    """Elementwise: the imaginary part is zero (bool), as jnp.isreal.

    >>> sl.isreal(sl.tensor([1.0 + 1j, 2.0 + 0j]))
    """
    return ew.logical_not(iscomplex(x))


def iterable(y: Any) -> bool:
    """Whether iter(y) works, as jnp.iterable (a 0-d tensor is not iterable).

    >>> sl.iterable(sl.tensor([1.0])), sl.iterable(2.0)
    """
    if isinstance(y, Tensor):
        return y.ndim > 0
    return bool(np.iterable(y))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Tensor:
    """One bool: a1 and a2 have one shape and equal elements (nan equal to nan with
    equal_nan=True), as jnp.array_equal.

    >>> sl.array_equal(sl.tensor([1.0, 2.0]), [1.0, 2.0])
    """
    a1, a2 = as_tensor(a1), as_tensor(a2)
    if a1.shape != a2.shape:
        return tensor(False)
    same = ew.equal(a1, a2)
    if equal_nan and a1.dtype.kind in "fc":
        same = ew.logical_or(same, ew.logical_and(isnan(a1), isnan(a2)))
    return all_of(same)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """One bool: a1 and a2 broadcast together and are equal elementwise, as jnp.array_equiv.

    >>> sl.array_equiv(sl.tensor([1.0, 2.0]), sl.tensor([[1.0, 2.0], [1.0, 2.0]]))
    """
    a1, a2 = as_tensor(a1), as_tensor(a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return tensor(False)
    return all_of(ew.equal(a1, a2))


def can_cast(from_: Any, to: DTypeLike, casting: str = "safe") -> bool:
    """Whether a value of from_'s dtype casts to `to` under the casting rule, by NumPy's table
    (scanlib's), as jnp.can_cast.

    >>> sl.can_cast(np.float32, np.float64)
    """
    if isinstance(from_, Tensor):
        from_ = from_.dtype
    return bool(np.can_cast(from_, to, casting))


def isdtype(dtype: DTypeLike, kind: Any) -> bool:
    """Whether dtype is of kind ('bool', 'signed integer', 'real floating', a dtype, or a tuple
    of them), as the array API's and jnp.isdtype.

    >>> sl.isdtype(np.float32, "real floating")
    """
    return bool(np.isdtype(np.dtype(dtype), kind))


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The dtype scanlib's ops give these operands, by JAX's promotion (an integer with a
    float32 is float32; Python numbers weak), as jnp.result_type.

    >>> sl.result_type(np.float32, np.int64)
    """
    return promotion.result_type(*arrays_and_dtypes)
