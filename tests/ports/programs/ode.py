"""An adaptive Dormand-Prince (RK45) ODE solver with the adjoint method for its gradient, as
`jax.experimental.ode.odeint` builds it: pytree states flattened with `ravel_pytree`, a
`lax.while_loop` of steps with error control and rejected steps inside a `lax.scan` over the
output times, dense output by a 4th-order interpolating polynomial, `jax.closure_convert` to
hoist closed-over values, and a `jax.custom_vjp` whose backward pass solves the augmented
adjoint system backwards in time (with `jax.vjp` of the dynamics) by the same solver. Beside
it, a fixed-step RK4 integrator as a `lax.scan`, differentiated by plain backpropagation.
Stands for https://github.com/jax-ml/jax/blob/main/jax/experimental/ode.py
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.flatten_util import ravel_pytree
from jax.tree_util import tree_map

# Dormand-Prince 5(4) tableau.
C = jnp.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
A = [jnp.array([1 / 5]),
     jnp.array([3 / 40, 9 / 40]),
     jnp.array([44 / 45, -56 / 15, 32 / 9]),
     jnp.array([19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729]),
     jnp.array([9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]),
     jnp.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])]
B_SOL = jnp.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0])
B_ERR = jnp.array([35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085,
                   125 / 192 - 451 / 720, -2187 / 6784 + 12231 / 42400,
                   11 / 84 - 649 / 6300, -1 / 60])
C_MID = jnp.array([6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
                   -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
                   -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2])


def dopri_step(func, y0, f0, t0, dt):
    """One Dormand-Prince step: the new state, its derivative, the error estimate and the
    stages (for interpolation)."""
    def stage(k, i):
        ti = t0 + dt * C[i]
        yi = y0 + dt * jnp.dot(A[i - 1], k[:i])
        return k.at[i].set(func(yi, ti))

    k = jnp.zeros((7, f0.shape[0]), f0.dtype).at[0].set(f0)
    for i in range(1, 7):
        k = stage(k, i)
    y1 = y0 + dt * jnp.dot(B_SOL, k)
    f1 = k[6]
    y1_err = dt * jnp.dot(B_ERR, k)
    return y1, f1, y1_err, k


def interp_coeffs(y0, y1, k, dt):
    """Coefficients of the quartic through y0, y_mid, y1 with slopes f0, f1 (in s in [0, 1])."""
    y_mid = y0 + dt * jnp.dot(C_MID, k)
    dy0, dy1 = dt * k[0], dt * k[6]
    a = -2.0 * dy0 + 2.0 * dy1 - 8.0 * y0 - 8.0 * y1 + 16.0 * y_mid
    b = 5.0 * dy0 - 3.0 * dy1 + 18.0 * y0 + 14.0 * y1 - 32.0 * y_mid
    c = -4.0 * dy0 + dy1 - 11.0 * y0 - 5.0 * y1 + 16.0 * y_mid
    return jnp.stack([a, b, c, dy0, y0])


def interp_eval(coeffs, t0, t1, t):
    s = (t - t0) / (t1 - t0)
    return jnp.polyval(coeffs, s)


def error_ratio(err, rtol, atol, y0, y1):
    tol = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    return jnp.sqrt(jnp.mean((err / tol) ** 2))


def next_step_size(dt, ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    dfactor = jnp.where(ratio < 1.0, 1.0, dfactor)
    factor = jnp.minimum(ifactor, jnp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return jnp.where(ratio == 0.0, dt * ifactor, dt * factor)


def first_step_size(func, t0, y0, order, rtol, atol, f0):
    scale = atol + jnp.abs(y0) * rtol
    d0, d1 = jnp.linalg.norm(y0 / scale), jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = func(y0 + h0 * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1.0 / (order + 1.0)))
    return jnp.minimum(100.0 * h0, h1)


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=jnp.inf, hmax=jnp.inf):
    """Solve dy/dt = func(y, t, *args) from y0 at t[0], returning y at every time in t."""
    converted, consts = jax.closure_convert(func, y0, t[0], *args)
    return _odeint_wrapper(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


@partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _odeint_wrapper(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    y0, unravel = ravel_pytree(y0)
    func = ravel_first_arg(func, unravel)
    out = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return jax.vmap(unravel)(out)


def ravel_first_arg(f, unravel):
    def flat_f(y, *rest):
        out = f(unravel(y), *rest)
        return ravel_pytree(out)[0]
    return flat_f


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    func_ = lambda y, t: func(y, t, *args)  # noqa: E731

    def scan_fun(carry, target_t):
        def cond_fun(state):
            i, _, _, t, dt, _, _ = state
            return (t < target_t) & (i < mxstep) & (dt > 0)

        def body_fun(state):
            i, y, f, t, dt, last_t, coeffs = state
            next_y, next_f, next_y_err, k = dopri_step(func_, y, f, t, dt)
            next_t = t + dt
            ratio = error_ratio(next_y_err, rtol, atol, y, next_y)
            new_coeffs = interp_coeffs(y, next_y, k, dt)
            dt = jnp.clip(next_step_size(dt, ratio), min=0.0, max=hmax)
            accepted = ratio <= 1.0
            new = [i + 1, next_y, next_f, next_t, dt, t, new_coeffs]
            old = [i + 1, y, f, t, dt, last_t, coeffs]
            return tree_map(partial(jnp.where, accepted), new, old)

        _, *carry = lax.while_loop(cond_fun, body_fun, [0] + carry)
        _, _, t, _, last_t, coeffs = carry
        y_target = interp_eval(coeffs, last_t, t, target_t)
        return carry, y_target

    f0 = func_(y0, ts[0])
    dt = jnp.clip(first_step_size(func_, ts[0], y0, 4, rtol, atol, f0), min=0.0, max=hmax)
    coeffs = jnp.array([y0] * 5)
    init_carry = [y0, f0, ts[0], dt, ts[0], coeffs]
    _, ys = lax.scan(scan_fun, init_carry, ts[1:])
    return jnp.concatenate((y0[None], ys))


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_rev(func, rtol, atol, mxstep, hmax, res, g):
    ys, ts, args = res

    def aug_dynamics(augmented_state, t, *args):
        """The original system backwards in time, with the adjoint and its integrals."""
        y, y_bar, *_ = augmented_state
        y_dot, vjpfun = jax.vjp(func, y, -t, *args)
        return (-y_dot, *vjpfun(y_bar))

    y_bar = g[-1]
    ts_bar = []
    t0_bar = 0.0

    def scan_fun(carry, i):
        y_bar, t0_bar, args_bar = carry
        # Gradient with respect to the time point, then the solve back to the previous one.
        t_bar = jnp.dot(func(ys[i], ts[i], *args), g[i])
        t0_bar = t0_bar - t_bar
        y_aug = (ys[i], y_bar, t0_bar, args_bar)
        _, y_bar, t0_bar, args_bar = jax.tree_util.tree_map(
            lambda x: x[1],
            odeint(aug_dynamics, y_aug, jnp.array([-ts[i], -ts[i - 1]]), *args,
                   rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax))
        y_bar = y_bar + g[i - 1]
        return (y_bar, t0_bar, args_bar), t_bar

    init_carry = (g[-1], t0_bar, tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), rev_ts_bar = lax.scan(
        scan_fun, init_carry, jnp.arange(len(ts) - 1, 0, -1))
    del ts_bar
    ts_bar = jnp.concatenate([jnp.array([t0_bar]), rev_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_rev)


# --- fixed-step RK4, differentiated by backpropagation through the scan ---------------------
def rk4(func, y0, t, params, substeps=4):
    def step(y, t_pair):
        t0, t1 = t_pair
        h = (t1 - t0) / substeps

        def sub(i, y):
            ti = t0 + i * h
            k1 = func(y, ti, params)
            k2 = func(tree_map(lambda a, b: a + 0.5 * h * b, y, k1), ti + 0.5 * h, params)
            k3 = func(tree_map(lambda a, b: a + 0.5 * h * b, y, k2), ti + 0.5 * h, params)
            k4 = func(tree_map(lambda a, b: a + h * b, y, k3), ti + h, params)
            return tree_map(lambda a, b1, b2, b3, b4: a + h / 6 * (b1 + 2 * b2 + 2 * b3 + b4),
                            y, k1, k2, k3, k4)

        y = lax.fori_loop(0, substeps, sub, y)
        return y, y

    _, ys = lax.scan(step, y0, (t[:-1], t[1:]))
    return tree_map(lambda a, b: jnp.concatenate([a[None], b]), y0, ys)


# --- the models ------------------------------------------------------------------------------
def lotka_volterra(state, t, params):
    prey, predator = state["prey"], state["predator"]
    alpha, beta, gamma, delta = params
    return {"prey": alpha * prey - beta * prey * predator,
            "predator": -gamma * predator + delta * prey * predator}


def fit_loss(params, y0, ts, observed):
    """Squared error of the adaptive solution against observations, as a parameter fit's."""
    ys = odeint(lotka_volterra, y0, ts, params, rtol=1e-10, atol=1e-10)
    return jnp.sum((ys["prey"] - observed[:, 0]) ** 2 + (ys["predator"] - observed[:, 1]) ** 2)


def neural_ode_loss(W, b, y0, ts):
    """A neural ODE whose dynamics close over the weights: closure_convert hoists them."""
    def dynamics(y, t):
        return jnp.tanh(W @ y + b * jnp.cos(t))

    ys = odeint(dynamics, y0, ts, rtol=1e-10, atol=1e-10)
    return jnp.sum(ys[-1] ** 2) + 0.1 * jnp.sum(ys)


def rk4_loss(params, y0, ts, observed):
    ys = rk4(lotka_volterra, y0, ts, params)
    return jnp.sum((ys["prey"] - observed[:, 0]) ** 2 + (ys["predator"] - observed[:, 1]) ** 2)
