"""scanlib.nn: jax.nn's activations, standardize, logmeanexp and dot_product_attention (values
and gradients against JAX where installed and against finite differences always, dtypes, 0-d
and empty inputs, NaN/inf edges, vmap and scan bodies), and nn.initializers drawing JAX's
numbers from the same key.
"""

from __future__ import annotations


import numpy as np
import pytest

import scanlib as sl
from scanlib import nn
from scanlib.testing import check_grads

from opcheck import fd_grad, jax_x64

X = np.array([-4.0, -2.5, -1.0, -0.3, 0.2, 0.9, 1.0, 2.0, 3.5, 7.0])
POS = np.array([1e-6, 0.1, 0.6, 0.7, 1.0, 5.0, 40.0])
ELEMENTWISE = {  # name -> (call, input, closed form in NumPy)
    "hard_sigmoid": (nn.hard_sigmoid, X, lambda x: np.clip(x + 3, 0, 6) / 6),
    "hard_silu": (nn.hard_silu, X, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hard_swish": (nn.hard_swish, X, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "mish": (nn.mish, X, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    "soft_sign": (nn.soft_sign, X, lambda x: x / (1 + np.abs(x))),
    "squareplus": (nn.squareplus, X, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    "sparse_plus": (nn.sparse_plus, X, lambda x: np.where(
        x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))),
    "sparse_sigmoid": (nn.sparse_sigmoid, X, lambda x: np.clip((x + 1) / 2, 0, 1)),
    "log1mexp": (nn.log1mexp, POS, lambda x: np.log(-np.expm1(-x))),
}
SMOOTH_AT = {  # points away from the kinks, for finite differences
    "hard_sigmoid": X[np.abs(np.abs(X) - 3) > 0.1], "hard_silu": X[np.abs(np.abs(X) - 3) > 0.1],
    "hard_swish": X[np.abs(np.abs(X) - 3) > 0.1],
    "sparse_plus": X[np.abs(np.abs(X) - 1) > 0.1],
    "sparse_sigmoid": X[np.abs(np.abs(X) - 1) > 0.1], "log1mexp": POS[1:],
}


def _np(t):
    return t.numpy() if isinstance(t, sl.Tensor) else np.asarray(t)




@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_values_gradients_and_dtypes(name):
    f, x, closed = ELEMENTWISE[name]
    np.testing.assert_allclose(_np(f(sl.tensor(x))), closed(x), rtol=1e-13, atol=1e-15)
    pts = SMOOTH_AT.get(name, x)
    g = _np(sl.grad(lambda t: sl.sum(f(t)))(sl.tensor(pts)))
    np.testing.assert_allclose(g, fd_grad(lambda t: sl.sum(f(t)), pts), rtol=1e-6, atol=1e-8)
    # second order through the same ops
    gg = _np(sl.grad(lambda t: sl.sum(sl.grad(lambda u: sl.sum(f(u)))(t)))(sl.tensor(pts)))
    numeric = fd_grad(lambda t: sl.sum(sl.grad(lambda u: sl.sum(f(u)))(t)), pts)
    np.testing.assert_allclose(gg, numeric, rtol=1e-5, atol=1e-6)
    assert f(sl.tensor(x, dtype=np.float32)).dtype == np.float32
    assert f(sl.tensor(1.0)).shape == () and f(sl.zeros((0, 3))).shape == (0, 3)
    with np.errstate(invalid="ignore"):
        assert np.isnan(_np(f(sl.tensor([np.nan])))).all()


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_equal_jax_with_gradients(name):
    jax = pytest.importorskip("jax")
    f, x, _ = ELEMENTWISE[name]
    with jax_x64(jax):
        jf = getattr(jax.nn, name)
        theirs = np.asarray(jf(x))
        their_grad = np.asarray(jax.grad(lambda t: jf(t).sum())(x))
        their_inf = np.asarray(jf(np.array([np.inf, -np.inf]))) if name != "log1mexp" else (
            np.asarray(jf(np.array([np.inf, 0.0]))))
    np.testing.assert_allclose(_np(f(sl.tensor(x))), theirs, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(_np(sl.grad(lambda t: sl.sum(f(t)))(sl.tensor(x))), their_grad,
                               rtol=1e-12, atol=1e-15)
    edge = np.array([np.inf, -np.inf]) if name != "log1mexp" else np.array([np.inf, 0.0])
    with np.errstate(all="ignore"):  # inf - inf inside: NaN is what JAX gives too
        np.testing.assert_array_equal(_np(f(sl.tensor(edge))), their_inf)


def test_glu():
    x = np.arange(12.0).reshape(2, 6) / 5 - 1
    out = _np(nn.glu(sl.tensor(x)))
    np.testing.assert_allclose(out, x[:, :3] / (1 + np.exp(-x[:, 3:])), rtol=1e-14)
    out0 = _np(nn.glu(sl.tensor(x.T), axis=0))
    np.testing.assert_allclose(out0, out.T, rtol=1e-14)
    g = _np(sl.grad(lambda t: sl.sum(nn.glu(t) ** 2))(sl.tensor(x)))
    np.testing.assert_allclose(g, fd_grad(lambda t: sl.sum(nn.glu(t) ** 2), x), rtol=1e-6)
    with pytest.raises(ValueError, match="must be even"):
        nn.glu(sl.ones(3))


def test_standardize_and_logmeanexp():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5))
    out = _np(nn.standardize(sl.tensor(x)))
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    np.testing.assert_allclose(_np(nn.standardize(sl.tensor(x), algorithm="stable")), expected,
                               rtol=1e-12)
    w = rng.uniform(size=(3, 5)) > 0.3
    masked = _np(nn.standardize(sl.tensor(x), where=w))
    for i in range(3):
        m, v = x[i][w[i]].mean(), x[i][w[i]].var()
        np.testing.assert_allclose(masked[i], (x[i] - m) / np.sqrt(v + 1e-5), rtol=1e-11)
    f = lambda t: sl.sum(nn.standardize(t, axis=0) ** 3)  # noqa: E731
    np.testing.assert_allclose(_np(sl.grad(f)(sl.tensor(x))), fd_grad(f, x), rtol=1e-6,
                               atol=1e-8)
    with pytest.raises(ValueError, match="algorithm"):
        nn.standardize(sl.tensor(x), algorithm="slow")
    lme = _np(nn.logmeanexp(sl.tensor(x), axis=1))
    np.testing.assert_allclose(lme, np.log(np.exp(x).mean(1)), rtol=1e-13)
    np.testing.assert_allclose(_np(nn.logmeanexp(sl.tensor(x))), np.log(np.exp(x).mean()),
                               rtol=1e-13)
    lw = _np(nn.logmeanexp(sl.tensor(x), axis=1, where=w))
    np.testing.assert_allclose(lw, [np.log(np.exp(x[i][w[i]]).mean()) for i in range(3)],
                               rtol=1e-13)
    f = lambda t: sl.sum(nn.logmeanexp(t, axis=0, where=w))  # noqa: E731
    np.testing.assert_allclose(_np(sl.grad(f)(sl.tensor(x))), fd_grad(f, x), rtol=1e-6,
                               atol=1e-10)


