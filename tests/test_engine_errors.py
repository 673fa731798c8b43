"""Error wording: each error says what happened, with the shapes/devices/paths involved, and
how to fix it.
"""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl


@pytest.mark.parametrize("op", [
    lambda x, y: x + y,
    lambda x, y: x * y,
    lambda x, y: sl.maximum(x, y),
    lambda x, y: sl.where(x > 0, x, y),
], ids=["add", "mul", "maximum", "where"])
def test_broadcast_mismatch_names_both_shapes(backend, op):
    x, y = backend.tensor(np.ones((2, 3))), backend.tensor(np.ones((4,)))
    with pytest.raises(ValueError) as e:
        op(x, y)
    msg = str(e.value)
    assert "f64[2,3]" in msg and "f64[4]" in msg, msg
    assert "broadcast" in msg


def test_matmul_mismatch_names_both_shapes(backend):
    x, y = backend.tensor(np.ones((2, 3))), backend.tensor(np.ones((2, 5)))
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(2, 5\)"):
        x @ y
    with pytest.raises(ValueError, match="at least 1-d"):
        sl.matmul(backend.tensor(2.0), y)


def test_structural_mismatches_name_shapes(backend):
    a, b = backend.tensor(np.ones((2, 3))), backend.tensor(np.ones((2, 4)))
    on = r"(@cuda:0)?"  # CUDA tensors carry their device in the description
    with pytest.raises(ValueError, match=rf"f64\[2,3\]{on}, f64\[2,4\]{on}"):
        sl.concatenate([a, b])
    with pytest.raises(ValueError, match=rf"f64\[2,3\]{on}, f64\[4,3\]{on}"):
        sl.einsum("ij,jk->ik", a, backend.tensor(np.ones((4, 3))))
    with pytest.raises(ValueError, match=r"subscripts 'ijk'.*\(2, 3\)"):
        sl.einsum("ijk->i", a)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(5,\)"):
        a.reshape(5)


def test_vdot_mismatches_name_sizes_and_dtypes(backend):
    a = backend.tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"6 and 5 elements.*\(2, 3\) and \(5,\)"):
        sl.vdot(a, backend.tensor(np.ones(5)))
    with pytest.raises(TypeError, match="second operand is complex"):
        sl.vdot(a, backend.tensor(np.ones((2, 3), dtype=np.complex128)))


def test_device_mismatch_names_both_devices(backend):
    if backend.name != "cupy":
        pytest.skip("needs two devices: runs on the CuPy backend")
    x = sl.tensor([1.0, 2.0], device="cpu")
    y = sl.tensor([1.0, 2.0], device="cuda")
    with pytest.raises(ValueError) as e:
        x + y
    msg = str(e.value)
    assert "cpu" in msg and "cuda:0" in msg and ".to(" in msg, msg


def test_unknown_device(backend):
    with pytest.raises(ValueError, match="'tpu'.*'cpu', 'cuda' or 'cuda:N'"):
        sl.tensor([1.0], device="tpu")
    with pytest.raises(ValueError, match="'tpu'"):
        backend.tensor([1.0]).to("tpu")


def test_cuda_without_a_gpu_says_how_to_fix():
    if sl.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match=r"scanlib-autodiff\[cuda12\]"):
        sl.tensor([1.0], device="cuda")
    with pytest.raises(RuntimeError, match="CuPy"):
        sl.tensor([1.0]).to("cuda")


def test_backward_of_non_scalar_without_cotangent(backend):
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"needs a scalar.*shape \(2,\).*loss\.sum\(\)"):
        (x * 2.0).backward()


def test_backward_cotangent_of_wrong_shape(backend):
    x = backend.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"cotangent has shape \(3,\).*shape \(2,\)"):
        (x * 2.0).backward(backend.tensor([1.0, 1.0, 1.0]))


def test_backward_on_tensor_not_requiring_grad(backend):
    x = backend.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"does not require grad.*requires_grad=True"):
        (x * 2.0).sum().backward()


def test_grad_of_non_scalar_output(backend):
    x = backend.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"scalar.*shape \(2,\).*vjp"):
        sl.grad(lambda x: x * 2.0)(x)
    with pytest.raises(TypeError, match=r"scalar.*shape \(1,\)"):
        sl.grad(lambda x: x[:1])(x)  # one element, but not shape ()
    with pytest.raises(TypeError, match="scalar Tensor"):
        sl.grad(lambda x: "not a number")(x)


def test_grad_with_respect_to_an_int_names_the_path(backend):
    w = backend.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"args\[0\]\['w'\] is a int.*1\.0"):
        sl.grad(lambda p: p["b"] * 2.0)({"w": 1, "b": 2.0})
    with pytest.raises(TypeError, match=r"args\[2\]\[1\] has dtype int64"):
        sl.grad(lambda a, b, c: (a * c[0]).sum(), argnums=2)(w, w, [w, backend.tensor([1, 2])])
    with pytest.raises(TypeError, match=r"args\[1\]\['w'\] has dtype int64"):
        sl.grad(lambda a, p: a.sum(), argnums=(0, 1))(w, {"w": backend.array([1, 2])})
    with pytest.raises(TypeError, match=r"primals\[0\]\['k'\]"):
        sl.vjp(lambda p: p["k"], {"k": 3})


@pytest.mark.parametrize("convert", [
    lambda x: x.item(),
    lambda x: float(x),
    lambda x: bool(x > 0),
    lambda x: 1.0 if x > 0 else 0.0,
    lambda x: int(x),
    lambda x: x.numpy(),
], ids=["item", "float", "bool", "if", "int", "numpy"])
def test_concrete_values_inside_make_graph(backend, convert):
    with pytest.raises(TypeError, match=r"traced.*scanlib\.where"):
        sl.make_graph(convert)(backend.tensor(1.0))


def test_traced_boolean_mask(backend):
    with pytest.raises(TypeError, match=r"boolean mask.*scanlib\.where"):
        sl.make_graph(lambda x: x[x > 0])(backend.tensor([1.0, -1.0]))


def test_ambiguous_truth_value(backend):
    with pytest.raises(ValueError, match=r"\(2,\) is ambiguous.*scanlib\.where"):
        bool(backend.tensor([1.0, 2.0]) > 0)


def test_ragged_data(backend):
    with pytest.raises(ValueError, match="inhomogeneous"):
        backend.tensor([[1.0, 2.0], [3.0]])


def test_vjp_cotangent_structure_and_shape(backend):
    _, back = sl.vjp(lambda x: (x, x * 2.0), backend.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="structure"):
        back(backend.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match=r"out\[1\] has shape \(2,\).*\(3,\)"):
        back((backend.tensor([1.0, 1.0]), backend.tensor([1.0, 1.0, 1.0])))


def test_index_out_of_range(backend):
    x = backend.tensor([1.0, 2.0, 3.0])
    with pytest.raises(IndexError, match=r"f64\[3\].*out of bounds"):
        x[5]
    with pytest.raises(IndexError, match="integers or booleans"):
        x[np.array([0.5])]
