"""The stages of scanlib.optim, optax's building blocks: chain, scale_by_learning_rate (with
schedules), scale, trace, scale_by_adam, add_decayed_weights and clip_by_global_norm, with
their state classes and the messages for a state that does not fit.

Imports tape, ops, optim.core and optim.wrappers (masked, for add_decayed_weights' mask).
"""

from __future__ import annotations

import collections
from typing import Any, NamedTuple

import numpy as np

from .. import ops
from ..tape import Tensor
from .core import (_FIX_STATE, GradientTransformation, ScalarOrSchedule, _a, _count_zero,
                   _moments, _number, _rebuild, _type)
from .wrappers import masked


class ScaleByAdamState(NamedTuple):
    count: Any  # 0-d int32: steps taken
    mu: Any  # first moments, shaped like params
    nu: Any  # second moments, shaped like params


class TraceState(NamedTuple):
    trace: Any  # momentum, shaped like params


class ScaleByScheduleState(NamedTuple):
    count: Any  # 0-d int32: the step the schedule is asked about next


# --- stages ---------------------------------------------------------------------------------------
def _empty_init(params):
    return ()


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply transformations one after another (the first sees the gradients), as optax.chain;
    the state is the tuple of their states.

    >>> opt = sl.optim.chain(sl.optim.clip_by_global_norm(1.0), sl.optim.sgd(0.1))
    >>> w = sl.tensor([0.0, 0.0])
    >>> w, state = opt.step(sl.tensor([3.0, 4.0]), opt.init(w), w)
    >>> w
    """
    for i, t in enumerate(transforms):
        if not isinstance(t, GradientTransformation):
            raise TypeError(f"chain: argument {i} is {_a(type(t).__name__)}, not a "
                            "GradientTransformation (sl.optim.adam(...), sl.optim.sgd(...))")
    name = f"chain({', '.join(t.name for t in transforms)})"

    def init(params):
        return tuple(t._init(params) for t in transforms)

    def apply(leaves, state, params, ctx, where):
        if type(state) is not tuple or len(state) != len(transforms):  # NamedTuples are not
            n = len(transforms)
            raise TypeError(f"{ctx.who}: {where} must be the tuple of {n} state"
                            f"{'' if n == 1 else 's'} that {opt.name}.init returns, "
                            f"{opt.outline}, but got {_got(state)}.{_made_by(state)} Pass "
                            f"the state that this optimiser's init made: state = "
                            f"opt.init(params).")
        states = []
        for i, (t, s) in enumerate(zip(transforms, state)):
            leaves, s = t._apply(leaves, s, params, ctx, f"{where}[{i}]")
            states.append(s)
        return leaves, tuple(states)

    outline = "(" + ", ".join(t.outline for t in transforms) + ("," if len(transforms) == 1
                                                                else "") + ")"
    opt = GradientTransformation(name, init, apply, outline)  # apply reads its name: sgd
    return opt


def named_chain(*named: tuple[str, GradientTransformation]) -> GradientTransformation:
    """chain with a name for each transformation, as optax.named_chain: the state is an
    OrderedDict {name: that transformation's state}, in their order.

    >>> opt = sl.optim.named_chain(("clip", sl.optim.clip(1.0)), ("sgd", sl.optim.sgd(0.1)))
    >>> list(opt.init(sl.tensor([0.0])))
    """
    for i, pair in enumerate(named):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"named_chain: argument {i} must be a (name, transformation) "
                            f"pair, got {_a(type(pair).__name__)}")
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise ValueError(f"named_chain: the names must differ, got {names}")
    inner = chain(*(t for _, t in named))
    name = f"named_chain({', '.join(names)})"

    def init(params):
        return collections.OrderedDict(zip(names, inner._init(params)))

    def apply(leaves, state, params, ctx, where):
        if not isinstance(state, dict) or list(state) != names:
            raise TypeError(f"{ctx.who}: {where} must be the dict {{{', '.join(names)}}} "
                            f"that {name}.init returns, but got {_got(state)}. Pass the "
                            "state that this optimiser's init made: state = opt.init(params).")
        leaves, states = inner._apply(leaves, tuple(state[n] for n in names), params, ctx,
                                      where)
        return leaves, collections.OrderedDict(zip(names, states))

    return GradientTransformation(name, init, apply, "{" + ", ".join(
        f"{n!r}: {t.outline}" for n, t in named) + "}")


_MADE_BY = {"ScaleByAdamState": "scale_by_adam (adam, adamw, nadam, radam, adamax, yogi)",
            "TraceState": "trace (sgd with momentum, momentum)",
            "ScaleByScheduleState": "scale_by_learning_rate with a schedule"}


def _outline(state) -> str:
    """A state's outline for messages: (ScaleByAdamState, ()) for adam's."""
    if type(state) is tuple:
        inner = ", ".join(_outline(s) for s in state)
        return f"({inner}{',' if len(state) == 1 else ''})"
    return type(state).__name__


def _got(state) -> str:
    if type(state) is not tuple:
        return _a(type(state).__name__)
    if not state:
        return "an empty tuple ()"
    return f"a tuple of {len(state)}, {_outline(state)}"


def _made_by(state) -> str:
    """Which stages make the state classes found in state, for messages."""
    names = dict.fromkeys(_state_classes(state))
    return "".join(f" A {n} is made by {_MADE_BY[n]}." for n in names if n in _MADE_BY)


def _state_classes(state):
    if type(state) is tuple:
        for s in state:
            yield from _state_classes(s)
    else:
        yield type(state).__name__


def _check_state(ctx, state, where, kind):
    if not isinstance(state, kind):
        raise TypeError(f"{ctx.who}: {where} must be a {kind.__name__}, got "
                        f"{type(state).__name__}. {_FIX_STATE}")


def _schedule_value(schedule, count: Tensor, who: str):
    """schedule(count) as a Python float or a 0-d Tensor. The schedule gets the int32 count
    itself, as optax gives it: its arithmetic is int32's (s * s * s wraps past step 1290, as
    in JAX), and its float functions and true division are float32 (`inexact_dtype`), so a
    schedule's value is the float32 one optax computes, cast to each update's dtype."""
    value = schedule(count)
    at = f"at step {int(count.item())}" if count._trace is None else "at a traced step"
    if isinstance(value, Tensor):
        if value.ndim != 0 or np.dtype(value.dtype).kind not in "iuf":
            raise TypeError(f"{who}: the schedule must return a real scalar, but {at} it "
                            f"returned a Tensor {_type(value)}")
        return value
    try:
        return _number(who, "the schedule's value", value.item() if hasattr(value, "item")
                       else value)
    except (TypeError, ValueError):
        raise TypeError(f"{who}: the schedule must return a real number, but {at} it "
                        f"returned {value!r}") from None


def _scaled(leaves, step):
    """step * g for each leaf, with step rounded to g's dtype first (as optax does)."""
    if isinstance(step, Tensor):
        return [step.astype(g.dtype) * g for g in leaves]
    return [step * g for g in leaves]  # a Python float is rounded to g's dtype


