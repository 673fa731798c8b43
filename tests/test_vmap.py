"""scanlib.vmap against its definition, the Python loop over the batch (values and gradients):
in_axes and out_axes (None, negative, pytrees), errors, grad of vmap and vmap of grad, scans
(one batched scan), vmap inside a scan body, nested vmap, every op of the op tables, the
per-example fallback loop, and jax.vmap where JAX is installed."""

from __future__ import annotations

import numpy as np
import pytest
import test_linalg
import test_ops
import test_ops_arrays
import test_ops_special

import scanlib as sl
from scanlib.ops import batching, structural
from scanlib.ops.primitive import Primitive
from scanlib.vmap import FALLBACKS


def _np(x):
    return x.numpy() if isinstance(x, sl.Tensor) else np.asarray(x)


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _loop(f, B, *args, axes=None):
    """stack([f(*args[i]) for i]) with each mapped argument sliced along its axis."""
    axes = axes or (0,) * len(args)
    outs = [f(*[a if ax is None else sl.take(a, i, axis=ax) for a, ax in zip(args, axes)])
            for i in range(B)]
    return sl.stack(outs)


def _fallbacks():
    return sum(FALLBACKS.values())


# --- against the loop ---------------------------------------------------------------------------
def test_in_axes_none_and_negative_match_the_loop(backend, rng):
    x = backend.tensor(rng.standard_normal((3, 4, 5)))  # mapped along -1: 5 examples
    W = backend.tensor(rng.standard_normal((4, 3)))  # not mapped

    def f(x, W):
        return sl.tanh(W @ x).sum(axis=0)

    out = sl.vmap(f, in_axes=(-1, None))(x, W)
    assert out.shape == (5, 4)
    _close(out, _loop(f, 5, x, W, axes=(2, None)))
    backend.check_device(out)


def test_pytrees_in_and_out(rng):
    params = {"W": sl.tensor(rng.standard_normal((6, 3, 3))),
              "b": sl.tensor(rng.standard_normal(3))}
    xs = (sl.tensor(rng.standard_normal((3, 6))), 2.0)

    def f(p, x):
        h = p["W"] @ x[0] * x[1] + p["b"]
        return {"h": h, "n": sl.sum(h * h)}, h[0]

    # in_axes a prefix tree: W mapped at 0, b shared, x[0] mapped at 1, the number shared
    out = sl.vmap(f, in_axes=({"W": 0, "b": None}, (1, None)), out_axes=({"h": 1, "n": 0}, -1))(
        params, xs)
    for i in range(6):
        want = f({"W": params["W"][i], "b": params["b"]}, (xs[0][:, i], 2.0))
        _close(out[0]["h"][:, i], want[0]["h"])
        _close(out[0]["n"][i], want[0]["n"])
        _close(out[1][i], want[1])
    assert out[0]["h"].shape == (3, 6) and out[1].shape == (6,)


def test_in_axes_as_list_and_keyword_arguments(rng):
    x, y = rng.standard_normal((4, 2)), rng.standard_normal((2, 4))
    out = sl.vmap(lambda a, b, *, c: a * b + c, in_axes=[0, 1])(x, y, c=np.ones((4, 2)))
    _close(out, x * y.T + 1)


def test_out_axes_none_for_an_unbatched_output(rng):
    x = rng.standard_normal((4, 3))
    W = sl.tensor(rng.standard_normal((3,)))
    a, b = sl.vmap(lambda x: (x * W, W * 2), out_axes=(0, None))(x)
    _close(a, x * W.numpy())
    _close(b, W.numpy() * 2)
    assert b.shape == (3,)


def test_unbatched_outputs_are_broadcast_and_axis_size(rng):
    W = sl.tensor(rng.standard_normal((3,)))
    out = sl.vmap(lambda: W * 2, axis_size=4)()
    _close(out, np.broadcast_to(W.numpy() * 2, (4, 3)))
    out = sl.vmap(lambda x: (W, 1.0), in_axes=None, axis_size=2)(np.zeros(3))
    assert out[0].shape == (2, 3) and out[1].shape == (2,)


def test_python_values_pass_through_unmapped(rng):
    x = rng.standard_normal((3, 4))
    out = sl.vmap(lambda x, n, how: x ** n if how == "pow" else x, in_axes=(0, None, None))(
        x, 3, "pow")
    _close(out, x ** 3)


