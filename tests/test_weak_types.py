"""JAX's weak types: an array made from Python numbers (`jnp.array(0.5)`, `jnp.sqrt(2.0)`,
`int32 * 0.5`) yields its dtype to typed operands, as the Python number would; a typed result
(`astype`, anything with a typed operand of its kind or above) is not weak."""
import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp
import scanlib.optim as optim

from opcheck import jax_x64

F32 = np.dtype(np.float32)
X32 = np.array([1.0, 2.0, 3.0], np.float32)
I32 = np.array([1, 2, 3], np.int32)


def test_what_is_weak():
    assert jnp.array(0.5).weak_type and jnp.asarray(2).weak_type and jnp.array(1j).weak_type
    assert jnp.sqrt(2.0).weak_type and jnp.log(2 * jnp.pi).weak_type
    assert (sl.tensor(I32) * 0.5).weak_type  # the float kind comes from the Python number
    assert (jnp.array(0.5) + jnp.array(1)).weak_type
    assert not jnp.array(0.5, dtype=jnp.float64).weak_type
    assert not jnp.array(np.float64(0.5)).weak_type and not jnp.array([0.5]).weak_type
    assert not sl.tensor(0.5).weak_type  # torch's constructor: typed
    assert not (sl.tensor(X32) * 0.5).weak_type
    assert not (jnp.array(0.5) > 0).weak_type  # bools are never weak
    assert not jnp.array(0.5).astype(jnp.float64).weak_type
    assert not (jnp.array(0.5) * sl.tensor(X32)).weak_type


@pytest.mark.parametrize("make, want", [
    (lambda: jnp.array(0.5) * sl.tensor(X32), F32),
    (lambda: sl.tensor(X32) * jnp.sqrt(2.0), F32),
    (lambda: sl.tensor(X32) + sl.tensor(I32) * 0.5, F32),
    (lambda: jnp.array(3) * sl.tensor(I32), np.dtype(np.int32)),
    (lambda: jnp.array(3) + sl.tensor(X32), F32),
    (lambda: jnp.array(1j) * sl.tensor(X32), np.dtype(np.complex64)),
    (lambda: jnp.array(0.5) * sl.tensor(I32), np.dtype(np.float64)),
    (lambda: sl.where(sl.tensor(I32) > 1, sl.tensor(X32), jnp.array(0.0)), F32),
    (lambda: jnp.maximum(sl.tensor(X32), jnp.array(2.0)), F32),
    (lambda: jnp.stack([sl.tensor(X32), jnp.array([0.0, 1.0, 2.0])]), np.dtype(np.float64)),
    (lambda: jnp.concatenate([sl.tensor(X32), jnp.sqrt(2.0)[None]]), F32),
    (lambda: sl.tensor(X32) @ (jnp.array(2.0) * jnp.ones(3)), np.dtype(np.float64)),
])
def test_weak_operands_yield_to_typed_ones(make, want):
    assert make().dtype == want


def test_values_are_the_typed_computation():
    got = jnp.array(0.1) * sl.tensor(X32)
    np.testing.assert_array_equal(got.numpy(), np.float32(0.1) * X32)


def test_gradients_flow_through_weak_values_and_keep_the_typed_dtype():
    x = sl.tensor(X32)
    g = sl.grad(lambda w: sl.sum(w * x * jnp.array(2.0)))(jnp.array(0.5))
    np.testing.assert_allclose(g.numpy(), 12.0)
    gx = sl.grad(lambda v: sl.sum(v * jnp.sqrt(2.0)))(x)
    assert gx.dtype == F32
    np.testing.assert_allclose(gx.numpy(), np.sqrt(2.0), rtol=1e-6)


def test_jit_keeps_weak_types_and_keys_on_them():
    f = sl.jit(lambda a, b: (a * b, b + 1.0))
    out, b1 = f(sl.tensor(X32), jnp.array(0.5))
    assert out.dtype == F32 and b1.weak_type
    out, b1 = f(sl.tensor(X32), sl.tensor(0.5))  # typed: another trace, float64
    assert out.dtype == np.float64 and not b1.weak_type
    assert sl.jit(lambda a: a * jnp.array(2.0))(sl.tensor(X32)).dtype == F32


def test_a_weak_init_takes_the_carry_dtype_the_body_gives_it():
    xs = sl.tensor(X32)
    c, ys = sl.scan(lambda c, x: (c + x, c), jnp.array(0.0), xs)
    assert c.dtype == ys.dtype == F32
    np.testing.assert_array_equal(ys.numpy(), np.float32([0, 1, 3]))
    c, _ = sl.scan(lambda c, x: (c * 2.0, None), jnp.array(1.0), xs)  # stays weak: float64
    assert c.dtype == np.float64
    assert sl.fori_loop(0, 3, lambda i, v: v + xs[i], jnp.array(0.0)).dtype == F32
    assert sl.jit(lambda x: sl.fori_loop(0, 3, lambda i, v: v + x[i], jnp.array(0.0)))(
        xs).dtype == F32
    assert sl.while_loop(lambda v: v < 3, lambda v: v + xs[0], jnp.array(0.0)).dtype == F32


def test_a_weak_init_keeps_its_gradient():
    xs = sl.tensor(X32)

    def loss(a):
        return sl.scan(lambda c, x: (c * x, None), a * jnp.array(1.0), xs)[0]

    a = jnp.array(2.0)
    np.testing.assert_allclose(sl.grad(loss)(a).numpy(), 6.0)


def test_optax_warmup_cosine_is_float32_as_optax_gives_it():
    # the warmup's int32 division is float32, the cosine's weak float64: the where joining
    # them is float32
    schedule = optim.warmup_cosine_decay_schedule(0.0, 1e-2, 3, 20, 1e-4)
    for count in (0, 2, 3, 4, 19, 25):
        assert schedule(sl.tensor(np.int32(count))).dtype == F32


def test_against_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp

    cases = [
        lambda np_, x, i: np_.array(0.5) * x,
        lambda np_, x, i: x * np_.sqrt(2.0),
        lambda np_, x, i: x + i * 0.5,
        lambda np_, x, i: np_.array(3) * i,
        lambda np_, x, i: np_.array(1j) * x,
        lambda np_, x, i: np_.array(0.5) * i,
        lambda np_, x, i: np_.where(i > 1, x, np_.array(0.0)),
        lambda np_, x, i: np_.maximum(np_.array(2.0), x),
        lambda np_, x, i: np_.log(2 * np_.pi) + x,
        lambda np_, x, i: np_.exp(np_.array(1.0)) * np_.array(2),
    ]
    with jax_x64(jax):
        for case in cases:
            want = case(jjnp, jjnp.asarray(X32), jjnp.asarray(I32))
            got = case(jnp, sl.tensor(X32), sl.tensor(I32))
            assert got.dtype == want.dtype and got.weak_type == want.weak_type, case
            np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-6)
