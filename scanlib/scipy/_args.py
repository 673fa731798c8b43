"""The argument promotion of scanlib.scipy's functions: JAX's promote_args_inexact.
Imports ops."""

from __future__ import annotations

import numpy as np

from ..ops import elementwise as ew
from ..ops.functions import as_tensor
from ..tape import Tensor


def promote_inexact(who, *args):
    """args as Tensors of one real float dtype, as JAX's promote_args_inexact: the arrays'
    promoted dtype (NumPy's rule), float64 if that is not a float; Python numbers are weak
    (they take the arrays' dtype, as in JAX and NumPy)."""
    strong = [np.dtype(a.dtype) for a in args if hasattr(a, "dtype")]
    dtype = np.result_type(*strong) if strong else np.dtype(np.float64)
    if dtype.kind == "c" or any(isinstance(a, complex) for a in args):
        raise TypeError(f"{who}: got complex input; it is defined here for real numbers only")
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
    out = []
    for a in args:
        a = as_tensor(a) if hasattr(a, "dtype") else Tensor(np.asarray(a, dtype))
        out.append(a if a.dtype == dtype else ew.astype(a, dtype=dtype))
    return tuple(out)


def real_float(x, who):
    """x as a Tensor of a real float dtype: integers and bools become float64 (JAX: its
    default float), complex is refused."""
    return promote_inexact(who, x)[0]
