"""scan against its peers where they happen to be installed: `jax.lax.scan` and torch's scan
higher-order op (or, failing that, a torch loop), on a small tanh RNN in float64: values,
gradients, reverse, and (JAX only, since torch's scan returns zeros there) grad of grad.
Skipped when neither is installed; never a required dependency.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_scan_oracle import as_np

import scanlib as sl

B, H, I, T = 2, 4, 3, 6
NAMES = ("W", "U", "b", "h0", "xs")


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    return {"W": 0.5 * rng.standard_normal((H, H)), "U": rng.standard_normal((I, H)),
            "b": rng.standard_normal(H), "h0": rng.standard_normal((B, H)),
            "xs": rng.standard_normal((T, B, I)), "ct": rng.standard_normal((T, B, H))}


def scanlib_rnn(data, reverse=False):
    """(carry, ys, loss, grads by name) from scanlib."""

    def loss_fn(W, U, b, h0, xs):
        def f(h, x):
            h = sl.tanh(h @ W + x @ U + b)
            return h, sl.sin(h)

        carry, ys = sl.scan(f, h0, xs, reverse=reverse)
        return (carry * carry).sum() + (ys * data["ct"]).sum(), (carry, ys)

    args = [sl.tensor(data[n]) for n in NAMES]
    (loss, (carry, ys)), grads = sl.value_and_grad(loss_fn, argnums=(0, 1, 2, 3, 4),
                                                   has_aux=True)(*args)
    return as_np(carry), as_np(ys), as_np(loss), dict(zip(NAMES, map(as_np, grads)))


def assert_agree(ours, theirs, rtol=1e-10, atol=1e-12):
    for name, a, b in zip(("carry", "ys", "loss"), ours[:3], theirs[:3]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)
    for n in NAMES:
        np.testing.assert_allclose(ours[3][n], theirs[3][n], rtol=rtol, atol=atol,
                                   err_msg=f"grad {n}")


# --- JAX ------------------------------------------------------------------------------------
def jax_rnn(data, reverse=False):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    with jax.enable_x64(True):
        def loss_fn(W, U, b, h0, xs):
            def f(h, x):
                h = jnp.tanh(h @ W + x @ U + b)
                return h, jnp.sin(h)

            carry, ys = jax.lax.scan(f, h0, xs, reverse=reverse)
            return jnp.sum(carry * carry) + jnp.sum(ys * data["ct"]), (carry, ys)

        args = [jnp.asarray(data[n], dtype=jnp.float64) for n in NAMES]
        (loss, (carry, ys)), grads = jax.value_and_grad(loss_fn, argnums=(0, 1, 2, 3, 4),
                                                        has_aux=True)(*args)
        assert carry.dtype == jnp.float64
        return (np.asarray(carry), np.asarray(ys), np.asarray(loss),
                {n: np.asarray(g) for n, g in zip(NAMES, grads)})


@pytest.mark.parametrize("reverse", [False, True])
def test_agrees_with_jax_lax_scan(data, reverse):
    assert_agree(scanlib_rnn(data, reverse), jax_rnn(data, reverse))


def test_grad_of_grad_agrees_with_jax(data):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    xs, h0, U = data["xs"], data["h0"], data["U"]

    def make(lib_scan, tanh, total, asarr):
        def loss(W):
            carry, ys = lib_scan(lambda h, x: (tanh(h @ W + x @ asarr(U)), h), asarr(h0),
                                 asarr(xs))
            return total(ys * ys) + total(carry)

        return loss

    def ours(W):
        g = sl.grad(make(sl.scan, sl.tanh, lambda a: a.sum(), sl.tensor))
        return sl.grad(lambda W: (g(W) * g(W)).sum())(W)

    with jax.enable_x64(True):
        g = jax.grad(make(jax.lax.scan, jnp.tanh, jnp.sum, jnp.asarray))
        want = np.asarray(jax.grad(lambda W: jnp.sum(g(W) * g(W)))(jnp.asarray(data["W"])))
    got = as_np(ours(sl.tensor(data["W"])))
    assert np.any(want != 0)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# --- torch ----------------------------------------------------------------------------------
def torch_rnn(data, use_scan_op):
    torch = pytest.importorskip("torch")
    t = {n: torch.tensor(data[n], dtype=torch.float64, requires_grad=True) for n in NAMES}

    def f(h, x):
        h = torch.tanh(h @ t["W"] + x @ t["U"] + t["b"])
        return h, torch.sin(h)  # distinct outputs: torch's scan rejects aliased ones

    if use_scan_op:
        scan_mod = pytest.importorskip("torch._higher_order_ops.scan")
        try:
            carry, ys = scan_mod.scan(f, t["h0"], t["xs"])
        except (RuntimeError, NotImplementedError) as e:  # needs torch.compile support
            pytest.skip(f"torch's scan op is not usable here: {type(e).__name__}")
    else:
        carry, out = t["h0"], []
        for step in range(T):
            carry, y = f(carry, t["xs"][step])
            out.append(y)
        ys = torch.stack(out)
    loss = (carry * carry).sum() + (ys * torch.tensor(data["ct"])).sum()
    loss.backward()
    return (carry.detach().numpy(), ys.detach().numpy(), loss.detach().numpy(),
            {n: t[n].grad.numpy() for n in NAMES})


def test_agrees_with_a_torch_loop(data):
    assert_agree(scanlib_rnn(data), torch_rnn(data, use_scan_op=False))


def test_agrees_with_torch_scan_op(data):
    assert_agree(scanlib_rnn(data), torch_rnn(data, use_scan_op=True))
