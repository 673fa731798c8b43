"""The `scanlib` logger: the standard `logging` module's, silent unless the user turns it on.

Slow or surprising work reports here: each numba compile (`scanlib.numba`: at INFO when it
starts and when it ends, with its time and where it is cached, and at WARNING if it is still
running after 10 s; under compiler="auto", the background compiles and each body's choice of
tier, at INFO), each jit trace (`scanlib.jit`, INFO), and the fallbacks (jit running f
eagerly, compiler="numba" running the NumPy loop) at WARNING, which also go through
`warnings.warn` once per cause. Imports nothing of scanlib.
"""

from __future__ import annotations

import logging
import warnings

logger = logging.getLogger("scanlib")
logger.addHandler(logging.NullHandler())  # nothing printed unless the application asks


def get(name: str) -> logging.Logger:
    """The child logger `scanlib.<name>`."""
    return logging.getLogger(f"scanlib.{name}")


def warn_once(seen: set, cause, message: str, category, log: logging.Logger, stacklevel=2):
    """`warnings.warn(message)` and a WARNING record, the first time `cause` is met in `seen`
    (a set its owner keeps: a jitted function's, a compiled body's); later, DEBUG only."""
    if cause in seen:
        log.debug("%s", message)
        return
    seen.add(cause)
    log.warning("%s", message)
    warnings.warn(message, category, stacklevel=stacklevel + 1)
