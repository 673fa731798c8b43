"""scanlib.scipy.stats' distributions and functions: every function against SciPy (float32 and
float64), its VJP against finite differences (second order) and inside a scan body; JAX's edge
values (outside the support, on its boundary, nan and inf parameters) and float32 results
against JAX where installed; shapes (0-d, empty, broadcasting), vmap and jit; mode, rankdata,
sem and gaussian_kde against SciPy and JAX.
"""

from __future__ import annotations


import numpy as np
import pytest

import scanlib as sl
from scanlib.testing import check_grads

from opcheck import (N, P, case, jax_with_scanlibs_threefry, jax_x64, stats_grad_matches_jax,
                     stats_grid_matches_jax, table_tests)

scipy_stats = pytest.importorskip("scipy.stats")
st = sl.scipy.stats


def _prob(rng, shape):
    return rng.uniform(0.05, 0.95, shape)


def _above(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _away(rng, shape):
    return rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def f32(*values):
    """Counts as float32 constants, which keep a float32 computation float32."""
    return np.array(values, np.float32)


def _ref(dist, fn, consts=0):
    """SciPy's dist.fn on the same arguments, in the first float input's dtype."""
    def ref(*args):
        out = getattr(getattr(scipy_stats, dist), fn)(*[np.float64(a) for a in args])
        return np.asarray(out).astype(args[consts].dtype)
    return ref


def _sl(dist, fn):
    return getattr(getattr(st, dist), fn)


def _from_loc(f):
    """f with x given relative to loc (the second-to-last argument): f(x + loc, ..., loc, s)."""
    return lambda x, *params: f(x + params[-2], *params)


def loc_case(dist, fn, *args):
    return case(f"{dist}.{fn}", _from_loc(_sl(dist, fn)), *args,
                ref=lambda *a: np.asarray(_from_loc(getattr(getattr(scipy_stats, dist), fn))(
                    *a)).astype(a[0].dtype))


def dist_case(dist, fn, *args, consts=(), ref=None, order=2):
    return case(f"{dist}.{fn}", _sl(dist, fn), *args, consts=consts, order=order,
                ref=ref or _ref(dist, fn, len(consts)))


X4, S4, Q4 = (N, (4,)), (P, (4,)), (_prob, (4,))
LOC_SCALE = {  # distributions of x, loc, scale with JAX's continuous functions
    "cauchy": ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"],
    "logistic": ["logpdf", "pdf", "cdf", "sf"],
    "gumbel_r": ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"],
    "gumbel_l": ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"],
}
QUANTILES = {"cauchy": ["ppf", "isf"], "logistic": ["ppf", "isf"], "gumbel_r": ["ppf"],
             "gumbel_l": ["ppf"], "expon": ["ppf"], "uniform": ["ppf"]}

CASES = [
    *[dist_case(d, f, X4, (N, (1,)), S4) for d, fns in LOC_SCALE.items() for f in fns],
    *[dist_case(d, f, Q4, (N, (4,)), S4) for d, fns in QUANTILES.items() for f in fns],
    *[case(f"laplace.{f}", lambda x, s, f=f: _sl("laplace", f)(x, scale=s), (_away, (4,)), S4,
           ref=lambda x, s, f=f: getattr(scipy_stats.laplace, f)(x, 0, s).astype(x.dtype))
      for f in ["logpdf", "pdf", "cdf"]],
    dist_case("t", "logpdf", X4, (_above(1.0, 6.0), (4,)), (N, ()), S4),
    dist_case("t", "pdf", X4, (_above(1.0, 6.0), (1,)), (N, (4,)), S4),
    loc_case("gamma", "logpdf", (_above(0.2, 4.0), (4,)), (_above(0.5, 4.0), (4,)), (N, ()), S4),
    dist_case("gamma", "pdf", (_above(0.2, 4.0), (4,)), (_above(0.5, 4.0), (4,))),
    dist_case("chi2", "logpdf", (_above(0.2, 4.0), (4,)), (_above(0.5, 6.0), (4,))),
    loc_case("chi2", "pdf", (_above(0.2, 4.0), (4,)), (_above(0.5, 6.0), (1,)), (N, ()), S4),
    *[loc_case("expon", f, (_above(0.1, 3.0), (4,)), (N, ()), S4)
      for f in ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]],
    *[loc_case("pareto", f, (_above(2.5, 5.0), (4,)), (P, (4,)), (N, ()), S4)
      for f in ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]],
    dist_case("pareto", "ppf", Q4, S4, (N, (4,)), S4),
    *[loc_case("uniform", f, (_above(0.1, 0.4), (4,)), (N, ()), S4)
      for f in ["logpdf", "pdf", "cdf"]],
    dist_case("wrapcauchy", "logpdf", (_above(0.1, 6.0), (4,)), (_above(0.1, 0.9), (4,))),
    dist_case("wrapcauchy", "pdf", (_above(0.1, 6.0), (4,)), (_above(0.1, 0.9), ())),
    dist_case("gennorm", "logpdf", (_away, (4,)), (_above(0.8, 3.0), (4,))),
    dist_case("gennorm", "pdf", (_away, (4,)), (_above(0.8, 3.0), ())),
    dist_case("poisson", "logpmf", (P, (4,)), consts=(f32(0.0, 1.0, 3.0, 7.0),)),
    dist_case("poisson", "pmf", (P, (4,)), consts=(f32(0.0, 1.0, 3.0, 7.0),)),
    dist_case("bernoulli", "logpmf", Q4, consts=(f32(0.0, 1.0, 1.0, 0.0),)),
    dist_case("bernoulli", "pmf", Q4, consts=(f32(0.0, 1.0, 1.0, 0.0),)),
    dist_case("binom", "logpmf", Q4, consts=(f32(0.0, 2.0, 5.0, 3.0), f32(5.0)[0])),
    dist_case("binom", "pmf", Q4, consts=(f32(0.0, 2.0, 5.0, 3.0), f32(5.0)[0])),
    dist_case("geom", "logpmf", Q4, consts=(f32(1.0, 2.0, 5.0, 3.0),)),
    dist_case("geom", "pmf", Q4, consts=(f32(1.0, 2.0, 5.0, 3.0),)),
    dist_case("nbinom", "logpmf", S4, Q4, consts=(f32(0.0, 2.0, 5.0, 3.0),)),
    dist_case("nbinom", "pmf", S4, Q4, consts=(f32(0.0, 2.0, 5.0, 3.0),)),
    dist_case("dirichlet", "logpdf", (_above(0.1, 0.3), (3, 2)), (P, (4,)),
              ref=lambda x, a: scipy_stats.dirichlet.logpdf(
                  np.concatenate([x, 1 - x.sum(0, keepdims=True)]), a).astype(x.dtype)),
    dist_case("dirichlet", "pdf", (_above(0.1, 0.3), (3,)), (P, (4,)),
              ref=lambda x, a: scipy_stats.dirichlet.pdf(np.append(x, 1 - x.sum()), a).astype(
                  x.dtype)),
    case("multinomial.logpmf", lambda x, p: st.multinomial.logpmf(x, 5, p), (P, (3,)),
         consts=(np.array([1, 4, 0]),), ref=lambda x, p: np.asarray(
             scipy_stats.multinomial.logpmf(x, 5, p / p.sum()) + 5 * np.log(p.sum())).astype(
                 p.dtype)),
    case("sem", lambda a: st.sem(a), (N, (5, 3)),
         ref=lambda a: scipy_stats.sem(a).astype(a.dtype)),
    case("sem_axis_none", lambda a: st.sem(a, axis=None, ddof=0), (N, (5, 3)),
         ref=lambda a: np.asarray(scipy_stats.sem(a, axis=None, ddof=0)).astype(a.dtype)),
]

