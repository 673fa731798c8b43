"""Python code that scanlib writes and runs (compiled loops, jit replays, numba kernels),
compiled under a name of its own and registered with `linecache`, so tracebacks,
`inspect.getsource` and debuggers (pdb's `list`) show its lines. Imports nothing of scanlib.
"""

from __future__ import annotations

import itertools
import linecache
import weakref

_counter = itertools.count(1)


def exec_source(source: str, what: str, namespace: dict) -> str:
    """Run `source` in `namespace` (its `def`s land there) and return the file name its code
    carries, `<scanlib-generated {what} #n>`, unique in the process.

    linecache keeps the lines while code compiled from them is alive: an entry without a
    modification time is never dropped by `linecache.checkcache`, so the entry is removed when
    the last function (code object) the source defines is garbage collected, and bodies traced
    over and over do not grow the cache. `linecache.clearcache()` drops the entries too.
    """
    filename = f"<scanlib-generated {what} #{next(_counter)}>"
    code = compile(source, filename, "exec")
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    entry = (len(source), None, lines, filename)
    linecache.cache[filename] = entry
    inner = [c for c in code.co_consts if hasattr(c, "co_code")]
    alive = [len(inner)]

    def forget():
        alive[0] -= 1
        if alive[0] == 0 and linecache.cache.get(filename) is entry:
            linecache.cache.pop(filename, None)

    for c in inner:
        weakref.finalize(c, forget).atexit = False
    exec(code, namespace)  # noqa: S102 - our own code
    if not inner:  # it defined no function: nothing of it runs again
        linecache.cache.pop(filename, None)
    return filename
