"""optax's stages that work on each parameter as a whole (its norm, or one accumulator per
axis), with their state classes: scale_by_novograd, scale_by_sm3, scale_by_trust_ratio; and
the two that only scale, scale_by_sign and scale_by_schedule.

Imports tape, ops, optim.core, optim.transforms and optim.scaling.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .. import ops
from .core import (_FIX_STATE, GradientTransformation, _count_zero, _flatten, _moments,
                   _rebuild, _select, _type)
from .scaling import _no_mu_dtype, _numbers, _zeros
from .transforms import (ScaleByScheduleState, _check_state, _empty_init, _scaled,
                         _schedule_value)


class ScaleByNovogradState(NamedTuple):
    count: Any
    mu: Any  # shaped like params
    nu: Any  # one 0-d value per parameter


class ScaleBySM3State(NamedTuple):
    mu: Any  # per parameter, a list of one vector per axis
    nu: Any  # shaped like params


ScaleByTrustRatioState = tuple  # optax's is an EmptyState; scanlib's empty state is ()


def scale_by_novograd(b1: float = 0.9, b2: float = 0.25, eps: float = 1e-8,
                      eps_root: float = 0.0, weight_decay: float = 0.0, mu_dtype: Any = None
                      ) -> GradientTransformation:
    """NovoGrad's direction: a second moment per parameter (of its squared norm), and
    m = b1 * m + g / (sqrt(nu + eps_root) + eps) + weight_decay * p, as
    optax.scale_by_novograd (the first step sets nu and m without decay); it needs params.

    >>> opt = sl.optim.scale_by_novograd()
    >>> w = sl.tensor([1.0, 0.0])
    >>> updates, state = opt.update(sl.tensor([3.0, 4.0]), opt.init(w), w)
    >>> state.nu
    """
    who = "scale_by_novograd"
    _no_mu_dtype(who, mu_dtype)
    b1, b2, eps, eps_root, weight_decay = _numbers(who, b1=b1, b2=b2, eps=eps,
                                                   eps_root=eps_root,
                                                   weight_decay=weight_decay)

    def init(params):
        nu = _rebuild(params, [ops.zeros((), dtype=p.dtype, device=p.device)
                               for p in params.tensors])
        return ScaleByNovogradState(_count_zero(params), _zeros(params), nu)

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByNovogradState)
        if params is None:
            raise TypeError(f"{ctx.who}: scale_by_novograd needs params; pass them: "
                            "opt.update(grads, state, params).")
        mu = _moments(ctx.who, state.mu, f"{where}.mu", ctx.grads)
        nu = _per_parameter(ctx, state.nu, f"{where}.nu")
        count = state.count + 1
        first = count == 1
        squares = [ops.sqrt(ops.sum(g * g)) ** 2 for g in leaves]  # optax: norm(g) ** 2
        nu = [_select(first, s.astype(n.dtype), (1 - b2) * s + b2 * n)
              for s, n in zip(squares, nu)]
        added = [g / (ops.sqrt(n + eps_root) + eps) + weight_decay * p
                 for g, p, n in zip(leaves, params.tensors, nu)]
        mu = [_select(first, a, b1 * m + a) for a, m in zip(added, mu)]
        return mu, ScaleByNovogradState(count, _rebuild(ctx.grads, mu),
                                        _rebuild(ctx.grads, nu))

    return GradientTransformation(who, init, apply, "ScaleByNovogradState")


def _per_parameter(ctx, tree, where) -> list:
    """A state entry with one 0-d value per parameter (novograd's nu), checked."""
    flat = _flatten(tree, where, ctx.who)
    if flat.treedef != ctx.grads.treedef:
        raise TypeError(f"{ctx.who}: {where} must have the structure of grads, with one 0-d "
                        f"value per parameter. {_FIX_STATE}")
    for i, (leaf, g) in enumerate(zip(flat.tensors, ctx.grads.tensors)):
        if leaf.shape != () or leaf.dtype != g.dtype:
            raise TypeError(f"{ctx.who}: {flat.path(i)} is {_type(leaf)} but must be a 0-d "
                            f"{g.dtype} value for {ctx.grads.path(i)}. {_FIX_STATE}")
    return flat.tensors


def scale_by_sm3(b1: float = 0.9, b2: float = 1.0, eps: float = 1e-8) -> GradientTransformation:
    """SM3's memory-efficient adaptive scaling: one accumulator vector per axis of each
    parameter, then momentum b1, as optax.scale_by_sm3.

    >>> opt = sl.optim.scale_by_sm3()
    >>> updates, state = opt.update(sl.tensor([[1.0, 2.0]]), opt.init(sl.tensor([[0.0, 0.0]])))
    >>> updates
    """
    who = "scale_by_sm3"
    b1, b2, eps = _numbers(who, b1=b1, b2=b2, eps=eps)
    coeffs = (1.0 - b2 if b2 != 1.0 else 1.0, b2)

    def init(params):
        mu = _rebuild(params, [[ops.zeros((p.shape[i],), dtype=p.dtype, device=p.device)
                                for i in range(p.ndim)] for p in params.tensors])
        return ScaleBySM3State(mu, _zeros(params))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleBySM3State)
        vectors = _flatten(state.mu, f"{where}.mu", ctx.who).tensors
        want = [(g.shape[i],) for g in leaves for i in range(g.ndim)]
        if [v.shape for v in vectors] != want:
            raise TypeError(f"{ctx.who}: {where}.mu must hold, for each parameter, one vector "
                            f"per axis (shapes {want}), got {[v.shape for v in vectors]}. "
                            f"{_FIX_STATE}")
        nu = _moments(ctx.who, state.nu, f"{where}.nu", ctx.grads)
        out, new_mu, k = [], [], 0
        for g, v in zip(leaves, nu):
            mu = [ops.reshape(vectors[k + i], [1] * i + [g.shape[i]] + [1] * (g.ndim - i - 1))
                  for i in range(g.ndim)]
            k += g.ndim
            if g.ndim == 0:
                raise TypeError(f"{ctx.who}: scale_by_sm3 needs parameters of at least one "
                                f"axis, but {ctx.grads.path(len(out))} is 0-d; reshape it to "
                                "(1,) or optimise it with another optimiser (multi_transform).")
            smallest = mu[0]
            for m in mu[1:]:
                smallest = ops.minimum(smallest, m)
            accum = coeffs[0] * (g * g) + coeffs[1] * smallest
            up = g * ops.where(accum > 0, ops.rsqrt(accum + eps), 0.0)
            out.append((1 - b1) * up + b1 * v)
            new_mu.append([accum if g.ndim < 2 else
                           ops.max(accum, axis=tuple(j for j in range(g.ndim) if j != i))
                           for i in range(g.ndim)])
        return out, ScaleBySM3State(_rebuild(ctx.grads, new_mu), _rebuild(ctx.grads, out))

    return GradientTransformation(who, init, apply, "ScaleBySM3State")


