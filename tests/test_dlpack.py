"""Tensors and other libraries: DLPack both ways, the CUDA array interface, stop_gradient of a
pytree, pickle and copy, and which part is missing when device='cuda' cannot be used."""

import copy
import importlib.util
import os
import pickle
import sys

import numpy as np
import pytest

import scanlib as sl
from scanlib.backends import _cupy

HERE = os.path.dirname(os.path.abspath(__file__))


# --- DLPack export --------------------------------------------------------------------------
def test_numpy_reads_a_tensor_through_dlpack_without_a_copy():
    t = sl.tensor([1.0, 2.0, 3.0], dtype="float32")
    a = np.from_dlpack(t)
    assert a.dtype == np.float32 and a.tolist() == [1.0, 2.0, 3.0]
    assert t.__dlpack_device__() == (1, 0)
    if np.lib.NumpyVersion(np.__version__) < "2.1.0":  # it exports no read-only memory
        assert not np.shares_memory(a, t.numpy())
        return
    assert np.shares_memory(a, t.numpy())
    assert not a.flags.writeable  # tensors are immutable: the consumer is told read-only


def test_a_tensor_holding_a_numpy_scalar_exports():
    t = sl.exp(0.0)  # its value is a NumPy scalar, which has no __dlpack__ of its own
    assert t.__dlpack_device__() == (1, 0) and np.from_dlpack(t).tolist() == 1.0


def test_a_consumer_before_dlpack_1_gets_a_copy():
    t = sl.tensor([1.0, 2.0])
    legacy = type("Legacy", (), {"__dlpack__": lambda self, **kw: t.__dlpack__(**kw),
                                 "__dlpack_device__": lambda self: t.__dlpack_device__()})()
    capsule = t.__dlpack__()  # no max_version: the read-only flag cannot be sent
    assert type(capsule).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(copy=False)
    assert sl.from_dlpack(legacy).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("export", [np.from_dlpack, lambda t: t.__dlpack__(),
                                    lambda t: t.__dlpack__(max_version=(1, 0))])
def test_a_tensor_that_requires_grad_refuses_export(export):
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    for t in (w, w * 2):
        with pytest.raises(TypeError, match=r"DLPack export.*requires grad.*t\.detach\(\)"):
            export(t)
    assert np.from_dlpack(w.detach()).tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="requires grad"):  # an input being differentiated
        sl.grad(lambda x: sl.tensor(np.from_dlpack(x)).sum())(sl.tensor([1.0]))


def test_a_traced_tensor_refuses_export():
    with pytest.raises(TypeError, match="needs a concrete value"):
        sl.jit(lambda x: sl.tensor(np.from_dlpack(x)) * 2)(sl.tensor([1.0]))


# --- DLPack import --------------------------------------------------------------------------
def test_from_dlpack_of_numpy_shares_memory_unless_copied():
    a = np.arange(6.0).reshape(2, 3)
    t = sl.from_dlpack(a)
    assert isinstance(t, sl.Tensor) and t.shape == (2, 3) and t.device == "cpu"
    assert not t.requires_grad and np.shares_memory(t.numpy(), a)
    c = sl.from_dlpack(a, copy=True)
    assert not np.shares_memory(c.numpy(), a) and c.tolist() == a.tolist()
    assert sl.from_dlpack(sl.tensor([1, 2])).tolist() == [1, 2]  # a Tensor is a producer too


def test_from_dlpack_says_what_it_needs():
    with pytest.raises(TypeError, match=r"a list has no __dlpack__.*scanlib\.tensor"):
        sl.from_dlpack([1.0, 2.0])
    elsewhere = type("OnTpu", (), {"__dlpack__": lambda self, **kw: None,
                                   "__dlpack_device__": lambda self: (13, 0)})()
    with pytest.raises(TypeError, match="device type 13"):
        sl.from_dlpack(elsewhere)


