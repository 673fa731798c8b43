"""vmap of while_loop and checkpoint, and forward mode through while_loop, checkpoint and scan,
against their definitions: vmap(f)(xs) is the stack of f(x_i) over the examples (values,
dtypes and gradients, vmap of grad and grad of vmap), gradients and tangents are float64
central differences of that per-example loop, and JAX's answers where JAX is installed.

The cases are adversarial for a batched while_loop (one loop over the batch, finished lanes
frozen): lanes stopping after different numbers of steps (some after none), a predicate that
is the only batched thing, a body that gives NaN once a lane has finished, int and float32
carries, pytree carries, closed-over batched and unbatched values, loops nested in scan, in
another while_loop and under a second vmap, and in_axes/out_axes variants. For checkpoint:
saving policies, static arguments, nesting, and a checkpointed step in a scan (per-example
gradients). Forward mode through scan's variants; custom_vjp and custom_jvp rules
(deliberately not the true derivative) inside vmapped loops and checkpoints. Each vmap of a
while_loop or a checkpoint must also run as one batched program: `scanlib.vmap`'s FALLBACKS
count of equations run once per example must not grow.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scanlib as sl
from scanlib import checkpoint_policies as cp
from scanlib.scan import cache as scan_cache
from scanlib.vmap import FALLBACKS
from opcheck import fd_grad

# --- helpers ------------------------------------------------------------------------------------


def _np(x):
    return x.numpy() if isinstance(x, sl.Tensor) else np.asarray(x)


def _leaves(tree):
    return sl.pytree.flatten(tree)[0]


def _assert_same(got, want, tol=1e-12, what=""):
    """Same structure, shapes, dtypes; values within tol (NaN where the other has NaN)."""
    g, w = sl.pytree.flatten(got), sl.pytree.flatten(want)
    assert g[1] == w[1], (what, g[1], w[1])
    for i, (a, b) in enumerate(zip(g[0], w[0])):
        a, b = _np(a), _np(b)
        assert a.shape == b.shape, (what, i, a.shape, b.shape)
        assert a.dtype == b.dtype, (what, i, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"{what} leaf {i}")


def _slice(x, i, axis):
    return x if axis is None else sl.take(x, i, axis=axis)


def _per_example(f, args, in_axes=0, out_axes=0, B=None):
    """The definition: f on each example, results stacked along out_axes."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    if B is None:
        B = next(a.shape[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [f(*[_slice(a, i, ax) for a, ax in zip(args, axes)]) for i in range(B)]
    leaves = [_leaves(o) for o in outs]
    tree = sl.pytree.flatten(outs[0])[1]
    oaxes = _leaves(out_axes) if not isinstance(out_axes, int) else [out_axes] * len(leaves[0])
    stacked = []
    for j in range(len(leaves[0])):
        column = [sl.tensor(lv[j]) if not isinstance(lv[j], sl.Tensor) else lv[j]
                  for lv in leaves]
        if oaxes[j] is None:
            stacked.append(column[0])
        else:
            stacked.append(sl.stack(column, axis=oaxes[j]))
    return sl.pytree.unflatten(tree, stacked)


def _no_fallback(run):
    """run() must not run any equation once per example. FALLBACKS counts an equation when
    vmap batches it, which a batched graph cached from an earlier call (on the canonical
    graph of a loop body) does not do again: the cache is emptied first."""
    scan_cache.clear()
    before = dict(FALLBACKS)
    run()
    grown = {k: v - before.get(k, 0) for k, v in FALLBACKS.items() if v != before.get(k, 0)}
    assert not grown, f"vmap ran these equations once per example: {grown}"


# Where vmap still runs an equation once per example (strict xfails: they fail as soon as it
# no longer does, and the mark goes); none left today.
def _cases(table, xfails):
    """pytest params of table's names, the ones in xfails {name: reason} marked strict xfail."""
    return [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=xfails[k]))
            if k in xfails else k for k in table]


def _scalar(tree):
    """A scalar loss of every float leaf of tree, nonlinear so that every slope shows."""
    total = 0.0
    for x in _leaves(tree):
        x = sl.tensor(x) if not isinstance(x, sl.Tensor) else x
        if np.issubdtype(x.dtype, np.floating):
            total = total + sl.sum(sl.sin(x) * (1.0 + 0.1 * sl.arange(x.size, dtype=x.dtype)
                                                .reshape(x.shape)))
    return total


def _jax():
    return pytest.importorskip("jax")


# --- the while_loop cases -------------------------------------------------------------------------
# Each: (f, args, in_axes, out_axes); args[0] is a float64 batch (what grads are taken of).

def newton(a):
    """Cube root by Newton's method: the number of steps depends on a."""
    def cond(c):
        x, a, n = c
        return (sl.abs(x * x * x - a) > 1e-12 * a) & (n < 100)

    def body(c):
        x, a, n = c
        return x - (x * x * x - a) / (3.0 * x * x), a, n + 1

    x, _, n = sl.while_loop(cond, body, (1.0 + a / 3.0, a, sl.tensor(0)))
    return x, n


def log_down(x):
    """x -> log(x) while x > 2: a lane that has finished gives NaN if stepped again (log of a
    negative), in its value and its gradient; the per-example loop never steps it."""
    return sl.while_loop(lambda c: c > 2.0, sl.log, x)


def zero_trips(x):
    """Lanes with x >= 1 take no step at all."""
    return sl.while_loop(lambda c: c < 1.0, lambda c: c * 2.0 + 0.1, x)


def cond_only_batched(lim):
    """Only the predicate reads a mapped value: the carry starts unmapped, the body never
    touches a mapped value, and still every lane ends elsewhere."""
    n, x = sl.while_loop(lambda c: c[1] < lim, lambda c: (c[0] + 1, c[1] * 1.5 + 0.25),
                         (sl.tensor(0), sl.tensor(0.5)))
    return n, x + 0.0 * lim


def collatz(m):
    """Int carries: the Collatz sequence of m, its step count (int32) and its peak."""
    def body(c):
        k, n, peak = c
        k = sl.where(k % 2 == 0, k // 2, 3 * k + 1)
        return k, n + sl.tensor(1, dtype="int32"), sl.maximum(peak, k)

    return sl.while_loop(lambda c: c[0] > 1, body, (m, sl.tensor(0, dtype="int32"), m))


W = np.array([[0.9, -0.3], [0.2, 0.7]])


def pytree_closed(x, s):
    """A dict carry with a float32 leaf, a float64 vector and a counter; cond closes over a
    mapped s, the body over s and over an unmapped matrix W."""
    Wt = sl.tensor(W)

    def cond(c):
        return (sl.sum(c["v"] * c["v"]) > s) & (c["n"] < 50)

    def body(c):
        return {"v": sl.tanh(c["v"] @ Wt) * 0.9, "f": c["f"] * sl.tensor(1.1, dtype="float32"),
                "n": c["n"] + 1}

    out = sl.while_loop(cond, body, {"v": x, "f": sl.tensor(1.0, dtype="float32"),
                                     "n": sl.tensor(0)})
    return out["v"], out["f"], out["n"]


def counter_unbatched(x):
    """The trip count is the same for every lane (cond reads only an unmapped counter)."""
    i, y = sl.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, sl.sin(c[1]) + c[1]),
                         (sl.tensor(0), x))
    return i, y


