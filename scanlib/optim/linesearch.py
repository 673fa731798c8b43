"""L-BFGS and the linesearches, as optax's: scale_by_lbfgs (the direction),
scale_by_zoom_linesearch (a step size with sufficient decrease and small curvature, Nocedal and
Wright's algorithms 3.5 and 3.6 with Hager and Zhang's approximate decrease),
scale_by_backtracking_linesearch (sufficient decrease), value_and_grad_from_state (the value and
gradient a linesearch found, reused at the next step) and the optimiser lbfgs.

The linesearch reads update's extra arguments: `value=` and `grad=` at the current parameters
and `value_fn=`, the objective (further keyword arguments go to value_fn). Its loop is a
while_loop and its two phases a cond, so an update under `jit` or in a scan body traces once.

Imports ops, autodiff, control, branching, optim.core, optim.transforms and optim.tree.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import ops
from ..autodiff import grad as grad_of, value_and_grad
from ..branching import cond
from ..control import while_loop
from ..tape import Tensor
from . import tree
from .core import (_FIX_STATE, GradientTransformation, _check_like, _count_zero, _extra, _flatten,
                   _moments, _number, _rebuild)
from .transforms import _check_state, _sum_of_squares, chain, scale, scale_by_learning_rate


# --- tree arithmetic on flat lists of leaves ----------------------------------------------------
def _vdot(xs, ys):
    """The sum over leaves of vdot(x, y), x conjugated, real part (optax.tree.vdot)."""
    total = None
    for x, y in zip(xs, ys):
        d = ops.real(ops.vdot(x, y))
        total = d if total is None else total + d
    return total


def _add_scale(xs, s, ys):
    """x + s * y leaf by leaf, in each x's dtype (optax.tree.add_scale then cast_like)."""
    return [(x + s * y).astype(x.dtype) for x, y in zip(xs, ys)]


def _where(c, xs, ys):
    return [ops.where(c, x, y) for x, y in zip(xs, ys)]


def _static_int(who: str, name: str, value, least: int) -> int:
    """An int argument that sizes arrays or loops: a Python or NumPy int, or a concrete 0-d
    integer Tensor (what inject_hyperparams makes of it), at least `least`."""
    if isinstance(value, Tensor) and value.ndim == 0 and np.dtype(value.dtype).kind in "iu":
        if value._trace is not None:
            raise TypeError(f"{who}: {name} sizes the optimiser's arrays, so it cannot be "
                            "traced; with inject_hyperparams, name it in static_args.")
        value = int(value.item())
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{who}: {name} must be an int >= {least}, got {value!r}")
    return int(value)


# --- scale_by_lbfgs ----------------------------------------------------------------------------
class ScaleByLBFGSState(NamedTuple):
    count: Any  # 0-d int32: steps taken
    params: Any  # the parameters at the last update, shaped like params
    updates: Any  # the updates (gradients) at the last update
    diff_params_memory: Any  # per parameter, [memory_size, *shape]: past parameter changes
    diff_updates_memory: Any  # ... past update (gradient) changes
    weights_memory: Any  # [memory_size]: 1 / <change of updates, change of params>


def _weights_dtype(params):
    """The dtype of the weights' memory: the parameters' widest float (float32 at least),
    what optax's jnp.zeros(memory_size) is under JAX's precision for those parameters."""
    return np.result_type(np.float32, *[np.dtype(p.dtype) for p in params.tensors])


