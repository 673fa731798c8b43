"""jax.lax's array functions in scanlib.lax (ops/laxfuncs.py, ops/laxconv.py): one table of
the differentiable ones (forward against NumPy in float32/float64, gradient dtypes, VJPs
against finite differences to second order, inside a scan body), then the edges NumPy's
names would get wrong (rounding halves, C division, clamp's ties, shifts past the bit width,
lexicographic sorts), empty and 0-d operands, vmap and jit, the error messages, and one
table against jax.lax itself (values and gradients) where JAX is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib import lax

from opcheck import D, N, P, case, jax_x64, table_tests


# --- NumPy references ---------------------------------------------------------------------------
def np_pad(x, value, config):
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        size = n + max(n - 1, 0) * interior
        shape = list(x.shape)
        shape[axis] = size
        out = np.full(shape, value, dtype=x.dtype)
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, size, interior + 1)
        out[tuple(index)] = x
        index[axis] = slice(max(-lo, 0), size - max(-hi, 0))
        out = out[tuple(index)]
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        x = np.pad(out, widths, constant_values=value)
    return x


def np_conv(x, w, strides, pads, lhs_dil=None, rhs_dil=None, groups=1):
    """lax.conv_general_dilated in NC.../OI... layout by loops over output positions."""
    nsp = x.ndim - 2
    lhs_dil, rhs_dil = lhs_dil or (1,) * nsp, rhs_dil or (1,) * nsp
    x = np_pad(x, 0.0, [(0, 0, 0), (0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d in
                                                  zip(pads, lhs_dil)])
    k = w.shape[2:]
    eff = [(a - 1) * d + 1 for a, d in zip(k, rhs_dil)]
    out_sp = [(n - e) // s + 1 for n, e, s in zip(x.shape[2:], eff, strides)]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    out = np.zeros((n, o, *out_sp), dtype=x.dtype)
    cg, og = c // groups, o // groups
    for pos in np.ndindex(*out_sp):
        window = tuple(slice(p * s, p * s + e, d) for p, s, e, d in
                       zip(pos, strides, eff, rhs_dil))
        patch = x[(slice(None), slice(None)) + window]  # N C k...
        for g in range(groups):
            axes = list(range(1, x.ndim))
            out[(slice(None), slice(g * og, (g + 1) * og)) + pos] = np.tensordot(
                patch[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og], (axes, axes))
    return out


def np_sort2(keys, values):
    order = np.argsort(keys, axis=-1, kind="stable")
    return np.take_along_axis(values, order, -1)


# --- the table ---------------------------------------------------------------------------------
CASES = [
    case("dot_general_batch", lambda a, b: lax.dot_general(a, b, (([2], [1]), ([0], [0]))),
         (N, (2, 3, 4)), (N, (2, 4, 5)), ref=lambda a, b: np.einsum("bij,bjk->bik", a, b)),
    case("dot_general_free_order",
         lambda a, b: lax.dot_general(a, b, (((0,), (1,)), ((), ())), precision="highest"),
         (N, (4, 3)), (N, (2, 4)), ref=lambda a, b: np.einsum("ji,kj->ik", a, b)),
    case("dot", lambda a, b: lax.dot(a, b, lax.Precision.HIGH), (N, (2, 3)), (N, (3,)),
         ref=np.dot),
    case("batch_matmul", lax.batch_matmul, (N, (2, 3, 4)), (N, (2, 4, 2)), ref=np.matmul),
    case("pad_interior_negative", lambda x, v: lax.pad(x, v, [(1, -2, 2), (-1, 2, 0)]),
         (N, (3, 4)), (N, ()), ref=lambda x, v: np_pad(x, v, [(1, -2, 2), (-1, 2, 0)])),
    case("slice", lambda x: lax.slice(x, (1, 0), (4, 3), (2, 2)), (N, (5, 3)),
         ref=lambda x: x[1:4:2, 0:3:2]),
    case("slice_in_dim", lambda x: lax.slice_in_dim(x, -4, None, 2, axis=1), (N, (2, 5)),
         ref=lambda x: x[:, 1::2]),
    case("index_in_dim", lambda x: lax.index_in_dim(x, -1, 1, keepdims=False), (N, (2, 3)),
         ref=lambda x: x[:, -1]),
    case("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (0, 2)),
         (N, (2, 1)), ref=lambda x: np.broadcast_to(x[:, None, :], (2, 3, 4))),
    case("broadcast", lambda x: lax.broadcast(x, (2,)), (N, (3,)),
         ref=lambda x: np.broadcast_to(x, (2, 3))),
    case("reshape_dimensions", lambda x: lax.reshape(x, (6,), dimensions=(1, 0)), (N, (2, 3)),
         ref=lambda x: x.T.reshape(6)),
    case("rev", lambda x: lax.rev(x, (0, 1)), (N, (2, 3)), ref=lambda x: x[::-1, ::-1]),
    case("collapse", lambda x: lax.collapse(x, 1, 3), (N, (2, 3, 4)),
         ref=lambda x: x.reshape(2, 12)),
    case("integer_pow", lambda x: lax.integer_pow(x, 3), (N, (4,)), ref=lambda x: x ** 3),
    case("select_n", lambda w, a, b, c: lax.select_n(w, a, b, c),
         (N, (2, 3)), (N, (2, 3)), (N, (2, 3)), consts=(np.array([[0, 2, 1]]),),
         ref=lambda w, a, b, c: np.choose(np.broadcast_to(w, a.shape), [a, b, c])),
    case("clamp", lambda x: lax.clamp(-0.5, x, 0.5), (D, (7,)),
         ref=lambda x: np.clip(x, -0.5, 0.5)),
    case("reduce_sum", lambda x: lax.reduce_sum(x, (0, 2)), (N, (2, 3, 4)),
         ref=lambda x: x.sum((0, 2))),
    case("reduce_max", lambda x: lax.reduce_max(x, (1,)), (D, (2, 3)),
         ref=lambda x: x.max(1)),
    case("reduce_prod", lambda x: lax.reduce_prod(x, [1]), (P, (2, 3)),
         ref=lambda x: x.prod(1)),
    case("reduce_generic", lambda x: lax.reduce(x, 0.0, lambda a, b: a + b * b, (0,)),
         (N, (3, 2)), ref=lambda x: (x * x).sum(0)),
    case("reduce_known", lambda x: lax.reduce(x, -np.inf, lax.max, (1,)), (D, (2, 3)),
         ref=lambda x: x.max(1)),
    case("sort", lambda x: lax.sort(x, dimension=0), (D, (4, 3)), ref=lambda x: np.sort(x, 0)),
    case("sort_key_val", lambda k, v: lax.sort_key_val(k, v)[1], (D, (2, 5)), (N, (2, 5)),
         ref=np_sort2),
    case("top_k", lambda x: lax.top_k(x, 2)[0], (D, (3, 5)),
         ref=lambda x: -np.sort(-x, -1)[:, :2]),
    case("conv_1d_causal_depthwise",
         lambda x, w: lax.conv_general_dilated(x, w, (1,), [(2, 0)], feature_group_count=3),
         (N, (2, 3, 6)), (N, (3, 1, 3)), ref=lambda x, w: np_conv(x, w, (1,), [(2, 0)],
                                                                 groups=3)),
    case("conv_2d_strided_dilated",
         lambda x, w: lax.conv_general_dilated(x, w, (2, 1), [(1, 0), (0, 1)],
                                               rhs_dilation=(1, 2)),
         (N, (1, 2, 5, 5)), (N, (3, 2, 2, 2)),
         ref=lambda x, w: np_conv(x, w, (2, 1), [(1, 0), (0, 1)], rhs_dil=(1, 2))),
    case("conv_lhs_dilation",
         lambda x, w: lax.conv_with_general_padding(x, w, (1,), [(1, 1)], (2,), None),
         (N, (1, 2, 4)), (N, (2, 2, 2)),
         ref=lambda x, w: np_conv(x, w, (1,), [(1, 1)], lhs_dil=(2,))),
    case("conv_nhc_layout",
         lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME",
                                               dimension_numbers=("NHC", "HIO", "NHC")),
         (N, (2, 5, 3)), (N, (3, 3, 4)),
         ref=lambda x, w: np_conv(x.transpose(0, 2, 1), w.transpose(2, 1, 0), (1,),
                                  [(1, 1)]).transpose(0, 2, 1)),
    case("conv_transpose", lambda x, w: lax.conv_transpose(x, w, (2,), "SAME"),
         (N, (1, 3, 2)), (N, (2, 2, 3)),
         ref=lambda x, w: np_conv(x.transpose(0, 2, 1), w.transpose(2, 1, 0),
                                  (1,), [(1, 1)], lhs_dil=(2,)).transpose(0, 2, 1)),
    case("split", lambda x: lax.split(x, (2, 1), axis=1)[0], (N, (2, 3)),
         ref=lambda x: x[:, :2]),
    case("approx_min_k", lambda x: lax.approx_min_k(x, 2)[0], (D, (2, 4)),
         ref=lambda x: np.sort(x, -1)[:, :2]),
    case("max_pool", lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 2), (1, 2),
                                                 "VALID"),
         (D, (2, 6)), ref=lambda x: x.reshape(2, 3, 2).max(-1)),
    case("sum_pool_same", lambda x: lax.reduce_window(x, 0.0, lax.add, (3,), (1,), "SAME"),
         (N, (5,)), ref=lambda x: np.convolve(x, np.ones(3, x.dtype), "same")),
]

(test_forward_matches_numpy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


# --- meanings that differ from NumPy's names ---------------------------------------------------
def test_round_halves_away_from_zero_unless_asked():
    x = np.array([2.5, -2.5, 0.5, -0.5, 1.5, 0.49999999999999994, -1.4, np.inf, -np.inf, np.nan])
    for dtype in (np.float32, np.float64):
        xd = x.astype(dtype)  # 0.49999999999999994 is 0.5 in float32
        out = lax.round(sl.tensor(xd))
        assert out.dtype == dtype
        with np.errstate(invalid="ignore"):
            want = np.where(np.abs(xd - np.trunc(xd)) >= 0.5, np.trunc(xd) + np.sign(xd),
                            np.trunc(xd))
        np.testing.assert_array_equal(out.numpy(), want)
    assert float(lax.round(sl.tensor(0.49999999999999994))) == 0.0
    even = lax.round(sl.tensor(x), lax.RoundingMethod.TO_NEAREST_EVEN)
    np.testing.assert_array_equal(even.numpy(), np.round(x))
    assert float(sl.grad(lambda t: lax.round(t * 3.0))(sl.tensor(0.3))) == 0.0


def test_div_and_rem_are_cs():
    x = np.array([-7, 7, -7, 7, 6, -6], dtype=np.int32)
    y = np.array([2, 2, -2, -2, 3, 3], dtype=np.int32)
    q, r = lax.div(sl.tensor(x), sl.tensor(y)), lax.rem(sl.tensor(x), sl.tensor(y))
    assert q.dtype == r.dtype == np.int32
    np.testing.assert_array_equal(q.numpy(), [-3, 3, 3, -3, 2, -2])
    np.testing.assert_array_equal(r.numpy(), [-1, 1, -1, 1, 0, 0])
    np.testing.assert_array_equal(q.numpy() * y + r.numpy(), x)
    f = lax.div(sl.tensor(np.float32(-7.0)), sl.tensor(np.float32(2.0)))
    assert f.dtype == np.float32 and float(f) == -3.5
    assert float(lax.rem(sl.tensor(-7.5), sl.tensor(2.0))) == -1.5


def test_what_c_and_numpy_leave_undefined_is_xlas():
    x = np.array([7, -7, 0, -2 ** 31, 5], dtype=np.int32)
    y = np.array([0, 0, 0, -1, -1], dtype=np.int32)
    with np.errstate(all="raise"):  # and no warnings on the way
        np.testing.assert_array_equal(lax.div(sl.tensor(x), sl.tensor(y)).numpy(),
                                      [-1, -1, -1, -2 ** 31, -5])
        np.testing.assert_array_equal(lax.rem(sl.tensor(x), sl.tensor(y)).numpy(),
                                      [7, -7, 0, 0, 0])
        u = lax.div(sl.tensor(np.array([7, 8], np.uint8)), sl.tensor(np.array([0, 3], np.uint8)))
        np.testing.assert_array_equal(u.numpy(), [255, 2])
        f = np.array([np.nan, 1e10, -1e10, -2.7, np.inf, 2.9], np.float64)
        c = lax.convert_element_type(sl.tensor(f), np.int32)
        np.testing.assert_array_equal(c.numpy(), [0, 2 ** 31 - 1, -2 ** 31, -2, 2 ** 31 - 1, 2])
        c = lax.convert_element_type(sl.tensor(np.array([-3.5, 300.0, 2.1e9], np.float32)),
                                     np.uint8)
        np.testing.assert_array_equal(c.numpy(), [0, 255, 255])
        big = lax.convert_element_type(sl.tensor(np.array([2.1e9, 3e9], np.float32)), np.int32)
        np.testing.assert_array_equal(big.numpy(), [2100000000, 2 ** 31 - 1])
    e = lax.reduce_max(sl.zeros((0, 2), dtype=np.int32), (0,))
    np.testing.assert_array_equal(e.numpy(), [-2 ** 31] * 2)
    np.testing.assert_array_equal(lax.reduce_min(sl.zeros((2, 0)), (1,)).numpy(), [np.inf] * 2)


def test_clamp_gradients_at_ties_go_nowhere():
    g = sl.grad(lambda lo, x, hi: sl.sum(lax.clamp(lo, x, hi)), argnums=(0, 1, 2))
    x = sl.tensor([-1.0, -0.5, 0.0, 0.5, 1.0])
    glo, gx, ghi = g(sl.tensor(-0.5), x, sl.tensor(0.5))
    np.testing.assert_array_equal(gx.numpy(), [0, 0, 1, 0, 0])
    assert float(glo) == 1.0 and float(ghi) == 1.0
    assert np.isnan(lax.clamp(0.0, sl.tensor(np.nan), 1.0).numpy())
    # min above max: XLA's min(max(x, lo), hi), and JAX's gradients (to max only above it)
    x = sl.tensor([0.5, 1.5, 3.0])
    np.testing.assert_array_equal(lax.clamp(2.0, x, 1.0).numpy(), [1.0, 1.0, 1.0])
    glo, gx, ghi = g(sl.tensor(2.0), x, sl.tensor(1.0))
    assert float(glo) == 0.0 and float(ghi) == 2.0 and not np.any(gx.numpy())


def test_bit_operations_against_numpy():
    x = np.array([-8, -1, 0, 1, 7, 2 ** 30, -2 ** 31], dtype=np.int32)
    s = np.array([1, 3, 0, 31, 32, 40, -1], dtype=np.int32)
    u = x.view(np.uint32)
    inrange = (s >= 0) & (s < 32)
    sc = np.clip(s, 0, 31)
    cases = {
        "shift_left": np.where(inrange, x << sc, 0),
        "shift_right_logical": np.where(inrange, (u >> sc.astype(np.uint32)).view(np.int32), 0),
        "shift_right_arithmetic": x >> np.where(inrange, s, 31),
    }
    for name, want in cases.items():
        out = getattr(lax, name)(sl.tensor(x), sl.tensor(s))
        assert out.dtype == np.int32, name
        np.testing.assert_array_equal(out.numpy(), want, err_msg=name)
    pop = lax.population_count(sl.tensor(x))
    np.testing.assert_array_equal(pop.numpy(), [bin(int(v)).count("1") for v in u])
    clz = lax.clz(sl.tensor(x))
    np.testing.assert_array_equal(clz.numpy(), [32 - int(v).bit_length() for v in u])
    assert pop.dtype == clz.dtype == np.int32
    b = np.array([[1, 2, 4], [3, 5, 6]], dtype=np.uint8)
    np.testing.assert_array_equal(lax.reduce_xor(sl.tensor(b), (1,)).numpy(), [7, 0])
    np.testing.assert_array_equal(lax.reduce_or(sl.tensor(b), (1,)).numpy(), [7, 7])
    np.testing.assert_array_equal(lax.reduce_and(sl.tensor(b), (0,)).numpy(), [1, 0, 4])
    t = np.array([[True, False, True], [True, True, True]])
    np.testing.assert_array_equal(lax.reduce_xor(sl.tensor(t), (1,)).numpy(), [False, True])
    np.testing.assert_array_equal(lax.reduce_and(sl.tensor(t), (1,)).numpy(), [False, True])


def test_sort_several_operands_lexicographically():
    k1 = np.array([2, 1, 2, 1, 0])
    k2 = np.array([0.5, 0.3, 0.1, 0.3, 0.9])
    v = np.arange(5.0)
    a, b, c = lax.sort((sl.tensor(k1), sl.tensor(k2), sl.tensor(v)), num_keys=2)
    order = np.lexsort((k2, k1))
    np.testing.assert_array_equal(c.numpy(), v[order])
    np.testing.assert_array_equal(a.numpy(), k1[order])
    a, c = lax.sort((sl.tensor(k1), sl.tensor(v)), num_keys=1)  # stable: ties keep their order
    np.testing.assert_array_equal(c.numpy(), [4, 1, 3, 0, 2])
    vals, idx = lax.top_k(sl.tensor([1.0, 3.0, 3.0, 2.0]), 3)
    np.testing.assert_array_equal(idx.numpy(), [1, 2, 3])
    assert idx.dtype == np.int32


def test_argmax_signature_and_index_dtype():
    x = sl.tensor([[1.0, 5.0, 5.0], [np.nan, 0.0, 1.0]])
    i = lax.argmax(x, 1, np.int32)
    assert i.dtype == np.int32
    np.testing.assert_array_equal(i.numpy(), [1, 0])
    np.testing.assert_array_equal(lax.argmin(x, 0, np.int64).numpy(), [1, 1, 1])  # NaN wins


def test_iota_and_creation():
    assert lax.iota(np.int32, 4).dtype == np.int32
    np.testing.assert_array_equal(lax.broadcasted_iota(np.float32, (2, 3), 0).numpy(),
                                  [[0, 0, 0], [1, 1, 1]])
    f = lax.full_like(sl.zeros((2,), dtype=np.float32), 3.0, shape=(3, 1))
    assert f.shape == (3, 1) and f.dtype == np.float32
    assert lax.broadcast_to_rank(sl.ones((3,)), 3).shape == (1, 1, 3)
    assert lax.expand_dims(sl.ones((3,)), (0, 2)).shape == (1, 3, 1)
    assert lax.squeeze(sl.ones((1, 3, 1)), (0,)).shape == (3, 1)
    c = lax.convert_element_type(sl.tensor([-1.7, 2.9]), np.int32)
    np.testing.assert_array_equal(c.numpy(), [-1, 2])
    tree = {"a": sl.ones(2)}
    assert lax.optimization_barrier(tree) is tree


def test_empty_and_0d_operands():
    e = sl.zeros((0, 3))
    assert lax.pad(e, 1.0, [(1, 1, 2), (0, 0, 0)]).shape == (2, 3)
    assert lax.reduce_sum(e, (0,)).shape == (3,)
    assert lax.sort(sl.zeros((0,))).shape == (0,)
    assert lax.reduce_window(sl.zeros((0,)), 0.0, lax.add, (1,), (1,), "VALID").shape == (0,)
    s = sl.tensor(2.0)
    assert float(lax.clamp(0.0, s, 1.0)) == 1.0 and lax.round(s).shape == ()
    assert lax.pad(s, 0.0, []).shape == () and lax.reduce_max(s, ()).shape == ()
    assert lax.dot_general(s, s, (((), ()), ((), ()))).shape == ()


def test_under_vmap_jit_and_grad_of_grad():
    x = np.random.default_rng(1).standard_normal((4, 2, 6))
    w = np.random.default_rng(2).standard_normal((2, 1, 3))

    def f(x, w):
        y = lax.conv_general_dilated(x[None], w, (1,), [(2, 0)], feature_group_count=2)[0]
        y = lax.pad(y, 0.0, [(0, 0, 0), (1, 0, 1)])
        return lax.reduce_window(y, -np.inf, lax.max, (1, 2), (1, 2), "VALID")

    want = np.stack([f(sl.tensor(xi), sl.tensor(w)).numpy() for xi in x])
    got = sl.vmap(f, in_axes=(0, None))(sl.tensor(x), sl.tensor(w))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(sl.jit(f)(sl.tensor(x[0]), sl.tensor(w)).numpy(), want[0])
    g = sl.grad(lambda w: sl.sum(sl.grad(lambda x: sl.sum(sl.tanh(f(x, w))))(sl.tensor(x[0]))
                                 ** 2))(sl.tensor(w))
    assert g.shape == w.shape and np.all(np.isfinite(g.numpy()))


def test_max_and_min_pooling_give_a_tie_to_its_first_element():
    """As JAX's select_and_scatter: a window's tied extremes do not split its cotangent (as
    jnp.max's gradient does); the first of them takes it all, in every window, SAME padding
    included; the values are the windows' extremes."""
    x = sl.tensor([[1.0, 1.0, 0.0, 3.0, 3.0, 2.0]])
    w = sl.tensor([[1.0, 2.0, 3.0]])
    pool = lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 2), (1, 2), "VALID")
    np.testing.assert_array_equal(pool(x).numpy(), [[1.0, 3.0, 3.0]])
    np.testing.assert_array_equal(sl.grad(lambda x: sl.sum(pool(x) * w))(x).numpy(),
                                  [[1.0, 0.0, 0.0, 2.0, 3.0, 0.0]])
    low = lambda x: lax.reduce_window(x, np.inf, lax.min, (3,), (1,), "SAME")
    y = sl.tensor([2.0, 2.0, 2.0, 1.0])
    np.testing.assert_array_equal(low(y).numpy(), [2.0, 2.0, 1.0, 1.0])
    np.testing.assert_array_equal(sl.grad(lambda y: sl.sum(low(y) * sl.arange(1.0, 5.0)))(
        y).numpy(), [3.0, 0.0, 0.0, 7.0])
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        for _ in range(10):
            a = rng.integers(0, 3, size=(2, 7, 6)).astype(float)
            for pad in ("SAME", "VALID"):
                for ours, theirs, init in [(lax.max, jax.lax.max, -np.inf),
                                           (lax.min, jax.lax.min, np.inf)]:
                    def f(x, L, op, c, init=init, pad=pad):
                        y = L.reduce_window(x, init, op, (1, 3, 2), (1, 2, 2), pad)
                        return y if c is None else (y * c).sum()
                    c = rng.standard_normal(f(a, jax.lax, theirs, None).shape)
                    want = jax.grad(f)(jax.numpy.asarray(a), jax.lax, theirs, c)
                    got = sl.grad(f)(sl.tensor(a), lax, ours, c)
                    np.testing.assert_array_equal(got.numpy(), np.asarray(want))


