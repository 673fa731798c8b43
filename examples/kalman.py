"""A Kalman filter written as a scan, and maximum likelihood by gradient ascent through it.

A damped rotation x[t+1] = rho * R(omega) x[t] + w (w ~ N(0, q^2 I)) is observed through its
first coordinate with noise, y[t] = x[t][0] + v (v ~ N(0, r^2)). We simulate it, then recover
(rho, omega, q, r) from the observations alone by maximising the filter's log-likelihood,
whose gradient flows backwards through the scan.

    python examples/kalman.py            # a few seconds
    python examples/kalman.py --steps 20 --length 20 --sequences 2 --recovery-tol 10

Exit status 0 when the gradient check passes, the log-likelihood rose and every parameter is
within --recovery-tol (relative) of the truth; 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import _util
import numpy as np

import scanlib as sl

NAMES = ("rho", "omega", "q", "r")


def system(theta):
    """(A, Q, R) from unconstrained parameters: rho = sigmoid, omega, q and r = exp.

    omega is kept positive because a rotation by -omega gives the same observations."""
    rho, omega = sl.sigmoid(theta["rho"]), sl.exp(theta["log_omega"])
    c, s = sl.cos(omega), sl.sin(omega)
    A = rho * sl.stack([sl.stack([c, -s]), sl.stack([s, c])])
    q2, r2 = sl.exp(2 * theta["log_q"]), sl.exp(2 * theta["log_r"])
    return A, q2 * sl.tensor(np.eye(2)), r2


def log_likelihood(theta, ys):
    """log p(ys | theta) for observations ys [T, N] (N independent sequences), by a scan."""
    A, Q, r2 = system(theta)
    N = ys.shape[1]

    def step(carry, y):
        m, P = carry                              # filtered mean [N, 2], covariance [2, 2]
        m = m @ A.T                               # predict
        P = A @ P @ A.T + Q
        S = P[0, 0] + r2                          # innovation variance (the same for all N)
        K = P[:, 0] / S                           # Kalman gain [2]
        v = y - m[:, 0]                           # innovations [N]
        ll = -0.5 * (N * sl.log(2 * np.pi * S) + sl.sum(v * v) / S)
        m = m + v[:, None] * K                    # update
        P = P - S * (K[:, None] * K[None, :])
        return (m, P), ll

    init = (sl.zeros((N, 2)), 10.0 * sl.tensor(np.eye(2)))
    _, lls = sl.scan(step, init, ys)
    return sl.sum(lls)


def simulate(true, length, sequences, rng):
    rho, omega, q, r = (true[k] for k in NAMES)
    A = rho * np.array([[np.cos(omega), -np.sin(omega)], [np.sin(omega), np.cos(omega)]])
    x = rng.normal(0, q / np.sqrt(1 - rho**2), (sequences, 2))  # start in the stationary law
    ys = np.empty((length, sequences))
    for t in range(length):
        x = x @ A.T + rng.normal(0, q, x.shape)
        ys[t] = x[:, 0] + rng.normal(0, r, sequences)
    return ys


def to_theta(p):
    rho, omega, q, r = (p[k] for k in NAMES)
    return {"rho": sl.tensor(np.log(rho / (1 - rho))), "log_omega": sl.tensor(np.log(omega)),
            "log_q": sl.tensor(np.log(q)), "log_r": sl.tensor(np.log(r))}


def from_theta(theta):
    t = {k: float(v) for k, v in theta.items()}
    return {"rho": 1 / (1 + np.exp(-t["rho"])), "omega": np.exp(t["log_omega"]),
            "q": np.exp(t["log_q"]), "r": np.exp(t["log_r"])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=100, help="time steps per sequence")
    p.add_argument("--sequences", type=int, default=20, help="independent sequences")
    p.add_argument("--steps", type=int, default=150, help="gradient-ascent (Adam) steps")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recovery-tol", type=float, default=0.15,
                   help="largest relative error allowed in the recovered parameters")
    args = p.parse_args(argv)
    if min(args.length, args.sequences, args.steps) < 1:
        p.error("--length, --sequences and --steps must be at least 1")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()

    true = {"rho": 0.95, "omega": 0.3, "q": 0.5, "r": 1.0}
    guess = {"rho": 0.8, "omega": 0.5, "q": 1.0, "r": 0.5}
    ys = sl.tensor(simulate(true, args.length, args.sequences, rng))
    n_obs = args.length * args.sequences
    print(f"simulated {args.sequences} sequences x {args.length} steps of a damped rotation "
          "observed with noise")

    print("gradient check of the filter's log-likelihood (float64, finite differences):")
    small = sl.tensor(simulate(true, 7, 2, rng))
    try:
        sl.testing.check_grads(lambda th: log_likelihood(th, small), (to_theta(guess),))
        grad_ok = _util.check(True, "d loglik / d theta matches")
    except AssertionError as e:
        grad_ok = _util.check(False, f"d loglik / d theta: {e}")

    theta, opt = to_theta(guess), sl.optim.adam(args.lr)
    opt_state = opt.init(theta)
    objective = sl.value_and_grad(lambda th: -log_likelihood(th, ys) / n_obs)
    ll_init = float(log_likelihood(theta, ys)) / n_obs
    for step in range(args.steps):
        loss, g = objective(theta)
        theta, opt_state = opt.step(g, opt_state, theta)
        if step % max(1, args.steps // 5) == 0 or step == args.steps - 1:
            print(f"  step {step:>4}  log-likelihood per observation {-float(loss):.4f}")
    ll_fit = float(log_likelihood(theta, ys)) / n_obs
    ll_true = float(log_likelihood(to_theta(true), ys)) / n_obs
    fit = from_theta(theta)

    print(f"\n{'':>6} {'true':>8} {'start':>8} {'fitted':>8} {'rel.err':>8}")
    errors = {}
    for k in NAMES:
        errors[k] = abs(fit[k] - true[k]) / abs(true[k])
        print(f"{k:>6} {true[k]:8.4f} {guess[k]:8.4f} {fit[k]:8.4f} {errors[k]:8.1%}")
    print(f"log-likelihood per observation: start {ll_init:.4f}, fitted {ll_fit:.4f}, "
          f"at the true parameters {ll_true:.4f}")
    print(f"({time.perf_counter() - start:.1f}s)")
    ok = grad_ok
    ok &= _util.check(ll_fit > ll_init, "the log-likelihood rose")
    ok &= _util.check(max(errors.values()) <= args.recovery_tol,
                      f"every parameter within {args.recovery_tol:.0%} of the truth")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