def scale_by_lbfgs(memory_size: int = 10, scale_init_precond: bool = True
                   ) -> GradientTransformation:
    """The L-BFGS direction, as optax.scale_by_lbfgs: the updates times an approximation of
    the inverse Hessian built from the last memory_size changes of the parameters and of the
    updates (Nocedal and Wright's two-loop recursion), the initial approximation gamma * I
    with gamma = <dg, dw> / <dg, dg> (scale_init_precond; at the first step min(1, 1 / |g|)).
    It needs params. Chain it with a linesearch (lbfgs does).

    >>> opt = sl.optim.scale_by_lbfgs()
    >>> w = sl.tensor([1.0, 2.0])
    >>> opt.update(sl.tensor([2.0, 4.0]), opt.init(w), w)[0]
    """
    who = "scale_by_lbfgs"
    m = _static_int(who, "memory_size", memory_size, 1)

    def stacked(p):
        return ops.zeros((m,) + tuple(p.shape), dtype=p.dtype, device=p.device)

    def init(params):
        zeros = _rebuild(params, [ops.zeros_like(p) for p in params.tensors])
        device = params.tensors[0].device if params.tensors else None
        return ScaleByLBFGSState(
            _count_zero(params), zeros, zeros,
            _rebuild(params, [stacked(p) for p in params.tensors]),
            _rebuild(params, [stacked(p) for p in params.tensors]),
            ops.zeros((m,), dtype=_weights_dtype(params), device=device))

    def memories(ctx, tree, where_, params):
        flat = _flatten(tree, where_, ctx.who).tensors
        want = [(m,) + tuple(p.shape) for p in params.tensors]
        if [tuple(x.shape) for x in flat] != want:
            raise TypeError(f"{ctx.who}: {where_} must hold, for each parameter, its last "
                            f"{m} changes (shapes {want}), got "
                            f"{[tuple(x.shape) for x in flat]}. {_FIX_STATE}")
        return flat

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByLBFGSState)
        if params is None:
            raise TypeError(f"{ctx.who}: scale_by_lbfgs needs params: call "
                            "update(grads, state, params, ...).")
        old_params = _moments(ctx.who, state.params, f"{where}.params", ctx.grads)
        old_updates = _moments(ctx.who, state.updates, f"{where}.updates", ctx.grads)
        dw_mem = memories(ctx, state.diff_params_memory, f"{where}.diff_params_memory", params)
        du_mem = memories(ctx, state.diff_updates_memory, f"{where}.diff_updates_memory",
                          params)
        rhos = ops.as_tensor(state.weights_memory)
        count = ops.as_tensor(state.count)
        idx, prev = count % m, (count - 1) % m
        # 1. the memory, with the change since the last update (none at the first)
        dw = [p - q for p, q in zip(params.tensors, old_params)]
        du = [u - v for u, v in zip(leaves, old_updates)]
        curvature = _vdot(du, dw)
        nonzero = curvature != 0.0  # the divisions below never divide by 0 (no warning)
        weight = ops.where(nonzero, 1.0 / ops.where(nonzero, curvature, 1.0), 0.0)
        started = count > 0
        dw = [ops.where(started, x, ops.zeros_like(x)) for x in dw]
        du = [ops.where(started, x, ops.zeros_like(x)) for x in du]
        weight = ops.where(started, weight, ops.zeros_like(weight))
        dw_mem = [mem.at[prev].set(x) for mem, x in zip(dw_mem, dw)]
        du_mem = [mem.at[prev].set(x) for mem, x in zip(du_mem, du)]
        rhos = rhos.at[prev].set(weight.astype(rhos.dtype))
        # 2. gamma, the scale of the initial inverse Hessian
        if scale_init_precond:
            numerator = _vdot(du, dw)
            denominator = _sum_of_squares(du)
            positive = denominator > 0.0
            gamma = ops.where(positive, numerator / ops.where(positive, denominator, 1.0), 1.0)
            norm = ops.sqrt(_sum_of_squares([ops.stop_gradient(u) for u in leaves]))
            # min(1, 1 / |g|): 1 where |g| is 0, as 1 / 0 = inf would give
            first = ops.where(norm > 0.0, ops.minimum(1.0, 1.0 / ops.where(norm > 0.0, norm,
                                                                            1.0)), 1.0)
            gamma = ops.where(started, gamma, first)
        else:
            gamma = 1.0
        # 3. the two-loop recursion, oldest change last on the way down, first on the way up
        order = [(idx + j) % m for j in range(m)]
        vec, alphas = list(leaves), [None] * m
        for j in reversed(range(m)):
            i = order[j]
            alphas[j] = rhos[i] * _vdot([x[i] for x in dw_mem], vec)
            vec = _add_scale(vec, -alphas[j], [x[i] for x in du_mem])
        vec = [(gamma * v).astype(v.dtype) for v in vec]
        for j in range(m):
            i = order[j]
            beta = rhos[i] * _vdot([x[i] for x in du_mem], vec)
            vec = _add_scale(vec, alphas[j] - beta, [x[i] for x in dw_mem])
        new = ScaleByLBFGSState(count + 1, _rebuild(ctx.grads, list(params.tensors)),
                                _rebuild(ctx.grads, list(leaves)), _rebuild(ctx.grads, dw_mem),
                                _rebuild(ctx.grads, du_mem), rhos)
        return vec, new

    return GradientTransformation(who, init, apply, "ScaleByLBFGSState")


