"""jvp through a bench workload's scan against its forward alone (and value_and_grad), in
process CPU time, median of 7 interleaved rounds after 2 warm-ups (bench/NOTES.md, "Issue 12:
jvp by double VJP"):

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.jvp_cost rnn full
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.jvp_cost kalman full
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.jvp_cost kalman full numba
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.jvp_cost kalman-chol full
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.jvp_cost gp full
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.jvp_cost kalman full numba jit
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.jvp_cost kalman full jax  # + JAX's

The tier: "numpy", "numba" or "auto" (scan's compiler; none named: the library's default) and
"jit" (kalman, kalman-chol and gp: each timed function under scanlib.jit).

kalman: jacfwd and jacrev of examples/kalman.py's log-likelihood (T=100, N=20; quick: T=20,
N=4) with respect to its 4 parameters, against the log-likelihood alone. kalman-chol: the
same for a filter of a 3-d state observed whole, scored with cholesky, cho_solve and slogdet
(T=100; quick: T=20), with respect to 3 parameters. gp: a Gaussian process's negative log
marginal likelihood (cholesky, cho_solve, slogdet, det of n=20 points; quick: n=8), no scan.

Imports scanlib, NumPy and bench's own modules.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import scanlib as sl
from bench import env
from bench.harness import median_cpu_times
from bench.scanlib_impl import _ops
from bench.workloads import BY_NAME, loss, make_data, map_tree, step


def _cases(fn, arg, jit):
    """forward, jacrev and jacfwd of fn at arg, each under scanlib.jit where asked."""
    fns = {"forward": fn, "jacrev": sl.jacrev(fn), "jacfwd": sl.jacfwd(fn)}
    fns = {k: sl.jit(f) if jit else f for k, f in fns.items()}
    return {k: (lambda f=f: f(arg)) for k, f in fns.items()}, {k: "forward" for k in fns}


def _kalman_cases(size, jit=False):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import kalman  # noqa: PLC0415 (an example, not a package)

    T, N = (100, 20) if size == "full" else (20, 4)
    true = {"rho": 0.95, "omega": 0.3, "q": 0.5, "r": 1.0}
    ys = sl.tensor(kalman.simulate(true, T, N, np.random.default_rng(0)))
    theta = kalman.to_theta(true)

    def ll(th):
        return kalman.log_likelihood(th, ys)

    return _cases(ll, theta, jit)


def _kalman_jax(size):
    """JAX's forward, jacrev and jacfwd of the same log-likelihood under jax.jit (where JAX is
    installed), timed as scanlib's: the context for the jacfwd / jacrev ratio."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import kalman  # noqa: PLC0415

    T, N = (100, 20) if size == "full" else (20, 4)
    true = {"rho": 0.95, "omega": 0.3, "q": 0.5, "r": 1.0}
    ys = jnp.asarray(kalman.simulate(true, T, N, np.random.default_rng(0)))
    theta = {k: jnp.asarray(float(v.numpy())) for k, v in kalman.to_theta(true).items()}

    def ll(th):
        rho, omega = jax.nn.sigmoid(th["rho"]), jnp.exp(th["log_omega"])
        c, s = jnp.cos(omega), jnp.sin(omega)
        A = rho * jnp.stack([jnp.stack([c, -s]), jnp.stack([s, c])])
        Q, r2 = jnp.exp(2 * th["log_q"]) * jnp.eye(2), jnp.exp(2 * th["log_r"])

        def step(carry, y):
            m, P = carry
            m, P = m @ A.T, A @ P @ A.T + Q
            S = P[0, 0] + r2
            K, v = P[:, 0] / S, y - m[:, 0]
            ll = -0.5 * (N * jnp.log(2 * np.pi * S) + jnp.sum(v * v) / S)
            return (m + v[:, None] * K, P - S * (K[:, None] * K[None, :])), ll

        return jnp.sum(jax.lax.scan(step, (jnp.zeros((N, 2)), 10.0 * jnp.eye(2)), ys)[1])

    fns = {"jax forward": jax.jit(ll), "jax jacrev": jax.jit(jax.jacrev(ll)),
           "jax jacfwd": jax.jit(jax.jacfwd(ll))}
    return {k: (lambda f=f: jax.block_until_ready(f(theta))) for k, f in fns.items()}


