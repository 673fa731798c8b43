"""The table machinery every op test file shares: input generators that keep finite
differences away from kinks, `Case`/`case`, and `table_tests(CASES)`, which makes the four
checks each op must pass: forward against NumPy in float32 and float64, gradients keep dtype
and shape (float32 agreeing with float64), the VJP against central finite differences in
float64 (to second order), and the op inside a scan body against the Python loop. Also
`fd_grad`, central differences of a scalar function, for the test files that need one.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import scanlib as sl
from scanlib.testing import check_grads


# --- input generators: keep finite differences away from kinks, ties and domain edges ----
def fd_grad(f, x, eps=1e-6):
    """Central finite differences of a scalar function of one float64 array, element by
    element (f takes and returns Tensors)."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(f(sl.tensor(x + e))) - float(f(sl.tensor(x - e)))) / (2 * eps)
    return g


def _normal(rng, shape):
    return rng.standard_normal(shape)


def _positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def _away(rng, shape):
    """|x| in [0.2, 2]: away from the kink of abs/relu at 0."""
    return rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def _distinct(rng, shape):
    """Distinct values about 0.1 apart, jittered so that two inputs do not tie either."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 - 0.05 * n).reshape(shape) + rng.uniform(-0.04, 0.04, shape)


def _clip_safe(rng, shape):
    """Values at least 0.1 away from the clip bounds -0.5 and 0.5."""
    return rng.choice([-0.9, -0.7, -0.3, 0.0, 0.3, 0.7, 0.9], shape) + rng.uniform(
        -0.05, 0.05, shape)


def _unit(rng, shape):
    """Values in (-0.9, 0.9): inside the domain of arcsin, arccos, arctanh."""
    return rng.uniform(-0.9, 0.9, shape)


N, P, A, D, C, U = _normal, _positive, _away, _distinct, _clip_safe, _unit


class Case:
    """fn(*consts, *inputs) against ref(*consts, *inputs); consts (masks) are not differentiated
    and, like the inputs, are put on the backend's device. scan=False skips the scan-body
    check (for ops whose result shape is not fixed by the input shapes)."""

    def __init__(self, id, fn, ref, args, consts=(), order=2, scan=True):
        self.id, self.fn, self.ref, self.args, self.order = id, fn, ref or fn, args, order
        self.consts, self.scan = consts, scan

    def on(self, backend):
        """fn with its consts on the backend's device bound in front."""
        consts = [backend.array(c) for c in self.consts]
        return lambda *xs: self.fn(*consts, *xs)

    def reference(self, *xs):
        return np.asarray(self.ref(*self.consts, *xs))

    def inputs(self, dtype, seed=0):
        rng = np.random.default_rng(seed)
        return [gen(rng, shape).astype(dtype) for gen, shape in self.args]


def case(id, fn, *args, ref=None, consts=(), order=2, scan=True):
    return pytest.param(Case(id, fn, ref, args, consts, order, scan), id=id)


