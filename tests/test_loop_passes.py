"""The loop compiler pass by pass: every stage of a body's LoopProgram, run by the program
interpreter, means what the body means (the step-by-step reference interpreter), so a pass
that changes a result is named; the generated loop means it too; each pass fires where it
should and not where it must not; and the verifier rejects broken programs.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

import scanlib as sl
from scanlib.scan.interpret import run_interpreted
from scanlib.scan.linearize import linearize
from scanlib.scan.loop import format_loop, stages, verify
from scanlib.scan.loop.interp import run_program
from test_scan_oracle import loop_scan as _loop  # scan's definition: the oracle
from scanlib.scan.loop.ir import (CHUNK, POST, PRE, STEP, InPlace, InvalidLoop, RunningSum,
                                  SumAtB, SumScatter, SumSteps, SumStepsAxes)

api = importlib.import_module("scanlib.scan.api")
executor = importlib.import_module("scanlib.scan.executor")


def random_inputs(graph, num_carry, T, rng):
    """Arrays for a body's carries, xs ([T, ...]) and constants, of their dtypes."""
    def make(shape, dtype):
        dtype = np.dtype(dtype)
        if dtype == np.bool_:
            return rng.random(shape) < 0.5
        if dtype.kind in "iu":
            return rng.integers(-3, 4, shape).astype(dtype)
        return rng.uniform(0.5, 1.5, shape).astype(dtype)

    init = [make(v.shape, v.dtype) for v in graph.invars[:num_carry]]
    xs = [make((T,) + v.shape, v.dtype) for v in graph.invars[num_carry:]]
    consts = [make(v.shape, v.dtype) for v in graph.constvars]
    return init, xs, consts


def assert_same(got, want, what):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, the loop's is {w.dtype}"
        if w.dtype.kind in "fc":
            tol = 1e-2 if w.dtype == np.float16 else 1e-5 if w.dtype == np.float32 else 1e-10
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def check_stages(graph, num_carry, reverse=False, sum_carries=(), Ts=(0, 1, 5, 17),
                 chunks=(1, 3, 16), seed=0):
    """Every stage through the program interpreter, and the generated loop, against the body
    run step by step."""
    rng = np.random.default_rng(seed)
    num_xs = len(graph.invars) - num_carry
    all_stages = stages(graph, num_carry, num_xs, reverse, sum_carries)
    for T in Ts:
        init, xs, consts = random_inputs(graph, num_carry, T, rng)
        carry, ys = run_interpreted(graph, T, init, xs, consts, reverse, num_carry)
        want = carry + ys
        for name, prog in all_stages:
            for chunk in chunks:
                got = run_program(prog, T, init, xs, consts, chunk)
                assert_same(got[0] + got[1], want,
                            f"after pass {name}, T={T}, chunk={chunk}\n{format_loop(prog)}")
        run = executor.CompiledBody(graph, num_carry, num_xs, reverse, sum_carries)
        got = run(T, list(init), list(xs), list(consts))
        assert_same(got[0] + got[1], want, f"the generated loop, T={T}\n{run.source}")
    return all_stages[-1][1]


def body_of(f, init, xs, reverse=False, length=None, dim=0):
    body, consts, init_t, xs_t, *_ = api.prepare(f, init, xs, length, reverse, dim)
    return body, len(init_t), consts, xs_t


def backward_of(f, init, xs, k_needs=None):
    body, nc, consts, xs_t = body_of(f, init, xs)
    k_needs = [True] * len(consts) if k_needs is None else k_needs
    lin = linearize(body, nc, [x.dtype.kind == "f" for x in xs_t], k_needs)
    return lin.bwd_body, lin.num_bwd_carry, lin.bwd_sum_carries


rng0 = np.random.default_rng(0)
W = sl.tensor(rng0.normal(0, 0.4, (4, 4)))
U = sl.tensor(rng0.normal(0, 0.4, (3, 4)))
Wg = sl.tensor(rng0.normal(0, 0.4, (4, 16)))
X = np.ones((6, 2, 3))
H = sl.zeros((2, 4))


def lstm(c, x):
    h, cell = c
    z = x @ U @ Wg[:4, :] * 0 + h @ Wg
    i, f, g, o = (sl.sigmoid(z[:, :4]), sl.sigmoid(z[:, 4:8]), sl.tanh(z[:, 8:12]),
                  sl.sigmoid(z[:, 12:]))
    cell = f * cell + i * g
    return (o * sl.tanh(cell), cell), o


E6 = sl.tensor(rng0.normal(0, 0.5, (6, 4)))
U16 = sl.tensor(rng0.normal(0, 0.4, (3, 16)))


def lstm_split(c, x):
    """The LSTM as research code writes it: one product, split into its four gates (the
    generated code slices them in place of split's call; its backward concatenates)."""
    h, cell = c
    i, f, g, o = sl.split(x @ U16 + h @ Wg, 4, axis=-1)
    cell = sl.sigmoid(f) * cell + sl.sigmoid(i) * sl.tanh(g)
    return (sl.sigmoid(o) * sl.tanh(cell), cell), o


