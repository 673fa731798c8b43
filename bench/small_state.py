"""Small-state recurrences, scanlib against jax.jit(jax.value_and_grad(...)).

Four models whose steps are many tiny operations, each written once against an `ops` namespace
(scanlib's or jax.numpy's), float64, forward + full backward of a scalar loss:

- hmm: K=8 states, T=2,000, forward filter (logsumexp) and backward smoother (a reverse scan);
  loss the marginal log-likelihood plus a weighted sum of the smoothed marginals; gradient
  with respect to the transition and emission logits.
- kalman: d=4 state, m=2 observations, T=500, `linalg.cholesky`, `solve_triangular` and `solve`
  in the body; gradient of the log-likelihood with respect to F and the log noise scales.
- holt-winters: a scalar additive Holt-Winters likelihood (period 4), T=60, every parameter
  (a sampler's log density; calls of one value_and_grad are also shown in microseconds).
- gae: generalized advantage estimation, T=128 x 4 envs, a reverse scan; gradient w.r.t. values.

    python -m bench.small_state          # full sizes (about 20 s here, a third of it JAX compiling)
    python -m bench.small_state quick    # small sizes, a few seconds

scanlib's faster tiers have their own table, each checked against the NumPy loop to the same
tolerance: scanlib.jit of the value_and_grad (traced once, replayed after), and with numba
installed scan(..., compiler="numba") with and without jit (its first call compiles the
kernels, or loads them from the cache; first calls are shown apart).

Values and gradients of the two are checked to agree before timing (max|g - g_jax| / max|g_jax|
<= 1e-8, array by array); the exit status is 1 when they do not. JAX's trace + lower + compile
time is measured apart (`jax compile ms`) and its calls are timed after it. Rounds interleave
the contenders, the order alternating; a sample is one call, or for calls under 2 ms a block
of calls in a row lasting about 2 ms (as a sampler makes them), divided by their number; the
table shows medians of wall time per call. Without JAX
only the scanlib column is printed. One BLAS / XLA thread (bench/env.py), set before NumPy is
imported when run as a module. Imports NumPy, scanlib, bench's own modules, and JAX if present.
"""

from __future__ import annotations

if __name__ == "__main__":  # before NumPy is imported: BLAS and XLA read these only once
    from bench import env

    _THREADS_HOW = env.set_threads(1)

import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

import numpy as np  # noqa: E402

SIZES = {
    "full": {"hmm": {"K": 8, "M": 6, "T": 2000}, "kalman": {"d": 4, "m": 2, "T": 500},
             "holt-winters": {"period": 4, "T": 60}, "gae": {"T": 128, "N": 4}},
    "quick": {"hmm": {"K": 8, "M": 6, "T": 200}, "kalman": {"d": 4, "m": 2, "T": 50},
              "holt-winters": {"period": 4, "T": 60}, "gae": {"T": 128, "N": 4}},
}
WORKLOADS = ("hmm", "kalman", "holt-winters", "gae")
TOLERANCE = 1e-8  # max|g - g_ref| / max|g_ref| per array, float64
BUDGET_S = {"full": 1.5, "quick": 0.15}  # seconds of timed calls per contender and workload
MIN_REPS, MAX_REPS = 5, 2000
# scanlib's faster ways to run the same value_and_grad, each checked against the NumPy loop.
TIERS = {"jit": {"jit": True, "compiler": "numpy"},
         "numba": {"jit": False, "compiler": "numba"},
         "jit+numba per scan": {"jit": True, "compiler": "numba", "fused": False},
         "jit+numba": {"jit": True, "compiler": "numba"}}


