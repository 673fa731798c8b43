"""jax.numpy's convolve, correlate and polynomial functions (poly, polyadd, polysub, polymul,
polyder, polyint, polydiv, polyfit, roots, trim_zeros): values and dtypes against NumPy and
JAX, gradients against finite differences, under jit and vmap, and the eager-only ones'
errors under a trace.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp

from opcheck import fd_grad, jax_x64

RNG = np.random.default_rng(1)
A = RNG.standard_normal(6)
V = RNG.standard_normal(3)
P = np.array([2.0, -3.0, 0.5, 1.0])
Q = np.array([1.0, 0.5])
X = np.linspace(-1.0, 1.0, 9)
Y = np.cos(2 * X)

# name: (fn(lib, a, b), a, b)
CASES = {
    **{f"convolve_{m}": (lambda lib, a, b, m=m: lib.convolve(a, b, m), A, V)
       for m in ("full", "same", "valid")},
    **{f"convolve_{m}_swapped": (lambda lib, a, b, m=m: lib.convolve(a, b, m), V, A)
       for m in ("full", "same", "valid")},
    **{f"correlate_{m}": (lambda lib, a, b, m=m: lib.correlate(a, b, m), A, V)
       for m in ("full", "same", "valid")},
    **{f"correlate_{m}_swapped": (lambda lib, a, b, m=m: lib.correlate(a, b, m), V, A)
       for m in ("full", "same", "valid")},
    "polyadd": (lambda lib, a, b: lib.polyadd(a, b), P, Q),
    "polysub": (lambda lib, a, b: lib.polysub(b, a), P, Q),
    "polymul": (lambda lib, a, b: lib.polymul(a, b), P, Q),
    "polyder": (lambda lib, a, b: lib.polyder(a), P, None),
    "polyder2": (lambda lib, a, b: lib.polyder(a, 2), P, None),
    "polyint": (lambda lib, a, b: lib.polyint(a), P, None),
    "polyint_k": (lambda lib, a, b: lib.polyint(a, 2, k=np.array([1.0, -2.0])), P, None),
    "polydiv_q": (lambda lib, a, b: lib.polydiv(a, b)[0], P, Q),
    "poly": (lambda lib, a, b: lib.poly(a), P, None),
    "polyfit": (lambda lib, a, b: lib.polyfit(a, b, 3), X, Y),
    "polyfit_w": (lambda lib, a, b: lib.polyfit(a, b, 2, w=np.linspace(1.0, 2.0, 9)), X, Y),
}


def _run(lib, fn, a, b, wrap):
    return fn(lib, wrap(a), None if b is None else wrap(b))


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_numpy_and_keep_float32(name):
    fn, a, b = CASES[name]
    want = _run(np, fn, a, b, np.asarray)
    got = _run(jnp, fn, a, b, sl.tensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    assert got.dtype == np.float64
    if name in ("polyfit_w", "polyint_k"):  # float64 weights or constants promote
        return
    got32 = _run(jnp, fn, a, b, lambda t: sl.tensor(np.asarray(t, np.float32)))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32.numpy(), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith("poly_")])
def test_gradients_match_finite_differences_and_jit(name):
    fn, a, b = CASES[name]
    w = RNG.standard_normal(np.shape(_run(np, fn, a, b, np.asarray)))

    def f(x):
        return jnp.sum(_run(jnp, fn, x, b, lambda t: t if isinstance(t, sl.Tensor) else
                            sl.tensor(t)) * sl.tensor(w))
    got = sl.grad(f)(sl.tensor(a)).numpy()
    np.testing.assert_allclose(got, fd_grad(f, a), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(sl.jit(sl.grad(f))(sl.tensor(a)).numpy(), got, rtol=1e-10,
                               atol=1e-12)


def test_polydiv_remainder_and_convolve_under_vmap():
    q, r = jnp.polydiv(sl.tensor(P), sl.tensor(Q))
    nq, nr = np.polydiv(P, Q)
    np.testing.assert_allclose(q.numpy(), nq)
    assert r.shape == P.shape  # JAX's: not trimmed
    np.testing.assert_allclose(r.numpy()[-nr.size:], nr, atol=1e-12)
    rows = RNG.standard_normal((4, 6))
    got = sl.vmap(lambda x: jnp.convolve(x, sl.tensor(V), "same"))(sl.tensor(rows))
    np.testing.assert_allclose(got.numpy(), [np.convolve(x, V, "same") for x in rows])


def test_roots_and_trim_zeros_are_eager():
    np.testing.assert_allclose(np.sort_complex(jnp.roots(sl.tensor([0.0, 1.0, -3.0, 2.0, 0.0]))
                                               .numpy()), [0, 1, 2], atol=1e-12)
    assert jnp.roots(sl.tensor([1.0, -3.0, 2.0])).dtype == np.complex128
    assert jnp.roots(sl.tensor([0.0, 0.0])).shape == (0,)
    np.testing.assert_array_equal(jnp.trim_zeros(sl.tensor([0.0, 1.0, 0.0, 2.0, 0.0])).numpy(),
                                  [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(jnp.trim_zeros(sl.tensor([0, 1, 0]), "b").numpy(), [0, 1])
    g = sl.grad(lambda x: jnp.sum(jnp.trim_zeros(x) ** 2))(sl.tensor([0.0, 3.0, 0.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 6.0, 0.0])
    for fn in (jnp.roots, jnp.trim_zeros):
        with pytest.raises(TypeError, match="outside the traced function"):
            sl.jit(fn)(sl.tensor([1.0, -3.0, 2.0]))


def test_errors():
    with pytest.raises(ValueError, match="mode"):
        jnp.convolve(sl.tensor(A), sl.tensor(V), "middle")
    with pytest.raises(ValueError, match="empty"):
        jnp.convolve(sl.zeros(0), sl.tensor(V))
    with pytest.raises(ValueError, match="1-d"):
        jnp.correlate(sl.zeros((2, 2)), sl.tensor(V))
    with pytest.raises(NotImplementedError, match="full=True"):
        jnp.polyfit(sl.tensor(X), sl.tensor(Y), 2, full=True)


def test_against_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as J
    with jax_x64(jax):
        for name, (fn, a, b) in CASES.items():
            want = np.asarray(_run(J, fn, a, b, J.asarray))
            got = _run(jnp, fn, a, b, sl.tensor).numpy()
            assert got.dtype == want.dtype, name
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11, err_msg=name)
        q, r = jnp.polydiv(sl.tensor(P), sl.tensor(Q))
        jq, jr = J.polydiv(J.asarray(P), J.asarray(Q))
        np.testing.assert_allclose(r.numpy(), np.asarray(jr), atol=1e-12)
        assert jnp.roots(sl.tensor(P)).dtype == J.roots(J.asarray(P)).dtype
        np.testing.assert_allclose(np.sort_complex(jnp.roots(sl.tensor(P)).numpy()),
                                   np.sort_complex(np.asarray(J.roots(J.asarray(P)))))
        assert J.digitize(J.asarray([1.0]), J.asarray([0.5])).dtype == np.int32