# --- errors ------------------------------------------------------------------------------------
def test_mismatched_batch_sizes_name_the_paths():
    with pytest.raises(ValueError, match=r"args\[0\] has size 3 along axis 0; "
                                         r"args\[1\]\['h'\] has size 4 along axis 1"):
        sl.vmap(lambda a, b: a + b["h"][0], in_axes=(0, 1))(np.zeros((3, 2)),
                                                           {"h": np.zeros((2, 4))})
    with pytest.raises(ValueError, match="axis_size=5"):
        sl.vmap(lambda a: a, axis_size=5)(np.zeros(3))


def test_axis_out_of_range_and_scalars():
    with pytest.raises(ValueError, match=r"in_axes=2 is out of range for args\[0\], which has 2"):
        sl.vmap(lambda a: a, in_axes=2)(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"args\[0\] is 0-d"):
        sl.vmap(lambda a: a)(np.zeros(()))
    with pytest.raises(TypeError, match=r"args\[0\] is a float"):
        sl.vmap(lambda a: a)(1.0)
    with pytest.raises(ValueError, match=r"out_axes=3 is out of range for out"):
        sl.vmap(lambda a: a, out_axes=3)(np.zeros((3, 2)))


def test_structure_errors():
    with pytest.raises(ValueError, match="in_axes has 1 entries but f was called with 2"):
        sl.vmap(lambda a, b: a, in_axes=(0,))(np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="tree prefix"):
        sl.vmap(lambda a: a, in_axes=({"x": 0},))({"y": np.zeros(2)})
    with pytest.raises(TypeError, match="in_axes must be an int, None"):
        sl.vmap(lambda a: a, in_axes="0")
    with pytest.raises(ValueError, match="no argument is mapped"):
        sl.vmap(lambda a: a, in_axes=None)(np.zeros(2))
    with pytest.raises(ValueError, match="out_axes is None for out"):
        sl.vmap(lambda a: a * 2, out_axes=None)(np.zeros((2, 3)))
    with pytest.raises(NotImplementedError, match="axis_name"):
        sl.vmap(lambda a: a, axis_name="i")


# --- gradients -----------------------------------------------------------------------------------
def _mlp(W, b, x):
    return sl.sum(sl.tanh(x @ W + b) ** 2)


def test_grad_of_vmap(rng):
    W, b = rng.standard_normal((5, 3, 4)), rng.standard_normal(4)
    x = rng.standard_normal((2, 3))

    def total(W, b):
        return sl.sum(sl.vmap(_mlp, in_axes=(0, None, None))(W, b, x) * sl.arange(5.0))

    def by_loop(W, b):
        return sum(_mlp(W[i], b, x) * i for i in range(5))

    g = sl.grad(total, argnums=(0, 1))(W, b)
    want = sl.grad(by_loop, argnums=(0, 1))(W, b)
    for a, w in zip(g, want):
        _close(a, w)


def test_vmap_of_grad_gives_per_example_gradients(rng):
    W, b = sl.tensor(rng.standard_normal((3, 4))), rng.standard_normal(4)
    xs = rng.standard_normal((6, 2, 3))
    per_example = sl.vmap(sl.grad(_mlp), in_axes=(None, None, 0))(W, b, xs)
    assert per_example.shape == (6, 3, 4)
    for i in range(6):
        _close(per_example[i], sl.grad(_mlp)(W, b, xs[i]))


def test_second_order_through_vmap(rng):
    x = rng.standard_normal((3, 2))

    def f(x):
        return sl.sum(sl.vmap(lambda v: sl.sin(v) * v)(x) ** 2)

    h = sl.grad(lambda x: sl.sum(sl.grad(f)(x) * 1.5))(x)
    want = sl.grad(lambda x: sl.sum(sl.grad(lambda x: sl.sum((sl.sin(x) * x) ** 2))(x) * 1.5))(x)
    _close(h, want)


# --- scan --------------------------------------------------------------------------------------
def _rnn(W, h0, xs, reverse=False):
    def body(h, x):
        h = sl.tanh(h @ W + x)
        return h, sl.sum(h, axis=-1)
    return sl.scan(body, h0, xs, reverse=reverse)


