"""scanlib.optim: optimisers in optax's shape (sgd, momentum, adam, adamw, clip_by_global_norm,
chain) over any pytree of Tensors or arrays, with optax's arithmetic, operation for operation
(the same bits as optax run op by op; under jax.jit XLA may fuse and round differently).
clip_by_global_norm is the exception: it agrees with optax to a few ulps, not bit for bit
(XLA sums the squares in another order and computes t / norm as t * (1 / norm)).

    opt = sl.optim.chain(sl.optim.clip_by_global_norm(1.0), sl.optim.adam(1e-3))
    state = opt.init(params)
    params, state = opt.update(grads, state, params)    # one step: new params, new state

Differences from optax. optax's `update` returns `(updates, state)` and the user then calls
`optax.apply_updates(params, updates)`; here that pair is `opt.transform(grads, state, params)`
and `sl.optim.apply_updates(params, updates)`, and `opt.update` does both at once. A schedule
receives the step count as a Python int (a 0-d int32 Tensor inside a traced scan body).
Bias corrections are computed in float32 for float16/float32 parameters (then cast to the
parameter's dtype), as optax does in JAX's default mode (jax_enable_x64 off), and in float64
for float64 ones, as it does with x64 on. Complex parameters, and schedules for weight_decay,
are refused.

Two modes, chosen by where the update runs:

- The usual training loop (not inside sl.grad/vjp): updates run under no_grad and return new
  Tensors (Tensors are immutable): a parameter that required grad comes back as a fresh leaf
  that requires grad, with `.grad` None, so the torch-style loop needs no zero_grad:

      loss_fn(params).backward()
      params, state = opt.update(sl.optim.grads_of(params), state, params)

- Inside a differentiation (sl.grad, sl.vjp, and scan bodies traced inside them): the update
  is recorded like any other ops, so unrolled optimisation and meta-gradients differentiate
  through it, as with optax in JAX. New parameters are then not detached.

In both modes an array parameter comes back as an array, except when its new value is
traced (an update inside a scan body) or carries a gradient: it is then a Tensor, since an
array could hold neither.

The state is a pytree of Tensors (NamedTuples as in optax: `state[0].mu['W']`), so it can ride
in a scan carry. Imports tape, ops and pytree.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, NamedTuple

import numpy as np

from . import backends, ops, pytree
from .tape import Tensor, no_grad, type_str
from .tape.state import STATE

__all__ = [
    "GradientTransformation", "sgd", "momentum", "adam", "adamw", "clip_by_global_norm",
    "chain", "scale_by_adam", "scale_by_learning_rate", "add_decayed_weights", "trace",
    "apply_updates", "grads_of",
]


class ScaleByAdamState(NamedTuple):
    count: Any  # 0-d int32: steps taken
    mu: Any  # first moments, shaped like params
    nu: Any  # second moments, shaped like params


class TraceState(NamedTuple):
    trace: Any  # momentum, shaped like params


class ScaleByScheduleState(NamedTuple):
    count: Any  # 0-d int32: the step the schedule is asked about next


# --- flat views of trees, checked ---------------------------------------------------------------
class _Flat(NamedTuple):
    """A tree's leaves as given (raw) and as Tensors, their suffix paths (`['W']`) and its
    structure."""

    root: str
    suffixes: list
    raw: list
    tensors: list
    treedef: Any

    def path(self, i: int) -> str:
        return self.root + self.suffixes[i]


def _flatten(tree, root: str, who: str) -> _Flat:
    """Flatten a tree whose leaves must be real floating Tensors or arrays."""
    suffixes, raw, treedef = pytree.flatten_with_paths(tree, "")
    flat = _Flat(root, suffixes, raw, [], treedef)
    for i, leaf in enumerate(raw):
        if not (isinstance(leaf, Tensor) or backends.is_array(leaf)):
            raise TypeError(
                f"{who}: {flat.path(i)} is {_a(type(leaf).__name__)}; the leaves of {root} must be "
                "Tensors or NumPy/CuPy arrays. Wrap a number with sl.tensor(value).")
        kind = np.dtype(leaf.dtype).kind
        if kind == "c":
            raise TypeError(
                f"{who}: {flat.path(i)} is complex ({_type(leaf)}); scanlib.optim does not "
                "handle complex parameters. Optimise the real and imaginary parts as two leaves.")
        if kind != "f":
            raise TypeError(
                f"{who}: {flat.path(i)} is {_type(leaf)}; optimisers need floating leaves. Cast "
                "it (x.astype('float32')) or keep it out of the tree of parameters.")
        flat.tensors.append(ops.as_tensor(leaf))
    return flat


def _type(leaf) -> str:
    return type_str(leaf.shape, leaf.dtype)


def _check_like(who: str, flat: _Flat, ref: _Flat, fix: str):
    """flat must have ref's structure, and each leaf ref's leaf's shape and dtype."""
    if flat.treedef != ref.treedef:
        mine, theirs = set(flat.suffixes), set(ref.suffixes)
        missing = [p for p in ref.suffixes if p not in mine]
        extra = [p for p in flat.suffixes if p not in theirs]
        if missing:
            detail = f"{flat.root}{missing[0]} is missing ({ref.root}{missing[0]} exists)"
        elif extra:
            detail = f"{flat.root}{extra[0]} has no counterpart in {ref.root}"
        else:
            detail = (f"the containers differ: {flat.root} is "
                      f"{pytree.structure_str(flat.treedef)} and {ref.root} is "
                      f"{pytree.structure_str(ref.treedef)}")
        raise TypeError(f"{who}: {flat.root} must have the structure of {ref.root}, but "
                        f"{detail}. {fix}")
    for i, (leaf, want) in enumerate(zip(flat.tensors, ref.tensors)):
        if leaf.shape != want.shape or leaf.dtype != want.dtype:
            differ = "shapes differ" if leaf.shape != want.shape else "dtypes differ"
            raise TypeError(f"{who}: {flat.path(i)} is {_type(leaf)} but {ref.path(i)} is "
                            f"{_type(want)} ({differ}). {fix}")


