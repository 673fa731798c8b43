"""x.at[index]: JAX's functional indexed updates. Values against NumPy's in-place updates on a
copy, gradients in x and v against finite differences (to second order), repeated indices
(add accumulates, set keeps the last value and gives it alone the gradient, multiply raises),
and inside scan bodies with a traced step index, against the Python loop.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib.testing import check_grads

X = np.arange(24.0).reshape(4, 6) / 7 - 1.0


def _numpy_update(x, index, v, how):
    out = x.copy()
    if how == "set":
        out[index] = v
    elif how == "add":
        np.add.at(out, index, v)
    elif how == "multiply":
        out[index] *= v
    elif how == "divide":
        out[index] /= v
    return out


INDEXES = {
    "int": (2, (6,)),
    "neg-int": (-1, ()),
    "slice": ((slice(1, 3), slice(None, None, 2)), (2, 3)),
    "ellipsis": ((Ellipsis, 1), (4,)),
    "int-array": (np.array([3, 0]), (2, 6)),
    "arrays-2d": ((np.array([0, 2, 3]), np.array([5, 1, 0])), (3,)),
    "mixed": ((slice(None), np.array([4, 1])), (4, 2)),
    "mask": (X > 0.5, (int((X > 0.5).sum()),)),
    "broadcast-v": ((slice(None), 2), (1,)),
}


@pytest.mark.parametrize("how", ["set", "add", "multiply", "divide"])
@pytest.mark.parametrize("name", list(INDEXES))
def test_values_match_numpy(backend, name, how):
    index, vshape = INDEXES[name]
    v = np.random.default_rng(0).uniform(0.5, 2.0, vshape)
    x = backend.tensor(X)
    out = getattr(x.at[index], how)(backend.tensor(v))
    np.testing.assert_allclose(backend.numpy(out), _numpy_update(X, index, v, how), rtol=1e-14)
    backend.check_device(out)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(backend.numpy(x), X)  # x itself is unchanged
    np.testing.assert_array_equal(backend.numpy(x.at[index].get()), X[index])


@pytest.mark.parametrize("how", ["set", "add", "multiply", "divide"])
@pytest.mark.parametrize("name", [n for n in INDEXES if n != "mask"])
def test_gradients_match_finite_differences(backend, name, how):
    index, vshape = INDEXES[name]
    v = np.random.default_rng(1).uniform(0.5, 2.0, vshape)

    def f(x, v):
        out = getattr(x.at[index], how)(v)
        return out * out  # nonlinear, so second order sees the update

    check_grads(f, [backend.array(X), backend.array(v)], order=2)


def test_repeated_indices(backend):
    x = backend.tensor(np.zeros(4), requires_grad=True)
    v = backend.tensor([1.0, 2.0, 3.0], requires_grad=True)
    idx = [1, 1, 3]
    np.testing.assert_array_equal(backend.numpy(x.at[idx].add(v)), [0, 3, 0, 3])
    np.testing.assert_array_equal(backend.numpy(x.at[idx].set(v)), [0, 2, 0, 3])  # last wins
    w = backend.tensor([10.0, 20.0, 30.0, 40.0])
    gx, gv = sl.grad(lambda x, v: sl.sum(x.at[idx].set(v) * w), argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(backend.numpy(gx), [10, 0, 30, 0])
    np.testing.assert_array_equal(backend.numpy(gv), [0, 20, 40])  # the overwritten 1.0: none
    gx, gv = sl.grad(lambda x, v: sl.sum(x.at[idx].add(v) * w), argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(backend.numpy(gx), [10, 20, 30, 40])
    np.testing.assert_array_equal(backend.numpy(gv), [20, 20, 40])
    for how in ("multiply", "divide"):
        with pytest.raises(ValueError, match="more than once"):
            getattr(x.at[idx], how)(v)


def test_dtype_and_errors():
    x = sl.tensor(np.zeros(3, np.float32), requires_grad=True)
    out = x.at[0].set(sl.tensor(2.5))  # a float64 value is cast to x's dtype, as JAX does
    assert out.dtype == np.float32
    assert sl.grad(lambda v: sl.sum(x.at[0].set(v)))(sl.tensor(2.5)).dtype == np.float64
    with pytest.raises(TypeError, match="imaginary"):
        x.at[0].set(1j)
    with pytest.raises(IndexError):
        x.at[5].set(1.0)
    with pytest.raises(NotImplementedError, match="mode='drop'"):
        x.at[5].set(1.0, mode="drop")
    with pytest.raises(ValueError, match="fill_value applies to mode='fill' only"):
        x.at[5].get(mode="clip", fill_value=1.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.at[0].set(1.0, sorted=True)
    assert x.at[0].set(1.0, unique_indices=True).numpy()[0] == 1.0  # a hint: accepted


GET_INDICES = [
    (np.array([0, 3, 4, -1, -4, -5, 7]),),
    (np.array([[0, 9], [-6, 2]]), slice(None), 1),
    (slice(1, 3), np.array([5, -1, 0, -6])),
    (Ellipsis, np.array([2, 3, -3, -4])),
    (np.array([1, 8]), np.array([[0], [4], [5]])),
    (np.array([0, 2]), slice(None), np.array([3, 1])),
    (6,), (-5,), (None, 2, np.array([9, 1])), (1, 2, 5),
]


@pytest.mark.parametrize("index", GET_INDICES, ids=range(len(GET_INDICES)))
@pytest.mark.parametrize("options", [{"mode": "fill"}, {"mode": "fill", "fill_value": -7.5},
                                     {"mode": "clip"}])
def test_get_out_of_range_fills_or_clips_as_jax(index, options):
    """x.at[i].get(mode="fill" | "clip"): JAX's values (NaN or fill_value past either end,
    the nearest entry) for integer and array indices beside slices, None and Ellipsis, and
    JAX's gradient (the fill values get none)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 5, 3))
    with jax.enable_x64(True):
        want = np.asarray(jnp.asarray(x).at[index].get(**options))
        weights = rng.standard_normal(want.shape)

        def loss(lib, x):
            y = x.at[index].get(**options)
            return lib.sum(lib.where(lib.isnan(y), 0.0, y) * weights)

        want_grad = np.asarray(jax.grad(lambda x: loss(jnp, x))(jnp.asarray(x)))
    got = sl.tensor(x).at[index].get(**options).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sl.grad(lambda x: loss(sl, x))(sl.tensor(x)).numpy(),
                                  want_grad)