(test_forward_matches_scipy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


# --- JAX's edge values, on a grid of x and parameters including nan, inf and the boundaries ---
inf, nan = np.inf, np.nan
X = np.array([-inf, -3.0, -1.0, -0.0, 0.0, 0.3, 1.0, 1.5, 2.0, 2 * np.pi, 7.0, inf, nan])
K = np.array([-1.0, 0.0, 1.0, 2.0, 2.5, 3.0, 5.0, 6.0, nan])
Q = np.array([-0.1, 0.0, 0.2, 0.5, 0.9, 1.0, 1.1, nan])
SHAPE = [0.5, 2.0, -1.0, 0.0, nan]
LOC = [0.0, 1.5]
SCALE = [1.0, 2.0, 0.0, -1.0]
GRID = [
    ("t", ["logpdf", "pdf"], X, [SHAPE, LOC, [1.0, 2.0, 0.0]]),
    ("gamma", ["logpdf", "pdf"], X, [SHAPE, LOC, [1.0, 2.0]]),
    ("chi2", ["logpdf", "pdf"], X, [SHAPE, LOC, [1.0, 2.0]]),
    ("cauchy", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, [LOC, SCALE]),
    ("cauchy", ["ppf", "isf"], Q, [LOC, [1.0, 2.0]]),
    ("laplace", ["logpdf", "pdf", "cdf"], X, [LOC, [1.0, 2.0, 0.0]]),
    ("logistic", ["logpdf", "pdf", "cdf", "sf"], X, [LOC, [1.0, 2.0]]),
    ("logistic", ["ppf", "isf"], Q, [LOC, [1.0, 2.0]]),
    ("uniform", ["logpdf", "pdf", "cdf"], X, [LOC + [-1.0], [1.0, 2.0, 0.0]]),
    ("uniform", ["ppf"], Q, [LOC, [1.0, 2.0]]),
    ("expon", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, [LOC, [1.0, 2.0]]),
    ("expon", ["ppf"], Q, [LOC, [1.0, 2.0]]),
    ("pareto", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, [SHAPE, LOC, [1.0, 2.0]]),
    ("pareto", ["ppf"], Q, [SHAPE, LOC, [1.0, 2.0]]),
    ("gumbel_r", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, [LOC, SCALE]),
    ("gumbel_r", ["ppf"], Q, [LOC, [1.0, 2.0]]),
    ("gumbel_l", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, [LOC, SCALE]),
    ("gumbel_l", ["ppf"], Q, [LOC, [1.0, 2.0]]),
    ("wrapcauchy", ["logpdf", "pdf"], X, [[0.0, 0.3, 0.9, 1.0, -0.5, nan]]),
    ("gennorm", ["logpdf", "pdf"], X, [SHAPE]),
    ("poisson", ["logpmf", "pmf"], K, [[0.0, 0.5, 3.0, nan], [0.0, 1.0]]),
    ("bernoulli", ["logpmf", "pmf"], K, [[0.0, 0.3, 1.0, 1.2, nan], [0.0, 1.0]]),
    ("bernoulli", ["cdf"], K, [[0.0, 0.3, 1.0, 1.2, -0.1, nan]]),
    ("bernoulli", ["ppf"], Q, [[0.0, 0.3, 1.0, 1.2, nan]]),
    ("binom", ["logpmf", "pmf"], K, [[0.0, 5.0, 2.5], [0.0, 0.4, 1.0], [0.0, 1.0]]),
    ("geom", ["logpmf", "pmf"], K, [[0.25, 1.0, 0.0], [0.0, 1.0]]),
    ("nbinom", ["logpmf", "pmf"], K, [[0.5, 3.0], [0.0, 0.4, 1.0], [0.0, 1.0]]),
]


@pytest.mark.parametrize("dist,fns,xs,params", GRID,
                         ids=[f"{g[0]}.{'/'.join(g[1])}" for g in GRID])
def test_edge_values_and_float32_match_jax(dist, fns, xs, params):
    stats_grid_matches_jax(pytest.importorskip("jax"), dist, fns, xs, params,
                           rtol=1e-12, atol=0)


def test_support_edges_without_jax():
    with np.errstate(all="ignore"):
        # outside the support: -inf logpdf, 0 pdf
        for lp, p in [(st.gamma.logpdf(-1.0, 2.0), st.gamma.pdf(-1.0, 2.0)),
                      (st.expon.logpdf(-1e-9), st.expon.pdf(-1e-9)),
                      (st.pareto.logpdf(0.99, 2.0), st.pareto.pdf(0.99, 2.0)),
                      (st.uniform.logpdf(1.5), st.uniform.pdf(1.5)),
                      (st.chi2.logpdf(-1.0, 3.0), st.chi2.pdf(-1.0, 3.0)),
                      (st.poisson.logpmf(1.5, 2.0), st.poisson.pmf(-1.0, 2.0)),
                      (st.geom.logpmf(0.0, 0.5), st.geom.pmf(0.0, 0.5)),
                      (st.binom.logpmf(6.0, 5.0, 0.5), st.binom.pmf(-1.0, 5.0, 0.5)),
                      (st.wrapcauchy.logpdf(7.0, 0.5), st.wrapcauchy.pdf(-0.1, 0.5))]:
            assert lp.numpy() == -np.inf and p.numpy() == 0.0
        # both ends of uniform's support are inside it, as in JAX and SciPy
        np.testing.assert_array_equal(st.uniform.pdf(sl.tensor([0.0, 1.0])).numpy(), [1.0, 1.0])
        np.testing.assert_array_equal(st.expon.cdf(sl.tensor([-inf, 0.0, inf])).numpy(),
                                      [0.0, 0.0, 1.0])
        np.testing.assert_array_equal(st.cauchy.cdf(sl.tensor([-inf, inf])).numpy(), [0.0, 1.0])
        np.testing.assert_array_equal(st.pareto.cdf(sl.tensor([-inf, 1.0, inf]), 2.0).numpy(),
                                      [0.0, 0.0, 1.0])
        # p = 0 and 1 are certain outcomes (0 * log 0 = 0)
        np.testing.assert_array_equal(st.bernoulli.pmf(sl.tensor([0.0, 1.0]), 0.0).numpy(),
                                      [1.0, 0.0])
        np.testing.assert_array_equal(st.binom.pmf(sl.tensor([5.0, 4.0]), 5.0, 1.0).numpy(),
                                      [1.0, 0.0])
        # parameters outside their range give nan
        assert np.isnan(st.gumbel_r.logpdf(0.0, 0.0, -1.0).numpy())
        assert np.isnan(st.wrapcauchy.logpdf(1.0, 1.0).numpy())
        assert np.isnan(st.bernoulli.cdf(0.5, 1.5).numpy())
        assert np.all(np.isnan(st.expon.ppf(sl.tensor([-0.1, nan, 1.1])).numpy()))
        # a nan anywhere propagates
        for fn in (st.t.logpdf, st.gamma.logpdf, st.chi2.logpdf, st.pareto.logpdf):
            assert np.isnan(fn(1.0, nan).numpy())
        for fn in (st.t.logpdf, st.chi2.logpdf, st.pareto.logpdf, st.cauchy.cdf):
            assert np.isnan(fn(nan, 2.0).numpy())
        assert st.gamma.logpdf(nan, 2.0).numpy() == -inf  # JAX's x >= loc test is False


def test_shapes_dtypes_and_broadcasting():
    x32 = sl.tensor([[0.5], [1.5]], dtype="float32")
    out = st.t.logpdf(x32, sl.tensor([1.0, 2.0, 3.0], dtype="float32"), 0.0, 2.0)
    assert out.dtype == np.float32 and out.shape == (2, 3)
    np.testing.assert_allclose(out.numpy(), scipy_stats.t.logpdf(
        [[0.5], [1.5]], [1.0, 2.0, 3.0], 0.0, 2.0), rtol=1e-6)
    # integers compute in float64 (JAX with x64); Python numbers are weak
    assert st.poisson.logpmf(sl.tensor([0, 1, 2]), 2).dtype == np.float64
    assert st.expon.cdf(sl.tensor([1.0], dtype="float32"), 0, 2).dtype == np.float32
    # 0-d and empty
    assert st.gumbel_l.cdf(0.5).shape == ()
    assert st.gamma.logpdf(sl.zeros((0, 3)), 2.0).shape == (0, 3)
    assert st.binom.pmf(sl.zeros((2, 0)), 5.0, 0.5).shape == (2, 0)
    assert st.dirichlet.logpdf(sl.zeros((2, 0)) + 0.3, sl.ones(3)).shape == (0,)
    with pytest.raises(TypeError, match="complex"):
        st.cauchy.pdf(sl.tensor([1.0 + 1.0j]))


def test_under_vmap_jit_and_grad_of_grad():
    rng = np.random.default_rng(0)
    x, scale = sl.tensor(rng.standard_normal((5, 3))), sl.tensor(rng.uniform(0.5, 2.0, 5))

    def loglik(x, scale):
        return (sl.sum(st.t.logpdf(x, 4.0, 0.0, scale)) + sl.sum(st.gumbel_r.logcdf(x, 0.0, scale))
                + sl.sum(st.logistic.logpdf(x, 0.0, scale)))

    by_vmap = sl.vmap(loglik)(x, scale)
    by_rows = sl.stack([loglik(x[i], scale[i]) for i in range(5)])
    np.testing.assert_allclose(by_vmap.numpy(), by_rows.numpy(), rtol=1e-13)
    np.testing.assert_allclose(sl.jit(sl.vmap(loglik))(x, scale).numpy(), by_rows.numpy(),
                               rtol=1e-13)
    g = sl.jit(sl.grad(lambda s: sl.sum(sl.vmap(loglik)(x, s))))(scale)
    np.testing.assert_allclose(g.numpy(), sl.grad(lambda s: sl.sum(by_fn(x, s, loglik)))(
        scale).numpy(), rtol=1e-12)
    check_grads(lambda s: sl.grad(lambda s: sl.sum(sl.vmap(loglik)(x, s)))(s), (scale,))


def by_fn(x, s, f):
    return sl.stack([f(x[i], s[i]) for i in range(x.shape[0])])


@pytest.mark.parametrize("dist,fn,args,argnums", [
    ("t", "logpdf", (np.array([0.3, -1.2]), 3.5, 0.4, 1.7), (0, 1, 2, 3)),
    ("gamma", "logpdf", (np.array([0.3, 2.2]), 1.5, -0.1, 1.7), (0, 1, 2, 3)),
    ("chi2", "logpdf", (np.array([0.3, 2.2]), 2.5, 0.1, 1.3), (0, 1, 2, 3)),
    ("pareto", "logcdf", (np.array([2.3, 4.2]), 1.5, 0.1, 1.3), (0, 1, 2, 3)),
    ("gumbel_r", "logsf", (np.array([-0.3, 2.2]), 0.3, 1.3), (0, 1, 2)),
    ("gumbel_l", "logcdf", (np.array([0.3, 0.8]), 0.3, 1.3), (0, 1, 2)),
    ("nbinom", "logpmf", (np.array([0.0, 3.0]), 2.5, 0.3), (1, 2)),
    ("binom", "logpmf", (np.array([1.0, 3.0]), 5.0, 0.3), (1, 2)),
    ("gennorm", "logpdf", (np.array([-0.4, 1.3]), 1.7), (0, 1)),
    ("wrapcauchy", "logpdf", (np.array([0.4, 5.3]), 0.7), (0, 1)),
])
def test_gradients_match_jax(dist, fn, args, argnums):
    stats_grad_matches_jax(pytest.importorskip("jax"), dist, fn, args, argnums,
                           rtol=1e-11, atol=1e-13)


# --- dirichlet and multinomial --------------------------------------------------------------
def test_dirichlet_forms_and_errors():
    alpha = np.array([1.5, 2.0, 3.0])
    x = np.array([[0.2, 0.5], [0.3, 0.1], [0.5, 0.4]])  # two points, the simplex along axis 0
    want = [scipy_stats.dirichlet.logpdf(x[:, i], alpha) for i in range(2)]
    np.testing.assert_allclose(st.dirichlet.logpdf(x, alpha).numpy(), want, rtol=1e-13)
    np.testing.assert_allclose(st.dirichlet.logpdf(x[:2], alpha).numpy(), want, rtol=1e-13)
    off = np.array([0.2, 0.3, 0.6])
    assert st.dirichlet.logpdf(off, alpha).numpy() == -np.inf
    assert st.dirichlet.pdf(np.array([0.0, 0.5, 0.5]), alpha).numpy() == 0.0
    with pytest.raises(ValueError, match="alpha must be one-dimensional"):
        st.dirichlet.logpdf(x, alpha[None])
    with pytest.raises(ValueError, match="x.shape=\\(1, 2\\)"):
        st.dirichlet.logpdf(x[:1], alpha)


def test_multinomial_counts_and_errors():
    p = np.array([0.2, 0.5, 0.3])
    x = np.array([[1, 2, 0], [0, 0, 3], [1, 1, 0]])
    got = st.multinomial.logpmf(x, 3, p).numpy()
    np.testing.assert_allclose(got[:2], scipy_stats.multinomial.logpmf(x[:2], 3, p), rtol=1e-13)
    assert got[2] == -np.inf  # the counts add up to 2, not n = 3
    np.testing.assert_allclose(st.multinomial.pmf(x[0], 3, p).numpy(),
                               scipy_stats.multinomial.pmf(x[0], 3, p), rtol=1e-13)
    assert st.multinomial.logpmf(x[0], 3, p.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="integer type"):
        st.multinomial.logpmf(x[0].astype(float), 3, p)
    with pytest.raises(ValueError, match="integer type"):
        st.multinomial.logpmf(x[0], 3.0, p)
    jax = pytest.importorskip("jax")
    with jax_x64(jax):
        want = jax.scipy.stats.multinomial.logpmf(x[0], 3, p)
        np.testing.assert_allclose(got[0], float(want), rtol=1e-13)
        gj = jax.grad(lambda p: jax.scipy.stats.multinomial.logpmf(x[0], 3, p))(p)
    gs = sl.grad(lambda p: st.multinomial.logpmf(x[0], 3, p))(sl.tensor(p))
    np.testing.assert_allclose(gs.numpy(), np.asarray(gj), rtol=1e-13)
    # a batch of count vectors, one value each, under vmap as well
    np.testing.assert_allclose(sl.vmap(lambda c: st.multinomial.logpmf(c, 3, p))(x).numpy(),
                               got, rtol=1e-13)


# --- mode, rankdata, sem ---------------------------------------------------------------------
MODE_INPUTS = [
    (np.array([3.0, 1.0, 1.0, 3.0, 2.0]), dict()),
    (np.array([[3, 1], [1, 1], [3, 2]]), dict()),
    (np.array([[3, 1], [1, 1], [3, 2]]), dict(axis=1)),
    (np.array([[3, 1], [1, 1], [3, 2]]), dict(axis=None, keepdims=True)),
    (np.array([[3.0, 1.0, 1.0], [2.0, 2.0, 5.0]]), dict(axis=-1, keepdims=True)),
    (np.array([3.0, 1.0, 1.0, 3.0, nan, nan, nan]), dict()),
    (np.array(5.0), dict()),
    (np.zeros((0, 3)), dict()),
]


@pytest.mark.parametrize("a,kw", MODE_INPUTS)
def test_mode_matches_scipy_and_jax(a, kw):
    got = st.mode(a, **kw)
    assert isinstance(got, tuple) and got._fields == ("mode", "count")
    if a.size and not np.isnan(a).any():
        want = scipy_stats.mode(a, **kw)
        np.testing.assert_array_equal(got.mode.numpy(), want.mode)
        np.testing.assert_array_equal(got.count.numpy(), want.count)
    jax = pytest.importorskip("jax")
    with jax_x64(jax):
        want = jax.scipy.stats.mode(a, **kw)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g.numpy(), np.asarray(w))


