"""The functional, JAX-style API over the tape: grad, value_and_grad, vjp and stop_gradient,
on pytrees.

Each call wraps its inputs as fresh tape leaves, runs f, and walks back to them. Inside an
outer grad/vjp (or when the inputs themselves require grad) the walk is recorded, which is
what makes grad(grad(f)) and Hessian-vector products work.
Imports backends, tape, ops and pytree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import functools

import numpy as np

from . import backends, pytree
from .ops import elementwise as ew
from .ops import as_tensor, zeros_like
from .tape import (
    Tensor,
    backward_pass,
    differentiating,
    enable_grad,
    grad_enabled,
    is_differentiable_dtype,
    reaches_other_leaves,
)
from .tape.backward import watching
from .tape import state as _state

if TYPE_CHECKING:
    from .tape.types import PyTree


def _fresh_input(x, path, who):
    """A new tape leaf holding x's data; linked to x when x is itself being differentiated."""
    if isinstance(x, Tensor):
        t = x
    elif backends.is_array(x) or isinstance(x, float):
        t = Tensor(backends.asarray_on(x, backends.device_of(x)) if backends.is_array(x)
                   else np.asarray(x))
    else:
        raise TypeError(f"{who}: {path} is a {type(x).__name__}; differentiate with respect to "
                        "Tensors, float arrays or Python floats (write 1.0, not 1).")
    if not is_differentiable_dtype(t.dtype):
        raise TypeError(f"{who}: {path} has dtype {t.dtype}, which is not differentiable; "
                        "pass a float array (x.astype('float64')) or choose other argnums.")
    builder = _state.current_builder()
    if builder is not None:
        # Inside a traced body the gradient is computed on the graph: a closed-over tensor
        # or a number becomes a value of that graph first, or f's ops would not reach it.
        t = builder.lift(t)
    if t.requires_grad and grad_enabled():
        return ew.copy(t)  # a node: the outer walk flows through to x
    leaf = Tensor(t._value, True, _trace=t._trace, _var=t._var)
    leaf._scratch = True
    return leaf


def should_record(originals, cts=()):
    """Record the backward walk when an enclosing differentiation could need it: a traced
    body's graph may be differentiated, a jit call's own graph never is (a call whose
    arguments require grad runs eagerly), so there the walk is eager's."""
    if not grad_enabled():
        return False
    builder = _state.current_builder()
    return (_state.STATE.diff_depth > 0
            or any(isinstance(x, Tensor) and x.requires_grad for x in originals)
            or any(isinstance(c, Tensor) and c.requires_grad for c in cts)
            or (builder is not None and not builder.whole_call))


def _records(originals, inputs, outs, cts=()):
    """Record the walk (and keep the value on the tape) when an enclosing differentiation
    could need it: the cases of should_record, or f's result depends on a tensor that
    requires grad other than through the inputs (a closed-over parameter)."""
    return should_record(originals, cts) or (
        grad_enabled() and reaches_other_leaves(outs, inputs))


def _zeros_for(target):
    return zeros_like(target.detach())


def vjp(f: Callable[..., Any], *primals: PyTree, has_aux: bool = False) -> tuple[Any, ...]:
    """(out, vjp_fn): vjp_fn(cotangent shaped like out) returns one cotangent per primal.

    out (and aux, with has_aux=True) stays on the tape only where something may
    differentiate it further (an input or a closed-over tensor requires grad, or an
    enclosing differentiation); otherwise it is a plain value, as JAX returns it. An integer
    or bool cotangent of a float output counts as that output's dtype (JAX raises there).

    >>> import scanlib as sl
    >>> out, back = sl.vjp(lambda x: x * x, sl.tensor([1.0, 2.0]))
    >>> back(sl.tensor([1.0, 1.0]))
    (tensor([2., 4.], dtype=float64),)
    """
    return vjp_recording(f, primals, has_aux, None)


