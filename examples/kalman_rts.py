"""A Kalman filter and an RTS smoother with full covariances, written as scans over
scanlib.linalg, and maximum likelihood by gradient ascent through the filter.

The state x[t] (d = 4) is two damped rotations, x[t+1] = A x[t] + w with A = rho *
blockdiag(R(omega1), R(omega2)) and w ~ N(0, Q), Q = q^2 C a full covariance (C a fixed
correlation matrix that couples all four coordinates). We observe the first coordinate of
each rotation, y[t] = H x[t] + v (m = 2), with v ~ N(0, R), R = r^2 [[1, c], [c, 1]].
The filter is written the way dynamax writes it: condition on y[t] (innovation covariance
S = H P H^T + R; gain K and log-likelihood by linalg.solve and slogdet, or with --solver
cholesky from S's Cholesky factor by cho_solve and solve_triangular; covariance symmetrised),
then predict (m = A m, P = A P A^T + Q). The Rauch-Tung-Striebel smoother is a
reverse scan over the filtered means and covariances. We recover (rho, omega1, omega2, q, r, c)
from the observations by Adam (scanlib.optim.adam) on the log-likelihood.

    python examples/kalman_rts.py            # a few seconds
    python examples/kalman_rts.py --length 20 --sequences 2 --steps 5 --recovery-tol 100
    python examples/kalman_rts.py --solver cholesky   # dynamax's psd_solve; slower here

Exit status 0 when the filter and smoother match dense Gaussian conditioning on a tiny
problem, the gradient check passes, the log-likelihood rose, every parameter is within
--recovery-tol of the truth (relative; absolute for the correlation c), the smoothed states are
closer to the truth than the filtered ones; 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time

import _util
import numpy as np

import scanlib as sl

NAMES = ("rho", "omega1", "omega2", "q", "r", "c")
TRUE = {"rho": 0.95, "omega1": 0.3, "omega2": 0.9, "q": 0.5, "r": 1.0, "c": 0.4}
GUESS = {"rho": 0.8, "omega1": 0.5, "omega2": 0.7, "q": 1.0, "r": 0.6, "c": 0.0}
H_OBS = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])  # first coordinate of each
P0_SCALE = 10.0  # the filter's prior on x[0]: N(0, P0_SCALE * I)
LINALG_NEEDS = {"cholesky": ("cholesky", "cho_solve", "solve_triangular"),
                "solve": ("solve", "slogdet")}


def process_correlation() -> np.ndarray:
    """C: a fixed full correlation matrix (unit diagonal) coupling the four state coordinates."""
    lower = np.array([[1.0, 0.0, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0],
                      [0.3, -0.4, 1.0, 0.0], [0.2, 0.1, 0.5, 1.0]])
    cov = lower @ lower.T
    scale = 1 / np.sqrt(np.diag(cov))
    return cov * scale[:, None] * scale[None, :]


# --- the model, from unconstrained parameters -----------------------------------------------
def rotation(omega):
    c, s = sl.cos(omega), sl.sin(omega)
    return sl.stack([sl.stack([c, -s]), sl.stack([s, c])])


def system(theta):
    """(A, Q, H, R) as Tensors. rho and c go through sigmoid / tanh, frequencies and noise
    scales through exp; omega2 = omega1 + exp(.) keeps the two rotations in order (swapping
    them would give the same observations)."""
    rho = sl.sigmoid(theta["rho"])
    omega1 = sl.exp(theta["log_omega1"])
    omega2 = omega1 + sl.exp(theta["log_domega"])
    zero = sl.zeros((2, 2))
    A = rho * sl.concatenate([sl.concatenate([rotation(omega1), zero], axis=1),
                              sl.concatenate([zero, rotation(omega2)], axis=1)], axis=0)
    Q = sl.exp(2 * theta["log_q"]) * sl.tensor(process_correlation())
    c = sl.tanh(theta["atanh_c"])
    one = sl.ones(())
    R = sl.exp(2 * theta["log_r"]) * sl.stack([sl.stack([one, c]), sl.stack([c, one])])
    return A, Q, sl.tensor(H_OBS), R


def symmetrize(P):
    return 0.5 * (P + P.T)


# --- the filter and the smoother, as scans ----------------------------------------------------
def condition(m, P, H, R, y, solver):
    """Condition N(m, P) (means m [N, d], one covariance P shared by the N sequences) on
    y = H x + N(0, R). Returns the filtered (m, P) and log N(y; H m, S) summed over N."""
    N, k = y.shape
    S = H @ P @ H.T + R                            # innovation covariance [k, k]
    v = y - m @ H.T                                # innovations [N, k]
    if solver == "cholesky":
        L = sl.linalg.cholesky(S)
        K = sl.linalg.cho_solve((L, True), H @ P).T           # gain [d, k]
        z = sl.linalg.solve_triangular(L, v.T, lower=True)     # L^-1 v, [k, N]
        quad, logdet = sl.sum(z * z), 2 * sl.sum(sl.log(sl.diagonal(L)))
    else:
        K = sl.linalg.solve(S, H @ P).T
        quad, logdet = sl.sum(v.T * sl.linalg.solve(S, v.T)), sl.linalg.slogdet(S)[1]
    ll = -0.5 * (N * (k * np.log(2 * np.pi) + logdet) + quad)
    return m + v @ K.T, symmetrize(P - K @ S @ K.T), ll


def kalman_filter(theta, ys, solver="cholesky"):
    """Filter ys [T, N, k]: (total log-likelihood, filtered means [T, N, d], covariances
    [T, d, d])."""
    A, Q, H, R = system(theta)
    d, N = A.shape[0], ys.shape[1]

    def step(carry, y):
        m, P = carry                               # predicted mean and covariance
        m, P, ll = condition(m, P, H, R, y, solver)
        return (m @ A.T, A @ P @ A.T + Q), (ll, m, P)

    init = (sl.zeros((N, d)), P0_SCALE * sl.eye(d))
    _, (lls, means, covs) = sl.scan(step, init, ys)
    return sl.sum(lls), means, covs


def log_likelihood(theta, ys, solver="cholesky"):
    return kalman_filter(theta, ys, solver)[0]


def rts_smoother(theta, means, covs, solver="cholesky"):
    """Smoothed means [T, N, d] and covariances [T, d, d] from the filtered ones, by a reverse
    scan: G = P_f A^T P_pred^-1, m_s = m_f + (m_s' - A m_f) G^T, P_s = P_f + G (P_s' - P_pred) G^T.
    """
    A, Q, _, _ = system(theta)

    def step(carry, filtered):
        m_next, P_next = carry                     # smoothed at t + 1
        m, P = filtered                            # filtered at t
        P_pred = A @ P @ A.T + Q
        if solver == "cholesky":
            G = sl.linalg.cho_solve((sl.linalg.cholesky(P_pred), True), A @ P).T
        else:
            G = sl.linalg.solve(P_pred, A @ P).T
        m = m + (m_next - m @ A.T) @ G.T
        P = symmetrize(P + G @ (P_next - P_pred) @ G.T)
        return (m, P), (m, P)

    last = (means[-1], covs[-1])
    _, (sm, sP) = sl.scan(step, last, (means[:-1], covs[:-1]), reverse=True)
    return (sl.concatenate([sm, means[-1:]], axis=0),
            sl.concatenate([sP, covs[-1:]], axis=0))


# --- simulation and a dense reference ---------------------------------------------------------
def numpy_system(p):
    theta = to_theta(p)
    return [np.asarray(x.numpy(), dtype=np.float64) for x in system(theta)]


def simulate(p, length, sequences, rng, burn_in=100):
    """States [T, N, d] and observations [T, N, k]; x[0] is drawn after a burn-in from 0, so
    close to the stationary law."""
    A, Q, H, R = numpy_system(p)
    x = np.zeros((sequences, A.shape[0]))
    xs, ys = np.empty((length, sequences, A.shape[0])), np.empty((length, sequences, H.shape[0]))
    for t in range(-burn_in, length):
        x = x @ A.T + rng.multivariate_normal(np.zeros(len(Q)), Q, sequences)
        if t >= 0:
            xs[t] = x
            ys[t] = x @ H.T + rng.multivariate_normal(np.zeros(len(R)), R, sequences)
    return xs, ys


def dense_posterior(p, ys):
    """log p(y), E[x | y] and Cov(x[t] | y) by conditioning the joint Gaussian of all T*d states
    and T*k observations of one sequence (ys [T, k]) with NumPy: the reference for the scans."""
    A, Q, H, R = numpy_system(p)
    T, d = len(ys), len(A)
    blocks = [P0_SCALE * np.eye(d)]                # Cov(x[t]) under the filter's prior
    for _ in range(T - 1):
        blocks.append(A @ blocks[-1] @ A.T + Q)
    cov = np.empty((T * d, T * d))                 # Cov(x[s], x[t]) = A^(t-s) Cov(x[s])
    for s in range(T):
        for t in range(s, T):
            block = np.linalg.matrix_power(A, t - s) @ blocks[s]
            cov[t * d:(t + 1) * d, s * d:(s + 1) * d] = block
            cov[s * d:(s + 1) * d, t * d:(t + 1) * d] = block.T
    Hbig = np.kron(np.eye(T), H)
    Syy = Hbig @ cov @ Hbig.T + np.kron(np.eye(T), R)
    y = ys.reshape(-1)
    gain = cov @ Hbig.T @ np.linalg.inv(Syy)
    loglik = -0.5 * (len(y) * np.log(2 * np.pi) + np.linalg.slogdet(Syy)[1]
                     + y @ np.linalg.solve(Syy, y))
    post = cov - gain @ Hbig @ cov
    post_covs = np.stack([post[t * d:(t + 1) * d, t * d:(t + 1) * d] for t in range(T)])
    return loglik, (gain @ y).reshape(T, d), post_covs


# --- parameters -------------------------------------------------------------------------------
def to_theta(p):
    return {"rho": sl.tensor(np.log(p["rho"] / (1 - p["rho"]))),
            "log_omega1": sl.tensor(np.log(p["omega1"])),
            "log_domega": sl.tensor(np.log(p["omega2"] - p["omega1"])),
            "log_q": sl.tensor(np.log(p["q"])), "log_r": sl.tensor(np.log(p["r"])),
            "atanh_c": sl.tensor(np.arctanh(p["c"]))}


def from_theta(theta):
    t = {k: float(v) for k, v in theta.items()}
    omega1 = np.exp(t["log_omega1"])
    return {"rho": 1 / (1 + np.exp(-t["rho"])), "omega1": omega1,
            "omega2": omega1 + np.exp(t["log_domega"]), "q": np.exp(t["log_q"]),
            "r": np.exp(t["log_r"]), "c": np.tanh(t["atanh_c"])}


def relative_error(fit, true, name):
    """|fit - true| / |true|, except for a correlation, whose error is measured on its own
    scale [-1, 1] (a relative error near c = 0 would mean nothing)."""
    return abs(fit - true) / (1.0 if name == "c" else abs(true))


# --- the checks -------------------------------------------------------------------------------
def check_against_dense(rng, solver) -> bool:
    """On one short sequence, the filter's log-likelihood, the smoothed means and covariances
    must equal those of the dense joint Gaussian."""
    _, ys = simulate(TRUE, 6, 1, rng)
    theta = to_theta(GUESS)                        # not the truth: any parameters must agree
    with sl.no_grad():
        ll, means, covs = kalman_filter(theta, sl.tensor(ys), solver)
        sm, sP = rts_smoother(theta, means, covs, solver)
    ref_ll, ref_means, ref_covs = dense_posterior(GUESS, ys[:, 0])
    ok = np.isclose(float(ll), ref_ll, rtol=1e-9)
    ok &= np.allclose(sm.numpy()[:, 0], ref_means, atol=1e-8)
    ok &= np.allclose(sP.numpy(), ref_covs, atol=1e-8)
    return _util.check(bool(ok), "filter log-likelihood and RTS smoother match dense Gaussian "
                       "conditioning")


def check_gradient(rng, solver) -> bool:
    print("gradient check of the filter's log-likelihood (float64, finite differences, first "
          "and second order):")
    _, small = simulate(TRUE, 7, 2, rng)
    small = sl.tensor(small)
    try:
        sl.testing.check_grads(lambda th: log_likelihood(th, small, solver), (to_theta(GUESS),),
                               order=2)
        return _util.check(True, "d loglik / d theta matches")
    except AssertionError as e:
        return _util.check(False, f"d loglik / d theta: {e}")


def fit(ys, steps, lr, solver):
    n_obs = ys.shape[0] * ys.shape[1]
    theta = to_theta(GUESS)
    opt = sl.optim.adam(lr)
    state = opt.init(theta)
    objective = sl.value_and_grad(lambda th: -log_likelihood(th, ys, solver) / n_obs)
    for step in range(steps):
        loss, g = objective(theta)
        theta, state = opt.step(g, state, theta)
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            print(f"  step {step:>4}  log-likelihood per observation {-float(loss):.4f}")
    return theta


def rms(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=200, help="time steps per sequence")
    p.add_argument("--sequences", type=int, default=5, help="independent sequences")
    p.add_argument("--steps", type=int, default=60, help="gradient-ascent (Adam) steps")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--solver", choices=sorted(LINALG_NEEDS), default="solve",
                   help="cholesky: cho_solve / solve_triangular; solve: solve / slogdet")
    p.add_argument("--recovery-tol", type=float, default=0.15,
                   help="largest relative error allowed in the recovered parameters")
    args = p.parse_args(argv)
    if min(args.sequences, args.steps) < 1 or args.length < 2:
        p.error("--sequences and --steps must be at least 1, --length at least 2")
    missing = [n for n in LINALG_NEEDS[args.solver] if not hasattr(sl.linalg, n)]
    if missing:
        print(f"error: --solver {args.solver} needs scanlib.linalg.{', '.join(missing)}, which "
              f"this scanlib lacks (it has {sl.linalg.__all__}).", file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()

    states, ys = simulate(TRUE, args.length, args.sequences, rng)
    ys_t = sl.tensor(ys)
    n_obs = args.length * args.sequences
    print(f"simulated {args.sequences} sequences x {args.length} steps of two damped rotations "
          f"(d = 4, full Q), observed in m = 2 coordinates with correlated noise")
    ok = check_against_dense(rng, args.solver)
    ok &= check_gradient(rng, args.solver)

    ll_init = float(log_likelihood(to_theta(GUESS), ys_t, args.solver)) / n_obs
    theta = fit(ys_t, args.steps, args.lr, args.solver)
    with sl.no_grad():
        ll_fit, means, covs = kalman_filter(theta, ys_t, args.solver)
        smoothed, _ = rts_smoother(theta, means, covs, args.solver)
        ll_true = float(log_likelihood(to_theta(TRUE), ys_t, args.solver)) / n_obs
    ll_fit = float(ll_fit) / n_obs
    fitted = from_theta(theta)

    print(f"\n{'':>6} {'true':>8} {'start':>8} {'fitted':>8} {'rel.err':>8}")
    errors = {}
    for k in NAMES:
        errors[k] = relative_error(fitted[k], TRUE[k], k)
        print(f"{k:>6} {TRUE[k]:8.4f} {GUESS[k]:8.4f} {fitted[k]:8.4f} {errors[k]:8.1%}")
    print(f"log-likelihood per observation: start {ll_init:.4f}, fitted {ll_fit:.4f}, "
          f"at the true parameters {ll_true:.4f}")
    err_filtered, err_smoothed = rms(means.numpy(), states), rms(smoothed.numpy(), states)
    print(f"state RMS error (fitted parameters): filtered {err_filtered:.4f}, "
          f"smoothed {err_smoothed:.4f}")
    print(f"({time.perf_counter() - start:.1f}s)")
    ok &= _util.check(ll_fit > ll_init, "the log-likelihood rose")
    ok &= _util.check(max(errors.values()) <= args.recovery_tol,
                      f"every parameter within {args.recovery_tol:.0%} of the truth")
    ok &= _util.check(err_smoothed < err_filtered, "smoothing helps: the smoothed state error "
                      "is below the filtered one")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