def test_standardize_and_logmeanexp_equal_jax():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(3, 5)), rng.uniform(size=(3, 5)) > 0.3
    with jax_x64(jax):
        s = np.asarray(jax.nn.standardize(x, where=w))
        gs = np.asarray(jax.grad(lambda t: (jax.nn.standardize(t, 0) ** 3).sum())(x))
        lme = np.asarray(jax.nn.logmeanexp(x, axis=1, where=w))
    np.testing.assert_allclose(_np(nn.standardize(sl.tensor(x), where=w)), s, rtol=1e-11)
    ours = _np(sl.grad(lambda t: sl.sum(nn.standardize(t, 0) ** 3))(sl.tensor(x)))
    np.testing.assert_allclose(ours, gs, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(nn.logmeanexp(sl.tensor(x), axis=1, where=w)), lme,
                               rtol=1e-13)


def _attention_reference(q, k, v, bias, mask):
    n, kh = q.shape[2], k.shape[2]
    k, v = np.repeat(k, n // kh, axis=2), np.repeat(v, n // kh, axis=2)
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    if bias is not None:
        logits = logits + bias
    if mask is not None:
        logits = np.where(mask, logits, -0.7 * np.finfo(np.float32).max)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v)


ATT = [
    dict(),
    dict(bias=True),
    dict(mask=True),
    dict(is_causal=True, bias=True),
    dict(grouped=True, is_causal=True),
]