# --- scale_by_zoom_linesearch -------------------------------------------------------------------
class ZoomLinesearchInfo(NamedTuple):
    num_linesearch_steps: Any  # 0-d int32
    decrease_error: Any  # how far the step is from sufficient decrease (0: satisfied)
    curvature_error: Any  # how far from small curvature (0: satisfied)


class ScaleByZoomLinesearchState(NamedTuple):
    learning_rate: Any  # the step size found at the last update
    value: Any  # the objective's value there
    grad: Any  # its gradient there, shaped like params
    info: Any  # ZoomLinesearchInfo


class _Search(NamedTuple):
    """The zoom linesearch's loop state (optax's ZoomLinesearchState, params and updates
    closed over)."""

    count: Any
    stepsize: Any
    value: Any
    grad: Any  # a list of leaves
    slope: Any
    decrease_error: Any
    curvature_error: Any
    interval_found: Any
    done: Any
    failed: Any
    low: Any
    value_low: Any
    slope_low: Any
    high: Any
    value_high: Any
    slope_high: Any
    cubic_ref: Any
    value_cubic_ref: Any
    safe_stepsize: Any
    safe_value: Any
    safe_grad: Any  # a list of leaves


def _finite(*values):
    """The values with each non-finite one replaced by 0, and whether all were finite: the
    interpolations below then do no inf or NaN arithmetic (no warning, no NaN gradient) and
    give NaN where an input was not finite, as their arithmetic would."""
    ok = None
    for v in values:
        f = ops.isfinite(v)
        ok = f if ok is None else ok & f
    return [ops.where(ok, v, 0.0) for v in values], ok


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The critical point of the cubic through (a, fa), (b, fb), (c, fc) with slope fpa at a,
    as scipy's and optax's; NaN where there is none (a zero divisor, a negative radical, an
    input that is not finite: optax's arithmetic then gives NaN or a point at an end of the
    interval, which the zoom rejects alike), computed without dividing by zero or taking
    the square root of 0 (whose derivative, infinite, would make the gradient NaN)."""
    (a, fa, fpa, b, fb, c, fc), finite = _finite(a, fa, fpa, b, fb, c, fc)
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    safe = ops.where(denom == 0, 1.0, denom)
    big_a = (dc ** 2 * rb - db ** 2 * rc) / safe
    big_b = (-(dc ** 3) * rb + db ** 3 * rc) / safe
    radical = big_b * big_b - 3.0 * big_a * fpa
    ok = finite & (denom != 0) & (radical >= 0) & (big_a != 0)
    positive = radical > 0
    root = ops.where(positive, ops.sqrt(ops.where(positive, radical, 1.0)), 0.0)
    x = a + (-big_b + root) / ops.where(big_a != 0, 3.0 * big_a, 1.0)
    return ops.where(ok, x, np.nan)


def _quadmin(a, fa, fpa, b, fb):
    """The critical point of the quadratic through (a, fa), (b, fb) with slope fpa at a; NaN
    where there is none (as _cubicmin)."""
    (a, fa, fpa, b, fb), finite = _finite(a, fa, fpa, b, fb)
    db = b - a
    curvature = (fb - fa - fpa * db) / ops.where(db == 0, 1.0, db ** 2)
    ok = finite & (db != 0) & (curvature != 0)
    return ops.where(ok, a - fpa / ops.where(ok, 2.0 * curvature, 1.0), np.nan)


def _linesearch_inputs(ctx, who, params):
    """What a linesearch reads besides the updates: (value_fn, value, grad leaves, value_fn's
    keyword arguments, the dtype of its scalars), each checked."""
    if params is None:
        raise TypeError(f"{ctx.who}: {who} needs params: call update(grads, state, params, "
                        "value=..., grad=..., value_fn=...).")
    value_fn = _extra(ctx, who, "value_fn", "the objective, a function of params.")
    value = _extra(ctx, who, "value", "the objective at the current parameters.")
    grad = _extra(ctx, who, "grad", "the gradient at the current parameters.")
    return (value_fn, value, _extra_like_grads(ctx, grad), _value_fn_kwargs(ctx, who, value_fn),
            _value_dtype(params.tensors))


def _extra_like_grads(ctx, grad):
    """update's grad= as leaves, checked to be shaped like the gradients the stage sees."""
    flat = _flatten(grad, "grad", ctx.who)
    _check_like(ctx.who, flat, ctx.grads,
                "grad= must be shaped like the gradients this stage is given (inside masked or "
                "multi_transform, the parameters the linesearch sees, not all of them).")
    return flat.tensors


