"""Generated code (scan's compiled loops, while_loop's loop, jit's replays) is registered
with linecache: a traceback through it shows its lines, inspect.getsource reads them, and the
entries go when the code does."""

import gc
import inspect
import linecache
import traceback

import numpy as np
import pytest

import scanlib as sl
from scanlib import generated
from scanlib.ops.primitive import Primitive, bind


def _boom_impl(x):
    if np.any(x > 2):
        raise ValueError("boom: the value passed 2")
    return x + 0


boom_p = Primitive("boom", _boom_impl, lambda g, out, x: (g,))


def boom(x):
    return bind(boom_p, sl.as_tensor(x))


def _generated_frames(tb):
    return [f for f in traceback.extract_tb(tb) if f.filename.startswith("<scanlib-generated")]


def _raise_and_format(fn):
    with pytest.raises(ValueError, match="boom") as info:
        fn()
    return info.value, traceback.format_exception(info.value)


def test_an_error_inside_a_scan_loop_shows_the_generated_line():
    def step(h, x):
        return boom(h + x), h

    e, lines = _raise_and_format(lambda: sl.scan(step, sl.tensor(0.0), np.ones(5)))
    frames = _generated_frames(e.__traceback__)
    assert frames, "no generated frame in the traceback"
    frame = frames[-1]
    assert frame.filename.startswith("<scanlib-generated scan loop over body #")
    assert "# boom" in frame.line  # the generated statement that called boom's impl
    text = "".join(lines)
    assert frame.line in text
    # The whole source is in linecache, as the loop printed it.
    source = "".join(linecache.getlines(frame.filename))
    assert source.startswith("def run(")
    assert frame.line in source


def test_an_error_inside_a_while_loop_shows_the_generated_line():
    def body(c):
        i, x = c
        return i + 1, boom(x + 1.0)

    def run():
        return sl.while_loop(lambda c: c[0] < 10, body, (sl.tensor(0), sl.tensor(0.0)))

    e, lines = _raise_and_format(run)
    frames = _generated_frames(e.__traceback__)
    assert frames and frames[-1].filename.startswith("<scanlib-generated while_loop")
    assert "# boom" in frames[-1].line
    assert frames[-1].line in "".join(lines)


def test_a_jit_replay_shows_its_lines_and_getsource_reads_them():
    @sl.jit
    def f(x):
        return boom(x * 2.0)

    f(sl.tensor(1.0))  # traced: f ran itself
    e, lines = _raise_and_format(lambda: f(sl.tensor(3.0)))  # replayed
    frames = _generated_frames(e.__traceback__)
    assert frames and frames[-1].filename.startswith("<scanlib-generated jit replay f #")
    assert "# boom" in frames[-1].line and frames[-1].line in "".join(lines)
    run = next(iter(f._traces.values()))._run
    assert inspect.getsource(run) == run.source + "\n"


def test_exec_source_registers_and_forgets():
    ns = {}
    name = generated.exec_source("def g(x):\n    return x + 1", "test g", ns)
    assert name.startswith("<scanlib-generated test g #") and name.endswith(">")
    assert linecache.getlines(name) == ["def g(x):\n", "    return x + 1\n"]
    assert inspect.getsource(ns["g"]) == "def g(x):\n    return x + 1\n"
    linecache.checkcache()  # an entry without an mtime survives the check tracebacks make
    assert linecache.getlines(name)
    other = generated.exec_source("def g(x):\n    return x + 1", "test g", {})
    assert other != name  # every compile its own name
    del ns
    gc.collect()
    assert name not in linecache.cache and other not in linecache.cache


def test_entries_do_not_grow_when_functions_are_traced_again_and_again():
    def count():
        return sum(k.startswith("<scanlib-generated jit replay h ") for k in list(linecache.cache))

    before = count()
    for i in range(20):
        def h(x):
            return sl.tanh(x) * 2.0
        jh = sl.jit(h)
        jh(sl.tensor(float(i)))
        jh(sl.tensor(float(i)))
        del jh, h
    gc.collect()
    assert count() - before <= 1
