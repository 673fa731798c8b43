"""The optimisers of scanlib.optim, optax's aliases (sgd, momentum, adam, adamw, nadam(w),
adamax(w), amsgrad, radam, rmsprop, adagrad, adadelta, adabelief, yogi, lion, lamb, lars,
novograd, fromage, sign_sgd, noisy_sgd, sm3, adan, rprop, adafactor, polyak_sgd): chains of
the stages in optim.transforms, optim.scaling, optim.blockwise and optim.stages, in optax's
order, named after the optimiser.

Imports optim.core, optim.transforms, optim.scaling, optim.blockwise, optim.stages and
optim.wrappers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import GradientTransformation, ScalarOrSchedule
from .blockwise import (scale_by_factored_rms, scale_by_novograd, scale_by_param_block_rms,
                        scale_by_sign, scale_by_sm3, scale_by_trust_ratio)
from .scaling import (scale_by_adadelta, scale_by_adamax, scale_by_adan, scale_by_amsgrad,
                      scale_by_belief, scale_by_lion, scale_by_radam, scale_by_rms,
                      scale_by_rprop, scale_by_rss, scale_by_stddev, scale_by_yogi)
from .stages import add_noise, clip_by_block_rms, ema, identity, scale_by_polyak
from .transforms import (add_decayed_weights, chain, scale, scale_by_adam,
                         scale_by_learning_rate, trace)
from .wrappers import masked


def _named(name: str, *stages) -> GradientTransformation:
    opt = chain(*stages)
    opt.name = name
    return opt


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
         eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None, *,
         nesterov: bool = False) -> GradientTransformation:
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
    return _named("nadam" if nesterov else "adam",
                  scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                  scale_by_learning_rate(learning_rate))


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None,
          weight_decay: ScalarOrSchedule = 1e-4, mask: Any = None, *,
          nesterov: bool = False) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter), as optax.adamw: the update is
    -lr * (adam's direction + weight_decay * p).

    >>> opt = sl.optim.adamw(1e-2, weight_decay=0.1)
    >>> w = sl.tensor([1.0, -1.0])
    >>> w, state = opt.step(sl.tensor([0.0, 0.0]), opt.init(w), w)
    >>> w
    """
    return _named("nadamw" if nesterov else "adamw",
                  scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                  add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))



def nadam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None) -> GradientTransformation:
    """NAdam (Dozat): adam with Nesterov momentum, as optax.nadam.

    >>> opt = sl.optim.nadam(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=True)


def nadamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None,
           weight_decay: ScalarOrSchedule = 1e-4, mask: Any = None) -> GradientTransformation:
    """NAdamW: nadam with decoupled weight decay, as optax.nadamw.

    >>> opt = sl.optim.nadamw(1e-2, weight_decay=0.1)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return adamw(learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask,
                 nesterov=True)


