"""jnp.fft (scanlib.numpy.fft): values and dtypes against NumPy for every function with n/s,
axis/axes and norm; VJPs against finite differences to second order; gradients and forward
mode against JAX where it is installed (rfft's and irfft's transposes are not plain
conjugates); vmap, jit, a scan body, the numba tier's fallback; edges and errors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import scanlib as sl
import scanlib.numpy as jnp_sl
from scanlib.testing import check_grads

FFT = jnp_sl.fft
REAL_IN = {"rfft", "ihfft", "rfftn", "rfft2"}


def _x(shape=(3, 8), seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _z(shape=(3, 8), seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


# (name, keywords): each 1-d function with n and axis, each n-d one with s and axes
ONE_D = [(name, kw) for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
         for kw in ({}, {"n": 5}, {"n": 11}, {"norm": "ortho"},
                    {"axis": 0, "norm": "forward"}, {"n": 4, "axis": -2, "norm": "backward"})]
N_D = [(name, kw) for name in ("fftn", "ifftn", "rfftn", "irfftn")
       for kw in ({}, {"s": (2, 5)}, {"axes": (1, 0)}, {"axes": (0,), "norm": "ortho"},
                  {"s": (4, 6), "axes": (-1, 0), "norm": "forward"})]
TWO_D = [(name, kw) for name in ("fft2", "ifft2", "rfft2", "irfft2")
         for kw in ({}, {"s": (4, 3)}, {"norm": "ortho"})]
CASES = ONE_D + N_D + TWO_D
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}" for name, kw in CASES]


def _inputs(name):
    return [_x()] if name in REAL_IN else [_x(), _z()]


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_values_and_dtypes_match_numpy(name, kw):
    for a in _inputs(name):
        for dtype in ((np.float32, np.float64) if a.dtype.kind == "f" else
                      (np.complex64, np.complex128)):
            ours = getattr(FFT, name)(a.astype(dtype), **kw)
            ref_kw = dict(kw)
            if "s" in kw and "axes" not in kw and not name.endswith("2"):  # NumPy 2 asks for axes
                ref_kw["axes"] = tuple(range(-len(kw["s"]), 0))
            want = getattr(np.fft, name)(a.astype(dtype), **ref_kw)
            assert ours.shape == want.shape
            assert ours.dtype == want.dtype, (name, dtype, ours.dtype, want.dtype)
            tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
            np.testing.assert_allclose(ours.numpy(), want, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_grads_match_finite_differences_to_second_order(name, kw):
    for a in _inputs(name):
        check_grads(lambda a: getattr(FFT, name)(a, **kw), (a,), order=2, seed=5)


@pytest.fixture
def jax64():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def _weighted_loss(mod, f, kw, w1, w2, complex_out):
    def value(x):
        y = f(x, **kw)
        if complex_out:
            return mod.sum(mod.real(y) * w1 + mod.imag(y) * w2)
        return mod.sum(y * w1)
    return value


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_gradient_and_forward_mode_match_jax(jax64, name, kw):
    jnp = jax64.numpy
    rng = np.random.default_rng(1)
    for a in _inputs(name):
        out = getattr(jnp.fft, name)(a, **kw)
        w1, w2 = rng.standard_normal((2,) + out.shape)
        complex_out = np.iscomplexobj(out)
        ours = sl.grad(_weighted_loss(sl, getattr(FFT, name), kw, w1, w2, complex_out))(
            sl.tensor(a)).numpy()
        theirs = np.asarray(jax64.grad(
            _weighted_loss(jnp, getattr(jnp.fft, name), kw, w1, w2, complex_out))(a))
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
        t = rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape)
                                            if a.dtype.kind == "c" else 0)
        _, ours = sl.jvp(lambda x: getattr(FFT, name)(x, **kw), (sl.tensor(a),),
                         (sl.tensor(t),))
        _, theirs = jax64.jvp(lambda x: getattr(jnp.fft, name)(x, **kw), (a,), (t,))
        np.testing.assert_allclose(ours.numpy(), np.asarray(theirs), rtol=1e-10, atol=1e-12)


def test_frequencies_and_shifts_match_numpy_and_jax():
    for n, d in ((5, 0.1), (6, 1.0), (1, 2.0)):
        np.testing.assert_allclose(FFT.fftfreq(n, d).numpy(), np.fft.fftfreq(n, d))
        np.testing.assert_allclose(FFT.rfftfreq(n, d).numpy(), np.fft.rfftfreq(n, d))
    assert FFT.fftfreq(4).dtype == np.float64
    assert FFT.fftfreq(4, dtype=np.float32).dtype == np.float32
    x = _x((2, 5))
    for axes in (None, 0, 1, (0, 1), (-1,)):
        np.testing.assert_array_equal(FFT.fftshift(x, axes).numpy(), np.fft.fftshift(x, axes))
        np.testing.assert_array_equal(FFT.ifftshift(x, axes).numpy(), np.fft.ifftshift(x, axes))
    g = sl.grad(lambda x: sl.sum(FFT.fftshift(x) * np.arange(10.0).reshape(2, 5)))(sl.tensor(x))
    np.testing.assert_array_equal(g.numpy(), np.fft.ifftshift(np.arange(10.0).reshape(2, 5)))


def test_jnp_fft_names_are_the_module_functions():
    import scanlib.ops.fft as ops_fft

    assert jnp_sl.fft.fft is ops_fft.fft and jnp_sl.fft.irfftn is ops_fft.irfftn
    jax = pytest.importorskip("jax")
    theirs = {n for n in dir(jax.numpy.fft) if not n.startswith("_")}
    assert theirs <= set(jnp_sl.fft.__all__), theirs - set(jnp_sl.fft.__all__)


def test_integer_input_is_complex128_and_float32_complex64_as_jax():
    assert FFT.fft(np.arange(4)).dtype == np.complex128
    assert FFT.rfft(np.arange(4)).dtype == np.complex128
    assert FFT.fft(np.ones(4, np.float32)).dtype == np.complex64
    assert FFT.irfft(np.ones(3, np.complex64)).dtype == np.float32
    g = sl.grad(lambda x: sl.sum(sl.abs(FFT.rfft(x)) ** 2))(sl.tensor(np.ones(6, np.float32)))
    assert g.dtype == np.float32


def test_empty_zero_d_and_nan_edges():
    assert FFT.fft(np.zeros(0)).shape == (0,)  # NumPy raises here; JAX gives the empty result
    assert FFT.irfft(np.ones(1)).shape == (0,)
    assert FFT.fftn(np.float64(2.0)).numpy() == 2.0  # no axes: the value, as complex
    with pytest.raises(ValueError, match="out of range"):
        FFT.fft(np.float64(1.0))
    out = FFT.fft(np.array([np.nan, 1.0, np.inf])).numpy()
    want = np.fft.fft(np.array([np.nan, 1.0, np.inf]))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))


def test_errors_say_what_and_how_to_fix():
    with pytest.raises(ValueError, match="exactly 2 axes"):
        FFT.fft2(_x(), axes=(0,))
    with pytest.raises(ValueError, match="repeated"):
        FFT.fftn(_x(), axes=(0, 0))
    with pytest.raises(ValueError, match="one length each"):
        FFT.fftn(_x(), s=(2,), axes=(0, 1))
    with pytest.raises(ValueError, match="norm"):
        FFT.fft(_x(), norm="bad")
    with pytest.raises(TypeError, match="real input"):
        FFT.rfft(_z())


def test_vmap_jit_and_scan_body():
    x = _x((4, 3, 8))
    for f in (FFT.fft, FFT.rfft, lambda a: FFT.irfft(FFT.rfft(a) * 2, n=8),
              lambda a: FFT.fftn(a, axes=(0, 1)), lambda a: FFT.fft(a, axis=0)):
        batched = sl.vmap(f)(sl.tensor(x)).numpy()
        np.testing.assert_allclose(batched, np.stack([f(x[i]).numpy() for i in range(4)]),
                                   rtol=1e-12, atol=1e-12)
    per_example = sl.vmap(sl.grad(lambda a: sl.sum(sl.abs(FFT.rfft(a)) ** 3)))(sl.tensor(x))
    one = sl.grad(lambda a: sl.sum(sl.abs(FFT.rfft(a)) ** 3))(sl.tensor(x[1]))
    np.testing.assert_allclose(per_example.numpy()[1], one.numpy(), rtol=1e-12)
    f = sl.jit(lambda a: sl.sum(sl.abs(FFT.rfft(a)) ** 2))
    assert np.isclose(float(f(x)), float(sl.sum(sl.abs(FFT.rfft(x)) ** 2)), rtol=1e-12)

    def body(c, a):
        y = FFT.irfft(FFT.rfft(a * c), n=8)
        return c * 0.9 + 0.1 * y, sl.sum(y ** 2)

    def by_scan(c, compiler=None):
        kw = {} if compiler is None else {"compiler": compiler}
        return sl.sum(sl.scan(body, c, sl.tensor(x.reshape(-1, 8)), **kw)[1])

    def by_loop(c):
        total = 0.0
        for a in x.reshape(-1, 8):
            c, y = body(c, a)
            total = total + y
        return total

    c0 = sl.tensor(np.linspace(0.5, 1.5, 8))
    np.testing.assert_allclose(sl.grad(by_scan)(c0).numpy(), sl.grad(by_loop)(c0).numpy(),
                               rtol=1e-10)
    pytest.importorskip("numba")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = by_scan(c0, "numba")
    assert any(w.category is sl.NumbaFallbackWarning and "rfft" in str(w.message)
               for w in caught)
    np.testing.assert_allclose(float(value), float(by_loop(c0)), rtol=1e-12)


def test_transforms_and_their_gradients_stay_on_the_data_device(backend):
    x = backend.tensor(_x())
    for f in (FFT.fft, FFT.rfft, lambda a: FFT.irfft(FFT.rfft(a), n=8),
              lambda a: FFT.fftn(a, s=(4, 6), norm="ortho"), FFT.fftshift):
        out = f(x)
        backend.check_device(out)
        np.testing.assert_allclose(out.numpy(), f(_x()).numpy(), rtol=1e-12, atol=1e-12)
        g = sl.grad(lambda a, f=f: sl.sum(sl.abs(f(a)) ** 2))(x)
        backend.check_device(g)
        want = sl.grad(lambda a, f=f: sl.sum(sl.abs(f(a)) ** 2))(sl.tensor(_x()))
        np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    backend.check_device(FFT.fftfreq(4, device=x.device))