def buffer_rnn(c, x):
    buf, h = c
    h = sl.tanh(h @ W + x[0] @ U)
    return (buf.at[x[1]].set(h), h), None


def buffer_read_add(c, x):
    buf, h = c
    h = sl.tanh(h @ W + buf[x[1] - 1] * h)  # last step's row, read before the write
    return (buf.at[x[1]].add(h), h), sl.sum(h)


# name -> (f, init, xs): a small corpus of the shapes the compiler specialises.
CORPUS = {
    "rnn": (lambda h, x: (sl.tanh(h @ W + x @ U),) * 2, H, X),
    "rnn_readout": (lambda h, x: (sl.tanh(h @ W + x @ U), sl.tanh(h @ W) @ W), H, X),
    "lstm": (lstm, (H, H), X),
    "lstm_split": (lstm_split, (H, H), X),
    "cumsum": (lambda c, x: (c + x,) * 2, 0.0, np.arange(6.0)),
    "linrec": (lambda h, x: (x[0] * h + x[1], h), np.zeros(3), (np.ones((6, 3)) * 0.5,
                                                                np.ones((6, 3)))),
    "acc_sum_h": (lambda c, x: ((c[0] + sl.sum(c[1]), sl.tanh(c[1] @ W + x @ U)), None),
                  (0.0, H), X),
    "lag": (lambda c, x: ((c[0] + x, c[0]), None), (0.0, 0.0), np.arange(1.0, 7.0)),
    "int8_acc": (lambda c, x: (c + x, None), np.int8(0), np.full(40, 7, np.int8)),
    "bool_or": (lambda c, x: (c + (x > 0), c), np.bool_(False), np.linspace(-1, 1, 9)),
    "buffer_set": (buffer_rnn, (sl.zeros((6, 2, 4)), H), (X, np.arange(6))),
    "buffer_read_add": (buffer_read_add, (sl.zeros((6, 2, 4)), H), (X, np.arange(6))),
    "step_index": (lambda c, t: (c * 0.5 + sl.tanh(E6[t]) * c, None), sl.ones(4),
                   np.arange(6)),
    "term_is_y": (lambda c, x: ((c[0] + x @ c[1], sl.tanh(c[1])), x @ c[1]),
                  (sl.zeros(4), sl.tensor(np.eye(4) * 0.5)), np.ones((6, 4))),
}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_stage_means_the_body(name, reverse):
    f, init, xs = CORPUS[name]
    body, nc, _, _ = body_of(f, init, xs, reverse)
    check_stages(body, nc, reverse)


@pytest.mark.parametrize("name", ["rnn", "rnn_readout", "lstm", "lstm_split", "acc_sum_h",
                                  "linrec", "buffer_set", "buffer_read_add", "step_index"])
def test_every_stage_of_the_backward_body_means_it(name):
    f, init, xs = CORPUS[name]
    bwd, nc, sums = backward_of(f, init, xs)
    check_stages(bwd, nc, reverse=True, sum_carries=sums)


# --- the optimisations fire, and not where they must not -------------------------------------
def final(name, backward=False):
    f, init, xs = CORPUS[name]
    if backward:
        bwd, nc, sums = backward_of(f, init, xs)
        return stages(bwd, nc, len(bwd.invars) - nc, True, sums)[-1][1]
    body, nc, _, _ = body_of(f, init, xs)
    return stages(body, nc, len(body.invars) - nc, False)[-1][1]


def test_rnn_forward_hoists_the_input_product_and_keeps_the_chain_per_step():
    prog = final("rnn")
    assert [prog.eqns[n].prim.name for n in prog.in_section(CHUNK)] == ["matmul"]
    assert [prog.eqns[n].prim.name for n in prog.in_section(STEP)] == ["matmul", "add", "tanh"]
    assert not prog.accumulators


def test_rnn_backward_sums_each_weight_gradient_as_one_product_per_chunk():
    prog = final("rnn", backward=True)
    hows = [a.how for a in prog.accumulators.values()]
    assert len(hows) == 2 and all(isinstance(h, SumAtB) for h in hows)
    assert prog.contiguous  # W.T, read by the per-step matmul, copied once


def test_cumsum_runs_no_step_work():
    prog = final("cumsum")
    assert not prog.in_section(STEP)
    assert isinstance(prog.accumulators[0].how, RunningSum)


def test_user_accumulators_keep_the_loops_order():
    for name in ("int8_acc", "bool_or", "acc_sum_h"):
        prog = final(name)
        assert not any(isinstance(a.how, (SumSteps, SumStepsAxes))
                       for a in prog.accumulators.values()), name


def test_backward_accumulator_of_a_sum_is_fused():
    bwd, nc, sums = backward_of(lambda h, x: (sl.tanh(h + x @ U + sl.sum(h)), None),
                                H, X)
    prog = stages(bwd, nc, len(bwd.invars) - nc, True, sums)[-1][1]
    assert any(isinstance(a.how, SumAtB) for a in prog.accumulators.values())