_FIX_GRADS = ("grads must be shaped like params: the same containers and keys, each gradient "
              "with its parameter's shape and dtype (cast one computed in another precision "
              "with .astype).")
_FIX_STATE = "This state was made by init for other parameters; call opt.init(params) again."


def _moments(who: str, tree, where: str, grads: _Flat) -> list:
    """The leaves of a state entry shaped like params (mu, nu, trace), checked against grads."""
    flat = _flatten(tree, where, who)
    _check_like(who, flat, grads, _FIX_STATE)
    return flat.tensors


def _rebuild(grads: _Flat, leaves):
    return pytree.unflatten(grads.treedef, leaves)


def _number(who: str, name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)) \
            or isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"{who}: {name} must be a real number, got {value!r}")
    return float(value)  # a NumPy scalar would upcast float32 leaves; a Python float does not


def _differentiating() -> bool:
    """Inside sl.grad/vjp (directly, or while tracing a scan body inside them)."""
    return STATE.diff_depth > 0


def _recording(differentiable: bool):
    """Record the update for a gradient, or (the training loop) record nothing."""
    return contextlib.nullcontext() if differentiable else no_grad()


def _a(name: str) -> str:
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _count_zero(params: _Flat) -> Tensor:
    device = params.tensors[0].device if params.tensors else None
    return ops.zeros((), dtype=np.int32, device=device)


# --- the transformation object -------------------------------------------------------------------
class _Context(NamedTuple):
    """What a stage needs besides the leaves: who is asking (for errors) and the grads."""

    who: str
    grads: _Flat


