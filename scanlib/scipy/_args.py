"""The argument promotion of scanlib.scipy's functions: JAX's promote_args_inexact.
Imports ops."""

from __future__ import annotations

import numpy as np

from ..ops import elementwise as ew
from ..ops.functions import as_tensor
from ..ops.promotion import inexact_dtype, result_type
from ..tape import Tensor


def promote_inexact(who, *args):
    """args as Tensors of one real float dtype, as JAX's promote_args_inexact: the dtype they
    combine into by JAX's promotion (`result_type`: an integer with a float32 array is float32,
    Python numbers and weakly typed tensors yield), then JAX's float for it if that is not a
    float (float32 for int32, float64 for int64 or beside a Python float)."""
    if any(isinstance(a, complex) or getattr(getattr(a, "dtype", None), "kind", "") == "c"
           for a in args):
        raise TypeError(f"{who}: got complex input; it is defined here for real numbers only")
    dtype = inexact_dtype(result_type(*args)) if args else np.dtype(np.float64)
    out = []
    for a in args:
        a = as_tensor(a) if hasattr(a, "dtype") else Tensor(np.asarray(a, dtype))
        out.append(a if a.dtype == dtype else ew.astype(a, dtype=dtype))
    return tuple(out)


def real_float(x, who):
    """x as a Tensor of a real float dtype: integers and bools become JAX's float for them
    (float32 for int32, `inexact_dtype`), complex is refused."""
    return promote_inexact(who, x)[0]
