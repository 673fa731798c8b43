"""Complex numbers: values as NumPy's, and gradients in JAX's convention in every rule (the
cotangent pairing is Re(sum(ct * t)), so a holomorphic f has VJP g * f'(z) and the gradient of
a real loss L is dL/dRe(z) - 1j dL/dIm(z), the conjugate of torch's), checked against finite
differences on the real and imaginary parts, through scan carries too.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib.backends import xp_of
from scanlib.testing import check_grads

W = np.array([0.3 - 1j, 2 + 0.5j])


def _z(rng, shape, away=0.3):
    """Complex values with |z| >= away (away from the kinks of abs and angle at 0)."""
    r = rng.uniform(away, 1.5, shape)
    return r * np.exp(1j * rng.uniform(-3.0, 3.0, shape))


def _real_loss_fd(f, z, eps=1e-6):
    """dL/dRe(z) - 1j dL/dIm(z) by central differences, for a real-valued f of complex z."""
    out = np.zeros(z.shape, complex)
    for i in np.ndindex(z.shape):
        e = np.zeros(z.shape)
        e[i] = 1.0
        d_re = (f(z + eps * e) - f(z - eps * e)) / (2 * eps)
        d_im = (f(z + 1j * eps * e) - f(z - 1j * eps * e)) / (2 * eps)
        out[i] = d_re - 1j * d_im
    return out


def test_the_issue_example_matches_finite_differences_and_jax(backend):
    a = np.array([0.3, -1.2])
    w = backend.array(W)
    g = sl.grad(lambda a: sl.sum(sl.abs(sl.exp(1j * a) * w + 1.0)))(backend.tensor(a))
    assert g.dtype == np.float64
    np.testing.assert_allclose(backend.numpy(g), [0.48043434, 0.60919177], rtol=1e-7)


def test_real_loss_of_complex_input_is_the_conjugate_of_torchs():
    # |z|^2: torch gives 2z, JAX (and scanlib) 2 conj(z)
    z = np.array([3 + 4j, -1 + 0.5j])
    g = sl.grad(lambda z: sl.sum(sl.abs(z) ** 2))(sl.tensor(z))
    np.testing.assert_allclose(g.numpy(), 2 * np.conj(z))


REAL_LOSSES = {
    "abs": lambda z: sl.sum(sl.abs(z)),
    "real-imag": lambda z: sl.sum(sl.real(z) * 2.0 - sl.imag(z) ** 2),
    "conj-mul": lambda z: sl.sum(sl.real(sl.conj(z) * z * 0.5 + z * z)),
    "angle": lambda z: sl.sum(sl.angle(z) * sl.tensor([1.0, -2.0, 0.5])),
    "exp-log": lambda z: sl.sum(sl.abs(sl.exp(z) + sl.log(z))),
    "sqrt-div": lambda z: sl.sum(sl.real(sl.sqrt(z) / (z + 2.0))),
    "trig": lambda z: sl.sum(sl.imag(sl.sin(z) * sl.cos(z) + sl.tanh(z))),
    "pow": lambda z: sl.sum(sl.abs(z ** 3 + z ** 0.5)),
    "matmul": lambda z: sl.sum(sl.abs(sl.reshape(z, (3, 1)) @ sl.tensor([[1j, 2.0 - 1j]]))),
    "sum-index": lambda z: sl.abs(sl.sum(z[::-1] * sl.tensor(np.arange(3.0)))),
    "where": lambda z: sl.sum(sl.abs(sl.where(sl.tensor([True, False, True]), z, z * 2j))),
    "einsum": lambda z: sl.abs(sl.einsum("i,i->", z, z)),
}


@pytest.mark.parametrize("name", list(REAL_LOSSES))
def test_gradient_of_a_real_loss_matches_finite_differences(name):
    f = REAL_LOSSES[name]
    z = _z(np.random.default_rng(0), (3,))
    g = sl.grad(f)(sl.tensor(z))
    assert g.dtype == np.complex128
    want = _real_loss_fd(lambda v: f(sl.tensor(v)).item(), z)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6, atol=1e-7)


HOLOMORPHIC_AND_NOT = {
    "mul": lambda z, w: z * w, "div": lambda z, w: z / w, "exp": lambda z, w: sl.exp(z) * w,
    "log": lambda z, w: sl.log(z), "sqrt": lambda z, w: sl.sqrt(z), "pow": lambda z, w: z ** w,
    "abs": lambda z, w: sl.abs(z * w), "angle": lambda z, w: sl.angle(z),
    "conj": lambda z, w: sl.conj(z) * w, "real": lambda z, w: sl.real(z) * w,
    "imag": lambda z, w: sl.imag(z) * w, "tanh": lambda z, w: sl.tanh(z * 0.5),
    "matmul": lambda z, w: sl.reshape(z, (2, 2)) @ sl.reshape(w, (2, 2)),
    "sum": lambda z, w: sl.sum(z * w, axis=0, keepdims=True),
    "stack": lambda z, w: sl.stack([z, w])[:, ::-1],
}


@pytest.mark.parametrize("name", list(HOLOMORPHIC_AND_NOT))
def test_vjps_match_finite_differences_to_second_order(backend, name):
    rng = np.random.default_rng(1)
    z, w = _z(rng, (4,)), _z(rng, (4,))
    check_grads(HOLOMORPHIC_AND_NOT[name], [backend.array(z), backend.array(w)], order=2)


def test_check_grads_catches_torchs_convention():
    """The oracle can fail: abs with torch's rule (g * z / |z|) is caught on complex input."""
    torch_abs = sl.Primitive("torch_abs", lambda x: xp_of(x).abs(x),
                             lambda g, out, x: (g * sl.tensor(x.numpy() / np.abs(x.numpy())),))
    z = _z(np.random.default_rng(2), (3,))
    check_grads(sl.abs, [z])
    with pytest.raises(AssertionError, match="finite differences"):
        check_grads(torch_abs, [z])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_dtypes_are_kept(dtype):
    z = sl.tensor(np.array([1 + 2j, -0.5j], dtype), requires_grad=True)
    assert (z * 2.0).dtype == dtype and sl.exp(z).dtype == dtype
    real = np.float32 if dtype == np.complex64 else np.float64
    assert sl.abs(z).dtype == real and sl.real(z).dtype == real and sl.angle(z).dtype == real
    g = sl.grad(lambda z: sl.sum(sl.abs(z * z)))(z)
    assert g.dtype == dtype


