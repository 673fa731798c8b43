"""Golden loops: for each named body of the loop-compiler corpus (tests/test_loop_passes.py),
the final LoopProgram (format_loop) and the generated source, forward and backward, one file
per body under tests/golden/loops/. A change to the compiler that alters them shows in the
diff of these files.

    python tests/golden/gen_loops.py           # rewrite the files
    python tests/golden/gen_loops.py --check   # exit 1 if a file is out of date (a test runs this)
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/, for the corpus
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repository, for scanlib
sys.path.insert(0, HERE)  # golden_files

from golden_files import write_or_check  # noqa: E402
from test_loop_passes import CORPUS, backward_of, body_of  # noqa: E402

from scanlib.scan.executor import CompiledBody  # noqa: E402
from scanlib.scan.loop import format_loop  # noqa: E402

OUT = os.path.join(HERE, "loops")


def render(name):
    f, init, xs = CORPUS[name]
    body, nc, _, _ = body_of(f, init, xs)
    bwd, bnc, sums = backward_of(f, init, xs)
    parts = []
    for what, graph, n, reverse, s in (("forward", body, nc, False, ()),
                                        ("backward", bwd, bnc, True, sums)):
        run = CompiledBody(graph, n, len(graph.invars) - n, reverse, s)
        parts += [f"# {name}, {what}", format_loop(run.program), "", run.source, ""]
    return "\n".join(parts)


def main(argv=None):
    return write_or_check(argv, OUT, sorted(CORPUS), render, "gen_loops.py")


if __name__ == "__main__":
    sys.exit(main())