RANK_INPUTS = [np.array([3.0, 1.0, 1.0, 2.0, 3.0, 3.0]), np.array([[4, 1, 1], [2, 2, 0]]),
               np.array([2.0, nan, 1.0]), np.array(2.0), np.zeros(0)]


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata_matches_scipy_and_jax(method):
    for a in RANK_INPUTS:
        for axis in [None] + list(range(a.ndim)):
            got = st.rankdata(a, method, axis=axis)
            want = scipy_stats.rankdata(a, method, axis=axis, nan_policy="propagate")
            assert got.dtype == np.float64 and got.shape == np.shape(want)
            np.testing.assert_array_equal(got.numpy(), want)
    a = sl.tensor([[4.0, 1.0, 1.0], [2.0, 2.0, 0.0]])
    np.testing.assert_array_equal(sl.vmap(lambda r: st.rankdata(r, method))(a).numpy(),
                                  st.rankdata(a, method, axis=1).numpy())
    np.testing.assert_array_equal(sl.jit(lambda r: st.rankdata(r, method, axis=0))(a).numpy(),
                                  st.rankdata(a, method, axis=0).numpy())
    g = sl.grad(lambda a: sl.sum(st.rankdata(a, method, axis=1) * a))(a)
    np.testing.assert_array_equal(g.numpy(), st.rankdata(a, method, axis=1).numpy())


