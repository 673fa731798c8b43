"""optax's stages that work on each parameter as a whole (its norm, or one accumulator per
axis), with their state classes: scale_by_novograd, scale_by_sm3, scale_by_trust_ratio,
scale_by_factored_rms (Adafactor's), scale_by_param_block_rms; and the two that only scale,
scale_by_sign and scale_by_schedule.

Imports tape, ops, optim.core, optim.transforms and optim.scaling.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

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


class FactoredState(NamedTuple):
    count: Any  # 0-d int32: steps taken
    v_row: Any  # per parameter: its second moment averaged over one axis, or a (1,) zero
    v_col: Any  # ... over the other axis, or a (1,) zero
    v: Any  # per parameter not factored: its second moment, else a (1,) zero


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


def _factored_dims(shape, factored: bool, min_dim_size_to_factor: int):
    """The two largest axes of a parameter to average its second moment over, as optax's
    (np.argsort's order between equal sizes included), or None: not factored."""
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape)
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


def scale_by_factored_rms(factored: bool = True, decay_rate: float = 0.8,
                          step_offset: int = 0, min_dim_size_to_factor: int = 128,
                          epsilon: float = 1e-30,
                          decay_rate_fn: Callable | None = None) -> GradientTransformation:
    """Adafactor's scaling, as optax.scale_by_factored_rms: a parameter with two axes of at
    least min_dim_size_to_factor keeps its second moment as a row and a column average (over
    its two largest axes), any other one whole; the update is g / sqrt(that estimate). The
    decay at step t is decay_rate_fn(t - step_offset, decay_rate), by default
    1 - (t + 1) ** -decay_rate in float32, as optax's.

    >>> opt = sl.optim.scale_by_factored_rms(min_dim_size_to_factor=2)
    >>> w = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> updates, state = opt.update(w, opt.init(w), w)
    >>> state.v_row
    """
    who = "scale_by_factored_rms"
    decay_rate, epsilon = _numbers(who, decay_rate=decay_rate, epsilon=epsilon)
    for name, value in (("step_offset", step_offset),
                        ("min_dim_size_to_factor", min_dim_size_to_factor)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{who}: {name} must be an int, got {value!r}")

    def decay_at(count):
        if decay_rate_fn is not None:
            return decay_rate_fn(count - step_offset, decay_rate)
        t = (count - step_offset + 1).astype(np.float32)
        return 1.0 - t ** (-decay_rate)

    def empty(p):
        return ops.zeros((1,), dtype=p.dtype, device=p.device)

    def init(params):
        rows, cols, whole = [], [], []
        for p in params.tensors:
            dims = _factored_dims(p.shape, factored, min_dim_size_to_factor)
            if dims is None:
                rows.append(empty(p))
                cols.append(empty(p))
                whole.append(ops.zeros_like(p))
                continue
            d1, d0 = dims
            rows.append(ops.zeros(p.shape[:d0] + p.shape[d0 + 1:], dtype=p.dtype,
                                  device=p.device))
            cols.append(ops.zeros(p.shape[:d1] + p.shape[d1 + 1:], dtype=p.dtype,
                                  device=p.device))
            whole.append(empty(p))
        return FactoredState(_count_zero(params), _rebuild(params, rows),
                             _rebuild(params, cols), _rebuild(params, whole))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, FactoredState)
        if params is None:
            raise TypeError(f"{ctx.who}: scale_by_factored_rms needs params (it reads their "
                            "shapes): call update(grads, state, params).")
        rows = _flatten(state.v_row, f"{where}.v_row", ctx.who).tensors
        cols = _flatten(state.v_col, f"{where}.v_col", ctx.who).tensors
        whole = _flatten(state.v, f"{where}.v", ctx.who).tensors
        decay = decay_at(state.count)
        out, new_rows, new_cols, new_whole = [], [], [], []
        for i, (g, p) in enumerate(zip(leaves, params.tensors)):
            dims = _factored_dims(p.shape, factored, min_dim_size_to_factor)
            row, col, v = rows[i], cols[i], whole[i]
            want = ((p.shape[:dims[1]] + p.shape[dims[1] + 1:],
                     p.shape[:dims[0]] + p.shape[dims[0] + 1:], (1,)) if dims is not None
                    else ((1,), (1,), p.shape))
            if (row.shape, col.shape, v.shape) != want:
                raise TypeError(f"{ctx.who}: {where} holds shapes {row.shape}, {col.shape}, "
                                f"{v.shape} for {ctx.grads.path(i)} ({_type(p)}), which needs "
                                f"{want[0]}, {want[1]}, {want[2]}. {_FIX_STATE}")
            sq = g * g + epsilon
            if dims is None:
                v = (decay * v + (1.0 - decay) * sq).astype(p.dtype)
                out.append(g * v ** -0.5)
            else:
                d1, d0 = dims
                row = (decay * row + (1.0 - decay) * ops.mean(sq, axis=d0)).astype(p.dtype)
                col = (decay * col + (1.0 - decay) * ops.mean(sq, axis=d1)).astype(p.dtype)
                reduced_d1 = d1 - 1 if d1 > d0 else d1
                row_factor = (row / ops.mean(row, axis=reduced_d1, keepdims=True)) ** -0.5
                out.append(g * ops.expand_dims(row_factor, d0)
                           * ops.expand_dims(col ** -0.5, d1))
            new_rows.append(row)
            new_cols.append(col)
            new_whole.append(v)
        return out, FactoredState(state.count + 1, _rebuild(ctx.grads, new_rows),
                                  _rebuild(ctx.grads, new_cols), _rebuild(ctx.grads, new_whole))

    return GradientTransformation(who, init, apply, "FactoredState")


def _safe_rms(x, min_rms: float):
    """max(sqrt(mean(x ** 2)), min_rms), as optax.safe_root_mean_squares (its gradient 0 at
    x = 0: the rms is taken of ones there)."""
    rms = ops.sqrt(ops.mean(x * x))
    x = ops.where(rms <= min_rms, ops.ones_like(x), x)
    return ops.where(rms <= min_rms, min_rms, ops.sqrt(ops.mean(x * x)))


def scale_by_param_block_rms(min_scale: float = 1e-3) -> GradientTransformation:
    """Scale each parameter's update by the parameter's root mean square (at least
    min_scale), as optax.scale_by_param_block_rms; it needs params.

    >>> w = sl.tensor([3.0, -4.0])
    >>> sl.optim.scale_by_param_block_rms().update(sl.tensor([1.0, 1.0]), (), w)[0]
    """
    who = "scale_by_param_block_rms"
    min_scale = _numbers(who, min_scale=min_scale)[0]

    def apply(leaves, state, params, ctx, where):
        if params is None:
            raise TypeError(f"{ctx.who}: scale_by_param_block_rms needs params: call "
                            "update(grads, state, params).")
        return [u if p.size == 0 else u * _safe_rms(p, min_scale)  # empty: nothing to scale
                for u, p in zip(leaves, params.tensors)], state

    return GradientTransformation(who, _empty_init, apply)


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

