"""Hamiltonian Monte Carlo on a Holt-Winters model, its gradient from `scanlib.jit`.

A seasonal series is simulated from additive Holt-Winters (level, trend, a season of period
4) with Gaussian noise. Its log-likelihood is a scan over the T observations (the
error-correction form: each step's one-step-ahead error updates level, trend and season).
HMC draws the posterior of the seven parameters (three smoothing weights through sigmoids,
the noise scale through exp, the initial level, trend and season) with leapfrog steps, each
one call of `jit(value_and_grad(log_density))`: a sampler's workload, thousands of calls of
one short scan, where the replayed trace skips tracing, the tape and the scan's
linearization. The call is checked against the same function without jit first (bit for bit
with the NumPy loop; to rounding with numba, where jit runs the whole call as one kernel and
the gradient's sums are taken in the loop's order).

    python examples/hmc_holt_winters.py                    # several seconds
    python examples/hmc_holt_winters.py --compiler numba   # the scans as numba kernels
    python examples/hmc_holt_winters.py --compiler auto    # the library's default: compiled
                                                           # in the background as it samples
    python examples/hmc_holt_winters.py --draws 20 --leapfrog 4 --length 24

jit removes the fixed cost of each call (about a millisecond here); with the NumPy loop the
scans' steps remain, and `--compiler numba` (`pip install 'scanlib-autodiff[jit]'`) compiles
the whole call, scans and all, into one kernel, which together make a call about 25 times faster
(its first call compiles: about 5 s on an empty cache; `logging.basicConfig(level=logging.INFO)`
shows each compile). `--compiler auto`, scanlib's default where numba is installed, does not
wait: the sampler's first draws run the NumPy code while the kernel compiles in a background
process, and the draws after it is ready run the kernel. This example pins "numpy" by
default, so that its check of jit against eager is bit for bit.

Exit status 0 when jit agrees with the eager call, the acceptance rate is between 0.3 and
0.995 and the noise scale's posterior mean is within --tolerance (relative) of the truth;
1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import _util
import numpy as np

import scanlib as sl

PERIOD = 4
TRUE = {"alpha": 0.4, "beta": 0.1, "gamma": 0.3, "sigma": 0.5}
NAMES = ("alpha", "beta", "gamma", "log_sigma", "level0", "trend0", "season0")


def simulate(length, rng):
    level, trend = 10.0, 0.2
    season = list(2.0 * np.sin(2 * np.pi * np.arange(PERIOD) / PERIOD))
    ys = []
    for _ in range(length):
        err = TRUE["sigma"] * rng.standard_normal()
        ys.append(level + trend + season[0] + err)
        level, trend = level + trend + TRUE["alpha"] * err, trend + TRUE["alpha"] * TRUE[
            "beta"] * err
        season = season[1:] + [season[0] + TRUE["gamma"] * err]
    return np.array(ys)


def log_density(theta, ys):
    """log p(ys | theta) + log p(theta): standard normal priors on the unconstrained
    parameters (level0 around the first observation)."""
    alpha, beta, gamma = (sl.sigmoid(theta[k]) for k in ("alpha", "beta", "gamma"))
    sigma = sl.exp(theta["log_sigma"])

    def step(carry, y):
        level, trend, season = carry
        err = y - (level + trend + season[0])
        season = sl.concatenate([season[1:], (season[0] + gamma * err)[None]])
        return (level + trend + alpha * err, trend + alpha * beta * err, season), err

    init = (theta["level0"], theta["trend0"], theta["season0"])
    _, errs = sl.scan(step, init, ys)
    T = ys.shape[0]
    loglik = (-0.5 * sl.vdot(errs, errs) / (sigma * sigma) - T * theta["log_sigma"]
              - 0.5 * T * math.log(2 * math.pi))
    prior = sum(-0.5 * sl.sum(theta[k] ** 2) for k in NAMES if k != "level0")
    prior = prior - 0.5 * (theta["level0"] - ys[0]) ** 2 / 100.0
    return loglik + prior


def hmc(value_and_grad, theta, draws, leapfrog, step_size, rng):
    """Draws of theta (dicts of NumPy arrays) by HMC with an identity mass matrix."""
    def numpy(tree):
        return {k: v.numpy() for k, v in tree.items()}

    logp, grad = value_and_grad(theta)
    logp, grad = float(logp.item()), numpy(grad)
    samples, accepted = [], 0
    for _ in range(draws):
        p0 = {k: rng.standard_normal(np.shape(v)) for k, v in theta.items()}
        q, p, g = dict(theta), {k: v + 0.5 * step_size * grad[k] for k, v in p0.items()}, grad
        for i in range(leapfrog):
            q = {k: q[k] + step_size * p[k] for k in q}
            new_logp, g = value_and_grad(q)
            g = numpy(g)
            if i < leapfrog - 1:
                p = {k: p[k] + step_size * g[k] for k in p}
        p = {k: p[k] + 0.5 * step_size * g[k] for k in p}
        new_logp = float(new_logp.item())
        kinetic = sum(0.5 * np.sum(v ** 2) for v in p.values())
        kinetic0 = sum(0.5 * np.sum(v ** 2) for v in p0.values())
        if np.isfinite(new_logp) and math.log(rng.random()) < new_logp - kinetic - logp + kinetic0:
            theta, logp, grad, accepted = q, new_logp, g, accepted + 1
        samples.append(theta)
    return samples, accepted / draws


def per_call_seconds(fn, theta, calls=50):
    fn(theta)
    start = time.perf_counter()
    for _ in range(calls):
        fn(theta)
    return (time.perf_counter() - start) / calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=60, help="observations T")
    p.add_argument("--draws", type=int, default=300)
    p.add_argument("--leapfrog", type=int, default=8, help="leapfrog steps per draw")
    p.add_argument("--step-size", type=float, default=0.08)
    p.add_argument("--tolerance", type=float, default=0.35,
                   help="relative error allowed for the noise scale's posterior mean")
    p.add_argument("--compiler", choices=("numpy", "numba", "auto"), default="numpy",
                   help="scan's loop compiler (numba and auto need the jit extra)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if min(args.length, args.draws, args.leapfrog) < 1 or args.length < PERIOD:
        p.error("--draws and --leapfrog must be at least 1, --length at least 4")
    old = sl.set_loop_compiler(args.compiler)  # every scan from here, until main returns
    try:
        return run(args)
    finally:
        sl.set_loop_compiler(old)


def run(args) -> int:
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    ys = simulate(args.length, rng)
    print(f"simulated {args.length} observations of additive Holt-Winters (period {PERIOD}), "
          f"sigma = {TRUE['sigma']}")

    eager = sl.value_and_grad(lambda th: log_density(th, ys))
    jitted = sl.jit(eager)
    theta = {"alpha": np.array(0.0), "beta": np.array(-1.0), "gamma": np.array(0.0),
             "log_sigma": np.array(0.0), "level0": np.array(ys[0]), "trend0": np.array(0.0),
             "season0": np.zeros(PERIOD)}
    (v_e, g_e), (v_j, g_j) = eager(theta), jitted(theta)
    if args.compiler == "numpy":  # the same NumPy calls replayed: the same bits
        same = v_e.item() == v_j.item() and all(
            np.array_equal(g_e[k].numpy(), g_j[k].numpy()) for k in NAMES)
        ok = _util.check(same, "jit(value_and_grad) equals value_and_grad, bit for bit")
    else:  # one fused kernel: the gradient sums in the loop's order, not in chunks
        same = np.isclose(v_e.item(), v_j.item(), rtol=1e-12, atol=0) and all(
            np.allclose(g_e[k].numpy(), g_j[k].numpy(), rtol=1e-10, atol=1e-12)
            for k in NAMES)
        ok = _util.check(same, "jit(value_and_grad) equals value_and_grad to rounding")
    t_eager, t_jit = per_call_seconds(eager, theta), per_call_seconds(jitted, theta)
    print(f"one log-density gradient ({args.compiler} loop): {t_eager * 1e3:.2f} ms eager, "
          f"{t_jit * 1e3:.2f} ms jitted ({t_eager / t_jit:.1f}x)")

    samples, rate = hmc(jitted, theta, args.draws, args.leapfrog, args.step_size, rng)
    kept = samples[len(samples) // 2:]  # the first half is warm-up
    sigma = np.mean([np.exp(s["log_sigma"]) for s in kept])
    weights = {k: np.mean([1 / (1 + np.exp(-s[k])) for s in kept]) for k in ("alpha", "beta",
                                                                              "gamma")}
    print(f"{args.draws} draws x {args.leapfrog} leapfrog steps, acceptance rate {rate:.2f}")
    print("posterior means (second half): " + ", ".join(
        f"{k} {weights[k]:.2f} (true {TRUE[k]})" for k in weights)
        + f", sigma {sigma:.3f} (true {TRUE['sigma']})   ({time.perf_counter() - start:.1f}s)")
    ok &= _util.check(0.3 <= rate <= 0.995, "the acceptance rate is between 0.3 and 0.995")
    ok &= _util.check(abs(sigma - TRUE["sigma"]) <= args.tolerance * TRUE["sigma"],
                      f"sigma's posterior mean is within {args.tolerance:.0%} of the truth")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