class GradientTransformation:
    """An optimiser or a stage of one: `init(params)` makes the state; `update(grads, state,
    params)` returns `(new_params, new_state)`; `transform(grads, state, params)` returns
    `(updates, new_state)` as optax's `update` does. Make one with the functions of this
    module (sgd, adam, chain, ...); the constructor's `apply` works on checked flat leaves.

    >>> opt = sl.optim.sgd(0.1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> state = opt.init(w)
    >>> w, state = opt.update(sl.tensor([0.5, -0.5]), state, w)
    >>> w
    """

    __slots__ = ("name", "_init", "_apply", "outline")

    def __init__(self, name: str, init: Callable, apply: Callable, outline: str = "()"):
        # init(params: _Flat) -> state; apply(leaves, state, params: _Flat | None, ctx, where)
        # -> (leaves, state): the stages work on flat lists of Tensors, checked once. outline:
        # the state's structure for messages, "(ScaleByAdamState, ())" for adam.
        self.name, self._init, self._apply, self.outline = name, init, apply, outline

    def __repr__(self):
        return f"GradientTransformation({self.name})"

    def init(self, params):
        """The optimiser state for `params` (a pytree of Tensors/arrays), a pytree of Tensors."""
        with no_grad():
            return self._init(_flatten(params, "params", f"{self.name}.init"))

    def transform(self, grads, state, params=None):
        """`(updates, new_state)` from gradients, as optax's `update`; add the updates to the
        parameters with `apply_updates`."""
        ctx, p = self._checked(grads, params, "transform")
        with _recording(_differentiating()):
            leaves, state = self._apply(ctx.grads.tensors, state, p, ctx, "state")
        return _rebuild(ctx.grads, leaves), state

    def update(self, grads, state, params):
        """One step: `(new_params, new_state)`. New parameters have the old ones' dtype; in
        the training loop also their kind (Tensor or array) and requires_grad, as fresh leaves
        with `.grad` None. Inside sl.grad/vjp the step is differentiable (module docstring)."""
        if params is None:
            raise TypeError(f"{self.name}.update needs params (it returns the updated ones); "
                            "use transform(grads, state) for the updates alone.")
        ctx, p = self._checked(grads, params, "update")
        differentiable = _differentiating()
        with _recording(differentiable):
            leaves, state = self._apply(ctx.grads.tensors, state, p, ctx, "state")
            return _rebuild(p, _added(p, leaves, differentiable)), state

    def _checked(self, grads, params, method):
        who = f"{self.name}.{method}"
        g = _flatten(grads, "grads", who)
        p = None
        if params is not None:
            p = _flatten(params, "params", who)
            _check_like(who, g, p, _FIX_GRADS)
        return _Context(who, g), p


def _added(params: _Flat, updates, differentiable: bool) -> list:
    """p + u for each leaf. An array parameter stays an array when the sum is a plain
    concrete value; a traced sum (a scan body) or one carrying a gradient stays a Tensor, as
    an array would drop either. In the training loop a Tensor that required grad comes back
    as a fresh leaf that requires grad; when differentiable, the sum is left as recorded."""
    out = []
    for raw, p, u in zip(params.raw, params.tensors, updates):
        new = p + u
        if new.dtype != p.dtype:
            new = new.astype(p.dtype)  # as optax's apply_updates
        concrete = new._trace is None
        if not isinstance(raw, Tensor):
            out.append(new._value if concrete and not new.requires_grad else new)
            continue
        if raw.requires_grad and concrete and not differentiable:
            new.requires_grad_()
        out.append(new)
    return out


def apply_updates(params, updates):
    """`params + updates`, leaf by leaf, as optax.apply_updates: each result keeps its
    parameter's dtype, and (outside sl.grad/vjp) its kind (Tensor or array) and requires_grad;
    inside them it is differentiable, as opt.update.

    >>> opt = sl.optim.adam(0.1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> updates, state = opt.transform(sl.tensor([1.0, -1.0]), opt.init(w))
    >>> sl.optim.apply_updates(w, updates)
    """
    who = "apply_updates"
    p, u = _flatten(params, "params", who), _flatten(updates, "updates", who)
    _check_like(who, u, p, "Pass the updates opt.transform returned for these params.")
    differentiable = _differentiating()
    with _recording(differentiable):
        return _rebuild(p, _added(p, u.tensors, differentiable))


# --- stages ---------------------------------------------------------------------------------------
def _empty_init(params):
    return ()


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply transformations one after another (the first sees the gradients), as optax.chain;
    the state is the tuple of their states.

    >>> opt = sl.optim.chain(sl.optim.clip_by_global_norm(1.0), sl.optim.sgd(0.1))
    >>> w = sl.tensor([0.0, 0.0])
    >>> w, state = opt.update(sl.tensor([3.0, 4.0]), opt.init(w), w)
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