@pytest.mark.parametrize("reverse", [False, True])
def test_vmap_of_scan_over_closed_over_weights(backend, rng, reverse):
    W = backend.tensor(rng.standard_normal((4, 3, 3)) * 0.5)
    h0 = backend.tensor(rng.standard_normal((2, 3)))
    xs = backend.tensor(rng.standard_normal((5, 2, 3)))

    steps = backend.tensor(np.arange(5.0)[:, None])

    def loss(W):  # W reaches the body through its closure
        c, ys = _rnn(W, h0, xs, reverse)
        return sl.sum(c) + sl.sum(ys * steps)

    per_set = sl.vmap(loss)(W)
    _close(per_set, _loop(loss, 4, W))
    g = sl.grad(lambda W: sl.sum(sl.vmap(loss)(W)))(W)
    _close(g, sl.stack([sl.grad(loss)(W[i]) for i in range(4)]))
    backend.check_device(g)


def test_vmap_of_scan_is_one_scan_over_batched_carries(rng):
    W, h0, xs = rng.standard_normal((4, 3, 3)), rng.standard_normal((2, 3)), rng.standard_normal(
        (5, 2, 3))
    graph = sl.make_graph(lambda W: sl.vmap(_rnn, in_axes=(0, None, None))(W, h0, xs))(W)
    scans = [e for e in graph.eqns if e.prim.name == "scan"]
    assert len(scans) == 1
    assert scans[0].params["body"].invars[0].shape == (4, 2, 3)  # the carry, batched
    assert scans[0].params["body"].invars[1].shape == (2, 3)  # x, not batched


def test_vmap_of_scan_with_batched_xs_and_init(rng):
    W = sl.tensor(rng.standard_normal((3, 3)) * 0.5)
    h0, xs = rng.standard_normal((4, 2, 3)), rng.standard_normal((5, 4, 2, 3))  # batch on axis 1
    c, ys = sl.vmap(lambda h0, xs: _rnn(W, h0, xs), in_axes=(0, 1), out_axes=(0, 1))(h0, xs)
    for i in range(4):
        wc, wys = _rnn(W, h0[i], xs[:, i])
        _close(c[i], wc)
        _close(ys[:, i], wys)


def test_carry_becomes_batched_only_through_the_body(rng):
    """init and xs are shared; only a closed-over bias is mapped: the carry must be batched
    because the body makes it so (the fixpoint), and ys of a shared counter stays shared."""
    bias = rng.standard_normal((4, 3))
    h0, xs = rng.standard_normal(3), rng.standard_normal((5, 3))

    def f(bias):
        def body(carry, x):
            h, n = carry
            return (h * 0.9 + x + bias, n + 1.0), n
        (h, n), ns = sl.scan(body, (sl.tensor(h0), sl.tensor(0.0)), xs)
        return h, ns

    graph = sl.make_graph(lambda b: sl.vmap(f)(b))(bias)
    body = next(e for e in graph.eqns if e.prim.name == "scan").params["body"]
    assert [v.shape for v in body.invars] == [(4, 3), (), (3,)]
    h, ns = sl.vmap(f)(bias)
    _close(h, _loop(lambda b: f(b)[0], 4, bias))
    _close(ns, np.broadcast_to(np.arange(5.0), (4, 5)))


def test_vmap_of_grad_of_scan(rng):
    W = sl.tensor(rng.standard_normal((3, 3)) * 0.5)
    h0, xs = rng.standard_normal((6, 2, 3)), rng.standard_normal((5, 2, 3))

    def loss(W, h0):
        c, ys = _rnn(W, h0, xs)
        return sl.sum(ys * ys) + sl.sum(c)

    g = sl.vmap(sl.grad(loss), in_axes=(None, 0))(W, h0)
    for i in range(6):
        _close(g[i], sl.grad(loss)(W, h0[i]))


