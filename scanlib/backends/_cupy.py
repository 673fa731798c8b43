"""The one place that imports CuPy, lazily, so `import scanlib` works without it.

Imports nothing from scanlib.
"""

from __future__ import annotations

import sys

_state = {"module": None, "tried": False}


def cupy():
    """The cupy module, or None when it is not installed or sees no GPU."""
    if not _state["tried"]:
        _state["tried"] = True
        try:
            import cupy as cp

            if cp.cuda.runtime.getDeviceCount() > 0:
                _state["module"] = cp
        except Exception:  # no CuPy, no driver or no GPU: the CPU backend still works
            _state["module"] = None
    return _state["module"]


def is_cupy_array(x) -> bool:
    # Only ask when cupy was imported by someone: never import it just to test a type.
    cp = sys.modules.get("cupy")
    return cp is not None and isinstance(x, cp.ndarray)


def available() -> bool:
    return cupy() is not None


def require(device: str):
    cp = cupy()
    if cp is None:
        raise RuntimeError(
            f"device {device!r} needs CuPy and a CUDA GPU, and none is usable here. Install "
            "scanlib with the extra for your CUDA version (pip install "
            "'scanlib-autodiff[cuda12]' or 'scanlib-autodiff[cuda13]') on a machine with an "
            "NVIDIA GPU, or use device='cpu'."
        )
    return cp