def adamax(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> GradientTransformation:
    """Adamax (Adam with the infinity norm), as optax.adamax.

    >>> opt = sl.optim.adamax(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("adamax", scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


def adamaxw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
            eps: float = 1e-8, weight_decay: ScalarOrSchedule = 1e-4,
            mask: Any = None) -> GradientTransformation:
    """Adamax with decoupled weight decay, as optax.adamaxw.

    >>> opt = sl.optim.adamaxw(1e-2, weight_decay=0.1)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("adamaxw", scale_by_adamax(b1, b2, eps), add_decayed_weights(weight_decay, mask),
                  scale_by_learning_rate(learning_rate))


def amsgrad(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
            eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None,
            bias_correction_mu: bool = True,
            bias_correction_nu: bool = True) -> GradientTransformation:
    """AMSGrad (Adam with the running maximum of the second moment), as optax.amsgrad.

    >>> opt = sl.optim.amsgrad(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("amsgrad", scale_by_amsgrad(b1, b2, eps, eps_root, mu_dtype,
                                              bias_correction_mu, bias_correction_nu),
                  scale_by_learning_rate(learning_rate))


def radam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, threshold: float = 5.0, *,
          nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam (Liu et al.), as optax.radam.

    >>> opt = sl.optim.radam(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("radam", scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
                  scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate: ScalarOrSchedule, decay: float = 0.9, eps: float = 1e-8,
            initial_scale: float = 0.0, eps_in_sqrt: bool = True, centered: bool = False,
            momentum: float | None = None, nesterov: bool = False,
            bias_correction: bool = False) -> GradientTransformation:
    """RMSProp (centred: scale_by_stddev), then the learning rate, then momentum when given,
    as optax.rmsprop.

    >>> opt = sl.optim.rmsprop(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    scaling = scale_by_stddev if centered else scale_by_rms
    return _named("rmsprop", scaling(decay, eps, initial_scale, eps_in_sqrt, bias_correction),
                  scale_by_learning_rate(learning_rate),
                  identity() if momentum is None else trace(momentum, nesterov))


def adagrad(learning_rate: ScalarOrSchedule, initial_accumulator_value: float = 0.1,
            eps: float = 1e-7) -> GradientTransformation:
    """Adagrad (Duchi et al.), as optax.adagrad.

    >>> opt = sl.optim.adagrad(1e-1)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("adagrad", scale_by_rss(initial_accumulator_value, eps),
                  scale_by_learning_rate(learning_rate))


def adadelta(learning_rate: ScalarOrSchedule | None = None, rho: float = 0.9,
             eps: float = 1e-6, weight_decay: ScalarOrSchedule = 0.0,
             weight_decay_mask: Any = None) -> GradientTransformation:
    """Adadelta (Zeiler), as optax.adadelta (learning_rate None: no rate, the update is
    Adadelta's own step).

    >>> opt = sl.optim.adadelta(1.0)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("adadelta", add_decayed_weights(weight_decay, weight_decay_mask),
                  scale_by_adadelta(rho, eps),
                  identity() if learning_rate is None else scale_by_learning_rate(learning_rate))


def adabelief(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
              eps: float = 1e-16, eps_root: float = 1e-16, *,
              nesterov: bool = False) -> GradientTransformation:
    """AdaBelief (Zhuang et al.), as optax.adabelief.

    >>> opt = sl.optim.adabelief(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("adabelief", scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
                  scale_by_learning_rate(learning_rate))


def yogi(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-3) -> GradientTransformation:
    """Yogi (Zaheer et al.), as optax.yogi.

    >>> opt = sl.optim.yogi(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("yogi", scale_by_yogi(b1, b2, eps), scale_by_learning_rate(learning_rate))


def lion(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.99, mu_dtype: Any = None,
         weight_decay: ScalarOrSchedule = 1e-3, mask: Any = None) -> GradientTransformation:
    """Lion (Chen et al.): the sign of an interpolated momentum, with decoupled weight decay,
    as optax.lion.

    >>> opt = sl.optim.lion(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("lion", scale_by_lion(b1, b2, mu_dtype), add_decayed_weights(weight_decay, mask),
                  scale_by_learning_rate(learning_rate))


def lamb(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-6, eps_root: float = 0.0, weight_decay: ScalarOrSchedule = 0.0,
         mask: Any = None) -> GradientTransformation:
    """LAMB (You et al.): adam's direction plus weight decay, scaled by the trust ratio, as
    optax.lamb.

    >>> opt = sl.optim.lamb(1e-2)
    >>> w = sl.tensor([1.0, 2.0])
    >>> w, state = opt.step(sl.tensor([1.0, 0.5]), opt.init(w), w)
    >>> w
    """
    return _named("lamb", scale_by_adam(b1, b2, eps, eps_root),
                  add_decayed_weights(weight_decay, mask), scale_by_trust_ratio(),
                  scale_by_learning_rate(learning_rate))


def lars(learning_rate: ScalarOrSchedule, weight_decay: ScalarOrSchedule = 0.0,
         weight_decay_mask: Any = True, trust_coefficient: float = 0.001, eps: float = 0.0,
         trust_ratio_mask: Any = True, momentum: float = 0.9,
         nesterov: bool = False) -> GradientTransformation:
    """LARS (You et al.): weight decay, the trust ratio, the learning rate, then momentum, as
    optax.lars.

    >>> opt = sl.optim.lars(1e-1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> w, state = opt.step(sl.tensor([1.0, 0.5]), opt.init(w), w)
    >>> w
    """
    return _named("lars", add_decayed_weights(weight_decay, weight_decay_mask),
                  masked(scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps),
                         trust_ratio_mask),
                  scale_by_learning_rate(learning_rate), trace(momentum, nesterov))


def novograd(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.25,
             eps: float = 1e-6, eps_root: float = 0.0,
             weight_decay: float = 0.0) -> GradientTransformation:
    """NovoGrad (Ginsburg et al.), as optax.novograd; it needs params.

    >>> opt = sl.optim.novograd(1e-2)
    >>> w = sl.tensor([1.0, 2.0])
    >>> w, state = opt.step(sl.tensor([1.0, 0.5]), opt.init(w), w)
    >>> w
    """
    return _named("novograd", scale_by_novograd(b1, b2, eps, eps_root, weight_decay),
                  scale_by_learning_rate(learning_rate))


def fromage(learning_rate: ScalarOrSchedule, min_norm: float = 1e-6) -> GradientTransformation:
    """Fromage (Bernstein et al.): the trust ratio, then lr / sqrt(1 + lr ** 2) and the
    matching shrink of the parameters, as optax.fromage.

    >>> opt = sl.optim.fromage(1e-2)
    >>> w = sl.tensor([1.0, 2.0])
    >>> w, state = opt.step(sl.tensor([1.0, 0.5]), opt.init(w), w)
    >>> w
    """
    if not callable(learning_rate):
        mult = 1 / (1 + learning_rate ** 2) ** 0.5
        return _named("fromage", scale_by_trust_ratio(min_norm),
                      scale_by_learning_rate(learning_rate * mult),
                      add_decayed_weights(mult - 1))

    def mult_lr(count):
        return 1 / (1 + learning_rate(count) ** 2) ** 0.5

    return _named("fromage", scale_by_trust_ratio(min_norm),
                  scale_by_learning_rate(lambda c: mult_lr(c) * learning_rate(c)),
                  add_decayed_weights(lambda c: mult_lr(c) - 1))


def sign_sgd(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    """SignSGD: -lr * sign(g), as optax.sign_sgd.

    >>> opt = sl.optim.sign_sgd(0.1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> w, state = opt.step(sl.tensor([3.0, -0.5]), opt.init(w), w)
    >>> w
    """
    return _named("sign_sgd", scale_by_sign(), scale_by_learning_rate(learning_rate))


def noisy_sgd(learning_rate: ScalarOrSchedule, eta: float = 0.01, gamma: float = 0.55,
              key: Any = None, *, seed: int | None = None) -> GradientTransformation:
    """SGD with annealed Gaussian noise (Neelakantan et al.), as optax.noisy_sgd: with the
    same key, the same noise as optax's.

    >>> opt = sl.optim.noisy_sgd(0.1, key=0)
    >>> w = sl.tensor([1.0, 2.0])
    >>> w, state = opt.step(sl.tensor([3.0, -0.5]), opt.init(w), w)
    >>> state[0].count
    """
    return _named("noisy_sgd", add_noise(eta, gamma, key, seed=seed),
                  scale_by_learning_rate(learning_rate))


def sm3(learning_rate: float, momentum: float = 0.9) -> GradientTransformation:
    """SM3 (Anil et al.), as optax.sm3 (a constant learning rate).

    >>> opt = sl.optim.sm3(0.1)
    >>> w = sl.tensor([[1.0, 2.0]])
    >>> w, state = opt.step(sl.tensor([[3.0, -0.5]]), opt.init(w), w)
    >>> w
    """
    return _named("sm3", scale_by_sm3(momentum), scale(-learning_rate))


def adan(learning_rate: ScalarOrSchedule, b1: float = 0.98, b2: float = 0.92, b3: float = 0.99,
         eps: float = 1e-8, eps_root: float = 1e-8, weight_decay: float = 0.0,
         mask: Any = None) -> GradientTransformation:
    """Adan (Xie et al.), as optax.adan: scale_by_adan, then decoupled weight decay, then
    the learning rate (eps_root 1e-8 here, 0 in scale_by_adan, as optax's defaults).

    >>> opt = sl.optim.adan(1e-2)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.step(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    return _named("adan", scale_by_adan(b1, b2, b3, eps, eps_root),
                  add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


def rprop(learning_rate: float, eta_minus: float = 0.5, eta_plus: float = 1.2,
          min_step_size: float = 1e-6, max_step_size: float = 50.0) -> GradientTransformation:
    """Rprop (Riedmiller and Braun), as optax.rprop: scale_by_rprop's steps, downhill. As
    optax's, each update is the step computed at the previous call (the first is zero).

    >>> opt = sl.optim.rprop(0.1)
    >>> w = sl.tensor([1.0])
    >>> state = opt.init(w)
    >>> for _ in range(3):
    ...     w, state = opt.step(sl.tensor([1.0]), state, w)
    >>> w
    """
    return _named("rprop", scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size,
                                          max_step_size), scale(-1.0))


def adafactor(learning_rate: ScalarOrSchedule | None = None, min_dim_size_to_factor: int = 128,
              decay_rate: float = 0.8, decay_offset: int = 0,
              multiply_by_parameter_scale: bool = True, clipping_threshold: float | None = 1.0,
              momentum: float | None = None, dtype_momentum: Any = "float32",
              weight_decay_rate: ScalarOrSchedule | None = None, eps: float = 1e-30,
              factored: bool = True, weight_decay_mask: Any = None) -> GradientTransformation:
    """Adafactor (Shazeer and Stern), as optax.adafactor: scale_by_factored_rms, then (each
    unless turned off) clip_by_block_rms(clipping_threshold), the learning rate (not
    negated), scale_by_param_block_rms, an ema of momentum (not debiased), decayed weights,
    and scale(-1). With momentum, the average keeps the parameters' dtype, which must be
    dtype_momentum unless that is None (optax would keep float64 parameters' momentum in
    float32: pass dtype_momentum="float64" or None for them).

    >>> opt = sl.optim.adafactor(1e-2)
    >>> w = sl.tensor([1.0, 2.0, 3.0])
    >>> w, state = opt.step(sl.tensor([2.0, 4.0, 6.0]), opt.init(w), w)
    >>> w
    """
    stages = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
                                    eps)]
    if clipping_threshold is not None:
        stages.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        stages.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        stages.append(scale_by_param_block_rms())
    if momentum is not None:
        average = ema(momentum, debias=False)
        stages.append(average if dtype_momentum is None
                      else _momentum_of_dtype(average, dtype_momentum))
    if weight_decay_rate is not None:
        stages.append(add_decayed_weights(weight_decay_rate, weight_decay_mask))
    stages.append(scale(-1.0))
    return _named("adafactor", *stages)


def _momentum_of_dtype(average: GradientTransformation, dtype) -> GradientTransformation:
    """adafactor's ema, refusing parameters whose dtype is not dtype_momentum (optax would
    keep their average in dtype_momentum; scanlib keeps the parameters' dtype)."""
    try:  # a dtype, its name, a NumPy scalar type (np.float32) or JAX's (jnp.float32)
        want = np.dtype(dtype)
    except TypeError:
        want = np.dtype(dtype.dtype)

    def init(params):
        for i, p in enumerate(params.tensors):
            if np.dtype(p.dtype) != want:
                raise TypeError(
                    f"adafactor.init: {params.path(i)} is {p.dtype} but dtype_momentum is "
                    f"{want}: the momentum keeps the parameters' dtype here (optax would keep "
                    f"it in {want}). Pass dtype_momentum={str(p.dtype)!r}.")
        return average._init(params)

    return GradientTransformation(average.name, init, average._apply, average.outline)


def polyak_sgd(max_learning_rate: float = 1.0, scaling: ScalarOrSchedule = 1.0,
               f_min: float = 0.0, eps: float = 0.0,
               variant: str = "sps") -> GradientTransformation:
    """SGD with the Polyak step size (Loizou et al.), as optax.polyak_sgd: sgd(scaling), then
    scale_by_polyak. Each update needs the loss: `opt.update(grads, state, params,
    value=loss)`.

    >>> opt = sl.optim.polyak_sgd()
    >>> w = sl.tensor([1.0, 2.0])
    >>> loss, g = sl.value_and_grad(lambda w: (w * w).sum())(w)
    >>> w, state = opt.step(g, opt.init(w), w, value=loss)
    >>> w
    """
    return _named("polyak_sgd", sgd(scaling),
                  scale_by_polyak(f_min, max_learning_rate, eps, variant))
