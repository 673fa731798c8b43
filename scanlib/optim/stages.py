"""optax's smaller stages and helpers, with its state classes: identity, set_to_zero, clip,
clip_by_block_rms, adaptive_grad_clip, zero_nans, ema, apply_every, add_noise,
keep_params_nonnegative, scale_by_polyak; and the functions global_norm, safe_norm,
incremental_update, periodic_update, per_example_global_norm_clip,
per_example_layer_norm_clip and scale_gradient.

Imports tape, ops, linalg, random, pytree, optim.core, optim.transforms and optim.scaling.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import linalg, ops, pytree
from ..ops import elementwise as _ew
from .. import random as _random
from ..tape import Tensor
from ..tape.types import PyTree
from .core import (GradientTransformation, _count_zero, _extra, _moments, _number, _rebuild,
                   _select_tree)
from .scaling import _debias
from .transforms import _check_state, _empty_init, _sum_of_squares
from .wrappers import masked, multi_transform


class EmaState(NamedTuple):
    count: Any  # 0-d int32
    ema: Any  # shaped like params


class ZeroNansState(NamedTuple):
    found_nan: Any  # one 0-d bool per parameter: whether its update held a NaN


class ApplyEvery(NamedTuple):
    count: Any  # 0-d int32, counted modulo k
    grad_acc: Any  # shaped like params


class AddNoiseState(NamedTuple):
    count: Any  # 0-d int32
    rng_key: Any  # the key for the next step's noise (uint32[2], jax.random.key_data's)


def _stateless(name, fn):
    return GradientTransformation(
        name, _empty_init, lambda leaves, state, params, ctx, where: (fn(leaves), state))


def identity() -> GradientTransformation:
    """The updates unchanged, as optax.identity.

    >>> sl.optim.identity().update(sl.tensor([1.0]), ())[0]
    """
    return _stateless("identity", lambda leaves: leaves)


def set_to_zero() -> GradientTransformation:
    """Zero updates (parameters left as they are), as optax.set_to_zero: with
    multi_transform, freezes a group of parameters.

    >>> sl.optim.set_to_zero().update(sl.tensor([1.0]), ())[0]
    """
    return _stateless("set_to_zero", lambda leaves: [ops.zeros_like(g) for g in leaves])


def freeze(mask: Any) -> GradientTransformation:
    """Zero updates for the parameters where mask is True (a tree of bools shaped like the
    parameters, a prefix of it, or one bool), the others passed through, as optax.freeze:
    masked(set_to_zero(), mask).

    >>> p = {"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}
    >>> opt = sl.optim.chain(sl.optim.freeze({"w": False, "b": True}), sl.optim.sgd(0.1))
    >>> opt.update({"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}, opt.init(p))[0]
    """
    return masked(set_to_zero(), mask)


def selective_transform(optimizer: GradientTransformation, *,
                        freeze_mask: Any) -> GradientTransformation:
    """optimizer on the parameters where freeze_mask is False, zero updates where it is True,
    as optax.selective_transform: multi_transform({"train": optimizer, "freeze":
    set_to_zero()}, the labels freeze_mask gives).

    >>> p = {"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}
    >>> opt = sl.optim.selective_transform(sl.optim.sgd(0.1),
    ...                                    freeze_mask={"w": False, "b": True})
    >>> opt.update({"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}, opt.init(p))[0]
    """
    return multi_transform({"train": optimizer, "freeze": set_to_zero()},
                           lambda params: pytree.tree_map(
                               lambda m: "freeze" if m else "train", freeze_mask))


def clip(max_delta: float) -> GradientTransformation:
    """Clip each update to [-max_delta, max_delta], as optax.clip.

    >>> sl.optim.clip(1.0).update(sl.tensor([3.0, -0.5, -2.0]), ())[0]
    """
    d = _number("clip", "max_delta", max_delta)
    return _stateless("clip", lambda leaves: [ops.clip(g, -d, d) for g in leaves])


def clip_by_block_rms(threshold: float) -> GradientTransformation:
    """Divide each parameter's update by max(1, rms(u) / threshold), as
    optax.clip_by_block_rms.

    >>> sl.optim.clip_by_block_rms(1.0).update(sl.tensor([3.0, -4.0]), ())[0]
    """
    t = _number("clip_by_block_rms", "threshold", threshold)
    return _stateless("clip_by_block_rms", lambda leaves: [
        u / ops.maximum(1.0, ops.sqrt(ops.mean(u * u)) / t) for u in leaves])


def _unitwise_norm(x, axis):
    """The L2 norm of each unit of x, broadcast to x's shape, as optax's unitwise_norm: the
    whole of a vector (or of what squeezes to one), axis 0 of a matrix or a rank-3 array,
    axes (0, 1, 2) of a rank-4 one, (0, 1, 2, 3) of a rank-5 one; or `axis`."""
    sq = ops.square(ops.abs(x)) if ops.iscomplexobj(x) else ops.square(x)
    if axis is not None:
        total = ops.sum(sq, axis=axis, keepdims=True)
    elif sum(1 for n in x.shape if n != 1) <= 1:
        total = ops.sum(sq, keepdims=True)
    elif x.ndim in (2, 3):
        total = ops.sum(sq, axis=0, keepdims=True)
    elif x.ndim in (4, 5):
        total = ops.sum(sq, axis=tuple(range(x.ndim - 1)), keepdims=True)
    else:
        raise ValueError(f"adaptive_grad_clip: a parameter of shape {tuple(x.shape)} has no "
                         "default units (ranks 1 to 5 have); pass axis= to name the axes "
                         "each unit's norm is taken over.")
    return ops.broadcast_to(ops.sqrt(total), x.shape)


def adaptive_grad_clip(clipping: float, eps: float = 1e-3,
                       axis: int | tuple[int, ...] | None = None) -> GradientTransformation:
    """Clip each unit's update to at most clipping * max(its parameter's norm, eps), as
    optax.adaptive_grad_clip (NFNets' AGC): a unit is a vector, a matrix's column (axis 0
    summed), a convolution kernel's output channel, or the slices `axis` names.

    >>> w = sl.tensor([[3.0, 0.1], [4.0, 0.1]])
    >>> sl.optim.adaptive_grad_clip(0.1).update(sl.tensor([[1.0, 1.0], [1.0, 1.0]]), (), w)[0]
    """
    who = "adaptive_grad_clip"
    clipping, eps = _number(who, "clipping", clipping), _number(who, "eps", eps)

    def apply(leaves, state, params, ctx, where):
        if params is None:
            raise TypeError(f"{ctx.who}: adaptive_grad_clip needs params (each unit is "
                            "clipped relative to its parameter's norm); pass them: "
                            "opt.update(grads, state, params).")
        out = []
        for g, p in zip(leaves, params.tensors):
            g_norm, p_norm = _unitwise_norm(g, axis), _unitwise_norm(p, axis)
            max_norm = clipping * ops.maximum(p_norm, eps)
            clipped = g * (max_norm / ops.maximum(g_norm, 1e-6))
            out.append(ops.where(g_norm < max_norm, g, clipped))
        return out, state

    return GradientTransformation(who, _empty_init, apply)


def _per_example_leaves(who: str, grads: PyTree):
    """grads' leaves as Tensors and its treedef, each leaf with the examples on axis 0."""
    leaves, treedef = pytree.flatten(grads)
    leaves = [ops.as_tensor(g) for g in leaves]
    if not leaves or any(g.ndim == 0 for g in leaves) or len({g.shape[0] for g in leaves}) > 1:
        raise ValueError(f"{who} expects every leaf of grads to have the examples on axis 0 "
                         "(the same number in each), got shapes "
                         f"{[tuple(g.shape) for g in leaves]}.")
    return leaves, treedef


def per_example_global_norm_clip(grads: PyTree, l2_norm_clip: float) -> tuple[PyTree, Tensor]:
    """(the sum over examples of each example's gradients scaled to a global norm of at most
    l2_norm_clip, how many examples were clipped), as optax.per_example_global_norm_clip
    (DP-SGD's clipping): every leaf of grads has the examples on axis 0.

    >>> g = {"w": sl.tensor([[3.0, 4.0], [0.3, 0.4]])}
    >>> sl.optim.per_example_global_norm_clip(g, 1.0)
    """
    leaves, treedef = _per_example_leaves("per_example_global_norm_clip", grads)
    total = None
    for g in leaves:
        s = ops.sum(ops.square(g), axis=tuple(range(1, g.ndim)))
        total = s if total is None else total + s
    with np.errstate(divide="ignore", invalid="ignore"):
        multipliers = ops.nan_to_num(ops.minimum(l2_norm_clip / ops.sqrt(total), 1.0), nan=1.0)
    num_clipped = ops.sum(multipliers < 1.0)
    clipped = [ops.tensordot(multipliers, g, axes=1) for g in leaves]
    return pytree.unflatten(treedef, clipped), num_clipped


def per_example_layer_norm_clip(grads: PyTree, global_l2_norm_clip: float,
                                uniform: bool = True) -> tuple[PyTree, PyTree]:
    """per_example_global_norm_clip for each leaf of grads on its own (a layer), its clip
    norm C / sqrt(K) for K leaves (uniform), or C * sqrt(D_i / D) with D_i the leaf's
    parameters per example and D all of them; (the clipped sums, the numbers clipped), each
    a tree shaped like grads, as optax.per_example_layer_norm_clip.

    >>> g = [sl.tensor([[3.0, 4.0], [0.3, 0.4]]), sl.tensor([[1.0], [2.0]])]
    >>> sl.optim.per_example_layer_norm_clip(g, 1.0)
    """
    leaves, treedef = _per_example_leaves("per_example_layer_norm_clip", grads)
    if uniform:
        clips = [global_l2_norm_clip * (1.0 / len(leaves)) ** 0.5 for _ in leaves]
    else:
        sizes = [int(np.prod(g.shape[1:])) for g in leaves]
        clips = [global_l2_norm_clip * (n / sum(sizes)) ** 0.5 for n in sizes]
    done = [per_example_global_norm_clip(g, c) for g, c in zip(leaves, clips)]
    return (pytree.unflatten(treedef, [d[0] for d in done]),
            pytree.unflatten(treedef, [d[1] for d in done]))


def scale_gradient(inputs: PyTree, scale: float) -> PyTree:
    """inputs unchanged, their gradient multiplied by scale on the way back, as
    optax.scale_gradient (scale 0 is stop_gradient, 1 the identity). Forward mode (jvp)
    gives the tangent times scale too, where JAX refuses it (a custom_vjp there).

    >>> x = sl.tensor(2.0)
    >>> sl.grad(lambda x: sl.optim.scale_gradient(x, 0.5) ** 2)(x)
    """
    if isinstance(scale, Tensor) or not np.ndim(scale) == 0:
        raise TypeError(f"scale_gradient: scale must be a number, got {type(scale).__name__}; "
                        "a scale computed by the program is not supported.")
    scale = float(scale)
    if scale == 1.0:
        return inputs
    if scale == 0.0:
        return pytree.tree_map(lambda x: ops.stop_gradient(ops.as_tensor(x)), inputs)
    return pytree.tree_map(lambda x: _ew.scale_gradient_p(ops.as_tensor(x), scale=scale),
                           inputs)


def zero_nans() -> GradientTransformation:
    """Replace NaNs in the updates by 0, recording per parameter whether there was one
    (state.found_nan), as optax.zero_nans.

    >>> opt = sl.optim.zero_nans()
    >>> g = sl.tensor([1.0, float("nan")])
    >>> updates, state = opt.update(g, opt.init(g))
    >>> updates, state.found_nan
    """
    def init(params):
        return ZeroNansState(_rebuild(params, [ops.asarray(False) for _ in params.tensors]))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ZeroNansState)
        found = [ops.any(ops.isnan(g)) for g in leaves]
        out = [ops.where(ops.isnan(g), ops.zeros_like(g), g) for g in leaves]
        return out, ZeroNansState(_rebuild(ctx.grads, found))

    return GradientTransformation("zero_nans", init, apply, "ZeroNansState")


def ema(decay: float, debias: bool = True, accumulator_dtype: Any = None) -> GradientTransformation:
    """The exponential moving average of the updates, (1 - decay) * g + decay * ema,
    bias-corrected when debias, as optax.ema.

    >>> opt = sl.optim.ema(0.9)
    >>> updates, state = opt.update(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> updates, state.ema
    """
    who = "ema"
    if accumulator_dtype is not None:
        raise TypeError(f"{who}: accumulator_dtype is not supported; the average keeps the "
                        "parameters' dtype. Leave accumulator_dtype: Any = None.")
    decay = _number(who, "decay", decay)

    def init(params):
        return EmaState(_count_zero(params),
                        _rebuild(params, [ops.zeros_like(p) for p in params.tensors]))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, EmaState)
        avg = _moments(ctx.who, state.ema, f"{where}.ema", ctx.grads)
        avg = [(1 - decay) * g + decay * t for g, t in zip(leaves, avg)]
        count = state.count + 1
        out = _debias(avg, decay, count) if debias else avg
        return out, EmaState(count, _rebuild(ctx.grads, avg))

    return GradientTransformation(who, init, apply, "EmaState")


def apply_every(k: int = 1) -> GradientTransformation:
    """Accumulate the updates over k steps and emit their sum every k-th step (zeros in
    between), as optax.apply_every.

    >>> opt = sl.optim.apply_every(2)
    >>> state = opt.init(sl.tensor([0.0]))
    >>> u1, state = opt.update(sl.tensor([1.0]), state)
    >>> u2, state = opt.update(sl.tensor([2.0]), state)
    >>> u1, u2
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"apply_every: k must be a positive int, got {k!r}")
    k = int(k)

    def init(params):
        return ApplyEvery(_count_zero(params),
                          _rebuild(params, [ops.zeros_like(p) for p in params.tensors]))

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, ApplyEvery)
        acc = _moments(ctx.who, state.grad_acc, f"{where}.grad_acc", ctx.grads)
        c = state.count % k
        keep = (c != 0).astype(leaves[0].dtype) if leaves else None
        acc = [keep.astype(g.dtype) * a + g for g, a in zip(leaves, acc)]
        emit = c == k - 1
        out = [emit.astype(a.dtype) * a for a in acc]
        return out, ApplyEvery((state.count + 1) % k, _rebuild(ctx.grads, acc))

    return GradientTransformation("apply_every", init, apply, "ApplyEvery")


def add_noise(eta: float, gamma: float, key: Any = None, *, seed: int | None = None
              ) -> GradientTransformation:
    """Add Gaussian noise of variance eta / (count + 1) ** gamma to the updates, as
    optax.add_noise: with the same key (an int seed or sl.random.key), the same noise as
    optax's, since scanlib.random draws JAX's numbers.

    >>> opt = sl.optim.add_noise(0.01, 0.55, key=0)
    >>> updates, state = opt.update(sl.tensor([1.0, 1.0]), opt.init(sl.tensor([0.0, 0.0])))
    >>> state.count
    """
    who = "add_noise"
    if seed is not None:
        if key is not None:
            raise ValueError(f"{who}: pass key or seed, not both")
        key = seed
    if key is None:
        raise TypeError(f"{who}: pass key= (an int seed or sl.random.key(seed)); optax "
                        "requires it from 0.2.7 on.")
    eta, gamma = _number(who, "eta", eta), _number(who, "gamma", gamma)

    def init(params):
        k = key if isinstance(key, Tensor) else _random.key(int(key))
        return AddNoiseState(_count_zero(params), k)

    def apply(leaves, state, params, ctx, where):
        _check_state(ctx, state, where, AddNoiseState)
        count = state.count + 1
        rng_key, sample_key = _random.split(state.rng_key)
        keys = _random.split(sample_key, len(leaves)) if leaves else []
        out, stds = [], {}
        for i, g in enumerate(leaves):
            if g.dtype not in stds:  # in float32 (float64 for float64 updates), as optax
                t = count.astype(np.promote_types(g.dtype, np.float32))
                stds[g.dtype] = ops.sqrt(eta / t ** gamma).astype(g.dtype)
            noise = _random.normal(keys[i], g.shape, dtype=g.dtype)
            out.append(g + stds[g.dtype] * noise)
        return out, AddNoiseState(count, rng_key)

    return GradientTransformation(who, init, apply, "AddNoiseState")


# --- functions on trees ------------------------------------------------------------------------
def scale_by_polyak(f_min: float = 0.0, max_learning_rate: float = 1.0, eps: float = 0.0,
                    variant: str = "sps") -> GradientTransformation:
    """The Polyak step size, as optax.scale_by_polyak: the updates times
    min((value - f_min) / (|u|^2 + eps), max_learning_rate), or 0 where |u|^2 + eps is below
    float64's epsilon; "sps+" clips value - f_min at 0. It reads the loss at the current
    parameters from update's `value=`.

    >>> opt = sl.optim.scale_by_polyak()
    >>> opt.update(sl.tensor([1.0, 1.0]), (), value=sl.tensor(0.5))[0]
    """
    who = "scale_by_polyak"
    f_min, max_lr, eps = (_number(who, k, v) for k, v in (
        ("f_min", f_min), ("max_learning_rate", max_learning_rate), ("eps", eps)))
    if variant not in ("sps", "sps+"):
        raise ValueError(f"{who}: variant must be 'sps' or 'sps+', got {variant!r}")

    def apply(leaves, state, params, ctx, where):
        value = _extra(ctx, who, "value", "the loss at the current parameters.")
        if not leaves:
            return leaves, state
        total = _sum_of_squares(leaves)
        gap = (ops.as_tensor(value) - f_min).astype(total.dtype)
        if variant == "sps+":
            gap = ops.maximum(gap, 0.0)
        tiny = total + eps <= np.finfo(float).eps  # no step (and no division by 0)
        step = ops.where(tiny, ops.zeros_like(total),
                         ops.minimum(gap / ops.where(tiny, 1.0, total + eps), max_lr))
        return [u * step for u in leaves], state

    return GradientTransformation(who, _empty_init, apply)


def keep_params_nonnegative() -> GradientTransformation:
    """Updates that would take a parameter below 0 replaced by -param (to land on 0), as
    optax.keep_params_nonnegative; it needs params.

    >>> opt = sl.optim.keep_params_nonnegative()
    >>> w = sl.tensor([1.0, 2.0])
    >>> opt.update(sl.tensor([-3.0, -1.0]), opt.init(w), w)[0]
    """
    def apply(leaves, state, params, ctx, where):
        if params is None:
            raise TypeError(f"{ctx.who}: keep_params_nonnegative needs params; pass them: "
                            "opt.update(grads, state, params).")
        return [ops.where(p + u < 0.0, -p, u) for p, u in zip(params.tensors, leaves)], state

    return GradientTransformation("keep_params_nonnegative", _empty_init, apply)


def safe_norm(x: Any, min_norm: Any, ord: Any = None, axis: Any = None,  # noqa: A002
              keepdims: bool = False) -> Tensor:
    """The norm of x (linalg.norm's ord and axis), but min_norm where it is at most min_norm,
    with a gradient there of 0 instead of NaN, as optax.safe_norm.

    >>> sl.optim.safe_norm(sl.tensor([0.0, 0.0]), 1e-6), sl.optim.safe_norm(
    ...     sl.tensor([3.0, 4.0]), 1e-6)
    """
    x = ops.as_tensor(x)
    norm = linalg.norm(x, ord=ord, axis=axis, keepdims=True)
    x = ops.where(norm <= min_norm, ops.ones_like(x), x)
    if not keepdims:
        norm = ops.squeeze(norm, axis=axis)
    masked = linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return ops.where(norm <= min_norm, min_norm, masked)


def global_norm(updates: PyTree) -> Tensor:
    """The L2 norm of all the leaves together, as optax.global_norm (optax.tree.norm).

    >>> sl.optim.global_norm({"a": sl.tensor([3.0]), "b": sl.tensor([4.0])})
    """
    total = _sum_of_squares([ops.as_tensor(leaf) for leaf in pytree.leaves(updates)])
    return ops.sqrt(total if total is not None else ops.asarray(0.0))


def incremental_update(new_tensors: PyTree, old_tensors: PyTree, step_size: Any) -> PyTree:
    """step_size * new + (1 - step_size) * old, leaf by leaf (Polyak averaging of target
    parameters), as optax.incremental_update.

    >>> sl.optim.incremental_update(sl.tensor([1.0]), sl.tensor([0.0]), 0.1)
    """
    return pytree.tree_map(lambda new, old: step_size * ops.as_tensor(new)
                           + (1.0 - step_size) * ops.as_tensor(old), new_tensors, old_tensors)


def periodic_update(new_tensors: PyTree, old_tensors: PyTree, steps: Any, update_period: int
                    ) -> PyTree:
    """new_tensors when steps is a multiple of update_period, else old_tensors, as
    optax.periodic_update (steps may be traced: a scan body, jit).

    >>> sl.optim.periodic_update(sl.tensor([1.0]), sl.tensor([0.0]), 10, 5)
    """
    return _select_tree(ops.as_tensor(steps) % update_period == 0, new_tensors, old_tensors)


__all__ = ["identity", "set_to_zero", "freeze", "selective_transform", "clip",
           "clip_by_block_rms", "adaptive_grad_clip", "zero_nans", "ema", "apply_every",
           "add_noise", "keep_params_nonnegative", "scale_by_polyak",
           "global_norm", "safe_norm", "incremental_update", "periodic_update",
           "per_example_global_norm_clip", "per_example_layer_norm_clip", "scale_gradient"]
