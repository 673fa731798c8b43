"""Forward mode and Jacobians, with JAX's signatures: jvp, linearize, jacfwd, jacrev, hessian.

jvp runs f once with a tangent beside every value (forward mode, interpreters/forward.py),
eagerly or in a trace (jit, vmap, a loop body), and jacfwd once per column eagerly, and in a
trace once for all its columns, by vmap, as JAX's. Where the result may itself be
differentiated, and for linearize (one linearization, many tangents), it is the transpose
of f's whole VJP ("double VJP"), whose columns a trace pushes together by vmap too, as
jacrev pulls its rows back through f's VJP.
Imports the interpreters, vmap and the layers below scanlib/__init__ (autodiff, pytree, ops,
tape, backends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import functools

import numpy as np

from . import autodiff, backends, pytree
from .ops import concatenate, moveaxis, reshape, stack, zeros
from .interpreters.forward import forward_jvp, leaf_info
from .tape import Tensor
from .tape.graph import Var
from .tape.state import STATE, current_builder, grad_enabled
from .tracing import make_graph
from .vmap import vmap

if TYPE_CHECKING:
    from .tape.types import PyTree

__all__ = ["jvp", "linearize", "linear_transpose", "jacfwd", "jacrev", "hessian"]


# --- leaves: shape, dtype, device, checks -----------------------------------------------------
def _describe(info):
    shape, dtype, _ = info
    return f"{dtype}{list(shape)}"


def _check_float(who, paths, leaves, what, allow_complex=True):
    """Forward mode differentiates float (or complex) leaves only: say which one is not."""
    kinds = "fc" if allow_complex else "f"
    for path, x in zip(paths, leaves):
        info = leaf_info(x)
        if info is None:
            raise TypeError(f"{who}: {path} is a {type(x).__name__}; {what} leaves must be "
                            "Tensors, arrays or Python floats.")
        if info[1].kind not in kinds:
            hint = ("pass a float array (x.astype('float64')), or close over it (or choose "
                    "other argnums) if it is not meant to be differentiated"
                    if what == "input" else
                    "return it through has_aux=True, or cast it with .astype('float64')")
            if info[1].kind == "c":
                raise TypeError(f"{who}: {path} is complex ({info[1]}); {who} supports real "
                                "inputs and outputs only (use scanlib.jvp for complex ones).")
            raise TypeError(f"{who}: {path} has dtype {info[1]}, which has no tangent space "
                            f"(JAX would use float0 tangents, scanlib refuses); {hint}.")


def _check_tangents(who, primals, tangents):
    """tangents as Tensors, after checking that they match primals leaf by leaf."""
    if not isinstance(tangents, (tuple, list)):
        raise TypeError(f"{who}: tangents must be a tuple with one entry per primal (as "
                        f"jax.jvp), got {type(tangents).__name__}")
    p_paths, p_leaves, p_tree = pytree.flatten_with_paths(tuple(primals), "primals")
    t_paths, t_leaves, t_tree = pytree.flatten_with_paths(tuple(tangents), "tangents")
    if p_tree != t_tree:
        raise TypeError(f"{who}: tangents must have the structure of primals, but primals is "
                        f"{pytree.structure_str(p_tree)} and tangents is "
                        f"{pytree.structure_str(t_tree)}")
    out = []
    for t_path, p, t in zip(t_paths, p_leaves, t_leaves):
        p_info, t_info = leaf_info(p), leaf_info(t)
        if t_info is None:
            raise TypeError(f"{who}: {t_path} is a {type(t).__name__}; tangents must be "
                            "Tensors, arrays or Python floats")
        weak = isinstance(t, (int, float)) and not isinstance(t, bool) and p_info[0] == ()
        if t_info[0] != p_info[0] or (t_info[1] != p_info[1] and not weak):
            raise TypeError(f"{who}: {t_path} is {_describe(t_info)} but its primal is "
                            f"{_describe(p_info)}; a tangent must have its primal's shape and "
                            "dtype (cast it with .astype or reshape it).")
        if isinstance(t, Tensor):
            out.append(t)
        else:
            out.append(Tensor(backends.asarray_on(t, p_info[2], dtype=p_info[1])))
    return pytree.unflatten(t_tree, out)


def _detach_tree(tree):
    leaves, treedef = pytree.flatten(tree)
    return pytree.unflatten(treedef, [x.detach() if isinstance(x, Tensor) else x
                                      for x in leaves])


# --- the double VJP ---------------------------------------------------------------------------
def _linearized(f, primals, has_aux, who):
    """(out, aux, push): push(tangents shaped like primals) is the JVP of f at primals.

    vjp_fn(u) is linear in u; recording it once at a dummy u and walking back from its result
    with the tangent as cotangent gives J @ tangent (the transpose of the transpose).
    """
    paths, leaves, _ = pytree.flatten_with_paths(tuple(primals), "primals")
    _check_float(who, paths, leaves, "input")
    found = autodiff.vjp_recording(f, tuple(primals), has_aux, None, who, forward=True)
    out, vjp_fn = found[0], found[1]
    aux = found[2] if has_aux else None
    out_paths, out_leaves, out_tree = pytree.flatten_with_paths(out, "out")
    _check_float(who, out_paths, out_leaves, "output")
    # The dummy's value is never read by the result (g is linear in it): zeros do.
    dummy = pytree.unflatten(out_tree, [zeros(*leaf_info(o)) for o in out_leaves])
    # Record the transposed walk exactly when the first one is recorded (an input or a
    # closed-over tensor requires grad, or an enclosing differentiation): the dummy and the
    # first VJP's own inputs are no reason to.
    _, transpose = autodiff.vjp_recording(vjp_fn, (dummy,), False, vjp_fn.records)

    def push(tangents):
        (tangents_out,) = transpose(tangents)
        return tangents_out

    if not vjp_fn.records:
        out = _detach_tree(out)
    return out, aux, push


def _forward_applies(leaves, tangents=()):
    """Whether forward mode gives jvp's result: not where a walk that must be recorded will
    differentiate it (inside grad, or an input or tangent that requires grad), since forward
    mode records no backward. Inside a trace (jit, vmap, a loop body) its rules' equations
    are recorded like any others, so the trace's graph, differentiated later (a scan body's
    linearization), differentiates them: reverse mode over forward mode, as JAX's."""
    if not grad_enabled():
        return True
    return STATE.diff_depth == 0 and not any(
        isinstance(x, Tensor) and x.requires_grad for x in list(leaves) + list(tangents))


