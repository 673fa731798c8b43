"""`odeint(func, y0, t, *args)`: jax.experimental.ode's adaptive ODE solver, the same
algorithm, so a port of a program that imports it gives JAX's numbers.

- Dormand-Prince 5(4) steps, each accepted or rejected by an error ratio against rtol and
  atol, inside a `while_loop` per output time, inside a `scan` over the output times;
- y at each output time from the quartic that interpolates the step which passed it;
- the first step size by Hairer, Norsett and Wanner's rule;
- the gradient by the adjoint method, as JAX's: a `custom_vjp` whose backward solves the
  augmented system (the state backwards, its adjoint, the integrals of the parameters')
  from each output time to the one before, by the same solver. It is not the derivative
  of the steps taken, so it agrees with a finite difference to about the tolerances.

y0 is any pytree (flattened with `ravel_pytree`); the tensors func closes over are
differentiated too (`closure_convert`). Built on scanlib's public transformations: imports
lax, numpy, autodiff, closure, custom, flatten_util, pytree, tape and vmap.
"""

from __future__ import annotations

from typing import Any, Callable

import functools

import numpy as np

from .. import lax
from ..autodiff import vjp
from .. import numpy as jnp
from ..closure import closure_convert
from ..custom import custom_vjp
from ..flatten_util import ravel_pytree
from ..pytree import flatten, tree_map
from ..tape import Tensor
from ..vmap import vmap

__all__ = ["odeint"]