def _kalman_chol_cases(size, jit=False):
    T, d = (100, 3) if size == "full" else (20, 3)
    rng = np.random.default_rng(0)
    ys = sl.tensor(rng.standard_normal((T, d)))
    B = sl.tensor(0.1 * rng.standard_normal((d, d)))
    eye = sl.tensor(np.eye(d))

    def ll(th):
        F, Q, R = th["a"] * eye + B, sl.exp(th["log_q"]) * eye, sl.exp(th["log_r"]) * eye

        def step(carry, y):
            m, P = carry
            m, P = F @ m, F @ P @ F.T + Q
            S = P + R
            L = sl.linalg.cholesky(S)
            v = y - m
            alpha = sl.linalg.cho_solve((L, True), v)
            ll = -0.5 * (sl.vdot(v, alpha) + sl.linalg.slogdet(S).logabsdet)
            return (m + P @ alpha, P - P @ sl.linalg.cho_solve((L, True), P)), ll

        _, lls = sl.scan(step, (sl.zeros(d), eye), ys)
        return sl.sum(lls)

    theta = {"a": sl.tensor(0.8), "log_q": sl.tensor(-1.0), "log_r": sl.tensor(0.0)}
    return _cases(ll, theta, jit)


def _gp_cases(size, jit=False):
    n = 20 if size == "full" else 8
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 1))
    y, D, eye = sl.tensor(rng.standard_normal(n)), sl.tensor((X - X.T) ** 2), sl.tensor(np.eye(n))

    def nll(th):
        K = (sl.exp(th["log_s"]) * sl.exp(-D / sl.exp(th["log_l"]))
             + sl.exp(th["log_n"]) * eye)
        alpha = sl.linalg.cho_solve((sl.linalg.cholesky(K), True), y)
        return (0.5 * sl.vdot(y, alpha) + 0.5 * sl.linalg.slogdet(K).logabsdet
                + sl.linalg.det(K[:2, :2]))

    theta = {k: sl.tensor(v) for k, v in {"log_s": 0.1, "log_l": -0.3, "log_n": -1.0}.items()}
    return _cases(nll, theta, jit)


def main(argv):
    argv, jit = env.tier_from(argv)
    name = argv[0] if argv else "rnn"
    size = argv[1] if len(argv) > 1 else "full"
    if name == "kalman":
        cases, bases = _kalman_cases(size, jit)
    elif name == "kalman-chol":
        cases, bases = _kalman_chol_cases(size, jit)
    elif name == "gp":
        cases, bases = _gp_cases(size, jit)
    elif jit:
        raise SystemExit("jit: for kalman, kalman-chol and gp")
    else:
        cases, bases = _scan_cases(name, size)
    firsts = {}
    for k, c in cases.items():  # tracing and (numba) compiling: timed apart
        t = time.perf_counter()
        c()
        firsts[k] = time.perf_counter() - t
    print("first calls (s): " + ", ".join(f"{k} {t:.2f}" for k, t in firsts.items()))
    env.settle(*cases.values())
    if name == "kalman" and "jax" in argv:  # JAX's, interleaved with scanlib's
        jax_cases = _kalman_jax(size)
        if jax_cases:
            cases.update(jax_cases)
            bases.update({k: "jax forward" for k in jax_cases})
            for c in jax_cases.values():
                c()
    times = median_cpu_times(cases)
    for k, v in times.items():
        base = times[bases[k]]
        print(f"{k:16s} {v * 1e3:9.3f} ms   {v / base:5.2f}x {bases[k]}")
    return 0


def _scan_cases(name, size):
    wl = BY_NAME[name]
    inputs, consts = make_data(wl, size)
    ops = _ops(sl)
    rng = np.random.default_rng(1)
    tangents = map_tree(lambda a: rng.standard_normal(a.shape).astype(a.dtype), inputs)

    def trajectory(a):
        def body(carry, x):
            return step(wl.kind, ops, a["params"], carry, x)
        return sl.scan(body, a["init"], a["xs"])

    def f(a):  # the workload's loss
        carry, ys = trajectory(a)
        return loss(ops, ys, carry, consts)

    def f_ys(a):  # the trajectory itself as the output
        return trajectory(a)[1]

    vg = sl.value_and_grad(f)
    cases = {
        "forward": lambda: f(inputs),
        "value_and_grad": lambda: vg(inputs),
        "jvp (loss)": lambda: sl.jvp(f, (inputs,), (tangents,)),
        "forward (ys)": lambda: f_ys(inputs),
        "jvp (ys)": lambda: sl.jvp(f_ys, (inputs,), (tangents,)),
    }
    return cases, {k: "forward (ys)" if "ys" in k else "forward" for k in cases}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
