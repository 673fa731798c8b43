"""A custom_vjp (and custom_jvp) under derivatives of the gradient, as JAX means it: the call
is differentiated by its rule at one level only (the innermost grad or vjp whose inputs it
depends on), and every enclosing differentiation goes through the rule's and fwd's own
operations. Checked with rules that are not fwd's derivative (where the two readings differ)
against closed forms, against the plain Python loop on the tape (scan's definition) in every
kind of body, and against JAX where it is installed."""

import numpy as np
import pytest

import scanlib as sl

X0 = np.array([0.3, -0.8, 1.1])
W = np.array([1.0, 2.0, -1.0])


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def make_square(lib=sl):
    """c(x) = x**2, whose bwd gives g * B(x) with B(x) = x**3 + x**2 + x + 1: not the
    derivative of fwd, so a test sees which of the two each level differentiates."""
    c = lib.custom_vjp(lambda x: x ** 2)
    c.defvjp(lambda x: (x ** 2, x), lambda x, g: (g * (x ** 3 + x ** 2 + x + 1.0),))
    return c


def _closed_forms(x):
    """f(x) = sin(c(x)): the gradient cos(x**2) B(x) (bwd at the call's level), its
    derivative through fwd's operations (c' = 2x) and bwd's (B')."""
    B, dB = x ** 3 + x ** 2 + x + 1, 3 * x ** 2 + 2 * x + 1
    return np.cos(x ** 2) * B, -np.sin(x ** 2) * 2 * x * B + np.cos(x ** 2) * dB


def test_grad_of_grad_differentiates_fwd_beyond_the_calls_own_level():
    c = make_square()
    f = lambda x: sl.sin(c(x)).sum()  # noqa: E731
    g1, g2 = _closed_forms(X0)
    close(sl.grad(f)(sl.tensor(X0)), g1)
    close(sl.grad(lambda x: sl.grad(f)(x).sum())(sl.tensor(X0)), g2)
    close(sl.jacrev(sl.jacrev(f))(sl.tensor(X0)), np.diag(g2))
    # third order: every level beyond the first differentiates fwd and bwd (float64 FD)
    g3 = sl.grad(lambda x: sl.grad(lambda x: sl.grad(f)(x).sum())(x).sum())(sl.tensor(X0))
    eps = 1e-6
    close(g3, (_closed_forms(X0 + eps)[1] - _closed_forms(X0 - eps)[1]) / (2 * eps), 1e-6)


def test_a_call_on_the_outer_variable_only_is_differentiated_by_its_rule():
    """Inside an inner grad, c(x) of the outer x alone: no inner walk reaches it, so the
    outer grad is its own level and uses bwd, as JAX's outer trace does."""
    c = make_square()
    inner = lambda x: sl.grad(lambda y: (c(x) * y).sum())(sl.tensor(1.0))  # noqa: E731
    close(sl.grad(inner)(sl.tensor(X0)), X0 ** 3 + X0 ** 2 + X0 + 1)


def test_tensor_backward_of_a_gradient_is_an_enclosing_level():
    c = make_square()
    x = sl.tensor(X0, requires_grad=True)
    g = sl.grad(lambda x: sl.sin(c(x)).sum())(x)
    g.sum().backward()
    close(x.grad, _closed_forms(X0)[1])


def test_forward_mode_raises_at_the_calls_own_level_and_differentiates_fwd_around_a_grad():
    """As JAX: jvp, jacfwd and linearize of a custom_vjp function raise (its own level is
    forward mode's), eagerly and under jit, and so does grad of a jvp; jvp of its gradient and
    a hessian by jacfwd of jacrev are forward mode around a grad, through fwd's operations."""
    c = make_square()
    f = lambda x: sl.sin(c(x)).sum()  # noqa: E731
    x, t = sl.tensor(X0), sl.tensor(W)
    message = r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function\."
    for raising in [lambda x: sl.jvp(f, (x,), (t,)), sl.jacfwd(f),
                    lambda x: sl.linearize(f, x)[1](t),
                    sl.grad(lambda x: sl.jvp(f, (x,), (t,))[1])]:
        for wrap in (lambda g: g, sl.jit):
            with pytest.raises(TypeError, match=message):
                wrap(raising)(x)
    g1, g2 = _closed_forms(X0)
    for wrap in (lambda g: g, sl.jit):
        value, tangent = wrap(lambda x: sl.jvp(sl.grad(f), (x,), (t,)))(x)
        close(value, g1)
        close(tangent, g2 * W)
        close(wrap(sl.hessian(f))(x), np.diag(g2))
        close(wrap(sl.jacfwd(sl.jacrev(f)))(x), np.diag(g2))