# --- the models, written once against `ops` -----------------------------------------------------
def hmm_loss(ops, params, data):
    """log p(y_1..T) + sum_t <p(z_t | y_1..T), C_t>: filter forward, smoother backward."""
    log_A = ops.log_softmax(params["A_logits"], axis=1)      # [K, K], rows sum to one
    log_B = ops.log_softmax(params["B_logits"], axis=1)      # [K, M]
    log_e = log_B.T[data["ys"]]                              # [T, K], gathered before the scan

    def filter_step(log_pred, le):
        joint = log_pred + le
        norm = ops.logsumexp(joint)
        log_filt = joint - norm
        log_next = ops.logsumexp(log_filt[:, None] + log_A, axis=0)
        return log_next, (log_filt, log_pred, norm)

    _, (log_filt, log_pred, norms) = ops.scan(filter_step, data["log_pi"], log_e)

    def smoother_step(log_smooth_next, x):  # RTS form of the HMM smoother, in log space
        log_filt_t, log_pred_next = x
        ratio = log_A + (log_smooth_next - log_pred_next)[None, :]
        log_smooth = log_filt_t + ops.logsumexp(ratio, axis=1)
        return log_smooth, log_smooth

    last = log_filt[-1]
    _, log_smooth = ops.scan(smoother_step, last, (log_filt[:-1], log_pred[1:]), reverse=True)
    C = data["C"]
    return (ops.sum(norms) + ops.vdot(ops.exp(log_smooth), C[:-1])
            + ops.vdot(ops.exp(last), C[-1]))


def kalman_loss(ops, params, data):
    """The Kalman filter's log-likelihood of ys [T, m]; Cholesky of the innovation covariance."""
    F, H = params["F"], data["H"]
    Q = data["eye_d"] * ops.exp(2 * params["log_q"])         # diag(q^2)
    R = data["eye_m"] * ops.exp(2 * params["log_r"])
    m_obs = H.shape[0]

    def step(carry, y):
        mean, P = carry
        mean = F @ mean                                       # predict
        P = F @ P @ F.T + Q
        HP = H @ P                                            # [m, d]
        S = HP @ H.T + R
        S = 0.5 * (S + S.T)  # exactly symmetric: JAX's cholesky symmetrizes its input
        L = ops.cholesky(S)
        v = y - H @ mean
        z = ops.solve_triangular(L, v, lower=True)
        ll = -0.5 * (ops.vdot(z, z) + m_obs * math.log(2 * math.pi)) - ops.sum(
            ops.log(ops.diagonal(L)))
        K_T = ops.solve(S, HP)                                # gain, transposed: [m, d]
        mean = mean + v @ K_T                                 # update
        P = P - K_T.T @ HP
        return (mean, 0.5 * (P + P.T)), ll

    _, lls = ops.scan(step, (data["mean0"], data["P0"]), data["ys"])
    return ops.sum(lls)


def holt_winters_loss(ops, params, data):
    """Gaussian log-likelihood of additive Holt-Winters (error-correction form), scalar series."""
    alpha, beta, gamma = (ops.sigmoid(params[k]) for k in ("alpha", "beta", "gamma"))
    sigma = ops.exp(params["log_sigma"])

    def step(carry, y):
        level, trend, season = carry
        err = y - (level + trend + season[0])
        new_level = level + trend + alpha * err
        new_trend = trend + alpha * beta * err
        new_season = season[0] + gamma * err
        season = ops.concatenate([season[1:], new_season[None]])
        return (new_level, new_trend, season), err

    init = (params["level0"], params["trend0"], params["season0"])
    _, errs = ops.scan(step, init, data["ys"])
    T = data["ys"].shape[0]
    return (-0.5 * ops.vdot(errs, errs) / (sigma * sigma) - T * params["log_sigma"]
            - 0.5 * T * math.log(2 * math.pi))


def gae_loss(ops, params, data):
    """GAE(gamma, lambda) advantages by a reverse scan; loss <A, W> + 0.5 |A|^2."""
    values, rewards, live = params["values"], data["rewards"], data["not_done"]
    gamma, lam = 0.99, 0.95
    deltas = rewards + gamma * values[1:] * live - values[:-1]

    def step(adv_next, x):
        delta, alive = x
        adv = delta + gamma * lam * alive * adv_next
        return adv, adv

    _, adv = ops.scan(step, data["adv0"], (deltas, live), reverse=True)
    return ops.vdot(adv, data["W"]) + 0.5 * ops.vdot(adv, adv)


LOSSES = {"hmm": hmm_loss, "kalman": kalman_loss, "holt-winters": holt_winters_loss,
          "gae": gae_loss}


