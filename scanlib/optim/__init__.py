"""scanlib.optim: optimisers in optax's shape and under optax's names (sgd, adam, adamw, rmsprop,
adagrad, lion, lamb, ..., their stages, chain, masked, multi_transform, MultiSteps,
inject_hyperparams, schedules, losses and tree_utils) over any pytree of Tensors or arrays,
with optax's arithmetic, operation for operation (the same bits as optax run op by op; under
jax.jit XLA may fuse and round differently). Norms (clip_by_global_norm, the trust ratio) and
reciprocal square roots (rsqrt) are the exception: they agree with optax to a few ulps, not
bit for bit (XLA sums the squares in another order, computes t / norm as t * (1 / norm) and
rounds its rsqrt its own way). Adam's bias
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

A schedule receives the step count as optax gives it, a 0-d int32 Tensor: int32 arithmetic,
and float32 from true division and float functions (as JAX, even with x64 on); its value is
cast to each update's dtype. Bias corrections are computed in float32 for float16/float32
parameters (then cast to the parameter's dtype), as optax does in JAX's default mode
(jax_enable_x64 off), and in float64 for float64 ones, as it does with x64 on. Complex
parameters are refused, and so is a mu_dtype or accumulator_dtype (the state keeps the
parameters' dtypes).

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
apply_updates, grads_of), transforms (chain and the first stages), scaling and blockwise
(the other scale_by_* stages), stages (the small ones: clip, ema, add_noise, ...), wrappers (masked,
multi_transform, apply_if_finite, MultiSteps, inject_hyperparams), optimisers (optax's
aliases), linesearch (lbfgs, scale_by_lbfgs, the linesearches, value_and_grad_from_state),
schedules, losses, tree_utils and tree (optax.tree's names); it imports backends, tape, ops,
random, pytree, autodiff, and control and branching (the linesearch's loop).

optax's extra arguments are accepted by every `update` and `step`: `opt.update(grads, state,
params, value=loss)` for polyak_sgd, and for lbfgs

    value_and_grad = sl.optim.value_and_grad_from_state(f)
    value, grad = value_and_grad(params, state=state)
    updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=f)
"""

from . import linesearch, losses, schedules, stages, tree, tree_utils, wrappers
from .core import GradientTransformation, apply_updates, grads_of
from .losses import *  # noqa: F403
from .blockwise import (  # noqa: F401
    FactoredState, ScaleByNovogradState, ScaleBySM3State, ScaleByTrustRatioState,
    scale_by_factored_rms, scale_by_novograd, scale_by_param_block_rms, scale_by_schedule,
    scale_by_sign, scale_by_sm3, scale_by_trust_ratio)
from .optimisers import (  # noqa: F401
    adabelief, adadelta, adagrad, adam, adamax, adamaxw, adamw, amsgrad, fromage, lamb, lars,
    lion, momentum, nadam, nadamw, noisy_sgd, novograd, radam, rmsprop, sgd, sign_sgd, sm3, yogi,
    adan, rprop, adafactor, polyak_sgd)
from .scaling import (  # noqa: F401
    ScaleByAdaDeltaState, ScaleByAdanState, ScaleByAmsgradState, ScaleByBeliefState,
    ScaleByLionState, ScaleByRpropState,
    ScaleByRmsState, ScaleByRmsWithCountState, ScaleByRssState, ScaleByRStdDevState,
    ScaleByRStdDevWithCountState, scale_by_adadelta, scale_by_adamax, scale_by_amsgrad,
    scale_by_belief, scale_by_lion, scale_by_radam, scale_by_rms, scale_by_rss, scale_by_stddev,
    scale_by_yogi, scale_by_adan, scale_by_rprop)
from .linesearch import *  # noqa: F403
from .linesearch import (  # noqa: F401
    BacktrackingLinesearchInfo, ScaleByBacktrackingLinesearchState, ScaleByLBFGSState,
    ScaleByZoomLinesearchState, ZoomLinesearchInfo)
from .schedules import *  # noqa: F403
from .stages import *  # noqa: F403
from .stages import AddNoiseState, ApplyEvery, EmaState, ZeroNansState  # noqa: F401
from .transforms import (  # noqa: F401
    ScaleByAdamState, ScaleByScheduleState, TraceState,
                         WeightDecaySchedule, add_decayed_weights, chain, clip_by_global_norm,
                         named_chain, scale, scale_by_adam, scale_by_learning_rate, trace)
from .wrappers import *  # noqa: F403
from .wrappers import (  # noqa: F401
    ApplyIfFiniteState, InjectHyperparamsState, InjectStatefulHyperparamsState, LookaheadState,
    MaskedNode,
    MaskedState, MultiStepsState, MultiTransformState, PartitionState, WrappedScheduleState)

_OPTIMISERS = ["sgd", "momentum", "adam", "adamw", "nadam", "nadamw", "adamax", "adamaxw",
               "amsgrad", "radam", "rmsprop", "adagrad", "adadelta", "adabelief", "yogi",
               "lion", "lamb", "lars", "novograd", "fromage", "sign_sgd", "noisy_sgd", "sm3",
               "adan", "rprop", "adafactor", "polyak_sgd"]
_STAGES = ["chain", "named_chain", "scale", "scale_by_learning_rate", "scale_by_schedule",
           "trace",
           "add_decayed_weights", "clip_by_global_norm", "scale_by_adam", "scale_by_adamax",
           "scale_by_amsgrad", "scale_by_rms", "scale_by_stddev", "scale_by_rss",
           "scale_by_lion", "scale_by_radam", "scale_by_belief", "scale_by_yogi",
           "scale_by_adan", "scale_by_rprop", "scale_by_adadelta", "scale_by_novograd",
           "scale_by_sm3", "scale_by_trust_ratio", "scale_by_sign", "scale_by_factored_rms",
           "scale_by_param_block_rms"]
__all__ = [
    # optax's state classes (ScaleByAdamState, MaskedNode, ...) are attributes, not listed
    "GradientTransformation", "apply_updates", "grads_of", "tree", "tree_utils", *_OPTIMISERS,
    *_STAGES, *stages.__all__, *wrappers.__all__, *schedules.__all__, *linesearch.__all__,
    *losses.__all__,
]
