"""Reductions' `where=` and `initial=` as jax.numpy has them (sum, prod, max, min, mean, var,
std, any, all, the nan reductions, logsumexp, softmax, log_softmax): values against NumPy
and JAX, dtypes, empty slices, errors, and gradients that are 0 (never nan) at masked-out
elements even where those hold inf or nan.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp
from scanlib.scipy.special import logsumexp

from opcheck import fd_grad, jax_x64

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
MASK = np.array([[True, False, True, True], [False, False, False, False],
                 [True, True, False, True]])
ROW = np.array([True, False, True, True])  # broadcasts against X

# name, kwargs beyond where=; each also exists in NumPy with the same meaning
NUMPY_LIKE = [
    ("sum", {}), ("sum", {"initial": 2.5}), ("prod", {}), ("prod", {"initial": 2.0}),
    ("max", {"initial": -5.0}), ("min", {"initial": 5.0}), ("amax", {"initial": 0.5}),
    ("amin", {"initial": -0.5}), ("mean", {}), ("var", {}), ("std", {}), ("var", {"ddof": 1}),
    ("nansum", {}), ("nanmax", {"initial": -5.0}), ("nanmin", {"initial": 5.0}),
    ("nanprod", {}), ("nanmean", {}), ("nanvar", {}), ("nanstd", {}),
]


def _call(lib, name, x, mask, axis, **kw):
    return getattr(lib, name)(x, axis=axis, where=mask, **kw)


@pytest.mark.parametrize("name,kw", NUMPY_LIKE, ids=[f"{n}{k}" for n, k in NUMPY_LIKE])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("mask", [MASK, ROW], ids=["full", "row"])
def test_where_and_initial_match_numpy(name, kw, axis, mask):
    x = X.copy()
    x[1, 1] = np.nan  # a nan in a masked-out place changes nothing
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        want = _call(np, name, x, mask, axis, **kw)
        got = _call(jnp, name, sl.tensor(x), sl.tensor(mask), axis, **kw)
        got32 = _call(jnp, name, sl.tensor(x.astype(np.float32)), sl.tensor(mask), axis, **kw)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert got.dtype == np.float64 and got32.dtype == np.float32
    np.testing.assert_allclose(got32.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_any_all_where_match_numpy(name, axis):
    b = X > 0
    got = getattr(jnp, name)(sl.tensor(b), axis=axis, where=sl.tensor(MASK))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got.numpy(), getattr(np, name)(b, axis=axis, where=MASK))
    got = getattr(sl.tensor(X), name)(axis, where=sl.tensor(MASK))  # a float input, the method
    np.testing.assert_array_equal(got.numpy(), getattr(np, name)(X, axis=axis, where=MASK))


def test_integer_and_bool_inputs_keep_numpys_dtypes():
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    for name, kw in [("sum", {"initial": 1}), ("prod", {}), ("max", {"initial": -1}),
                     ("min", {"initial": 100})]:
        got = getattr(jnp, name)(sl.tensor(i), axis=1, where=sl.tensor(MASK), **kw)
        want = getattr(np, name)(i, axis=1, where=MASK, **kw)
        np.testing.assert_array_equal(got.numpy(), want)
        assert got.dtype == want.dtype, name
    got = jnp.max(sl.tensor(X > 0), axis=1, where=sl.tensor(MASK), initial=False)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got.numpy(), np.max(X > 0, axis=1, where=MASK, initial=False))


def test_empty_selections_and_empty_arrays():
    none = sl.tensor(np.zeros(4, bool))
    x = sl.tensor([1.0, 2.0, 3.0, 4.0])
    with np.errstate(all="ignore"):
        assert np.isnan(float(jnp.mean(x, where=none)))
        assert np.isnan(float(jnp.var(x, where=none)))
        assert np.isnan(float(jnp.nanmean(x, where=none)))
    assert float(jnp.sum(x, where=none)) == 0.0 and float(jnp.prod(x, where=none)) == 1.0
    assert float(jnp.max(x, where=none, initial=-7.0)) == -7.0
    assert float(jnp.min(x, where=none, initial=7.0)) == 7.0
    assert float(logsumexp(x, where=none)) == -np.inf
    e = sl.zeros((0, 3))
    assert jnp.max(e, axis=0, initial=2.0).numpy().tolist() == [2.0, 2.0, 2.0]
    assert jnp.min(e, initial=2.0, keepdims=True).shape == (1, 1)
    assert float(jnp.sum(e, initial=1.5)) == 1.5
    assert jnp.max(e, axis=1).shape == (0,)  # nothing is reduced over an empty slice


def test_errors_say_what_and_how():
    x = sl.tensor(X)
    with pytest.raises(ValueError, match="needs initial=") as e:
        jnp.max(x, where=sl.tensor(MASK))
    assert "jnp.max" in str(e.value)
    with pytest.raises(ValueError, match="needs initial="):
        jnp.nanmin(x, where=sl.tensor(MASK))
    with pytest.raises(TypeError, match="where= must be a bool array"):
        jnp.sum(x, where=sl.tensor(MASK.astype(np.float64)))
    with pytest.raises(ValueError, match=r"does not broadcast to the input's shape \(3, 4\)"):
        jnp.mean(x, where=sl.tensor([True, False]))
    with pytest.raises(ValueError, match="initial must be a scalar"):
        jnp.sum(x, initial=sl.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="pass initial="):
        jnp.max(sl.zeros((0,)))


# Gradients: every function of x below reads masked-out elements holding inf and nan.
BAD = X.copy()
BAD[0, 1], BAD[1, 0], BAD[2, 2] = np.inf, np.nan, -np.inf
SCALAR_FNS = {
    "sum": lambda x, m: jnp.sum(x, where=m, initial=1.0),
    "prod": lambda x, m: jnp.prod(x, where=m, initial=2.0),
    "max": lambda x, m: jnp.max(x, where=m, initial=-9.0),
    "min": lambda x, m: jnp.min(x, where=m, initial=9.0),
    "mean": lambda x, m: jnp.mean(x, where=m),
    "mean_rows": lambda x, m: jnp.sum(jnp.mean(x, axis=1, where=m) ** 2, where=~jnp.isnan(
        jnp.mean(x, axis=1, where=m))),
    "var": lambda x, m: jnp.var(x, where=m, ddof=1),
    "std": lambda x, m: jnp.std(x, where=m),
    "nansum": lambda x, m: jnp.nansum(x, where=m),
    "nanmax": lambda x, m: jnp.nanmax(x, where=m, initial=-9.0),
    "nanmean": lambda x, m: jnp.nanmean(x, where=m),
    "nanstd": lambda x, m: jnp.nanstd(x, where=m),
    "nanprod": lambda x, m: jnp.nanprod(x, where=m),
    "logsumexp": lambda x, m: sl.logsumexp(x, where=m),
    "scipy_logsumexp_b": lambda x, m: logsumexp(x, b=sl.tensor(np.full((3, 4), 0.5)), where=m),
    "logsumexp_axis": lambda x, m: jnp.sum(sl.logsumexp(x, axis=0, where=m)),
    "softmax": lambda x, m: jnp.sum(sl.softmax(x, where=m) * sl.tensor(X)),
    "log_softmax": lambda x, m: jnp.sum(sl.nn.log_softmax(x, where=m), where=m),
}


@pytest.mark.parametrize("name", list(SCALAR_FNS))
def test_gradients_are_zero_at_masked_elements_and_match_finite_differences(name):
    f = SCALAR_FNS[name]
    m = sl.tensor(MASK)
    g = sl.grad(lambda x: f(x, m))(sl.tensor(BAD)).numpy()
    assert np.all(g[~MASK] == 0.0), g  # 0, not nan, where the masked values are inf or nan
    clean = np.where(MASK, BAD, 0.5)  # finite differences need finite inputs
    want = fd_grad(lambda x: f(x, m), clean)
    got = sl.grad(lambda x: f(x, m))(sl.tensor(clean)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    h = sl.jit(sl.grad(lambda x: f(x, m)))  # the same, traced and compiled
    np.testing.assert_allclose(h(sl.tensor(clean)).numpy(), got, rtol=1e-12, atol=1e-15)


def test_masked_reductions_under_vmap_and_scan():
    x, m = sl.tensor(X), sl.tensor(MASK)
    rows = sl.vmap(lambda r, k: jnp.max(r, where=k, initial=-9.0))(x, m)
    np.testing.assert_array_equal(rows.numpy(), np.max(X, axis=1, where=MASK, initial=-9.0))
    _, ys = sl.scan(lambda c, rk: (c, jnp.mean(rk[0], where=rk[1])), 0.0, (x, m))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(ys.numpy(), np.mean(X, axis=1, where=MASK))


def test_softmax_masks_as_jax_does():
    x = sl.tensor([1.0, 2.0, np.nan])
    m = sl.tensor([True, True, False])
    np.testing.assert_allclose(sl.softmax(x, where=m).numpy(),
                               [1 / (1 + np.e), np.e / (1 + np.e), 0.0])
    lsm = sl.nn.log_softmax(x, where=m).numpy()
    assert lsm[2] == -np.inf
    np.testing.assert_allclose(lsm[:2], np.log([1 / (1 + np.e), np.e / (1 + np.e)]))


# f(lib, lse, nn, x, m) with lib jax.numpy or scanlib.numpy, lse its logsumexp, nn its nn
JAX_CASES = {
    "sum": lambda lib, lse, nn, x, m: lib.sum(x, axis=1, where=m, initial=0.5),
    "prod": lambda lib, lse, nn, x, m: lib.prod(x, axis=0, where=m),
    "max": lambda lib, lse, nn, x, m: lib.max(x, axis=1, where=m, initial=-1.0),
    "min": lambda lib, lse, nn, x, m: lib.min(x, where=m, initial=0.0),
    "mean": lambda lib, lse, nn, x, m: lib.mean(x, axis=0, where=m),
    "var": lambda lib, lse, nn, x, m: lib.var(x, axis=1, where=m),
    "std": lambda lib, lse, nn, x, m: lib.std(x, axis=1, where=m, ddof=1),
    "nansum": lambda lib, lse, nn, x, m: lib.nansum(x, where=m),
    "nanmean": lambda lib, lse, nn, x, m: lib.nanmean(x, axis=1, where=m),
    "nanmax": lambda lib, lse, nn, x, m: lib.nanmax(x, axis=1, where=m, initial=0.0),
    "nanvar": lambda lib, lse, nn, x, m: lib.nanvar(x, axis=1, where=m),
    "logsumexp": lambda lib, lse, nn, x, m: lse(x, axis=1, where=m),
    "logsumexp_b": lambda lib, lse, nn, x, m: lse(x, axis=1, b=2.0 * x, where=m,
                                                   return_sign=True)[0],
    "softmax": lambda lib, lse, nn, x, m: lib.where(m, nn.softmax(x, where=m), 0) * X,
    "log_softmax": lambda lib, lse, nn, x, m: lib.where(m, nn.log_softmax(x, where=m), 0) * X,
}


@pytest.mark.parametrize("name", list(JAX_CASES))
def test_values_and_gradients_against_jax(name):
    jax = pytest.importorskip("jax")
    import jax.numpy as J
    from jax.scipy.special import logsumexp as jlse
    f = JAX_CASES[name]
    m = MASK.copy()  # every slice selects something: JAX's gradient is nan where none is
    m[1, 3] = m[1, 2] = True
    with jax_x64(jax):
        want = f(J, jlse, jax.nn, J.asarray(X), J.asarray(m))
        got = f(jnp, logsumexp, sl.nn, sl.tensor(X), sl.tensor(m))
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12, atol=1e-12)
        gw = jax.grad(lambda x: J.sum(f(J, jlse, jax.nn, x, J.asarray(m)) ** 2))(J.asarray(X))
        gg = sl.grad(lambda x: jnp.sum(f(jnp, logsumexp, sl.nn, x, sl.tensor(m)) ** 2))(
            sl.tensor(X))
        np.testing.assert_allclose(gg.numpy(), np.asarray(gw), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("call", [
    lambda jnp, x: jnp.sum(x, 0, jnp.float32), lambda jnp, x: jnp.mean(x, 0, jnp.float32),
    lambda jnp, x: jnp.prod(x, 0, "float32"), lambda jnp, x: jnp.any(x, 0, jnp.bool_),
    lambda jnp, x: jnp.argmax(x, 0, np.zeros(3)), lambda jnp, x: jnp.var(x, 0, jnp.float32),
])
def test_jax_positional_dtype_in_keepdims_place_raises(call):
    # jnp.sum(x, axis, dtype): in scanlib's third place (keepdims) a dtype would have kept
    # the axes silently
    import scanlib.numpy as jnp

    x = sl.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match="by keyword"):
        call(jnp, x)


def test_dtype_keyword_of_sum_mean_var_std():
    import scanlib.numpy as jnp

    x = sl.tensor(np.arange(6.0).reshape(2, 3))
    for f in (jnp.sum, jnp.mean, jnp.var, jnp.std):
        out = f(x, axis=0, dtype=jnp.float32)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out.numpy(), getattr(np, f.__name__)(x.numpy(), axis=0),
                                   rtol=1e-6)
    assert jnp.sum(np.arange(3, dtype=np.int32), dtype=jnp.float64).dtype == np.float64
    assert jnp.argmax(x, 0, None).shape == (3,)  # JAX's positional out=None is accepted
    g = sl.grad(lambda v: jnp.sum(v, dtype=jnp.float32))(x)
    assert g.dtype == np.float64 and np.all(g.numpy() == 1.0)
