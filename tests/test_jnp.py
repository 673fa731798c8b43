"""scanlib.numpy, the jax.numpy view: its names are scanlib's objects; the functions it added
(array/asarray with JAX's meaning, the operators by name, power, isfinite, isclose/allclose,
polyval, einsum with '...' and repeated indices, clip's min=/max=, Tensor.clip/dot) against
NumPy, finite differences (to second order) and a scan body (the opcheck table), under vmap,
jit and grad of grad, at 0-d, empty, broadcast and nan/inf inputs, and against JAX itself
where it is installed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp

from opcheck import N, P, case, table_tests


# --- the table: forward against NumPy, VJPs to second order, inside a scan body ------------
def _np_polyval(p, x):
    return np.polyval(p, x)


CASES = [
    case("add", jnp.add, (N, (2, 3)), (N, (3,)), ref=np.add),
    case("subtract", jnp.subtract, (N, (2, 3)), (N, (2, 1)), ref=np.subtract),
    case("multiply", jnp.multiply, (N, (2, 3)), (N, (3,)), ref=np.multiply),
    case("divide", jnp.divide, (N, (2, 3)), (P, (3,)), ref=np.divide),
    case("negative", jnp.negative, (N, (4,)), ref=np.negative),
    case("power", jnp.power, (P, (2, 3)), (N, (3,)), ref=np.power),
    case("power_int_exponent", lambda x: jnp.power(x, 3), (N, (4,)), ref=lambda x: x**3),
    case("polyval", jnp.polyval, (N, (4,)), (N, (2, 3)), ref=_np_polyval),
    case("polyval_0d_x", jnp.polyval, (N, (3,)), (N, ()), ref=_np_polyval),
    case("polyval_stacked_p", jnp.polyval, (N, (4, 2)), (N, (3, 1)), ref=_np_polyval),
    case("polyval_stacked_p_0d_x", jnp.polyval, (N, (5, 3)), (N, ()), ref=_np_polyval),
    case("array_of_tensor", lambda x: jnp.array(x) * x, (N, (3,)), ref=lambda x: x * x),
    case("array_stacks_a_list", lambda x, y: jnp.array([x, y, 2.0 * x]), (N, (3,)), (N, (3,)),
         ref=lambda x, y: np.array([x, y, 2.0 * x])),
    case("asarray_nested", lambda x: jnp.asarray([[x[0], 1.0], [x[1], x[0]]]), (N, (2,)),
         ref=lambda x: np.array([[x[0], 1.0], [x[1], x[0]]], dtype=x.dtype)),
    case("einsum_diagonal", lambda x: jnp.einsum("ii->i", x), (N, (3, 3)),
         ref=lambda x: np.einsum("ii->i", x).copy()),
    case("einsum_trace", lambda x: jnp.einsum("ii", x), (N, (3, 3)),
         ref=lambda x: np.einsum("ii", x)),
    case("einsum_batched_diagonal", lambda x, y: jnp.einsum("bii,ij->bj", x, y), (N, (2, 3, 3)),
         (N, (3, 2)), ref=lambda x, y: np.einsum("bii,ij->bj", x, y)),
    case("einsum_ellipsis", lambda x, y: jnp.einsum("...ij,...j->...i", x, y), (N, (4, 2, 3)),
         (N, (3,)), ref=lambda x, y: np.einsum("...ij,...j->...i", x, y)),
    case("einsum_ellipsis_broadcast", lambda x, y: jnp.einsum("...ij,...jk", x, y),
         (N, (2, 1, 2, 3)), (N, (4, 3, 2)), ref=lambda x, y: np.einsum("...ij,...jk", x, y)),
    case("einsum_ellipsis_and_diagonal", lambda x: jnp.einsum("...ii->...i", x), (N, (2, 3, 3)),
         ref=lambda x: np.einsum("...ii->...i", x).copy()),
    case("clip_keywords", lambda x: jnp.clip(x, min=-0.5, max=0.5),
         (lambda rng, s: rng.choice([-0.9, -0.2, 0.1, 0.8], s), (5,)),
         ref=lambda x: np.clip(x, -0.5, 0.5)),
    case("tensor_clip", lambda x: x.clip(max=0.5),
         (lambda rng, s: rng.choice([-0.9, -0.2, 0.1, 0.8], s), (5,)),
         ref=lambda x: np.clip(x, None, 0.5)),
    case("tensor_dot", lambda x, y: x.dot(y), (N, (2, 3)), (N, (3, 4)), ref=np.dot),
    case("tensor_diagonal", lambda x: x.diagonal(1, -2, -1), (N, (2, 3, 4)),
         ref=lambda x: x.diagonal(1, -2, -1).copy()),
    case("tensor_trace", lambda x: x.trace(-1), (N, (3, 4)), ref=lambda x: x.trace(-1)),
    case("tensor_mT", lambda x: x.mT, (N, (2, 3, 4)), ref=lambda x: np.swapaxes(x, -1, -2)),
    case("tensor_swapaxes", lambda x: x.swapaxes(0, 2), (N, (2, 3, 4)),
         ref=lambda x: x.swapaxes(0, 2)),
    case("tensor_sort_descending", lambda x: x.sort(axis=0, descending=True), (N, (4, 3)),
         ref=lambda x: -np.sort(-x, axis=0)),
    case("tensor_take", lambda x: x.take(np.array([2, 0, 2]), axis=1), (N, (2, 3)),
         ref=lambda x: x.take([2, 0, 2], axis=1)),
    case("tensor_repeat", lambda x: x.repeat(2, axis=0), (N, (2, 3)),
         ref=lambda x: x.repeat(2, axis=0)),
    case("tensor_copy", lambda x: x.copy() * x, (N, (3,)), ref=lambda x: x * x),
    case("full_like", lambda x, f: jnp.full_like(x, f) * x, (N, (2, 3)), (N, (3,)),
         ref=lambda x, f: np.broadcast_to(f, x.shape) * x),
    case("full_of_tensor", lambda f: jnp.full((2, 3), f) * 2.0, (N, (3,)),
         ref=lambda f: np.broadcast_to(f, (2, 3)) * 2.0),
    case("full_of_0d_tensor_dtype", lambda f: jnp.full(4, f[0], dtype=f.dtype) * f, (N, (4,)),
         ref=lambda f: np.full(4, f[0]) * f),
    case("copy", lambda x: jnp.copy(x) * x, (N, (3,)), ref=lambda x: x * x),
    case("astype", lambda x: jnp.astype(x, x.dtype) * 2.0, (N, (3,)), ref=lambda x: x * 2.0),
    case("permute_dims", lambda x: jnp.permute_dims(x, (2, 0, 1)), (N, (2, 3, 4)),
         ref=lambda x: np.transpose(x, (2, 0, 1))),
    case("matrix_transpose", jnp.matrix_transpose, (N, (2, 3, 4)),
         ref=lambda x: np.swapaxes(x, -1, -2)),
    case("unstack", lambda x: jnp.unstack(x, axis=1)[2], (N, (2, 3)), ref=lambda x: x[:, 2]),
    case("broadcast_arrays", lambda x, y: jnp.broadcast_arrays(x, y)[0] * 2.0,
         (N, (2, 1)), (N, (3,)), ref=lambda x, y: np.broadcast_to(x, (2, 3)) * 2.0),
    case("select", lambda x: jnp.select([x < -0.5, x < 0.5], [x * x, 3.0 * x], jnp.sin(x)),
         (lambda rng, s: rng.choice([-1.0, 0.0, 1.0], s) + rng.uniform(-0.2, 0.2, s), (6,)),
         ref=lambda x: np.select([x < -0.5, x < 0.5], [x * x, 3.0 * x], np.sin(x))),
    case("exp2", jnp.exp2, (N, (4,)), ref=np.exp2),
    case("deg2rad", jnp.deg2rad, (N, (4,)), ref=np.deg2rad),
    case("radians", jnp.radians, (N, (4,)), ref=np.radians),
    case("rad2deg", jnp.rad2deg, (N, (4,)), ref=np.rad2deg),
    case("nansum", lambda x: jnp.nansum(x, axis=0), (N, (3, 2)), ref=lambda x: np.nansum(x, 0)),
    case("nanmean", lambda x: jnp.nanmean(x, axis=1, keepdims=True), (N, (3, 2)),
         ref=lambda x: np.nanmean(x, 1, keepdims=True)),
    case("inner", jnp.inner, (N, (2, 3)), (N, (4, 3)), ref=np.inner),
    case("linalg_diagonal", lambda x: jnp.linalg.diagonal(x, offset=1), (N, (2, 3, 4)),
         ref=lambda x: np.diagonal(x, 1, -2, -1).copy()),
    case("linalg_trace", jnp.linalg.trace, (N, (2, 3, 3)), ref=lambda x: np.trace(x, 0, -2, -1)),
    case("linalg_outer", jnp.linalg.outer, (N, (3,)), (N, (2,)), ref=np.outer),
    case("linalg_multi_dot", lambda a, b, c: jnp.linalg.multi_dot([a, b, c]), (N, (2,)),
         (N, (2, 3)), (N, (3, 4)), ref=lambda a, b, c: np.linalg.multi_dot([a, b, c])),
    case("linalg_eigvalsh", lambda x: jnp.linalg.eigvalsh(x @ x.T + 3.0 * jnp.eye(3)),
         (N, (3, 3)), ref=lambda x: np.linalg.eigvalsh(x @ x.T + 3.0 * np.eye(3))),
]

test_forward, test_vjp_dtypes, test_fd, test_in_scan = table_tests(CASES)


# --- the module is a view onto scanlib ---------------------------------------------------------
def test_functions_are_scanlibs_own_objects():
    assert jnp.tanh is sl.tanh and jnp.einsum is sl.einsum and jnp.array is sl.array
    assert jnp.acos is sl.arccos and jnp.pow is sl.power and jnp.concat is sl.concatenate
    assert jnp.linalg.solve is sl.linalg.solve and jnp.linalg.cholesky is sl.linalg.cholesky
    assert jnp.ndarray is sl.Tensor
    # jax.numpy's own helpers, which scanlib's top level does not repeat
    only_jnp = {"vectorize", "apply_along_axis", "apply_over_axes", "fromfunction", "piecewise",
                "indices", "ix_", "frombuffer", "fromiter", "fromstring"}
    assert jnp.vectorize is sl.vectorizing.vectorize and jnp.ix_ is sl.ops.grids.ix_
    for name in jnp.__all__:
        obj = getattr(jnp, name)
        if callable(obj) and not isinstance(obj, type) and name not in (
                "finfo", "iinfo", "issubdtype", "promote_types", "result_type",
                "printoptions", "set_printoptions", "get_printoptions"):
            defined_in = getattr(obj, "__module__", "") or ""
            assert defined_in.startswith("scanlib"), (name, defined_in)
            assert name in only_jnp or any(getattr(sl, n, None) is obj for n in dir(sl)), name


def test_names_are_jax_numpys():
    jax_numpy = pytest.importorskip("jax.numpy")
    assert set(jnp.__all__) - set(dir(jax_numpy)) == set()
    assert set(jnp.linalg.__all__) - set(dir(jax_numpy.linalg)) == set()


def test_porting_lists_exactly_the_missing_names():
    import re
    from pathlib import Path

    jax_numpy = pytest.importorskip("jax.numpy")
    text = (Path(__file__).resolve().parents[1] / "docs" / "porting.md").read_text()
    section = text.split("### Not yet in scanlib.numpy", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `")]
    listed = set(re.findall(r"`([\w.]+)`", " ".join(rows)))
    missing = {n for n in dir(jax_numpy) if not n.startswith("_") and n not in jnp.__all__}
    missing |= {f"linalg.{n}" for n in dir(jax_numpy.linalg)
                if not n.startswith("_") and n not in jnp.linalg.__all__}
    assert listed - missing == set(), "docs/porting.md lists names scanlib.numpy has"
    assert missing - listed == set(), "docs/porting.md does not list these missing names"


def test_import_block():
    import scanlib.numpy as np_like
    from scanlib.numpy import linalg

    assert np_like is sl.numpy and linalg is sl.numpy.linalg


# --- dtypes, constants, ndarray --------------------------------------------------------------
@pytest.mark.parametrize("name", ["float16", "float32", "float64", "int8", "int16", "int32",
                                  "int64", "uint8", "uint16", "uint32", "uint64", "complex64",
                                  "complex128", "bool_"])
def test_dtype_names_make_and_cast_tensors(name):
    dt = getattr(jnp, name)
    assert dt is getattr(np, name)
    assert jnp.zeros(3, dt).dtype == np.dtype(dt)
    assert jnp.ones((2,), dtype=dt).dtype == np.dtype(dt)
    assert sl.tensor([1.0, 0.0]).astype(dt).dtype == np.dtype(dt)
    assert jnp.array([1, 0], dtype=dt).dtype == np.dtype(dt)


def test_default_dtypes_are_x64s():
    assert jnp.float_ is np.float64 and jnp.int_ is np.int64 and jnp.complex_ is np.complex128
    assert jnp.array(1.0).dtype == np.float64 and jnp.array(1).dtype == np.int64
    assert jnp.bool is np.bool_ and jnp.dtype("float32") == np.float32
    assert jnp.issubdtype(jnp.float32, jnp.floating) and jnp.finfo(jnp.float32).bits == 32


def test_astype_keeps_the_gradient_in_the_input_dtype():
    g = sl.grad(lambda x: jnp.sum(x.astype(jnp.float32) ** 2))(sl.tensor([1.0, 2.0]))
    assert g.dtype == np.float64
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


def test_constants():
    assert jnp.pi == math.pi and jnp.e == math.e and jnp.inf == math.inf
    assert math.isnan(jnp.nan) and jnp.newaxis is None
    x = sl.arange(3.0)
    assert x[:, jnp.newaxis].shape == (3, 1)
    assert jnp.euler_gamma == pytest.approx(0.5772156649015329)


def test_ndarray_is_tensor_for_isinstance():
    assert isinstance(jnp.zeros(2), jnp.ndarray)
    assert not isinstance(np.zeros(2), jnp.ndarray)

    def body(c, x):
        assert isinstance(x, jnp.ndarray)  # traced values too
        return c + x, x

    sl.scan(body, 0.0, sl.arange(3.0))


# --- array and asarray: JAX's meaning ----------------------------------------------------------
def test_array_of_a_value_being_differentiated_keeps_its_gradient():
    # sl.tensor(x[0]) detaches (torch's meaning) and gives [1, 1]; JAX's jnp.array gives [4, 1]
    x = sl.tensor([1.0, 2.0])
    for f in (jnp.array, jnp.asarray):
        g = sl.grad(lambda x, f=f: jnp.sum(f(x[0]) * x))(x)
        np.testing.assert_array_equal(g.numpy(), [4.0, 1.0])


def test_array_in_a_scan_body_jit_vmap_and_grad_of_grad():
    def loss(w):
        def body(h, x):
            v = jnp.array([h, w * x, 1.0])  # a stack of traced values and a number
            return jnp.sum(v * v), v

        h, ys = sl.scan(body, 0.5, sl.tensor([1.0, 2.0]))
        return h + jnp.sum(ys)

    def by_loop(w):
        h, total = 0.5, 0.0
        for x in (1.0, 2.0):
            v = [h, w * x, 1.0]
            h = v[0] ** 2 + v[1] ** 2 + 1.0
            total = total + v[0] + v[1] + 1.0
        return h + total

    w = sl.tensor(0.3)
    np.testing.assert_allclose(sl.grad(loss)(w).numpy(), sl.grad(by_loop)(w).numpy(), rtol=1e-12)
    np.testing.assert_allclose(sl.jit(sl.grad(loss))(w).numpy(), sl.grad(by_loop)(w).numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(sl.grad(sl.grad(loss))(w).numpy(),
                               sl.grad(sl.grad(by_loop))(w).numpy(), rtol=1e-12)
    xs = sl.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = sl.vmap(lambda r: jnp.array([r[1], r[0], 0.0]))(xs)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 1.0, 0.0], [4.0, 3.0, 0.0]])


def test_array_dtype_promotion_and_casts():
    x32 = sl.tensor([1.0, 2.0], dtype="float32")
    assert jnp.array([x32[0], 2.0]).dtype == np.float32  # Python numbers are weak, as in JAX
    assert jnp.array([x32[0], np.float64(2.0)]).dtype == np.float64
    assert jnp.array([sl.tensor(1), 2]).dtype == np.int64
    g = sl.grad(lambda x: jnp.sum(jnp.array([x[0], x[1]], dtype=jnp.float32) * 3.0))(
        sl.tensor([1.0, 2.0]))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g.numpy(), [3.0, 3.0])
    assert jnp.asarray(x32, dtype=jnp.float64).dtype == np.float64
    assert jnp.asarray(x32) is x32  # tensors are immutable: no copy needed


def test_array_copies_numpy_data_and_takes_ndmin():
    data = np.array([1.0, 2.0])
    for f in (jnp.array, jnp.asarray):
        t = f(data)
        data[0] = 5.0
        assert t.numpy()[0] == 1.0
        data[0] = 1.0
    assert jnp.array(3.0, ndmin=2).shape == (1, 1)
    assert jnp.array([sl.tensor(1.0)], ndmin=3).shape == (1, 1, 1)
    assert jnp.array([]).shape == (0,) and jnp.array([]).dtype == np.float64
    assert jnp.array(2.5).shape == ()


def test_array_errors():
    with pytest.raises(ValueError, match="order"):
        jnp.array([1.0], order="F")
    with pytest.raises(ValueError, match="empty list"):
        jnp.array([sl.tensor(1.0), []])
    with pytest.raises(ValueError):  # ragged: stack names the shapes
        jnp.array([sl.tensor([1.0, 2.0]), sl.tensor([1.0])])


# --- named operators, power ----------------------------------------------------------------
def test_named_operators_are_the_operators():
    x, y = sl.tensor([1.0, 2.0, 3.0]), sl.tensor([2.0, 2.0, 2.0])
    for fn, op in ((jnp.add, np.add), (jnp.subtract, np.subtract), (jnp.multiply, np.multiply),
                   (jnp.divide, np.divide), (jnp.power, np.power), (jnp.equal, np.equal),
                   (jnp.not_equal, np.not_equal), (jnp.less, np.less),
                   (jnp.less_equal, np.less_equal), (jnp.greater, np.greater),
                   (jnp.greater_equal, np.greater_equal)):
        for a, b in ((x, y), (x, 2.0), (2.0, x), ([1.0, 2.0, 3.0], y), (x.numpy(), 2.0)):
            want = op(np.asarray(a), np.asarray(b))
            got = fn(a, b)
            assert isinstance(got, sl.Tensor) and got.dtype == want.dtype, fn.__name__
            np.testing.assert_array_equal(got.numpy(), want)
    assert jnp.add(1, 2).dtype == np.int64 and jnp.add(1, 2).item() == 3
    assert jnp.divide(sl.tensor([1, 2]), 4).dtype == np.float64
    assert jnp.positive(x) is x and jnp.negative(3.0).item() == -3.0


def test_python_numbers_stay_weak():
    x32 = sl.tensor([1.0, 2.0], dtype="float32")
    for fn in (jnp.add, jnp.subtract, jnp.multiply, jnp.divide, jnp.power):
        assert fn(x32, 2.0).dtype == np.float32 and fn(2.0, x32).dtype == np.float32
    assert jnp.add(2.0, np.ones(2, np.float32)).dtype == np.float32


def test_power_edges():
    out = jnp.power(sl.tensor([0.0, -8.0, np.inf, np.nan, 2.0]), sl.tensor([2.0, 1 / 3, 2.0,
                                                                           1.0, -np.inf]))
    np.testing.assert_array_equal(out.numpy(), np.power([0.0, -8.0, np.inf, np.nan, 2.0],
                                                        [2.0, 1 / 3, 2.0, 1.0, -np.inf]))
    assert jnp.power(sl.zeros((0, 3)), 2.0).shape == (0, 3)
    assert jnp.power(sl.tensor(2), 3).dtype == np.int64


# --- isfinite, isclose, allclose ------------------------------------------------------------
EDGES = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e308, 5e-324])


def test_isfinite():
    for x in (EDGES, EDGES.astype(np.float32), np.array([1, 2]), np.array(np.nan),
              np.zeros((0, 2)), EDGES + 1j * EDGES[::-1]):
        got = jnp.isfinite(sl.tensor(x))
        assert got.dtype == np.bool_ and got.shape == x.shape
        np.testing.assert_array_equal(got.numpy(), np.isfinite(x))
    assert jnp.isfinite(1.0).item() is True and jnp.isfinite([np.inf]).numpy().tolist() == [False]


def test_isfinite_has_no_gradient_and_works_in_scan():
    g = sl.grad(lambda x: jnp.sum(sl.where(jnp.isfinite(x), x, 0.0)))(
        sl.tensor([1.0, np.inf, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [1.0, 0.0, 1.0])
    _, ys = sl.scan(lambda c, x: (c, jnp.isfinite(x)), 0.0, sl.tensor([1.0, np.nan, -np.inf]))
    np.testing.assert_array_equal(ys.numpy(), [True, False, False])


def test_isclose_against_numpy():
    a, b = np.meshgrid(EDGES, EDGES)
    b = np.where(np.isfinite(b), b + 1e-9, b)
    for equal_nan in (False, True):
        for rtol, atol in ((1e-5, 1e-8), (0.0, 0.0), (0.5, 2.0)):
            got = jnp.isclose(sl.tensor(a), sl.tensor(b), rtol, atol, equal_nan)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got.numpy(),
                                          np.isclose(a, b, rtol, atol, equal_nan))
    assert jnp.isclose(sl.zeros((0, 3)), sl.zeros(3)).shape == (0, 3)
    assert jnp.isclose(sl.tensor([[1.0], [2.0]]), sl.tensor([1.0, 2.0, 3.0])).shape == (2, 3)
    assert jnp.isclose(1.0, 1.0 + 1e-9).item() is True


def test_isclose_compares_integers_as_floats_as_jax_does():
    assert jnp.isclose(1, 2, atol=5).item() is True
    assert jnp.isclose(sl.tensor([1, 2]), 2).numpy().tolist() == [False, True]
    assert jnp.isclose(sl.tensor([True, False]), 1.0).numpy().tolist() == [True, False]
    x32 = sl.tensor([1.0], dtype="float32")
    assert jnp.isclose(1.0 + 1e-8, x32, rtol=0.0, atol=0.0).item() is True  # 1 + 1e-8 is 1 in f32


def test_allclose():
    x = sl.tensor([1.0, 2.0, np.nan])
    assert jnp.allclose(x, x, equal_nan=True).item() is True
    assert jnp.allclose(x, x).item() is False
    assert jnp.allclose(sl.zeros(0), sl.zeros(0)).item() is True
    out = jnp.allclose(sl.tensor([1.0, 2.0]), [1.0, 2.0 + 1e-6])
    assert out.shape == () and out.dtype == np.bool_ and out.item() is True


def test_isclose_under_grad_vmap_and_jit():
    g = sl.grad(lambda x: jnp.sum(sl.where(jnp.isclose(x, 1.0), 0.0, x * x)))(
        sl.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 4.0])
    out = sl.vmap(lambda r: jnp.isclose(r, r[0]))(sl.tensor([[1.0, 1.0], [2.0, 3.0]]))
    np.testing.assert_array_equal(out.numpy(), [[True, True], [True, False]])
    out = sl.jit(lambda x: jnp.allclose(x, 2.0))(sl.tensor([2.0, 2.0]))
    assert out.item() is True


# --- polyval ------------------------------------------------------------------------------------
def test_polyval_edges():
    x = sl.tensor([np.inf, -np.inf, np.nan, 0.0])
    np.testing.assert_array_equal(jnp.polyval(sl.tensor([1.0, 0.0]), x).numpy(),
                                  [np.nan, np.nan, np.nan, 0.0])  # 0 * inf first, as JAX's
    assert jnp.polyval(sl.tensor([]), sl.tensor([1.0, 2.0])).numpy().tolist() == [0.0, 0.0]
    assert jnp.polyval([1.0, 2.0], sl.zeros((0, 2))).shape == (0, 2)
    assert jnp.polyval(sl.tensor([1, 2]), sl.tensor([3])).dtype == np.int64
    assert jnp.polyval(sl.tensor([1.0, 2.0], dtype="float32"), 3.0).dtype == np.float32
    with pytest.raises(ValueError, match="one-dimensional"):
        jnp.polyval(sl.tensor(2.0), 1.0)


def test_polyval_under_vmap_and_grad_of_grad():
    p = sl.tensor([2.0, -1.0, 0.5])
    xs = sl.tensor([0.5, 1.5])
    out = sl.vmap(lambda x: jnp.polyval(p, x))(xs)
    np.testing.assert_allclose(out.numpy(), np.polyval(p.numpy(), xs.numpy()), rtol=1e-15)
    d2 = sl.grad(sl.grad(lambda x: jnp.polyval(p, x)))(sl.tensor(0.7))
    assert d2.item() == pytest.approx(4.0)


# --- einsum: '...' and repeated indices ----------------------------------------------------
def test_einsum_new_forms_under_vmap_and_jit():
    x = np.random.default_rng(0).standard_normal((4, 3, 3))
    out = sl.vmap(lambda m: jnp.einsum("ii->i", m))(sl.tensor(x))
    np.testing.assert_array_equal(out.numpy(), np.einsum("bii->bi", x))
    out = sl.jit(lambda m: jnp.einsum("...ii", m))(sl.tensor(x))
    np.testing.assert_allclose(out.numpy(), np.einsum("...ii", x), rtol=1e-14)


def test_einsum_errors():
    with pytest.raises(ValueError, match="equal sizes"):
        jnp.einsum("ii->i", sl.ones((2, 3)))
    with pytest.raises(ValueError, match="do not broadcast"):
        jnp.einsum("...i,...i->...", sl.ones((2, 3)), sl.ones((4, 3)))
    with pytest.raises(ValueError, match="names 2 axes"):
        jnp.einsum("...ij->...", sl.ones(3))


def test_einsum_in_a_numba_scan_agrees_with_numpys_loop():
    pytest.importorskip("numba")
    xs = sl.tensor(np.random.default_rng(1).standard_normal((5, 3, 3)))

    def loss(xs, compiler):
        def body(c, m):
            return c * 0.5 + jnp.einsum("ii->i", m), jnp.einsum("...ij,...j", m, c)

        c, ys = sl.scan(body, sl.ones(3), xs, compiler=compiler)
        return jnp.sum(c) + jnp.sum(ys * ys)

    v_np, g_np = sl.value_and_grad(loss)(xs, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.NumbaFallbackWarning)  # the fallback is the same loop
        v_nb, g_nb = sl.value_and_grad(loss)(xs, "numba")
    np.testing.assert_allclose(v_nb.numpy(), v_np.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g_nb.numpy(), g_np.numpy(), rtol=1e-12, atol=1e-14)


# --- the smaller names ----------------------------------------------------------------------
def test_creation_and_shape_helpers():
    x32 = sl.ones((2, 3), dtype="float32")
    assert jnp.full_like(x32, 7).dtype == np.float32 and jnp.full_like(x32, 7).shape == (2, 3)
    assert jnp.full_like(x32, 1.0, dtype=jnp.int32, shape=(4,)).dtype == np.int32
    assert jnp.empty(3).numpy().tolist() == [0.0, 0.0, 0.0]  # JAX's empty is zeros too
    assert jnp.empty_like(x32).dtype == np.float32 and jnp.empty((0, 2)).shape == (0, 2)
    np.testing.assert_array_equal(jnp.identity(3, jnp.int32).numpy(), np.identity(3, np.int32))
    assert jnp.shape([[1.0, 2.0]]) == (1, 2) and jnp.ndim(2.0) == 0 and jnp.size(x32) == 6
    assert jnp.shape([sl.tensor([1.0, 2.0])]) == (1, 2) and jnp.size(sl.zeros((0, 3))) == 0
    assert jnp.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert jnp.unstack(sl.zeros((0, 2))) == ()
    with pytest.raises(ValueError, match="at least 2 axes"):
        jnp.matrix_transpose(sl.ones(3))


def test_select_nan_inf_and_errors():
    x = sl.tensor([-np.inf, -1.0, np.nan, 2.0, np.inf])
    out = jnp.select([x < 0, jnp.isnan(x)], [-x, 0.0], x)
    np.testing.assert_array_equal(out.numpy(), [np.inf, 1.0, 0.0, 2.0, np.inf])
    assert jnp.select([], [], 3.0).item() == 3.0
    with pytest.raises(ValueError, match="one choice per condition"):
        jnp.select([x < 0], [x, x])
    with pytest.raises(TypeError, match="bool"):
        jnp.select([x], [x])
    g = sl.grad(lambda x: jnp.sum(jnp.select([x < 0], [x * x], 0.0)))(sl.tensor([-2.0, 3.0]))
    np.testing.assert_array_equal(g.numpy(), [-4.0, 0.0])


def test_nan_and_inf_helpers():
    x = sl.tensor([1.0, np.nan, -np.inf, np.inf])
    assert jnp.isposinf(x).numpy().tolist() == [False, False, False, True]
    assert jnp.isneginf(x).numpy().tolist() == [False, False, True, False]
    assert jnp.nansum(sl.tensor([np.nan, np.nan])).item() == 0.0
    with np.errstate(invalid="ignore"):
        assert math.isnan(jnp.nanmean(sl.tensor([np.nan, np.nan])).item())
    g = sl.grad(lambda x: jnp.nanmean(x))(sl.tensor([1.0, np.nan, 3.0]))
    np.testing.assert_array_equal(g.numpy(), [0.5, 0.0, 0.5])
    assert jnp.nansum(sl.tensor([1, 2])).dtype == np.int64
    assert jnp.exp2(sl.tensor([3])).dtype == np.float64 and jnp.exp2(3.0).item() == 8.0
    assert jnp.deg2rad(sl.tensor([180], dtype="int32")).item() == pytest.approx(np.pi)
    assert jnp.inner(2.0, sl.tensor([1.0, 3.0])).numpy().tolist() == [2.0, 6.0]


def test_linalg_views_and_their_errors():
    with pytest.raises(ValueError, match="1-d"):
        jnp.linalg.outer(sl.ones((2, 2)), sl.ones(2))
    with pytest.raises(ValueError, match="at least 2"):
        jnp.linalg.multi_dot([sl.ones(2)])
    x = sl.tensor(np.arange(24.0).reshape(2, 3, 4))
    # NumPy's diagonal takes the first two axes, the array API's the last two
    assert sl.diagonal(x).shape == (4, 2) and jnp.linalg.diagonal(x).shape == (2, 3)


# --- clip ----------------------------------------------------------------------------------------
def test_clip_keywords():
    x = sl.tensor([-2.0, 0.5, 2.0])
    np.testing.assert_array_equal(jnp.clip(x, min=-1.0).numpy(), [-1.0, 0.5, 2.0])
    np.testing.assert_array_equal(jnp.clip(x, max=1.0).numpy(), [-2.0, 0.5, 1.0])
    np.testing.assert_array_equal(jnp.clip(x, -1.0, max=1.0).numpy(), [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(x.clip(-1.0, 1.0).numpy(), [-1.0, 0.5, 1.0])
    if np.lib.NumpyVersion(np.__version__) >= "2.1.0":  # np.clip's min=/max= are 2.1's
        np.testing.assert_array_equal(np.clip(x, min=0.0, max=1.0).numpy(), [0.0, 0.5, 1.0])
    with pytest.raises(TypeError, match="given twice"):
        jnp.clip(x, -1.0, min=-1.0)


# --- against JAX ----------------------------------------------------------------------------
@pytest.fixture
def jax_x64():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):  # for these tests only: a global switch leaks
        yield jax


def _agree(ours, theirs):
    theirs = np.asarray(theirs)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-12, atol=1e-14)


JAX_CASES = [
    ("polyval", lambda m, p, x: m.polyval(p, x), [(4,), (2, 3)]),
    ("polyval_stacked", lambda m, p, x: m.polyval(p, x), [(4, 3), (2, 1)]),
    ("power", lambda m, x, y: m.power(m.abs(x) + 0.5, y), [(2, 3), (3,)]),
    ("einsum_diag", lambda m, x, y: m.einsum("bii,ij->bj", x, y), [(2, 3, 3), (3, 2)]),
    ("einsum_ellipsis", lambda m, x, y: m.einsum("...ij,...jk", x, y), [(2, 1, 2, 3), (4, 3, 2)]),
    ("array", lambda m, x, y: m.array([x[0] * y[1], x[1], 2.0]), [(2,), (2,)]),
    ("asarray", lambda m, x, y: m.asarray(x, dtype=m.float32) * y, [(3,), (3,)]),
    ("clip", lambda m, x, y: m.clip(x * y, min=-0.3, max=0.4), [(5,), (5,)]),
    ("divide", lambda m, x, y: m.divide(x, m.exp(y)), [(2, 3), (3,)]),
    ("select", lambda m, x, y: m.select([x < 0, y < 0], [x * y, m.sin(y)], x), [(6,), (6,)]),
    ("full_like", lambda m, x, y: m.full_like(x, y[0]) * x, [(2, 3), (1,)]),
    ("full", lambda m, x, y: m.full((2, 3), x) * y + m.full(3, y[0, 0], dtype=m.float32),
     [(3,), (2, 3)]),
    ("nanmean", lambda m, x, y: m.nanmean(m.where(x < -1.0, m.nan, x * y), axis=0), [(4, 3),
                                                                                   (4, 3)]),
    ("inner", lambda m, x, y: m.inner(x, y), [(2, 3), (4, 3)]),
    ("exp2_deg2rad", lambda m, x, y: m.exp2(x) + m.deg2rad(y), [(3,), (3,)]),
    ("linalg", lambda m, x, y: m.linalg.trace(x) + m.linalg.multi_dot([y, x, y]), [(3, 3), (3,)]),
    ("eigvalsh", lambda m, x, y: m.linalg.eigvalsh(x @ x.T + 3.0 * m.eye(3)) * y, [(3, 3), (3,)]),
]


@pytest.mark.parametrize("name,fn,shapes", JAX_CASES, ids=[c[0] for c in JAX_CASES])
def test_values_and_gradients_agree_with_jax(jax_x64, name, fn, shapes):
    import jax.numpy as J

    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s) for s in shapes]
    _agree(fn(jnp, *[sl.tensor(a) for a in args]), fn(J, *args))
    argnums = tuple(range(len(args)))
    ours = sl.grad(lambda *xs: jnp.sum(fn(jnp, *xs) ** 2), argnums=argnums)(
        *[sl.tensor(a) for a in args])
    theirs = jax_x64.grad(lambda *xs: J.sum(fn(J, *xs) ** 2), argnums=argnums)(*args)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.numpy(), np.asarray(t), rtol=1e-5, atol=1e-6)


def test_jnp_array_example_agrees_with_jax(jax_x64):
    import jax.numpy as J

    x = np.array([1.0, 2.0])
    theirs = jax_x64.grad(lambda x: J.sum(J.array(x[0]) * x))(x)
    ours = sl.grad(lambda x: jnp.sum(jnp.array(x[0]) * x))(sl.tensor(x))
    np.testing.assert_array_equal(ours.numpy(), np.asarray(theirs))


def test_edges_agree_with_jax(jax_x64):
    import jax.numpy as J

    a, b = np.meshgrid(EDGES, EDGES)
    for equal_nan in (False, True):
        _agree(jnp.isclose(sl.tensor(a), sl.tensor(b), equal_nan=equal_nan),
               J.isclose(a, b, equal_nan=equal_nan))
        _agree(jnp.allclose(sl.tensor(a), sl.tensor(a), equal_nan=equal_nan),
               J.allclose(a, a, equal_nan=equal_nan))
    _agree(jnp.isclose(sl.tensor([1, 2, 3]), 2, atol=5), J.isclose(np.array([1, 2, 3]), 2, atol=5))
    _agree(jnp.isfinite(sl.tensor(EDGES)), J.isfinite(EDGES))
    _agree(jnp.polyval(sl.tensor([1.0, 2.0]), sl.tensor(EDGES)),
           J.polyval(np.array([1.0, 2.0]), EDGES))
    _agree(jnp.polyval(sl.tensor([]), sl.tensor([1.0, 2.0])),
           J.polyval(np.array([]), np.array([1.0, 2.0])))
    _agree(jnp.einsum("ii", sl.tensor(np.eye(3))), J.einsum("ii", np.eye(3)))
    for name in ("pi", "e", "inf", "euler_gamma"):
        assert getattr(jnp, name) == getattr(J, name)
    for name in ("float32", "float64", "int32", "int64", "uint32", "bool_", "complex64",
                 "complex128"):
        assert np.dtype(getattr(jnp, name)) == np.dtype(getattr(J, name))


def test_forward_mode_through_the_new_functions():
    # jvp and hessian (forward over reverse) against the same derivatives by finite differences
    def f(x):
        m = jnp.array([[x[0], x[1]], [x[1] * x[2], 1.0]])
        return (jnp.polyval(x, x[0]) + jnp.sum(jnp.einsum("ii->i", m) ** 2)
                + jnp.nanmean(jnp.select([x > 0], [x * x], x)))

    x = np.array([0.3, -0.7, 1.1])
    v = np.array([0.2, 0.5, -0.4])
    _, tangent = sl.jvp(f, (sl.tensor(x),), (sl.tensor(v),))
    eps = 1e-6
    numeric = (f(sl.tensor(x + eps * v)).item() - f(sl.tensor(x - eps * v)).item()) / (2 * eps)
    assert tangent.item() == pytest.approx(numeric, rel=1e-6)
    h = sl.hessian(f)(sl.tensor(x)).numpy()
    g = sl.grad(f)
    numeric_h = np.stack([(g(sl.tensor(x + eps * e)).numpy() - g(sl.tensor(x - eps * e)).numpy())
                          / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(h, numeric_h, rtol=1e-5, atol=1e-6)


def test_tensor_methods_agree_with_jax_arrays(jax_x64):
    import jax.numpy as J

    a = np.random.default_rng(3).standard_normal((2, 3, 4))
    t, ja = sl.tensor(a), J.asarray(a)
    calls = [lambda x: x.diagonal(), lambda x: x.diagonal(1, -2, -1), lambda x: x[0].trace(1),
             lambda x: x.mT, lambda x: x.swapaxes(0, -1), lambda x: x.sort(),
             lambda x: x.sort(axis=None, descending=True), lambda x: x.argsort(axis=1),
             lambda x: x.argsort(axis=0, descending=True), lambda x: x.take(np.array([1, 0])),
             lambda x: x.take(np.array([3, 1]), axis=-1), lambda x: x.repeat(2, axis=1),
             lambda x: x.round(2), lambda x: x.copy(), lambda x: x[0, 0].sort().searchsorted(
                 x[1, 1], side="right")]
    for call in calls:
        _agree(call(t), call(ja))
    assert (t.itemsize, t.nbytes) == (ja.itemsize, ja.nbytes)
