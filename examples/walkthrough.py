"""A guided tour of what scanlib records: the tape of a small function, the traced body of an
RNN step, the backward body that scan's VJP runs in reverse, and the plan for what the forward
pass saves. Ends by checking the scan's gradient against the same recurrence written as a
Python loop on the tape.

    python examples/walkthrough.py
    python examples/walkthrough.py --batch 2 --hidden 3 --inputs 2 --length 4

Exit status 0 when the scan and the loop agree (values and gradients), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import scanlib as sl


def section(title: str):
    print(f"\n{'=' * 78}\n{title}\n{'=' * 78}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--inputs", type=int, default=64)
    p.add_argument("--length", type=int, default=200, help="scan length T")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if min(args.batch, args.hidden, args.inputs, args.length) < 1:
        p.error("sizes must be at least 1")
    B, H, D, T = args.batch, args.hidden, args.inputs, args.length
    rng = np.random.default_rng(args.seed)

    section("1. The tape: every operation is recorded as it runs")
    print("make_graph(f)(*args) runs f once on stand-in values and prints what was recorded,\n"
          "one primitive per line. This is the list that backward walks in reverse.\n")

    def predict(w, x):
        return sl.sum(sl.tanh(x @ w) ** 2)

    print(sl.make_graph(predict)(sl.zeros((3, 2)), sl.zeros((4, 3))))
    w = sl.tensor(rng.normal(size=(3, 2)), requires_grad=True)
    x = sl.tensor(rng.normal(size=(4, 3)))
    loss = predict(w, x)
    loss.backward()
    print(f"\nloss = {loss.item():.6f}; after loss.backward(), w.grad =\n{w.grad.numpy()}")
    same = np.allclose(w.grad.numpy(), sl.grad(predict)(w.detach(), x).numpy())
    print(f"(sl.grad(predict)(w, x) gives the same: {same})")

    section("2. A scan traces its body once: the tanh RNN  h = tanh(h W + x U + b)")
    W = sl.tensor(rng.normal(0, 1 / np.sqrt(H), (H, H)), dtype="float32", requires_grad=True)
    U = sl.tensor(rng.normal(0, 1 / np.sqrt(D), (D, H)), dtype="float32", requires_grad=True)
    b = sl.tensor(np.zeros(H), dtype="float32", requires_grad=True)
    xs = sl.tensor(rng.normal(size=(T, B, D)), dtype="float32")
    h0 = sl.zeros((B, H), dtype="float32")

    def rnn_step(h, x):
        h = sl.tanh(h @ W + x @ U + b)
        return h, h  # (new carry, y)

    plan = sl.scan_plan(rnn_step, h0, xs)
    print("W, U and b are closed over: they become the body's additional inputs (after *).\n"
          "The VJP is another scan over a traced backward body, run from t = T-1 down to 0.\n"
          "Its carry is the carry's cotangent plus one accumulator per additional input;\n"
          "its xs are the cotangents of ys and the residuals the forward pass saved.\n"
          "Gradients flow to the carry and to what requires grad: W, U and b here, not xs.\n")
    graphs, sep, table = str(plan).partition("\nresiduals")
    print(graphs)

    section("3. What the forward pass saves for backward (the residual plan)")
    print("KEEP: an intermediate, stacked per step.  CLONE: the incoming carry, per step.\n"
          "REMOVE_XS: a slice of xs, read from xs itself.  REMOVE_ADDITIONAL_INPUTS: a\n"
          "closed-over tensor, referenced once.  A residual that is also a y is not stored\n"
          "twice.\n")
    print(sep.strip() + table)
    one = T * B * H * 4
    print(f"\nFor comparison, one extra [T, B, H] float32 array would be {one:,} bytes; this "
          f"plan stores {plan.residual_bytes / one:.1%} of that.")

    section("4. Check: the scan against the same recurrence as a Python loop on the tape")

    h0, xs = h0.astype("float64"), xs.astype("float64")  # float64 for a tight comparison

    def loss_scan(W, U, b):
        def step(h, x):
            h = sl.tanh(h @ W + x @ U + b)
            return h, h
        _, hs = sl.scan(step, h0, xs)
        return sl.mean(hs ** 2)

    def loss_loop(W, U, b):
        h, out = h0, []
        for t in range(T):
            h = sl.tanh(h @ W + xs[t] @ U + b)
            out.append(h)
        return sl.mean(sl.stack(out) ** 2)

    params = tuple(p.detach().astype("float64") for p in (W, U, b))
    v_scan, g_scan = sl.value_and_grad(loss_scan, argnums=(0, 1, 2))(*params)
    v_loop, g_loop = sl.value_and_grad(loss_loop, argnums=(0, 1, 2))(*params)
    worst = max(np.abs(a.numpy() - c.numpy()).max() / (np.abs(c.numpy()).max() + 1e-300)
                for a, c in zip(g_scan, g_loop))
    print(f"loss: scan {float(v_scan):.12f}  loop {float(v_loop):.12f}")
    print(f"gradients (W, U, b): largest relative difference {worst:.1e}")
    ok = np.isclose(float(v_scan), float(v_loop), rtol=1e-12) and worst < 1e-10
    print(f"  [{'ok' if ok else 'FAILED'}] scan and loop agree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