def scale_by_learning_rate(learning_rate: ScalarOrSchedule, *,
                           flip_sign: bool = True) -> GradientTransformation:
    """Multiply the updates by -learning_rate (a number, or a schedule: a callable of the step
    count, 0 first), as optax.scale_by_learning_rate.

    >>> opt = sl.optim.scale_by_learning_rate(lambda step: 0.1 / (1 + step))
    >>> updates, state = opt.update(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> updates
    """
    sign = -1.0 if flip_sign else 1.0
    if not callable(learning_rate):
        lr = sign * _number("scale_by_learning_rate", "learning_rate", learning_rate)
        return GradientTransformation(
            "scale_by_learning_rate", _empty_init,
            lambda leaves, state, params, ctx, where: (_scaled(leaves, lr), state))

    def init(params):
        return ScaleByScheduleState(_count_zero(params))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByScheduleState)
        step = _schedule_value(learning_rate, state.count, ctx.who)
        return _scaled(leaves, -step if sign < 0 else step), ScaleByScheduleState(
            state.count + 1)

    return GradientTransformation("scale_by_learning_rate(schedule)", init, apply,
                                  "ScaleByScheduleState")


def scale(step_size: float) -> GradientTransformation:
    """Multiply the updates by step_size (a number), as optax.scale: `chain(..., scale(-lr))`
    is gradient descent at rate lr.

    >>> opt = sl.optim.scale(-0.5)
    >>> updates, state = opt.update(sl.tensor([1.0, -2.0]), opt.init(sl.tensor([0.0, 0.0])))
    >>> updates
    """
    if callable(step_size):
        raise TypeError("scale: step_size must be a number; for a schedule use "
                        "scale_by_learning_rate(schedule).")
    factor = _number("scale", "step_size", step_size)
    return GradientTransformation(
        "scale", _empty_init,
        lambda leaves, state, params, ctx, where: (_scaled(leaves, factor), state))


