"""scanlib.nn: jax.nn's names, as views onto scanlib's own functions (`nn.relu is sl.relu`).

Imports ops only.
"""

from __future__ import annotations

from .ops import (
    celu, elu, gelu, hard_tanh, identity, leaky_relu, log_sigmoid, log_softmax, logsumexp,
    one_hot, relu, relu6, selu, sigmoid, silu, softmax, softplus, swish, tanh,
)

__all__ = [
    "celu", "elu", "gelu", "hard_tanh", "identity", "leaky_relu", "log_sigmoid", "log_softmax",
    "logsumexp", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "softmax", "softplus",
    "swish", "tanh",
]
