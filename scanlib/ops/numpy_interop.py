"""The NumPy protocols of Tensor: `__array_ufunc__` and `__array_function__` (NEP 18) make
np.exp(t), np.sum(t), np.concatenate([t, u]) run scanlib's differentiable ops; any other NumPy
function given a Tensor that requires grad, or a traced one, raises instead of silently
dropping the gradient (or computing with a tracer's stand-in values).

Imports backends, tape and ops.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from ..tape import Tensor
from . import (arrays, decompositions, gathers, mathfuncs, matrices, nanfunctions, nn, reductions,
               special, statistics)
from . import elementwise as ew
from . import functions as F

# NumPy ufuncs called on Tensors (np.exp(t), ndarray + t) dispatch to scanlib's ops.
_UFUNCS = {
    np.add: ew.add, np.subtract: ew.sub, np.multiply: ew.mul, np.true_divide: ew.div,
    np.power: ew.power, np.negative: ew.neg, np.exp: ew.exp, np.log: ew.log,
    np.log1p: ew.log1p, np.sqrt: ew.sqrt, np.sin: ew.sin, np.cos: ew.cos, np.tanh: ew.tanh,
    np.absolute: ew.absolute, np.maximum: ew.maximum, np.minimum: ew.minimum,
    np.less: ew.less, np.less_equal: ew.less_equal, np.greater: ew.greater,
    np.greater_equal: ew.greater_equal, np.equal: ew.equal, np.not_equal: ew.not_equal,
    np.matmul: F.matmul, np.sign: ew.sign, np.isfinite: ew.isfinite,
    np.logical_not: ew.logical_not, np.logical_and: ew.logical_and,
    np.logical_or: ew.logical_or, np.conjugate: ew.conj,
}
_EXTENSIONS = (special, nn, arrays, reductions, gathers, matrices, decompositions, statistics,
               nanfunctions, mathfuncs)
for _module in _EXTENSIONS:
    _UFUNCS.update(getattr(_module, "NUMPY_UFUNCS", {}))
# Ufunc keywords that, with these values, change nothing (NumPy passes dtype=None through).
_UFUNC_DEFAULTS = {"dtype": None, "where": True, "casting": "same_kind", "order": "K",
                   "subok": True}


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if method == "at" and inputs and isinstance(inputs[0], Tensor):
        # ufunc.at writes in place and ignores NumPy's read-only flag: refuse it outright
        raise TypeError(f"np.{ufunc.__name__}.at(t, ...) would write into a tensor, and tensors "
                        "are immutable; use the functional update, e.g. t.at[index].add(v) "
                        "or t.at[index].multiply(v), which returns a new tensor.")
    op = _UFUNCS.get(ufunc)
    if method != "__call__" or op is None:
        name = ufunc.__name__ + ("" if method == "__call__" else "." + method)
        return _fallback(f"np.{name}", getattr(ufunc, method), inputs, kwargs,
                         lookup=ufunc.__name__ if method == "__call__" else None,
                         no_grad_needed=ufunc in _NON_DIFFERENTIABLE)
    for key, value in kwargs.items():
        default = _UFUNC_DEFAULTS.get(key, inspect.Parameter.empty)
        if not (value is default or isinstance(value, str) and value == default):
            raise _keyword_error(f"np.{ufunc.__name__}", key)
    return op(*inputs)


# --- other NumPy functions called on Tensors (NEP 18: np.sum(t), np.concatenate([t, u])) ----
# Without __array_function__, np.concatenate & co. would read Tensors through __array__ and
# return plain arrays: the gradient would be dropped without a word. So the functions below
# run scanlib's differentiable ops, and every other one follows _fallback's rules.
def _reduction(f):
    return lambda a, axis=None, keepdims=False: f(a, axis, keepdims)


def _concatenate(arrays, axis=0):
    if axis is None:  # NumPy flattens the arrays first
        arrays, axis = [F.reshape(a, -1) for a in arrays], 0
    return F.concatenate(arrays, axis)


def _where(condition, x=None, y=None):
    if x is None and y is None:
        return np.nonzero(condition)  # indices, not values: np.nonzero's rules apply
    if x is None or y is None:
        raise ValueError("np.where: give both x and y, or neither")
    return F.where(condition, x, y)


def _clip(a, a_min=None, a_max=None, min=None, max=None):
    return F.clip(a, a_min if min is None else min, a_max if max is None else max)


def _einsum(*operands, optimize=False):  # optimize only picks an order; scanlib has its own
    if not operands or not isinstance(operands[0], str):
        raise TypeError("np.einsum on Tensors takes the subscripts string first, as in "
                        "np.einsum('ij,jk->ik', a, b); the interleaved form is not supported")
    return F.einsum(*operands)


def _dot(a, b):
    a, b = F.as_tensor(a), F.as_tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return ew.mul(a, b)
    if a.ndim > 2 or b.ndim > 2:
        raise TypeError(f"np.dot of tensors with shapes {a.shape} and {b.shape}: np.dot's rule "
                        "for more than 2 axes is not in scanlib; use scanlib.matmul (np.matmul's "
                        "rule) or scanlib.einsum")
    return F.matmul(a, b)  # the same as np.dot for 1-d and 2-d operands


# Each function takes NumPy's parameter names; NumPy's other parameters are refused unless
# given their default value (see _call_table).
_FUNCTIONS = {
    np.sum: _reduction(F.sum), np.mean: _reduction(F.mean),
    np.max: _reduction(F.max), np.amax: _reduction(F.max),
    np.min: _reduction(F.min), np.amin: _reduction(F.min),
    np.transpose: lambda a, axes=None: F.transpose(a, axes),
    np.reshape: lambda a, shape=None, newshape=None: F.reshape(
        a, newshape if shape is None else shape),  # NumPy < 2.1 calls it newshape
    np.ravel: lambda a: F.reshape(a, -1),
    np.concatenate: _concatenate,
    np.stack: lambda arrays, axis=0: F.stack(arrays, axis),
    np.where: _where,
    np.clip: _clip,
    np.dot: _dot,
    np.vdot: lambda a, b: F.vdot(a, b),
    np.einsum: _einsum,
    np.swapaxes: lambda a, axis1, axis2: F.swapaxes(a, axis1, axis2),
    np.expand_dims: lambda a, axis: F.expand_dims(a, axis),
    np.squeeze: lambda a, axis=None: F.squeeze(a, axis),
    np.broadcast_to: lambda array, shape: F.broadcast_to(array, shape),
    np.zeros_like: lambda a, dtype=None: F.zeros_like(a, dtype),
    np.ones_like: lambda a, dtype=None: F.ones_like(a, dtype),
    np.real: lambda val: F.real(val), np.imag: lambda val: F.imag(val),
    np.angle: lambda z, deg=False: F.angle(z) if not deg else ew.mul(F.angle(z), 180 / np.pi),
}
for _module in _EXTENSIONS:
    _FUNCTIONS.update(getattr(_module, "NUMPY_FUNCTIONS", {}))

# Functions whose results carry no gradient (bools, indices, text), so they run on NumPy even
# when a tensor requires grad: np.allclose(t, want) drops nothing. They still refuse traced
# tensors, whose values are stand-ins. (np.testing's asserts, np.asarray, np.array and any
# list of tensors are not dispatched at all: NumPy reads them through Tensor.__array__, which
# refuses a tensor that requires grad.)
_NON_DIFFERENTIABLE = {getattr(np, name) for name in (
    "allclose", "isclose", "array_equal", "array_equiv", "argmax", "argmin", "argsort",
    "argwhere", "nonzero", "flatnonzero", "count_nonzero", "searchsorted", "isin", "any", "all",
    "nanargmax", "nanargmin", "iscomplex", "isreal", "array_repr", "array_str", "array2string",
    "shares_memory", "may_share_memory", "isnan", "isinf", "signbit", "logical_xor",
) if hasattr(np, name)}
# Functions that read only shapes and dtypes: they work on any tensor, traced or on the GPU.
_METADATA = {np.shape, np.ndim, np.size, np.result_type, np.iscomplexobj, np.isrealobj}

_KEYWORD_FIXES = {
    "out": "scanlib Tensors are immutable, so nothing can be written into one; drop out= and "
           "use the tensor returned (.numpy() if you need an array)",
    "dtype": "cast first instead, e.g. {f}(t.astype('float32'))",
    "where": "mask first instead, e.g. {f}(scanlib.where(mask, t, 0.0))",
    "initial": "combine the initial value with the result yourself, e.g. "
               "scanlib.maximum({f}(t), initial)",
}


# NumPy's signatures of its functions written in C, which NumPy before 2.4 does not expose
# to inspect.signature ("no signature found for builtin"); as NumPy 2.4 declares them.
def _np_concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind"): ...
def _np_where(condition, x=None, y=None, /): ...
def _np_dot(a, b, out=None): ...
def _np_vdot(a, b, /): ...


_C_SIGNATURES = {np.concatenate: _np_concatenate, np.where: _np_where, np.dot: _np_dot,
                 np.vdot: _np_vdot}


@functools.cache
def _signature(f):
    try:
        return inspect.signature(f)
    except ValueError:
        if f not in _C_SIGNATURES:
            raise
        return inspect.signature(_C_SIGNATURES[f])


def _keyword_error(f, key):
    fix = _KEYWORD_FIXES.get(key, "scanlib has no such option here; call it without "
                                  f"{key}=, or use .detach().numpy() to compute with NumPy")
    return TypeError(f"{f}(t, {key}=...) on a scanlib Tensor: {key}= is not supported; "
                     + fix.format(f=f))


def _call_table(func, op, args, kwargs):
    f = f"np.{func.__name__}"
    params, accepted = _signature(func).parameters, _signature(op).parameters
    try:
        bound = _signature(func).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{f}(): {e}") from None
    for key, value in list(bound.arguments.items()):
        default = params[key].default
        if params[key].kind is inspect.Parameter.VAR_KEYWORD:  # np.clip's ufunc options
            refused = next((k for k in value if k not in accepted), None)
            if refused is not None:
                raise _keyword_error(f, refused)
            continue  # np.pad's **kwargs: passed on by name
        if value is np._NoValue or key not in accepted and (  # _NoValue: "not given"
                value is default or isinstance(value, str) and value == default):
            del bound.arguments[key]  # the same as not passing it
        elif key not in accepted:
            raise _keyword_error(f, key)
    return op(*bound.args, **bound.kwargs)


def _tensors_in(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors_in(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors_in(item)


def _replace_tensors(obj, fn):
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        items = [_replace_tensors(item, fn) for item in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return {k: _replace_tensors(v, fn) for k, v in obj.items()}
    return obj


def _read_only(t):
    value = np.asarray(t.detach())  # Tensor.__array__: GPU tensors raise there, as before
    value = value.view()
    value.flags.writeable = False  # NumPy must not write into a Tensor (out=t, np.copyto(t))
    return value


def _stand_in(t):
    return np.broadcast_to(np.zeros((), t.dtype), t.shape)


def _scanlib_name(name):
    # Read at call time: the modules' __all__ may still be growing while scanlib imports.
    return name if any(name in m.__all__ for m in (F, *_EXTENSIONS)) else None


def _fallback(f, impl, args, kwargs, lookup=None, no_grad_needed=False, metadata=False):
    """NumPy's own result for a function scanlib does not implement, where that drops nothing:
    no tensor in args or kwargs is traced (values unknown) or, unless the result has no
    gradient anyway, requires grad."""
    if metadata:
        return impl(*_replace_tensors(args, _stand_in), **_replace_tensors(kwargs, _stand_in))
    tensors = list(_tensors_in((args, kwargs)))
    alt = _scanlib_name(lookup)
    traced = next((t for t in tensors if t._trace is not None), None)
    if traced is not None:
        use = f"Use scanlib.{alt}" if alt else "Write it with scanlib's ops"
        raise TypeError(
            f"{f}() got a tensor ({traced!r}) traced inside a scan body, jit or make_graph, where "
            "values are not known yet (they are stand-in zeros while tracing), so NumPy cannot "
            f"compute on it. {use}, or compute it outside the body and pass the result in.")
    if not no_grad_needed and any(t.requires_grad for t in tensors):
        use = (f"use scanlib.{alt}, which is differentiable," if alt else
               "scanlib has no equivalent, so write it with scanlib's ops,")
        raise TypeError(
            f"{f}() on a Tensor that requires grad would drop its gradient (NumPy computes on "
            f"plain arrays, off the tape); {use} or call .detach().numpy() to leave the tape on "
            "purpose.")
    return impl(*_replace_tensors(args, _read_only), **_replace_tensors(kwargs, _read_only))


def array_function(self, func, types, args, kwargs):
    """NEP 18: a NumPy function called with a Tensor anywhere in its arguments. Those in
    _FUNCTIONS run scanlib's op (a Tensor back, differentiable); any other runs on NumPy's
    arrays, unless a tensor is traced (its values are stand-ins) or requires grad and the
    result could carry a gradient (not in _NON_DIFFERENTIABLE): then TypeError."""
    op = _FUNCTIONS.get(func)
    if op is not None:
        return _call_table(func, op, args, kwargs)
    module = (func.__module__ or "numpy").replace("numpy", "np", 1)
    return _fallback(f"{module}.{func.__name__}", getattr(func, "_implementation", func), args,
                     kwargs, lookup=func.__name__ if module == "np" else None,
                     no_grad_needed=func in _NON_DIFFERENTIABLE, metadata=func in _METADATA)