def test_get_fill_defaults_and_traced_indices():
    xi = sl.tensor(np.arange(10, dtype=np.int32))
    got = xi.at[np.array([1, 12, -11])].get(mode="fill").numpy()
    np.testing.assert_array_equal(got, [1, np.iinfo(np.int32).min, np.iinfo(np.int32).min])
    xu = sl.tensor(np.arange(3, dtype=np.uint8))
    assert xu.at[np.array([3])].get(mode="fill").numpy()[0] == 255
    x = sl.tensor([1.0, 2.0, 3.0])
    f = sl.jit(lambda x, i: x.at[i].get(mode="fill", fill_value=0.0))
    np.testing.assert_array_equal(f(x, sl.tensor(np.array([0, 9, -2]))).numpy(), [1.0, 0.0, 2.0])


def test_a_step_indexed_buffer_in_a_scan_carry_matches_the_loop(backend):
    """buf = buf.at[t].set(h): the idiom of a carry buffer filled one row per step."""
    T, H = 5, 3
    W = backend.tensor(np.random.default_rng(2).standard_normal((H, H)) * 0.5)
    xs = backend.tensor(np.random.default_rng(3).standard_normal((T, H)))

    def step(carry, inp):
        h, buf = carry
        t, x = inp
        h = sl.tanh(h @ W + x)
        buf = buf.at[t].set(h).at[t, 0].add(x[1])
        return (h, buf), buf.at[t].get() * 2.0

    def loss(W, xs, use_scan):
        init = (backend.tensor(np.zeros(H)), backend.tensor(np.zeros((T, H))))
        ts = backend.tensor(np.arange(T))
        if use_scan:
            (h, buf), ys = sl.scan(step, init, (ts, xs))
        else:
            carry, ys = init, []
            for t in range(T):
                carry, y = step(carry, (ts[t], xs[t]))
                ys.append(y)
            (h, buf), ys = carry, sl.stack(ys)
        return sl.sum(buf ** 2) + sl.sum(ys * 0.3) + sl.sum(h)

    v1, g1 = sl.value_and_grad(lambda W, xs: loss(W, xs, True), (0, 1))(W, xs)
    v2, g2 = sl.value_and_grad(lambda W, xs: loss(W, xs, False), (0, 1))(W, xs)
    np.testing.assert_allclose(v1.item(), v2.item(), rtol=1e-12)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(backend.numpy(a), backend.numpy(b), rtol=1e-10, atol=1e-12)


