"""glibc's malloc, set so that a call's arrays do not take fresh pages from the kernel at
every call.

A scan's call allocates and frees the same large arrays at every call: NumPy's temporaries
and the stacks of its steps, a numba kernel's buffers. With glibc's defaults, an array above
the mmap threshold (128 KiB, raised as such arrays are freed) is a fresh mapping, and heap
memory freed at its top is returned to the kernel once it exceeds the trim threshold; either
way the next call touches new pages, and each page costs a fault (zeroed by the kernel).
Measured on the ported programs, in a process that compiled nothing (a user's process
whose kernels load from the disk cache): an HMM's fused kernel took 1,218 faults a call and
5.6-7.0 ms, against 0 and 3.5 ms with the settings below; the NumPy tier's eager calls
15-30 % faster (GRU 78.7 -> 65.7 ms, Mamba 116 -> 83 ms), at about 60 MB more resident
memory.

`tune()` keeps arrays up to MMAP_THRESHOLD on the heap and TOP_PAD at its top when it trims
(mallopt; the process's setting: every library in it shares glibc's malloc). The cost is
memory: about 60 MB more resident on those programs, and more where several threads allocate
large arrays (each thread's arena keeps its own: 4 threads making and dropping 0.5-30 MB
arrays held 707 MiB after 5 rounds, against 335 MiB with glibc's defaults). It does nothing
off glibc, where SCANLIB_MALLOC is "default" (or off, 0, no, false), or where the user set
any of glibc's MALLOC_* variables or GLIBC_TUNABLES (their choice stands). Imports only the
standard library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

MMAP_THRESHOLD = 32 * 2**20  # glibc's own ceiling for its dynamic threshold
TOP_PAD = 64 * 2**20
_M_TOP_PAD, _M_MMAP_THRESHOLD = -2, -3  # malloc.h
_LEAVE = ("default", "off", "0", "no", "false")  # SCANLIB_MALLOC's values that leave it

STATE = {"tuned": False, "why": "not tried"}  # what tune() did, for the log and the tests


def tune(environ=os.environ) -> bool:
    """Set glibc's mmap threshold and top pad (see the module's docstring) once; whether they
    are set. STATE["why"] says why not."""
    if STATE["tuned"]:
        return True
    if environ.get("SCANLIB_MALLOC", "").strip().lower() in _LEAVE:
        STATE["why"] = f"SCANLIB_MALLOC={environ['SCANLIB_MALLOC']}"
        return False
    chosen = sorted(name for name in environ
                    if name.startswith("MALLOC_") or name == "GLIBC_TUNABLES")
    if chosen:
        STATE["why"] = f"{chosen[0]} is set: glibc's malloc is left as it was asked to be"
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        STATE["why"] = "not glibc's malloc"
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and \
            libc.mallopt(_M_TOP_PAD, TOP_PAD) == 1
    except (OSError, AttributeError) as e:
        STATE["why"] = f"mallopt is not available ({e})"
        return False
    STATE["tuned"], STATE["why"] = ok, "set" if ok else "mallopt refused"
    return ok
