"""optax's wrappers of other transformations, with its state classes: masked (and MaskedNode),
multi_transform (optax's partition), apply_if_finite, MultiSteps (with skip_not_finite and
skip_large_updates), inject_hyperparams, lookahead (and LookaheadParams).

Imports tape, ops, pytree and optim.core.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from .. import ops, pytree
from ..tape import Tensor, no_grad
from ..tape.types import PyTree
from .core import (GradientTransformation, _a, _count_zero, _differentiating, _Flat, _flatten,
                   _moments, _number, _recording, apply_updates,
                   _rebuild, _select_tree)


class MaskedNode(NamedTuple):
    """Stands for a parameter a mask leaves out, in a masked stage's inner state (no leaves)."""


class MaskedState(NamedTuple):
    inner_state: Any


class PartitionState(NamedTuple):
    inner_states: Any  # {label: MaskedState}


MultiTransformState = PartitionState


class ApplyIfFiniteState(NamedTuple):
    notfinite_count: Any  # 0-d int32: non-finite steps in a row
    last_finite: Any  # 0-d bool: whether the last step's updates were finite
    total_notfinite: Any  # 0-d int32: non-finite steps in all
    inner_state: Any


class MultiStepsState(NamedTuple):
    mini_step: Any  # 0-d int32: the step within the current accumulation
    gradient_step: Any  # 0-d int32: the inner optimiser's steps taken
    inner_opt_state: Any
    acc_grads: Any  # shaped like params
    skip_state: Any = ()


class WrappedScheduleState(NamedTuple):
    count: Any


class InjectStatefulHyperparamsState(NamedTuple):
    count: Any  # 0-d int32
    hyperparams: Any  # {name: 0-d Tensor}, the values used at the last step
    hyperparams_states: Any  # {name: WrappedScheduleState} for the scheduled ones
    inner_state: Any


InjectHyperparamsState = InjectStatefulHyperparamsState


def _check(ctx, state, where, kind):
    if not isinstance(state, kind):
        raise TypeError(f"{ctx.who}: {where} must be a {kind.__name__}, got "
                        f"{type(state).__name__}. This state was made by init for another "
                        "optimiser; call opt.init(params) again.")


def _tree(flat: _Flat, leaves=None):
    return _rebuild(flat, flat.raw if leaves is None else leaves)


# --- masked ---------------------------------------------------------------------------------------
def _expand(mask, tree, path: str, who: str):
    """mask (shaped like tree, or a prefix of it: a bool stands for a whole subtree) as a
    tree of bools shaped like tree."""
    if isinstance(mask, (bool, np.bool_)) or (isinstance(mask, (Tensor, np.ndarray))
                                               and mask.shape == () and mask.dtype == bool):
        return pytree.tree_map(lambda _: bool(mask), tree)
    if isinstance(mask, Mapping) and isinstance(tree, Mapping):
        if set(mask) != set(tree):
            raise TypeError(f"{who}: the mask's keys at mask{path} are "
                            f"{sorted(map(str, mask))} but the parameters' are "
                            f"{sorted(map(str, tree))}; give the mask "
                            "the parameters' structure (a bool for a whole subtree).")
        return {k: _expand(mask[k], tree[k], f"{path}[{k!r}]", who) for k in tree}
    if isinstance(mask, (list, tuple)) and isinstance(tree, (list, tuple)) \
            and len(mask) == len(tree):
        items = [_expand(m, t, f"{path}[{i}]", who) for i, (m, t) in enumerate(zip(mask, tree))]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    raise TypeError(f"{who}: mask{path} is {_a(type(mask).__name__)} where the parameters have "
                    f"{_a(type(tree).__name__)}; a mask is a tree of bools shaped like the "
                    "parameters (or a prefix of them), or a callable that returns one.")


def _mask_flags(mask, tree, who) -> list:
    m = mask(tree) if callable(mask) else mask
    return [bool(f) for f in pytree.leaves(_expand(m, tree, "", who))]


def _masked_flat(flat: _Flat, leaves, flags, root, who) -> _Flat:
    tree = pytree.unflatten(flat.treedef, [x if f else MaskedNode()
                                           for x, f in zip(leaves, flags)])
    return _flatten(tree, root, who)