def test_tensor_backward_alone_applies_the_rule_at_every_order_as_pytorch():
    c = make_square()
    x = sl.tensor(X0, requires_grad=True)
    sl.sin(c(x)).sum().backward(create_graph=True)
    g, x.grad = x.grad, None
    g.sum().backward()
    B, dB = X0 ** 3 + X0 ** 2 + X0 + 1, 3 * X0 ** 2 + 2 * X0 + 1
    close(x.grad, -np.sin(X0 ** 2) * B * B + np.cos(X0 ** 2) * dB)


@pytest.mark.parametrize("where", ["scan", "checkpoint", "fori_loop"])
def test_a_body_reading_two_nested_derivatives_variables_raises_under_the_outer_one(where):
    """c(y) of the outer y in a body that also reads the inner x: JAX differentiates that
    call by its rule at the outer level, the body's other calls by theirs at the inner one;
    a body has one level here, so the outer derivative stops (the inner one is right)."""
    c = make_square()

    def inner(x, y):
        def step(h):
            return h + c(y) * h ** 2
        if where == "scan":
            return sl.scan(lambda h, _: (step(h), None), x, None, length=2)[0]
        if where == "checkpoint":
            return sl.checkpoint(step)(x)
        return sl.fori_loop(0, 2, lambda i, h: step(h), x)

    y = sl.tensor(0.5)
    sl.grad(inner)(sl.tensor(2.0), y)
    with pytest.raises(NotImplementedError, match="reads values of two nested derivatives"):
        sl.grad(lambda y: sl.grad(inner)(sl.tensor(2.0), y))(y)


def _bodies(c):
    """The same recurrence written as a Python loop on the tape and in each kind of body."""
    def step(h, xt):
        h = sl.tanh(c(h) * 0.3 + xt)
        return h, sl.sin(h)

    xs = lambda x: sl.stack([x * 0.1, x * 0.2, x * 0.3])  # noqa: E731

    def loop(x):
        h, total = x, 0.0
        for t in range(3):
            h, y = step(h, xs(x)[t])
            total = total + y
        return (h * total).sum()

    def scanned(x):
        h, ys = sl.scan(step, x, xs(x))
        return (h * ys.sum(0)).sum()

    def checkpointed(x):
        h, ys = sl.scan(sl.checkpoint(step), x, xs(x))
        return (h * ys.sum(0)).sum()

    def fori(x):
        return sl.fori_loop(0, 3, lambda i, h: sl.sin(c(h)) + h * 0.5, x).sum()

    def fori_loop_oracle(x):
        h = x
        for _ in range(3):
            h = sl.sin(c(h)) + h * 0.5
        return h.sum()

    def while_state(x):  # a cond that reads the state: while_loop's own VJP
        def body(s):
            return s[0] + 1, sl.sin(c(s[1])) + s[1] * 0.5
        return sl.while_loop(lambda s: s[0] < 3, body, (0, x))[1].sum()

    return {"scan": (scanned, loop), "checkpoint": (checkpointed, loop),
            "fori_loop": (fori, fori_loop_oracle), "while_loop": (while_state, fori_loop_oracle)}


def _orders(f):
    g = sl.grad(f)
    hv = lambda x: sl.grad(lambda x: (g(x) * sl.tensor(W)).sum())(x)  # noqa: E731
    x = sl.tensor(X0)
    return {"g": g(x), "hv": hv(x), "hessian": sl.jacrev(sl.jacrev(f))(x),
            "third": sl.grad(lambda x: hv(x).sum())(x), "jit hv": sl.jit(hv)(x),
            "vmap hv": sl.vmap(hv)(sl.tensor(np.stack([X0, 0.5 * X0]))),
            "g again": g(x)}


