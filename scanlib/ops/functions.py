"""The public functions over tensors: thin wrappers that check arguments and call primitives,
and composites (mean, softmax, logsumexp, softplus, ...) written with them, which need no VJP
rule of their own.

Imports backends, tape and the primitive modules of ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import builtins
import warnings

import numpy as np

from .. import backends
from ..tape import Tensor, is_differentiable_dtype
from . import elementwise as ew
from .linalg import einsum_p, matmul_p, parse_einsum, vdot_p
from .primitive import bind
from .promotion import inexact_dtype
from .structural import (broadcast_to_p, concatenate_p, getitem, max_p, min_p, normalize_axis,
                         reshape_p, stack_p, sum_p, sum_to, transpose_p)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..tape.types import ArrayLike, Axis, Device, DTypeLike, Shape

__all__ = [
    "tensor", "as_tensor", "from_dlpack", "zeros", "ones", "full", "arange", "zeros_like",
    "ones_like",
    "exp", "log", "log1p", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "softplus", "abs",
    "maximum", "minimum", "where", "clip", "sum", "mean", "max", "min", "logsumexp", "softmax",
    "matmul", "einsum", "vdot", "stack", "concatenate", "reshape", "transpose", "swapaxes",
    "expand_dims", "squeeze", "broadcast_to", "stop_gradient", "sum_to", "getitem", "sign",
    "real", "imag", "conj", "conjugate", "angle",
]


# --- creation -----------------------------------------------------------------------------
def tensor(data: ArrayLike, *, dtype: DTypeLike = None, device: Device | None = None,
           requires_grad: bool = False) -> Tensor:
    """Make a Tensor from a list, scalar, NumPy/CuPy array or Tensor.

    >>> x = tensor([1.0, 2.0], requires_grad=True)

    Of a Tensor it makes a new one with no gradient history, also inside a traced scan body
    (where it is a stop_gradient of the traced value, cast and moved as asked), as
    torch.tensor(t) copies without history, and of one that requires grad it warns, as torch
    does. JAX's `jnp.array(x)` is differentiated through instead: in a port, write
    `scanlib.array(x)` (`jnp.array`). A NumPy or
    CuPy array is copied (as torch.tensor and jnp.array copy), so writing into it later cannot
    change what the tape saved; `as_tensor` shares it instead.
    """
    if isinstance(data, Tensor) and data._trace is not None:
        return _traced_tensor(data, dtype, device, requires_grad)
    if isinstance(data, Tensor):
        if data.requires_grad:
            warnings.warn(
                "scanlib.tensor(x) of a tensor that requires grad is a copy without gradient "
                "history (torch.tensor's meaning): no gradient flows back to x through it. "
                "For jnp.array's meaning (differentiated through) write scanlib.array(x); to "
                "say the copy is meant, x.detach() or scanlib.stop_gradient(x).",
                UserWarning, stacklevel=2)
        data = data._value
    if device is None:
        device = backends.device_of(data) if backends.is_array(data) else "cpu"
    source = data
    value = backends.asarray_on(data, backends.parse_device(device), dtype)
    if (backends.is_array(source) and backends.xp_of(source) is backends.xp_of(value)
            and backends.xp_of(value).may_share_memory(value, source)):
        value = value.copy()
    if value.dtype == object:
        raise TypeError(f"tensor(): cannot make a numeric array from {type(data).__name__} "
                        "(ragged lists or non-numeric items?)")
    if requires_grad and not is_differentiable_dtype(value.dtype):
        raise TypeError(
            f"tensor(): only floating-point tensors can require grad, but this one is "
            f"{value.dtype}. Pass dtype='float64' (or float32) to make it differentiable.")
    return Tensor(value, bool(requires_grad))


def _holds_tensor(x):
    return any(isinstance(e, Tensor) or (isinstance(e, (list, tuple)) and _holds_tensor(e))
               for e in x)


def _traced_tensor(x, dtype, device, requires_grad):
    out = ew.stop_gradient(x)
    if dtype is not None and np.dtype(dtype) != out.dtype:
        out = ew.astype(out, dtype=np.dtype(dtype))
    if device is not None and backends.parse_device(device) != x.device:
        out = ew.device_put(out, device=backends.parse_device(device))
    if requires_grad:  # a new leaf of the tape, as in the loop
        if not is_differentiable_dtype(out.dtype):
            raise TypeError(f"tensor(): only floating-point tensors can require grad, but "
                            f"this one is {out.dtype}.")
        out = Tensor(out._value, True, _trace=out._trace, _var=out._var)
    return out


def as_tensor(x: ArrayLike) -> Tensor:
    """x if it is a Tensor, else a Tensor (no grad) holding x's data on its own device (an
    array is shared, not copied: do not write into it while the tape may still read it)."""
    if type(x) is Tensor:
        return x
    if backends.is_array(x):
        return Tensor(x)
    if isinstance(x, (list, tuple)) and _holds_tensor(x):
        # [t0, t1] stacks differentiably (np.asarray would read the values and drop the
        # gradient without a word)
        return stack_p(*[as_tensor(e) for e in x], axis=0)
    if isinstance(x, (bool, int, float, complex, list, tuple)):
        return Tensor(np.asarray(x))
    raise TypeError(f"expected a Tensor, array or number, got {type(x).__name__}")


def from_dlpack(x: Any, *, copy: bool = False) -> Tensor:
    """A Tensor of the data of any object with `__dlpack__` (a NumPy, CuPy, torch or JAX
    array): NumPy-backed for CPU memory, CuPy-backed for CUDA memory. Like as_tensor, it
    shares the producer's memory (do not write into it while scanlib may read it); pass
    copy=True for memory of its own. The producer refuses to export data that requires grad
    (torch: use t.detach()); the result does not require grad.

    >>> sl.from_dlpack(np.arange(3.0))
    tensor([0., 1., 2.], dtype=float64)
    """
    return Tensor(backends.from_dlpack(x, copy=copy))
real, imag, conj, angle = ew.real, ew.imag, ew.conj, ew.angle
conjugate = conj


def make_array(fn_name, shape, dtype, device, *args):
    device = backends.parse_device(device)
    make = getattr(backends.namespace(device), fn_name)
    with backends.on_device(device):
        value = make(*args, dtype=dtype) if shape is None else make(shape, *args, dtype=dtype)
    return Tensor(value)


def zeros(shape: int | tuple[int, ...], dtype: DTypeLike = np.float64,
          device: Device | None = None) -> Tensor:
    """A Tensor of zeros (float64 unless dtype is given) on device ('cpu' by default)."""
    return make_array("zeros", shape, dtype, device)


def ones(shape: int | tuple[int, ...], dtype: DTypeLike = np.float64,
         device: Device | None = None) -> Tensor:
    """A Tensor of ones (float64 unless dtype is given)."""
    return make_array("ones", shape, dtype, device)


def full(shape: int | tuple[int, ...], fill_value: ArrayLike, dtype: DTypeLike = None,
         device: Device | None = None) -> Tensor:
    """A Tensor filled with fill_value, broadcast to shape, as jnp.full; a tensor fill_value
    keeps its gradient (and its history inside a scan body or under grad)."""
    if not isinstance(fill_value, Tensor):
        return make_array("full", shape, dtype, device, fill_value)
    if device is not None and backends.parse_device(device) != fill_value.device:
        raise ValueError(f"full: fill_value is on {fill_value.device} but device={device!r}; "
                         "move it first with fill_value.to(device)")
    fill = fill_value if dtype is None else ew.astype(fill_value, dtype=np.dtype(dtype))
    return broadcast_to(fill, (shape,) if isinstance(shape, int) else tuple(shape))


def arange(start: float, stop: float | None = None, step: float = 1, dtype: DTypeLike = None,
           device: Device | None = None) -> Tensor:
    """Evenly spaced values in [start, stop), as numpy.arange."""
    args = (start,) if stop is None else (start, stop, step)
    return make_array("arange", None, dtype, device, *args)


def zeros_like(x: ArrayLike, dtype: DTypeLike = None) -> Tensor:
    """Zeros with x's shape, dtype (unless given) and device."""
    x = as_tensor(x)
    return zeros(x.shape, dtype or x.dtype, x.device)


