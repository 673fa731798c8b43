"""Shape rules (ops/shapes.py): where a trace gives a large result a stand-in without running
the impl, the stand-in has the shape and dtype the impl gives, every primitive with a rule,
over generated shapes and dtypes; the impl's own error where the rule does not take the
inputs; and jit's results unchanged."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scanlib as sl
from scanlib.ops import shapes
from scanlib.ops.primitive import Primitive


def _primitives():
    found = {}
    for info in pkgutil.walk_packages(sl.__path__, "scanlib."):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # an optional backend (numba, mpi4py) that is not installed
            continue
        for value in vars(module).values():
            if isinstance(value, Primitive):
                found[value.name] = value
    return found


PRIMS = _primitives()
RULED = sorted(name for name, p in PRIMS.items() if p.shape_of is not None)
ELEMENTWISE = [n for n in RULED if PRIMS[n].elementwise]
DTYPES = ["float64", "float32", "int64", "int32", "bool", "complex128"]


def _zeros(shape, dtype):
    return np.broadcast_to(np.zeros((), dtype), shape)


# Parameters (keywords of bind, not inputs) of the elementwise primitives that have them.
PARAMS = {"polygamma": {"n": 1}, "round": {"decimals": 1}, "sinc_maclaurin": {"k": 1},
          "nan_to_num": {"nan": 0.0, "posinf": 1.0, "neginf": -1.0},
          "astype": {"dtype": np.float32}}


def _arity(prim):
    n = len(inspect.signature(prim).parameters) - len(PARAMS.get(prim.name, ()))
    if n:
        return n
    for n in range(1, 5):  # *args (special functions): what the impl takes
        try:
            with np.errstate(all="ignore"):
                prim.impl(*[np.full(3, 0.5)] * n)
            return n
        except TypeError:
            continue
    return n


def _value(rng, shape, dtype):
    x = rng.standard_normal(shape) * 3
    return x.astype(dtype) if dtype != "bool" else x > 0


def _check(prim, values, params):
    """The stand-in against the impl: the same shape and dtype where the impl gives a result.
    (Where the impl raises on these values, a stand-in may still be made: a trace's values
    are stand-ins, not these, and the replay runs the impl, which raises.) Whether one was
    made."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = prim.impl(*values, **params)
        except Exception:
            want = None
        got = shapes.stand_in(prim, values, params, _zeros)
    if want is None or got is None:
        return False
    assert (got.shape, got.dtype) == (want.shape, want.dtype), (
        prim.name, [(getattr(v, "shape", v), getattr(v, "dtype", type(v))) for v in values])
    return True


def test_every_elementwise_primitive_has_the_broadcasting_rule():
    assert len(ELEMENTWISE) > 80
    assert {"matmul", "einsum", "concatenate", *REDUCTIONS} <= set(RULED)
    viewing = [n for n, p in PRIMS.items() if p.elementwise and p.view]
    assert not set(viewing) & set(RULED)  # a view's result is its input: no stand-in


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_stand_ins_match_the_impl(name):
    prim = PRIMS[name]
    rng = np.random.default_rng(0)
    made = 0
    for dtype in DTYPES:
        for shapes_ in [[(40, 30)] * 3, [(40, 30), (30,), (40, 1)], [(1, 1), (1024,), ()],
                        [(2, 1, 600), (3, 1), (1,)]]:
            values = [_value(rng, s, dtype) for s in shapes_[:_arity(prim)]]
            made += _check(prim, values, PARAMS.get(name, {}))
            if len(values) > 1:  # Python numbers beside an array (NumPy's weak rule)
                made += _check(prim, [values[0]] + [2] * (len(values) - 1),
                               PARAMS.get(name, {}))
    assert made, f"{name}: the rule never gave a stand-in"


@st.composite
def _operands(draw):
    """Broadcastable shapes, one of them with at least MIN_SIZE elements, and dtypes."""
    ndim = draw(st.integers(1, 4))
    out = [draw(st.integers(1, 12)) for _ in range(ndim)]
    out[-1] = max(out[-1], -(-shapes.MIN_SIZE // max(1, int(np.prod(out[:-1])))))
    n = draw(st.integers(1, 3))
    result = []
    for i in range(n):
        keep = draw(st.integers(0, ndim))
        shape = [1 if draw(st.booleans()) and i else d for d in out[ndim - keep:]]
        if i == 0:
            shape = out
        result.append((tuple(shape), draw(st.sampled_from(DTYPES))))
    return result


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_operands(), st.sampled_from(ELEMENTWISE), st.integers(0, 2 ** 32 - 1))
def test_generated_elementwise_stand_ins(operands, name, seed):
    prim = PRIMS[name]
    rng = np.random.default_rng(seed)
    values = [_value(rng, s, d) for s, d in operands][:_arity(prim)]
    values += [2.0] * (_arity(prim) - len(values))
    _check(prim, values, PARAMS.get(name, {}))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(1, 6), min_size=0, max_size=2), st.integers(1, 40),
       st.integers(1, 40), st.integers(1, 40), st.sampled_from(DTYPES[:2] + ["complex128"]),
       st.sampled_from(DTYPES[:2] + ["int64"]), st.booleans())