def vjp_recording(f, primals, has_aux, record, who="vjp", forward=False):
    """vjp, with `record` forcing (True/False) whether vjp_fn's walk is recorded, or None to
    decide as vjp does. The returned vjp_fn tells its choice as `vjp_fn.records` (the double
    VJP of scanlib.transforms passes the first one's on to the second). `who` is the
    transformation errors name (jvp, jacrev, ... call this); `forward`: the walk is forward
    mode's, the first VJP of the double VJP (see tape.levels)."""
    paths, leaves, treedef = pytree.flatten_with_paths(primals, "primals")
    with differentiating():
        inputs = [_fresh_input(x, p, who) for p, x in zip(paths, leaves)]
        with enable_grad(), watching(who, inputs, forward) as level:  # even in no_grad()
            out = f(*pytree.unflatten(treedef, inputs))
    aux = None
    if has_aux:
        out, aux = split_aux(out, "vjp")
    out_paths, out_leaves, out_tree = pytree.flatten_with_paths(out, "out")
    if record is None:
        record = _records(leaves, inputs, out_leaves)

    def vjp_fn(cotangent):
        ct_paths, ct_leaves, ct_tree = pytree.flatten_with_paths(cotangent, "cotangent")
        if ct_tree != out_tree:
            raise TypeError(f"vjp_fn: the cotangent must have the structure of f's output "
                            f"({pytree.structure_str(out_tree)}), got "
                            f"{pytree.structure_str(ct_tree)}")
        roots, cts = [], []
        for path, o, c in zip(out_paths, out_leaves, ct_leaves):
            c = c if isinstance(c, Tensor) else Tensor(backends.asarray_on(c, _dev(o)))
            if tuple(c.shape) != tuple(np.shape(o)):
                raise ValueError(f"vjp_fn: {path} has shape {tuple(np.shape(o))} but its "
                                 f"cotangent has shape {c.shape}")
            if isinstance(o, Tensor) and o.requires_grad:
                if is_differentiable_dtype(o.dtype) and not is_differentiable_dtype(c.dtype):
                    # An integer cotangent of a float output counts in that dtype: left as
                    # it is, a rule that drops integer cotangents (while_loop's VJP under
                    # jit) would seed nothing, and the identity would give an int gradient.
                    c = c.astype(o.dtype)
                roots.append(o)
                cts.append(c)
        found = (backward_pass(roots, cts, targets=inputs, retain_graph=True,
                               create_graph=record or should_record(leaves, cts), level=level)
                 if roots
                 else [None] * len(inputs))
        grads = [g if g is not None else _zeros_for(x) for g, x in zip(found, inputs)]
        return pytree.unflatten(treedef, grads)

    vjp_fn.records = record
    if not record:  # nothing differentiates through them: plain values, as JAX returns
        out, aux = _detached(out), _detached(aux)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _detached(tree):
    return pytree.tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def _dev(o):
    return o.device if isinstance(o, Tensor) else backends.device_of(o)


def split_aux(out, who):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"{who}(has_aux=True): f must return a pair (output, aux), got "
                        f"{type(out).__name__}")
    return out


def value_and_grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, holomorphic: bool = False) -> Callable[..., Any]:
    """A function returning (f(*args), gradient of f with respect to args[argnums]).

    f must return a real scalar (or, with holomorphic=True, a complex one of complex inputs).
    The gradient has the structure of the chosen argument(s) (a tuple when argnums is a
    tuple). Arguments f does not depend on get zeros, as in JAX. Keyword arguments are passed
    to f and not differentiated, as in JAX. For a real f of complex z
    the gradient is JAX's: df/dRe(z) - 1j df/dIm(z), the conjugate of torch's.
    """
    multiple = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multiple else (argnums,)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        for n in nums:
            if not isinstance(n, int) or not -len(args) <= n < len(args):
                raise ValueError(f"grad: argnums {argnums!r} is out of range for "
                                 f"{len(args)} positional arguments")
        nums_ = tuple(n % len(args) for n in nums)
        chosen = tuple(args[n] for n in nums_)
        paths, leaves, treedef = pytree.flatten_with_paths(chosen, "args")
        paths = [_arg_path(p, nums_) for p in paths]
        with differentiating():
            inputs = [_fresh_input(x, p, "grad") for p, x in zip(paths, leaves)]
            new_chosen = pytree.unflatten(treedef, inputs)
            call_args = list(args)
            for n, v in zip(nums_, new_chosen):
                call_args[n] = v
            # asked for explicitly: record f even inside no_grad()
            with enable_grad(), watching("grad", inputs) as level:
                out = f(*call_args, **kwargs)
        aux = None
        if has_aux:
            out, aux = split_aux(out, "grad")
        if not isinstance(out, Tensor):
            if isinstance(out, (float, int)) or backends.is_array(out):
                out = Tensor(backends.asarray_on(out, "cpu") if not backends.is_array(out)
                             else out)
            else:
                raise TypeError(f"grad: f must return a scalar Tensor, got "
                                f"{type(out).__name__}")
        if out.size != 1 or out.ndim != 0:
            raise TypeError(f"grad: f must return a scalar (shape ()), but it returned shape "
                            f"{out.shape}. Reduce it (.sum(), .mean()) or use scanlib.vjp for "
                            "non-scalar outputs.")
        _check_holomorphic(out, inputs, paths, holomorphic)
        record = _records(leaves, inputs, [out])
        if out.requires_grad:
            seed = Tensor(backends.xp_of(out._value).ones_like(out._value))
            found = backward_pass([out], [seed], targets=inputs, create_graph=record,
                                  level=level)
        else:
            found = [None] * len(inputs)
        grads = [g if g is not None else _zeros_for(x) for g, x in zip(found, inputs)]
        g_tree = pytree.unflatten(treedef, grads)
        g_out = g_tree if multiple else g_tree[0]
        value, aux = (out, aux) if record else (out.detach(), _detached(aux))
        return ((value, aux), g_out) if has_aux else (value, g_out)

    return wrapped


