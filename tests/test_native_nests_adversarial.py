"""Corners of the numba tier's loop nests (scanlib/scan/loop/native_nests.py): broadcasting
from both sides, empty axes, rank 0 beside rank 4, several kept axes, float32 beside Python
literals and beside float64, bool values, NaN, inf and -0.0 in reductions, batch-broadcast and
1-d matmuls, reshapes and broadcasts of strided views, complex arithmetic, second-order
gradients, reverse scans and the fused kernel of `scanlib.jit`. Each body must agree with the
Python loop and the NumPy loop (test_numba_loop's check); where a corner is about the sign of
a zero or where NaN lands, the numba loop's values must equal the NumPy loop's bit for bit.

The loop compiler moves work that feeds only the outputs out of the kernel (it runs batched
over all steps), so each body here computes the probed value into the carry."""

import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native
from test_fused import check as check_jit
from test_native_nests import kernel_source
from test_numba_loop import RNG, _t, check

T = sl.tensor


def same_bits(f, init, xs, reverse=False, signs=True):
    """The numba loop's values equal the NumPy loop's: dtypes, NaN where NaN, signs of zeros
    (unless signs=False: which zero NumPy's max of +0.0s and -0.0s gives depends on its SIMD
    lanes, so on the CPU); and a kernel ran."""
    want = sl.scan(f, init, xs, reverse=reverse)
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = sl.scan(f, init, xs, reverse=reverse, compiler="numba")
    assert native.STATS["kernel calls"] > before, "no numba kernel ran"
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        g, w = np.asarray(g.numpy()), np.asarray(w.numpy())
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        for a, b in ((g.real, w.real), (g.imag, w.imag)) if g.dtype.kind == "c" else ((g, w),):
            if signs and a.dtype.kind == "f":  # the sign of a zero (a NaN's sign bit means nothing)
                np.testing.assert_array_equal(np.signbit(a) & (a == a), np.signbit(b) & (b == b))


# --- broadcasting, ranks, keepdims ------------------------------------------------------------
def test_both_operands_broadcast_over_length_one_axes_in_a_reverse_scan():
    def f(c, x):  # c [3, 1, 4], x [1, 5, 1]: every axis of the result broadcast from one side
        h = sl.tanh(c * x + x - c)  # [3, 5, 4]
        m = sl.max(h, axis=1, keepdims=True)
        return c * 0.5 + m * 0.1 + sl.sum(h, axis=(0, 1), keepdims=True) * 0.01, (h, m)

    check(f, _t((3, 1, 4)), _t((6, 1, 5, 1)), reverse=True)
    src = kernel_source(f, _t((3, 1, 4)), _t((6, 1, 5, 1)))
    assert "for _i2 in range(4):" in src and "[0, _i1, 0]" in src


def test_rank_zero_beside_rank_four_and_reductions_over_all_axes():
    def f(c, x):  # c [], x [2, 1, 3, 1]
        h = sl.sin(c * x + c)  # 0-d beside 4-d
        big = sl.broadcast_to(h, (2, 4, 3, 2)) * c
        s = sl.sum(big) * 0.01 + sl.max(big) + sl.min(h, axis=None, keepdims=True)[0, 0, 0, 0]
        k = sl.sum(big, axis=(0, 1, 2, 3), keepdims=True)
        return s * 0.5, (k, sl.max(big, axis=(1, 3), keepdims=True), sl.min(big, axis=(0, 2)))

    check(f, sl.tensor(0.3), _t((5, 2, 1, 3, 1)))


def test_keepdims_over_several_separated_axes():
    def f(c, x):  # c [2, 1, 3, 1], x [2, 4, 3, 5]
        h = c * x
        a = sl.sum(h, axis=(1, 3), keepdims=True)
        b = sl.max(h, axis=(1, 3), keepdims=True)
        d = sl.min(h, axis=(3, 1), keepdims=True)
        return sl.tanh(a * 0.1 + b - d), (a, b, d)

    check(f, _t((2, 1, 3, 1)), _t((4, 2, 4, 3, 5)))


def test_empty_axes_in_elementwise_work_and_stores():
    def f(c, x):  # c [2, 0], x [0, 3]: results of size 0, one loop of range(0)
        h = sl.exp(c) * 2.0
        return h, (h, sl.tanh(x * 1.5), sl.sum(h, axis=0))

    check(f, T(np.zeros((2, 0))), T(np.zeros((4, 0, 3))))


def test_a_sum_over_an_empty_axis_is_plus_zero():
    def f(c, x):  # c [2], x [2, 0]: the carry becomes a sum of no elements, NumPy's +0.0
        return sl.sum(c[:, None] * x, axis=1), c

    same_bits(f, T(np.ones(2)), T(np.zeros((3, 2, 0))))