def test_generated_matmul_and_einsum_stand_ins(batch, m, k, n, dx, dy, mismatch):
    rng = np.random.default_rng(0)
    k2 = k + 1 if mismatch else k
    x = _value(rng, (*batch, m * 32, k), dx)
    y = _value(rng, (*batch[1:], k2, n), dy)
    _check(PRIMS["matmul"], [x, y], {})
    b0 = batch[0] if batch else 1
    xb, yb = _value(rng, (b0, m * 32, k), dx), _value(rng, (1 if mismatch else b0, k2, n), dy)
    _check(PRIMS["einsum"], [xb[0], yb[0]], {"spec": "ij,jk->ik"})
    _check(PRIMS["einsum"], [xb, yb], {"spec": "bij,bjk->bik"})
    _check(PRIMS["einsum"], [xb, xb], {"spec": "bij,bij->jib"})
    a, b = _value(rng, (m * 32, k), dx), _value(rng, (k2, m * 32), dy)
    _check(PRIMS["concatenate"], [a, b.T], {"axis": 0})
    _check(PRIMS["concatenate"], [a, a, a], {"axis": -1})


REDUCTIONS = ["sum", "max", "min", "any", "all"]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.sampled_from(REDUCTIONS),
       st.sampled_from(DTYPES), st.booleans(), st.integers(0, 15), st.booleans())
def test_generated_reduction_stand_ins(shape, name, dtype, keepdims, mask, every_axis):
    shape[-1] = max(shape[-1], -(-shapes.MIN_SIZE // int(np.prod(shape[:-1]))))
    x = _value(np.random.default_rng(0), tuple(shape), dtype)
    axis = None if every_axis else tuple(i for i in range(len(shape)) if mask >> i & 1)
    _check(PRIMS[name], [x], {"axis": axis, "keepdims": keepdims})


def test_einsum_broadcasts_a_length_one_axis_as_numpy_does():
    x, y = np.ones((1, 2048)), np.ones((3, 2048))
    assert _check(PRIMS["einsum"], [x, y], {"spec": "ij,ij->ij"})


def test_a_trace_runs_no_impl_on_large_stand_ins():
    calls = []

    def impl(x, y):
        calls.append(np.shape(x))
        return x * y

    counted = Primitive("counted_mul", impl, elementwise=True)
    x = np.arange(4096.0).reshape(64, 64)
    f = sl.jit(lambda a: counted(a, a) + 1.0)
    assert f.trace(x).eqns[0].outvars[0].shape == (64, 64)
    assert calls == [(1, 1)]  # the dtype, from one element
    np.testing.assert_array_equal(f(x).numpy(), x * x + 1.0)  # the replay: the impl, on x
    assert calls[-1] == (64, 64)


def test_a_shape_or_dtype_error_in_a_trace_is_the_impls():
    x, y = np.ones((64, 64)), np.ones((63,))
    with pytest.raises(ValueError, match="add failed on inputs"):
        sl.make_graph(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError, match="matmul"):
        sl.make_graph(lambda a, b: a @ b)(x, np.ones((63, 2)))
    with pytest.raises(ValueError):
        sl.make_graph(lambda a: sl.numpy.einsum("ij,jk->ik", a, np.ones((5, 2))))(x)
    with pytest.raises(ValueError):
        sl.make_graph(lambda a: sl.concatenate([a, np.ones((64, 3, 1))], 0))(x)
    with pytest.raises(TypeError, match="bitwise_and"):
        sl.make_graph(lambda a: sl.numpy.bitwise_and(a, a))(x)


def test_jit_and_scan_results_are_unchanged_on_large_values():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((64, 64)).astype(np.float32) / 8
    xs = rng.standard_normal((5, 32, 64)).astype(np.float32)

    def loss(w, xs):
        def step(h, x):
            h = sl.tanh(h @ w + x * 0.5 + sl.numpy.einsum("bi,ij->bj", x, w))
            return h, sl.concatenate([h, -h], 1)
        h, ys = sl.scan(step, sl.zeros((32, 64), np.float32), xs)
        return sl.sum(ys * ys) + sl.sum(h)

    want = sl.value_and_grad(loss)(w, xs)
    got = sl.jit(sl.value_and_grad(loss))(w, xs)
    assert got[0].dtype == want[0].dtype == np.float32 and got[1].dtype == np.float32
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def test_an_error_only_some_elements_raise_is_still_the_impls():
    """Integers to a negative integer power raise in NumPy wherever they occur: the trace
    runs pow on them (one element would not show it), so the error names pow and its inputs
    as an eager call's does."""
    x, e = np.arange(2048), np.arange(2048)[::-1] - 3  # e[0] >= 0, e[-1] < 0
    for call in (lambda: sl.jit(lambda a: a ** e)(x),
                 lambda: sl.scan(lambda c, _: (c ** e, None), x, length=2)):
        with pytest.raises(ValueError, match="pow failed on inputs"):
            call()


def test_a_ufunc_without_a_loop_for_the_dtypes_gets_scanlibs_message():
    # NumPy's _UFuncNoLoopError takes more than a message: the restated error must not
    # be rebuilt from its class
    with pytest.raises(TypeError, match=r"add failed on inputs \(U\d+\[1\], f64\[1\]\)"):
        sl.tensor(np.array(["abc"])) + sl.tensor([1.0])
