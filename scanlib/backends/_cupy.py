"""The one place that imports CuPy, lazily, so `import scanlib` works without it.

Imports nothing from scanlib.
"""

from __future__ import annotations

import sys

# How to install CuPy with scanlib: the only place the instruction is written.
INSTALL_HINT = ("pip install 'scanlib-autodiff[cuda12]' or 'scanlib-autodiff[cuda13]' "
                "(the extra for your CUDA version)")

# module: cupy once it imported and saw a GPU; reason: why not, in CuPy's own words.
_state = {"module": None, "tried": False, "installed": None, "reason": None}


def cupy():
    """The cupy module, or None when it is not installed or sees no GPU (`why_unusable`
    says which)."""
    if not _state["tried"]:
        _state["tried"] = True
        try:
            import cupy as cp
        except ImportError as e:
            _state["installed"], _state["reason"] = False, f"{type(e).__name__}: {e}"
            return None
        _state["installed"] = True
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # no driver, driver too old, no device: CuPy says which
            _state["reason"] = f"{type(e).__name__}: {e}"
        else:
            if count > 0:
                _state["module"] = cp
            else:
                _state["reason"] = "cupy.cuda.runtime.getDeviceCount() is 0"
    return _state["module"]


def is_cupy_array(x) -> bool:
    # Only ask when cupy was imported by someone: never import it just to test a type.
    cp = sys.modules.get("cupy")
    return cp is not None and isinstance(x, cp.ndarray)


def available() -> bool:
    return cupy() is not None


def why_unusable(device: str) -> str:
    """Why `device` cannot be used: CuPy is not installed, or it is but sees no usable GPU
    (with CuPy's own reason, such as cudaErrorInsufficientDriver)."""
    cupy()
    if not _state["installed"]:
        return (f"device {device!r} needs CuPy, which is not installed ({_state['reason']}). "
                f"Install it with {INSTALL_HINT} on a machine with an NVIDIA GPU, or use "
                "device='cpu'.")
    return (f"device {device!r}: CuPy is installed but finds no usable CUDA GPU: "
            f"{_state['reason']}. Check the NVIDIA driver (nvidia-smi) and that the CuPy "
            "package matches the machine's CUDA version, or use device='cpu'.")


def require(device: str):
    cp = cupy()
    if cp is None:
        raise RuntimeError(why_unusable(device))
    return cp
