"""jax.numpy's cross, vecdot, matvec, vecmat, gradient, histogram and histogram_bin_edges:
values against NumPy, dtypes against JAX, gradients against finite differences, under jit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp

from opcheck import fd_grad, jax_x64

RNG = np.random.default_rng(2)
A3, B3 = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
A2 = RNG.standard_normal((4, 2))
M = RNG.standard_normal((2, 3, 4))
V4, V3 = RNG.standard_normal(4), RNG.standard_normal(3)
F2 = RNG.standard_normal((5, 4))
XS = np.cumsum(RNG.random(5)) + 0.1
D = RNG.standard_normal(40)
W = RNG.random(40)

# name: (fn(lib, x, y), x, y); gradients are taken in x
CASES = {
    "cross33": (lambda lib, x, y: lib.cross(x, y), A3, B3),
    "cross32": (lambda lib, x, y: lib.cross(x, y), A3, A2),
    "cross23": (lambda lib, x, y: lib.cross(x, y), A2, A3),
    "cross22": (lambda lib, x, y: lib.cross(x, y), A2, A2[::-1].copy()),
    "cross_axes": (lambda lib, x, y: lib.cross(x, y, axisa=0, axisb=0, axisc=0), A3.T.copy(),
                   B3.T.copy()),
    "vecdot": (lambda lib, x, y: lib.vecdot(x, y), A3, B3[0]),
    "vecdot_axis0": (lambda lib, x, y: lib.vecdot(x, y, axis=0), A3, B3),
    "matvec": (lambda lib, x, y: lib.matvec(x, y), M, V4),
    "vecmat": (lambda lib, x, y: lib.vecmat(x, y), V3, M),
    "gradient": (lambda lib, x, y: lib.gradient(x)[0], F2, None),
    "gradient_axis1": (lambda lib, x, y: lib.gradient(x, 0.5, axis=1), F2, None),
    "gradient_coords": (lambda lib, x, y: lib.gradient(x, y, 2.0)[0], F2, XS),
    "gradient_1d_two": (lambda lib, x, y: lib.gradient(x), F2[:2, 0].copy(), None),
    "histogram_w": (lambda lib, x, y: lib.histogram(y, bins=6, range=(-1.5, 2.0),
                                                    weights=x)[0], W, D),
    "histogram_density": (lambda lib, x, y: lib.histogram(y, bins=np.array([-2.0, 0.0, 0.5, 3.0]),
                                                          weights=x, density=True)[0], W, D),
}


def _run(lib, name, wrap):
    fn, x, y = CASES[name]
    return fn(lib, wrap(x), None if y is None else wrap(y))


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_numpy_and_gradients_finite_differences(name):
    if name in ("matvec", "vecmat") and not hasattr(np, name):
        pytest.skip(f"numpy.{name} (the reference) is NumPy 2.2's; this is NumPy {np.__version__}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy's 2-vector cross
        want = _run(np, name, np.asarray)
    got = _run(jnp, name, sl.tensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-13)
    assert got.dtype == np.float64
    fn, x, y = CASES[name]
    w = RNG.standard_normal(np.shape(want))

    def f(t):
        return jnp.sum(fn(jnp, t, None if y is None else sl.tensor(y)) * sl.tensor(w))
    got = sl.grad(f)(sl.tensor(x)).numpy()
    np.testing.assert_allclose(got, fd_grad(f, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sl.jit(sl.grad(f))(sl.tensor(x)).numpy(), got, rtol=1e-12)


def test_histogram_edges_counts_and_dtypes():
    for kw in [{}, {"bins": 4}, {"bins": 3, "range": (0.0, 1.0)}]:
        counts, edges = jnp.histogram(sl.tensor(D), **kw)
        nc, ne = np.histogram(D, **kw)
        np.testing.assert_array_equal(counts.numpy(), nc)
        np.testing.assert_allclose(edges.numpy(), ne, rtol=1e-15)
        np.testing.assert_allclose(jnp.histogram_bin_edges(sl.tensor(D), **kw).numpy(), ne)
    counts, edges = jnp.histogram(sl.tensor([2.0, 2.0]), bins=2)  # one value: widened by 0.5
    np.testing.assert_array_equal(edges.numpy(), [1.5, 2.0, 2.5])
    np.testing.assert_array_equal(counts.numpy(), [0.0, 2.0])
    counts, _ = jnp.histogram(sl.tensor(D.astype(np.float32)), bins=3)
    assert counts.dtype == np.float32
    with pytest.raises(ValueError, match="2 or 3 entries"):
        jnp.cross(sl.zeros(4), sl.zeros(4))
    with pytest.raises(ValueError, match="at least 2"):
        jnp.gradient(sl.zeros(1))
    with pytest.raises(NotImplementedError, match="edge_order"):
        jnp.gradient(sl.zeros(3), edge_order=2)


def test_against_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as J
    with jax_x64(jax):
        for name in CASES:
            want = np.asarray(_run(J, name, J.asarray))
            got = _run(jnp, name, sl.tensor).numpy()
            assert got.dtype == want.dtype, name
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=name)
        c, e = J.histogram(J.asarray(D), bins=5)
        assert jnp.histogram(sl.tensor(D), bins=5)[0].dtype == c.dtype