def in_scan(x):
    """A while_loop in a scan body: each step's trip count depends on the carry."""
    def step(h, t):
        h = sl.while_loop(lambda c: c > 1.5, lambda c: c * 0.5, h * 3.0 + t)
        return h, h * t

    return sl.scan(step, x, sl.tensor([0.1, 0.2, 0.3, 0.4]))


def in_scan_shared(x):
    """A while_loop in a scan body whose stopping decision no mapped value reaches."""
    def step(h, t):
        _, h = sl.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, sl.sin(c[1]) * t + c[1]),
                             (sl.tensor(0), h))
        return h, h * t

    return sl.scan(step, x, sl.tensor([0.1, 0.2, 0.3, 0.4]))


def nested_while(x):
    """A while_loop whose body runs another while_loop; both trip counts per lane."""
    def body(c):
        v, n = c
        v = sl.while_loop(lambda u: u > 1.0, lambda u: u / 3.0, v)
        return v * 2.5 + 0.5, n + 1

    return sl.while_loop(lambda c: (c[0] < 10.0) & (c[1] < 20), body, (x, sl.tensor(0)))


TABLE = sl.tensor([0.5, -1.0, 2.0, 0.25, 3.0])


def to_the_end(n, x):
    """Reads TABLE[i] for i < n: a lane with n = len(TABLE) must not be stepped once more (its
    index would be past the end) while the others run."""
    def body(c):
        i, acc = c
        return i + 1, acc * x + TABLE[i]

    return sl.while_loop(lambda c: c[0] < n, body, (sl.tensor(0), x))[1]


def scan_in_body(x):
    """The lanes' body runs a scan (its own batching rule at each step)."""
    t = sl.tensor([0.2, 0.5, 0.9])
    return sl.while_loop(lambda c: c < 10.0,
                         lambda c: sl.scan(lambda d, u: (d * (1.0 + u) + 0.1, None), c, t)[0], x)


def checkpoint_in_body(x):
    return sl.while_loop(lambda c: c < 10.0,
                         lambda c: sl.checkpoint(lambda u: u * 1.7 + sl.sin(u) ** 2)(c), x)


def shared_in_body(x):
    """Lanes stopping apart around an inner loop whose decision they share."""
    def body(c):
        return sl.while_loop(lambda d: d[0] < 2, lambda d: (d[0] + 1, d[1] * 1.3 + 0.05),
                             (sl.tensor(0), c))[1]

    return sl.while_loop(lambda c: c < 10.0, body, x)


def in_checkpoint(x):
    return sl.checkpoint(lambda v: sl.while_loop(lambda c: c > 2.0, sl.sqrt, v) * v)(x)


def weak_init(x):
    """Python numbers in the initial carry (weakly typed under a trace)."""
    return sl.while_loop(lambda c: c[0] < x * 2.0, lambda c: (c[0] + 1.0, c[1] * 2, c[2] * x),
                         (0.5, 1, 1.0))


A = sl.tensor(np.logspace(-2, 4, 7))
LOGS = sl.tensor([1.5, 3.0, 10.0, 1e3, 1e10, 2.5, 1e30])
ZEROS = sl.tensor([0.01, 1.2, 2.0, 0.3, 5.0])
LIMS = sl.tensor([0.1, 0.6, 1.2, 7.0, 100.0, 1e4])
X2 = sl.tensor(np.array([[1.0, 0.5], [0.2, 0.1], [2.0, -1.0], [0.05, 0.02], [3.0, 3.0]]))
S = sl.tensor([0.5, 0.01, 0.1, 1e-4, 2.0])

WHILE_CASES = {
    "newton": (newton, (A,), 0, 0),
    "log_down": (log_down, (LOGS,), 0, 0),
    "zero_trips": (zero_trips, (ZEROS,), 0, 0),
    "zero_trips_every_lane": (zero_trips, (sl.tensor([1.1, 2.0, 3.0]),), 0, 0),
    "cond_only_batched": (cond_only_batched, (LIMS,), 0, 0),
    "pytree_closed": (pytree_closed, (X2, S), 0, 0),
    "pytree_closed_s_unmapped": (pytree_closed, (X2, sl.tensor(0.07)), (0, None), 0),
    "in_axes_1": (pytree_closed, (sl.transpose(X2, (1, 0)), S), (1, 0), 0),
    "in_axes_neg_out_axes_1": (pytree_closed, (sl.transpose(X2, (1, 0)), S), (-1, 0),
                               (1, 0, 0)),
    "counter_unbatched": (counter_unbatched, (ZEROS,), 0, 0),
    "in_scan": (in_scan, (ZEROS,), 0, 0),
    "in_scan_shared": (in_scan_shared, (ZEROS,), 0, 0),
    "nested_while": (nested_while, (sl.tensor([0.1, 3.3, 9.0, 30.0, 100.0]),), 0, 0),
    "scan_in_body": (scan_in_body, (sl.tensor([0.1, 0.5, 2.0, 7.0]),), 0, 0),
    "checkpoint_in_body": (checkpoint_in_body, (sl.tensor([0.1, 0.5, 2.0, 7.0]),), 0, 0),
    "shared_in_body": (shared_in_body, (sl.tensor([0.1, 0.5, 2.0, 7.0]),), 0, 0),
    "in_checkpoint": (in_checkpoint, (sl.tensor([1.0, 5.0, 100.0, 1e6]),), 0, 0),
    "weak_init": (weak_init, (sl.tensor([0.2, 1.0, 3.3]),), 0, 0),
}
N_LANES = sl.tensor(np.array([5, 0, 2, 5, 3], np.int64))
X5 = sl.tensor([0.5, 1.5, -0.7, 1.1, 0.3])
# args[0] is an int here, so the float argument moves first
WHILE_CASES["to_the_end"] = (lambda x, n: to_the_end(n, x), (X5, N_LANES), 0, 0)
INT_CASES = {"collatz": (collatz, (sl.tensor(np.array([1, 2, 6, 7, 27, 97], np.int64)),), 0, 0)}


# --- the checkpoint cases -----------------------------------------------------------------------
M = sl.tensor(np.array([[0.6, -0.4, 0.1], [0.3, 0.8, -0.5], [-0.2, 0.1, 0.9]]))


def _cell(h, x):
    return sl.tanh(h @ M + x)


def ck_plain(x):
    return sl.checkpoint(lambda h: _cell(_cell(h, 0.1), h))(x)


def ck_closed(x, s):
    """Closes over a mapped s and an unmapped M."""
    return sl.checkpoint(lambda h: _cell(h, s) * s)(x)


