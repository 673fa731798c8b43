"""The numba rules' loop nests (scanlib/scan/loop/native_nests.py): float elementwise work,
where, sums, max and min, and row stores written as `for` loops over scalars. Each body must
agree with the Python loop and the NumPy loop in values, dtypes and gradients (test_numba_loop's
check), NaN and the sign of zero included, and its kernel must really hold the nests."""

import re
import types

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import scanlib as sl
from scanlib.scan.api import prepare
from scanlib.scan.executor import compiled
from scanlib.scan.loop import native
from scanlib.scan.loop import native_nests as nests
from test_numba_loop import RNG, _t, check


def kernel_source(f, init, xs):
    body, *_ = prepare(f, init, xs, None, False, 0)
    return compiled(body, 1, 1, False, (), "numba").native.kernel_source


def test_broadcast_elementwise_where_and_reductions_over_several_axes():
    K = _t((3, 4))

    def f(c, x):  # c [2, 3], x [2, 3, 4]
        a = c[:, :, None] + K * x  # broadcasting from both sides
        a = sl.where(a > 0.1, sl.exp(-a), a * 0.5)
        s = sl.sum(a, axis=(0, 2))
        m = sl.max(a, axis=1, keepdims=True)
        n = sl.min(a, axis=(1, 2))
        return c * 0.9 + s * 0.01 + n[:, None] * 0.1, (m, sl.sum(a))

    # (reverse scans over nests: test_native_nests_adversarial's broadcasting and matmul tests)
    check(f, _t((2, 3)), _t((6, 2, 3, 4)))
    src = kernel_source(f, _t((2, 3)), _t((6, 2, 3, 4)))
    assert "_e = " in src and "for _i2 in range(4):" in src
    assert "np.where(" not in src and "np.sum(" not in src and "_rows_extreme(" not in src


def test_float32_stays_float32_in_the_nests():
    def f(c, x):
        h = sl.tanh(c * x + 0.5) - sl.where(x < 0, x, 0.25 * x)
        return h, (sl.sum(h * h, axis=0, keepdims=True), sl.max(h))

    check(f, _t(5, "float32"), _t((9, 5), "float32"), rtol=2e-5)
    src = kernel_source(f, _t(5, "float32"), _t((9, 5), "float32"))
    assert "np.empty((5,), np.float32)" in src


def test_nan_wins_max_and_min_and_a_zero_sum_keeps_numpys_sign():
    def f(c, x):  # c [2, 3]
        return c, (sl.max(c + x, axis=1), sl.min(c + x, axis=0), sl.sum(c * x, axis=1))

    init = sl.tensor(np.array([[np.nan, 1.0, 2.0], [0.0, -0.0, 3.0]]))
    xs = sl.tensor(np.array([[[1.0, np.nan, 0.0], [-0.0, 0.0, -1.0]],
                             [[0.0, 0.0, 0.0], [-0.0, -0.0, -0.0]]]))
    f2 = lambda c, x: (c, (sl.sum(x, axis=1), sl.max(x, axis=0)))  # noqa: E731
    for fn in (f, f2):
        want = sl.scan(fn, init, xs)
        got = sl.scan(fn, init, xs, compiler="numba")
        for k, (g, w) in enumerate(zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0])):
            np.testing.assert_array_equal(g.numpy(), w.numpy())  # NaN where NaN
            if fn is f2 and k == 1:  # a sum: NumPy's zero (a max's is its SIMD lanes' choice)
                np.testing.assert_array_equal(np.signbit(g.numpy()), np.signbit(w.numpy()))


def test_integer_work_keeps_numpys_calls():
    def f(c, x):  # int32: numba's scalar arithmetic would be int64
        return sl.where(c > 0, c + x, c * 2 + 1), c

    init = sl.tensor(np.arange(3, dtype=np.int32))
    xs = sl.tensor(np.arange(12, dtype=np.int32).reshape(4, 3) - 5)
    got = sl.scan(f, init, xs, compiler="numba")
    want = sl.scan(f, init, xs)
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    src = kernel_source(f, init, xs)
    assert "_e = " not in src and "np.where(" in src