def test_grad_needs_a_real_output_unless_holomorphic():
    z = sl.tensor(np.array([1 + 1j, 2 - 1j]))
    with pytest.raises(TypeError, match="complex scalar"):
        sl.grad(lambda z: sl.sum(z * z))(z)
    g = sl.grad(lambda z: sl.sum(z * z), holomorphic=True)(z)
    np.testing.assert_allclose(g.numpy(), 2 * z.numpy())  # f'(z), as JAX's holomorphic grad
    with pytest.raises(TypeError, match="needs complex inputs"):
        sl.grad(lambda x: sl.sum(x * 1j), holomorphic=True)(sl.tensor([1.0]))


def test_real_parts_of_real_tensors():
    x = sl.tensor([1.5, -2.0], requires_grad=True)
    np.testing.assert_array_equal(sl.real(x).numpy(), [1.5, -2.0])
    np.testing.assert_array_equal(sl.imag(x).numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(sl.conj(x).numpy(), [1.5, -2.0])
    np.testing.assert_allclose(sl.angle(x).numpy(), [0.0, np.pi])
    g = sl.grad(lambda x: sl.sum(sl.real(x) * 3.0 + sl.imag(x) + sl.angle(x)))(x)
    np.testing.assert_array_equal(g.numpy(), [3.0, 3.0])


def test_numpy_functions_dispatch_to_the_complex_ops():
    z = sl.tensor(np.array([1 + 2j, -3j]), requires_grad=True)
    for f, g in ((np.real, sl.real), (np.imag, sl.imag), (np.conj, sl.conj),
                 (np.conjugate, sl.conj), (np.angle, sl.angle)):
        out = f(z)
        assert isinstance(out, sl.Tensor) and out.requires_grad
        np.testing.assert_allclose(out.numpy(), g(z).numpy())
    np.testing.assert_allclose(np.angle(z, deg=True).numpy(), np.angle(z.numpy(), deg=True))


# --- a diagonal complex recurrence (LRU): h = lam * h + B x, y = Re(C h) -------------------
def _lru(lam, B, C, xs, use_scan):
    def step(h, x):
        h = lam * h + B @ x
        return h, sl.real(C @ h)

    h0 = sl.zeros(lam.shape, dtype=np.complex128, device=lam.device)
    if use_scan:
        return sl.scan(step, h0, xs)
    ys = []
    h = h0
    for t in range(xs.shape[0]):
        h, y = step(h, xs[t])
        ys.append(y)
    return h, sl.stack(ys)


def _lru_params(rng, n=4, d=3, m=2):
    lam = 0.9 * np.exp(1j * rng.uniform(0, np.pi, n))
    B = rng.standard_normal((n, d)) + 1j * rng.standard_normal((n, d))
    C = rng.standard_normal((m, n)) + 1j * rng.standard_normal((m, n))
    return lam, B, C


@pytest.mark.parametrize("T", [1, 5, 40])
def test_complex_carry_scan_matches_the_loop(backend, T):
    rng = np.random.default_rng(3)
    lam, B, C = (backend.tensor(p) for p in _lru_params(rng))
    xs = backend.tensor(rng.standard_normal((T, 3)))

    def loss(lam, B, C, use_scan):
        h, ys = _lru(lam, B, C, xs, use_scan)
        return sl.sum(ys ** 2) + sl.sum(sl.abs(h))

    argnums = (0, 1, 2)
    v1, g1 = sl.value_and_grad(lambda *p: loss(*p, True), argnums)(lam, B, C)
    v2, g2 = sl.value_and_grad(lambda *p: loss(*p, False), argnums)(lam, B, C)
    np.testing.assert_allclose(v1.item(), v2.item(), rtol=1e-12)
    for a, b in zip(g1, g2):
        assert a.dtype == np.complex128
        np.testing.assert_allclose(backend.numpy(a), backend.numpy(b), rtol=1e-10, atol=1e-12)


def test_complex_scan_gradients_match_finite_differences():
    rng = np.random.default_rng(4)
    lam, B, C = _lru_params(rng)
    xs = sl.tensor(rng.standard_normal((6, 3)))

    def loss(lam, B, C):
        h, ys = _lru(lam, B, C, xs, True)
        return sl.sum(ys * sl.tensor(np.linspace(-1, 1, 12).reshape(6, 2)))

    check_grads(loss, [lam, B, C], order=2)


def test_gradients_agree_with_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    enable_x64 = jax.enable_x64  # a context manager in JAX >= 0.4.3x
    z = _z(np.random.default_rng(5), (3,))
    pairs = [
        (lambda m, v: m.sum(m.angle(v) * m.abs(v * v + 1j)), "angle-abs"),
        (lambda m, v: m.sum(m.real(m.conj(v) * m.tanh(v)) + m.imag(m.sqrt(v))), "conj-tanh"),
        (lambda m, v: m.abs(m.sum(m.exp(v) / (v + 2.0))), "exp-div"),
    ]
    for f, name in pairs:
        with enable_x64(True):
            want = np.asarray(jax.grad(lambda v, f=f: f(jnp, v))(jnp.asarray(z)))
        got = sl.grad(lambda v, f=f: f(sl, v))(sl.tensor(z)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=name)


def test_negative_real_base_to_a_complex_power():
    """d(x**w)/dw = x**w log(x) with the principal complex log of a negative base (JAX's
    value), whether the base is a number or a real tensor."""
    w = sl.tensor(0.5 + 1j)
    for base in (-2.0, sl.tensor(-2.0)):
        g = sl.grad(lambda w, base=base: sl.real(base ** w))(w)
        np.testing.assert_allclose(g.numpy(), -0.17475645 - 0.0900914j, rtol=1e-7)
    check_grads(lambda w: (-2.0) ** w, [np.array([0.5 + 1j, -0.3 + 0.2j])], order=2)