def _ck_policy(policy):
    def f(x):
        def g(h):
            h1 = sl.checkpoint_name(_cell(h, 0.2), "h1")
            return sl.sin(h1 @ M) * h

        return sl.checkpoint(g, policy=policy)(x)

    f.__name__ = f"ck_policy_{getattr(policy, '__name__', 'names')}"
    return f


def ck_static(x):
    def g(h, power, how):
        return (sl.tanh(h) ** power) if how == "tanh" else h

    return sl.checkpoint(g, static_argnums=(1, 2))(x, 3, "tanh")


def ck_nested(x):
    inner = sl.checkpoint(lambda h: _cell(h, 0.3))
    return sl.checkpoint(lambda h: inner(inner(h)) + h)(x)


def ck_number_and_int(x):
    """A Python number argument, an int output next to a float one."""
    out = sl.checkpoint(lambda h, k: (h * k, sl.argmax(h)))(x, 2.5)
    return out[0], out[1]


def ck_scan(xs):
    """A checkpointed RNN step scanned over one example's sequence."""
    def step(h, x):
        h = _cell(h, x)
        return h, h

    h, ys = sl.scan(sl.checkpoint(step), sl.zeros(3), xs)
    return h, ys


X3 = sl.tensor(np.random.default_rng(0).standard_normal((4, 3)))
SEQ = sl.tensor(np.random.default_rng(1).standard_normal((4, 5, 3)))

CHECKPOINT_CASES = {
    "plain": (ck_plain, (X3,), 0, 0),
    "closed": (ck_closed, (X3, sl.tensor([0.1, -0.2, 0.3, 0.5])), 0, 0),
    "closed_unmapped_x": (ck_closed, (X3[0], sl.tensor([0.1, -0.2, 0.3, 0.5])), (None, 0), 0),
    "static": (ck_static, (X3,), 0, 0),
    "nested": (ck_nested, (X3,), 0, 0),
    "number_and_int": (ck_number_and_int, (X3,), 0, 0),
    "scan": (ck_scan, (SEQ,), 0, 0),
    "scan_out_axes": (ck_scan, (SEQ,), 0, (0, 1)),
    "in_axes_1": (ck_plain, (sl.transpose(X3, (1, 0)),), 1, 0),
}
for _p in (cp.dots_saveable, cp.nothing_saveable, cp.everything_saveable,
           cp.save_only_these_names("h1"), cp.dots_with_no_batch_dims_saveable):
    _f = _ck_policy(_p)
    CHECKPOINT_CASES[_f.__name__] = (_f, (X3,), 0, 0)

FLOAT_CASES = {**{f"while-{k}": v for k, v in WHILE_CASES.items()},
               **{f"checkpoint-{k}": v for k, v in CHECKPOINT_CASES.items()}}
ALL_CASES = {**FLOAT_CASES, **{f"while-{k}": v for k, v in INT_CASES.items()}}
# cases whose every output depends on args[0], so out_axes None is not involved
GRAD_CASES = {k: v for k, v in FLOAT_CASES.items()
              if k != "checkpoint-closed_unmapped_x"}


# --- vmap against the per-example loop ------------------------------------------------------------
@pytest.mark.parametrize("name", list(ALL_CASES))
def test_vmap_is_the_stack_of_examples(name):
    f, args, in_axes, out_axes = ALL_CASES[name]
    got = sl.vmap(f, in_axes=in_axes, out_axes=out_axes)(*args)
    _assert_same(got, _per_example(f, args, in_axes, out_axes), what=name)


@pytest.mark.parametrize("name", list(ALL_CASES))
def test_vmap_runs_one_batched_program(name):
    f, args, in_axes, out_axes = ALL_CASES[name]
    _no_fallback(lambda: sl.vmap(f, in_axes=in_axes, out_axes=out_axes)(*args))


def _loss_of(f, args, in_axes):
    """Scalar loss of args[0] alone (the others fixed), per example and batched."""
    rest = args[1:]
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)

    def one(x, *r):
        return _scalar(f(x, *r))

    return one, rest, axes


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_vmap_of_grad_is_the_stack_of_grads(name):
    f, args, in_axes, _ = GRAD_CASES[name]
    one, rest, axes = _loss_of(f, args, in_axes)
    got = sl.vmap(sl.grad(one), in_axes=axes)(args[0], *rest)
    want = _per_example(sl.grad(one), args, axes)
    _assert_same(got, want, tol=1e-11, what=name)
    assert np.all(np.isfinite(_np(got))), (name, got)


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_grad_of_vmap_is_the_stack_of_grads(name):
    f, args, in_axes, _ = GRAD_CASES[name]
    one, rest, axes = _loss_of(f, args, in_axes)

    def total(x):
        return sl.sum(sl.vmap(one, in_axes=axes)(x, *rest))

    got = sl.grad(total)(args[0])
    want = sl.sum(_per_example(sl.grad(one), args, axes), axis=0) if axes[0] is None else \
        _per_example(sl.grad(one), args, axes, out_axes=axes[0])
    _assert_same(got, want, tol=1e-11, what=name)


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_per_example_grads_are_central_differences(name):
    # the reference itself, checked: the per-example gradient against float64 central
    # differences on the first two examples (trip counts are piecewise constant; the cases
    # keep every lane away from a boundary at this step size)
    f, args, in_axes, _ = GRAD_CASES[name]
    one, rest, axes = _loss_of(f, args, in_axes)
    B = next(a.shape[ax] for a, ax in zip(args, axes) if ax is not None)
    for i in range(min(B, 2)):
        sliced = [_slice(a, i, ax) for a, ax in zip(args, axes)]
        g = sl.grad(one)(*sliced)
        fd = fd_grad(lambda x, r=sliced[1:]: one(x, *r), sliced[0])
        np.testing.assert_allclose(_np(g), fd, rtol=1e-6, atol=1e-8, err_msg=f"{name} lane {i}")


@pytest.mark.parametrize("name", _cases(GRAD_CASES, {}))
def test_vmap_of_grad_runs_one_batched_program(name):
    f, args, in_axes, _ = GRAD_CASES[name]
    one, rest, axes = _loss_of(f, args, in_axes)
    _no_fallback(lambda: sl.vmap(sl.grad(one), in_axes=axes)(args[0], *rest))


# --- the corners one at a time --------------------------------------------------------------------
def test_a_lane_that_finished_is_never_stepped_again():
    # log of a finished lane's value would be NaN; a batched loop that steps every lane and
    # selects must not let that NaN into the values or (through the select's other branch)
    # into the gradient
    x = sl.vmap(log_down)(LOGS)
    assert np.all(np.isfinite(_np(x)))
    for g in (sl.vmap(sl.grad(log_down))(LOGS),
              sl.grad(lambda v: sl.sum(sl.vmap(log_down)(v)))(LOGS)):
        assert np.all(np.isfinite(_np(g))), g
        _assert_same(g, sl.stack([sl.grad(log_down)(v) for v in LOGS]))


