"""The JAX-shaped modules scanlib.tree_util, scanlib.tree, scanlib.flatten_util,
scanlib.scipy.{special,stats,linalg} and scanlib.debug: views onto scanlib's own objects, each
name against NumPy/SciPy, finite differences (float64, second order) and JAX where installed,
with dtypes, 0-d and empty inputs, broadcasting and nan/inf edges; and inside scan bodies,
vmap, jit and grad of grad.
"""

from __future__ import annotations

import collections
import functools
import warnings

import numpy as np
import pytest

import scanlib as sl
from scanlib.testing import check_grads

from opcheck import N, P, case, table_tests

scipy_special = pytest.importorskip("scipy.special")
import scipy.linalg
import scipy.stats


# --- tree_util and tree ----------------------------------------------------------------------
def test_tree_modules_are_views_onto_pytree():
    assert sl.tree_util.tree_map is sl.pytree.tree_map is sl.tree.map
    assert sl.tree_util.tree_flatten is sl.pytree.flatten is sl.tree.flatten
    assert sl.tree_util.tree_unflatten is sl.pytree.unflatten is sl.tree.unflatten
    assert sl.tree_util.tree_leaves is sl.tree.leaves
    assert sl.tree_util.tree_structure is sl.tree.structure
    assert sl.tree_util.tree_reduce is sl.tree.reduce
    assert sl.tree_util.tree_all is sl.tree.all


TREES = [
    {"b": [1.0, (2.0, None)], "a": 3.0},
    [None, (), {}, 4.0],
    collections.namedtuple("P", "x y")(1.0, [2.0, 3.0]),
    5.0,
]


@pytest.mark.parametrize("tree", TREES)
def test_tree_util_matches_jax(tree):
    jax = pytest.importorskip("jax")
    tu = jax.tree_util
    assert sl.tree_util.tree_leaves(tree) == tu.tree_leaves(tree)
    leaves, treedef = sl.tree_util.tree_flatten(tree)
    assert leaves == tu.tree_flatten(tree)[0]
    assert treedef.num_leaves == tu.tree_structure(tree).num_leaves
    doubled = sl.tree_util.tree_map(lambda v: v * 2, tree)
    assert doubled == tu.tree_map(lambda v: v * 2, tree)
    assert sl.tree_util.tree_unflatten(treedef, [v * 2 for v in leaves]) == doubled
    assert sl.tree.reduce(lambda a, b: a + b, tree, 0.0) == jax.tree.reduce(
        lambda a, b: a + b, tree, 0.0)
    assert sl.tree.all(tree) == jax.tree.all(tree)


def test_is_leaf_and_reduce_without_initializer():
    tree = {"a": (1.0, 2.0), "b": (3.0, 4.0)}
    assert sl.tree.leaves(tree, is_leaf=lambda n: isinstance(n, tuple)) == [(1.0, 2.0),
                                                                            (3.0, 4.0)]
    assert sl.tree.map(sum, tree, is_leaf=lambda n: isinstance(n, tuple)) == {"a": 3.0, "b": 7.0}
    assert sl.tree.reduce(max, tree) == 4.0
    with pytest.raises(TypeError):
        sl.tree.reduce(max, {})  # as functools.reduce of nothing without an initializer
    assert sl.tree.all({}) is True
    assert sl.tree_util.tree_all([1, 0]) is False


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


sl.tree_util.register_pytree_node(Point, lambda p: ((p.x, p.y), None),
                                  lambda aux, children: Point(*children))


