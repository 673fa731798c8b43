"""Array backends: the data decides whether NumPy (CPU) or CuPy (GPU) runs an op.

`xp_of(*arrays)` returns the array namespace; `device_of`, `to_device` and `asarray_on` move
and name data; importing it refuses a NumPy older than 2.0, and sets glibc's malloc so that
large arrays reuse the heap's pages (malloc.py). This is the only package that may
import cupy (lazily, in `_cupy.py`); it imports nothing else from scanlib.
"""

from __future__ import annotations

import contextlib

import numpy as np

from . import _cupy, malloc


def require_numpy_2(version: str) -> None:
    """Raise ImportError for a NumPy older than 2.0 (pyproject.toml's floor, for installs that
    skipped it): scanlib's dtype rules are NumPy 2's (NEP 50: a Python number does not widen a
    float32 array), and NumPy 1.x would silently give float64 results where float32 is meant."""
    if np.lib.NumpyVersion(version) < "2.0.0":
        raise ImportError(f"scanlib needs NumPy 2.0 or later, but NumPy {version} is installed; "
                          "upgrade it with pip install -U 'numpy>=2.0'")


require_numpy_2(np.__version__)
malloc.tune()  # glibc: a call's arrays reuse the heap's pages (malloc.py's docstring)

__all__ = [
    "xp_of", "device_of", "parse_device", "to_device", "asarray_on", "is_array",
    "cuda_available", "to_numpy", "namespace", "on_device", "from_dlpack",
]


# Types that are NumPy's data (or Python numbers): no need to ask whether CuPy is in play.
_CPU_DATA = frozenset({np.ndarray, float, int, bool, complex, np.float64, np.float32,
                       np.float16, np.int64, np.int32, np.bool_, np.complex128, np.complex64})


def is_array(x) -> bool:
    """True for a NumPy ndarray/scalar or a CuPy ndarray."""
    return isinstance(x, (np.ndarray, np.generic)) or _cupy.is_cupy_array(x)


def xp_of(*arrays):
    """The array namespace (numpy or cupy) of the given arrays; Python scalars count as NumPy."""
    for a in arrays:
        if type(a) not in _CPU_DATA and _cupy.is_cupy_array(a):
            return _cupy.cupy()
    return np


def device_of(array) -> str:
    """'cpu' for NumPy data, 'cuda:N' for CuPy data on GPU N."""
    if type(array) is np.ndarray or not _cupy.is_cupy_array(array):
        return "cpu"
    return f"cuda:{array.device.id}"


def parse_device(device) -> str:
    """Normalise 'cpu', 'cuda', 'cuda:N' (or None -> 'cpu') and reject anything else."""
    if device is None:
        return "cpu"
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda:0', got {device!r}")
    name = device.strip().lower()
    if name == "cpu":
        return "cpu"
    if name == "cuda":
        return "cuda:0"
    if name.startswith("cuda:") and name[5:].isdigit():
        return name
    raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'cuda:N'")


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return _cupy.available()


def gpu_devices() -> list[str]:
    """The GPUs CuPy sees, as device strings ("cuda:0", ...); none without CuPy."""
    if not cuda_available():
        return []
    return [f"cuda:{i}" for i in range(_cupy.require("cuda:0").cuda.runtime.getDeviceCount())]


def namespace(device: str):
    """The array module for a device: numpy for 'cpu', cupy for 'cuda:N' (a clear error when
    CuPy or the GPU is missing)."""
    return np if device == "cpu" else _cupy.require(device)


def on_device(device: str):
    """A context in which new arrays of `namespace(device)` are made on that device."""
    if device == "cpu":
        return contextlib.nullcontext()
    return _cupy.require(device).cuda.Device(int(device.split(":")[1]))


def asarray_on(data, device: str, dtype=None):
    """Turn data (lists, scalars, arrays) into an array on `device`."""
    if device == "cpu":
        if _cupy.is_cupy_array(data):
            data = data.get()
        return np.asarray(data, dtype=dtype)
    cp = _cupy.require(device)
    with cp.cuda.Device(int(device.split(":")[1])):
        return cp.asarray(data, dtype=dtype)


def to_device(array, device: str):
    """Copy `array` to `device` unless it is already there."""
    if device_of(array) == device:
        return array
    return asarray_on(array, device)


def to_numpy(array) -> np.ndarray:
    """A NumPy array with the data of `array` (a copy from the GPU for CuPy data)."""
    if _cupy.is_cupy_array(array):
        return array.get()
    return np.asarray(array)


_DLPACK_CPU, _DLPACK_CUDA = 1, 2  # DLPack's device types kDLCPU and kDLCUDA


def from_dlpack(x, copy=False):
    """The array behind an object with `__dlpack__` (a NumPy, CuPy, torch or JAX array): a
    NumPy array for CPU memory, a CuPy array for CUDA memory, sharing the producer's memory
    unless copy=True."""
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError(f"from_dlpack: a {type(x).__name__} has no __dlpack__ and "
                        "__dlpack_device__ (the DLPack protocol); make a tensor of lists, "
                        "scalars or other data with scanlib.tensor(x).")
    kind, index = (int(v) for v in x.__dlpack_device__())
    if kind == _DLPACK_CPU:
        out = np.from_dlpack(x)
        return out.copy() if copy else out
    if kind == _DLPACK_CUDA:
        cp = _cupy.require(f"cuda:{index}")
        with cp.cuda.Device(index):
            out = cp.from_dlpack(x)
            return out.copy() if copy else out
    raise TypeError(f"from_dlpack: the data lives on DLPack device type {kind} (device "
                    f"{index}); scanlib reads CPU (type {_DLPACK_CPU}) and CUDA (type "
                    f"{_DLPACK_CUDA}) memory. Move it to one of those first.")
