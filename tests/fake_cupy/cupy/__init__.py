"""A fake CuPy over NumPy, to run scanlib's CuPy code paths on a machine without a GPU.

Strict like CuPy: plain NumPy arrays may not be mixed into its ops, nor converted
implicitly, so code that forgets which device its data is on fails here as it would on a GPU.
It checks dispatch and device discipline, not GPU numerics or speed: bench/gpu_check.sh on a
real GPU does that. tests/test_fake_cupy.py runs part of the suite with it.
"""
import types
import numpy as _np

__version__ = "0.0-fake"


class _Dev:
    id = 0


def _base(x):
    if isinstance(x, ndarray):
        return x.view(_np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_base(v) for v in x)
    return x


def _wrap(r):
    if isinstance(r, ndarray):
        return r
    if isinstance(r, _np.ndarray):
        return r.view(ndarray)
    if isinstance(r, _np.generic):
        return _np.asarray(r).view(ndarray)
    if isinstance(r, tuple):
        return tuple(_wrap(v) for v in r)
    if isinstance(r, list):
        return [_wrap(v) for v in r]
    return r


def _reject(args):
    for a in args:
        if type(a) is _np.ndarray:
            raise TypeError(f"fake cupy: Unsupported type {type(a)} (a NumPy array mixed in)")
        if isinstance(a, (list, tuple)):
            _reject(a)


class ndarray(_np.ndarray):
    @property
    def device(self):
        return _Dev()

    def get(self):
        return self.view(_np.ndarray).copy()

    @property
    def __cuda_array_interface__(self):  # CuPy's layout; the pointer is host memory here
        face = self.view(_np.ndarray).__array_interface__
        return {"shape": face["shape"], "typestr": face["typestr"], "descr": face["descr"],
                "strides": face["strides"], "data": face["data"], "version": 3}

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed (fake cupy)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        if any(getattr(type(x), "__array_ufunc__", None) is not None
               and not isinstance(x, _np.ndarray) for x in inputs):
            return NotImplemented  # like CuPy's _should_use_rop: the other operand decides
        _reject(inputs)
        if "out" in kw:
            kw["out"] = _base(kw["out"])
        return _wrap(getattr(ufunc, method)(*_base(list(inputs)), **kw))

    def __array_function__(self, func, types_, args, kwargs):
        _reject(args)
        return _wrap(func(*_base(list(args)), **{k: _base(v) for k, v in kwargs.items()}))

    def __getitem__(self, index):
        return _wrap(self.view(_np.ndarray)[_base(index)])

    def __setitem__(self, index, value):
        _reject([value])
        self.view(_np.ndarray)[_base(index)] = _base(value)

    def __repr__(self):
        return "fakecupy." + repr(self.view(_np.ndarray))


def asarray(data, dtype=None):
    if isinstance(data, ndarray):
        return data if dtype is None else data.astype(dtype)
    if isinstance(data, _np.ndarray):
        return _np.array(data, dtype=dtype).view(ndarray)  # explicit host->device copy
    return _np.array(data, dtype=dtype).view(ndarray)


array = asarray


class _Ufunc:
    def __init__(self, u):
        self._u = u

    def __call__(self, *a, **k):
        _reject(a)
        out = k.pop("out", None)
        if out is not None:
            _reject([out])
            self._u(*_base(list(a)), out=_base(out), **k)
            return out
        return _wrap(self._u(*_base(list(a)), **k))

    def at(self, out, idx, vals):
        _reject([out, vals, idx])
        self._u.at(out.view(_np.ndarray), _base(idx), _base(vals))


def __getattr__(name):
    obj = getattr(_np, name)
    if isinstance(obj, _np.ufunc):
        return _Ufunc(obj)
    if callable(obj) and not isinstance(obj, type):
        def f(*a, **k):
            _reject(a)
            return _wrap(obj(*_base(list(a)), **{kk: _base(v) for kk, v in k.items()}))
        return f
    return obj


class Device:
    def __init__(self, i=0):
        self.id = i

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


cuda = types.SimpleNamespace(
    Device=Device,
    runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, runtimeGetVersion=lambda: 0,
                                  getDeviceProperties=lambda i: {"name": b"FakeGPU"}))


def _ufunc_method(self, name):
    m = getattr(self._u, name)

    def f(*a, **k):
        _reject(a)
        return _wrap(m(*_base(list(a)), **k))
    return f


_Ufunc.__getattr__ = _ufunc_method
