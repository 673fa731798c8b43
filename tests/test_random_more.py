"""scanlib.random's further distributions (gamma, beta, poisson, truncated_normal, ...): their
draws equal jax.random's for the same key (bit for bit or to a few ulps, as docs/random.md
says), their gradients equal JAX's and finite differences, their moments are right, they
batch under vmap and run in scan bodies, and bad arguments raise.
"""

from __future__ import annotations


import numpy as np
import pytest

import scanlib as sl
from scanlib import random as r

from opcheck import fd_grad, jax_x64, jax_with_scanlibs_threefry

K = r.key(0)


def _np(t):
    return t.numpy() if isinstance(t, sl.Tensor) else np.asarray(t)




@pytest.fixture(scope="module")
def jax():
    return jax_with_scanlibs_threefry()


A = np.array([0.3, 1.0, 2.5, 10.0, 0.05, 100.0])
M = np.array([0.5, -1.0, 2.0])
C = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
# name -> (scanlib call, jax call); each is f(random module, key, dtype)
CASES = {
    "gamma": lambda m, k, dt: m.gamma(k, A.astype(dt), dtype=dt),
    "loggamma": lambda m, k, dt: m.loggamma(k, A.astype(dt), dtype=dt),
    "beta": lambda m, k, dt: m.beta(k, np.float64(2.0).astype(dt), A.astype(dt), dtype=dt),
    "dirichlet": lambda m, k, dt: m.dirichlet(k, A.astype(dt), (2,), dtype=dt),
    "chisquare": lambda m, k, dt: m.chisquare(k, A.astype(dt), dtype=dt),
    "t": lambda m, k, dt: m.t(k, A.astype(dt), dtype=dt),
    "truncated_normal": lambda m, k, dt: m.truncated_normal(k, -1.0, 2.0, (7,), dtype=dt),
    "multivariate_normal": lambda m, k, dt: m.multivariate_normal(
        k, M.astype(dt), C.astype(dt), (4,), dtype=dt),
    "multivariate_normal_eigh": lambda m, k, dt: m.multivariate_normal(
        k, M.astype(dt), C.astype(dt), (4,), dtype=dt, method="eigh"),
    "multivariate_normal_svd": lambda m, k, dt: m.multivariate_normal(
        k, M.astype(dt), C.astype(dt), (4,), dtype=dt, method="svd"),
    "laplace": lambda m, k, dt: m.laplace(k, (7,), dtype=dt),
    "logistic": lambda m, k, dt: m.logistic(k, (7,), dtype=dt),
    "cauchy": lambda m, k, dt: m.cauchy(k, (7,), dtype=dt),
    "lognormal": lambda m, k, dt: m.lognormal(k, np.float64(0.5).astype(dt), (7,), dtype=dt),
    "pareto": lambda m, k, dt: m.pareto(k, A.astype(dt), dtype=dt),
    "weibull_min": lambda m, k, dt: m.weibull_min(k, 2.0, A.astype(dt), (6,), dtype=dt),
    "rayleigh": lambda m, k, dt: m.rayleigh(k, A.astype(dt), dtype=dt),
    "maxwell": lambda m, k, dt: m.maxwell(k, (7,), dtype=dt),
    "orthogonal": lambda m, k, dt: m.orthogonal(k, 4, (2,), dtype=dt),
    "orthogonal_wide": lambda m, k, dt: m.orthogonal(k, 2, dtype=dt, m=4),
    "generalized_normal": lambda m, k, dt: m.generalized_normal(k, 1.5, (7,), dtype=dt),
    "ball": lambda m, k, dt: m.ball(k, 3, 1.5, (4,), dtype=dt),
    "rademacher": lambda m, k, dt: m.rademacher(k, (9,), dtype=np.int64),
    "geometric": lambda m, k, dt: m.geometric(k, np.array([0.1, 0.5, 0.9]).astype(dt),
                                              dtype=np.int64),
    "poisson": lambda m, k, dt: m.poisson(
        k, np.array([0.0, 0.5, 3.0, 9.9, 10.0, 50.0, 1000.0], np.float32), dtype=np.int64),
    "binomial": lambda m, k, dt: m.binomial(
        k, np.array([5.0, 20.0, 100.0, 1000.0, 3.0, 0.0]),
        np.array([0.3, 0.7, 0.5, 0.1, 0.9, 0.5]).astype(dt), dtype=dt),
}
EXACT = {"rademacher", "geometric", "poisson", "binomial"}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 7])
def test_draws_equal_jax(jax, name, dtype, seed):
    with jax_x64(jax):
        theirs = np.asarray(CASES[name](jax.random, jax.random.PRNGKey(seed), dtype))
    ours = _np(CASES[name](r, r.key(seed), dtype))
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, name
    if name in EXACT:
        np.testing.assert_array_equal(ours, theirs)
    else:
        # a few ulps (XLA's log, pow, tan and erfinv against NumPy's); float32 rounds more
        rtol = 2e-13 if dtype == np.float64 else 2e-5
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol * 1e-3)