def test_int_carries_keep_their_dtypes_and_counts():
    m = INT_CASES["collatz"][1][0]
    k, n, peak = sl.vmap(collatz)(m)
    assert (k.dtype, n.dtype, peak.dtype) == (np.int64, np.int32, np.int64)
    assert _np(n).tolist() == [0, 1, 8, 16, 111, 118]
    assert _np(peak).tolist() == [1, 2, 16, 52, 9232, 9232]


def test_a_float32_carry_stays_float32():
    v, f, n = sl.vmap(pytree_closed)(X2, S)
    assert f.dtype == np.float32 and v.dtype == np.float64 and n.dtype == np.int64


def bool_carry(x, lim):
    """A bool carry that says when to stop."""
    return sl.while_loop(lambda c: ~c[1], lambda c: (c[0] * 2.0, c[0] * 2.0 > lim),
                         (x, x > lim))


def test_a_bool_carry():
    xs, lims = sl.tensor([0.1, 1.0, 3.0]), sl.tensor([1.0, 0.5, 20.0])
    _assert_same(sl.vmap(bool_carry)(xs, lims), _per_example(bool_carry, (xs, lims)))

    def first(x, lim):
        return bool_carry(x, lim)[0]

    per = _per_example(sl.grad(first), (xs, lims))
    _assert_same(sl.vmap(sl.grad(first))(xs, lims), per)
    _assert_same(sl.grad(lambda x: sl.sum(sl.vmap(first)(x, lims)))(xs), per)


def _draw_until(key):
    """A PRNG key in the carry: draw until a uniform exceeds 0.8 (lanes stop apart)."""
    def body(c):
        k, u, n = c
        k, sub = sl.random.split(k)
        return k, sl.random.uniform(sub, ()), n + 1

    return sl.while_loop(lambda c: c[1] < 0.8, body, (key, sl.tensor(0.0), sl.tensor(0)))


def test_a_prng_key_in_the_carry():
    keys = sl.random.split(sl.random.PRNGKey(0), 6)
    got = sl.vmap(_draw_until)(keys)
    _assert_same(got, _per_example(_draw_until, (keys,)), tol=0)
    assert len(set(_np(got[2]).tolist())) > 1  # the lanes did stop apart


# Other primitives scanlib defines, batched (they ran once per example before their rules)
@pytest.mark.parametrize("what", ["prng", "scatter_set", "getitem"])
def test_other_primitives_run_batched(what):
    if what == "getitem":
        _no_fallback(lambda: sl.vmap(lambda t, i: t[i])(
            sl.tensor(np.arange(15.0).reshape(3, 5)), sl.tensor(np.array([0, 2, 4]))))
    elif what == "prng":
        _no_fallback(lambda: sl.vmap(_draw_until)(sl.random.split(sl.random.PRNGKey(0), 6)))
    else:
        _no_fallback(lambda: sl.vmap(lambda x, i: x.at[i].set(5.0))(
            X3, sl.tensor(np.array([0, 2, 1, 1]))))


@pytest.mark.parametrize("kind", ["shared", "lanes", "checkpoint"])
def test_a_second_call_sees_new_closed_over_values(kind):
    # the batched graphs are traced per call: a closed-over value changed between two calls
    # of the same function (same shapes) must be the one used
    xs = sl.tensor([0.1, 0.5, 2.0, 7.0])
    for w in (1.5, 2.5):
        W = sl.tensor(w)

        def f(x, W=W):
            if kind == "shared":
                return sl.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * W + 0.1),
                                     (sl.tensor(0), x))[1]
            if kind == "lanes":
                return sl.while_loop(lambda c: c < 10.0, lambda c: c * W + 0.1, x)
            return sl.checkpoint(lambda u: sl.sin(u * W) + u)(x)

        _assert_same(sl.vmap(f)(xs), _per_example(f, (xs,)))
        _assert_same(sl.vmap(sl.grad(f))(xs), _per_example(sl.grad(f), (xs,)), tol=1e-11)


def test_nothing_mapped_with_axis_size():
    def f():
        return sl.while_loop(lambda c: c < 5.0, lambda c: c + 1.0, sl.tensor(0.0))

    _assert_same(sl.vmap(f, axis_size=3)(), sl.tensor([5.0, 5.0, 5.0]))


def test_zero_lanes():
    empty = sl.zeros((0,))
    x, n = sl.vmap(newton)(empty)
    assert x.shape == (0,) and n.shape == (0,) and x.dtype == np.float64


def test_vmap_of_vmap_of_while():
    a = sl.tensor(np.logspace(-2, 3, 6).reshape(2, 3))
    got = sl.vmap(sl.vmap(newton))(a)
    want = [[newton(a[i, j]) for j in range(3)] for i in range(2)]
    _assert_same(got[0], sl.tensor([[float(w[0]) for w in row] for row in want]))
    assert _np(got[1]).tolist() == [[int(w[1]) for w in row] for row in want]


def test_vmap_of_vmap_of_while_runs_one_batched_program():
    a = sl.tensor(np.logspace(-2, 3, 6).reshape(2, 3))
    _no_fallback(lambda: sl.vmap(sl.vmap(newton))(a))


def test_max_steps_counts_per_lane():
    # max_steps bounds each lane's loop, not the batch's total: 3 lanes of 4 steps each pass
    # under max_steps=5; a lane needing more raises as its own loop does
    def f(x, max_steps):
        return sl.while_loop(lambda c: c < x, lambda c: c + 1.0, sl.tensor(0.0),
                             max_steps=max_steps)

    _assert_same(sl.vmap(lambda x: f(x, 5))(sl.tensor([4.0, 3.5, 4.0])),
                 sl.tensor([4.0, 4.0, 4.0]))
    with pytest.raises(RuntimeError):
        f(sl.tensor(9.0), 5)
    for wrap in (lambda g: g, sl.jit):  # and inside a trace
        with pytest.raises(RuntimeError, match="max_steps=5"):
            wrap(sl.vmap(lambda x: f(x, 5)))(sl.tensor([1.0, 9.0]))
    _assert_same(sl.jit(sl.vmap(lambda x: f(x, 5)))(sl.tensor([4.0, 3.5, 4.0])),
                 sl.tensor([4.0, 4.0, 4.0]))


def test_vmap_inside_a_while_body():
    # the other way round: a vmap inside the loop's body, over a closed-over batch
    xs = sl.tensor([0.5, 1.5, 2.5])

    def f(s):
        return sl.while_loop(lambda c: sl.sum(c) < s,
                             lambda c: c + sl.vmap(lambda x: x * x)(xs), sl.zeros(3))

    _assert_same(f(sl.tensor(20.0)), sl.tensor([0.75, 6.75, 18.75]))  # 3 steps of x * x
    _assert_same(sl.vmap(f)(sl.tensor([1.0, 20.0])), sl.stack([f(sl.tensor(1.0)),
                                                              f(sl.tensor(20.0))]))


def test_a_counter_no_mapped_value_reaches_stays_unmapped():
    # as in JAX: the predicate reads only the unmapped counter, so the counter is the same in
    # every example and out_axes=None may return it once
    i, y = sl.vmap(counter_unbatched, out_axes=(None, 0))(ZEROS)
    assert i.shape == () and int(i) == 4
    _assert_same(y, sl.stack([counter_unbatched(x)[1] for x in ZEROS]))