def masked(inner: GradientTransformation, mask: Any) -> GradientTransformation:
    """Apply inner to the parameters where mask is True and pass the other updates through
    untouched, as optax.masked: mask is a tree of bools shaped like the parameters (a bool
    may stand for a whole subtree) or a callable of the parameters that returns one; the
    inner state holds MaskedNode() for the parameters left out.

    >>> opt = sl.optim.masked(sl.optim.sgd(0.1), {"w": True, "b": False})
    >>> p = {"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}
    >>> updates, state = opt.update({"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}, opt.init(p))
    >>> updates
    """
    if not isinstance(inner, GradientTransformation):
        raise TypeError(f"masked: inner must be a GradientTransformation, got "
                        f"{_a(type(inner).__name__)}")
    name = f"masked({inner.name})"

    def init(params):
        flags = _mask_flags(mask, _tree(params), name)
        return MaskedState(inner._init(_masked_flat(params, params.tensors, flags, "params",
                                                    name)))

    def apply(leaves, state, params, ctx, where):
        _check(ctx, state, where, MaskedState)
        flags = _mask_flags(mask, _tree(ctx.grads, leaves), ctx.who)
        sub = _masked_flat(ctx.grads, leaves, flags, ctx.grads.root, ctx.who)
        sub_params = None if params is None else _masked_flat(params, params.tensors, flags,
                                                              params.root, ctx.who)
        new, inner_state = inner._apply(sub.tensors, state.inner_state, sub_params,
                                        ctx._replace(grads=sub), f"{where}.inner_state")
        new = iter(new)
        return [next(new) if f else g for g, f in zip(leaves, flags)], MaskedState(inner_state)

    return GradientTransformation(name, init, apply, "MaskedState")


def multi_transform(transforms: Mapping[Any, GradientTransformation], param_labels: Any
                    ) -> GradientTransformation:
    """Apply transforms[label] to the parameters labelled label, as optax.multi_transform
    (optax.partition): param_labels is a tree of labels shaped like the parameters (or a
    prefix), or a callable of them that returns one; the state is
    PartitionState({label: MaskedState}).

    >>> opt = sl.optim.multi_transform({"train": sl.optim.sgd(0.1),
    ...                                 "freeze": sl.optim.set_to_zero()},
    ...                                {"w": "train", "b": "freeze"})
    >>> p = {"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}
    >>> updates, state = opt.update({"w": sl.tensor([1.0]), "b": sl.tensor([1.0])}, opt.init(p))
    >>> updates
    """
    transforms = dict(transforms)
    name = "multi_transform"

    def labels_of(tree):
        labels = param_labels(tree) if callable(param_labels) else param_labels
        unknown = set(pytree.leaves(labels)) - set(transforms)
        if unknown:
            raise ValueError(f"{name}: the labels {sorted(map(str, unknown))} have no "
                             f"transformation; transforms has {sorted(map(str, transforms))}")
        return labels

    def stage(labels, group):
        return masked(transforms[group], pytree.tree_map(lambda label: label == group, labels))

    def init(params):
        labels = labels_of(_tree(params))
        return PartitionState({g: stage(labels, g)._init(params) for g in transforms})

    def apply(leaves, state, params, ctx, where):
        _check(ctx, state, where, PartitionState)
        labels = labels_of(_tree(ctx.grads, leaves))
        states = {}
        for g in transforms:
            leaves, states[g] = stage(labels, g)._apply(
                leaves, state.inner_states[g], params, ctx, f"{where}.inner_states[{g!r}]")
        return leaves, PartitionState(states)

    return GradientTransformation(name, init, apply, "PartitionState")


partition = multi_transform


# --- apply_if_finite ------------------------------------------------------------------------------
def _all_finite(leaves) -> Tensor:
    finite = ops.asarray(True)
    for g in leaves:
        finite = ops.logical_and(finite, ops.all(ops.isfinite(g)))
    return finite


def _zeros_like_all(leaves):
    return [ops.zeros_like(g) for g in leaves]