def trace(decay: float, nesterov: bool = False,
          accumulator_dtype: Any = None) -> GradientTransformation:
    """Momentum: t = g + decay * t, the update is t (g + decay * t with nesterov), as
    optax.trace.

    >>> opt = sl.optim.trace(0.9)
    >>> updates, state = opt.update(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> state.trace
    """
    if accumulator_dtype is not None:
        raise TypeError("trace: accumulator_dtype is not supported; the trace keeps the "
                        "parameters' dtype. Leave accumulator_dtype: Any = None.")
    decay = _number("trace", "decay", decay)

    def init(params):
        return TraceState(_rebuild(params, [ops.zeros_like(p) for p in params.tensors]))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, TraceState)
        traces = _moments(ctx.who, state.trace, f"{where}.trace", ctx.grads)
        new = [g + decay * t for g, t in zip(leaves, traces)]
        out = [g + decay * t for g, t in zip(leaves, new)] if nesterov else new
        return out, TraceState(_rebuild(ctx.grads, new))

    return GradientTransformation("trace", init, apply, "TraceState")


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                  eps_root: float = 0.0, mu_dtype: Any = None, *,
                  nesterov: bool = False) -> GradientTransformation:
    """Adam's direction m_hat / (sqrt(v_hat + eps_root) + eps), with optax.scale_by_adam's
    bias correction; the learning rate is not applied (see adam). nesterov: NAdam's
    m_hat = b1 * m / (1 - b1 ** (t + 1)) + (1 - b1) * g / (1 - b1 ** t).

    >>> opt = sl.optim.scale_by_adam()
    >>> updates, state = opt.update(sl.tensor([0.5, -2.0]), opt.init(sl.tensor([0.0, 0.0])))
    >>> updates
    """
    who = "scale_by_adam"
    if mu_dtype is not None:
        raise TypeError(f"{who}: mu_dtype is not supported; the moments keep the parameters' "
                        "dtype. Leave mu_dtype: Any = None.")
    b1, b2 = _number(who, "b1", b1), _number(who, "b2", b2)
    eps, eps_root = _number(who, "eps", eps), _number(who, "eps_root", eps_root)

    def init(params):
        def zeros():  # one buffer per moment: a scan carry must not hold one array twice
            return _rebuild(params, [ops.zeros_like(p) for p in params.tensors])

        return ScaleByAdamState(_count_zero(params), zeros(), zeros())

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByAdamState)
        mu = _moments(ctx.who, state.mu, f"{where}.mu", ctx.grads)
        nu = _moments(ctx.who, state.nu, f"{where}.nu", ctx.grads)
        mu = [(1 - b1) * g + b1 * m for g, m in zip(leaves, mu)]
        nu = [(1 - b2) * (g * g) + b2 * v for g, v in zip(leaves, nu)]
        count = state.count + 1
        corrections = {}  # per dtype: 1 - b ** count, as optax computes it, in m's dtype
        out = []
        for g, m, v in zip(leaves, mu, nu):
            if m.dtype not in corrections:
                corrections[m.dtype] = _bias_corrections(count, m.dtype, b1, b2) + (
                    _bias_corrections(count + 1, m.dtype, b1) if nesterov else [])
            c1, c2 = corrections[m.dtype][:2]
            v_hat = v / c2
            if not (isinstance(eps_root, float) and eps_root == 0.0):
                v_hat = v_hat + eps_root
            if nesterov:
                m_hat = b1 * (m / corrections[m.dtype][2]) + (1 - b1) * (g / c1)
            else:
                m_hat = m / c1
            out.append(m_hat / (ops.sqrt(v_hat) + eps))
        return out, ScaleByAdamState(count, _rebuild(ctx.grads, mu), _rebuild(ctx.grads, nu))

    return GradientTransformation(who, init, apply, "ScaleByAdamState")


