"""Converting a value being differentiated to a Python number (float(), int(), .item(),
.tolist(), math.exp, ...) is refused under grad, vjp, jvp and the Jacobians, as JAX refuses
it: the number would carry no gradient. Python control flow, detached values, values that do
not depend on the inputs, and the torch-style loop's loss.item() keep working."""

import copy
import math
import pickle

import numpy as np
import pytest

import scanlib as sl

CONVERSIONS = {
    "float": lambda t: float(t[0]),
    "int": lambda t: int(t[0]),
    "complex": lambda t: complex(t[0]),
    "item": lambda t: t[0].item(),
    "tolist": lambda t: t.tolist()[0],
    "math.exp": lambda t: math.exp(t[0]),
    "format": lambda t: float(f"{t[0]:.6f}"),
}


def _scalar_f(convert):
    return lambda x: (x * x).sum() * convert(x * 1.0)


def _vector_f(convert):
    return lambda x: x * convert(x * 1.0)


X = np.array([0.5, 1.5])

TRANSFORMS = {
    "grad": lambda c: sl.grad(_scalar_f(c))(sl.tensor(X)),
    "value_and_grad": lambda c: sl.value_and_grad(_scalar_f(c))(sl.tensor(X)),
    "vjp": lambda c: sl.vjp(_vector_f(c), sl.tensor(X)),
    "jvp": lambda c: sl.jvp(_vector_f(c), (sl.tensor(X),), (sl.tensor([1.0, 0.0]),)),
    "linearize": lambda c: sl.linearize(_vector_f(c), sl.tensor(X)),
    "jacfwd": lambda c: sl.jacfwd(_vector_f(c))(sl.tensor(X)),
    "jacrev": lambda c: sl.jacrev(_vector_f(c))(sl.tensor(X)),
    "hessian": lambda c: sl.hessian(_scalar_f(c))(sl.tensor(X)),
    "grad of grad": lambda c: sl.grad(lambda x: sl.grad(_scalar_f(c))(x).sum())(sl.tensor(X)),
}


@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_conversion_of_a_differentiated_value_raises(transform, conversion):
    with pytest.raises(TypeError, match=r"depends on an input being differentiated by \w+.*"
                                        r"detach\(\)"):
        TRANSFORMS[transform](CONVERSIONS[conversion])


def test_the_message_names_the_conversion_and_the_fix():
    with pytest.raises(TypeError) as info:
        sl.grad(lambda x: math.exp(x[0]))(sl.tensor([1.0, 2.0]))
    message = str(info.value)
    assert message.startswith("float() of a tensor (f64[]) that depends on an input being "
                              "differentiated by grad")
    assert "scanlib.exp(t), not math.exp(t)" in message
    assert "t.detach()" in message and "scanlib.stop_gradient(t)" in message
    with pytest.raises(TypeError, match=r"^\.tolist\(\) of a tensor \(f64\[2\]\)"):
        sl.grad(lambda x: sum(x.tolist()))(sl.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"^\.item\(\) of a tensor"):
        sl.vjp(lambda x: x * x.sum().item(), sl.tensor([1.0, 2.0]))


def test_a_gradient_computed_inside_grad_refuses_conversion_there():
    # The inner gradient depends on the outer input: float() of it would drop second order.
    def outer(x):
        g = sl.grad(lambda y: (y ** 3).sum())(x)
        return x.sum() * float(g[0])

    with pytest.raises(TypeError, match="differentiated by grad"):
        sl.grad(outer)(sl.tensor([1.0, 2.0]))