def jvp(f: Callable[..., Any], primals: Sequence[PyTree], tangents: Sequence[PyTree],
        has_aux: bool = False) -> tuple[Any, ...]:
    """(f(*primals), the JVP of f at primals applied to tangents), as jax.jvp.

    primals and tangents are tuples with one pytree per positional argument of f; each
    tangent leaf has its primal's shape and dtype. Inputs must be float (or complex):
    integer or bool primals raise TypeError (JAX would take float0 tangents). With
    has_aux=True, f returns (output, aux) and jvp returns (out, tangent_out, aux).
    Computed by forward mode (scanlib/interpreters/forward.py): f runs once with a tangent
    beside every value, each primitive's tangent by its JVP rule (the transpose of its VJP
    where it has none), and a scan's JVP one scan over primal and tangent carries (about 3x
    a forward through the rnn bench), eagerly and inside a trace (jit, vmap, a scan body)
    alike. Where the result may be differentiated again (inside grad, a closed-over tensor
    that requires grad), it is the transpose of f's VJP instead (a forward, a recorded
    backward and a walk back).

    >>> import scanlib as sl
    >>> x = sl.tensor([1.0, 2.0])
    >>> sl.jvp(lambda x: x ** 3, (x,), (sl.tensor([1.0, 0.0]),))
    (tensor([1., 8.], dtype=float64), tensor([3., 0.], dtype=float64))
    """
    if not isinstance(primals, (tuple, list)):
        raise TypeError(f"jvp: primals must be a tuple with one entry per positional argument "
                        f"of f (as jax.jvp), got {type(primals).__name__}; write (x,).")
    primals = tuple(primals)
    paths, leaves, _ = pytree.flatten_with_paths(primals, "primals")
    _check_float("jvp", paths, leaves, "input")  # before the tangents: the better message
    tangents = _check_tangents("jvp", primals, tangents)
    found = None
    # Forward mode, eagerly or in a trace; where a recorded walk may differentiate the
    # result again, the double VJP instead.
    if _forward_applies(leaves, pytree.flatten(tangents)[0]):
        found = forward_jvp(f, primals, tangents, has_aux)
        if found is not None:
            out_paths, out_leaves, _ = pytree.flatten_with_paths(found[0], "out")
            _check_float("jvp", out_paths, out_leaves, "output")
    if found is None:  # the result may be differentiated again: the double VJP records it
        out, aux, push = _linearized(f, primals, has_aux, "jvp")
        found = out, push(tangents), aux
    out, tangents_out, aux = found
    return (out, tangents_out, aux) if has_aux else (out, tangents_out)