# --- data ---------------------------------------------------------------------------------------
def _hmm_data(d, rng):
    K, M, T = d["K"], d["M"], d["T"]
    A = np.full((K, K), 0.1 / (K - 1)) + np.eye(K) * (0.9 - 0.1 / (K - 1))
    B = rng.dirichlet(np.full(M, 0.5), size=K)
    z, ys = rng.integers(K), np.empty(T, np.int64)
    for t in range(T):
        ys[t] = rng.choice(M, p=B[z])
        z = rng.choice(K, p=A[z])
    params = {"A_logits": np.log(A) + 0.1 * rng.standard_normal((K, K)),
              "B_logits": np.log(B + 0.05) + 0.1 * rng.standard_normal((K, M))}
    data = {"ys": ys, "log_pi": np.full(K, -np.log(K)), "C": rng.standard_normal((T, K))}
    return params, data


def _kalman_data(d, rng):
    dim, m, T = d["d"], d["m"], d["T"]
    c, s = np.cos(0.3), np.sin(0.3)
    F = np.zeros((dim, dim))
    for i in range(0, dim - 1, 2):  # damped rotations on 2x2 blocks
        F[i:i + 2, i:i + 2] = 0.95 * np.array([[c, -s], [s, c]])
    if dim % 2:
        F[-1, -1] = 0.9
    H = rng.standard_normal((m, dim)) / np.sqrt(dim)
    x, ys = np.zeros(dim), np.empty((T, m))
    for t in range(T):
        x = F @ x + 0.5 * rng.standard_normal(dim)
        ys[t] = H @ x + 0.3 * rng.standard_normal(m)
    params = {"F": F + 0.05 * rng.standard_normal((dim, dim)),
              "log_q": np.log(0.5) + 0.1 * rng.standard_normal(dim),
              "log_r": np.log(0.3) + 0.1 * rng.standard_normal(m)}
    data = {"ys": ys, "H": H, "eye_d": np.eye(dim), "eye_m": np.eye(m),
            "mean0": np.zeros(dim), "P0": np.eye(dim)}
    return params, data


def _holt_winters_data(d, rng):
    period, T = d["period"], d["T"]
    t = np.arange(T)
    ys = 10 + 0.2 * t + 2 * np.sin(2 * np.pi * t / period) + 0.5 * rng.standard_normal(T)
    params = {"alpha": np.array(-0.5), "beta": np.array(-1.5), "gamma": np.array(-1.0),
              "log_sigma": np.array(np.log(0.7)), "level0": np.array(ys[0]),
              "trend0": np.array(0.1), "season0": 0.5 * rng.standard_normal(period)}
    return params, {"ys": ys}


def _gae_data(d, rng):
    T, N = d["T"], d["N"]
    params = {"values": rng.standard_normal((T + 1, N))}
    data = {"rewards": rng.standard_normal((T, N)),
            "not_done": (rng.random((T, N)) > 0.02).astype(np.float64),
            "adv0": np.zeros(N), "W": rng.standard_normal((T, N))}
    return params, data


MAKERS = {"hmm": _hmm_data, "kalman": _kalman_data, "holt-winters": _holt_winters_data,
          "gae": _gae_data}


def make_data(name, size="full", seed=0):
    """(params, data) as float64 NumPy arrays (integer observations for the hmm)."""
    return MAKERS[name](SIZES[size][name], np.random.default_rng(seed))


# --- the ops namespaces -------------------------------------------------------------------------
def scanlib_ops(loop=False, compiler="numpy"):
    """scanlib's ops; with loop=True, scan is the Python loop that defines it (on the tape);
    `compiler` is scan's ("numba": the step loops as numba kernels)."""
    import scanlib as sl

    def scan(f, init, xs, reverse=False):
        return sl.scan(f, init, xs, reverse=reverse, compiler=compiler)

    return types.SimpleNamespace(
        scan=_loop_scan(sl) if loop else scan, logsumexp=sl.logsumexp,
        log_softmax=sl.log_softmax, exp=sl.exp, log=sl.log, sum=sl.sum, vdot=sl.vdot,
        sigmoid=sl.sigmoid, concatenate=sl.concatenate, diagonal=sl.diagonal,
        cholesky=sl.linalg.cholesky, solve=sl.linalg.solve,
        solve_triangular=sl.linalg.solve_triangular)


