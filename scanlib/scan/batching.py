"""Batching rules: how an equation of a scan body runs on all T steps at once, for work that
does not depend on the carry (`x_t @ U`, `x_t + b`). The executor hoists such equations out of
the loop. A primitive without a rule here simply runs per step.

Each rule gets (params, batched flags, per-step input shapes, out shape) and returns a function
of the full inputs (batched ones with a leading T axis), or None when it cannot batch.
Imports backends and ops.
"""

from __future__ import annotations

from .. import backends
from ..ops import elementwise as ew
from ..ops.linalg import einsum_p, matmul_p
from ..ops.structural import (broadcast_to_p, getitem_p, reshape_p, sum_p, max_p,
                              transpose_p, _Slot)

_ELEMENTWISE = {p.name for p in (
    ew.add, ew.sub, ew.mul, ew.div, ew.neg, ew.power, ew.exp, ew.log, ew.log1p, ew.sqrt,
    ew.sin, ew.cos, ew.tanh, ew.sigmoid, ew.sign, ew.absolute, ew.maximum, ew.minimum,
    ew.where, ew.less, ew.less_equal, ew.greater, ew.greater_equal, ew.equal, ew.not_equal,
    ew.logical_not, ew.logical_and, ew.logical_or, ew.isfinite, ew.copy, ew.stop_gradient,
    ew.astype)}


# Elementwise primitives a NumPy/CuPy ufunc computes into a given array (`out=`).
UFUNCS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide",
          "neg": "negative", "pow": "power", "exp": "exp", "log": "log", "log1p": "log1p",
          "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tanh": "tanh", "abs": "absolute",
          "maximum": "maximum", "minimum": "minimum"}


def _aligned(batched, shapes, rank):
    """Batched inputs of a lower per-step rank get 1s after their T axis, so that they
    broadcast against the others step by step, not against the T axis."""
    def fix(args):
        T = next(a.shape[0] for a, b in zip(args, batched) if b)
        return [a.reshape((T,) + (1,) * (rank - len(s)) + tuple(s)) if b and len(s) < rank
                else a for a, b, s in zip(args, batched, shapes)]
    return fix


def _elementwise(prim, params, batched, shapes, out_shape):
    fix = _aligned(batched, shapes, len(out_shape))
    return lambda *args: prim.impl(*fix(args), **params)


def _rows_times(x, y, out=None):
    """x[T, ..., K] @ y[K, N] as one 2-d product over all of x's rows. NumPy runs a stacked
    matmul as one small product per leading index: 1.2-1.7x slower at these sizes, 3x when
    y is a transposed view (the `g @ U.T` of a backward body)."""
    xp = backends.xp_of(x, y)
    K, N = y.shape
    if out is None:
        return xp.matmul(x.reshape(-1, K), y).reshape(x.shape[:-1] + (N,))
    if not out.flags.c_contiguous:  # its 2-d reshape would be a copy, not a view
        return xp.matmul(x, y, out=out)
    xp.matmul(x.reshape(-1, K), y, out=out.reshape(-1, N))
    return out


def _matmul(prim, params, batched, shapes, out_shape):
    bx, by = batched
    if bx and not by and len(shapes[1]) == 2:
        return _rows_times
    if (bx and by and len(shapes[0]) == len(shapes[1])) or (by and not bx and len(shapes[0]) == 2):
        return lambda x, y: x @ y
    return None


def _reshape(prim, params, batched, shapes, out_shape):
    return lambda x: x.reshape((x.shape[0],) + tuple(params["shape"]))


def _transpose(prim, params, batched, shapes, out_shape):
    axes = (0,) + tuple(a + 1 for a in params["axes"])
    return lambda x: x.transpose(axes)


def _broadcast_to(prim, params, batched, shapes, out_shape):
    shape = tuple(params["shape"])
    pad = (1,) * (len(shape) - len(shapes[0]))

    def run(x):
        xp = backends.xp_of(x)
        T = x.shape[0]
        return xp.broadcast_to(x.reshape((T,) + pad + tuple(shapes[0])), (T,) + shape)

    return run


def _reduce(prim, params, batched, shapes, out_shape):
    axis = params["axis"]
    axis = tuple(range(1, len(shapes[0]) + 1)) if axis is None else tuple(a + 1 for a in axis)
    return lambda x: prim.impl(x, axis=axis, keepdims=params["keepdims"])


def _getitem(prim, params, batched, shapes, out_shape):
    index = params["index"]
    if len(batched) > 1 or any(type(i) is _Slot for i in index):
        return None
    index = (slice(None),) + tuple(index)
    return lambda x: x[index]


def _einsum(prim, params, batched, shapes, out_shape):
    ins, out = params["spec"].split("->")
    subs = ins.split(",")
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                  if c not in params["spec"])
    spec = ",".join(letter + s if b else s for s, b in zip(subs, batched)) + "->" + letter + out
    return lambda *xs: backends.xp_of(*xs).einsum(spec, *xs)


_RULES = {
    matmul_p.name: _matmul, reshape_p.name: _reshape, transpose_p.name: _transpose,
    broadcast_to_p.name: _broadcast_to, sum_p.name: _reduce, max_p.name: _reduce,
    getitem_p.name: _getitem, einsum_p.name: _einsum,
}


def batched_into(eqn, batched, shapes):
    """Like batched_impl, but the function writes its result into a given array:
    fn(*args, out=array of the batched result's shape). None where no ufunc or matmul can."""
    name = eqn.prim.name
    if name in UFUNCS and not eqn.params:
        ufunc, fix = UFUNCS[name], _aligned(batched, shapes, len(eqn.outvars[0].shape))

        def run(*args, out):
            return getattr(backends.xp_of(out), ufunc)(*fix(args), out=out)
        return run
    if name == matmul_p.name:
        fn = batched_impl(eqn, batched, shapes)
        if fn is _rows_times:
            return _rows_times
        if fn is not None:
            return lambda x, y, out: backends.xp_of(out).matmul(x, y, out=out)
    return None


def batched_impl(eqn, batched, shapes):
    """A function computing eqn for all steps at once, or None if it has no batching rule."""
    if eqn.prim.multiple_results:
        return None
    out_shape = eqn.outvars[0].shape
    if eqn.prim.name in _ELEMENTWISE:
        return _elementwise(eqn.prim, eqn.params, batched, shapes, out_shape)
    rule = _RULES.get(eqn.prim.name)
    return None if rule is None else rule(eqn.prim, eqn.params, batched, shapes, out_shape)
