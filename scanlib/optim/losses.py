"""optax's losses, with optax's formulas: softmax_cross_entropy (and with integer labels),
sigmoid_binary_cross_entropy, squared_error, l2_loss and huber_loss. Each returns the loss per
example (no mean), as optax's do. Imports tape and ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ops import elementwise as ew
from ..ops.functions import as_tensor, expand_dims, logsumexp, one_axis, squeeze
from ..ops.functions import sum as _sum
from ..ops.gathers import take_along_axis
from ..ops.nn import log_sigmoid, log_softmax
from ..tape import Tensor

if TYPE_CHECKING:
    from ..tape.types import ArrayLike, Axis

__all__ = ["softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels",
           "sigmoid_binary_cross_entropy", "squared_error", "l2_loss", "huber_loss"]


def _floating(x, who, name):
    x = as_tensor(x)
    if np.dtype(x.dtype).kind not in "f":
        raise TypeError(f"{who}: {name} must be a real float tensor (as optax requires), got "
                        f"{x.dtype}; cast it, e.g. {name}.astype('float32')")
    return x


def _no_where(where, who):
    if where is not None:
        raise NotImplementedError(f"{who}: optax's where= mask is not supported; multiply the "
                                  "per-example losses by a mask instead")


def softmax_cross_entropy(logits: ArrayLike, labels: ArrayLike, axis: Axis = -1,
                          where: ArrayLike | None = None) -> Tensor:
    """-sum(labels * log_softmax(logits)) along axis, as optax.softmax_cross_entropy (labels a
    probability distribution per example).

    >>> sl.optim.softmax_cross_entropy(sl.tensor([[1.0, 2.0, 3.0]]), sl.tensor([[0.0, 0.0, 1.0]]))
    """
    who = "softmax_cross_entropy"
    _no_where(where, who)
    logits = _floating(logits, who, "logits")
    return ew.neg(_sum(ew.mul(labels, log_softmax(logits, axis)), axis=axis))


def softmax_cross_entropy_with_integer_labels(logits: ArrayLike, labels: ArrayLike,
                                              axis: int = -1,
                                              where: ArrayLike | None = None) -> Tensor:
    """logsumexp(logits) - logits[label] along axis, for integer class labels, as
    optax.softmax_cross_entropy_with_integer_labels (an int axis; a label out of range raises
    IndexError where JAX gives nan).

    >>> sl.optim.softmax_cross_entropy_with_integer_labels(sl.tensor([[1.0, 2.0, 3.0]]),
    ...                                                    sl.tensor([2]))
    """
    who = "softmax_cross_entropy_with_integer_labels"
    _no_where(where, who)
    logits = _floating(logits, who, "logits")
    labels = as_tensor(labels)
    if np.dtype(labels.dtype).kind not in "iu":
        raise TypeError(f"{who}: labels must be integers (class indices), got {labels.dtype}; "
                        "for one-hot or soft labels use softmax_cross_entropy")
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{who}: axis must be an int here, got {axis!r} (optax also takes a "
                        "tuple of axes: reshape the logits to one class axis first)")
    axis = one_axis(axis, logits.ndim, who)
    label_logits = squeeze(take_along_axis(logits, expand_dims(labels, axis), axis=axis), axis)
    return ew.sub(logsumexp(logits, axis=axis), label_logits)


def sigmoid_binary_cross_entropy(logits: ArrayLike, labels: ArrayLike) -> Tensor:
    """-labels * log_sigmoid(logits) - (1 - labels) * log_sigmoid(-logits), elementwise, as
    optax.sigmoid_binary_cross_entropy (labels cast to the logits' dtype).

    >>> sl.optim.sigmoid_binary_cross_entropy(sl.tensor([0.0, 100.0]), sl.tensor([1.0, 0.0]))
    """
    logits = _floating(logits, "sigmoid_binary_cross_entropy", "logits")
    labels = ew.astype(as_tensor(labels), dtype=np.dtype(logits.dtype))
    log_p = log_sigmoid(logits)
    log_not_p = log_sigmoid(ew.neg(logits))
    return ew.sub(ew.mul(ew.neg(labels), log_p), ew.mul(ew.sub(1.0, labels), log_not_p))


def squared_error(predictions: ArrayLike, targets: ArrayLike | None = None) -> Tensor:
    """(predictions - targets) ** 2 elementwise (predictions ** 2 without targets), as
    optax.squared_error: the two must have one shape (no broadcasting, as optax).

    >>> sl.optim.squared_error(sl.tensor([1.0, 3.0]), sl.tensor([0.0, 1.0]))
    """
    predictions = _floating(predictions, "squared_error", "predictions")
    if targets is None:
        errors = predictions
    else:
        targets = as_tensor(targets)
        if targets.shape != predictions.shape:
            raise ValueError(f"squared_error: predictions {predictions.shape} and targets "
                             f"{targets.shape} must have the same shape (optax does not "
                             "broadcast here); reshape or broadcast one explicitly")
        errors = ew.sub(predictions, targets)
    return ew.power(errors, 2)


def l2_loss(predictions: ArrayLike, targets: ArrayLike | None = None) -> Tensor:
    """0.5 * squared_error(predictions, targets), as optax.l2_loss.

    >>> sl.optim.l2_loss(sl.tensor([1.0, 3.0]), sl.tensor([0.0, 1.0]))
    """
    return ew.mul(0.5, squared_error(predictions, targets))


def huber_loss(predictions: ArrayLike, targets: ArrayLike | None = None, *,
               delta: float = 1.0) -> Tensor:
    """0.5 e**2 where |e| <= delta, else 0.5 delta**2 + delta (|e| - delta), for
    e = predictions - targets, as optax.huber_loss.

    >>> sl.optim.huber_loss(sl.tensor([0.5, 3.0]), sl.tensor([0.0, 0.0]))
    """
    predictions = _floating(predictions, "huber_loss", "predictions")
    errors = predictions if targets is None else ew.sub(predictions, targets)
    abs_errors = ew.absolute(errors)
    quadratic = ew.minimum(abs_errors, delta)
    linear = ew.sub(abs_errors, quadratic)
    return ew.add(ew.mul(0.5, ew.power(quadratic, 2)), ew.mul(delta, linear))