def _loop_scan(sl):
    def scan(f, init, xs, reverse=False):
        leaves, treedef = sl.pytree.flatten(xs)
        steps = range(leaves[0].shape[0])
        carry, ys = init, []
        for t in (reversed(steps) if reverse else steps):
            carry, y = f(carry, sl.pytree.unflatten(treedef, [x[t] for x in leaves]))
            ys.append(y)
        ys = ys[::-1] if reverse else ys
        y_leaves = [sl.pytree.flatten(y)[0] for y in ys]
        stacked = [sl.stack([y[i] for y in y_leaves]) for i in range(len(y_leaves[0]))]
        return carry, sl.pytree.unflatten(sl.pytree.flatten(ys[0])[1], stacked)
    return scan


def jax_ops():
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    return types.SimpleNamespace(
        scan=lambda f, init, xs, reverse=False: jax.lax.scan(f, init, xs, reverse=reverse),
        logsumexp=jax.nn.logsumexp, log_softmax=jax.nn.log_softmax, exp=jnp.exp, log=jnp.log,
        sum=jnp.sum, vdot=jnp.vdot, sigmoid=jax.nn.sigmoid, concatenate=jnp.concatenate,
        diagonal=jnp.diagonal, cholesky=jnp.linalg.cholesky, solve=jnp.linalg.solve,
        solve_triangular=jsl.solve_triangular)


def numba_missing():
    """None when numba imports (scan's compiler="numba" column), else why not."""
    try:
        import numba  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"numba is not installed ({type(e).__name__}: {e})"
    return None


def jax_missing():
    """None when JAX imports, else why not."""
    try:
        import jax  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or a broken install
        return f"JAX is not installed ({type(e).__name__}: {e})"
    return None


# --- the contenders: () -> (value, {name: gradient}) as NumPy -----------------------------------
def scanlib_runner(name, params, data, loop=False, compiler="numpy", jit=False, fused=True):
    """The timed call: one scanlib.value_and_grad of the loss (built once, as a sampler would);
    with jit=True, scanlib.jit of it (traced on the first call, replayed after); fused=False:
    jit's fused kernel off (each scan's own kernel, the straight-line code between them)."""
    import scanlib as sl
    from scanlib.scan import fused as fused_kernel

    ops, fn = scanlib_ops(loop, compiler), LOSSES[name]
    vg = sl.value_and_grad(lambda p: fn(ops, p, data))
    vg = sl.jit(vg) if jit else vg
    traced = []

    def run():
        if traced:
            return vg(params)
        old, fused_kernel.ENABLED = fused_kernel.ENABLED, fused  # read when tracing
        try:
            return vg(params)
        finally:
            fused_kernel.ENABLED = old
            traced.append(True)
    return run


def scanlib_result(out):
    value, grads = out
    return float(value.item()), {k: g.numpy() for k, g in grads.items()}


def jax_runner(name, params, data):
    """(run, compile seconds): jax.jit(value_and_grad), data as arguments, one CPU device."""
    import jax

    jax.config.update("jax_enable_x64", True)
    device = jax.devices("cpu")[0]
    ops, fn = jax_ops(), LOSSES[name]
    jitted = jax.jit(jax.value_and_grad(lambda p, d: fn(ops, p, d)))
    p, d = jax.device_put(params, device), jax.device_put(data, device)
    t0 = time.perf_counter()
    jitted.lower(p, d).compile()  # trace + lower + XLA compile, timed apart from the calls
    compile_s = time.perf_counter() - t0

    def run():
        return jax.block_until_ready(jitted(p, d))
    return run, compile_s


def jax_result(out):
    value, grads = out
    return float(value), {k: np.asarray(g) for k, g in grads.items()}


