"""Shape rules: a primitive's result shape from its inputs' shapes, without computing it.

An abstract trace (jit's, a scan body's) runs each primitive on stand-in zeros whose values
nothing reads, only to learn the result's shape and dtype. For a large result that is an
eager call's work done for nothing: a jitted LRU's trace spent 115 of its 136 ms in impls on
stand-ins. Where a primitive declares `shape_of` (JAX's abstract evaluation, for shapes), its
stand-in is zeros of that shape, and the dtype comes from the impl run on one-element views
of the inputs: the dtype rules are NumPy's own, whatever the impl does.

A rule returns None (or raises) where it does not take the inputs; the impl then runs and
raises its own error, or gives the result. Imports NumPy only.
"""

from __future__ import annotations

import math

import numpy as np

MIN_SIZE = 1024  # elements; on a smaller input the impl costs about what the rule does


def _shape(x):
    return getattr(x, "shape", ())  # a Python number: ()


def elementwise(*values, **params):
    """NumPy broadcasting of every input."""
    return np.broadcast_shapes(*(_shape(v) for v in values))


def power(x, y):
    """Broadcasting, except for integer arrays to integer arrays' powers: NumPy raises on a
    negative exponent anywhere, which one element does not show (a Python number exponent
    is the same everywhere: its first element does)."""
    if _kind(x) in "iub" and _kind(y) in "iu":
        return None
    return elementwise(x, y)


def _kind(x):
    dtype = getattr(x, "dtype", None)
    return "" if dtype is None else dtype.kind


def matmul(x, y):
    """x @ y with both operands of two or more axes (the public matmul promotes vectors)."""
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        return None
    return np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])


def einsum(*xs, spec):
    """An explicit spec ('ij,jk->ik', as parse_einsum leaves it); an axis of length 1 may
    meet a longer one of the same label, as np.einsum broadcasts it."""
    ins, arrow, out = spec.partition("->")
    subs = ins.split(",")
    if not arrow or "." in spec or len(subs) != len(xs):
        return None
    sizes = {}
    for labels, x in zip(subs, xs):
        if len(labels) != len(_shape(x)):
            return None
        for label, n in zip(labels, x.shape):
            m = sizes.setdefault(label, n)
            if m != n:
                if m != 1 and n != 1:
                    return None
                sizes[label] = max(m, n)
    return tuple(sizes[label] for label in out)


def concatenate(*xs, axis):
    first = _shape(xs[0])
    if not first or any(len(_shape(x)) != len(first) for x in xs):
        return None
    axis = axis + len(first) if axis < 0 else axis
    if not 0 <= axis < len(first):
        return None
    rest = [s[:axis] + s[axis + 1:] for s in map(_shape, xs)]
    if any(r != rest[0] for r in rest):
        return None
    return first[:axis] + (sum(s[axis] for s in map(_shape, xs)),) + first[axis + 1:]


def reduction(x, axis, keepdims):
    """sum, max, min, any, all: axis a sorted tuple of axes, or None for every axis."""
    shape = _shape(x)
    axes = range(len(shape)) if axis is None else [a % len(shape) for a in axis]
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _one_element(x):
    """A view of x's first element with x's axes (x itself when it has none)."""
    ndim = getattr(x, "ndim", 0)
    return x[(slice(0, 1),) * ndim] if ndim else x


def stand_in(prim, values, params, zeros):
    """Zeros shaped and typed as prim's result on `values` (zeros(shape, dtype) makes them),
    or None where the impl must run: no rule, no large input, an empty one, or inputs the
    rule does not take."""
    large = False
    for v in values:
        size = getattr(v, "size", 1)  # a Python number: 1
        if size == 0:
            return None
        large = large or size >= MIN_SIZE
    if not large:
        return None
    try:
        shape = prim.shape_of(*values, **params)
    except Exception:  # the impl says what is wrong
        return None
    if shape is None or math.prod(shape) == 0:
        return None
    try:
        probe = prim.impl(*map(_one_element, values), **params)
    except Exception:  # the impl raises it again, or computes where one element could not
        return None
    dtype = getattr(probe, "dtype", None)
    return None if dtype is None else zeros(tuple(shape), dtype)