def test_a_lag_is_not_an_accumulator():
    assert not final("lag").accumulators


def test_a_term_that_is_also_a_y_is_not_fused_away():
    # Allowed to reorder carry 0 (as a gradient accumulator is), the compiler sums its term
    # per chunk, but must not fuse the product away: ys read it too.
    def f(c, x):  # 2-d operands, so that the term is the matmul itself
        t = x @ c[1]
        return (c[0] + t, sl.tanh(c[1])), t

    body, nc, _, _ = body_of(f, (sl.zeros((2, 4)), sl.tensor(np.eye(4) * 0.5)),
                             np.ones((6, 2, 4)))
    prog = stages(body, nc, len(body.invars) - nc, False, sum_carries=(0,))[-1][1]
    assert isinstance(prog.accumulators[0].how, SumSteps)
    check_stages(body, nc, sum_carries=(0,))


def test_the_rnn_backward_defers_the_xs_cotangent_after_the_steps():
    prog = final("rnn", backward=True)
    assert prog.fired == ("hoist", "find_accumulators", "defer", "fuse_accumulator_terms",
                          "copy_constant_views", "plan_memory")
    assert [prog.eqns[n].prim.name for n in prog.in_section(POST)] == ["matmul"]  # g @ U.T
    assert prog.in_section(PRE)


def test_a_buffer_row_update_runs_in_place_forward_and_backward():
    for backward in (False, True):
        prog = final("buffer_set", backward)
        assert [r.carry for r in prog.in_place.values()] == [0], format_loop(prog)
    assert "sink_buffer_updates" in final("buffer_set", True).fired  # ct[t] read first


def test_an_add_update_read_before_it_runs_in_place_and_replaces_its_scatter():
    prog = final("buffer_read_add")
    (n, rec), = prog.in_place.items()
    assert rec.scatter is not None and rec.scatter not in prog.section
    assert all(m < n for m in prog.in_section(STEP) if prog.eqns[m].prim.name == "getitem")


@pytest.mark.parametrize("f", [
    lambda c, x: ((c[0].at[x[1]].set(c[1]), c[1]), c[0]),  # the old buffer is a y
    lambda c, x: ((c[0].at[x[1]].set(c[1]), c[1]), c[0].at[x[1]].set(c[1])),  # the new one
    lambda c, x: ((c[0].at[x[1]].set(c[0][x[1] - 1]), c[1]), None),  # reads what it writes
    lambda c, x: (lambda new: ((new, c[1] + (new * c[0])[x[1]]), None))(  # old and new,
        c[0].at[x[1]].set(c[1])),                                        # read by one op
    lambda c, x: ((c[0].at[sl.stack([x[1], x[1]])].add(sl.stack([c[1], c[1]])), c[1]),
                  None),  # an add at positions that may repeat, for a user's carry
])
def test_in_place_does_not_fire_where_it_must_not(f):
    body, nc, _, _ = body_of(f, (sl.zeros((6, 2, 4)), H), (X, np.arange(6)))
    prog = check_stages(body, nc, Ts=(0, 5, 17), chunks=(1, 16))
    assert not prog.in_place, format_loop(prog)


def test_a_step_indexed_read_of_a_constant_accumulates_its_gradient_in_place():
    prog = final("step_index", backward=True)
    assert [type(a.how) for a in prog.accumulators.values()] == [SumScatter]
    assert not any(prog.eqns[n].prim.name == "scatter_add" for n in prog.section)
    fwd = final("step_index")
    assert [fwd.eqns[n].prim.name for n in fwd.in_section(CHUNK)][:1] == ["getitem"]


def test_verifier_rejects_an_in_place_update_of_a_buffer_that_is_a_y():
    f = lambda c, x: ((c[0].at[x[1]].set(c[1]), c[1]), c[0])  # noqa: E731
    body, nc, _, _ = body_of(f, (sl.zeros((6, 2, 4)), H), (X, np.arange(6)))
    prog = stages(body, nc, 2, False)[-1][1]
    n = next(n for n in prog.in_section(STEP) if prog.eqns[n].prim.name == "scatter_set")
    with pytest.raises(InvalidLoop, match="updated in place, but the buffer is also a y"):
        verify(prog.replace(in_place={n: InPlace(0)}), "test")


# --- the verifier ----------------------------------------------------------------------------
def test_verifier_rejects_step_work_moved_before_the_loop():
    prog = final("rnn")
    n = prog.in_section(STEP)[0]
    broken = prog.replace(section={**prog.section, n: PRE})
    with pytest.raises(InvalidLoop, match="cannot see"):
        verify(broken, "test")


def test_verifier_rejects_reordered_user_carries():
    prog = final("cumsum")
    acc = prog.accumulators[0]
    broken = prog.replace(accumulators={0: type(acc)(0, acc.add, SumSteps(acc.how.term))})
    with pytest.raises(InvalidLoop, match="user's carry"):
        verify(broken, "test")


