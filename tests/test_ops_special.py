"""The elementwise math of ops/special.py and the jax.nn-style functions of ops/nn.py: one
table (forward against NumPy in float32/float64, gradient dtypes, VJPs against finite
differences to second order, inside a scan body), then the edges: erf's accuracy over its
whole range, rounding and integer division with negative operands, zero gradients that keep
the input's dtype, nan_to_num, one_hot, complex (JAX-convention) gradients, and JAX itself
where it is installed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import scanlib as sl
from scanlib.ops.promotion import inexact_dtype

from opcheck import A, N, P, U, case, table_tests


# --- input generators beyond opcheck's -------------------------------------------------------
def _above_one(rng, shape):
    """Inside arccosh's domain, away from its edge at 1."""
    return rng.uniform(1.2, 3.0, shape)


def _off_integers(rng, shape):
    """Values at least 0.1 from every integer and half-integer: rounding does not jump in a
    finite-difference step, and float32 rounds them as float64 does."""
    return rng.integers(-3, 4, shape) + rng.choice([0.15, 0.35, 0.65, 0.85], shape) + rng.uniform(
        -0.04, 0.04, shape)


def _off_kinks_relu6(rng, shape):
    return rng.choice([-1.0, 1.0, 3.0, 5.0, 7.0], shape) + rng.uniform(-0.5, 0.5, shape)


def _off_kinks_hard_tanh(rng, shape):
    return rng.choice([-1.6, -0.5, 0.0, 0.5, 1.6], shape) + rng.uniform(-0.3, 0.3, shape)


def _wide(rng, shape):
    """Spread over erf's pieces: |x| up to 4, both signs."""
    return rng.uniform(-4.0, 4.0, shape)


def _off_multiples(rng, shape):
    """x for x // y and x % y with |y| in [0.5, 2]: kept off the jumps where x / y is an
    integer (below, x = y * (k + f) with f in [0.2, 0.8])."""
    return rng.integers(-3, 4, shape) + rng.uniform(0.2, 0.8, shape)


O, W, M = _off_integers, _wide, _off_multiples


# --- NumPy references ------------------------------------------------------------------------
def _np_erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _np_erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _np_gelu_erf(x):
    return (x * (1 + _np_erf(x / math.sqrt(2))) / 2).astype(x.dtype)


def _np_log_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _np_elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


_SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946)


CASES = [
    # special.py: holomorphic functions
    case("square", sl.square, (N, (3, 4)), ref=np.square),
    case("expm1", sl.expm1, (N, (3, 4)), ref=np.expm1),
    case("log2", sl.log2, (P, (3, 4)), ref=np.log2),
    case("log10", sl.log10, (P, (3, 4)), ref=np.log10),
    case("tan", sl.tan, (U, (3, 4)), ref=np.tan),
    case("sinh", sl.sinh, (N, (3, 4)), ref=np.sinh),
    case("cosh", sl.cosh, (N, (3, 4)), ref=np.cosh),
    case("arcsin", sl.arcsin, (U, (3, 4)), ref=np.arcsin),
    case("arccos", sl.arccos, (U, (3, 4)), ref=np.arccos),
    case("arctan", sl.arctan, (N, (3, 4)), ref=np.arctan),
    case("arcsinh", sl.arcsinh, (N, (3, 4)), ref=np.arcsinh),
    case("arccosh", sl.arccosh, (_above_one, (3, 4)), ref=np.arccosh),
    case("arctanh", sl.arctanh, (U, (3, 4)), ref=np.arctanh),
    case("reciprocal", sl.reciprocal, (A, (3, 4)), ref=np.reciprocal),
    case("rsqrt", sl.rsqrt, (P, (3, 4)), ref=lambda x: 1 / np.sqrt(x)),
    case("cbrt", sl.cbrt, (A, (3, 4)), ref=np.cbrt),
    # real-only functions
    case("erf", sl.erf, (W, (3, 4)), ref=_np_erf),
    case("erfc", sl.erfc, (W, (3, 4)), ref=_np_erfc),
    case("arctan2", sl.arctan2, (A, (3, 4)), (A, (3, 4)), ref=np.arctan2),
    case("arctan2-bcast-scalar", lambda y: sl.arctan2(y, -1.5), (A, (3,)),
         ref=lambda y: np.arctan2(y, -1.5)),
    case("logaddexp", sl.logaddexp, (N, (3, 4)), (N, (3, 4)), ref=np.logaddexp),
    case("logaddexp-bcast", sl.logaddexp, (N, (3, 1)), (N, (4,)), ref=np.logaddexp),
    case("logaddexp-scalar", lambda x: sl.logaddexp(x, 0.5), (N, (5,)),
         ref=lambda x: np.logaddexp(x, x.dtype.type(0.5))),
    case("nan_to_num-finite", sl.nan_to_num, (N, (3, 4)), ref=np.nan_to_num),
    # piecewise constant: zero gradients, checked by finite differences too
    case("floor", sl.floor, (O, (3, 4)), ref=np.floor),
    case("ceil", sl.ceil, (O, (3, 4)), ref=np.ceil),
    case("trunc", sl.trunc, (O, (3, 4)), ref=np.trunc),
    case("rint", sl.rint, (O, (3, 4)), ref=np.rint),
    case("round", sl.round, (O, (3, 4)), ref=np.round),
    case("round-decimals", lambda x: sl.round(x * 0.1, 1) + x, (O, (3, 4)),
         ref=lambda x: np.round(x * x.dtype.type(0.1), 1) + x),
    case("floor-plus-x", lambda x: sl.floor(x) * x, (O, (3, 4)), ref=lambda x: np.floor(x) * x),
    case("floor_divide", lambda x, y: sl.floor_divide(x * y, y), (M, (3, 4)), (A, (4,)),
         ref=lambda x, y: np.floor_divide(x * y, y)),
    case("remainder", lambda x, y: sl.remainder(x * y, y), (M, (3, 4)), (A, (4,)),
         ref=lambda x, y: np.remainder(x * y, y)),
    case("mod", lambda x, y: sl.mod(x * y, y), (M, (3, 4)), (A, (3, 1)),
         ref=lambda x, y: np.mod(x * y, y)),
    case("fmod", lambda x, y: sl.fmod(x * y, y), (M, (3, 4)), (A, (4,)),
         ref=lambda x, y: np.fmod(x * y, y)),
    case("remainder-scalar", lambda x: sl.remainder(x, 0.75), (O, (5,)),
         ref=lambda x: np.remainder(x, x.dtype.type(0.75))),
    # nn.py
    case("gelu", sl.gelu, (N, (3, 4)), ref=_np_gelu_tanh),
    case("gelu-exact", lambda x: sl.gelu(x, approximate=False), (N, (3, 4)), ref=_np_gelu_erf),
    case("silu", sl.silu, (N, (3, 4)), ref=lambda x: x / (1 + np.exp(-x))),
    case("swish", sl.swish, (N, (3,)), ref=lambda x: x / (1 + np.exp(-x))),
    case("elu", sl.elu, (A, (3, 4)), ref=_np_elu),
    case("elu-alpha", lambda x: sl.elu(x, 0.5), (A, (3, 4)), ref=lambda x: _np_elu(x, 0.5)),
    case("leaky_relu", sl.leaky_relu, (A, (3, 4)),
         ref=lambda x: np.where(x >= 0, x, x * x.dtype.type(0.01))),
    case("leaky_relu-slope", lambda x: sl.leaky_relu(x, 0.2), (A, (3, 4)),
         ref=lambda x: np.where(x >= 0, x, x * x.dtype.type(0.2))),
    case("celu", lambda x: sl.celu(x, 0.7), (A, (3, 4)),
         ref=lambda x: np.maximum(x, 0) + 0.7 * np.expm1(np.minimum(x, 0) / 0.7)),
    case("selu", sl.selu, (A, (3, 4)), ref=lambda x: _SELU[1] * _np_elu(x, _SELU[0])),
    case("log_sigmoid", sl.log_sigmoid, (A, (3, 4)), ref=lambda x: -np.logaddexp(0, -x)),
    case("softsign", sl.softsign, (A, (3, 4)), ref=lambda x: x / (np.abs(x) + 1)),
    case("relu6", sl.relu6, (_off_kinks_relu6, (3, 4)), ref=lambda x: np.clip(x, 0, 6)),
    case("hard_tanh", sl.hard_tanh, (_off_kinks_hard_tanh, (3, 4)),
         ref=lambda x: np.clip(x, -1, 1)),
    case("log_softmax", sl.log_softmax, (N, (3, 4)), ref=_np_log_softmax),
    case("log_softmax-axis0", lambda x: sl.log_softmax(x, axis=0), (N, (3, 4)),
         ref=lambda x: _np_log_softmax(x, axis=0)),
    case("log_softmax-all", lambda x: sl.log_softmax(x, axis=None), (N, (3, 4)),
         ref=lambda x: _np_log_softmax(x, axis=None)),
]


