"""make_graph prints the recorded tape as straight-line code with shapes and dtypes (golden
strings: a change to the printer or to what an op records shows up here).
"""

from __future__ import annotations

import textwrap

import numpy as np

import scanlib as sl

W = np.ones((3, 2), np.float32)


def test_rnn_step_prints_as_straight_line_code(backend):
    w = backend.tensor(W)

    def step(h, x):
        a = x @ w
        b = sl.tanh(a + h) * 2.0
        return sl.sum(b, axis=1), b[:, 0]

    graph = sl.make_graph(step)(backend.tensor(np.zeros((4, 2), np.float32)),
                                sl.zeros((4, 3), dtype=np.float32, device=backend.device))
    assert str(graph) == textwrap.dedent("""\
        def step(h: f32[4,2], x: f32[4,3], *, w: f32[3,2]):
            a: f32[4,2] = matmul(x, w)
            b: f32[4,2] = add(a, h)
            c: f32[4,2] = tanh(b)
            d: f32[4,2] = mul(c, 2.0)
            e: f32[4] = sum(d, axis=(1,), keepdims=False)
            f: f32[4] = getitem(d, index=[:, 0])
            return e, f""")
    assert [e.prim.name for e in graph.eqns] == ["matmul", "add", "tanh", "mul", "sum",
                                                 "getitem"]
    assert len(graph.invars) == 2 and len(graph.constvars) == 1 and len(graph.outvars) == 2


def test_pytree_arguments_and_composites(backend):
    def loss(params, x):
        y = sl.einsum("ij,j->i", params["w"], x) + params["b"]
        return sl.logsumexp(y)

    args = backend.tree(({"w": np.zeros((2, 3)), "b": np.zeros(2)}, np.zeros(3)))
    text = str(sl.make_graph(loss)(*args))
    assert text == textwrap.dedent("""\
        def loss(params_b: f64[2], params_w: f64[2,3], x: f64[3]):
            a: f64[2] = einsum(params_w, x, spec='ij,j->i')
            b: f64[2] = add(a, params_b)
            c: f64[1] = max(b, axis=None, keepdims=True)
            d: f64[1] = stop_gradient(c)
            e: bool[1] = isfinite(d)
            f: f64[1] = where(e, d, 0.0)
            g: f64[2] = sub(b, f)
            h: f64[2] = exp(g)
            i: f64[1] = sum(h, axis=None, keepdims=True)
            j: f64[1] = log(i)
            k: f64[1] = add(j, f)
            l: f64[] = reshape(k, shape=())
            return l""")


def test_dtypes_and_casts_are_shown(backend):
    def f(x):
        return x.astype("float32") * 0.5, sl.maximum(x, 0.0), x > 1

    text = str(sl.make_graph(f)(backend.tensor(np.zeros(3, np.int32))))
    assert text == textwrap.dedent("""\
        def f(x: i32[3]):
            a: f32[3] = astype(x, dtype=float32)
            b: f32[3] = mul(a, 0.5)
            c: f64[3] = maximum(x, 0.0)
            d: bool[3] = gt(x, 1)
            return b, c, d""")


def test_graph_records_shapes_not_values(backend):
    g1 = sl.make_graph(lambda x: sl.exp(x) - 1.0)(backend.tensor(np.zeros((2, 2))))
    g2 = sl.make_graph(lambda x: sl.exp(x) - 1.0)(backend.tensor(np.full((2, 2), 7.0)))
    assert str(g1) == str(g2) == textwrap.dedent("""\
        def f(x: f64[2,2]):
            a: f64[2,2] = exp(x)
            b: f64[2,2] = sub(a, 1.0)
            return b""")