def test_verifier_rejects_batched_work_without_a_rule():
    prog = final("rnn")
    n = prog.in_section(CHUNK)[0]
    broken = prog.replace(batch={k: v for k, v in prog.batch.items() if k != n})
    with pytest.raises(InvalidLoop, match="no batch rule"):
        verify(broken, "test")


def test_format_loop_names_sections_and_passes():
    text = format_loop(final("rnn", backward=True))
    assert "passes fired: hoist, find_accumulators, defer" in text
    assert "pre: once, before the loop" in text and ".T @" in text


def test_a_pass_that_changes_the_meaning_is_named():
    # Reordering an int8 user carry's additions (what the compiler once did) promotes the
    # sum to int64: the stage check names the pass that did it.
    f, init, xs = CORPUS["int8_acc"]
    body, nc, _, _ = body_of(f, init, xs)
    with pytest.raises(AssertionError, match="after pass find_accumulators"):
        check_stages(body, nc, sum_carries=(0,), Ts=(40,), chunks=(16,))


# --- random bodies, every stage ----------------------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from test_scan_hypothesis import build_body, program_args, programs  # noqa: E402


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(min_T=0, max_T=20))
def test_random_bodies_every_stage_forward_and_backward(prog):
    init, xs, params, K, kw, _ = program_args(prog)
    f = build_body(prog, K)(params)
    body, nc, consts, xs_t = body_of(f, init, xs, kw["reverse"], kw.get("length"),
                                     kw.get("dim", 0))
    check_stages(body, nc, kw.get("reverse", False), Ts=(0, prog["T"]), chunks=(1, 7),
                 seed=prog["seed"])
    lin = linearize(body, nc, [True] * len(xs_t), [True] * len(consts))
    check_stages(lin.bwd_body, lin.num_bwd_carry, not kw.get("reverse", False),
                 lin.bwd_sum_carries, Ts=(prog["T"],), chunks=(1, 7), seed=prog["seed"])


def test_common_subexpressions_are_computed_once():
    prog = final("rnn_readout")  # h @ W is both in the new carry and in the readout
    assert "eliminate_common_subexpressions" in prog.fired
    assert sum(prog.eqns[n].prim.name == "matmul" and prog.eqns[n].invars[1] is W_var(prog)
               for n in prog.section) == 2  # h @ W once, tanh(h @ W) @ W once


def W_var(prog):
    return next(v for v in prog.graph.constvars if v.shape == (4, 4))


@pytest.mark.parametrize("f", [
    lambda c, x: (c * 0.5 + c * 0.25, None),          # different literals
    lambda c, x: (c * 1 + c * 1.0, None),             # a literal's type differs
    lambda c, x: (c + sl.sum(c, axis=0) + sl.sum(c, axis=1)[:, None], None),  # params
])
def test_common_subexpressions_do_not_merge_different_work(f):
    body, nc, _, _ = body_of(f, sl.ones((3, 3)), np.ones((4, 3, 3)))
    prog = stages(body, nc, len(body.invars) - nc, False)[-1][1]
    assert "eliminate_common_subexpressions" not in prog.fired
    check_stages(body, nc)


def test_a_nested_scans_gradient_terms_are_added_per_step_not_stacked():
    """find_accumulators: the weight gradient a nested scan returns per outer step is summed
    as it comes (a plain carry), not stacked per chunk (C copies of the weights, for nothing
    to batch: control flow runs one step at a time)."""
    import scanlib as sl

    W = sl.tensor(np.random.default_rng(0).standard_normal((8, 8)), requires_grad=True)

    def outer(h, xseg):
        return sl.scan(lambda h, x: (sl.tanh(h @ W + x), None), h, xseg)[0], None

    plan = sl.scan_plan(outer, sl.zeros(8), sl.zeros((40, 5, 8)))
    prog = plan.backward_loop.program
    assert not any(type(a.how).__name__.startswith("Sum") for a in prog.accumulators.values())


def test_a_nested_backward_scan_computes_only_the_cotangents_read():
    """prune_nested_results: in the outer backward body, the inner scan's backward would
    also compute the cotangent of its xs (the outer xs, which need none); it is dropped
    with the work that made it, and every stage still means the body."""
    W = sl.tensor(np.random.default_rng(1).standard_normal((4, 4)) * 0.5, requires_grad=True)

    def outer(h, xseg):
        return sl.scan(lambda h, x: (sl.tanh(h @ W + x), sl.sum(h)), h, xseg)[0], None

    plan = sl.scan_plan(outer, sl.zeros(4), sl.zeros((6, 3, 4)))
    prog = plan.backward_loop.program
    assert "prune_nested_results" in prog.fired
    scan_p = importlib.import_module("scanlib.scan.primitive").scan_p
    inner = [e for e in prog.eqns if e.prim is scan_p]
    # the backward only: the outer forward saved the inner forward's residuals (before, the
    # backward body ran the inner forward again)
    assert len(inner) == 1
    bwd = inner[-1]
    assert bwd.params["num_carry"] == len(bwd.outvars)  # no ys: no xs cotangent
    # the oracle: each stage against the unpruned backward body, run step by step
    body, nc, sums = backward_of(outer, sl.zeros(4), sl.zeros((6, 3, 4)))
    check_stages(body, nc, reverse=True, sum_carries=sums, Ts=(0, 1, 4))


