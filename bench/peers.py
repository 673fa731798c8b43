"""The peers, each used only where it happens to be installed (never a dependency):
HIPS autograd, mygrad, torch-loop, torch-scan (torch._higher_order_ops.scan), jax-scan-jit,
and on a GPU torch-loop-cuda, torch-scan-cuda and jax-scan-jit-gpu (data moved there once,
outside the timed call; each call waits for the GPU before it returns; TF32 off, so float32
products are as exact as CuPy's).

Every import sits inside a function, so `python -m bench` sets thread settings first and a
missing package is a skip with a reason, not an error. Imports NumPy and bench's own modules.
"""

from __future__ import annotations

import functools
import importlib
import types

import numpy as np

from .contender import Contender, Runner
from .workloads import flatten, length, loop_loss, loss, map_tree, split_xs, step


def _missing(module):
    def available():
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - ImportError, or a broken install
            return f"{module} is not installed ({type(e).__name__})"
        return None
    return available


def _restack_np(steps, conv=np.asarray):
    if isinstance(steps[0], dict):
        return {k: np.stack([conv(s[k]) for s in steps]) for k in steps[0]}
    return np.stack([conv(s) for s in steps])


def _autograd_too_slow(wl, size):
    # autograd's VJP of taking element t of a boxed list (or array) builds zeros for all T
    # elements, so extracting the T per-step inputs costs O(T^2 * |x_t|) in backward.
    d = wl.dims(size)
    per_step = {"rnn": d.get("B", 0) * d.get("I", 0), "lstm": d.get("B", 0) * d.get("I", 0),
                "cumsum": 1, "linrec": 2 * d.get("B", 0) * d.get("D", 0)}[wl.kind]
    cost = d["T"] ** 2 * (per_step + 50)
    if cost > 1e9:
        return (f"skipped at this size: autograd's per-step slicing of xs is O(T^2) in "
                f"backward (T^2 * |x_t| = {cost:.1e}); runs in --quick")
    return None


# --- HIPS autograd ----------------------------------------------------------------------------
def build_autograd(wl, inputs, consts):
    import autograd
    import autograd.numpy as anp

    ops = types.SimpleNamespace(tanh=anp.tanh, sigmoid=lambda x: 0.5 * (anp.tanh(0.5 * x) + 1),
                                vdot=lambda a, b: anp.tensordot(a, b, a.ndim),  # no vdot VJP
                                stack=anp.stack)
    args = {"params": inputs["params"], "init": inputs["init"],
            "xs": split_xs(inputs["xs"], length(inputs))}

    def f(a):
        return loop_loss(wl.kind, ops, a["params"], a["init"], a["xs"], consts)

    vg = autograd.value_and_grad(f)

    def run():
        value, g = vg(args)
        return value, {"params": g["params"], "init": g["init"], "xs": _restack_np(g["xs"])}

    return Runner(run, lambda r: (float(r[0]), flatten(map_tree(np.asarray, r[1]))))


# --- mygrad -----------------------------------------------------------------------------------
def build_mygrad(wl, inputs, consts):
    import mygrad as mg
    from mygrad.nnet.activations import sigmoid

    letters = "abcdefgh"

    def vdot(a, b):  # mygrad has no vdot; einsum contracts without forming a * b
        s = letters[:a.ndim]
        return mg.einsum(f"{s},{s}->", a, b)

    ops = types.SimpleNamespace(tanh=mg.tanh, sigmoid=sigmoid, vdot=vdot, stack=mg.stack)
    T = length(inputs)

    def run():
        leaves = map_tree(lambda a: mg.Tensor(a, copy=False),
                          {"params": inputs["params"], "init": inputs["init"]})
        xs = map_tree(lambda a: [mg.Tensor(a[t], copy=False) for t in range(T)], inputs["xs"])
        xs_steps = ([{k: xs[k][t] for k in xs} for t in range(T)] if isinstance(xs, dict)
                    else xs)
        out = loop_loss(wl.kind, ops, leaves["params"], leaves["init"], xs_steps, consts)
        out.backward()
        grads = map_tree(lambda t: t.grad, leaves)
        grads["xs"] = map_tree(lambda steps: np.stack([s.grad for s in steps]), xs)
        return out.item(), grads

    return Runner(run, lambda r: (float(r[0]), flatten(r[1])))


# --- torch ------------------------------------------------------------------------------------
def _torch_setup(inputs, consts, device):
    import torch

    if device != "cpu":
        torch.backends.cuda.matmul.allow_tf32 = False
    leaves = map_tree(lambda a: torch.from_numpy(np.array(a)).to(device).requires_grad_(), inputs)
    c = map_tree(lambda a: torch.from_numpy(np.array(a)).to(device), consts)
    flat = flatten(leaves)
    return torch, leaves, c, list(flat), list(flat.values())


