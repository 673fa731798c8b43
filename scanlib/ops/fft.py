"""Discrete Fourier transforms as jax.numpy.fft spells them (fft, ifft, rfft, irfft, their 2-d
and n-d forms, hfft, ihfft, fftfreq, rfftfreq, fftshift, ifftshift): three linear primitives
(complex to complex, real to half-spectrum, half-spectrum to real) over given axes, with JAX's
transposes as their VJPs; n/s (cropping and zero padding) and norm are compositions around them.

Complex cotangents follow JAX's convention (no conjugate for a complex-linear map), so fft's
VJP is fft itself, rfft's the real part of an fft of the zero-padded cotangent, and irfft's
the conjugate of a weighted rfft. float32 data gives complex64, as JAX. Imports backends, tape
and the ops below it.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import backends
from . import batching
from . import elementwise as ew
from . import functions as F
from .arrays import pad, roll
from .matrices import constant
from .primitive import Primitive

__all__: list[str] = []  # public as scanlib.numpy.fft


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


def _complex_of(dtype):
    return np.dtype(np.complex64) if np.dtype(dtype) in (np.float32, np.complex64) else \
        np.dtype(np.complex128)


def _real_of(dtype):
    return np.dtype(np.float32) if np.dtype(dtype) == np.complex64 else np.dtype(np.float64)


# --- the primitives (NumPy's "backward" normalization: the inverse divides by n) --------------
def _fft_impl(x, inverse, axes):
    xp = _xp(x)
    if any(x.shape[a] == 0 for a in axes):  # NumPy raises; JAX gives the empty result
        return xp.zeros(x.shape, x.dtype)
    out = (xp.fft.ifftn if inverse else xp.fft.fftn)(x, axes=axes)
    return out.astype(x.dtype, copy=False)


fft_p = Primitive(
    "fft", _fft_impl,
    # the DFT matrix is symmetric: its transpose (JAX's complex convention) is itself
    lambda g, out, x, inverse, axes: (fft_p(g, inverse=inverse, axes=axes),),
    linear=True, batch=batching.elementwise_rule,
    doc="fft(x, inverse, axes): the complex DFT of x over axes (inverse: divided by the "
        "lengths).")


def _rfft_impl(x, axes):
    return _xp(x).fft.rfftn(x, axes=axes).astype(_complex_of(x.dtype), copy=False)


def _rfft_vjp(g, out, x, axes):
    """rfft is the first n // 2 + 1 entries of the fft along the last axis (JAX's transpose of
    this naive form): the real part of the fft of g zero-padded back to n."""
    n = x.shape[axes[-1]]
    widths = [(0, 0)] * g.ndim
    widths[axes[-1]] = (0, n - g.shape[axes[-1]])
    return (ew.real(fft_p(pad(g, widths), inverse=False, axes=axes)),)


rfft_p = Primitive("rfft", _rfft_impl, _rfft_vjp, linear=True, batch=batching.elementwise_rule,
                   doc="rfft(x, axes): the DFT of real x over axes, the last one halved "
                       "(n // 2 + 1 entries).")


def _irfft_impl(x, axes, n):
    xp = _xp(x)
    s = [x.shape[a] for a in axes[:-1]] + [n]
    if 0 in s:  # NumPy raises; JAX gives the empty result
        shape = list(x.shape)
        for a, length in zip(axes, s):
            shape[a] = length
        return xp.zeros(tuple(shape), _real_of(x.dtype))
    return xp.fft.irfftn(x, s=s, axes=axes).astype(_real_of(x.dtype), copy=False)


def _irfft_vjp(g, out, x, axes, n):
    """JAX's transpose: the rfft of g over the output's lengths, divided by their product,
    the entries that stand for two (all but the zero and, for an even n, the n/2 frequency)
    doubled, conjugated (JAX's convention for a real output of a complex input)."""
    size = max(1, math.prod(g.shape[a] for a in axes))
    half = x.shape[axes[-1]]
    weights = np.full(half, 2.0)
    weights[0] = 1.0
    if n % 2 == 0 and half > 1:
        weights[-1] = 1.0
    shape = [1] * g.ndim
    shape[axes[-1]] = half
    dtype = _real_of(x.dtype)
    w = constant(g, lambda xp: xp.asarray((weights / size).reshape(shape), dtype=dtype))
    return (ew.conj(ew.mul(rfft_p(g, axes=axes), w)),)


irfft_p = Primitive("irfft", _irfft_impl, _irfft_vjp, linear=True,
                    batch=batching.elementwise_rule,
                    doc="irfft(x, axes, n): the real inverse DFT of the half spectrum x over "
                        "axes, n long on the last one.")


# --- the public functions --------------------------------------------------------------------
_NORMS = (None, "backward", "ortho", "forward")


def _input(a, who, real=False):
    """a as a float (real=True) or complex tensor, as JAX promotes: integers and bools to
    float64, float32 to complex64."""
    a = F.as_tensor(a)
    kind = np.dtype(a.dtype).kind
    if kind in "biu":
        a = ew.astype(a, dtype=np.dtype(np.float64))
    elif a.dtype == np.float16:
        a = ew.astype(a, dtype=np.dtype(np.float32))
    elif kind not in "fc":
        raise TypeError(f"{who}: {a.dtype} input is not supported")
    if real:
        if np.dtype(a.dtype).kind == "c":
            raise TypeError(f"{who}: takes real input, got {a.dtype} (use fft for complex data)")
        return a
    return a if np.dtype(a.dtype).kind == "c" else ew.astype(a, dtype=_complex_of(a.dtype))


def _axes_and_lengths(a, s, axes, who, inverse_real):
    if s is not None:
        s = tuple(operator.index(x) for x in s)
        if any(x < 0 for x in s):
            raise ValueError(f"{who}: the lengths s must be non-negative, got {s}")
    if axes is None:
        axes = tuple(range(a.ndim)) if s is None else tuple(range(a.ndim - len(s), a.ndim))
    axes = tuple(operator.index(x) for x in axes)
    if any(not -a.ndim <= x < a.ndim for x in axes):
        raise ValueError(f"{who}: axes {axes} out of range for an input of shape {a.shape}")
    axes = tuple(x % a.ndim - a.ndim for x in axes)  # negative: a leading batch axis keeps them
    if len(set(axes)) != len(axes):
        raise ValueError(f"{who}: repeated axes are not supported, got {axes}")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{who}: s {s} and axes {axes} must have one length each")
    if s is None:
        s = [a.shape[x] for x in axes]
        if inverse_real and axes:
            s[-1] = max(0, 2 * (a.shape[axes[-1]] - 1))
    return axes, tuple(s)


def _fitted(a, axes, lengths):
    """a cropped or zero-padded to lengths along axes (as JAX and NumPy read n and s)."""
    index = [slice(None)] * a.ndim
    widths = [(0, 0)] * a.ndim
    for axis, n in zip(axes, lengths):
        if a.shape[axis] > n:
            index[axis] = slice(0, n)
        widths[axis] = (0, max(0, n - a.shape[axis]))
    if any(i != slice(None) for i in index):
        a = F.getitem(a, tuple(index))
    if any(w != (0, 0) for w in widths):
        a = pad(a, widths)
    return a


def _scaled(out, lengths, inverse, norm, who):
    if norm not in _NORMS:
        raise ValueError(f"{who}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    if norm in (None, "backward"):
        return out
    size = float(math.prod(lengths))
    factor = math.sqrt(size) if norm == "ortho" else size
    return ew.mul(out, factor if inverse else 1.0 / factor)


def _core(who, kind, a, s, axes, norm):
    """jax.numpy.fft's one path: lengths and axes, the input cropped or padded, the transform,
    the normalization."""
    a = _input(a, who, real=kind == "rfft")
    axes, lengths = _axes_and_lengths(a, s, axes, who, kind == "irfft")
    if not axes:
        return a
    if kind == "irfft":
        a = _fitted(a, axes, lengths[:-1] + (lengths[-1] // 2 + 1,))
        out = irfft_p(a, axes=axes, n=lengths[-1])
    else:
        a = _fitted(a, axes, lengths)
        out = rfft_p(a, axes=axes) if kind == "rfft" else fft_p(a, inverse=kind == "ifft",
                                                                axes=axes)
    return _scaled(out, lengths, kind in ("ifft", "irfft"), norm, who)


def _one_axis(n, axis):
    return None if n is None else (n,), (axis,)


def fft(a, n=None, axis=-1, norm=None):
    """The DFT of a along axis (cropped or zero-padded to n), as jnp.fft.fft.

    >>> sl.numpy.fft.fft(sl.tensor([1.0, 0.0, 0.0, 0.0]))
    """
    return _core("fft", "fft", a, *_one_axis(n, axis), norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The inverse DFT of a along axis, as jnp.fft.ifft.

    >>> sl.numpy.fft.ifft(sl.tensor([4.0, 0.0, 0.0, 0.0]))
    """
    return _core("ifft", "ifft", a, *_one_axis(n, axis), norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The DFT of real a along axis, its n // 2 + 1 non-negative frequencies, as jnp.fft.rfft.

    >>> sl.numpy.fft.rfft(sl.tensor([1.0, 2.0, 3.0, 4.0]))
    """
    return _core("rfft", "rfft", a, *_one_axis(n, axis), norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The real signal (n long, by default 2 (m - 1)) whose rfft is a, as jnp.fft.irfft.

    >>> sl.numpy.fft.irfft(sl.tensor([10.0, -2.0 + 2.0j, -2.0]))
    """
    return _core("irfft", "irfft", a, *_one_axis(n, axis), norm)


def fftn(a, s=None, axes=None, norm=None):
    """The DFT over axes (every axis by default), as jnp.fft.fftn.

    >>> sl.numpy.fft.fftn(sl.ones((2, 2)))
    """
    return _core("fftn", "fft", a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The inverse DFT over axes, as jnp.fft.ifftn.

    >>> sl.numpy.fft.ifftn(sl.ones((2, 2)))
    """
    return _core("ifftn", "ifft", a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The DFT of real a over axes, the last one halved, as jnp.fft.rfftn.

    >>> sl.numpy.fft.rfftn(sl.ones((2, 4))).shape
    """
    return _core("rfftn", "rfft", a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The real inverse of rfftn, as jnp.fft.irfftn.

    >>> sl.numpy.fft.irfftn(sl.ones((2, 3))).shape
    """
    return _core("irfftn", "irfft", a, s, axes, norm)


def _two(axes, who):
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"{who}: takes exactly 2 axes (as JAX), got {axes}; use {who[:-1]}n "
                         "for others")
    return axes


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The DFT over the last two axes, as jnp.fft.fft2.

    >>> sl.numpy.fft.fft2(sl.ones((2, 2)))
    """
    return _core("fft2", "fft", a, s, _two(axes, "fft2"), norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The inverse DFT over the last two axes, as jnp.fft.ifft2.

    >>> sl.numpy.fft.ifft2(sl.ones((2, 2)))
    """
    return _core("ifft2", "ifft", a, s, _two(axes, "ifft2"), norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """rfftn over the last two axes, as jnp.fft.rfft2.

    >>> sl.numpy.fft.rfft2(sl.ones((2, 4))).shape
    """
    return _core("rfft2", "rfft", a, s, _two(axes, "rfft2"), norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """irfftn over the last two axes, as jnp.fft.irfft2.

    >>> sl.numpy.fft.irfft2(sl.ones((2, 3))).shape
    """
    return _core("irfft2", "irfft", a, s, _two(axes, "irfft2"), norm)


_SWAPPED = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def hfft(a, n=None, axis=-1, norm=None):
    """The real DFT of a signal with Hermitian symmetry given by its first half a, as
    jnp.fft.hfft (irfft of conj(a), scaled the other way).

    >>> sl.numpy.fft.hfft(sl.tensor([1.0, 2.0, 3.0]))
    """
    a = _input(a, "hfft")
    if norm not in _NORMS:
        raise ValueError(f"hfft: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    nn = 2 * (a.shape[axis] - 1) if n is None else n
    return irfft(ew.conj(a), n=nn, axis=axis, norm=_SWAPPED[norm])


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft: the conjugate of rfft, scaled the other way, as jnp.fft.ihfft.

    >>> sl.numpy.fft.ihfft(sl.tensor([1.0, 2.0, 3.0, 4.0]))
    """
    if norm not in _NORMS:
        raise ValueError(f"ihfft: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    return ew.conj(rfft(a, n=n, axis=axis, norm=_SWAPPED[norm]))


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point DFT with spacing d, as jnp.fft.fftfreq (float64 by
    default, scanlib's default float).

    >>> sl.numpy.fft.fftfreq(4)
    """
    return F.tensor(np.fft.fftfreq(operator.index(n), d), dtype=dtype or np.float64,
                    device=device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of rfft's output, as jnp.fft.rfftfreq.

    >>> sl.numpy.fft.rfftfreq(4)
    """
    return F.tensor(np.fft.rfftfreq(operator.index(n), d), dtype=dtype or np.float64,
                    device=device)


def _shift(x, axes, sign):
    x = F.as_tensor(x)
    axes = tuple(range(x.ndim)) if axes is None else \
        (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    if not axes:
        return x
    shifts = [sign * (x.shape[a] // 2) for a in axes]
    return roll(x, shifts, axes)


def fftshift(x, axes=None):
    """x with the zero frequency moved to the centre of axes (all by default), as
    jnp.fft.fftshift.

    >>> sl.numpy.fft.fftshift(sl.numpy.fft.fftfreq(4))
    """
    return _shift(x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of fftshift, as jnp.fft.ifftshift.

    >>> sl.numpy.fft.ifftshift(sl.numpy.fft.fftshift(sl.numpy.fft.fftfreq(5)))
    """
    return _shift(x, axes, -1)