(test_forward_matches_numpy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


# --- erf ---------------------------------------------------------------------------------------
ERF_POINTS = [0.0, 1e-8, -1e-8, 0.5, -0.5, 3.0, -3.0, 6.0, -6.0, 30.0, -30.0, np.inf, -np.inf]


def test_erf_at_named_points(backend):
    x = np.array(ERF_POINTS)
    got = sl.erf(backend.tensor(x)).numpy()
    np.testing.assert_array_equal(got, [math.erf(v) for v in x])
    got_c = sl.erfc(backend.tensor(x)).numpy()
    np.testing.assert_allclose(got_c, [math.erfc(v) for v in x], rtol=1e-15, atol=0)
    assert np.isnan(sl.erf(backend.tensor([np.nan])).numpy()).all()
    assert np.isnan(sl.erfc(backend.tensor([np.nan])).numpy()).all()
    assert np.signbit(sl.erf(backend.tensor([-0.0])).numpy()[0])  # erf(-0) = -0, as libm


def test_erf_accuracy_over_its_range(backend):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-7, 7, 20000),
                        rng.choice([-1, 1], 20000) * 10.0 ** rng.uniform(-300, 1.5, 20000)])
    want = np.array([math.erf(v) for v in x])
    got = sl.erf(backend.tensor(x)).numpy()
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-300)
    assert rel.max() < 1e-15, f"erf: worst relative error {rel.max():.3g} at x={x[rel.argmax()]}"
    tail = x[(x > -6) & (x < 26)]  # erfc is normal (not subnormal) there
    want_c = np.array([math.erfc(v) for v in tail])
    rel_c = np.abs(sl.erfc(backend.tensor(tail)).numpy() - want_c) / want_c
    assert rel_c.max() < 1e-15, f"erfc: worst relative error {rel_c.max():.3g}"


def test_erf_float32_is_the_rounded_float64_value(backend):
    x = np.random.default_rng(1).uniform(-5, 5, 20000).astype(np.float32)
    for fn, ref in ((sl.erf, math.erf), (sl.erfc, math.erfc)):
        got = fn(backend.tensor(x))
        assert got.dtype == np.float32
        # bit for bit: the same float64 operations, rounded once
        own = fn(backend.tensor(x.astype(np.float64))).numpy().astype(np.float32)
        np.testing.assert_array_equal(got.numpy(), own)
        # the C library's erf is other code (its exp is not NumPy's, whose SIMD loops differ
        # by CPU): 1e-15 apart in float64 (the test above), so at most 1 ulp in float32
        want = np.array([ref(float(v)) for v in x]).astype(np.float32)
        np.testing.assert_array_max_ulp(got.numpy(), want, maxulp=1)


def test_erf_gradient_and_dtypes(backend):
    x = backend.tensor(np.float32([-30.0, -1.0, 0.0, 0.5, 30.0]), requires_grad=True)
    g = sl.grad(lambda x: sl.erf(x).sum())(x)
    assert g.dtype == np.float32
    want = 2 / np.sqrt(np.pi) * np.exp(-np.float64([-30.0, -1.0, 0.0, 0.5, 30.0]) ** 2)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
    assert sl.erf(backend.tensor([0, 1, 2])).dtype == np.float64  # integers: float64, as NumPy
    with pytest.raises(TypeError, match="erf: got complex input"):
        sl.erf(backend.tensor(np.ones(2, np.complex128)))


