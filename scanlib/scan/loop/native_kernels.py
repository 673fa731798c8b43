"""The few functions the numba kernels call that NumPy-in-numba lacks (or compiles slowly):
max and min over an axis, gathers and scatters at index arrays with NumPy's bounds, a
triangular solve, a linear solve (each also over a stack of matrices, as is cholesky), and
sigmoid in the same arithmetic as ops/elementwise.py's.
Each is compiled by numba on first use and cached beside this file. Imported only by the
kernels that native.py writes (so only when numba is installed).
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")


@_jit
def _rows_extreme(a, largest):
    """max (largest) or min over axis 1 of a [K, R] array, R >= 1; NaN wins, as in NumPy."""
    out = np.empty(a.shape[0], a.dtype)
    for i in range(a.shape[0]):
        m = a[i, 0]
        for j in range(1, a.shape[1]):
            v = a[i, j]
            if (v > m if largest else v < m) or v != v:
                m = v
            if m != m:
                break
        out[i] = m
    return out


@_jit
def _triangular_solve(a, b, lower, unit_diagonal):
    """x with tri(a) @ x = b for a [n, n] (only its lower or upper triangle read, its
    diagonal taken as ones when unit_diagonal) and b [n, k]: substitution, row by row. A
    result that is not finite raises LinAlgError: NumPy's loop then computes it."""
    n, k = b.shape
    x = np.empty((n, k), b.dtype)  # a's dtype too (native_rules checks)
    for step in range(n):
        i = step if lower else n - 1 - step
        for c in range(k):
            s = b[i, c]
            if lower:
                for j in range(i):
                    s -= a[i, j] * x[j, c]
            else:
                for j in range(i + 1, n):
                    s -= a[i, j] * x[j, c]
            if not unit_diagonal and a[i, i] == 0:  # NumPy's loop raises its error
                raise np.linalg.LinAlgError("zero on the diagonal")
            x[i, c] = s if unit_diagonal else s / a[i, i]
    if not np.all(np.isfinite(x)):  # NaN and inf spread as LAPACK's order spreads them
        raise np.linalg.LinAlgError("not finite")
    return x


@_jit
def _row(i, n):
    """Index i into an axis of n, negative counting from its end; IndexError outside."""
    if i < -n or i >= n:
        raise IndexError("index out of range")
    return i + n if i < 0 else i


@_jit
def _take1(x, rows):
    """x[rows] for a 1-d integer array rows."""
    out = np.empty((rows.shape[0],) + x.shape[1:], x.dtype)
    for r in range(rows.shape[0]):
        out[r] = x[_row(rows[r], x.shape[0])]
    return out


@_jit
def _take2(x, rows, cols):
    """x[rows, cols] for 1-d integer arrays of one length."""
    out = np.empty((rows.shape[0],) + x.shape[2:], x.dtype)
    for r in range(rows.shape[0]):
        out[r] = x[_row(rows[r], x.shape[0]), _row(cols[r], x.shape[1])]
    return out


@_jit
def _scatter1(out, g, rows):
    """out[rows] += g, repeated rows adding up (np.add.at)."""
    for r in range(rows.shape[0]):
        out[_row(rows[r], out.shape[0])] += g[r]


@_jit
def _scatter2(out, g, rows, cols):
    """out[rows, cols] += g, repeated pairs adding up (np.add.at)."""
    for r in range(rows.shape[0]):
        out[_row(rows[r], out.shape[0]), _row(cols[r], out.shape[1])] += g[r]


