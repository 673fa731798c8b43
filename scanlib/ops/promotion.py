"""JAX's type promotion, applied by bind before a primitive runs (ops/primitive.py): integers
with floats take the float's dtype, Python numbers and arrays made from them are weakly
typed, and float functions of integers compute in JAX's float for them."""
from __future__ import annotations

import functools

import numpy as np

from ..tape import Tensor


def lists_as_tensors(args):
    """args with lists and tuples as tensors (stacked, so no gradient is dropped)."""
    from .functions import as_tensor  # functions imports this module

    return [as_tensor(a) if type(a) in (list, tuple) else a for a in args]


def promote_types(a, b) -> np.dtype:
    """The dtype two arrays of dtypes a and b combine into, by JAX's rule: NumPy's, except
    that an integer with a float (or complex) gives the float's dtype (int32 with float32:
    float32, where NumPy gives float64)."""
    a, b = np.dtype(a), np.dtype(b)
    if a.kind in "iu" and b.kind in "fc":
        return b
    if b.kind in "iu" and a.kind in "fc":
        return a
    return np.promote_types(a, b)


def result_type(*operands) -> np.dtype:
    """The dtype operands (arrays, Tensors, dtypes, Python numbers) combine into, as
    jnp.result_type with 64-bit types: arrays and dtypes by `promote_types`, Python numbers
    weak (a float32 array with 2.0 stays float32; an integer one with 2.5 is float64)."""
    strong, weak = [], []
    for o in operands:
        if isinstance(o, (np.dtype, type, str)):
            strong.append(np.dtype(o))
        elif isinstance(o, Tensor) and o._weak:
            weak.append(_STAND_IN[o.dtype.kind])
        elif hasattr(o, "dtype"):  # Tensors, arrays, NumPy scalars
            strong.append(np.dtype(o.dtype))
        else:
            weak.append(o)
    if not strong:
        return np.result_type(*weak)
    return np.result_type(functools.reduce(promote_types, strong), *weak)


_WEAK = (float, int, bool)
# JAX's lattice of kinds, and a Python number of each kind (NumPy's rule for a weak operand)
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_STAND_IN = {"b": False, "u": 0, "i": 0, "f": 0.0, "c": 0j}
_BOOL = np.dtype(bool)


def weak_rank(args):
    """None when the result cannot be weakly typed: no operand is weak, or a typed operand is
    a float or complex (JAX's lattice puts every weak kind at or below them: float32 * 1j is
    a typed complex64). Else the highest kind rank of the typed operands (bools and integers;
    -1 when there are none): a result is weak above it (int32 * 0.5 is a weak float64)."""
    weak, rank = False, -1
    for a in args:
        t = type(a)
        if t is Tensor:
            if a._weak:
                weak = True
                continue
            kind = getattr(a._value, "dtype", _BOOL).kind  # Python numbers' comparisons: bools
        elif t is float or t is int or t is complex:
            weak = True
            continue
        else:
            dtype = getattr(a, "dtype", None)
            if dtype is None:
                continue
            kind = dtype.kind
        if kind == "f" or kind == "c":
            return None
        r = _KIND_RANK.get(kind, 4)
        rank = r if r > rank else rank
    return rank if weak else None


def marked_weak(result, rank):
    """result (a Tensor, a tracer, or a list of them) with those whose kind is above `rank`
    marked weakly typed (never a bool)."""
    for t in result if type(result) is list else (result,):
        if type(t) is Tensor and not hasattr(t._value, "dtype"):  # an impl gave a Python number
            t._value = np.asarray(t._value)
        kind = getattr(getattr(t, "_value", None), "dtype", np.dtype(bool)).kind
        if kind != "b" and _KIND_RANK.get(kind, -1) > rank:
            t._weak = True
    return result


def _weak_adopted(positions, args):
    """args with each weakly typed tensor among `positions` cast to the dtype a Python number
    of its kind would give beside the typed ones (weak float64 with float32 data: float32);
    one whose dtype that leaves alone stays weak (weak float64 with int32 data)."""
    idx = range(len(args)) if positions is True else positions
    strong = [a.dtype for a in (args[i] for i in idx)
              if hasattr(a, "dtype") and not (type(a) is Tensor and a._weak)]
    if not strong:
        return args
    typed = functools.reduce(promote_types, strong)
    from .elementwise import astype  # elementwise imports this module

    args = list(args)
    for i in idx:
        a = args[i]
        if type(a) is Tensor and a._weak:
            target = np.result_type(typed, _STAND_IN[a.dtype.kind])
            if target != a.dtype:
                args[i] = astype(a, dtype=target)
    return args