def test_a_sum_of_negative_zeros_is_numpys_zero():
    def f(c, x):  # one step: the carry becomes sums of -0.0s over one axis and over all
        h = c[0][:, None] * x
        return (sl.sum(h, axis=1), sl.sum(h, keepdims=True)[0]), c[0]

    same_bits(f, (T(np.ones(2)), T(np.ones(1))), T(np.full((1, 2, 3), -0.0)))


# --- dtypes: float32, literals, mixed, float16, bool ----------------------------------------
def test_float32_beside_python_literals_stays_float32():
    def f(c, x):
        h = c * 0.1 + x * 3 - 1e-8 + 2**40 / (c * c + 7)
        h = sl.where(h > 0.1, h, -0.25) + (h >= 2).astype("float32")
        return sl.tanh(h), (h * 1e-40, h > 1e38, sl.max(h, axis=0, keepdims=True))

    check(f, _t((2, 3), "float32"), _t((5, 2, 3), "float32"), rtol=2e-5)
    src = kernel_source(f, _t((2, 3), "float32"), _t((5, 2, 3), "float32"))
    assert "np.float64" not in src


def test_float32_beside_float64_promotes_as_numpy_does():
    def f(c, x):  # c float32 [3], x float64 [3], d a float64 0-d array beside float32
        c2 = sl.tanh(c * 0.5 + 1.0)
        h = c2.astype("float64") * x
        g = c2 * sl.tensor(np.float32(2.0))
        return c2 + g, (h, c2 > x, sl.where(x > 0, c2, x))

    check(f, _t(3, "float32"), _t((4, 3)), rtol=2e-6)


def test_float16_is_numpys_or_falls_back():
    """numba has no float16 arithmetic on the CPU: the body must fall back (with a warning)
    to the NumPy loop, never compute in another dtype."""
    def f(c, x):
        return c * x + 0.5, sl.sum(c * 2)

    init, xs = T(np.ones(3, np.float16)), T(np.full((4, 3), 0.5, np.float16))
    want = sl.scan(f, init, xs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.NumbaFallbackWarning)
        got = sl.scan(f, init, xs, compiler="numba")
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        assert g.dtype == w.dtype == np.float16
        np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_bool_values_in_and_out_of_nests(reverse):
    def f(c, x):  # c: (float [3], bool [3]); x: bool [3]
        v, m = c
        up = sl.logical_and(m, sl.logical_not(x)) | (v > 0.5)
        same = sl.equal(up, m)
        v = sl.where(up, v * 0.9, v + 0.3) + sl.where(same, 1.0, 0.0) * 0.01
        return (v, up), (up, same, sl.logical_or(x, up))

    init = (_t(3), T(np.array([True, False, True])))
    same_bits(f, init, T(RNG.random((7, 3)) > 0.5), reverse)
    src = kernel_source(f, init, T(RNG.random((7, 3)) > 0.5))
    assert "np.empty((3,), np.bool_)" in src


# --- NaN, inf, -0.0 ------------------------------------------------------------------------
def test_nan_inf_and_signed_zeros_in_max_min_sum_over_axes():
    def f(c, x):  # c [2, 2, 3]; x of the same shape
        h = c * x
        return c, (sl.max(h, axis=(0, 2), keepdims=True), sl.min(h, axis=(0, 1)),
                   sl.sum(h, axis=2), sl.max(h), sl.min(h), sl.sum(h))

    x = np.array([[[1.0, np.nan, 3.0], [np.inf, -np.inf, np.nan]],
                  [[-0.0, 0.0, -0.0], [-np.inf, -0.0, -0.0]]])
    init = T(np.ones((2, 2, 3)))

    def g(c, x):  # the same reductions feeding the carry, so they run in the kernel
        h = c * x
        new = (sl.max(h, axis=(0, 2), keepdims=True) + sl.min(h, axis=(0, 1))[None, None, :]
               + sl.sum(h, axis=2)[:, :, None] + sl.max(h) + sl.min(h) + sl.sum(h))
        return new, c

    same_bits(f, init, T(np.stack([x, x[::-1], -x])), signs=False)
    same_bits(g, init, T(np.stack([x, x[::-1], -x])), signs=False)


def test_signed_zeros_into_the_carry():
    def f(c, x):  # the sign of the zero that a sum gives is NumPy's
        h = x * (c[0][:, None] * 0.0 + 1.0)
        return (sl.sum(h, axis=1), sl.sum(h, axis=1) * 2.0), c[0]

    def g(c, x):  # max and min of mixed zeros: a zero (its sign is the CPU's choice)
        h = x * (c[0][:, None] * 0.0 + 1.0)
        return (sl.max(h, axis=1), sl.min(h, axis=1)), c[0]

    x = np.array([[-0.0, 0.0, -0.0], [0.0, -0.0, 0.0]])
    same_bits(f, (T(np.ones(2)),) * 2, T(np.stack([x, -x, x[::-1]])))
    same_bits(g, (T(np.ones(2)),) * 2, T(np.stack([x, -x, x[::-1]])), signs=False)