# Dormand-Prince 5(4): the stages' times and weights, the 5th-order solution's weights, the
# error estimate's (5th minus 4th order), and those of the midpoint used by the dense output.
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_A = ((1 / 5,),
      (3 / 40, 9 / 40),
      (44 / 45, -56 / 15, 32 / 9),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
      (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_B_ERR = (35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60)
_C_MID = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
          -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
          -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def odeint(func: Callable[..., Any], y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8,
           atol: float = 1.4e-8, mxstep: float = np.inf, hmax: float = np.inf) -> Any:
    """y at each time in t, where dy/dt = func(y, t, *args) and y(t[0]) = y0, as
    `jax.experimental.ode.odeint`: an adaptive Dormand-Prince solver whose gradient (with
    respect to y0, t, args and what func closes over) is the adjoint method's.

    y0 is a pytree of float arrays; func returns one of the same structure; t is a 1-D
    increasing array; args are arrays. The result has y0's structure, each leaf with len(t)
    in front. mxstep bounds the steps between two output times (past it the solution
    stops where it got to, as JAX's); hmax bounds a step.

    >>> from scanlib.experimental.ode import odeint
    >>> ys = odeint(lambda y, t, k: -k * y, sl.tensor([1.0]), sl.tensor([0.0, 1.0]),
    ...             sl.tensor(2.0))
    >>> ys[:, 0], sl.exp(-2.0)
    """
    for i, arg in enumerate(args):
        for leaf in flatten(arg)[0]:
            if not (isinstance(leaf, (Tensor, np.ndarray, np.generic, float, int, complex))):
                raise TypeError(f"odeint: the contents of *args must be arrays or scalars, but "
                                f"args[{i}] holds {type(leaf).__name__}; close over it in func "
                                "instead (or pass it as an array).")
    converted, consts = closure_convert(func, y0, t[0], *args)
    return _odeint_wrapper(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


def _odeint_wrapper(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    y0, unravel = ravel_pytree(y0)

    def flat_func(y, t, *rest):
        return ravel_pytree(func(unravel(y), t, *rest))[0]

    out = _odeint(flat_func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return vmap(unravel)(out)


@functools.partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    f = lambda y, t: func(y, t, *args)  # noqa: E731

    def to_next_time(carry, target_t):
        def not_there(state):
            i, _, _, t, dt, _, _ = state
            return (t < target_t) & (i < mxstep) & (dt > 0)

        def step(state):
            i, y, dy, t, dt, last_t, coeffs = state
            next_y, next_dy, err, k = _dopri_step(f, y, dy, t, dt)
            ratio = _error_ratio(err, rtol, atol, y, next_y)
            accepted = ratio <= 1.0
            new_dt = jnp.clip(_next_step_size(dt, ratio), min=0.0, max=hmax)
            new = [i + 1, next_y, next_dy, t + dt, new_dt, t, _interp_coeffs(y, next_y, k, dt)]
            old = [i + 1, y, dy, t, new_dt, last_t, coeffs]
            return tree_map(functools.partial(jnp.where, accepted), new, old)

        _, *carry = lax.while_loop(not_there, step, [0] + carry)
        _, _, t, _, last_t, coeffs = carry
        return carry, jnp.polyval(coeffs, (target_t - last_t) / (t - last_t))

    dy0 = f(y0, ts[0])
    dt = jnp.clip(_first_step_size(f, ts[0], y0, 4, rtol, atol, dy0), min=0.0, max=hmax)
    init = [y0, dy0, ts[0], dt, ts[0], jnp.stack([y0] * 5)]
    _, ys = lax.scan(to_next_time, init, ts[1:])
    return jnp.concatenate((y0[None], ys))


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_rev(func, rtol, atol, mxstep, hmax, res, g):
    """The adjoint method: from each output time back to the one before, the augmented
    system (the state run backwards, its adjoint, the integral of the parameters' cotangent)
    by the same solver, in negated time; each output time's own cotangent on the way."""
    ys, ts, args = res

    def augmented(state, minus_t, *args):
        y, y_bar, *_ = state
        dy, pull = vjp(func, y, -minus_t, *args)
        return (-dy, *pull(y_bar))

    def back_one_interval(carry, i):
        y_bar, t0_bar, args_bar = carry
        t_bar = jnp.dot(func(ys[i], ts[i], *args), g[i])
        t0_bar = t0_bar - t_bar
        solved = odeint(augmented, (ys[i], y_bar, t0_bar, args_bar),
                        jnp.stack([-ts[i], -ts[i - 1]]), *args, rtol=rtol, atol=atol,
                        mxstep=mxstep, hmax=hmax)
        _, y_bar, t0_bar, args_bar = tree_map(lambda x: x[1], solved)
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    init = (g[-1], jnp.zeros((), ts.dtype), tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), rev_ts_bar = lax.scan(
        back_one_interval, init, jnp.arange(len(ts) - 1, 0, -1))
    ts_bar = jnp.concatenate([t0_bar[None], rev_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_rev)


def _dopri_step(f, y0, dy0, t0, dt):
    """One step: (y1, f(y1, t1), the error estimate, the seven stages)."""
    k = jnp.zeros((7, dy0.shape[0]), dy0.dtype).at[0].set(dy0)
    for i in range(1, 7):
        yi = y0 + dt * jnp.dot(jnp.asarray(_A[i - 1], k.dtype), k[:i])
        k = k.at[i].set(f(yi, t0 + dt * _C[i]))
    y1 = y0 + dt * jnp.dot(jnp.asarray(_B, k.dtype), k)
    err = dt * jnp.dot(jnp.asarray(_B_ERR, k.dtype), k)
    return y1, k[6], err, k


def _interp_coeffs(y0, y1, k, dt):
    """The quartic in s (0 at y0, 1 at y1) through y0, the midpoint and y1, with the slopes
    at both ends: its coefficients, highest first."""
    y_mid = y0 + dt * jnp.dot(jnp.asarray(_C_MID, k.dtype), k)
    dy0, dy1 = dt * k[0], dt * k[6]
    a = -2.0 * dy0 + 2.0 * dy1 - 8.0 * y0 - 8.0 * y1 + 16.0 * y_mid
    b = 5.0 * dy0 - 3.0 * dy1 + 18.0 * y0 + 14.0 * y1 - 32.0 * y_mid
    c = -4.0 * dy0 + dy1 - 11.0 * y0 - 5.0 * y1 + 16.0 * y_mid
    return jnp.stack([a, b, c, dy0, y0])


def _error_ratio(err, rtol, atol, y0, y1):
    tol = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    return jnp.sqrt(jnp.mean((err / tol) ** 2))


def _next_step_size(dt, ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    dfactor = jnp.where(ratio < 1.0, 1.0, dfactor)
    factor = jnp.minimum(ifactor, jnp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return jnp.where(ratio == 0.0, dt * ifactor, dt * factor)


def _first_step_size(f, t0, y0, order, rtol, atol, dy0):
    scale = atol + jnp.abs(y0) * rtol
    d0, d1 = jnp.linalg.norm(y0 / scale), jnp.linalg.norm(dy0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    dy1 = f(y0 + h0 * dy0, t0 + h0)
    d2 = jnp.linalg.norm((dy1 - dy0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1.0 / (order + 1.0)))
    return jnp.minimum(100.0 * h0, h1)
