"""NumPy functions called on Tensors (NEP 18 `__array_function__`, and `__array_ufunc__` for
ufuncs scanlib does not implement): the common ones run scanlib's differentiable ops, keywords
scanlib cannot honour raise naming the keyword, and every other function runs on NumPy only
where that drops no gradient; on a tensor that requires grad, or a traced one, it raises.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import scanlib as sl
from scanlib.ops import functions as F
from scanlib.ops import numpy_interop as methods
from scanlib.testing import check_grads

X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])


def leaf(data=X):
    return sl.tensor(data, requires_grad=True)


# --- the dispatch table -----------------------------------------------------------------------
@pytest.mark.parametrize("fn", [np.sum, np.mean, np.max, np.amax, np.min, np.amin])
@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": 1, "keepdims": True},
                                {"axis": (0, 1)}, {"axis": -1}])
def test_reductions_return_tensors_equal_to_numpy(backend, fn, kw):
    got = fn(backend.tensor(X), **kw)
    assert isinstance(got, sl.Tensor)
    backend.check_device(got)
    np.testing.assert_allclose(got.numpy(), fn(X, **kw), rtol=1e-12)


def test_reductions_are_differentiable():
    x = leaf()
    np.testing.assert_allclose(sl.grad(lambda t: np.sum(t * t))(x).numpy(), 2 * X)
    np.testing.assert_allclose(sl.grad(lambda t: np.mean(t))(x).numpy(), np.full(X.shape, 1 / 6))
    np.testing.assert_array_equal(sl.grad(lambda t: np.max(t))(x).numpy(), X == X.max())
    np.testing.assert_array_equal(sl.grad(lambda t: np.min(t))(x).numpy(), X == X.min())
    check_grads(lambda t: np.sum(np.max(t, axis=1, keepdims=True) * t), (X,))


def test_reductions_take_numpy_positional_arguments_and_defaults():
    x = leaf()
    np.testing.assert_allclose(np.sum(x, 0, None, None, True).numpy(), X.sum(0, keepdims=True))
    # Passing NumPy's own default values changes nothing.
    np.testing.assert_allclose(np.sum(x, axis=1, dtype=None, out=None).numpy(), X.sum(1))


@pytest.mark.parametrize("call, keyword", [
    (lambda t: np.sum(t, out=np.zeros(())), "out"),
    (lambda t: np.mean(t, axis=0, out=np.zeros(3)), "out"),
    (lambda t: np.max(t, out=np.zeros(())), "out"),
    (lambda t: np.sum(t, dtype=np.float32), "dtype"),
    (lambda t: np.max(t, initial=10.0), "initial"),
    (lambda t: np.sum(t, where=np.ones(X.shape, bool)), "where"),
    (lambda t: np.concatenate([t, t], dtype=np.float32), "dtype"),
    (lambda t: np.reshape(t, -1, order="F"), "order"),
    (lambda t: np.clip(t, 0, 1, casting="unsafe"), "casting"),
    (lambda t: np.exp(t, out=np.zeros(X.shape)), "out"),
])
def test_keywords_scanlib_cannot_honour_raise_naming_them(call, keyword):
    for t in (leaf(), sl.tensor(X)):  # whether or not a gradient is at stake
        with pytest.raises(TypeError, match=f"{keyword}="):
            call(t)


def test_out_error_says_tensors_are_immutable():
    with pytest.raises(TypeError, match="out=.*immutable"):
        np.sum(leaf(), out=np.zeros(()))


def test_concatenate_and_stack_dispatch_to_scanlib_with_gradients():
    x, y = leaf(), leaf(2 * X)
    out = np.concatenate([x, y], axis=1)
    assert isinstance(out, sl.Tensor) and out.requires_grad
    np.testing.assert_array_equal(out.numpy(), np.concatenate([X, 2 * X], axis=1))
    gx, gy = sl.grad(lambda a, b: np.sum(np.concatenate([a, b * b])), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), np.ones_like(X))
    np.testing.assert_allclose(gy.numpy(), 4 * X)
    np.testing.assert_array_equal(np.concatenate([x, y], axis=None).numpy(),
                                  np.concatenate([X, 2 * X], axis=None))
    np.testing.assert_array_equal(np.stack([x, y], axis=1).numpy(), np.stack([X, 2 * X], 1))
    check_grads(lambda a, b: np.stack((a, np.concatenate([b, a], axis=0)[:2])), (X, 2 * X))


W = np.arange(6.0).reshape(3, 2) / 5


@pytest.mark.parametrize("name, fn", [
    ("transpose", lambda a: np.transpose(a, (1, 0))),
    ("reshape", lambda a: np.reshape(a, (3, -1))),
    ("ravel", np.ravel),
    ("where", lambda a: np.where(a > 0.7, a, -a)),
    ("clip", lambda a: np.clip(a, -1.5, 2.5)),
    pytest.param("clip min=", lambda a: np.clip(a, min=0.0), marks=pytest.mark.skipif(
        np.lib.NumpyVersion(np.__version__) < "2.1.0", reason="np.clip takes min= from 2.1")),
    ("dot", lambda a: np.dot(a, W)),
    ("dot 1-d", lambda a: np.dot(a[0], a[1])),
    ("matmul", lambda a: np.matmul(a, W)),
    ("vdot", lambda a: np.vdot(a, a)),
    ("einsum", lambda a: np.einsum("ij,jk->ik", a, W, optimize=True)),
    ("swapaxes", lambda a: np.swapaxes(a, 0, 1)),
    ("expand_dims", lambda a: np.expand_dims(a, 1)),
    ("expand_dims tuple", lambda a: np.expand_dims(a, (0, -1))),
    ("squeeze", lambda a: np.squeeze(a[None, :, None], axis=(0, 2))),
    ("broadcast_to", lambda a: np.broadcast_to(a, (4, 2, 3))),
    ("abs", np.abs),
])
def test_table_functions_match_numpy_and_are_differentiable(name, fn):
    got = fn(leaf())
    assert isinstance(got, sl.Tensor) and got.requires_grad, name
    np.testing.assert_allclose(got.numpy(), fn(X), rtol=1e-12, err_msg=name)
    check_grads(fn, (X + 0.01,))  # off the kinks of clip and abs


def test_dot_follows_numpys_rule_for_more_than_two_axes():
    a, b = np.arange(8.0).reshape(2, 2, 2), np.arange(6.0).reshape(2, 3)
    out = np.dot(leaf(a), leaf(b))
    assert out.requires_grad
    np.testing.assert_allclose(out.numpy(), np.dot(a, b))


def test_dispatched_functions_return_tensors_for_plain_tensors_too():
    out = np.concatenate([sl.tensor(X), X])
    assert isinstance(out, sl.Tensor) and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), np.concatenate([X, X]))
    np.testing.assert_array_equal(np.where(sl.tensor(X) > 0)[1], np.where(X > 0)[1])


_C_FUNCTIONS = [  # NumPy functions written in C, whose signature NumPy < 2.4 hides from inspect
    (np.concatenate, lambda a: np.concatenate([a, a], axis=1, out=None, casting="same_kind")),
    (np.where, lambda a: np.where(a > 0.7, a, -a)),
    (np.dot, lambda a: np.dot(a, W, out=None)),
    (np.vdot, lambda a: np.vdot(a, a)),
]


@pytest.fixture
def signatures_hidden_as_before_numpy_2_4(monkeypatch):
    """inspect.signature of NumPy's C functions raising as it does on NumPy 2.0 to 2.3."""
    real = inspect.signature
    hidden = {f for f, _ in _C_FUNCTIONS}

    def signature(f, *args, **kwargs):
        if f in hidden:
            raise ValueError(f"no signature found for builtin {f!r}")
        return real(f, *args, **kwargs)

    monkeypatch.setattr(inspect, "signature", signature)
    methods._signature.cache_clear()
    yield
    methods._signature.cache_clear()