def linearize(f: Callable[..., Any], *primals: PyTree) -> tuple[PyTree, Callable[..., PyTree]]:
    """(f(*primals), f_jvp), where f_jvp(*tangents) is the JVP at primals, as jax.linearize.

    f runs once (with its backward recorded); each f_jvp call then costs one walk over that
    record, so many tangents at one point (a Jacobian's columns) share the forward.

    >>> import scanlib as sl
    >>> out, f_jvp = sl.linearize(lambda x: sl.sin(x), sl.tensor([0.0, 1.0]))
    >>> f_jvp(sl.tensor([1.0, 1.0]))
    tensor([1.        , 0.54030231], dtype=float64)
    """
    out, _, push = _linearized(f, primals, False, "linearize")

    def f_jvp(*tangents):
        return push(_check_tangents("linearize", primals, tangents))

    return out, f_jvp


# --- linear_transpose ---------------------------------------------------------------------------
def _nonlinear_step(graph):
    """The first equation of graph that is not linear in the graph's inputs (an operation
    on values that depend on them other than a sum, a difference, a product by a value that
    does not, a division of one by a value that does not, a move or copy), or None."""
    dependent = set(graph.invars)
    for eqn in graph.eqns:
        reads = [isinstance(v, Var) and v in dependent for v in eqn.invars]
        if not any(reads):
            continue
        prim = eqn.prim
        linear = prim.linear
        if not (linear is True
                or (isinstance(linear, tuple)
                    and all(i in linear for i, r in enumerate(reads) if r))
                or (prim.multilinear and sum(reads) == 1)
                or (prim.name == "div" and reads == [True, False])):
            return eqn
        dependent.update(eqn.outvars)
    return None


def linear_transpose(fun: Callable[..., Any], *primals: PyTree,
                     reduce_axes: tuple = ()) -> Callable[[PyTree], tuple]:
    """The transpose of the linear function fun, as jax.linear_transpose: primals give its
    inputs' shapes and dtypes (arrays, Tensors or ShapeDtypeStructs; their values are not
    used), and `fun_t = linear_transpose(fun, *primals)` maps a cotangent shaped like fun's
    output to a tuple shaped like primals. fun must be linear in them: each operation on
    values that depend on them a sum, a difference, a product by (or division of one by) a
    value that does not, or a move (reshape, transpose, indexing, concatenation, ...);
    anything else raises, as in JAX (loops and conds in fun are not transposed yet).

    >>> fun_t = sl.linear_transpose(lambda x: 2.0 * x[::-1], sl.zeros(3))
    >>> fun_t(sl.tensor([1.0, 2.0, 3.0]))
    (tensor([6., 4., 2.], dtype=float64),)
    """
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes (JAX's named axes) is not "
                                  "supported.")
    leaves, tree = pytree.flatten(primals)
    for i, x in enumerate(leaves):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise TypeError(f"linear_transpose: primal leaf {i} is {type(x).__name__}; pass "
                            "arrays, Tensors or ShapeDtypeStructs (their shapes and dtypes "
                            "are what is used).")
        if np.dtype(x.dtype).kind not in "fc":
            raise TypeError(f"linear_transpose: primal leaf {i} is {np.dtype(x.dtype)}; a "
                            "linear function's inputs are floating or complex, as in JAX.")
    examples = pytree.unflatten(tree, [zeros(tuple(x.shape), dtype=np.dtype(x.dtype))
                                       for x in leaves])
    graph = make_graph(fun)(*examples)
    eqn = _nonlinear_step(graph)
    if eqn is not None:
        raise TypeError(f"linear_transpose: fun is not linear in its inputs: it applies "
                        f"{eqn.prim.name} to values that depend on them. Transpose a linear "
                        "function (for a derivative's transpose, use vjp).")
    out, pullback = autodiff.vjp(fun, *examples)
    out_leaves, out_tree = pytree.flatten(out)

    def transposed(out_cotangent):
        ct_leaves, ct_tree = pytree.flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError(f"linear_transpose: the cotangent must have fun's output "
                            f"structure {pytree.structure_str(out_tree)}, got "
                            f"{pytree.structure_str(ct_tree)}.")
        for i, (c, o) in enumerate(zip(ct_leaves, out_leaves)):
            c_shape, c_dtype = tuple(np.shape(c)), np.dtype(getattr(c, "dtype", type(c)))
            if c_shape != tuple(o.shape) or c_dtype != np.dtype(o.dtype):
                raise TypeError(f"linear_transpose: cotangent leaf {i} is {c_dtype}"
                                f"{list(c_shape)}, but fun's output there is "
                                f"{np.dtype(o.dtype)}{list(o.shape)}.")
        return tuple(pullback(out_cotangent))

    return transposed


