"""Float functions of integers and bools compute in JAX's float for them: float32 for types of
32 bits or fewer, float64 for 64-bit ones (Primitive's `inexact` fact, `inexact_dtype`).
NumPy would give float64 for int32 and float16 for int8 and bool."""
import numpy as np
import pytest

import scanlib as sl
import scanlib.nn as snn
import scanlib.numpy as jnp
import scanlib.scipy.special as sps
from scanlib.ops.promotion import inexact_dtype

from opcheck import jax_x64

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
INTS = ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"]


def _want(dtype):
    return F64 if np.dtype(dtype).itemsize == 8 else F32


def test_inexact_dtype_is_jaxs_table():
    assert [inexact_dtype(d) for d in INTS] == [F32] * 6 + [F64] * 2
    for d in ["float16", "float32", "float64", "complex64", "complex128"]:
        assert inexact_dtype(d) == np.dtype(d)


UNARY = {
    "sqrt": jnp.sqrt, "exp": jnp.exp, "log": jnp.log, "log1p": jnp.log1p, "sin": jnp.sin,
    "cos": jnp.cos, "tanh": jnp.tanh, "tan": jnp.tan, "arcsin": lambda x: jnp.arcsin(x * 0),
    "arctan": jnp.arctan, "sinh": jnp.sinh, "expm1": jnp.expm1, "log2": jnp.log2,
    "log10": jnp.log10, "cbrt": jnp.cbrt, "reciprocal": jnp.reciprocal, "mean": jnp.mean,
    "var": jnp.var, "std": jnp.std, "median": jnp.median, "average": jnp.average,
    "nanmean": jnp.nanmean, "deg2rad": jnp.deg2rad, "exp2": jnp.exp2, "sinc": jnp.sinc,
    "i0": jnp.i0, "trapezoid": jnp.trapezoid, "norm": jnp.linalg.norm,
    "hypot": lambda x: jnp.hypot(x, x), "arctan2": lambda x: jnp.arctan2(x, x),
    "logaddexp": lambda x: jnp.logaddexp(x, x), "float_power": lambda x: jnp.float_power(x, x),
    "true_divide": lambda x: sl.tensor(x) / 2, "divide arrays": lambda x: jnp.divide(x, x),
    "gammaln": sps.gammaln, "digamma": sps.digamma, "erf": sps.erf, "expit": sps.expit,
    "xlogy": lambda x: sps.xlogy(x, x), "logsumexp": sps.logsumexp, "sigmoid": snn.sigmoid,
    "gelu": snn.gelu, "softplus": snn.softplus, "log_softmax": snn.log_softmax,
    "softmax": snn.softmax, "silu": snn.silu, "elu": snn.elu,
    "linspace": lambda x: jnp.linspace(sl.tensor(x)[0], sl.tensor(x)[1], 3),
    "interp": lambda x: jnp.interp(x, x, x),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint32", "int64"])
def test_float_functions_of_integers_take_jaxs_float(name, dtype):
    x = np.array([1, 2, 3], dtype)
    out = UNARY[name](x)
    assert out.dtype == _want(dtype), (name, dtype, out.dtype)
    # the values are the float64 computation's, rounded once (float32 computes as JAX does)
    want = UNARY[name](x.astype(np.float64))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["sqrt", "exp", "mean", "divide arrays", "gammaln", "erf"])
def test_bools_take_float32(name):
    assert UNARY[name](np.array([True, False])).dtype == F32


def test_integer_division_of_int32_is_float32_and_with_a_python_float_float64():
    i = sl.tensor(np.array([1, 2, 3], np.int32))
    assert (i / 2).dtype == F32 and (i / i).dtype == F32 and (2 / i).dtype == F32
    assert (i / 2.0).dtype == F64  # a Python float with integers is the default float, as JAX
    assert (i * 0.5).dtype == F64
    assert (sl.tensor(np.array([True])) / 2).dtype == F64  # bool with a Python int: int64
    np.testing.assert_array_equal((i / 2).numpy(), np.array([0.5, 1.0, 1.5], np.float32))


def test_reciprocal_of_integers_divides_instead_of_truncating():
    # numpy.reciprocal(np.int64(2)) is 0: a port of jnp.reciprocal must not get that
    np.testing.assert_array_equal(jnp.reciprocal(np.array([2, 4])).numpy(), [0.5, 0.25])


def test_integer_functions_keep_integers():
    x = np.array([1, -2, 3], np.int32)
    for f in (jnp.abs, jnp.square, jnp.negative, lambda v: v * 2, jnp.sum):
        assert f(sl.tensor(x)).dtype.kind == "i"


def test_an_int32_count_in_a_float32_optimiser_stays_float32():
    # optax's count is int32: bias corrections divide by 1 - b**count, as JAX in float32
    params = {"w": sl.tensor(np.ones(3, np.float32))}
    opt = sl.optim.adam(1e-2)
    state = opt.init(params)
    updates, _ = opt.update({"w": sl.tensor(np.ones(3, np.float32))}, state, params)
    assert updates["w"].dtype == F32


def test_inside_traces_and_under_grad():
    x = np.array([1, 2, 3], np.int32)
    assert sl.jit(jnp.sqrt)(x).dtype == F32
    assert sl.vmap(jnp.sqrt)(x).dtype == F32
    _, ys = sl.scan(lambda c, v: (c, jnp.exp(v)), 0.0, x)
    assert ys.dtype == F32
    f = sl.grad(lambda w: sl.sum(w * jnp.sqrt(x)))
    np.testing.assert_allclose(f(sl.tensor(np.ones(3, np.float32))).numpy(),
                               np.sqrt([1, 2, 3]), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_against_jax(name):
    jax = pytest.importorskip("jax")
    if name in ("silu", "sigmoid", "elu"):
        pytest.skip("jax.nn's silu and sigmoid refuse integers, and its elu gives float64 for "
                    "int8 but float32 for int32; scanlib computes them in inexact_dtype's float")
    import jax.nn  # noqa: F811  (jax.nn is an attribute of the jax module)
    import jax.numpy as jjnp
    import jax.scipy.special as jsp

    table = {  # UNARY's entries under JAX's names (the rest are jnp's of the same name)
        "true_divide": lambda x: jjnp.asarray(x) / 2, "divide arrays": lambda x: jjnp.divide(x, x),
        "norm": jjnp.linalg.norm, "gammaln": jsp.gammaln, "digamma": jsp.digamma,
        "erf": jsp.erf, "expit": jsp.expit, "xlogy": lambda x: jsp.xlogy(x, x),
        "logsumexp": jsp.logsumexp, "sigmoid": jax.nn.sigmoid, "gelu": jax.nn.gelu,
        "softplus": jax.nn.softplus, "log_softmax": jax.nn.log_softmax,
        "softmax": jax.nn.softmax, "silu": jax.nn.silu, "elu": jax.nn.elu,
        "linspace": lambda x: jjnp.linspace(x[0], x[1], 3),
        "hypot": lambda x: jjnp.hypot(x, x), "arctan2": lambda x: jjnp.arctan2(x, x),
        "logaddexp": lambda x: jjnp.logaddexp(x, x),
        "float_power": lambda x: jjnp.float_power(x, x),
        "arcsin": lambda x: jjnp.arcsin(x * 0), "interp": lambda x: jjnp.interp(x, x, x),
    }
    f = table.get(name) or getattr(jjnp, name)
    with jax_x64(jax):
        for dtype in ["int8", "int32", "int64"]:
            x = np.array([1, 2, 3], dtype)
            assert str(UNARY[name](x).dtype) == str(f(x).dtype), (name, dtype)