def test_maximum_and_minimum_of_zeros_of_both_signs():
    def f(c, x):  # c (a, b) [2]: pairs (0.0, -0.0) and (-0.0, 0.0), into the carry
        return (sl.maximum(c[0], x), sl.minimum(c[1], x)), c[0]

    same_bits(f, (T(np.array([0.0, -0.0])),) * 2, T(np.array([[-0.0, 0.0]])))


# --- matmul --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-12), ("float32", 3e-5)])
def test_matmul_with_batch_broadcasting_and_1d_operands(dtype, rtol):
    A, B, W = _t((4, 2, 5), dtype, 0.5), _t((2, 3, 4), dtype, 0.5), _t((1, 3, 2), dtype, 0.5)

    def f(c, x):  # c [1, 3, 2] (a carry), x [3]
        p = c @ A  # [1, 3, 2] @ [4, 2, 5] -> [4, 3, 5]
        q = x @ B  # [3] @ [2, 3, 4] -> [2, 4]
        r = B @ q[0]  # [2, 3, 4] @ [4] -> [2, 3]
        s = c[0] @ c[0].T + W[0] @ c[0].T  # transposed operands
        new = sl.tanh(c + sl.sum(p, axis=2)[:1, :, None] * 0.1 + r.T[None, :, :] * 0.1)
        return new, (p, q, r, s)

    check(f, _t((1, 3, 2), dtype), _t((5, 3), dtype), reverse=dtype == "float32", rtol=rtol)
    src = kernel_source(f, _t((1, 3, 2), dtype), _t((5, 3), dtype))
    assert " @ " not in src and "for _k in range(2):" in src


def test_a_matmul_over_an_empty_contraction_axis_is_plus_zero():
    def f(c, x):  # c [2], x [2, 0]: the carry becomes [2, 0] @ [0], all +0.0 in NumPy
        return (c[:, None] * x) @ T(np.zeros(0)), c

    same_bits(f, T(np.ones(2)), T(np.zeros((3, 2, 0))))


def test_a_matmul_of_negative_zero_products_is_numpys_zero():
    def f(c, x):  # one step: c [3, 2] times -0.0, then @ ones [2, 2] and @ ones [2]
        h = c[0] * x
        return (h @ T(np.ones((2, 2))), h @ T(np.ones(2))), c[0]

    same_bits(f, (T(np.ones((3, 2))), T(np.ones(3))), T(np.full((1, 3, 2), -0.0)))


def test_a_batched_matmul_over_an_empty_contraction_axis():
    def f(c, x):  # x [2, 0] @ W [0, 3] for every step at once
        return c, x @ T(np.zeros((0, 3)))

    check(f, T(0.0), T(np.zeros((3, 2, 0))), kernels=False)


# --- reshapes and broadcasts of views --------------------------------------------------------
def test_reshape_and_broadcast_of_strided_views():
    def f(c, x):  # c [4, 6], x [3, 4]
        a = sl.reshape(c.T, (3, 8))  # a transpose, read in C order of the view
        b = sl.reshape(c[::2, ::-3], (4,))  # steps, one negative
        d = sl.reshape(sl.transpose(c.reshape((2, 2, 6)), (2, 0, 1)), (6, 4))
        e = sl.broadcast_to(c[1::2, ::2][:, None, :], (2, 3, 3))  # a view broadcast
        f_ = sl.broadcast_to(x.T[:, :1].T, (2, 4))  # [1, 4], a view of a view
        new = sl.tanh(c * 0.5 + sl.reshape(a, (4, 6)) * 0.1 + sl.reshape(d, (4, 6)) * 0.01
                      + sl.sum(e) * 0.001 + sl.sum(b) * 0.01 + sl.sum(f_, axis=0)[:, None] * 0.1)
        return new, (a, b, d, e, f_)

    check(f, _t((4, 6)), _t((5, 3, 4)))


def test_gradient_rows_stored_through_ints_steps_none_and_ellipsis():
    def f(c, x):  # c [3, 4]: reads whose gradients are static-index stores (scatter_add)
        a = c[None, 1, ::-2]  # [1, 2]
        b = c[..., 1:4:2, None]  # [3, 2, 1]
        d = c[2]  # [4]
        new = sl.tanh(c * x + sl.sum(a) + b[:, :, 0].sum(axis=1, keepdims=True) + d)
        return new, (a, b)

    check(f, _t((3, 4)), _t((4, 3, 4)))