# --- Jacobians --------------------------------------------------------------------------------
def _argnums(argnums, nargs, who):
    """(the chosen argument indices, whether argnums was a tuple), checked as JAX does."""
    multiple = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multiple else (argnums,)
    for n in nums:
        if isinstance(n, bool) or not isinstance(n, int) or not -nargs <= n < nargs:
            raise ValueError(f"{who}: argnums {argnums!r} is out of range for {nargs} "
                             "positional arguments")
    return tuple(n % nargs for n in nums), multiple


def _of_chosen(f, args, nums):
    """f as a function of args[nums] only, the other arguments held fixed."""
    def g(*chosen):
        call = list(args)
        for n, v in zip(nums, chosen):
            call[n] = v
        return f(*call)
    return g


def _basis(info, j):
    """The j-th unit vector of a leaf's space, as a Tensor of its shape, dtype and device."""
    shape, dtype, device = info
    xp = backends.namespace(device)
    with backends.on_device(device):
        e = xp.zeros(int(np.prod(shape, dtype=np.int64)), dtype=dtype)
        e[j] = 1
        return Tensor(e.reshape(shape))


def _assemble(pieces, axis, out_info, in_info):
    """Stack the per-element results into one leaf of shape out.shape + in.shape."""
    shape = out_info[0] + in_info[0]
    if not pieces:  # a zero-size input or output
        return zeros(shape, out_info[1] if axis == -1 else in_info[1], out_info[2])
    return reshape(stack(pieces, axis=axis), shape)


def _nest(out_tree, in_tree, blocks, multiple):
    """JAX's nesting: the output's structure outside, the chosen arguments' inside."""
    per_out = []
    for row in blocks:
        inner = pytree.unflatten(in_tree, row)
        per_out.append(inner if multiple else inner[0])
    return pytree.unflatten(out_tree, per_out)