@pytest.mark.parametrize("case", range(len(ATT)))
def test_dot_product_attention(case):
    spec = ATT[case]
    rng = np.random.default_rng(case)
    B, T, S, N, H = 2, 4, 4, 4, 3
    K = 2 if spec.get("grouped") else N
    q, k, v = rng.normal(size=(B, T, N, H)), rng.normal(size=(B, S, K, H)), rng.normal(
        size=(B, S, K, H))
    bias = rng.normal(size=(1, N, T, S)) if spec.get("bias") else None
    mask = rng.uniform(size=(B, 1, T, S)) > 0.3 if spec.get("mask") else None
    causal = spec.get("is_causal", False)
    full_mask = mask
    if causal:
        tril = np.tril(np.ones((T, S), bool))[None, None]
        full_mask = tril if mask is None else mask & tril

    def ours(q, k, v):
        return nn.dot_product_attention(q, k, v, bias=bias, mask=mask, is_causal=causal)

    out = _np(ours(sl.tensor(q), sl.tensor(k), sl.tensor(v)))
    np.testing.assert_allclose(out, _attention_reference(q, k, v, bias, full_mask), rtol=1e-12)
    w = rng.normal(size=out.shape)
    for i, arr in enumerate((q, k, v)):
        def f(t, i=i):
            args = [sl.tensor(a) for a in (q, k, v)]
            args[i] = t
            return sl.sum(ours(*args) * w)

        np.testing.assert_allclose(_np(sl.grad(f)(sl.tensor(arr))), fd_grad(f, arr),
                                   rtol=1e-6, atol=1e-8)
    # 3-d inputs (no batch axis) give 3-d outputs
    assert nn.dot_product_attention(q[0], k[0], v[0]).shape == (T, N, H)
    # in a vmap and a scan body
    vm = _np(sl.vmap(lambda a: nn.dot_product_attention(a, a, a))(sl.tensor(q)))
    np.testing.assert_allclose(vm[1], _np(nn.dot_product_attention(q[1], q[1], q[1])),
                               rtol=1e-13)


def test_dot_product_attention_equals_jax_and_errors():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(2, 3, 4, 5)).astype(np.float32) for _ in range(3))
    k, v = k[:, :, :2], v[:, :, :2]
    bias = rng.normal(size=(2, 4, 3, 3)).astype(np.float32)
    mask = rng.uniform(size=(2, 4, 3, 3)) > 0.2
    theirs = np.asarray(jax.nn.dot_product_attention(q, k, v, bias, mask, is_causal=True))
    ours = _np(nn.dot_product_attention(sl.tensor(q), sl.tensor(k), sl.tensor(v), bias, mask,
                                        is_causal=True))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match="multiple"):
        nn.dot_product_attention(q, k[:, :, :1].repeat(3, 2), v[:, :, :1].repeat(3, 2))
    with pytest.raises(ValueError, match="boolean"):
        nn.dot_product_attention(q, q, q, mask=np.ones((3, 3)))
    with pytest.raises(NotImplementedError, match="mask="):
        nn.dot_product_attention(q, q, q, key_value_seq_lengths=np.array([2, 3], np.int32))


INITS = {
    "zeros": lambda m: m.zeros, "ones": lambda m: m.ones,
    "constant": lambda m: m.constant(0.3), "uniform": lambda m: m.uniform(0.5),
    "normal": lambda m: m.normal(0.2), "truncated_normal": lambda m: m.truncated_normal(0.2),
    "glorot_uniform": lambda m: m.glorot_uniform(), "glorot_normal": lambda m: m.glorot_normal(),
    "xavier_uniform": lambda m: m.xavier_uniform(), "xavier_normal": lambda m: m.xavier_normal(),
    "lecun_uniform": lambda m: m.lecun_uniform(), "lecun_normal": lambda m: m.lecun_normal(),
    "he_uniform": lambda m: m.he_uniform(), "he_normal": lambda m: m.he_normal(),
    "kaiming_uniform": lambda m: m.kaiming_uniform(),
    "kaiming_normal": lambda m: m.kaiming_normal(),
    "variance_scaling": lambda m: m.variance_scaling(0.7, "fan_geo_avg", "normal", in_axis=0,
                                                     out_axis=(1, 2)),
    "orthogonal": lambda m: m.orthogonal(1.5),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(INITS))
def test_initializers_equal_jax(name, dtype):
    jax = pytest.importorskip("jax")
    shape = (4, 3, 2)
    with jax_x64(jax):
        theirs = np.asarray(INITS[name](jax.nn.initializers)(jax.random.PRNGKey(1), shape,
                                                             dtype))
    ours = _np(INITS[name](nn.initializers)(sl.random.key(1), shape, dtype))
    assert ours.dtype == theirs.dtype and ours.shape == shape
    rtol = 1e-13 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol * 1e-2)