def test_pruning_keeps_the_carries_a_used_result_reads():
    from scanlib.tape.graph import eval_graph, prune_outputs

    def f(a, b, xs):
        (a2, b2), ys = sl.scan(lambda c, x: ((c[0] * 0.5 + c[1], c[1] + x), c[0] * 2.0),
                               (a, b), xs)
        return a2  # reads b through the carry: only the ys go

    def g(a, b, xs):
        (a2, b2), ys = sl.scan(lambda c, x: ((c[0] * 0.5 + c[1], c[1] + x), c[0] * 2.0),
                               (a, b), xs)
        return b2  # b never reads a: a's carry and the ys go

    args = (sl.tensor(1.0), sl.tensor(2.0), sl.tensor([1.0, 2.0, 3.0]))
    for fn, want_carries in ((f, 2), (g, 1)):
        graph = sl.make_graph(fn)(*args)
        pruned = prune_outputs(graph)
        scan = [e for e in pruned.eqns if e.prim.name == "scan"][0]
        assert scan.params["num_carry"] == want_carries and len(scan.outvars) == want_carries
        vals = [a._value for a in args]
        np.testing.assert_array_equal(eval_graph(pruned, vals, graph.consts),
                                      eval_graph(graph, vals, graph.consts))
        np.testing.assert_array_equal(eval_graph(pruned, vals, graph.consts)[0],
                                      fn(*args).numpy())
    # every result read: the same graph
    graph = sl.make_graph(lambda a, xs: sl.scan(lambda c, x: (c * 0.5 + x, c), a, xs))(
        args[0], args[2])
    assert prune_outputs(graph) is graph


@pytest.mark.parametrize("index", [
    ("s0",), (1, slice(1, None)), (slice(None, None, -1), None, Ellipsis, -1), (),
    (slice(0, 3, 2), "s0", "s1"), (Ellipsis, slice(-2, None, 1)), (True,),
    (slice(np.int64(1), None),), (np.int64(1),)])
def test_getitem_prints_as_the_tuple_its_impl_indexes_with(index):
    """getitem's inline form (generated code writes x[...], not a call) means its impl:
    x[tuple] for the template with its arrays; entries it cannot print fall back to impl."""
    from scanlib.ops.structural import Slot, getitem_p

    template = tuple(Slot(int(t[1])) if isinstance(t, str) else t for t in index)
    x = np.arange(60).reshape(3, 4, 5)
    arrays = [np.array([0, 2]), np.array([1, 3])][:sum(isinstance(t, str) for t in index)]
    want = getitem_p.impl(x, *arrays, index=template)
    form = getitem_p.inline_for({"index": template})
    if any(type(t) in (bool, np.int64) or (type(t) is slice and type(t.start) is np.int64)
           for t in template):
        assert form is None
        return
    got = eval(form.format("x", "a0", "a1"), {"x": x, "a0": arrays[:1] and arrays[0],
                                              "a1": arrays[1:] and arrays[1]})
    assert got.shape == want.shape and np.array_equal(got, want)
    assert np.shares_memory(got, x) == np.shares_memory(want, x)


def test_a_scan_bound_with_residuals_nobody_reads_is_pruned_to_its_plain_body():
    """In jit's replayed graph the backward scan is bound with residuals (a trace records the
    walk, for a second derivative that never comes): none is read, so it runs as the scan
    of its plain body. One whose residuals are read runs its residual-extended body, pruned
    as any scan's (the next test)."""
    from scanlib.tape.graph import prune_outputs

    jitted = sl.jit(sl.value_and_grad(lambda a, xs: sl.sum(sl.scan(
        lambda c, x: (c * a + x, sl.sin(c)), sl.tensor(0.5), xs)[1])))
    a, xs = sl.tensor(0.9), sl.tensor(np.linspace(0.0, 1.0, 7))
    graph = jitted.trace(a, xs)
    scans = [e for e in graph.eqns if e.prim.name == "scan"]
    assert scans and all(e.params.get("_lin") is None or any(
        v in {u for f in graph.eqns for u in f.invars} | set(graph.outvars)
        for v in e.outvars[e.params["num_carry"] + e.params["_lin"].num_ys:]) for e in scans)
    assert prune_outputs(graph) is graph  # jit's graph is pruned already
    value, g = jitted(a, xs)
    want_value, want_g = sl.value_and_grad(lambda a, xs: sl.sum(sl.scan(
        lambda c, x: (c * a + x, sl.sin(c)), sl.tensor(0.5), xs)[1]))(a, xs)
    assert float(value) == float(want_value) and float(g) == float(want_g)