# --- gradients with respect to unmapped values, higher orders, jit --------------------------------
def _while_param(w, x):
    """w unmapped: the per-example gradients with respect to it, and their sum."""
    return sl.while_loop(lambda c: c[1] < 20.0, lambda c: (c[0] + 1, c[1] * w + x),
                         (sl.tensor(0), x))[1]


def _ck_param(w, x):
    def step(h, t):
        h = sl.tanh(h * w + t * x)
        return h, h

    return sl.sum(sl.sin(sl.scan(sl.checkpoint(step), x, sl.tensor([0.2, -0.4, 0.9]))[1]))


PARAM_CASES = {"while": (_while_param, sl.tensor(1.3), sl.tensor([0.5, 2.0, 7.0, 19.0, 30.0])),
               "checkpoint": (_ck_param, sl.tensor(0.8), X5)}


@pytest.mark.parametrize("name", list(PARAM_CASES))
def test_gradients_with_respect_to_an_unmapped_argument(name):
    f, w, xs = PARAM_CASES[name]
    per = sl.stack([sl.grad(f)(w, x) for x in xs])
    _assert_same(sl.vmap(sl.grad(f), in_axes=(None, 0))(w, xs), per, tol=1e-11)
    _assert_same(sl.grad(lambda w: sl.sum(sl.vmap(f, in_axes=(None, 0))(w, xs)))(w),
                 sl.sum(per), tol=1e-11)
    fd = [(float(f(w + 1e-6, x)) - float(f(w - 1e-6, x))) / 2e-6 for x in xs]
    np.testing.assert_allclose(_np(per), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", list(PARAM_CASES))
def test_gradients_with_respect_to_an_unmapped_argument_run_batched(name):
    f, w, xs = PARAM_CASES[name]
    _no_fallback(lambda: sl.vmap(sl.grad(f), in_axes=(None, 0))(w, xs))
    _no_fallback(lambda: sl.grad(lambda w: sl.sum(sl.vmap(f, in_axes=(None, 0))(w, xs)))(w))


def test_second_derivatives_through_lanes_that_stop_apart():
    def root(a):
        return newton(a)[0]

    got = sl.vmap(sl.grad(sl.grad(root)))(A)
    _assert_same(got, sl.stack([sl.grad(sl.grad(root))(a) for a in A]), tol=1e-10)
    np.testing.assert_allclose(_np(got), -2.0 / 9.0 * _np(A) ** (-5.0 / 3.0), rtol=1e-8)
    H = sl.hessian(lambda a: sl.sum(sl.vmap(root)(a)))(A)
    np.testing.assert_allclose(_np(H), np.diag(_np(got)), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", ["while-newton", "while-log_down", "while-cond_only_batched",
                                  "while-pytree_closed", "checkpoint-closed", "checkpoint-scan"])
def test_jit_of_vmap(name):
    f, args, in_axes, out_axes = FLOAT_CASES[name]
    got = sl.jit(sl.vmap(f, in_axes=in_axes, out_axes=out_axes))(*args)
    _assert_same(got, _per_example(f, args, in_axes, out_axes), what=name)


def _while_in_scan_body(xs):
    def step(c, t):
        return c, sl.vmap(lambda x: sl.while_loop(lambda u: u < t, lambda u: u * 2.0, x))(c)

    return sl.scan(step, xs, sl.tensor([1.0, 4.0]))[1]


def test_vmap_in_a_scan_body():
    xs = sl.tensor([0.1, 1.0, 3.0])
    _assert_same(_while_in_scan_body(xs), sl.tensor([[1.6, 1.0, 3.0], [6.4, 4.0, 6.0]]))


@pytest.mark.parametrize("where", ["jit", "scan body"])
def test_vmap_inside_a_trace_runs_one_batched_program(where):
    xs = sl.tensor([0.1, 1.0, 3.0])
    if where == "jit":
        _no_fallback(lambda: sl.jit(sl.vmap(log_down))(LOGS))
    else:
        _no_fallback(lambda: _while_in_scan_body(xs))


COMPOSED = {
    "grad(jit(vmap))": lambda x: sl.grad(lambda x: sl.sum(sl.jit(sl.vmap(log_down))(x)))(x),
    "jit(grad(vmap))": lambda x: sl.jit(sl.grad(lambda x: sl.sum(sl.vmap(log_down)(x))))(x),
    "jit(vmap(grad))": lambda x: sl.jit(sl.vmap(sl.grad(log_down)))(x),
    "vmap(jit(grad))": lambda x: sl.vmap(sl.jit(sl.grad(log_down)))(x),
    "grad(checkpoint(vmap))": lambda x: sl.grad(
        lambda x: sl.sum(sl.checkpoint(sl.vmap(log_down))(x)))(x),
    "grad(scan(vmap))": lambda x: sl.grad(lambda x: sl.sum(sl.scan(
        lambda c, t: (sl.vmap(log_down)(c * t), None), x, sl.tensor([1.0, 3.0]))[0]))(x),
}


@pytest.mark.filterwarnings("ignore::scanlib.JitFallbackWarning")
@pytest.mark.parametrize("name", list(COMPOSED))
def test_lanes_composed_with_jit_checkpoint_and_scan(name):
    # the lanes' loop and its derivative inside traces, against per-example gradients
    if name == "grad(scan(vmap))":
        def one(x):
            return sl.scan(lambda c, t: (log_down(c * t), None), x, sl.tensor([1.0, 3.0]))[0]
    else:
        one = log_down
    want = _per_example(sl.grad(one), (LOGS,))
    got = COMPOSED[name](LOGS)
    _assert_same(got, want, tol=1e-11)
    _no_fallback(lambda: COMPOSED[name](LOGS))


def _unread_ck(x):
    return sl.checkpoint(lambda u: (sl.sqrt(u), u * 2.0))(x)[1]


def _unread_shared(x):
    return sl.while_loop(lambda c: c[2] < 3, lambda c: (sl.sqrt(c[0]), c[1] * 2.0, c[2] + 1),
                         (x, x, sl.tensor(0)))[1]


def _unread_lanes(x):
    return sl.while_loop(lambda c: c[2] < x + 1.0, lambda c: (sl.sqrt(c[0]), c[1] * 2.0,
                                                             c[2] + 1.0),
                         (x, x, sl.tensor(0.0)))[1]


def _unread_scan(x):
    return sl.scan(lambda c, t: ((sl.sqrt(c[0]), c[1] * t), None), (x, x),
                   sl.tensor([2.0, 3.0]))[0][1]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f", [_unread_ck, _unread_shared, _unread_lanes, _unread_scan])
