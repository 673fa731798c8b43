"""optax's elementwise scaling stages, each with optax's arithmetic in optax's order and its
state class: scale_by_rms, scale_by_stddev, scale_by_rss, scale_by_adamax, scale_by_amsgrad,
scale_by_lion, scale_by_radam, scale_by_belief, scale_by_yogi, scale_by_adadelta, and the
moments' helpers they share (optax.tree's update_moment and bias_correction). scale_by_adam is
in optim.transforms; the stages that work on a parameter as a whole in optim.blockwise.

Imports tape, ops, optim.core and optim.transforms.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import ops
from ..tape import Tensor
from .core import GradientTransformation, _count_zero, _moments, _number, _rebuild
from .transforms import ScaleByAdamState, _check_state


class ScaleByAdanState(NamedTuple):
    m: Any  # the average of the gradients, shaped like params
    v: Any  # the average of the gradients' differences
    n: Any  # the average of the squared term
    g: Any  # the previous step's gradients
    t: Any  # 0-d int32: steps taken


class ScaleByRpropState(NamedTuple):
    step_sizes: Any  # each parameter's own step size
    prev_updates: Any  # the step computed at the previous update


class ScaleByRssState(NamedTuple):
    sum_of_squares: Any  # shaped like params


class ScaleByRmsState(NamedTuple):
    nu: Any  # shaped like params


class ScaleByRmsWithCountState(NamedTuple):
    count: Any  # 0-d int32
    nu: Any


class ScaleByRStdDevState(NamedTuple):
    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class ScaleByAmsgradState(NamedTuple):
    count: Any
    mu: Any
    nu: Any
    nu_max: Any


class ScaleByLionState(NamedTuple):
    count: Any
    mu: Any


class ScaleByBeliefState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class ScaleByAdaDeltaState(NamedTuple):
    e_g: Any
    e_x: Any




# --- helpers: optax.tree's moments and bias correction, on flat lists ---------------------------
def _zeros(params):
    return _rebuild(params, [ops.zeros_like(p) for p in params.tensors])


def _full(params, value: float):
    return _rebuild(params, [ops.full_like(p, value) for p in params.tensors])


def _power(g, order: int):
    return g * g if order == 2 else g  # JAX's g ** 2 is g * g (integer_pow)


def _moment(leaves, moments, decay: float, order: int):
    """(1 - decay) * g ** order + decay * t, as optax.tree.update_moment."""
    return [(1 - decay) * _power(g, order) + decay * t for g, t in zip(leaves, moments)]


def _debias(moments, decay: float, count: Tensor):
    """t / (1 - decay ** count), the correction computed in float32 (float64 for float64
    moments) and cast to the moment's dtype, as optax.tree.bias_correction."""
    cache, out = {}, []
    for t in moments:
        if t.dtype not in cache:
            c = count.astype(np.promote_types(t.dtype, np.float32))
            cache[t.dtype] = (1 - decay ** c).astype(t.dtype)
        out.append(t / cache[t.dtype])
    return out


def _nesterov_mu(mu, leaves, b1: float, count_inc: Tensor):
    """optax's nesterov mu_hat: b1 * debias(mu, count + 1) + (1 - b1) * debias(g, count)."""
    return [b1 * m + (1 - b1) * g for m, g in
            zip(_debias(mu, b1, count_inc + 1), _debias(leaves, b1, count_inc))]


def _no_mu_dtype(who: str, mu_dtype):
    if mu_dtype is not None:
        raise TypeError(f"{who}: mu_dtype is not supported; the moments keep the parameters' "
                        "dtype. Leave mu_dtype: Any = None.")


def _numbers(who: str, **values) -> list:
    return [_number(who, k, v) for k, v in values.items()]


# --- rms / stddev / rss (rmsprop, adagrad) -------------------------------------------------------
def scale_by_rss(initial_accumulator_value: float = 0.1,
                 eps: float = 1e-7) -> GradientTransformation:
    """Adagrad's scaling: s = s + g ** 2, the update g / sqrt(s + eps) (0 where s is 0), as
    optax.scale_by_rss.

    >>> opt = sl.optim.scale_by_rss()
    >>> updates, state = opt.update(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> state.sum_of_squares
    """
    who = "scale_by_rss"
    init_value, eps = _numbers(who, initial_accumulator_value=initial_accumulator_value,
                               eps=eps)

    def init(params):
        return ScaleByRssState(_full(params, init_value))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByRssState)
        sums = _moments(ctx.who, state.sum_of_squares, f"{where}.sum_of_squares", ctx.grads)
        sums = [g * g + t for g, t in zip(leaves, sums)]
        out = [ops.where(t > 0, ops.rsqrt(t + eps), 0.0) * g for t, g in zip(sums, leaves)]
        return out, ScaleByRssState(_rebuild(ctx.grads, sums))

    return GradientTransformation(who, init, apply, "ScaleByRssState")