def alike(a, b):
    """The common case, decided fast: two tensors of one dtype, or a tensor and a Python
    number (weak), need no promotion."""
    ta, tb = type(a), type(b)
    if ta is Tensor:
        return b._value.dtype is a._value.dtype if tb is Tensor else tb in _WEAK
    return tb is Tensor and ta in _WEAK


def promoted(positions, args):
    """args with JAX's promotion of integers with floats applied to those at `positions` (all
    when True): the integer arrays take the float arrays' dtype. Python numbers (no dtype) are
    weak and left to NumPy's rule, which matches JAX's with 64-bit types; so are weakly typed
    tensors (`_weak_adopted`)."""
    if any(type(args[i]) is Tensor and args[i]._weak
           for i in (range(len(args)) if positions is True else positions)):
        args = _weak_adopted(positions, args)
    has_float = has_int = False
    for i in range(len(args)) if positions is True else positions:
        a = args[i]
        if type(a) in (list, tuple):  # [1, 2] beside a float32 tensor is an integer array
            return promoted(positions, lists_as_tensors(args))
        kind = getattr(getattr(a, "dtype", None), "kind", None)  # Python numbers have none
        if kind == "f" or kind == "c":
            has_float = True
        elif kind == "i" or kind == "u":
            has_int = True
    if not (has_float and has_int):  # the common case: one kind, nothing to do
        return args
    chosen = [args[i] for i in (range(len(args)) if positions is True else positions)]
    dtypes = [a.dtype for a in chosen if hasattr(a, "dtype")]
    target = np.result_type(*[d for d in dtypes if d.kind in "fc"])
    if np.result_type(*dtypes) == target:  # NumPy agrees (int64 with float64): no cast
        return args
    from .elementwise import astype  # elementwise imports this module

    args = list(args)
    for i in range(len(args)) if positions is True else positions:
        if getattr(args[i], "dtype", np.dtype("f8")).kind in "iu":
            args[i] = astype(args[i], dtype=target)
    return args


def inexact_dtype(dtype) -> np.dtype:
    """The float dtype JAX computes a float function of `dtype` in: itself when inexact,
    float32 for integers and bools of 32 bits or fewer, float64 for 64-bit integers."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return dtype
    return np.dtype(np.float32 if dtype.itemsize <= 4 else np.float64)


def as_inexact_args(args):
    """args of a float function, with integer and bool arrays cast to the float JAX computes
    it in, when the args combine into an integer type by JAX's promotion, weak operands
    yielding (int32 / 2 and jnp.array(2) / int8 are float32). Python ints alone become the
    default float (reciprocal(3) is 1/3, not NumPy's 0) and a Python bool float32, as JAX's
    strong bool. Once a float or complex is among them, the promotion rules decide."""
    has_array = False
    for a in args:
        t = type(a)
        if t is float or t is complex:
            return args
        dtype = getattr(a._value if t is Tensor else a, "dtype", None)  # no property call
        if dtype is not None:
            if dtype.kind in "fc":
                return args
            has_array = True
    operands = [a for a in args if type(a) in _WEAK or getattr(a, "dtype", None) is not None]
    if not operands:
        return args
    target = inexact_dtype(result_type(*[np.dtype(bool) if type(a) is bool else a
                                         for a in operands]))
    if not has_array:  # Python ints stay weak (as floats); a bool is typed, as in JAX
        return [float(a) if type(a) is int else target.type(a) if type(a) is bool else a
                for a in args]
    from .elementwise import astype  # elementwise imports this module

    out = []
    for a in args:
        if getattr(a, "dtype", None) is not None:
            cast = astype(a, dtype=target)
            cast._weak = type(a) is Tensor and a._weak  # jnp.sqrt(jnp.array(2)) stays weak
            a = cast
        out.append(a)
    return out