def _value_fn_kwargs(ctx, who, value_fn):
    """The extra arguments value_fn takes (optax feeds it those its signature names); any
    other one besides value, grad and value_fn is an error."""
    others = {k: v for k, v in ctx.extra.items() if k not in ("value", "grad", "value_fn")}
    try:  # as optax: the names value_fn's signature lists (not a **kwargs catch-all)
        names = {k for k, p in inspect.signature(value_fn).parameters.items()
                 if p.kind is not p.VAR_KEYWORD}
    except (TypeError, ValueError):
        names = set()
    left = sorted(k for k in others if k not in names)
    if left:
        raise TypeError(f"{ctx.who}: {who}: these keyword arguments of update are not "
                        f"arguments of value_fn: {left}. Pass only value=, grad=, value_fn= "
                        "and the keyword arguments value_fn takes.")
    return {k: v for k, v in others.items() if k not in left}


def scale_by_zoom_linesearch(max_linesearch_steps: int, max_learning_rate: float | None = None,
                             tol: float = 0.0, increase_factor: float = 2.0,
                             slope_rtol: float = 1e-4, curv_rtol: float = 0.9,
                             approx_dec_rtol: float | None = 1e-6,
                             stepsize_precision: float = 1e-5,
                             initial_guess_strategy: str = "keep",
                             verbose: bool = False) -> GradientTransformation:
    """A step size along the updates that gives sufficient decrease and small curvature
    (the strong Wolfe conditions, with Hager and Zhang's approximate decrease), found by
    growing the step until an interval holds one and then zooming into it by cubic,
    quadratic or bisection steps, as optax.scale_by_zoom_linesearch; the updates are scaled
    by it. Each update needs `value=` and `grad=` at the current parameters and `value_fn=`,
    the objective; the value and gradient at the step taken are kept in the state (read them
    back with value_and_grad_from_state). initial_guess_strategy: "keep" starts from the
    last step size, "one" from 1.

    >>> opt = sl.optim.chain(sl.optim.sgd(1.0),
    ...                      sl.optim.scale_by_zoom_linesearch(max_linesearch_steps=15))
    >>> f = lambda w: (w * w).sum()
    >>> w = sl.tensor([1.0, 2.0])
    >>> value, grad = sl.value_and_grad(f)(w)
    >>> updates, state = opt.update(grad, opt.init(w), w, value=value, grad=grad, value_fn=f)
    >>> sl.optim.apply_updates(w, updates)
    """
    who = "scale_by_zoom_linesearch"
    max_linesearch_steps = _static_int(who, "max_linesearch_steps", max_linesearch_steps, 0)
    if initial_guess_strategy not in ("one", "keep"):
        raise ValueError(f"{who}: initial_guess_strategy must be 'one' or 'keep', got "
                         f"{initial_guess_strategy!r}")
    if verbose:
        raise NotImplementedError(f"{who}: verbose=True (optax's printed diagnostics) is not "
                                  "supported; read state.info instead.")
    steps = int(max_linesearch_steps)
    tol, increase_factor, slope_rtol, curv_rtol, threshold = (
        _number(who, k, v) for k, v in (
            ("tol", tol), ("increase_factor", increase_factor), ("slope_rtol", slope_rtol),
            ("curv_rtol", curv_rtol), ("stepsize_precision", stepsize_precision)))
    max_lr = None if max_learning_rate is None else _number(who, "max_learning_rate",
                                                            max_learning_rate)
    approx = None if approx_dec_rtol is None else _number(who, "approx_dec_rtol",
                                                          approx_dec_rtol)

    def init(params):
        dtype = _value_dtype(params.tensors)
        device = params.tensors[0].device if params.tensors else None
        inf = ops.full((), np.inf, dtype=dtype, device=device)
        return ScaleByZoomLinesearchState(
            ops.ones((), dtype=dtype, device=device), inf,
            _rebuild(params, [ops.zeros_like(p) for p in params.tensors]),
            ZoomLinesearchInfo(_count_zero(params), inf, inf))

    def decrease_error(stepsize, value, slope, value_init, slope_init):
        err = value - value_init - slope_rtol * stepsize * slope_init
        if approx is not None:
            approx_err = slope - (2 * slope_rtol - 1.0) * slope_init
            delta = value - value_init - approx * ops.abs(value_init)
            err = ops.minimum(ops.maximum(approx_err, delta), err)
        err = ops.maximum(err, 0.0)
        return ops.where(ops.isnan(err), np.inf, err)

    def curvature_error(slope, slope_init):
        err = ops.maximum(ops.abs(slope) - curv_rtol * ops.abs(slope_init), 0.0)
        return ops.where(ops.isnan(err), np.inf, err)

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByZoomLinesearchState)
        value_fn, value0, grad0, fn_kwargs, dtype = _linesearch_inputs(ctx, who, params)
        ws, us = list(params.tensors), list(leaves)
        vg = value_and_grad(value_fn)

        def scalar(x):
            return ops.as_tensor(x).astype(dtype)

        def on_line(stepsize):
            value, grad = vg(_rebuild(params, _add_scale(ws, stepsize, us)), **fn_kwargs)
            grad = _flatten(grad, "the gradient of value_fn", ctx.who).tensors
            return scalar(value), [g.astype(w.dtype) for g, w in zip(grad, ws)], \
                scalar(_vdot([ops.conj(g) for g in grad], us))

        value_init = scalar(value0)
        slope_init = scalar(_vdot(us, grad0))
        zero = ops.zeros((), dtype=dtype)
        false = ops.zeros((), dtype=bool)
        guess = (ops.ones((), dtype=dtype) if initial_guess_strategy == "one"
                 else scalar(state.learning_rate))
        inf = ops.full((), np.inf, dtype=dtype)
        grad0 = [g.astype(w.dtype) for g, w in zip(grad0, ws)]
        start = _Search(ops.zeros((), dtype=np.int32), zero, value_init, grad0, slope_init,
                        inf, inf, false, false, false, zero, value_init, slope_init, zero,
                        value_init, slope_init, zero, value_init, zero, value_init, grad0)

        def search(s):
            grown = ops.where(s.count == 0, guess, increase_factor * s.stepsize)
            if max_lr is not None:
                at_max = grown >= max_lr
                grown = ops.minimum(grown, max_lr)
            else:
                at_max = false
            value, grad, slope = on_line(grown)
            dec = decrease_error(grown, value, slope, value_init, slope_init)
            curv = curvature_error(slope, slope_init)
            error = ops.maximum(dec, curv)
            safe = dec <= tol
            high_to_new = (dec > 0.0) | ((value >= s.value) & (s.count > 0))
            low_to_new = (slope >= 0.0) & ~high_to_new
            low, value_low, slope_low = _where(low_to_new, [grown, value, slope],
                                               [s.stepsize, s.value, s.slope])
            high, value_high, slope_high = _where(low_to_new, [s.stepsize, s.value, s.slope],
                                                  [grown, value, slope])
            found = high_to_new | low_to_new | (error <= tol)
            done = (error <= tol) | (at_max & ~found)
            return _Search(
                s.count + 1, grown, value, grad, slope, dec, curv, found, done,
                (s.count + 1 >= steps) & ~done, low, value_low, slope_low, high, value_high,
                slope_high, low, value_low, ops.where(safe, grown, s.safe_stepsize),
                ops.where(safe, value, s.safe_value), _where(safe, grad, s.safe_grad))

        def zoom(s):
            delta = ops.abs(s.high - s.low)
            left, right = ops.minimum(s.high, s.low), ops.maximum(s.high, s.low)
            cubic = _cubicmin(s.low, s.value_low, s.slope_low, s.high, s.value_high,
                              s.cubic_ref, s.value_cubic_ref)
            use_cubic = (cubic > left + 0.2 * delta) & (cubic < right - 0.2 * delta)
            quad = _quadmin(s.low, s.value_low, s.slope_low, s.high, s.value_high)
            use_quad = ~use_cubic & (quad > left + 0.1 * delta) & (quad < right - 0.1 * delta)
            middle = ops.where(use_cubic, cubic, s.cubic_ref)
            middle = ops.where(use_quad, quad, middle)
            middle = ops.where(~use_cubic & ~use_quad, (s.low + s.high) / 2.0, middle)
            value, grad, slope = on_line(middle)
            dec = decrease_error(middle, value, slope, value_init, slope_init)
            curv = curvature_error(slope, slope_init)
            error = ops.maximum(dec, curv)
            better = (dec <= tol) & (value < s.safe_value)
            safe_stepsize = ops.where(better, middle, s.safe_stepsize)
            done = error <= tol
            high_to_middle = (dec > 0.0) | (value >= s.value_low)
            high_to_low = (slope * (s.high - s.low) >= 0.0) & ~high_to_middle
            high = _where(high_to_middle, [middle, value, slope],
                          [s.high, s.value_high, s.slope_high])
            high = _where(high_to_low, [s.low, s.value_low, s.slope_low], high)
            low = _where(~high_to_middle, [middle, value, slope],
                         [s.low, s.value_low, s.slope_low])
            ref = _where(high_to_middle | high_to_low, [s.high, s.value_high],
                         [s.low, s.value_low])
            gave_up = (s.count + 1 >= steps) | ((delta <= threshold) & (safe_stepsize > 0.0))
            return _Search(
                s.count + 1, middle, value, grad, slope, dec, curv, s.interval_found, done,
                gave_up & ~done, *low, *high, *ref, safe_stepsize,
                ops.where(better, value, s.safe_value), _where(better, grad, s.safe_grad))

        def safe_step(s):
            use_safe = (s.safe_stepsize > 0.0) | ops.isinf(s.decrease_error)
            return s._replace(stepsize=ops.where(use_safe, s.safe_stepsize, s.stepsize),
                              value=ops.where(use_safe, s.safe_value, s.value),
                              grad=_where(use_safe, s.safe_grad, s.grad))

        def step(s):
            s = cond(s.interval_found, zoom, search, s)
            return cond(s.failed, safe_step, lambda x: x, s)

        final = while_loop(lambda s: ~(s.done | s.failed), step, start)
        out = [(u * final.stepsize).astype(u.dtype) for u in us]
        return out, ScaleByZoomLinesearchState(
            final.stepsize, final.value, _rebuild(ctx.grads, final.grad),
            ZoomLinesearchInfo(final.count, final.decrease_error, final.curvature_error))

    return GradientTransformation(who, init, apply, "ScaleByZoomLinesearchState")


