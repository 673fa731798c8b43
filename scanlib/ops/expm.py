"""The matrix exponential as a primitive, expm_p: scaling and squaring with the degree-13
Pade approximant (Higham 2005, as scipy.linalg.expm), for a matrix or a stack [..., n, n].
Its VJP is the Frechet derivative read from the exponential of a block matrix,
expm([[A^T, G], [0, A^T]])[:n, n:], itself an expm_p: so every order differentiates. Public as
scanlib.scipy.linalg.expm.

Imports backends and ops (primitive, batching, elementwise, functions, structural).
"""

from __future__ import annotations

import numpy as np

from .. import backends
from . import batching
from . import functions as F
from .primitive import Primitive
from .structural import transpose_p

__all__: list[str] = []  # public as scanlib.scipy.linalg

_THETA_13 = 5.371920351148152
_B13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
        129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
        40840800.0, 960960.0, 16380.0, 182.0, 1.0)


def _expm_impl(a):
    xp = backends.xp_of(a)
    dtype = a.dtype
    a = xp.asarray(a, dtype=np.float64)
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return a.astype(dtype, copy=True)
    norm1 = xp.abs(a).sum(axis=-2).max(axis=-1)  # the 1-norm of each matrix
    finite = xp.isfinite(norm1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.where(finite & (norm1 > _THETA_13),
                     xp.ceil(xp.log2(xp.where(finite, norm1, 1.0) / _THETA_13)), 0.0)
    a = a / (2.0 ** s)[..., None, None]
    eye = xp.broadcast_to(xp.eye(n), a.shape)
    b = _B13
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a2 @ a4
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
             + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    with np.errstate(all="ignore"):
        try:
            r = xp.linalg.solve(v - u, v + u)
        except np.linalg.LinAlgError:  # only for inputs that are inf or nan
            r = xp.full(a.shape, xp.nan)
        for k in range(int(s.max()) if s.size else 0):
            r = xp.where((k < s)[..., None, None], r @ r, r)
    r = xp.where(finite[..., None, None], r, xp.nan)
    return r.astype(dtype, copy=False)


def _mT(x):
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return transpose_p(x, axes=axes)


def _expm_vjp(g, out, a):
    """A's cotangent: the Frechet derivative of expm at A^T in the direction g, the top-right
    block of expm([[A^T, g], [0, A^T]])."""
    n = a.shape[-1]
    at = _mT(a)
    zeros = F.zeros_like(at)
    block = F.concatenate([F.concatenate([at, g], axis=-1),
                           F.concatenate([zeros, at], axis=-1)], axis=-2)
    return (expm_p(block)[..., :n, n:],)


expm_p = Primitive("expm", _expm_impl, _expm_vjp, batch=batching.elementwise_rule,
                   doc="expm(a): the matrix exponential of a [..., n, n].")
