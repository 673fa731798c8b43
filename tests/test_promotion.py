"""JAX's type promotion of integers with floats: an integer array combined with a float32 (or
float16, complex64) array takes the float's dtype, where NumPy would widen to float64; Python
numbers stay weak. On every primitive that combines values (arithmetic, where's branches,
matmul, concatenate), on the tape, in traced bodies and under vmap, with gradients."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp

INTS = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64", "complex64", "complex128"]


def _arrays(int_dtype, float_dtype):
    return np.arange(1, 4).astype(int_dtype), np.linspace(0.5, 1.5, 3).astype(float_dtype)


OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: b - a, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: b ** a,
    "where": lambda a, b: sl.where(a > 1, a, b), "concatenate": lambda a, b: sl.concatenate([a, b]),
    "stack": lambda a, b: sl.stack([b, a]),
}


@pytest.mark.parametrize("int_dtype,float_dtype", list(itertools.product(INTS, FLOATS)))
def test_an_integer_array_takes_the_float_arrays_dtype(int_dtype, float_dtype):
    a, b = _arrays(int_dtype, float_dtype)
    want = jnp.promote_types(int_dtype, float_dtype)
    assert want == np.dtype(float_dtype)
    for name, op in OPS.items():
        if name == "pow" and int_dtype == "bool":
            continue  # NumPy has no bool ** float16 loop; the dtype is covered by the rest
        got = op(sl.tensor(a), sl.tensor(b))
        assert got.dtype == want, (name, int_dtype, float_dtype, got.dtype)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(got.numpy(), op(a.astype(want), b), rtol=1e-3)


@pytest.mark.parametrize("float_dtype", ["float16", "float32", "complex64"])
def test_matmul_and_vdot_promote_the_integer_operand(float_dtype):
    i = sl.tensor(np.arange(6).reshape(2, 3))
    f = sl.tensor(np.ones((3, 2), float_dtype))
    assert (i @ f).dtype == np.dtype(float_dtype)
    if float_dtype != "complex64":  # vdot is for real data here
        assert sl.vdot(i[0], f[:, 0]).dtype == np.dtype(float_dtype)


def test_python_numbers_stay_weak_and_numpy_scalars_are_strong():
    f32 = sl.ones(3, dtype=np.float32)
    i64 = sl.arange(3)
    assert (f32 * 2).dtype == (f32 + 2.5).dtype == np.float32
    assert (i64 + 2.5).dtype == np.float64  # a weak float with an integer: JAX's with x64
    assert (i64 * 2).dtype == np.int64
    assert (f32 + np.int64(2)).dtype == np.float32  # a strong integer scalar: JAX's too
    assert (f32 + np.float64(2)).dtype == np.float64
    assert (i64.astype(np.int32) + i64).dtype == np.int64  # integers among themselves: NumPy's
    assert (f32 + [1, 2, 3]).dtype == np.float32  # a list of ints is an integer array


def test_promote_types_is_the_rule_the_ops_follow():
    assert jnp.promote_types(np.int32, np.float32) == np.float32
    assert jnp.promote_types("float16", "uint64") == np.float16
    assert jnp.promote_types("int8", "int16") == np.int16
    assert jnp.promote_types("float32", "float64") == np.float64
    assert jnp.promote_types("bool", "float16") == np.float16


def test_fori_loop_over_a_float32_carry_adds_the_index():
    out = sl.fori_loop(0, 4, lambda i, v: v * 0.5 + i, sl.ones(2, dtype=np.float32))
    assert out.dtype == np.float32
    v = np.ones(2, np.float32)
    for i in range(4):
        v = v * np.float32(0.5) + np.float32(i)
    np.testing.assert_array_equal(out.numpy(), v)


def test_gradients_through_a_promoted_integer_keep_the_float_dtype():
    i = sl.tensor(np.arange(1, 4, dtype=np.int32))
    x = sl.tensor(np.float32([0.5, 1.0, 2.0]))
    g = sl.grad(lambda x: sl.sum(i * x + x ** i))(x)
    assert g.dtype == np.float32
    want = np.arange(1, 4) + np.arange(1, 4) * np.float64([0.5, 1.0, 2.0]) ** np.arange(0, 3)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)


def test_promotion_is_the_same_traced_jitted_and_vmapped():
    i = np.arange(3, dtype=np.int64)
    x = np.float32([1.0, 2.0, 3.0])

    def f(i, x):
        return sl.where(i > 0, i, x) * x + i

    eager = f(sl.tensor(i), sl.tensor(x))
    assert eager.dtype == np.float32
    jitted = sl.jit(f)(i, x)
    mapped = sl.vmap(f)(i, x)
    _, scanned = sl.scan(lambda c, ix: (c, f(*ix)), sl.tensor(np.float32(0)), (i, x))
    for other in (jitted, mapped, scanned):
        assert other.dtype == np.float32
        np.testing.assert_array_equal(other.numpy(), eager.numpy())


def test_ravel_pytree_of_mixed_leaves_promotes_as_jax():
    flat, unravel = sl.flatten_util.ravel_pytree({"i": np.arange(2, dtype=np.int32),
                                                  "x": np.float32([1.5])})
    assert flat.dtype == np.float32
    back = unravel(flat)
    assert back["i"].dtype == np.int32 and back["x"].dtype == np.float32


@pytest.mark.parametrize("int_dtype,float_dtype", list(itertools.product(INTS, FLOATS)))
def test_the_same_dtypes_as_jax(int_dtype, float_dtype):
    jax = pytest.importorskip("jax")
    a, b = _arrays(int_dtype, float_dtype)
    with jax.enable_x64(True):
        import jax.numpy as real_jnp

        want = (real_jnp.asarray(a) * real_jnp.asarray(b)).dtype
        assert real_jnp.promote_types(int_dtype, float_dtype) == jnp.promote_types(
            int_dtype, float_dtype)
    assert (sl.tensor(a) * sl.tensor(b)).dtype == want
