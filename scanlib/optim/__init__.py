"""scanlib.optim: optimisers in optax's shape (sgd, momentum, adam, adamw, clip_by_global_norm,
chain) over any pytree of Tensors or arrays, with optax's arithmetic, operation for operation
(the same bits as optax run op by op; under jax.jit XLA may fuse and round differently).
clip_by_global_norm is the exception: it agrees with optax to a few ulps, not bit for bit
(XLA sums the squares in another order and computes t / norm as t * (1 / norm)). Adam's bias
correction 1 - b ** count calls pow, which is not correctly rounded: with NumPy it is the C
library's (NumPy's scalar power), and another implementation (XLA's, CuPy's, NumPy's array
loop on AVX-512) may round b ** count 1 ulp apart.

    opt = sl.optim.chain(sl.optim.clip_by_global_norm(1.0), sl.optim.adam(1e-3))
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)   # as optax: the updates, new state
    params = sl.optim.apply_updates(params, updates)    # params + updates
    params, state = opt.step(grads, state, params)      # or both in one call

`update` and `apply_updates` mean what optax's do, so optax code runs with the import renamed;
`step` is the one-call form. optax's schedules (exponential_decay, cosine_decay_schedule,
warmup_cosine_decay_schedule, ...) and losses (softmax_cross_entropy, l2_loss, huber_loss, ...)
are here too, under optax's names and with its formulas.

A schedule receives the step count as a Python int (so optax's own schedules work too), or,
inside a scan body or jit, where it is traced, as a 0-d float64 Tensor (a Python int's
arithmetic below 2**53). Bias corrections are computed in float32 for float16/float32
parameters (then cast to the parameter's dtype), as optax does in JAX's default mode
(jax_enable_x64 off), and in float64 for float64 ones, as it does with x64 on. Complex
parameters, and schedules for weight_decay, are refused.

Two modes, chosen by where the update runs:

- The usual training loop (not inside sl.grad/vjp): update, apply_updates and step run under
  no_grad and return new Tensors (Tensors are immutable): a parameter that required grad comes
  back from apply_updates or step as a fresh leaf that requires grad, with `.grad` None, so
  the torch-style loop needs no zero_grad:

      loss_fn(params).backward()
      params, state = opt.step(sl.optim.grads_of(params), state, params)

- Inside a differentiation (sl.grad, sl.vjp, and scan bodies traced inside them): the update
  is recorded like any other ops, so unrolled optimisation and meta-gradients differentiate
  through it, as with optax in JAX. New parameters are then not detached.

In both modes an array parameter comes back as an array, except when its new value is
traced (an update inside a scan body) or carries a gradient: it is then a Tensor, since an
array could hold neither.

The state is a pytree of Tensors (NamedTuples as in optax: `state[0].mu['W']`), so it can ride
in a scan carry. The package: core (checked flat trees, GradientTransformation,
apply_updates, grads_of), transforms (the stages), optimisers (sgd, momentum, adam,
adamw), schedules and losses; it imports backends, tape, ops and pytree.
"""

from . import losses, schedules
from .core import GradientTransformation, apply_updates, grads_of
from .losses import *  # noqa: F403
from .optimisers import adam, adamw, momentum, sgd
from .schedules import *  # noqa: F403
from .transforms import (ScaleByAdamState, ScaleByScheduleState, TraceState,  # noqa: F401
                         add_decayed_weights, chain, clip_by_global_norm, scale, scale_by_adam,
                         scale_by_learning_rate, trace)

__all__ = [
    "GradientTransformation", "sgd", "momentum", "adam", "adamw", "clip_by_global_norm",
    "chain", "scale_by_adam", "scale_by_learning_rate", "scale", "add_decayed_weights", "trace",
    "apply_updates", "grads_of", *schedules.__all__, *losses.__all__,
]