# --- rounding, division ------------------------------------------------------------------------
def test_round_is_half_to_even(backend):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5])
    np.testing.assert_array_equal(sl.round(backend.tensor(x)).numpy(), [-2, -2, -0, 0, 2, 2, 4])
    np.testing.assert_array_equal(sl.rint(backend.tensor(x)).numpy(), np.rint(x))
    y = np.array([0.125, 0.375, 2.675, -1.25])
    np.testing.assert_array_equal(sl.round(backend.tensor(y), 2).numpy(), np.round(y, 2))
    ints = np.array([-15, -5, 5, 15, 25])
    r = sl.round(backend.tensor(ints), -1)
    assert r.dtype == ints.dtype
    np.testing.assert_array_equal(r.numpy(), np.round(ints, -1))
    with pytest.raises(TypeError):
        sl.round(backend.tensor(y), 1.5)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_rounding_integers_keeps_numpys_dtype(backend, dtype):
    x = np.array([0, 1, 3], dtype)
    for fn, ref in ((sl.floor, np.floor), (sl.ceil, np.ceil), (sl.trunc, np.trunc),
                    (sl.rint, np.rint)):
        out = fn(backend.tensor(x))
        assert out.dtype == ref(x).dtype, fn.__name__
        np.testing.assert_array_equal(out.numpy(), ref(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_floor_divide_and_remainder_with_negative_operands(backend, dtype):
    x = np.array([-7, 7, -7, 7, -6, 0], dtype)
    y = np.array([2, -2, -2, 2, 3, -3], dtype)
    q = sl.floor_divide(backend.tensor(x), backend.tensor(y))
    r = sl.remainder(backend.tensor(x), backend.tensor(y))
    assert q.dtype == dtype and r.dtype == dtype
    np.testing.assert_array_equal(q.numpy(), [-4, -4, 3, 3, -2, 0])
    np.testing.assert_array_equal(r.numpy(), [1, -1, -1, 1, 0, 0])
    np.testing.assert_array_equal(sl.mod(backend.tensor(x), backend.tensor(y)).numpy(),
                                  np.mod(x, y))
    np.testing.assert_array_equal(sl.fmod(backend.tensor(x), backend.tensor(y)).numpy(),
                                  np.fmod(x, y))
    if np.dtype(dtype).kind == "f":  # Python's own // and % agree
        np.testing.assert_array_equal(q.numpy(), [a // b for a, b in zip(x, y)])
        np.testing.assert_array_equal(r.numpy(), [a % b for a, b in zip(x, y)])


def test_remainder_and_floor_divide_gradients(backend):
    x = backend.tensor([-7.5, 7.5, 5.0], requires_grad=True)
    y = backend.tensor([2.0, -2.0, 3.0], requires_grad=True)
    gx, gy = sl.grad(lambda x, y: sl.remainder(x, y).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy.numpy(), -np.floor(np.array([-7.5, 7.5, 5.0]) /
                                                         np.array([2.0, -2.0, 3.0])))
    gx, gy = sl.grad(lambda x, y: sl.floor_divide(x, y).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.numpy(), 0.0)
    np.testing.assert_array_equal(gy.numpy(), 0.0)
    gx, gy = sl.grad(lambda x, y: sl.fmod(x, y).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy.numpy(), [3.0, 3.0, -1.0])  # -trunc(x / y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_piecewise_constant_ops_have_zero_gradients_of_the_input_dtype(backend, dtype):
    x = backend.tensor(np.array([-1.5, -0.2, 0.4, 2.5], dtype), requires_grad=True)
    for fn in (sl.floor, sl.ceil, sl.trunc, sl.rint, sl.round, lambda x: sl.round(x, 1),
               lambda x: sl.floor_divide(x, 0.7)):
        g = sl.grad(lambda x, fn=fn: (fn(x) * 3.0).sum())(x)
        assert g.dtype == dtype and g.shape == x.shape
        np.testing.assert_array_equal(g.numpy(), 0.0)
        # what they make carries no derivative, as sign's (JAX's zero tangent)
        assert not fn(x).requires_grad
        (fn(x) * x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), fn(x).numpy())
        x.grad = None
    ys = backend.tensor(np.array([[0.5, 1.5], [2.5, -3.5]], dtype), requires_grad=True)
    g = sl.grad(lambda ys: sl.scan(lambda c, y: (c + sl.sum(sl.floor(y) * y), sl.ceil(y)),
                                   backend.tensor(np.zeros((), dtype)), ys)[0])(ys)
    assert g.dtype == dtype
    np.testing.assert_array_equal(g.numpy(), np.floor(ys.numpy()))


def test_isnan_isinf(backend):
    x = backend.tensor([1.0, np.nan, np.inf, -np.inf], requires_grad=True)
    for fn, want in ((sl.isnan, [False, True, False, False]),
                     (sl.isinf, [False, False, True, True])):
        out = fn(x)
        assert out.dtype == np.bool_ and not out.requires_grad
        np.testing.assert_array_equal(out.numpy(), want)
    assert not sl.isnan(backend.tensor([1, 2])).numpy().any()


# --- nan_to_num --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_to_num_values_and_gradient(backend, dtype):
    values = np.array([1.5, np.nan, np.inf, -np.inf, -2.0], dtype)
    x = backend.tensor(values, requires_grad=True)
    np.testing.assert_array_equal(sl.nan_to_num(x).numpy(), np.nan_to_num(values))
    out = sl.nan_to_num(x, nan=-1.0, posinf=10.0, neginf=-10.0)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), [1.5, -1.0, 10.0, -10.0, -2.0])
    weights = backend.tensor(np.arange(5.0, dtype=dtype))
    g = sl.grad(lambda x: (sl.nan_to_num(x, posinf=9.0, neginf=-9.0) * weights).sum())(x)
    assert g.dtype == dtype
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0, 0.0, 4.0])
    with pytest.raises(TypeError, match="posinf must be a real number"):
        sl.nan_to_num(x, posinf="big")


# --- one_hot -----------------------------------------------------------------------------------
def test_one_hot(backend):
    labels = backend.tensor([0, 2, -1, 3, 1])
    out = sl.one_hot(labels, 3)
    assert out.dtype == np.float64 and out.shape == (5, 3)
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0],
                                                [0, 1, 0]])
    backend.check_device(out)
    grid = np.array([[0, 1], [2, 7]])
    first = sl.one_hot(backend.tensor(grid), 3, dtype=np.float32, axis=0)
    assert first.dtype == np.float32 and first.shape == (3, 2, 2)
    np.testing.assert_array_equal(first.numpy(), np.moveaxis(_np_one_hot(grid, 3), -1, 0))
    np.testing.assert_array_equal(sl.one_hot(backend.tensor(np.array([300], np.uint16)), 2)
                                  .numpy(), [[0, 0]])
    with pytest.raises(TypeError, match="labels must be integers"):
        sl.one_hot(backend.tensor([0.0, 1.0]), 2)
    with pytest.raises(ValueError, match="out of range"):
        sl.one_hot(labels, 3, axis=2)


def _np_one_hot(labels, n):
    return (labels[..., None] == np.arange(n)).astype(np.float64)


def test_one_hot_inside_a_scan_body(backend):
    labels = backend.tensor(np.array([[0, 1], [2, 5], [1, 1]]))
    W = backend.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)

    def loss(W):
        def body(c, y):
            return c + sl.sum(sl.one_hot(y, 3) @ W), None
        return sl.scan(body, backend.tensor(0.0), labels)[0]

    g = sl.grad(loss)(W)
    counts = _np_one_hot(backend.numpy(labels).reshape(-1), 3).sum(0)
    np.testing.assert_array_equal(g.numpy(), np.repeat(counts[:, None], 2, axis=1))


# --- kinks and extremes -------------------------------------------------------------------------
def _grad_at(fn, values, backend):
    return sl.grad(lambda x: fn(x).sum())(backend.tensor(np.array(values))).numpy()


