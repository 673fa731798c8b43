"""What one operation on small NumPy tensors costs in Python: the number of Python functions
it calls, counted with sys.setprofile (a count, the same on every machine, where a time is
not). A per-op wrapper that grows shows here before it shows in a Python loop's time."""

import sys

import numpy as np
import pytest

import scanlib as sl


def python_calls(op):
    """How many Python functions op() calls (builtins and NumPy's C functions not counted)."""
    op()  # caches filled
    calls = []

    def count(frame, event, arg):
        if event == "call" and frame.f_code.co_filename != __file__:
            calls.append(frame.f_code.co_name)

    sys.setprofile(count)
    try:
        op()
    finally:
        sys.setprofile(None)
    return len(calls), calls


X = {shape: sl.tensor(np.full(shape, 0.5)) for shape in [(), (2,), (2, 2)]}
Y = {shape: sl.tensor(np.full(shape, 1.5)) for shape in [(), (2,), (2, 2)]}

# (op, the most Python calls it may make): the operator's method, bind, and what bind must
# run (the promotion and weak-type checks, the impl, the result's Tensor); an index of plain
# items (ints, slices, None, ...) is split once and needs no device of index arrays.
CASES = {
    "mul(t, t)": (lambda x, y: x * y, 5),
    "mul(t, 2.0)": (lambda x, y: x * 2.0, 5),
    "exp(t)": (lambda x, y: sl.exp(x), 6),
    "where(t > 0, t, 0.0)": (lambda x, y: sl.where(x > 0, x, 0.0), 13),
    "t[0], t[0, 1], t[()]": (lambda x, y: x[(0,) * x._value.ndim], 5),
    "t[1:], t[...]": (lambda x, y: x[1:] if x._value.ndim else x[...], 5),
    # the array's own sum, not numpy.sum's wrapper (four Python calls more, in a replay too)
    "sum(t)": (lambda x, y: sl.sum(x), 15),
}


@pytest.mark.parametrize("shape", [(), (2,), (2, 2)], ids=["0-d", "2", "2x2"])
@pytest.mark.parametrize("case", list(CASES))
def test_an_operation_on_small_tensors_makes_few_python_calls(case, shape):
    op, most = CASES[case]
    x, y = X[shape], Y[shape]
    n, calls = python_calls(lambda: op(x, y))
    assert n <= most, f"{case} on shape {shape}: {n} Python calls: {calls}"
