"""Checkpointed scan: peak memory and time of one gradient, side by side.

The workload: an LSTM, B=32, H=128, T=1,000, float32, with a [B] readout per step
as y (so the residuals, not ys, dominate). Contenders are scan's checkpoint options. Peak
memory is tracemalloc's (NumPy reports its buffers to it) over one forward + backward after a
warm-up; time is the median of interleaved rounds. Ratios are to checkpoint=None in the same
run; the gradients of every contender are checked against it first.

    python -m bench.checkpoint_memory          # T = 1000
    python -m bench.checkpoint_memory quick    # T = 200
    python -m bench.checkpoint_memory no-revolve   # without the slow ("revolve", 8) row
    python -m bench.checkpoint_memory no-jax       # without JAX's ratios (where installed)
    python -m bench.checkpoint_memory numba        # scan on its compiled tier (numba)
    python -m bench.checkpoint_memory numpy jit    # the tier: numpy, numba or auto, and jit
                                                   # (scanlib.jit over each gradient)
"""

from __future__ import annotations

if __name__ == "__main__":  # before NumPy is imported: one BLAS thread, as the other benches
    from bench import env

    env.set_threads(1)

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

import scanlib as sl  # noqa: E402

CONTENDERS = (None, "sqrt", 32, ("revolve", 8))


def lstm_problem(T, B=32, H=128, seed=0):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    params = (sl.tensor((rng.standard_normal((H, 4 * H)) * 0.05).astype(f32)),
              sl.tensor((rng.standard_normal((H, 4 * H)) * 0.05).astype(f32)),
              sl.tensor(np.zeros(4 * H, f32)))
    xs = sl.tensor(rng.standard_normal((T, B, H)).astype(f32))
    readout = sl.tensor((rng.standard_normal(H) / np.sqrt(H)).astype(f32))
    init = (sl.zeros((B, H), dtype="float32"), sl.zeros((B, H), dtype="float32"))

    def loss(params, schedule):
        Wx, Wh, b = params

        def step(carry, x):
            h, c = carry
            i, f, g, o = sl.split(x @ Wx + h @ Wh + b, 4, axis=-1)
            c = sl.sigmoid(f) * c + sl.sigmoid(i) * sl.tanh(g)
            h = sl.sigmoid(o) * sl.tanh(c)
            return (h, c), h @ readout

        _, ys = sl.scan(step, init, xs, checkpoint=schedule)
        return (ys * ys).mean()

    return params, loss


def peak_bytes(fn):
    fn()  # warm: traces, compiled loops and caches are not what is measured
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def main(argv):
    argv, jit = env.tier_from(argv)
    T = 200 if "quick" in argv else 1000
    rounds = 3 if "quick" in argv else 5
    params, loss = lstm_problem(T)
    grad = sl.grad(loss)
    contenders = [c for c in CONTENDERS
                  if not ("no-revolve" in argv and isinstance(c, tuple))]
    if jit:
        grads = {c: sl.jit(lambda p, c=c: grad(p, c)) for c in contenders}
        runs = {c: (lambda c=c: grads[c](params)) for c in contenders}
    else:
        runs = {c: (lambda c=c: grad(params, c)) for c in contenders}
    firsts = {}
    for c, run in runs.items():  # the first calls trace and (numba) compile: timed apart
        t = time.perf_counter()
        run()
        firsts[c] = time.perf_counter() - t
    print("first calls (s): " + ", ".join(f"{c!s} {t:.2f}" for c, t in firsts.items()))
    env.settle(*runs.values())
    reference = runs[None]()
    for c, run in runs.items():
        for g, r in zip(run(), reference):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=2e-3, atol=1e-6,
                                       err_msg=f"checkpoint={c!r}")
    peaks = {c: peak_bytes(run) for c, run in runs.items()}
    times = {c: [] for c in contenders}
    cpu = {c: [] for c in contenders}
    for _ in range(rounds):
        for c, run in runs.items():
            t, t_cpu = time.perf_counter(), time.process_time()
            run()
            cpu[c].append(time.process_time() - t_cpu)
            times[c].append(time.perf_counter() - t)
    print(f"LSTM B=32 H=128 T={T} float32, one gradient (forward + backward), one BLAS "
          f"thread; median of {rounds} interleaved rounds; ratios to checkpoint=None")
    print(f"{'checkpoint':>16} {'peak MiB':>9} {'ratio':>6} {'time s':>8} {'ratio':>6} "
          f"{'CPU s':>8} {'ratio':>6}")
    t0, p0, c0 = statistics.median(times[None]), peaks[None], statistics.median(cpu[None])
    for c in contenders:
        t, tc = statistics.median(times[c]), statistics.median(cpu[c])
        print(f"{str(c):>16} {peaks[c] / 2**20:9.1f} {peaks[c] / p0:6.3f} {t:8.3f} "
              f"{t / t0:6.2f} {tc:8.3f} {tc / c0:6.2f}")
    carry = 2 * 32 * 128 * 4
    print(f"(one carry (h, c) is {carry / 2**10:.0f} KiB; 8 carries {8 * carry / 2**20:.2f} MiB)")
    if "no-jax" not in argv:
        jax_ratios(T, rounds)


def jax_ratios(T, rounds, B=32, H=128):
    """The same LSTM gradient under jax.jit: lax.scan against lax.scan over segments of k
    steps, each a jax.checkpoint'ed inner scan (JAX's way to checkpoint a scan), as time
    ratios; the context for scanlib's ratio (the recomputation costs about a forward)."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return
    rng = np.random.default_rng(0)
    f32 = np.float32
    Wx, Wh = ((rng.standard_normal((H, 4 * H)) * 0.05).astype(f32) for _ in range(2))
    params = (jnp.asarray(Wx), jnp.asarray(Wh), jnp.zeros(4 * H, f32))
    xs = jnp.asarray(rng.standard_normal((T, B, H)).astype(f32))
    readout = jnp.asarray((rng.standard_normal(H) / np.sqrt(H)).astype(f32))
    init = (jnp.zeros((B, H), f32), jnp.zeros((B, H), f32))

    def step(params, carry, x):
        Wx, Wh, b = params
        h, c = carry
        i, f, g, o = jnp.split(x @ Wx + h @ Wh + b, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h @ readout

    def loss(params, k):
        if k is None:
            _, ys = jax.lax.scan(lambda c, x: step(params, c, x), init, xs)
        else:
            segment = jax.checkpoint(
                lambda c, xseg: jax.lax.scan(lambda c, x: step(params, c, x), c, xseg))
            _, ys = jax.lax.scan(segment, init, xs.reshape((T // k, k) + xs.shape[1:]))
        return (ys * ys).mean()

    ks = [None] + [k for k in (25, 40) if T % k == 0]
    fns = {k: jax.jit(jax.grad(lambda p, k=k: loss(p, k))) for k in ks}
    for f in fns.values():
        jax.block_until_ready(f(params))
    times = {k: [] for k in ks}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(f(params))
            times[k].append(time.perf_counter() - t)
    t0 = statistics.median(times[None])
    print(f"JAX, the same gradient under jax.jit (one thread): lax.scan {t0:.3f} s; "
          + "; ".join(f"segments of {k} under jax.checkpoint "
                      f"{statistics.median(times[k]) / t0:.2f}x" for k in ks[1:]))


if __name__ == "__main__":
    main(sys.argv[1:])