def test_initializers_without_jax():
    k = sl.random.key(0)
    w = _np(nn.initializers.orthogonal()(k, (5, 3)))
    np.testing.assert_allclose(w.T @ w, np.eye(3), atol=1e-12)
    assert nn.initializers.zeros(k, (2,)).dtype == np.float64
    big = _np(nn.initializers.he_normal()(k, (400, 300)))
    assert abs(big.std() - np.sqrt(2 / 400)) < 0.002
    u = _np(nn.initializers.glorot_uniform()(k, (400, 300)))
    limit = np.sqrt(6 / 700)
    assert u.max() < limit and u.min() >= -limit and u.max() > 0.99 * limit
    with pytest.raises(ValueError, match="in_axis"):
        nn.initializers.lecun_normal()(k, (3,))
    with pytest.raises(ValueError, match="mode"):
        nn.initializers.variance_scaling(1.0, "fan", "normal")
    assert nn.initializers.orthogonal()(k, (0, 3)).shape == (0, 3)


def test_nn_is_a_view_of_scanlib():
    assert nn.relu is sl.relu and nn.soft_sign is sl.softsign
    import scanlib.nn.initializers as inits

    assert inits is nn.initializers


def test_on_the_device_of_the_data(backend):
    rng = np.random.default_rng(3)
    q = rng.normal(size=(2, 3, 2, 4))
    bias, mask = rng.normal(size=(1, 2, 3, 3)), rng.uniform(size=(2, 1, 3, 3)) > 0.3
    out = nn.dot_product_attention(backend.tensor(q), backend.tensor(q), backend.tensor(q),
                                   bias, mask, is_causal=True)
    backend.check_device(out)
    expected = nn.dot_product_attention(sl.tensor(q), sl.tensor(q), sl.tensor(q), bias, mask,
                                        is_causal=True)
    np.testing.assert_allclose(backend.numpy(out), _np(expected), rtol=1e-13)
    key = backend.tensor(_np(sl.random.key(0)))
    for name in sorted(INITS):
        w = INITS[name](nn.initializers)(key, (4, 3, 2))
        backend.check_device(w)
        np.testing.assert_array_equal(
            backend.numpy(w), _np(INITS[name](nn.initializers)(sl.random.key(0), (4, 3, 2))))
    for f in (nn.mish, nn.glu, nn.standardize, nn.log1mexp, nn.logmeanexp):
        backend.check_device(f(backend.tensor(np.abs(q[0, 0]) + 0.5)))


def test_relu_is_one_equation_with_the_values_and_gradient_of_its_where_form():
    """relu of a real float array is one primitive: max(x, 0), which is where(x > 0, x,
    max(x, 0)) to the bit, with that form's gradient (0 at 0 and at NaN, as JAX's), at
    first and second order, also inside a numba kernel."""
    import warnings

    from scanlib.ops import elementwise as ew

    def where_form(v):
        return ew.where(ew.greater(v, 0), v, ew.stop_gradient(ew.maximum(v, 0)))

    rng = np.random.default_rng(0)
    for dtype in ("float32", "float64"):
        x = rng.normal(size=(64, 9)).astype(dtype)
        x[0, :5] = [0.0, -0.0, np.nan, np.inf, -np.inf]
        t = sl.tensor(x)
        assert [e.prim.name for e in sl.make_graph(sl.relu)(t).eqns] == ["relu"]
        for got, want in [(sl.relu(t), where_form(t)),
                          (sl.grad(lambda v: sl.sum(sl.relu(v) * 3.0))(t),
                           sl.grad(lambda v: sl.sum(where_form(v) * 3.0))(t))]:
            got, want = got.numpy(), want.numpy()
            assert got.dtype == want.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                          want.view(f"u{want.itemsize}"))
    check_grads(lambda v: sl.sum(sl.relu(v) ** 2 * v), (rng.normal(size=(5, 4)),), order=2)

    def body(c, x):
        return sl.relu(c * 0.9 + x), sl.relu(c).sum()

    init, xs = sl.tensor(rng.normal(size=8)), sl.tensor(rng.normal(size=(20, 8)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        got = sl.scan(body, init, xs, compiler="numba") if _has_numba() else None
    if got is not None:
        want = sl.scan(body, init, xs, compiler="numpy")
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def _has_numba():
    import importlib.util

    return importlib.util.find_spec("numba") is not None