@pytest.mark.parametrize("compiler", ["numpy", "numba"])
def test_a_forward_scan_bound_with_residuals_stores_only_what_is_read(compiler):
    """Under jit, the gradient of a scan whose ys the loss never reads: the forward scan,
    bound with the residuals its backward reads, no longer stores the ys too (nor a carry
    history nobody reads), as XLA would not; values and gradients are eager's, bit for bit
    on NumPy's loop."""
    if compiler == "numba":
        pytest.importorskip("numba")
    rng = np.random.default_rng(3)
    w, xs = sl.tensor(rng.normal(size=(3, 3)) * 0.4), sl.tensor(rng.normal(size=(9, 3)))

    def loss(w, xs):
        c, ys = sl.scan(lambda c, x: (sl.tanh(w @ c + x), {"twice": c * 2.0, "c": c}),
                        sl.ones(3), xs, compiler=compiler)
        return sl.sum(c * c)

    for fn in (sl.value_and_grad(loss, argnums=(0, 1)), sl.jacrev(loss, argnums=(0, 1))):
        jitted = sl.jit(fn)
        graph = jitted.trace(w, xs)
        read = {u for e in graph.eqns for u in e.invars} | set(graph.outvars)
        scans = [e for e in graph.eqns if e.prim.name == "scan"]
        assert len(scans) == 2
        for e in scans:  # stacked outputs (a carry is computed whether read or not)
            assert all(v in read for v in e.outvars[e.params["num_carry"]:]), \
                e.params["body"]
        got, want = jitted(w, xs), fn(w, xs)
        for a, b in zip(sl.tree_util.tree_leaves(got), sl.tree_util.tree_leaves(want)):
            if compiler == "numpy":
                assert np.array_equal(a.numpy(), b.numpy())
            else:
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)


def test_a_scan_body_taking_grad_of_an_inner_scan_runs_its_forward_once():
    """grad of an inner scan's loss, in a scan body: the trace binds the inner scan for the
    loss's value, then again with the residuals its VJP reads. The body's loop program
    merges the two (graph.merge_rebound, as jit's graph), so the inner forward runs once a
    step, then its backward; values and gradients are the Python loop's."""
    rng = np.random.default_rng(0)
    W = sl.tensor(rng.normal(size=(4, 4)) * 0.3)

    def inner_loss(v):
        def body(h, t):
            h = sl.tanh(h @ W + t)
            return h, h
        return sl.sum(sl.lax.scan(body, v, sl.arange(0.0, 5.0) * 0.1)[0] ** 2)

    def outer(c, t):
        return c - 0.1 * sl.grad(inner_loss)(c * t), None

    c0, ts = sl.tensor(rng.normal(size=4)), sl.tensor(np.linspace(0.5, 1.5, 6))
    prog = sl.scan_plan(outer, c0, ts).forward_loop.program
    scans = [prog.eqns[n].params["reverse"] for n in prog.section
             if prog.eqns[n].prim.name == "scan"]
    assert scans == [False, True], scans

    def loop(c0):
        c = c0
        for t in ts:
            c = outer(c, t)[0]
        return sl.sum(c * c)

    def scanned(c0):
        return sl.sum(sl.lax.scan(outer, c0, ts)[0] ** 2)

    np.testing.assert_allclose(float(scanned(c0)), float(loop(c0)), rtol=1e-13)
    np.testing.assert_allclose(sl.grad(scanned)(c0).numpy(), sl.grad(loop)(c0).numpy(),
                               rtol=1e-11)


def test_jit_prunes_the_cotangents_nobody_asked_for_inside_nested_backward_bodies():
    """Under jit every argument is traced, so scan's VJP computes a cotangent for dt too;
    the gradient asked only for w. Pruning drops dt's cotangent from the top-level backward
    scan (its reader, an add, is dead) and, through the scan's rule, from the inner backward
    scan in the outer backward body: the jitted call computes what eager computes."""
    def loss(w, dt, xs):
        def outer(h, x):
            g, _ = sl.scan(lambda g, _: (g + dt * sl.tanh(w @ g + x), None), h, None,
                           length=4)
            return g, sl.sum(g)
        return sl.sum(sl.scan(outer, sl.zeros(3), xs)[1])

    rng = np.random.default_rng(0)
    args = (rng.normal(size=(3, 3)) * 0.3, np.array(0.1), rng.normal(size=(20, 3)))
    jitted = sl.jit(sl.value_and_grad(loss))
    graph = jitted.trace(*args)

    def backward_scans(g):
        for e in g.eqns:
            if e.prim.name == "scan":
                yield e
                yield from backward_scans(e.params["body"])

    # every backward scan computes at most the carry cotangent and w's, and none runs a
    # forward scan again (the outer forward saved the inner one's residuals)
    backward = [e for e in backward_scans(graph) if e.params["body"].name == "backward_body"]
    assert len(backward) == 3 and all(len(e.outvars) <= 2 for e in backward)
    assert all(b.params["body"].name == "backward_body"
               for e in backward for b in backward_scans(e.params["body"]))
    assert not any(e.prim.name == "add" and e.outvars[0].shape == () for e in graph.eqns)
    value, g = jitted(*args)
    want_value, want_g = sl.value_and_grad(loss)(*args)
    assert float(value) == float(want_value)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(want_g))