def test_a_nest_element_of_another_dtype_is_not_proved():
    kernel = native.NativeKernel(types.SimpleNamespace(), {"v1_0": (np.dtype("float32"), 2)},
                                 "body")
    kernel._check({"v1_0": numba.types.Array(numba.float32, 2, "C"),
                   "v1_0_e": numba.float32})  # the graph's dtype: proved
    with pytest.raises(native.NotProved, match="v1_0_e"):
        kernel._check({"v1_0_e.1": numba.float64})


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-12), ("float32", 2e-5)])
def test_matmuls_of_every_rank_reshapes_and_broadcasts(dtype, rtol):
    W, V, u = _t((3, 3), dtype, 0.5), _t((2, 3, 3), dtype, 0.5), _t(3, dtype)

    def f(c, x):  # c [2, 3], x [3]
        h = sl.tanh(c @ W + x)  # [2, 3] @ [3, 3]
        b = (h[:, None, :] @ V)[:, 0, :]  # batched, broadcast batch axes
        v = W @ x + x @ W + (u @ x) * x  # matrix-vector, vector-matrix, vector-vector
        r = sl.reshape(b.T, (2, 3)) + sl.broadcast_to(v, (2, 3))
        return r * 0.5, (sl.reshape(h, (6,)), V @ W)

    check(f, _t((2, 3), dtype), _t((7, 3), dtype), rtol=rtol)
    src = kernel_source(f, _t((2, 3), dtype), _t((7, 3), dtype))
    assert "for _k in range(3):" in src
    assert "np.broadcast_to(" not in src and ".reshape(" not in src and " @ " not in src


def test_a_batched_matmul_of_more_than_a_nests_work_is_a_nest():
    # vmap's `X @ w` over chains: [n, d] @ [chains, d, 1], 5,120 multiply-adds; numba's @
    # has no batch axes, so it is a nest, where it used to fall back.
    X = _t((128, 10), scale=0.3)

    def f(w, x):  # w [4, 10]
        logits = (X @ w[:, :, None])[:, :, 0]  # [4, 128]
        return w + 0.1 * (sl.tanh(logits) @ X) + x, logits.sum(axis=1)

    check(f, _t((4, 10)), _t((3, 10)))
    assert "for _k in range(10):" in kernel_source(f, _t((4, 10)), _t((3, 10)))


def test_a_stack_of_rows_times_a_matrix_is_one_blas_product():
    """A GRU's hidden state [16, 1, 64] times its [64, 192] weights (196,608 multiply-adds):
    the rows as one [16, 64] matrix through numba's @ (BLAS), reshaped, rather than a nest;
    its cotangent [16, 1, 192] @ [192, 64] too. The step is then a kernel, not the NumPy
    loop (which the nest's estimated cost had chosen)."""
    W = _t((64, 192), scale=0.1)

    def f(h, x):  # h [16, 1, 64]: a GRU cell's arithmetic, without its tanh and sigmoids
        z = h @ W  # [16, 1, 192]
        r, u = z[..., :64] * x + 0.5, z[..., 64:128] * 0.25 - x
        n = sl.maximum(z[..., 128:] * r + x, -1.0)
        return (1.0 - u) * n * 0.1 + u * h * 0.1, sl.sum(z)

    check(f, _t((16, 1, 64), scale=0.3), _t((5, 16, 1, 64)))
    src = kernel_source(f, _t((16, 1, 64)), _t((5, 16, 1, 64)))
    assert ".reshape((16, 64)) @ np.ascontiguousarray(" in src and "for _k in range(64)" \
        not in src


