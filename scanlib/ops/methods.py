"""Tensor's operators and methods (`+`, `@`, `.sum()`, `[...]`, ...), attached here because
they call ops, the layer above the tape where Tensor lives; the NumPy protocols come from
numpy_interop.py.

Imports backends, tape and ops.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..tape import Tensor
from . import elementwise as ew
from . import functions as F
from . import arrays, gathers, mathfuncs, matrices, named, reductions, special
from .at import IndexUpdate
from .numpy_interop import array_function, array_ufunc
from .primitive import Primitive, bind


def _swap(fn):
    if type(fn) is Primitive:  # bind it here: one Python call less per operator
        return lambda self, other: bind(fn, other, self)
    return lambda self, other: fn(other, self)


def _method(fn):
    if type(fn) is Primitive:
        return lambda self, *args: bind(fn, self, *args)
    return lambda self, *args: fn(self, *args)


def _to(self, device):
    """Move to 'cpu', 'cuda' or 'cuda:N'; differentiable (the gradient moves back)."""
    device = backends.parse_device(device)
    if device == self.device:
        return self
    if device != "cpu":
        backends.namespace(device)  # a clear error when CuPy or the GPU is missing
    return ew.device_put(self, device=device)


def _astype(self, dtype):
    dtype = np.dtype(dtype)
    if dtype == self.dtype and not self._weak:
        return self
    return ew.astype(self, dtype=dtype)  # of a weakly typed tensor: a typed one, as in JAX


def _format(self, spec):
    """format(t, ".4f") of a 0-d tensor formats its value, as NumPy's 0-d arrays do; an empty
    spec is str(t)."""
    if not spec:
        return str(self)
    if self.ndim != 0:
        raise TypeError(f"format(t, {spec!r}): only a 0-d tensor can be formatted as a number "
                        f"(as in NumPy); this one has shape {self.shape}. Use t.item() for one "
                        "element, or np.array2string(t.numpy()) for an array.")
    return format(self._scalar(f"format(t, {spec!r})").item(), spec)


def _tolist(self):
    """The data as (nested) Python lists of numbers, as ndarray.tolist()."""
    return backends.to_numpy(self._off_the_tape(".tolist()")).tolist()


def _flatten(self, order="C"):
    """t as a 1-d tensor in row-major ('C') or column-major ('F') order, as ndarray.flatten."""
    from .arrays import ravel  # arrays' functions are not among this file's imports

    return ravel(self, order)


def _round(self, ndigits=None):
    """round(t, n): t rounded to n decimals (halves to even), a Tensor, as for JAX arrays."""
    return special.round(self, 0 if ndigits is None else ndigits)


def _divmod(x, y):
    """divmod(x, y): (x // y, x % y) elementwise, as for NumPy arrays."""
    return special.floor_divide(x, y), special.remainder(x, y)


def _clip(self, min=None, max=None):
    """t.clip(min, max): t limited to [min, max], either bound None, as jax.Array.clip."""
    return F.clip(self, min, max)


def _dot(self, other):
    """t.dot(other): numpy.dot's product of t and other, as jax.Array.dot."""
    return matrices.dot(self, other)


def _reduction_method(name, call):
    """t.name(axis=None, **options). After axis NumPy's methods take dtype and out
    positionally (a.var(0, 1) is dtype=1), so here the other options are keyword-only, and a
    positional one is refused instead of meaning something else."""
    def method(self, axis=None, *positional, **options):
        if positional:
            raise TypeError(f"t.{name}(axis, ...): the options after axis are keyword-only "
                            f"(NumPy's second positional argument is dtype); write, e.g., "
                            f"t.{name}({axis!r}, keepdims=True)"
                            + (" or ddof=1" if name in ("var", "std") else ""))
        return call(self, axis, **options)
    method.__name__ = name
    return method


def install():
    T = Tensor
    T.__add__, T.__radd__ = _method(ew.add), _swap(ew.add)
    T.__sub__, T.__rsub__ = _method(ew.sub), _swap(ew.sub)
    T.__mul__, T.__rmul__ = _method(ew.mul), _swap(ew.mul)
    T.__truediv__, T.__rtruediv__ = _method(ew.div), _swap(ew.div)
    T.__floordiv__, T.__rfloordiv__ = _method(special.floor_divide), _swap(special.floor_divide)
    T.__mod__, T.__rmod__ = _method(special.remainder), _swap(special.remainder)
    T.__pow__, T.__rpow__ = _method(ew.power), _swap(ew.power)
    T.__matmul__, T.__rmatmul__ = F.matmul, _swap(F.matmul)
    T.__neg__ = _method(ew.neg)
    T.__pos__ = lambda self: self
    T.__abs__ = _method(ew.absolute)
    T.__lt__, T.__le__ = _method(ew.less), _method(ew.less_equal)
    T.__gt__, T.__ge__ = _method(ew.greater), _method(ew.greater_equal)
    T.__eq__, T.__ne__ = _method(ew.equal), _method(ew.not_equal)
    T.__invert__ = _method(special.invert)  # NumPy's: bits of ints, not of bools
    T.__and__, T.__rand__ = _method(special.bitwise_and), _swap(special.bitwise_and)
    T.__or__, T.__ror__ = _method(special.bitwise_or), _swap(special.bitwise_or)
    T.__xor__, T.__rxor__ = _method(special.bitwise_xor), _swap(special.bitwise_xor)
    T.__lshift__, T.__rlshift__ = _method(mathfuncs.left_shift), _swap(mathfuncs.left_shift)
    T.__rshift__, T.__rrshift__ = _method(mathfuncs.right_shift), _swap(mathfuncs.right_shift)
    T.__getitem__ = F.getitem
    T.at = property(IndexUpdate, doc="JAX's functional indexed updates: x.at[i].set(v), .add(v), "
                    ".multiply(v), .divide(v), .get().")
    T.__array_ufunc__ = array_ufunc
    T.__array_function__ = array_function
    for name, fn in (("sum", F.sum), ("max", F.max), ("min", F.min),
                     ("prod", reductions.prod)):
        setattr(T, name, _reduction_method(name, lambda self, axis, fn=fn, keepdims=False, *,
                                           initial=None, where=None:
                                           fn(self, axis, keepdims, initial=initial,
                                              where=where)))
    for name, fn in (("mean", F.mean), ("any", reductions.any), ("all", reductions.all)):
        setattr(T, name, _reduction_method(name, lambda self, axis, fn=fn, keepdims=False, *,
                                           where=None: fn(self, axis, keepdims, where=where)))
    for name, fn in (("argmax", reductions.argmax), ("argmin", reductions.argmin)):
        setattr(T, name, _reduction_method(name, lambda self, axis, fn=fn, keepdims=False:
                                           fn(self, axis, keepdims)))
    for name, fn in (("var", reductions.var), ("std", reductions.std)):
        setattr(T, name, _reduction_method(name, lambda self, axis, fn=fn, ddof=0,
                                           keepdims=False, *, where=None:
                                           fn(self, axis, ddof, keepdims, where=where)))
    T.reshape = F.reshape
    T.cumsum = lambda self, axis=None, dtype=None: reductions.cumsum(self, axis, dtype)
    T.cumprod = lambda self, axis=None, dtype=None: reductions.cumprod(self, axis, dtype)
    T.squeeze = lambda self, axis=None: F.squeeze(self, axis)
    T.flatten = T.ravel = _flatten
    T.__round__ = _round
    T.__divmod__ = lambda self, other: _divmod(self, other)
    T.__rdivmod__ = lambda self, other: _divmod(other, self)
    T.__format__ = _format
    T.tolist = _tolist
    T.transpose = F.transpose
    T.T = property(lambda self: F.transpose(self))
    T.clip = _clip
    T.dot = _dot
    # jax.Array's methods that call a function of the same name
    T.diagonal = lambda self, offset=0, axis1=0, axis2=1: matrices.diagonal(
        self, offset, axis1, axis2)
    T.trace = lambda self, offset=0, axis1=0, axis2=1: matrices.trace(self, offset, axis1, axis2)
    T.swapaxes = lambda self, axis1, axis2: F.swapaxes(self, axis1, axis2)
    T.mT = property(lambda self: F.swapaxes(self, -1, -2),
                    doc="The matrix transpose of the last two axes, as jax.Array.mT.")
    T.sort = lambda self, axis=-1, **options: gathers.sort(self, axis, **options)
    T.argsort = lambda self, axis=-1, **options: gathers.argsort(self, axis, **options)
    T.searchsorted = lambda self, v, side="left", sorter=None, **options: gathers.searchsorted(
        self, v, side, sorter, **options)
    T.take = lambda self, indices, axis=None, mode=None: gathers.take(self, indices, axis, mode)
    T.repeat = lambda self, repeats, axis=None: arrays.repeat(self, repeats, axis)
    T.round = lambda self, decimals=0: special.round(self, decimals)
    T.copy = lambda self: named.copy(self)
    T.itemsize = property(lambda self: np.dtype(self.dtype).itemsize)
    T.nbytes = property(lambda self: np.dtype(self.dtype).itemsize * self.size)
    T.astype = _astype
    T.to = _to
    T.block_until_ready = lambda self: self  # jax.Array's: NumPy has computed it already
    T.exp, T.log, T.tanh, T.sqrt = (_method(f) for f in (ew.exp, ew.log, ew.tanh, ew.sqrt))
    T.conj = T.conjugate = _method(ew.conj)
    T.real = property(ew.real, doc="The real part (JAX's and NumPy's x.real).")
    T.imag = property(ew.imag, doc="The imaginary part.")