def max_rel_diff(value, grads, ref_value, ref_grads):
    """(largest max|g - r| / max|r| over the value and the gradient arrays, where)."""
    worst, where = abs(value - ref_value) / max(abs(ref_value), 1e-300), "value"
    for k, r in ref_grads.items():
        g = np.asarray(grads[k])
        if g.shape != r.shape:
            return float("inf"), f"{k}: shape {g.shape}, expected {r.shape}"
        d = float(np.max(np.abs(g - r))) / max(float(np.max(np.abs(r))), 1e-300)
        if not d <= worst:  # also catches NaN
            worst, where = d, k
    return worst, where


# --- timing -------------------------------------------------------------------------------------
BLOCK_S = 0.002  # a sample is a block of back-to-back calls lasting about this long


def _seconds(run, calls=1):
    """(wall, process CPU) seconds per call of `calls` calls in a row."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        run()
    return (time.perf_counter() - t0) / calls, (time.process_time() - c0) / calls


def time_interleaved(runs, budget):
    """{name: [(wall, cpu) seconds per call]}: warm-up, then rounds of one sample of each
    contender, the order alternating between rounds. A sample of a call shorter than
    BLOCK_S is a block of calls in a row, as a sampler makes them (one call between two of
    other contenders would time their cache evictions too)."""
    est = {}
    for name, run in runs.items():
        run()
        est[name] = min(_seconds(run)[0] for _ in range(3))
    calls = {n: max(1, int(BLOCK_S / max(t, 1e-9))) for n, t in est.items()}
    reps = {n: int(min(MAX_REPS, max(MIN_REPS, budget / max(t * calls[n], 1e-9))))
            for n, t in est.items()}
    samples = {n: [] for n in runs}
    order = list(runs)
    rnd = 0
    while any(len(samples[n]) < reps[n] for n in order):
        for name in (order if rnd % 2 == 0 else order[::-1]):
            if len(samples[name]) < reps[name]:
                samples[name].append(_seconds(runs[name], calls[name]))
        rnd += 1
    return samples


def measure(name, size, with_jax):
    """One workload: first calls, agreement, interleaved timing. A dict for the table."""
    params, data = make_data(name, size)
    rec = {"workload": name, "dims": SIZES[size][name]}
    sl_run = scanlib_runner(name, params, data)
    t0 = time.perf_counter()
    sl_value, sl_grads = scanlib_result(sl_run())
    rec["scanlib_first_s"] = time.perf_counter() - t0
    runs = {"scanlib": sl_run}
    for tier, how in TIERS.items():
        if how["compiler"] == "numba" and numba_missing() is not None:
            continue
        run = scanlib_runner(name, params, data, **how)
        t0 = time.perf_counter()
        value, grads = scanlib_result(run())
        rec[f"{tier}_first_s"] = time.perf_counter() - t0  # tracing, compiling, the cache
        rec[f"{tier}_rel_diff"], rec[f"{tier}_worst"] = max_rel_diff(value, grads, sl_value,
                                                                     sl_grads)
        runs[tier] = run
    if with_jax:
        jx_run, rec["jax_compile_s"] = jax_runner(name, params, data)
        jx_value, jx_grads = jax_result(jx_run())
        rec["rel_diff"], rec["worst"] = max_rel_diff(sl_value, sl_grads, jx_value, jx_grads)
        rec["agree"] = rec["rel_diff"] <= TOLERANCE
        runs["jax"] = jx_run
    samples = time_interleaved(runs, BUDGET_S[size])
    for n, s in samples.items():
        wall, cpu = np.asarray(s).T
        rec[f"{n}_median_s"] = med = float(np.median(wall))
        rec[f"{n}_iqr"] = float(np.percentile(wall, 75) - np.percentile(wall, 25)) / med
        rec[f"{n}_cpu_median_s"] = float(np.median(cpu))
        rec[f"{n}_reps"] = len(s)
    return rec


# --- output -------------------------------------------------------------------------------------
def _ms(s):
    return f"{s * 1e3:.3f}" if s < 0.01 else f"{s * 1e3:.2f}"


def table(records, with_jax):
    head = ["workload", "scanlib ms", "jax-jit ms", "ratio", "jax compile ms", "cpu ratio",
            "scanlib first ms", "IQR % (sl/jax)", "samples (sl/jax)", "grad rel"]
    if not with_jax:
        head = ["workload", "scanlib ms", "scanlib first ms", "IQR %", "samples"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in records:
        sl_ms, first = _ms(r["scanlib_median_s"]), _ms(r["scanlib_first_s"])
        if with_jax:
            ratio = r["scanlib_median_s"] / r["jax_median_s"]
            cpu_ratio = r["scanlib_cpu_median_s"] / max(r["jax_cpu_median_s"], 1e-9)
            flag = "" if r["agree"] else f" DISAGREES ({r['worst']})"
            cells = [r["workload"], sl_ms, _ms(r["jax_median_s"]), f"{ratio:.1f}x",
                     f"{r['jax_compile_s'] * 1e3:.0f}", f"{cpu_ratio:.1f}x", first,
                     f"{r['scanlib_iqr'] * 100:.0f} / {r['jax_iqr'] * 100:.0f}",
                     f"{r['scanlib_reps']} / {r['jax_reps']}", f"{r['rel_diff']:.1e}{flag}"]
        else:
            cells = [r["workload"], sl_ms, first, f"{r['scanlib_iqr'] * 100:.0f}",
                     str(r["scanlib_reps"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tiers_table(records, with_jax):
    """scanlib's faster tiers (TIERS) beside the NumPy loop and JAX: medians, the fastest
    tier over JAX, first calls (tracing and compiling, or loading numba's cache) apart."""
    tiers = [t for t in TIERS if any(f"{t}_median_s" in r for r in records)]
    if not tiers:
        return ""
    head = ["workload", "numpy loop ms", *[f"{t} ms" for t in tiers]] + (
        ["jax-jit ms", "fastest / jax"] if with_jax else []) + [
        *[f"{t} first ms" for t in tiers], "worst rel to numpy loop"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in records:
        times = [r[f"{t}_median_s"] for t in tiers]
        cells = [r["workload"], _ms(r["scanlib_median_s"]), *[_ms(s) for s in times]]
        if with_jax:
            cells += [_ms(r["jax_median_s"]), f"{min(times) / r['jax_median_s']:.1f}x"]
        cells += [f"{r[f'{t}_first_s'] * 1e3:.0f}" for t in tiers]
        cells.append(f"{max(r[f'{t}_rel_diff'] for t in tiers):.1e}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_call_line(records, with_jax):
    r = next((r for r in records if r["workload"] == "holt-winters"), None)
    if r is None:
        return ""
    calls = [("scanlib", "scanlib")] + [(t, t) for t in TIERS if f"{t}_median_s" in r]
    calls += [("jax-jit", "jax")] if with_jax else []
    return "holt-winters, one value_and_grad call: " + ", ".join(
        f"{label} {r[f'{key}_median_s'] * 1e6:.0f} us" for label, key in calls)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    size = argv[0] if argv else "full"
    if size not in SIZES or len(argv) > 1:
        raise SystemExit("usage: python -m bench.small_state [full|quick]")
    missing = jax_missing()
    with_jax = missing is None
    how = globals().get("_THREADS_HOW", "not set (imported, not run as a module)")
    print(f"small-state workloads, size {size}, float64, forward + backward; one thread "
          f"({how})")
    if not with_jax:
        print(f"{missing}: printing the scanlib column only")
    records = []
    for name in WORKLOADS:
        print(f"  {name} {SIZES[size][name]} ...", flush=True)
        records.append(measure(name, size, with_jax))
    print()
    print(table(records, with_jax))
    print(per_call_line(records, with_jax))
    tiers = tiers_table(records, with_jax)
    if tiers:
        print("\nscanlib.jit and scan(..., compiler=\"numba\") (first ms: tracing and "
              "compiling, or loading numba's kernel cache):\n" + tiers)
    bad = [r["workload"] for r in records if with_jax and not r["agree"]]
    bad += [f"{r['workload']} ({t})" for r in records for t in TIERS
            if r.get(f"{t}_rel_diff", 0.0) > TOLERANCE]
    if bad:
        print(f"values or gradients disagree with JAX beyond {TOLERANCE:g}: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