def test_errors_say_what_and_how():
    with pytest.raises(ValueError, match=r"pad: padding_config needs one \(low, high, interior"):
        lax.pad(sl.ones((2, 2)), 0.0, [(1, 1, 0)])
    with pytest.raises(ValueError, match="removes more than its 2 elements"):
        lax.pad(sl.ones(2), 0.0, [(-2, -1, 0)])
    with pytest.raises(TypeError, match="dot_general: the contracting dimensions must pair up"):
        lax.dot_general(sl.ones((2, 3)), sl.ones((4, 2)), (([1], [0]), ([], [])))
    with pytest.raises(TypeError, match="lax.dot: operands of shapes"):
        lax.dot(sl.ones((2, 3, 4)), sl.ones((4, 5)))
    with pytest.raises(TypeError, match="feature_group_count=2"):
        lax.conv_general_dilated(sl.ones((1, 3, 5)), sl.ones((2, 1, 2)), (1,), "VALID",
                                 feature_group_count=2)
    with pytest.raises(NotImplementedError, match="reduce_window: computation"):
        lax.reduce_window(sl.ones(4), 0.0, lambda a, b: a - b, (2,), (1,), "VALID")
    with pytest.raises(TypeError, match="shift_left: needs integer operands"):
        lax.shift_left(sl.ones(2), sl.ones(2))
    with pytest.raises(TypeError, match="clamp: min must be a scalar or of x's shape"):
        lax.clamp(sl.zeros(2), sl.ones((3, 2)), 1.0)
    with pytest.raises(ValueError, match="sort: num_keys=3"):
        lax.sort((sl.ones(2), sl.ones(2)), num_keys=3)