def test_vmap_inside_a_scan_body(rng):
    W = sl.tensor(rng.standard_normal((4, 3, 3)) * 0.5)  # one matrix per row of the carry
    xs = sl.tensor(rng.standard_normal((5, 4, 3)))

    def by_loop(W, xs):
        h, ys = sl.zeros((4, 3)), []
        for t in range(5):
            h = sl.stack([sl.tanh(W[i] @ h[i] + xs[t, i]) for i in range(4)])
            ys.append(h[:, 0])
        return sl.sum(h) + sl.sum(sl.stack(ys) ** 2)

    def by_scan(W, xs):
        def body(h, x):  # W, an argument of by_scan, reaches the body's vmap by closure
            h = sl.vmap(lambda w, r, xr: sl.tanh(w @ r + xr))(W, h, x)
            return h, h[:, 0]

        h, ys = sl.scan(body, sl.zeros((4, 3)), xs)
        return sl.sum(h) + sl.sum(ys ** 2)

    _close(by_scan(W, xs), by_loop(W, xs))
    got, want = sl.grad(by_scan, argnums=(0, 1))(W, xs), sl.grad(by_loop, argnums=(0, 1))(W, xs)
    for a, b in zip(got, want):
        _close(a, b)


def test_nested_vmap(rng):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    pairwise = sl.vmap(sl.vmap(lambda a, b: sl.sum((a - b) ** 2), in_axes=(None, 0)),
                       in_axes=(0, None))
    out = pairwise(x, y)
    _close(out, ((x[:, None] - y[None]) ** 2).sum(-1))
    g = sl.grad(lambda x: sl.sum(pairwise(x, y) ** 2))(x)
    want = sl.grad(lambda x: sl.sum(sl.sum((x[:, None] - y[None]) ** 2, axis=-1) ** 2))(x)
    _close(g, want)


# --- jnp-style ops -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, f, shapes, in_axes", [
    ("matmul-batch-dims", lambda a, b: a @ b, [(4, 2, 3, 5), (5, 2)], (0, None)),
    ("matmul-broadcast", lambda a, b: a @ b, [(4, 3, 5), (2, 5, 6)], (0, None)),
    ("matmul-both", lambda a, b: a @ b, [(4, 3, 5), (4, 2, 5, 6)], (0, 0)),
    ("matmul-right", lambda a, b: a @ b, [(2, 3, 5), (4, 5, 6)], (None, 0)),
    ("matvec", lambda a, b: a @ b, [(4, 3, 5), (4, 5)], (0, 0)),
    ("sum-axis", lambda a: sl.sum(a, axis=(0, -1), keepdims=True), [(4, 2, 3, 5)], (0,)),
    ("max-axis", lambda a: sl.max(a, axis=1), [(4, 2, 3)], (0,)),
    ("mean-std", lambda a: sl.mean(a, axis=0) + sl.std(a), [(3, 4, 5)], (1,)),
    ("reshape", lambda a: sl.reshape(a, (-1, 2)) * 2, [(4, 3, 2)], (0,)),
    ("transpose", lambda a: a.T @ a, [(4, 3, 2)], (0,)),
    ("basic-index", lambda a: a[1:, ::2, None] + a[0, 0], [(4, 3, 4)], (0,)),
    ("array-index", lambda a: a[np.array([2, 0, 2])] * 2, [(4, 3, 2)], (0,)),
    ("array-index-2", lambda a: a[:, np.array([[1, 0]])], [(4, 3, 2)], (0,)),
    ("concatenate", lambda a, b: sl.concatenate([a, b, a], axis=-1), [(4, 2, 3), (2, 1)],
     (0, None)),
    ("stack", lambda a, b: sl.stack([a, b], axis=1), [(4, 2, 3), (2, 3)], (0, None)),
    ("split", lambda a: sl.split(a, [1], axis=0)[1] * 2, [(4, 3, 2)], (0,)),
    ("where", lambda a, b: sl.where(a > 0, a, b), [(4, 3), (3,)], (0, None)),
    ("einsum", lambda a, b: sl.einsum("ij,jk->ki", a, b), [(4, 2, 3), (3, 5)], (0, None)),
    ("cumsum", lambda a: sl.cumsum(a, axis=1), [(4, 2, 3)], (0,)),
    ("vdot", lambda a, b: sl.vdot(a, b), [(4, 2, 3), (2, 3)], (0, None)),
    ("solve", lambda a, b: sl.linalg.solve(a, b), [(4, 3, 3), (3, 2)], (0, None)),
    ("det-inv", lambda a: sl.linalg.det(a) * sl.linalg.inv(a), [(4, 3, 3)], (0,)),
    ("argmax", lambda a: sl.argmax(a) + sl.argmax(a, axis=0), [(4, 3, 2)], (0,)),
    ("sort", lambda a: sl.sort(a, axis=0), [(4, 3, 2)], (0,)),
])
def test_jnp_style_ops_match_the_loop(rng, name, f, shapes, in_axes):
    args = [rng.standard_normal(s) + (3 * np.eye(3) if s[-2:] == (3, 3) else 0) for s in shapes]
    out = sl.vmap(f, in_axes=in_axes)(*args)
    _close(out, _loop(f, 4, *[sl.tensor(a) for a in args], axes=in_axes), 1e-10)
    if np.issubdtype(out.dtype, np.floating):
        mapped = [i for i, ax in enumerate(in_axes) if ax is not None]
        ct = rng.standard_normal(out.shape)

        def loss(*a):
            return sl.vdot(sl.vmap(f, in_axes=in_axes)(*a), ct)

        def loss_loop(*a):
            return sl.vdot(_loop(f, 4, *a, axes=in_axes), ct)

        got = sl.grad(loss, argnums=tuple(mapped))(*args)
        want = sl.grad(loss_loop, argnums=tuple(mapped))(*args)
        for g, w in zip(got, want):
            _close(g, w, 1e-10)


