"""vmap over 64 lanes of a data-dependent while_loop, of grad through a checkpointed scan step,
and of a plain scan, against one lane, side by side in one run:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.vmap_rules [full|quick]

(a) newton: the cube root of a by Newton's method, `while_loop` over the carry (x, a, n) until
    |x^3 - a| <= 1e-12 a, a spread over nine decades so each lane stops after its own number
    of steps (printed). Contenders: `sl.vmap` over the 64 lanes; the while_loop on one lane
    (the lane with the most steps, which a batched loop must run) called plainly and through
    vmap with B=1; the 64 lanes batched by hand in NumPy (one loop, finished lanes frozen
    with `np.where`, as JAX's batched while_loop runs); and `sl.vmap` of grad of the root.
(a2) newton-fixed: the same body for 25 steps in every lane (cond reads only the counter: one
    stopping decision for the batch), 64 lanes against one, forward and grad.
(a3) matrix: h = tanh(h @ W) with W [128, 128] closed over (quick: 16), lane i stopping after
    1 + i % 10 steps (cond reads a mapped limit), per-example gradients by vmap and by a
    Python loop of grads; also the peak memory NumPy allocates in one call (tracemalloc).
(b) ckpt-grad: per-example gradients of a small RNN's loss, `sl.scan` over a step wrapped in
    `sl.checkpoint`: `sl.vmap(sl.grad(loss), in_axes=(None, 0))(params, xs)` over 64 input
    sequences, against grad on one sequence (plainly, and through vmap with B=1), and the same
    gradients batched by hand (the parameters broadcast to one copy per lane, scanned once).
(c) scan-grad and scan-fwd: (b) without the checkpoint, and its forward alone, for reference.

Every contender is checked against the per-lane results first. Times are process CPU time,
median of 15 calls after 2 warm-ups (bench/harness.median_cpu_time; quick: 3 calls), and the
first call of each contender (timed before any other call of it) is reported apart. The
ratio that matters is "64 lanes / 1 lane": B times for a loop over the examples, a small
multiple for one batched loop. Imports scanlib, NumPy and bench's own modules.
"""

from __future__ import annotations

import sys
import time
import tracemalloc

import numpy as np

import scanlib as sl
from bench.harness import median_cpu_time

# vmap's count of equations run once per example (scanlib.vmap is also the function's name)
FALLBACKS = sys.modules["scanlib.vmap"].FALLBACKS
LANES = 64
SIZES = {"full": {"T": 50, "H": 32, "I": 16, "reps": 15, "H_W": 128},
         "quick": {"T": 10, "H": 8, "I": 4, "reps": 3, "H_W": 16}}


# --- (a) a data-dependent while_loop -------------------------------------------------------------
def newton_cond(c):
    x, a, n = c
    return (sl.abs(x * x * x - a) > 1e-12 * a) & (n < 200)


def newton_body(c):
    x, a, n = c
    return x - (x * x * x - a) / (3.0 * x * x), a, n + 1


def newton(a):
    """(cube root of a, steps taken)."""
    x, _, n = sl.while_loop(newton_cond, newton_body, (1.0 + a / 3.0, a, sl.tensor(0)))
    return x, n


def newton_root(a):
    return newton(a)[0]


def newton_numpy(a):
    """The 64 lanes batched by hand: one loop, finished lanes frozen."""
    x, n = 1.0 + a / 3.0, np.zeros(a.shape, np.int64)
    active = np.abs(x * x * x - a) > 1e-12 * a
    while active.any():
        x = np.where(active, x - (x * x * x - a) / (3.0 * x * x), x)
        n += active
        active = (np.abs(x * x * x - a) > 1e-12 * a) & (n < 200)
    return x, n


def newton_cases():
    a_np = np.logspace(-3, 6, LANES)
    a = sl.tensor(a_np)
    x_ref, n_ref = newton_numpy(a_np)
    lane = int(np.argmax(n_ref))
    one, one_b = sl.tensor(a_np[lane]), sl.tensor(a_np[lane:lane + 1])

    def check():
        x, n = sl.vmap(newton)(a)
        np.testing.assert_allclose(x.numpy(), x_ref, rtol=1e-12)
        np.testing.assert_array_equal(n.numpy(), n_ref)
        per_lane = [newton(sl.tensor(v)) for v in a_np]
        assert [int(k) for _, k in per_lane] == n_ref.tolist()
        g = sl.vmap(sl.grad(newton_root))(a).numpy()
        np.testing.assert_allclose(g, 1.0 / (3.0 * x_ref ** 2), rtol=1e-8)

    note = (f"steps per lane {n_ref.min()}..{n_ref.max()} (sum {n_ref.sum()}); one lane = lane "
            f"{lane}, {n_ref[lane]} steps")
    cases = {
        "1 lane": lambda: newton(one),
        "vmap B=1": lambda: sl.vmap(newton)(one_b),
        f"vmap B={LANES}": lambda: sl.vmap(newton)(a),
        f"numpy by hand B={LANES}": lambda: newton_numpy(a_np),
        "grad 1 lane": lambda: sl.grad(newton_root)(one),
        f"vmap grad B={LANES}": lambda: sl.vmap(sl.grad(newton_root))(a),
    }
    return note, cases, {k: ("grad 1 lane" if "grad" in k else "1 lane") for k in cases}, check