def apply_if_finite(inner: GradientTransformation,
                    max_consecutive_errors: int) -> GradientTransformation:
    """Apply inner only when all updates are finite (else zero updates and inner's state
    kept), unless more than max_consecutive_errors non-finite steps came in a row, as
    optax.apply_if_finite.

    >>> opt = sl.optim.apply_if_finite(sl.optim.sgd(0.1), max_consecutive_errors=2)
    >>> w = sl.tensor([1.0])
    >>> updates, state = opt.update(sl.tensor([float("nan")]), opt.init(w))
    >>> updates, state.notfinite_count
    """
    name = f"apply_if_finite({inner.name})"

    def init(params):
        zero = _count_zero(params)
        return ApplyIfFiniteState(zero, ops.asarray(True), zero + 0, inner._init(params))

    def apply(leaves, state, params, ctx, where):
        _check(ctx, state, where, ApplyIfFiniteState)
        finite = _all_finite(leaves)
        notfinite = ops.where(finite, ops.zeros_like(state.notfinite_count),
                              state.notfinite_count + 1)
        run = ops.logical_or(finite, notfinite > max_consecutive_errors)
        if run._trace is None:  # concrete: run inner only when its result is used
            if bool(run):
                out, inner_state = inner._apply(leaves, state.inner_state, params, ctx,
                                                f"{where}.inner_state")
            else:
                out, inner_state = _zeros_like_all(leaves), state.inner_state
        else:
            new, new_state = inner._apply(leaves, state.inner_state, params, ctx,
                                          f"{where}.inner_state")
            out = _select_tree(run, new, _zeros_like_all(leaves))
            inner_state = _select_tree(run, new_state, state.inner_state)
        total = ops.where(finite, state.total_notfinite, state.total_notfinite + 1)
        return out, ApplyIfFiniteState(notfinite, finite, total, inner_state)

    return GradientTransformation(name, init, apply, "ApplyIfFiniteState")


# --- MultiSteps -----------------------------------------------------------------------------------
def skip_not_finite(updates: PyTree, gradient_step: Any,
                    params: PyTree | None) -> tuple[Tensor, dict]:
    """For MultiSteps: skip a step whose updates hold a NaN or an inf, as
    optax.skip_not_finite; returns (should_skip, {"should_skip", "num_not_finite"}).

    >>> sl.optim.skip_not_finite({"w": sl.tensor([1.0, float("inf")])}, 0, None)
    """
    count = ops.asarray(0)
    for g in pytree.leaves(updates):
        count = count + ops.sum(ops.logical_not(ops.isfinite(ops.as_tensor(g))))
    count = count.astype(np.int32)
    skip = count > 0
    return skip, {"should_skip": skip, "num_not_finite": count}


def skip_large_updates(updates: PyTree, gradient_step: Any, params: PyTree | None,
                       max_squared_norm: float) -> tuple[Tensor, dict]:
    """For MultiSteps (with functools.partial for max_squared_norm): skip a step whose
    updates' squared norm is not below max_squared_norm, as optax.skip_large_updates.

    >>> sl.optim.skip_large_updates({"w": sl.tensor([3.0, 4.0])}, 0, None, 10.0)
    """
    norm_sq = None
    for g in pytree.leaves(updates):
        s = ops.sum(ops.as_tensor(g) ** 2)
        norm_sq = s if norm_sq is None else norm_sq + s
    norm_sq = norm_sq if norm_sq is not None else ops.asarray(0.0)
    skip = ops.logical_not(norm_sq < max_squared_norm)
    return skip, {"should_skip": skip, "norm_squared": norm_sq}


def _never_skip(updates, gradient_step, params):
    return ops.asarray(False), ()