def test_rankdata_and_mode_errors_and_jax():
    with pytest.raises(ValueError, match="unknown method 'best'"):
        st.rankdata([1.0, 2.0], "best")
    with pytest.raises(NotImplementedError, match="nan_policy='omit'"):
        st.rankdata([1.0, 2.0], nan_policy="omit")
    with pytest.raises(ValueError, match="illegal nan_policy"):
        st.mode([1.0, 2.0], nan_policy="skip")
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        st.mode(np.ones((2, 2)), axis=2)
    # the gradient of mode reaches the first occurrence of the most common value, as JAX's
    g = sl.grad(lambda a: st.mode(a).mode)(sl.tensor([3.0, 1.0, 1.0, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0, 0.0, 0.0])
    m = sl.vmap(lambda r: st.mode(r).mode)(sl.tensor([[3.0, 1.0, 1.0], [2.0, 2.0, 5.0]]))
    np.testing.assert_array_equal(m.numpy(), [1.0, 2.0])
    jax = pytest.importorskip("jax")
    with jax_x64(jax):
        for a in RANK_INPUTS[:4]:
            for method in ["average", "min", "max", "dense", "ordinal"]:
                np.testing.assert_array_equal(st.rankdata(a, method).numpy(),
                                              np.asarray(jax.scipy.stats.rankdata(a, method)))


def test_sem_nan_policies():
    a = np.array([[1.0, 2.0, nan], [4.0, 7.0, 1.0], [0.5, 2.0, 3.0]])
    for axis in (0, 1, None):
        np.testing.assert_allclose(st.sem(a, axis=axis, nan_policy="omit").numpy(),
                                   scipy_stats.sem(a, axis=axis, nan_policy="omit"), rtol=1e-13)
        np.testing.assert_allclose(st.sem(a, axis=axis).numpy(), scipy_stats.sem(a, axis=axis),
                                   rtol=1e-13)
    assert st.sem(a, keepdims=True).shape == (1, 3)
    assert st.sem(a.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="nan_policy='raise' is not supported"):
        st.sem(a, nan_policy="raise")


# --- gaussian_kde ----------------------------------------------------------------------------
@pytest.mark.parametrize("d,weighted,bw", [(1, False, None), (2, True, "silverman"),
                                           (1, True, 0.4), (2, False, "scott")])
def test_gaussian_kde_matches_scipy(d, weighted, bw):
    rng = np.random.default_rng(d)
    data = rng.standard_normal((d, 25)) if d > 1 else rng.standard_normal(25)
    w = rng.uniform(0.5, 2.0, 25) if weighted else None
    kde, ref = st.gaussian_kde(data, bw, w), scipy_stats.gaussian_kde(data, bw, w)
    pts = rng.standard_normal((d, 6))
    np.testing.assert_allclose(kde.evaluate(pts).numpy(), ref.evaluate(pts), rtol=1e-12)
    np.testing.assert_allclose(kde(pts).numpy(), ref(pts), rtol=1e-12)
    np.testing.assert_allclose(kde.logpdf(pts).numpy(), ref.logpdf(pts), rtol=1e-12)
    np.testing.assert_allclose(kde.covariance.numpy(), ref.covariance, rtol=1e-12)
    np.testing.assert_allclose(kde.inv_cov.numpy(), ref.inv_cov, rtol=1e-10)
    np.testing.assert_allclose(float(kde.neff), ref.neff, rtol=1e-13)
    assert (kde.d, kde.n) == (d, 25)
    mean, cov = np.full(d, 0.3), 2.0 * np.eye(d)
    np.testing.assert_allclose(float(kde.integrate_gaussian(mean, cov)),
                               ref.integrate_gaussian(mean, cov), rtol=1e-12)
    other = rng.standard_normal((d, 7))
    np.testing.assert_allclose(float(kde.integrate_kde(st.gaussian_kde(other))),
                               ref.integrate_kde(scipy_stats.gaussian_kde(other)), rtol=1e-12)
    if d == 1:
        np.testing.assert_allclose(float(kde.integrate_box_1d(-0.5, 1.0)),
                                   ref.integrate_box_1d(-0.5, 1.0), rtol=1e-12)
    samples = kde.resample(sl.random.key(0), (4000,))
    assert samples.shape == (d, 4000) and samples.dtype == np.float64
    np.testing.assert_allclose(np.cov(samples.numpy()), np.atleast_2d(
        np.cov(data, aweights=w) + kde.covariance.numpy()), rtol=0.15, atol=0.05)
    assert kde.resample(sl.random.key(1)).shape == (d,)


def test_gaussian_kde_is_a_pytree_with_gradients_and_errors():
    rng = np.random.default_rng(0)
    data, pts = rng.standard_normal((2, 8)), rng.standard_normal((2, 3))
    check_grads(lambda data, pts: st.gaussian_kde(data).logpdf(pts), (data, pts), order=2)
    kde = st.gaussian_kde(data)
    leaves = sl.tree_util.tree_leaves(kde)
    assert len(leaves) == 5
    out = sl.jit(lambda k, p: k.pdf(p))(kde, pts)
    np.testing.assert_allclose(out.numpy(), kde.pdf(pts).numpy(), rtol=1e-13)
    by_vmap = sl.vmap(lambda p: kde.logpdf(p), in_axes=1)(sl.tensor(pts))
    np.testing.assert_allclose(by_vmap.numpy().ravel(), kde.logpdf(pts).numpy(), rtol=1e-12)
    assert st.gaussian_kde(data.astype(np.float32)).pdf(pts.astype(np.float32)).dtype == \
        np.float32
    assert kde.logpdf(np.array([[40.0], [40.0]])).numpy() > -np.inf  # logsumexp, no underflow
    with pytest.raises(ValueError, match="more than one element"):
        st.gaussian_kde([1.0])
    with pytest.raises(ValueError, match="weights must have length n = 8"):
        st.gaussian_kde(data, weights=np.ones(3))
    with pytest.raises(ValueError, match="points have dimension 3"):
        kde.pdf(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="bw_method"):
        st.gaussian_kde(data, "best")
    with pytest.raises(NotImplementedError, match="integrate_box_1d"):
        kde.integrate_box(0.0, 1.0)
    with pytest.raises(ValueError, match="d = 1"):
        kde.integrate_box_1d(0.0, 1.0)
    jax = pytest.importorskip("jax")
    with jax_x64(jax):
        ref = jax.scipy.stats.gaussian_kde(data, bw_method=lambda k: 0.5)
        got = st.gaussian_kde(data, bw_method=lambda k: 0.5)
        np.testing.assert_allclose(got.logpdf(pts).numpy(), np.asarray(ref.logpdf(pts)),
                                   rtol=1e-12)
        gj = jax.grad(lambda d: jax.scipy.stats.gaussian_kde(d).logpdf(pts).sum())(data)
        gs = sl.grad(lambda d: sl.sum(st.gaussian_kde(d).logpdf(pts)))(sl.tensor(data))
        np.testing.assert_allclose(gs.numpy(), np.asarray(gj), rtol=1e-10, atol=1e-12)


def test_gaussian_kde_resample_draws_jaxs_samples():
    jax = jax_with_scanlibs_threefry()
    rng = np.random.default_rng(2)
    data, w = rng.standard_normal((2, 10)), rng.uniform(0.5, 2.0, 10)
    with jax_x64(jax):
        want = jax.scipy.stats.gaussian_kde(data, weights=w).resample(jax.random.key(3), (5,))
        got = st.gaussian_kde(data, weights=w).resample(sl.random.key(3), (5,))
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-13, atol=1e-14)