# --- against jax.lax ----------------------------------------------------------------------------
def _jax_cases(jl):
    rng = np.random.default_rng(5)
    x34, x5 = rng.standard_normal((3, 4)), rng.standard_normal(5)
    x1 = rng.standard_normal((2, 4, 7))
    w1 = rng.standard_normal((4, 2, 3))
    x2, w2 = rng.standard_normal((1, 5, 6, 2)), rng.standard_normal((3, 2, 2, 4))
    dn = ("NHWC", "HWIO", "NHWC")
    return [
        ("dot_general", lambda m, a, b: m.dot_general(a, b, (((1,), (0,)), ((), ()))),
         (x34, rng.standard_normal((4, 2)))),
        ("pad", lambda m, a: m.pad(a, 0.5, [(2, -1, 1), (-1, 0, 2)]), (x34,)),
        ("conv_groups_stride", lambda m, a, b: m.conv_general_dilated(
            a, b, (2,), "SAME", rhs_dilation=(2,), feature_group_count=2), (x1, w1)),
        ("conv_2d_nhwc", lambda m, a, b: m.conv_general_dilated(
            a, b, (1, 2), "SAME_LOWER", dimension_numbers=dn), (x2, w2)),
        ("conv_transposed", lambda m, a, b: m.conv_general_dilated(
            a, b, (1,), [(2, 1)], lhs_dilation=(2,), feature_group_count=2), (x1, w1)),
        ("reduce_window_max", lambda m, a: m.reduce_window(
            a, -np.inf, m.max, (2, 2), (1, 2), "SAME"), (x34,)),
        ("reduce_window_dilated", lambda m, a: m.reduce_window(
            a, 0.0, m.add, (2,), (1,), [(1, 2)], (2,), (2,)), (x5,)),
        ("round", lambda m, a: m.round(a * 2.0), (np.array([0.25, -0.75, 1.25, 0.1]),)),
        ("clamp", lambda m, a: m.clamp(-0.5, a, 0.5), (x5,)),
        ("clamp_crossed", lambda m, a, b: m.clamp(a, b, a * 0 - 0.1),
         (np.full(5, 0.2), x5)),
        ("sort_multi", lambda m, a, b: m.sort((m.round(a), b), num_keys=1)[1], (x5 * 2, x5)),
        ("top_k", lambda m, a: m.top_k(a, 3)[0], (x34,)),
        ("broadcast_in_dim", lambda m, a: m.broadcast_in_dim(a, (3, 2, 4), (0, 2)), (x34,)),
        ("reduce_max", lambda m, a: m.reduce_max(a, (1,)), (x34,)),
        ("rev_collapse", lambda m, a: m.collapse(m.rev(a, (1,)), 0, 2), (x34,)),
        ("slice", lambda m, a: m.slice_in_dim(m.slice(a, (0, 1), (3, 4), (2, 1)), 1, 3, 1, 1),
         (x34,)),
        ("conv_transpose_same", lambda m, a, b: m.conv_transpose(
            a, b, (2,), "SAME", transpose_kernel=True),
         (x1.transpose(0, 2, 1), rng.standard_normal((3, 5, 4)))),
        ("conv_transpose_2d", lambda m, a, b: m.conv_transpose(
            a, b, (2, 1), "VALID", rhs_dilation=(1, 2)), (x2, w2)),
        ("conv_transpose_pairs", lambda m, a, b: m.conv_transpose(
            a, b, (3,), [(1, 2)], dimension_numbers=("NCH", "OIH", "NCH")),
         (x1, rng.standard_normal((5, 4, 3)))),
        ("split", lambda m, a: m.split(a, (1, 3), axis=1)[1], (x34,)),
        ("dot", lambda m, a, b: m.dot(a, b, precision=m.Precision.HIGHEST,
                                      preferred_element_type=np.float64), (x34, x34[0])),
        ("approx_min_k", lambda m, a: m.approx_min_k(a, 2)[0], (x34,)),
    ]