def test_a_steps_temporary_arrays_are_allocated_once_unless_something_outlives_it():
    def f(c, x):
        a = c + x  # read twice, so an array of its own: allocated once
        b = sl.tanh(a) * a
        r = b[0]  # a view of b, read by elements only: b is allocated once too
        return c * r + b, sl.sum(r)  # the carry's array: the next step reads it

    def g(c, x):  # c [3]
        a = c + x
        d = sl.exp(a) * a
        return d[1], sl.sum(d[0])  # a view of d the next carry: d is allocated per step

    check(f, _t((2, 3)), _t((5, 2, 3)))
    check(g, _t((3,)), _t((5, 2, 3)))
    src = kernel_source(f, _t((2, 3)), _t((5, 2, 3))).split("def kernel(")[1]
    once = re.findall(r"^    (\w+) = np\.empty", src, re.M)
    per_step = re.findall(r"^        (\w+) = np\.empty", src, re.M)
    doubled = [n for n in once if n.endswith(("_even", "_odd"))]  # the carry's two arrays
    once = [n for n in once if n not in doubled]
    assert len(once) == 2 and len(doubled) == 2 and not per_step
    assert re.search(rf"^        \w+ = ({'|'.join(once)})\[0\]$", src, re.M)  # the view
    carry = doubled[0].removesuffix("_even")
    assert re.search(rf"^        {carry} = {carry}_even if t % 2 == 0 else {carry}_odd$",
                     src, re.M)
    assert re.search(rf"^        c0 = {carry}$", src, re.M)  # the carry
    src = kernel_source(g, _t((3,)), _t((5, 2, 3))).split("def kernel(")[1]
    per_step = re.findall(r"^        (\w+) = np\.empty", src, re.M)
    view = re.search(rf"^        (\w+) = ({'|'.join(per_step)})\[1\]$", src, re.M)
    assert view and re.search(rf"^        c0 = {view[1]}\.copy\(\)$", src, re.M)


def test_a_carry_passed_through_is_not_copied_at_each_step():
    def f(carry, x):
        c, k = carry  # k unchanged: the next value is its own array, which nothing writes
        return (c * k + x, k), sl.sum(c)

    init, xs = (_t((2, 3)), _t((2, 3))), _t((5, 2, 3))
    check(f, init, xs)
    body, *_ = prepare(f, init, xs, None, False, 0)
    src = compiled(body, 2, 1, False, (), "numba").native.kernel_source
    assert re.search(r"^        c0, c1 = \w+, s1$", src, re.M), src


def test_broadcasts_fills_and_unit_axis_reshapes_are_read_in_their_readers_nests():
    def f(c, x):  # c [2], x [3, 2]
        b = sl.broadcast_to(c, (3, 2))  # read as c[_i1]
        s = sl.broadcast_to(sl.sum(c), (3, 2))  # read as the sum itself
        y = x * b + s
        z = sl.reshape(x, (3, 1, 2)) * sl.reshape(y, (3, 1, 2))  # y read as y[_i0, _i2]
        return c * 0.5 + sl.sum(z, axis=(0, 1)), z

    check(f, _t((2,)), _t((5, 3, 2)))
    src = kernel_source(f, _t((2,)), _t((5, 3, 2))).split("def kernel(")[1]
    assert re.search(r"^ +\w+_e = s0\[_i1\]$", src, re.M), src
    assert re.search(r"^ +\w+_e = (\w+)$", src, re.M), src
    assert re.search(r"^ +\w+_e = \w+\[_i0, _i2\]$", src, re.M), src
    assert src.count("np.empty(") == 5, src  # y, z, its sum, the next carry's two: no copies


def test_chains_of_reshapes_and_broadcasts_are_read_as_one_index():
    def f(c, x):  # c [2], x [3, 2]
        r = sl.broadcast_to(sl.reshape(c, (1, 2)), (3, 2))  # reshape, then broadcast
        q = sl.reshape(sl.broadcast_to(c, (3, 2)), (3, 1, 2))  # broadcast, then reshape
        u = sl.reshape(sl.reshape(c, (2, 1)), (1, 2, 1))  # two reshapes, then a sum
        y = x * r + sl.reshape(q, (3, 2)) + sl.sum(u)
        return c * 0.5 + sl.sum(y, axis=0), y

    check(f, _t((2,)), _t((5, 3, 2)))
    src = kernel_source(f, _t((2,)), _t((5, 3, 2))).split("def kernel(")[1]
    assert len(re.findall(r"^ +\w+_e = s0\[_i1\]$", src, re.M)) == 3, src
    assert src.count("np.empty(") == 5, src  # u (the sum's), y, y's sum, the next carry's 2


