"""The numba functions that the PRNG rules of native_rules.py call: Threefry-2x32's draws
(split, bits, unit floats, fold_in, permutations: ops/prng_kernel.py's, loaded from the cache
directory), argmax over rows (categorical's), and fixed_indices' check of gather indices.
Compiled by numba on first use and cached; imported only by the kernels that native.py
writes (so only when numba is installed).
"""

from __future__ import annotations

import numba
import numpy as np

from ...ops import prng_kernel

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")

(_prng_split, _prng_bits32, _prng_bits64, _prng_unit32, _prng_unit64, _prng_fold_in,
 _prng_shuffle) = prng_kernel.functions()


@_jit
def _argmax_rows(a):
    """argmax over axis 1 of a [K, R] array, R >= 1: the first maximum, or the first NaN, as
    NumPy's."""
    out = np.empty(a.shape[0], np.int64)
    for i in range(a.shape[0]):
        best, m = 0, a[i, 0]
        if m == m:
            for j in range(1, a.shape[1]):
                v = a[i, j]
                if v != v:
                    best = j
                    break
                if v > m:
                    best, m = j, v
        out[i] = best
    return out


@_jit
def _fixed_indices(idx, size, mode):
    """fixed_indices of a 1-d array of signed integers: mode 0 checks (IndexError out of
    range; NumPy's loop then raises its own) and counts negative indices from the end, 1
    clips to [0, size - 1], 2 wraps modulo size (the result in [0, size))."""
    out = np.empty_like(idx)
    for k in range(idx.shape[0]):
        v = np.int64(idx[k])
        if mode == 1:
            r = min(max(v, 0), size - 1)
        elif mode == 2:
            r = v % size
            if r < 0:
                r += size
        else:
            if v < -size or v >= size:
                raise IndexError("index out of range")
            r = v + size if v < 0 else v
        out[k] = r
    return out