class MultiSteps(GradientTransformation):
    """Gradient accumulation, as optax.MultiSteps: the inner optimiser steps once every k
    calls (every_k_schedule: an int, or a callable of the inner step count) on the mean (sum
    when use_grad_mean is False) of the k gradients; the other calls return zero updates.
    The accumulator has the parameters' dtype (optax's defaults to float32). It is itself a
    GradientTransformation, so `gradient_transformation()` returns it.

    >>> opt = sl.optim.MultiSteps(sl.optim.sgd(1.0), every_k_schedule=2)
    >>> w = sl.tensor([0.0])
    >>> state = opt.init(w)
    >>> u1, state = opt.update(sl.tensor([1.0]), state, w)
    >>> u2, state = opt.update(sl.tensor([3.0]), state, w)
    >>> u1, u2
    """

    __slots__ = ("inner_opt", "_every_k", "_use_grad_mean", "_skip_fn")

    def __init__(self, opt: GradientTransformation, every_k_schedule,
                 use_grad_mean: bool = True, should_skip_update_fn: Callable | None = None,
                 accumulator_dtype: Any = None):
        if not isinstance(opt, GradientTransformation):
            raise TypeError(f"MultiSteps: opt must be a GradientTransformation, got "
                            f"{_a(type(opt).__name__)}")
        if accumulator_dtype is not None:
            raise TypeError("MultiSteps: accumulator_dtype is not supported; the gradients "
                            "are accumulated in the parameters' dtype. Leave it None.")
        self.inner_opt = opt
        if isinstance(every_k_schedule, (int, np.integer)) and not isinstance(every_k_schedule,
                                                                               bool):
            k = int(every_k_schedule)
            self._every_k = lambda step: k
        elif callable(every_k_schedule):
            self._every_k = every_k_schedule
        else:
            raise TypeError(f"MultiSteps: every_k_schedule must be an int or a callable of the "
                            f"step count, got {every_k_schedule!r}")
        self._use_grad_mean = use_grad_mean
        self._skip_fn = should_skip_update_fn or _never_skip
        super().__init__(f"MultiSteps({opt.name})", self._init_fn, self._apply_fn,
                         "MultiStepsState")

    def gradient_transformation(self) -> GradientTransformation:
        """The optimiser as a GradientTransformation: itself."""
        return self

    def has_updated(self, state: MultiStepsState) -> Tensor:
        """Whether the last update was an inner step, as optax's has_updated."""
        return ops.logical_and(ops.as_tensor(state.mini_step) == 0,
                               ops.as_tensor(state.gradient_step) > 0)

    def _init_fn(self, params):
        zero = _count_zero(params)
        zeros = [ops.zeros_like(p) for p in params.tensors]
        _, skip_state = self._skip_fn(_rebuild(params, zeros), zero, _tree(params))
        return MultiStepsState(zero, zero + 0, self.inner_opt._init(params),
                               _rebuild(params, [ops.zeros_like(p) for p in params.tensors]),
                               skip_state)

    def _apply_fn(self, leaves, state, params, ctx, where):
        _check(ctx, state, where, MultiStepsState)
        acc = _moments(ctx.who, state.acc_grads, f"{where}.acc_grads", ctx.grads)
        k = self._every_k(int(state.gradient_step.item()) if state.gradient_step._trace is None
                          else state.gradient_step)
        skip, skip_state = self._skip_fn(_rebuild(ctx.grads, leaves), state.gradient_step,
                                         None if params is None else _tree(params))
        skip = ops.as_tensor(skip)
        if skip.shape != () or skip.dtype != bool:
            raise ValueError(f"{ctx.who}: should_skip_update_fn must return a 0-d bool as its "
                             f"first value, got {skip.dtype}{list(skip.shape)}")
        if self._use_grad_mean:
            n = (state.mini_step + 1)
            acc = [a + (g - a) / n.astype(g.dtype) for g, a in zip(leaves, acc)]
        else:
            acc = [g + a for g, a in zip(leaves, acc)]
        emit = state.mini_step == k - 1

        def inner_step():
            return self.inner_opt._apply(acc, state.inner_opt_state, params, ctx,
                                         f"{where}.inner_opt_state")

        skipped = MultiStepsState(state.mini_step, state.gradient_step, state.inner_opt_state,
                                  state.acc_grads, skip_state)
        if skip._trace is None and bool(skip):  # known now: the inner step would be unused
            return _zeros_like_all(leaves), skipped
        if emit._trace is None and not bool(emit):
            updates, inner_state = _zeros_like_all(leaves), state.inner_opt_state
        else:
            new, new_state = inner_step()
            updates = _select_tree(emit, new, _zeros_like_all(leaves))
            inner_state = _select_tree(emit, new_state, state.inner_opt_state)
        one = emit.astype(np.int32)
        done = MultiStepsState((state.mini_step + 1) % k,
                               one * (state.gradient_step + 1) + (1 - one) * state.gradient_step,
                               inner_state,
                               _rebuild(ctx.grads, _select_tree(emit, _zeros_like_all(acc),
                                                                acc)),
                               skip_state)
        return (_select_tree(skip, _zeros_like_all(leaves), updates),
                _select_tree(skip, skipped, done))