@pytest.mark.parametrize("use, hoisted", [
    ("y = a[i, j] + 1.0", True), ("a[i, j] = 2.0", True), ("a[(k // 1) % 2, j] += 1.0", True),
    ("y = a[0]", True), ("y = a[i, :]", True), ("y = a[None, i]", True),  # views read nowhere
    ("y = a[..., i]", False), ("y = f(a)", False), ("y = a.copy()", False), ("y = a", False),
    ("a = b", False), ("y = np.ravel(a)[0]", True), ("y = np.ravel(a)", False)])
def test_which_allocations_move_to_the_top(use, hoisted):
    lines = ["    for t in range(3):", "        a = np.empty((2, 2), np.float64)",
             f"        {use}"]
    moved = ["    a = np.empty((2, 2), np.float64)", lines[0], lines[2]]
    assert nests.hoist_buffers(lines) == (moved if hoisted else lines)


@pytest.mark.parametrize("uses, hoisted", [
    (["v = a[::, 0]", "y = v[i] + 1.0"], True),  # a view read by elements
    (["v = a.T", "w = v[None, ::]", "y = w[0, i, j]"], True),  # a view of a view
    (["v = a[::, 0]", "v[i] = 1.0"], True),  # written through a view (a scatter's slice)
    (["v = a.T", "w = v[None, ::]", "w[0, i, j] += 1.0"], True),
    (["v = a[0]", "v[i] //= 2"], True), (["v = a[0]", "v[i] **= 2"], True),
    (["v = np.ascontiguousarray(a).reshape((4,))", "y = v[i]"], True),  # the flat read
    (["v = np.ascontiguousarray(a).reshape((4, 1))", "y = f(v[i])"], False),  # a row
    (["v = np.ascontiguousarray(a).reshape((4,))", "y = g(v)"], False),  # passed on
    (["v = np.ascontiguousarray(a).reshape((4,))", "c0, = v,"], False),  # a carry
    (["v = np.ascontiguousarray(a)", "y = v[i, j]"], False),  # not a reshape: not proved
    (["v = a[0]", "y = v[i] == 1.0"], True),  # a comparison, not a write
    (["v = a[1]", "y = v[i, j]"], False),  # the view's rank is 1: a slice of it
    (["v = a[::, 0]", "y = v"], False),  # the view held by another name
    (["v = a[::, 0]", "c0, c1, = v, y,"], False),  # the view a carry
    (["v = a[::, 0]", "y = v[i]", "v = b"], False),  # the view's name assigned again
    (["v = a[::, 0]", "w = v[::, None]", "y = g(w)"], False),  # a view of it passed on
    (["v = a[idx]", "y = v[i]"], True), (["v = a[1:, ::2]", "y = v[i, j]"], True)])
def test_an_allocation_read_through_views_moves_only_if_every_view_is_read_by_elements(
        uses, hoisted):
    lines = ["    for t in range(3):", "        a = np.empty((2, 2), np.float64)",
             *(f"        {u}" for u in uses)]
    moved = ["    a = np.empty((2, 2), np.float64)", lines[0], *lines[2:]]
    assert nests.hoist_buffers(lines) == (moved if hoisted else lines)


_STEP = ["    c = k.copy()", "    for t3 in range(5):", "        s = c",
         "        v = np.empty((2, 2), np.float64)", "        for _i in range(2):",
         "            for _j in range(2):", "                v[_i, _j] = s[_i, _j] * 2.0"]