def ones_like(x: ArrayLike, dtype: DTypeLike = None) -> Tensor:
    """Ones with x's shape, dtype (unless given) and device."""
    x = as_tensor(x)
    return ones(x.shape, dtype or x.dtype, x.device)


# --- elementwise ----------------------------------------------------------------------------
exp, log, log1p, sqrt = ew.exp, ew.log, ew.log1p, ew.sqrt
sin, cos, tanh, sigmoid = ew.sin, ew.cos, ew.tanh, ew.sigmoid
abs, sign, maximum, minimum = ew.absolute, ew.sign, ew.maximum, ew.minimum
stop_gradient = ew.stop_gradient  # of one tensor; scanlib.stop_gradient takes a pytree


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tensor:
    """Elementwise `x if condition else y`; the gradient flows only to the chosen side."""
    return bind(ew.where, condition, x, y)


def relu(x: ArrayLike) -> Tensor:
    """max(x, 0); its gradient at 0 is 0, as in JAX and PyTorch. NaN stays NaN (with gradient
    0, as JAX's), so a diverging value is not hidden."""
    if type(x) is Tensor and x.dtype.kind == "f" and not x._weak:
        return bind(ew.relu_p, x)  # one equation, the same values and derivative
    return ew.where(ew.greater(x, 0), x, ew.stop_gradient(ew.maximum(x, 0)))