def test_registered_node_flows_through_grad_scan_and_jit():
    p = Point(sl.tensor(2.0), sl.tensor([1.0, 3.0]))
    assert len(sl.tree.leaves(p)) == 2
    g = sl.grad(lambda p: p.x * sl.sum(p.y * p.y))(p)
    assert isinstance(g, Point)
    np.testing.assert_allclose(g.x.numpy(), 10.0)
    np.testing.assert_allclose(g.y.numpy(), [4.0, 12.0])

    def step(c, x):
        return Point(c.x * x, c.y + x), c.x

    final, ys = sl.scan(step, p, sl.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(final.x.numpy(), 12.0)
    np.testing.assert_allclose(ys.numpy(), [2.0, 2.0, 4.0])
    out = sl.jit(lambda p: Point(p.y, p.x))(p)
    np.testing.assert_allclose(out.x.numpy(), [1.0, 3.0])


@sl.tree_util.register_pytree_node_class
class Box:
    def __init__(self, v, label):
        self.v, self.label = v, label

    def tree_flatten(self):
        return (self.v,), self.label

    @classmethod
    def tree_unflatten(cls, label, children):
        return cls(*children, label)


def test_register_pytree_node_class_as_jax():
    g = sl.grad(lambda b: sl.sum(b.v ** 2))(Box(sl.tensor([1.0, 2.0]), "w"))
    assert isinstance(g, Box) and g.label == "w"
    np.testing.assert_array_equal(g.v.numpy(), [2.0, 4.0])
    _, ys = sl.scan(lambda b, x: (Box(b.v + x, b.label), b.v), Box(sl.tensor(0.0), "c"),
                    sl.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(ys.numpy(), [0.0, 1.0])


def _add(a, b):
    return a + b


def test_partial_is_a_pytree_whose_arguments_are_leaves():
    P = sl.tree_util.Partial
    f = P(_add, sl.tensor([1.0, 2.0]))
    assert len(sl.tree.leaves(f)) == 1
    np.testing.assert_allclose(f(10.0).numpy(), [11.0, 12.0])
    g = P(f)  # a Partial of a Partial is one Partial
    assert g.func is _add and len(g.args) == 1
    doubled = sl.tree.map(lambda v: v * 2, f)
    assert isinstance(doubled, P)
    np.testing.assert_allclose(doubled(0.0).numpy(), [2.0, 4.0])
    # as an argument of a differentiated function: its leaves get the gradient
    grad = sl.grad(lambda f: sl.sum(f(1.0) ** 2))(f)
    np.testing.assert_allclose(grad.args[0].numpy(), [4.0, 6.0])


# --- flatten_util.ravel_pytree ---------------------------------------------------------------
def test_ravel_pytree_values_structure_and_dtypes():
    tree = {"W": sl.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": sl.tensor([5.0]), "s": None}
    flat, unravel = sl.flatten_util.ravel_pytree(tree)
    np.testing.assert_array_equal(flat.numpy(), [1.0, 2.0, 3.0, 4.0, 5.0])  # keys sorted: W, b
    back = unravel(flat * 2)
    assert back["s"] is None and back["W"].shape == (2, 2)
    np.testing.assert_array_equal(back["b"].numpy(), [10.0])

    # leaves of one dtype: unravel keeps the vector's dtype (a complex tangent stays complex)
    back = unravel(flat.astype("complex128") * 1j)
    assert back["b"].dtype == np.complex128
    np.testing.assert_array_equal(back["b"].numpy(), [5j])

    mixed = (sl.tensor([1, 2], dtype="int32"), sl.tensor(0.5, dtype="float32"))
    flat, unravel = sl.flatten_util.ravel_pytree(mixed)
    assert flat.dtype == np.float32  # JAX's promotion of int32 and float32
    a, b = unravel(flat)
    assert a.dtype == np.int32 and b.dtype == np.float32 and b.shape == ()
    with pytest.raises(TypeError, match="dtype float32"):
        unravel(flat.astype("float64"))
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        unravel(sl.zeros(4))

    flat, unravel = sl.flatten_util.ravel_pytree({"a": None, "b": []})
    assert flat.shape == (0,) and flat.dtype == np.float64
    assert unravel(flat) == {"a": None, "b": []}


def test_ravel_pytree_matches_jax():
    jax = pytest.importorskip("jax")
    from jax.flatten_util import ravel_pytree as jax_ravel

    rng = np.random.default_rng(0)
    tree = {"h": rng.standard_normal((3, 2)).astype(np.float32),
            "c": [rng.standard_normal(4).astype(np.float32), np.float32(1.5)]}
    flat, unravel = sl.flatten_util.ravel_pytree(tree)
    want, _ = jax_ravel(jax.tree.map(jax.numpy.asarray, tree))
    assert flat.dtype == want.dtype
    np.testing.assert_array_equal(flat.numpy(), np.asarray(want))


def test_unravel_of_a_traced_vector_is_differentiable():
    params = {"W": sl.tensor([[0.5, -0.2], [0.1, 0.3]]), "b": sl.tensor([0.1, -0.1])}
    flat0, unravel = sl.flatten_util.ravel_pytree(params)
    xs = sl.tensor(np.random.default_rng(1).standard_normal((5, 2)))

    def loss_flat(flat):  # the vector unraveled inside a scan body, at every step
        def body(h, x):
            p = unravel(flat)
            return sl.tanh(h @ p["W"] + x + p["b"]), None
        h, _ = sl.scan(body, sl.zeros(2), xs)
        return sl.sum(h * h)

    def loss_tree(p):
        h = sl.zeros(2)
        for t in range(5):
            h = sl.tanh(h @ p["W"] + xs[t] + p["b"])
        return sl.sum(h * h)

    g_flat = sl.grad(loss_flat)(flat0)
    g_tree = sl.grad(loss_tree)(params)
    np.testing.assert_allclose(g_flat.numpy(), sl.flatten_util.ravel_pytree(g_tree)[0].numpy(),
                               rtol=1e-12, atol=1e-14)
    check_grads(loss_flat, (flat0,), order=2)
    # under jit and vmap too
    np.testing.assert_allclose(sl.jit(loss_flat)(flat0).numpy(), loss_flat(flat0).numpy())
    batch = sl.stack([flat0, flat0 * 2])
    np.testing.assert_allclose(sl.vmap(loss_flat)(batch).numpy(),
                               [loss_flat(flat0).numpy(), loss_flat(flat0 * 2).numpy()],
                               rtol=1e-12)


# --- scipy.special ---------------------------------------------------------------------------
sp = sl.scipy.special


def _gamma_domain(rng, shape):
    """Positive and negative values, away from the poles at 0, -1, -2, ..."""
    return rng.choice([-2.5, -1.5, -0.5, 0.5, 1.5, 3.0, 7.0, 15.0], shape) + rng.uniform(
        -0.3, 0.3, shape)


def _prob(rng, shape):
    return rng.uniform(0.05, 0.95, shape)


CASES = [
    case("gammaln", sp.gammaln, (_gamma_domain, (3, 4)), ref=scipy_special.gammaln),
    case("digamma", sp.digamma, (_gamma_domain, (3, 4)), ref=scipy_special.digamma),
    case("polygamma1", lambda x: sp.polygamma(1, x), (_gamma_domain, (5,)),
         ref=lambda x: scipy_special.polygamma(1, x).astype(x.dtype)),
    case("polygamma3", lambda x: sp.polygamma(3, x), (P, (5,)),
         ref=lambda x: scipy_special.polygamma(3, x).astype(x.dtype)),
    case("xlogy", sp.xlogy, (N, (3, 1)), (P, (4,)), ref=scipy_special.xlogy),
    case("xlog1py", sp.xlog1py, (N, (4,)), (P, (4,)), ref=scipy_special.xlog1py),
    case("logit", sp.logit, (_prob, (4,)), ref=scipy_special.logit),
    case("expit", sp.expit, (N, (4,)), ref=scipy_special.expit),
    case("ndtr", sp.ndtr, (N, (4,)), ref=scipy_special.ndtr),
    case("erf", sp.erf, (N, (4,)), ref=scipy_special.erf),
    case("logsumexp_b", lambda a, b: sp.logsumexp(a, axis=1, b=b), (N, (3, 4)), (P, (4,)),
         ref=lambda a, b: scipy_special.logsumexp(a, axis=1, b=b)),
    case("norm_logpdf", lambda x, m, s: sl.scipy.stats.norm.logpdf(x, m, s), (N, (4,)),
         (N, (4,)), (P, (1,)),
         ref=lambda x, m, s: scipy.stats.norm.logpdf(x, m, s).astype(x.dtype)),
    case("norm_cdf", lambda x, m, s: sl.scipy.stats.norm.cdf(x, m, s), (N, (4,)), (N, (4,)),
         (P, (4,)), ref=lambda x, m, s: scipy.stats.norm.cdf(x, m, s).astype(x.dtype)),
    case("norm_sf", lambda x: sl.scipy.stats.norm.sf(x), (N, (4,)),
         ref=lambda x: scipy.stats.norm.sf(x).astype(x.dtype)),
]

(test_forward_matches_scipy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


def test_views_are_scanlib_objects():
    assert sp.expit is sl.sigmoid and sp.erf is sl.erf and sp.erfc is sl.erfc
    assert sl.scipy.linalg.solve_triangular is sl.linalg.solve_triangular
    assert sl.scipy.linalg.cho_solve is sl.linalg.cho_solve


# The grid and the far points in two arrays: polygamma's higher orders shift the whole array
# up by the recurrence as many times as its smallest element needs (1e5 times for -1e5 - 0.5:
# seconds for the 4001 points of the grid, a fraction of one for seven points).
@pytest.mark.parametrize("x", [np.linspace(-30.3, 60.0, 4001),
                               np.array([1e-300, 1e-8, 1.0, 2.0, 1e5, 1e300, -1e5 - 0.5])],
                         ids=["grid", "far"])
def test_gamma_functions_over_a_wide_range_against_scipy(x):
    for fn, ref, rtol in [(sp.gammaln, scipy_special.gammaln, 1e-13),
                          (sp.digamma, scipy_special.digamma, 1e-12),
                          (lambda v: sp.polygamma(1, v), lambda v: scipy_special.polygamma(1, v),
                           1e-13),
                          (lambda v: sp.polygamma(2, v), lambda v: scipy_special.polygamma(2, v),
                           1e-13)]:
        with np.errstate(all="ignore"):
            got, want = fn(sl.tensor(x)).numpy(), ref(x)
        near_pole = np.abs(x - np.round(x)) < 1e-2  # ill-conditioned: compare relatively
        with np.errstate(all="ignore"):
            err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
        err[(got == want) | (np.isnan(got) & np.isnan(want))] = 0.0
        assert np.all(err[~near_pole] < rtol), x[~near_pole][np.argmax(err[~near_pole])]
        assert np.all(err[near_pole] < 1e-9)


def test_special_edges_and_dtypes_as_jax():
    edges = np.array([0.0, -0.0, -1.0, -0.5, 1.0, 2.0, np.inf, -np.inf, np.nan])
    with np.errstate(all="ignore"):
        lg, dg = sp.gammaln(edges).numpy(), sp.digamma(edges).numpy()
    np.testing.assert_allclose(lg, [np.inf, np.inf, np.inf, np.log(2 * np.sqrt(np.pi)), 0.0,
                                    0.0, np.inf, np.inf, np.nan], rtol=1e-14, atol=0)
    assert np.all(np.isnan(dg[[0, 1, 2, 7, 8]])) and dg[6] == np.inf
    # dtypes: float32 stays, integers compute in float64, 0-d and empty keep their shapes
    assert sp.gammaln(sl.tensor([1.0, 2.0], dtype="float32")).dtype == np.float32
    assert sp.digamma(sl.tensor([1, 2])).dtype == np.float64
    assert sp.gammaln(3.0).shape == () and sp.gammaln(sl.zeros((0, 3))).shape == (0, 3)
    assert sp.xlogy(sl.tensor([1.0], dtype="float32"), 2.0).dtype == np.float32  # weak scalar
    # xlogy is 0 where x is 0, even at y = 0 or nan (not 0 * -inf)
    np.testing.assert_array_equal(sp.xlogy(sl.tensor([0.0, 0.0, 1.0]),
                                           sl.tensor([0.0, np.nan, np.e])).numpy(),
                                  [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(sp.xlog1py(0.0, -1.0).numpy(), 0.0)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(sp.logit(sl.tensor([0.0, 1.0, 2.0])).numpy(),
                                      [-np.inf, np.inf, np.nan])
    with pytest.raises(TypeError, match="complex"):
        sp.gammaln(sl.tensor([1j]))
    with pytest.raises(TypeError, match="Python int"):
        sp.polygamma(1.0, 2.0)


def test_special_against_jax():
    jax = pytest.importorskip("jax")
    js = jax.scipy.special
    with jax.enable_x64(True):
        x = np.array([0.0, -1.0, -0.5, -2.5, 1e-300, 0.5, 1.0, 3.7, 1e5, np.inf, -np.inf, np.nan])
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(sp.gammaln(x).numpy(), np.asarray(js.gammaln(x)),
                                       rtol=1e-13)
            np.testing.assert_allclose(sp.digamma(x).numpy(), np.asarray(js.digamma(x)),
                                       rtol=1e-13)
        y = np.array([0.0, 0.0, 2.0, 0.5])
        xx = np.array([0.0, 1.0, 0.0, 3.0])
        for ours, theirs in [(sp.xlogy, js.xlogy), (sp.xlog1py, js.xlog1py)]:
            with np.errstate(all="ignore"):
                np.testing.assert_array_equal(ours(xx, y).numpy(), np.asarray(theirs(xx, y)))
            for argnum in (0, 1):
                with np.errstate(all="ignore"):
                    got = sl.grad(lambda a, b, f=ours: sl.sum(f(a, b)), argnums=argnum)(
                        sl.tensor(xx), sl.tensor(y)).numpy()
                want = jax.grad(lambda a, b, f=theirs: f(a, b).sum(), argnums=argnum)(xx, y)
                np.testing.assert_allclose(got, np.asarray(want), rtol=1e-14)
        # second derivatives of gammaln and digamma, and logsumexp's b and sign
        for ours, theirs in [(sp.gammaln, js.gammaln), (sp.digamma, js.digamma)]:
            got = sl.grad(sl.grad(ours))(sl.tensor(2.7)).numpy()
            np.testing.assert_allclose(got, float(jax.grad(jax.grad(theirs))(2.7)), rtol=1e-12)
        a, b = np.array([[0.5, 1.0, -2.0]]), np.array([1.0, -3.0, 2.0])
        got = sp.logsumexp(a, axis=-1, b=b, return_sign=True)
        want = js.logsumexp(a, axis=-1, b=b, return_sign=True)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-14)
        np.testing.assert_allclose(sp.logit(np.array([0.2, 0.9])).numpy(),
                                   np.asarray(js.logit(np.array([0.2, 0.9]))), rtol=1e-15)


def test_special_under_vmap_jit_forward_mode_and_numba():
    x = sl.tensor([[0.5, 1.5, 2.5], [3.5, -0.5, 7.0]])
    t = sl.tensor(np.random.default_rng(0).standard_normal((2, 3)))
    _, tangent = sl.jvp(sp.gammaln, (x,), (t,))
    np.testing.assert_allclose(tangent.numpy(), (sp.digamma(x) * t).numpy(), rtol=1e-14)
    jac = sl.jacfwd(lambda y: sp.xlogy(y, y))(x[0])
    np.testing.assert_allclose(np.diag(jac.numpy()), (sl.log(x[0]) + 1).numpy(), rtol=1e-14)
    hess = sl.hessian(lambda y: sl.sum(sp.digamma(y)))(x[0])
    np.testing.assert_allclose(np.diag(hess.numpy()), sp.polygamma(2, x[0]).numpy(), rtol=1e-13)
    np.testing.assert_allclose(sl.vmap(sp.gammaln)(x).numpy(), sp.gammaln(x).numpy())
    np.testing.assert_allclose(sl.vmap(sl.grad(sp.digamma))(x[0]).numpy(),
                               sp.polygamma(1, x[0]).numpy())
    np.testing.assert_allclose(sl.jit(lambda v: sp.xlogy(v, v))(x).numpy(),
                               sp.xlogy(x, x).numpy())
    pytest.importorskip("numba")

    def body(c, v):  # on the carry, so computed at each step of the loop
        return sp.gammaln(c + v) * 0.1, sp.digamma(c + v)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c, ys = sl.scan(body, sl.ones(3), x, compiler="numba")
    assert any(issubclass(w.category, sl.NumbaFallbackWarning)
               and "gammaln (no numba rule)" in str(w.message) for w in caught)
    c_ref, ys_ref = sl.scan(body, sl.ones(3), x, compiler="numpy")
    np.testing.assert_array_equal(c.numpy(), c_ref.numpy())
    np.testing.assert_array_equal(ys.numpy(), ys_ref.numpy())


# --- scipy.stats -------------------------------------------------------------------------------
def _spd(rng, n, batch=()):
    a = rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_multivariate_normal_against_scipy_and_finite_differences():
    rng = np.random.default_rng(3)
    cov = _spd(rng, 3)
    mean, x = rng.standard_normal(3), rng.standard_normal((5, 3))  # x batched, mean broadcast
    got = sl.scipy.stats.multivariate_normal.logpdf(x, mean, cov).numpy()
    np.testing.assert_allclose(got, scipy.stats.multivariate_normal.logpdf(x, mean, cov),
                               rtol=1e-12)
    np.testing.assert_allclose(sl.scipy.stats.multivariate_normal.pdf(x[0], mean, cov).numpy(),
                               scipy.stats.multivariate_normal.pdf(x[0], mean, cov), rtol=1e-12)
    check_grads(lambda x, m, c: sl.scipy.stats.multivariate_normal.logpdf(x, m, c),
                (x, mean, cov), order=2)
    # batched covariances, and the 1-d case with a 0-d mean
    covs = _spd(rng, 2, (4,))
    got = sl.scipy.stats.multivariate_normal.logpdf(np.zeros((4, 2)), np.ones(2), covs).numpy()
    want = [scipy.stats.multivariate_normal.logpdf(np.zeros(2), np.ones(2), c) for c in covs]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(
        sl.scipy.stats.multivariate_normal.logpdf(np.array([0.3, 1.0]), 0.5, 2.0).numpy(),
        scipy.stats.norm.logpdf([0.3, 1.0], 0.5, np.sqrt(2.0)), rtol=1e-12)
    with pytest.raises(ValueError, match=r"\[\.\.\., n\]"):
        sl.scipy.stats.multivariate_normal.logpdf(np.zeros(2), np.zeros(3), np.eye(3))
    # float32 stays float32
    out = sl.scipy.stats.multivariate_normal.logpdf(x.astype("float32"), mean.astype("float32"),
                                                    cov.astype("float32"))
    assert out.dtype == np.float32


def test_stats_against_jax():
    jax = pytest.importorskip("jax")
    jst = jax.scipy.stats
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    with np.errstate(all="ignore"):
        for name in ("logpdf", "pdf", "cdf"):
            got = getattr(sl.scipy.stats.norm, name)(x, 0.5, 2.0)
            want = getattr(jst.norm, name)(x, 0.5, 2.0)
            assert got.dtype == want.dtype == np.float32
            np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=2e-6, atol=1e-7)
    with jax.enable_x64(True):
        cov, mean = _spd(rng, 3), rng.standard_normal(3)
        xs = rng.standard_normal((2, 3))
        f_sl = lambda x, m, c: sl.sum(sl.scipy.stats.multivariate_normal.logpdf(x, m, c))
        f_jx = lambda x, m, c: jst.multivariate_normal.logpdf(x, m, c).sum()
        np.testing.assert_allclose(f_sl(xs, mean, cov).numpy(), float(f_jx(xs, mean, cov)),
                                   rtol=1e-13)
        for argnum in range(3):
            got = sl.grad(f_sl, argnums=argnum)(sl.tensor(xs), sl.tensor(mean), sl.tensor(cov))
            want = jax.grad(f_jx, argnums=argnum)(xs, mean, cov)
            np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-11, atol=1e-13)


# --- scipy.linalg: upper Cholesky by default ---------------------------------------------------
def test_scipy_cholesky_is_upper_by_default_where_numpy_linalg_is_lower():
    rng = np.random.default_rng(5)
    a = _spd(rng, 4)
    upper = sl.scipy.linalg.cholesky(a).numpy()
    lower = sl.linalg.cholesky(a).numpy()
    np.testing.assert_allclose(upper, scipy.linalg.cholesky(a), rtol=1e-12)  # SciPy: upper
    np.testing.assert_allclose(lower, np.linalg.cholesky(a), rtol=1e-12)  # NumPy: lower
    np.testing.assert_array_equal(np.tril(upper, -1), 0.0)
    np.testing.assert_allclose(sl.scipy.linalg.cholesky(a, lower=True).numpy(), lower)
    b = rng.standard_normal(4)
    for lower_flag in (False, True):
        c_and_lower = sl.scipy.linalg.cho_factor(a, lower=lower_flag)
        assert c_and_lower[1] is lower_flag
        np.testing.assert_allclose(sl.scipy.linalg.cho_solve(c_and_lower, b).numpy(),
                                   np.linalg.solve(a, b), rtol=1e-12)
    # through a matrix built symmetric (JAX's gradient is not symmetrized: see below)
    for lower_flag in (False, True):
        check_grads(lambda B, b, lo=lower_flag: sl.scipy.linalg.cho_solve(
            sl.scipy.linalg.cho_factor(B @ B.T + 4 * np.eye(4), lower=lo), b),
            (rng.standard_normal((4, 4)), b), order=2)
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        np.testing.assert_allclose(upper, np.asarray(jax.scipy.linalg.cholesky(a)), rtol=1e-12)
        np.testing.assert_allclose(lower, np.asarray(jax.numpy.linalg.cholesky(a)), rtol=1e-12)
        w = rng.standard_normal((4, 4))
        f_sl = lambda a: sl.sum(sl.scipy.linalg.cholesky(a) * w)
        f_jx = lambda a: (jax.scipy.linalg.cholesky(a) * w).sum()
        np.testing.assert_allclose(sl.grad(f_sl)(sl.tensor(a)).numpy(),
                                   np.asarray(jax.grad(f_jx)(a)), rtol=1e-11)
        # one triangle is read, not symmetrized, as JAX's: the upper one unless lower=True
        skewed = a + np.triu(rng.uniform(0.0, 0.1, (4, 4)), 1)
        for lower_flag in (False, True):
            np.testing.assert_allclose(
                sl.scipy.linalg.cholesky(skewed, lower=lower_flag).numpy(),
                np.asarray(jax.scipy.linalg.cholesky(skewed, lower=lower_flag)), rtol=1e-12)


# --- debug.print -----------------------------------------------------------------------------
def test_debug_print_formats_as_jax(capsys):
    sl.debug.print("x = {}, loss = {loss:.3f}", sl.tensor([1.0, 2.0]), loss=sl.tensor(0.25))
    sl.debug.print("{0[a][0]} {n}", {"a": [sl.tensor(3)]}, n=7)
    assert capsys.readouterr().out == "x = [1. 2.], loss = 0.250\n3 7\n"
    jax = pytest.importorskip("jax")
    jax.debug.print("x = {}, loss = {loss:.3f}", jax.numpy.array([1.0, 2.0]),
                    loss=jax.numpy.array(0.25))
    jax.effects_barrier()
    assert capsys.readouterr().out == "x = [1. 2.], loss = 0.250\n"


def test_debug_print_under_grad_prints_primals(capsys):
    def f(x):
        sl.debug.print("x={x}", x=x)
        return sl.sum(x * x)

    sl.grad(f)(sl.tensor([1.0, 2.0]))
    sl.jvp(f, (sl.tensor([3.0]),), (sl.tensor([1.0]),))
    assert capsys.readouterr().out == "x=[1. 2.]\nx=[3.]\n"


def _printing_step(c, x):
    sl.debug.print("c={} x={x}", c, x=x)
    sl.debug.print("step")  # no inputs: still at every step, never hoisted out of the loop
    return c + x, c * x


def test_debug_print_in_a_scan_body_prints_at_every_step(capsys):
    xs = sl.tensor([1.0, 2.0, 3.0])
    carry, ys = sl.scan(_printing_step, 0.5, xs)
    steps = "c=0.5 x=1.0\nstep\nc=1.5 x=2.0\nstep\nc=3.5 x=3.0\nstep\n"
    assert capsys.readouterr().out == steps
    np.testing.assert_array_equal(ys.numpy(), [0.5, 3.0, 10.5])  # the values are unchanged
    # under grad the forward pass prints once; the backward pass does not print
    g = sl.grad(lambda c0: sl.scan(_printing_step, c0, xs)[0])(sl.tensor(0.5))
    assert capsys.readouterr().out == steps and float(g) == 1.0
    sl.scan(_printing_step, 0.5, xs, interpret=True)
    assert capsys.readouterr().out == steps
    pytest.importorskip("numba")
    with pytest.warns(sl.NumbaFallbackWarning, match="debug_print"):
        sl.scan(_printing_step, 0.5, xs, compiler="numba")
    assert capsys.readouterr().out == steps


def test_debug_print_under_jit_loops_and_vmap_as_jax(capsys):
    f = sl.jit(lambda x: (sl.debug.print("jit {}", x), x * 2)[1])
    f(sl.tensor([1.0, 2.0]))
    f(sl.tensor([3.0, 4.0]))  # each call prints, the trace is reused
    assert capsys.readouterr().out == "jit [1. 2.]\njit [3. 4.]\n"
    assert f.cache_info().misses == 1
    sl.fori_loop(0, 3, lambda i, v: (sl.debug.print("{} {}", i, v), v * 2)[1], sl.tensor(1.0))
    assert capsys.readouterr().out == "0 1.0\n1 2.0\n2 4.0\n"
    sl.while_loop(lambda v: v < 4, lambda v: (sl.debug.print("w {}", v), v * 2)[1],
                  sl.tensor(1.0))
    assert capsys.readouterr().out == "w 1.0\nw 2.0\n"
    # vmap prints each example, as JAX does (a print of unbatched values prints once)
    sl.vmap(lambda x: (sl.debug.print("v {}", x), x * 2)[1])(sl.tensor([1.0, 2.0]))
    sl.vmap(lambda c: sl.scan(_printing_step, c, sl.tensor([1.0]))[0])(sl.tensor([0.5, 1.5]))
    assert capsys.readouterr().out == "v 1.0\nv 2.0\nc=0.5 x=1.0\nc=1.5 x=1.0\nstep\n"
    jax = pytest.importorskip("jax")
    jax.vmap(lambda x: (jax.debug.print("v {}", x), x * 2)[1])(jax.numpy.array([1.0, 2.0]))
    jax.lax.fori_loop(0, 3, lambda i, v: (jax.debug.print("{} {}", i, v), v * 2)[1],
                      jax.numpy.array(1.0))
    jax.effects_barrier()
    assert capsys.readouterr().out == "v 1.0\nv 2.0\n0 1.0\n1 2.0\n2 4.0\n"


def test_debug_print_refuses_a_format_that_is_not_a_str():
    with pytest.raises(TypeError, match="format must be a str"):
        sl.debug.print(sl.zeros(2))


# --- scipy.linalg.expm ---------------------------------------------------------------------
def test_expm_against_scipy_finite_differences_and_jax():
    rng = np.random.default_rng(6)
    expm = sl.scipy.linalg.expm
    for scale in (1e-3, 1.0, 10.0):  # no squaring, and several
        a = scale * rng.standard_normal((4, 4))
        want = scipy.linalg.expm(a)
        np.testing.assert_allclose(expm(a).numpy(), want, rtol=1e-11, atol=1e-14 * np.abs(
            want).max())
    stack = rng.standard_normal((3, 2, 2))  # batched, each matrix scaled as it needs
    stack[1] *= 20
    np.testing.assert_allclose(expm(stack).numpy(), scipy.linalg.expm(stack), rtol=1e-11)
    assert expm(stack.astype(np.float32)).dtype == np.float32
    assert expm(np.zeros((0, 0))).shape == (0, 0)
    assert np.isnan(expm(np.array([[np.nan, 0.0], [0.0, 1.0]])).numpy()).all()
    with pytest.raises(ValueError, match="square"):
        expm(np.zeros(3))
    check_grads(expm, (rng.standard_normal((3, 3)),), order=2)
    # in a scan body (the matrix on the carry) against the Python loop, and under vmap
    xs = sl.tensor(0.3 * rng.standard_normal((4, 2, 2)))

    def body(m, x):
        return expm(m * 0.5 + x) * 0.5, sl.trace(m)

    def by_scan(m0):
        m, ys = sl.scan(body, m0, xs)
        return sl.sum(m) + sl.sum(ys)

    def by_loop(m0):
        m, total = m0, 0.0
        for t in range(4):
            m, y = body(m, xs[t])
            total = total + y
        return sl.sum(m) + total

    m0 = sl.tensor(rng.standard_normal((2, 2)))
    np.testing.assert_allclose(sl.grad(by_scan)(m0).numpy(), sl.grad(by_loop)(m0).numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(sl.vmap(expm)(xs).numpy(), expm(xs).numpy(), rtol=1e-14)
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        a, w = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
        want = jax.grad(lambda a: (jax.scipy.linalg.expm(a) * w).sum())(a)
        got = sl.grad(lambda a: sl.sum(expm(a) * w))(sl.tensor(a))
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-11)


def test_norm_at_infinities_and_nan_as_jax():
    x = np.array([-np.inf, -30.0, 0.0, 30.0, np.inf, np.nan])
    with np.errstate(all="ignore"):
        got = {n: getattr(sl.scipy.stats.norm, n)(x).numpy() for n in ("logpdf", "pdf", "cdf",
                                                                       "sf")}
    np.testing.assert_array_equal(got["cdf"][[0, 2, 4]], [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(got["sf"][[0, 2, 4]], [1.0, 0.5, 0.0])
    assert got["cdf"][1] > 0 and got["sf"][3] > 0  # the far tails do not underflow to 0
    np.testing.assert_array_equal(got["logpdf"][[0, 4]], [-np.inf, -np.inf])
    assert all(np.isnan(v[5]) for v in got.values())
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        for name, values in got.items():
            np.testing.assert_allclose(values, np.asarray(getattr(jax.scipy.stats.norm, name)(x)),
                                       rtol=1e-13)


# --- typing ----------------------------------------------------------------------------------
def test_typing_has_jax_typings_names_for_annotations():
    import importlib.util

    from scanlib.tape import types

    assert sl.typing.ArrayLike is types.ArrayLike and sl.typing.DTypeLike is types.DTypeLike

    def f(x: sl.typing.ArrayLike, dtype: sl.typing.DTypeLike = None) -> sl.Tensor:
        return sl.asarray(x, dtype=dtype)

    assert f([1, 2], "float32").dtype == np.float32
    if importlib.util.find_spec("jax") is not None:
        import jax.typing

        assert sorted(sl.typing.__all__) == sorted(n for n in dir(jax.typing) if n[0] != "_")


# --- JAX keywords that research code passes --------------------------------------------------
def test_jax_keywords_of_logsumexp_einsum_and_repeat():
    """jax.nn.logsumexp is jax.scipy.special.logsumexp (b=, return_sign=); einsum takes
    optimize= and precision= (changing nothing); repeat's total_repeat_length cuts short or
    pads with the last element, as JAX's, with repeats traced under jit and its gradient."""
    assert sl.nn.logsumexp is sl.scipy.special.logsumexp
    value, sign = sl.nn.logsumexp(sl.tensor([1.0, 2.0, 3.0]), b=sl.tensor([1.0, -2.0, 0.5]),
                                  return_sign=True)
    want = np.log(abs(np.exp(1.0) - 2 * np.exp(2.0) + 0.5 * np.exp(3.0)))
    np.testing.assert_allclose(value.numpy(), want, rtol=1e-14)
    assert sign.item() == -1.0
    x, w = sl.tensor(np.arange(6.0).reshape(2, 3)), sl.tensor(np.ones((3, 4)))
    for optimize in (True, False, "optimal", "greedy", "auto"):
        np.testing.assert_array_equal(
            sl.numpy.einsum("ij,jk->ik", x, w, optimize=optimize, precision=None).numpy(),
            sl.einsum("ij,jk->ik", x, w).numpy())
    a = sl.tensor([1.0, 2.0, 3.0])
    for repeats, total, want in [([2, 0, 1], 5, [1, 1, 3, 3, 3]), ([2, 0, 1], 2, [1, 1]),
                                 (2, 4, [1, 1, 2, 2]), ([1, 2, 0], 5, [1, 2, 2, 3, 3]),
                                 ([0, 0, 2], 4, [3, 3, 3, 3]), ([1, 1, 1], 0, [])]:
        r = sl.tensor(repeats) if isinstance(repeats, list) else repeats
        got = sl.numpy.repeat(a, r, total_repeat_length=total)
        np.testing.assert_array_equal(got.numpy(), np.array(want, float))
        if isinstance(repeats, list):
            jitted = sl.jit(lambda a, r, total=total: sl.repeat(a, r, total_repeat_length=total))
            np.testing.assert_array_equal(jitted(a, r).numpy(), np.array(want, float))
    m = sl.repeat(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), [3, 1], axis=1, total_repeat_length=3)
    np.testing.assert_array_equal(m.numpy(), [[1, 1, 1], [3, 3, 3]])
    g = sl.grad(lambda a: (sl.repeat(a, sl.tensor([2, 0, 1]), total_repeat_length=5)
                           * sl.arange(5.0)).sum())(a)
    np.testing.assert_array_equal(g.numpy(), [1.0, 0.0, 9.0])  # JAX's
    with pytest.raises(ValueError, match="total_repeat_length must not be negative"):
        sl.repeat(a, 2, total_repeat_length=-1)


def test_scipy_linalg_solve_qr_svd_block_diag_toeplitz_match_jax():
    """jax.scipy.linalg's solve, qr, svd, block_diag and toeplitz with SciPy's
    arguments: values, dtypes and shapes as JAX's, gradients of solve and toeplitz too."""
    S = sl.scipy.linalg
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 4))
    P, b, M = A @ A.T + 4 * np.eye(4), rng.standard_normal((4, 2)), rng.standard_normal((5, 3))
    for assume in ("gen", "sym", "her", "pos"):
        np.testing.assert_allclose((P @ S.solve(sl.tensor(P), sl.tensor(b),
                                                assume_a=assume).numpy()), b, atol=1e-12)
    q, r = S.qr(sl.tensor(M))
    assert (q.shape, r.shape) == ((5, 5), (5, 3))
    q, r = S.qr(sl.tensor(M), mode="economic")
    np.testing.assert_allclose((q @ r).numpy(), M, atol=1e-12)
    (r_only,) = S.qr(sl.tensor(M), mode="r")
    assert r_only.shape == (5, 3)
    np.testing.assert_allclose(S.svd(sl.tensor(M), compute_uv=False).numpy(),
                               np.linalg.svd(M, compute_uv=False), rtol=1e-12)
    bd = S.block_diag(sl.tensor([[1.0, 2.0]]), sl.tensor(3.0),
                      sl.tensor(np.ones((2, 2), np.float32)))
    np.testing.assert_array_equal(bd.numpy(), scipy.linalg.block_diag([[1.0, 2.0]], 3.0,
                                                                       np.ones((2, 2))))
    assert bd.dtype == np.float64
    np.testing.assert_array_equal(S.toeplitz(sl.tensor([1.0, 2.0, 3.0]),
                                             sl.tensor([9.0, 4.0])).numpy(),
                                  scipy.linalg.toeplitz([1.0, 2.0, 3.0], [9.0, 4.0]))
    with pytest.raises(ValueError, match="assume_a must be one of"):
        S.solve(sl.tensor(P), sl.tensor(b), assume_a="banded")
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        jsl, jnp = jax.scipy.linalg, jax.numpy
        want = jax.grad(lambda P: jsl.solve(P, b, assume_a="pos").sum())(jnp.asarray(P))
        got = sl.grad(lambda P: S.solve(P, sl.tensor(b), assume_a="pos").sum())(sl.tensor(P))
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-10, atol=1e-14)
        c = jnp.asarray([1.0 + 1j, 2.0, 3.0])
        np.testing.assert_array_equal(S.toeplitz(sl.tensor(np.asarray(c))).numpy(),
                                      np.asarray(jsl.toeplitz(c)))
        W = np.arange(9.0).reshape(3, 3)
        want = jax.grad(lambda c: (jsl.toeplitz(c) * W).sum())(jnp.asarray([1.0, 2.0, 3.0]))
        got = sl.grad(lambda c: sl.sum(S.toeplitz(c) * W))(sl.tensor([1.0, 2.0, 3.0]))
        np.testing.assert_array_equal(got.numpy(), np.asarray(want))


def test_scipy_linalg_lu_factor_lu_solve_and_lu():
    """lu_factor's (lu, piv) as SciPy's (getrf's pivots, 0-based, int32), lu_solve for each
    trans and batched, lu's a = p @ l @ u; gradients by finite differences to second order;
    and against JAX where installed, to third order through jit, vmap and jacfwd."""
    S = sl.scipy.linalg
    rng = np.random.default_rng(3)
    A, B, bv = rng.standard_normal((5, 5)), rng.standard_normal((5, 2)), rng.standard_normal(5)
    AB, BB = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((2, 3, 5, 2))
    lu, piv = S.lu_factor(sl.tensor(A))
    want_lu, want_piv = scipy.linalg.lu_factor(A)
    np.testing.assert_allclose(lu.numpy(), want_lu, rtol=1e-13, atol=1e-14)
    assert piv.dtype == np.int32 and (piv.numpy() == want_piv).all()
    for trans in (0, 1, 2):
        np.testing.assert_allclose(S.lu_solve((lu, piv), sl.tensor(B), trans=trans).numpy(),
                                   scipy.linalg.lu_solve((want_lu, want_piv), B, trans=trans),
                                   rtol=1e-12)
    np.testing.assert_allclose(S.lu_solve((lu, piv), sl.tensor(bv)).numpy(),
                               np.linalg.solve(A, bv), rtol=1e-12)
    x = S.lu_solve(S.lu_factor(sl.tensor(AB)), sl.tensor(BB), trans=1).numpy()
    np.testing.assert_allclose(np.swapaxes(AB, -1, -2) @ x, BB, atol=1e-12)
    with pytest.raises(ValueError, match=r"b\[\.\.\., None\]"):
        S.lu_solve(S.lu_factor(sl.tensor(AB)), sl.tensor(BB[..., 0]))
    p, l, u = S.lu(sl.tensor(A))
    np.testing.assert_allclose((p @ l @ u).numpy(), A, atol=1e-13)
    for got, want in zip(S.lu(sl.tensor(A)), scipy.linalg.lu(A)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)
    singular = S.lu_factor(sl.tensor(np.ones((3, 3))))[0].numpy()  # no error, as JAX
    assert singular[1, 1] == singular[2, 2] == 0.0
    W = rng.standard_normal((5, 5))
    losses = [lambda a: sl.sum(S.lu_factor(a)[0] * W),
              lambda a: sl.sum(S.lu_solve(S.lu_factor(a), B, trans=1) ** 2),
              lambda a: sl.sum(S.lu(a)[1] * W) + sl.sum(sl.sin(S.lu(a)[2]))]
    for loss in losses:
        check_grads(loss, (A,), order=2)
    jax = pytest.importorskip("jax")
    J, jnp = jax.scipy.linalg, jax.numpy
    theirs = [lambda a: jnp.sum(J.lu_factor(a)[0] * W),
              lambda a: jnp.sum(J.lu_solve(J.lu_factor(a), B, trans=1) ** 2),
              lambda a: jnp.sum(J.lu(a)[1] * W) + jnp.sum(jnp.sin(J.lu(a)[2]))]
    with jax.enable_x64(True):
        for ours, their in zip(losses, theirs):
            for make in (lambda lib, f: lib.jit(lib.grad(f)), lambda lib, f: lib.jacfwd(f),
                         lambda lib, f: lib.hessian(f),
                         lambda lib, f: lib.grad(lambda a: lib.numpy.sum(lib.hessian(f)(a)))):
                np.testing.assert_allclose(np.asarray(make(sl, ours)(A)),
                                           np.asarray(make(jax, their)(A)), rtol=1e-9,
                                           atol=1e-10)
            np.testing.assert_allclose(sl.vmap(sl.grad(ours))(AB[0]).numpy(),
                                       np.asarray(jax.vmap(jax.grad(their))(AB[0])),
                                       rtol=1e-10, atol=1e-12)


def test_scipy_linalg_eigh_symmetrizes_as_jaxs():
    a = np.random.default_rng(4).standard_normal((4, 4))  # not symmetric: JAX symmetrizes
    S = sl.scipy.linalg
    w, v = S.eigh(sl.tensor(a), lower=False)
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh((a + a.T) / 2), rtol=1e-12)
    np.testing.assert_allclose(S.eigh(sl.tensor(a), eigvals_only=True).numpy(), w.numpy())
    with pytest.raises(NotImplementedError, match="b=None"):
        S.eigh(sl.tensor(a), sl.tensor(a))
    jax = pytest.importorskip("jax")
    weights = np.arange(4.0)
    with jax.enable_x64(True):
        J, jnp = jax.scipy.linalg, jax.numpy
        for lower in (True, False):
            want = jax.grad(lambda a, lower=lower: jnp.sum(J.eigh(a, lower=lower)[0] ** 3)
                            + jnp.sum(J.eigh(a, lower=lower)[1][:, 0] ** 2 * weights))(a)
            got = sl.grad(lambda a, lower=lower: sl.sum(S.eigh(a, lower=lower)[0] ** 3)
                          + sl.sum(S.eigh(a, lower=lower)[1][:, 0] ** 2 * weights))(a)
            np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape, side", [((3, 3), "right"), ((5, 3), "right"), ((3, 5), "left"),
                                         ((2, 4, 4), "right"), ((4, 4), "left")])