@pytest.mark.parametrize("where", ["scan", "checkpoint", "fori_loop", "while_loop"])
def test_every_body_agrees_with_its_python_loop_to_third_order(where):
    body, oracle = _bodies(make_square())[where]
    ours, loop = _orders(body), _orders(oracle)
    for k in loop:
        close(ours[k], loop[k], 1e-9)


def test_a_cached_linearization_is_never_reused_for_another_level():
    """The first-order gradient caches the body's linearization with the rule; a second
    order must not reuse it for the enclosing level, nor leave its own for a later first."""
    c = make_square()
    scanned, loop = _bodies(c)["scan"]
    x = sl.tensor(X0)
    first = sl.grad(scanned)(x)
    second = sl.grad(lambda x: sl.grad(scanned)(x).sum())(x)
    close(sl.grad(scanned)(x), first, 0)
    close(second, sl.grad(lambda x: sl.grad(loop)(x).sum())(x), 1e-9)
    close(sl.grad(lambda x: sl.grad(scanned)(x).sum())(x), second, 0)


def test_a_custom_call_inside_another_rule_in_a_loop_body_raises_under_second_order():
    c = make_square()
    d = sl.custom_vjp(lambda x: sl.sin(x))
    d.defvjp(lambda x: (sl.sin(x), x), lambda r, g: (g * c(r) * 0.5 + g,))

    def f(x):
        return sl.scan(lambda h, _: (sl.cos(d(h) + h), None), x, None, length=3)[0].sum()

    x = sl.tensor(X0)
    sl.grad(f)(x)  # the first order is the rule's
    with pytest.raises(NotImplementedError, match="is called by the rule of another one"):
        sl.grad(lambda x: sl.grad(f)(x).sum())(x)
    # outside a loop body each call's level is known: JAX's value, checked below
    eager = lambda x: sl.sin(d(x) * x).sum()  # noqa: E731
    sl.grad(lambda x: sl.grad(eager)(x).sum())(x)


def test_against_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def programs(lib, xnp, lax, checkpoint):
        c = make_square(lib)
        d = lib.custom_vjp(lambda x: xnp.sin(x))  # custom calls inside fwd and bwd
        d.defvjp(lambda x: (c(x) + xnp.sin(x) - c(x), x),
                 lambda r, g: (g * c(r) * 0.5 + g,))
        e = lib.custom_vjp(lambda k, x: x * k, nondiff_argnums=(0,))
        e.defvjp(lambda k, x: (x * k, x), lambda k, r, g: (g * k * r,))
        s = lib.custom_vjp(lambda x: x ** 2 * xnp.sin(x))  # a call inside fwd, any order
        s.defvjp(lambda x: (c(x) * xnp.sin(x), x), lambda x, g: (g * (x ** 2 + xnp.cos(x)),))
        j = lib.custom_jvp(lambda x: xnp.tanh(x))  # a rule that is not fun's derivative
        j.defjvp(lambda p, t: (xnp.tanh(p[0]), t[0] * (1.5 - p[0] ** 2)))

        def scanned(x):
            def body(h, xt):
                h = xnp.tanh(c(h) * 0.3 + xt)
                return h, xnp.sin(h)
            h, ys = lax.scan(body, x, xnp.stack([x * 0.1, x * 0.2, x * 0.3]))
            return (h * ys.sum(0)).sum()

        return {"eager": lambda x: xnp.sin(c(x)).sum(),
                "nested": lambda x: xnp.sin(d(x) * x).sum(),
                "in fwd": lambda x: (s(x) ** 2).sum(),
                "custom_jvp": lambda x: (j(x) * x).sum(),
                "nondiff": lambda x: xnp.sin(e(2.0, x) * c(x)).sum(),
                "scan": scanned,
                "fori_loop": lambda x: lax.fori_loop(
                    0, 3, lambda i, h: xnp.sin(c(h)) + h * 0.5, x).sum(),
                "checkpoint": lambda x: checkpoint(lambda x: xnp.sin(c(x)) * x)(x).sum()}

    def orders(lib, xnp, f, x):
        g = lib.grad(f)
        hv = lambda x: lib.grad(lambda x: (g(x) * xnp.asarray(W)).sum())(x)  # noqa: E731
        found = []
        for run in [lambda: g(x), lambda: hv(x), lambda: lib.jit(hv)(x),
                    lambda: lib.jacrev(lib.jacrev(f))(x),
                    lambda: lib.grad(lambda x: hv(x).sum())(x), lambda: lib.hessian(f)(x),
                    lambda: lib.jvp(g, (x,), (xnp.asarray(W),))[1]]:
            try:
                found.append(np.asarray(run()))
            except TypeError as e:  # forward mode where a call's own level is its own
                found.append(str(e))
        return found

    ours = programs(sl, sl, sl, sl.checkpoint)
    with jax.enable_x64(True):
        theirs = programs(jax, jnp, jax.lax, jax.checkpoint)
        for name in ours:
            for a, b in zip(orders(sl, sl, ours[name], sl.tensor(X0)),
                            orders(jax, jnp, theirs[name], jnp.asarray(X0))):
                if isinstance(b, str):
                    assert a == b, name
                else:
                    close(a, b, 1e-10)


