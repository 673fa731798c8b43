"""Batching rules: how a primitive runs on many steps at once (inputs with a leading axis of
steps), for the loop compiler's work that does not depend on the carry (`x_t @ U`, `x_t + b`)
and, later, for vmap. A primitive names its rule where it is declared (`batch=`); an
elementwise primitive needs none (`elementwise_rule` serves them all).

A rule gets (prim, params, batched flags, per-step input shapes, per-step output shape) and
returns a function of the full inputs (batched ones with the leading axis), or None when it
cannot batch that case. Imports backends only.
"""

from __future__ import annotations

from .. import backends


def aligned(batched, shapes, rank):
    """Batched inputs of a lower per-step rank get 1s after their leading axis, so that they
    broadcast against the others step by step, not against the steps axis."""
    def fix(args):
        T = next(a.shape[0] for a, b in zip(args, batched) if b)
        return [a.reshape((T,) + (1,) * (rank - len(s)) + tuple(s)) if b and len(s) < rank
                else a for a, b, s in zip(args, batched, shapes)]
    return fix


def elementwise_rule(prim, params, batched, shapes, out_shape):
    fix = aligned(batched, shapes, len(out_shape))
    return lambda *args: prim.impl(*fix(args), **params)


def rows_times(x, y, out=None):
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


def matmul_rule(prim, params, batched, shapes, out_shape):
    bx, by = batched
    if bx and not by and len(shapes[1]) == 2:
        return rows_times
    if (bx and by and len(shapes[0]) == len(shapes[1])) or (by and not bx and len(shapes[0]) == 2):
        return lambda x, y: x @ y
    return None


def reshape_rule(prim, params, batched, shapes, out_shape):
    return lambda x: x.reshape((x.shape[0],) + tuple(params["shape"]))


def transpose_rule(prim, params, batched, shapes, out_shape):
    axes = (0,) + tuple(a + 1 for a in params["axes"])
    return lambda x: x.transpose(axes)


def broadcast_to_rule(prim, params, batched, shapes, out_shape):
    shape = tuple(params["shape"])
    pad = (1,) * (len(shape) - len(shapes[0]))

    def run(x):
        xp = backends.xp_of(x)
        T = x.shape[0]
        return xp.broadcast_to(x.reshape((T,) + pad + tuple(shapes[0])), (T,) + shape)

    return run


def reduce_rule(prim, params, batched, shapes, out_shape):
    axis = params["axis"]
    axis = tuple(range(1, len(shapes[0]) + 1)) if axis is None else tuple(a + 1 for a in axis)
    return lambda x: prim.impl(x, axis=axis, keepdims=params["keepdims"])


def einsum_rule(prim, params, batched, shapes, out_shape):
    ins, out = params["spec"].split("->")
    subs = ins.split(",")
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                  if c not in params["spec"])
    spec = ",".join(letter + s if b else s for s, b in zip(subs, batched)) + "->" + letter + out
    return lambda *xs: backends.xp_of(*xs).einsum(spec, *xs)