def _check_holomorphic(out, inputs, paths, holomorphic):
    """JAX's rules: grad needs a real output, unless holomorphic=True, which needs complex
    inputs and output."""
    if not is_differentiable_dtype(out.dtype):
        raise TypeError(f"grad: f returned a scalar of dtype {out.dtype}; grad needs a float (its "
                        "derivative would be zero everywhere, or undefined), as in JAX. Return a "
                        "float, e.g. with .astype('float64'), if that is what you mean.")
    complex_out = np.dtype(out.dtype).kind == "c"
    if complex_out and not holomorphic:
        raise TypeError(f"grad: f returned a complex scalar ({out.dtype}); grad needs a real "
                        "one. Take scanlib.real(...) or scanlib.abs(...) of it, or pass "
                        "holomorphic=True if f is holomorphic.")
    if holomorphic:
        for p, x in zip(paths, inputs):
            if np.dtype(x.dtype).kind != "c":
                raise TypeError(f"grad(holomorphic=True): {p} is {x.dtype}; holomorphic "
                                "differentiation needs complex inputs (astype('complex128')).")
        if not complex_out:
            raise TypeError(f"grad(holomorphic=True): f returned {out.dtype}; a holomorphic f "
                            "returns a complex scalar.")


def _arg_path(path, nums):
    # "args[0]['h']" names the tuple of chosen arguments; show the real argument index.
    if path.startswith("args["):
        idx, rest = path[5:].split("]", 1)
        return f"args[{nums[int(idx)]}]{rest}"
    return path


def grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable[..., PyTree]:
    """The gradient of scalar-valued f with respect to args[argnums], as in JAX.

    As with torch.func, an argument that is a Tensor with requires_grad=True keeps its link
    to the caller's tape: the gradient's own computation is recorded so that it can be
    differentiated again. Pass arrays or detached tensors when that is not wanted (it is
    slower).

    >>> import scanlib as sl
    >>> sl.grad(lambda x: (x ** 3).sum())(sl.tensor([1.0, 2.0]))
    tensor([ 3., 12.], dtype=float64)
    """
    vg = value_and_grad(f, argnums, has_aux, holomorphic)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def stop_gradient(x: PyTree) -> PyTree:
    """x's value, through which no gradient flows; of a pytree (dicts, lists, tuples, nested),
    every leaf's, as jax.lax.stop_gradient. Tensor, array and number leaves come back as
    Tensors; other leaves (strings, say) come back unchanged.

    >>> import scanlib as sl
    >>> sl.grad(lambda x: (x * sl.stop_gradient(x)).sum())(sl.tensor([3.0]))
    tensor([3.], dtype=float64)
    >>> sl.stop_gradient({"w": sl.tensor([1.0], requires_grad=True), "name": "layer1"})
    {'w': tensor([1.], dtype=float64), 'name': 'layer1'}
    """
    if type(x) is Tensor:
        return ew.stop_gradient(x)
    return pytree.tree_map(_stop_leaf, x)


def _stop_leaf(x):
    if isinstance(x, Tensor):
        return ew.stop_gradient(x)
    if backends.is_array(x) or isinstance(x, (bool, int, float, complex)):
        return ew.stop_gradient(as_tensor(x))
    return x
