"""matmul, einsum and vdot, with VJPs that are matmuls, einsums and products again.

Imports backends, tape and the ops below it.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backends
from . import batching, shapes
from .elementwise import mul, scale_cotangent
from .primitive import Primitive
from .structural import broadcast_to_p, reshape_p, transpose_p


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _mT(x):
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return transpose_p(x, axes=axes)


def _rows(x):
    """x [..., K] as the 2-d [rows, K] of its rows."""
    return reshape_p(x, shape=(math.prod(x.shape[:-1]), x.shape[-1]))


def _matmul_vjp(g, out, x, y):
    """(g @ y^T, x^T @ g), each summed over the batch axes its operand was broadcast along.
    A matrix against a batch (a layer's weight applied to [B, T, K] rows, or under vmap) gets
    that sum as one product over every row, not a product per batch index summed after,
    which would write B x K x N values; elsewhere the walk sums the batch axes."""
    if y.ndim == 2 and x.ndim > 2:  # sum_b x_b^T g_b = rows(x)^T rows(g)
        return _times_transposed(g, y), matmul_p(_mT(_rows(x)), _rows(g))
    if x.ndim == 2 and y.ndim > 2:  # sum_b g_b y_b^T = [M, (b, N)] @ [(b, N), K]
        nb = g.ndim - 2
        g_rows = reshape_p(transpose_p(g, axes=(nb,) + tuple(range(nb)) + (nb + 1,)),
                           shape=(g.shape[-2], math.prod(g.shape[:-2]) * g.shape[-1]))
        return matmul_p(g_rows, _rows(_mT(y))), matmul_p(_mT(x), g)
    return _times_transposed(g, y), matmul_p(_mT(x), g)


def _times_transposed(g, y):
    """g @ y^T. Where g's last axis has length 1 (a value head's [..., 1] output), an outer
    product: the broadcast product of the same single terms, which NumPy computes in half
    the time of its matmul ([8192, 1] by [1, 64]: 0.32 ms against 0.60)."""
    if g.shape[-1] == 1:
        return mul(g, _mT(y))
    return matmul_p(g, _mT(y))


# Both operands have ndim >= 2 here; the public matmul promotes vectors first.
matmul_p = Primitive(
    "matmul", lambda x, y: x @ y, _matmul_vjp,
    batch=batching.matmul_rule, ufunc="matmul", inline="({0} @ {1})", multilinear=True,
    promote=True, shape_of=shapes.matmul)


def _vdot_vjp(g, out, x, y):
    """d/dx sum(x * y) = g * y, shaped like x. A loss's g is 1: then y itself, not a copy."""
    def one(a, b):
        ct = scale_cotangent(g, b, b.shape)
        return ct if ct.shape == a.shape else reshape_p(ct, shape=a.shape)
    return one(x, y), one(y, x)


def _vdot_batch(prim, params, batched, shapes, out_shape, ops=batching.ARRAYS):
    """sum(x * y) per example as one einsum over the example's axes (its flattened elements
    when x and y have different shapes of one size)."""
    if tuple(shapes[0]) != tuple(shapes[1]):
        size = int(np.prod(shapes[0], dtype=np.int64))
        shapes = [(size,), (size,)]
    sub = _LETTERS[1:len(shapes[0]) + 1]
    spec = ",".join(_LETTERS[0] + sub if b else sub for b in batched) + "->" + _LETTERS[0]

    def run(x, y):
        B = (x if batched[0] else y).shape[0]
        x, y = [ops.reshape(a, ((B,) if b else ()) + tuple(s))
                for a, b, s in zip((x, y), batched, shapes)]
        return ops.bind(einsum_p, x, y, spec=spec)

    return run


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# Real operands of one size; sum(x * y) without materializing x * y (a loss over a [T, ...]
# stack of outputs then needs no second [T, ...] array).
vdot_p = Primitive("vdot", lambda x, y: _xp(x, y).asarray(_xp(x, y).vdot(x, y)), _vdot_vjp,
                   batch=_vdot_batch, multilinear=True, promote=True)