# --- stateless and schedule stages -------------------------------------------------------------
def _safe_norm(x, min_norm: float):
    """optax.safe_norm: the L2 norm, min_norm where it is at most min_norm (with a gradient
    that stays finite at 0)."""
    norm = ops.sqrt(ops.sum(x * x))
    small = norm <= min_norm
    x = ops.where(small, ops.ones_like(x), x)
    return ops.where(small, min_norm, ops.sqrt(ops.sum(x * x)))


def scale_by_trust_ratio(min_norm: float = 0.0, trust_coefficient: float = 1.0,
                         eps: float = 0.0) -> GradientTransformation:
    """Scale each parameter's update by trust_coefficient * |p| / (|u| + eps) (1 where either
    norm is 0), LARS's and LAMB's trust ratio, as optax.scale_by_trust_ratio; it needs params.

    >>> opt = sl.optim.scale_by_trust_ratio()
    >>> w = sl.tensor([3.0, 4.0])
    >>> updates, state = opt.update(sl.tensor([0.0, 0.5]), opt.init(w), w)
    >>> updates
    """
    who = "scale_by_trust_ratio"
    min_norm, trust_coefficient, eps = _numbers(who, min_norm=min_norm,
                                                trust_coefficient=trust_coefficient, eps=eps)

    def apply(leaves, state, params, ctx, where):
        if params is None:
            raise TypeError(f"{ctx.who}: scale_by_trust_ratio needs params; pass them: "
                            "opt.update(grads, state, params).")
        out = []
        for u, p in zip(leaves, params.tensors):
            param_norm, update_norm = _safe_norm(p, min_norm), _safe_norm(u, min_norm)
            ratio = trust_coefficient * param_norm / (update_norm + eps)
            zero = ops.logical_or(param_norm == 0.0, update_norm == 0.0)
            out.append(u * ops.where(zero, ops.ones((), dtype=p.dtype, device=p.device),
                                     ratio))
        return out, state

    return GradientTransformation(who, _empty_init, apply)


def scale_by_sign() -> GradientTransformation:
    """sign(g), as optax.scale_by_sign.

    >>> sl.optim.scale_by_sign().update(sl.tensor([2.0, -0.5, 0.0]), ())[0]
    """
    return GradientTransformation(
        "scale_by_sign", _empty_init,
        lambda leaves, state, params, ctx, where: ([ops.sign(g) for g in leaves], state))


def scale_by_schedule(step_size_fn: Callable[[Any], Any]) -> GradientTransformation:
    """Multiply the updates by step_size_fn(count) (count from 0), as optax.scale_by_schedule:
    no sign flip (scale_by_learning_rate flips it).

    >>> opt = sl.optim.scale_by_schedule(lambda count: 0.5 ** count)
    >>> updates, state = opt.update(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> updates, state.count
    """
    if not callable(step_size_fn):
        raise TypeError(f"scale_by_schedule: step_size_fn must be a callable of the step "
                        f"count, got {step_size_fn!r}; for a constant use scale(step_size).")

    def init(params):
        return ScaleByScheduleState(_count_zero(params))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByScheduleState)
        step = _schedule_value(step_size_fn, state.count, ctx.who)
        return _scaled(leaves, step), ScaleByScheduleState(state.count + 1)

    return GradientTransformation("scale_by_schedule", init, apply, "ScaleByScheduleState")

