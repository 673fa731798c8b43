"""Property-based tests: random scan bodies built from the primitive set (add, sub, mul, tanh,
sin, cos, exp of bounded values, sigmoid, relu, where, maximum, sums, slices and concatenate,
softmax, matmul with closed-over weights, NumPy and Python constants, inner scans), random
carries, ys with aliasing, reverse and dim, all compared with the loop oracle in values and
gradients, and in second derivatives (float64).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from test_scan_oracle import (
    assert_trees_close,
    compare_with_loop,
    cotangents_like,
    leaves,
    loop_scan,
    weighted_sum,
)

import scanlib as sl

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

UNARY = {
    "tanh": sl.tanh,
    "sin": sl.sin,
    "cos": sl.cos,
    "exp_tanh": lambda a: sl.exp(sl.tanh(a)),
    "sigmoid": sl.sigmoid,
    "neg": lambda a: -a,
    "square": lambda a: a * a,
    "scale_by_row_sum": lambda a: a * sl.sum(sl.tanh(a), axis=-1, keepdims=True),
    "roll": lambda a: sl.concatenate([a[..., 1:], a[..., :1]], axis=-1),
    "log1p_square": lambda a: sl.log1p(a * a),
    "softmax": lambda a: sl.softmax(a, axis=-1),
    "relu": sl.relu,
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "where": lambda a, b: sl.where(a > 0, a, b),
    "max": sl.maximum,
}
# Second operands that are not in the value pool: closed-over tensors and constants.
CLOSED = ("v", "K", "scalar")


@st.composite
def programs(draw, max_T=4, min_T=1):
    """A random body as data: shapes, a list of ops over a growing value pool, and which pool
    values become the new carries and the ys."""
    D = draw(st.integers(1, 3))
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    n_carry = draw(st.integers(1, 2))
    n_xs = draw(st.integers(0, 2))
    n_pool = n_carry + n_xs
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "closed", "matmul", "inner"]))
        a = draw(st.integers(0, n_pool - 1))
        if kind == "unary":
            ops.append(("unary", draw(st.sampled_from(sorted(UNARY))), a, None))
        elif kind == "binary":
            b = draw(st.integers(0, n_pool - 1))
            ops.append(("binary", draw(st.sampled_from(sorted(BINARY))), a, b))
        elif kind == "closed":
            ops.append(("closed", draw(st.sampled_from(sorted(BINARY))), a,
                        draw(st.sampled_from(CLOSED))))
        elif kind == "matmul":
            ops.append(("matmul", draw(st.booleans()), a, None))
        else:  # an inner scan from carry pool[a] over 2 steps made from pool[b]
            ops.append(("inner", draw(st.booleans()), a, draw(st.integers(0, n_pool - 1))))
        n_pool += 1
    # New carries: raw pool values only for inputs (aliasing: unchanged carry, carry from x),
    # else squashed with tanh so long products stay bounded.
    carries = [(draw(st.integers(0, n_pool - 1)), draw(st.booleans())) for _ in range(n_carry)]
    ys = draw(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, n_pool - 1)),
                                            min_size=1, max_size=3)))
    return {
        "D": D, "batch": batch, "n_carry": n_carry, "n_xs": n_xs, "ops": ops,
        "carries": carries, "ys": ys, "T": draw(st.integers(min_T, max_T)),
        "reverse": draw(st.booleans()), "dim_last": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


def build_body(prog, K, inner_scan=sl.scan):
    """make_f(params) for a program; K is a closed-over NumPy constant; inner scans in the body
    run with inner_scan (the loop oracle for the reference)."""
    n_carry = prog["n_carry"]

    def make_f(params):
        def f(carry, x):
            pool = list(carry) + list(x or ())
            closed = {"v": params["v"], "K": K, "scalar": 0.7}
            for kind, name, a, b in prog["ops"]:
                if kind == "unary":
                    pool.append(UNARY[name](pool[a]))
                elif kind == "binary":
                    pool.append(BINARY[name](pool[a], pool[b]))
                elif kind == "closed":
                    pool.append(BINARY[name](pool[a], closed[b]))
                elif kind == "matmul":  # name: whether to use W's transpose
                    pool.append(pool[a] @ (sl.transpose(params["W"]) if name else params["W"]))
                else:  # name: reverse the inner scan
                    inner_xs = sl.stack([pool[b], sl.sin(pool[b]) * K])
                    c, ys = inner_scan(
                        lambda ci, xi: (sl.tanh(ci * params["v"] + xi), sl.cos(ci) * xi),
                        pool[a], inner_xs, reverse=name)
                    pool.append(c + ys.sum(0))
            new = tuple(pool[j] if raw and j < n_carry + prog["n_xs"] else sl.tanh(pool[j])
                        for j, raw in prog["carries"])
            y = None if prog["ys"] is None else [None if j is None else pool[j]
                                                  for j in prog["ys"]]
            return new, y

        return f

    return make_f


@SETTINGS
@given(programs())
def test_random_bodies_match_the_loop(prog):
    check_program(prog)


@settings(SETTINGS, max_examples=60)
@given(programs(min_T=17, max_T=40))
def test_random_bodies_match_the_loop_across_chunks(prog):
    # The executor batches carry-independent work and gradient sums over chunks of steps
    # (at least MIN_CHUNK = 16); a one-byte budget makes every chunk that short, so these
    # lengths cross chunk boundaries, uneven ones included.
    executor = importlib.import_module("scanlib.scan.executor")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(executor, "CHUNK_BYTES", 1)
        check_program(prog)


def program_args(prog):
    """(init, xs, params, K, scan keywords, argnums to differentiate) for a program."""
    rng = np.random.default_rng(prog["seed"])
    D, batch, T = prog["D"], prog["batch"], prog["T"]
    shape = batch + (D,)
    init = tuple(sl.tensor(rng.standard_normal(shape)) for _ in range(prog["n_carry"]))
    dim = -1 if prog["dim_last"] else 0
    xs = tuple(sl.tensor(np.moveaxis(rng.standard_normal((T,) + shape), 0, dim))
               for _ in range(prog["n_xs"])) or None
    params = {"W": sl.tensor(0.8 * rng.standard_normal((D, D))),
              "v": sl.tensor(rng.standard_normal(D))}
    K = rng.standard_normal(D)
    kw = {"length": T} if xs is None else {"dim": dim}
    kw["reverse"] = prog["reverse"]
    return init, xs, params, K, kw, (0, 2) if xs is None else (0, 1, 2)


def check_program(prog):
    init, xs, params, K, kw, wrt = program_args(prog)
    compare_with_loop(build_body(prog, K), (init, xs, params),
                      loop_make_f=build_body(prog, K, inner_scan=loop_scan), wrt=wrt,
                      rtol=1e-10, atol=1e-10, nonzero_grads=False, **kw)


@settings(SETTINGS, max_examples=80)
@given(programs(max_T=3))
def test_random_bodies_second_derivatives_match_the_loop(prog):
    # d/dargs of |d loss/dargs|^2: the backward scan differentiated again.
    init, xs, params, K, kw, wrt = program_args(prog)
    bodies = {sl.scan: build_body(prog, K), loop_scan: build_body(prog, K, loop_scan)}
    cts = cotangents_like(loop_scan(bodies[loop_scan](params), init, xs, **kw))

    def grad_norm(scan_fn):
        def loss(init, xs, params):
            return weighted_sum(scan_fn(bodies[scan_fn](params), init, xs, **kw), cts)

        def g(*args):
            grads = sl.grad(loss, argnums=wrt)(*args)
            return sum(((a * a).sum() for a in leaves(grads)), 0.0)

        return g

    got = sl.grad(grad_norm(sl.scan), argnums=wrt)(init, xs, params)
    want = sl.grad(grad_norm(loop_scan), argnums=wrt)(init, xs, params)
    assert_trees_close(got, want, rtol=1e-9, atol=1e-9)


@st.composite
def xs_trees(draw):
    """A pytree of xs leaves of random rank, each with the scan axis at `dim`."""
    T = draw(st.integers(0, 4))
    n = draw(st.integers(1, 3))
    ranks = [draw(st.integers(1, 3)) for _ in range(n)]
    min_rank = min(ranks)
    dim = draw(st.integers(-min_rank, min_rank - 1))
    container = draw(st.sampled_from(["tuple", "list", "dict"]))
    return T, ranks, dim, container, draw(st.booleans()), draw(st.integers(0, 2**16))


@SETTINGS
@given(xs_trees())
def test_random_xs_pytrees_and_dims(case):
    T, ranks, dim, container, reverse, seed = case
    rng = np.random.default_rng(seed)
    leaves = []
    for r in ranks:
        shape = list(rng.integers(1, 3, size=r))
        shape[dim % r] = T
        leaves.append(sl.tensor(rng.standard_normal(shape)))
    xs = {"tuple": tuple, "list": list}.get(container, lambda ls: {f"k{i}": v for i, v in
                                                                   enumerate(ls)})(leaves)

    def f(c, x):
        parts = x.values() if isinstance(x, dict) else x
        total = sum((sl.tanh(p).sum() for p in parts), 0.0)
        return c * 0.5 + total, x  # ys = x: each leaf moved to axis 0

    carry, ys = sl.scan(f, sl.tensor(0.25), xs, dim=dim, reverse=reverse)
    want = [np.moveaxis(leaf.numpy(), dim % leaf.ndim, 0) for leaf in leaves]
    got = list(ys.values()) if isinstance(ys, dict) else list(ys)
    assert type(ys) is type(xs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)
    if T:
        assert_trees_close((carry, ys), loop_scan(f, sl.tensor(0.25), xs, dim=dim,
                                                  reverse=reverse))
    else:
        np.testing.assert_array_equal(carry.numpy(), 0.25)