# --- inject_hyperparams ---------------------------------------------------------------------------
def inject_hyperparams(inner_factory: Callable[..., GradientTransformation],
                       static_args: Any = (), hyperparam_dtype: Any = None) -> Callable:
    """Make the numeric hyperparameters of inner_factory part of the state, as
    optax.inject_hyperparams: `inject_hyperparams(sl.optim.adam)(learning_rate=schedule)`
    evaluates the schedule each step, and `state.hyperparams["learning_rate"]` reads (or,
    replaced, sets) the value. The hyperparameters are 0-d Tensors in the parameters' widest
    float dtype (or hyperparam_dtype), as optax's, so they may be traced (jit, a scan carry).

    >>> opt = sl.optim.inject_hyperparams(sl.optim.sgd)(learning_rate=0.1)
    >>> w = sl.tensor([1.0])
    >>> state = opt.init(w)
    >>> state.hyperparams["learning_rate"]
    """
    static_args = {static_args} if isinstance(static_args, str) else set(static_args)
    signature = inspect.signature(inner_factory)
    if not static_args.issubset(signature.parameters):
        raise ValueError(f"inject_hyperparams: static_args {sorted(static_args)} must name "
                         f"parameters of {getattr(inner_factory, '__name__', inner_factory)}: "
                         f"{list(signature.parameters)}")

    def wrapped(*args, **kwargs) -> GradientTransformation:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        scheduled, numeric, other = {}, {}, {}
        for k, v in bound.arguments.items():
            if k in static_args or isinstance(v, (bool, np.bool_)):
                other[k] = v
            elif callable(v):
                scheduled[k] = v
            elif isinstance(v, (int, float, np.number, np.ndarray, Tensor)):
                numeric[k] = v
            else:
                other[k] = v
        name = f"inject_hyperparams({getattr(inner_factory, '__name__', 'inner')})"

        def dtype_of(params):
            if hyperparam_dtype is not None:
                return np.dtype(hyperparam_dtype)
            dtypes = [p.dtype for p in params.tensors]
            return np.result_type(*dtypes) if dtypes else np.dtype(np.float64)

        def as_hyper(v, dtype):
            v = ops.as_tensor(v)
            return v.astype(dtype) if np.dtype(v.dtype).kind == "f" else v

        def init(params):
            dtype = dtype_of(params)
            hparams = {k: as_hyper(v, dtype) for k, v in numeric.items()}
            hparams.update({k: as_hyper(f(0), dtype) for k, f in scheduled.items()})
            inner = inner_factory(**other, **hparams)
            zero = _count_zero(params)
            return InjectStatefulHyperparamsState(
                zero, hparams, {k: WrappedScheduleState(zero + 0) for k in scheduled},
                inner._init(params))

        def apply(leaves, state, params, ctx, where):
            _check(ctx, state, where, InjectStatefulHyperparamsState)
            dtype = dtype_of(ctx.grads if params is None else params)
            hparams = {k: as_hyper(v, dtype) for k, v in state.hyperparams.items()}
            for k, f in scheduled.items():
                count = state.hyperparams_states[k].count
                step = int(count.item()) if count._trace is None else count.astype(np.float64)
                hparams[k] = as_hyper(f(step), dtype)
            inner = inner_factory(**other, **hparams)
            out, inner_state = inner._apply(leaves, state.inner_state, params, ctx,
                                            f"{where}.inner_state")
            return out, InjectStatefulHyperparamsState(
                state.count + 1, hparams,
                {k: WrappedScheduleState(state.hyperparams_states[k].count + 1)
                 for k in scheduled}, inner_state)

        return GradientTransformation(name, init, apply, "InjectStatefulHyperparamsState")

    return wrapped


# --- lookahead ------------------------------------------------------------------------------------
class LookaheadParams(NamedTuple):
    """The parameters lookahead steps: the fast ones (the inner optimiser's) and the slow
    ones, as optax.LookaheadParams.

    >>> sl.optim.LookaheadParams.init_synced({"w": sl.tensor([1.0])})
    """

    fast: Any
    slow: Any

    @classmethod
    def init_synced(cls, params: PyTree) -> "LookaheadParams":
        """Fast and slow parameters both equal to params."""
        return cls(fast=params, slow=params)


class LookaheadState(NamedTuple):
    fast_state: Any  # the inner optimiser's state
    steps_since_sync: Any  # 0-d int32