@pytest.mark.parametrize("func, fn", _C_FUNCTIONS, ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_functions_written_in_c_dispatch_without_a_readable_signature(
        signatures_hidden_as_before_numpy_2_4, func, fn):
    got = fn(leaf())
    assert isinstance(got, sl.Tensor) and got.requires_grad
    np.testing.assert_allclose(got.numpy(), fn(X), rtol=1e-12)
    if "out" in inspect.signature(methods._C_SIGNATURES[func]).parameters:
        with pytest.raises(TypeError, match="out=.*immutable"):  # still refused, by name
            func(leaf(), leaf().T, out=np.empty((2, 2)))


@pytest.mark.parametrize("func", [f for f, _ in _C_FUNCTIONS], ids=lambda f: f.__name__)
def test_the_written_out_signatures_are_numpys_where_numpy_shows_them(func):
    try:
        numpys = inspect.signature(func)
    except ValueError:
        pytest.skip(f"NumPy {np.__version__} shows no signature for np.{func.__name__}")
    assert inspect.signature(methods._C_SIGNATURES[func]) == numpys


# --- everything else: NumPy's result only where nothing is dropped ----------------------------
@pytest.mark.parametrize("fn, name", [(lambda a: np.partition(a, 1), "partition"),
                                      (lambda a: np.trapezoid(a), "trapezoid"),
                                      (lambda a: np.fft.fft(a), "fft.fft"),
                                      (np.exp2, "exp2"), (np.add.reduce, "add.reduce"),
                                      (lambda a: np.concatenate([X, np.fliplr(a)]), "fliplr")])
def test_unsupported_function_on_a_tensor_that_requires_grad_raises(fn, name):
    with pytest.raises(TypeError, match=rf"np\.{name}\(\).*drop its gradient.*detach"):
        fn(leaf())
    with pytest.raises(TypeError, match="gradient"):
        fn(sl.tensor(X) * leaf())  # a result computed from a leaf requires grad too


def test_the_unsupported_functions_tested_are_not_in_the_table():
    for fn in (np.partition, np.trapezoid, np.fft.fft, np.fliplr):
        assert fn not in methods._FUNCTIONS and fn not in methods._NON_DIFFERENTIABLE
    assert np.exp2 not in methods._UFUNCS  # np.add is there, but not np.add.reduce
    for uf in (np.exp2, np.add):
        assert uf not in methods._NON_DIFFERENTIABLE


def test_a_scanlib_equivalent_is_named_when_there_is_one(monkeypatch):
    with pytest.raises(TypeError, match="scanlib has no equivalent"):
        np.partition(leaf(), 1)
    # Looked up when called, so a function scanlib gains later is named.
    monkeypatch.setattr(F, "__all__", [*F.__all__, "partition"])
    with pytest.raises(TypeError, match=r"use scanlib\.partition"):
        np.partition(leaf(), 1)


def test_unsupported_function_on_a_plain_tensor_works_like_numpy():
    t = sl.tensor(X)
    for fn in (lambda a: np.partition(a, 1), np.trapezoid, np.fft.fft, np.exp2,
               np.add.reduce, np.fliplr, lambda a: np.rot90(a, 1, axes=(1, 0))):
        got = fn(t)
        assert not isinstance(got, sl.Tensor)
        np.testing.assert_array_equal(got, fn(X))
    # Tensors are found inside lists and keyword arguments too.
    np.testing.assert_array_equal(np.block([[t, t]]), np.block([[X, X]]))
    np.testing.assert_array_equal(np.trapezoid(y=t, axis=0), np.trapezoid(X, axis=0))
    with pytest.raises(TypeError, match="gradient"):
        np.block([[t, leaf()]])
    with pytest.raises(TypeError, match="gradient"):
        np.trapezoid(y=leaf())


def test_numpy_cannot_write_into_a_tensor():
    t = sl.tensor(X.copy())
    with pytest.raises(ValueError, match="read-only"):
        np.copyto(t, 0.0)
    with pytest.raises(ValueError, match="read-only"):
        np.exp2(X, out=t)
    with pytest.raises(TypeError, match="out="):
        np.floor(X, out=t)
    with pytest.raises(TypeError, match="out="):
        np.sum(X, axis=0, out=t)
    np.testing.assert_array_equal(t.numpy(), X)


def test_non_differentiable_functions_run_on_numpy_even_when_grad_is_required():
    x = leaf()
    assert np.allclose(x, X) and np.array_equal(x, X)
    np.testing.assert_array_equal(np.isclose(x, X), np.ones(X.shape, bool))
    assert np.argmax(x) == np.argmax(X) and np.argmin(x, axis=1).tolist() == [1, 2]
    assert np.count_nonzero(x > 0) == np.count_nonzero(X > 0)
    assert np.shape(x) == X.shape and np.ndim(x) == 2 and np.size(x) == 6
    assert np.result_type(x, np.float32) == np.float64
    assert bool(np.all(np.isfinite(x))) and not np.any(np.isnan(x))
    # np.testing's asserts, np.asarray and np.array read a tensor through __array__, which
    # refuses one that requires grad (its gradient would be gone): detach or .numpy() first.
    for read in (lambda: np.testing.assert_allclose(x, X), lambda: np.asarray(x),
                 lambda: np.array(x)):
        with pytest.raises(TypeError, match="drop its gradient"):
            read()
    np.testing.assert_allclose(x.numpy(), X)
    np.testing.assert_array_equal(np.asarray(x.detach()), X)
    assert float(sl.tensor(2.5, requires_grad=True)) == 2.5


# --- inside a scan body: values are stand-ins -------------------------------------------------
XS = np.random.default_rng(0).standard_normal((5, 3))


def test_np_sum_inside_a_scan_body_dispatches_and_matches_the_loop():
    def body(c, x):
        return c * 0.5 + np.sum(np.tanh(x) * c), np.max(x)

    def loop(c, xs):
        ys = []
        for x in xs:
            c, y = body(c, x)
            ys.append(y)
        return c, np.stack(ys)

    c0 = sl.tensor(np.ones(3), requires_grad=True)
    got_c, got_ys = sl.scan(body, c0, sl.tensor(XS))
    want_c, want_ys = loop(c0, sl.tensor(XS))
    np.testing.assert_allclose(got_c.numpy(), want_c.numpy(), rtol=1e-12)
    np.testing.assert_allclose(got_ys.numpy(), want_ys.numpy(), rtol=1e-12)
    g_scan = sl.grad(lambda c: np.sum(sl.scan(body, c, sl.tensor(XS))[0]))(c0)
    g_loop = sl.grad(lambda c: np.sum(loop(c, sl.tensor(XS))[0]))(c0)
    np.testing.assert_allclose(g_scan.numpy(), g_loop.numpy(), rtol=1e-12)


@pytest.mark.parametrize("fn", [np.trapezoid, lambda x: np.allclose(x, 0.0), np.exp2])
def test_numpy_fallback_on_a_tracer_raises_instead_of_computing_on_stand_ins(fn):
    def body(c, x):
        return c + fn(x), None

    with pytest.raises(TypeError, match="traced inside a scan body.*not known yet"):
        sl.scan(body, sl.zeros(3), sl.tensor(XS))  # no tensor here requires grad


def test_shape_functions_work_on_tracers():
    def body(c, x):
        return c + np.shape(x)[0] + np.ndim(x) + np.size(x), None

    got, _ = sl.scan(body, sl.zeros(3), sl.tensor(XS))
    np.testing.assert_array_equal(got.numpy(), np.full(3, 5 * (3 + 1 + 3.0)))


def test_make_graph_tracers_raise_too():
    with pytest.raises(TypeError, match="traced"):
        sl.make_graph(lambda x: np.trapezoid(x))(sl.tensor(X))


# --- devices ----------------------------------------------------------------------------------
def test_on_the_gpu_the_table_runs_there_and_numpy_is_not_silently_given_gpu_memory(backend):
    t = backend.tensor(X)
    backend.check_device(np.concatenate([t, t]))
    assert np.shape(t) == X.shape
    if backend.device == "cpu":
        np.testing.assert_array_equal(np.partition(t, 1), np.partition(X, 1))
    else:
        with pytest.raises(TypeError, match="GPU"):
            np.partition(t, 1)


def test_numpy_and_asarray_hand_out_read_only_views_and_np_array_copies():
    """Tensors are immutable, as JAX arrays are: no write through .numpy() or np.asarray can
    reach a value the tape holds (x's data and exp's output, which its VJP reuses)."""
    x = sl.tensor(X.copy())
    y = sl.exp(x)
    for view in (x.numpy(), np.asarray(x), np.asarray(y), y.numpy()):
        assert not view.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            view[0, 0] = 99.0
    copy = np.array(x)
    copy[0, 0] = 99.0
    assert copy.flags.writeable and x.numpy()[0, 0] == X[0, 0]
    assert np.asarray(x, dtype=np.float32).dtype == np.float32


def test_nothing_numpy_offers_writes_into_a_tensor():
    """ufunc.at ignores NumPy's read-only flag, so it is refused on tensors; the flag of a
    handed-out view cannot be switched back on; and tensor() copies its source array, so
    writing into that array later cannot change what the tape saved."""
    c = sl.tensor([1.0, 2.0])
    for ufunc in (np.add, np.multiply, np.negative):
        with pytest.raises(TypeError, match=r"immutable.*t\.at\[index\]"):
            ufunc.at(c, [0], 5.0) if ufunc is not np.negative else ufunc.at(c, [0])
    view = c.numpy()
    with pytest.raises(ValueError):
        view.flags.writeable = True
    source = np.array([1.0, 2.0])
    w = sl.tensor(source, requires_grad=True)
    y = (w ** 3).sum()
    source *= 10
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 12.0])
    np.testing.assert_array_equal(c.numpy(), [1.0, 2.0])


def test_np_linalg_eigh_and_cholesky_read_one_triangle_as_numpy_does():
    """NumPy's eigh and cholesky read one triangle; scanlib's own functions symmetrize, as
    JAX's do. Through np.linalg the result must be NumPy's."""
    A = np.array([[2, 1, .3], [-.5, 3, .2], [.7, 5, 4]])
    for uplo in "LU":
        for f in (lambda a, u: np.linalg.eigh(a, UPLO=u).eigenvalues,
                  lambda a, u: np.linalg.eigvalsh(a, UPLO=u)):
            got = f(sl.tensor(A, requires_grad=True), uplo)
            assert isinstance(got, sl.Tensor)
            np.testing.assert_allclose(got.numpy(), f(A, uplo), rtol=1e-12)
    S = A @ A.T + np.eye(3)
    S[0, 2] += 5  # the upper triangle is no longer the lower's mirror
    for upper in (False, True):
        np.testing.assert_allclose(np.linalg.cholesky(sl.tensor(S), upper=upper).numpy(),
                                   np.linalg.cholesky(S, upper=upper), rtol=1e-12)
