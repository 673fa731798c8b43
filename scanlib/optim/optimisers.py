"""The optimisers of scanlib.optim (sgd, momentum, adam, adamw): chains of the stages in
optim.transforms, named after the optimiser.

Imports optim.core and optim.transforms.
"""

from __future__ import annotations

from .core import GradientTransformation, ScalarOrSchedule
from .transforms import add_decayed_weights, chain, scale_by_adam, scale_by_learning_rate, trace


def sgd(learning_rate: ScalarOrSchedule, momentum: float | None = None,
        nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum, as optax.sgd:
    p -= lr * g, or with momentum t = g + momentum * t, p -= lr * t.

    >>> opt = sl.optim.sgd(0.1, momentum=0.9)
    >>> w = sl.tensor([1.0, -1.0], requires_grad=True)
    >>> state = opt.init(w)
    >>> (w * w).sum().backward()
    >>> w, state = opt.step(w.grad, state, w)
    >>> w
    """
    stages = [] if momentum is None else [trace(momentum, nesterov)]
    opt = chain(*stages, scale_by_learning_rate(learning_rate))
    opt.name = "sgd"
    return opt


def momentum(learning_rate: ScalarOrSchedule,
             beta: float = 0.9) -> GradientTransformation:
    """Heavy-ball momentum: m = g + beta * m, p -= lr * m (sgd with momentum=beta).

    >>> opt = sl.optim.momentum(0.1, beta=0.5)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    opt = sgd(learning_rate, momentum=beta)
    opt.name = "momentum"
    return opt


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8, eps_root: float = 0.0) -> GradientTransformation:
    """Adam (Kingma & Ba), operation for operation as optax.adam: its state is
    `(ScaleByAdamState(count, mu, nu), <the learning rate's state>)`.

    >>> opt = sl.optim.adam(1e-2)
    >>> w = sl.tensor([1.0, -1.0], dtype="float32")
    >>> state = opt.init(w)
    >>> for _ in range(3):
    ...     updates, state = opt.update(sl.grad(lambda w: (w * w).sum())(w), state, w)
    ...     w = sl.optim.apply_updates(w, updates)
    >>> w
    """
    opt = chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(learning_rate))
    opt.name = "adam"
    return opt


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0,
          weight_decay: float = 1e-4) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter), as optax.adamw: the update is
    -lr * (adam's direction + weight_decay * p).

    >>> opt = sl.optim.adamw(1e-2, weight_decay=0.1)
    >>> w = sl.tensor([1.0, -1.0])
    >>> w, state = opt.step(sl.tensor([0.0, 0.0]), opt.init(w), w)
    >>> w
    """
    opt = chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay),
                scale_by_learning_rate(learning_rate))
    opt.name = "adamw"
    return opt
