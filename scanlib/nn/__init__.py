"""scanlib.nn: jax.nn's names, as views onto scanlib's own functions (`nn.relu is sl.relu`),
the activations and attention that only jax.nn has (nn/functions.py), and
`nn.initializers` (nn/initializers.py).

Imports ops, random, scipy.special and its own submodules.
"""

from __future__ import annotations

from ..ops import (
    celu, elu, gelu, hard_tanh, identity, leaky_relu, log_sigmoid, log_softmax, one_hot, relu,
    relu6, selu, sigmoid, silu, softmax, softplus, swish, tanh,
)
from ..ops import softsign as soft_sign
from ..scipy.special import logsumexp  # jax.nn.logsumexp is jax.scipy.special's: b, return_sign
from . import initializers
from .functions import (
    dot_product_attention, glu, hard_sigmoid, hard_silu, hard_swish, log1mexp, logmeanexp,
    mish, sparse_plus, sparse_sigmoid, squareplus, standardize,
)

__all__ = [
    "celu", "elu", "gelu", "hard_tanh", "identity", "leaky_relu", "log_sigmoid", "log_softmax",
    "logsumexp", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "softmax", "softplus",
    "swish", "tanh", "soft_sign", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "mish",
    "squareplus", "standardize", "log1mexp", "logmeanexp", "sparse_plus", "sparse_sigmoid",
    "dot_product_attention", "initializers",
]