def test_batched_index_arrays_are_one_gather(rng):
    x, idx = rng.standard_normal((4, 5, 2)), np.array([[0, 4, 4], [1, 1, 0], [3, 2, 1], [0, 0, 0]])
    before = _fallbacks()
    out = sl.vmap(lambda x, i: x[i] * 2)(x, sl.tensor(idx))
    assert _fallbacks() == before  # x[arange(B)[:, None], i]: no loop over the examples
    _close(out, np.stack([x[b][idx[b]] * 2 for b in range(4)]))
    g = sl.grad(lambda x: sl.sum(sl.vmap(lambda x, i: x[i] ** 2)(x, sl.tensor(idx))))(x)
    want = np.zeros_like(x)
    for b in range(4):
        np.add.at(want[b], idx[b], 2 * x[b][idx[b]])
    _close(g, want)


# --- the fallback loop ---------------------------------------------------------------------------
_cube_p = Primitive("test_cube", lambda x: x ** 3,
                    lambda g, out, x: (g * 3.0 * x * x,))  # no batching rule on purpose


def test_a_primitive_without_a_rule_runs_as_an_exact_loop(rng):
    x, y = rng.standard_normal((4, 3)), rng.standard_normal(3)

    def f(x, y):
        return sl.tanh(_cube_p(x) * y)

    before = FALLBACKS["test_cube"]
    out = sl.vmap(f, in_axes=(0, None))(x, y)
    assert FALLBACKS["test_cube"] == before + 1
    _close(out, np.tanh(x ** 3 * y))
    gx, gy = sl.grad(lambda x, y: sl.sum(sl.vmap(f, in_axes=(0, None))(x, y)), argnums=(0, 1))(
        x, y)
    d = 1 - np.tanh(x ** 3 * y) ** 2
    _close(gx, d * 3 * x ** 2 * y)
    _close(gy, (d * x ** 3).sum(0))
    assert sl.vmap(f, in_axes=(0, None))(np.zeros((0, 3)), y).shape == (0, 3)


def test_the_rules_the_structural_diff_declares(monkeypatch, rng):
    """The rules ops/structural.py is to declare (see the report) batch without the loop."""
    for prim, rule in [(structural.concatenate_p, batching.joining_rule),
                       (structural.stack_p, batching.joining_rule),
                       (structural.split_p, batching.axis_rule),
                       (structural.unstack_p, batching.axis_rule),
                       (structural.getitem_p, batching.getitem_rule),
                       (structural.scatter_add_p, batching.scatter_add_rule)]:
        monkeypatch.setattr(prim, "batch", rule)
    x, y = rng.standard_normal((4, 3, 2)), rng.standard_normal((1, 2))

    def f(x, y):
        z = sl.concatenate([x, y], axis=0)  # [4, 2]
        parts = sl.split(z, [1, 3], axis=0)
        w = sl.stack([parts[1][0], y[0]], axis=-1)  # [2, 2]
        return sl.sum(w * x[np.array([2, 0, 2])][:2, :2], axis=0) + z[np.array([1, 1])][0]

    before = _fallbacks()
    out = sl.vmap(f, in_axes=(0, None))(x, y)
    _close(out, _loop(f, 4, sl.tensor(x), sl.tensor(y), axes=(0, None)))
    g = sl.grad(lambda x: sl.sum(sl.vmap(f, in_axes=(0, None))(x, y) ** 2))(x)
    want = sl.grad(lambda x: sl.sum(_loop(f, 4, x, sl.tensor(y), axes=(0, None)) ** 2))(x)
    _close(g, want)
    assert _fallbacks() == before


