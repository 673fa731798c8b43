"""scanlib/backends/malloc.py: glibc's malloc keeps a call's large arrays on the heap, so
that calls after the first take no fresh pages from the kernel (a fault each)."""

import os
import platform
import subprocess
import sys

import pytest

from scanlib.backends import malloc

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Eight 1 MiB arrays made, written and freed, again and again, as a call's temporaries are:
# the minor page faults of the later rounds, per round.
_ROUNDS = """
import resource, sys
import numpy as np
import scanlib
def round_():
    arrays = [np.empty(2**17) for _ in range(8)]
    for a in arrays:
        a[:] = 1.0
for _ in range(3):
    round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    round_()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def _faults_per_round(**env):
    out = subprocess.run([sys.executable, "-c", _ROUNDS], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True)
    return float(out.stdout.strip().splitlines()[-1])


_USER_CHOSE = any(name == "SCANLIB_MALLOC" or name.startswith("MALLOC_") or
                  name == "GLIBC_TUNABLES" for name in os.environ)


@pytest.mark.skipif(not GLIBC or _USER_CHOSE, reason="glibc's malloc, as scanlib sets it")
def test_large_arrays_reuse_the_heaps_pages():
    assert malloc.STATE["tuned"], malloc.STATE["why"]
    # 8 MiB a round is 2,048 pages: were they fresh, each would fault.
    assert _faults_per_round() < 100


def test_the_users_choice_stands():
    state = dict(malloc.STATE)
    try:
        malloc.STATE["tuned"] = False
        assert not malloc.tune({"SCANLIB_MALLOC": "default"})
        assert malloc.STATE["why"] == "SCANLIB_MALLOC=default"
        assert not malloc.tune({"MALLOC_TOP_PAD_": "0"})
        assert "MALLOC_TOP_PAD_ is set" in malloc.STATE["why"]
        assert not malloc.tune({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
        assert not malloc.tune({"MALLOC_ARENA_MAX": "2"})
        assert not malloc.tune({"SCANLIB_MALLOC": " Off"})
    finally:
        malloc.STATE.update(state)
