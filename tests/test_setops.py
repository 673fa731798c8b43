"""jax.numpy's data-sized functions (nonzero, argwhere, flatnonzero, unique and its array-API
forms, the set operations, compress, extract, bincount) with JAX's size=/fill_value=, and
digitize and isin: values and dtypes against NumPy and JAX, under jit, vmap and scan when
size= is given, a clear "pass size=" error when it is not, and gradients through the values.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp

from opcheck import fd_grad, jax_x64

NAN = np.nan
F = np.array([3.0, 1.0, NAN, 3.0, 2.0, NAN, -0.0, 0.0])
I2 = np.array([[0, 3, 0], [1, 0, 7]])
A = np.array([5.0, 1.0, 2.0, 1.0])
B = np.array([2.0, 7.0, 5.0])

# name: (fn(lib, x, y), args) compared with NumPy when sizes are left out
EAGER = {
    "nonzero": (lambda lib, x, y: lib.nonzero(x), (I2, None)),
    "flatnonzero": (lambda lib, x, y: lib.flatnonzero(x), (I2, None)),
    "argwhere": (lambda lib, x, y: lib.argwhere(x), (I2, None)),
    "argwhere_0d": (lambda lib, x, y: lib.argwhere(x), (np.array(2.0), None)),
    "unique": (lambda lib, x, y: lib.unique(x, True, True, True), (F, None)),
    "unique_2d": (lambda lib, x, y: lib.unique(x, return_inverse=True), (I2, None)),
    "unique_empty": (lambda lib, x, y: lib.unique(x, return_counts=True), (np.zeros(0), None)),
    "unique_values": (lambda lib, x, y: lib.unique_values(x), (I2, None)),
    "unique_counts": (lambda lib, x, y: tuple(lib.unique_counts(x)), (F, None)),
    "unique_inverse": (lambda lib, x, y: tuple(lib.unique_inverse(x)), (I2, None)),
    "unique_all": (lambda lib, x, y: tuple(lib.unique_all(x)), (A, None)),
    "union1d": (lambda lib, x, y: lib.union1d(x, y), (A, B)),
    "intersect1d": (lambda lib, x, y: lib.intersect1d(x, y), (A, B)),
    "setdiff1d": (lambda lib, x, y: lib.setdiff1d(x, y), (A, B)),
    "setxor1d": (lambda lib, x, y: lib.setxor1d(x, y), (A, B)),
    "isin": (lambda lib, x, y: lib.isin(x, y), (I2, np.array([3, 7, 9]))),
    "isin_invert": (lambda lib, x, y: lib.isin(x, y, invert=True), (A, B)),
    "compress": (lambda lib, x, y: lib.compress(y, x, axis=1), (I2, np.array([1, 0, 1]))),
    "compress_flat": (lambda lib, x, y: lib.compress(y, x), (I2, np.array([0, 1, 1]))),
    "extract": (lambda lib, x, y: lib.extract(x > 0, x), (I2, None)),
    "bincount": (lambda lib, x, y: lib.bincount(x), (np.array([0, 1, 1, 4]), None)),
    "bincount_w": (lambda lib, x, y: lib.bincount(x, y, minlength=7),
                   (np.array([0, 1, 1, 4]), np.array([0.5, 1.0, 2.0, 3.0]))),
    "digitize": (lambda lib, x, y: lib.digitize(x, y), (np.array([0.5, 1.0, 1.5, 3.0]),
                                                        np.array([1.0, 2.0]))),
    "digitize_right": (lambda lib, x, y: lib.digitize(x, y, right=True),
                       (np.array([0.5, 1.0, 1.5, 3.0]), np.array([1.0, 2.0]))),
    "digitize_down": (lambda lib, x, y: lib.digitize(x, y),
                      (np.array([0.5, 1.0, 1.5, 3.0]), np.array([2.0, 1.0]))),
    "digitize_down_right": (lambda lib, x, y: lib.digitize(x, y, True),
                            (np.array([0.5, 1.0, 1.5, 3.0]), np.array([2.0, 1.0]))),
}

# name: fn(lib, x, y) with sizes given, compared with JAX, and run under jit
SIZED = {
    "nonzero": (lambda lib, x, y: lib.nonzero(x, size=6, fill_value=-1), (I2, None)),
    "nonzero_short": (lambda lib, x, y: lib.nonzero(x, size=2), (I2, None)),
    "nonzero_fills": (lambda lib, x, y: lib.nonzero(x, size=5, fill_value=(7, 8)), (I2, None)),
    "flatnonzero": (lambda lib, x, y: lib.flatnonzero(x, size=4), (I2, None)),
    "argwhere": (lambda lib, x, y: lib.argwhere(x, size=4, fill_value=9), (I2, None)),
    "unique": (lambda lib, x, y: lib.unique(x, True, True, True, size=8), (F, None)),
    "unique_fill": (lambda lib, x, y: lib.unique(x, size=5, fill_value=-9.0), (A, None)),
    "unique_all": (lambda lib, x, y: tuple(lib.unique_all(x, size=5)), (A, None)),
    "union1d": (lambda lib, x, y: lib.union1d(x, y, size=7), (A, B)),
    "intersect1d": (lambda lib, x, y: lib.intersect1d(x, y, size=4), (A, B)),
    "setdiff1d": (lambda lib, x, y: lib.setdiff1d(x, y, size=4), (A, B)),
    "setxor1d": (lambda lib, x, y: lib.setxor1d(x, y, size=6), (A, B)),
    "compress": (lambda lib, x, y: lib.compress(y, x, axis=1, size=3, fill_value=-1),
                 (I2, np.array([1, 0, 1]))),
    "extract": (lambda lib, x, y: lib.extract(x > 0, x, size=5), (I2, None)),
    "bincount": (lambda lib, x, y: lib.bincount(x, length=3), (np.array([-1, 0, 1, 1, 4]),
                                                               None)),
}


def _leaves(out):
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def _same(got, want):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


def _args(lib_array, x, y):
    return lib_array(x), None if y is None else lib_array(y)


@pytest.mark.parametrize("name", list(EAGER))
def test_eager_matches_numpy(name):
    fn, (x, y) = EAGER[name]
    want = fn(np, x, y)
    if name.startswith("digitize"):  # JAX's dtype
        want = want.astype(np.int32)
    if name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
        want = np.unique(x, return_index=name == "unique_all",  # NumPy's need not be sorted
                         return_inverse=name in ("unique_inverse", "unique_all"),
                         return_counts=name in ("unique_counts", "unique_all"))
    _same(tuple(o.numpy() for o in _leaves_t(fn(jnp, *_args(sl.tensor, x, y)))), want)


def _leaves_t(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", list(SIZED))
def test_sized_match_jax_eagerly_and_under_jit(name):
    jax = pytest.importorskip("jax")
    import jax.numpy as J
    fn, (x, y) = SIZED[name]
    with jax_x64(jax):
        want = tuple(np.asarray(o) for o in _leaves_t(fn(J, *_args(J.asarray, x, y))))
    got = fn(jnp, *_args(sl.tensor, x, y))
    _same(tuple(o.numpy() for o in _leaves_t(got)), want)
    args = _args(sl.tensor, x, y)
    jitted = sl.jit(lambda a, b: fn(jnp, a, b))(*args) if y is not None else \
        sl.jit(lambda a: fn(jnp, a, None))(args[0])
    _same(tuple(o.numpy() for o in _leaves_t(jitted)), want)


def test_eager_matches_jax_too():
    jax = pytest.importorskip("jax")
    import jax.numpy as J
    for name in ["nonzero", "argwhere_0d", "unique", "unique_2d", "unique_all", "setxor1d",
                 "bincount", "bincount_w", "digitize", "compress", "isin"]:
        fn, (x, y) = EAGER[name]
        with jax_x64(jax):
            want = tuple(np.asarray(o) for o in _leaves_t(fn(J, *_args(J.asarray, x, y))))
        _same(tuple(o.numpy() for o in _leaves_t(fn(jnp, *_args(sl.tensor, x, y)))), want)


@pytest.mark.parametrize("call", [
    lambda x: jnp.nonzero(x), lambda x: jnp.flatnonzero(x), lambda x: jnp.argwhere(x),
    lambda x: jnp.unique(x), lambda x: jnp.unique_counts(x), lambda x: jnp.union1d(x, x),
    lambda x: jnp.intersect1d(x, x), lambda x: jnp.setdiff1d(x, x),
    lambda x: jnp.setxor1d(x, x), lambda x: jnp.compress(x > 0, x),
    lambda x: jnp.extract(x > 0, x)],
    ids=["nonzero", "flatnonzero", "argwhere", "unique", "unique_counts", "union1d",
         "intersect1d", "setdiff1d", "setxor1d", "compress", "extract"])
def test_traced_without_size_says_pass_size(call):
    x = sl.tensor([0.0, 2.0, 2.0])
    for transform in (sl.jit, sl.vmap):
        with pytest.raises(TypeError, match="pass size="):
            transform(call)(x if transform is sl.jit else x[None])
    with pytest.raises(TypeError, match="pass length="):
        sl.jit(lambda i: jnp.bincount(i))(sl.tensor([0, 1]))


def test_under_vmap_and_scan_with_size():
    x = sl.tensor(I2.astype(np.float64))
    rows = sl.vmap(lambda r: jnp.nonzero(r, size=2, fill_value=-1)[0])(x)
    np.testing.assert_array_equal(rows.numpy(), [[1, -1], [0, 2]])
    rows = sl.vmap(lambda r: jnp.unique(r, size=3))(x)
    np.testing.assert_array_equal(rows.numpy(), [[0, 3, 0], [0, 1, 7]])
    _, ys = sl.scan(lambda c, r: (c, jnp.bincount(r.astype(np.int64), length=8)), 0,
                    sl.tensor(I2))
    np.testing.assert_array_equal(ys.numpy(), [np.bincount(r, minlength=8) for r in I2])


def test_gradients_through_values():
    x0 = np.array([3.1, 1.2, 4.3, 1.7, 2.9])  # no ties, x * 0.5 included

    def f_unique(x):
        return jnp.sum(jnp.unique(x, size=6) ** 2 * sl.tensor(np.arange(1.0, 7.0)))

    def f_sets(x):
        return jnp.sum(jnp.union1d(x, x * 0.5, size=10) ** 3) + jnp.sum(
            jnp.setdiff1d(x, sl.tensor([5.0]), size=6) ** 2)

    def f_compress(x):
        return jnp.sum(jnp.compress(x > 1.8, x, size=4, fill_value=0.0) ** 2)

    def f_bincount(w):
        return jnp.sum(jnp.bincount(sl.tensor([0, 2, 2, 1, 0]), w, length=3) ** 2)

    for f in (f_unique, f_sets, f_compress, f_bincount):
        got = sl.grad(f)(sl.tensor(x0)).numpy()
        np.testing.assert_allclose(got, fd_grad(f, x0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(sl.jit(sl.grad(f))(sl.tensor(x0)).numpy(), got)
    jax = pytest.importorskip("jax")
    import jax.numpy as J
    with jax_x64(jax):
        want = jax.grad(lambda x: J.sum(J.unique(x, size=6) ** 2 * np.arange(1.0, 7.0)))(
            J.asarray(x0))
    np.testing.assert_allclose(sl.grad(f_unique)(sl.tensor(x0)).numpy(), np.asarray(want))


def test_errors():
    with pytest.raises(ValueError, match="0-d"):
        jnp.nonzero(sl.tensor(1.0))
    with pytest.raises(TypeError, match="integers"):
        jnp.bincount(sl.tensor([1.0]))
    with pytest.raises(ValueError, match="one per axis"):
        jnp.nonzero(sl.tensor(I2), size=3, fill_value=(1, 2, 3))
    with pytest.raises(NotImplementedError, match="axis"):
        jnp.unique(sl.tensor(I2), axis=0)
    assert jnp.nonzero(sl.zeros(0), size=2, fill_value=5)[0].numpy().tolist() == [5, 5]
    assert jnp.unique(sl.zeros(0), size=2, fill_value=1.0).numpy().tolist() == [1.0, 1.0]
    assert jnp.digitize(sl.tensor([1.0]), sl.zeros(0)).numpy().tolist() == [0]