def test_an_output_nobody_reads_gets_no_cotangent_under_vmap(f):
    # sqrt's slope is infinite at 0: a zero cotangent for the unread output would make NaN
    xs = sl.tensor([0.0, 1.0, 4.0])
    per = _per_example(sl.grad(f), (xs,))
    assert np.all(np.isfinite(_np(per)))
    _assert_same(sl.vmap(sl.grad(f))(xs), per)
    _assert_same(sl.grad(lambda x: sl.sum(sl.vmap(f)(x)))(xs), per)
    _assert_same(sl.jvp(sl.vmap(f), (xs,), (sl.ones(3),))[1], per)
    _assert_same(sl.vmap(lambda x: sl.jvp(f, (x,), (sl.tensor(1.0),))[1])(xs), per)


# --- custom rules inside vmapped loops and checkpoints ------------------------------------------
def _custom_rules():
    """A straight-through round (bwd 2 g, not the true 0) and a cube whose declared tangent is
    5 t (not 3 x^2 t): a batched replay that differentiated the primal would show."""
    st = sl.custom_vjp(lambda x: sl.round(x))
    st.defvjp(lambda x: (sl.round(x), None), lambda res, g: (g * 2.0,))
    cj = sl.custom_jvp(lambda x: x ** 3)
    cj.defjvp(lambda primals, tangents: (primals[0] ** 3, 5.0 * tangents[0]))
    return st, cj


def _custom_case(name):
    st, cj = _custom_rules()
    return {
        "vjp-lanes": lambda x: sl.while_loop(lambda c: c[0] < x * 3.0, lambda c: (
            c[0] + 1.0, c[1] * 0.5 + st(c[1] * x)), (sl.tensor(0.0), x))[1],
        "vjp-shared": lambda x: sl.while_loop(lambda c: c[0] < 3.0, lambda c: (
            c[0] + 1.0, c[1] * 0.5 + st(c[1] * x)), (sl.tensor(0.0), x))[1],
        "vjp-checkpoint": lambda x: sl.checkpoint(lambda u: st(u * 3.0) * u)(x),
        "jvp-lanes": lambda x: sl.while_loop(lambda c: c[0] < x * 3.0, lambda c: (
            c[0] + 1.0, c[1] * 0.5 + cj(c[1] * 0.5)), (sl.tensor(0.0), x))[1],
        "jvp-checkpoint": lambda x: sl.checkpoint(lambda u: cj(u) * u)(x),
    }[name]


@pytest.mark.parametrize("name", ["vjp-lanes", "vjp-shared", "vjp-checkpoint", "jvp-lanes",
                                  "jvp-checkpoint"])
def test_custom_rules_inside_vmapped_loops_and_checkpoints(name):
    f, xs = _custom_case(name), sl.tensor([0.3, 1.7, 2.2, 0.9])
    _assert_same(sl.vmap(f)(xs), _per_example(f, (xs,)))
    per = _per_example(sl.grad(f), (xs,))
    _assert_same(sl.vmap(sl.grad(f))(xs), per, tol=1e-11)
    _assert_same(sl.grad(lambda x: sl.sum(sl.vmap(f)(x)))(xs), per, tol=1e-11)
    if name.startswith("jvp"):
        def tangent(x):
            return sl.jvp(f, (x,), (sl.ones_like(x),))[1]

        _assert_same(sl.vmap(tangent)(xs), _per_example(tangent, (xs,)), tol=1e-11)
        _assert_same(sl.jvp(sl.vmap(f), (xs,), (sl.ones(4),))[1], _per_example(tangent, (xs,)),
                     tol=1e-11)
    _no_fallback(lambda: sl.vmap(sl.grad(f))(xs))


# --- forward mode through while_loop, checkpoint and scan -----------------------------------------
def _each(g):
    """g of a scalar applied to each element of a 3-vector (one while_loop per element)."""
    return lambda x: sl.stack([g(x[i]) for i in range(3)])


FWD_CASES = {
    "while-newton": _each(lambda a: newton(a)[0]),
    "while-log_down": _each(log_down),
    "while-zero_trips": _each(zero_trips),
    "while-nested": _each(lambda x: nested_while(x)[0]),
    "while-in_scan": _each(lambda x: in_scan(x)[1]),
    "while-shared": lambda x: counter_unbatched(x)[1],
    "while-vector": lambda x: sl.while_loop(lambda c: sl.sum(c * c) < 50.0,
                                            lambda c: c * 1.3 + sl.sin(c), x),
    "checkpoint-plain": lambda x: ck_plain(x),
    "checkpoint-policy": _ck_policy(cp.dots_saveable),
    "checkpoint-nested": ck_nested,
    "scan": lambda x: sl.scan(lambda c, t: (sl.sin(c) * t + c, c * c), x,
                              sl.tensor([0.3, -0.7, 1.1]))[1],
}
FWD_POINTS = {
    "while-newton": sl.tensor([2.0, 30.0, 0.5]),
    "while-log_down": sl.tensor([1.5, 1e3, 1e10]),
    "while-zero_trips": sl.tensor([0.3, 2.0, 0.01]),
    "while-nested": sl.tensor([0.1, 3.3, 30.0]),
    "while-in_scan": sl.tensor([0.2, 1.0, 2.0]),
}


def _point(name):
    return FWD_POINTS.get(name, sl.tensor([0.3, -0.5, 0.8]))


@pytest.mark.parametrize("name", list(FWD_CASES))
def test_jacfwd_and_jvp_are_central_differences(name):
    f, x = FWD_CASES[name], _point(name)
    J = _np(sl.jacfwd(f)(x))
    cols = []
    for j in range(x.size):
        e = np.zeros(x.shape)
        e[j] = 1e-6
        cols.append((_np(f(sl.tensor(_np(x) + e))) - _np(f(sl.tensor(_np(x) - e)))) / 2e-6)
    fd = np.stack(cols, axis=-1)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(J, _np(sl.jacrev(f)(x)), rtol=1e-10, atol=1e-12)
    v = sl.tensor([0.7, -1.3, 0.4])
    out, tan = sl.jvp(f, (x,), (v,))
    _assert_same(out, f(x))
    np.testing.assert_allclose(_np(tan), J @ _np(v), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(FWD_CASES))
def test_vmap_of_jvp_and_jvp_of_vmap(name):
    f, x = FWD_CASES[name], _point(name)
    xs = sl.stack([x, x * 1.1, x * 0.9])
    vs = sl.tensor(np.random.default_rng(3).standard_normal((3, 3)))

    def jvp1(x, v):
        return sl.jvp(f, (x,), (v,))

    _assert_same(sl.vmap(jvp1)(xs, vs), _per_example(jvp1, (xs, vs)), tol=1e-11)
    out, tan = sl.jvp(sl.vmap(f), (xs,), (vs,))
    _assert_same((out, tan), _per_example(jvp1, (xs, vs)), tol=1e-11)


@pytest.mark.parametrize("name", list(FWD_CASES))
def test_forward_mode_of_vmap_runs_one_batched_program(name):
    f, x = FWD_CASES[name], _point(name)
    xs = sl.stack([x, x * 1.1, x * 0.9])
    vs = sl.tensor(np.random.default_rng(3).standard_normal((3, 3)))
    _no_fallback(lambda: sl.jvp(sl.vmap(f), (xs,), (vs,)))
    _no_fallback(lambda: sl.vmap(lambda x, v: sl.jvp(f, (x,), (v,)))(xs, vs))
    _no_fallback(lambda: sl.vmap(sl.jacfwd(f))(xs))