GRAD_CASES = {
    "gamma": lambda m, a: m.gamma(K_, a).sum(),
    "loggamma": lambda m, a: m.loggamma(K_, a).sum(),
    "beta": lambda m, a: (m.beta(K_, a, a[::-1]) ** 2).sum(),
    "dirichlet": lambda m, a: (m.dirichlet(K_, a) * np.arange(6.0)).sum(),
    "chisquare": lambda m, a: m.chisquare(K_, a).sum(),
    "t": lambda m, a: m.t(K_, a + 2.0).sum(),
    "pareto": lambda m, a: m.pareto(K_, a + 1.0).sum(),
    "weibull_min": lambda m, a: m.weibull_min(K_, a, a + 1.0, (6,)).sum(),
    "rayleigh": lambda m, a: m.rayleigh(K_, a).sum(),
    "lognormal": lambda m, a: m.lognormal(K_, a).sum(),
    "truncated_normal": lambda m, a: m.truncated_normal(K_, -a, a).sum(),
    "multivariate_normal": lambda m, a: m.multivariate_normal(
        K_, a[:3], C + 0.1 * a[3:, None] * np.eye(3), (2,)).sum(),
}
K_ = None
A_GRAD = np.array([0.7, 1.5, 2.5, 4.0, 0.9, 3.0])


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_equal_jax_and_finite_differences(jax, name):
    global K_
    K_ = r.key(3)
    f = GRAD_CASES[name]
    ours = _np(sl.grad(lambda a: f(r, a))(sl.tensor(A_GRAD)))
    with jax_x64(jax):
        K_ = jax.random.PRNGKey(3)
        theirs = np.asarray(jax.grad(lambda a: f(jax.random, a))(jax.numpy.asarray(A_GRAD)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    if name in GAMMA_BASED:
        return  # the implicit gradient is not the draw's own derivative (below)
    K_ = r.key(3)
    # the same key gives the same draws, so the derivative of the draw is a smooth function
    numeric = fd_grad(lambda a: f(r, a), A_GRAD, eps=1e-6)
    np.testing.assert_allclose(ours, numeric, rtol=1e-5, atol=1e-7)


GAMMA_BASED = {"gamma", "loggamma", "beta", "dirichlet", "chisquare", "t"}


def test_gamma_gradient_is_the_implicit_one():
    """d x / d a holding the CDF P(a, x) fixed: -(dP/da) / (dP/dx), P from SciPy (the
    rejection sampler's own derivative in a, with its uniforms held, is another number)."""
    special = pytest.importorskip("scipy.special")
    a = np.array([0.2, 0.9, 1.0, 3.0, 30.0])
    x = _np(r.gamma(K, a))
    h = 1e-6
    dp_da = (special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h)
    dp_dx = np.exp((a - 1) * np.log(x) - x - special.gammaln(a))
    expected = -dp_da / dp_dx
    g = _np(sl.grad(lambda a: r.gamma(K, a).sum())(sl.tensor(a)))
    np.testing.assert_allclose(g, expected, rtol=1e-6)
    gl = _np(sl.grad(lambda a: r.loggamma(K, a).sum())(sl.tensor(a)))
    np.testing.assert_allclose(gl, expected / x, rtol=1e-6)
    # forward mode agrees
    _, t = sl.jvp(lambda a: r.gamma(K, a), (sl.tensor(a),), (sl.ones(5),))
    np.testing.assert_allclose(_np(t), g, rtol=1e-12)


def test_gamma_second_derivative_raises_as_in_jax():
    f = sl.grad(lambda a: r.gamma(K, a).sum())
    with pytest.raises(NotImplementedError, match="one derivative"):
        sl.grad(lambda a: f(a).sum())(sl.tensor([2.0]))


def test_moments():
    k = r.key(11)
    n = 40000
    g = _np(r.gamma(k, 3.0, (n,)))
    assert abs(g.mean() - 3.0) < 0.05 and abs(g.var() - 3.0) < 0.15
    b = _np(r.beta(k, 2.0, 5.0, (n,)))
    assert abs(b.mean() - 2 / 7) < 0.01
    p = _np(r.poisson(k, 4.0, (n,)))
    assert abs(p.mean() - 4.0) < 0.05 and abs(p.var() - 4.0) < 0.2
    big = _np(r.poisson(k, 40.0, (n,)))
    assert abs(big.mean() - 40.0) < 0.2
    bi = _np(r.binomial(k, 50.0, 0.4, (n,)))
    assert abs(bi.mean() - 20.0) < 0.1 and abs(bi.var() - 12.0) < 0.5
    tn = _np(r.truncated_normal(k, 0.5, 1.0, (n,)))
    assert tn.min() > 0.5 and tn.max() < 1.0
    x = _np(r.multivariate_normal(k, M, C, (n,)))
    np.testing.assert_allclose(np.cov(x.T), C, atol=0.05)
    q = _np(r.orthogonal(k, 5))
    np.testing.assert_allclose(q @ q.T, np.eye(5), atol=1e-12)
    pts = _np(r.ball(k, 3, 2, (1000,)))
    assert (np.linalg.norm(pts, axis=-1) <= 1).all()
    d = _np(r.dirichlet(k, np.array([1.0, 2.0, 3.0]), (n,)))
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    assert set(np.unique(_np(r.rademacher(k, (100,))))) == {-1, 1}
    assert _np(r.geometric(k, 0.5, (n,))).min() == 1


def test_vmap_over_keys_equals_each_key_alone():
    keys = r.split(K, 3)
    a = sl.tensor([0.5, 2.0])
    for f in (lambda k: r.gamma(k, a), lambda k: r.poisson(k, 3.0, (4,)),
              lambda k: r.binomial(k, 10.0, 0.3, (4,)), lambda k: r.beta(k, a, 1.0),
              lambda k: r.truncated_normal(k, -1.0, 1.0, (3,))):
        batched = _np(sl.vmap(f)(keys))
        for i in range(3):
            np.testing.assert_array_equal(batched[i], _np(f(keys[i])))
    # batched parameters with one key, and both batched
    a_b = sl.tensor([[0.5, 2.0], [3.0, 0.1]])
    out = _np(sl.vmap(lambda a: r.gamma(K, a))(a_b))
    for i in range(2):
        np.testing.assert_array_equal(out[i], _np(r.gamma(K, a_b[i])))
    out = _np(sl.vmap(lambda k, a: r.gamma(k, a))(keys[:2], a_b))
    for i in range(2):
        np.testing.assert_array_equal(out[i], _np(r.gamma(keys[i], a_b[i])))


def test_in_scan_body_equals_python_loop_with_gradients():
    def step(carry, x):
        key, h = carry
        key, sub = r.split(key)
        return (key, h + r.gamma(sub, x * h + 1.0) + r.poisson(sub, 2.0)), h

    def run(scan, h0):
        (_, h), _ = scan(step, (K, h0), sl.tensor([0.5, 1.0, 2.0]))
        return h

    def loop(f, init, xs):
        carry, ys = init, []
        for i in range(xs.shape[0]):
            carry, y = f(carry, xs[i])
            ys.append(y)
        return carry, ys

    h0 = sl.tensor(1.0)
    np.testing.assert_allclose(_np(run(sl.scan, h0)), _np(run(loop, h0)), rtol=1e-14)
    g_scan = sl.grad(lambda h: run(sl.scan, h))(h0)
    g_loop = sl.grad(lambda h: run(loop, h))(h0)
    np.testing.assert_allclose(_np(g_scan), _np(g_loop), rtol=1e-12)
    assert _np(sl.jit(lambda h: run(sl.scan, h))(h0)) == _np(run(loop, h0))


def test_shapes_dtypes_and_edges():
    assert r.gamma(K, 1.0).shape == () and r.gamma(K, 1.0).dtype == np.float64
    assert r.gamma(K, sl.zeros((0, 2)) + 1).shape == (0, 2)
    assert r.gamma(K, 2.0, (2, 3), np.float32).dtype == np.float32
    assert r.poisson(K, 1.0, (3,)).dtype == np.int64
    assert r.poisson(K, 1.0, (3,), np.int32).dtype == np.int32
    assert r.binomial(K, 5.0, 0.5).dtype == np.float64
    assert r.laplace(K).shape == () and r.maxwell(K, (0,)).shape == (0,)
    assert np.isnan(_np(r.binomial(K, 5.0, np.array([-0.1, np.nan])))).all()
    assert np.isnan(_np(r.gamma(K, np.array([np.nan])))).all()
    assert (_np(r.poisson(K, np.zeros(4))) == 0).all()
    data = r.key_data(K)
    assert r.wrap_key_data(data) is data and r.clone(K) is K
    np.testing.assert_array_equal(_np(r.split(r.wrap_key_data(_np(K)))), _np(r.split(K)))


def test_errors():
    with pytest.raises(ValueError, match="method"):
        r.multivariate_normal(K, M, C, method="qr")
    with pytest.raises(ValueError, match=r"cov must have shape \(\.\.\., 3, 3\)"):
        r.multivariate_normal(K, M, np.eye(2))
    with pytest.raises(ValueError, match="must broadcast to the shape"):
        r.gamma(K, np.ones(3), (2,))
    with pytest.raises(TypeError, match="integer dtype"):
        r.poisson(K, 1.0, dtype=np.float32)
    with pytest.raises(TypeError, match="key"):
        r.gamma(np.array([0, 1]), 1.0)
    with pytest.raises(TypeError, match="uint32 arrays"):
        r.wrap_key_data(np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        r.dirichlet(K, 1.0)


def test_draws_are_made_where_the_key_lives(backend):
    key = backend.tensor(_np(K))
    for name in sorted(CASES):
        dtype = np.float64
        here, there = CASES[name](r, K, dtype), CASES[name](r, key, dtype)
        backend.check_device(there)
        np.testing.assert_array_equal(backend.numpy(there), _np(here), err_msg=name)
    a = backend.tensor(np.array([0.5, 2.0, 7.0]))
    g = sl.grad(lambda a: sl.sum(r.gamma(key, a) + r.beta(key, a, 2.0)))(a)
    backend.check_device(g)
    expected = sl.grad(lambda a: sl.sum(r.gamma(K, a) + r.beta(K, a, 2.0)))(
        sl.tensor([0.5, 2.0, 7.0]))
    np.testing.assert_allclose(backend.numpy(g), _np(expected), rtol=1e-13)
    vm = sl.vmap(lambda k: r.poisson(k, 3.0, (4,)))(r.split(key, 2))
    backend.check_device(vm)