_MADE_BY = {"ScaleByAdamState": "scale_by_adam (adam, adamw)",
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
    """schedule(step) as a Python float, or a 0-d Tensor when the count is traced."""
    step = count if count._trace is not None else int(count.item())
    value = schedule(step)
    if isinstance(value, Tensor):
        if value.ndim != 0 or np.dtype(value.dtype).kind not in "iuf":
            raise TypeError(f"{who}: the schedule must return a real scalar, but at step "
                            f"{step} it returned a Tensor {_type(value)}")
        return value
    try:
        return _number(who, "the schedule's value", value.item() if hasattr(value, "item")
                       else value)
    except (TypeError, ValueError):
        raise TypeError(f"{who}: the schedule must return a real number, but at step {step} "
                        f"it returned {value!r}") from None


def _scaled(leaves, step):
    """step * g for each leaf, with step rounded to g's dtype first (as optax does)."""
    if isinstance(step, Tensor):
        return [step.astype(g.dtype) * g for g in leaves]
    return [step * g for g in leaves]  # a Python float is rounded to g's dtype


def scale_by_learning_rate(learning_rate, *, flip_sign: bool = True) -> GradientTransformation:
    """Multiply the updates by -learning_rate (a number, or a schedule: a callable of the step
    count, 0 first), as optax.scale_by_learning_rate.

    >>> opt = sl.optim.scale_by_learning_rate(lambda step: 0.1 / (1 + step))
    >>> updates, state = opt.transform(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
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


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Momentum: t = g + decay * t, the update is t (g + decay * t with nesterov), as
    optax.trace.

    >>> opt = sl.optim.trace(0.9)
    >>> updates, state = opt.transform(sl.tensor([1.0]), opt.init(sl.tensor([0.0])))
    >>> state.trace
    """
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
                  eps_root: float = 0.0) -> GradientTransformation:
    """Adam's direction m_hat / (sqrt(v_hat + eps_root) + eps), with optax.scale_by_adam's
    bias correction; the learning rate is not applied (see adam).

    >>> opt = sl.optim.scale_by_adam()
    >>> updates, state = opt.transform(sl.tensor([0.5, -2.0]), opt.init(sl.tensor([0.0, 0.0])))
    >>> updates
    """
    who = "scale_by_adam"
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
        for m, v in zip(mu, nu):
            if m.dtype not in corrections:
                corrections[m.dtype] = _bias_corrections(count, m.dtype, b1, b2)
            c1, c2 = corrections[m.dtype]
            v_hat = v / c2
            if eps_root:
                v_hat = v_hat + eps_root
            out.append((m / c1) / (ops.sqrt(v_hat) + eps))
        return out, ScaleByAdamState(count, _rebuild(ctx.grads, mu), _rebuild(ctx.grads, nu))

    return GradientTransformation(who, init, apply, "ScaleByAdamState")


def _bias_corrections(count: Tensor, dtype, *decays) -> list:
    """1 - b ** count for each decay b, computed in float32 (float64 for float64 moments) and
    then cast to dtype, as optax does: b ** count in float16 would round b2 = 0.999 to
    0.99902 and be 1% off."""
    compute = np.promote_types(dtype, np.float32)
    t = count.astype(compute)
    return [(1 - b ** t).astype(dtype) for b in decays]


def add_decayed_weights(weight_decay: float = 0.0) -> GradientTransformation:
    """Add weight_decay * params to the updates (decoupled weight decay), as
    optax.add_decayed_weights; it needs params.

    >>> opt = sl.optim.add_decayed_weights(0.1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> updates, state = opt.transform(sl.tensor([0.0, 0.0]), opt.init(w), w)
    >>> updates
    """
    if callable(weight_decay):
        raise TypeError("add_decayed_weights: a schedule for weight_decay is not supported; "
                        "pass a number.")
    decay = _number("add_decayed_weights", "weight_decay", weight_decay)

    def apply(leaves, state, params, ctx, where):
        if params is None:
            raise TypeError(f"{ctx.who}: add_decayed_weights needs params; pass them: "
                            "opt.transform(grads, state, params).")
        if decay == 0.0:
            return leaves, state
        return [g + decay * p for g, p in zip(leaves, params.tensors)], state

    return GradientTransformation("add_decayed_weights", _empty_init, apply)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all updates by max_norm / norm when their joint L2 norm is at least max_norm
    (below it they pass untouched), as optax.clip_by_global_norm.

    Equal to optax's up to a few ulps, not bit for bit: the sum of squares runs in another
    order than XLA's, and XLA computes t / norm as t * (1 / norm).

    >>> opt = sl.optim.clip_by_global_norm(1.0)
    >>> g = {"a": sl.tensor([3.0]), "b": sl.tensor([4.0])}
    >>> updates, state = opt.transform(g, opt.init(g))
    >>> updates
    """
    max_norm = _number("clip_by_global_norm", "max_norm", max_norm)

    def apply(leaves, state, params, ctx, where):
        if not leaves:
            return leaves, state
        total = None
        for g in leaves:
            s = ops.sum(g * g)
            total = s if total is None else total + s
        norm = ops.sqrt(total)
        below = norm < max_norm
        if below._trace is None:  # concrete: decide here, and leave the updates untouched
            if bool(below):
                return leaves, state
            return [(g / norm.astype(g.dtype)) * max_norm for g in leaves], state
        safe = ops.where(below, ops.ones_like(norm), norm)  # no 0/0 in the unused branch
        return [ops.where(below, g, (g / safe.astype(g.dtype)) * max_norm)
                for g in leaves], state

    return GradientTransformation("clip_by_global_norm", _empty_init, apply)


# --- optimisers -----------------------------------------------------------------------------------
def sgd(learning_rate, momentum: float | None = None,
        nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum, as optax.sgd:
    p -= lr * g, or with momentum t = g + momentum * t, p -= lr * t.

    >>> opt = sl.optim.sgd(0.1, momentum=0.9)
    >>> w = sl.tensor([1.0, -1.0], requires_grad=True)
    >>> state = opt.init(w)
    >>> (w * w).sum().backward()
    >>> w, state = opt.update(w.grad, state, w)
    >>> w
    """
    stages = [] if momentum is None else [trace(momentum, nesterov)]
    opt = chain(*stages, scale_by_learning_rate(learning_rate))
    opt.name = "sgd"
    return opt