def newton_fixed(a):
    """newton's body for a fixed 25 steps: the stopping decision is the same for every lane."""
    x, _, n = sl.while_loop(lambda c: c[2] < 25, newton_body, (1.0 + a / 3.0, a, sl.tensor(0)))
    return x


def newton_fixed_cases():
    a_np = np.logspace(-3, 6, LANES)
    a = sl.tensor(a_np)

    def check():
        x = sl.vmap(newton_fixed)(a)
        np.testing.assert_allclose(x.numpy(), [float(newton_fixed(sl.tensor(v))) for v in a_np],
                                   rtol=1e-14)
        g = sl.vmap(sl.grad(newton_fixed))(a).numpy()
        np.testing.assert_allclose(g, [float(sl.grad(newton_fixed)(sl.tensor(v))) for v in a_np],
                                   rtol=1e-12)

    one = sl.tensor(a_np[-1])
    cases = {
        "1 lane": lambda: newton_fixed(one),
        f"vmap B={LANES}": lambda: sl.vmap(newton_fixed)(a),
        "grad 1 lane": lambda: sl.grad(newton_fixed)(one),
        f"vmap grad B={LANES}": lambda: sl.vmap(sl.grad(newton_fixed))(a),
    }
    return cases, {k: ("grad 1 lane" if "grad" in k else "1 lane") for k in cases}, check


def matrix_cases(size):
    """(a3): a while_loop whose body multiplies by a closed-over [H, H] matrix, lane i
    stopping after 1 + i % 10 steps (cond reads a mapped limit), per-example gradients by
    vmap and by a Python loop; "1 lane" is a 10-step lane."""
    H = SIZES[size]["H_W"]
    rng = np.random.default_rng(0)
    W = sl.tensor(rng.standard_normal((H, H)) / np.sqrt(H))
    X = sl.tensor(rng.standard_normal((LANES, H)))

    N = sl.tensor(1 + np.arange(LANES) % 10)  # lane i stops after 1 + i % 10 steps

    def loss(x, n):
        _, h = sl.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, sl.tanh(c[1] @ W)),
                             (sl.tensor(0), x))
        return sl.sum(h * h)

    g, vg = sl.grad(loss), sl.vmap(sl.grad(loss))

    def per_example():
        return sl.stack([g(x, n) for x, n in zip(X, N)])

    def check():
        np.testing.assert_allclose(vg(X, N).numpy(), per_example().numpy(), rtol=1e-10,
                                   atol=1e-12)

    cases = {"grad 1 lane": lambda: g(X[9], N[9]), f"vmap grad B={LANES}": lambda: vg(X, N),
             f"loop of grads B={LANES}": per_example,
             f"vmap fwd B={LANES}": lambda: sl.vmap(loss)(X, N)}
    return H, cases, dict.fromkeys(cases, "grad 1 lane"), check


def peak_mib(fn):
    """Peak memory NumPy allocates during one call of fn (tracemalloc), in MiB."""
    fn()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


# --- (b), (c) per-example gradients through a scanned RNN step -----------------------------------
def rnn_data(size):
    s = SIZES[size]
    T, H, I = s["T"], s["H"], s["I"]
    rng = np.random.default_rng(0)
    params = {"W": sl.tensor(rng.standard_normal((H, H)) / np.sqrt(H)),
              "U": sl.tensor(rng.standard_normal((I, H)) / np.sqrt(I)),
              "b": sl.tensor(0.1 * rng.standard_normal(H))}
    xs = sl.tensor(rng.standard_normal((LANES, T, I)))
    P = sl.tensor(rng.standard_normal((T, H)))
    return params, xs, P


def rnn_loss(P, checkpointed):
    def loss(params, xs):
        def step(h, x):
            h = sl.tanh(h @ params["W"] + x @ params["U"] + params["b"])
            return h, h

        body = sl.checkpoint(step) if checkpointed else step
        h, ys = sl.scan(body, sl.zeros(params["b"].shape, xs.dtype), xs)
        return sl.vdot(ys, P) + sl.sum(h * h)

    return loss