def test_implicit_rules_hold_at_every_level_in_loop_bodies_and_forward_mode():
    """lax.custom_linear_solve and lax.custom_root: their rules are the solutions'
    derivatives at every order, so they take part in no level (no NotImplementedError in a
    loop body), and the linear solve works in forward mode, as JAX's primitive does."""
    A = sl.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    b0 = sl.tensor([1.0, 2.0, -1.0])

    def solved(b):
        return sl.lax.custom_linear_solve(lambda v: A @ v, b,
                                          lambda mv, b: sl.linalg.solve(A, b), symmetric=True)

    def in_scan(solve):
        return lambda b: sl.scan(lambda c, _: (c + sl.sum(sl.sin(solve(b * c)) ** 3), None),
                                 sl.tensor(1.0), None, length=2)[0]

    loss, direct = in_scan(solved), in_scan(lambda b: sl.linalg.solve(A, b))
    close(sl.hessian(loss)(b0), sl.hessian(direct)(b0))
    close(sl.jacrev(sl.jacrev(loss))(b0), sl.jacrev(sl.jacrev(direct))(b0))
    close(sl.jacfwd(solved)(b0), sl.jacfwd(lambda b: sl.linalg.solve(A, b))(b0))
    batched = lambda solve: lambda b: sl.sum(sl.sin(sl.vmap(solve)(sl.stack([b, 2 * b]))) ** 3)  # noqa: E731
    close(sl.hessian(batched(solved))(b0),
          sl.hessian(batched(lambda b: sl.linalg.solve(A, b)))(b0))

    newton = lambda f, x: sl.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x)  # noqa: E731

    def root(a):  # sqrt(a) by Newton, differentiated implicitly
        return sl.lax.custom_root(lambda x: x * x - a, 1.0, newton, lambda g, y: y / g(1.0))

    a0 = sl.tensor(2.0)
    summed = lambda a: sl.scan(lambda c, _: (c + root(a * c), None), sl.tensor(1.0), None,  # noqa: E731
                               length=2)[0]
    plain = lambda a: sl.scan(lambda c, _: (c + sl.sqrt(a * c), None), sl.tensor(1.0), None,  # noqa: E731
                              length=2)[0]
    close(sl.grad(sl.grad(summed))(a0), sl.grad(sl.grad(plain))(a0))