class _Lookahead(GradientTransformation):
    """lookahead's transformation: its updates are LookaheadParams (fast and slow), not
    shaped like the gradients (of the fast parameters), so it is no stage of a chain."""

    __slots__ = ("fast_optimizer", "sync_period", "slow_step_size", "reset_state")

    def __init__(self, fast_optimizer, sync_period, slow_step_size, reset_state):
        name = f"lookahead({fast_optimizer.name})"

        def as_stage(*args):  # what chain and the wrappers call: lookahead is none of theirs
            raise TypeError(f"{name} wraps an optimiser and cannot be a stage of chain or of "
                            "another wrapper: chain the fast optimiser's stages, then wrap "
                            "the chain with lookahead.")

        super().__init__(name, as_stage, as_stage, "LookaheadState")
        self.fast_optimizer, self.sync_period = fast_optimizer, sync_period
        self.slow_step_size, self.reset_state = slow_step_size, reset_state

    def init(self, params: PyTree) -> PyTree:
        """The state for LookaheadParams (or, as optax warns and allows, the fast params
        alone)."""
        fast = params.fast if isinstance(params, LookaheadParams) else params
        with no_grad():
            return LookaheadState(self.fast_optimizer.init(fast),
                                  ops.zeros((), dtype=np.int32))

    def update(self, grads: PyTree, state: PyTree, params: PyTree | None = None,
               **extra_args: Any) -> tuple[PyTree, PyTree]:
        """(LookaheadParams of updates, new state): the fast optimiser's step on the fast
        params, and every sync_period-th call the slow params moved slow_step_size of the
        way to the fast ones, the fast reset to them."""
        who = f"{self.name}.update"
        if not isinstance(params, LookaheadParams):
            raise TypeError(f"{who}: params must be LookaheadParams(fast, slow) (start with "
                            "sl.optim.LookaheadParams.init_synced(params)), got "
                            f"{type(params).__name__}.")
        if not isinstance(state, LookaheadState):
            raise TypeError(f"{who}: state must be a LookaheadState, got "
                            f"{type(state).__name__}; call opt.init(params) again.")
        updates, fast_state = self.fast_optimizer.update(grads, state.fast_state, params.fast,
                                                         **extra_args)
        with _recording(_differentiating()):
            steps = ops.as_tensor(state.steps_since_sync)
            sync = steps == self.sync_period - 1
            rate = self.slow_step_size

            def diff(f, u, s):  # where the fast parameters land, less the slow ones
                return ops.as_tensor(f) + u - s

            slow = pytree.tree_map(
                lambda f, u, s: rate * sync.astype(u.dtype) * diff(f, u, s),
                params.fast, updates, params.slow)
            fast = pytree.tree_map(
                lambda f, u, s: u - sync.astype(u.dtype) * (1 - rate) * diff(f, u, s),
                params.fast, updates, params.slow)
            if self.reset_state:
                initial = self.fast_optimizer.init(params.fast)
                fast_state = pytree.tree_map(
                    lambda now, first: ((1 - sync.astype(now.dtype)) * now
                                        + sync.astype(now.dtype) * first).astype(now.dtype),
                    fast_state, initial)
            steps = (steps + 1) % self.sync_period
        return LookaheadParams(fast=fast, slow=slow), LookaheadState(fast_state, steps)

    def step(self, grads: PyTree, state: PyTree, params: PyTree,
             **extra_args: Any) -> tuple[PyTree, PyTree]:
        """update, then apply_updates: (new LookaheadParams, new state)."""
        updates, state = self.update(grads, state, params, **extra_args)
        return apply_updates(params, updates), state


def lookahead(fast_optimizer: GradientTransformation, sync_period: int, slow_step_size: float,
              reset_state: bool = False) -> GradientTransformation:
    """Lookahead (Zhang et al.), as optax.lookahead: the fast optimiser steps the fast
    parameters; every sync_period steps the slow ones move slow_step_size of the way to the
    fast ones and the fast ones restart from there (reset_state: the fast optimiser's state
    too). params and updates are LookaheadParams(fast, slow); the gradients are the fast
    parameters'. Evaluate the model at params.slow.

    >>> opt = sl.optim.lookahead(sl.optim.sgd(0.1), sync_period=2, slow_step_size=0.5)
    >>> params = sl.optim.LookaheadParams.init_synced(sl.tensor([1.0]))
    >>> state = opt.init(params)
    >>> for _ in range(2):
    ...     params, state = opt.step(sl.tensor([1.0]), state, params)
    >>> params.slow
    """
    if isinstance(sync_period, bool) or not isinstance(sync_period, (int, np.integer)) \
            or sync_period < 1:
        raise ValueError(f"lookahead: sync_period must be an int >= 1, got {sync_period!r}")
    rate = _number("lookahead", "slow_step_size", slow_step_size)
    return _Lookahead(fast_optimizer, int(sync_period), rate, bool(reset_state))


__all__ = ["masked", "multi_transform", "partition", "apply_if_finite", "skip_not_finite",
           "skip_large_updates", "MultiSteps", "inject_hyperparams", "lookahead",
           "LookaheadParams"]
