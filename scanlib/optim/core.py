"""The machinery of scanlib.optim: trees flattened and checked against each other (errors that
name the pytree path), the GradientTransformation object, apply_updates and grads_of. The
stages are in optim.transforms.

Imports backends, tape, ops and pytree.
"""

from __future__ import annotations

import contextlib
from types import MappingProxyType
from typing import Any, Callable, NamedTuple, Union

import numpy as np

from .. import backends, ops, pytree
from ..tape import Tensor, no_grad, type_str
from ..tape.state import STATE
from ..tape.types import PyTree

ScalarOrSchedule = Union[float, np.integer, np.floating, Callable[[Any], Any]]
"""A learning rate: a real number, or a schedule, a callable of the step count (0 first) that
returns one."""


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


def _number(who: str, name: str, value) -> float | Tensor:
    """A hyperparameter as a Python float; a 0-d real Tensor (what inject_hyperparams passes,
    in the parameters' dtype, traced inside jit) is kept as it is."""
    if isinstance(value, Tensor):
        if value.ndim != 0 or np.dtype(value.dtype).kind not in "iuf":
            raise TypeError(f"{who}: {name} must be a real scalar, got a Tensor {_type(value)}")
        return value
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


def _select(cond: Tensor, a, b):
    """a where the 0-d bool cond holds, else b, as optax's lax.cond/where: a concrete cond picks
    one side here (so only it is differentiated); a traced one (scan body, jit, vmap) selects
    with where."""
    if cond._trace is None:
        return a if bool(cond) else b
    return ops.where(cond, a, b)


def _select_tree(cond: Tensor, a, b):
    """_select over two trees of one structure, leaf by leaf (states, lists of updates)."""
    if cond._trace is None:
        return a if bool(cond) else b
    leaves_a, treedef = pytree.flatten(a)
    leaves_b = pytree.flatten(b)[0]
    return pytree.unflatten(treedef, [ops.where(cond, x, y).astype(ops.as_tensor(x).dtype)
                                      for x, y in zip(leaves_a, leaves_b)])


def _extra(ctx, who: str, name: str, fix: str):
    """An extra argument of update (optax's `update(..., value=loss)`), or a clear error."""
    if name not in ctx.extra:
        raise TypeError(f"{ctx.who}: {who} needs {name}= in update(grads, state, params, "
                        f"{name}=...): {fix}")
    return ctx.extra[name]


def _count_zero(params: _Flat) -> Tensor:
    device = params.tensors[0].device if params.tensors else None
    return ops.zeros((), dtype=np.int32, device=device)


# --- the transformation object -------------------------------------------------------------------
class _Context(NamedTuple):
    """What a stage needs besides the leaves: who is asking (for errors), the grads, and the
    keyword arguments update was given besides them (optax's extra args: value=, grad=,
    value_fn=, which the linesearches and scale_by_polyak read and the others ignore)."""

    who: str
    grads: _Flat
    extra: Any = MappingProxyType({})