@pytest.mark.parametrize("extra, after, doubled", [
    ([], [], True),
    (["        y = v[0, 1] + s[1, 1]", "        r[t3] = v[1, 0]"], [], True),  # read by elements
    (["        w = v[::, 0]"], [], False),  # a view of it: not proved
    (["        y = g(v)"], [], False),  # passed on
    (["        v = s"], [], False),  # assigned again
    ([], ["    z = v[0, 0]"], False),  # read after the loop, where its array is reused
    (["        d = v"], [], False),  # held by another name
])
def test_a_next_carry_made_at_every_step_is_written_into_two_arrays(extra, after, doubled):
    lines = _STEP + extra + ["        c, = v,"] + after
    got = nests.double_buffer_carries(lines)
    if not doubled:
        assert got == lines
        return
    assert got[:2] == ["    c = k.copy()", "    v_even = np.empty((2, 2), np.float64)"]
    assert got[2] == "    v_odd = np.empty((2, 2), np.float64)"
    assert got[5] == "        v = v_even if t3 % 2 == 0 else v_odd"
    assert got[6:] == lines[4:]


@pytest.mark.parametrize("update, doubled", [
    ("        c0 = v", True), ("        c1, c0 = s, v", True),  # a per-scan kernel's carries
    ("        d = v", False),  # a last line that sets no carry
    ("        c0 = v.copy()", False)])
def test_a_per_scan_kernels_next_carry_is_written_into_two_arrays(update, doubled):
    lines = ["    for t in range(t1 - 1, t0 - 1, -1):", *_STEP[2:], update]
    got = nests.double_buffer_carries(lines)
    if not doubled:
        assert got == lines
        return
    assert got[:2] == ["    v_even = np.empty((2, 2), np.float64)",
                       "    v_odd = np.empty((2, 2), np.float64)"]
    assert got[2:4] == lines[:2]
    assert got[4] == "        v = v_even if t % 2 == 0 else v_odd"
    assert got[5:] == lines[3:]


@pytest.mark.parametrize("steps", [1, 2, 7, 40])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_a_per_scan_kernels_carries_alternate_between_two_arrays(steps, reverse, monkeypatch):
    """Each call of an eager numba kernel (one per chunk: chunks of 16 steps here) writes even
    steps' next carry into one array and odd steps' into the other; the carry read through a
    view, passed through, and kept in ys. Values and gradients are the loop's, forward and
    reverse, over odd and even lengths."""
    from scanlib.scan import executor

    monkeypatch.setattr(executor, "CHUNK_BYTES", 1)
    W = _t((3, 3), scale=0.5)

    def f(c, x):
        h, k = c
        h = sl.tanh(h[::-1] @ W + x * k)
        return (h, k), (h * 2.0, h[:2].sum())

    check(f, (_t(3), _t(3)), _t((steps, 3)), reverse)
    src = kernel_source(f, (_t(3), _t(3)), _t((steps, 3)))
    assert re.search(r"^ +(\w+) = \1_even if t % 2 == 0 else \1_odd$", src, re.M), src


def test_double_buffered_carries_come_in_the_updates_order():
    """The kernel's source is its cache key: the same in every process (a set's order
    changes with the hash seed, and a warm cache would then recompile)."""
    names = ["v9", "v3", "v12", "v5", "v7", "v1"]
    lines = ["    for t2 in range(4):"]
    for n in names:
        lines += [f"        {n} = np.empty((2,), np.float64)", f"        {n}[0] = 1.0",
                  f"        {n}[1] = 2.0"]
    lines += ["        " + "".join(f"c{i}, " for i in range(len(names))).rstrip() + " = "
              + "".join(f"{n}, " for n in names).rstrip()]
    got = nests.double_buffer_carries(lines)
    made = [line.split(" = ")[0].strip() for line in got[:2 * len(names)]]
    assert made == [f"{n}_{parity}" for n in names for parity in ("even", "odd")]


def test_next_carries_made_deeper_large_or_in_a_while_loop_keep_their_allocation():
    deeper = ["    for t3 in range(5):", "        if t3:",
              "            v = np.empty((2,), np.float64)", "            v[0] = 1.0",
              "            v[1] = 2.0", "        c, = v,"]
    large = [line.replace("(2, 2)", "(64, 64)") for line in _STEP] + ["        c, = v,"]
    loop = [line.replace("for t3 in range(5):", "while True:") for line in _STEP] + [
        "        c, = v,"]
    for lines in (deeper, large, loop):
        assert nests.double_buffer_carries(lines) == lines