def _bias_corrections(count: Tensor, dtype, *decays) -> list:
    """1 - b ** count for each decay b, computed in float32 (float64 for float64 moments) and
    then cast to dtype, as optax does: b ** count in float16 would round b2 = 0.999 to
    0.99902 and be 1% off."""
    compute = np.promote_types(dtype, np.float32)
    t = count.astype(compute)
    return [(1 - b ** t).astype(dtype) for b in decays]


class WeightDecaySchedule(NamedTuple):
    count: Any  # 0-d int32: the step the weight decay's schedule is asked about next


def add_decayed_weights(weight_decay: ScalarOrSchedule = 0.0,
                        mask: Any = None) -> GradientTransformation:
    """Add weight_decay * params to the updates (decoupled weight decay), as
    optax.add_decayed_weights; it needs params. weight_decay may be a schedule; mask (a
    tree of bools shaped like params, or a callable of them) limits it to some parameters.

    >>> opt = sl.optim.add_decayed_weights(0.1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> updates, state = opt.update(sl.tensor([0.0, 0.0]), opt.init(w), w)
    >>> updates
    """
    who = "add_decayed_weights"
    scheduled = callable(weight_decay)
    decay = None if scheduled else _number(who, "weight_decay", weight_decay)

    def init(params):
        return WeightDecaySchedule(_count_zero(params)) if scheduled else ()

    def apply(leaves, state, params, ctx, where):
        if params is None:
            raise TypeError(f"{ctx.who}: add_decayed_weights needs params; pass them: "
                            "opt.update(grads, state, params).")
        if scheduled:
            _check_state(ctx, state, where, WeightDecaySchedule)
            s = _schedule_value(weight_decay, state.count, ctx.who)
            state = WeightDecaySchedule(state.count + 1)
        else:
            s = decay
            if isinstance(s, float) and s == 0.0:
                return leaves, state
        if isinstance(s, Tensor):
            return [g + s.astype(g.dtype) * p for g, p in zip(leaves, params.tensors)], state
        return [g + s * p for g, p in zip(leaves, params.tensors)], state

    opt = GradientTransformation(who, init, apply,
                                 "WeightDecaySchedule" if scheduled else "()")
    if mask is None:
        return opt
    return masked(opt, mask)


def _sum_of_squares(leaves):
    """The sum over leaves of sum(x * x), the squared global norm (optax.tree.norm squared;
    optim's leaves are real)."""
    total = None
    for x in leaves:
        s = ops.sum(x * x)
        total = s if total is None else total + s
    return total


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all updates by max_norm / norm when their joint L2 norm is at least max_norm
    (below it they pass untouched), as optax.clip_by_global_norm.

    Equal to optax's up to a few ulps, not bit for bit: the sum of squares runs in another
    order than XLA's, and XLA computes t / norm as t * (1 / norm).

    >>> opt = sl.optim.clip_by_global_norm(1.0)
    >>> g = {"a": sl.tensor([3.0]), "b": sl.tensor([4.0])}
    >>> updates, state = opt.update(g, opt.init(g))
    >>> updates
    """
    max_norm = _number("clip_by_global_norm", "max_norm", max_norm)

    def apply(leaves, state, params, ctx, where):
        if not leaves:
            return leaves, state
        norm = ops.sqrt(_sum_of_squares(leaves))
        below = norm < max_norm
        if below._trace is None:  # concrete: decide here, and leave the updates untouched
            if bool(below):
                return leaves, state
            return [(g / norm.astype(g.dtype)) * max_norm for g in leaves], state
        safe = ops.where(below, ops.ones_like(norm), norm)  # no 0/0 in the unused branch
        return [ops.where(below, g, (g / safe.astype(g.dtype)) * max_norm)
                for g in leaves], state

    return GradientTransformation("clip_by_global_norm", _empty_init, apply)
