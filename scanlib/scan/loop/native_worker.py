"""The background compile process (native_background.py starts it): reads jobs from stdin,
compiles each kernel as native.py would in the caller (numba's compile, then every value's
type checked against the graph's, then the proof recorded beside the kernel), and answers
None or why not on stdout. numba writes the machine code to its disk cache, where the caller
loads it. It exits at the end of stdin, after the jobs it was sent: when the caller exits
first, those still fill the cache for the next process.

Imports native.py and native_background.py (the messages).
"""

from __future__ import annotations

import logging
import os
import sys
import time

NICE = 3  # the priority below the caller's (a nice-0 process weighs twice a nice-3 one)


def _answer(job):
    from . import native

    _, path, types, expected, name, what = job
    start = time.perf_counter()
    try:
        import numba

        # native.argument_types' (tuples), or numba's types
        described = all(isinstance(t, tuple) for t in types)
        sig = tuple(numba.typeof(native.proxy(t)) for t in types) if described else types
        dispatcher = native.import_kernel(path)["kernel"]
        kernel = native.NativeKernel(dispatcher, expected, name, path[:-3] + ".proofs", what)
        kernel._prove(sig)
        if dispatcher._cache.load_overload(sig, dispatcher.targetctx) is None:
            return "numba does not cache it on disk (a NumbaWarning says why)", 0.0
        if described:  # the caller finds the proof by these, without importing numba
            kernel._record(f"{kernel._digest} args {types!r}")
    except native.NotProved as e:
        return str(e), time.perf_counter() - start
    except Exception as e:  # noqa: BLE001 - a broken file, numba's internals: say which
        return f"{type(e).__name__}: {e}"[:300], time.perf_counter() - start
    return None, time.perf_counter() - start


def main():
    try:
        # A little below the caller: on a machine whose cores are all busy, its NumPy code
        # keeps most of one (a compile is seconds), and the compile still ends (at nice 10
        # it got a twentieth of a core beside four busy processes, and took minutes).
        os.nice(NICE)
    except (AttributeError, OSError):
        pass
    logging.getLogger("scanlib").addHandler(logging.NullHandler())
    logging.getLogger("scanlib").propagate = False
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but messages on stdout

    from .native_background import read_message, write_message

    while True:
        job = read_message(stdin)
        if job is None:
            return
        error, seconds = _answer(job)
        if stdout is not None:
            try:
                write_message(stdout, (job[0], error, seconds))
            except OSError:  # the caller exited: the jobs it left still fill the cache
                stdout = None


if __name__ == "__main__":
    main()