def momentum(learning_rate, beta: float = 0.9) -> GradientTransformation:
    """Heavy-ball momentum: m = g + beta * m, p -= lr * m (sgd with momentum=beta).

    >>> opt = sl.optim.momentum(0.1, beta=0.5)
    >>> w = sl.tensor([1.0])
    >>> w, state = opt.update(sl.tensor([1.0]), opt.init(w), w)
    >>> w
    """
    opt = sgd(learning_rate, momentum=beta)
    opt.name = "momentum"
    return opt


def adam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0) -> GradientTransformation:
    """Adam (Kingma & Ba), operation for operation as optax.adam: its state is
    `(ScaleByAdamState(count, mu, nu), <the learning rate's state>)`.

    >>> opt = sl.optim.adam(1e-2)
    >>> w = sl.tensor([1.0, -1.0], dtype="float32")
    >>> state = opt.init(w)
    >>> for _ in range(3):
    ...     w, state = opt.update(sl.grad(lambda w: (w * w).sum())(w), state, w)
    >>> w
    """
    opt = chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(learning_rate))
    opt.name = "adam"
    return opt


def adamw(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, weight_decay: float = 1e-4) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter), as optax.adamw: the update is
    -lr * (adam's direction + weight_decay * p).

    >>> opt = sl.optim.adamw(1e-2, weight_decay=0.1)
    >>> w = sl.tensor([1.0, -1.0])
    >>> w, state = opt.update(sl.tensor([0.0, 0.0]), opt.init(w), w)
    >>> w
    """
    opt = chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay),
                scale_by_learning_rate(learning_rate))
    opt.name = "adamw"
    return opt


# --- the torch-style loop -------------------------------------------------------------------------
def grads_of(params):
    """The `.grad` of every parameter, as a tree shaped like params, for the torch-style loop
    (`loss.backward()` then `opt.update(grads_of(params), state, params)`).

    >>> w = sl.tensor([1.0, 2.0], requires_grad=True)
    >>> (w * w).sum().backward()
    >>> sl.optim.grads_of({"w": w})
    """
    flat = _flatten(params, "params", "grads_of")
    grads = []
    for i, leaf in enumerate(flat.raw):
        if not (isinstance(leaf, Tensor) and leaf.requires_grad):
            raise TypeError(
                f"grads_of: {flat.path(i)} does not require grad, so backward() gives it no "
                ".grad. Create it with sl.tensor(..., requires_grad=True) or call "
                ".requires_grad_() on it.")
        if leaf.grad is None:
            raise ValueError(
                f"grads_of: {flat.path(i)}.grad is None: backward() has not reached it since "
                "it was made (the loss does not use it, or backward() was not called after the "
                "last update). Call loss.backward() first, or leave it out of params.")
        grads.append(leaf.grad)
    return _rebuild(flat, grads)