def _rms_like(who, decay, eps, initial_scale, eps_in_sqrt, bias_correction, centred):
    decay, eps, initial_scale = _numbers(who, decay=decay, eps=eps,
                                         initial_scale=initial_scale)
    if centred:
        plain, counted = ScaleByRStdDevState, ScaleByRStdDevWithCountState
    else:
        plain, counted = ScaleByRmsState, ScaleByRmsWithCountState
    kind = counted if bias_correction else plain

    def init(params):
        moments = ([_zeros(params)] if centred else []) + [_full(params, initial_scale)]
        return kind(_count_zero(params), *moments) if bias_correction else kind(*moments)

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, kind)
        nu = _moments(ctx.who, state.nu, f"{where}.nu", ctx.grads)
        nu = _moment(leaves, nu, decay, 2)
        mu = []
        if centred:
            mu = _moment(leaves, _moments(ctx.who, state.mu, f"{where}.mu", ctx.grads),
                         decay, 1)
        mu_hat, nu_hat = mu, nu
        if bias_correction:
            count = state.count + 1
            nu_hat = _debias(nu, decay, count)
            mu_hat = _debias(mu, decay, count) if centred else []
        if centred:
            nu_hat = [n - m * m for m, n in zip(mu_hat, nu_hat)]
        if eps_in_sqrt:
            scaling = [ops.rsqrt(n + eps) for n in nu_hat]
        else:
            scaling = [1 / (ops.sqrt(n) + eps) for n in nu_hat]
        out = [s * g for s, g in zip(scaling, leaves)]
        moments = ([_rebuild(ctx.grads, mu)] if centred else []) + [_rebuild(ctx.grads, nu)]
        new = kind(count, *moments) if bias_correction else kind(*moments)
        return out, new

    return GradientTransformation(who, init, apply, kind.__name__)