def test_jit_drops_the_cotangents_of_arguments_grad_does_not_ask_for():
    """matmul's VJP gives both operands a cotangent; under jit(grad(f)) of the weights only,
    the data's is computed by no one's request and dropped, as XLA drops it (one product
    forward, one for w's cotangent), and the values are eager's."""
    def f(w, x):
        return sl.sum(sl.tanh(x @ w))

    rng = np.random.default_rng(0)
    args = (rng.normal(size=(16, 8)), rng.normal(size=(64, 16)))
    jitted = sl.jit(sl.value_and_grad(f))
    graph = jitted.trace(*args)
    assert sum(e.prim.name == "matmul" for e in graph.eqns) == 2
    assert all(v in graph.outvars or any(v in e.invars for e in graph.eqns)
               for e in graph.eqns for v in e.outvars)  # nothing computed for no reader
    value, g = jitted(*args)
    want_value, want_g = sl.value_and_grad(f)(*args)
    assert float(value) == float(want_value)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(want_g))


def test_jit_keeps_a_dead_loop_whose_body_prints(capsys):
    """A scan and a while_loop whose results nobody reads, each printing in its body, run
    under jit(grad) as they do eagerly, also when pruning cuts something else in the graph
    (a's cotangent: grad takes w's only)."""
    def f(w, a, xs):
        sl.scan(lambda c, x: (sl.debug.print("scan x={}", x) or c, None), sl.tensor(0.0), xs)
        sl.lax.while_loop(lambda i: i < 2,
                          lambda i: (sl.debug.print("while i={}", i), i + 1)[1], 0)
        return sl.sum(sl.scan(lambda c, x: (c * w + a * x, c), sl.tensor(0.0), xs)[1])

    args = (np.array(0.5), np.array(0.3), np.arange(2.0))
    sl.grad(f)(*args)
    eager = capsys.readouterr().out
    assert eager.count("scan x=") == 2 and eager.count("while i=") == 2
    for argnums in (0, (0, 1, 2)):
        sl.jit(sl.grad(f, argnums))(*args)
        assert capsys.readouterr().out == eager


def _printing_outer(h, x):
    """A scan body with loops nested in it that nobody reads, each printing at its steps:
    two alike scans of constants only (neither merged nor hoisted out of the step) and a
    while_loop of the step's x."""
    for name in ("a", "b"):
        sl.scan(lambda c, _, name=name: (sl.debug.print(name + " c={}", c) or c + 1.0, None),
                sl.tensor(0.0), None, length=2)
    sl.lax.while_loop(lambda i: i < 1,
                      lambda i: (sl.debug.print("w x={}", sl.sum(x)), i + 1)[1], 0)
    h = sl.tanh(h * 0.5 + x)
    return h, sl.sum(h)




def test_a_dead_loop_whose_body_prints_runs_inside_a_scan_body(capsys):
    """The loops nested in a body print at each step of the outer scan, as the Python loop
    that defines scan does (JAX keeps effects too): eager, interpreted, under jit, grad and
    vmap; the dead-code elimination of the loop compiler's passes keeps them."""
    xs = np.array([[0.25, 0.5], [1.0, 2.0]])
    _loop(_printing_outer, sl.zeros(2), xs)
    want = capsys.readouterr().out
    assert want.count("a c=") == want.count("b c=") == 4 and want.count("w x=") == 2

    def loss(xs, scan):
        return sl.sum(scan(_printing_outer, sl.zeros(2), xs)[1])

    interp = functools.partial(sl.scan, interpret=True)
    jit = functools.partial(sl.jit, static_argnums=1)
    for run in (loss, sl.grad(loss), jit(loss), jit(sl.grad(loss))):
        for scan in (sl.scan, interp):
            run(xs, scan)
            assert capsys.readouterr().out == want, (run, scan)
    sl.vmap(loss, in_axes=(0, None))(np.stack([xs, xs]), sl.scan)
    assert capsys.readouterr().out.count("w x=") == 4  # once per example (x is batched)


def test_a_dead_nested_loop_that_prints_nothing_is_still_pruned():
    """The loop compiler's programs keep a nested loop that prints and drop one that does
    not (it has no effect: only its results could make it needed)."""
    def pure(h, x):
        sl.scan(lambda c, _: (c + 1.0, None), sl.tensor(0.0), None, length=2)
        return sl.tanh(h * 0.5 + x), None

    def loops(shown):
        prog = shown.program
        return [prog.eqns[n].prim.name for n in prog.section
                if prog.eqns[n].prim.name in ("scan", "while_loop")]

    xs = np.ones((3, 2))
    assert loops(sl.scan_plan(pure, sl.zeros(2), xs).forward_loop) == []
    assert loops(sl.scan_plan(_printing_outer, sl.zeros(2), xs).forward_loop) == [
        "scan", "scan", "while_loop"]


