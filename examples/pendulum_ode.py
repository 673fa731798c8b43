"""A differentiable ODE solver: classical Runge-Kutta (RK4) steps as a scan, fitted to data.

A damped pendulum theta'' = -omega^2 sin(theta) - gamma theta' is released from three angles
and its angle observed with noise. Starting from a wrong guess, gradient descent on the mean
squared error, differentiated through every RK4 step, recovers the frequency omega and the
damping gamma. The fit against the data is drawn to examples/out/pendulum_fit.png.

    python examples/pendulum_ode.py        # a few seconds
    python examples/pendulum_ode.py --steps 5 --length 20 --recovery-tol 10

Exit status 0 when the gradient check passes, the error fell and both parameters are within
--recovery-tol (relative) of the truth; 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import _util
import numpy as np

import scanlib as sl


def pendulum(state, omega, gamma):
    theta, v = state
    return v, -(omega * omega) * sl.sin(theta) - gamma * v


def rk4_step(state, dt, omega, gamma):
    def shift(s, k, h):
        return tuple(a + h * b for a, b in zip(s, k))

    k1 = pendulum(state, omega, gamma)
    k2 = pendulum(shift(state, k1, dt / 2), omega, gamma)
    k3 = pendulum(shift(state, k2, dt / 2), omega, gamma)
    k4 = pendulum(shift(state, k3, dt), omega, gamma)
    return tuple(s + dt / 6 * (a + 2 * b + 2 * c + d)
                 for s, a, b, c, d in zip(state, k1, k2, k3, k4))


def trajectory(log_params, theta0, length, dt):
    """Angles [length, n] at t = dt, 2 dt, ...: a scan with no xs, only a length."""
    omega, gamma = sl.exp(log_params["omega"]), sl.exp(log_params["gamma"])

    def step(state, _):
        state = rk4_step(state, dt, omega, gamma)
        return state, state[0]

    _, thetas = sl.scan(step, (theta0, sl.zeros_like(theta0)), length=length)
    return thetas


def logs(omega, gamma):
    return {"omega": sl.tensor(np.log(omega)), "gamma": sl.tensor(np.log(gamma))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=200, help="RK4 steps (dt = --dt)")
    p.add_argument("--dt", type=float, default=0.05)
    p.add_argument("--noise", type=float, default=0.05, help="observation noise (radians)")
    p.add_argument("--steps", type=int, default=150, help="Adam steps")
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recovery-tol", type=float, default=0.05,
                   help="largest relative error allowed in the recovered parameters")
    p.add_argument("--out-dir", default=None, help="where the PNG goes (default examples/out)")
    args = p.parse_args(argv)
    if min(args.length, args.steps) < 1 or not args.dt > 0:
        p.error("--length and --steps must be at least 1 and --dt positive")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()

    true, guess = {"omega": 2.0, "gamma": 0.15}, {"omega": 2.3, "gamma": 0.4}
    theta0 = sl.tensor([0.5, 1.5, 2.5])
    clean = trajectory(logs(**true), theta0, args.length, args.dt).numpy()
    data = clean + rng.normal(0, args.noise, clean.shape)
    print(f"simulated a damped pendulum (omega {true['omega']}, gamma {true['gamma']}) from "
          f"3 angles, {args.length} RK4 steps of {args.dt}, noise {args.noise} rad")

    def loss_fn(log_params, length=args.length, target=data):
        return sl.mean((trajectory(log_params, theta0, length, args.dt) - target) ** 2)

    print("gradient check through 12 RK4 steps (float64, finite differences):")
    try:
        sl.testing.check_grads(lambda lp: loss_fn(lp, 12, data[:12]), (logs(**guess),))
        grad_ok = _util.check(True, "d loss / d (log omega, log gamma) matches")
    except AssertionError as e:
        grad_ok = _util.check(False, f"d loss / d params: {e}")

    params, opt = logs(**guess), sl.optim.adam(args.lr)
    opt_state = opt.init(params)
    value_and_grad = sl.value_and_grad(loss_fn)
    first = None
    for step in range(args.steps):
        loss, g = value_and_grad(params)
        first = float(loss) if first is None else first
        params, opt_state = opt.step(g, opt_state, params)
        if step % max(1, args.steps // 5) == 0:
            print(f"  step {step:>4}  mean squared error {float(loss):.5f}")
    final = float(loss_fn(params))
    fit = {k: float(np.exp(float(v))) for k, v in params.items()}

    errors = {k: abs(fit[k] - true[k]) / true[k] for k in true}
    print(f"\n{'':>6} {'true':>7} {'start':>7} {'fitted':>7} {'rel.err':>8}")
    for k, value in true.items():
        print(f"{k:>6} {value:7.4f} {guess[k]:7.4f} {fit[k]:7.4f} {errors[k]:8.1%}")
    print(f"mean squared error {first:.5f} -> {final:.5f} (noise variance "
          f"{args.noise ** 2:.5f})   ({time.perf_counter() - start:.1f}s)")

    plt = _util.pyplot()
    if plt is not None:
        t = args.dt * np.arange(1, args.length + 1)
        fitted = trajectory(params, theta0, args.length, args.dt).numpy()
        initial = trajectory(logs(**guess), theta0, args.length, args.dt).numpy()
        fig, ax = plt.subplots(figsize=(8, 4))
        for i in range(data.shape[1]):
            color = f"C{i}"
            ax.plot(t, data[:, i], ".", ms=3, color=color, alpha=0.5)
            ax.plot(t, fitted[:, i], "-", color=color, lw=1.5)
            ax.plot(t, initial[:, i], ":", color=color, lw=1)
        ax.plot([], [], "k.", label="noisy observations")
        ax.plot([], [], "k-", label=f"fit: omega {fit['omega']:.3f}, gamma {fit['gamma']:.3f}")
        ax.plot([], [], "k:", label=f"start: omega {guess['omega']}, gamma {guess['gamma']}")
        ax.set(xlabel="time", ylabel="angle (rad)", title="pendulum fitted through RK4 in a scan")
        ax.legend(loc="upper right", fontsize=8)
        print(f"plot: {_util.save_figure(fig, 'pendulum_fit.png', args.out_dir)}")
        plt.close(fig)

    ok = grad_ok
    ok &= _util.check(final < first, "the error fell")
    ok &= _util.check(max(errors.values()) <= args.recovery_tol,
                      f"omega and gamma within {args.recovery_tol:.0%} of the truth")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
