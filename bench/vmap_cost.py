"""vmap of a bench workload's loss over S independent parameter sets against the same loss
batched by hand (parameters stacked with a leading axis, the body's products written for
it), forward and forward + backward, in process CPU time, median of 7 calls after 2 warm-ups
(the goal: vmap at most 1.2x the hand-batched version):

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.vmap_cost rnn full 16

Both compute the same numbers (checked before timing). Imports scanlib, NumPy and bench's
own modules.
"""

from __future__ import annotations

import sys

import numpy as np

import scanlib as sl
from bench.harness import median_cpu_time
from bench.scanlib_impl import _ops
from bench.workloads import BY_NAME, loss, make_data, step


def stacked_params(params, S, seed=2):
    """S parameter sets: the workload's own, each perturbed differently."""
    rng = np.random.default_rng(seed)
    return {k: (v[None] * (1 + 0.1 * rng.standard_normal((S,) + v.shape))).astype(v.dtype)
            for k, v in params.items()}


def per_set_loss(inputs, consts):
    """The workload's loss as a function of one parameter set."""
    ops = _ops(sl)

    def f(params):
        carry, ys = sl.scan(lambda c, x: step("rnn", ops, params, c, x), inputs["init"],
                            inputs["xs"])
        return loss(ops, ys, carry, consts)

    return f


def hand_batched_loss(inputs, consts, S):
    """The same S losses written for stacked parameters: h [S, B, H] = tanh(h @ W[S] +
    x @ U[S] + b[S]), ys [T, S, B, H], and the loss contracted with einsum per set."""
    def f(params):
        W, U, b = params["W"], params["U"], params["b"]
        bias = sl.reshape(b, (S, 1, b.shape[-1]))

        def body(h, x):
            h = sl.tanh(h @ W + x @ U + bias)
            return h, h

        init = sl.broadcast_to(inputs["init"], (S,) + inputs["init"].shape)
        carry, ys = sl.scan(body, init, inputs["xs"])
        return (sl.einsum("tsbh,tbh->s", ys, consts["P"])
                + sl.einsum("sbh,bh->s", carry, consts["Q"]))

    return f


def main(argv):
    name = argv[0] if argv else "rnn"
    size = argv[1] if len(argv) > 1 else "full"
    S = int(argv[2]) if len(argv) > 2 else 16
    wl = BY_NAME[name]
    if wl.kind != "rnn":
        raise SystemExit(f"vmap_cost: only rnn workloads have a hand-batched version, not {name}")
    inputs, consts = make_data(wl, size)
    params = stacked_params(inputs["params"], S)
    by_vmap = sl.vmap(per_set_loss(inputs, consts))
    by_hand = hand_batched_loss(inputs, consts, S)

    def total(f):
        return lambda p: sl.sum(f(p))

    vg_vmap, vg_hand = sl.value_and_grad(total(by_vmap)), sl.value_and_grad(total(by_hand))
    v1, g1 = vg_vmap(params)
    v2, g2 = vg_hand(params)
    tol = 1e-3 if wl.dtype == "float32" else 1e-10
    np.testing.assert_allclose(by_vmap(params).numpy(), by_hand(params).numpy(), rtol=tol)
    for k in g1:
        np.testing.assert_allclose(g1[k].numpy(), g2[k].numpy(), rtol=tol, atol=tol)
    cases = {
        "forward (hand)": lambda: by_hand(params),
        "forward (vmap)": lambda: by_vmap(params),
        "fwd+bwd (hand)": lambda: vg_hand(params),
        "fwd+bwd (vmap)": lambda: vg_vmap(params),
    }
    times = {k: median_cpu_time(v) for k, v in cases.items()}
    print(f"{name} {size}, {S} parameter sets")
    for k, v in times.items():
        base = times[k.replace("vmap", "hand")]
        print(f"{k:16s} {v * 1e3:9.2f} ms   {v / base:5.2f}x hand-batched")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