@pytest.mark.parametrize("i", range(22))
def test_against_jax_values_and_gradients(i):
    jax = pytest.importorskip("jax")
    with jax_x64(jax):
        name, fn, args = _jax_cases(jax.lax)[i]
        want = np.asarray(fn(jax.lax, *[jax.numpy.asarray(a) for a in args]))
        got = fn(lax, *[sl.tensor(a) for a in args])
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12, err_msg=name)
        ct = np.random.default_rng(9).standard_normal(want.shape)
        argnums = tuple(range(len(args)))
        gj = jax.grad(lambda *a: (fn(jax.lax, *a) * ct).sum(), argnums)(
            *[jax.numpy.asarray(a) for a in args])
        gs = sl.grad(lambda *a: sl.sum(fn(lax, *a) * sl.tensor(ct)), argnums)(
            *[sl.tensor(a) for a in args])
        for a, b in zip(gs, gj):
            np.testing.assert_allclose(a.numpy(), np.asarray(b), rtol=1e-12, atol=1e-12,
                                       err_msg=name)


def test_integer_functions_against_jax():
    jax = pytest.importorskip("jax")
    x = np.array([-7, 7, -1, 0, 5, 2 ** 30], dtype=np.int32)
    y = np.array([2, -3, 4, 1, 33, -1], dtype=np.int32)
    for name in ("div", "rem", "shift_left", "shift_right_logical", "shift_right_arithmetic"):
        want = np.asarray(getattr(jax.lax, name)(x, y))
        got = getattr(lax, name)(sl.tensor(x), sl.tensor(y))
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    for name in ("population_count", "clz"):
        np.testing.assert_array_equal(getattr(lax, name)(sl.tensor(x)).numpy(),
                                      np.asarray(getattr(jax.lax, name)(x)), err_msg=name)
    np.testing.assert_array_equal(lax.argmax(sl.tensor(x * 1.0), 0, np.int32).numpy(),
                                  np.asarray(jax.lax.argmax(x * 1.0, 0, np.int32)))


