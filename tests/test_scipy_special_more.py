"""jax.scipy.special's inverse, incomplete, Bessel and entropy functions in scanlib.scipy.special
(and their views in lax and scipy.stats.norm): the op table (forward against SciPy in float32
and float64, gradient dtypes, VJPs against finite differences to second order, inside a scan
body), accuracy over wide ranges and tails against SciPy and mpmath values, edges and dtypes,
the derivatives that are not implemented (an error, never a dropped gradient), transformations,
and JAX itself where it is installed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import scanlib as sl

from opcheck import N, P, case, jax_x64, table_tests

ss = pytest.importorskip("scipy.special")
import scipy.stats  # noqa: E402

sp = sl.scipy.special
norm = sl.scipy.stats.norm


# --- input generators --------------------------------------------------------------------------
def _open_unit(rng, shape):
    return rng.uniform(0.03, 0.97, shape)


def _symmetric_unit(rng, shape):
    return rng.uniform(-0.95, 0.95, shape)


def _shape_param(rng, shape):
    return rng.uniform(0.6, 6.0, shape)


def _wide_normal(rng, shape):
    return rng.standard_normal(shape) * 4.0


def _off_poles(rng, shape):
    return rng.choice([-2.5, -1.5, -0.5, 0.5, 1.5, 3.0, 6.0], shape) + rng.uniform(-0.3, 0.3,
                                                                                   shape)


def _big_n(rng, shape):
    return rng.uniform(6.0, 10.0, shape)


def _away_from_zero(rng, shape):
    return rng.uniform(0.5, 3.0, shape) * rng.choice([-1.0, 1.0], shape)


U1, S1, SH, W = _open_unit, _symmetric_unit, _shape_param, _wide_normal
A_CONST = np.array([0.7, 2.5, 5.0])
B_CONST = np.array([1.5, 3.0, 0.8])


def _f32(ref):
    """A SciPy reference in the float dtype of its first array argument."""
    return lambda *a: np.asarray(ref(*a)).astype(np.result_type(*[v.dtype for v in a]))


CASES = [
    case("erfinv", sp.erfinv, (S1, (3, 4)), ref=_f32(ss.erfinv)),
    case("ndtri", sp.ndtri, (U1, (4,)), ref=_f32(ss.ndtri)),
    case("erfcx", sp.erfcx, (W, (4,)), ref=_f32(ss.erfcx)),
    case("log_ndtr", sp.log_ndtr, (W, (5,)), ref=_f32(ss.log_ndtr)),
    case("gammainc", sp.gammainc, (SH, (3,)), (SH, (3,)), ref=_f32(ss.gammainc), order=1),
    case("gammaincc", sp.gammaincc, (SH, (3,)), (SH, (2, 3)), ref=_f32(ss.gammaincc), order=1),
    case("gammainc_x", sp.gammainc, (SH, (3,)), consts=(A_CONST,), ref=ss.gammainc),
    case("gammaincc_x", sp.gammaincc, (SH, (3,)), consts=(A_CONST,), ref=ss.gammaincc),
    case("betaln", sp.betaln, (SH, (3, 1)), (SH, (4,)), ref=_f32(ss.betaln)),
    case("beta", sp.beta, (SH, (4,)), (SH, (4,)), ref=_f32(ss.beta)),
    case("betainc_x", sp.betainc, (U1, (3,)), consts=(A_CONST, B_CONST), ref=ss.betainc),
    case("gamma", sp.gamma, (_off_poles, (5,)), ref=_f32(ss.gamma)),
    case("loggamma", sp.loggamma, (SH, (4,)), ref=_f32(lambda x: ss.gammaln(x))),
    case("factorial", sp.factorial, (SH, (4,)), ref=_f32(lambda x: ss.gamma(x + 1))),
    case("comb", sp.comb, (_big_n, (4,)), (SH, (4,)), ref=_f32(lambda n, k: ss.binom(n, k))),
    case("poch", sp.poch, (SH, (4,)), (SH, (4,)), ref=_f32(ss.poch)),
    case("multigammaln", lambda a: sp.multigammaln(a, 3), (_big_n, (4,)),
         ref=_f32(lambda a: np.vectorize(lambda v: ss.multigammaln(v, 3))(a))),
    case("zeta_q", sp.zeta, (SH, (3,)), consts=(np.array([2.5, 3.0, 4.5]),), ref=ss.zeta),
    case("i0e", sp.i0e, (W, (5,)), ref=_f32(ss.i0e)),
    case("i1e", sp.i1e, (W, (5,)), ref=_f32(ss.i1e)),
    case("i1", sp.i1, (N, (5,)), ref=_f32(ss.i1)),
    case("entr", sp.entr, (P, (4,)), ref=_f32(ss.entr)),
    case("rel_entr", sp.rel_entr, (P, (4,)), (P, (4,)), ref=_f32(ss.rel_entr)),
    case("kl_div", sp.kl_div, (P, (4,)), (P, (4,)), ref=_f32(ss.kl_div)),
    case("softmax", sp.softmax, (N, (3, 4)), ref=_f32(ss.softmax)),
    case("log_softmax", lambda x: sp.log_softmax(x, axis=0), (N, (3, 4)),
         ref=_f32(lambda x: ss.log_softmax(x, axis=0))),
    case("boxcox", sp.boxcox, (P, (4,)), (N, (4,)), ref=_f32(ss.boxcox)),
    case("boxcox1p", sp.boxcox1p, (P, (4,)), (N, (4,)), ref=_f32(ss.boxcox1p)),
    case("exp1", sp.exp1, (P, (4,)), ref=_f32(ss.exp1)),
    case("expi", sp.expi, (_away_from_zero, (5,)), ref=_f32(ss.expi)),
    case("expn_x", sp.expn, (P, (3,)), consts=(np.array([0.0, 2.0, 5.0]),), ref=ss.expn),
    case("norm_ppf", norm.ppf, (U1, (4,)), (N, (4,)), (P, (1,)),
         ref=_f32(scipy.stats.norm.ppf)),
    case("norm_isf", norm.isf, (U1, (4,)), ref=_f32(scipy.stats.norm.isf)),
    case("norm_logcdf", norm.logcdf, (W, (4,)), (N, (4,)), (P, (4,)),
         ref=_f32(scipy.stats.norm.logcdf)),
    case("norm_logsf", norm.logsf, (W, (4,)), ref=_f32(scipy.stats.norm.logsf)),
]

(test_forward_matches_scipy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


def _relative_error(got, want):
    with np.errstate(all="ignore"):
        err = np.abs(got - want) / np.abs(want)
    err[(got == want) | (np.isnan(got) & np.isnan(want))] = 0.0
    return err


# --- accuracy over wide ranges ------------------------------------------------------------------
def test_inverses_and_scaled_functions_over_their_whole_range():
    y = np.concatenate([np.linspace(-1, 1, 20001), -1 + np.logspace(-16, -1, 200),
                        1 - np.logspace(-16, -1, 200), np.logspace(-300, -1, 200),
                        -np.logspace(-300, -1, 20)])
    p = np.concatenate([np.linspace(0, 1, 20001), np.logspace(-323, -1, 400),
                        1 - np.logspace(-16, -1, 200)])
    x = np.concatenate([np.linspace(-26, 40, 20001), [1e5, 1e10, 1e200]])
    xb = np.concatenate([np.linspace(-80, 80, 20001), [-1e4, 1e4, 1e300]])
    xz = np.linspace(-1000, 8, 6001)  # above 8, SciPy's log_ndtr is 1e-12 off (see MPMATH)
    checks = [(sp.erfinv, ss.erfinv, y), (sp.ndtri, ss.ndtri, p), (sp.erfcx, ss.erfcx, x),
              (sp.i0e, ss.i0e, xb), (sp.i1e, ss.i1e, xb), (sp.log_ndtr, ss.log_ndtr, xz)]
    for ours, ref, v in checks:
        err = _relative_error(ours(v).numpy(), ref(v))
        assert err.max() < 4e-15, (ours.__name__, v[np.argmax(err)], err.max())
    x = np.concatenate([np.linspace(-700, 700, 14001), [1e-300, 1e-10]])
    err = _relative_error(sp.expi(x).numpy(), ss.expi(x))
    assert err.max() < 5e-14, x[np.argmax(err)]  # the series' terms near x = 40
    x = np.concatenate([np.linspace(0, 700, 7001), [1e-300, 1e-10]])
    for n in (0, 1, 2, 7, 30):
        err = _relative_error(sp.expn(n, x).numpy(), ss.expn(n, x))
        assert err.max() < 1e-14, (n, x[np.argmax(err)])
    q = np.linspace(1.01, 60.0, 4001)
    err = _relative_error(sp.zeta(q, 1.0 + q[::-1]).numpy(), ss.zeta(q, 1.0 + q[::-1]))
    assert err.max() < 1e-14


# mpmath (40 digits) values where SciPy's own are not this accurate or the result is tiny.
MPMATH = [
    (sp.gammainc, (0.0044913632512503104, 0.6566149298752112), 9.9816954171760601796e-01),
    (sp.gammaincc, (0.0044913632512503104, 0.6566149298752112), 0.0018304582823939820418),
    (sp.gammainc, (95.988537399541, 0.48787359423348287), 7.9024354011698231392e-181),
    (sp.gammaincc, (9611.807847840839, 13581.849106040423), 1.1907053878880960984e-283),
    (sp.betaln, (236747.35339787448, 0.14846538954760816), 0.001420906178540605436),
    (sp.betaln, (994.8733190384615, 0.28682592546301894), -0.83671345000504596846),
    (sp.betainc, (794.7052886047824, 18.029756068388096, 0.3902163448780057),
     2.7598476575275322091e-294),
    (sp.betainc, (2.9422512278889523, 0.011648357133795202, 0.8962323245269412),
     0.011470051106536333512),
    (sp.log_ndtr, (32.269999999999996,), -9.2211684701122819467e-229),
    (sp.log_ndtr, (20.0,), -2.7536241186062336951e-89),
]


@pytest.mark.parametrize("fn, args, want", MPMATH, ids=[f"{f.__name__}{i}" for i, (f, _, _)
                                                        in enumerate(MPMATH)])
def test_incomplete_functions_against_mpmath(fn, args, want):
    np.testing.assert_allclose(float(fn(*args)), want, rtol=3e-12)


def test_incomplete_functions_over_wide_ranges_against_scipy():
    rng = np.random.default_rng(5)
    a = 10 ** rng.uniform(-2, 2.5, 3000)
    x = a * np.exp(rng.uniform(-2, 2, 3000))
    for ours, ref in [(sp.gammainc, ss.gammainc), (sp.gammaincc, ss.gammaincc)]:
        want = ref(a, x)
        ok = want > 1e-250  # SciPy's far tail is not this accurate
        err = _relative_error(ours(a, x).numpy(), want)[ok]
        assert np.percentile(err, 99) < 5e-13 and err.max() < 5e-12, err.max()
    b = 10 ** rng.uniform(-2, 2.5, 3000)
    u = rng.uniform(0, 1, 3000)
    want = ss.betainc(a, b, u)
    err = _relative_error(sp.betainc(a, b, u).numpy(), want)[want > 1e-250]
    assert np.percentile(err, 99) < 5e-13 and err.max() < 5e-12, err.max()
    big = 10 ** rng.uniform(-3, 2, 3000)  # beyond, SciPy's betaln is the less accurate one
    want = ss.betaln(big, b)  # near its zeros betaln is a difference: compare absolutely there
    err = np.abs(sp.betaln(big, b).numpy() - want) / np.maximum(np.abs(want), 1.0)
    assert np.percentile(err, 99) < 2e-13 and err.max() < 1e-12, err.max()
    # the sum of three gammaln values loses 1e-5 here; Stirling's remainders do not
    np.testing.assert_allclose(sp.betaln(1e10, 1.0).numpy(), -np.log(1e10), rtol=1e-15)


# --- edges, dtypes and shapes ---------------------------------------------------------------------
def test_edges_as_jax():
    inf, nan = np.inf, np.nan
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(sp.erfinv(np.array([-1.0, 1.0, 1.5, nan, 0.0])).numpy(),
                                      [-inf, inf, nan, nan, 0.0])
        np.testing.assert_array_equal(sp.ndtri(np.array([0.0, 1.0, -0.1, nan, 0.5])).numpy(),
                                      [-inf, inf, nan, nan, 0.0])
        np.testing.assert_array_equal(sp.erfcx(np.array([inf, -inf, nan, -30.0])).numpy(),
                                      [0.0, inf, nan, inf])
        np.testing.assert_array_equal(sp.log_ndtr(np.array([inf, -inf, nan])).numpy(),
                                      [0.0, -inf, nan])
        a = np.array([0.0, -1, 1, 1, 1, 1, inf, nan])
        x = np.array([1.0, 1, 0, -1, inf, nan, 1, 1])
        np.testing.assert_array_equal(sp.gammainc(a, x).numpy(),
                                      [1, nan, 0, nan, 1, nan, nan, nan])
        np.testing.assert_array_equal(sp.gammaincc(a, x).numpy(),
                                      [0, nan, 1, nan, 0, nan, nan, nan])
        np.testing.assert_array_equal(
            sp.betainc(np.array([0.0, 1, 1, 2, -1, 2]), np.array([1.0, 0, 1, 2, 1, inf]),
                       np.array([0.5, 0.5, 1.5, 0, 0.5, 0.5])).numpy(), [1, 0, nan, 0, nan, 1])
        np.testing.assert_array_equal(
            sp.zeta(np.array([1.0, 0.5, 2, 2, 2]), np.array([1.0, 1, 0, -1, inf])).numpy(),
            [inf, nan, inf, inf, nan])
        np.testing.assert_array_equal(
            sp.gammasgn(np.array([0.0, -0.0, -1.0, -0.5, -1.5, inf, -inf, nan])).numpy(),
            [1, -1, nan, -1, 1, 1, nan, nan])
        np.testing.assert_array_equal(sp.gamma(np.array([0.0, -0.0, -2.0])).numpy(),
                                      [inf, -inf, nan])
        np.testing.assert_array_equal(sp.loggamma(np.array([-0.5, 0.0, 1.0])).numpy(),
                                      [nan, nan, 0.0])
        np.testing.assert_allclose(sp.factorial(np.array([-1.0, 0.0, 3.0])).numpy(),
                                   [0, 1, 6], rtol=1e-14)
        np.testing.assert_array_equal(sp.comb(np.array([3.0, -1, 3]), np.array([4.0, 0, -1]))
                                      .numpy(), [0, 0, 0])
        np.testing.assert_array_equal(sp.comb(3.0, np.array([0.0, 2.0]), repetition=True)
                                      .numpy().round(9), [1, 6])
        np.testing.assert_array_equal(sp.entr(np.array([-1.0, 0.0])).numpy(), [-inf, 0.0])
        np.testing.assert_array_equal(
            sp.rel_entr(np.array([0.0, 0.0, 1.0, -1.0]), np.array([0.0, 1.0, 0.0, 1.0]))
            .numpy(), [0.0, 0.0, inf, inf])
        np.testing.assert_array_equal(sp.i0e(np.array([inf, -inf, nan])).numpy(),
                                      [0.0, 0.0, nan])
        np.testing.assert_array_equal(  # SciPy's values (JAX's are nan, nan, 0.5, nan)
            sp.expn(np.array([0, 1, 2, -1, 2, 3.5, 2]),
                    np.array([0.0, 0, 0, 1, -1, 1, inf])).numpy(),
            [inf, inf, 1.0, nan, nan, nan, 0.0])
        np.testing.assert_array_equal(sp.exp1(np.array([-1.0, 0.0, inf, nan])).numpy(),
                                      [nan, inf, 0.0, nan])
        np.testing.assert_array_equal(sp.expi(np.array([0.0, inf, -inf])).numpy(),
                                      [-inf, inf, -0.0])
        np.testing.assert_array_equal(norm.isf(np.array([1e-300])).numpy(),
                                      -ss.ndtri(np.array([1e-300])))


@pytest.mark.parametrize("fn, nargs", [
    (sp.erfinv, 1), (sp.ndtri, 1), (sp.erfcx, 1), (sp.log_ndtr, 1), (sp.gammainc, 2),
    (sp.gammaincc, 2), (sp.betaln, 2), (sp.beta, 2), (sp.betainc, 3), (sp.gamma, 1),
    (sp.gammasgn, 1), (sp.loggamma, 1), (sp.factorial, 1), (sp.comb, 2), (sp.poch, 2),
    (sp.zeta, 2), (sp.i0e, 1), (sp.i1e, 1), (sp.i1, 1), (sp.entr, 1), (sp.rel_entr, 2),
    (sp.kl_div, 2), (sp.exp1, 1), (sp.expi, 1), (norm.ppf, 1), (norm.isf, 1),
    (norm.logcdf, 1), (norm.logsf, 1)],
    ids=lambda v: getattr(v, "__name__", str(v)))
def test_dtypes_zero_d_empty_and_broadcasting(fn, nargs):
    half = np.float32(0.5)
    assert fn(*[sl.tensor([half] * 2)] * nargs).dtype == np.float32
    assert fn(*[sl.tensor([half] * 2)] + [0.5] * (nargs - 1)).dtype == np.float32  # weak
    assert fn(*[1] * nargs).dtype == np.float64  # integers compute in float64
    assert fn(*[0.5] * nargs).shape == ()
    assert fn(*[sl.zeros((0, 3))] * nargs).shape == (0, 3)
    if nargs > 1:
        args = [np.full((2, 1), 0.5)] + [np.full((3,), 0.25)] * (nargs - 1)
        assert fn(*args).shape == (2, 3)


def test_bernoulli_numbers_and_boxcox_at_lambda_zero():
    from fractions import Fraction
    import math
    exact = [Fraction(1)]
    for m in range(1, 121):
        exact.append(-sum(math.comb(m + 1, k) * exact[k] for k in range(m)) / (m + 1))
    got = sp.bernoulli(120).numpy()
    np.testing.assert_allclose(got, [float(b) for b in exact], rtol=1e-14, atol=0)
    assert sp.bernoulli(0).shape == (1,) and np.isneginf(sp.bernoulli(260).numpy()[260])
    with pytest.raises(ValueError, match="non-negative"):
        sp.bernoulli(-1)
    x = sl.tensor([0.5, 2.0])
    np.testing.assert_array_equal(sp.boxcox(x, 0.0).numpy(), np.log(x.numpy()))
    np.testing.assert_array_equal(sp.boxcox1p(x, 0.0).numpy(), np.log1p(x.numpy()))
    g = sl.grad(lambda v: sl.sum(sp.boxcox(x, v)))(sl.tensor([0.0, 0.0])).numpy()
    assert np.all(np.isfinite(g))  # the lmbda == 0 branch's safe denominator


def test_views_are_the_same_objects():
    assert sp.i0 is sl.i0
    assert sl.lax.erf_inv is sp.erfinv and sl.lax.lgamma is sp.gammaln
    assert sl.lax.igamma is sp.gammainc and sl.lax.igammac is sp.gammaincc
    assert sl.lax.betainc is sp.betainc and sl.lax.zeta is sp.zeta
    assert sl.lax.bessel_i0e is sp.i0e and sl.lax.bessel_i1e is sp.i1e
    assert sl.lax.digamma is sp.digamma and sl.lax.polygamma is sp.polygamma


# --- derivatives: the implemented ones, and the refused ones -------------------------------------
@pytest.mark.parametrize("fn", [sp.gammainc, sp.gammaincc], ids=["gammainc", "gammaincc"])
def test_gradients_in_a_and_second_order_in_x(fn):
    a, x = sl.tensor([0.5, 2.0, 30.0]), sl.tensor([0.3, 2.5, 28.0])
    eps = 1e-6
    got = sl.grad(lambda v: sl.sum(fn(v, x)))(a).numpy()
    fd = (fn(a + eps, x).numpy() - fn(a - eps, x).numpy()) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-7)
    hess = sl.hessian(lambda v: sl.sum(fn(a, v)))(x).numpy()

    def d1(v):
        return sl.grad(lambda w: sl.sum(fn(a, w)))(sl.tensor(v)).numpy()

    fd2 = (d1(x.numpy() + eps) - d1(x.numpy() - eps)) / (2 * eps)
    np.testing.assert_allclose(np.diag(hess), fd2, rtol=1e-6)
    sign = 1.0 if fn is sp.gammainc else -1.0
    np.testing.assert_allclose(sign * sl.lax.igamma_grad_a(a, x).numpy(), got, rtol=1e-15)


@pytest.mark.parametrize("label, call", [
    ("betainc a", lambda a, x: sl.grad(lambda v: sl.sum(sp.betainc(v, 2.0, x)))(a)),
    ("betainc b", lambda a, x: sl.grad(lambda v: sl.sum(sp.betainc(2.0, v, x)))(a)),
    ("betainc a, jit", lambda a, x: sl.jit(sl.grad(lambda v: sl.sum(sp.betainc(v, 2.0, x))))(a)),
    ("betainc a, jvp", lambda a, x: sl.jvp(lambda v: sp.betainc(v, 2.0, x), (a,), (a,))),
    ("betainc a, jacfwd", lambda a, x: sl.jacfwd(lambda v: sp.betainc(v, 2.0, x))(a)),
    ("gammainc a twice", lambda a, x: sl.grad(sl.grad(lambda v: sl.sum(sp.gammainc(v, x))))(
        a[0])),
    ("zeta x", lambda a, x: sl.grad(lambda v: sl.sum(sp.zeta(v + 1.5, x)))(a)),
    ("expn n", lambda a, x: sl.grad(lambda v: sl.sum(sp.expn(v, x)))(a)),
])
def test_derivatives_that_are_not_implemented_raise(label, call):
    a, x = sl.tensor([1.5, 2.5]), sl.tensor([0.3, 0.6])
    with pytest.raises(NotImplementedError, match="not implemented|does not exist"):
        call(a, x)


def test_refused_derivatives_are_nan_in_scan_bodies_never_dropped():
    a, x = sl.tensor([1.5, 2.5]), sl.tensor([0.3, 0.6])

    def body(c, x_t):  # the carry is betainc's a: d/dx needs d/da
        return c * 0.5 + sp.betainc(c, 2.0, x_t), None

    g = sl.grad(lambda x: sl.sum(sl.scan(body, a, sl.stack([x, x]))[0]))(x)
    assert np.all(np.isnan(g.numpy()))

    def body_x(c, x_t):  # a and b constants: the gradient in x is exact
        return c + sp.betainc(a, 2.0, x_t), None

    g = sl.grad(lambda x: sl.sum(sl.scan(body_x, sl.zeros(2), sl.stack([x, x]))[0]))(x)
    np.testing.assert_allclose(g.numpy(), 2 * sl.grad(
        lambda v: sl.sum(sp.betainc(a, 2.0, v)))(x).numpy(), rtol=1e-13)


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(NotImplementedError, match="exact=False"):
        sp.factorial(3, exact=True)
    with pytest.raises(TypeError, match="Python int"):
        sp.multigammaln(2.0, sl.tensor(3))
    with pytest.raises(TypeError, match="complex"):
        sp.ndtri(sl.tensor([0.5j]))
    with pytest.raises(ValueError, match=r"\[0, 30\]"):
        sp.log_ndtr(1.0, series_order=31)


def test_under_vmap_jit_forward_mode_and_numba():
    a, x = sl.tensor([[0.5, 1.5], [3.0, 7.0]]), sl.tensor([[0.2, 2.0], [4.0, 5.0]])
    np.testing.assert_array_equal(sl.vmap(sp.gammainc)(a, x).numpy(), sp.gammainc(a, x).numpy())
    np.testing.assert_array_equal(sl.jit(sp.betainc)(a, a, x / 10).numpy(),
                                  sp.betainc(a, a, x / 10).numpy())
    _, t = sl.jvp(sp.ndtri, (x / 10,), (sl.ones_like(x),))
    np.testing.assert_allclose(t.numpy(), sl.grad(lambda v: sl.sum(sp.ndtri(v)))(x / 10).numpy(),
                               rtol=1e-14)
    per_row = sl.vmap(sl.grad(lambda v: sl.sum(sp.log_ndtr(v))))(x - 40.0)
    np.testing.assert_allclose(per_row.numpy(), np.sqrt(2 / np.pi) / ss.erfcx(
        -(x.numpy() - 40.0) / np.sqrt(2)), rtol=1e-13)
    pytest.importorskip("numba")

    def body(c, v):
        return c + sp.erfinv(v * 0.1), sp.gammainc(c * 0 + 2.0, v)

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        c, ys = sl.scan(body, sl.ones(2), x, compiler="numba")
    c_ref, ys_ref = sl.scan(body, sl.ones(2), x, compiler="numpy")
    np.testing.assert_array_equal(c.numpy(), c_ref.numpy())
    np.testing.assert_array_equal(ys.numpy(), ys_ref.numpy())


# --- against JAX ------------------------------------------------------------------------------
def _jax_table(jax, u, z, a, b):
    """Every JAX value and gradient the test compares, computed in one jitted program (one
    compilation instead of one per operation)."""
    js, jnorm = jax.scipy.special, jax.scipy.stats.norm
    out = {name: getattr(js, name)(v) for name, v in _unary(u, z, a)}
    out.update({name: getattr(js, name)(v, w) for name, v, w in _binary(u, z, a, b)})
    out["betainc"] = js.betainc(a, b, u)
    out["multigammaln"] = js.multigammaln(a + 3, 4)
    for name in ("ppf", "isf"):
        out["norm." + name] = getattr(jnorm, name)(u, 1.0, 2.0)
    for name in ("logcdf", "logsf"):
        out["norm." + name] = getattr(jnorm, name)(z, 1.0, 2.0)
    for name in ("gammainc", "gammaincc", "betaln"):
        f = getattr(js, name)
        out["grad." + name] = jax.grad(lambda p, q, f=f: f(p, q).sum(), argnums=(0, 1))(a, b)
    out["grad.betainc"] = jax.grad(lambda v: js.betainc(a, b, v).sum())(u)
    for name, v in _second_order(u, z):
        out["grad2." + name] = jax.grad(jax.grad(getattr(js, name)))(v[0])
    out["random_gamma_grad"] = jax.lax.random_gamma_grad(a, b)
    return out


def _unary(u, z, a):
    return [("erfinv", 2 * u - 1), ("ndtri", u), ("erfcx", z), ("log_ndtr", z * 5),
            ("gamma", z), ("gammasgn", z), ("loggamma", a), ("factorial", a), ("i0e", z),
            ("exp1", a), ("expi", z),
            ("i1e", z), ("i1", z), ("i0", z), ("entr", u), ("softmax", z), ("log_softmax", z)]


def _binary(u, z, a, b):
    return [("gammainc", a, b), ("gammaincc", a, b), ("betaln", a, b), ("beta", a, b),
            ("comb", a + 8, b), ("poch", a, b), ("rel_entr", u, b), ("kl_div", u, b),
            ("zeta", a + 1.5, b)]


def _second_order(u, z):
    return [("erfinv", 2 * u - 1), ("ndtri", u), ("log_ndtr", z * 5), ("i0e", z), ("i1e", z)]


def test_values_and_gradients_against_jax():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(2)
    u, z = rng.uniform(0.01, 0.99, 6), rng.standard_normal(6) * 3
    a, b = rng.uniform(0.5, 8.0, 6), rng.uniform(0.5, 8.0, 6)
    with jax_x64(jax):
        want = jax.jit(lambda *v: _jax_table(jax, *v))(u, z, a, b)
    want = jax.tree_util.tree_map(np.asarray, want)

    def close(got, key, rtol):
        np.testing.assert_allclose(got.numpy(), want[key], rtol=rtol, err_msg=key)

    for name, v in _unary(u, z, a):
        # JAX's log_ndtr is log(ndtr(x)) up to x = 8, 1e-11 off where ndtr(x) is near 1
        close(getattr(sp, name)(v), name, 1e-10 if name == "log_ndtr" else 1e-12)
    for name, v, w in _binary(u, z, a, b):
        close(getattr(sp, name)(v, w), name, 1e-11)
    close(sp.betainc(a, b, u), "betainc", 1e-11)
    close(sp.multigammaln(a + 3, 4), "multigammaln", 1e-13)
    for name in ("ppf", "isf"):
        close(getattr(norm, name)(u, 1.0, 2.0), "norm." + name, 1e-12)
    for name in ("logcdf", "logsf"):
        close(getattr(norm, name)(z, 1.0, 2.0), "norm." + name, 1e-12)
    # gradients: JAX's derivative in a for gammainc and gammaincc, and in x
    for name in ("gammainc", "gammaincc", "betaln"):
        ours = getattr(sp, name)
        got = sl.grad(lambda p, q, f=ours: sl.sum(f(p, q)), argnums=(0, 1))(
            sl.tensor(a), sl.tensor(b))
        for g, w in zip(got, want["grad." + name]):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-9, err_msg=name)
    close(sl.grad(lambda v: sl.sum(sp.betainc(a, b, v)))(sl.tensor(u)), "grad.betainc", 1e-11)
    for name, v in _second_order(u, z):
        close(sl.grad(sl.grad(getattr(sp, name)))(sl.tensor(v[0])), "grad2." + name, 1e-9)
    close(sl.lax.random_gamma_grad(a, b), "random_gamma_grad", 1e-12)