def _einsum_vjp_operand(g, out_sub, others, target_sub, target_shape):
    """The cotangent of one operand: contract g with the other operands onto its indices.

    Indices of the operand that appear nowhere else were summed away in the forward pass;
    einsum cannot create them, so they are restored by broadcasting.
    """
    available = set(out_sub) | {c for sub, _ in others for c in sub}
    kept = "".join(c for c in target_sub if c in available)
    spec = ",".join([out_sub] + [sub for sub, _ in others]) + "->" + kept
    ct = einsum_p(g, *[x for _, x in others], spec=spec)
    if kept != target_sub:
        shape = tuple(target_shape[i] if c in available else 1 for i, c in enumerate(target_sub))
        ct = broadcast_to_p(reshape_p(ct, shape=shape), shape=target_shape)
    return ct


def _einsum_vjp(g, out, *xs, spec):
    ins, out_sub = spec.split("->")
    subs = ins.split(",")
    cts = []
    for i, (sub, x) in enumerate(zip(subs, xs)):
        others = [(s, y) for j, (s, y) in enumerate(zip(subs, xs)) if j != i]
        cts.append(_einsum_vjp_operand(g, out_sub, others, sub, x.shape))
    return cts


# np.einsum's own loops do not call BLAS: a contraction of two float arrays as large as an
# S5 layer's readout ([1024, 32] by [32, 32], complex) took 1.1 ms where BLAS takes 0.2 ms
# (17x for real ones). Large contractions go through `optimize=True`, which hands the pair
# to tensordot, as JAX's einsum hands it to dot_general; the sums are BLAS's, so the bits
# differ from np.einsum's loops by rounding. Small ones stay on the loops: finding a path
# costs tens of microseconds. So do complex ones holding an inf or a NaN: BLAS's complex
# products turn (inf - inf j) into (nan + nan j) where the loops do not.
_BLAS_MIN_WORK = 1 << 16
_ONE_PRECISION = ({np.dtype("float64"), np.dtype("complex128")},
                  {np.dtype("float32"), np.dtype("complex64")})


def _einsum_impl(*xs, spec):
    xp = _xp(*xs)
    if xp is np and _blas_pays(spec, xs) and (
            not any(x.dtype.kind == "c" for x in xs) or all(np.isfinite(x).all() for x in xs)):
        return np.einsum(spec, *xs, optimize=True)
    return xp.einsum(spec, *xs)


def _blas_pays(spec, xs):
    """Whether the einsum is a product of two float arrays of one dtype, or a real and a
    complex one of one precision (an LRU's complex B against real inputs: np.einsum casts the
    real one to complex either way), that tensordot does in one BLAS call (an index both
    contract, none that both keep: no batch index), of at least _BLAS_MIN_WORK
    multiply-adds."""
    if len(xs) != 2 or not ({xs[0].dtype, xs[1].dtype} in _ONE_PRECISION
                            or xs[0].dtype == xs[1].dtype and xs[0].dtype.kind in "fc"):
        return False
    ins, out = spec.split("->")
    subs = ins.split(",")
    sizes = {}
    for sub, x in zip(subs, xs):
        if len(set(sub)) != len(sub):
            return False  # a diagonal
        for index, n in zip(sub, x.shape):
            if sizes.setdefault(index, n) != n:
                return False  # a size-1 axis broadcast: np.einsum's loops handle it
    shared = set(subs[0]) & set(subs[1])
    return (bool(shared - set(out)) and not shared & set(out)
            and math.prod(sizes.values()) >= _BLAS_MIN_WORK)


einsum_p = Primitive("einsum", _einsum_impl, _einsum_vjp,
                     batch=batching.einsum_rule, multilinear=True, promote=True,
                     shape_of=shapes.einsum)


def parse_einsum(spec, n_operands):
    """Validate a subscripts string and make the output explicit ('ij,jk' -> 'ij,jk->ik')."""
    if not isinstance(spec, str):
        raise TypeError(f"einsum subscripts must be a string, got {spec!r}")
    spec = spec.replace(" ", "")
    if "..." in spec:
        raise NotImplementedError("einsum: '...' (ellipsis) subscripts are not supported; "
                                  "name every axis explicitly.")
    ins, _, out_sub = spec.partition("->")
    subs = ins.split(",")
    if len(subs) != n_operands:
        raise ValueError(f"einsum: '{spec}' names {len(subs)} operands but {n_operands} "
                         "were given")
    if "->" not in spec:
        counts = {}
        for c in ins.replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        out_sub = "".join(sorted(c for c, k in counts.items() if k == 1))
    for sub in subs:
        if len(set(sub)) != len(sub):
            raise NotImplementedError(
                f"einsum: repeated index within one operand ('{sub}', a diagonal) is not "
                "supported; take the diagonal with indexing first.")
    return subs, out_sub