def _edge_cases():
    f = np.array([0.0, -0.0, np.nan, 1.0, -np.inf, np.inf, -1.0, np.nan])
    i, z = np.array([7, -7, 0, 5], np.int32), np.array([0, 0, 0, 2], np.int32)
    return [
        ("sort_signed_zero_nan", lambda m, x: m.sort(x), (f,)),
        ("sort_key_val", lambda m, x, v: m.sort_key_val(x, v)[1], (f, np.arange(8.0))),
        ("top_k_nan", lambda m, x: m.top_k(x, 4)[1], (f,)),
        ("argmax_nan", lambda m, x: m.argmax(x, 0, np.int32), (f,)),
        ("argmin_nan", lambda m, x: m.argmin(x, 0, np.int32), (f,)),
        ("div_by_zero", lambda m, x, y: m.div(x, y), (i, z)),
        ("rem_by_zero", lambda m, x, y: m.rem(x, y), (i, z)),
        ("convert_saturates", lambda m, x: m.convert_element_type(x, np.int32),
         (np.array([np.nan, 1e10, -1e10, -2.7, np.inf]),)),
        ("convert_unsigned", lambda m, x: m.convert_element_type(x, np.uint8),
         (np.array([-3.5, 300.0, 7.9]),)),
        ("reduce_max_empty", lambda m, x: m.reduce_max(x, (0,)), (np.zeros((0, 2)),)),
        ("reduce_sum_int8", lambda m, x: m.reduce_sum(x, (0,)), (np.array([100, 100], np.int8),)),
        ("dot_preferred", lambda m, x, y: m.dot_general(
            x, y, (((0,), (0,)), ((), ())), preferred_element_type=np.float64),
         (np.ones(3, np.float32), np.ones(3, np.float32))),
        ("round_f32", lambda m, x: m.round(x),
         (np.array([0.5, 1.5, 2.5, -0.5, -0.0], np.float32),)),
        ("integer_pow", lambda m, x: m.integer_pow(x, -2), (np.array([2.0, 0.5]),)),
        ("select_n_bool", lambda m, p, x, y: m.select_n(p, x, y),
         (np.array([True, False]), np.array([1.0, 2.0]), np.array([3.0, 4.0]))),
        ("reduce_tuple", lambda m, x, y: m.reduce(
            (x, y), (0.0, 1.0), lambda a, b: (a[0] + b[0], a[1] * b[1]), (0,))[1],
         (np.array([3.0, 1.0, 2.0]), np.array([3.0, 1.0, 2.0]))),
    ]