# --- every op of the op tables --------------------------------------------------------------------
TABLE = [pytest.param(p.values[0], id=p.id)
         for m in (test_ops, test_ops_arrays, test_ops_special, test_linalg)
         for p in m.CASES if p.values[0].scan]


@pytest.mark.parametrize("c", TABLE)
def test_every_table_op_under_vmap_matches_the_loop(c):
    """Each op of the op tables on a batch of 3 examples (every input mapped), against the
    loop: values and the gradient of a random linear loss."""
    examples = [c.inputs(np.float64, seed=s) for s in range(3)]
    stacked = [sl.tensor(np.stack(a)) for a in zip(*examples)]
    fn = c.on(_NUMPY)
    want = _loop(fn, 3, *stacked)
    got = sl.vmap(fn)(*stacked)
    assert got.dtype == want.dtype and got.shape == want.shape
    _close(got, want, 1e-10)
    if not np.issubdtype(want.dtype, np.floating):
        return
    ct = np.random.default_rng(3).standard_normal(want.shape)
    n = tuple(range(len(stacked)))
    g1 = sl.grad(lambda *a: sl.vdot(sl.vmap(fn)(*a), ct), argnums=n)(*stacked)
    g2 = sl.grad(lambda *a: sl.vdot(_loop(fn, 3, *a), ct), argnums=n)(*stacked)
    for a, b in zip(g1, g2):
        _close(a, b, 1e-9)


class _Numpy:
    device = "cpu"

    @staticmethod
    def array(data, dtype=None):
        return np.asarray(data, dtype=dtype)


_NUMPY = _Numpy()


# --- against JAX ---------------------------------------------------------------------------------
def test_against_jax_vmap(rng):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x, W, h0 = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 4)), rng.standard_normal(4)

    def make(np_):
        def f(x, W, h0):
            def body(h, xt):
                h = np_.tanh(W @ h + xt)
                return h, np_.sum(h * h)
            c, ys = (jax.lax.scan if np_ is jnp else sl.scan)(body, h0, x.T)
            return {"c": c, "ys": ys}, np_.max(x, axis=0)
        return f

    axes = dict(in_axes=(0, None, None), out_axes=({"c": 1, "ys": 0}, -1))
    with jax.enable_x64(True):
        want = jax.vmap(make(jnp), **axes)(x, W, h0)
        gwant = jax.grad(lambda x: jnp.sum(jax.vmap(make(jnp), **axes)(x, W, h0)[0]["ys"]))(x)
    got = sl.vmap(make(sl), **axes)(x, W, h0)
    _close(got[0]["c"], np.asarray(want[0]["c"]), 1e-10)
    _close(got[0]["ys"], np.asarray(want[0]["ys"]), 1e-10)
    _close(got[1], np.asarray(want[1]), 1e-10)
    g = sl.grad(lambda x: sl.sum(sl.vmap(make(sl), **axes)(x, W, h0)[0]["ys"]))(x)
    _close(g, np.asarray(gwant), 1e-10)


def test_gather_of_a_shared_table_at_batched_indices(monkeypatch, rng):
    monkeypatch.setattr(structural.getitem_p, "batch", batching.getitem_rule)
    E, idx = rng.standard_normal((6, 3)), np.array([[0, 5], [2, 2], [1, 4]])
    table = sl.tensor(E)
    before = _fallbacks()

    def f(i):
        return table[i] * 2 + table[i[0], :]

    out = sl.vmap(f)(sl.tensor(idx))
    assert _fallbacks() == before
    _close(out, np.stack([E[i] * 2 + E[i[0], :] for i in idx]))
    g = sl.grad(lambda t: sl.sum(sl.vmap(lambda i: t[i] ** 2)(sl.tensor(idx))))(table)
    want = np.zeros_like(E)
    np.add.at(want, idx, 2 * E[idx])
    _close(g, want)