def test_poisson_entropy_as_jax():
    mu = np.array([0.0, 0.5, 5.0, 9.99, 10.0, 50.0, 99.9, 150.0])
    got = st.poisson.entropy(mu)
    want = scipy_stats.poisson.entropy(mu)
    # JAX's sums stop at k < mu + 20 (below 10) and k < mu + 10 sqrt(mu) + 20 (below 100), and
    # above 100 it takes a two-term expansion: SciPy's exact values within 2e-6
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6)
    np.testing.assert_allclose(got.numpy()[:2], want[:2], rtol=1e-12)
    assert st.poisson.entropy(mu.astype(np.float32)).dtype == np.float32
    assert st.poisson.entropy(np.array([1.0, 2.0]), np.zeros((3, 1))).shape == (3, 2)
    with np.errstate(all="ignore"):  # the unused branches' logs of 0
        # not at integers, where the sums gain a term (JAX's truncation steps there)
        check_grads(lambda m: st.poisson.entropy(m), (np.array([0.7, 3.3, 40.5, 200.0]),),
                    order=2)
    jax = pytest.importorskip("jax")
    with jax_x64(jax), np.errstate(all="ignore"):
        edges = np.concatenate([mu, [-1.0, nan]])
        np.testing.assert_allclose(st.poisson.entropy(edges).numpy(),
                                   np.asarray(jax.scipy.stats.poisson.entropy(edges)),
                                   rtol=1e-12)
        g = sl.grad(lambda m: sl.sum(st.poisson.entropy(m)))(sl.tensor(mu[1:]))
        gj = jax.grad(lambda m: jax.scipy.stats.poisson.entropy(m).sum())(mu[1:])
        np.testing.assert_allclose(g.numpy(), np.asarray(gj), rtol=1e-10)