def test_gradients_at_kinks_are_jaxs(backend):
    np.testing.assert_array_equal(_grad_at(sl.relu6, [0.0, 6.0, 3.0], backend), [0, 0, 1])
    np.testing.assert_array_equal(_grad_at(sl.leaky_relu, [0.0], backend), [1.0])
    np.testing.assert_array_equal(_grad_at(sl.elu, [0.0], backend), [1.0])
    np.testing.assert_array_equal(_grad_at(lambda x: sl.elu(x, 2.0), [0.0], backend), [2.0])
    np.testing.assert_array_equal(_grad_at(sl.celu, [0.0], backend), [1.0])
    np.testing.assert_array_equal(_grad_at(sl.hard_tanh, [-1.0, 1.0, 2.0], backend), [1, 1, 0])
    np.testing.assert_array_equal(_grad_at(sl.softsign, [0.0], backend), [1.0])
    np.testing.assert_array_equal(_grad_at(sl.log_sigmoid, [0.0], backend), [0.5])


def test_nan_stays_nan_through_the_clipping_activations(backend):
    for fn in (sl.relu6, sl.hard_tanh, sl.leaky_relu, sl.elu, sl.gelu, sl.softsign):
        assert np.isnan(fn(backend.tensor([np.nan])).numpy()).all(), fn.__name__


def test_logaddexp_at_infinities(backend):
    x = backend.tensor([-np.inf, np.inf, np.inf, -np.inf, 1000.0, -50.0], requires_grad=True)
    y = backend.tensor([-np.inf, 0.0, np.inf, 0.0, 1000.0, 0.0], requires_grad=True)
    with np.errstate(invalid="raise"):
        out = sl.logaddexp(x, y).numpy()
    np.testing.assert_array_equal(out[:5], [-np.inf, np.inf, np.inf, 0.0, 1000.0 + np.log(2)])
    with np.errstate(all="raise"):  # the rule computes no inf - inf, even where unused
        _, back = sl.vjp(sl.logaddexp, x, y)
        gx, gy = back(backend.tensor(np.ones(6)))
    np.testing.assert_allclose(gx.numpy(), [0.5, 1.0, 0.5, 0.0, 0.5, np.exp(-50.0)],
                               rtol=1e-12)
    np.testing.assert_allclose(gy.numpy(), [0.5, 0.0, 0.5, 1.0, 0.5, 1.0], rtol=1e-12)
    with np.errstate(invalid="ignore"):  # NumPy's logaddexp warns on nan input
        g_nan = sl.grad(lambda x: sl.logaddexp(x, 1.0).sum())(backend.tensor([np.nan]))
    assert np.isnan(g_nan.numpy()).all()


def test_log_softmax_is_stable(backend):
    x = backend.tensor([[1000.0, 0.0, -1000.0]])
    np.testing.assert_allclose(sl.log_softmax(x).numpy(), [[0.0, -1000.0, -2000.0]])


# --- dtypes and errors ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_inputs_follow_jaxs_result_dtypes(backend, dtype):
    # integer functions keep NumPy's dtype; float functions compute in JAX's float for the
    # integer type (float32 for int32 and bool, where NumPy takes float64 and float16)
    x = np.array([1, 0, 1], dtype)
    floats = np.asarray(x, inexact_dtype(x.dtype))
    for fn, ref, arg in ((sl.square, np.square, x), (sl.expm1, np.expm1, floats),
                         (sl.log2, np.log2, floats), (sl.arctan, np.arctan, floats),
                         (sl.cbrt, np.cbrt, floats), (sl.isinf, np.isinf, x),
                         (sl.nan_to_num, np.nan_to_num, x), (sl.cosh, np.cosh, floats)):
        with np.errstate(divide="ignore"):
            out, want = fn(backend.tensor(x)), ref(arg)
        assert out.dtype == want.dtype, (fn.__name__, out.dtype, want.dtype)
        np.testing.assert_array_equal(out.numpy(), want)


def test_python_scalars_do_not_upcast(backend):
    x = backend.tensor(np.float32([0.5, 1.5]))
    for out in (sl.arctan2(x, 2.0), sl.logaddexp(x, 1.0), sl.remainder(x, 0.3),
                sl.floor_divide(x, 0.3), sl.fmod(x, 0.3), sl.round(x, 1), sl.rsqrt(x),
                sl.nan_to_num(x), sl.gelu(x), sl.gelu(x, approximate=False), sl.elu(x),
                sl.leaky_relu(x), sl.celu(x), sl.selu(x), sl.relu6(x), sl.hard_tanh(x),
                sl.softsign(x), sl.log_sigmoid(x), sl.erfc(x)):
        assert out.dtype == np.float32


@pytest.mark.parametrize("fn", [sl.floor, sl.ceil, sl.trunc, sl.erf, sl.erfc, sl.cbrt,
                                lambda z: sl.arctan2(z, z), lambda z: sl.logaddexp(z, z),
                                lambda z: sl.remainder(z, z), lambda z: sl.floor_divide(z, 2.0),
                                sl.nan_to_num])
def test_real_only_functions_refuse_complex_input(backend, fn):
    with pytest.raises(TypeError, match="complex input"):
        fn(backend.tensor(np.array([1 + 1j, 2.0])))


def test_numpy_dispatch(backend):
    x = backend.tensor([0.3, 1.7, -2.5], requires_grad=True)
    for np_fn, fn in ((np.square, sl.square), (np.expm1, sl.expm1), (np.floor, sl.floor),
                      (np.arctan2, lambda a: sl.arctan2(a, a)), (np.isnan, sl.isnan),
                      (np.round, sl.round), (np.around, sl.round), (np.nan_to_num, sl.nan_to_num),
                      (np.remainder, lambda a: sl.remainder(a, a))):
        args = (x, x) if np_fn in (np.arctan2, np.remainder) else (x,)
        out = np_fn(*args)
        assert isinstance(out, sl.Tensor), np_fn.__name__
        np.testing.assert_array_equal(out.numpy(), fn(x).numpy())
    np.testing.assert_allclose(sl.grad(lambda x: np.sinh(x).sum())(x).numpy(),
                               np.cosh(x.detach().numpy()))
    np.testing.assert_array_equal(np.round(x, 1).numpy(), np.round(x.detach().numpy(), 1))


# --- complex: JAX's convention, ct * f'(z) -------------------------------------------------------
HOLOMORPHIC = [sl.square, sl.expm1, sl.log2, sl.log10, sl.tan, sl.sinh, sl.cosh, sl.arcsin,
               sl.arccos, sl.arctan, sl.arcsinh, sl.arccosh, sl.arctanh, sl.reciprocal, sl.rsqrt]


