"""Training a GRU on long sequences in a fixed memory budget, with a checkpointed scan.

A GRU reads a batch of long noisy signals (two sines and noise, --length steps each) and
predicts each next value through a linear readout; the loss is the mean squared error over
every step. Backpropagating through T steps normally keeps every step's residuals (gates,
activations: memory O(T)). `scan(..., checkpoint="sqrt")` keeps only the carry at the start
of every ~sqrt(T)-step segment and recomputes one segment at a time in the backward pass
(memory O(sqrt T), one extra forward pass); ("revolve", s) keeps at most s carries.

The example measures the peak memory (tracemalloc, which counts NumPy's buffers) and the time
of one gradient with checkpoint=None and "sqrt" (and ("revolve", s) with --revolve s; it
recomputes each step several times, so it is slow here), checks that the gradients agree to
rounding, and then trains a few Adam steps with "sqrt", the loss falling. JAX's lax.scan has no
such option: there one nests scans under jax.checkpoint by hand.

    python examples/long_sequence.py                   # about 10 s on two cores
    python examples/long_sequence.py --length 20000    # the ratio grows with T (slower)
    python examples/long_sequence.py --length 200 --steps 2 --revolve 8

Exit status 0 when the gradients agree, "sqrt" used at most 1/--min-ratio of the memory of
checkpoint=None and the loss fell; 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

import _util
import numpy as np

import scanlib as sl

MIB = 2.0 ** 20


# --- the model -------------------------------------------------------------------------------
def init_params(hidden, rng):
    def randn(*shape, scale):
        return sl.tensor(rng.standard_normal(shape) * scale)

    return {"Wx": randn(1, 3 * hidden, scale=1.0), "Wh": randn(hidden, 3 * hidden,
                                                              scale=1 / np.sqrt(hidden)),
            "b": sl.zeros(3 * hidden), "v": randn(hidden, scale=1 / np.sqrt(hidden))}


def gru_step(params, h, x):
    """One GRU step (update gate z, reset gate r, candidate n), as in PyTorch's GRUCell."""
    H = h.shape[-1]
    zx, zh = x @ params["Wx"] + params["b"], h @ params["Wh"]
    z = sl.sigmoid(zx[:, :H] + zh[:, :H])
    r = sl.sigmoid(zx[:, H:2 * H] + zh[:, H:2 * H])
    n = sl.tanh(zx[:, 2 * H:] + r * zh[:, 2 * H:])
    return (1 - z) * n + z * h


def loss(params, signal, checkpoint):
    """Mean squared error of the next-value predictions over all steps: signal is [T + 1, B];
    the GRU reads signal[:-1] and predicts signal[1:]. The per-step output is a [B] scalar
    readout, so the step's residuals, not the ys, dominate memory."""
    batch, hidden = signal.shape[1], params["Wh"].shape[0]

    def step(h, x_next):
        x, target = x_next
        h = gru_step(params, h, x[:, None])
        return h, sl.mean((h @ params["v"] - target) ** 2)

    _, errors = sl.scan(step, sl.zeros((batch, hidden)), (signal[:-1], signal[1:]),
                        checkpoint=checkpoint)
    return sl.mean(errors)


def make_signal(length, batch, rng):
    """[length + 1, batch]: two sines of random phase per sequence, plus noise."""
    t = np.arange(length + 1)[:, None]
    phase = rng.uniform(0, 2 * np.pi, (2, batch))
    clean = np.sin(0.05 * t + phase[0]) + 0.5 * np.sin(0.31 * t + phase[1])
    return clean + 0.1 * rng.standard_normal(clean.shape)


# --- measuring ---------------------------------------------------------------------------------
def timed_gradient(params, signal, schedule):
    start = time.perf_counter()
    g = sl.grad(loss)(params, signal, schedule)
    return g, time.perf_counter() - start