def jacfwd(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
           has_aux: bool = False) -> Callable[..., PyTree]:
    """The Jacobian of f with respect to args[argnums] by forward mode, as jax.jacfwd.

    Eagerly, one forward-mode JVP per input element (columns); in a trace (jit, vmap, a
    loop body), the forward-mode JVP vmapped over all the columns at once, as jax.jacfwd
    computes it (a scan's is one scan over the primal carries and the batch of tangent
    carries). Where the Jacobian may be differentiated again (or has_aux is set, in a
    trace), the transposed VJP of one linearization (in a trace, from three columns, vmapped
    over batches of up to 64 of them). Each leaf of the result has shape
    out.shape + in.shape; the result has the output's structure
    with, at each leaf, the structure of the chosen argument (a tuple of them when argnums
    is a tuple). Real float inputs and outputs only (a TypeError otherwise). With
    has_aux=True, f returns (output, aux) and the function returns (jacobian, aux).

    >>> import scanlib as sl
    >>> sl.jacfwd(lambda x: x * x)(sl.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]], dtype=float64)
    """
    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        nums, multiple, chosen, in_leaves, in_tree = _chosen_inputs("jacfwd", argnums, args)
        fk = functools.partial(f, **kwargs) if kwargs else f  # not differentiated, as in JAX
        g = _of_chosen(fk, args, nums)
        in_infos = [leaf_info(x) for x in in_leaves]
        found = _forward_pushes(g, chosen, has_aux, in_leaves, in_tree, in_infos)
        together = None
        if found is None and current_builder() is not None and not has_aux:
            together = _forward_together(g, chosen, in_leaves, in_tree, in_infos)
        if together is not None:  # [columns] + out, by forward mode
            (out, images, units), aux = together, None
        else:
            out, aux, push = found if found is not None else _linearized(g, chosen, has_aux,
                                                                          "jacfwd")
            if found is None and _batched(in_tree, in_infos):
                images, units = _images_together(push, in_tree, in_infos)
        out_leaves, out_tree = _real_outputs("jacfwd", out)
        out_infos = [leaf_info(o) for o in out_leaves]
        if together is not None or (found is None and _batched(in_tree, in_infos)):
            blocks = [[reshape(moveaxis(image[start:start + size], 0, -1),  # out + [size]
                               out_info[0] + in_info[0])
                       for in_info, (start, size) in zip(in_infos, units)]
                      for image, out_info in zip(images, out_infos)]
        else:
            columns = _images_of_units(push, in_tree, in_infos)  # [in leaf][unit][out leaf]
            blocks = [[_assemble([c[o] for c in columns[i]], -1, out_infos[o], in_infos[i])
                       for i in range(len(in_leaves))] for o in range(len(out_leaves))]
        jac = _nest(out_tree, in_tree, blocks, multiple)
        return (jac, aux) if has_aux else jac

    return wrapped


def _forward_pushes(g, chosen, has_aux, in_leaves, in_tree, in_infos):
    """(out, aux, push) where push(tangents) is one forward-mode jvp of g (forward_jvp): for
    a Kalman filter over a scan a column cost 7.6 ms this way, 10.7 ms as a walk over the
    transposed VJP (bench/NOTES.md). None where the result must be recorded (it may be
    differentiated again), in a trace, or where forward mode does not apply; then the double
    VJP."""
    if current_builder() is not None or autodiff.should_record(in_leaves):
        return None
    units = [(i, _basis(info, 0)) for i, info in enumerate(in_infos)
             if int(np.prod(info[0], dtype=np.int64))]
    tangents = [zeros(*info) for info in in_infos]
    if units:  # the first column's jvp gives out and aux too
        tangents[units[0][0]] = units[0][1]
    first = forward_jvp(g, chosen, pytree.unflatten(in_tree, tangents), has_aux)
    if first is None:
        return None
    out, first_out, aux = first
    kept = {"tangents": tangents if units else None}

    def push(t):
        if kept["tangents"] is not None and all(
                backends.to_numpy(a._value).tobytes() == backends.to_numpy(b._value).tobytes()
                for a, b in zip(pytree.flatten(t)[0], kept["tangents"])):
            kept["tangents"] = None  # that column was computed with out: once
            return first_out
        found = forward_jvp(g, chosen, t, has_aux)
        if found is None:  # it applied to the first column: f reads values differently now
            raise RuntimeError("jacfwd: forward mode applied to f's first column but not to "
                               "a later one; f must compute the same way for every column.")
        return found[1]
    return out, aux, push


class _NotForward(Exception):
    """forward_jvp did not apply to f inside jacfwd's vmapped push (see _forward_together)."""