@pytest.mark.parametrize("fn", HOLOMORPHIC, ids=lambda f: f.__name__)
def test_complex_gradients_follow_jax(backend, fn):
    """For a real loss L(z) = Re(sum(ct * f(z))), the gradient JAX returns is
    dL/dRe(z) - 1j dL/dIm(z) (which is ct * f'(z)); checked by central differences."""
    rng = np.random.default_rng(5)
    z = rng.uniform(0.3, 0.8, 4) + 1j * rng.uniform(-0.6, 0.6, 4)
    ct = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    out, back = sl.vjp(fn, backend.tensor(z))
    assert out.dtype == np.complex128
    (got,) = back(backend.tensor(ct))
    assert got.dtype == np.complex128

    def loss(v):
        return float(np.sum(ct * fn(backend.tensor(v)).numpy()).real)

    h = 1e-6
    want = np.empty(4, complex)
    for i in range(4):
        e = np.zeros(4)
        e[i] = h
        d_re = (loss(z + e) - loss(z - e)) / (2 * h)
        d_im = (loss(z + 1j * e) - loss(z - 1j * e)) / (2 * h)
        want[i] = d_re - 1j * d_im
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-8)


# --- against JAX, where it is installed ----------------------------------------------------------
def _jax():
    jax = pytest.importorskip("jax")
    pytest.importorskip("jax.scipy.special")
    return jax, pytest.importorskip("jax.numpy")


def test_gelu_matches_jax(backend):
    jax, jnp = _jax()
    values = np.linspace(-6.0, 6.0, 41)
    with jax.enable_x64(True):
        for approximate in (True, False):
            want = jax.nn.gelu(jnp.asarray(values), approximate=approximate)
            want_g = jax.grad(lambda x, a=approximate: jax.nn.gelu(x, approximate=a).sum())(
                jnp.asarray(values))
            x = backend.tensor(values)
            got = sl.gelu(x, approximate).numpy()
            got_g = sl.grad(lambda x, a=approximate: sl.gelu(x, a).sum())(x).numpy()
            # Far in the negative tail, 1 + tanh(u) cancels: there XLA's tanh and libm's
            # differ in the last bits, magnified; elsewhere the two agree closely.
            core = np.abs(values) <= 3
            np.testing.assert_allclose(got[core], np.asarray(want)[core], rtol=1e-13)
            np.testing.assert_allclose(got_g[core], np.asarray(want_g)[core], rtol=1e-12)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-15)
            np.testing.assert_allclose(got_g, want_g, rtol=1e-5, atol=1e-15)


JAX_PAIRS = [
    ("relu6", lambda jax, jnp: jax.nn.relu6, [-1.0, 0.0, 3.0, 6.0, 7.0]),
    ("elu", lambda jax, jnp: jax.nn.elu, [-1.0, 0.0, 2.0]),
    ("celu", lambda jax, jnp: jax.nn.celu, [-1.0, 0.0, 2.0]),
    ("selu", lambda jax, jnp: jax.nn.selu, [-1.0, 0.0, 2.0]),
    ("leaky_relu", lambda jax, jnp: jax.nn.leaky_relu, [-1.0, 0.0, 2.0]),
    ("hard_tanh", lambda jax, jnp: jax.nn.hard_tanh, [-2.0, -1.0, 0.0, 1.0, 2.0]),
    ("log_sigmoid", lambda jax, jnp: jax.nn.log_sigmoid, [-30.0, 0.0, 30.0]),
    ("softsign", lambda jax, jnp: jax.nn.soft_sign, [-2.0, 0.0, 2.0]),
    ("silu", lambda jax, jnp: jax.nn.silu, [-2.0, 0.0, 2.0]),
    ("erf", lambda jax, jnp: jax.scipy.special.erf, [-3.0, -0.5, 0.0, 1.0, 5.0]),
    ("erfc", lambda jax, jnp: jax.scipy.special.erfc, [-3.0, -0.5, 0.0, 1.0, 5.0]),
    ("round", lambda jax, jnp: jnp.round, [-1.5, -0.5, 0.5, 2.5]),
    ("floor", lambda jax, jnp: jnp.floor, [-1.5, 0.5]),
    ("nan_to_num", lambda jax, jnp: jnp.nan_to_num, [np.nan, np.inf, -np.inf, 1.0]),
    ("log_softmax", lambda jax, jnp: jax.nn.log_softmax, [1.0, 2.0, -3.0]),
    ("arccosh", lambda jax, jnp: jnp.arccosh, [1.5, 3.0]),
    ("cbrt", lambda jax, jnp: jnp.cbrt, [-8.0, 2.0]),
]


@pytest.mark.parametrize("name,jax_fn,values", JAX_PAIRS, ids=[p[0] for p in JAX_PAIRS])
def test_values_and_gradients_match_jax(backend, name, jax_fn, values):
    jax, jnp = _jax()
    values = np.array(values)
    with jax.enable_x64(True):
        f = jax_fn(jax, jnp)
        want = np.asarray(f(jnp.asarray(values)))
        want_g = np.asarray(jax.grad(lambda x: f(x).sum())(jnp.asarray(values)))
    x = backend.tensor(values)
    fn = getattr(sl, name)
    np.testing.assert_allclose(fn(x).numpy(), want, rtol=1e-14)
    np.testing.assert_allclose(sl.grad(lambda x: fn(x).sum())(x).numpy(), want_g, rtol=1e-13)


def test_remainder_gradients_match_jax(backend):
    jax, jnp = _jax()
    x, y = np.array([-7.5, 7.5, 5.0, -1.0]), np.array([2.0, -2.0, 3.0, 0.75])
    with jax.enable_x64(True):
        for jf, sf in ((jnp.remainder, sl.remainder), (jnp.floor_divide, sl.floor_divide),
                       (jnp.fmod, sl.fmod), (jnp.arctan2, sl.arctan2),
                       (jnp.logaddexp, sl.logaddexp)):
            want = jax.grad(lambda a, b, f=jf: f(a, b).sum(), argnums=(0, 1))(
                jnp.asarray(x), jnp.asarray(y))
            got = sl.grad(lambda a, b, f=sf: f(a, b).sum(), argnums=(0, 1))(
                backend.tensor(x), backend.tensor(y))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-13, atol=0)