_T3 = sl.tensor([0.3, -0.7, 1.1])
SCAN_JVP_CASES = {
    "reverse": lambda x: sl.scan(lambda c, t: (sl.sin(c) * t + c, c * c), x, _T3,
                                 reverse=True)[1],
    "no_xs": lambda x: sl.scan(lambda c, _: (sl.sin(c) + c * 0.5, c), x, None, length=4)[1],
    "ys_none": lambda x: sl.scan(lambda c, t: (sl.sin(c) * t + c, None), x, _T3)[0],
    "int_and_float_carry": lambda x: sl.scan(
        lambda c, t: ((c[0] + 1, c[1] * sl.cos(c[1] + c[0])), c[1] * c[0]),
        (sl.tensor(0), x), None, length=3)[1],
    "closed_over_x": lambda x: sl.scan(lambda c, i: (c + x[i] * c, c), sl.ones(3),
                                       sl.arange(3))[1],
    "buffer_update": lambda x: sl.scan(
        lambda c, i: ((c[0].at[i].set(sl.sin(c[1][i])), c[1] * 1.5), c[0]),
        (sl.zeros(3), x), sl.arange(3))[1],
    "nested": lambda x: sl.scan(
        lambda c, t: (sl.scan(lambda d, u: (d * u + sl.sin(d), d), c,
                              sl.tensor([0.5, 1.5]))[0] * t, c), x, _T3)[1],
    "checkpoint_segments": lambda x: sl.scan(lambda c, t: (sl.sin(c) * t + c, c * c), x,
                                             sl.tensor([0.3, -0.7, 1.1, 0.2, 0.9]),
                                             checkpoint=2)[1],
    "unroll": lambda x: sl.scan(lambda c, t: (sl.sin(c) * t + c, c * c), x,
                                sl.tensor([0.3, -0.7, 1.1, 0.2, 0.9]), unroll=2)[1],
    "where_sqrt": lambda x: sl.scan(lambda c, t: (sl.where(c > 0, sl.sqrt(sl.abs(c)), c), c),
                                    x, sl.tensor([0.3, -0.7]))[1],
    "while_in_body": lambda x: sl.scan(
        lambda c, t: (sl.while_loop(lambda u: sl.sum(u * u) < 4.0, lambda u: u * 1.3 + t, c),
                      c), x, sl.tensor([0.3, 0.7]))[1],
    "checkpoint_in_body": lambda x: sl.scan(
        lambda c, t: (sl.checkpoint(lambda u: sl.sin(u) * t)(c) + c, c), x,
        sl.tensor([0.3, 0.7]))[1],
}


@pytest.mark.parametrize("name", list(SCAN_JVP_CASES))
def test_jvp_through_scan_variants(name):
    # scan's JVP rule against central differences and against the reverse-mode Jacobian
    f, x = SCAN_JVP_CASES[name], sl.tensor([0.3, -0.5, 0.8])
    v = sl.tensor([0.7, -1.3, 0.4])
    out, tan = sl.jvp(f, (x,), (v,))
    _assert_same(out, f(x))
    assert tan.dtype == out.dtype and tan.shape == out.shape
    up, down = (f(sl.tensor(_np(x) + e * _np(v))) for e in (1e-6, -1e-6))
    fd = (_np(up) - _np(down)) / 2e-6
    np.testing.assert_allclose(_np(tan), fd, rtol=1e-6, atol=1e-8)
    J = _np(sl.jacrev(f)(x))
    np.testing.assert_allclose(_np(tan), J @ _np(v), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(sl.jacfwd(f)(x)), J, rtol=1e-10, atol=1e-12)


def test_jvp_through_a_float32_scan_stays_float32():
    t32 = sl.tensor(np.float32([0.5, -1.0]))

    def f(x):
        return sl.scan(lambda c, t: ((sl.ones_like(c[0]), sl.tanh(c[1] * t + 1.0)), c[0] + c[1]),
                       (x, x), t32)[1]

    x = sl.tensor(np.float32([0.1, 0.2]))
    out, tan = sl.jvp(f, (x,), (sl.ones_like(x),))
    assert out.dtype == tan.dtype == np.float32
    np.testing.assert_allclose(_np(tan), _np(sl.jacrev(f)(x)).sum(-1), rtol=1e-6)


# --- against JAX ----------------------------------------------------------------------------------
def test_while_loops_match_jax():
    jax = _jax()
    with jax.enable_x64(True):
        _while_loops_match_jax(jax)


def _while_loops_match_jax(jax):
    jnp, lax = jax.numpy, jax.lax

    def jnewton(a):
        def cond(c):
            x, a, n = c
            return (jnp.abs(x * x * x - a) > 1e-12 * a) & (n < 100)

        def body(c):
            x, a, n = c
            return x - (x * x * x - a) / (3.0 * x * x), a, n + 1

        x, _, n = lax.while_loop(cond, body, (1.0 + a / 3.0, a, jnp.int64(0)))
        return x, n

    a = np.logspace(-2, 4, 7)
    got, want = sl.vmap(newton)(sl.tensor(a)), jax.vmap(jnewton)(a)
    np.testing.assert_allclose(_np(got[0]), np.asarray(want[0]), rtol=1e-12)
    assert _np(got[1]).tolist() == np.asarray(want[1]).tolist()

    def jcond_only(lim):
        n, x = lax.while_loop(lambda c: c[1] < lim, lambda c: (c[0] + 1, c[1] * 1.5 + 0.25),
                              (jnp.int64(0), jnp.float64(0.5)))
        return n, x

    lims = _np(LIMS)
    got, want = sl.vmap(cond_only_batched)(LIMS), jax.vmap(jcond_only)(lims)
    assert _np(got[0]).tolist() == np.asarray(want[0]).tolist()
    np.testing.assert_allclose(_np(got[1]), np.asarray(want[1]), rtol=1e-14)

    def jlog_down(x):
        return lax.while_loop(lambda c: c > 2.0, jnp.log, x)

    x = _np(LOGS)
    np.testing.assert_allclose(_np(sl.vmap(log_down)(LOGS)), np.asarray(jax.vmap(jlog_down)(x)),
                               rtol=1e-14)
    # forward mode, which JAX has through while_loop
    J = np.asarray(jax.jacfwd(jax.vmap(jlog_down))(x))
    np.testing.assert_allclose(_np(sl.jacfwd(sl.vmap(log_down))(LOGS)), J, rtol=1e-12)
    np.testing.assert_allclose(_np(sl.vmap(sl.grad(log_down))(LOGS)), np.diag(J), rtol=1e-12)


def test_checkpointed_scan_per_example_grads_match_jax():
    jax = _jax()
    with jax.enable_x64(True):
        _checkpointed_scan_per_example_grads_match_jax(jax)