def _value_dtype(leaves):
    """The real dtype of the first parameter (optax's dtype for the linesearch's scalars)."""
    if not leaves:
        return np.dtype(np.float64)
    return np.real(np.empty(0, leaves[0].dtype)).dtype


# --- scale_by_backtracking_linesearch ----------------------------------------------------------
class BacktrackingLinesearchInfo(NamedTuple):
    num_linesearch_steps: Any  # 0-d int32
    decrease_error: Any  # how far the step is from sufficient decrease (0: satisfied)


class ScaleByBacktrackingLinesearchState(NamedTuple):
    learning_rate: Any  # the step size found at the last update
    value: Any  # the objective's value there
    grad: Any  # its gradient there (store_grad), else None
    info: Any  # BacktrackingLinesearchInfo


class _Backtrack(NamedTuple):
    learning_rate: Any
    value: Any
    grad: Any  # a list of leaves
    decrease_error: Any
    count: Any


def scale_by_backtracking_linesearch(max_backtracking_steps: int, slope_rtol: float = 1e-4,
                                     decrease_factor: float = 0.8,
                                     increase_factor: float = 1.5,
                                     max_learning_rate: float = 1.0, atol: float = 0.0,
                                     rtol: float = 0.0, store_grad: bool = False,
                                     verbose: bool = False) -> GradientTransformation:
    """A step size with sufficient decrease (Armijo), as
    optax.scale_by_backtracking_linesearch: start from min(increase_factor * the last step
    size, max_learning_rate) and multiply by decrease_factor until f(w + s u) <= (1 + rtol)
    f(w) + s slope_rtol <g, u> + atol, at most max_backtracking_steps times (a step whose
    value is not finite is 0); the updates are scaled by it. Each update needs `value=` and
    `grad=` at the current parameters and `value_fn=`; store_grad keeps the gradient at the
    step taken for value_and_grad_from_state.

    >>> opt = sl.optim.chain(sl.optim.sgd(1.0), sl.optim.scale_by_backtracking_linesearch(
    ...     max_backtracking_steps=15, store_grad=True))
    >>> f = lambda w: (w * w).sum()
    >>> w = sl.tensor([1.0, 2.0])
    >>> value, grad = sl.value_and_grad(f)(w)
    >>> updates, state = opt.update(grad, opt.init(w), w, value=value, grad=grad, value_fn=f)
    >>> sl.optim.apply_updates(w, updates)
    """
    who = "scale_by_backtracking_linesearch"
    max_backtracking_steps = _static_int(who, "max_backtracking_steps",
                                         max_backtracking_steps, 0)
    if verbose:
        raise NotImplementedError(f"{who}: verbose=True (optax's printed diagnostics) is not "
                                  "supported; read state.info instead.")
    steps = int(max_backtracking_steps)
    slope_rtol, decrease_factor, increase_factor, max_lr, atol, rtol = (
        _number(who, k, v) for k, v in (
            ("slope_rtol", slope_rtol), ("decrease_factor", decrease_factor),
            ("increase_factor", increase_factor), ("max_learning_rate", max_learning_rate),
            ("atol", atol), ("rtol", rtol)))

    def init(params):
        dtype = _value_dtype(params.tensors)
        device = params.tensors[0].device if params.tensors else None
        inf = ops.full((), np.inf, dtype=dtype, device=device)
        grad = (_rebuild(params, [ops.zeros_like(p) for p in params.tensors]) if store_grad
                else None)
        return ScaleByBacktrackingLinesearchState(
            ops.ones((), dtype=dtype, device=device), inf, grad,
            BacktrackingLinesearchInfo(_count_zero(params), inf))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ScaleByBacktrackingLinesearchState)
        value_fn, value, grad, fn_kwargs, dtype = _linesearch_inputs(ctx, who, params)
        ws, us = list(params.tensors), list(leaves)
        value = ops.as_tensor(value).astype(dtype)
        slope = _vdot(us, [ops.conj(g) for g in grad]).astype(dtype)
        gradient = (grad_of(value_fn) if store_grad else None)

        def body(s):
            lr = ops.where(s.count > 0, decrease_factor * s.learning_rate, s.learning_rate)
            tree = _rebuild(params, _add_scale(ws, lr, us))
            new_value = ops.as_tensor(value_fn(tree, **fn_kwargs)).astype(dtype)
            err = new_value - (1.0 + rtol) * value - lr * slope_rtol * slope
            err = ops.maximum(ops.where(ops.isnan(err), np.inf, err), 0.0)
            new_grad = s.grad
            if store_grad:
                def at_step(t):
                    g = _flatten(gradient(t, **fn_kwargs), "the gradient of value_fn",
                                 ctx.who).tensors
                    return [x.astype(w.dtype) for x, w in zip(g, ws)]
                new_grad = cond((err <= atol) | (s.count == steps), at_step,
                                lambda t: s.grad, tree)
            return _Backtrack(lr, new_value, new_grad, err, s.count + 1)

        start = _Backtrack(
            ops.minimum(increase_factor * ops.as_tensor(state.learning_rate).astype(dtype),
                        max_lr),
            value, [ops.zeros_like(w) for w in ws], ops.full((), np.inf, dtype=dtype),
            ops.zeros((), dtype=np.int32))
        final = while_loop(lambda s: ~(s.decrease_error <= atol) & (s.count <= steps), body,
                           start)
        lr = ops.where(ops.isinf(final.decrease_error), ops.zeros_like(final.learning_rate),
                       final.learning_rate)
        out = [(u * lr).astype(u.dtype) for u in us]
        return out, ScaleByBacktrackingLinesearchState(
            lr, final.value, _rebuild(ctx.grads, final.grad) if store_grad else None,
            BacktrackingLinesearchInfo(final.count, final.decrease_error))

    return GradientTransformation(who, init, apply, "ScaleByBacktrackingLinesearchState")


