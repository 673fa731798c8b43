"""Activation and classification functions as jax.nn names them (gelu, silu, elu, leaky_relu,
log_softmax, one_hot, ...). Each is a composite of differentiable primitives, so none needs a
rule of its own; at kinks the gradient is the one JAX gives.

Imports backends, tape and the ops below it (elementwise, functions, special).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import operator

import numpy as np

from . import elementwise as ew
from . import functions as F
from .structural import max_p, normalize_axis, sum_p
from .special import erfc, expm1

if TYPE_CHECKING:
    from ..tape import Tensor
    from ..tape.types import ArrayLike, Axis, DTypeLike

__all__ = [
    "gelu", "silu", "swish", "elu", "leaky_relu", "log_softmax", "one_hot", "log_sigmoid",
    "softsign", "relu6", "hard_tanh", "celu", "selu",
]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_HALF = math.sqrt(0.5)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def gelu(x: ArrayLike, approximate: bool = True) -> Tensor:
    """Gaussian error linear unit x * Phi(x), as jax.nn.gelu: by default with the tanh
    approximation, and with approximate=False exactly, as x * erfc(-x / sqrt(2)) / 2 (as JAX:
    1 + erf(x / sqrt(2)) would cancel for negative x).

    >>> sl.gelu(sl.tensor([-1.0, 0.0, 1.0])), sl.gelu(sl.tensor([1.0]), approximate=False)
    """
    x = F.as_inexact(x)
    if approximate:
        inner = ew.mul(ew.add(x, ew.mul(ew.mul(ew.mul(x, x), x), 0.044715)), _SQRT_2_OVER_PI)
        return ew.mul(x, ew.mul(ew.add(ew.tanh(inner), 1.0), 0.5))
    return ew.mul(x, ew.div(erfc(ew.mul(ew.neg(x), _SQRT_HALF)), 2.0))


def silu(x: ArrayLike) -> Tensor:
    """x * sigmoid(x) (also called swish), as jax.nn.silu.

    >>> sl.silu(sl.tensor([-1.0, 0.0, 1.0]))
    """
    return ew.mul(x, ew.sigmoid(x))


swish = silu


def elu(x: ArrayLike, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1), as jax.nn.elu (gradient alpha at 0).

    >>> sl.elu(sl.tensor([-1.0, 0.0, 2.0]))
    """
    x = F.as_inexact(x)
    positive = ew.greater(x, 0)
    safe = ew.where(positive, 0.0, x)  # expm1 of large positive x would overflow unused
    return ew.where(positive, x, ew.mul(expm1(safe), alpha))


def leaky_relu(x: ArrayLike, negative_slope: float = 0.01) -> Tensor:
    """x where x >= 0, else negative_slope * x, as jax.nn.leaky_relu (gradient 1 at 0).

    >>> sl.leaky_relu(sl.tensor([-2.0, 0.0, 3.0]), 0.1)
    """
    return ew.where(ew.greater_equal(x, 0), x, ew.mul(x, negative_slope))


def celu(x: ArrayLike, alpha: float = 1.0) -> Tensor:
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha), as jax.nn.celu.

    >>> sl.celu(sl.tensor([-1.0, 0.0, 2.0]))
    """
    x = F.as_inexact(x)
    return ew.add(ew.maximum(x, 0.0), ew.mul(expm1(ew.div(ew.minimum(x, 0.0), alpha)), alpha))


def selu(x: ArrayLike) -> Tensor:
    """Scaled ELU: scale * elu(x, alpha) with the constants of Klambauer et al., as jax.nn.selu.

    >>> sl.selu(sl.tensor([-1.0, 0.0, 2.0]))
    """
    return ew.mul(elu(x, _SELU_ALPHA), _SELU_SCALE)


def log_sigmoid(x: ArrayLike) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|, as jax.nn.log_sigmoid.

    >>> sl.log_sigmoid(sl.tensor([-1000.0, 0.0, 1000.0]))
    """
    return ew.neg(F.softplus(ew.neg(x)))