# --- what the loop compiler may rely on ---------------------------------------------------------
def _primitives():
    from scanlib.ops import special

    return [p for p in vars(special).values() if isinstance(p, sl.Primitive)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_declared_ufunc_and_out_impl_compute_the_impl(backend, dtype):
    """`ufunc=` and `out_impl=` promise the impl's result, written into `out=`."""
    rng = np.random.default_rng(2)
    a = backend.array(rng.uniform(0.3, 0.9, (2, 3)) * (3 if dtype == np.int64 else 1), dtype)
    b = backend.array(rng.uniform(0.3, 0.9, (3,)) + (1 if dtype == np.int64 else 0), dtype)
    checked = 0
    for prim in _primitives():
        if not (prim.ufunc or prim.out_impl) or prim.name == "round":
            continue
        bits = prim.name in ("bitwise_and", "bitwise_or", "bitwise_xor", "invert")
        if bits and dtype != np.int64:  # integers and bools only, as NumPy's
            continue
        assert prim.elementwise, prim.name
        args = (b, b) if prim.name in ("arctan2", "logaddexp", "floor_divide", "remainder",
                                       "fmod", "logical_xor", "bitwise_and", "bitwise_or",
                                       "bitwise_xor") else (a,)
        with np.errstate(all="ignore"):
            want = prim.impl(*args)
            out = sl.backends.xp_of(want).empty_like(want)
            if prim.ufunc:
                getattr(sl.backends.xp_of(out), prim.ufunc)(*args, out=out)
            else:
                prim.out_impl(*args, out=out)
        np.testing.assert_array_equal(backend.numpy(out), backend.numpy(want), prim.name)
        checked += 1
    assert checked >= 25


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_rounding_inside_a_scan_matches_the_loop(backend, dtype):
    xs = backend.tensor((np.arange(12).reshape(4, 3) * 0.7 - 4).astype(dtype))

    def body(c, x):
        y = sl.floor(x) + sl.ceil(x * 2) + sl.trunc(x) + sl.remainder(x, 3)
        return c + y, (sl.floor_divide(y, 2), sl.rint(x * 0.5))  # rint(int): float, as NumPy

    # The carry takes floor's dtype: integers from NumPy 2.1 on, float64 before.
    carry = np.zeros(3, np.result_type(dtype, np.floor(np.zeros(0, dtype))))
    c, ys = sl.scan(body, backend.tensor(carry), xs)
    c2, ys2 = backend.tensor(carry), []
    for t in range(4):
        c2, y = body(c2, xs[t])
        ys2.append(y)
    assert c.dtype == c2.dtype
    np.testing.assert_array_equal(c.numpy(), c2.numpy())
    for i in range(2):
        want = sl.stack([y[i] for y in ys2])
        assert ys[i].dtype == want.dtype
        np.testing.assert_array_equal(ys[i].numpy(), want.numpy())


# --- reported accuracy and edge cases ------------------------------------------------------------
def _ulps(got, want, dtype):
    """|got - want| in units of the spacing of want rounded to dtype; 0 where want is below
    dtype's smallest normal (XLA flushes those to zero, NumPy does not)."""
    want = np.asarray(want, np.float64)
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    normal = np.abs(want) >= np.finfo(dtype).tiny
    return np.where(normal, np.abs(np.asarray(got, np.float64) - want) / spacing, 0.0)


def _sigmoid64(x):
    x = np.asarray(x, np.float64)
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))),
                    np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_sigmoid_and_silu_are_accurate_in_the_negative_tail(backend, dtype):
    xs = np.linspace(-100.0, 100.0, 20001).astype(dtype)
    with np.errstate(over="raise", invalid="raise"):  # nothing overflows, in either branch
        got = sl.sigmoid(backend.tensor(xs)).numpy()
        silu = sl.silu(backend.tensor(xs)).numpy()
    assert got.dtype == dtype and silu.dtype == dtype
    assert _ulps(got, _sigmoid64(xs), dtype).max() <= 3
    normal = _sigmoid64(xs) >= np.finfo(dtype).tiny  # x * a subnormal sigmoid has few bits
    assert _ulps(silu, xs.astype(np.float64) * _sigmoid64(xs), dtype)[normal].max() <= 4
    tail = np.array([-8.0, -9.0] if dtype == np.float16 else [-17.0, -20.0], dtype)
    np.testing.assert_allclose(sl.silu(backend.tensor(tail)).numpy().astype(np.float64),
                               tail * _sigmoid64(tail), rtol=4 * np.finfo(dtype).eps)