# --- value_and_grad_from_state and lbfgs --------------------------------------------------------
def value_and_grad_from_state(value_fn: Callable) -> Callable:
    """A function like value_and_grad(value_fn) with a keyword `state=`: it returns the value
    and gradient a linesearch stored in the optimiser's state (computed at the parameters it
    stepped to, the current ones) and computes them only where that value is not finite (the
    first step), as optax.value_and_grad_from_state.

    >>> f = lambda w: (w * w).sum()
    >>> opt = sl.optim.lbfgs()
    >>> w = sl.tensor([1.0, 2.0])
    >>> state = opt.init(w)
    >>> vg = sl.optim.value_and_grad_from_state(f)
    >>> value, grad = vg(w, state=state)
    >>> updates, state = opt.update(grad, state, w, value=value, grad=grad, value_fn=f)
    """
    computed = value_and_grad(value_fn)

    def from_state(params, *args, state, **kwargs):
        value, grad = tree.get(state, "value"), tree.get(state, "grad")
        if value is None or grad is None:
            raise ValueError(
                "value_and_grad_from_state: no value or no gradient in the state; use an "
                "optimiser with a linesearch that stores them (lbfgs, "
                "scale_by_zoom_linesearch, scale_by_backtracking_linesearch(store_grad=True)).")
        value = ops.as_tensor(value)
        finite = ~ops.isinf(value) & ~ops.isnan(value)
        if not isinstance(finite, Tensor) or finite._trace is None:
            return (value, grad) if bool(finite) else computed(params, *args, **kwargs)
        return cond(finite, lambda _: (value, grad),
                    lambda p: computed(p, *args, **kwargs), params)

    return from_state


