"""Fitting an orbit through a Newton solver: gradients of a while_loop run to a tolerance.

A body on a Kepler orbit is observed at irregular times t_i as noisy sky positions. Its
position needs the eccentric anomaly E_i, the root of Kepler's equation

    F(E, e, M) = E - e sin E - M = 0,    M_i = 2 pi t_i / P + M0,

which has no closed form: `solve_kepler` finds every E_i at once by Newton's method inside
`scanlib.while_loop`, iterating until max_i |F| < --tol (the number of iterations depends on
the parameters, so it is only known as the loop runs). The orbit's five parameters (semi-major
axis a, eccentricity e, period P, phase M0, orientation w) are recovered from the data by Adam
(scanlib.optim.adam) on the mean squared error, differentiated through the while_loop.

JAX cannot do this: `jax.grad` of `lax.while_loop` raises "Reverse-mode differentiation does
not work for lax.while_loop", because its compiler does not know the trip count; there one
writes a custom implicit VJP (`jax.custom_vjp` with the implicit-function theorem, or
jaxopt's implicit differentiation). scanlib runs define-by-run, so it finds the trip count as
it goes and differentiates the loop itself. The example checks that this gradient is the one
the implicit-function theorem gives, dE/dp = -F_p / F_E at the root, to ~1e-8 in float64.

    python examples/newton_fit.py            # a few seconds
    python examples/newton_fit.py --points 20 --steps 5 --recovery-tol 100

Exit status 0 when the gradients match the implicit-function theorem, the error fell and
every parameter is within --recovery-tol of the truth (relative; absolute in radians for the
angles M0 and w); 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import _util
import numpy as np

import scanlib as sl

NAMES = ("a", "e", "P", "M0", "w")
ANGLES = ("M0", "w")
TRUE = {"a": 1.5, "e": 0.6, "P": 3.0, "M0": 0.4, "w": 0.8}
GUESS = {"a": 1.2, "e": 0.3, "P": 3.15, "M0": 0.1, "w": 0.5}
MAX_NEWTON_STEPS = 60  # Newton converges in a handful; more means something is wrong


# --- the model ---------------------------------------------------------------------------------
def kepler_residual(E, e, M):
    return E - e * sl.sin(E) - M


def solve_kepler(e, M, tol):
    """E with E - e sin E = M (elementwise, e in [0, 1)), by Newton's method until
    max |residual| < tol, and the number of Newton steps taken (a 0-d int Tensor)."""

    def not_converged(carry):
        E, _ = carry
        return sl.max(sl.abs(kepler_residual(E, e, M))) >= tol

    def newton_step(carry):
        E, steps = carry
        return E - kepler_residual(E, e, M) / (1 - e * sl.cos(E)), steps + 1

    start = M + e * sl.sin(M)  # a good first guess for moderate e
    return sl.while_loop(not_converged, newton_step, (start, sl.tensor(0)),
                         max_steps=MAX_NEWTON_STEPS)


def to_theta(p):
    """Unconstrained parameters: log a, logit e, log P, and the angles as they are."""
    return {"log_a": sl.tensor(np.log(p["a"])), "logit_e": sl.tensor(np.log(p["e"] / (1 - p["e"]))),
            "log_P": sl.tensor(np.log(p["P"])), "M0": sl.tensor(p["M0"]), "w": sl.tensor(p["w"])}


def from_theta(theta):
    return {"a": float(np.exp(theta["log_a"].numpy())),
            "e": float(1 / (1 + np.exp(-theta["logit_e"].numpy()))),
            "P": float(np.exp(theta["log_P"].numpy())),
            "M0": float(theta["M0"].numpy()), "w": float(theta["w"].numpy())}


def mean_anomaly(theta, times):
    return 2 * np.pi * times / sl.exp(theta["log_P"]) + theta["M0"]


def sky_positions(theta, E):
    """Positions [n, 2] from the eccentric anomalies: the ellipse, rotated by w."""
    a, e = sl.exp(theta["log_a"]), sl.sigmoid(theta["logit_e"])
    x, y = a * (sl.cos(E) - e), a * sl.sqrt(1 - e * e) * sl.sin(E)
    c, s = sl.cos(theta["w"]), sl.sin(theta["w"])
    return sl.stack([c * x - s * y, s * x + c * y], axis=-1)


def predict(theta, times, tol):
    E, steps = solve_kepler(sl.sigmoid(theta["logit_e"]), mean_anomaly(theta, times), tol)
    return sky_positions(theta, E), steps


def mse(theta, times, data, tol):
    return sl.mean((predict(theta, times, tol)[0] - data) ** 2)


# --- the checks against the implicit-function theorem ------------------------------------------
def implicit_roots(theta, times, tol):
    """E as a function of theta whose gradient is, by construction, the implicit-function
    theorem's: one Newton step from the detached root E*, with F_E held fixed, is
    E* - F(E*, e, M) / F_E(E*), and its derivative in p is -F_p / F_E (F(E*) = 0 there)."""
    e, M = sl.sigmoid(theta["logit_e"]), mean_anomaly(theta, times)
    root = sl.stop_gradient(solve_kepler(e, M, tol)[0])
    F_E = sl.stop_gradient(1 - e * sl.cos(root))
    return root - kepler_residual(root, e, M) / F_E


def relative_gap(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def check_root_derivatives(rng, tol) -> bool:
    """dE_i/de and dE_i/dM_i through the while_loop against -F_e / F_E = sin E / (1 - e cos E)
    and -F_M / F_E = 1 / (1 - e cos E) at the root, for e and M of every size."""
    e = sl.tensor(rng.uniform(0.0, 0.95, 50))
    M = sl.tensor(rng.uniform(-10.0, 10.0, 50))
    dE_de, dE_dM = sl.grad(lambda e, M: solve_kepler(e, M, tol)[0].sum(), argnums=(0, 1))(e, M)
    E, steps = solve_kepler(e, M, tol)
    E, e_np = E.numpy(), e.numpy()
    F_E = 1 - e_np * np.cos(E)
    gap = max(relative_gap(dE_de.numpy(), np.sin(E) / F_E), relative_gap(dE_dM.numpy(), 1 / F_E))
    print(f"root derivatives, 50 random (e, M), {int(steps)} Newton steps: largest relative "
          f"gap to -F_p / F_E {gap:.1e}")
    return _util.check(gap < 1e-8, "dE/de and dE/dM through the while_loop equal the "
                                   "implicit-function theorem's -F_p / F_E to 1e-8")


def check_loss_gradient(theta, times, data, tol) -> bool:
    """The fit's own gradient (through the while_loop) against the same loss with E replaced
    by implicit_roots."""
    through_loop = sl.grad(lambda th: mse(th, times, data, tol))(theta)
    implicit = sl.grad(lambda th: sl.mean((sky_positions(th, implicit_roots(th, times, tol))
                                           - data) ** 2))(theta)
    gap = max(relative_gap(through_loop[k].numpy(), implicit[k].numpy()) for k in theta)
    print(f"d loss / d theta: largest relative gap between the while_loop's gradient and the "
          f"implicit-function theorem's {gap:.1e}")
    return _util.check(gap < 1e-8, "d loss / d theta through the while_loop equals the "
                                   "implicit-function gradient to 1e-8")


# --- data and the fit --------------------------------------------------------------------------
def simulate(points, noise, rng, tol):
    """Times over about 1.7 periods, and noisy positions [points, 2] of the true orbit."""
    times = np.sort(rng.uniform(0.0, 5.0, points))
    with sl.no_grad():
        clean = predict(to_theta(TRUE), times, tol)[0].numpy()
    return times, clean + rng.normal(0.0, noise, clean.shape)


def fit(times, data, steps, lr, tol):
    theta = to_theta(GUESS)
    opt = sl.optim.adam(lr)
    state = opt.init(theta)
    objective = sl.value_and_grad(lambda th: mse(th, times, data, tol))
    for step in range(steps):
        loss, g = objective(theta)
        if step % max(1, steps // 5) == 0:
            with sl.no_grad():
                newton = int(predict(theta, times, tol)[1])
            print(f"  step {step:>4}  mse {float(loss):.6f}  ({newton} Newton steps)")
        theta, state = opt.step(g, state, theta)
    return theta


def parameter_error(name, fitted, true) -> float:
    return abs(fitted - true) if name in ANGLES else abs(fitted - true) / abs(true)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=80, help="observed positions")
    p.add_argument("--noise", type=float, default=0.02, help="observation noise per coordinate")
    p.add_argument("--steps", type=int, default=300, help="Adam steps")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--tol", type=float, default=1e-12, help="Newton stops at max |F| < tol")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recovery-tol", type=float, default=0.01,
                   help="largest error allowed in the recovered parameters (relative; "
                        "radians for M0 and w)")
    args = p.parse_args(argv)
    if min(args.points, args.steps) < 1 or not args.tol > 0:
        p.error("--points and --steps must be at least 1 and --tol positive")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()

    times, data = simulate(args.points, args.noise, rng, args.tol)
    data_t = sl.tensor(data)
    print(f"{args.points} noisy positions of a Kepler orbit (e = {TRUE['e']}), each needing "
          f"a Newton solve of E - e sin E = M to |F| < {args.tol:g}")
    ok = check_root_derivatives(rng, args.tol)
    ok &= check_loss_gradient(to_theta(GUESS), times, data_t, args.tol)

    mse_start = float(mse(to_theta(GUESS), times, data_t, args.tol))
    theta = fit(times, data_t, args.steps, args.lr, args.tol)
    mse_fit = float(mse(theta, times, data_t, args.tol))
    fitted = from_theta(theta)

    print(f"\n{'':>6} {'true':>8} {'start':>8} {'fitted':>8} {'error':>8}")
    errors = {}
    for k in NAMES:
        errors[k] = parameter_error(k, fitted[k], TRUE[k])
        shown = f"{errors[k]:8.4f}" if k in ANGLES else f"{errors[k]:8.2%}"
        print(f"{k:>6} {TRUE[k]:8.4f} {GUESS[k]:8.4f} {fitted[k]:8.4f} {shown}")
    print(f"mse: start {mse_start:.6f}, fitted {mse_fit:.6f} (noise variance "
          f"{args.noise ** 2:.6f})")
    print(f"({time.perf_counter() - start:.1f}s)")
    ok &= _util.check(mse_fit < mse_start, "the error fell")
    ok &= _util.check(max(errors.values()) <= args.recovery_tol,
                      f"every parameter within {args.recovery_tol:g} of the truth "
                      "(relative; radians for M0 and w)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
