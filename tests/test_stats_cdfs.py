"""scanlib.scipy.stats' functions built on the incomplete gamma and beta functions, log_ndtr
and i0e (gamma, chi2, poisson and gennorm cdfs; beta, betabinom, truncnorm, vonmises): values
against SciPy (float32 and float64) with gradients against finite differences and in a scan
body; JAX's edge values, float32 results and gradients where JAX is installed.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import scanlib as sl

from opcheck import (N, P, case, jax_x64, stats_grad_matches_jax, stats_grid_matches_jax,
                     table_tests)

scipy_stats = pytest.importorskip("scipy.stats")
st = sl.scipy.stats


def _in(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _sl(dist, fn):
    return getattr(getattr(st, dist), fn)


def dist_case(dist, fn, *args, consts=(), ref=None, order=2, jaxname=None):
    """dist.fn(*consts, *args) against SciPy's on the same arguments, in args[0]'s dtype."""
    def default_ref(*a):
        out = getattr(getattr(scipy_stats, dist), fn)(*[np.float64(v) for v in a])
        return np.asarray(out).astype(a[len(consts)].dtype)
    return case(f"{dist}.{fn}", _sl(dist, fn), *args, consts=consts, order=order,
                ref=ref or default_ref)


def f32(*values):
    return np.array(values, np.float32)


X4, S4 = (N, (4,)), (P, (4,))
SHAPE4 = f32(0.7, 1.5, 2.0, 4.5)
CDFS = ["cdf", "logcdf", "sf", "logsf"]
CASES = [
    *[case(f"gamma.{f}", lambda x, loc, s, f=f: _sl("gamma", f)(x, SHAPE4, loc, s),
           (_in(0.2, 4.0), (4,)), (_in(-0.1, 0.1), ()), S4,
           ref=lambda x, loc, s, f=f: getattr(scipy_stats.gamma, f)(
               x, SHAPE4.astype(float), loc, s).astype(x.dtype)) for f in CDFS],
    *[case(f"chi2.{f}", lambda x, loc, s, f=f: _sl("chi2", f)(x, SHAPE4 * 2, loc, s),
           (_in(0.2, 4.0), (4,)), (_in(-0.1, 0.1), ()), S4,
           ref=lambda x, loc, s, f=f: getattr(scipy_stats.chi2, f)(
               x, SHAPE4.astype(float) * 2, loc, s).astype(x.dtype)) for f in CDFS],
    dist_case("poisson", "cdf", (_in(0.5, 6.0), (4,)), consts=(f32(0.0, 1.0, 3.5, 7.0),)),
    case("gennorm.cdf", lambda x: st.gennorm.cdf(x, SHAPE4), (_in(0.3, 2.0), (4,)),
         ref=lambda x: scipy_stats.gennorm.cdf(x, SHAPE4.astype(float)).astype(x.dtype)),
    *[dist_case("beta", f, (_in(0.05, 0.95), (4,)), (_in(0.5, 4.0), (4,)), (_in(0.5, 4.0), ()))
      for f in ["logpdf", "pdf"]],
    *[case(f"beta.{f}", lambda x, loc, s, f=f: _sl("beta", f)(x, SHAPE4, SHAPE4[::-1], loc, s),
           (_in(0.1, 0.9), (4,)), (_in(-0.05, 0.05), ()), (_in(1.1, 1.5), (4,)),
           ref=lambda x, loc, s, f=f: getattr(scipy_stats.beta, f)(
               x, SHAPE4.astype(float), SHAPE4[::-1].astype(float), loc, s).astype(x.dtype))
      for f in CDFS],
    *[dist_case("betabinom", f, (_in(0.5, 4.0), (4,)), (_in(0.5, 4.0), (4,)),
                consts=(f32(0.0, 2.0, 5.0, 3.0), f32(5.0)[0])) for f in ["logpmf", "pmf"]],
    *[dist_case("truncnorm", f, (_in(-0.9, 0.9), (4,)), (_in(-2.5, -1.0), (4,)),
                (_in(1.0, 2.5), ()), (_in(-0.1, 0.1), ()), (_in(0.8, 1.2), (4,)))
      for f in ["logpdf", "pdf"] + CDFS],
    dist_case("truncnorm", "logcdf", (_in(0.5, 1.0), (4,)), (_in(-5.0, -4.0), (4,)),
              (_in(5.0, 6.0), ())),  # logcdf > -0.1 here: log1p(-sf)
    dist_case("truncnorm", "logsf", (_in(-1.0, -0.5), (4,)), (_in(-5.0, -4.0), (4,)),
              (_in(5.0, 6.0), ())),
    dist_case("truncnorm", "cdf", (_in(4.1, 4.5), (4,)), (_in(4.0, 4.05), (4,)),
              (_in(5.0, 6.0), ())),  # a > 0: through the right tail
    *[dist_case("vonmises", f, X4, (_in(0.5, 4.0), (4,))) for f in ["logpdf", "pdf"]],
]

(test_forward_matches_scipy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


inf, nan = np.inf, np.nan
X = np.array([-inf, -3.0, -1.0, -0.0, 0.0, 0.3, 1.0, 1.5, 2.0, 2 * np.pi, 7.0, inf, nan])
K = np.array([-1.0, 0.0, 1.0, 2.0, 2.5, 3.0, 5.0, 6.0, nan])
SHAPE = [0.5, 2.0, -1.0, nan]  # a = 0 and a = inf: special.gammainc differs from JAX there
LOC = [0.0, 1.5]
TRUNC = [[-inf, -1.5, 0.5, 3.0, nan], [-1.0, 2.0, 6.0, inf, nan], LOC, [1.0, 2.0]]
GRID = [
    ("gamma", CDFS, X, [SHAPE, LOC, [1.0, 2.0, nan]]),
    ("chi2", CDFS, X, [SHAPE, LOC, [1.0, 2.0]]),
    ("poisson", ["cdf"], K, [[0.0, 0.5, 3.0, -1.0, nan], [0.0, 1.0]]),
    ("gennorm", ["cdf"], X, [SHAPE]),
    ("beta", ["logpdf", "pdf"] + CDFS, X / 2,
     [[0.5, 2.0, -1.0, 0.0, nan], [0.5, 3.0, 0.0], LOC[:1] + [0.5], [1.0, 2.0, 0.0]]),
    ("betabinom", ["logpmf", "pmf"], K,
     [[0.0, 5.0, 2.5, -1.0], [0.5, 2.0, -1.0, 0.0, nan], [0.5, 3.0, 0.0], [0.0, 1.0]]),
    ("truncnorm", ["logpdf", "pdf"], X, TRUNC),
    ("vonmises", ["logpdf", "pdf"], X, [[0.0, 0.5, 2.0, -1.0, 1e3, inf, nan]]),
]
# JAX's betaln loses digits for one small and one large argument (betabinom.pmf(0, 5, 2, 3)
# = 1/6 exactly, JAX gives 0.16666688); scanlib's agrees with SciPy there
RTOL = {"betabinom": 1e-5}


@pytest.mark.parametrize("dist,fns,xs,params", GRID,
                         ids=[f"{g[0]}.{'/'.join(g[1])}" for g in GRID])
def test_edge_values_and_float32_match_jax(dist, fns, xs, params):
    stats_grid_matches_jax(pytest.importorskip("jax"), dist, fns, xs, params,
                           rtol=RTOL.get(dist, 1e-10), atol=1e-300)


GRADS = [
    ("gamma", "cdf", (np.array([0.3, 2.2]), 1.5, -0.1, 1.7), (0, 1, 2, 3)),
    ("gamma", "logsf", (np.array([0.3, 2.2]), 2.5, 0.1, 1.3), (0, 1, 2, 3)),
    ("chi2", "logcdf", (np.array([0.3, 2.2]), 2.5, 0.1, 1.3), (0, 1, 2, 3)),
    ("chi2", "sf", (np.array([0.3, 2.2]), 3.5, 0.1, 1.3), (0, 1, 2, 3)),
    ("poisson", "cdf", (np.array([0.0, 3.0]), 2.5, 0.0), (1,)),
    ("gennorm", "cdf", (np.array([-0.4, 1.3]), 1.7), (0, 1)),
    ("beta", "logpdf", (np.array([0.3, 0.8]), 1.5, 2.5, -0.1, 1.7), (0, 1, 2, 3, 4)),
    ("beta", "cdf", (np.array([0.3, 0.8]), 1.5, 2.5, -0.1, 1.7), (0, 3, 4)),
    ("beta", "logsf", (np.array([0.3, 0.8]), 1.5, 2.5, -0.1, 1.7), (0, 3, 4)),
    ("betabinom", "logpmf", (np.array([1.0, 3.0]), 5.0, 1.5, 2.5), (2, 3)),
    ("truncnorm", "logpdf", (np.array([0.3, 0.8]), -1.5, 2.5, -0.1, 1.7), (0, 1, 2, 3, 4)),
    ("truncnorm", "logcdf", (np.array([0.3, 0.8]), -1.5, 2.5, -0.1, 1.7), (0, 1, 2, 3, 4)),
    ("truncnorm", "sf", (np.array([3.3, 3.8]), 2.5, 4.5, -0.1, 1.2), (0, 1, 2, 3, 4)),
    ("vonmises", "logpdf", (np.array([0.3, 2.8]), 1.7), (0, 1)),
]


@pytest.mark.parametrize("dist,fn,args,argnums", GRADS,
                         ids=[f"{g[0]}.{g[1]}" for g in GRADS])
def test_gradients_match_jax(dist, fn, args, argnums):
    stats_grad_matches_jax(pytest.importorskip("jax"), dist, fn, args, argnums,
                           rtol=1e-9, atol=1e-12)


def test_dtypes_shapes_and_support_without_jax():
    x32 = sl.tensor([[0.5], [1.5]], dtype="float32")
    for fn in (st.gamma.cdf, st.chi2.sf, st.gamma.logsf):
        out = fn(x32, sl.tensor([1.0, 2.0, 3.0], dtype="float32"))
        assert out.dtype == np.float32 and out.shape == (2, 3)
    # integers with float32 compute in float32
    assert st.poisson.cdf(sl.tensor([0, 1, 2]), sl.tensor(2.0, dtype="float32")).dtype == \
        np.float32
    assert st.poisson.cdf(sl.tensor([0, 1, 2]), 2).dtype == np.float64
    assert st.gamma.cdf(sl.zeros((0, 3)), 2.0).shape == (0, 3)
    assert st.gennorm.cdf(0.5, 2.0).shape == ()
    np.testing.assert_array_equal(st.gamma.cdf(sl.tensor([-1.0, 0.0, inf]), 2.0).numpy(),
                                  [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(st.gamma.sf(sl.tensor([-1.0, 0.0, inf]), 2.0).numpy(),
                                  [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(st.poisson.cdf(sl.tensor([-0.5, -3.0]), 2.0).numpy(), [0, 0])
    np.testing.assert_allclose(st.poisson.cdf(sl.tensor([2.7]), 2.0).numpy(),
                               scipy_stats.poisson.cdf(2, 2.0), rtol=1e-13)
    # below loc the sf is flat: its gradient is 0, not nan
    g = sl.grad(lambda x: st.gamma.sf(x, 2.0))(sl.tensor(-1.0))
    assert g.numpy() == 0.0


def test_beta_values_and_errors_without_jax():
    x = sl.tensor([-0.5, 0.0, 0.25, 1.0, 1.5])
    with np.errstate(all="ignore"):
        lp = st.beta.logpdf(x, 2.0, 3.0).numpy()
    np.testing.assert_array_equal(st.beta.cdf(x, 2.0, 3.0).numpy()[[0, 1, 3, 4]], [0, 0, 1, 1])
    np.testing.assert_array_equal(st.beta.sf(x, 2.0, 3.0).numpy()[[0, 1, 3, 4]], [1, 1, 0, 0])
    assert lp[0] == lp[4] == -inf
    assert np.isnan(st.beta.logpdf(0.5, 0.0, 3.0).numpy())
    assert np.isnan(st.betabinom.logpmf(1.0, -1.0, 2.0, 3.0).numpy())
    np.testing.assert_allclose(st.betabinom.pmf(sl.tensor([0.0, 2.7]), 5.0, 2.0, 3.0).numpy(),
                               scipy_stats.betabinom.pmf([0, 2], 5, 2.0, 3.0), rtol=1e-13)
    assert st.beta.cdf(sl.tensor([0.5], dtype="float32"), 2, 3).dtype == np.float32
    assert st.betabinom.logpmf(sl.tensor([1, 2]), 5, sl.tensor(2.0, dtype="float32"),
                               3).dtype == np.float32
    # outside the support the density is flat: its gradient is 0, not nan
    assert sl.grad(lambda x: st.beta.logpdf(x, 2.0, 3.0))(sl.tensor(1.5)).numpy() == 0.0
    # JAX has no derivative of betainc in a or b: an error here too
    with pytest.raises(NotImplementedError, match="betainc"):
        sl.grad(lambda a: st.beta.cdf(0.3, a, 3.0))(sl.tensor(2.0))
    with pytest.raises(NotImplementedError, match="betainc"):
        sl.grad(lambda b: st.beta.logsf(0.3, 2.0, b))(sl.tensor(3.0))


def test_truncnorm_cdfs_match_jax_and_give_nan_for_nan():
    """JAX's truncnorm cdfs give 0 or 1 where x, a or b is nan; scanlib's give nan there (as
    SciPy); everywhere else they agree."""
    jax = pytest.importorskip("jax")
    combos = list(itertools.product(*TRUNC))
    cols = [np.array(c)[:, None] for c in zip(*combos)]
    has_nan = np.isnan(X)[None, :] | np.isnan(cols[0]) | np.isnan(cols[1])
    for fn in CDFS:
        with np.errstate(all="ignore"):
            got = _sl("truncnorm", fn)(X[None, :], *cols).numpy()
            got32 = _sl("truncnorm", fn)(X[None, :].astype(np.float32),
                                         *[c.astype(np.float32) for c in cols])
        want32 = np.asarray(getattr(jax.scipy.stats.truncnorm, fn)(
            X[None, :].astype(np.float32), *[c.astype(np.float32) for c in cols]))
        with jax_x64(jax):
            want = np.asarray(getattr(jax.scipy.stats.truncnorm, fn)(X[None, :], *cols))
        assert np.all(np.isnan(got[has_nan])), fn
        np.testing.assert_allclose(got[~has_nan], want[~has_nan], rtol=1e-10, atol=1e-300,
                                   err_msg=fn)
        assert got32.dtype == np.float32
        np.testing.assert_allclose(got32.numpy()[~has_nan], want32[~has_nan], rtol=2e-4,
                                   atol=1e-6, err_msg=fn)


def test_truncnorm_and_vonmises_without_jax():
    x = sl.tensor([-3.0, -1.0, 0.5, 2.0, 3.0])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(st.truncnorm.cdf(x, -1.0, 2.0).numpy(),
                                   scipy_stats.truncnorm.cdf(x.numpy(), -1.0, 2.0), rtol=1e-13)
        np.testing.assert_allclose(st.truncnorm.logsf(x, -1.0, 2.0, 0.3, 1.5).numpy(),
                                   scipy_stats.truncnorm.logsf(x.numpy(), -1.0, 2.0, 0.3, 1.5),
                                   rtol=1e-13)
        # far in a tail the mass comes from log_ndtr, not from a difference of ndtr's
        np.testing.assert_allclose(st.truncnorm.logpdf(40.5, 40.0, 41.0).numpy(),
                                   scipy_stats.truncnorm.logpdf(40.5, 40.0, 41.0), rtol=1e-12)
        assert np.isnan(st.truncnorm.logpdf(0.0, 1.0, -1.0).numpy())
        assert np.isnan(st.truncnorm.cdf(nan, -1.0, 2.0).numpy())
        assert np.isnan(st.vonmises.logpdf(0.0, 0.0).numpy())
    np.testing.assert_allclose(st.vonmises.pdf(x, 2.0).numpy(),
                               scipy_stats.vonmises.pdf(x.numpy(), 2.0), rtol=1e-13)
    np.testing.assert_allclose(st.vonmises.logpdf(0.3, 1e4).numpy(),
                               scipy_stats.vonmises.logpdf(0.3, 1e4), rtol=1e-12)
    assert st.truncnorm.cdf(sl.tensor([0.5], dtype="float32"), -1, 2).dtype == np.float32
    assert st.vonmises.logpdf(sl.tensor([1, 2]), sl.tensor(2.0, dtype="float32")).dtype == \
        np.float32
    assert st.truncnorm.logpdf(sl.zeros((0, 2)), -1.0, 2.0).shape == (0, 2)


def test_under_vmap_and_jit():
    rng = np.random.default_rng(0)
    x, a = sl.tensor(rng.uniform(0.1, 3.0, (5, 3))), sl.tensor(rng.uniform(0.5, 3.0, 5))

    def f(x, a):
        return sl.sum(st.gamma.logcdf(x, a)) + sl.sum(st.chi2.sf(x, a))

    rows = sl.stack([f(x[i], a[i]) for i in range(5)])
    np.testing.assert_allclose(sl.vmap(f)(x, a).numpy(), rows.numpy(), rtol=1e-13)
    np.testing.assert_allclose(sl.jit(sl.vmap(f))(x, a).numpy(), rows.numpy(), rtol=1e-13)
