"""The numba loop's reads at index arrays in NumPy's other forms (x[:, i], x[i, :, j],
x[0, :, j], x[i[:, None], j] with arrays broadcast, x[..., i], None beside arrays) and the
scatters that are their VJPs: the kernel runs (no fallback), its values and gradients are the
NumPy loop's bit for bit (the same reads, and the same additions in the same order), an index
out of range is NumPy's IndexError, and a form the rules cannot write still runs as NumPy.
"""

import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.loop import native
from test_scan_oracle import loop_scan

RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 5, 6))
XT = sl.tensor(X)
I = np.array([[0, 3, -1], [2, 1, 0]])  # noqa: E741  (a negative entry, and a repeat)
J = np.array([1, -2, 4])
TS = np.array([0, 1, 3, -2])

# name -> x[...] of (x, t), t the step's 0-d integer
FORMS = {
    "x[:, t]": lambda x, t: x[:, t],
    "x[:, I]": lambda x, t: x[:, I],
    "x[I, :, J]": lambda x, t: x[I, :, J],
    "x[0, :, J]": lambda x, t: x[0, :, J],
    "x[:, I, J]": lambda x, t: x[:, I, J],
    "x[I[:, :1], J[None]]": lambda x, t: x[I[:, :1], J[None]],
    "x[..., J]": lambda x, t: x[..., J],
    "x[I[:, :1], ..., J]": lambda x, t: x[I[:, :1], ..., J],
    "x[None, I, 1]": lambda x, t: x[None, I, 1],
    "x[J % 4, None, t]": lambda x, t: x[J % 4, None, t],
    "x[1:3, t, ::-2]": lambda x, t: x[1:3, t, ::-2],
    "x[t, J]": lambda x, t: x[t, J],
    "x[:, J, t]": lambda x, t: x[:, J, t],
    "x[-1, t]": lambda x, t: x[-1, t],
}


def _loss(form, compiler, scan=None):
    def loss(x):
        def body(c, t):
            y = form(c * x, t)
            return c * 1.01, (y * y).sum() + y.ravel()[0]

        run = scan or (lambda *a: sl.scan(*a, compiler=compiler))
        c, ys = run(body, sl.tensor(1.0), sl.tensor(TS))
        return ys.sum() + c
    return loss


def _same_bits(got, want):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def _numba(fn, *args):
    """fn(*args) with the numba tier, which must run a kernel and fall back nowhere."""
    before = native.STATS["kernel calls"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)
        out = fn(*args)
    assert native.STATS["kernel calls"] > before, "no numba kernel ran"
    return out


@pytest.mark.parametrize("name", list(FORMS))
def test_gather_form_values_and_gradients_are_the_numpy_loops(name):
    form = FORMS[name]
    want = sl.value_and_grad(_loss(form, "numpy"))(X)
    got = _numba(sl.value_and_grad(_loss(form, "numba")), X)
    _same_bits(got, want)
    oracle = sl.value_and_grad(_loss(form, None, loop_scan))(X)
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(oracle[1]), rtol=1e-12)


def test_gather_forms_under_jit():
    def loss(x, compiler):
        return sum(_loss(form, compiler)(x) for form in
                   (FORMS["x[I, :, J]"], FORMS["x[I[:, :1], J[None]]"], FORMS["x[:, t]"]))

    want = sl.value_and_grad(lambda x: loss(x, "numpy"))(X)
    got = _numba(sl.jit(sl.value_and_grad(lambda x: loss(x, "numba"))), X)
    for g, w in zip(got, want):  # the fused kernel sums the three losses in its own order
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14, atol=0)


def test_scatter_add_at_broadcast_arrays_with_repeats_is_add_at():
    """x.at[:, rows, cols].add(v): repeated positions add up in NumPy's order."""
    rows, cols = np.array([[0], [2], [0]]), np.array([1, 1, 3, 1])
    vs = sl.tensor(RNG.standard_normal((5, 2, 3, 4)))

    def run(compiler):
        def body(c, v):
            return c.at[:, rows, cols].add(v * c[:, :3, :1]), c.sum()
        return sl.scan(body, sl.tensor(X[:2, :4, :4]), vs, compiler=compiler)

    _same_bits(sl.pytree.flatten(_numba(run, "numba"))[0],
               sl.pytree.flatten(run("numpy"))[0])


@pytest.mark.parametrize("where", ["array", "step", "scatter"])
def test_an_index_out_of_range_is_numpys_error(where):
    bad = np.array([[0, 1], [2, 6]])  # 6 is past an axis of 5 or 6

    def run(compiler):
        def body(c, t):
            if where == "array":
                y = XT[1, :, t].T * c  # (t's axis first: 1 and t stand apart)
            elif where == "step":
                y = XT[:, t[1]][:, :2] * c
            else:
                y = sl.zeros((4, 5)).at[:, t].add(sl.broadcast_to(c, (4, 2)))[:, :2]
            return c + y.sum(), y

        return sl.scan(body, sl.tensor(np.ones(2)), sl.tensor(bad), compiler=compiler)

    with pytest.raises(IndexError) as numpy_error:
        run("numpy")
    with pytest.raises(IndexError) as numba_error, warnings.catch_warnings():
        warnings.simplefilter("error", sl.NumbaFallbackWarning)  # the kernel's, rerun as NumPy
        run("numba")
    assert str(numba_error.value) == str(numpy_error.value)
    assert "step t=1" in str(numba_error.value)


def test_three_index_arrays_run_as_numpy_with_a_warning():
    def body(c, t):
        return c, (c * XT)[I % 4, I, J].sum()

    with pytest.warns(sl.NumbaFallbackWarning, match="more than two index arrays"):
        got = sl.scan(body, sl.tensor(1.0), sl.tensor(TS), compiler="numba")
    _same_bits(sl.pytree.flatten(got)[0],
               sl.pytree.flatten(sl.scan(body, sl.tensor(1.0), sl.tensor(TS)))[0])


def test_a_closed_over_values_gradient_accumulator_is_not_step_work(caplog):
    """X[t] on a closed-over X of 40,000 elements: X's gradient is summed per chunk into an
    accumulator, outside the kernel, from one row of each step's work. So the backward body
    is a kernel; the size rule once counted the accumulator as a value of its step and left
    the body to the NumPy loop."""
    import logging

    N = 200
    X0 = sl.tensor(RNG.standard_normal((N, N)))

    def loss(X, compiler):
        c, _ = sl.scan(lambda c, t: (c * 0.5 + X[t], None), sl.zeros(N), sl.arange(N),
                       compiler=compiler)
        return (c * c).sum()

    want = sl.grad(loss)(X0, "numpy").numpy()
    before = native.STATS["kernel calls"]
    with caplog.at_level(logging.INFO, logger="scanlib.numba"):
        got = _numba(lambda c: sl.grad(loss)(X0, c), "numba").numpy()
    assert not [r for r in caplog.records if "NumPy loop" in r.getMessage()], caplog.records
    assert native.STATS["kernel calls"] > before + 1  # the forward's and the backward's
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
