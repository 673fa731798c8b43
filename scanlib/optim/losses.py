"""optax's losses, with optax's formulas: softmax_cross_entropy (and with integer labels,
and the safe one), sigmoid_binary_cross_entropy, sigmoid_focal_loss, squared_error, l2_loss,
huber_loss, log_cosh, hinge_loss, kl_divergence, cosine_similarity, cosine_distance,
smooth_labels and ctc_loss. Each returns the loss per example (no mean), as optax's do.
Imports tape, ops and scipy.special.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ops import elementwise as ew
from ..ops import (concatenate, einsum, full, logaddexp, one_hot, ones_like, stack, zeros,
                   zeros_like)
from ..ops.functions import as_tensor, expand_dims, logsumexp, one_axis, squeeze
from ..ops.functions import sum as _sum
from ..ops.gathers import take_along_axis
from ..ops.nn import log_sigmoid, log_softmax
from ..scipy.special import logsumexp as _logsumexp_b
from ..tape import Tensor

if TYPE_CHECKING:
    from ..tape.types import ArrayLike, Axis

__all__ = ["softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels",
           "sigmoid_binary_cross_entropy", "squared_error", "l2_loss", "huber_loss",
           "safe_softmax_cross_entropy", "sigmoid_focal_loss", "log_cosh", "hinge_loss",
           "kl_divergence", "cosine_similarity", "cosine_distance", "smooth_labels",
           "ctc_loss", "ctc_loss_with_forward_probs"]


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


def safe_softmax_cross_entropy(logits: ArrayLike, labels: ArrayLike) -> Tensor:
    """softmax_cross_entropy along the last axis that gives 0, not nan, where a label is 0 and
    its logit -inf, as optax.safe_softmax_cross_entropy.

    >>> sl.optim.safe_softmax_cross_entropy(sl.tensor([[0.0, -float("inf")]]),
    ...                                     sl.tensor([[1.0, 0.0]]))
    """
    logits = _floating(logits, "safe_softmax_cross_entropy", "logits")
    labels = as_tensor(labels)
    log_p = log_softmax(logits, -1)
    nonzero = ew.not_equal(labels, 0.0)
    safe_log_p = ew.where(nonzero, log_p, zeros_like(log_p))  # no 0 * -inf where unused
    weighted = ew.where(nonzero, ew.mul(labels, safe_log_p), zeros_like(log_p))
    return ew.neg(_sum(weighted, axis=-1))


def sigmoid_focal_loss(logits: ArrayLike, labels: ArrayLike, *, alpha: float | None = None,
                       gamma: float = 2.0) -> Tensor:
    """The focal loss (Lin et al.): sigmoid_binary_cross_entropy times (1 - p_t) ** gamma,
    weighted by alpha for positives and 1 - alpha for negatives when alpha is given, as
    optax.sigmoid_focal_loss.

    >>> sl.optim.sigmoid_focal_loss(sl.tensor([2.0, -1.0]), sl.tensor([1.0, 0.0]))
    """
    logits = _floating(logits, "sigmoid_focal_loss", "logits")
    labels = ew.astype(as_tensor(labels), dtype=np.dtype(logits.dtype))
    ce_loss = sigmoid_binary_cross_entropy(logits, labels)
    log_p, log_q = log_sigmoid(logits), log_sigmoid(ew.neg(logits))
    log_one_minus_p_t = _logsumexp_b(stack([log_p, log_q], axis=-1), axis=-1,
                                     b=stack([ew.sub(1.0, labels), labels], axis=-1))
    loss = ew.mul(ce_loss, ew.exp(ew.mul(gamma, log_one_minus_p_t)))
    if alpha is None:
        return loss
    weight = ew.add(ew.mul(alpha, labels), ew.mul(1.0 - alpha, ew.sub(1.0, labels)))
    return ew.mul(weight, loss)


def log_cosh(predictions: ArrayLike, targets: ArrayLike | None = None) -> Tensor:
    """log(cosh(e)) for e = predictions - targets, computed as logaddexp(e, -e) - log 2 (no
    overflow), as optax.log_cosh.

    >>> sl.optim.log_cosh(sl.tensor([0.0, 1000.0]))
    """
    predictions = _floating(predictions, "log_cosh", "predictions")
    errors = predictions if targets is None else ew.sub(predictions, targets)
    return ew.sub(logaddexp(errors, ew.neg(errors)),
                  ew.astype(as_tensor(np.log(2.0)), dtype=np.dtype(errors.dtype)))


def hinge_loss(predictor_outputs: ArrayLike, targets: ArrayLike) -> Tensor:
    """max(0, 1 - predictor_outputs * targets) (targets in {-1, 1}), as optax.hinge_loss.

    >>> sl.optim.hinge_loss(sl.tensor([0.5, 2.0]), sl.tensor([1.0, -1.0]))
    """
    return ew.maximum(0, ew.sub(1, ew.mul(predictor_outputs, targets)))


def kl_divergence(log_predictions: ArrayLike, targets: ArrayLike, axis: Axis = -1,
                  where: ArrayLike | None = None) -> Tensor:
    """sum(targets * (log(targets) - log_predictions)) along axis, 0 * log 0 taken as 0, as
    optax.kl_divergence (targets are probabilities, the predictions log-probabilities).

    >>> sl.optim.kl_divergence(sl.log(sl.tensor([[0.5, 0.5]])), sl.tensor([[1.0, 0.0]]))
    """
    who = "kl_divergence"
    _no_where(where, who)
    log_predictions = _floating(log_predictions, who, "log_predictions")
    targets = _floating(targets, who, "targets")
    zero = ew.equal(targets, 0)
    safe = ew.where(zero, ones_like(targets), targets)  # no log(0) in the unused branch
    log_t = ew.where(zero, zeros_like(targets), ew.log(safe))
    return _sum(ew.mul(targets, ew.sub(log_t, log_predictions)), axis=axis)


def cosine_similarity(predictions: ArrayLike, targets: ArrayLike, *, epsilon: float = 0.0,
                      axis: Axis = -1, where: ArrayLike | None = None) -> Tensor:
    """The cosine of the angle between predictions and targets along axis, each norm at
    least sqrt(epsilon), as optax.cosine_similarity.

    >>> sl.optim.cosine_similarity(sl.tensor([[1.0, 0.0]]), sl.tensor([[1.0, 1.0]]))
    """
    who = "cosine_similarity"
    _no_where(where, who)
    a = _floating(predictions, who, "predictions")
    b = _floating(targets, who, "targets")
    a_norm = ew.sqrt(ew.maximum(_sum(ew.mul(a, a), axis=axis, keepdims=True), epsilon))
    b_norm = ew.sqrt(ew.maximum(_sum(ew.mul(b, b), axis=axis, keepdims=True), epsilon))
    return _sum(ew.mul(ew.div(a, a_norm), ew.div(b, b_norm)), axis=axis)


def cosine_distance(predictions: ArrayLike, targets: ArrayLike, *, epsilon: float = 0.0,
                    axis: Axis = -1, where: ArrayLike | None = None) -> Tensor:
    """1 - cosine_similarity, as optax.cosine_distance.

    >>> sl.optim.cosine_distance(sl.tensor([[1.0, 0.0]]), sl.tensor([[0.0, 1.0]]))
    """
    return ew.sub(1.0, cosine_similarity(predictions, targets, epsilon=epsilon, axis=axis,
                                         where=where))


def smooth_labels(labels: ArrayLike, alpha: float, *, axis: int = -1,
                  where: ArrayLike | None = None) -> Tensor:
    """(1 - alpha) * labels + alpha / K for K classes along axis (label smoothing), as
    optax.smooth_labels.

    >>> sl.optim.smooth_labels(sl.tensor([[0.0, 1.0]]), 0.1)
    """
    who = "smooth_labels"
    _no_where(where, who)
    labels = _floating(labels, who, "labels")
    return ew.add(ew.mul(1.0 - alpha, labels), alpha / labels.shape[axis])


def ctc_loss_with_forward_probs(logits: ArrayLike, logit_paddings: ArrayLike, labels: ArrayLike,
                                label_paddings: ArrayLike, *, blank_id: int = 0,
                                log_epsilon: float = -1e5) -> tuple[Tensor, Tensor, Tensor]:
    """ctc_loss and the forward variables: (per-sequence loss, logalpha_phi [T, B, N+1],
    logalpha_emit [T, B, N]), as optax.ctc_loss_with_forward_probs. The recursion over time
    runs as a Python loop (what a scan means), so it is recorded and differentiated as such.

    >>> logits = sl.zeros((1, 3, 2))
    >>> loss, phi, emit = sl.optim.ctc_loss_with_forward_probs(
    ...     logits, sl.zeros((1, 3)), sl.tensor([[1]]), sl.zeros((1, 1)))
    >>> loss
    """
    who = "ctc_loss"
    logits = _floating(logits, who, "logits")
    labels = as_tensor(labels)
    dtype = np.dtype(logits.dtype)
    logit_paddings = ew.astype(as_tensor(logit_paddings), dtype=dtype)
    label_paddings = ew.astype(as_tensor(label_paddings), dtype=dtype)
    if logits.ndim != 3 or labels.ndim != 2:
        raise ValueError(f"{who}: logits must be [batch, time, classes] and labels [batch, "
                         f"length], got logits {logits.shape} and labels {labels.shape}")
    if labels.shape != label_paddings.shape or logit_paddings.shape != logits.shape[:2]:
        raise ValueError(f"{who}: label_paddings must be shaped like labels {labels.shape} and "
                         f"logit_paddings like logits[..., 0] {logits.shape[:2]}, got "
                         f"{label_paddings.shape} and {logit_paddings.shape}")
    batch, steps, classes = logits.shape
    if steps == 0:
        raise ValueError(f"{who}: logits have no time steps")
    if labels.shape[0] != batch:
        raise ValueError(f"{who}: labels must have batch size {batch}, got {labels.shape[0]}")
    length = labels.shape[1]
    logprobs = log_softmax(logits, -1)
    label_lengths = ew.astype(ew.sub(length, _sum(label_paddings, axis=1)), dtype=np.int32)
    repeat = ew.astype(ew.equal(labels[:, :-1], labels[:, 1:]), dtype=dtype)
    repeat = concatenate([repeat, zeros((batch, 1), dtype=dtype)], axis=1)
    logprobs_phi = logprobs[:, :, blank_id:blank_id + 1]  # [B, T, 1]
    logprobs_emit = einsum("btk,bnk->btn", logprobs, one_hot(labels, classes, dtype=dtype))

    def update_phi_score(phi, added_score):
        return concatenate([phi[:, :1], logaddexp(phi[:, 1:], added_score)], axis=-1)

    emit = full((batch, length), log_epsilon, dtype=dtype)
    phi = concatenate([zeros((batch, 1), dtype=dtype), emit], axis=1)
    phis, emits = [], []
    for t in range(steps):
        prev_phi_orig = phi
        prev_phi = update_phi_score(phi, ew.add(emit, ew.mul(log_epsilon, repeat)))
        logprob_emit, logprob_phi = logprobs_emit[:, t], logprobs_phi[:, t]
        next_emit = logaddexp(ew.add(prev_phi[:, :-1], logprob_emit), ew.add(emit, logprob_emit))
        next_phi = update_phi_score(ew.add(prev_phi, logprob_phi), ew.add(
            ew.add(emit, logprob_phi), ew.mul(log_epsilon, ew.sub(1.0, repeat))))
        pad = expand_dims(logit_paddings[:, t], 1)
        emit = ew.add(ew.mul(pad, emit), ew.mul(ew.sub(1.0, pad), next_emit))
        phi = ew.add(ew.mul(pad, prev_phi_orig), ew.mul(ew.sub(1.0, pad), next_phi))
        phis.append(phi)
        emits.append(emit)
    last = update_phi_score(phis[-1], emits[-1])
    logalpha_phi = stack(phis[:-1] + [last], axis=0)
    per_seq_loss = ew.neg(einsum("bn,bn->b", last, one_hot(label_lengths, length + 1,
                                                            dtype=dtype)))
    return per_seq_loss, logalpha_phi, stack(emits, axis=0)


def ctc_loss(logits: ArrayLike, logit_paddings: ArrayLike, labels: ArrayLike,
             label_paddings: ArrayLike, *, blank_id: int = 0,
             log_epsilon: float = -1e5) -> Tensor:
    """The connectionist temporal classification loss (Graves et al.) per sequence: logits
    [batch, time, classes], labels [batch, length] (padded where label_paddings is 1, the
    time steps where logit_paddings is 1), as optax.ctc_loss.

    >>> sl.optim.ctc_loss(sl.zeros((1, 3, 2)), sl.zeros((1, 3)), sl.tensor([[1]]),
    ...                   sl.zeros((1, 1)))
    """
    return ctc_loss_with_forward_probs(logits, logit_paddings, labels, label_paddings,
                                       blank_id=blank_id, log_epsilon=log_epsilon)[0]
