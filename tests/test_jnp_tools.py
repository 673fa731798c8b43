"""jax.numpy's editing, partial-sort, grid and mapping helpers: insert, delete,
put_along_axis, fill_diagonal, choose, resize, block, argpartition, partition, lexsort,
sort_complex, indices, ix_, s_, index_exp, mgrid, ogrid, r_, c_, frombuffer, fromiter,
fromstring, vectorize, apply_along_axis, apply_over_axes, fromfunction, piecewise, the print
options and the bfloat16 error: values and dtypes against NumPy and JAX, gradients against
finite differences, and under jit and vmap.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp

from opcheck import fd_grad, jax_x64

RNG = np.random.default_rng(3)
A = RNG.standard_normal((3, 4))
V = RNG.standard_normal(5)


def _np_put(a, i, v, axis):
    b = a.copy()
    np.put_along_axis(b, i, v, axis)
    return b


def _np_fill(a, v, wrap=False):
    b = a.copy()
    np.fill_diagonal(b, v, wrap=wrap)
    return b


IDX = np.array([[1], [0], [3]])
# name: (scanlib fn of x, numpy fn of x, x): differentiable in x
DIFFERENTIABLE = {
    "delete": (lambda x: jnp.delete(x, [0, 2], axis=1), lambda x: np.delete(x, [0, 2], 1), A),
    "delete_flat": (lambda x: jnp.delete(x, slice(1, 7, 2)),
                    lambda x: np.delete(x, slice(1, 7, 2)), A),
    "insert_block": (lambda x: jnp.insert(x, 1, x[:, 0], axis=1),
                     lambda x: np.insert(x, 1, x[:, 0], axis=1), A),
    "insert_many": (lambda x: jnp.insert(x, [1, 3], x[:2] * 2.0),
                    lambda x: np.insert(x, [1, 3], x[:2] * 2.0), V),
    "insert_scalar": (lambda x: jnp.insert(x, 2, 9.0, axis=0),
                      lambda x: np.insert(x, 2, 9.0, axis=0), A),
    "put_along_axis": (lambda x: jnp.put_along_axis(x, sl.tensor(IDX), x[:, :1] * 3, 1,
                                                    inplace=False),
                       lambda x: _np_put(x, IDX, x[:, :1] * 3, 1), A),
    "fill_diagonal": (lambda x: jnp.fill_diagonal(x, x[0, :2], inplace=False),
                      lambda x: _np_fill(x, x[0, :2]), A),
    "fill_diagonal_wrap": (lambda x: jnp.fill_diagonal(x, 5.0, wrap=True, inplace=False),
                           lambda x: _np_fill(x, 5.0, wrap=True), np.zeros((7, 3)) + A[0, :3]),
    "choose_clip": (lambda x: jnp.choose(sl.tensor([[0, 4, -1, 1]]), [x[0], x[1], x[2]],
                                         mode="clip"),
                    lambda x: np.choose([[0, 4, -1, 1]], [x[0], x[1], x[2]], mode="clip"), A),
    "choose_wrap": (lambda x: jnp.choose(sl.tensor([0, 4, -1, 1]), [x[0], x[1], 2.0],
                                         mode="wrap"),
                    lambda x: np.choose([0, 4, -1, 1], [x[0], x[1], 2.0], mode="wrap"), A),
    "resize": (lambda x: jnp.resize(x, (3, 4)), lambda x: np.resize(x, (3, 4)), V),
    "block": (lambda x: jnp.block([[x, x[:, :1]], [x[:1], x[:1, :1]]]),
              lambda x: np.block([[x, x[:, :1]], [x[:1], x[:1, :1]]]), A),
    "partition": (lambda x: jnp.sort(jnp.partition(x, 2)[:3]),
                  lambda x: np.sort(np.partition(x, 2)[:3]), V),
    "sort_complex": (lambda x: jnp.real(jnp.sort_complex(x)), lambda x: np.sort_complex(x).real,
                     V),
    "r_": (lambda x: jnp.r_[x, 0:2, 3.0], lambda x: np.r_[x, 0:2, 3.0], V),
    "c_": (lambda x: jnp.c_[x, x * 2], lambda x: np.c_[x, x * 2], V),
    "r_directive": (lambda x: jnp.r_["0,2", x, x], lambda x: np.r_["0,2", x, x], V),
    "vectorize": (lambda x: jnp.vectorize(lambda a, b: a * b + jnp.sin(a))(x, x[0]),
                  lambda x: np.vectorize(lambda a, b: a * b + np.sin(a))(x, x[0]), A),
    "vectorize_sig": (lambda x: jnp.vectorize(lambda a: jnp.sum(a * a), signature="(n)->()")(x),
                      lambda x: np.sum(x * x, axis=-1), A),
    "vectorize_sig_out": (lambda x: jnp.vectorize(lambda a, b: jnp.outer(a, b),
                                                  signature="(n),(m)->(n,m)")(x, x[0, :2]),
                          lambda x: np.einsum("bi,j->bij", x, x[0, :2]), A),
    "apply_along_axis": (lambda x: jnp.apply_along_axis(lambda v: jnp.outer(v, v[:2]), 0, x),
                         lambda x: np.apply_along_axis(lambda v: np.outer(v, v[:2]), 0, x), A),
    "apply_over_axes": (lambda x: jnp.apply_over_axes(jnp.sum, x, [1]),
                        lambda x: np.apply_over_axes(np.sum, x, [1]), A),
    "piecewise": (lambda x: jnp.piecewise(x, [x < 0, x > 0.5], [lambda v: v * v, jnp.sin, 2.0]),
                  lambda x: np.piecewise(x, [x < 0, x > 0.5], [lambda v: v * v, np.sin, 2.0]),
                  V),
}


@pytest.mark.parametrize("name", list(DIFFERENTIABLE))
def test_values_match_numpy_and_gradients_finite_differences(name):
    fn, ref, x = DIFFERENTIABLE[name]
    want = ref(x)
    got = fn(sl.tensor(x))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)
    assert got.dtype == np.float64 and got.shape == np.shape(want)
    w = RNG.standard_normal(np.shape(want))

    def f(t):
        return jnp.sum(fn(t) * sl.tensor(w))
    g = sl.grad(f)(sl.tensor(x)).numpy()
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=1e-6, atol=1e-7)
    if name not in ("choose_clip", "choose_wrap"):  # their index tensors are constants
        np.testing.assert_allclose(sl.jit(sl.grad(f))(sl.tensor(x)).numpy(), g, rtol=1e-12)


def test_integer_results_and_grids():
    assert jnp.argpartition(sl.tensor(V), 2).dtype == np.int32  # JAX's
    part = jnp.argpartition(sl.tensor(V), 2).numpy()
    assert set(part[:3]) == set(np.argsort(V)[:3]) and np.all(V[part[3:]] >= V[part[2]])
    keys = [np.array([1, 0, 2, 0, 1]), np.array([0, 0, 1, 0, 0])]
    got = jnp.lexsort([sl.tensor(k) for k in keys])
    np.testing.assert_array_equal(got.numpy(), np.lexsort(keys))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(jnp.indices((2, 3)).numpy(), np.indices((2, 3)))
    assert [t.shape for t in jnp.indices((2, 3), sparse=True)] == [(2, 1), (1, 3)]
    np.testing.assert_array_equal(jnp.mgrid[0:2, 0:3].numpy(), np.mgrid[0:2, 0:3])
    np.testing.assert_allclose(jnp.mgrid[0:1:5j].numpy(), np.mgrid[0:1:5j])
    assert [t.shape for t in jnp.ogrid[0:2, 0:3]] == [(2, 1), (1, 3)]
    rows, cols = jnp.ix_(sl.tensor([0, 2]), sl.tensor([1, 3]))
    np.testing.assert_array_equal(sl.tensor(A)[rows, cols].numpy(), A[np.ix_([0, 2], [1, 3])])
    assert jnp.s_[1:3, ::2] == np.s_[1:3, ::2] and jnp.index_exp[1] == np.index_exp[1]
    np.testing.assert_array_equal(jnp.frombuffer(b"\x01\x02", dtype=np.uint8).numpy(), [1, 2])
    np.testing.assert_array_equal(jnp.fromiter(range(3), dtype=np.float32).numpy(), [0, 1, 2])
    assert jnp.fromiter(range(3), dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(jnp.fromstring("1, 2", sep=",").numpy(), [1.0, 2.0])
    got = jnp.fromfunction(lambda i, j: i + 2 * j, (2, 3), dtype=np.int64)
    np.testing.assert_array_equal(got.numpy(), np.fromfunction(lambda i, j: i + 2 * j, (2, 3),
                                                               dtype=np.int64))
    assert got.dtype == np.int64
    # each call sees scalar indices, as in JAX: a constant result is broadcast
    np.testing.assert_array_equal(jnp.fromfunction(lambda i, j: 1.0, (2, 2)).numpy(),
                                  np.ones((2, 2)))
    with jnp.printoptions(precision=2):
        assert "0.33" in repr(sl.tensor([1 / 3])) and "0.333" not in repr(sl.tensor([1 / 3]))
    assert jnp.get_printoptions() is not None


def test_errors_say_how_to_fix():
    with pytest.raises(AttributeError, match="no bfloat16.*float32"):
        jnp.bfloat16  # noqa: B018
    assert not hasattr(jnp, "no_such_name")
    for call in (lambda: jnp.put_along_axis(sl.zeros((1, 2)), sl.tensor([[0]]), 1.0, 1),
                 lambda: jnp.fill_diagonal(sl.zeros((2, 2)), 1.0)):
        with pytest.raises(ValueError, match="inplace=False"):
            call()
    with pytest.raises(ValueError, match="mode='clip'"):
        jnp.choose(sl.tensor([2]), [sl.zeros(1), sl.ones(1)])
    with pytest.raises(TypeError, match="mode='clip'"):
        sl.jit(lambda i: jnp.choose(i, [sl.zeros(1), sl.ones(1)]))(sl.tensor([0]))
    with pytest.raises(TypeError, match="traced"):
        sl.jit(lambda i: jnp.delete(sl.ones(3), i))(sl.tensor(1))
    with pytest.raises(ValueError, match="signature"):
        jnp.vectorize(lambda a: a, signature="n->()")
    with pytest.raises(ValueError, match="one more"):
        jnp.piecewise(sl.zeros(2), [sl.tensor([True, False])], [1.0, 2.0, 3.0])


def test_mapping_helpers_compose_with_vmap_and_jit():
    f = jnp.vectorize(lambda a, b: jnp.sum(a * b), signature="(n),(n)->()")
    x = sl.tensor(A)
    with pytest.raises(ValueError, match="do not match the outputs"):
        jnp.vectorize(lambda a, b: a * b, signature="(n),(n)->()")(x, x)
    np.testing.assert_allclose(sl.jit(f)(x, x).numpy(), np.sum(A * A, -1))
    got = sl.vmap(lambda r: jnp.piecewise(r, [r > 0], [jnp.exp, 0.0]))(x)
    np.testing.assert_allclose(got.numpy(), np.where(A > 0, np.exp(A), 0.0))


def test_against_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as J
    with jax_x64(jax):
        checks = [
            (lambda lib, x: lib.argpartition(x, 2), V),
            (lambda lib, x: lib.partition(x, 2), V),
            (lambda lib, x: lib.lexsort([x > 0, x]), V),
            (lambda lib, x: lib.indices((2, 3)), V),
            (lambda lib, x: lib.mgrid[0:2, 0:3], V),
            (lambda lib, x: lib.r_[x, 0:2, 3], V),
            (lambda lib, x: lib.fromfunction(lambda i, j: i * j + 1.0, (2, 3)), V),
            (lambda lib, x: lib.resize(lib.arange(3), (2, 2)), V),
            (lambda lib, x: lib.piecewise(x, [x > 0], [lambda v: v + 1, 0.0]), V),
            (lambda lib, x: lib.vectorize(lambda a: a.sum(), signature="(n)->()")(x), A),
            (lambda lib, x: lib.apply_along_axis(lambda v: v.sum(), 1, x), A),
            (lambda lib, x: lib.sort_complex(x), V),
        ]
        for fn, x in checks:
            want = np.asarray(fn(J, J.asarray(x)))
            got = fn(jnp, sl.tensor(x)).numpy()
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-12)