def test_from_dlpack_of_cuda_memory_is_read_by_cupy(monkeypatch):
    calls = []

    class FakeCupy:
        class cuda:  # noqa: N801 - CuPy's name
            class Device:
                def __init__(self, index):
                    calls.append(("device", index))

                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    return False

        @staticmethod
        def from_dlpack(x):
            calls.append(("from_dlpack", x))
            return np.array([7.0])

    monkeypatch.setattr(_cupy, "require", lambda device: calls.append(device) or FakeCupy)
    on_gpu = type("OnGpu", (), {"__dlpack__": lambda self, **kw: None,
                                "__dlpack_device__": lambda self: (2, 1)})()
    t = sl.from_dlpack(on_gpu)
    assert t.tolist() == [7.0]
    assert calls == ["cuda:1", ("device", 1), ("from_dlpack", on_gpu)]


def test_torch_both_ways():
    torch = pytest.importorskip("torch")
    t = sl.from_dlpack(torch.arange(4, dtype=torch.float32))
    assert t.dtype == np.float32 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    back = torch.from_dlpack(sl.tensor([1.0, 2.0]))
    assert back.tolist() == [1.0, 2.0] and back.dtype == torch.float64
    with pytest.raises((RuntimeError, TypeError, BufferError)):  # torch refuses, as scanlib
        sl.from_dlpack(torch.ones(2, requires_grad=True))


def test_jax_both_ways():
    jnp = pytest.importorskip("jax.numpy")
    t = sl.from_dlpack(jnp.arange(3.0))
    assert t.tolist() == [0.0, 1.0, 2.0]
    assert jnp.from_dlpack(sl.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]


# --- the CUDA array interface ---------------------------------------------------------------
def test_a_numpy_backed_tensor_has_no_cuda_array_interface():
    t = sl.tensor([1.0])
    assert not hasattr(t, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="only a CuPy-backed tensor"):
        getattr(t, "__cuda_array_interface__")  # noqa: B009 - the attribute is the test


def _fake_cupy(monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "cupy", os.path.join(HERE, "fake_cupy", "cupy", "__init__.py"))
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_cupy, "_state", {"module": fake, "tried": True, "installed": True,
                                          "reason": None})
    return fake


def test_a_cupy_backed_tensor_has_the_cuda_array_interface(monkeypatch):
    fake = _fake_cupy(monkeypatch)
    t = sl.tensor([1.0, 2.0], device="cuda")
    assert isinstance(t._value, fake.ndarray) and t.device == "cuda:0"
    face = t.__cuda_array_interface__
    assert face == t._value.__cuda_array_interface__
    assert face["shape"] == (2,) and face["typestr"] == "<f8" and face["version"] == 3
    w = sl.tensor([1.0], device="cuda", requires_grad=True)
    with pytest.raises(TypeError, match=r"requires grad.*t\.detach\(\)"):
        getattr(w, "__cuda_array_interface__")  # noqa: B009 - the attribute is the test
    back = pickle.loads(pickle.dumps(t))  # pickled with its device kind
    assert isinstance(back._value, fake.ndarray) and back.device == "cuda:0"
    assert back.numpy().tolist() == [1.0, 2.0]


# --- stop_gradient of a pytree --------------------------------------------------------------
def test_stop_gradient_of_a_pytree():
    params = {"w": sl.tensor([1.0, 2.0], requires_grad=True),
              "layers": [(sl.tensor(3.0), np.ones(2)), {"name": "dense", "scale": 0.5}]}
    out = sl.stop_gradient(params)
    assert isinstance(out, dict) and out["layers"][1]["name"] == "dense"
    assert isinstance(out["layers"][0], tuple)
    for leaf in (out["w"], out["layers"][0][0], out["layers"][0][1], out["layers"][1]["scale"]):
        assert isinstance(leaf, sl.Tensor) and not leaf.requires_grad
    assert out["w"].tolist() == [1.0, 2.0] and out["layers"][1]["scale"].item() == 0.5