def softsign(x: ArrayLike) -> Tensor:
    """x / (|x| + 1), as jax.nn.soft_sign.

    >>> sl.softsign(sl.tensor([-3.0, 0.0, 1.0]))
    """
    x = F.as_inexact(x)
    return ew.div(x, ew.add(ew.absolute(x), 1.0))


def relu6(x: ArrayLike) -> Tensor:
    """min(max(x, 0), 6), as jax.nn.relu6: the gradient is 1 strictly inside (0, 6) and 0 at
    both kinks; nan stays nan.

    >>> sl.relu6(sl.tensor([-1.0, 3.0, 7.0]))
    """
    # nan fails every test and is kept, with gradient 0 as JAX's
    below = ew.where(ew.less_equal(x, 0), 0.0, ew.stop_gradient(x))
    return ew.where(ew.greater(x, 0), ew.where(ew.less(x, 6), x, 6.0), below)


def hard_tanh(x: ArrayLike) -> Tensor:
    """x clipped to [-1, 1], as jax.nn.hard_tanh (gradient 1 at the kinks, as JAX gives);
    integer input keeps its dtype.

    >>> sl.hard_tanh(sl.tensor([-2.0, 0.5, 2.0]))
    """
    x = F.as_tensor(x)
    kind = np.dtype(x.dtype).kind
    if kind in "bu":  # nothing below -1 (and -1 is no value of the dtype)
        return ew.where(ew.greater(x, 1), 1, x)
    one = 1 if kind == "i" else 1.0  # a Python int keeps an integer dtype, as in JAX
    return ew.where(ew.greater(x, one), one, ew.where(ew.less(x, -one), -one, x))


def log_softmax(x: ArrayLike, axis: Axis = -1, *, where: ArrayLike | None = None) -> Tensor:
    """x - logsumexp(x) along axis (an int, a tuple or None), stable, as jax.nn.log_softmax;
    with a bool mask `where`, over the elements where it is True, and -inf (with no gradient)
    elsewhere.

    Computed as JAX does, s - log(sum(exp(s))) with s = x - max(x) (the max without gradient):
    subtracting a logsumexp near a large max would lose the small differences.

    >>> sl.log_softmax(sl.tensor([1000.0, 1000.0]))
    """
    x = F.as_inexact(x)
    axes = normalize_axis(axis, x.ndim)
    mask = F.where_mask(where, x, "log_softmax")
    x = F.masked(x, mask, -np.inf)
    top = ew.stop_gradient(max_p(x, axis=axes, keepdims=True))
    shifted = ew.sub(x, top if mask is None else ew.where(ew.isfinite(top), top, 0.0))
    out = ew.sub(shifted, ew.log(sum_p(ew.exp(shifted), axis=axes, keepdims=True)))
    return out if mask is None else ew.where(mask, out, -np.inf)


def one_hot(x: ArrayLike, num_classes: int, *, dtype: DTypeLike = np.float64,
            axis: Axis = -1) -> Tensor:
    """Integer labels as one-hot vectors along a new axis, as jax.nn.one_hot: labels outside
    [0, num_classes) (negative ones too) give rows of zeros. float64 unless dtype is given;
    not differentiable.

    >>> sl.one_hot(sl.tensor([0, 2, 5]), 3)
    """
    x = F.as_tensor(x)
    if np.dtype(x.dtype).kind not in "iu":
        raise TypeError(f"one_hot: labels must be integers, got {x.dtype}. Cast them first, "
                        "e.g. labels.astype('int64').")
    num_classes = operator.index(num_classes)
    if num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be >= 0, got {num_classes}")
    axis = F.one_axis(axis, x.ndim + 1, "one_hot")
    classes = F.arange(num_classes, dtype=np.int64, device=x.device)
    classes = F.reshape(classes, (num_classes,) + (1,) * (x.ndim - axis))
    hot = ew.equal(F.expand_dims(x, axis), classes)
    return ew.astype(hot, dtype=np.dtype(dtype))


# NumPy has none of these; the tables numpy_interop merges stay empty.
NUMPY_FUNCTIONS: dict = {}
NUMPY_UFUNCS: dict = {}