@pytest.mark.parametrize("i", range(16))
def test_edges_against_jax(i):
    jax = pytest.importorskip("jax")
    with jax_x64(jax):
        name, fn, args = _edge_cases()[i]
        want = np.asarray(fn(jax.lax, *args))
        got = fn(lax, *[sl.tensor(a) for a in args]).numpy()
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)


# --- implicit differentiation: custom_root and custom_linear_solve ------------------------------
def _newton(f, x):  # for x ** 3 - a
    return lax.fori_loop(0, 30, lambda i, x: x - f(x) / (3 * x * x), x)


def _cube_root(a):
    return lax.custom_root(lambda x: x * x * x - a, sl.ones_like(a), _newton,
                           lambda g, y: y / g(1.0))


def _cg(mv, b):
    """Conjugate gradients in a while_loop: not reverse-differentiable itself."""
    def cond(s):
        return (s[3] < 20) & (sl.sum(s[1] * s[1]) > 1e-28)

    def body(s):
        x, r, p, k = s
        ap = mv(p)
        a = sl.sum(r * r) / sl.sum(p * ap)
        x2, r2 = x + a * p, r - a * ap
        return x2, r2, r2 + sl.sum(r2 * r2) / sl.sum(r * r) * p, k + 1

    return lax.while_loop(cond, body, (b * 0, b, b, 0))[0]


M = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]])
NONSYM = M + np.array([[0.0, 0.3, 0.0], [0.0, 0.0, -0.2], [0.1, 0.0, 0.0]])


def test_custom_root_is_the_implicit_derivative_to_second_order():
    a = np.array([1.0, 8.0, 27.0])
    closed = [lambda a: a ** (1 / 3), lambda a: a ** (-2 / 3) / 3, lambda a: -2 / 9 * a ** (-5 / 3)]
    np.testing.assert_allclose(_cube_root(sl.tensor(a)).numpy(), closed[0](a), rtol=1e-12)
    g = sl.vmap(sl.grad(_cube_root))(sl.tensor(a))
    np.testing.assert_allclose(g.numpy(), closed[1](a), rtol=1e-12)
    gg = sl.vmap(sl.grad(sl.grad(_cube_root)))(sl.tensor(a))
    np.testing.assert_allclose(gg.numpy(), closed[2](a), rtol=1e-10)
    _, t = sl.jvp(_cube_root, (sl.tensor(8.0),), (sl.tensor(1.0),))
    np.testing.assert_allclose(float(t), closed[1](8.0), rtol=1e-12)
    np.testing.assert_allclose(float(sl.jit(sl.grad(_cube_root))(sl.tensor(8.0))),
                               closed[1](8.0), rtol=1e-12)
    # the guess gets no derivative, as JAX's
    f = lax.custom_root(lambda x: x - 2.0, sl.tensor(1.0), lambda f, x: x - f(x),
                        lambda g, y: y / g(1.0))
    assert float(f) == 2.0
    assert float(sl.grad(lambda x0: lax.custom_root(
        lambda x: x - 2.0, x0, lambda f, x: x - f(x), lambda g, y: y / g(1.0)))(
        sl.tensor(1.0))) == 0.0


def _cube_root_exact_tangent(a):
    """tangent_solve closes over a, the differentiated value: the exact Newton derivative."""
    return lax.custom_root(lambda x: x * x * x - a, sl.ones_like(a), _newton,
                           lambda g, y: y / (3 * a ** (2 / 3)))


@pytest.mark.parametrize("jitted", [False, True])
def test_custom_root_tangent_solve_may_close_over_the_differentiated_value(jitted):
    a = sl.tensor(np.array([1.0, 8.0, 27.0]))
    d1 = a.numpy() ** (-2 / 3) / 3
    d2 = np.diag(-2 / 9 * a.numpy() ** (-5 / 3))

    def total(a):
        return sl.sum(_cube_root_exact_tangent(a))

    for transform, want in [(sl.jacrev, d1), (sl.jacfwd, d1), (sl.hessian, d2),
                            (lambda f: sl.jacfwd(sl.grad(f)), d2)]:
        fn = transform(total)
        got = (sl.jit(fn) if jitted else fn)(a)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-15)
    _, t = sl.jvp(_cube_root_exact_tangent, (a,), (sl.ones_like(a),))
    np.testing.assert_allclose(t.numpy(), d1, rtol=1e-12)