def as_inexact(x: ArrayLike) -> Tensor:
    """x as a Tensor of an inexact dtype, as JAX's promote_dtypes_inexact: bools and integers
    of up to 32 bits become float32, 64-bit integers float64; floats and complex stay."""
    x = as_tensor(x)
    return ew.astype(x, dtype=inexact_dtype(x.dtype)) if x.dtype.kind in "biu" else x


def softplus(x: ArrayLike) -> Tensor:
    """log(1 + exp(x)), computed without overflow, as jax.nn.softplus.

    x + log1p(exp(-x)) for x > 0, else log1p(exp(x)) (NumPy's logaddexp(x, 0)); its gradient
    is sigmoid(x), so the second derivative at 0 is 1/4 and nothing overflows far out.
    Integers and bools compute in floating point (`as_inexact`).

    >>> sl.softplus(sl.tensor([-1000.0, 0.0, 1000.0]))
    """
    x = as_tensor(x)
    if x.dtype.kind == "c":
        raise TypeError(f"softplus: got complex input ({x.dtype}); it is defined here for real "
                        "numbers only. Apply it to the real part or the magnitude.")
    return bind(ew.softplus_p, as_inexact(x))


def clip(x: ArrayLike, lo: ArrayLike | None = None, hi: ArrayLike | None = None, *,
         min: ArrayLike | None = None, max: ArrayLike | None = None) -> Tensor:
    """Limit x to [lo, hi]; either bound may be None. The bounds may also be given as JAX
    names them, `clip(x, min=lo, max=hi)`.

    >>> sl.clip(sl.tensor([-2.0, 0.5, 2.0]), min=-1.0)
    """
    for kw, name, value in (("min", "lo", min), ("max", "hi", max)):
        if value is not None and (lo if kw == "min" else hi) is not None:
            raise TypeError(f"clip: the {'lower' if kw == 'min' else 'upper'} bound was given "
                            f"twice, as {name} (positionally) and as {kw}=; give it once")
    lo = min if lo is None else lo
    hi = max if hi is None else hi
    if lo is not None:
        x = ew.maximum(x, lo)
    if hi is not None:
        x = ew.minimum(x, hi)
    return x