def test_scipy_linalg_polar_matches_jax(shape, side):
    """polar's factors, and derivatives of a loss of both to second order, as JAX's (its
    "svd" method, which reverse mode goes through: "qdwh" refuses it)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(8)
    a = rng.standard_normal(shape)
    with jax.enable_x64(True):
        want_u, want_p = jax.scipy.linalg.polar(jnp.asarray(a), side=side, method="svd")
        w1 = rng.standard_normal(want_u.shape)
        w2 = rng.standard_normal(want_p.shape)

        def loss(lib, polar, a):
            u, p = polar(a, side=side)
            return (u * w1).sum() + (lib.sin(p) * w2).sum()

        jpolar = functools.partial(jax.scipy.linalg.polar, method="svd")
        want_grad = np.asarray(jax.grad(lambda a: loss(jnp, jpolar, a))(jnp.asarray(a)))
        want_hess = np.asarray(jax.hessian(lambda a: loss(jnp, jpolar, a))(jnp.asarray(a)))
    u, p = sl.scipy.linalg.polar(a, side=side)
    np.testing.assert_allclose(u.numpy(), np.asarray(want_u), atol=1e-13)
    np.testing.assert_allclose(p.numpy(), np.asarray(want_p), atol=1e-13)
    ours = functools.partial(loss, sl, sl.scipy.linalg.polar)
    np.testing.assert_allclose(sl.grad(ours)(sl.tensor(a)).numpy(), want_grad, atol=1e-12)
    np.testing.assert_allclose(sl.jacfwd(ours)(sl.tensor(a)).numpy(), want_grad, atol=1e-12)
    np.testing.assert_allclose(sl.hessian(ours)(sl.tensor(a)).numpy(), want_hess, atol=1e-11)


def test_scipy_linalg_polar_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="side='right' needs m >= n"):
        sl.scipy.linalg.polar(np.ones((2, 3)))
    with pytest.raises(ValueError, match="side='left' needs m <= n"):
        sl.scipy.linalg.polar(np.ones((3, 2)), side="left")
    with pytest.raises(TypeError, match="complex input"):
        sl.scipy.linalg.polar(np.ones((2, 2), complex))
