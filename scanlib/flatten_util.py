"""scanlib.flatten_util: ravel_pytree, as jax.flatten_util's: a pytree of tensors as one 1-d
tensor and the function that rebuilds the tree from such a vector, both differentiable (the
unravel of a traced vector works inside grad, vmap, jit and scan bodies).

Imports ops and pytree.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from . import pytree
from .ops import elementwise as ew
from .ops.functions import as_tensor, concatenate, reshape
from .ops.promotion import promote_types
from .tape import Tensor

__all__ = ["ravel_pytree"]


def ravel_pytree(tree: Any) -> tuple[Tensor, Callable[[Tensor], Any]]:
    """(flat, unravel): the leaves of tree raveled and concatenated into one 1-d tensor, and
    the function that gives back a tree of tree's structure, shapes and dtypes from a vector
    of flat's length and dtype, as jax.flatten_util.ravel_pytree.

    flat's dtype is the leaves' promoted dtype (JAX's promotion, as scanlib's ops: an int32
    leaf beside a float32 one makes float32); unravel casts each part back to its leaf's
    dtype. A tree with no leaves gives an empty float64 vector (JAX: float32).

    >>> flat, unravel = sl.flatten_util.ravel_pytree({'b': sl.zeros(2), 'W': sl.ones((2, 2))})
    >>> flat
    >>> unravel(flat * 2)['W']
    """
    leaves, treedef = pytree.flatten(tree)
    leaves = [as_tensor(x) for x in leaves]
    if not leaves:
        def unravel_empty(flat):
            _check_flat(flat, 0, None)
            return pytree.unflatten(treedef, [])
        return Tensor(np.zeros(0)), unravel_empty
    shapes = [x.shape for x in leaves]
    dtypes = [np.dtype(x.dtype) for x in leaves]
    to_dtype = functools.reduce(promote_types, dtypes)
    sizes = [x.size for x in leaves]
    flat = concatenate([reshape(x if x.dtype == to_dtype else ew.astype(x, dtype=to_dtype), -1)
                        for x in leaves])
    total = int(np.sum(sizes))

    single_dtype = len(set(dtypes)) == 1

    def unravel(flat):
        # As JAX's: leaves of one dtype unravel a vector of any dtype into leaves of its
        # dtype (a complex tangent stays complex); mixed leaves want flat's dtype and are
        # cast back to their own.
        flat = _check_flat(flat, total, None if single_dtype else to_dtype)
        out, start = [], 0
        for shape, size, dtype in zip(shapes, sizes, dtypes):
            part = reshape(flat[start:start + size], shape)
            if not single_dtype and part.dtype != dtype:
                part = ew.astype(part, dtype=dtype)
            out.append(part)
            start += size
        return pytree.unflatten(treedef, out)

    return flat, unravel


def _check_flat(flat, total, dtype):
    flat = as_tensor(flat)
    if flat.shape != (total,):
        raise ValueError(f"ravel_pytree's unravel: expected a vector of shape ({total},), as the "
                         f"flat vector it was made with, got shape {flat.shape}")
    if dtype is not None and np.dtype(flat.dtype) != dtype:
        raise TypeError(f"ravel_pytree's unravel: expected a vector of dtype {dtype} (the "
                        f"leaves' promoted dtype), got {flat.dtype}; cast it with "
                        f".astype('{dtype}') first")
    return flat