def lbfgs(learning_rate: Any = None, memory_size: int = 10, scale_init_precond: bool = True,
          linesearch: GradientTransformation | None | str = "zoom") -> GradientTransformation:
    """L-BFGS, as optax.lbfgs: scale_by_lbfgs, then -learning_rate (or -1), then the
    linesearch, by default scale_by_zoom_linesearch(max_linesearch_steps=20,
    initial_guess_strategy="one"); None for none. Each update needs the objective:
    `opt.update(grad, state, params, value=value, grad=grad, value_fn=f)`, with value and
    grad best taken from value_and_grad_from_state(f).

    >>> f = lambda w: ((w - 3.0) ** 2).sum()
    >>> opt = sl.optim.lbfgs()
    >>> w = sl.tensor([1.0, 2.0])
    >>> state = opt.init(w)
    >>> vg = sl.optim.value_and_grad_from_state(f)
    >>> for _ in range(3):
    ...     value, grad = vg(w, state=state)
    ...     updates, state = opt.update(grad, state, w, value=value, grad=grad, value_fn=f)
    ...     w = sl.optim.apply_updates(w, updates)
    >>> w
    """
    if isinstance(linesearch, str):
        if linesearch != "zoom":
            raise ValueError(f"lbfgs: linesearch must be a GradientTransformation, None or "
                             f"'zoom' (the default), got {linesearch!r}")
        linesearch = scale_by_zoom_linesearch(max_linesearch_steps=20,
                                              initial_guess_strategy="one")
    base = scale(-1.0) if learning_rate is None else scale_by_learning_rate(learning_rate)
    stages = [scale_by_lbfgs(memory_size, scale_init_precond), base]
    if linesearch is not None:
        stages.append(linesearch)
    opt = chain(*stages)
    opt.name = "lbfgs"
    return opt


__all__ = ["scale_by_lbfgs", "scale_by_zoom_linesearch", "scale_by_backtracking_linesearch",
           "value_and_grad_from_state", "lbfgs"]
