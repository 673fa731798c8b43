"""associative_scan against its definition, the sequential `sl.scan` with carry = fn(carry, x)
(values in float32 and float64, gradients to second order), against finite differences, on
add, multiply, max, affine pairs (linear recurrences, real and complex), 2x2 matrix products,
reverse, axis, odd and even lengths and pytrees; and its errors. Against
jax.lax.associative_scan when JAX is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl
from scanlib import associative, pytree
from scanlib.testing import check_grads

LENGTHS = (1, 2, 3, 7, 8, 33)
STRUCTURES = tuple(associative.STRUCTURES)
PICK = associative._structure  # before the fixture below replaces it in each test


@pytest.fixture(autouse=True, params=STRUCTURES)
def structure(request, monkeypatch):
    """Every test runs under each structure (the backend alone would pick one)."""
    monkeypatch.setattr(associative, "_structure", lambda leaves: request.param)
    return request.param
RTOL = {np.float32: 2e-5, np.float64: 1e-12, np.complex64: 2e-5, np.complex128: 1e-12}


def add(x, y):
    return x + y


def mul(x, y):
    return x * y


def affine(e1, e2):
    """(a1, b1) then (a2, b2): the map h -> a2 * (a1 * h + b1) + b2."""
    (a1, b1), (a2, b2) = e1, e2
    return a1 * a2, a2 * b1 + b2


def matprod(x, y):
    return x @ y


def dict_affine(e1, e2):
    a, b = affine((e1["a"], e1["b"]), (e2["a"], e2["b"]))
    return {"a": a, "b": b}


def sequential(fn, elems, reverse=False, axis=0):
    """The definition: sl.scan from the first element (the last with reverse), carry =
    fn(carry, x), each output the carry after its step."""
    leaves, treedef = pytree.flatten(elems)
    leaves = [sl.moveaxis(sl.as_tensor(x), axis, 0) for x in leaves]
    T = leaves[0].shape[0]
    pick = (lambda x: x[T - 1]) if reverse else (lambda x: x[0])
    rest = (lambda x: x[:T - 1]) if reverse else (lambda x: x[1:])
    first = pytree.unflatten(treedef, [pick(x) for x in leaves])
    xs = pytree.unflatten(treedef, [rest(x) for x in leaves])

    def body(carry, x):
        carry = fn(carry, x)
        return carry, carry

    _, ys = sl.scan(body, first, xs, reverse=reverse)
    firsts, ys = pytree.flatten(first)[0], pytree.flatten(ys)[0]
    joined = [sl.concatenate([y, f[None]] if reverse else [f[None], y]) for f, y in
              zip(firsts, ys)]
    return pytree.unflatten(treedef, [sl.moveaxis(x, 0, axis) for x in joined])


def assert_trees_close(got, want, rtol, atol=0.0):
    got_leaves, got_def = pytree.flatten(got)
    want_leaves, want_def = pytree.flatten(want)
    assert got_def == want_def
    for g, w in zip(got_leaves, want_leaves):
        assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol)


def make_case(name, backend, rng, T, dtype=np.float64, axis=0, lead=(3,)):
    """(fn, elems) with the scanned axis of length T at position `axis` of lead + (T,) ..."""

    def arr(*extra, low=None, high=None, kind=dtype):
        shape = list(lead) + list(extra)
        shape.insert(axis if axis >= 0 else len(shape) + 1 + axis, T)
        if low is not None:
            x = rng.uniform(low, high, shape)
        else:
            x = rng.standard_normal(shape)
        if np.dtype(kind).kind == "c":
            x = x * np.exp(1j * rng.uniform(0, 2 * np.pi, shape))
        return backend.tensor(x.astype(kind))

    if name == "add":
        return add, arr()
    if name == "multiply":
        return mul, arr(low=0.5, high=1.5)
    if name == "max":
        return sl.maximum, arr()
    if name == "affine":
        return affine, (arr(low=0.5, high=1.0), arr())
    if name == "affine-complex":
        kind = np.complex64 if dtype == np.float32 else np.complex128
        return affine, (arr(low=0.5, high=1.0, kind=kind), arr(kind=kind))
    if name == "dict-affine":
        return dict_affine, {"a": arr(low=0.5, high=1.0), "b": arr()}
    raise ValueError(name)


OPS = ("add", "multiply", "max", "affine", "affine-complex", "dict-affine")


def test_the_backend_picks_the_structure(backend):
    want = "sequential" if backend.name == "numpy" else "odd-even"
    assert PICK([backend.tensor(np.ones(4))]) == want


# --- values against the sequential scan -----------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("T", LENGTHS)
@pytest.mark.parametrize("op", OPS)
def test_matches_sequential_scan(backend, rng, op, T, reverse, dtype):
    fn, elems = make_case(op, backend, rng, T, dtype)
    got = sl.associative_scan(fn, elems, reverse=reverse)
    want = sequential(fn, elems, reverse=reverse)
    rtol = RTOL[dtype]
    assert_trees_close(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("op", ["affine", "affine-complex", "max"])
def test_axis(backend, rng, op, axis, reverse):
    fn, elems = make_case(op, backend, rng, 7, axis=axis, lead=(3, 2))
    leaf = pytree.flatten(elems)[0][0]
    assert leaf.shape[axis] == 7
    got = sl.associative_scan(fn, elems, reverse=reverse, axis=axis)
    assert_trees_close(got, sequential(fn, elems, reverse=reverse, axis=axis), rtol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("T", LENGTHS)
def test_matrix_products_keep_their_order(backend, rng, T, reverse):
    # 2x2 products do not commute: a swapped operand or a wrong reverse shows here.
    x = backend.tensor(rng.standard_normal((T, 2, 2)) / 1.5 + np.eye(2))
    got = sl.associative_scan(matprod, x, reverse=reverse)
    want = sequential(matprod, x, reverse=reverse)
    assert_trees_close(got, want, rtol=1e-11, atol=1e-12)
    mats = backend.numpy(x)
    order = range(T - 1, -1, -1) if reverse else range(T)
    prod, direct = np.eye(2), []
    for t in order:
        prod = prod @ mats[t]
        direct.append(prod)
    direct = np.stack(direct[::-1] if reverse else direct)
    np.testing.assert_allclose(backend.numpy(got), direct, rtol=1e-11, atol=1e-12)


def test_matrix_products_along_axis_1(backend, rng):
    x = backend.tensor(rng.standard_normal((2, 9, 2, 2)) / 1.5 + np.eye(2))
    got = sl.associative_scan(matprod, x, axis=1)
    assert_trees_close(got, sequential(matprod, x, axis=1), rtol=1e-11, atol=1e-12)


def test_linear_recurrence_with_initial_state(backend, rng):
    # The docs' recipe: fold h_0 into the first b, then h_t = B_t.
    T, h0 = 33, backend.tensor(rng.standard_normal(4))
    a = backend.tensor(rng.uniform(0.5, 1.0, (T, 4)))
    b = backend.tensor(rng.standard_normal((T, 4)))
    b_folded = sl.concatenate([(a[0] * h0 + b[0])[None], b[1:]])
    _, h = sl.associative_scan(affine, (a, b_folded))
    _, loop = sl.scan(lambda c, x: (x[0] * c + x[1],) * 2, h0, (a, b))
    np.testing.assert_allclose(backend.numpy(h), backend.numpy(loop), rtol=1e-12)


def test_docs_worked_example():
    A, h = sl.associative_scan(affine, (sl.tensor([0.5, 2.0, 1.0]), sl.tensor([1.0, 1.0, 3.0])))
    np.testing.assert_allclose(h.numpy(), [1.0, 3.0, 6.0])
    np.testing.assert_allclose(A.numpy(), [0.5, 1.0, 1.0])


def test_dtypes_and_arrays(backend, rng):
    x = backend.array(rng.integers(-5, 5, 10), dtype=np.int32)  # a raw array, int32
    got = sl.associative_scan(add, x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(backend.numpy(got), np.cumsum(backend.numpy(x)))
    y = backend.tensor(rng.standard_normal(10).astype(np.float32))
    assert sl.associative_scan(add, y).dtype == np.float32


def test_length_zero_and_namedtuple(backend, rng):
    empty = backend.tensor(np.zeros((0, 3)))
    assert sl.associative_scan(add, empty).shape == (0, 3)
    from collections import namedtuple

    Pair = namedtuple("Pair", ["a", "b"])
    p = Pair(backend.tensor(rng.uniform(0.5, 1, 8)), backend.tensor(rng.standard_normal(8)))
    got = sl.associative_scan(lambda x, y: Pair(*affine(x, y)), p)
    assert isinstance(got, Pair)
    assert_trees_close(got, sequential(lambda x, y: Pair(*affine(x, y)), p), rtol=1e-12)


def test_inside_a_scan_body(backend, rng):
    xs = backend.tensor(rng.standard_normal((4, 5)))

    def body(c, x):
        return c + sl.sum(sl.associative_scan(add, x)), c

    c, _ = sl.scan(body, backend.tensor(0.0), xs)
    want = np.cumsum(backend.numpy(xs), axis=1).sum()
    np.testing.assert_allclose(backend.numpy(c), want, rtol=1e-12)


# --- gradients ------------------------------------------------------------------------------
def _weighted(tree, weights):
    return sum(sl.sum(sl.real(leaf * w)) for leaf, w in zip(pytree.flatten(tree)[0], weights))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("T", [1, 2, 3, 8, 33])
@pytest.mark.parametrize("op", OPS)
def test_gradients_match_sequential_scan(backend, rng, op, T, reverse):
    fn, elems = make_case(op, backend, rng, T)
    weights = [backend.tensor(rng.standard_normal(leaf.shape)) for leaf in pytree.flatten(
        elems)[0]]

    def loss(scan_fn):
        return lambda e: _weighted(scan_fn(fn, e, reverse=reverse), weights)

    got = sl.grad(loss(sl.associative_scan))(elems)
    want = sl.grad(loss(sequential))(elems)
    assert_trees_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("op,T,axis", [("affine", 7, 0), ("affine-complex", 8, 1),
                                       ("multiply", 3, -1), ("dict-affine", 33, 0),
                                       ("add", 2, 0)])
def test_gradients_finite_differences_second_order(rng, op, T, axis, reverse):
    fn, elems = make_case(op, _NUMPY, rng, T, axis=axis, lead=(2,))
    check_grads(lambda e: sl.associative_scan(fn, e, reverse=reverse, axis=axis), (elems,),
                order=2, rtol=1e-5)


def test_matrix_product_gradients(backend, rng):
    x = backend.tensor(rng.standard_normal((7, 2, 2)) / 1.5 + np.eye(2))
    w = backend.tensor(rng.standard_normal((7, 2, 2)))
    got = sl.grad(lambda m: sl.sum(sl.associative_scan(matprod, m, reverse=True) * w))(x)
    want = sl.grad(lambda m: sl.sum(sequential(matprod, m, reverse=True) * w))(x)
    np.testing.assert_allclose(backend.numpy(got), backend.numpy(want), rtol=1e-10)
    check_grads(lambda m: sl.associative_scan(matprod, m), (backend.numpy(x),), order=2)


def test_second_order_matches_sequential_scan(backend, rng):
    fn, elems = make_case("affine", backend, rng, 9)
    v = [backend.tensor(rng.standard_normal(leaf.shape)) for leaf in elems]

    def hvp(scan_fn):
        g = sl.grad(lambda e: sl.sum(scan_fn(fn, e)[1] ** 2))
        return sl.grad(lambda e: _weighted(g(e), v))(elems)

    assert_trees_close(hvp(sl.associative_scan), hvp(sequential), rtol=1e-10, atol=1e-12)


# --- errors ---------------------------------------------------------------------------------
def test_leaves_of_different_lengths_name_both_paths():
    with pytest.raises(ValueError, match=r"elems\['a'\] has 5.*elems\['b'\] has 4"):
        sl.associative_scan(dict_affine, {"a": np.ones(5), "b": np.ones(4)})


def test_empty_elems():
    for elems in ((), {}, None, [[]]):
        with pytest.raises(ValueError, match="holds no arrays"):
            sl.associative_scan(add, elems)


def test_axis_out_of_range():
    with pytest.raises(ValueError, match=r"axis 2 is out of range.*elems\[1\] has shape"):
        sl.associative_scan(affine, (np.ones((3, 4, 2)), np.ones((3, 4))), axis=2)
    with pytest.raises(ValueError, match="out of range"):
        sl.associative_scan(add, np.ones((3, 4)), axis=-3)
    with pytest.raises(ValueError, match="out of range"):
        sl.associative_scan(add, np.float64(1.0))
    with pytest.raises(ValueError, match="different numbers of dimensions"):
        sl.associative_scan(affine, (np.ones((3, 4)), np.ones(4)), axis=-1)
    with pytest.raises(TypeError, match="one int"):
        sl.associative_scan(add, np.ones((3, 4)), axis=(0, 1))


def test_fn_that_breaks_the_contract(structure):
    with pytest.raises(TypeError, match="structure of elems"):
        sl.associative_scan(lambda x, y: x[0] * y[0], (np.ones(4), np.ones(4)))
    with pytest.raises(TypeError, match=r"keep each leaf's dtype.*elems\b"):
        sl.associative_scan(lambda x, y: (x + y).astype(np.float32), np.ones(4))
    summing = lambda x, y: sl.sum(x + y, axis=0, keepdims=True)  # noqa: E731
    if structure == "odd-even":
        with pytest.raises(TypeError, match="elementwise along axis 0"):
            sl.associative_scan(summing, np.ones(4))
    else:  # fn sees pieces of length 1, where this sum changes nothing: the definition
        np.testing.assert_array_equal(sl.associative_scan(summing, np.ones(4)).numpy(),
                                      [1, 2, 3, 4])


# --- JAX, where installed --------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True])
def test_matches_jax(rng, reverse):
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):  # for this test only: a global switch leaks
        x = rng.standard_normal((8, 2, 2)) / 1.5 + np.eye(2)
        a, b = rng.uniform(0.5, 1, (11, 3)), rng.standard_normal((11, 3))
        want_m = jax.lax.associative_scan(lambda p, q: p @ q, x, reverse=reverse)
        want_a = jax.lax.associative_scan(affine, (a, b), reverse=reverse, axis=0)
        np.testing.assert_allclose(sl.associative_scan(matprod, x, reverse=reverse).numpy(),
                                   np.asarray(want_m), rtol=1e-12)
        for g, w in zip(sl.associative_scan(affine, (a, b), reverse=reverse), want_a):
            np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-12)


class _NumpyBackend:
    """The NumPy backend outside the fixture (finite differences need NumPy data)."""

    @staticmethod
    def tensor(x):
        return np.asarray(x)


_NUMPY = _NumpyBackend()