def _forward_together(g, chosen, in_leaves, in_tree, in_infos):
    """In a trace: (out, images, units) as _images_together gives them, from forward mode,
    as jax.jacfwd computes them: g's JVP (forward_jvp) vmapped over all the unit tangents at
    once, so that g runs once with its tangents beside it (a scan's JVP is one scan over the
    primal carries and the batch of tangent carries) and a print in g prints once, not in a
    forward and again in a transposed walk. out unbatched. None where forward mode does not
    apply (the result may be differentiated again, or g reads a value forward mode cannot
    give it): then the transposed VJP."""
    if not (_forward_applies(in_leaves) and _columns(in_infos)):
        return None

    def push(tangents):
        found = forward_jvp(g, chosen, tangents, False)
        if found is None:
            raise _NotForward
        _real_outputs("jacfwd", found[0])  # checked before vmap reads them: the better message
        return found[0], found[1]

    # One batch of every column, as jax.jacfwd: f runs (and prints) once
    batches, units = _unit_batches(in_tree, in_infos, _columns(in_infos))
    try:
        out, images = vmap(push)(batches[0])
    except _NotForward:
        return None
    out_leaves, out_tree = pytree.flatten(out)
    return (pytree.unflatten(out_tree, [o[0] for o in out_leaves]), pytree.flatten(images)[0],
            units)


def _columns(infos):
    return sum(int(np.prod(info[0], dtype=np.int64)) for info in infos)


# In a trace, jacrev and the transposed jacfwd (forward mode's pushes all its columns at
# once, as JAX's) push their rows / columns together from BATCH_FROM of them,
# PUSHED_TOGETHER at most per push (bench/NOTES.md): two columns batched were 8 % slower in
# the iterated EKF's jitted gradient (the batch's moved axes and sums cost what the second
# push saved), four 25 % faster in the Kalman filter's; a batch's tangents cost memory in
# proportion to it, and beyond a few dozen columns a larger one saves nothing.
BATCH_FROM = 3
PUSHED_TOGETHER = 64


def _batched(tree, infos):
    """Whether a Jacobian's pushes of the unit vectors of `tree`'s leaves go together."""
    return current_builder() is not None and _columns(infos) >= BATCH_FROM


def _images_together(linear, tree, infos):
    """The images under `linear` of every unit vector of every leaf of `tree` (the other
    leaves zero), as _images_of_units, stacked: one tensor per image leaf, [units] + its
    shape, from vmap of `linear` over PUSHED_TOGETHER units at a time, as jax.jacfwd and
    jax.jacrev batch them. In a trace this is one tangent (or cotangent) program over a batch
    where one per unit would repeat its loops: the Kalman filter's jitted jacfwd 1.7x ->
    1.3x its jacrev (bench/NOTES.md). Eagerly each is pushed on its own instead, which
    vmap's per-call work does not beat. Returned with each leaf's (first unit, count)."""
    batches, units = _unit_batches(tree, infos)
    chunks = [pytree.flatten(vmap(linear)(batch))[0] for batch in batches]
    return [c[0] if len(chunks) == 1 else concatenate(c) for c in zip(*chunks)], units


def _unit_batches(tree, infos, most=None):
    """The unit vectors of every leaf of `tree` (the other leaves zero) in batches of up to
    `most` (None: PUSHED_TOGETHER, read at the call), each batch a tree like `tree` with
    [batch] in front of each leaf, and each leaf's (first unit, count)."""
    sizes = [int(np.prod(info[0], dtype=np.int64)) for info in infos]
    starts = [int(s) for s in np.cumsum([0] + sizes)]
    n = starts[-1]
    most = max(most or PUSHED_TOGETHER, 1)
    batches = []
    for first in range(0, n, most):
        k = min(most, n - first)
        units = []
        for (shape, dtype, device), start, size in zip(infos, starts, sizes):
            xp = backends.namespace(device)
            with backends.on_device(device):
                e = xp.zeros((k, size), dtype=dtype)
                cols = xp.arange(max(first, start), min(first + k, start + size))
                e[cols - first, cols - start] = 1  # unit c is unit c - start of this leaf
                units.append(Tensor(e.reshape((k,) + tuple(shape))))
        batches.append(pytree.unflatten(tree, units))
    return batches, list(zip(starts, sizes))