def test_sigmoid_out_impl_is_its_impl_even_into_its_input(backend):
    """The loop compiler may write sigmoid into its input's buffer: same bits as impl."""
    sigmoid = sl.ops.elementwise.sigmoid
    rng = np.random.default_rng(3)
    for dtype in (np.float16, np.float32, np.float64, np.complex128):
        xs = (rng.standard_normal(50) * 30).astype(dtype)
        xs[:3] = [0.0, -0.0, np.nan]
        x = backend.array(xs)
        with np.errstate(invalid="ignore"):
            want = sigmoid.impl(x)
            out = sl.backends.xp_of(x).empty_like(want)
            sigmoid.out_impl(x, out=out)
            sigmoid.out_impl(x, out=x)
        np.testing.assert_array_equal(backend.numpy(out), backend.numpy(want), str(dtype))
        np.testing.assert_array_equal(backend.numpy(x), backend.numpy(want), str(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_short_path_gives_the_bits_of_the_general_one(dtype):
    """float32 and float64 NumPy arrays take a shorter path (sign(x) for the numerator's
    choice): the same bits as the arithmetic every other dtype and backend runs, at every
    edge (signed zeros, infinities, NaNs, subnormals, the largest finite values), through a
    view, and written into its own input."""
    ew = sl.ops.elementwise
    fi = np.finfo(dtype)
    edge = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, fi.tiny, -fi.tiny,
            fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max, 1e-8, -1e-8]
    rng = np.random.default_rng(5)
    x = np.concatenate([np.array(edge, dtype)] + [
        (rng.standard_normal(2000) * s).astype(dtype) for s in (1e-6, 1.0, 30.0, 1e3)])
    bits = np.uint32 if dtype == np.float32 else np.uint64

    def general(x):
        xp, e, nonnegative = ew._sigmoid_parts(x, x.dtype)
        out = np.maximum(e, nonnegative)
        e += 1
        return np.divide(out, e, out=out)

    with np.errstate(all="ignore"):
        for v in (x, x.reshape(-1, 2)[:, 1]):
            want = general(v).view(bits)
            np.testing.assert_array_equal(ew._sigmoid_impl(v).view(bits), want)
            np.testing.assert_array_equal(ew._sigmoid_out(v, np.empty_like(v)).view(bits), want)
            own = v.copy()
            np.testing.assert_array_equal(ew._sigmoid_out(own, own).view(bits), want)


def test_sigmoid_and_silu_match_jax(backend):
    jax, jnp = _jax()
    xs = np.linspace(-100.0, 100.0, 4001)
    for dtype in (np.float16, np.float32, np.float64):
        x = xs.astype(dtype)
        with jax.enable_x64(True):
            want = np.asarray(jax.nn.sigmoid(jnp.asarray(x)))
            want_silu = np.asarray(jax.nn.silu(jnp.asarray(x)))
            want_g = np.asarray(jax.grad(lambda v: jax.nn.sigmoid(v).sum())(jnp.asarray(x)))
        got = sl.sigmoid(backend.tensor(x)).numpy()
        assert got.dtype == want.dtype
        assert _ulps(got, want, dtype).max() <= 4, dtype
        assert _ulps(sl.silu(backend.tensor(x)).numpy(), want_silu, dtype).max() <= 6, dtype
        if dtype == np.float64:
            g = sl.grad(lambda v: sl.sigmoid(v).sum())(backend.tensor(x)).numpy()
            np.testing.assert_allclose(g, want_g, rtol=1e-13, atol=1e-300)


def _second(fn, values, backend):
    x = backend.tensor(np.array(values))
    return sl.grad(lambda v: sl.grad(lambda u: fn(u).sum())(v).sum())(x).numpy()


def test_softplus_and_log_sigmoid_second_derivatives_at_zero_and_far_out(backend):
    points = [0.0, -0.0, 50.0, -50.0, 1000.0, -1000.0]
    s, ds = _sigmoid64(points), _sigmoid64(points) * _sigmoid64(np.negative(points))
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # in neither branch
        sp = sl.softplus(backend.tensor(points)).numpy()
        ls = sl.log_sigmoid(backend.tensor(points)).numpy()
        d_sp = _grad_at(sl.softplus, points, backend)
        d_ls = _grad_at(sl.log_sigmoid, points, backend)
        dd_sp = _second(sl.softplus, points, backend)
        dd_ls = _second(sl.log_sigmoid, points, backend)
    np.testing.assert_allclose(sp, np.logaddexp(0.0, points), rtol=1e-15)
    np.testing.assert_allclose(ls, -np.logaddexp(0.0, np.negative(points)), rtol=1e-15)
    np.testing.assert_allclose(d_sp, s, rtol=1e-14)
    np.testing.assert_allclose(d_ls, _sigmoid64(np.negative(points)), rtol=1e-14)
    np.testing.assert_allclose(dd_sp, ds, rtol=1e-14)
    np.testing.assert_allclose(dd_ls, -ds, rtol=1e-14)
    assert dd_sp[0] == 0.25 and dd_ls[0] == -0.25


def test_softplus_is_one_equation_and_its_derivatives_stay_small(backend):
    x = backend.tensor(np.linspace(-3.0, 3.0, 5))
    assert [e.prim.name for e in sl.make_jaxpr(sl.softplus)(x).eqns] == ["softplus"]
    assert [e.prim.name for e in sl.make_jaxpr(sl.log_sigmoid)(x).eqns] == [
        "neg", "softplus", "neg"]
    second = sl.make_jaxpr(sl.grad(lambda v: sl.grad(lambda u: sl.softplus(u).sum())(v).sum()))
    assert len(second(x).eqns) <= 20  # the composite of where, exp and log1p had 59
    # forward mode: softplus' = sigmoid, softplus'' = sigmoid(x) sigmoid(-x), exp(-50) at 50
    points = backend.tensor(np.array([-50.0, 0.0, 1.0, 50.0]))
    _, t = sl.jvp(sl.softplus, (points,), (sl.ones_like(points),))
    np.testing.assert_allclose(t.numpy(), _sigmoid64([-50.0, 0.0, 1.0, 50.0]), rtol=1e-14)
    _, tt = sl.jvp(lambda v: sl.grad(lambda u: sl.softplus(u).sum())(v), (points,),
                   (sl.ones_like(points),))
    s = _sigmoid64([-50.0, 0.0, 1.0, 50.0])
    np.testing.assert_allclose(tt.numpy(), s * _sigmoid64([50.0, 0.0, -1.0, -50.0]),
                               rtol=1e-14)


def test_softplus_dtypes_and_complex(backend):
    for dtype in (np.float16, np.float32):
        assert sl.softplus(backend.tensor(np.array([-3.0, 3.0], dtype))).dtype == dtype
    for src in (np.array([1, -3], np.int8), np.array([True, False]), np.array([2, 0])):
        out = sl.softplus(backend.tensor(src))
        assert out.dtype == inexact_dtype(src.dtype)  # float32, float32, float64 as in JAX
        np.testing.assert_allclose(out.numpy(), np.logaddexp(0.0, src.astype(np.float64)),
                                   rtol=1e-6)
    with pytest.raises(TypeError, match="complex"):
        sl.softplus(backend.tensor([1 + 1j]))


def test_softplus_and_log_sigmoid_second_order_match_jax(backend):
    jax, jnp = _jax()
    values = np.array([-1000.0, -50.0, -1.0, 0.0, 1e-9, 1.0, 50.0, 1000.0])
    for name, jf in (("softplus", jax.nn.softplus), ("log_sigmoid", jax.nn.log_sigmoid)):
        with jax.enable_x64(True):
            want = np.asarray(jax.vmap(jax.grad(jax.grad(jf)))(jnp.asarray(values)))
        got = _second(getattr(sl, name), values, backend)
        # JAX's second derivative at 50 is 0; the true one is exp(-50), which scanlib gives
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-21, err_msg=name)


def test_log_softmax_keeps_small_differences_next_to_large_values(backend):
    got = sl.log_softmax(backend.tensor(np.array([1e8, 1e8], np.float32))).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [-np.log(2.0)] * 2, rtol=1e-7)
    x16 = np.array([100.0, 100.0, 99.0], np.float16)
    want16 = _np_log_softmax(x16.astype(np.float64))
    got16 = sl.log_softmax(backend.tensor(x16)).numpy()
    assert got16.dtype == np.float16
    np.testing.assert_allclose(got16, want16, rtol=2e-3)
    x = backend.tensor(np.array([[1e8, 1e8 + 4, -1e8], [3.0, -np.inf, 1.0]]))
    np.testing.assert_allclose(sl.log_softmax(x).numpy(), _np_log_softmax(x.numpy()))
    g = sl.grad(lambda t: (sl.log_softmax(t) * backend.tensor([[1.0, 2.0, 3.0]])).sum())(
        backend.tensor([[1e8, 1e8, 1e8 - 1e3]]))
    np.testing.assert_allclose(g.numpy(), [[1 - 6 * 0.5, 2 - 6 * 0.5, 3.0]], rtol=1e-12)
    for values in ([-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 1.0]):  # JAX's results
        with np.errstate(invalid="ignore"):
            out = sl.log_softmax(backend.tensor(values)).numpy()
        want = [np.nan, np.nan] if values[0] != -np.inf or values[1] == -np.inf else [
            -np.inf, 0.0]
        np.testing.assert_array_equal(out, want)