def scale_by_rms(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                 eps_in_sqrt: bool = True, bias_correction: bool = False
                 ) -> GradientTransformation:
    """RMSProp's scaling: nu = decay * nu + (1 - decay) * g ** 2, the update
    g / sqrt(nu + eps) (g / (sqrt(nu) + eps) when eps_in_sqrt is False), as
    optax.scale_by_rms; bias_correction divides nu by 1 - decay ** count.

    >>> opt = sl.optim.scale_by_rms()
    >>> updates, state = opt.update(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    return _rms_like("scale_by_rms", decay, eps, initial_scale, eps_in_sqrt,
                     bias_correction, centred=False)


def scale_by_stddev(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                    eps_in_sqrt: bool = True, bias_correction: bool = False
                    ) -> GradientTransformation:
    """Centred RMSProp's scaling: g / sqrt(nu - mu ** 2 + eps) with mu and nu the moving
    averages of g and g ** 2, as optax.scale_by_stddev.

    >>> opt = sl.optim.scale_by_stddev()
    >>> updates, state = opt.update(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> state.mu
    """
    return _rms_like("scale_by_stddev", decay, eps, initial_scale, eps_in_sqrt,
                     bias_correction, centred=True)


# --- Adam's relatives -----------------------------------------------------------------------------
def _adam_state_stage(who, update, init_value: float = 0.0, kind=ScaleByAdamState):
    """A stage whose state is (count, mu, nu) like Adam's; update(leaves, mu, nu, count_inc)
    returns (out, mu, nu)."""
    def init(params):
        return kind(_count_zero(params), _full(params, init_value), _full(params, init_value))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, kind)
        mu = _moments(ctx.who, state.mu, f"{where}.mu", ctx.grads)
        nu = _moments(ctx.who, state.nu, f"{where}.nu", ctx.grads)
        count = state.count + 1
        out, mu, nu = update(leaves, mu, nu, count)
        return out, kind(count, _rebuild(ctx.grads, mu), _rebuild(ctx.grads, nu))

    return GradientTransformation(who, init, apply, kind.__name__)


def scale_by_adamax(b1: float = 0.9, b2: float = 0.999,
                    eps: float = 1e-8) -> GradientTransformation:
    """Adamax's direction: m_hat / u with u = max(|g| + eps, b2 * u), as
    optax.scale_by_adamax (state: ScaleByAdamState).

    >>> opt = sl.optim.scale_by_adamax()
    >>> updates, state = opt.update(sl.tensor([2.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    b1, b2, eps = _numbers("scale_by_adamax", b1=b1, b2=b2, eps=eps)

    def update(leaves, mu, nu, count):
        mu = _moment(leaves, mu, b1, 1)
        nu = [ops.maximum(ops.abs(g) + eps, b2 * t) for g, t in zip(leaves, nu)]
        return [m / v for m, v in zip(_debias(mu, b1, count), nu)], mu, nu

    return _adam_state_stage("scale_by_adamax", update)


def scale_by_amsgrad(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                     eps_root: float = 0.0, mu_dtype: Any = None, bias_correction_mu: bool = True,
                     bias_correction_nu: bool = True) -> GradientTransformation:
    """AMSGrad: Adam's direction with the running maximum of the (bias-corrected) second
    moment, as optax.scale_by_amsgrad.

    >>> opt = sl.optim.scale_by_amsgrad()
    >>> updates, state = opt.update(sl.tensor([2.0]), opt.init(sl.tensor([0.0])))
    >>> state.nu_max
    """
    who = "scale_by_amsgrad"
    _no_mu_dtype(who, mu_dtype)
    b1, b2, eps, eps_root = _numbers(who, b1=b1, b2=b2, eps=eps, eps_root=eps_root)

    def init(params):
        return ScaleByAmsgradState(_count_zero(params), _zeros(params), _zeros(params),
                                   _zeros(params))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByAmsgradState)
        mu, nu, nu_max = (_moments(ctx.who, getattr(state, k), f"{where}.{k}", ctx.grads)
                          for k in ("mu", "nu", "nu_max"))
        mu = _moment(leaves, mu, b1, 1)
        nu = _moment(leaves, nu, b2, 2)
        count = state.count + 1
        mu_hat = _debias(mu, b1, count) if bias_correction_mu else mu
        nu_eff = _debias(nu, b2, count) if bias_correction_nu else nu
        nu_max = [ops.maximum(a, b) for a, b in zip(nu_max, nu_eff)]
        out = [m / (ops.sqrt(v + eps_root) + eps) for m, v in zip(mu_hat, nu_max)]
        return out, ScaleByAmsgradState(count, *(_rebuild(ctx.grads, t)
                                                 for t in (mu, nu, nu_max)))

    return GradientTransformation(who, init, apply, "ScaleByAmsgradState")


def scale_by_lion(b1: float = 0.9, b2: float = 0.99, mu_dtype: Any = None, *, mode: str = "hard",
                  smooth_beta: float = 1.0) -> GradientTransformation:
    """Lion's direction: sign((1 - b1) * g + b1 * m) (tanh(smooth_beta * x) for
    mode='smooth', x clipped at |x| < 1 for 'refined'), then m = (1 - b2) * g + b2 * m, as
    optax.scale_by_lion.

    >>> opt = sl.optim.scale_by_lion()
    >>> updates, state = opt.update(sl.tensor([2.0, -0.1]), opt.init(sl.tensor([0.0, 0.0])))
    >>> updates
    """
    who = "scale_by_lion"
    _no_mu_dtype(who, mu_dtype)
    if mode not in ("hard", "smooth", "refined"):
        raise ValueError(f"{who}: mode must be 'hard', 'smooth' or 'refined', got {mode!r}")
    b1, b2, smooth_beta = _numbers(who, b1=b1, b2=b2, smooth_beta=smooth_beta)

    def comb(g, m):
        x = (1.0 - b1) * g + b1 * m
        if mode == "hard":
            return ops.sign(x)
        if mode == "smooth":
            return ops.tanh(smooth_beta * x)
        return ops.where(ops.abs(x) < 1.0, x, ops.sign(x))

    def init(params):
        return ScaleByLionState(_count_zero(params), _zeros(params))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByLionState)
        mu = _moments(ctx.who, state.mu, f"{where}.mu", ctx.grads)
        out = [comb(g, m) for g, m in zip(leaves, mu)]
        mu = _moment(leaves, mu, b2, 1)
        return out, ScaleByLionState(state.count + 1, _rebuild(ctx.grads, mu))

    return GradientTransformation(who, init, apply, "ScaleByLionState")


def scale_by_radam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                   eps_root: float = 0.0, threshold: float = 5.0, *,
                   nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam: Adam's direction times the rectification r where the variance's
    degrees of freedom ro reach threshold, the bias-corrected momentum before, as
    optax.scale_by_radam (state: ScaleByAdamState).

    >>> opt = sl.optim.scale_by_radam()
    >>> updates, state = opt.update(sl.tensor([2.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    who = "scale_by_radam"
    b1, b2, eps, eps_root, threshold = _numbers(who, b1=b1, b2=b2, eps=eps, eps_root=eps_root,
                                                threshold=threshold)
    ro_inf = 2.0 / (1.0 - b2) - 1.0

    def update(leaves, mu, nu, count):
        mu = _moment(leaves, mu, b1, 1)
        nu = _moment(leaves, nu, b2, 2)
        mu_hat = _nesterov_mu(mu, leaves, b1, count) if nesterov else _debias(mu, b1, count)
        nu_hat = _debias(nu, b2, count)
        rs, out = {}, []
        for m, v in zip(mu_hat, nu_hat):
            if m.dtype not in rs:  # in float32 (float64 for float64 moments), as optax
                t = count.astype(np.promote_types(m.dtype, np.float32))
                b2t = b2 ** t
                ro = ro_inf - 2 * t * b2t / (1 - b2t)
                rectify = ro >= threshold
                ro = ops.where(rectify, ro, ro_inf)  # r unused there: no sqrt of a negative
                r = ops.sqrt((ro - 4.0) * (ro - 2.0) * ro_inf
                             / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro))
                rs[m.dtype] = rectify, r.astype(m.dtype)
            rectify, r = rs[m.dtype]
            out.append(ops.where(rectify, r * m / (ops.sqrt(v + eps_root) + eps), m))
        return out, mu, nu

    return _adam_state_stage(who, update)


def scale_by_belief(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-16,
                    eps_root: float = 1e-16, *, nesterov: bool = False
                    ) -> GradientTransformation:
    """AdaBelief's direction: the second moment is that of g - mu (the belief in the
    gradient), as optax.scale_by_belief.

    >>> opt = sl.optim.scale_by_belief()
    >>> updates, state = opt.update(sl.tensor([2.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    who = "scale_by_belief"
    b1, b2, eps, eps_root = _numbers(who, b1=b1, b2=b2, eps=eps, eps_root=eps_root)

    def update(leaves, mu, nu, count):
        mu = _moment(leaves, mu, b1, 1)
        nu = _moment([g - m for g, m in zip(leaves, mu)], nu, b2, 2)
        nu = [v + eps_root for v in nu]
        mu_hat = _nesterov_mu(mu, leaves, b1, count) if nesterov else _debias(mu, b1, count)
        nu_hat = _debias(nu, b2, count)
        return [m / (ops.sqrt(v) + eps) for m, v in zip(mu_hat, nu_hat)], mu, nu

    return _adam_state_stage(who, update, kind=ScaleByBeliefState)


def scale_by_yogi(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-3,
                  eps_root: float = 0.0, initial_accumulator_value: float = 1e-6
                  ) -> GradientTransformation:
    """Yogi's direction: nu = nu - (1 - b2) * sign(nu - g ** 2) * g ** 2, as
    optax.scale_by_yogi (state: ScaleByAdamState, both moments start at
    initial_accumulator_value).

    >>> opt = sl.optim.scale_by_yogi()
    >>> updates, state = opt.update(sl.tensor([2.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    who = "scale_by_yogi"
    b1, b2, eps, eps_root, init_value = _numbers(
        who, b1=b1, b2=b2, eps=eps, eps_root=eps_root,
        initial_accumulator_value=initial_accumulator_value)

    def update(leaves, mu, nu, count):
        mu = _moment(leaves, mu, b1, 1)
        nu = [v - (1 - b2) * ops.sign(v - g * g) * (g * g) for g, v in zip(leaves, nu)]
        mu_hat, nu_hat = _debias(mu, b1, count), _debias(nu, b2, count)
        return [m / (ops.sqrt(v + eps_root) + eps) for m, v in zip(mu_hat, nu_hat)], mu, nu

    return _adam_state_stage(who, update, init_value)


def scale_by_adadelta(rho: float = 0.9, eps: float = 1e-6) -> GradientTransformation:
    """Adadelta's scaling: sqrt(e_x + eps) / sqrt(e_g + eps) * g with e_g, e_x the moving
    averages of g ** 2 and of the update ** 2, as optax.scale_by_adadelta.

    >>> opt = sl.optim.scale_by_adadelta()
    >>> updates, state = opt.update(sl.tensor([2.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    who = "scale_by_adadelta"
    rho, eps = _numbers(who, rho=rho, eps=eps)

    def init(params):
        return ScaleByAdaDeltaState(_zeros(params), _zeros(params))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByAdaDeltaState)
        e_g = _moments(ctx.who, state.e_g, f"{where}.e_g", ctx.grads)
        e_x = _moments(ctx.who, state.e_x, f"{where}.e_x", ctx.grads)
        e_g = _moment(leaves, e_g, rho, 2)
        out = [ops.sqrt(x + eps) / ops.sqrt(a + eps) * g for g, a, x in zip(leaves, e_g, e_x)]
        e_x = _moment(out, e_x, rho, 2)
        return out, ScaleByAdaDeltaState(_rebuild(ctx.grads, e_g), _rebuild(ctx.grads, e_x))

    return GradientTransformation(who, init, apply, "ScaleByAdaDeltaState")


def scale_by_adan(b1: float = 0.98, b2: float = 0.92, b3: float = 0.99, eps: float = 1e-8,
                  eps_root: float = 0.0) -> GradientTransformation:
    """Adan's direction (Xie et al.), as optax.scale_by_adan: averages of the gradients (m),
    of their differences from the last step's (v) and of (g + (1 - b2) diff) ** 2 (n), each
    bias-corrected; the update (m + (1 - b2) v) / (sqrt(n + eps_root) + eps).

    >>> opt = sl.optim.scale_by_adan()
    >>> updates, state = opt.update(sl.tensor([2.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    who = "scale_by_adan"
    b1, b2, b3, eps, eps_root = _numbers(who, b1=b1, b2=b2, b3=b3, eps=eps, eps_root=eps_root)

    def init(params):
        return ScaleByAdanState(*(_full(params, 0.0) for _ in range(4)), _count_zero(params))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByAdanState)
        m, v, n, g_prev = (_moments(ctx.who, getattr(state, k), f"{where}.{k}", ctx.grads)
                           for k in ("m", "v", "n", "g"))
        first = state.t == 0
        diff = [ops.where(first, ops.zeros_like(g), g - p) for g, p in zip(leaves, g_prev)]
        m, v = _moment(leaves, m, b1, 1), _moment(diff, v, b2, 1)
        n = _moment([g + (1 - b2) * d for g, d in zip(leaves, diff)], n, b3, 2)
        t = state.t + 1
        out = [(mh + (1 - b2) * vh) / (ops.sqrt(nh + eps_root) + eps) for mh, vh, nh in
               zip(_debias(m, b1, t), _debias(v, b2, t), _debias(n, b3, t))]
        return out, ScaleByAdanState(*(_rebuild(ctx.grads, x) for x in (m, v, n, leaves)), t)

    return GradientTransformation(who, init, apply, "ScaleByAdanState")


def scale_by_rprop(learning_rate: float, eta_minus: float = 0.5, eta_plus: float = 1.2,
                   min_step_size: float = 1e-6,
                   max_step_size: float = 50.0) -> GradientTransformation:
    """Rprop's steps, as optax.scale_by_rprop: each parameter's step size grows by eta_plus
    while its gradient keeps its sign and shrinks by eta_minus when it flips (clipped to
    [min_step_size, max_step_size]), the step its size times the gradient's sign. As
    optax's, the update returned is the step computed at the previous call (zero at the
    first, and where the gradient's sign flipped).

    >>> opt = sl.optim.scale_by_rprop(0.1)
    >>> state = opt.init(sl.tensor([0.0]))
    >>> updates, state = opt.update(sl.tensor([2.0]), state)
    >>> opt.update(sl.tensor([2.0]), state)[0]
    """
    who = "scale_by_rprop"
    lr, eta_minus, eta_plus, lo, hi = _numbers(
        who, learning_rate=learning_rate, eta_minus=eta_minus, eta_plus=eta_plus,
        min_step_size=min_step_size, max_step_size=max_step_size)

    def init(params):
        return ScaleByRpropState(_full(params, lr), _full(params, 0.0))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByRpropState)
        sizes = _moments(ctx.who, state.step_sizes, f"{where}.step_sizes", ctx.grads)
        prev = _moments(ctx.who, state.prev_updates, f"{where}.prev_updates", ctx.grads)
        signs = [g * p for g, p in zip(leaves, prev)]
        sizes = [ops.where(s == 0, size, ops.clip(size * ops.where(s > 0, eta_plus, eta_minus),
                                                  lo, hi)) for s, size in zip(signs, sizes)]
        steps = [ops.where(s < 0, ops.zeros_like(g), size * ops.sign(g))
                 for s, g, size in zip(signs, leaves, sizes)]
        out = [ops.where(s < 0, ops.zeros_like(p), p) for s, p in zip(signs, prev)]
        return out, ScaleByRpropState(_rebuild(ctx.grads, sizes), _rebuild(ctx.grads, steps))

    return GradientTransformation(who, init, apply, "ScaleByRpropState")