def _printing_loss(v):
    def body(h, t):
        sl.debug.print("step {}", h)
        return sl.sin(h) * t, h
    return sl.sum(sl.lax.scan(body, v, sl.arange(1.0, 3.0))[0])


@pytest.mark.parametrize("call, prints", [
    (lambda x: sl.vmap(sl.grad(_printing_loss))(x), 4),
    (lambda x: sl.lax.scan(lambda c, t: (c + sl.grad(_printing_loss)(c * t), None), x[0],
                           sl.arange(1.0, 3.0)), 4),
    (lambda x: sl.vmap(sl.grad(sl.checkpoint(_printing_loss)))(x), 8),
    (lambda x: sl.jit(lambda u: sl.lax.while_loop(
        lambda s: s[0] < 1, lambda s: (s[0] + 1, sl.grad(_printing_loss)(s[1])),
        (0, u[0])))(x), 2),
], ids=["vmap(grad)", "grad in a scan body", "vmap(grad(checkpoint))", "grad in a while body"])
def test_a_loop_bound_again_with_residuals_prints_once_per_step(call, prints, capsys):
    """Differentiating a printing loop inside a trace binds it for its value, then again with
    residuals; the first binding is dead, and its prints are the second's: each step prints
    as often as under JAX (2 steps, 2 examples; checkpoint runs the forward twice)."""
    call(np.array([[0.3, -0.7], [0.1, 0.4]]))
    assert capsys.readouterr().out.count("step") == prints



def _nested_printing_loss(c, levels=2, reverse=False, scan=sl.scan):
    """A scan of scans (of scans), `scan` at every level: the innermost body prints its x."""
    def innermost(h, x):
        sl.debug.print("in {}", x)
        return sl.tanh(h * x), sl.sin(h)

    body = innermost
    for _ in range(levels - 1):
        body = functools.partial(lambda h, xs, body: scan(body, h, xs, reverse=reverse),
                                 body=body)
    xs = sl.tensor(np.arange(1.0, 1.0 + 2 ** levels).reshape((2,) * levels) / 4)
    h, ys = scan(body, c, xs)
    return h + sl.sum(ys * ys)


@pytest.mark.parametrize("levels", [2, 3])
@pytest.mark.parametrize("how", ["grad", "jit(grad)", "hessian", "vmap(grad)", "reverse",
                                 "numba"])
def test_nested_scans_differentiated_print_once_per_step_as_jax(how, levels, capsys):
    """The outer forward saves the inner scan's residuals, stacked over its steps, and the
    inner scan's VJP reads them: the inner forward runs once per step, as in JAX (whose
    partial evaluation keeps them), where it ran again in the backward body and printed
    twice (three times at three levels). Values and derivatives are the Python loop's."""
    c = sl.tensor(0.5)
    reverse = how == "reverse"
    loss = functools.partial(_nested_printing_loss, levels=levels, reverse=reverse)
    if how == "numba":
        loss = functools.partial(loss, scan=functools.partial(sl.scan, compiler="numba"))
    derivative = {"jit(grad)": lambda f: sl.jit(sl.grad(f)), "hessian": sl.hessian}.get(
        how, sl.grad)
    if how == "vmap(grad)":
        got = sl.vmap(sl.grad(loss))(sl.stack([c, c * 2.0]))
    else:
        got = derivative(loss)(c)
    printed = capsys.readouterr().out.count("in ")
    assert printed == 2 ** levels  # vmap too: x is not batched, so it prints once (JAX)
    want = derivative(functools.partial(_nested_printing_loss, levels=levels,
                                        reverse=reverse, scan=_loop))
    if how == "vmap(grad)":
        want = sl.stack([sl.grad(functools.partial(
            _nested_printing_loss, levels=levels, scan=_loop))(v) for v in (c, c * 2.0)])
    else:
        want = want(c)
    capsys.readouterr()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-15)


def test_forward_over_reverse_of_a_while_loop_whose_body_scans_its_carry():
    """The while_loop's recorded scan is bound with residuals that include the inner scan's;
    differentiated again as bound, its VJP reads ys of it that nobody holds any more (the
    tape holds outputs weakly), and runs its forward again for them: a TypeError here
    before. The values are the Python loop's."""
    def make(inner_scan):
        def f(p):
            def body(s):
                i, h = s
                h2, _ = inner_scan(lambda c, x: (sl.sin(c * x), None), h, sl.tensor([0.5, 0.7]))
                return i + 1, h2
            return sl.while_loop(lambda s: s[0] < 2, body, (0, p))[1]
        return f

    def looped(p):
        h = p
        for _ in range(2):
            h = _loop(lambda c, x: (sl.sin(c * x), None), h, sl.tensor([0.5, 0.7]))[0]
        return h

    p = sl.tensor(0.4)
    f = make(sl.scan)
    want = sl.hessian(looped)(p).numpy()
    for got in (sl.hessian(f)(p), sl.jvp(sl.grad(f), (p,), (sl.tensor(1.0),))[1],
                sl.jit(sl.hessian(f))(p), sl.jacfwd(sl.grad(f))(p), sl.grad(sl.grad(f))(p)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