def test_allocations_made_once_anyway_or_large_stay_where_they_are():
    top = ["    a = np.empty((2, 2), np.float64)", "    for t in range(3):",
           "        y = a[0, 1]"]
    large = ["    for t in range(3):", "        a = np.empty((40, 40), np.float64)",
             "        y = a[0, 1]"]
    assert nests.hoist_buffers(top) == top and nests.hoist_buffers(large) == large


def test_complex_elementwise_work_in_nests():
    lam = sl.tensor(np.array([0.9 + 0.1j, 0.5 - 0.4j, -0.3 + 0.8j]))

    def f(c, x):  # an LRU's diagonal complex recurrence, [2, 3]
        h = lam * c + x * (1.0 - lam) / (1.0 + 0.5j)
        return h, sl.real(h * sl.conj(h)) + sl.exp(h).imag

    init = sl.tensor(np.ones((2, 3)) * (0.5 + 0.5j))
    xs = sl.tensor(RNG.standard_normal((5, 2, 3)) + 1j * RNG.standard_normal((5, 2, 3)))
    got = sl.scan(f, init, xs, compiler="numba")
    want = sl.scan(f, init, xs)
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-13, atol=1e-13)
    assert " = np.empty((2, 3), np.complex128)" in kernel_source(f, init, xs)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_elementwise_work_is_computed_in_its_one_readers_nest(dtype):
    W = _t((3, 3), dtype, scale=0.5)
    rtol = 1e-5 if dtype == "float32" else 1e-10

    def f(c, x):  # c [2, 3], x [2, 3]
        a = sl.tanh(c * 0.5 + x)  # two products fused into tanh, tanh into the next
        b = a * 2.0 - 1.0  # read twice: an array of its own
        u = (b + 1.0) @ W  # a product reads it: its own nest, written before the product
        v = sl.sum(sl.exp(b))  # a reduction reads it: the same
        w = sl.where(b > 0, b, -b) + x[0]  # a broadcast operand; where fused into the add
        return w * 0.5, (u, v, sl.softplus(-w), sl.sigmoid(w))

    check(f, _t((2, 3), dtype), _t((6, 2, 3), dtype), rtol=rtol)
    check(f, _t((2, 3), dtype), _t((6, 2, 3), dtype), reverse=True, rtol=rtol)
    src = kernel_source(f, _t((2, 3), dtype), _t((6, 2, 3), dtype))
    nest = src.split("np.tanh(")[0].rsplit("for _i0", 1)[1]  # tanh's loop
    assert nest.count("_e = ") == 3  # c * 0.5, its sum with x and tanh, in one loop


def test_a_fused_operand_whose_reader_writes_no_nest_is_written_apart():
    # float32 with float64 (a float64 result): no nest, so the fused operand is computed
    # into an array of its own before it
    y = _t((2, 3))

    def f(c, x):  # c, x float32
        a = sl.exp(c * x)
        return c * 0.5, a + y

    check(f, _t((2, 3), "float32"), _t((5, 2, 3), "float32"), rtol=1e-6)