def tol(dtype):
    return {"rtol": 2e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


def check_forward(backend, c, dtype):
    xs = c.inputs(dtype)
    want = c.reference(*xs)
    out = c.on(backend)(*[backend.tensor(x) for x in xs])
    assert isinstance(out, sl.Tensor)
    backend.check_device(out)
    assert out.shape == want.shape
    assert out.dtype == want.dtype, f"{c.id}: dtype {out.dtype}, NumPy gives {want.dtype}"
    np.testing.assert_allclose(out.numpy(), want, **tol(dtype))


def check_vjp_dtypes(backend, c):
    """Gradients keep each input's dtype and shape, and float32 agrees with float64."""
    ct = np.random.default_rng(7).standard_normal(c.reference(*c.inputs(np.float64)).shape)
    grads = {}
    for dtype in (np.float32, np.float64):
        xs = [backend.tensor(x) for x in c.inputs(dtype)]
        out, back = sl.vjp(c.on(backend), *xs)
        grads[dtype] = back(backend.tensor(ct.astype(out.dtype)))
        for x, g in zip(xs, grads[dtype]):
            assert g.dtype == x.dtype and g.shape == x.shape
            backend.check_device(g)
    for g32, g64 in zip(grads[np.float32], grads[np.float64]):
        np.testing.assert_allclose(g32.numpy(), g64.numpy(), rtol=1e-4, atol=1e-4)


def check_finite_differences(backend, c):
    # Not the inputs' seed: with seed 0 a standard-normal input would be the very direction
    # of the check, which hides a rule off by a factor in that input.
    check_grads(c.on(backend), [backend.array(x) for x in c.inputs(np.float64)], order=c.order,
                seed=101)


def check_in_scan(backend, c, T=3):
    """The op on each step's slices inside a scan body, against the same Python loop on the
    tape: ys, and the gradient of a random linear loss with respect to the stacked inputs."""
    if not c.scan:
        pytest.skip("result shape depends on values")
    steps = [c.inputs(np.float64, seed=s) for s in range(T)]
    stacked = [backend.tensor(np.stack(a)) for a in zip(*steps)]
    fn = c.on(backend)
    ct = backend.tensor(np.random.default_rng(3).standard_normal(
        (T,) + c.reference(*steps[0]).shape))

    def body(carry, xs):
        y = fn(*xs)
        return carry + sl.sum(y), y

    def by_scan(*xs):
        total, ys = sl.scan(body, backend.tensor(0.0), list(xs))
        return sl.sum(ys * ct) + total

    def by_loop(*xs):
        total, ys = backend.tensor(0.0), []
        for t in range(T):
            total, y = body(total, [x[t] for x in xs])
            ys.append(y)
        return sl.sum(sl.stack(ys) * ct) + total

    v1, g1 = sl.value_and_grad(by_scan, argnums=tuple(range(len(stacked))))(*stacked)
    v2, g2 = sl.value_and_grad(by_loop, argnums=tuple(range(len(stacked))))(*stacked)
    np.testing.assert_allclose(v1.numpy(), v2.numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def table_tests(cases):
    """The four table tests for a list of cases, to bind at a test module's top level:
    `test_forward, test_vjp_dtypes, test_fd, test_in_scan = table_tests(CASES)`."""
    params = pytest.mark.parametrize("c", cases)

    @params
    @pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
    def test_forward_matches_numpy(backend, c, dtype):
        check_forward(backend, c, dtype)

    @params
    def test_vjp_float32_matches_float64(backend, c):
        check_vjp_dtypes(backend, c)

    @params
    def test_grads_match_finite_differences(backend, c):
        check_finite_differences(backend, c)

    @params
    def test_inside_a_scan_body_matches_the_loop(backend, c):
        check_in_scan(backend, c)

    return (test_forward_matches_numpy, test_vjp_float32_matches_float64,
            test_grads_match_finite_differences, test_inside_a_scan_body_matches_the_loop)


@contextlib.contextmanager
def jax_x64(jax):
    """JAX with 64-bit types on, for this block only (other tests compare with its float32)."""
    enable = getattr(jax, "enable_x64", None)
    if enable is None:
        from jax.experimental import enable_x64 as enable
    with enable(True):
        yield


def jax_with_scanlibs_threefry():
    """JAX, skipping where its Threefry layout is not the partitionable one scanlib matches."""
    jax = pytest.importorskip("jax")
    if not jax.config.jax_threefry_partitionable:
        pytest.skip("JAX uses the non-partitionable Threefry layout; scanlib matches the other")
    return jax


def optax_loop(lib, opt, params, grads, asarray):
    """optax's training loop, word for word: `lib` is optax or scanlib.optim."""
    state = opt.init(params)
    for g in grads:
        updates, state = opt.update(sl.pytree.tree_map(asarray, g), state, params)
        params = lib.apply_updates(params, updates)
    return params, state


def stats_grid_matches_jax(jax, dist, fns, xs, params, rtol, atol):
    """scanlib.scipy.stats' `dist`.fn for each fn on a grid (xs [n] against every combination
    of `params`' values, one row each) equal to jax.scipy.stats': float64 (x64 on) to rtol,
    float32 to JAX's float32 within a few float32 roundings (XLA's exp and lgamma round
    differently in the last bits)."""
    import itertools

    from scanlib.scipy import stats as st

    jst = jax.scipy.stats
    cols = [np.array(c)[:, None] for c in zip(*itertools.product(*params))]
    for fn in fns:
        ours, theirs = getattr(getattr(st, dist), fn), getattr(getattr(jst, dist), fn)
        with np.errstate(all="ignore"):
            got = ours(xs[None, :], *cols)
            got32 = ours(xs[None, :].astype(np.float32), *[c.astype(np.float32) for c in cols])
        want32 = theirs(xs[None, :].astype(np.float32), *[c.astype(np.float32) for c in cols])
        with jax_x64(jax):
            want = np.asarray(theirs(xs[None, :], *cols))
        assert got.dtype == np.float64 and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=atol,
                                   err_msg=f"{dist}.{fn}")
        assert got32.dtype == want32.dtype == np.float32
        np.testing.assert_allclose(got32.numpy(), np.asarray(want32), rtol=2e-4, atol=1e-6,
                                   err_msg=f"{dist}.{fn} float32")


def stats_grad_matches_jax(jax, dist, fn, args, argnums, rtol, atol):
    """The gradient of sum(`dist`.fn(*args)) in `argnums` equal to jax.scipy.stats' (x64 on)."""
    import scanlib as sl
    from scanlib.scipy import stats as st

    with jax_x64(jax):
        ours = getattr(getattr(st, dist), fn)
        theirs = getattr(getattr(jax.scipy.stats, dist), fn)
        got = sl.grad(lambda *a: sl.sum(ours(*a)), argnums=argnums)(
            *[sl.tensor(np.asarray(a, float)) for a in args])
        want = jax.grad(lambda *a: theirs(*a).sum(), argnums=argnums)(
            *[np.asarray(a, float) for a in args])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=rtol, atol=atol)
