"""The everyday array functions (scanlib/ops/arrays.py): a table of cases through the four
opcheck tests (forward against NumPy in float32/float64, gradient dtypes, VJP against finite
differences to second order, inside a scan body against the loop), then the edge cases: zeros
in products, take's modes, ties, pad's width forms, integer inputs, errors, NumPy dispatch.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib.ops.promotion import inexact_dtype
from scanlib.testing import check_grads

from opcheck import D, N, P, case, table_tests

IDX = np.array([2, 0, -1, 2])  # a repeat and a negative index
IDX_WILD = np.array([5, -7, 1, 3, -1])  # out of range both ways, for clip and wrap
ALONG = np.array([[2, 0, 1, 1], [0, 0, 2, 1]])  # into axis 1 of a (2, 3) arr


def _stack_pieces(pieces):
    """The pieces of a split as one tensor, each scaled differently so that a piece swapped
    with another would show."""
    return sl.concatenate([p * float(i + 1) for i, p in enumerate(pieces)], axis=-1)


def _np_stack_pieces(pieces):
    return np.concatenate([p * (i + 1) for i, p in enumerate(pieces)], axis=-1)


CASES = [
    # scans along an axis
    case("cumsum", sl.cumsum, (N, (3, 4)), ref=np.cumsum),
    case("cumsum-axis", lambda x: sl.cumsum(x, axis=1), (N, (2, 3, 4)),
         ref=lambda x: np.cumsum(x, axis=1)),
    case("cumsum-neg-axis", lambda x: sl.cumsum(x, -1), (N, (3, 5)),
         ref=lambda x: np.cumsum(x, -1)),
    case("cumprod", sl.cumprod, (N, (2, 3)), ref=np.cumprod),
    case("cumprod-axis", lambda x: sl.cumprod(x, axis=0), (N, (5, 3)),
         ref=lambda x: np.cumprod(x, axis=0)),
    case("cumprod-long", lambda x: sl.cumprod(x, axis=-1), (P, (2, 9)),
         ref=lambda x: np.cumprod(x, axis=-1)),
    # reductions
    case("prod", sl.prod, (N, (2, 3)), ref=np.prod),
    case("prod-axis", lambda x: sl.prod(x, axis=1), (N, (3, 5)),
         ref=lambda x: np.prod(x, axis=1)),
    case("prod-axes-keep", lambda x: sl.prod(x, axis=(0, 2), keepdims=True), (N, (2, 3, 3)),
         ref=lambda x: np.prod(x, axis=(0, 2), keepdims=True)),
    case("var", sl.var, (N, (3, 4)), ref=np.var),
    case("var-axis-ddof", lambda x: sl.var(x, axis=0, ddof=1), (N, (3, 4)),
         ref=lambda x: np.var(x, axis=0, ddof=1)),
    case("var-keep", lambda x: sl.var(x, axis=(0, 2), keepdims=True), (N, (2, 3, 4)),
         ref=lambda x: np.var(x, axis=(0, 2), keepdims=True)),
    case("std", sl.std, (N, (3, 4)), ref=np.std),
    case("std-axis-ddof", lambda x: sl.std(x, axis=-1, ddof=1, keepdims=True), (N, (3, 4)),
         ref=lambda x: np.std(x, axis=-1, ddof=1, keepdims=True)),
    # reordering
    case("flip", sl.flip, (N, (2, 3)), ref=np.flip),
    case("flip-axis", lambda x: sl.flip(x, 1), (N, (2, 3, 4)), ref=lambda x: np.flip(x, 1)),
    case("flip-axes", lambda x: sl.flip(x, (0, -1)), (N, (2, 3, 4)),
         ref=lambda x: np.flip(x, (0, -1))),
    case("roll", lambda x: sl.roll(x, 2), (N, (3, 4)), ref=lambda x: np.roll(x, 2)),
    case("roll-axis-neg", lambda x: sl.roll(x, -1, axis=1), (N, (3, 4)),
         ref=lambda x: np.roll(x, -1, axis=1)),
    case("roll-axes", lambda x: sl.roll(x, (1, 5, -2), axis=(0, 1, 1)), (N, (3, 4)),
         ref=lambda x: np.roll(x, (1, 5, -2), axis=(0, 1, 1))),
    case("moveaxis", lambda x: sl.moveaxis(x, 0, -1), (N, (2, 3, 4)),
         ref=lambda x: np.moveaxis(x, 0, -1)),
    case("moveaxis-many", lambda x: sl.moveaxis(x, (0, 1), (2, 0)), (N, (2, 3, 4)),
         ref=lambda x: np.moveaxis(x, (0, 1), (2, 0))),
    case("sort", sl.sort, (D, (3, 5)), ref=np.sort),
    case("sort-axis0", lambda x: sl.sort(x, axis=0), (D, (4, 3)),
         ref=lambda x: np.sort(x, axis=0)),
    case("sort-flat", lambda x: sl.sort(x, axis=None), (D, (2, 3)),
         ref=lambda x: np.sort(x, axis=None)),
    # padding and repeating
    case("pad-int", lambda x: sl.pad(x, 2), (N, (2, 3)), ref=lambda x: np.pad(x, 2)),
    case("pad-pair", lambda x: sl.pad(x, (1, 2), constant_values=1.5), (N, (2, 3)),
         ref=lambda x: np.pad(x, (1, 2), constant_values=1.5)),
    case("pad-per-axis", lambda x: sl.pad(x, ((0, 1), (2, 0)), constant_values=((1, 2), (3, 4))),
         (N, (2, 3)), ref=lambda x: np.pad(x, ((0, 1), (2, 0)), constant_values=((1, 2), (3, 4)))),
    case("pad-edge", lambda x: sl.pad(x, ((1, 2), (3, 0)), mode="edge"), (N, (2, 3)),
         ref=lambda x: np.pad(x, ((1, 2), (3, 0)), mode="edge")),
    case("pad-reflect", lambda x: sl.pad(x, ((2, 5), (1, 1)), mode="reflect"), (N, (3, 2)),
         ref=lambda x: np.pad(x, ((2, 5), (1, 1)), mode="reflect")),
    case("pad-symmetric", lambda x: sl.pad(x, 4, mode="symmetric"), (N, (3, 2)),
         ref=lambda x: np.pad(x, 4, mode="symmetric")),
    case("pad-wrap", lambda x: sl.pad(x, (5, 1), mode="wrap"), (N, (2, 3)),
         ref=lambda x: np.pad(x, (5, 1), mode="wrap")),
    case("tile", lambda x: sl.tile(x, 2), (N, (2, 3)), ref=lambda x: np.tile(x, 2)),
    case("tile-more-reps", lambda x: sl.tile(x, (2, 1, 3)), (N, (2, 3)),
         ref=lambda x: np.tile(x, (2, 1, 3))),
    case("tile-fewer-reps", lambda x: sl.tile(x, (3,)), (N, (2, 2, 3)),
         ref=lambda x: np.tile(x, (3,))),
    case("repeat", lambda x: sl.repeat(x, 2), (N, (2, 3)), ref=lambda x: np.repeat(x, 2)),
    case("repeat-axis", lambda x: sl.repeat(x, 3, axis=1), (N, (2, 3)),
         ref=lambda x: np.repeat(x, 3, axis=1)),
    case("repeat-array", lambda x: sl.repeat(x, [2, 0, 3], axis=-1), (N, (2, 3)),
         ref=lambda x: np.repeat(x, [2, 0, 3], axis=-1)),
    # gathers
    case("take", lambda i, x: sl.take(x, i), (N, (3, 4)), consts=[IDX],
         ref=lambda i, x: np.take(x, i)),
    case("take-axis", lambda i, x: sl.take(x, i, axis=1), (N, (2, 3, 4)), consts=[IDX],
         ref=lambda i, x: np.take(x, i, axis=1)),
    case("take-clip", lambda i, x: sl.take(x, i, axis=0, mode="clip"), (N, (4, 2)),
         consts=[IDX_WILD], ref=lambda i, x: np.take(x, i, axis=0, mode="clip")),
    case("take-wrap", lambda i, x: sl.take(x, i, axis=-1, mode="wrap"), (N, (2, 4)),
         consts=[IDX_WILD], ref=lambda i, x: np.take(x, i, axis=-1, mode="wrap")),
    case("take-scalar", lambda x: sl.take(x, 1, axis=1), (N, (2, 3)),
         ref=lambda x: np.take(x, 1, axis=1)),
    case("take_along_axis", lambda i, x: sl.take_along_axis(x, i, axis=1), (N, (2, 3)),
         consts=[ALONG], ref=lambda i, x: np.take_along_axis(x, i, axis=1)),
    case("take_along_axis-bcast", lambda i, x: sl.take_along_axis(x, i, axis=0), (N, (3, 4)),
         consts=[np.array([[2], [0]])], ref=lambda i, x: np.take_along_axis(x, i, axis=0)),
    case("take_along_axis-flat", lambda i, x: sl.take_along_axis(x, i, axis=None), (N, (2, 3)),
         consts=[np.array([5, 0, -1])],
         ref=lambda i, x: np.take_along_axis(x, i, axis=None)),
    # joining, splitting, shapes
    case("vstack", lambda x, y: sl.vstack([x, y]), (N, (3,)), (N, (2, 3)),
         ref=lambda x, y: np.vstack([x, y])),
    case("hstack-1d", lambda x, y: sl.hstack([x, y]), (N, (3,)), (N, (2,)),
         ref=lambda x, y: np.hstack([x, y])),
    case("hstack-2d", lambda x, y: sl.hstack([x, y]), (N, (2, 3)), (N, (2, 1)),
         ref=lambda x, y: np.hstack([x, y])),
    case("split-sections", lambda x: _stack_pieces(sl.split(x, 2, axis=1)), (N, (3, 4)),
         ref=lambda x: _np_stack_pieces(np.split(x, 2, axis=1))),
    case("split-indices", lambda x: _stack_pieces(sl.split(x, [1, 3], axis=-1)), (N, (2, 5)),
         ref=lambda x: _np_stack_pieces(np.split(x, [1, 3], axis=-1))),
    case("split-overlapping", lambda x: _stack_pieces(sl.split(x, [3, 1])), (N, (5,)),
         ref=lambda x: _np_stack_pieces(np.split(x, [3, 1]))),
    case("diff", sl.diff, (N, (3, 5)), ref=np.diff),
    case("diff-n2-axis0", lambda x: sl.diff(x, n=2, axis=0), (N, (4, 3)),
         ref=lambda x: np.diff(x, n=2, axis=0)),
    case("diff-prepend-append", lambda x: sl.diff(x, prepend=0.5, append=[[1.0], [2.0]]),
         (N, (2, 3)), ref=lambda x: np.diff(x, prepend=0.5, append=[[1.0], [2.0]])),
    case("ravel", sl.ravel, (N, (2, 3)), ref=np.ravel),
    case("atleast_1d", sl.atleast_1d, (N, ()), ref=np.atleast_1d),
    case("atleast_2d", sl.atleast_2d, (N, (3,)), ref=np.atleast_2d),
    case("meshgrid-xy", lambda x, y, z: sl.stack(sl.meshgrid(x, y, z)), (N, (2,)), (N, (3,)),
         (N, (4,)), ref=lambda x, y, z: np.stack(np.meshgrid(x, y, z))),
    case("meshgrid-ij", lambda x, y: sl.stack(sl.meshgrid(x, y, indexing="ij")), (N, (2,)),
         (N, (3,)), ref=lambda x, y: np.stack(np.meshgrid(x, y, indexing="ij"))),
    case("linspace-tensors", lambda a, b: sl.linspace(a, b, 5), (N, (2,)), (N, (2,)),
         ref=lambda a, b: np.linspace(a, b, 5)),
    case("linspace-no-endpoint", lambda a, b: sl.linspace(a, b, 4, endpoint=False), (N, ()),
         (N, ()), ref=lambda a, b: np.linspace(a, b, 4, endpoint=False)),
]

(test_forward_matches_numpy, test_vjp_float32_matches_float64,
 test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop) = table_tests(
    CASES)


def _grad_of_sum(fn, x):
    return sl.grad(lambda t: sl.sum(fn(t)))(x).numpy()


# --- products with zeros: no division by x ----------------------------------------------------
@pytest.mark.parametrize("values, want", [
    ([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),  # one zero: only the zero's own gradient survives
    ([2.0, 0.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0]),  # two zeros: every product keeps a zero
    ([0.0], [1.0]),
])
def test_prod_gradient_with_zeros(backend, values, want):
    x = backend.tensor(values)
    g = _grad_of_sum(sl.prod, x)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, want)
    check_grads(sl.prod, [backend.array(values)], order=2)
    check_grads(lambda t: sl.prod(t * t + t), [backend.array(values)], order=2)


@pytest.mark.parametrize("values, want", [
    # d/dx_k sum_i prod_{j<=i} x_j = sum_{i>=k} prod_{j<=i, j!=k} x_j, worked by hand
    ([2.0, 0.0, 3.0], [1.0, 2.0 + 2.0 * 3.0, 0.0]),
    ([2.0, 0.0, 0.0, 3.0], [1.0, 2.0, 0.0, 0.0]),
    ([0.0, 5.0], [1.0 + 5.0, 0.0]),
])
def test_cumprod_gradient_with_zeros(backend, values, want):
    x = backend.tensor(values)
    g = _grad_of_sum(sl.cumprod, x)
    np.testing.assert_allclose(g, want)
    check_grads(sl.cumprod, [backend.array(values)], order=2)


def test_prod_of_an_empty_axis_is_one(backend):
    x = backend.tensor(np.zeros((2, 0)), requires_grad=True)
    out = sl.prod(x, axis=1)
    np.testing.assert_array_equal(out.numpy(), [1.0, 1.0])
    assert sl.grad(lambda t: sl.prod(t, axis=1).sum())(x).shape == (2, 0)


def test_std_gradient_at_zero_variance_is_nan_as_in_jax(backend):
    x = backend.tensor([2.0, 2.0, 2.0])
    assert sl.std(x).item() == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        g = sl.grad(sl.std)(x).numpy()
    assert np.all(np.isnan(g))
    jax = pytest.importorskip("jax")
    want = np.asarray(jax.grad(lambda v: jax.numpy.std(v))(np.full(3, 2.0, np.float32)))
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))


# --- take's modes ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["clip", "wrap"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_take_modes_match_numpy(backend, mode, axis):
    xs = np.arange(12.0).reshape(3, 4)
    idx = np.array([[-13, -5, -1], [0, 3, 12]])
    want = np.take(xs, idx, axis=axis, mode=mode)
    out = sl.take(backend.tensor(xs), backend.tensor(idx), axis=axis, mode=mode)
    np.testing.assert_array_equal(out.numpy(), want)


def test_take_raises_for_out_of_range_and_names_clip(backend):
    x = backend.tensor(np.arange(3.0))
    np.testing.assert_array_equal(sl.take(x, [-3, -1, 2]).numpy(), [0.0, 2.0, 2.0])
    for bad in ([3], [-4], [0, 7]):
        with pytest.raises(IndexError, match="mode='clip'"):
            sl.take(x, bad)
        with pytest.raises(IndexError, match="out of bounds"):
            sl.take(x, bad, mode="raise")
    with pytest.raises(ValueError, match="mode"):
        sl.take(x, [0], mode="fill")
    with pytest.raises(TypeError, match="integers"):
        sl.take(x, [0.0])


def test_take_with_traced_indices_in_a_scan_body(backend):
    xs = backend.tensor(np.arange(4.0) + 1.0, requires_grad=True)
    idx = backend.tensor(np.array([[0, 5], [-1, -9], [2, 3]]))

    def run(mode):
        def body(c, i):
            y = sl.take(xs, i, mode=mode)
            return c + y.sum(), y
        return sl.scan(body, backend.tensor(0.0), idx)

    for mode in ("clip", "wrap"):
        total, ys = run(mode)
        want = np.take(np.arange(4.0) + 1.0, idx.numpy(), mode=mode)
        np.testing.assert_array_equal(ys.numpy(), want)
        g = sl.grad(lambda v, m=mode: sl.scan(lambda c, i: (c + sl.take(v, i, mode=m).sum(), None),
                                             backend.tensor(0.0), idx)[0])(xs)
        counts = np.zeros(4)
        np.add.at(counts, np.take(np.arange(4), idx.numpy(), mode=mode), 1.0)
        np.testing.assert_array_equal(g.numpy(), counts)
    # mode None checks the values at run time (the stand-ins seen while tracing are in range)
    with pytest.raises(IndexError, match="mode='clip'"):
        run(None)
    ok = backend.tensor(np.array([[0, -1], [3, -4]]))
    _, ys = sl.scan(lambda c, i: (c, sl.take(xs, i)), backend.tensor(0.0), ok)
    np.testing.assert_array_equal(ys.numpy(), [[1.0, 4.0], [4.0, 1.0]])


def test_take_along_axis_raises_for_out_of_range(backend):
    x = backend.tensor(np.zeros((2, 3)))
    with pytest.raises(IndexError, match="out of bounds"):
        sl.take_along_axis(x, backend.tensor(np.array([[3], [0]])), axis=1)
    with pytest.raises(ValueError, match="same number of dimensions"):
        sl.take_along_axis(x, backend.tensor(np.array([0])), axis=1)


# --- indices, ties and integer results ------------------------------------------------------
def test_argmax_argmin_ties_take_the_first(backend):
    xs = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0]])
    x = backend.tensor(xs, requires_grad=True)
    for fn, ref in ((sl.argmax, np.argmax), (sl.argmin, np.argmin)):
        for kw in ({}, {"axis": 1}, {"axis": 0}, {"axis": -1, "keepdims": True},
                   {"keepdims": True}):
            out = fn(x, **kw)
            want = ref(xs, **kw)
            assert out.dtype == np.int64 and not out.requires_grad
            np.testing.assert_array_equal(out.numpy(), want)
    with pytest.raises(ValueError, match="empty"):
        sl.argmax(backend.tensor(np.zeros((0, 2))))
    with pytest.raises(ValueError, match="out of range"):
        sl.argmin(x, axis=2)


def test_sort_with_ties_sends_the_cotangent_back_stably(backend):
    xs = np.array([1.0, 0.0, 1.0, 0.0])
    w = np.array([10.0, 20.0, 30.0, 40.0])
    x = backend.tensor(xs)
    np.testing.assert_array_equal(sl.sort(x).numpy(), [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(sl.argsort(x).numpy(), [1, 3, 0, 2])
    g = sl.grad(lambda t: sl.sum(sl.sort(t) * backend.tensor(w)))(x).numpy()
    np.testing.assert_array_equal(g, [30.0, 10.0, 40.0, 20.0])
    assert sl.argsort(x).dtype == np.int64


def test_argsort_matches_numpy_stable(backend):
    xs = np.random.default_rng(0).integers(0, 3, (4, 6)).astype(np.float64)
    for axis in (-1, 0, None):
        np.testing.assert_array_equal(sl.argsort(backend.tensor(xs), axis=axis).numpy(),
                                      np.argsort(xs, axis=axis, kind="stable"))


def test_searchsorted(backend):
    a = backend.tensor([1.0, 2.0, 2.0, 3.0])
    v = np.array([[0.0, 2.0], [2.5, 9.0]])
    for side in ("left", "right"):
        out = sl.searchsorted(a, backend.tensor(v), side=side)
        assert out.dtype == np.int32  # jnp.searchsorted's, with or without x64
        np.testing.assert_array_equal(out.numpy(), np.searchsorted(a.numpy(), v, side=side))
    assert sl.searchsorted(a, 2.0).item() == 1
    with pytest.raises(ValueError, match="side"):
        sl.searchsorted(a, v, side="middle")
    with pytest.raises(ValueError, match="method"):
        sl.searchsorted(a, v, method="bisect")
    unsorted = np.array([3.0, 1.0, 2.0, 2.0])
    for method in ("scan", "sort", "compare_all"):
        out = sl.searchsorted(backend.tensor(unsorted), backend.tensor(v),
                              sorter=sl.argsort(backend.tensor(unsorted)), method=method)
        np.testing.assert_array_equal(out.numpy(), np.searchsorted(
            unsorted, v, sorter=np.argsort(unsorted, kind="stable")))


@pytest.mark.parametrize("x64", [False, True])
def test_searchsorted_agrees_with_jax(x64):
    jax = pytest.importorskip("jax")
    with jax.enable_x64(x64):
        _searchsorted_against(jax.numpy)


def _searchsorted_against(J):

    a, v = np.array([1.0, 2.0, 2.0, 3.0]), np.array([[0.0, 2.0], [2.5, 9.0]])
    for side in ("left", "right"):
        want = J.searchsorted(a, v, side=side)
        got = sl.searchsorted(sl.tensor(a), sl.tensor(v), side=side)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), np.asarray(want))
        batched = sl.vmap(lambda u, s=side: sl.searchsorted(sl.tensor(a), u, side=s))(sl.tensor(v))
        assert batched.dtype == want.dtype
        np.testing.assert_array_equal(batched.numpy(), np.asarray(want))


def test_any_all(backend):
    xs = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]])
    x = backend.tensor(xs)
    for fn, ref in ((sl.any, np.any), (sl.all, np.all)):
        for kw in ({}, {"axis": 0}, {"axis": (0, 1), "keepdims": True}, {"axis": -1}):
            out = fn(x, **kw)
            assert out.dtype == np.bool_
            np.testing.assert_array_equal(out.numpy(), ref(xs, **kw))


# --- pad, repeat, split ---------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("width", [0, 3, (0, 2), (7, 1), ((1, 0), (2, 6)), [[4, 4]]])
def test_pad_width_forms_and_modes_match_numpy(backend, mode, width):
    xs = np.arange(6.0).reshape(2, 3) + 1.0
    np.testing.assert_array_equal(sl.pad(backend.tensor(xs), width, mode=mode).numpy(),
                                  np.pad(xs, width, mode=mode))


def test_pad_errors_and_integer_input(backend):
    x = backend.tensor(np.arange(3))
    out = sl.pad(x, 1, constant_values=7)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out.numpy(), [7, 0, 1, 2, 7])
    with pytest.raises(NotImplementedError, match="'mean' is not supported.*constant"):
        sl.pad(x, 1, mode="mean")
    with pytest.raises(ValueError, match="negative"):
        sl.pad(x, -1)
    with pytest.raises(ValueError, match="pair"):
        sl.pad(x, ((1, 2, 3),))
    with pytest.raises(ValueError, match="empty axis"):
        sl.pad(backend.tensor(np.zeros(0)), 1, mode="edge")


def test_pad_constant_tensor_is_differentiable(backend):
    c = backend.tensor(0.5, requires_grad=True)
    x = backend.tensor(np.ones((2, 2)), requires_grad=True)
    gx, gc = sl.grad(lambda x, c: sl.pad(x, 1, constant_values=c).sum(), argnums=(0, 1))(x, c)
    np.testing.assert_array_equal(gx.numpy(), np.ones((2, 2)))
    assert gc.item() == 12.0  # 16 places, 4 of them x


def test_repeat_with_an_array_of_repeats(backend):
    xs = np.arange(6.0).reshape(2, 3)
    reps = np.array([1, 0, 2])
    x = backend.tensor(xs, requires_grad=True)
    np.testing.assert_array_equal(sl.repeat(x, reps, axis=1).numpy(),
                                  np.repeat(xs, reps, axis=1))
    g = sl.grad(lambda t: sl.repeat(t, reps, axis=1).sum())(x).numpy()
    np.testing.assert_array_equal(g, np.broadcast_to(reps, (2, 3)))
    np.testing.assert_array_equal(sl.repeat(x, [2]).numpy(), np.repeat(xs, [2]))
    with pytest.raises(ValueError, match="one entry per element"):
        sl.repeat(x, [1, 2], axis=1)
    with pytest.raises(ValueError, match="negative"):
        sl.repeat(x, -1)


def test_split_returns_a_list(backend):
    xs = np.arange(10.0)
    x = backend.tensor(xs)
    for spec in (5, [2, 3], [-3], [4, 20], [6, 2]):
        got = sl.split(x, spec)
        want = np.split(xs, spec)
        assert isinstance(got, list) and len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b)
    with pytest.raises(ValueError, match="equal division"):
        sl.split(x, 3)


# --- integer inputs and dtypes --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_, np.float32])
def test_integer_and_bool_inputs_keep_numpy_dtypes(backend, dtype):
    # var and std compute in JAX's float for the type (float32 for int32, uint8 and bool)
    xs = np.array([[1, 0, 1], [1, 1, 0]]).astype(dtype)
    x = backend.tensor(xs)
    floats = xs.astype(inexact_dtype(xs.dtype))
    for fn, ref, arg in ((sl.cumsum, np.cumsum, xs), (sl.cumprod, np.cumprod, xs),
                         (sl.prod, np.prod, xs), (sl.var, np.var, floats),
                         (sl.std, np.std, floats), (sl.diff, np.diff, xs),
                         (sl.flip, np.flip, xs), (sl.sort, np.sort, xs),
                         (sl.ravel, np.ravel, xs)):
        out, want = fn(x), ref(arg)
        assert out.dtype == want.dtype, (fn.__name__, out.dtype, want.dtype)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    out = sl.cumsum(x, axis=1, dtype=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.numpy(), np.cumsum(xs, axis=1, dtype=np.float32))


def test_axis_errors(backend):
    x = backend.tensor(np.zeros((2, 3)))
    for call in (lambda: sl.cumsum(x, axis=2), lambda: sl.cumprod(x, axis=-3),
                 lambda: sl.prod(x, axis=2), lambda: sl.var(x, axis=(0, 5)),
                 lambda: sl.flip(x, 2), lambda: sl.roll(x, 1, axis=2),
                 lambda: sl.take(x, [0], axis=2), lambda: sl.sort(x, axis=2),
                 lambda: sl.diff(x, axis=-3), lambda: sl.split(x, 2, axis=2),
                 lambda: sl.moveaxis(x, 0, 2), lambda: sl.any(x, axis=3)):
        with pytest.raises(ValueError, match="out of range"):
            call()
    with pytest.raises(ValueError, match="repeated axis"):
        sl.moveaxis(x, (0, 0), (0, 1))
    with pytest.raises(TypeError, match="one int"):
        sl.cumsum(x, axis=(0, 1))


def test_linspace_creation(backend):
    d = backend.device
    for args, kw in (((0.0, 1.0), {}), ((2, 3, 5), {}), ((0, 1, 4), {"endpoint": False}),
                     ((0, 10, 4), {"dtype": np.int32}), ((1.0, 0.0, 1), {}), ((0, 1, 0), {})):
        out = sl.linspace(*args, device=d, **kw)
        want = np.linspace(*args, **kw)
        backend.check_device(out)
        assert out.dtype == want.dtype and not out.requires_grad
        np.testing.assert_array_equal(out.numpy(), want)
    assert sl.linspace(0, 1).dtype == np.float64 and sl.linspace(0, 1).shape == (50,)
    a = backend.tensor(np.float32(1.0), requires_grad=True)
    out = sl.linspace(a, 3.0, 3)
    assert out.dtype == np.float32
    np.testing.assert_allclose(sl.grad(lambda a: sl.linspace(a, 3.0, 3).sum())(a).numpy(), 1.5)


# --- NumPy dispatch -------------------------------------------------------------------------
def test_numpy_functions_run_the_differentiable_ops(backend):
    xs = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, 1.5]])
    x = backend.tensor(xs, requires_grad=True)
    calls = {
        "cumsum": lambda a: np.cumsum(a, axis=1), "cumprod": lambda a: np.cumprod(a),
        "prod": lambda a: np.prod(a, axis=0, keepdims=True), "var": lambda a: np.var(a, ddof=1),
        "std": lambda a: np.std(a, axis=1), "flip": np.flip, "roll": lambda a: np.roll(a, 1),
        "pad": lambda a: np.pad(a, (1, 0), mode="edge"), "tile": lambda a: np.tile(a, 2),
        "repeat": lambda a: np.repeat(a, 2, axis=0),
        "take": lambda a: np.take(a, [1, 0], axis=1),
        "take_along_axis": lambda a: np.take_along_axis(a, np.array([[2, 0]]).repeat(2, 0), 1),
        "vstack": lambda a: np.vstack([a, a]), "hstack": lambda a: np.hstack([a, a]),
        "moveaxis": lambda a: np.moveaxis(a, 0, 1), "diff": lambda a: np.diff(a, axis=0),
        "sort": np.sort, "ravel": np.ravel, "atleast_1d": np.atleast_1d,
        "atleast_2d": np.atleast_2d, "split": lambda a: np.split(a, 3, axis=1)[1],
    }
    for name, call in calls.items():
        out = call(x)
        assert isinstance(out, sl.Tensor) and out.requires_grad, name
        np.testing.assert_allclose(out.numpy(), call(xs), err_msg=name)
    for call in (np.argmax, np.argmin, np.argsort, np.any, np.all,
                 lambda a: np.searchsorted(np.sort(a[0]), a)):
        out = call(x)
        assert isinstance(out, sl.Tensor), call
        np.testing.assert_array_equal(out.numpy(), call(xs))


def test_numpy_index_functions_work_on_traced_tensors(backend):
    xs = backend.tensor(np.array([[3.0, 1.0, 2.0], [0.5, 4.0, 1.5]]))
    _, ys = sl.scan(lambda c, x: (c, np.argmax(x) + np.argsort(x)), backend.tensor(0.0), xs)
    np.testing.assert_array_equal(ys.numpy(), [[1, 2, 0], [1, 3, 2]])


# --- against jax.numpy, where it is installed ----------------------------------------------
def test_results_match_jax_numpy():
    jnp = pytest.importorskip("jax.numpy")
    xs = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    x = sl.tensor(xs)
    pairs = [
        (sl.cumsum(x, 1), jnp.cumsum(xs, 1)), (sl.cumprod(x, 0), jnp.cumprod(xs, 0)),
        (sl.prod(x, 1), jnp.prod(xs, 1)), (sl.var(x, 0, ddof=1), jnp.var(xs, 0, ddof=1)),
        (sl.std(x), jnp.std(xs)), (sl.argmax(x, 1), jnp.argmax(xs, 1)),
        (sl.pad(x, (1, 2), mode="reflect"), jnp.pad(xs, (1, 2), mode="reflect")),
        (sl.take(x, np.array([5, -7]), mode="clip"), jnp.take(xs, np.array([5, -7]),
                                                                mode="clip")),
        (sl.take(x, np.array([13, -7]), mode="wrap"), jnp.take(xs, np.array([13, -7]),
                                                                 mode="wrap")),
        (sl.sort(x, 0), jnp.sort(xs, 0)), (sl.diff(x, 2), jnp.diff(xs, 2)),
        (sl.linspace(0.0, 1.0, 7), jnp.linspace(0.0, 1.0, 7)),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.numpy(), np.asarray(theirs), rtol=1e-5, atol=1e-6)


# --- reported edge cases: dtypes asked for, empty and 0-d inputs, NumPy's options ----------
@pytest.mark.parametrize("values, dtype", [
    ([100, 100, 100], np.int8), ([250, 10, 3], np.uint8), ([1, 0, 1], np.bool_),
    ([30000, 30000], np.int16), ([0.5, 1.7, -2.2], np.int32), ([3, 4], np.float16)])
def test_cumsum_accumulates_in_the_dtype_asked_for(backend, values, dtype):
    """dtype= is the accumulator, as in NumPy and JAX: int8 wraps around, bools saturate."""
    src = np.array(values, np.int8 if dtype == np.int8 else None)
    x = backend.tensor(src)
    want = np.cumsum(src, dtype=dtype)
    for out in (sl.cumsum(x, dtype=dtype), sl.cumsum(x, 0, np.dtype(dtype).name),
                x.cumsum(dtype=dtype), np.cumsum(x, dtype=dtype)):
        assert out.dtype == want.dtype, (out.dtype, want.dtype)
        np.testing.assert_array_equal(out.numpy(), want)


def test_cumsum_dtype_inside_a_scan_body_and_against_jax(backend):
    xs = np.array([[100, 100, 100], [-128, -1, 127]], np.int8)
    _, ys = sl.scan(lambda c, x: (c, sl.cumsum(x, dtype=np.int8)), backend.tensor(0),
                    backend.tensor(xs))
    assert ys.dtype == np.int8
    np.testing.assert_array_equal(ys.numpy(), np.cumsum(xs, axis=1, dtype=np.int8))
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        want = np.asarray(jax.numpy.cumsum(xs, axis=1, dtype=np.int8))
    np.testing.assert_array_equal(sl.cumsum(backend.tensor(xs), 1, np.int8).numpy(), want)


def test_pad_reads_a_tensor_of_constant_values_as_pairs(backend):
    xs = np.arange(4.0).reshape(2, 2)
    x = backend.tensor(xs)
    for cv in ([1.0, 2.0], [[1.0, 2.0], [3.0, 4.0]], [[5.0], [6.0]], [7.0]):
        width = ((1, 2), (2, 1))
        np.testing.assert_array_equal(
            sl.pad(x, width, constant_values=backend.tensor(cv)).numpy(),
            np.pad(xs, width, constant_values=cv), err_msg=str(cv))
    c = backend.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    g = sl.grad(lambda c: sl.pad(x, ((1, 2), (2, 1)), constant_values=c).sum())(c)
    # rows padded first (whole rows of the original width), then columns (the full height)
    np.testing.assert_array_equal(g.numpy(), [[2.0, 4.0], [10.0, 5.0]])
    with pytest.raises(ValueError, match="pair per axis"):
        sl.pad(x, 1, constant_values=backend.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="pair per axis"):
        sl.pad(x, 1, constant_values=backend.tensor(np.ones((1, 2, 2))))


def test_argmax_argmin_of_an_empty_array_along_a_nonempty_axis(backend):
    xs = np.zeros((0, 4))
    x = backend.tensor(xs)
    for fn, ref in ((sl.argmax, np.argmax), (sl.argmin, np.argmin)):
        for kw in ({"axis": 1}, {"axis": -1, "keepdims": True}):
            out, want = fn(x, **kw), ref(xs, **kw)
            assert out.dtype == np.int64 and out.shape == want.shape, (out.shape, want.shape)
        for kw in ({}, {"axis": 0}):
            with pytest.raises(ValueError, match="empty"):
                fn(x, **kw)


def test_axis_zero_of_a_0d_tensor_reads_as_numpy_does(backend):
    xs = np.array(5.0)
    x = backend.tensor(xs)
    calls = [
        lambda m, a: m.cumsum(a, axis=0), lambda m, a: m.cumprod(a, axis=-1),
        lambda m, a: m.prod(a, axis=0), lambda m, a: m.prod(a, 0, keepdims=True),
        lambda m, a: m.argsort(a, axis=0), lambda m, a: m.argmax(a, axis=0),
        lambda m, a: m.argmin(a, axis=-1, keepdims=True), lambda m, a: m.take(a, 0, axis=0),
        lambda m, a: m.take(a, [0, 0], axis=-1), lambda m, a: m.any(a, axis=0),
        lambda m, a: m.all(a, axis=0),
    ]
    for call in calls:
        out, want = call(sl, x), call(np, xs)
        assert out.shape == np.shape(want) and out.dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(out.numpy(), want)
    for bad in (lambda m, a: m.cumsum(a, axis=1), lambda m, a: m.prod(a, axis=(0,)),
                lambda m, a: m.sort(a, axis=0), lambda m, a: m.argmax(a, axis=1)):
        with pytest.raises(np.exceptions.AxisError):  # refused, as NumPy refuses
            bad(np, xs)
        with pytest.raises(ValueError, match="out of range"):
            bad(sl, x)
    g = sl.grad(lambda t: sl.cumsum(t, axis=0).sum() + sl.prod(t, axis=0))(x)
    assert g.shape == () and g.item() == 2.0


def test_numpy_sort_kinds(backend):
    xs = np.array([2.0, 1.0, 2.0, 1.0])
    x = backend.tensor(xs)
    for kind in ("stable", "mergesort", "quicksort", "heapsort", None):
        np.testing.assert_array_equal(np.sort(x, kind=kind).numpy(), np.sort(xs))
    np.testing.assert_array_equal(np.sort(x, stable=True).numpy(), np.sort(xs))
    for kw in ({"kind": "stable"}, {"kind": "mergesort"}, {"stable": True}, {}):
        np.testing.assert_array_equal(np.argsort(x, **kw).numpy(), [1, 3, 0, 2])
    for kw in ({"kind": "quicksort"}, {"kind": "heapsort"}, {"stable": False}):
        with pytest.raises(ValueError, match="stably"):
            np.argsort(x, **kw)
    with pytest.raises(ValueError, match="kind must be"):
        np.sort(x, kind="bubble")


def test_take_with_an_empty_list(backend):
    xs = np.arange(6.0).reshape(2, 3)
    x = backend.tensor(xs, requires_grad=True)
    for kw in ({}, {"axis": 1}, {"axis": 0}):
        out, want = sl.take(x, [], **kw), np.take(xs, [], **kw)
        assert out.shape == want.shape and out.dtype == want.dtype
    assert sl.take(x, [[]], axis=1).shape == np.take(xs, [[]], axis=1).shape
    g = sl.grad(lambda t: sl.take(t, [], axis=1).sum())(x)
    np.testing.assert_array_equal(g.numpy(), np.zeros((2, 3)))
    with pytest.raises(TypeError, match="integers"):
        sl.take(x, [0.5])


def test_flatten_and_ravel_orders(backend):
    xs = np.arange(24.0).reshape(2, 3, 4)
    x = backend.tensor(xs, requires_grad=True)
    for order in ("C", "F"):
        want = xs.flatten(order)
        for out in (x.flatten(order), x.ravel(order=order), sl.ravel(x, order),
                    np.ravel(x, order=order)):
            np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(x.flatten().numpy(), xs.ravel())
    w = np.arange(24.0)
    g = sl.grad(lambda t: (t.flatten("F") * backend.tensor(w)).sum())(x)
    np.testing.assert_array_equal(g.numpy(), w.reshape(xs.shape[::-1]).T)
    for order in ("A", "K", "X"):
        with pytest.raises(ValueError, match="'C'.*'F'"):
            x.flatten(order)


def test_sort_and_argsort_take_jax_keywords(backend):
    a = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [0.0, -1.0, 0.0, 5.0, -1.0]])
    t = backend.tensor(a)
    for axis in (-1, 0, None):
        flat = a.ravel() if axis is None else a
        ax = 0 if axis is None else axis
        # descending, ties in their original order: a stable sort on the negated keys
        want = np.argsort(-flat, axis=ax, kind="stable")
        np.testing.assert_array_equal(sl.argsort(t, axis, descending=True).numpy(), want)
        np.testing.assert_array_equal(sl.sort(t, axis, descending=True).numpy(),
                                      -np.sort(-flat, axis=ax, kind="stable"))
        np.testing.assert_array_equal(sl.argsort(t, axis, stable=False).numpy(),
                                      np.argsort(flat, axis=ax, kind="stable"))
    assert sl.argsort(t, dtype="int32").dtype == np.int32
    g = sl.grad(lambda x: (sl.sort(x, descending=True) * sl.arange(5.0)).sum())(t[0])
    np.testing.assert_array_equal(g.numpy(), [4.0, 0.0, 1.0, 3.0, 2.0])
    with pytest.raises(TypeError, match="order="):
        sl.sort(t, order="x")
    with pytest.raises(ValueError, match="kind must be"):
        sl.argsort(t, kind="bogo")


def test_sort_and_argsort_keywords_agree_with_jax():
    jax = pytest.importorskip("jax")
    a = np.array([1.0, 3.0, 3.0, 2.0, 3.0, np.nan, -np.inf])
    with jax.enable_x64(True):
        for kw in ({"descending": True}, {"descending": False}, {"stable": True}):
            want = jax.numpy.argsort(a, **kw)
            got = sl.argsort(sl.tensor(a), **kw)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), np.asarray(want))
            np.testing.assert_array_equal(sl.sort(sl.tensor(a), **kw).numpy(),
                                          np.asarray(jax.numpy.sort(a, **kw)))
