"""Gradient checks for users' functions and for scanlib's own tests.

Imports the public API pieces below scanlib/__init__.
"""

from __future__ import annotations

import numpy as np

from . import backends, pytree
from .autodiff import vjp
from .tape import Tensor


def _to_f64(x):
    """x as float64, or complex128 when it is complex (its imaginary part is kept)."""
    value = np.asarray(x.numpy() if isinstance(x, Tensor) else backends.to_numpy(x))
    return np.array(value, dtype=np.complex128 if value.dtype.kind == "c" else np.float64)


def _random_like(rng, x):
    """A random direction shaped like x: complex when x is (both parts random)."""
    shape = np.shape(x)
    if np.asarray(x).dtype.kind == "c":
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return rng.standard_normal(shape)


def _device(x):
    return x.device if isinstance(x, Tensor) else (
        backends.device_of(x) if backends.is_array(x) else "cpu")


def _inner(a_leaves, b_leaves):
    # Re(sum(a * b)), without conjugation: the pairing of JAX's convention for complex
    # cotangents (for real data, the ordinary dot product).
    return float(sum(np.sum(_to_f64(a) * _to_f64(b)).real for a, b in zip(a_leaves, b_leaves)))


def check_grads(f, args, order=1, *, eps=1e-6, rtol=1e-5, atol=1e-7, seed=0):
    """Check f's VJP against central finite differences in one random direction, in float64.

    args is a tuple of pytrees of float arrays/Tensors (cast to float64; complex ones to
    complex128, moved in a random complex direction, with cotangents paired as Re(sum(ct * t)),
    JAX's convention). With order=2, also checks the VJP of the VJP (second derivatives).
    Raises AssertionError on a mismatch.

    >>> import scanlib as sl, numpy as np
    >>> sl.testing.check_grads(lambda x: sl.tanh(x) * x, (np.linspace(-1, 1, 5),), order=2)
    """
    rng = np.random.default_rng(seed)
    paths, leaves, treedef = pytree.flatten_with_paths(tuple(args), "args")
    base = [_to_f64(x) for x in leaves]
    devices = [_device(x) for x in leaves]  # CuPy data is checked on its GPU
    direction = [_random_like(rng, x) for x in base]

    def on_devices(values, devs):
        return [Tensor(backends.asarray_on(v, d)) for v, d in zip(values, devs)]

    def call(values):
        return f(*pytree.unflatten(treedef, on_devices(values, devices)))

    out, back = vjp(f, *pytree.unflatten(treedef, on_devices(base, devices)))
    _, out_leaves, out_tree = pytree.flatten_with_paths(out, "out")
    out_devices = [_device(o) for o in out_leaves]
    ct = [_random_like(rng, _to_f64(o)) for o in out_leaves]
    grads = pytree.flatten(back(pytree.unflatten(out_tree, on_devices(ct, out_devices))))[0]
    analytic = _inner(grads, direction)

    plus = pytree.flatten(call([b + eps * d for b, d in zip(base, direction)]))[0]
    minus = pytree.flatten(call([b - eps * d for b, d in zip(base, direction)]))[0]
    numeric = _inner(ct, [(_to_f64(p) - _to_f64(m)) / (2 * eps) for p, m in zip(plus, minus)])
    if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
        raise AssertionError(
            f"VJP does not match finite differences: <vjp(ct), v> = {analytic!r} but "
            f"<ct, (f(x+eps v) - f(x-eps v)) / 2eps> = {numeric!r} (order {order})")
    if order >= 2:
        ct_t = on_devices(ct, out_devices)

        def vjp_of(*xs):
            _, b = vjp(f, *xs)
            return b(pytree.unflatten(out_tree, ct_t))

        check_grads(vjp_of, args, order=order - 1, eps=eps, rtol=rtol, atol=atol,
                    seed=seed + 1)