# --- complex -------------------------------------------------------------------------------
def test_complex_division_exp_and_abs():
    lam = T(np.array([0.9 + 0.1j, 0.5 - 0.4j, -0.3 + 0.8j]))

    def f(c, x):  # c complex [2, 3], x complex [2, 3]
        h = (lam * c + x) / (1.0 + c * sl.conj(c)) - sl.exp(c * 0.1j) / (2.0 - 1.0j)
        return h, (sl.abs(h), sl.real(h), sl.imag(x / h), h * 1j)

    init = T(np.ones((2, 3)) * (0.5 + 0.5j))
    xs = T(RNG.standard_normal((5, 2, 3)) + 1j * RNG.standard_normal((5, 2, 3)))
    want = sl.scan(f, init, xs)
    got = sl.scan(f, init, xs, compiler="numba")
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-13, atol=1e-13)
    assert "np.empty((2, 3), np.complex128)" in kernel_source(f, init, xs)


def test_complex_division_at_huge_and_infinite_values():
    def f(c, x):  # c complex [4]: NumPy's complex division, scaled, inf and NaN as NumPy's
        return x / c, c

    init = T(np.array([1e300 + 1e300j, 1e-300 + 1e300j, complex(np.inf, 1.0), 2.0 + 0.0j]))
    xs = T(np.array([[1e300 + 1e300j, 1e300 - 1e-300j, 1.0 + 1.0j, complex(np.inf, np.inf)]]
                    * 2))
    same_bits(f, init, xs)


def test_complex_exp_at_infinities():
    def f(c, x):
        return sl.exp(c + x), c

    vals = [complex(np.inf, 0), complex(-np.inf, 1.0), complex(np.inf, np.nan),
            complex(-np.inf, np.inf), complex(np.nan, 0.0), complex(0.0, np.inf)]
    same_bits(f, T(np.array(vals)), T(np.zeros((1, len(vals)), complex)))


# --- gradients -----------------------------------------------------------------------------
W2, XS2, U2 = (T(RNG.standard_normal(s)) for s in ((3, 3), (6, 2, 3), (2, 3)))


def _second_order(compiler, W=W2 * 0.4, xs=XS2, u=U2):

    def loss(h0):
        def f(c, x):  # broadcast, where, reductions and a matmul in one step
            h = sl.tanh(c @ W + x * sl.max(c, axis=1, keepdims=True))
            h = sl.where(h > 0.2, h, h * h) + sl.sum(c * c, axis=0) * 0.1
            return h, sl.min(h, axis=1)
        c, ys = sl.scan(f, h0, xs, reverse=True, compiler=compiler)
        return sl.sum(c * c) + sl.sum(ys)

    return sl.grad(lambda h: sl.vdot(sl.grad(loss)(h).reshape((6,)), u.reshape((6,))))


def test_second_order_gradient_through_nests():
    h0 = T(RNG.standard_normal((2, 3)))
    want = _second_order(None)(h0)
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = _second_order("numba")(h0)
    assert native.STATS["kernel calls"] > before
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-11, atol=1e-12)


# --- jit's fused kernel --------------------------------------------------------------------
def test_fused_kernel_broadcasts_reductions_matmuls_and_views():
    A = RNG.normal(size=(4, 2, 5)) * 0.5

    def make(compiler):
        def f(c0, xs):
            def step(c, x):  # c [1, 3, 2], x [3]
                p = c @ A
                h = sl.tanh(c + sl.max(p, axis=(0, 2), keepdims=True)[:, :, :1] * 0.1
                            + sl.reshape(x[::-1], (1, 3, 1)) - sl.sum(p) * 0.01)
                return h, (sl.min(h, axis=(0, 2)), sl.broadcast_to(h.T, (2, 2, 3, 1)))
            return sl.scan(step, c0, xs, compiler=compiler)
        def loss(c0, xs):
            c, (m, b) = f(c0, xs)
            return sl.sum(m) + sl.sum(c) + sl.sum(b * b)
        return sl.value_and_grad(loss, argnums=(0, 1))

    check_jit(make, RNG.normal(size=(1, 3, 2)), RNG.normal(size=(6, 3)))


def test_fused_kernel_keeps_nan_and_signed_zeros():
    def make(compiler):
        def f(c0, xs):
            return sl.scan(lambda c, x: (sl.max(c * x, axis=1), sl.sum(c * x, axis=0)),
                           c0, xs, compiler=compiler)
        return f

    xs = np.array([[[np.nan, 1.0], [-0.0, 0.0]], [[0.0, -0.0], [-0.0, -0.0]]])
    want = [np.asarray(a.numpy()) for a in sl.pytree.flatten(make("numpy")(np.ones(2), xs))[0]]
    jitted = sl.jit(make("numba"))
    jitted(np.ones(2), xs)
    before = native.STATS["fused calls"]
    got = [np.asarray(a.numpy()) for a in sl.pytree.flatten(jitted(np.ones(2), xs))[0]]
    assert native.STATS["fused calls"] == before + 1
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