# --- reductions -----------------------------------------------------------------------------
# where= and initial= mean what they mean in jax.numpy: a masked-out element counts as the
# reduction's identity, and initial is combined with the result. The masked element is
# replaced before anything reads it, so its gradient is 0 even where it is inf or nan.
def where_mask(where: ArrayLike | None, x: Tensor, who: str) -> Tensor | None:
    """A reduction's where= as a bool tensor of x's shape (None when not given)."""
    if where is None:
        return None
    m = as_tensor(where)
    if m.dtype != np.bool_:
        raise TypeError(f"{who}: where= must be a bool array (True for the elements to "
                        f"include), got {m.dtype}; compare first, e.g. where=x > 0")
    if m.shape != x.shape:
        try:
            fits = np.broadcast_shapes(m.shape, x.shape) == x.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"{who}: where= has shape {m.shape}, which does not broadcast to "
                             f"the input's shape {x.shape}")
        m = broadcast_to_p(m, shape=x.shape)
    return m


def masked(x: Tensor, mask: Tensor | None, fill) -> Tensor:
    """x with the elements outside mask replaced by fill (x itself when mask is None)."""
    if mask is None:
        return x
    return ew.where(mask, x, bool(fill) if x.dtype == np.bool_ else fill)


def with_initial(out: Tensor, initial: ArrayLike | None, op, who: str) -> Tensor:
    """op(initial, out) for a reduction's initial= (a scalar, cast to out's dtype)."""
    if initial is None:
        return out
    init = as_tensor(initial)
    if init.ndim:
        raise ValueError(f"{who}: initial must be a scalar, got an array of shape {init.shape}")
    return op(ew.astype(init, dtype=out.dtype) if init.dtype != out.dtype else init, out)


def reduced_size(x: Tensor, axes) -> int:
    return x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))


def keepdims_flag(keepdims: Any, who: str) -> bool:
    """keepdims as a bool. Anything else in its place raises, where bool() would keep the axes
    silently: jax.numpy's reductions take dtype (and out) before keepdims, so a port's
    jnp.sum(x, 0, jnp.float32) would land here. None (JAX's positional out=None) is False."""
    if keepdims is None or isinstance(keepdims, (bool, np.bool_)) or (
            isinstance(keepdims, (int, np.integer)) and keepdims in (0, 1)):
        return bool(keepdims)
    raise TypeError(f"{who}: keepdims must be a bool, got {keepdims!r}. jax.numpy's {who} "
                    f"takes dtype (and out) before keepdims: pass dtype= and keepdims= by "
                    f"keyword.")


def _as_dtype(x, dtype):
    x = as_tensor(x)
    return x if dtype is None or np.dtype(dtype) == x.dtype else ew.astype(x, dtype=dtype)


