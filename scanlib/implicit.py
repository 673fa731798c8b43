"""lax.custom_root and lax.custom_linear_solve: a solver's result differentiated implicitly,
with JAX's derivative rules, not through the solver's iterations. The closed-over values of
`f` (`matvec`) are hoisted by closure_convert so that they get their derivatives; custom_root's
rule is a custom_jvp (reverse mode transposes it, as JAX does) whose arguments include the
values tangent_solve closes over, custom_linear_solve's a custom_vjp whose backward pass is
the transposed solve.

Imports tape, pytree, tracing, autodiff, transforms, closure and custom.
"""

from __future__ import annotations

from typing import Any, Callable

from . import pytree
from .autodiff import stop_gradient, vjp
from .closure import closure_convert
from .custom import custom_jvp, custom_vjp
from .tape import no_grad
from .tracing import abstract_leaf
from .transforms import jvp

__all__ = ["custom_root", "custom_linear_solve"]


def _check_like(who, what, got, guess):
    if pytree.structure(got) != pytree.structure(guess):
        raise TypeError(f"{who}: {what} must have the structure of the initial guess "
                        f"{pytree.structure(guess)}, got {pytree.structure(got)}")


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:
    """lax.custom_root: `solve(f, initial_guess)` (a root of f), differentiated by the
    implicit function theorem with respect to the values f closes over: the tangent of the
    solution is `-tangent_solve(g, df)`, g the linearization of f at the solution in its
    argument and df f's tangent there from its closed-over values. The initial guess gets no
    derivative. tangent_solve(g, y) returns x with g(x) = y, built of differentiable ops (for
    a scalar, `lambda g, y: y / g(1.0)`); it may close over the values being differentiated
    (a known derivative of f), which are then differentiated through it at higher orders.
    As in JAX, tangent_solve is traced once per call, on the solution's shapes, when a
    derivative may reach the solution.

    >>> a = sl.tensor(2.0)
    >>> newton = lambda f, x: sl.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x)
    >>> sl.grad(lambda a: sl.lax.custom_root(lambda x: x * x - a, 1.0, newton,
    ...                                   lambda g, y: y / g(1.0)))(a)   # 1 / (2 sqrt(a))
    """
    converted, consts = closure_convert(f, initial_guess)
    out = _solved("custom_root", solve, lambda x: converted(x, *consts), initial_guess,
                  has_aux)
    solution = out[0] if has_aux else out
    if _avals(solution) != _avals(initial_guess):  # solve promoted it (a float64 in f)
        converted, consts = closure_convert(f, solution)  # the rule works at the solution

    def linearize_and_solve(x, y):
        def g(u):
            return jvp(lambda x: converted(x, *consts), (x,), (u,))[1]
        return tangent_solve(g, y)

    if consts:
        # tangent_solve may close over differentiated values (a Newton step's exact
        # derivative): they become arguments of the rule, as JAX's custom_root makes them
        # operands. Without consts the solution is a constant and no rule runs.
        solve_tangent, solve_consts = closure_convert(linearize_and_solve, solution, solution)
    else:
        solve_tangent, solve_consts = linearize_and_solve, []
    root = custom_jvp(lambda consts, solve_consts, out: out)  # the rule is the derivative
    root._exact = True  # at every order

    @root.defjvp
    def _root_jvp(primals, tangents):
        consts, solve_consts, out = primals
        # only f's values drive the solution's tangent; neither the guess nor solve's values
        # get a derivative, and tangent_solve's enter it at the next order, as primals here
        dconsts = tangents[0]
        out = root(consts, solve_consts, out)  # differentiable: the rule's derivative needs it
        solution = out[0] if has_aux else out
        _, df = jvp(lambda *c: converted(solution, *c), tuple(consts), tuple(dconsts))
        dsol = pytree.tree_map(lambda t: -t, solve_tangent(solution, df, *solve_consts))
        _check_like("custom_root", "tangent_solve's result", dsol, initial_guess)
        if has_aux:
            return out, (dsol, pytree.tree_map(lambda a: a * 0, out[1]))
        return out, dsol

    return root(list(consts), list(solve_consts), out)


def _avals(tree):
    paths, leaves, _ = pytree.flatten_with_paths(tree, "x")
    return [abstract_leaf(leaf, path)[:2] for path, leaf in zip(paths, leaves)]


def _solved(who, solve, fn, guess, has_aux):
    """solve(fn, guess) run once, its result detached: the solver's steps are never
    differentiated (their derivative is the implicit rule's)."""
    with no_grad():
        out = stop_gradient(solve(fn, stop_gradient(guess)))
    _check_like(who, "solve's solution", out[0] if has_aux else out, guess)
    return out


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False) -> Any:
    """lax.custom_linear_solve: x = solve(matvec, b) for a linear `matvec`, differentiated
    implicitly: the gradient of b is the transposed solve of the cotangent
    (`transpose_solve(vecmat, ct)`, or `solve(matvec, ct)` when symmetric), and the values
    matvec closes over get -(d matvec(x))^T of it. solve's iterations are never
    differentiated, so a while_loop solver (conjugate gradients) works; gradients of every
    order (the backward pass is itself a custom_linear_solve), and in forward mode (jvp,
    jacfwd, hessian) as the transpose of its VJP.

    >>> A = sl.tensor([[4.0, 1.0], [1.0, 3.0]])
    >>> x = sl.lax.custom_linear_solve(lambda v: A @ v, sl.tensor([1.0, 2.0]),
    ...                             lambda mv, b: sl.linalg.solve(A, b), symmetric=True)
    """
    converted, consts = closure_convert(matvec, b)
    out = _solved("custom_linear_solve", solve, lambda v: converted(v, *consts), b, has_aux)
    linear = custom_vjp(lambda consts, b, out: out)  # the rules below are the derivative

    linear._exact = True  # its rule is the solve's derivative at every order

    def fwd(consts, b, out):
        return out, (consts, b, out)

    def bwd(res, ct):
        consts, b, out = res
        x = linear(consts, b, out)  # differentiable in consts and b for the next order
        x = x[0] if has_aux else x
        ct_x = ct[0] if has_aux else ct
        if symmetric:
            lam = custom_linear_solve(lambda v: converted(v, *consts), ct_x, solve,
                                      symmetric=True)
        elif transpose_solve is None:
            raise TypeError("custom_linear_solve: the gradient needs transpose_solve (or "
                            "symmetric=True when matvec is symmetric)")
        else:
            _, back = vjp(lambda v: converted(v, *consts), x)
            lam = custom_linear_solve(lambda u: back(u)[0], ct_x, transpose_solve, solve)
        _, back_c = vjp(lambda *c: converted(x, *c), *consts)
        gconsts = back_c(pytree.tree_map(lambda t: -t, lam)) if consts else ()
        return list(gconsts), lam, pytree.tree_map(lambda o: o * 0, out)

    linear.defvjp(fwd, bwd)
    return linear(list(consts), b, out)