def peak_mib(params, signal, schedule):
    """Peak memory allocated during one gradient, above what was live before it (MiB)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        sl.grad(loss)(params, signal, schedule)
        return (tracemalloc.get_traced_memory()[1] - base) / MIB
    finally:
        tracemalloc.stop()


def largest_gap(a, b) -> float:
    return max(float(np.max(np.abs(a[k].numpy() - b[k].numpy()))
                     / max(np.max(np.abs(b[k].numpy())), 1e-300)) for k in a)


def measure(params, signal, schedules, budget):
    """One timed and one traced gradient per schedule; prints the table, returns the peaks
    and gradients."""
    print(f"\n{'checkpoint':>14} {'peak MiB':>9} {'seconds':>8}  fits {budget:g} MiB")
    peaks, grads = {}, {}
    for name, schedule in schedules.items():
        grads[name], seconds = timed_gradient(params, signal, schedule)
        peaks[name] = peak_mib(params, signal, schedule)
        fits = "yes" if peaks[name] <= budget else "no"
        print(f"{name:>14} {peaks[name]:9.2f} {seconds:8.2f}  {fits}")
    return peaks, grads


def train(params, signal, steps, lr):
    opt = sl.optim.adam(lr)
    state = opt.init(params)
    objective = sl.value_and_grad(loss)
    losses = []
    for step in range(steps):
        value, g = objective(params, signal, "sqrt")
        losses.append(float(value))
        print(f"  step {step:>3}  loss {losses[-1]:.5f}")
        params, state = opt.step(g, state, params)
    losses.append(float(loss(params, signal, "sqrt")))
    print(f"  after {steps} steps  loss {losses[-1]:.5f}")
    return losses


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=4000, help="time steps T per sequence")
    p.add_argument("--batch", type=int, default=8, help="sequences")
    p.add_argument("--hidden", type=int, default=32, help="GRU state size")
    p.add_argument("--steps", type=int, default=4, help="Adam steps with checkpoint='sqrt'")
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--revolve", type=int, default=0, metavar="S",
                   help="also measure checkpoint=('revolve', S) (slow: 0 skips it)")
    p.add_argument("--budget-mib", type=float, default=16.0,
                   help="the memory budget the table compares against")
    p.add_argument("--min-ratio", type=float, default=5.0,
                   help="'sqrt' must use at most 1/min-ratio of checkpoint=None's memory")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if min(args.length, args.batch, args.hidden, args.steps) < 1 or args.revolve < 0:
        p.error("--length, --batch, --hidden and --steps must be at least 1, --revolve >= 0")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()

    signal = sl.tensor(make_signal(args.length, args.batch, rng))
    params = init_params(args.hidden, rng)
    print(f"GRU, hidden {args.hidden}, on {args.batch} sequences of T = {args.length} steps "
          f"(float64): one gradient of the next-value loss")
    schedules = {"None": None, "sqrt": "sqrt"}
    if args.revolve:
        schedules[f"revolve, {args.revolve}"] = ("revolve", args.revolve)
    peaks, grads = measure(params, signal, schedules, args.budget_mib)
    ratio = peaks["None"] / peaks["sqrt"]
    print(f"'sqrt' uses 1/{ratio:.0f} of the memory of checkpoint=None")
    gap = max(largest_gap(grads[name], grads["None"]) for name in schedules)
    print(f"largest relative gap between the schedules' gradients: {gap:.1e}")

    print("\ntraining with checkpoint='sqrt' (Adam):")
    losses = train(params, signal, args.steps, args.lr)
    print(f"({time.perf_counter() - start:.1f}s)")
    ok = _util.check(gap < 1e-10, "the gradients of every schedule agree to rounding")
    ok &= _util.check(ratio >= args.min_ratio, f"'sqrt' uses at most 1/{args.min_ratio:g} of "
                                               "checkpoint=None's memory")
    ok &= _util.check(losses[-1] < losses[0], "the loss fell")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
