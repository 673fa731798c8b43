"""JAX programs that use custom_vjp / custom_jvp, ported by renaming imports, and vmap of
while_loop and checkpoint against the per-example Python loop: values and gradients against
closed forms, the loop, and JAX where it is installed."""

from functools import partial

import numpy as np
import pytest

import scanlib as sl


def close(a, b, tol=1e-10):
    a = a.numpy() if isinstance(a, sl.Tensor) else a
    b = b.numpy() if isinstance(b, sl.Tensor) else b
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- the implicit-function gradient of a fixed point (JAX's custom derivatives tutorial) -----
def _fixed_point_program(jnp, custom_vjp, vjp, while_loop):
    """The tutorial's fixed_point, as written there but for the names passed in."""

    @partial(custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return jnp.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
        return a_bar, jnp.zeros_like(x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def newton_sqrt(a):
        return fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)

    return newton_sqrt


def test_fixed_point_second_derivative_differentiates_its_rule():
    """grad of grad of the tutorial's newton_sqrt: the bwd calls fixed_point, whose function
    calls vjp; under the outer differentiation that vjp's result once required grad and was
    refused as a closed-over tensor."""
    newton_sqrt = _fixed_point_program(sl, sl.custom_vjp, sl.vjp, sl.while_loop)
    a = 2.0
    close(sl.grad(newton_sqrt)(a), 0.5 * a ** -0.5, 1e-9)
    close(sl.grad(sl.grad(newton_sqrt))(a), -0.25 * a ** -1.5, 1e-9)
    close(sl.vmap(sl.grad(sl.grad(newton_sqrt)))(sl.tensor([1.0, 4.0])),
          [-0.25, -0.25 * 4.0 ** -1.5], 1e-9)


def test_custom_vjp_whose_function_takes_a_gradient_differentiates_twice():
    @sl.custom_vjp
    def f(x):
        return sl.grad(lambda u: (u ** 3).sum())(x)  # 3 x^2

    f.defvjp(lambda x: (f(x), x), lambda x, g: (6.0 * x * g,))
    close(sl.grad(lambda x: f(x).sum())(sl.tensor([2.0])), [12.0])
    close(sl.grad(lambda x: sl.grad(lambda y: f(y).sum())(x).sum())(sl.tensor([2.0])), [6.0])


def test_fixed_point_against_jax():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        theirs = _fixed_point_program(jax.numpy, jax.custom_vjp, jax.vjp, jax.lax.while_loop)
        want = [float(jax.grad(theirs)(2.0)), float(jax.grad(jax.grad(theirs))(2.0))]
    ours = _fixed_point_program(sl, sl.custom_vjp, sl.vjp, sl.while_loop)
    close(sl.grad(ours)(2.0), want[0])
    close(sl.grad(sl.grad(ours))(2.0), want[1])


# --- a Python number among a custom_jvp's arguments is a constant: its tangent is zero -------
def _square_times(custom_jvp):
    @custom_jvp
    def f(x, y):
        return x ** 2 * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        return f(x, y), 2 * x * y * x_dot + x ** 2 * y_dot

    g = custom_jvp(lambda x, y: x ** 2 * y)
    g.defjvps(lambda t, out, x, y: 2 * x * y * t, lambda t, out, x, y: x ** 2 * t)
    return f, g


@pytest.mark.parametrize("y", [3.0, 3])
def test_forward_mode_gives_a_python_number_argument_a_zero_tangent(y):
    """The rule once got the number itself as its tangent: jvp and jacfwd were 24, not 12."""
    for f in _square_times(sl.custom_jvp):
        h = partial(lambda f, x: f(x, y), f)
        _, t = sl.jvp(h, (sl.tensor(2.0),), (sl.tensor(1.0),))
        close(t, 12.0)
        close(sl.jacfwd(h)(sl.tensor(2.0)), 12.0)
        close(sl.vmap(sl.jacfwd(h))(sl.tensor([1.0, 2.0])), [6.0, 12.0])
        close(sl.jacfwd(sl.jacfwd(h))(sl.tensor(2.0)), 6.0)


def test_python_number_argument_against_jax():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        want = [float(jax.jvp(partial(lambda f, x: f(x, 3.0), f), (2.0,), (1.0,))[1])
                for f in _square_times(jax.custom_jvp)]
    got = [sl.jvp(partial(lambda f, x: f(x, 3.0), f), (2.0,), (1.0,))[1]
           for f in _square_times(sl.custom_jvp)]
    close(got, want)


# --- under differentiation the primal output is the rule's, as in JAX ----------------------
def _rules_with_their_own_primal():
    """fun is the naive log(1 + e^x) (inf at 1000); the rules compute the primal output
    stably. JAX returns the rule's output whenever the call is differentiated."""
    naive = lambda x: sl.log(1.0 + sl.exp(x))  # noqa: E731
    f = sl.custom_vjp(naive)
    f.defvjp(lambda x: (sl.logaddexp(x, 0.0), x), lambda x, g: (g * sl.sigmoid(x),))
    h = sl.custom_jvp(naive)
    h.defjvp(lambda p, t: (sl.logaddexp(p[0], 0.0), t[0] * sl.sigmoid(p[0])))
    return f, h


def _value_and_grad(f, how):
    vg = sl.value_and_grad(f)
    if how == "eager":
        return vg(1000.0)
    if how == "jit":
        return sl.jit(vg)(1000.0)
    if how == "vmap":
        return sl.vmap(vg)(sl.tensor([1000.0]))
    body = {"scan": lambda x: sl.scan(lambda c, _: (f(c), None), x, None, length=1)[0],
            "checkpoint": sl.checkpoint(f),
            "fori_loop": lambda x: sl.fori_loop(0, 1, lambda i, c: f(c), x),
            "while_loop": lambda x: sl.while_loop(lambda c: c[0] < 1,
                                                  lambda c: (c[0] + 1, f(c[1])), (0, x))[1]}
    return sl.value_and_grad(body[how])(1000.0)


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("how", ["eager", "jit", "vmap"])
@pytest.mark.parametrize("which", ["custom_vjp", "custom_jvp"])
def test_a_differentiated_call_returns_the_rules_primal_output(which, how):
    """Where the call is differentiated its output is fwd's (custom_vjp) or the jvp rule's
    primal_out (custom_jvp), as in JAX: finite here where fun overflows. It was fun's
    under jit and vmap (custom_vjp) and everywhere in reverse mode (custom_jvp)."""
    f = _rules_with_their_own_primal()[which == "custom_jvp"]
    value, g = _value_and_grad(f, how)
    close(value, np.full(np.shape(value), 1000.0))
    close(g, np.full(np.shape(g), 1.0))
    if which == "custom_jvp":
        close(sl.jvp(f, (1000.0,), (1.0,))[0], 1000.0)


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("how", ["scan", "checkpoint", "fori_loop", "while_loop"])
@pytest.mark.parametrize("which", ["custom_vjp", "custom_jvp"])
def test_a_differentiated_call_in_a_body_returns_the_rules_primal_output(which, how):
    f = _rules_with_their_own_primal()[which == "custom_jvp"]
    value, g = _value_and_grad(f, how)
    close(value, 1000.0)
    close(g, 1.0)


def test_a_call_nobody_differentiates_runs_fun():
    calls = []

    def fun(x):
        calls.append("fun")
        return x * 2.0

    f = sl.custom_vjp(fun)
    f.defvjp(lambda x: (calls.append("fwd") or x * 3.0, None), lambda r, g: (g * 2.0,))
    h = sl.custom_jvp(fun)
    h.defjvps(lambda t, out, x: t * 2.0)
    for g in (f, h):
        close(g(sl.tensor(1.0)), 2.0)
    assert "fwd" not in calls
    # Traced, fwd is traced beside fun (for where the trace is differentiated), not run.
    for g in (f, h):
        close(sl.jit(g)(sl.tensor(1.0)), 2.0)
        close(sl.vmap(g)(sl.tensor([1.0])), [2.0])
        close(sl.scan(lambda c, _, g=g: (g(c), None), sl.tensor(1.0), None, length=2)[0], 4.0)