def test_repeated_traced_indices_inside_scan(backend):
    """Inside a body the index values are known only when it runs: set's last-writer rule and
    multiply's check still hold there."""
    idx = backend.tensor(np.array([[0, 0], [1, 2]]))  # step 0 repeats position 0

    def step(c, i):
        return c, c.at[i].set(backend.tensor([1.0, 2.0]))

    _, ys = sl.scan(step, backend.tensor(np.zeros(3)), idx)
    np.testing.assert_array_equal(backend.numpy(ys), [[2, 0, 0], [0, 1, 2]])

    def bad(c, i):
        return c, c.at[i].multiply(2.0)

    with pytest.raises(ValueError, match="more than once"):
        sl.scan(bad, backend.tensor(np.ones(3)), idx)


def test_updates_that_would_change_an_integer_or_bool_dtype_raise():
    """As NumPy's in-place np.multiply.at(int_array, i, 2.5) refuses (same_kind casting),
    instead of truncating; set casts, as NumPy's and JAX's assignments do."""
    ints, flags = sl.tensor([1, 2, 3]), sl.tensor([True, False, True])
    for update in (lambda: ints.at[np.array([0, 2])].divide(2),
                   lambda: ints.at[0].multiply(2.5), lambda: ints.at[0].add(0.5),
                   lambda: flags.at[[0, 2]].add(-1)):
        with pytest.raises(TypeError, match="cast x first"):
            update()
    np.testing.assert_array_equal(ints.at[0].multiply(2).numpy(), [2, 2, 3])
    np.testing.assert_array_equal(ints.at[0].set(2.7).numpy(), [2, 2, 3])
    assert sl.zeros(3, dtype="float32").at[0].add(sl.tensor(2.5)).dtype == np.float32


def test_values_with_extra_leading_unit_axes_fit_as_numpy_assigns_them():
    for index, vshape in ((0, (1, 1, 4)), ((slice(None), 1), (1, 3))):
        v = sl.tensor(np.arange(float(np.prod(vshape))).reshape(vshape))
        for how in ("set", "add"):
            out = getattr(sl.zeros((3, 4)).at[index], how)(v)
            want = np.zeros((3, 4))
            want[index] = v.numpy().reshape(want[index].shape)
            np.testing.assert_array_equal(out.numpy(), want)
            g = sl.grad(lambda v, how=how, index=index: (
                getattr(sl.zeros((3, 4)).at[index], how)(v) ** 2).sum())(v)
            assert g.shape == vshape
            np.testing.assert_allclose(g.numpy(), 2 * v.numpy())
    with pytest.raises(ValueError, match="does not fit"):
        sl.zeros((3, 4)).at[0].set(sl.ones((2, 1, 4)))


def test_a_numpy_bool_scalar_index_is_a_new_axis_as_in_numpy():
    x = sl.tensor(np.arange(3.0))
    assert x[np.bool_(True)].shape == (1, 3) and x[np.bool_(False)].shape == (0, 3)
    np.testing.assert_array_equal(x.at[np.bool_(True)].set(2.0).numpy(), [2.0, 2.0, 2.0])


def test_the_gradient_of_setting_a_0d_array():
    """x.at[()].set(v) of a 0-d x: its VJP sets into the cotangent, which NumPy's ops hand
    over as a scalar, not a 0-d array (that once raised "does not support item
    assignment")."""
    f = lambda a: sl.zeros(()).at[()].set(a * 2.0) * 3.0  # noqa: E731
    assert sl.grad(f)(sl.tensor(1.0)).item() == 6.0
    check_grads(lambda a: (sl.ones(()).at[()].set(sl.sin(a)) * a) ** 2, (sl.tensor(0.7),),
                order=2)
