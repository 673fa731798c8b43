"""jax.lax's windowed operations: conv_general_dilated (and conv, conv_with_general_padding,
conv_transpose, conv_dimension_numbers) and reduce_window, composed from lax.pad, strided
slices, stack and einsum, so their gradients, batching and scan bodies come from those ops.
A window of K positions costs K strided slices of the (padded) input. Public only through
scanlib.lax.

Imports backends, tape and the public modules of ops.
"""

from __future__ import annotations

import builtins
import operator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..tape import Tensor
from . import elementwise as ew
from . import functions
from .arrays import flip
from .functions import as_tensor, einsum, getitem, reshape, stack, swapaxes, transpose
from .laxfuncs import cast_to, constant, ints, pad, value_like
from .gathers import take_along_axis
from .reductions import argmax, argmin, prod

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from ..tape.types import ArrayLike, DTypeLike


class ConvDimensionNumbers(NamedTuple):
    """lax.ConvDimensionNumbers: where (batch, feature, *spatial) sit in lhs, (out feature,
    in feature, *spatial) in rhs, and (batch, feature, *spatial) in the output.

    >>> sl.lax.ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2))
    """
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """lax.conv_dimension_numbers: None (NC..., OI..., NC...), three strings such as
    ('NHC', 'HIO', 'NHC'), or a ConvDimensionNumbers, as a ConvDimensionNumbers.

    >>> sl.lax.conv_dimension_numbers((8, 32, 3), (5, 3, 16), ('NHC', 'HIO', 'NHC'))
    """
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"conv: lhs and rhs must have the same rank, got shapes "
                        f"{tuple(lhs_shape)} and {tuple(rhs_shape)}")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    specs = tuple(dimension_numbers)
    if len(specs) != 3 or not builtins.all(isinstance(s, str) for s in specs):
        raise TypeError("conv: dimension_numbers must be None, a ConvDimensionNumbers or "
                        f"three strings such as ('NCH', 'OIH', 'NCH'), got {dimension_numbers!r}")
    lhs, rhs, out = specs
    for spec, pair, shape in ((lhs, "NC", lhs_shape), (rhs, "OI", rhs_shape), (out, "NC", None)):
        if (spec.count(pair[0]) != 1 or spec.count(pair[1]) != 1 or len(set(spec)) != len(spec)
                or (shape is not None and len(spec) != len(shape))):
            raise TypeError(f"conv: dimension_numbers entry {spec!r} must name each of the "
                            f"operand's {len(lhs_shape)} dims once, with '{pair[0]}' and "
                            f"'{pair[1]}'")
    if not set(lhs) - set("NC") == set(rhs) - set("OI") == set(out) - set("NC"):
        raise TypeError(f"conv: the three dimension_numbers must name the same spatial dims, "
                        f"got {specs}")

    def perm(spec, pair):
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs:  # spatial dims in the order the kernel's spec names them
            spatial.sort(key=lambda i: rhs.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return ConvDimensionNumbers(perm(lhs, "NC"), perm(rhs, "OI"), perm(out, "NC"))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: str) -> list[tuple[int, int]]:
    """lax.padtype_to_pads: the (low, high) pairs of 'SAME', 'SAME_LOWER' or 'VALID'.

    >>> sl.lax.padtype_to_pads((10,), (4,), (1,), 'SAME')
    """
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs, "
                         f"got {padding!r}")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        out = -(-n // s)
        total = builtins.max((out - 1) * s + k - n, 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if kind == "SAME" else (big, small))
    return pads


def _pads(padding, in_shape, window, strides, who):
    if isinstance(padding, str):
        return padtype_to_pads(in_shape, window, strides, padding)
    try:
        pairs = [tuple(operator.index(v) for v in p) for p in padding]
    except TypeError:
        pairs = None
    if pairs is None or len(pairs) != len(in_shape) or builtins.any(len(p) != 2 for p in pairs):
        raise ValueError(f"{who}: padding must be 'SAME', 'SAME_LOWER', 'VALID' or one "
                         f"(low, high) pair per spatial dim ({len(in_shape)}), got {padding!r}")
    return pairs


def _windows(x, window, strides, pads, base_dilation, window_dilation, pad_value):
    """The K = prod(window) strided views of x (base-dilated and padded with pad_value), one
    per window position, stacked on a new leading axis: x's window `w` at output `o` is
    stacked[w, o]."""
    config = [(lo, hi, d - 1) for (lo, hi), d in zip(pads, base_dilation)]
    x = pad(x, pad_value, config)
    eff = [(k - 1) * d + 1 for k, d in zip(window, window_dilation)]
    out = [builtins.max((n - e) // s + 1, 0) for n, e, s in zip(x.shape, eff, strides)]
    views = []
    for offsets in np.ndindex(*window):
        starts = [o * d for o, d in zip(offsets, window_dilation)]
        index = tuple(builtins.slice(a, a + (m - 1) * s + 1, s) if m else builtins.slice(0, 0)
                      for a, m, s in zip(starts, out, strides))
        views.append(getitem(x, index))
    return stack(views, 0)


def conv_general_dilated(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: DTypeLike = None,
                         out_sharding: Any = None) -> Tensor:
    """lax.conv_general_dilated: the cross-correlation of lhs (batch, in features, *spatial)
    with the kernel rhs (out features, in features / groups, *spatial), in any layout that
    dimension_numbers names; strides, 'SAME'/'VALID'/(low, high) padding, lhs (transposed
    convolution) and rhs (atrous) dilation, and feature groups (depthwise for groups = in
    features), as JAX's. Differentiable in both operands (to every order).

    >>> x, w = sl.ones((1, 4, 10)), sl.ones((4, 1, 3))           # a depthwise causal conv
    >>> sl.lax.conv_general_dilated(x, w, (1,), [(2, 0)], feature_group_count=4).shape
    """
    x, w = as_tensor(lhs), as_tensor(rhs)
    spec = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nsp = x.ndim - 2
    if nsp < 0:
        raise TypeError(f"conv: lhs needs a batch and a feature dim, got shape {x.shape}")
    x, w = transpose(x, spec.lhs_spec), transpose(w, spec.rhs_spec)  # NC..., OI...
    strides = ints(window_strides, "conv", "window_strides")
    ldil = (1,) * nsp if lhs_dilation is None else ints(lhs_dilation, "conv", "lhs_dilation")
    rdil = (1,) * nsp if rhs_dilation is None else ints(rhs_dilation, "conv", "rhs_dilation")
    if not len(strides) == len(ldil) == len(rdil) == nsp:
        raise TypeError(f"conv: window_strides, lhs_dilation and rhs_dilation need one entry "
                        f"per spatial dim ({nsp})")
    if batch_group_count != 1:
        raise NotImplementedError("conv: batch_group_count > 1 is not supported by scanlib; "
                                  "split the batch and concatenate the outputs instead")
    if isinstance(padding, str) and builtins.any(d != 1 for d in ldil):
        raise ValueError("conv: string padding is not defined with lhs_dilation; give the "
                         "(low, high) pairs")
    n, c, o, g = x.shape[0], x.shape[1], w.shape[0], operator.index(feature_group_count)
    if g < 1 or c % g or o % g or w.shape[1] * g != c:
        raise TypeError(f"conv: lhs has {c} features and rhs {w.shape[1]} in- and {o} "
                        f"out-features; with feature_group_count={g} they need lhs features "
                        f"= rhs in-features * groups and out-features divisible by groups")
    kernel = w.shape[2:]
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, rdil)]
    pads = _pads(padding, x.shape[2:], eff, strides, "conv")
    views = _windows(x, (1, 1) + kernel, (1, 1) + strides, [(0, 0), (0, 0)] + pads,
                     (1, 1) + ldil, (1, 1) + rdil, constant(0, x.dtype, x))
    out_sp = views.shape[3:]
    views = reshape(views, (views.shape[0], n, g, c // g) + out_sp)  # K N G C ...
    kern = reshape(w, (g, o // g, c // g, -1))                        # G O C K
    s = "".join(chr(ord("p") + i) for i in range(nsp))
    y = einsum(f"knGc{s},GOck->nGO{s}", views, kern)
    y = reshape(y, (n, o) + out_sp)
    inverse = tuple(int(i) for i in np.argsort(spec.out_spec))
    return cast_to(transpose(y, inverse), preferred_element_type)


def conv(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int], padding: Any,
         precision: Any = None, preferred_element_type: DTypeLike = None) -> Tensor:
    """lax.conv: conv_general_dilated in the NC.../OI... layout without dilation.

    >>> sl.lax.conv(sl.ones((1, 1, 5)), sl.ones((1, 1, 3)), (1,), 'SAME')
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                              padding: Any, lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: DTypeLike = None) -> Tensor:
    """lax.conv_with_general_padding: conv_general_dilated in the NC.../OI... layout.

    >>> sl.lax.conv_with_general_padding(sl.ones((1, 1, 3)), sl.ones((1, 1, 2)), (1,),
    ...                                  [(1, 1)], (2,), None)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def _transpose_padding(k, s, padding):
    """The (low, high) padding of one dim of conv_transpose, as JAX computes it."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total, low = k + s - 2 + builtins.max(k - s, 0), k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        low, total = pads[0], builtins.sum(pads)
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) "
                         f"pairs, got {padding!r}")
    return low, total - low


def conv_transpose(lhs: ArrayLike, rhs: ArrayLike, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: DTypeLike = None,
                   use_consistent_padding: bool = False) -> Tensor:
    """lax.conv_transpose: the gradient-of-convolution ("deconvolution") as JAX defines it:
    conv_general_dilated with lhs_dilation=strides, the layout ('NHC', 'HIO', 'NHC') (and its
    2-D, 3-D forms) by default, and transpose_kernel=True flipping the kernel's spatial dims
    and swapping its in and out features.

    >>> sl.lax.conv_transpose(sl.ones((1, 3, 1)), sl.ones((2, 1, 1)), (2,), "SAME")[0, :, 0]
    """
    x, w = as_tensor(lhs), as_tensor(rhs)
    if x.ndim != w.ndim or x.ndim < 2:
        raise TypeError(f"conv_transpose: lhs and rhs need one rank >= 2, got {x.shape} and "
                        f"{w.shape}")
    if dimension_numbers is None:
        if x.ndim > 5:
            raise ValueError("conv_transpose: give dimension_numbers for more than 3 spatial "
                             "dims")
        sp = "HWD"[:x.ndim - 2]
        dimension_numbers = (f"N{sp}C", f"{sp}IO", f"N{sp}C")
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    kernel = [w.shape[d] for d in dn.rhs_spec[2:]]
    rdil = (1,) * (x.ndim - 2) if rhs_dilation is None else ints(
        rhs_dilation, "conv_transpose", "rhs_dilation")
    strides = ints(strides, "conv_transpose", "strides")
    if use_consistent_padding or padding in ("SAME", "VALID"):
        per_dim = [padding] * len(strides) if isinstance(padding, str) else [
            tuple(p) for p in padding]
        pads = [_transpose_padding((k - 1) * d + 1, s, p)
                for k, d, s, p in zip(kernel, rdil, strides, per_dim)]
    else:
        pads = padding
    if transpose_kernel:
        w = flip(w, tuple(dn.rhs_spec[2:]))
        w = swapaxes(w, dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(x, w, (1,) * (x.ndim - 2), pads, strides, rdil, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def reduce_window(operand: ArrayLike, init_value: ArrayLike, computation: Callable,
                  window_dimensions: Sequence[int], window_strides: Sequence[int],
                  padding: str | Sequence[tuple[int, int]],
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Tensor:
    """lax.reduce_window: `computation` (lax.add, lax.mul, lax.max or lax.min) over each
    window, the padding filled with init_value, and init_value folded in once (sum and max
    pooling: init 0 with lax.add, -inf with lax.max).

    >>> sl.lax.reduce_window(sl.arange(6.0), -np.inf, sl.lax.max, (2,), (2,), "VALID")
    """
    x = as_tensor(operand)
    reducers = {ew.add: functions.sum, ew.mul: prod, ew.maximum: functions.max,
                ew.minimum: functions.min}
    reducer = next((r for fn, r in reducers.items() if computation is fn), None)
    if reducer is None:
        raise NotImplementedError(
            f"reduce_window: computation {getattr(computation, '__name__', computation)!r} is "
            "not supported; scanlib reduces windows with lax.add, lax.mul, lax.max or lax.min")
    window = ints(window_dimensions, "reduce_window", "window_dimensions")
    strides = ints(window_strides, "reduce_window", "window_strides")
    nd = x.ndim
    bdil = (1,) * nd if base_dilation is None else ints(base_dilation, "reduce_window",
                                                         "base_dilation")
    wdil = (1,) * nd if window_dilation is None else ints(window_dilation, "reduce_window",
                                                           "window_dilation")
    if not len(window) == len(strides) == len(bdil) == len(wdil) == nd:
        raise TypeError(f"reduce_window: window_dimensions, window_strides and dilations need "
                        f"one entry per dim of the operand {x.shape}")
    init = value_like(init_value, x)
    dilated = [(n - 1) * d + 1 if n else 0 for n, d in zip(x.shape, bdil)]
    eff = [(k - 1) * d + 1 for k, d in zip(window, wdil)]
    pads = _pads(padding, dilated, eff, strides, "reduce_window")
    views = _windows(x, window, strides, pads, bdil, wdil, init)
    if computation is ew.maximum or computation is ew.minimum:
        # The first extreme of each window, as JAX's select_and_scatter picks it: a tie's
        # whole cotangent goes to its first element (max pooling), where max's VJP would
        # split it between the tied ones (as jnp.max's does).
        first = (argmax if computation is ew.maximum else argmin)(views, axis=0)
        chosen = take_along_axis(views, reshape(first, (1,) + tuple(first.shape)), axis=0)[0]
        return cast_to(computation(init, chosen), x.dtype)
    return cast_to(computation(init, reducer(views, axis=0)), x.dtype)