def rnn_by_hand(P, checkpointed, B):
    """Per-example gradients batched by hand: params broadcast to one copy per lane (their
    gradients are then the per-lane gradients), the B sequences scanned as one batch."""
    def total(lanes, xs):
        W, U, b = lanes["W"], lanes["U"], lanes["b"]

        def step(h, x):
            h = sl.tanh(sl.einsum("bh,bhk->bk", h, W) + sl.einsum("bi,bik->bk", x, U) + b)
            return h, h

        body = sl.checkpoint(step) if checkpointed else step
        h, ys = sl.scan(body, sl.zeros((B,) + b.shape[1:], xs.dtype), sl.transpose(xs, (1, 0, 2)))
        return sl.einsum("tbh,th->", ys, P) + sl.sum(h * h)

    def grads(params, xs):
        lanes = {k: sl.broadcast_to(v, (B,) + v.shape) for k, v in params.items()}
        return sl.grad(total)(lanes, xs)

    return grads


def rnn_cases(size, checkpointed):
    params, xs, P = rnn_data(size)
    loss = rnn_loss(P, checkpointed)
    g = sl.grad(loss)
    vg = sl.vmap(g, in_axes=(None, 0))
    hand = rnn_by_hand(P, checkpointed, LANES)

    def check():
        got, by_hand = vg(params, xs), hand(params, xs)
        for i in range(LANES):
            ref = g(params, xs[i])
            for k in ref:
                for res in (got, by_hand):
                    np.testing.assert_allclose(res[k].numpy()[i], ref[k].numpy(), rtol=1e-10,
                                               atol=1e-12)

    one, one_b = xs[0], xs[:1]
    return {
        "grad 1 lane": lambda: g(params, one),
        "vmap grad B=1": lambda: vg(params, one_b),
        f"vmap grad B={LANES}": lambda: vg(params, xs),
        f"by hand B={LANES}": lambda: hand(params, xs),
    }, check


def scan_forward_cases(size):
    params, xs, P = rnn_data(size)
    loss = rnn_loss(P, False)
    v = sl.vmap(loss, in_axes=(None, 0))

    def check():
        ref = np.array([float(loss(params, xs[i])) for i in range(LANES)])
        np.testing.assert_allclose(v(params, xs).numpy(), ref, rtol=1e-12)

    return {
        "1 lane": lambda: loss(params, xs[0]),
        "vmap B=1": lambda: v(params, xs[:1]),
        f"vmap B={LANES}": lambda: v(params, xs),
    }, check


def first_call(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def run(title, cases, bases, check, reps):
    """First calls (in the order listed, before anything else runs them), the check that
    every contender computes the per-lane results, then the medians."""
    firsts = {k: first_call(f) for k, f in cases.items()}
    check()
    times = {k: median_cpu_time(f, reps) for k, f in cases.items()}
    print(f"\n{title}")
    print(f"{'contender':24s} {'median ms':>10s} {'ratio':>7s}  {'first call ms':>13s}")
    for k, t in times.items():
        print(f"{k:24s} {t * 1e3:10.3f} {t / times[bases[k]]:6.2f}x  {firsts[k] * 1e3:13.2f}"
              f"   (/ {bases[k]})")
    return times


def main(argv):
    size = argv[0] if argv else "full"
    if size not in SIZES:
        raise SystemExit(f"vmap_rules: size is full or quick, not {size!r}")
    reps = SIZES[size]["reps"]
    s = SIZES[size]
    print(f"vmap_rules {size}: {LANES} lanes; RNN T={s['T']} H={s['H']} I={s['I']}, float64; "
          f"vmap fallbacks before: {dict(FALLBACKS)}")
    note, cases, bases, check = newton_cases()
    run(f"(a) newton while_loop, {note}", cases, bases, check, reps)
    cases, bases, check = newton_fixed_cases()
    run("(a2) newton-fixed: the same body, 25 steps in every lane (a shared stopping decision)",
        cases, bases, check, reps)
    H, cases, bases, check = matrix_cases(size)
    run(f"(a3) matrix: h = tanh(h @ W), W [{H}, {H}] closed over, lane i stops after 1 + i % 10 "
        "steps", cases, bases, check, reps)
    print("peak MiB: " + ", ".join(f"{k} {peak_mib(f):.1f}" for k, f in cases.items()
                                     if k != "grad 1 lane"))
    for title, checkpointed in (("(b) ckpt-grad: vmap of grad through a checkpointed scan step",
                                 True), ("(c) scan-grad: the same without the checkpoint", False)):
        cases, check = rnn_cases(size, checkpointed)
        run(title, cases, dict.fromkeys(cases, "grad 1 lane"), check, reps)
    cases, check = scan_forward_cases(size)
    run("(c) scan-fwd: vmap of the plain scan's loss (no gradient)", cases,
        dict.fromkeys(cases, "1 lane"), check, reps)
    print(f"\nvmap fallbacks (equations run once per example): {dict(FALLBACKS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