def sum(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *, dtype: DTypeLike = None,
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """Sum over axis (an int, a tuple, or None for all axes), computed in `dtype` where given.
    As in jnp.sum, the elements where the bool mask `where` is False count as 0 (and get no
    gradient), and `initial` is added.

    >>> sl.sum(sl.tensor([1.0, 2.0, 4.0]), where=sl.tensor([True, False, True]))
    """
    x = _as_dtype(x, dtype)
    keep = keepdims_flag(keepdims, "sum")
    x = masked(x, where_mask(where, x, "sum"), 0)
    out = sum_p(x, axis=normalize_axis(axis, x.ndim), keepdims=keep)
    return with_initial(out, initial, ew.add, "sum")


def mean(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *, dtype: DTypeLike = None,
         where: ArrayLike | None = None) -> Tensor:
    """Mean over axis (an int, a tuple, or None for all axes), computed in `dtype` where given.
    With a bool mask `where`, the mean of the elements where it is True, as jnp.mean (nan
    where none is). Integers are averaged in floating point, in float32 for int32 as JAX does
    (`inexact_dtype`).

    >>> sl.mean(sl.tensor([1.0, 2.0, 4.0]), where=sl.tensor([True, False, True]))
    """
    x = as_inexact(_as_dtype(x, dtype))
    keep = keepdims_flag(keepdims, "mean")
    axes = normalize_axis(axis, x.ndim)
    mask = where_mask(where, x, "mean")
    if mask is None:
        return ew.div(sum_p(x, axis=axes, keepdims=keep), float(reduced_size(x, axes)))
    real = np.empty(0, x.dtype).real.dtype if x.dtype.kind in "fc" else np.dtype(np.float64)
    count = sum_p(ew.astype(mask, dtype=real), axis=axes, keepdims=keep)
    total = sum_p(masked(x, mask, 0), axis=axes, keepdims=keep)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ew.div(total, count)


def _extreme(prim, op, identity, name):
    def public(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *,
               initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
        x = as_tensor(x)
        axes = normalize_axis(axis, x.ndim)
        if where is not None and initial is None:
            raise ValueError(f"{name}: a where= mask needs initial= as well (the value of a "
                             f"slice where nothing is selected): {name} has no identity, as in "
                             f"jnp.{name}; e.g. {name}(x, where=m, initial=-jnp.inf)")
        keep = keepdims_flag(keepdims, name)
        if reduced_size(x, axes) == 0:
            if initial is None:
                raise ValueError(f"{name}() of an empty tensor has no value (shape {x.shape}, "
                                 f"axis {axis}); pass initial= for the value of an empty slice")
            out_shape = tuple(1 if axes is None or i in axes else s
                              for i, s in enumerate(x.shape)) if keep else _drop(x.shape, axes)
            init = with_initial(x, initial, lambda i, _: i, name)
            return broadcast_to_p(init, shape=out_shape) if out_shape else init
        kind = x.dtype.kind
        fill = (identity > 0 if kind == "b" else
                int(getattr(np.iinfo(x.dtype), "max" if identity > 0 else "min"))
                if kind in "iu" else identity)
        x = masked(x, where_mask(where, x, name), fill)
        return with_initial(prim(x, axis=axes, keepdims=keep), initial, op, name)

    which = "Maximum" if name == "max" else "Minimum"
    public.__name__ = public.__qualname__ = name
    public.__doc__ = (
        f"{which} over axis; ties share the gradient evenly. As in jnp.{name}, `initial` is a "
        f"scalar the result is compared with (and the value of an empty slice), and the bool "
        f"mask `where` leaves out the elements where it is False (it needs initial).\n\n"
        f"    >>> sl.{name}(sl.tensor([1.0, 5.0, 3.0]), where=sl.tensor([True, False, True]), "
        f"initial=0.0)\n    ")
    return public


max = _extreme(max_p, ew.maximum, -np.inf, "max")
min = _extreme(min_p, ew.minimum, np.inf, "min")


def logsumexp(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *,
              where: ArrayLike | None = None) -> Tensor:
    """log(sum(exp(x))) along axis, stable for large values; with a bool mask `where`, over the
    elements where it is True (-inf where none is), as jax.nn.logsumexp.

    >>> sl.logsumexp(sl.tensor([1000.0, 1000.0]))
    """
    x = as_inexact(x)
    axes = normalize_axis(axis, x.ndim)
    x = masked(x, where_mask(where, x, "logsumexp"), -np.inf)
    m = ew.stop_gradient(max_p(x, axis=axes, keepdims=True))
    m = ew.where(ew.isfinite(m), m, 0.0)  # all -inf: keep -inf, not nan
    out = ew.add(ew.log(sum_p(ew.exp(ew.sub(x, m)), axis=axes, keepdims=True)), m)
    return out if keepdims else reshape_p(out, shape=_drop(out.shape, axes))


def softmax(x: ArrayLike, axis: Axis = -1, *, where: ArrayLike | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along axis; with a bool mask `where`, over the elements where it is
    True, and 0 (with no gradient) elsewhere, as jax.nn.softmax.

    >>> sl.softmax(sl.tensor([1.0, 2.0, 3.0]), where=sl.tensor([True, True, False]))
    """
    if where is None:
        return ew.exp(ew.sub(x, logsumexp(x, axis=axis, keepdims=True)))
    x = as_tensor(x)
    mask = where_mask(where, x, "softmax")
    x = masked(x, mask, -np.inf)
    with np.errstate(invalid="ignore"):
        return ew.where(mask, ew.exp(ew.sub(x, logsumexp(x, axis=axis, keepdims=True))), 0.0)


def _drop(shape, axes):
    return tuple(s for i, s in enumerate(shape) if axes is not None and i not in axes)


# --- shapes ---------------------------------------------------------------------------------
def reshape(x: ArrayLike, *shape: Shape) -> Tensor:
    """x with a new shape of the same size (one entry may be -1)."""
    x = as_tensor(x)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) == 1:
        known = int(np.prod([s for s in shape if s != -1]))
        if known == 0 or x.size % known:
            raise ValueError(f"cannot reshape a tensor of shape {x.shape} into {shape}")
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    if int(np.prod(shape)) != x.size:
        raise ValueError(f"cannot reshape a tensor of shape {x.shape} (size {x.size}) into "
                         f"{shape}: the sizes differ")
    return x if shape == x.shape else reshape_p(x, shape=shape)


def transpose(x: ArrayLike, *axes: Axis) -> Tensor:
    """x with its axes permuted (reversed when no axes are given)."""
    x = as_tensor(x)
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    axes = tuple(reversed(range(x.ndim))) if not axes else tuple(a % x.ndim for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of {x.ndim} axes")
    return x if axes == tuple(range(x.ndim)) else transpose_p(x, axes=axes)


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Tensor:
    """x with two axes exchanged."""
    x = as_tensor(x)
    axis1, axis2 = (one_axis(a, x.ndim, "swapaxes") for a in (axis1, axis2))
    axes = list(range(x.ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(x, tuple(axes))


def one_axis(axis, ndim, who):
    """axis as a non-negative int, checked as NumPy checks it (no wrapping around)."""
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"{who}: axis must be one int, got {axis!r}")
    return normalize_axis(axis, ndim, f"{who}: axis")[0]


def expand_dims(x: ArrayLike, axis: Axis) -> Tensor:
    """x with a new axis of length 1 at position axis, or at each of a tuple or list of
    positions (in the result), as np.expand_dims and jnp.expand_dims."""
    x = as_tensor(x)
    if not isinstance(axis, (tuple, list)):
        axis = one_axis(axis, x.ndim + 1, "expand_dims")
        return reshape_p(x, shape=x.shape[:axis] + (1,) + x.shape[axis:])
    ndim = x.ndim + len(axis)
    shape = iter(x.shape)
    new = normalize_axis(axis, ndim, "expand_dims: axis")
    return reshape_p(x, shape=tuple(1 if i in new else next(shape) for i in range(ndim)))


def squeeze(x: ArrayLike, axis: Axis = None) -> Tensor:
    """x without its length-1 axes (or only the given ones)."""
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim) if axis is not None else tuple(
        i for i, s in enumerate(x.shape) if s == 1)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1 (shape {x.shape})")
    return reshape_p(x, shape=tuple(s for i, s in enumerate(x.shape) if i not in axes))


def broadcast_to(x: ArrayLike, shape: Shape) -> Tensor:
    """x repeated (without copying) to shape, by NumPy's broadcasting rules."""
    x = as_tensor(x)
    shape = tuple(shape)
    return x if x.shape == shape else broadcast_to_p(x, shape=shape)


def concatenate(xs: Sequence[ArrayLike], axis: Axis = 0) -> Tensor:
    """Join a sequence of tensors along an existing axis."""
    xs = [as_tensor(x) for x in xs]
    if not xs:
        raise ValueError("concatenate needs at least one tensor")
    return concatenate_p(*xs, axis=one_axis(axis, xs[0].ndim, "concatenate"))


def stack(xs: Sequence[ArrayLike], axis: Axis = 0) -> Tensor:
    """Join same-shaped tensors along a new axis."""
    xs = [as_tensor(x) for x in xs]
    if not xs:
        raise ValueError("stack needs at least one tensor")
    shapes = {x.shape for x in xs}
    if len(shapes) > 1:
        raise ValueError(f"stack: all tensors must have one shape, got {sorted(shapes)}")
    return stack_p(*xs, axis=one_axis(axis, xs[0].ndim + 1, "stack"))


# --- linear algebra -------------------------------------------------------------------------
def matmul(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x @ y with NumPy's rules (1-d operands are promoted and the added axis removed)."""
    x, y = as_tensor(x), as_tensor(y)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"matmul: operands must be at least 1-d, got shapes {x.shape} and "
                         f"{y.shape}; use * for scalars")
    xv, yv = (reshape_p(x, shape=(1,) + x.shape) if x.ndim == 1 else x,
              reshape_p(y, shape=y.shape + (1,)) if y.ndim == 1 else y)
    if xv.shape[-1] != yv.shape[-2]:
        raise ValueError(
            f"matmul: shapes {x.shape} and {y.shape} do not line up ({x.shape[-1]} != "
            f"{yv.shape[-2]}): the last axis of the first must equal the "
            f"{'only' if y.ndim == 1 else 'second-to-last'} axis of the second.")
    out = matmul_p(xv, yv)
    if x.ndim == 1:
        out = reshape_p(out, shape=out.shape[:-2] + out.shape[-1:])
    if y.ndim == 1:
        out = reshape_p(out, shape=out.shape[:-1])
    return out


def vdot(x: ArrayLike, y: ArrayLike) -> Tensor:
    """sum(x * y) over every element, as a 0-d tensor, without forming x * y (NumPy's vdot
    for real data: operands of any shapes with one number of elements)."""
    x, y = as_tensor(x), as_tensor(y)
    for name, t in (("first", x), ("second", y)):
        if np.dtype(t.dtype).kind == "c":
            raise TypeError(f"vdot: the {name} operand is complex ({t.dtype}); vdot here is "
                            "for real data. Use sl.sum(x * y) and conjugate by hand.")
    if x.size != y.size:
        raise ValueError(f"vdot: the operands have {x.size} and {y.size} elements (shapes "
                         f"{x.shape} and {y.shape}); they must have the same number.")
    return vdot_p(x, y)


def einsum(subscripts: str, *operands: ArrayLike, optimize: Any = "auto",
           precision: Any = None) -> Tensor:
    """Einstein summation (`einsum('bi,ij->bj', x, W)`), contracted two operands at a time.

    As in NumPy and JAX, `...` stands for the leading axes (broadcast between operands), and a
    letter repeated within one operand takes its diagonal ('ii->i', 'ii->' the trace).
    `optimize` and `precision` are JAX's and accepted for its code, but change nothing: three
    or more operands are contracted from the left in their order (a different order than
    JAX's rounds differently), and every product is at the operands' own precision.

    >>> sl.einsum('...ij,...j->...i', sl.ones((4, 2, 3)), sl.ones(3)).shape
    >>> sl.einsum('ii->i', sl.tensor([[1.0, 2.0], [3.0, 4.0]]))
    """
    xs = [as_tensor(o) for o in operands]
    if isinstance(subscripts, str):
        subscripts, xs = _expand_ellipsis(subscripts.replace(" ", ""), xs)
        subscripts, xs = _take_diagonals(subscripts, xs)
    subs, out_sub = parse_einsum(subscripts, len(xs))
    for sub, x in zip(subs, xs):
        if len(sub) != x.ndim:
            raise ValueError(f"einsum: subscripts '{sub}' name {len(sub)} axes but the operand "
                             f"has shape {x.shape}")
    if len(xs) <= 2:
        return einsum_p(*xs, spec=",".join(subs) + "->" + out_sub)
    acc, acc_sub = xs[0], subs[0]
    for k in range(1, len(xs)):
        later = set(out_sub) | set("".join(subs[k + 1:]))
        new_sub = "".join(dict.fromkeys(c for c in acc_sub + subs[k] if c in later))
        acc = einsum_p(acc, xs[k], spec=f"{acc_sub},{subs[k]}->{new_sub}")
        acc_sub = new_sub
    return acc if acc_sub == out_sub else einsum_p(acc, spec=f"{acc_sub}->{out_sub}")



def _implicit_output(ins):
    """NumPy's output for subscripts without '->': the letters named once, sorted."""
    letters = ins.replace(",", "")
    return "".join(sorted(c for c in set(letters) if letters.count(c) == 1))


def _expand_ellipsis(spec, xs):
    """Name the axes each '...' stands for with unused letters (the same letters for the
    same trailing axes of every operand, which are broadcast to one shape), so that the
    contraction below sees explicit subscripts only."""
    if "..." not in spec:
        return spec, xs
    ins, arrow, out = spec.partition("->")
    subs = ins.split(",")
    if len(subs) != len(xs):
        return spec, xs  # parse_einsum reports the count
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in spec]
    dims = []
    for sub, x in zip(subs, xs):
        named = len(sub.replace("...", ""))
        if sub.count("...") > 1 or (("..." not in sub) and "." in sub):
            raise ValueError(f"einsum: '{sub}' in '{spec}' is not a valid operand subscript "
                             "(at most one '...', and no other dots)")
        if "..." in sub and x.ndim < named:
            raise ValueError(f"einsum: '{sub}' names {named} axes besides '...' but the "
                             f"operand has shape {x.shape}")
        dims.append(x.ndim - named if "..." in sub else 0)
    n = builtins.max(dims)
    ell = "".join(spare[:n])
    shapes = [x.shape[sub.index("..."):sub.index("...") + k]
              for sub, x, k in zip(subs, xs, dims) if "..." in sub]
    try:
        common = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"einsum: the axes that '...' stands for, of shapes "
                         f"{', '.join(map(str, shapes))}, do not broadcast together") from None
    new_xs, new_subs = [], []
    for sub, x, k in zip(subs, xs, dims):
        if "..." in sub:
            at = sub.index("...")
            target = x.shape[:at] + common[n - k:] + x.shape[at + k:]
            if target != x.shape:
                x = broadcast_to(x, target)
            sub = sub.replace("...", ell[n - k:])
        new_xs.append(x)
        new_subs.append(sub)
    ins = ",".join(new_subs)
    out = (out.replace("...", ell) if arrow
           else ell + _implicit_output("".join(c for c in ins if c not in ell)))
    return ins + "->" + out, new_xs


def _take_diagonals(spec, xs):
    """A letter repeated within one operand ('ii') is that operand's diagonal: take it (a
    gather, differentiable) so that each operand names each letter once."""
    ins, arrow, out = spec.partition("->")
    subs = ins.split(",")
    if len(subs) != len(xs) or all(len(set(sub)) == len(sub) for sub in subs):
        return spec, xs
    if not arrow:
        out = _implicit_output(ins)
    new_xs = []
    for k, (sub, x) in enumerate(zip(subs, xs)):
        if len(sub) != x.ndim:
            return spec, xs  # einsum reports the mismatch
        while len(set(sub)) != len(sub):
            c = next(c for c in sub if sub.count(c) > 1)
            p, q = sub.index(c), sub.index(c, sub.index(c) + 1)
            if x.shape[p] != x.shape[q]:
                raise ValueError(f"einsum: '{sub}' repeats '{c}' over axes of sizes "
                                 f"{x.shape[p]} and {x.shape[q]}; a repeated index takes a "
                                 "diagonal, which needs equal sizes")
            rest = [i for i in range(x.ndim) if i not in (p, q)]
            x = transpose_p(x, axes=(*rest, p, q)) if (p, q) != (x.ndim - 2, x.ndim - 1) else x
            i = np.arange(x.shape[-1])
            x = getitem(x, (Ellipsis, i, i))
            sub = "".join(sub[j] for j in rest) + c
        new_xs.append(x)
        subs[k] = sub
    return ",".join(subs) + "->" + out, new_xs
