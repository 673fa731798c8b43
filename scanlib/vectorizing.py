"""jax.numpy's functions that map a Python function over an array, written with vmap as
JAX's are: vectorize (with signature=), apply_along_axis, apply_over_axes, fromfunction and
piecewise. Each traces the function once and batches it; nothing loops in Python over the
elements.

Imports ops, vmap and branching.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import builtins
import functools
import re

import numpy as np

from .branching import switch
from .ops import elementwise as ew
from .ops.arrays import moveaxis
from .ops.functions import (arange, as_tensor, broadcast_to, concatenate, expand_dims,
                            zeros)
from .ops.reductions import argmax, cumsum
from .vmap import vmap

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from .tape.types import ArrayLike, DTypeLike

__all__ = ["vectorize", "apply_along_axis", "apply_over_axes", "fromfunction", "piecewise"]

_DIMS = r"\((?:\w+(?:,\s*\w+)*)?\)"
_SIGNATURE = re.compile(rf"^\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*->\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*$")


def _parse_signature(signature):
    if not _SIGNATURE.match(signature):
        raise ValueError(f"vectorize: signature {signature!r} is not a gufunc signature such "
                         "as '(n),(n)->()'")
    ins, outs = signature.split("->")

    def groups(s):
        return [tuple(d.strip() for d in g.split(",") if d.strip())
                for g in re.findall(r"\(([^)]*)\)", s)]
    return groups(ins), groups(outs)


def vectorize(pyfunc: Callable[..., Any], *, excluded: Iterable[int | str] = frozenset(),
              signature: str | None = None) -> Callable[..., Any]:
    """pyfunc mapped over the leading (loop) axes of its arguments, broadcast together, as
    jnp.vectorize: with vmap, so pyfunc sees one element (or, with a gufunc signature such as
    '(n),(n)->()', one core block) and is traced once. Arguments named in excluded (positions
    or keyword names) are passed as they are.

    >>> sl.numpy.vectorize(lambda a, b: a * b + 1)(sl.tensor([1.0, 2.0]), 3.0)
    """
    excluded = set(excluded)
    cores = _parse_signature(signature) if signature is not None else None

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        fixed_kw = {k: v for k, v in kwargs.items() if k in excluded}
        mapped_kw = [k for k in kwargs if k not in excluded]
        names = list(range(len(args))) + mapped_kw
        values = list(args) + [kwargs[k] for k in mapped_kw]
        mapped = [i for i, n in enumerate(names) if n not in excluded]
        ins = cores[0] if cores else [()] * len(mapped)
        if cores and len(ins) != len(mapped):
            raise TypeError(f"vectorize: the signature {signature!r} has {len(ins)} inputs, "
                            f"but {len(mapped)} arguments are mapped")
        tensors = [as_tensor(values[i]) for i in mapped]
        for t, core, i in zip(tensors, ins, mapped):
            if t.ndim < len(core):
                raise ValueError(f"vectorize: argument {names[i]} has shape {t.shape}, fewer "
                                 f"axes than its core dimensions {core} in {signature!r}")
        loops = [t.shape[:t.ndim - len(c)] for t, c in zip(tensors, ins)]
        loop = np.broadcast_shapes(*loops) if loops else ()
        tensors = [broadcast_to(t, loop + t.shape[t.ndim - len(c):]) for t, c in
                   zip(tensors, ins)]

        def call(*mapped_values):
            full = list(values)
            for i, v in zip(mapped, mapped_values):
                full[i] = v
            pos = full[:len(args)]
            kw = {k: full[len(args) + j] for j, k in enumerate(mapped_kw)}
            return pyfunc(*pos, **kw, **fixed_kw)

        f = call if cores is None else _checked_outputs(call, cores[1], signature)
        for _ in loop:
            f = vmap(f)
        return f(*tensors)
    return wrapped


def _checked_outputs(call, outs, signature):
    """call, checking that its outputs have the core dimensions the signature gives them."""
    def checked(*args):
        out = call(*args)
        got = out if isinstance(out, tuple) else (out,)
        if len(got) != len(outs) or builtins.any(
                as_tensor(o).ndim != len(core) for o, core in zip(got, outs)):
            shapes = [tuple(as_tensor(o).shape) for o in got]
            raise ValueError(f"vectorize: the function returned shapes {shapes} for one core "
                             f"block, which do not match the outputs of {signature!r}")
        return out
    return checked


def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: ArrayLike, *args: Any,
                     **kwargs: Any) -> Any:
    """func1d applied to the 1-d slices of arr along axis, as jnp.apply_along_axis (with vmap:
    func1d is traced once); the axes of its result take axis's place.

    >>> sl.numpy.apply_along_axis(lambda v: v.sum(), 1, sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    arr = as_tensor(arr)
    axis = axis % arr.ndim
    f = functools.partial(lambda v: func1d(v, *args, **kwargs))
    moved = moveaxis(arr, axis, -1)
    for _ in range(arr.ndim - 1):
        f = vmap(f)
    out = as_tensor(f(moved))
    core = out.ndim - (arr.ndim - 1)
    if core == 0:
        return out
    return moveaxis(out, tuple(range(arr.ndim - 1, out.ndim)),
                    tuple(range(axis, axis + core)))


def apply_over_axes(func: Callable[[Any, int], Any], a: ArrayLike, axes: Sequence[int]) -> Any:
    """func(a, axis) applied for each axis in turn, keeping a's number of axes (a result one
    axis short gets it back with size 1), as jnp.apply_over_axes.

    >>> sl.numpy.apply_over_axes(sl.sum, sl.ones((2, 3)), [0, 1])
    """
    a = as_tensor(a)
    for axis in ([axes] if isinstance(axes, int) else axes):
        b = as_tensor(func(a, axis))
        if b.ndim == a.ndim - 1:
            b = expand_dims(b, axis)
        elif b.ndim != a.ndim:
            raise ValueError(f"apply_over_axes: func must keep the number of axes or drop "
                             f"one, but it turned shape {a.shape} into {b.shape} (axis {axis})")
        a = b
    return a


def fromfunction(function: Callable[..., Any], shape: Sequence[int], *,
                 dtype: DTypeLike = float, **kwargs: Any) -> Any:
    """The array whose element at (i, j, ...) is function(i, j, ...), as jnp.fromfunction: the
    function is vmapped over each axis (it sees scalar indices of dtype), so a result that
    does not depend on them is broadcast. Keyword arguments are passed as they are.

    >>> sl.numpy.fromfunction(lambda i, j: i + 2 * j, (2, 3))
    """
    shape = tuple(int(s) for s in shape)
    f = functools.partial(function, **kwargs)
    for i in reversed(range(len(shape))):
        f = vmap(f, in_axes=tuple(0 if j == i else None for j in range(len(shape))))
    return f(*(arange(s, dtype=dtype) for s in shape))


def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any,
              **kw: Any) -> Any:
    """funclist[i](x) where condlist[i] holds (the last true one wins), and the extra last
    function or constant (0 by default) where none does, as jnp.piecewise: each element is a
    switch over the functions, vmapped, and the result keeps x's dtype.

    >>> x = sl.tensor([-2.0, 0.5, 3.0])
    >>> sl.numpy.piecewise(x, [x < 0, x > 1], [lambda v: -v, lambda v: v * 10, 0.0])
    """
    x = as_tensor(x)
    if isinstance(condlist, (list, tuple)):
        conds = [as_tensor(c) for c in condlist]
    else:
        c = as_tensor(condlist)
        conds = list(c) if c.ndim == x.ndim + 1 else [c]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"piecewise: give one function per condition, or one more (for "
                         f"where none holds); got {nf} functions for {nc} conditions")
    stacked = concatenate([expand_dims(broadcast_to(ew.astype(c, dtype=np.dtype(np.bool_)),
                                                    x.shape), 0) for c in conds], 0)
    none = zeros((1,) + x.shape, dtype=np.int64, device=x.device)
    hits = cumsum(concatenate([none, ew.astype(stacked, dtype=np.dtype(np.int64))], 0), axis=0)
    index = argmax(hits, axis=0)
    dtype = x.dtype

    def branch(f):
        if callable(f):
            return lambda v: ew.astype(as_tensor(f(v, *args, **kw)), dtype=dtype)
        return lambda v: ew.astype(as_tensor(f), dtype=dtype)
    branches = [branch(f) for f in funclist]
    return vectorize(lambda i, v: switch(i, branches, v))(index, x)
