"""associative_scan: an inclusive prefix scan with an associative binary fn over pytrees, as
`jax.lax.associative_scan`, built from scanlib ops and scan (so reverse and forward mode, and
grad of grad, come from their own rules). Two structures compute it: JAX's odd/even
recursion, O(log T) vectorised levels, on a GPU; on NumPy, one sequential scan of fn, which
measured faster on every workload tried (a level is a pass over memory there, a scan step a few
microseconds; bench/NOTES.md).

Linear recurrences as associative scans
---------------------------------------
A diagonal linear recurrence `h_t = a_t * h_{t-1} + b_t` (real or complex, elementwise) is the
composition of affine maps `h -> a_t * h + b_t`. Composing step 1 then step 2 gives
`h -> a2 * (a1 * h + b1) + b2 = (a1 * a2) * h + (a2 * b1 + b2)`, another affine map, and
composition is associative. So with the pair operator

    def affine(e1, e2):          # e1 = (a1, b1) is the earlier step, e2 = (a2, b2) the later
        a1, b1 = e1
        a2, b2 = e2
        return a1 * a2, a2 * b1 + b2

`A, B = associative_scan(affine, (a, b))` gives at every t the map from h_0 (before step 1)
to h_t: `h_t = A_t * h_0 + B_t`. With h_0 = 0, h_t is just B_t; a non-zero h_0 is folded into
the first step beforehand (`b_1 <- a_1 * h_0 + b_1`), which costs nothing per step.
Worked example, T = 3, a = [0.5, 2, 1], b = [1, 1, 3], h_0 = 0:

    step by step: h_1 = 0.5 * 0 + 1 = 1, h_2 = 2 * 1 + 1 = 3, h_3 = 1 * 3 + 3 = 6
    scanned pairs: (0.5, 1), (0.5 * 2, 2 * 1 + 1) = (1, 3), (1 * 1, 1 * 3 + 3) = (1, 6)

so B = [1, 3, 6] = h. The same holds for complex a and b (S5 and LRU use complex diagonal
a_t): only `*` and `+` appear, and both are holomorphic, so gradients follow JAX's complex
convention. `reverse=True` scans from the end (a backward-in-time recurrence
h_t = a_t * h_{t+1} + b_t). Imports backends, pytree, the ops and scan (below scanlib/__init__).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import backends, pytree
from .ops.arrays import moveaxis
from .ops.functions import as_tensor, one_axis
from .ops.elementwise import maximum, minimum
from .ops.reductions import cumprod as np_cumprod
from .ops.reductions import cumsum_p
from .ops.special import logaddexp
from .ops.structural import (concatenate_p, getitem, normalize_axis, reshape_p, split_p,
                             stack_p, unstack_p)
from .scan import scan

__all__ = ["associative_scan"]


def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """An inclusive scan of elems with the associative binary fn, as jax.lax.associative_scan.

    `fn(a, b)` takes two pytrees with the structure of `elems` whose leaves all have the
    scanned axis (of one length, at position `axis`), and combines them elementwise along it
    into one such pytree; it must be associative, `fn(fn(a, b), c) == fn(a, fn(b, c))`, and
    need not be commutative. The result has the structure and shapes of elems, with
    `out[t] = fn(...fn(fn(elems[0], elems[1]), elems[2])..., elems[t])` along `axis`.
    `reverse=True` scans from the end, as JAX defines it: the result is that of the forward
    scan of the reversed elems, reversed again (`out[t]` combines elems[T-1] down to elems[t],
    the accumulated later elements as fn's first argument).

    On CuPy arrays, the work-efficient odd/even structure JAX uses: combine adjacent pairs,
    scan the half recursively, then fix up the even positions; about 2T applications of fn in
    2 log2(T) vectorised calls (an odd length peels its last element off first). On NumPy
    arrays, `scan` with carry = fn(carry, x): T - 1 applications of fn on pieces of length 1
    along `axis`, one compiled loop, whose VJP is the reverse scan. The results agree to
    rounding (the two structures associate differently; so where fn has ties, as max does,
    the gradient may split between the tied elements differently). Both are built from
    scanlib ops and fn, so they are differentiable (reverse and forward mode, to any order)
    and work under jit, vmap and inside scan bodies.

    See this module's docstring for a diagonal linear recurrence h_t = a_t * h_{t-1} + b_t
    written as an associative scan over pairs (a, b).

    >>> import scanlib as sl
    >>> sl.associative_scan(lambda x, y: x + y, sl.tensor([1.0, 2.0, 3.0, 4.0]))
    >>> affine = lambda e1, e2: (e1[0] * e2[0], e2[0] * e1[1] + e2[1])
    >>> a, b = sl.tensor([0.5, 2.0, 1.0]), sl.tensor([1.0, 1.0, 3.0])
    >>> A, h = sl.associative_scan(affine, (a, b))  # h_t = a_t * h_{t-1} + b_t, h_0 = 0
    """
    paths, leaves, treedef = pytree.flatten_with_paths(elems, "elems")
    if not leaves:
        raise ValueError(
            f"associative_scan: elems holds no arrays (structure "
            f"{pytree.structure_str(treedef)}); pass a Tensor, an array or a pytree of them.")
    leaves = [as_tensor(x) for x in leaves]
    axis = _scan_axis(axis, paths, leaves)
    _check_lengths(paths, leaves, axis)
    combine = _combiner(fn, treedef, paths, axis)
    if reverse:
        leaves = [_flip(x, axis) for x in leaves]
    out = STRUCTURES[_structure(leaves)](combine, leaves, axis)
    if reverse:
        out = [_flip(x, axis) for x in out]
    return pytree.unflatten(treedef, out)


# --- checks ---------------------------------------------------------------------------------
def _scan_axis(axis, paths, leaves) -> int:
    """axis as one non-negative int valid for every leaf (a negative axis only where all
    leaves have the same number of dimensions, so it means one position)."""
    ndims = [x.ndim for x in leaves]
    if isinstance(axis, int) and not isinstance(axis, bool) and axis < 0 and len(set(ndims)) > 1:
        raise ValueError(
            f"associative_scan: axis={axis} counts from the end, but the leaves have different "
            f"numbers of dimensions ({_describe(paths, leaves)}), so it would name different "
            "positions; pass the non-negative axis you mean.")
    for path, x in zip(paths, leaves):
        try:
            pos = normalize_axis(axis, x.ndim, "associative_scan: axis")
        except ValueError as e:
            raise ValueError(f"{e} ({path} has shape {x.shape}); every leaf of elems needs the "
                             "scanned axis") from None
        if len(pos) != 1:
            raise TypeError(f"associative_scan: axis must be one int, got {axis!r}")
    return pos[0]


def _check_lengths(paths, leaves, axis):
    n = leaves[0].shape[axis]
    for path, x in zip(paths[1:], leaves[1:]):
        if x.shape[axis] != n:
            raise ValueError(
                f"associative_scan: every leaf of elems must have one length along axis {axis}, "
                f"but {paths[0]} has {n} (shape {leaves[0].shape}) and {path} has "
                f"{x.shape[axis]} (shape {x.shape}).")


def _describe(paths, leaves) -> str:
    return ", ".join(f"{p}: {x.dtype}{list(x.shape)}" for p, x in zip(paths, leaves))


def _combiner(fn, treedef, paths, axis):
    """fn on flat lists of leaves, checked: the structure, dtypes and scanned length of its
    result must be those of its inputs (else concatenating the levels would be wrong)."""

    def combine(a, b):
        out = fn(pytree.unflatten(treedef, a), pytree.unflatten(treedef, b))
        out_paths, got, out_def = pytree.flatten_with_paths(out, "fn(a, b)")
        if out_def != treedef:
            raise TypeError(
                f"associative_scan: fn must return a pytree with the structure of elems, "
                f"{pytree.structure_str(treedef)}, but it returned "
                f"{pytree.structure_str(out_def)}.")
        got = [as_tensor(g) for g in got]
        for path, out_path, x, g in zip(paths, out_paths, a, got):
            if g.dtype != x.dtype or g.ndim != x.ndim or g.shape[axis] != x.shape[axis]:
                raise TypeError(
                    f"associative_scan: fn must combine elementwise along axis {axis} and keep "
                    f"each leaf's dtype, but for {path} of {x.dtype}{list(x.shape)} it returned "
                    f"{out_path} of {g.dtype}{list(g.shape)}. Cast inside fn to keep the dtype.")
        return got

    return combine


# --- which structure -----------------------------------------------------------------------
def _structure(leaves) -> str:
    """"odd-even" on a GPU, where each of its O(log T) levels is a few kernel launches;
    "sequential" on NumPy, where a level is a pass over memory and a sequential scan's step
    costs a few microseconds (bench/NOTES.md: measured on linrec-long, linrec, cumsum)."""
    return "odd-even" if backends.xp_of(*(x._value for x in leaves)) is not np else "sequential"


# --- sequential: scan's compiled loop, carry = fn(carry, x) ---------------------------------
def _sequential(combine, xs, axis):
    """out[0] = x[0], out[t] = fn(out[t-1], x[t]): T - 1 applications of fn as one scan
    (its VJP is the reverse scan). fn sees pieces of length 1 along `axis` (JAX's contract
    has fn combine pieces of any length, so a fn that keeps it works unchanged)."""
    n = xs[0].shape[axis]
    if n < 2:
        return list(xs)
    moved = [moveaxis(x, axis, 0) for x in xs]  # [n, *pre, *post]
    firsts, rests = zip(*[split_p(m, sizes=(1, n - 1), axis=0) for m in moved])
    piece = [m.shape[1:axis + 1] + (1,) + m.shape[axis + 1:] for m in moved]  # pre, 1, post

    def step(carry, x):  # y is the carry before the step: the final carry is read too
        return tuple(combine(list(carry), list(x))), carry

    last, ys = scan(step, tuple(reshape_p(f, shape=s) for f, s in zip(firsts, piece)),
                    tuple(reshape_p(r, shape=(n - 1,) + s) for r, s in zip(rests, piece)))
    out = [concatenate_p(reshape_p(y, shape=(n - 1,) + m.shape[1:]),
                         reshape_p(c, shape=(1,) + m.shape[1:]), axis=0)
           for y, c, m in zip(ys, last, moved)]
    return [moveaxis(o, 0, axis) for o in out]


# --- the levels -----------------------------------------------------------------------------
# Pieces are cut with split and unstack (multi-output views whose VJPs are one concatenate or
# stack), not with strided getitem: a getitem's VJP scatters into a fresh zero array per slice.
def _scan(combine, xs, axis):
    n = xs[0].shape[axis]
    if n < 2:
        return list(xs)
    if n % 2:
        return _scan_odd(combine, xs, axis, n)
    pair_shape = [x.shape[:axis] + (n // 2, 2) + x.shape[axis + 1:] for x in xs]
    evens, odds = zip(*[unstack_p(reshape_p(x, shape=s), axis=axis + 1)
                        for x, s in zip(xs, pair_shape)])
    odd_out = _scan(combine, combine(list(evens), list(odds)), axis)  # out[1], out[3], ...
    even_out = _fix_evens(combine, list(evens), odd_out, axis)  # out[0], out[2], ...
    return [reshape_p(stack_p(e, o, axis=axis + 1), shape=x.shape)
            for e, o, x in zip(even_out, odd_out, xs)]


def _fix_evens(combine, evens, odd_out, axis):
    """out[2i] = fn(out[2i - 1], x[2i]) for i >= 1, and out[0] = x[0]."""
    m = evens[0].shape[axis]
    if m == 1:
        return evens
    firsts, rests = zip(*[split_p(e, sizes=(1, m - 1), axis=axis) for e in evens])
    before = [split_p(o, sizes=(m - 1, 1), axis=axis)[0] for o in odd_out]
    return [concatenate_p(f, r, axis=axis)
            for f, r in zip(firsts, combine(before, list(rests)))]


def _scan_odd(combine, xs, axis, n):
    """An odd length: scan the first n - 1, then out[n-1] = fn(out[n-2], x[n-1])."""
    heads, lasts = zip(*[split_p(x, sizes=(n - 1, 1), axis=axis) for x in xs])
    out = _scan(combine, list(heads), axis)
    prev = [split_p(y, sizes=(n - 2, 1), axis=axis)[1] for y in out]
    ends = combine(prev, list(lasts))
    return [concatenate_p(y, e, axis=axis) for y, e in zip(out, ends)]


STRUCTURES = {"odd-even": _scan, "sequential": _sequential}


def _flip(x, axis):
    return getitem(x, (slice(None),) * axis + (slice(None, None, -1),))


# --- jax.lax's cumulative reductions (scanlib.lax re-exports them) ---------------------------
# lax's signature and meaning: along one axis (0 by default, never flattened), from the end
# when reverse, keeping the operand's dtype (NumPy's cumsum widens small integers).
def _cumulative(who, operand, axis):
    x = as_tensor(operand)
    if x.ndim == 0:
        raise ValueError(f"{who}: the operand is 0-d; a cumulative reduction needs an axis "
                         f"(reshape it to (1,) first)")
    return x, one_axis(axis, x.ndim, who)


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running sums along axis, from the end when reverse, like `jax.lax.cumsum` (the dtype
    is the operand's; scanlib.cumsum is NumPy's, which flattens by default).

    >>> import scanlib as sl
    >>> sl.lax.cumsum(sl.tensor([1.0, 2.0, 3.0]), reverse=True)
    tensor([6., 5., 3.], dtype=float64)
    """
    x, axis = _cumulative("cumsum", operand, axis)
    return cumsum_p(x, axis=axis, reverse=bool(reverse))


def cumprod(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running products along axis, from the end when reverse, like `jax.lax.cumprod`;
    exact gradients with zeros in the operand (nothing divides).

    >>> import scanlib as sl
    >>> sl.lax.cumprod(sl.tensor([1.0, 2.0, 3.0]), reverse=True)
    tensor([6., 6., 3.], dtype=float64)
    """
    x, axis = _cumulative("cumprod", operand, axis)
    if reverse:
        return _flip(np_cumprod(_flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return np_cumprod(x, axis=axis, dtype=x.dtype)


def _by_associative_scan(who, fn, operand, axis, reverse):
    x, axis = _cumulative(who, operand, axis)
    return associative_scan(fn, x, reverse=bool(reverse), axis=axis)


def cummax(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running maxima along axis, like `jax.lax.cummax` (an associative scan of maximum: the
    gradient goes to the maximum so far; NaN propagates).

    >>> import scanlib as sl
    >>> sl.lax.cummax(sl.tensor([1.0, 3.0, 2.0]))
    tensor([1., 3., 3.], dtype=float64)
    """
    return _by_associative_scan("cummax", maximum, operand, axis, reverse)


def cummin(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running minima along axis, like `jax.lax.cummin`.

    >>> import scanlib as sl
    >>> sl.lax.cummin(sl.tensor([[3, 1], [2, 5]]), axis=1)
    tensor([[3, 1],
            [2, 2]])
    """
    return _by_associative_scan("cummin", minimum, operand, axis, reverse)


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """log(cumsum(exp(x))) along axis without overflow, like `jax.lax.cumlogsumexp` (an
    associative scan of logaddexp; -inf entries add nothing and get a zero gradient).

    >>> import scanlib as sl
    >>> sl.lax.cumlogsumexp(sl.tensor([0.0, 0.0]))
    tensor([0.        , 0.69314718], dtype=float64)
    """
    return _by_associative_scan("cumlogsumexp", logaddexp, operand, axis, reverse)