def test_a_custom_jvp_in_the_linear_code_of_another_rule_is_transposed_through_its_function():
    """JAX transposes linear code: a custom_jvp applied to the tangent inside a rule is
    transposed as its function (lin(y) = 2y, whatever lin's own rule says), so grad, vjp and
    jacrev agree with jvp and jacfwd."""
    lin = sl.custom_jvp(lambda y: 2.0 * y)
    lin.defjvp(lambda p, t: (lin(p[0]), 3.0 * t[0]))
    ff = sl.custom_jvp(lambda x: sl.sin(x) ** 2)
    ff.defjvp(lambda p, t: (ff(p[0]), lin(t[0]) * sl.cos(p[0])))
    x = sl.tensor(X0)
    want = 2.0 * np.cos(X0)
    close(sl.jvp(lambda x: ff(x).sum(), (x,), (sl.ones(3),))[1], want.sum())
    close(sl.grad(lambda x: ff(x).sum())(x), want)
    close(sl.jacrev(ff)(x), np.diag(want))
    close(sl.jit(sl.grad(lambda x: ff(x).sum()))(x), want)
    scanned = lambda x: sl.scan(lambda c, _: (c + ff(x * c[0]), None), sl.zeros(3) + 1.0,  # noqa: E731
                                None, length=1)[0].sum()
    close(sl.grad(scanned)(x), want)
    close(sl.jvp(lambda x: sl.jvp(lambda x: ff(x).sum(), (x,), (sl.ones(3),))[1], (x,),
                 (sl.ones(3),))[1], (-2.0 * np.sin(X0)).sum())


# --- a level that begins and ends inside a trace ----------------------------------------------
def _python_scan(f, init, xs, length):
    carry = init
    for _ in range(length):
        carry, _ = f(carry, None)
    return carry, None


def _inner_levels(lib, jnp, lax, checkpoint, scan=None):
    """Functions h -> value whose value comes from a grad, vjp or jvp taken inside them: a
    custom call that level differentiates belongs to it, so a derivative of h's function
    from outside differentiates its rule's primal operations (fwd's), never its rule; a call
    of h alone inside it (none of that level's inputs reach it) keeps its rule for the
    derivative from outside, and computes its function. `scan`: lax.scan, or the Python
    loop (the oracle, eagerly)."""
    scan = scan or (lambda f, init, xs, length: lax.scan(f, init, xs, length=length))
    cj = lib.custom_jvp(lambda z: jnp.sin(z))
    cj.defjvp(lambda p, t: (jnp.sin(p[0]), 2.0 * p[0] * t[0]))  # not sin's derivative
    cv = lib.custom_vjp(lambda z: jnp.sin(z))
    cv.defvjp(lambda z: (1.5 * jnp.sin(z), z), lambda z, g: (3.0 * z * g,))  # nor fwd fun
    v, x0 = jnp.asarray([0.5, 1.5]), jnp.asarray([0.3, -0.8])
    tangent_of = lambda f: lambda h: lib.jvp(f, (h,), (v,))  # noqa: E731

    def scanned(step):
        return lambda z: scan(lambda c, _: (step(c), None), z, None, 2)[0]

    def value(f):
        return lambda h: lib.value_and_grad(lambda z: jnp.sum(f(z) ** 2))(h)[0] * h

    return {
        "jvp": lambda h: tangent_of(cj)(h)[0],
        "jvp, its tangent": lambda h: tangent_of(cj)(h)[1],
        "jvp of a scan": lambda h: tangent_of(scanned(cj))(h)[0],
        "jvp of a fori_loop": lambda h: tangent_of(
            lambda z: lax.fori_loop(0, 2, lambda i, c: cj(c), z))(h)[0],
        "jvp of a checkpoint": lambda h: tangent_of(checkpoint(lambda z: cj(z) * 2.0))(h)[0],
        "jvp of a cond": lambda h: tangent_of(
            lambda z: lax.cond(True, cj, lambda q: q, z))(h)[0],
        "jvp of a grad": lambda h: tangent_of(lib.grad(lambda z: jnp.sum(cj(z) ** 2)))(h)[0],
        "value_and_grad": value(cv),
        "value_and_grad of a scan": value(scanned(cv)),
        "grad of a scan reading h's call": lambda h: lib.grad(lambda x: jnp.sum(
            scanned(lambda s: s * cv(h) + s * s)(x)))(x0),
        "jvp of a scan reading h's call": lambda h: lib.jvp(
            scanned(lambda s: s * cj(h) + s * s), (x0,), (v,))[1],
        "the value of a scan reading h's call": lambda h: lib.value_and_grad(lambda x: jnp.sum(
            scanned(lambda s: s * cv(h) + s * s)(x)))(x0)[0] * h,
    }