class GradientTransformation:
    """An optimiser or a stage of one, as optax's: `init(params)` makes the state;
    `update(grads, state, params=None)` returns `(updates, new_state)`, the updates to add
    to the parameters with `apply_updates` (optax's `update`, the same meaning and sign);
    `step(grads, state, params)` does both and returns `(new_params, new_state)`. Make one
    with the functions of this module (sgd, adam, chain, ...); the constructor's `apply`
    works on checked flat leaves.

    >>> opt = sl.optim.sgd(0.1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> state = opt.init(w)
    >>> updates, state = opt.update(sl.tensor([0.5, -0.5]), state, w)
    >>> sl.optim.apply_updates(w, updates)
    >>> w, state = opt.step(sl.tensor([0.5, -0.5]), state, w)  # the same, in one call
    >>> w
    """

    __slots__ = ("name", "_init", "_apply", "outline")

    def __init__(self, name: str, init: Callable, apply: Callable | None = None,
                 outline: str = "()"):
        # init(params: _Flat) -> state; apply(leaves, state, params: _Flat | None, ctx, where)
        # -> (leaves, state): the stages work on flat lists of Tensors, checked once. outline:
        # the state's structure for messages, "(ScaleByAdamState, ())" for adam.
        if callable(name) or apply is None:
            raise TypeError(
                "GradientTransformation(init_fn, update_fn), optax's way to write a custom "
                "stage, is not supported: scanlib's stages work on checked flat leaves. Build "
                "the optimiser from sl.optim's stages (chain, scale, trace, scale_by_adam, "
                "add_decayed_weights, clip_by_global_norm, ...).")
        self.name, self._init, self._apply, self.outline = name, init, apply, outline

    def __repr__(self) -> str:
        return f"GradientTransformation({self.name})"

    def init(self, params: PyTree) -> PyTree:
        """The optimiser state for `params` (a pytree of Tensors/arrays), a pytree of Tensors."""
        with no_grad():
            return self._init(_flatten(params, "params", f"{self.name}.init"))

    def update(self, grads: PyTree, state: PyTree, params: PyTree | None = None,
               **extra_args: Any) -> tuple[PyTree, PyTree]:
        """`(updates, new_state)` from gradients, as optax's `update`: the updates are what
        `apply_updates(params, updates)` adds to the parameters (-lr * g for sgd). params is
        needed by the stages that read them (add_decayed_weights, so adamw). Keyword
        arguments reach every stage, as optax's extra args (`value=loss` for polyak_sgd,
        `value=`, `grad=`, `value_fn=` for lbfgs' linesearch); a stage that does not read
        them ignores them. Inside sl.grad/vjp the updates are differentiable (module
        docstring)."""
        ctx, p = self._checked(grads, params, "update", extra_args)
        with _recording(_differentiating()):
            leaves, state = self._apply(ctx.grads.tensors, state, p, ctx, "state")
        return _rebuild(ctx.grads, leaves), state

    def step(self, grads: PyTree, state: PyTree, params: PyTree,
             **extra_args: Any) -> tuple[PyTree, PyTree]:
        """One step in one call: `(new_params, new_state)`, that is `update` then
        `apply_updates`. New parameters have the old ones' dtype; in the training loop also
        their kind (Tensor or array) and requires_grad, as fresh leaves with `.grad` None.
        Inside sl.grad/vjp the step is differentiable (module docstring)."""
        if params is None:
            raise TypeError(f"{self.name}.step needs params (it returns the updated ones); "
                            "use update(grads, state) for the updates alone.")
        ctx, p = self._checked(grads, params, "step", extra_args)
        differentiable = _differentiating()
        with _recording(differentiable):
            leaves, state = self._apply(ctx.grads.tensors, state, p, ctx, "state")
            return _rebuild(p, _added(p, leaves, differentiable)), state

    def _checked(self, grads, params, method, extra_args):
        who = f"{self.name}.{method}"
        g = _flatten(grads, "grads", who)
        p = None
        if params is not None:
            p = _flatten(params, "params", who)
            _check_like(who, g, p, _FIX_GRADS)
        return _Context(who, g, MappingProxyType(extra_args)), p


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


def apply_updates(params: PyTree, updates: PyTree) -> PyTree:
    """`params + updates`, leaf by leaf, as optax.apply_updates: each result keeps its
    parameter's dtype, and (outside sl.grad/vjp) its kind (Tensor or array) and requires_grad;
    inside them it is differentiable, as opt.step.

    >>> opt = sl.optim.adam(0.1)
    >>> w = sl.tensor([1.0, 2.0])
    >>> updates, state = opt.update(sl.tensor([1.0, -1.0]), opt.init(w))
    >>> sl.optim.apply_updates(w, updates)
    """
    who = "apply_updates"
    p, u = _flatten(params, "params", who), _flatten(updates, "updates", who)
    _check_like(who, u, p, "Pass the updates opt.update returned for these params.")
    differentiable = _differentiating()
    with _recording(differentiable):
        return _rebuild(p, _added(p, u.tensors, differentiable))


# --- the torch-style loop -------------------------------------------------------------------------
def grads_of(params: PyTree) -> PyTree:
    """The `.grad` of every parameter, as a tree shaped like params, for the torch-style loop
    (`loss.backward()` then `opt.step(grads_of(params), state, params)`).

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
