"""optax's schedules: functions of the step count (0 first) giving a learning rate, with
optax's formulas operation for operation. A schedule takes a Python int (it then returns a
Python float, computed in float64) or a 0-d Tensor, as scale_by_learning_rate passes a count
that is traced inside a scan body or jit (it then returns a 0-d Tensor).

Imports tape and ops.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, Callable, Sequence, Union

import numpy as np

from ..ops import elementwise as ew
from ..ops.functions import cos as _cos
from ..ops.special import floor as _floor
from ..tape import Tensor

Schedule = Callable[[Any], Any]
Scalar = Union[float, int, Tensor]  # a hyperparameter: a number (or a 0-d Tensor)

__all__ = ["constant_schedule", "polynomial_schedule", "linear_schedule",
           "piecewise_constant_schedule", "exponential_decay", "cosine_decay_schedule",
           "warmup_cosine_decay_schedule", "join_schedules", "warmup_constant_schedule",
           "warmup_exponential_decay_schedule", "sgdr_schedule", "piecewise_interpolate_schedule",
           "linear_onecycle_schedule", "cosine_onecycle_schedule"]


# Each helper computes on Python numbers with Python's arithmetic and on Tensors with
# scanlib's ops, so one formula serves a count known now and a traced one.
def _is_tensor(*xs):
    return builtins.any(isinstance(x, Tensor) for x in xs)


def _where(c, a, b):
    return ew.where(c, a, b) if _is_tensor(c, a, b) else (a if c else b)


def _minimum(a, b):
    return ew.minimum(a, b) if _is_tensor(a, b) else builtins.min(a, b)


def _maximum(a, b):
    return ew.maximum(a, b) if _is_tensor(a, b) else builtins.max(a, b)


def _clip(x, lo, hi):
    return _minimum(_maximum(x, lo), hi)


def _sign(x):
    return ew.sign(x) if _is_tensor(x) else float((x > 0) - (x < 0))


def constant_schedule(value: Scalar) -> Schedule:
    """value at every step, as optax.constant_schedule.

    >>> sl.optim.constant_schedule(0.1)(100)
    """
    return lambda count: value


def polynomial_schedule(init_value: Scalar, end_value: Scalar, power: Scalar,
                        transition_steps: int, transition_begin: int = 0) -> Schedule:
    """(init - end) * (1 - t / T) ** power + end over t = count - transition_begin in [0, T],
    init before and end after, as optax.polynomial_schedule (T <= 0: init_value always).

    >>> s = sl.optim.polynomial_schedule(1.0, 0.01, power=2, transition_steps=100)
    >>> s(0), s(50), s(100)
    """
    if transition_steps <= 0:
        return lambda count: init_value
    transition_begin = builtins.max(transition_begin, 0)  # optax: a negative begin is 0

    def schedule(count):
        count = _clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * (frac ** power) + end_value

    return schedule


def linear_schedule(init_value: Scalar, end_value: Scalar, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """From init_value to end_value linearly over transition_steps (after transition_begin),
    as optax.linear_schedule: polynomial_schedule with power 1.

    >>> s = sl.optim.linear_schedule(0.0, 1.0, transition_steps=4)
    >>> [s(t) for t in range(6)]
    """
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def piecewise_constant_schedule(init_value: Scalar,
                                boundaries_and_scales: dict | None = None) -> Schedule:
    """init_value times every scale whose boundary the count has reached, as
    optax.piecewise_constant_schedule (scales must be non-negative).

    >>> s = sl.optim.piecewise_constant_schedule(1.0, {100: 0.1, 200: 0.01})
    >>> s(50), s(150), s(250)
    """
    if boundaries_and_scales is not None and not builtins.all(
            scale >= 0.0 for scale in boundaries_and_scales.values()):
        raise ValueError("piecewise_constant_schedule: the scales must be non-negative, got "
                         f"{boundaries_and_scales!r}")

    def schedule(count):
        v = init_value
        for threshold, scale in sorted((boundaries_and_scales or {}).items()):
            indicator = _maximum(0.0, _sign(threshold - count))
            v = v * indicator + (1 - indicator) * scale * v
        return v

    return schedule


def exponential_decay(init_value: Scalar, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: Scalar | None = None) -> Schedule:
    """init_value * decay_rate ** ((count - transition_begin) / transition_steps) (the
    exponent floored when staircase), init_value before transition_begin, and bounded by
    end_value when given, as optax.exponential_decay.

    >>> s = sl.optim.exponential_decay(1.0, transition_steps=10, decay_rate=0.5)
    >>> s(0), s(10), s(15)
    """
    if transition_steps <= 0 or decay_rate == 0:
        return lambda count: init_value
    transition_begin = builtins.max(transition_begin, 0)
    clip_fn = _maximum if decay_rate < 1.0 else _minimum

    def schedule(count):
        decreased_count = count - transition_begin
        p = decreased_count / transition_steps
        if staircase:
            p = _floor(p) if _is_tensor(p) else float(math.floor(p))
        decayed = _where(decreased_count <= 0, init_value,
                         init_value * (ew.power(decay_rate, p) if _is_tensor(p)
                                       else decay_rate ** p))
        return decayed if end_value is None else clip_fn(decayed, end_value)

    return schedule


def cosine_decay_schedule(init_value: Scalar, decay_steps: int, alpha: Scalar = 0.0,
                          exponent: Scalar = 1.0) -> Schedule:
    """init_value * ((1 - alpha) * c ** exponent + alpha) with
    c = (1 + cos(pi * min(count, decay_steps) / decay_steps)) / 2, as
    optax.cosine_decay_schedule.

    >>> s = sl.optim.cosine_decay_schedule(1.0, decay_steps=10, alpha=0.1)
    >>> s(0), s(5), s(20)
    """
    if not decay_steps > 0:
        raise ValueError(f"cosine_decay_schedule: decay_steps must be positive, got "
                         f"{decay_steps!r}")
    decay_steps = float(decay_steps)

    def schedule(count):
        count = _minimum(float(count) if isinstance(count, int) else count, decay_steps)
        angle = math.pi * count / decay_steps
        cosine_decay = 0.5 * (1 + (_cos(angle) if _is_tensor(angle) else math.cos(angle)))
        decayed = (1 - alpha) * cosine_decay ** exponent + alpha
        return init_value * decayed

    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """schedules[i] after boundaries[i - 1], counted from that boundary, as
    optax.join_schedules.

    >>> s = sl.optim.join_schedules([sl.optim.constant_schedule(1.0),
    ...                              sl.optim.linear_schedule(1.0, 0.0, 10)], [5])
    >>> s(4), s(5), s(10)
    """
    schedules, boundaries = list(schedules), list(boundaries)
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(f"join_schedules: {len(schedules)} schedules need "
                         f"{len(schedules) - 1} boundaries, got {len(boundaries)}")

    def schedule(step):
        output = schedules[0](step)
        for boundary, other in zip(boundaries, schedules[1:]):
            output = _where(step < boundary, output, other(step - boundary))
        return output

    return schedule


def warmup_cosine_decay_schedule(init_value: Scalar, peak_value: Scalar, warmup_steps: int,
                                 decay_steps: int, end_value: Scalar = 0.0,
                                 exponent: Scalar = 1.0) -> Schedule:
    """A linear warmup from init_value to peak_value over warmup_steps, then a cosine decay to
    end_value at decay_steps (counted from 0, warmup included), as
    optax.warmup_cosine_decay_schedule.

    >>> s = sl.optim.warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=2, decay_steps=10)
    >>> [round(s(t), 4) for t in (0, 1, 2, 6, 10)]
    """
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules([
        linear_schedule(init_value, peak_value, warmup_steps),
        cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent),
    ], [warmup_steps])


def warmup_constant_schedule(init_value: Scalar, peak_value: Scalar,
                             warmup_steps: int) -> Schedule:
    """A linear warmup from init_value to peak_value over warmup_steps, then peak_value, as
    optax.warmup_constant_schedule.

    >>> s = sl.optim.warmup_constant_schedule(0.0, 1.0, warmup_steps=4)
    >>> [s(t) for t in (0, 2, 4, 100)]
    """
    return linear_schedule(init_value, peak_value, warmup_steps)


def warmup_exponential_decay_schedule(init_value: Scalar, peak_value: Scalar, warmup_steps: int,
                                      transition_steps: int, decay_rate: float,
                                      transition_begin: int = 0, staircase: bool = False,
                                      end_value: Scalar | None = None) -> Schedule:
    """A linear warmup to peak_value, then exponential_decay from it (counted from the end of
    the warmup), as optax.warmup_exponential_decay_schedule.

    >>> s = sl.optim.warmup_exponential_decay_schedule(0.0, 1.0, 2, 10, 0.5)
    >>> [round(s(t), 4) for t in (0, 1, 2, 12)]
    """
    return join_schedules([
        linear_schedule(init_value, peak_value, warmup_steps),
        exponential_decay(peak_value, transition_steps, decay_rate, transition_begin, staircase,
                          end_value),
    ], [warmup_steps])


def sgdr_schedule(cosine_kwargs: Sequence[dict]) -> Schedule:
    """Warm restarts (Loshchilov & Hutter): warmup_cosine_decay_schedule(**kwargs) for each
    dict in turn, each for its decay_steps, as optax.sgdr_schedule.

    >>> s = sl.optim.sgdr_schedule([dict(init_value=0.0, peak_value=1.0, warmup_steps=1,
    ...                                  decay_steps=4)] * 2)
    >>> [round(s(t), 3) for t in range(8)]
    """
    schedules, boundaries, step = [], [], 0
    for kwargs in cosine_kwargs:
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])


def _linear_interpolate(start, end, pct):
    return (end - start) * pct + start


def _cosine_interpolate(start, end, pct):
    angle = math.pi * pct
    return end + (start - end) / 2.0 * ((_cos(angle) if _is_tensor(angle) else math.cos(angle))
                                        + 1)


def piecewise_interpolate_schedule(interpolate_type: str, init_value: Scalar,
                                   boundaries_and_scales: dict | None = None) -> Schedule:
    """init_value times the scales of the boundaries passed, interpolated ('linear' or
    'cosine') from one boundary's value to the next, as optax.piecewise_interpolate_schedule.

    >>> s = sl.optim.piecewise_interpolate_schedule("linear", 1.0, {10: 0.5, 20: 0.5})
    >>> [s(t) for t in (0, 5, 10, 15, 30)]
    """
    if interpolate_type == "linear":
        interpolate = _linear_interpolate
    elif interpolate_type == "cosine":
        interpolate = _cosine_interpolate
    else:
        raise ValueError("piecewise_interpolate_schedule: interpolate_type must be 'cosine' or "
                         f"'linear', got {interpolate_type!r}")
    pairs = sorted((boundaries_and_scales or {}).items())
    if not builtins.all(scale >= 0.0 for _, scale in pairs):
        raise ValueError("piecewise_interpolate_schedule: the scales must be non-negative, got "
                         f"{boundaries_and_scales!r}")
    bounds = [0] + [b for b, _ in pairs]
    # For a Tensor count, int64 bounds, as optax's array of them: the step count (int32 in an
    # optimiser's state) minus a bound is then int64, and the fraction of an interval
    # float64, not float32. A Python count keeps Python numbers.
    bounds_py, bounds64 = bounds, [np.int64(b) for b in bounds]
    values = [init_value]
    for _, scale in pairs:
        values.append(values[-1] * scale)

    def schedule(count):
        total, bounds = 0.0, bounds64 if _is_tensor(count) else bounds_py
        for i in range(len(bounds) - 1):
            inside = (bounds[i] <= count) & (count < bounds[i + 1]) if _is_tensor(count) \
                else float(bounds[i] <= count < bounds[i + 1])
            pct = (count - bounds[i]) / builtins.max(bounds[i + 1] - bounds[i], 1)
            value = interpolate(values[i], values[i + 1], pct)
            total = total + (inside.astype(value.dtype if _is_tensor(value) else "float64")
                             if _is_tensor(inside) else inside) * value
        last = (count >= bounds[-1])
        return total + (last.astype("float64") if _is_tensor(last) else float(last)) * values[-1]

    return schedule


def linear_onecycle_schedule(transition_steps: int, peak_value: Scalar, pct_start: float = 0.3,
                             pct_final: float = 0.85, div_factor: float = 25.0,
                             final_div_factor: float = 1e4) -> Schedule:
    """The one-cycle policy (Smith & Topin) with linear pieces: peak / div_factor up to peak at
    pct_start, back down at pct_final, then to peak / (div_factor * final_div_factor) at
    transition_steps, as optax.linear_onecycle_schedule.

    >>> s = sl.optim.linear_onecycle_schedule(100, 1.0)
    >>> [round(s(t), 4) for t in (0, 30, 85, 100)]
    """
    if transition_steps <= 0:
        raise ValueError("linear_onecycle_schedule: transition_steps must be positive, got "
                         f"{transition_steps!r}")
    return piecewise_interpolate_schedule("linear", peak_value / div_factor, {
        int(pct_start * transition_steps): div_factor,
        int(pct_final * transition_steps): 1.0 / div_factor,
        transition_steps: 1.0 / final_div_factor})


def cosine_onecycle_schedule(transition_steps: int, peak_value: Scalar, pct_start: float = 0.3,
                             div_factor: float = 25.0, final_div_factor: float = 1e4) -> Schedule:
    """The one-cycle policy with cosine pieces: peak / div_factor up to peak at pct_start,
    then down to peak / (div_factor * final_div_factor), as optax.cosine_onecycle_schedule.

    >>> s = sl.optim.cosine_onecycle_schedule(100, 1.0)
    >>> [round(s(t), 4) for t in (0, 30, 100)]
    """
    if transition_steps <= 0:
        raise ValueError("cosine_onecycle_schedule: transition_steps must be positive, got "
                         f"{transition_steps!r}")
    return piecewise_interpolate_schedule("cosine", peak_value / div_factor, {
        int(pct_start * transition_steps): div_factor,
        int(transition_steps): 1.0 / (div_factor * final_div_factor)})
