"""scanlib.lax: jax.lax's names as views onto scanlib's objects; cond and switch against
Python's `if` (values, gradients of every order, forward mode) on the tape, inside scan bodies,
under jit and vmap; select, dynamic slicing, lax's cumulative reductions, map and fori_loop
against NumPy, the Python loop, finite differences, and jax.lax where JAX is installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import scanlib as sl
from scanlib import lax
from scanlib.testing import check_grads

RNG = np.random.default_rng(0)


def close(a, b, rtol=1e-12, atol=1e-12):
    a, b = sl.as_tensor(a), sl.as_tensor(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol)


# --- the module is a view ------------------------------------------------------------------------
def test_lax_names_are_scanlibs_objects():
    assert lax.scan is sl.scan and lax.fori_loop is sl.fori_loop
    assert lax.while_loop is sl.while_loop and lax.associative_scan is sl.associative_scan
    assert lax.stop_gradient is sl.stop_gradient and lax.tanh is sl.tanh
    assert lax.logistic is sl.sigmoid and lax.max is sl.maximum and lax.atan2 is sl.arctan2
    assert lax.cumsum is not sl.cumsum  # lax's: axis 0, reverse=, the operand's dtype
    assert all(hasattr(lax, n) for n in lax.__all__)


# --- cond and switch: concrete predicates are Python's if ---------------------------------------
def test_concrete_cond_runs_only_the_chosen_branch():
    def boom(x):
        raise RuntimeError("the other branch ran")

    x = sl.tensor(3.0)
    close(lax.cond(True, lambda a: a * 10, boom, x), sl.tensor(30.0))
    close(lax.cond(sl.tensor(0.0), boom, lambda a: a + 1, x), sl.tensor(4.0))
    close(lax.switch(7, [boom, lambda a: a * 2], x), sl.tensor(6.0))  # clamped to the last
    close(lax.switch(-3, [lambda a: a - 1, boom], x), sl.tensor(2.0))  # clamped to the first
    g = sl.grad(lambda a: lax.cond(a > 1, lambda b: b ** 3, boom, a))(x)
    close(g, sl.tensor(27.0))


def test_the_older_operand_keyword():
    x = sl.tensor(2.0)
    close(lax.cond(True, lambda a: a * 3, lambda a: a, operand=x), sl.tensor(6.0))
    close(sl.jit(lambda t: lax.switch(t, [lambda a: a, lambda a: -a], operand=x))(sl.tensor(1)),
          sl.tensor(-2.0))
    with pytest.raises(TypeError, match="cond: give the operands positionally or as operand="):
        lax.cond(True, lambda a: a, lambda a: a, x, operand=x)


def test_branch_returning_different_things_is_fine_when_concrete():
    # as Python's if: only the chosen branch's structure matters
    assert lax.cond(True, lambda: (1.0, 2.0), lambda: 3.0) == (1.0, 2.0)


def loop_body(c, t):
    return lax.cond(t > 1.5, lambda a: (sl.sin(a[0]) * t, a[1] + a[0]),
                    lambda a: (a[0] * a[0] + 1.0, a[1] * t), c)


def python_loop(c, ts):
    for t in ts:
        c = (sl.sin(c[0]) * t, c[1] + c[0]) if float(t) > 1.5 else (c[0] * c[0] + 1.0,
                                                                   c[1] * t)
    return c


TS = [1.0, 2.0, 3.0, 1.0, 0.5, 2.5]


def test_cond_in_a_scan_body_is_the_python_loop():
    init = (sl.tensor(0.5), sl.tensor(-0.3))
    got, ys = sl.scan(lambda c, t: (loop_body(c, t), loop_body(c, t)[0]), init, sl.tensor(TS))
    want = python_loop(init, [sl.tensor(t) for t in TS])
    close(got[0], want[0])
    close(got[1], want[1])

    def loss(f):
        return lambda a, b: sum(x.sum() for x in f((a, b)))

    scan_loss = loss(lambda c: sl.scan(lambda c, t: (loop_body(c, t), None), c,
                                       sl.tensor(TS))[0])
    py_loss = loss(lambda c: python_loop(c, [sl.tensor(t) for t in TS]))
    args = (sl.tensor(0.5), sl.tensor(-0.3))
    for argnums in (0, 1):
        close(sl.grad(scan_loss, argnums)(*args), sl.grad(py_loss, argnums)(*args))
        close(sl.grad(sl.grad(scan_loss, argnums), argnums)(*args),
              sl.grad(sl.grad(py_loss, argnums), argnums)(*args))
    check_grads(scan_loss, args, order=2)
    # forward mode
    _, t_scan = sl.jvp(scan_loss, args, (sl.tensor(1.0), sl.tensor(0.5)))
    _, t_py = sl.jvp(py_loss, args, (sl.tensor(1.0), sl.tensor(0.5)))
    close(t_scan, t_py)


def test_cond_printed_graph_shows_its_branches():
    text = str(sl.make_graph(lambda c, t: lax.cond(t > 1, lambda a: a * t, sl.sin, c))(
        sl.tensor(1.0), sl.tensor(2.0)))
    assert "cond(" in text and "def branch0(" in text and "def branch1(" in text
    assert "sin(" in text


def test_cond_under_jit_takes_the_branch_of_each_call():
    f = sl.jit(lambda x, t: lax.cond(t > 0, lambda a: a * 3.0, lambda a: -a, x))
    close(f(sl.tensor(2.0), sl.tensor(1.0)), sl.tensor(6.0))
    close(f(sl.tensor(2.0), sl.tensor(-1.0)), sl.tensor(-2.0))
    g = sl.jit(sl.grad(lambda x, t: lax.cond(t > 0, lambda a: a ** 2, lambda a: sl.sin(a), x)))
    close(g(sl.tensor(2.0), sl.tensor(1.0)), sl.tensor(4.0))
    close(g(sl.tensor(2.0), sl.tensor(-1.0)), sl.cos(sl.tensor(2.0)))
    h = sl.jit(sl.grad(sl.grad(lambda x, t: lax.cond(t > 0, lambda a: a ** 3, sl.sin, x))))
    close(h(sl.tensor(2.0), sl.tensor(1.0)), sl.tensor(12.0))
    close(h(sl.tensor(2.0), sl.tensor(-1.0)), -sl.sin(sl.tensor(2.0)))


def per_example(f, *xs):
    return sl.stack([f(*[x[i] for x in xs]) for i in range(xs[0].shape[0])])


def test_cond_under_vmap_batched_and_unbatched_predicate():
    def f(c, t):
        return lax.cond(t > 1.5, lambda a: sl.sin(a) * t, lambda a: a * a + 1.0, c)

    c, t = sl.tensor([0.5, 0.7, 0.9, -0.2]), sl.tensor([1.0, 2.0, 3.0, 1.0])
    close(sl.vmap(f)(c, t), per_example(f, c, t))
    close(sl.vmap(f, in_axes=(0, None))(c, sl.tensor(2.0)),
          per_example(lambda a: f(a, sl.tensor(2.0)), c))
    g = sl.grad(lambda c: sl.vmap(f)(c, t).sum())(c)
    close(g, per_example(lambda a, b: sl.grad(f)(a, b), c, t))
    # the gradient of the batched cond is itself vmappable and differentiable again
    gg = sl.vmap(sl.grad(sl.grad(f)))(c, t)
    close(gg, per_example(lambda a, b: sl.grad(sl.grad(f))(a, b), c, t))


@pytest.mark.parametrize("jit", [False, True])
def test_a_branch_an_example_does_not_take_gives_its_gradient_nothing(jit):
    """grad of vmap of cond with a batched predicate is the per-example gradient, as JAX's:
    the branch an example does not take sees its inputs with their gradient stopped, so its
    infinite partials (log, sqrt at 0 and below) do not turn that example's zero cotangent
    into NaN. Operands, a closed-over tensor, switch, and a cond in a vmapped scan body."""
    wrap = sl.jit if jit else (lambda f: f)
    xs = sl.tensor([-4.0, 0.0, 4.0])

    def f(x):
        return lax.cond(x > 0, sl.sqrt, lambda v: v * 0.0, x)

    g = wrap(sl.grad(lambda xs: sl.vmap(f)(xs).sum()))(xs)
    close(g, sl.tensor([0.0, 0.0, 0.25]))
    close(g, sl.vmap(sl.grad(f))(xs))

    w = sl.tensor(0.0)  # closed over, unbatched: log's partial in it is infinite

    def h(x, w):
        return lax.switch(sl.astype(x > 0, "int32"), [lambda v: v * 2.0,
                                                     lambda v: sl.log(w) + v], x)

    gw = wrap(sl.grad(lambda w: sl.vmap(lambda x: h(x, w))(sl.tensor([-1.0, -2.0])).sum()))(w)
    close(gw, sl.tensor(0.0))

    def scanned(c0):
        def body(c, t):
            c = lax.cond(c > 0, lambda v: sl.sqrt(v) + t, lambda v: v - t, c)
            return c, c
        return sl.scan(body, c0, sl.tensor([1.0, 2.0, 3.0]))[1].sum()

    c0 = sl.tensor([-3.0, -1.0, 2.0])
    got = wrap(sl.grad(lambda c: sl.vmap(scanned)(c).sum()))(c0)
    assert np.all(np.isfinite(got.numpy()))
    close(got, sl.vmap(sl.grad(scanned))(c0))


def test_switch_traced_index_is_clamped_everywhere():
    branches = [lambda a: a - 1.0, lambda a: 2.0 * a, lambda a: a ** 2]
    idx, x = sl.tensor([-4, 0, 1, 2, 9]), sl.tensor([3.0, 3.0, 3.0, 3.0, 3.0])
    want = sl.tensor([2.0, 2.0, 6.0, 9.0, 9.0])
    close(sl.vmap(lambda i, a: lax.switch(i, branches, a))(idx, x), want)
    f = sl.jit(lambda i, a: lax.switch(i, branches, a))
    close(sl.stack([f(i, a) for i, a in zip(idx, x)]), want)
    _, ys = sl.scan(lambda c, i: (c, lax.switch(i, branches, c)), sl.tensor(3.0), idx)
    close(ys, want)
    g = sl.grad(lambda c: sl.scan(lambda c, i: (lax.switch(i, branches, c), None), c,
                                  idx)[0])(sl.tensor(1.5))
    def python(c):
        for i in idx:
            c = branches[min(max(int(i), 0), 2)](c)
        return c

    close(g, sl.grad(python)(sl.tensor(1.5)))  # 16 (c - 2)^4: 64 (c - 2)^3 = -8


def test_vmap_of_switch_with_an_unbatched_index_stays_a_cond():
    branches = [lambda a: sl.log(a), lambda a: a * 2.0]
    # index 1 for all: the log branch would make NaN from the negative inputs if it ran
    out = sl.vmap(lambda a, i: lax.switch(i, branches, a), in_axes=(0, None))(
        sl.tensor([-1.0, -2.0]), sl.tensor(1))
    close(out, sl.tensor([-2.0, -4.0]))
    text = str(sl.make_graph(lambda a, i: sl.vmap(lambda b: lax.switch(i, branches, b))(a))(
        sl.ones(2), sl.tensor(1)))
    assert "cond(" in text


def test_unused_output_with_an_infinite_partial_gets_no_cotangent():
    # the second output's partial is infinite at 0; its cotangent is absent, not zero
    def body(c, t):
        a, b = lax.cond(t > 0, lambda x: (x * 2.0, sl.sqrt(x)), lambda x: (x * 3.0, x), c)
        return a, b

    g = sl.grad(lambda c: sl.scan(body, c, sl.tensor([1.0, -1.0]))[0])(sl.tensor(0.0))
    close(g, sl.tensor(6.0))


def test_cond_closing_over_tensors_gets_their_gradients():
    W = sl.tensor([[0.5, -1.0], [2.0, 0.1]])
    V = sl.tensor([[0.3, 0.2], [-0.4, 1.0]])

    def loss(W, V, h0):
        def step(h, t):
            return lax.cond(t > 0, lambda h: sl.tanh(W @ h), lambda h: V @ h + 1.0, h), None
        return sl.scan(step, h0, sl.tensor([1.0, -1.0, 1.0, 1.0, -1.0]))[0].sum()

    check_grads(loss, (W, V, sl.tensor([0.1, -0.2])), order=2)


def test_python_number_outputs_take_the_other_branchs_dtype():
    x = sl.tensor([1.0, 2.0], dtype="float32")
    two = sl.tensor(2.0, dtype="float32")
    out = sl.scan(lambda c, t: (lax.cond(t > 0, lambda a: a * 2, lambda a: 0.0 * a + 1.0, c),
                                lax.cond(t > 0, lambda: 1.0, lambda: two)),
                  x, sl.tensor([1.0, -1.0]))
    assert out[0].dtype == np.float32 and out[1].dtype == np.float32
    close(out[1], sl.tensor([1.0, 2.0], dtype="float32"))
    # the same under vmap, where the number's output is not batched
    f = lambda a, t: lax.cond(t > 0, lambda a: (a * 2, two), lambda a: (a, 1.0), a)
    for t, want in ((1.0, 2.0), (-1.0, 1.0)):
        out = sl.vmap(f, in_axes=(0, None))(x, sl.tensor(t))
        close(out[1], sl.full(2, want, dtype="float32"))
    _, tangent = sl.jvp(lambda a, t: f(a, t)[1] * a, (x, sl.tensor(-1.0)),
                        (sl.ones(2, "float32"), sl.tensor(0.0)))
    close(tangent, sl.ones(2, dtype="float32"))


def test_branches_that_disagree_raise_naming_the_path():
    t = sl.tensor(1.0)
    with pytest.raises(TypeError, match=r"cond: every branch must return the same shapes and "
                                        r"dtypes, but false_fun returned output\['h'\] as "
                                        r"f64\[2\] and true_fun as f64\[3\]"):
        sl.make_graph(lambda t: lax.cond(t > 0, lambda: {"h": sl.ones(3)},
                                         lambda: {"h": sl.ones(2)}))(t)
    with pytest.raises(TypeError, match=r"switch: every branch must return the same pytree "
                                        r"structure"):
        sl.make_graph(lambda t: lax.switch(t.astype(int), [lambda: (t,), lambda: t]))(t)
    with pytest.raises(TypeError, match=r"f32\[\] and branches\[1\] as f64\[\]"):
        sl.make_graph(lambda t: lax.switch(t.astype(int), [lambda: t.astype("float32"),
                                                           lambda: t]))(t)
    with pytest.raises(TypeError, match=r"cond: pred must be a scalar bool or number"):
        sl.make_graph(lambda t: lax.cond(t > sl.zeros(2), lambda: t, lambda: t))(t)
    with pytest.raises(TypeError, match=r"switch: index must be a scalar integer"):
        lax.switch(1.0, [lambda: t], )
    with pytest.raises(TypeError, match=r"switch: index must be a scalar integer"):
        sl.make_graph(lambda t: lax.switch(t, [lambda: t]))(t)


def test_cond_matches_jax():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):  # for this test only: a global switch leaks
        _cond_against_jax(jax)


def _cond_against_jax(jax):
    jl, jnp = jax.lax, jax.numpy

    def jbody(c, t):
        return jl.cond(t > 1.5, lambda a: (jnp.sin(a[0]) * t, a[1] + a[0]),
                       lambda a: (a[0] * a[0] + 1.0, a[1] * t), c)

    def jloss(a, b):
        c, _ = jl.scan(lambda c, t: (jbody(c, t), None), (a, b), jnp.array(TS))
        return c[0] + c[1]

    def sloss(a, b):
        c, _ = sl.scan(lambda c, t: (loop_body(c, t), None), (a, b), sl.tensor(TS))
        return c[0] + c[1]

    args = (0.5, -0.3)
    close(sloss(*map(sl.tensor, args)), sl.tensor(float(jloss(*args))))
    for n in (0, 1):
        close(sl.grad(sloss, n)(*map(sl.tensor, args)),
              sl.tensor(float(jax.grad(jloss, n)(*args))), rtol=1e-10)
        close(sl.grad(sl.grad(sloss, n), n)(*map(sl.tensor, args)),
              sl.tensor(float(jax.grad(jax.grad(jloss, n), n)(*args))), rtol=1e-10)
    branches_j = [lambda a: a - 1.0, lambda a: 2.0 * a, lambda a: a ** 2]
    idx = np.array([-4, 0, 1, 2, 9])
    want = jax.vmap(lambda i, a: jl.switch(i, branches_j, a))(idx, jnp.full(5, 3.0))
    got = sl.vmap(lambda i, a: lax.switch(i, branches_j, a))(sl.tensor(idx), sl.full(5, 3.0))
    close(got, sl.tensor(np.asarray(want)))


# --- select -------------------------------------------------------------------------------------
def test_select_values_gradients_and_checks():
    p = sl.tensor([True, False, True])
    a, b = sl.tensor([1.0, 2.0, 3.0]), sl.tensor([4.0, 5.0, 6.0])
    close(lax.select(p, a, b), sl.tensor([1.0, 5.0, 3.0]))
    close(lax.select(sl.tensor(False), a, b), b)
    check_grads(lambda a, b: lax.select(p, a, b), (a, b))
    assert lax.select(sl.tensor(True), sl.ones((), dtype="float32"), 0.0).dtype == np.float32
    close(lax.select(sl.tensor(True), sl.zeros(()), sl.ones(())), sl.zeros(()))
    assert lax.select(sl.zeros(0, dtype=bool), sl.zeros(0), sl.ones(0)).shape == (0,)
    with pytest.raises(TypeError, match="select: on_true and on_false must have one shape"):
        lax.select(p, a, sl.ones(1))
    with pytest.raises(TypeError, match="select: pred must be bool"):
        lax.select(sl.tensor([1.0, 0.0, 1.0]), a, b)
    with pytest.raises(TypeError, match="select: pred must be bool"):
        lax.select(sl.tensor([True, False]), a, b)


def test_complex_from_parts_values_edges_gradients_and_checks():
    x, y = sl.tensor([1.0, -0.0, 0.0, np.nan]), sl.tensor([2.0, np.inf, -np.inf, 1.0])
    z = lax.complex(x, y)
    assert z.dtype == np.complex128
    np.testing.assert_array_equal(z.numpy().real, x.numpy())  # 0 + 1j * inf would be nan
    np.testing.assert_array_equal(z.numpy().imag, y.numpy())
    assert lax.complex(sl.ones(2, dtype="float32"), 2.0).dtype == np.complex64
    assert lax.complex(1.0, sl.zeros((), dtype="float32")).dtype == np.complex64
    assert lax.complex(sl.ones((2, 1)), sl.zeros(3)).shape == (2, 3)
    assert lax.complex(sl.zeros(0), sl.zeros(0)).shape == (0,)
    c = np.array([2.0 + 3.0j, -1.0 + 0.5j])
    a, b = RNG.normal(size=2), RNG.normal(size=2)
    check_grads(lambda a, b: sl.real(lax.complex(a, b) * c) + sl.abs(lax.complex(a, b)) ** 3,
                (a, b), order=2)
    ga, gb = sl.grad(lambda a, b: sl.sum(sl.real(lax.complex(a, b) * c)), argnums=(0, 1))(a, b)
    close(ga, sl.tensor(c.real))
    close(gb, sl.tensor(-c.imag))
    primal, tangent = sl.jvp(lax.complex, (sl.tensor(a), sl.tensor(b)),
                             (sl.tensor([1.0, 0.0]), sl.tensor([0.0, 1.0])))
    close(tangent, sl.tensor([1.0, 1.0j]))
    close(sl.vmap(lax.complex, in_axes=(0, None))(sl.ones((3, 2)), sl.tensor(b)),
          sl.tensor(np.broadcast_to(1.0 + 1j * b, (3, 2))))
    with pytest.raises(TypeError, match="complex: x and y must be floats of one dtype"):
        lax.complex(sl.ones(2), sl.ones(2, dtype="float32"))
    with pytest.raises(TypeError, match="complex: x and y must be floats of one dtype"):
        lax.complex(sl.ones(2, dtype="int32"), sl.ones(2, dtype="int32"))


def test_complex_matches_jax_in_a_scan():
    jax = pytest.importorskip("jax")
    a, b = RNG.normal(size=4), RNG.normal(size=4)

    def f(m, ml, a, b):
        def step(h, ab):
            h = h * ml.complex(ab[0], ab[1]) + 1.0
            return h, m.real(h) * m.imag(h)
        return m.sum(ml.scan(step, ml.complex(0.5, 0.25), (a, b))[1])

    with jax.enable_x64(True):
        want = jax.value_and_grad(lambda a, b: f(jax.numpy, jax.lax, a, b), argnums=(0, 1))(a, b)
    got = sl.value_and_grad(lambda a, b: f(sl, lax, a, b), argnums=(0, 1))(a, b)
    for g, w in zip(sl.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        close(g, sl.tensor(np.asarray(w)))


# --- dynamic slicing ----------------------------------------------------------------------------
def np_dynamic_slice(x, starts, sizes):
    starts = [s + d if s < 0 else s for s, d in zip(starts, x.shape)]
    starts = [min(max(s, 0), d - n) for s, d, n in zip(starts, x.shape, sizes)]
    return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))], starts


STARTS = [(0, 0), (1, 2), (-1, -2), (9, 9), (-20, 3), (3, -20)]


@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_slice_clamps_as_jax_known_and_traced(starts):
    x = np.arange(20.0).reshape(4, 5)
    want, _ = np_dynamic_slice(x, starts, (2, 3))
    close(lax.dynamic_slice(x, starts, (2, 3)), sl.tensor(want))
    traced = sl.jit(lambda s0, s1: lax.dynamic_slice(sl.tensor(x), (s0, s1), (2, 3)))
    close(traced(*[sl.tensor(s) for s in starts]), sl.tensor(want))
    close(lax.dynamic_slice(x, sl.tensor(starts), (2, 3)), sl.tensor(want))


@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_update_slice_clamps_as_jax_known_and_traced(starts):
    x = np.arange(20.0).reshape(4, 5)
    u = -np.ones((2, 3))
    _, s = np_dynamic_slice(x, starts, (2, 3))
    want = x.copy()
    want[s[0]:s[0] + 2, s[1]:s[1] + 3] = u
    close(lax.dynamic_update_slice(x, u, starts), sl.tensor(want))
    traced = sl.jit(lambda s0, s1: lax.dynamic_update_slice(sl.tensor(x), sl.tensor(u),
                                                            (s0, s1)))
    close(traced(*[sl.tensor(s) for s in starts]), sl.tensor(want))


def test_dynamic_slicing_in_a_scan_body_and_under_vmap_with_gradients():
    x = sl.tensor(RNG.normal(size=(6, 3)))
    idx = sl.tensor([4, 0, -1, 2])

    def windows(x):
        return sl.scan(lambda c, i: (c, lax.dynamic_slice_in_dim(x, i, 3) * c), 2.0, idx)[1]

    want = sl.stack([np_dynamic_slice(x.numpy(), (int(i), 0), (3, 3))[0] * 2.0 for i in idx])
    close(windows(x), sl.tensor(want))
    close(sl.vmap(lambda i: lax.dynamic_slice_in_dim(x, i, 3) * 2.0)(idx), sl.tensor(want))
    check_grads(windows, (x,), order=2)

    def written(x, u):
        def step(c, i):
            return lax.dynamic_update_index_in_dim(c, u * sl.sin(i.astype(float)), i, 0), None
        return sl.scan(step, x, idx)[0]

    check_grads(written, (x, sl.tensor(RNG.normal(size=3))), order=2)
    close(sl.vmap(lambda i: lax.dynamic_index_in_dim(x, i, keepdims=False))(idx),
          sl.stack([x[int(i)] for i in idx]))


def test_dynamic_slicing_edges_and_errors():
    close(lax.dynamic_slice(sl.tensor(3.0), (), ()), sl.tensor(3.0))  # 0-d
    assert lax.dynamic_slice(sl.zeros((0, 3)), (0, 1), (0, 2)).shape == (0, 2)
    x = sl.tensor([1.0, np.nan, np.inf])
    close(lax.dynamic_slice(x, (1,), (2,)), sl.tensor([np.nan, np.inf]))
    close(lax.dynamic_update_slice(sl.zeros((), dtype="float32"), 1.0, ()),
          sl.tensor(1.0, dtype="float32"))  # a Python number takes operand's dtype
    close(lax.dynamic_update_index_in_dim(sl.zeros(3, dtype="float32"), 1.0, 1, 0),
          sl.tensor([0.0, 1.0, 0.0], dtype="float32"))
    with pytest.raises(TypeError, match=r"dynamic_slice: slice_sizes must be 1 non-negative "
                                        r"ints no larger than the operand's shape \(3,\)"):
        lax.dynamic_slice(x, (0,), (4,))
    with pytest.raises(TypeError, match=r"start_indices\[0\] must be a scalar integer"):
        lax.dynamic_slice(x, (sl.tensor(1.0),), (1,))
    with pytest.raises(TypeError, match="start_indices has 2 entries for an operand of 1 axes"):
        lax.dynamic_slice(x, (0, 0), (1,))
    with pytest.raises(TypeError, match="update must have operand's rank and dtype"):
        lax.dynamic_update_slice(x, sl.ones(1, dtype="float32"), (0,))


def test_dynamic_slicing_matches_jax():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        _dynamic_against_jax(jax)


def _dynamic_against_jax(jax):
    x = RNG.normal(size=(4, 5))
    u = RNG.normal(size=(2, 3))
    for s in STARTS:
        close(lax.dynamic_slice(x, s, (2, 3)),
              sl.tensor(np.asarray(jax.lax.dynamic_slice(x, s, (2, 3)))))
        close(lax.dynamic_update_slice(x, u, s),
              sl.tensor(np.asarray(jax.lax.dynamic_update_slice(x, u, s))))
    jg = jax.grad(lambda x, u: (jax.lax.dynamic_update_slice(x, u * 2, (1, 3)) ** 2).sum()
                  + jax.lax.dynamic_slice(x, (2, -1), (2, 2)).sum(), (0, 1))(x, u)
    sg = sl.grad(lambda x, u: (lax.dynamic_update_slice(x, u * 2, (1, 3)) ** 2).sum()
                 + lax.dynamic_slice(x, (2, -1), (2, 2)).sum(), (0, 1))(sl.tensor(x),
                                                                        sl.tensor(u))
    for a, b in zip(sg, jg):
        close(a, sl.tensor(np.asarray(b)))


# --- cumulative reductions ----------------------------------------------------------------------
CUMULATIVE = [("cumsum", np.cumsum), ("cumprod", np.cumprod),
              ("cummax", np.maximum.accumulate), ("cummin", np.minimum.accumulate),
              ("cumlogsumexp", np.logaddexp.accumulate)]


@pytest.mark.parametrize("name,ref", CUMULATIVE)
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_against_numpy_and_finite_differences(name, ref, reverse):
    fn = getattr(lax, name)
    x = RNG.normal(size=(5, 3))
    for axis in (0, 1, -1):
        want = np.flip(ref(np.flip(x, axis), axis=axis), axis) if reverse else \
            ref(x, axis=axis)
        close(fn(x, axis=axis, reverse=reverse), sl.tensor(want), rtol=1e-12)
    check_grads(lambda x: fn(x, 1, reverse), (sl.tensor(x),), order=2)
    assert fn(sl.zeros((0, 2)), 0, reverse).shape == (0, 2)
    if name != "cumlogsumexp":
        ints = sl.tensor([[3, 1], [2, 5]], dtype="int32")
        assert fn(ints).dtype == np.int32  # the operand's dtype, as lax keeps it
    assert fn(sl.ones(3, dtype="float32")).dtype == np.float32
    with pytest.raises(ValueError, match=f"{name}: the operand is 0-d"):
        fn(sl.tensor(1.0))


def test_cumlogsumexp_edges():
    close(lax.cumlogsumexp(sl.tensor([-np.inf, -np.inf, 1.0])),
          sl.tensor([-np.inf, -np.inf, 1.0]))
    g = sl.grad(lambda x: lax.cumlogsumexp(x).sum())(sl.tensor([1.0, 3.0, -np.inf, 2.0]))
    assert np.isfinite(g.numpy()).all() and g.numpy()[2] == 0.0
    with np.errstate(invalid="ignore"):
        assert np.isnan(lax.cumlogsumexp(sl.tensor([1.0, np.nan, 2.0])).numpy()[1:]).all()


@pytest.mark.parametrize("name", [n for n, _ in CUMULATIVE])
def test_cumulative_matches_jax(name):
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        _cumulative_against_jax(jax, name)


def _cumulative_against_jax(jax, name):
    x = RNG.normal(size=(4, 3))
    for reverse in (False, True):
        want = getattr(jax.lax, name)(x, axis=1, reverse=reverse)
        close(getattr(lax, name)(x, axis=1, reverse=reverse), sl.tensor(np.asarray(want)),
              rtol=1e-12)
        jg = jax.grad(lambda x, r=reverse: (getattr(jax.lax, name)(x, 0, r) ** 2).sum())(x)
        sg = sl.grad(lambda x, r=reverse: (getattr(lax, name)(x, 0, r) ** 2).sum())(
            sl.tensor(x))
        close(sg, sl.tensor(np.asarray(jg)), rtol=1e-10)


# --- map and fori_loop ----------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [None, 1, 3, 7, 10])
def test_map_is_the_python_loop(batch_size):
    xs = {"a": sl.tensor(RNG.normal(size=(7, 2))), "b": sl.tensor(RNG.normal(size=7))}
    W = sl.tensor(RNG.normal(size=(2, 2)))

    def f(x):
        return sl.tanh(W @ x["a"]) * x["b"]

    close(lax.map(f, xs, batch_size=batch_size),
          sl.stack([f({"a": xs["a"][i], "b": xs["b"][i]}) for i in range(7)]))
    check_grads(lambda a, b: lax.map(f, {"a": a, "b": b}, batch_size=batch_size),
                (xs["a"], xs["b"]))
    with pytest.raises(ValueError, match="map: batch_size must be None or a positive int"):
        lax.map(f, xs, batch_size=0)


def test_fori_loop_with_traced_bounds_and_unroll():
    f = sl.jit(lambda n, x: lax.fori_loop(0, n, lambda i, v: v * 0.5 + i, x))
    for n in (0, 3, 5):
        want = 1.0
        for i in range(n):
            want = want * 0.5 + i
        close(f(sl.tensor(n), sl.tensor(1.0)), sl.tensor(want))
    close(lax.fori_loop(0, 5, lambda i, v: v * 0.5 + i, sl.tensor(1.0), unroll=2),
          f(sl.tensor(5), sl.tensor(1.0)))
    with pytest.raises(ValueError, match="fori_loop: unroll needs bounds known"):
        sl.jit(lambda n: lax.fori_loop(0, n, lambda i, v: v, sl.tensor(1.0), unroll=2))(
            sl.tensor(3))


def test_cond_in_a_numba_loop_falls_back_with_a_warning():
    pytest.importorskip("numba")
    body = lambda c, t: (lax.cond(t > 1.5, lambda a: sl.sin(a) * t, lambda a: a * a, c),) * 2
    xs = sl.tensor([1.0, 2.0, 3.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = sl.scan(body, sl.tensor(0.5), xs, compiler="numba")
    assert any(issubclass(w.category, sl.NumbaFallbackWarning) for w in caught)
    want = sl.scan(body, sl.tensor(0.5), xs)
    close(got[1], want[1])


def test_cond_composes_with_checkpoint_while_loop_nesting_and_forward_mode():
    def f(x, t):
        return lax.cond(t > 0, lambda a: sl.sin(a) * a, lambda a: sl.exp(a), x)

    x = sl.tensor(0.7)
    for t in (sl.tensor(1.0), sl.tensor(-1.0)):
        close(sl.grad(sl.checkpoint(f))(x, t), sl.grad(f)(x, t))
        close(sl.grad(sl.grad(sl.checkpoint(f)))(x, t), sl.grad(sl.grad(f))(x, t))
        close(sl.hessian(sl.jit(f))(x, t), sl.grad(sl.grad(f))(x, t))
        close(sl.jacfwd(sl.jit(f))(x, t), sl.grad(f)(x, t))

    def in_while(x):
        return sl.while_loop(lambda c: c[1] < 4, lambda c: (
            lax.cond(c[1] % 2 == 0, lambda a: a * 2.0, sl.sin, c[0]), c[1] + 1), (x, 0))[0]

    def python(x):
        for i in range(4):
            x = x * 2.0 if i % 2 == 0 else sl.sin(x)
        return x

    close(in_while(x), python(x))
    close(sl.grad(in_while)(x), sl.grad(python)(x))

    def nested(x, t):
        return lax.cond(t > 0, lambda a: lax.cond(a > 0.5, lambda b: b * 3.0, lambda b: b, a),
                        lambda a: -a, x)

    xs, ts = sl.tensor([0.2, 0.7, 0.9]), sl.tensor([1.0, 1.0, -1.0])
    close(sl.vmap(nested)(xs, ts), sl.tensor([0.2, 2.1, -0.9]))
    close(sl.vmap(sl.grad(nested))(xs, ts), sl.tensor([1.0, 3.0, -1.0]))
    t2 = sl.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]])
    close(sl.vmap(sl.vmap(f))(sl.full((2, 3), 0.5), t2),
          sl.stack([per_example(f, sl.full(3, 0.5), row) for row in t2]))
    _, tangent = sl.jvp(lambda x: sl.vmap(f)(x, sl.tensor([1.0, -1.0])), (sl.tensor([0.3, 0.4]),),
                        (sl.ones(2),))
    close(tangent, sl.stack([sl.grad(f)(sl.tensor(0.3), sl.tensor(1.0)),
                             sl.grad(f)(sl.tensor(0.4), sl.tensor(-1.0))]))


def test_traced_cond_edges():
    t = sl.tensor(1.0)
    # no operands; a Python number output takes the other branch's dtype
    close(sl.jit(lambda t: lax.cond(t > 0, lambda: sl.tensor(1.0), lambda: 2.0))(t),
          sl.tensor(1.0))
    # empty arrays, Python-number operands (reaching the branches as themselves)
    assert sl.jit(lambda a, t: lax.cond(t > 0, lambda a: a * 2, lambda a: a, a))(
        sl.zeros((0, 3)), t).shape == (0, 3)
    close(sl.jit(lambda a, t: lax.cond(t > 0, lambda a, k: a * k, lambda a, k: a + k, a, 3))(
        sl.tensor(0.7), t), sl.tensor(2.1))
    # integer outputs beside float ones: the gradient flows through the float ones
    h = lambda x, t: lax.cond(t > 0, lambda a: (a * 2, sl.tensor(1)), lambda a: (a, sl.tensor(2)),
                              x)
    g = sl.grad(lambda x: sl.scan(lambda c, tt: (h(c, tt)[0], h(c, tt)[1]), x,
                                  sl.tensor([1.0, -1.0]))[0])(sl.tensor(0.7))
    close(g, sl.tensor(2.0))
    # NaN and inf pass through the chosen branch and never from the other (which runs on
    # every example under vmap, as in JAX: inf * 0 warns there)
    with np.errstate(invalid="ignore"):
        out = sl.vmap(lambda a, t: lax.cond(t > 0, lambda a: a, lambda a: a * 0.0, a))(
            sl.tensor([np.nan, np.inf, 1.0]), sl.tensor([1.0, 1.0, -1.0]))
    assert np.isnan(out.numpy()[0]) and np.isinf(out.numpy()[1]) and out.numpy()[2] == 0.0


def test_lax_on_the_device_of_the_data(backend):
    x = backend.tensor([0.5, -0.2, 0.9])
    ts = backend.tensor([1.0, -1.0, 2.0])

    def body(c, t):
        c = lax.cond(t > 0, lambda a: sl.sin(a) * t, lambda a: a * a + 1.0, c)
        return c, lax.dynamic_slice(x, (sl.argmax(c > 0.3),), (2,))

    c, ys = sl.scan(body, backend.tensor(0.5), ts)
    backend.check_device(c)
    backend.check_device(ys)
    g = sl.grad(lambda c0: sl.scan(body, c0, ts)[0])(backend.tensor(0.5))
    backend.check_device(g)
    want_c = 0.5
    for t in (1.0, -1.0, 2.0):
        want_c = np.sin(want_c) * t if t > 0 else want_c * want_c + 1.0
    np.testing.assert_allclose(backend.numpy(c), want_c, rtol=1e-12)
    out = sl.vmap(lambda a, t: lax.switch((t > 0).astype(int), [sl.exp, sl.sin], a))(x, ts)
    backend.check_device(out)
    np.testing.assert_allclose(backend.numpy(out), np.where(backend.numpy(ts) > 0,
                                                            np.sin(backend.numpy(x)),
                                                            np.exp(backend.numpy(x))))
    for name, _ in CUMULATIVE:
        backend.check_device(getattr(lax, name)(x, reverse=True))
    backend.check_device(lax.dynamic_update_slice(x, backend.tensor([7.0]), (sl.tensor(5),)))
    backend.check_device(lax.map(lambda a: a * 2, x))


def test_select_map_in_dim_forms_and_fori_loop_match_jax():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        jl, jnp = jax.lax, jax.numpy
        p = np.array([True, False, True])
        a, b = RNG.normal(size=3), RNG.normal(size=3)
        close(lax.select(p, a, b), sl.tensor(np.asarray(jl.select(p, a, b))))
        xs = RNG.normal(size=(5, 2))
        for bs in (None, 2):
            want = jl.map(lambda x: jnp.tanh(x) * x.sum(), xs, batch_size=bs)
            close(lax.map(lambda x: sl.tanh(x) * x.sum(), sl.tensor(xs), batch_size=bs),
                  sl.tensor(np.asarray(want)), rtol=1e-12)
        m = RNG.normal(size=(4, 3))
        for i in (-5, -1, 0, 2, 7):
            close(lax.dynamic_index_in_dim(m, i, 1, keepdims=False),
                  sl.tensor(np.asarray(jl.dynamic_index_in_dim(m, i, 1, keepdims=False))))
            close(lax.dynamic_slice_in_dim(m, i, 2),
                  sl.tensor(np.asarray(jl.dynamic_slice_in_dim(m, i, 2))))
            close(lax.dynamic_update_index_in_dim(m, np.ones(3), i, 0),
                  sl.tensor(np.asarray(jl.dynamic_update_index_in_dim(m, np.ones(3), i, 0))))
        jf = jax.jit(lambda n, x: jl.fori_loop(0, n, lambda i, v: v * 0.5 + i, x))
        sf = sl.jit(lambda n, x: lax.fori_loop(0, n, lambda i, v: v * 0.5 + i, x))
        for n in (0, 4):
            close(sf(sl.tensor(n), sl.tensor(1.0)), sl.tensor(float(jf(n, 1.0))))


def test_cond_reach_names_the_inputs_each_branch_reads():
    graph = sl.make_graph(lambda x, y, t: lax.cond(t > 0, lambda a, b: (a * 2.0, b),
                                                  lambda a, b: (a + 1.0, a * 0.0), x, y))(
        sl.tensor(1.0), sl.tensor(2.0), sl.tensor(1.0))
    eqn = next(e for e in graph.eqns if e.prim.name == "cond")
    assert eqn.prim.reach(eqn.params, [True, False]) == [False, True, False]
    assert eqn.prim.reach(eqn.params, [False, True]) == [False, True, True]


def test_jacobians_and_linearize_through_a_scan_of_conds():
    def f(x, ts):
        return sl.scan(lambda c, t: (lax.cond(t > 0, lambda a: sl.sin(a) * 2.0,
                                              lambda a: a[::-1] * a, c), None), x, ts)[0]

    def python(x, ts):
        for t in ts:
            x = sl.sin(x) * 2.0 if float(t) > 0 else x[::-1] * x
        return x

    x, ts = sl.tensor([0.3, -0.5, 0.8]), sl.tensor([1.0, -1.0, 1.0, -1.0])
    want = sl.jacrev(python)(x, ts)
    close(sl.jacrev(f)(x, ts), want)
    close(sl.jacfwd(f)(x, ts), want, rtol=1e-12, atol=1e-15)
    close(sl.hessian(lambda x: f(x, ts).sum())(x), sl.hessian(lambda x: python(x, ts).sum())(x))
    _, lin = sl.linearize(lambda x: f(x, ts), x)
    close(lin(sl.ones(3)), sl.jvp(lambda x: python(x, ts), (x,), (sl.ones(3),))[1])


# --- platform_dependent -------------------------------------------------------------------------
def test_platform_dependent_calls_the_branch_of_the_arguments_platform():
    branches = {"cpu": lambda x, y: x * y, "cuda": lambda x, y: x - y}
    x, y = sl.tensor([1.0, 2.0]), sl.tensor(3.0)
    close(lax.platform_dependent(x, y, **branches), [3.0, 6.0])
    close(lax.platform_dependent(x, y, cuda=branches["cuda"], default=lambda x, y: x + y),
          [4.0, 5.0])
    close(sl.jit(lambda x: lax.platform_dependent(x, y, **branches))(x), [3.0, 6.0])
    close(sl.grad(lambda x: lax.platform_dependent(x, y, **branches).sum())(x), [3.0, 3.0])
    close(sl.vmap(lambda x: lax.platform_dependent(x, y, **branches))(x), [3.0, 6.0])
    with pytest.raises(NotImplementedError, match="no branch for the platform 'cpu'"):
        lax.platform_dependent(x, cuda=lambda x: x)
    with pytest.raises(TypeError, match="cpu must be callable"):
        lax.platform_dependent(x, cpu=1.0)


def test_platform_dependent_agrees_with_jax_on_cpu():
    jax = pytest.importorskip("jax")
    x = np.array([1.0, 2.0])
    theirs = jax.lax.platform_dependent(x, cpu=lambda x: x * 3.0, default=lambda x: x)
    ours = lax.platform_dependent(sl.tensor(x), cpu=lambda x: x * 3.0, default=lambda x: x)
    close(ours, np.asarray(theirs))