def _torch_ops(torch):
    return types.SimpleNamespace(  # torch.vdot takes 1-d operands; reshape is a view here
        tanh=torch.tanh, sigmoid=torch.sigmoid, stack=torch.stack,
        vdot=lambda a, b: torch.vdot(a.reshape(-1), b.reshape(-1)))


def _torch_to_numpy(names):
    def to_numpy(r):
        value, grads = r
        return float(value), {n: g.detach().cpu().numpy() for n, g in zip(names, grads)}
    return to_numpy


def _torch_synced(torch, run, device):
    if device == "cpu":
        return run

    def synced():
        out = run()
        torch.cuda.synchronize()
        return out
    return synced


def build_torch_loop(wl, inputs, consts, device="cpu"):
    torch, leaves, c, names, flat = _torch_setup(inputs, consts, device)
    ops = _torch_ops(torch)

    def run():
        xs = leaves["xs"]
        steps = ([dict(zip(xs, z)) for z in zip(*(v.unbind(0) for v in xs.values()))]
                 if isinstance(xs, dict) else xs.unbind(0))
        out = loop_loss(wl.kind, ops, leaves["params"], leaves["init"], steps, c)
        return out.detach(), torch.autograd.grad(out, flat)

    return Runner(_torch_synced(torch, run, device), _torch_to_numpy(names))


def build_torch_scan(wl, inputs, consts, device="cpu"):
    torch, leaves, c, names, flat = _torch_setup(inputs, consts, device)
    from torch._higher_order_ops.scan import scan

    ops = _torch_ops(torch)

    def run():
        params = leaves["params"]

        def body(carry, x):
            new, y = step(wl.kind, ops, params, carry, x)
            return new, y.clone()  # torch's scan forbids a y aliasing the carry

        carry, ys = scan(body, leaves["init"], leaves["xs"])
        out = loss(ops, ys, carry, c)
        return out.detach(), torch.autograd.grad(out, flat)

    return Runner(_torch_synced(torch, run, device), _torch_to_numpy(names))


def _torch_cuda():
    reason = _missing("torch")()
    if reason:
        return reason
    import torch

    return None if torch.cuda.is_available() else "torch sees no CUDA GPU"


# --- JAX --------------------------------------------------------------------------------------
def build_jax(wl, inputs, consts, platform="cpu"):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # float64 workloads; float32 data stays float32
    if platform != "cpu":  # no TF32 in float32 products, as in CuPy and torch here
        jax.config.update("jax_default_matmul_precision", "highest")
    device = jax.devices(platform)[0]  # explicit: JAX would pick a GPU by default
    ops = types.SimpleNamespace(tanh=jnp.tanh, sigmoid=jax.nn.sigmoid, vdot=jnp.vdot,
                                stack=jnp.stack)

    def f(a, c):
        params = a["params"]
        carry, ys = jax.lax.scan(lambda h, x: step(wl.kind, ops, params, h, x), a["init"],
                                 a["xs"])
        return loss(ops, ys, carry, c)

    fn = jax.jit(jax.value_and_grad(f))
    args, c = jax.device_put(inputs, device), jax.device_put(consts, device)

    def run():
        return jax.block_until_ready(fn(args, c))

    return Runner(run, lambda r: (float(r[0]), flatten(map_tree(np.asarray, r[1]))))


def _jax_gpu():
    reason = _missing("jax")()
    if reason:
        return reason
    import jax

    try:
        jax.devices("gpu")
    except RuntimeError as e:
        return f"JAX has no GPU backend ({str(e)[:80]})"
    return None


CONTENDERS = [
    Contender("autograd", "autograd", build_autograd, available=_missing("autograd"),
              too_slow=_autograd_too_slow,
              note="HIPS autograd, Python loop, xs as per-step leaves"),
    Contender("mygrad", "mygrad", build_mygrad, available=_missing("mygrad"),
              note="mygrad, Python loop, xs as per-step leaves"),
    Contender("torch-loop", "torch", build_torch_loop, available=_missing("torch"),
              memory_visible=False, note="torch eager, Python loop over xs.unbind(0)"),
    Contender("torch-scan", "torch", build_torch_scan,
              available=_missing("torch._higher_order_ops.scan"), memory_visible=False,
              note="torch._higher_order_ops.scan, eager"),
    Contender("jax-scan-jit", "jax", build_jax, available=_missing("jax"), memory_visible=False,
              note="jax.jit(value_and_grad) of lax.scan; first call includes compilation"),
    Contender("torch-loop-cuda", "torch", functools.partial(build_torch_loop, device="cuda"),
              available=_torch_cuda, memory_visible=False, note="torch-loop on the GPU"),
    Contender("torch-scan-cuda", "torch", functools.partial(build_torch_scan, device="cuda"),
              available=_torch_cuda, memory_visible=False, note="torch-scan on the GPU"),
    Contender("jax-scan-jit-gpu", "jax", functools.partial(build_jax, platform="gpu"),
              available=_jax_gpu, memory_visible=False, note="jax-scan-jit on the GPU"),
]
