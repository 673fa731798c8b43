"""where's NumPy impl picks a large float result by bits, branch-free (ops/elementwise.py,
_pick_bits): its result must be np.where's bit for bit (NaN payloads, -0.0, infinities), of
np.where's dtype and shape, for every dtype, broadcast and layout, and hand anything else
to np.where."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scanlib as sl
from scanlib.ops import elementwise as ew

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BIG = ew._BITS_MIN_SIZE
SPECIAL = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-40, 0.1]


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    uint = f"u{a.dtype.itemsize}"
    np.testing.assert_array_equal(a.view(uint), np.ascontiguousarray(b).view(uint))


def _array(rng, shape, dtype, layout):
    a = rng.normal(size=shape).astype(dtype)
    flat = a.reshape(-1)
    flat[rng.integers(0, flat.size, 40)] = rng.choice(np.array(SPECIAL, dtype), 40)
    flat[:3] = np.frombuffer(np.array([0x7FF8_0000_0000_1234], np.uint64).tobytes(),
                             np.float64)[0].astype(dtype)  # a NaN with a payload
    if layout == "reversed":
        return a[..., ::-1]
    if layout == "fortran":
        return np.asfortranarray(a)
    if layout == "strided":
        return np.repeat(a, 2, axis=-1)[..., ::2]
    return a


@st.composite
def where_args(draw):
    dtype = np.dtype(draw(st.sampled_from(["float16", "float32", "float64"])))
    shape = draw(st.sampled_from([(BIG,), (64, BIG // 64), (4, 32, BIG // 128)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    cond_shape = draw(st.sampled_from(["same", "row", "col", "scalar"]))
    c_shape = {"same": shape, "row": shape[-1:], "col": shape[:1] + (1,) * (len(shape) - 1),
               "scalar": ()}[cond_shape]
    c = rng.random(c_shape) < draw(st.sampled_from([0.0, 0.5, 0.97, 1.0]))
    layout = draw(st.sampled_from(["c", "reversed", "fortran", "strided"]))

    def operand():
        kind = draw(st.sampled_from(["array", "array", "float", "int", "bool", "0d", "npscalar",
                                     "other dtype", "row"]))
        if kind == "array":
            return _array(rng, shape, dtype, layout)
        if kind == "row":
            return _array(rng, shape[-1:], dtype, "c")
        value = draw(st.sampled_from(SPECIAL))
        if kind == "float":
            return value
        if kind == "int":
            return draw(st.integers(-3, 3))
        if kind == "bool":
            return draw(st.booleans())
        if kind == "0d":
            return np.asarray(value, dtype)
        if kind == "npscalar":
            return dtype.type(value)
        return np.asarray(value, np.float64 if dtype != np.float64 else np.float32)

    return c, operand(), operand()


@given(where_args())
@SETTINGS
def test_where_is_np_where_bit_for_bit(args):
    c, x, y = args
    _same_bits(ew._where_impl(c, x, y), np.where(c, x, y))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("fill", [0.0, -0.0, np.nan, 2.5])
def test_the_bits_path_is_taken_and_exact(dtype, fill):
    """A relu's cotangent (a random mask, a scalar fill) and two arrays both go by bits."""
    rng = np.random.default_rng(0)
    x = _array(rng, (8, BIG), dtype, "c")
    y = _array(rng, (8, BIG), dtype, "c")
    c = rng.random(x.shape) < 0.5
    for args in ((c, x, fill), (c, fill, x), (c, x, y)):
        picked = ew._pick_bits(*args)
        assert picked is not None
        _same_bits(picked, np.where(*args))


def test_what_the_bits_path_leaves_to_np_where():
    x = np.ones(BIG)
    c = np.arange(BIG) % 3 == 0
    assert ew._pick_bits(c, x[:10], 0.0) is None  # small
    assert ew._pick_bits(c, x.astype(np.float32), np.float64(2.0)) is None  # promoted
    assert ew._pick_bits(c, x.astype(np.int64), 0) is None  # not float
    assert ew._pick_bits(c, x.astype(np.complex128), 0.0) is None  # complex
    assert ew._pick_bits(np.ones((2, BIG), bool), x, 0.0) is None  # broadcast by c
    assert ew._where_impl(c.astype(np.int8) * 2, x, 0.0).sum() == c.sum()  # c not bool


def test_where_on_tensors_and_its_gradient():
    """Through the primitive: the value is np.where's, and relu's cotangent is the mask."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, BIG // 16))
    x[0, :5] = 0.0
    got = sl.where(sl.tensor(x) > 0, sl.tensor(x), 0.0)
    _same_bits(np.asarray(got), np.where(x > 0, x, 0.0))
    g = sl.grad(lambda v: sl.numpy.sum(sl.numpy.maximum(v, 0.0) * 3.0))(sl.tensor(x))
    expected = np.where(x > 0, 3.0, np.where(x == 0, 1.5, 0.0))
    _same_bits(np.asarray(g), expected)
