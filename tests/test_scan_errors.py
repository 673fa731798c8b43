"""scan's errors: raised early, of the built-in type the house style names (TypeError for
structure/shape/dtype, ValueError for bad values), and worded to name the pytree path, both
sides of a mismatch, and the fix.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl


def ident(c, x):
    return c, x


@pytest.fixture
def h():
    return {"h": sl.ones(3)}


@pytest.fixture
def xs():
    return sl.ones((4, 3))


def message(excinfo) -> str:
    return str(excinfo.value)


# --- f --------------------------------------------------------------------------------------
def test_f_not_callable(h, xs):
    with pytest.raises(TypeError) as e:
        sl.scan(3, h, xs)
    assert "f must be callable" in message(e) and "int" in message(e)
    assert "f(carry, x) -> (new_carry, y)" in message(e)


@pytest.mark.parametrize("out, described", [
    (lambda c, x: c, "a dict"),
    (lambda c, x: (c, x, x), "a tuple of length 3"),
    (lambda c, x: (c,), "a tuple of length 1"),
    (lambda c, x: c["h"], "a single Tensor (f64[3])"),
])
def test_f_not_returning_a_pair(h, xs, out, described):
    with pytest.raises(TypeError) as e:
        sl.scan(out, h, xs)
    assert "f must return a pair (new_carry, y)" in message(e)
    assert described in message(e)
    assert "(carry, None)" in message(e)  # the fix when there is no y


def test_y_leaf_of_wrong_type_names_its_path(h, xs):
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: (c, {"out": [x, "label"]}), h, xs)
    assert "y['out'][1]" in message(e) and "str" in message(e)


# --- the carry ------------------------------------------------------------------------------
def test_carry_structure_mismatch_dict_keys(h, xs):
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: ({"g": c["h"]}, x), h, xs)
    msg = message(e)
    assert "init's structure" in msg
    assert "{'h': *}" in msg and "{'g': *}" in msg  # both sides


def test_carry_structure_mismatch_extra_leaf(h, xs):
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: ({"h": c["h"], "extra": x}, x), h, xs)
    assert "{'h': *}" in message(e) and "'extra': *" in message(e)


def test_carry_structure_mismatch_tuple_is_printed_whole(xs):
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: ((c[0], c[1], x), x), (sl.ones(3), sl.ones(3)), xs)
    msg = message(e)
    assert "init is (*, *) and f returned (*, *, *)." in msg, msg


def test_carry_shape_mismatch_names_path_and_both_types():
    init = {"h": sl.ones((32, 128), dtype="float32")}
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: ({"h": sl.concatenate([c["h"], c["h"]], 1)}, None), init, length=2)
    msg = message(e)
    assert "init['h']" in msg and "carry['h']" in msg
    assert "f32[32,128]" in msg and "f32[32,256]" in msg
    assert "shapes differ" in msg
    assert "through ys" in msg  # how to fix it


def test_carry_shape_mismatch_in_a_nested_pytree():
    init = (sl.ones(2), {"a": [sl.ones(2), sl.ones(3)]})
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: ((c[0], {"a": [c[1]["a"][0], c[1]["a"][0]]}), None), init, length=1)
    msg = message(e)
    assert "init[1]['a'][1]" in msg and "carry[1]['a'][1]" in msg
    assert "f64[3]" in msg and "f64[2]" in msg


def test_carry_dtype_mismatch(h, xs):
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: ({"h": c["h"].astype("float32")}, x), h, xs)
    msg = message(e)
    assert "init['h']" in msg and "carry['h']" in msg
    assert "f64[3]" in msg and "f32[3]" in msg
    assert "dtypes differ" in msg and ".astype()" in msg


def test_int_carry_turned_float_is_a_dtype_error(xs):
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: (c * 0.5, x), np.array(3), xs)
    assert "i64[]" in message(e) and "f64[]" in message(e) and "dtypes differ" in message(e)


def test_init_leaf_of_wrong_type(xs):
    with pytest.raises(TypeError) as e:
        sl.scan(ident, {"h": "state"}, xs)
    assert "init['h']" in message(e) and "str" in message(e)


# --- xs -------------------------------------------------------------------------------------
def test_xs_leaves_of_different_lengths_name_both_paths(h):
    with pytest.raises(ValueError) as e:
        sl.scan(ident, h, {"a": sl.ones((4, 3)), "b": [sl.ones((5, 3))]})
    msg = message(e)
    assert "xs['a']" in msg and "xs['b'][0]" in msg
    assert "(4, 3)" in msg and "(5, 3)" in msg
    assert "length 4" in msg and "length 5" in msg


def test_xs_lengths_differ_along_a_nonzero_dim(h):
    with pytest.raises(ValueError) as e:
        sl.scan(ident, h, (sl.ones((3, 4)), sl.ones((3, 5))), dim=1)
    assert "xs[0]" in message(e) and "xs[1]" in message(e) and "dim=1" in message(e)


def test_xs_same_leading_size_but_different_scan_axis_is_an_error(h):
    # torch silently misaligns these; here both have 3 rows but scan along dim=-1 differs.
    with pytest.raises(ValueError, match="same length along dim=-1"):
        sl.scan(ident, h, [sl.ones((3, 4)), sl.ones((3, 2, 6))], dim=-1)


@pytest.mark.parametrize("leaf", [2.0, 3, sl.tensor(2.0), np.float64(2.0), np.array(1.5)])
def test_scalar_xs_leaf(h, leaf):
    with pytest.raises(TypeError) as e:
        sl.scan(ident, h, {"a": sl.ones((4, 3)), "b": leaf})
    msg = message(e)
    assert "xs['b']" in msg and "scalar (0-d)" in msg
    assert "close over" in msg or "scanlib.tensor" in msg  # the fix


def test_xs_leaf_of_wrong_type(h):
    with pytest.raises(TypeError) as e:
        sl.scan(ident, h, ["abc"])
    assert "xs[0]" in message(e) and "str" in message(e)


# --- options --------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, -3, 7])
def test_dim_out_of_range(h, xs, dim):
    with pytest.raises(ValueError) as e:
        sl.scan(ident, h, xs, dim=dim)
    msg = message(e)
    assert f"dim={dim}" in msg and "out of range" in msg and "(4, 3)" in msg and "xs" in msg


def test_dim_out_of_range_for_one_leaf_names_that_leaf(h):
    with pytest.raises(ValueError) as e:
        sl.scan(ident, h, {"a": sl.ones((4, 3, 2)), "b": sl.ones((4, 3))}, dim=2)
    assert "xs['b']" in message(e) and "xs['a']" not in message(e)


@pytest.mark.parametrize("dim", [1.0, None, True, "0"])
def test_dim_not_an_int(h, xs, dim):
    with pytest.raises(TypeError) as e:
        sl.scan(ident, h, xs, dim=dim)
    assert "dim must be an int" in message(e) and repr(dim) in message(e)


def test_dim_numpy_integer_is_accepted(h):
    _, ys = sl.scan(lambda c, x: (c, x), h, sl.ones((2, 5)), dim=np.int64(1))
    assert ys.shape == (5, 2)


@pytest.mark.parametrize("reverse", [1, 0, None, "yes", np.bool_(True)])
def test_reverse_not_a_bool(h, xs, reverse):
    with pytest.raises(TypeError) as e:
        sl.scan(ident, h, xs, reverse=reverse)
    assert "reverse must be True or False" in message(e) and repr(reverse) in message(e)


@pytest.mark.parametrize("xs_given", [True, False])
def test_length_negative(h, xs, xs_given):
    with pytest.raises(ValueError) as e:
        sl.scan(ident, h, xs if xs_given else None, length=-1)
    assert "length must be >= 0" in message(e) and "-1" in message(e)


@pytest.mark.parametrize("length", [2.0, True, "4", 4.5])
def test_length_not_an_int(h, length):
    with pytest.raises(TypeError) as e:
        sl.scan(lambda c, x: (c, None), h, length=length)
    assert "length must be an int" in message(e) and repr(length) in message(e)


def test_length_disagreeing_with_xs(h, xs):
    with pytest.raises(ValueError) as e:
        sl.scan(ident, h, xs, length=5)
    msg = message(e)
    assert "length=5" in msg and "length 4" in msg and "disagrees" in msg


def test_length_agreeing_with_xs_is_fine(h, xs):
    _, ys = sl.scan(ident, h, xs, length=np.int64(4))
    assert ys.shape == (4, 3)


@pytest.mark.parametrize("empty", [None, (), {}, [None]])
def test_xs_none_or_empty_without_length(h, empty):
    with pytest.raises(ValueError) as e:
        sl.scan(lambda c, x: (c, None), h, empty)
    assert "pass length=" in message(e)


# --- concrete values inside f ---------------------------------------------------------------
CONCRETE = {
    "python_if": lambda c, x: (c + (1.0 if x.sum() > 0 else 0.0), x),
    "item": lambda c, x: (c + x.sum().item(), x),
    "float": lambda c, x: (c + float(x.sum()), x),
    "int": lambda c, x: (c + int(x.sum()), x),
    "numpy": lambda c, x: (c + x.numpy().sum(), x),
    "np.asarray": lambda c, x: (c + np.asarray(x).sum(), x),
}


@pytest.mark.parametrize("name", list(CONCRETE))
def test_concrete_value_inside_f_names_scanlib_where(xs, name):
    with pytest.raises(TypeError) as e:
        sl.scan(CONCRETE[name], sl.ones(3), xs)
    msg = message(e)
    assert "scanlib.where" in msg and "traced" in msg


def test_error_inside_f_propagates_and_leaves_no_trace_behind(xs):
    def f(c, x):
        return c @ sl.ones((5, 5)), x  # shapes do not line up

    with pytest.raises(ValueError, match="matmul"):
        sl.scan(f, sl.ones(3), xs)
    # The tracing state was unwound: ordinary eager code and a later scan work.
    t = sl.tensor([1.0, 2.0]) * 2
    assert t.sum().item() == 6.0
    carry, _ = sl.scan(lambda c, x: (c + x, None), sl.zeros(3), xs)
    np.testing.assert_allclose(carry.numpy(), 4.0)


def test_error_for_carry_mismatch_leaves_no_trace_behind(h, xs):
    with pytest.raises(TypeError):
        sl.scan(lambda c, x: ({"h": x[:2]}, x), h, xs)
    assert float(sl.tensor(3.0) * 2) == 6.0