@_jit
def _solve(a, b):
    """x with a @ x = b for a [n, n] and b [n, k]: Gaussian elimination with partial
    pivoting, LAPACK's gesv in plain loops (numba's np.linalg.solve takes seconds to
    compile). Its rounding is not LAPACK's, so where LAPACK may meet an exact zero pivot and
    NumPy raise (a pivot within n * eps of the largest entry, or NaN), or the result is not
    finite, it raises LinAlgError and NumPy's loop runs the step its own way."""
    n, k = b.shape
    m = a.astype(b.dtype)  # a copy, eliminated in place
    x = b.copy()
    tiny = n * np.finfo(m.dtype).eps * np.max(np.abs(m)) if n else 0.0
    for col in range(n):
        p = col
        for r in range(col + 1, n):
            if abs(m[r, col]) > abs(m[p, col]):
                p = r
        if not abs(m[p, col]) > tiny:
            raise np.linalg.LinAlgError("Singular matrix")
        if p != col:
            for j in range(n):
                m[col, j], m[p, j] = m[p, j], m[col, j]
            for j in range(k):
                x[col, j], x[p, j] = x[p, j], x[col, j]
        for r in range(col + 1, n):
            f = m[r, col] / m[col, col]
            for j in range(col, n):
                m[r, j] -= f * m[col, j]
            for j in range(k):
                x[r, j] -= f * x[col, j]
    for col in range(n - 1, -1, -1):
        for j in range(k):
            s = x[col, j]
            for c in range(col + 1, n):
                s -= m[col, c] * x[c, j]
            x[col, j] = s / m[col, col]
    if not np.all(np.isfinite(x)):
        raise np.linalg.LinAlgError("not finite")
    return x


@_jit
def _solve_stack(a, b):
    """_solve of each matrix of a stack: a [B, n, n], b [B, n, k]; a matrix that raises
    LinAlgError raises it for the whole stack (NumPy's loop then runs the step)."""
    x = np.empty(b.shape, b.dtype)
    for i in range(a.shape[0]):
        x[i] = _solve(a[i], b[i])
    return x


@_jit
def _triangular_solve_stack(a, b, lower, unit_diagonal):
    """_triangular_solve of each matrix of a stack: a [B, n, n], b [B, n, k]."""
    x = np.empty(b.shape, b.dtype)
    for i in range(a.shape[0]):
        x[i] = _triangular_solve(a[i], b[i], lower, unit_diagonal)
    return x


@_jit
def _cholesky_stack(a):
    """numba's np.linalg.cholesky (LAPACK's potrf, as NumPy's) of each matrix of a stack
    a [B, n, n], C-contiguous; one not positive definite (or not finite) raises LinAlgError."""
    out = np.empty(a.shape, a.dtype)
    for i in range(a.shape[0]):
        out[i] = np.linalg.cholesky(a[i])
    return out


# The scalar forms, for the loop nests (native_rules._logistic): `one` is typed as x, so that
# float32 work stays float32, as NumPy's does (an untyped 1 would make it float64).
# The `_from` forms take e = exp(-|x|) (and l = log1p(e)) computed once for x and its
# negations (native_rules.Fusion): the same arithmetic.
@_jit
def _sigmoid_from(x, e, one):
    return e / (one + e) if x < 0 else one / (one + e)


@_jit
def _sigmoid1(x, one):
    return _sigmoid_from(x, np.exp(-np.abs(x)), one)


@_jit
def _softplus_from(x, l):
    """max(x, 0) + l by its two sides (0 + l is l): NaN stays NaN, and -inf gives l (0),
    where max(x, 0) written as x * 0 gave NaN."""
    return l if x <= 0 else x + l


@_jit
def _softplus1(x):
    return _softplus_from(x, np.log1p(np.exp(-np.abs(x))))


# float32 first: a ufunc runs the first loop its input casts to safely, and float32 casts to
# float64 (listed the other way, a float32 sigmoid came back float64 and the kernel failed).
@numba.vectorize(["float32(float32)", "float64(float64)"], cache=True)
def _sigmoid(x):
    """1 / (1 + exp(-x)) as e / (1 + e), e = exp(-|x|), for x < 0: ops.sigmoid's form."""
    e = np.exp(-np.abs(x))
    if x < 0:
        return e / (1 + e)
    return 1 / (1 + e)


@numba.vectorize(["float32(float32)", "float64(float64)"], cache=True)
def _softplus(x):
    """max(x, 0) + log1p(exp(-|x|)): ops.softplus_p's form, as _softplus1 (written out: a
    vectorized function that calls a jitted one cannot be cached)."""
    if x <= 0:
        return np.log1p(np.exp(x))
    return x + np.log1p(np.exp(-x))
