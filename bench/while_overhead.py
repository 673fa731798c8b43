"""while_loop's cost per step against scan's, side by side in one run:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.while_overhead [full|quick] \
        [numpy|numba|auto] [jit]

(the tier: scan's compiler, and "jit" for scanlib.jit over every timed call; none named: the
library's default compiler, without jit.)

The cumsum and rnn workloads of bench/workloads.py, each run six ways over the same T steps:
`scan` as the bench runs it (xs scanned, ys stacked, loss = vdot(ys, P) + vdot(carry, Q));
`scan-carry`, `fori_loop` and `while_loop`, which run the body a while_loop must have (a step
counter t in the carry, x = xs[t], the loss accumulated in the carry); `while-state`, the
same with a cond that also reads the state, so the trip count needs the whole body, and
`scan-cond`, its reference: scan-carry also computing that cond at every step (as a y), the
same work without the stopping; and the Python loop on the tape for reference. Gradients
are taken with respect to params and init (xs and P are constants: the adjoint of xs[t]
with a traced t is a [T]-sized scatter per step in every contender, which would hide the
per-step overhead this measures). Median of process CPU time over interleaved rounds,
forward only and forward + backward; ratios to scan-carry (the same body) and to scan.
Imports scanlib, NumPy and bench's own modules.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import scanlib as sl
from bench import env
from bench.scanlib_impl import _ops
from bench.workloads import BY_NAME, loss, make_data, step

ROUNDS = {"full": 7, "quick": 5}


def contenders(kind, consts, T):
    """{name: f(params, init, xs) -> scalar loss}, all computing the same loss."""
    ops = _ops(sl)
    P, Q = sl.tensor(consts["P"]), sl.tensor(consts["Q"])

    def carry_body(params, xs):
        def body(c):
            t, h, acc = c
            h, y = step(kind, ops, params, h, xs[t])
            return t + 1, h, acc + sl.vdot(y, P[t])
        return body

    def start(init):
        return sl.tensor(0), init, sl.zeros((), P.dtype)

    def finish(c):
        return c[2] + sl.vdot(c[1], Q)

    def scan(params, init, xs):
        carry, ys = sl.scan(lambda h, x: step(kind, ops, params, h, x), init, xs)
        return loss(ops, ys, carry, {"P": P, "Q": Q})

    def scan_carry(params, init, xs):
        body = carry_body(params, xs)
        return finish(sl.scan(lambda c, _: (body(c), None), start(init), length=T)[0])

    def fori(params, init, xs):
        body = carry_body(params, xs)
        return finish(sl.fori_loop(0, T, lambda i, c: body(c), start(init)))

    def while_(params, init, xs):
        return finish(sl.while_loop(lambda c: c[0] < T, carry_body(params, xs), start(init)))

    def state_cond(c):  # reads acc: the trip count needs the whole body
        return sl.all(sl.stack([c[0] < T, sl.abs(c[2]) < 1e30]))

    def scan_cond(params, init, xs):  # scan-carry, also computing state_cond at every step
        body = carry_body(params, xs)
        carry, ok = sl.scan(lambda c, _: (body(c), state_cond(c)), start(init), length=T)
        return finish(carry) + sl.sum(ok) * 0.0

    def while_state(params, init, xs):
        return finish(sl.while_loop(state_cond, carry_body(params, xs), start(init)))

    def python_loop(params, init, xs):
        body, c = carry_body(params, xs), start(init)
        while bool(c[0] < T):
            c = body(c)
        return finish(c)

    return {"scan": scan, "scan-carry": scan_carry, "fori_loop": fori, "while_loop": while_,
            "scan-cond": scan_cond, "while-state": while_state, "python-loop": python_loop}


def _cpu_time(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def measure(name, size, jit=False):
    wl = BY_NAME[name]
    inputs, consts = make_data(wl, size)
    T = len(inputs["xs"])
    params = {k: sl.tensor(v) for k, v in inputs["params"].items()}
    init, xs = sl.tensor(inputs["init"]), sl.tensor(inputs["xs"])
    fs = contenders(wl.kind, consts, T)
    calls = {}
    wrap = sl.jit if jit else (lambda f: f)
    for k, f in fs.items():
        if jit and k == "python-loop":  # its Python while on a traced value cannot be jitted
            continue
        fwd = wrap(lambda p, h, f=f: f(p, h, xs))
        calls[(k, "forward")] = (lambda fwd=fwd: fwd(params, init))
        vg = wrap(sl.value_and_grad(lambda p, h, f=f: f(p, h, xs), argnums=(0, 1)))
        calls[(k, "fwd+bwd")] = (lambda vg=vg: vg(params, init))
    fs = {k: f for k, f in fs.items() if (k, "forward") in calls}
    t0 = time.perf_counter()
    values = {k: float(calls[(k, "forward")]()) for k in fs}
    t1 = time.perf_counter()
    grads = {k: calls[(k, "fwd+bwd")]()[1] for k in fs}
    print(f"{name}: the first calls (tracing, compiling) took {t1 - t0:.2f} s forward, "
          f"{time.perf_counter() - t1:.2f} s fwd+bwd, all contenders")
    for k in fs:  # every contender computes the same loss and gradient
        np.testing.assert_allclose(values[k], values["scan"], rtol=1e-4)
        for a, b in zip(sl.pytree.flatten(grads[k])[0], sl.pytree.flatten(grads["scan"])[0]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-4)
    for c in calls.values():  # warm-up
        c()
    env.settle(*calls.values())
    times = {key: [] for key in calls}
    for _ in range(ROUNDS[size]):  # interleaved, so drift of the machine hits all alike
        for key, c in calls.items():
            times[key].append(_cpu_time(c))
    return T, {key: float(np.median(v)) for key, v in times.items()}


def report(name, T, med):
    print(f"\n{name}, T={T} (median CPU ms; ratios to scan-carry / to scan)")
    print(f"{'contender':14s} {'forward':>10s} {'ratio':>13s} {'fwd+bwd':>10s} {'ratio':>13s}")
    for k in dict.fromkeys(k for k, _ in med):
        row = f"{k:14s}"
        for mode in ("forward", "fwd+bwd"):
            t = med[(k, mode)]
            row += (f" {t * 1e3:10.2f} {t / med[('scan-carry', mode)]:6.2f}"
                    f"/{t / med[('scan', mode)]:5.2f}")
        print(row)


def main(argv):
    argv, jit = env.tier_from(argv)
    size = argv[0] if argv else "full"
    for name in ("cumsum", "rnn"):
        T, med = measure(name, size, jit)
        report(name, T, med)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