def test_custom_root_whose_solve_promotes_the_guess_is_differentiated_at_the_solution():
    """A float32 guess, a float64 value in f: solve's result is float64, and f's
    linearization is taken there (it was traced at the guess's float32 and refused it)."""
    def root(a):
        return lax.custom_root(lambda x: x * x - a, np.ones((), np.float32),
                               lambda f, x: x * 0 + sl.sqrt(a), lambda g, y: y / g(1.0))

    a = sl.tensor(2.0)
    for fn in (sl.grad(root), sl.jacfwd(root), sl.jit(sl.grad(root))):
        g = fn(a)
        assert g.dtype == np.float64
        np.testing.assert_allclose(float(g), 0.5 / np.sqrt(2.0), rtol=1e-12)
    np.testing.assert_allclose(float(sl.hessian(root)(a)), -0.25 * 2.0 ** -1.5, rtol=1e-10)


@pytest.mark.parametrize("symmetric", [True, False])
def test_custom_linear_solve_matches_the_direct_solve(symmetric):
    A = M if symmetric else NONSYM
    b = np.array([1.0, 2.0, -1.0])

    def solver(A):
        if symmetric:
            return dict(solve=_cg, symmetric=True)
        return dict(solve=lambda mv, b: sl.linalg.solve(A, b),
                    transpose_solve=lambda vm, b: sl.linalg.solve(A.T, b))

    def loss(A, b):
        return sl.sum(lax.custom_linear_solve(lambda v: A @ v, b, **solver(A)) ** 3)

    def direct(A, b):
        return sl.sum(sl.linalg.solve(A, b) ** 3)

    args = (sl.tensor(A), sl.tensor(b))
    for got, want in zip(sl.grad(loss, (0, 1))(*args), sl.grad(direct, (0, 1))(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    second = sl.grad(lambda b: sl.sum(sl.grad(loss)(args[0], b) ** 2))(args[1])
    want = sl.grad(lambda b: sl.sum(sl.grad(direct)(args[0], b) ** 2))(args[1])
    np.testing.assert_allclose(second.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)
    bs = sl.tensor(np.stack([b, 2 * b]))
    np.testing.assert_allclose(sl.vmap(sl.grad(loss, 1), in_axes=(None, 0))(args[0], bs).numpy(),
                               sl.vmap(sl.grad(direct, 1), in_axes=(None, 0))(args[0], bs).numpy(),
                               rtol=1e-10)
    total = sl.scan(lambda c, b: (c + loss(args[0], b), None), sl.tensor(0.0), bs)[0]
    np.testing.assert_allclose(float(total), float(direct(*args)) * (1 + 8), rtol=1e-10)


def test_custom_linear_solve_without_transpose_solve_says_so():
    A = sl.tensor(NONSYM)
    x = lax.custom_linear_solve(lambda v: A @ v, sl.ones(3), lambda mv, b: sl.linalg.solve(A, b))
    np.testing.assert_allclose((A @ x).numpy(), np.ones(3), rtol=1e-12)
    with pytest.raises(TypeError, match="needs transpose_solve"):
        sl.grad(lambda b: sl.sum(lax.custom_linear_solve(
            lambda v: A @ v, b, lambda mv, b: sl.linalg.solve(A, b))))(sl.ones(3))


def test_implicit_against_jax():
    jax = pytest.importorskip("jax")
    with jax_x64(jax):
        def root(m, a):
            newton = lambda f, x: m.fori_loop(0, 30, lambda i, x: x - f(x) / (3 * x * x), x)
            return m.custom_root(lambda x: x ** 3 - a, 1.0 + 0 * a, newton,
                                 lambda g, y: y / g(1.0))

        def lin(m, solve, A, b):
            return m.custom_linear_solve(lambda v: A @ v, b, lambda mv, b: solve(A, b),
                                         lambda vm, b: solve(A.T, b))

        for fn, args in ((lambda m, s, a: root(m, a) ** 2, (np.array(5.0),)),
                         (lambda m, s, A, b: (lin(m, s, A, b) ** 2).sum(),
                          (NONSYM, np.array([1.0, -2.0, 0.5])))):
            nums = tuple(range(len(args)))
            want = jax.grad(lambda *a, fn=fn: fn(jax.lax, jax.numpy.linalg.solve, *a),
                            nums)(*args)
            got = sl.grad(lambda *a, fn=fn: fn(lax, sl.linalg.solve, *a), nums)(
                *[sl.tensor(a) for a in args])
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-10)


def test_integer_and_constant_functions_keep_the_device_of_the_data(backend):
    i = backend.tensor(np.array([7, -7, 0, 5], np.int32))
    z = backend.tensor(np.array([0, 2, -1, 3], np.int32))
    f = backend.tensor(np.array([np.nan, 1e10, -2.5, 0.5]))
    outs = [lax.div(i, z), lax.rem(i, z), lax.shift_left(i, z), lax.shift_right_logical(i, z),
            lax.shift_right_arithmetic(i, z), lax.clz(i), lax.population_count(i),
            lax.convert_element_type(f, np.int32), lax.round(f), lax.clamp(0.0, f, 1.0),
            lax.reduce_max(backend.tensor(np.zeros((0, 2))), (0,)), lax.reduce_xor(i, (0,)),
            lax.reduce(f, 0.0, lambda a, b: a + b, (0,)), lax.pad(f, 1.0, [(1, 1, 1)]),
            lax.reduce_window(f, -np.inf, lax.max, (2,), (1,), "SAME"), lax.top_k(f, 2)[1],
            lax.conv(backend.tensor(np.ones((1, 1, 4))), backend.tensor(np.ones((1, 1, 2))),
                     (1,), "VALID")]
    for out in outs:
        backend.check_device(out)
    np.testing.assert_array_equal(outs[0].numpy(), [-1, -3, 0, 1])