def test_sigmoid_and_softplus_of_a_value_and_its_negations_share_one_exp():
    def f(c, x):
        z = c * x
        ll = sl.softplus(z) * 0.3 - sl.softplus(-z)  # a logistic regression's terms
        g = sl.sigmoid(z) - sl.sigmoid(sl.negative(sl.negative(-z)))
        return c + 0.1 * g + sl.sigmoid(c), ll

    check(f, _t((2, 3)), _t((5, 2, 3)))
    body = kernel_source(f, _t((2, 3)), _t((5, 2, 3))).split("def kernel(")[1]
    assert body.count("np.exp(-np.abs(") == 1 and body.count("_sigmoid1(") == 1  # sigmoid(c)
    assert body.count("_sigmoid_from(") == 2


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_softplus_and_sigmoid_at_infinities_nan_and_signed_zeros(dtype):
    edge = np.array([-np.inf, -800.0, -1.0, -0.0, 0.0, 1.0, 800.0, np.inf, np.nan], dtype)

    def f(c, x):  # softplus(-inf) is 0 (it was NaN in the kernel)
        z = x * (c * 0 + 1)  # x itself, computed in the step (work on x alone is hoisted)
        ys = (sl.softplus(z), sl.softplus(-z), sl.sigmoid(z), sl.sigmoid(-z))
        total = sum(sl.sum(y) for y in ys)  # the carry reads them: computed in the kernel
        return sl.where(total == total, c, c), ys

    init, xs = sl.tensor(np.ones((), dtype)), sl.tensor(np.tile(edge, (3, 1)))
    before = native.STATS["kernel calls"]
    with np.errstate(over="ignore"):
        got = sl.scan(f, init, xs, compiler="numba")
        want = sl.scan(f, init, xs)
    assert native.STATS["kernel calls"] > before
    for g, w in zip(got[1], want[1]):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=0)


def test_all_and_any_of_a_stack_of_scalars_read_the_scalars():
    """all / any over a stack of a step's scalars (a while_loop's `all(stack([t < T, ...]))`)
    reads the scalars: no array is made at every step. Nonzero is true, NaN included; a
    scalar of another dtype than the stack's (other than bool) keeps the array."""
    def f(c, x):  # c [3]: NaN, zero and negative zero pass through the steps
        a, b, z = c[0], c[1] * x, c[2] - x
        checks = [sl.all(sl.stack([a < 1.0, b > -2.0])), sl.any(sl.stack([a, z])),
                  sl.all(sl.stack([a, b, z])), sl.any(sl.stack([a > 0.5, z]))]
        y = sl.stack([k.astype("float64") for k in checks])
        return c * 0.5 + 0.0 * sl.sum(y), y  # (the carry reads them: in the step's kernel)

    init = sl.tensor(np.array([np.nan, 0.0, -0.0]))
    xs = sl.tensor(np.array([0.0, 1.5, -0.0, np.nan, 2.0]))
    want = sl.scan(f, init, xs)
    got = sl.scan(f, init, xs, compiler="numba")
    for g, w in zip(sl.pytree.flatten(got)[0], sl.pytree.flatten(want)[0]):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    src = kernel_source(f, init, xs)
    assert "np.all(" not in src and "np.any(" not in src, src
    assert src.count("np.array((") == 1, src  # y's own stack, which is stored

    def mixed(c, x):  # float32 beside float64: the stack casts, so its array is kept
        ok = sl.all(sl.stack([c.astype("float32") * x.astype("float32"), c * x]))
        return sl.where(ok, c * 0.5, c * 0.25), ok

    init, xs = sl.tensor(1e-30), sl.tensor(np.array([1e-30, 1.0, 1e-30]))
    assert "np.all(" in kernel_source(mixed, init, xs)
    np.testing.assert_array_equal(sl.scan(mixed, init, xs, compiler="numba")[1].numpy(),
                                  sl.scan(mixed, init, xs)[1].numpy())


def test_a_one_element_array_is_read_by_index_not_through_ravel():
    """reshape to 0-d (and the scatters' one-element values) read `x[0, 0]`: np.ravel built
    a view at every call, and its reference counts cost half of the adaptive ODE solver's
    kernel."""
    def f(c, x):  # c [2], x [1, 3]
        a = (c[0:1] * 2.0).reshape(())
        b = (x[:, 1:2] + c[1]).reshape(())
        z = sl.zeros(()).at[()].set((x[:, :1] * a).reshape((1,)))
        return c * 0.5 + a * b, z + sl.sum(x)

    check(f, _t(2), _t((5, 1, 3)))
    src = kernel_source(f, _t(2), _t((5, 1, 3)))
    assert "np.ravel(" not in src, src
    assert re.search(r"= \w+\[0, 0\]", src), src