def _chosen_inputs(who, argnums, args):
    """args[argnums] (nums, whether argnums is a tuple, the chosen tuple, its leaves and
    treedef), checked to be real floats, as a Jacobian's inputs must be."""
    nums, multiple = _argnums(argnums, len(args), who)
    chosen = tuple(args[n] for n in nums)
    paths, leaves, tree = pytree.flatten_with_paths(chosen, "args")
    _check_float(who, paths, leaves, "input", allow_complex=False)
    return nums, multiple, chosen, leaves, tree


def _real_outputs(who, out):
    """out's leaves and treedef, checked to be real floats."""
    paths, leaves, tree = pytree.flatten_with_paths(out, "out")
    _check_float(who, paths, leaves, "output", allow_complex=False)
    return leaves, tree


def _images_of_units(linear, tree, infos):
    """The images under `linear` of every unit vector of every leaf of `tree` (the other
    leaves zero), each flattened to its leaves: [leaf][unit][image leaf]. jacfwd pushes
    tangents through a JVP this way (columns), jacrev cotangents through a VJP (rows)."""
    zero = [zeros(*info) for info in infos]
    images = []
    for i, info in enumerate(infos):
        per_unit = []
        for j in range(int(np.prod(info[0], dtype=np.int64))):
            unit = list(zero)
            unit[i] = _basis(info, j)
            per_unit.append(pytree.flatten(linear(pytree.unflatten(tree, unit)))[0])
        images.append(per_unit)
    return images


def jacrev(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
           has_aux: bool = False) -> Callable[..., PyTree]:
    """The Jacobian of f with respect to args[argnums] by reverse mode, as jax.jacrev.

    One VJP per output element (rows), sharing one forward pass; in a trace (jit, a loop
    body), from three rows, that VJP vmapped over batches of up to 64 rows, as jax.jacrev
    batches them. Shapes and nesting as jacfwd (out.shape + in.shape; output's structure
    outside, the arguments' inside). Real float inputs and outputs only. With has_aux=True,
    f returns (output, aux) and the function returns (jacobian, aux).

    >>> import scanlib as sl
    >>> sl.jacrev(lambda x: sl.sum(x * x))(sl.tensor([1.0, 2.0]))
    tensor([2., 4.], dtype=float64)
    """
    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        nums, multiple, chosen, in_leaves, in_tree = _chosen_inputs("jacrev", argnums, args)
        fk = functools.partial(f, **kwargs) if kwargs else f  # not differentiated, as in JAX
        found = autodiff.vjp_recording(_of_chosen(fk, args, nums), chosen, has_aux, None,
                                       "jacrev")
        out, vjp_fn = found[0], found[1]
        out_leaves, out_tree = _real_outputs("jacrev", out)
        in_infos = [leaf_info(x) for x in in_leaves]
        out_infos = [leaf_info(o) for o in out_leaves]
        if _batched(out_tree, out_infos):
            images, units = _images_together(vjp_fn, out_tree, out_infos)  # [rows] + in
            blocks = [[reshape(image[start:start + size], out_info[0] + in_info[0])
                       for image, in_info in zip(images, in_infos)]
                      for out_info, (start, size) in zip(out_infos, units)]
        else:
            rows = _images_of_units(vjp_fn, out_tree, out_infos)  # [out leaf][unit][in leaf]
            blocks = [[_assemble([r[i] for r in rows[o]], 0, out_infos[o], in_infos[i])
                       for i in range(len(in_leaves))] for o in range(len(out_leaves))]
        jac = _nest(out_tree, in_tree, blocks, multiple)
        return (jac, found[2]) if has_aux else jac

    return wrapped


def hessian(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
            has_aux: bool = False) -> Callable[..., PyTree]:
    """The Hessian of scalar f with respect to args[argnums]: jacfwd(jacrev(f)), as JAX.

    Each leaf has shape out.shape + in.shape + in.shape, nested output / argument / argument
    (for argnums=(0, 1), hess[i][j] is the block of d^2 f / d args[i] d args[j]).

    >>> import scanlib as sl
    >>> sl.hessian(lambda x: sl.sum(x ** 3))(sl.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]], dtype=float64)
    """
    return jacfwd(jacrev(f, argnums, has_aux=has_aux), argnums, has_aux=has_aux)