def test_log_softmax_matches_jax_in_low_precision(backend):
    jax, jnp = _jax()
    rng = np.random.default_rng(4)
    for dtype, scale in ((np.float16, 100.0), (np.float32, 1e6)):
        xs = (rng.standard_normal((3, 7)) * scale).astype(dtype)
        xs[0, :2] = xs[0, 2]  # a tie with the max
        with jax.enable_x64(True):
            want = np.asarray(jax.nn.log_softmax(jnp.asarray(xs), axis=-1))
        got = sl.log_softmax(backend.tensor(xs)).numpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps,
                                   atol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_exact_gelu_is_accurate_for_negative_x(backend, dtype):
    """Against x * erfc(u) / 2 with u = -x / sqrt(2) rounded as the dtype rounds it: far out,
    gelu is ill-conditioned (a rounded u alone moves it by ~x**2 ulps), but nothing more may
    be lost (1 + erf(u) cancels to nothing)."""
    xs = np.linspace(-9.0, 4.0, 1301).astype(dtype)
    u = (-xs * dtype(math.sqrt(0.5))).astype(dtype).astype(np.float64)
    tail = np.vectorize(math.erfc)(u)
    want = xs.astype(np.float64) * tail / 2
    got = sl.gelu(backend.tensor(xs), approximate=False).numpy()
    assert got.dtype == dtype
    normal = tail >= np.finfo(dtype).tiny  # x * a subnormal erfc has few bits
    assert _ulps(got, want, dtype)[normal].max() <= (2 if dtype != np.float64 else 4)


def test_exact_gelu_matches_jax_in_low_precision(backend):
    jax, jnp = _jax()
    xs = np.array([-3.0, -4.0, -6.0, -1.0, 0.5, 2.0])
    for dtype, rtol in ((np.float16, 4e-3), (np.float32, 1e-6)):
        x = xs.astype(dtype)
        with jax.enable_x64(True):
            want = np.asarray(jax.nn.gelu(jnp.asarray(x), approximate=False))
        got = sl.gelu(backend.tensor(x), approximate=False).numpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.float32])
def test_hard_tanh_keeps_an_integer_dtype(backend, dtype):
    xs = np.array([-3, -1, 0, 1, 3] if dtype != np.uint8 else [0, 1, 3, 255], dtype)
    out = sl.hard_tanh(backend.tensor(xs))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.clip(xs, -1 if dtype != np.uint8 else 0, 1))


def test_hard_tanh_integer_dtype_matches_jax(backend):
    jax, jnp = _jax()
    with jax.enable_x64(True):
        want = jax.nn.hard_tanh(jnp.array([-3, 0, 3], jnp.int32))
    out = sl.hard_tanh(backend.tensor(np.array([-3, 0, 3], np.int32)))
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(out.numpy(), np.asarray(want))


def test_python_round_and_divmod(backend):
    xs = np.array([1.26, -2.55, 7.0])
    x = backend.tensor(xs, requires_grad=True)
    for args in ((1,), (0,), ()):
        out = round(x, *args)
        assert isinstance(out, sl.Tensor) and out.dtype == np.float64
        np.testing.assert_array_equal(out.numpy(), np.round(xs, *args))
    assert round(backend.tensor(np.float32(2.5))).dtype == np.float32
    for q, r in (divmod(x, 2), divmod(x, backend.tensor([2.0, -3.0, 0.5]))):
        assert isinstance(q, sl.Tensor) and isinstance(r, sl.Tensor)
    for (q, r), (wq, wr) in ((divmod(x, 2), divmod(xs, 2)), (divmod(3.0, x), divmod(3.0, xs)),
                             (divmod(backend.tensor([7, -7]), 3),
                              divmod(np.array([7, -7]), 3))):
        assert q.dtype == wq.dtype and r.dtype == wr.dtype
        np.testing.assert_array_equal(q.numpy(), wq)
        np.testing.assert_array_equal(r.numpy(), wr)
    g = sl.grad(lambda t: divmod(t, 2)[1].sum())(x)
    np.testing.assert_array_equal(g.numpy(), np.ones(3))


def test_sigmoid_of_integers_is_computed_in_floating_point():
    """|x| is taken in the result's dtype: |int8(-128)| computed in int8 wraps to -128, and
    sigmoid(-128) came out 1.0. Integers of up to 32 bits give float32, as in JAX."""
    x = np.array([-128, -1, 0, 127], np.int8)
    got = sl.sigmoid(sl.tensor(x))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6,
                               atol=1e-38)
    assert sl.sigmoid(sl.tensor(x.astype(np.int64))).dtype == np.float64
    assert sl.sigmoid(sl.tensor(3.0)).shape == ()


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int64])
def test_bitwise_and_logical_operators_are_numpys(backend, dtype):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2 if dtype is np.bool_ else 100, (3, 4)).astype(dtype)
    b = rng.integers(0, 2 if dtype is np.bool_ else 100, (4,)).astype(dtype)
    ta, tb = backend.tensor(a), backend.tensor(b)
    for got, want in ((ta & tb, a & b), (ta | tb, a | b), (ta ^ tb, a ^ b), (~ta, ~a),
                      (ta & 1, a & 1), (1 | ta, 1 | a), (sl.bitwise_xor(ta, tb), a ^ b),
                      (np.bitwise_and(ta, tb), a & b), (np.invert(ta), ~a),
                      (sl.logical_and(ta, tb), np.logical_and(a, b)),
                      (sl.logical_or(ta, 0), np.logical_or(a, 0)),
                      (sl.logical_xor(ta, tb), np.logical_xor(a, b)),
                      (np.logical_xor(ta, tb), np.logical_xor(a, b)),
                      (sl.logical_not(ta), np.logical_not(a))):
        assert isinstance(got, sl.Tensor) and got.dtype == want.dtype, (got, want.dtype)
        np.testing.assert_array_equal(got.numpy(), want)


def test_conditions_combine_with_operators_in_loops_and_floats_are_refused():
    x = sl.tensor([1.0, 3.0, -1.0, 0.5])
    ys = sl.scan(lambda c, v: (c, (v > 0) & ~(v > 2) | (v < -0.5)), 0, x)[1]
    np.testing.assert_array_equal(ys.numpy(), [True, False, True, True])
    n, v = sl.while_loop(lambda c: (c[0] < 5) & (c[1] < 100.0), lambda c: (c[0] + 1, c[1] * 2.0),
                         (sl.tensor(0), sl.tensor(1.0)))
    assert (int(n), float(v)) == (5, 32.0)
    assert bool(sl.jit(lambda a, b: ((a > 0) ^ b).all())(np.array([1.0, -1.0]),
                                                          np.array([False, True])))
    assert (~sl.tensor(5)).item() == -6  # bits, as NumPy (it was logical not once)
    with pytest.raises(TypeError, match=r"bitwise_and: got float64 .* \(x < a\) & \(y > b\)"):
        sl.tensor(1.5) & sl.tensor(2.0)
    with pytest.raises(TypeError, match=r"invert: got float32 .* ~\(x < a\)"):
        ~sl.tensor(np.float32(1.5))