def test_python_control_flow_keeps_working():
    def f(x):
        if x[0] > 0:  # bool() of a value being differentiated, as JAX allows
            return (x ** 2).sum()
        return x.sum()

    np.testing.assert_array_equal(sl.grad(f)(sl.tensor([1.0, 2.0])).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(sl.grad(f)(sl.tensor([-1.0, 2.0])).numpy(), [1.0, 1.0])
    _, t = sl.jvp(lambda x: x * 2 if x[0] > 0 else x, (sl.tensor([1.0]),), (sl.tensor([1.0]),))
    np.testing.assert_array_equal(t.numpy(), [2.0])


@pytest.mark.parametrize("cut", [lambda t: t.detach(), sl.stop_gradient])
def test_a_detached_value_converts_and_is_a_constant(cut):
    def f(x):
        return (x * float(cut(x[0]))).sum()

    # d/dx (x * c).sum() with c = x[0] held constant is c everywhere.
    np.testing.assert_array_equal(sl.grad(f)(sl.tensor([3.0, 2.0])).numpy(), [3.0, 3.0])
    _, t = sl.jvp(lambda x: x * cut(x[0]).item(), (sl.tensor([3.0, 2.0]),),
                  (sl.tensor([1.0, 1.0]),))
    np.testing.assert_array_equal(t.numpy(), [3.0, 3.0])


def test_values_that_do_not_depend_on_the_inputs_convert():
    scale = sl.tensor(2.0)
    w = sl.tensor([1.0, 2.0], requires_grad=True)  # a torch-style leaf, closed over

    def f(x):
        n = int(sl.argmax(x))  # an integer result carries no gradient
        return (x * float(scale) * float(w[0]) * (n + 1)).sum()

    np.testing.assert_array_equal(sl.grad(f)(sl.tensor([1.0, 5.0])).numpy(), [4.0, 4.0])


def test_results_convert_once_the_transformation_returned():
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    out, back = sl.vjp(lambda x: x * x, w)  # out stays on the tape: w requires grad
    assert out.requires_grad and out.tolist() == [1.0, 4.0]
    value, g = sl.value_and_grad(lambda x: (x * x).sum())(w)
    assert float(value) == 5.0 and g.tolist() == [2.0, 4.0]


def test_the_torch_style_loop_logs_its_loss():
    w = sl.tensor([1.0, 2.0], requires_grad=True)
    losses = []
    for _ in range(3):
        loss = (w * w).sum()
        losses.append((loss.item(), float(loss), f"{loss:.2f}"))
        loss.backward()
        with sl.no_grad():
            w = (w - 0.25 * w.grad).requires_grad_()
    assert losses == [(5.0, 5.0, "5.00"), (1.25, 1.25, "1.25"), (0.3125, 0.3125, "0.31")]


def test_traced_bodies_refuse_conversion_as_before():
    # vmap and jit trace f: a traced value has no number yet, whatever transformation is
    # inside them.
    with pytest.raises(TypeError, match="needs a concrete value"):
        sl.vmap(sl.grad(lambda x: x * math.exp(x)))(sl.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="needs a concrete value"):
        sl.jit(sl.grad(lambda x: math.exp(x[0])))(sl.tensor([1.0, 2.0]))


# --- other ways off the tape: .numpy(), pickle, copy.deepcopy -------------------------------
def test_numpy_and_pickle_of_a_differentiated_value_raise():
    with pytest.raises(TypeError, match=r"^\.numpy\(\) of a tensor .* differentiated by grad"):
        sl.grad(lambda x: (sl.tensor(x.numpy()) * x).sum())(sl.tensor([0.5]))
    with pytest.raises(TypeError, match=r"^pickle of a tensor .* differentiated by vjp"):
        sl.vjp(lambda x: pickle.loads(pickle.dumps(x * 2)) * x, sl.tensor([0.5]))
    # a constant leaves the tape as before
    g = sl.grad(lambda x: (sl.tensor(x.detach().numpy()) * x).sum())(sl.tensor([0.5]))
    assert g.tolist() == [0.5]


@pytest.mark.parametrize("transform", ["grad", "vjp", "jacrev", "jit of grad", "scan body"])
def test_deepcopy_inside_a_transformation_is_differentiated_through(transform):
    """JAX differentiates through a copy (the identity): d/dx x * copy(x) = 2x."""
    f = lambda x: (x * copy.deepcopy(x)).sum()
    x = sl.tensor([2.4])
    if transform == "grad":
        g = sl.grad(f)(x)
    elif transform == "vjp":
        g = sl.vjp(f, x)[1](sl.tensor(1.0))[0]
    elif transform == "jacrev":
        g = sl.jacrev(f)(x)
    elif transform == "jit of grad":
        g = sl.jit(sl.grad(f))(x)
    else:
        g = sl.grad(lambda w: sl.scan(lambda c, _: (c * copy.deepcopy(w), None),
                                      sl.tensor([1.0]), None, length=2)[0].sum())(x)
    assert not g.requires_grad
    np.testing.assert_allclose(g.numpy(), [4.8])


def test_a_backward_inside_grad_does_not_hide_the_dependence():
    """backward() frees the nodes it walks; the conversion check cannot then see that y
    depends on x, and must refuse rather than let float(y) drop the gradient (6, not 12)."""
    def f(x):
        y = x * 2
        (y * 3).backward()
        return x * float(y)

    with pytest.raises(TypeError, match="differentiated by grad"):
        sl.grad(f)(sl.tensor(3.0))