def test_no_gradient_flows_through_stop_gradient_of_a_pytree():
    def f(p):
        fixed = sl.stop_gradient(p)
        return (p["a"] * fixed["a"]).sum() + (fixed["b"][0] * p["b"][0]).sum()

    g = sl.grad(f)({"a": sl.tensor([3.0]), "b": [sl.tensor([5.0])]})
    assert g["a"].tolist() == [3.0] and g["b"][0].tolist() == [5.0]


# --- pickle and copy ------------------------------------------------------------------------
@pytest.mark.parametrize("value", [np.arange(6, dtype=np.float32).reshape(2, 3),
                                   np.array([1, 2], dtype=np.int16), np.array(1 + 2j),
                                   np.array([True, False])])
def test_a_tensor_pickles_with_its_dtype_shape_and_device(value):
    t = sl.tensor(value)
    back = pickle.loads(pickle.dumps(t))
    assert back.dtype == t.dtype and back.shape == t.shape and back.device == "cpu"
    assert back.tolist() == t.tolist() and not back.requires_grad and back.is_leaf


def test_a_tensor_with_history_pickles_as_its_value_detached():
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    y = w * 3
    back = pickle.loads(pickle.dumps(y))
    assert back.tolist() == [3.0, 6.0] and not back.requires_grad and back.is_leaf
    leaf = pickle.loads(pickle.dumps(w))
    assert leaf.requires_grad and leaf.is_leaf and leaf.grad is None


def test_a_traced_tensor_refuses_pickle():
    with pytest.raises(TypeError, match="pickle needs a concrete value"):
        sl.jit(lambda x: pickle.dumps(x))(sl.tensor([1.0]))


def test_copies_keep_the_gradient():
    # A copy of a tensor with history is the tensor itself (tensors are immutable): the
    # gradient still reaches the input.
    for copier in (copy.copy, copy.deepcopy):
        g = sl.grad(lambda x, copier=copier: copier(x * 2).sum())(sl.tensor([1.0, 2.0]))
        assert g.tolist() == [2.0, 2.0]
    w = sl.tensor([1.0], requires_grad=True)
    (w * w).sum().backward()
    w2 = copy.deepcopy(w)
    assert w2 is not w and w2.requires_grad and w2.grad.tolist() == [2.0]
    assert not np.shares_memory(w2.numpy(), w.numpy())


# --- device="cuda": which part is missing ---------------------------------------------------
def _fresh_state(monkeypatch):
    monkeypatch.setattr(_cupy, "_state", {"module": None, "tried": False, "installed": None,
                                          "reason": None})


def test_cuda_without_cupy_says_to_install_it(monkeypatch):
    _fresh_state(monkeypatch)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    with pytest.raises(RuntimeError) as info:
        sl.tensor([1.0], device="cuda")
    message = str(info.value)
    assert "needs CuPy, which is not installed" in message
    assert _cupy.INSTALL_HINT in message and "device='cpu'" in message
    assert not sl.cuda_available()


def test_cuda_with_cupy_but_no_gpu_quotes_cupys_reason(monkeypatch):
    class CUDARuntimeError(RuntimeError):
        pass

    def no_driver():
        raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is "
                               "insufficient for CUDA runtime version")

    fake = type(sys)("cupy")
    fake.ndarray = type("ndarray", (), {})
    fake.cuda = type(sys)("cupy.cuda")
    fake.cuda.runtime = type(sys)("cupy.cuda.runtime")
    fake.cuda.runtime.getDeviceCount = no_driver
    _fresh_state(monkeypatch)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(RuntimeError) as info:
        sl.tensor([1.0]).to("cuda:1")
    message = str(info.value)
    assert "'cuda:1': CuPy is installed but finds no usable CUDA GPU" in message
    assert "CUDARuntimeError: cudaErrorInsufficientDriver" in message
    assert "not installed" not in message and _cupy.INSTALL_HINT not in message

    fake.cuda.runtime.getDeviceCount = lambda: 0
    _fresh_state(monkeypatch)
    with pytest.raises(RuntimeError, match=r"no usable CUDA GPU: .*getDeviceCount\(\) is 0"):
        sl.tensor([1.0], device="cuda")
