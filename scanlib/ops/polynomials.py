"""jax.numpy's 1-d convolutions and polynomial functions: convolve, correlate, poly, polyadd,
polysub, polymul, polyder, polyint, polydiv, polyfit, roots, trim_zeros. Coefficients run from
the highest power down, as in NumPy; everything is a composite of differentiable ops (a
convolution is a gather and a matrix product), except roots and trim_zeros, whose results'
sizes depend on the values and which run eagerly only.

Imports tape and ops' functions, elementwise, assembly, matrices and spectral.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from .assembly import vander
from .functions import (as_tensor, concatenate, full, getitem, matmul, reshape, sqrt, stack,
                        sum, tensor, zeros)
from .spectral import eigvals, lstsq

if TYPE_CHECKING:
    from ..tape.types import ArrayLike

__all__ = ["convolve", "correlate", "poly", "polyadd", "polysub", "polymul", "polyder",
           "polyint", "polydiv", "polyfit", "roots", "trim_zeros"]


def _vector(x, who, name):
    x = as_tensor(x)
    if x.ndim != 1:
        raise ValueError(f"{who}: {name} must be 1-d, got shape {x.shape}")
    return x


def _zeros_like(x, n):
    return zeros((n,), dtype=x.dtype, device=x.device)


def _full_convolution(a, v):
    """c[k] = sum_i a[i] v[k - i], as a gather of v into a (n + m - 1, n) matrix times a."""
    n, m = a.shape[0], v.shape[0]
    padded = concatenate([_zeros_like(v, n - 1), v, _zeros_like(v, n - 1)])
    rows = np.arange(n + m - 1)[:, None] - np.arange(n)[None, :] + (n - 1)
    return matmul(getitem(padded, rows), a)


def _convolve(a, v, mode, who):
    a, v = _vector(a, who, "a"), _vector(v, who, "v")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(f"{who}: inputs cannot be empty (shapes {a.shape} and {v.shape})")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{who}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    n, m = a.shape[0], v.shape[0]
    out = _full_convolution(a, v) if n >= m else _full_convolution(v, a)
    short, long = min(n, m), max(n, m)
    if mode == "same":
        start = (short - 1) // 2
        return getitem(out, slice(start, start + long))
    if mode == "valid":
        return getitem(out, slice(short - 1, long))
    return out


def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Tensor:
    """The discrete convolution of 1-d a and v, as jnp.convolve (mode 'full', 'same' or
    'valid'); differentiable in both.

    >>> sl.numpy.convolve(sl.tensor([1.0, 2.0, 3.0]), sl.tensor([0.0, 1.0, 0.5]))
    """
    return _convolve(a, v, mode, "convolve")


def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Tensor:
    """The cross-correlation of 1-d a and v, c[k] = sum_n a[n + k] conj(v[n]), as
    jnp.correlate (mode 'valid' by default, or 'same', 'full'); differentiable in both.

    >>> sl.numpy.correlate(sl.tensor([1.0, 2.0, 3.0]), sl.tensor([0.0, 1.0, 0.5]), "full")
    """
    v = _vector(v, "correlate", "v")
    flipped = getitem(ew.conj(v) if v.dtype.kind == "c" else v, slice(None, None, -1))
    return _convolve(a, flipped, mode, "correlate")


# --- polynomials -----------------------------------------------------------------------------
def _front_padded(a, n):
    return a if a.shape[0] == n else concatenate([_zeros_like(a, n - a.shape[0]), a])


def _pair(a1, a2, who):
    a1, a2 = _vector(a1, who, "a1"), _vector(a2, who, "a2")
    n = max(a1.shape[0], a2.shape[0])
    return _front_padded(a1, n), _front_padded(a2, n)


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """The sum of two polynomials (coefficients from the highest power), as jnp.polyadd.

    >>> sl.numpy.polyadd(sl.tensor([1.0, 2.0]), sl.tensor([1.0, 0.0, 3.0]))
    """
    return ew.add(*_pair(a1, a2, "polyadd"))


def polysub(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """The difference of two polynomials, as jnp.polysub.

    >>> sl.numpy.polysub(sl.tensor([1.0, 2.0]), sl.tensor([1.0, 0.0, 3.0]))
    """
    return ew.sub(*_pair(a1, a2, "polysub"))


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Tensor:
    """The product of two polynomials, as jnp.polymul (leading zeros kept: the length is
    len(a1) + len(a2) - 1).

    >>> sl.numpy.polymul(sl.tensor([1.0, 2.0]), sl.tensor([1.0, -2.0]))
    """
    if trim_leading_zeros:
        a1, a2 = trim_zeros(a1, "f"), trim_zeros(a2, "f")
    return convolve(a1, a2)


def polyder(p: ArrayLike, m: int = 1) -> Tensor:
    """The m-th derivative of a polynomial, as jnp.polyder.

    >>> sl.numpy.polyder(sl.tensor([1.0, 2.0, 3.0]))
    """
    p = _vector(p, "polyder", "p")
    if int(m) < 0:
        raise ValueError(f"polyder: the order m must be non-negative, got {m}")
    for _ in range(int(m)):
        n = p.shape[0]
        if n <= 1:
            return _zeros_like(p, 0)
        p = ew.mul(getitem(p, slice(0, n - 1)), tensor(np.arange(n - 1, 0, -1).astype(
            p.dtype if p.dtype.kind in "fc" else np.int64)))
    return p


def polyint(p: ArrayLike, m: int = 1, k: ArrayLike | None = None) -> Tensor:
    """The m-th antiderivative of a polynomial, with integration constants k (a scalar or m
    of them, the first for the first integration; 0 by default), as jnp.polyint.

    >>> sl.numpy.polyint(sl.tensor([3.0, 2.0, 1.0]))
    """
    p = _vector(p, "polyint", "p")
    m = int(m)
    if m < 0:
        raise ValueError(f"polyint: the order m must be non-negative, got {m}")
    if p.dtype.kind not in "fc":
        p = ew.astype(p, dtype=np.dtype(np.float64))
    ks = as_tensor(0.0 if k is None else k)
    ks = ew.astype(ks, dtype=p.dtype) if ks.dtype != p.dtype else ks
    if ks.ndim == 0:
        ks = reshape(ew.add(full((m,), 0.0, dtype=p.dtype, device=p.device), ks), (m,))
    if ks.shape != (m,):
        raise ValueError(f"polyint: k must be a scalar or hold m = {m} constants, got shape "
                         f"{ks.shape}")
    for i in range(m):
        n = p.shape[0]
        p = concatenate([ew.div(p, tensor(np.arange(n, 0, -1).astype(p.dtype))),
                         reshape(getitem(ks, i), (1,))])
    return p


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = False) -> tuple:
    """(quotient, remainder) of the polynomial division u / v, as jnp.polydiv: the remainder
    keeps u's length (leading zeros in it are not trimmed).

    >>> sl.numpy.polydiv(sl.tensor([1.0, 0.0, -1.0]), sl.tensor([1.0, 1.0]))
    """
    u, v = _vector(u, "polydiv", "u"), _vector(v, "polydiv", "v")
    if u.dtype.kind not in "fc":
        u = ew.astype(u, dtype=np.dtype(np.float64))
    if trim_leading_zeros:
        v = trim_zeros(v, "f")
    n, m = v.shape[0], u.shape[0]
    scale = ew.div(1.0, getitem(v, 0))
    r, q = u, []
    for k in range(max(m - n + 1, 0)):
        d = ew.mul(scale, getitem(r, k))
        q.append(d)
        r = concatenate([getitem(r, slice(0, k)), ew.sub(getitem(r, slice(k, k + n)),
                                                         ew.mul(d, v)),
                         getitem(r, slice(k + n, None))])
    quotient = stack(q) if q else _zeros_like(r, 1)
    return quotient, r


def poly(seq_of_zeros: ArrayLike) -> Tensor:
    """The coefficients of the monic polynomial with the given roots (or, for a square
    matrix, the roots of its characteristic polynomial: its eigenvalues), as jnp.poly.

    >>> sl.numpy.poly(sl.tensor([1.0, 2.0]))
    """
    z = as_tensor(seq_of_zeros)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0]:
        z = eigvals(z)
    elif z.ndim != 1:
        raise ValueError(f"poly: give a 1-d array of roots or a square matrix, got shape "
                         f"{z.shape}")
    if z.dtype.kind not in "fc":
        z = ew.astype(z, dtype=np.dtype(np.float64))
    a = full((1,), 1, dtype=z.dtype, device=z.device)
    for i in range(z.shape[0]):
        a = concatenate([a, _zeros_like(a, 1)])
        a = ew.sub(a, ew.mul(getitem(z, i), concatenate([_zeros_like(a, 1),
                                                          getitem(a, slice(0, -1))])))
    return a


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None,
            full: bool = False, w: ArrayLike | None = None, cov: bool = False) -> Tensor:
    """The least-squares polynomial of degree deg through the points (x, y) (y may hold
    several columns), coefficients from the highest power, as jnp.polyfit; w weights the
    residuals. Differentiable in x, y and w. full= and cov= are not supported.

    >>> sl.numpy.polyfit(sl.tensor([0.0, 1.0, 2.0]), sl.tensor([1.0, 3.0, 5.0]), 1)
    """
    if full or cov:
        raise NotImplementedError("polyfit: full=True and cov=True are not supported; compute "
                                  "the residuals from polyval(p, x) - y")
    x, y = _vector(x, "polyfit", "x"), as_tensor(y)
    if x.dtype.kind not in "fc":
        x = ew.astype(x, dtype=np.dtype(np.float64))
    a = vander(x, int(deg) + 1)
    if w is not None:
        w = _vector(w, "polyfit", "w")
        a = ew.mul(a, reshape(w, (-1, 1)))
        y = ew.mul(y, reshape(w, (-1,) + (1,) * (y.ndim - 1)))
    scale = sqrt(sum(ew.mul(a, a), axis=0))  # NumPy's column scaling, for conditioning
    c = lstsq(ew.div(a, scale), y, rcond)[0]
    return ew.div(c, reshape(scale, (-1,) + (1,) * (c.ndim - 1)))


def _concrete(x, who):
    if isinstance(x, Tensor) and x._trace is not None:
        raise TypeError(f"{who}: the size of its result depends on the values of its input, "
                        f"which are not known while tracing (under jit, vmap or in a scan "
                        f"body); call it outside the traced function")
    return x


def roots(p: ArrayLike, *, strip_zeros: bool = True) -> Tensor:
    """The roots (complex) of the polynomial with coefficients p, as jnp.roots: the
    eigenvalues of its companion matrix. Eager only: leading zeros are stripped and trailing
    ones become roots at 0, which depends on the values, so it cannot run under jit or vmap.

    >>> sl.numpy.roots(sl.tensor([1.0, -3.0, 2.0]))
    """
    p = _concrete(_vector(p, "roots", "p"), "roots")
    if not strip_zeros:
        raise NotImplementedError("roots(strip_zeros=False) is not supported; leading zeros "
                                  "are always stripped here")
    if p.dtype.kind not in "fc":
        p = ew.astype(p, dtype=np.dtype(np.float64))
    values = p.detach().numpy()
    nonzero = np.flatnonzero(values)
    complex_dtype = np.result_type(p.dtype, np.complex64)
    if nonzero.size == 0:
        return zeros((0,), dtype=complex_dtype, device=p.device)
    p = getitem(p, slice(int(nonzero[0]), int(nonzero[-1]) + 1))
    n_zero = values.shape[0] - 1 - int(nonzero[-1])
    n = p.shape[0] - 1
    found = zeros((0,), dtype=complex_dtype, device=p.device)
    if n > 0:
        top = reshape(ew.div(ew.neg(getitem(p, slice(1, None))), getitem(p, 0)), (1, n))
        below = tensor(np.eye(n - 1, n, dtype=p.dtype))
        found = ew.astype(eigvals(concatenate([top, below])), dtype=complex_dtype)
    return concatenate([found, zeros((n_zero,), dtype=complex_dtype, device=p.device)])


def trim_zeros(filt: ArrayLike, trim: str = "fb") -> Tensor:
    """filt (1-d) without its leading ('f'), trailing ('b') or both ('fb') zeros, as
    jnp.trim_zeros. Eager only: the result's length depends on the values.

    >>> sl.numpy.trim_zeros(sl.tensor([0.0, 1.0, 2.0, 0.0]))
    """
    filt = _concrete(_vector(filt, "trim_zeros", "filt"), "trim_zeros")
    nonzero = np.flatnonzero(filt.detach().numpy())
    if nonzero.size == 0:
        return getitem(filt, slice(0, 0))
    start = int(nonzero[0]) if "f" in trim.lower() else 0
    stop = int(nonzero[-1]) + 1 if "b" in trim.lower() else filt.shape[0]
    return getitem(filt, slice(start, stop))


NUMPY_FUNCTIONS: dict = {}
NUMPY_UFUNCS: dict = {}