def _checkpointed_scan_per_example_grads_match_jax(jax):
    jnp = jax.numpy
    Mj = jnp.asarray(_np(M))

    def jloss(xs):
        def cell(h, x):
            h = jnp.tanh(h @ Mj + x)
            return h, h

        h, ys = jax.lax.scan(jax.checkpoint(cell, policy=jax.checkpoint_policies.dots_saveable),
                             jnp.zeros(3), xs)
        return jnp.sum(jnp.sin(h)) + jnp.sum(jnp.sin(ys))

    def loss(xs):
        def cell(h, x):
            h = sl.tanh(h @ M + x)
            return h, h

        h, ys = sl.scan(sl.checkpoint(cell, policy=cp.dots_saveable), sl.zeros(3), xs)
        return sl.sum(sl.sin(h)) + sl.sum(sl.sin(ys))

    seq = _np(SEQ)
    np.testing.assert_allclose(_np(sl.vmap(sl.grad(loss))(SEQ)),
                               np.asarray(jax.vmap(jax.grad(jloss))(seq)), rtol=1e-12)
    np.testing.assert_allclose(_np(sl.jacfwd(sl.vmap(loss))(SEQ)),
                               np.asarray(jax.jacfwd(jax.vmap(jloss))(seq)), rtol=1e-11,
                               atol=1e-13)


def test_jvp_through_scan_and_a_vmapped_checkpoint_match_jax():
    jax = _jax()
    with jax.enable_x64(True):
        jnp = jax.numpy
        t = np.array([0.3, -0.7, 1.1])

        def jf(x):
            return jax.lax.scan(lambda c, u: (jnp.sin(c) * u + c, c * c), x, t, reverse=True)[1]

        x, v = np.array([0.3, -0.5, 0.8]), np.array([0.7, -1.3, 0.4])
        want = jax.jvp(jf, (x,), (v,))
        got = sl.jvp(SCAN_JVP_CASES["reverse"], (sl.tensor(x),), (sl.tensor(v),))
        for a, b in zip(got, want):
            np.testing.assert_allclose(_np(a), np.asarray(b), rtol=1e-12, atol=1e-14)
        Mj = jnp.asarray(_np(M))

        def jck(h):
            def g(h):
                h1 = jnp.tanh(h @ Mj + 0.2)
                return jnp.sin(h1 @ Mj) * h

            return jax.checkpoint(g, policy=jax.checkpoint_policies.dots_saveable)(h)

        f = CHECKPOINT_CASES["ck_policy_dots_saveable"][0]
        X = _np(X3)
        np.testing.assert_allclose(_np(sl.vmap(sl.jacfwd(f))(X3)),
                                   np.asarray(jax.vmap(jax.jacfwd(jck))(X)), rtol=1e-12)
        np.testing.assert_allclose(_np(sl.vmap(sl.jacrev(f))(X3)),
                                   np.asarray(jax.vmap(jax.jacrev(jck))(X)), rtol=1e-12)


# --- hypothesis: lanes that stop anywhere ---------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1e-3, 1e8), min_size=0, max_size=6), st.booleans())
def test_any_lanes_any_trip_counts(values, column):
    # lanes as a vector, or as a [B, 1] column whose examples are 1-vectors
    a = np.array(values, np.float64)
    a = sl.tensor(a.reshape(-1, 1) if column else a)
    f = (lambda v: newton(v[0])) if column else newton
    got = sl.vmap(f)(a)
    assert got[0].dtype == np.float64 and got[1].dtype == np.int64
    if not values:
        assert got[0].shape == (0,)
        return
    _assert_same(got, _per_example(f, (a,)))
    g = sl.vmap(sl.grad(lambda v: f(v)[0]))(a)
    gw = _per_example(sl.grad(lambda v: f(v)[0]), (a,))
    _assert_same(g, gw, tol=1e-11)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(-3.0, 3.0), st.floats(0.01, 5.0)), min_size=1, max_size=5),
       st.booleans())
def test_any_lanes_through_a_checkpointed_while(pairs, map_s):
    # a while_loop inside a checkpoint, with a closed-over limit mapped or not
    x = sl.tensor([p[0] for p in pairs])
    s = sl.tensor([p[1] for p in pairs]) if map_s else sl.tensor(pairs[0][1])

    def f(x, s):
        def g(v):
            return sl.while_loop(lambda c: sl.abs(c[0]) < s, lambda c: (c[0] * 1.7 + 0.3,
                                                                       c[1] + 1),
                                 (v, sl.tensor(0)))

        return sl.checkpoint(g)(x)

    axes = (0, 0 if map_s else None)
    _assert_same(sl.vmap(f, in_axes=axes)(x, s), _per_example(f, (x, s), axes))
    loss = lambda x, s: sl.sum(f(x, s)[0] ** 2)  # noqa: E731
    _assert_same(sl.vmap(sl.grad(loss), in_axes=axes)(x, s),
                 _per_example(sl.grad(loss), (x, s), axes), tol=1e-11)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([0, 1, -1]), st.sampled_from([0, 1, None]), st.sampled_from([0, 1, -1]),
       st.sampled_from(["nothing", "dots", "names", "everything"]), st.integers(0, 4))
def test_any_axes_any_policy_through_a_checkpoint(x_axis, s_axis, out_axis, policy, B):
    # a checkpoint of two arguments under vmap with in_axes/out_axes drawn, against the stack
    # of examples (values and the gradient of a scalar of them)
    policies = {"nothing": cp.nothing_saveable, "dots": cp.dots_saveable,
                "names": cp.save_only_these_names("h1"), "everything": cp.everything_saveable}
    rng = np.random.default_rng(B)

    def f(x, s):
        def g(h, s):
            h1 = sl.checkpoint_name(sl.tanh(h @ M + s), "h1")
            return sl.sin(h1 @ M) * h + s

        return sl.checkpoint(g, policy=policies[policy])(x, s)

    x = sl.tensor(rng.standard_normal((B, 3)))
    x = sl.transpose(x, (1, 0)) if x_axis in (1, -1) else x
    s = sl.tensor(rng.standard_normal((B, 3) if s_axis == 0 else (3, B) if s_axis == 1 else (3,)))
    if B == 0 and s_axis is None and x_axis is None:
        return
    got = sl.vmap(f, in_axes=(x_axis, s_axis), out_axes=out_axis)(x, s)
    want = _per_example(f, (x, s), (x_axis, s_axis), out_axis, B=B) if B else None
    if B == 0:
        assert got.shape == ((0, 3) if out_axis == 0 else (3, 0))
        return
    _assert_same(got, want)

    def loss(x):
        return sl.sum(sl.sin(sl.vmap(f, in_axes=(x_axis, s_axis), out_axes=out_axis)(x, s)))

    per = [sl.grad(lambda xi, si: sl.sum(sl.sin(f(xi, si))))(
        _slice(x, i, x_axis), _slice(s, i, s_axis)) for i in range(B)]
    _assert_same(sl.grad(loss)(x), sl.stack(per, axis=x_axis % 2), tol=1e-11)