_INNER = list(_inner_levels(sl, sl.numpy, sl.lax, sl.checkpoint))


@pytest.mark.parametrize("where", ["scan body", "vmap", "checkpoint", "jit in a scan body"])
@pytest.mark.parametrize("name", _INNER)
def test_a_level_inside_a_trace_leaves_its_calls_to_the_levels_around(name, where):
    """The gradient through a value that a jvp or value_and_grad inside a scan body (vmap,
    checkpoint) computed with custom calls: the Python loop's (which is JAX's, below),
    where the inner level's rule was applied by that level alone."""
    o = _inner_levels(sl, sl.numpy, sl.lax, sl.checkpoint)[name]
    oracle = _inner_levels(sl, sl.numpy, sl.lax, sl.checkpoint, scan=_python_scan)[name]
    loss = lambda h: sl.numpy.sum(h ** 2)  # noqa: E731
    wrapped = {
        "scan body": lambda h: sl.scan(lambda c, _: (o(c), None), h, None, length=1)[0],
        "vmap": lambda h: sl.vmap(o)(h[None])[0],
        "checkpoint": sl.checkpoint(o),
        "jit in a scan body": lambda h: sl.scan(lambda c, _: (sl.jit(o)(c), None), h, None,
                                                length=1)[0],
    }[where]
    x = sl.tensor([0.7, -0.3])
    close(wrapped(x), oracle(x), 1e-12)
    close(sl.grad(lambda h: loss(wrapped(h)))(x), sl.grad(lambda h: loss(oracle(h)))(x), 1e-12)


def test_a_level_inside_a_trace_against_jax():
    jax = pytest.importorskip("jax")
    x = np.array([0.7, -0.3])
    ours = _inner_levels(sl, sl.numpy, sl.lax, sl.checkpoint)
    with jax.enable_x64(True):
        theirs = _inner_levels(jax, jax.numpy, jax.lax, jax.checkpoint)
        for name in _INNER:
            o, their_o = ours[name], theirs[name]
            want = jax.grad(lambda h, f=their_o: jax.numpy.sum(f(h) ** 2))(x)
            got = sl.grad(lambda h, f=o: sl.numpy.sum(
                sl.scan(lambda c, _: (f(c), None), h, None, length=1)[0] ** 2))(sl.tensor(x))
            close(got, want, 1e-12)


@pytest.mark.parametrize("outer", ["grad", "jacfwd"])
def test_a_while_loops_derivative_leaves_a_call_of_an_outer_value_to_the_outer_level(outer):
    """A jvp of a while_loop whose body calls a custom function of an outer value, under
    vmap, differentiated from outside: the while_loop's derivative watches only what its
    own level differentiates, so the outer level applies the call's rule (as JAX, and the
    Python loop). In a scan body, where the body's level would have to be told apart, it
    raises, as outside any trace."""
    cj = sl.custom_jvp(lambda z: sl.sin(z))
    cj.defjvp(lambda p, t: (sl.sin(p[0]), 2.0 * p[0] * t[0]))  # not sin's derivative
    x0, v = sl.tensor([0.3, -0.8]), sl.tensor([0.5, 1.5])

    def inner(h, loop):
        return sl.jvp(lambda x: loop(lambda c: c * cj(h) + c * c, x), (x0,), (v,))[1]

    def while_loop(f, x):
        return sl.while_loop(lambda c: c[1] < 2, lambda c: (f(c[0]), c[1] + 1), (x, 0))[0]

    def python_loop(f, x):
        return f(f(x))

    transform = getattr(sl, outer)
    x = sl.tensor([0.7, -0.3])
    want = transform(lambda h: sl.sum(inner(h, python_loop) ** 2))(x)
    close(want, [3.37599134, 19.35170492], 1e-8)  # JAX's
    got = transform(lambda h: sl.sum(sl.vmap(lambda h: inner(h, while_loop))(h[None])[0] ** 2))(x)
    close(got, want, 1e-12)
    with pytest.raises(NotImplementedError, match="two nested derivatives"):
        transform(lambda h: sl.sum(sl.scan(lambda c, _: (inner(c, while_loop), None), h, None,
                                           length=1)[0] ** 2))(x)
