"""Second order through a scan: Hessian-vector products of an RNN's loss.

The loss of a tanh RNN, h[t] = tanh(h[t-1] W + x[t] U + b), is a scan. Its gradient is a
reversed scan on the tape, so it can be differentiated again: the Hessian-vector product
H v = grad(<grad(loss)(p), v>)(p), with no Hessian ever formed. It is checked against finite
differences of the gradient, against the same recurrence written as a Python loop, and, for
small models, the full Hessian built from HVPs is checked to be symmetric.

    python examples/hvp.py
    python examples/hvp.py --hidden 3 --length 4

Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys

import _util
import numpy as np

import scanlib as sl


def rnn_loss(params, xs, use_scan=True):
    """Mean squared hidden state of a tanh RNN over xs [T, B, D] (a toy loss with curvature)."""
    W, U, b = params["W"], params["U"], params["b"]

    def step(h, x):
        h = sl.tanh(h @ W + x @ U + b)
        return h, h

    h0 = sl.zeros((xs.shape[1], W.shape[0]))
    if use_scan:
        _, hs = sl.scan(step, h0, xs)
    else:  # the definition of scan: the same step, as a Python loop on the tape
        h, out = h0, []
        for t in range(xs.shape[0]):
            h, y = step(h, xs[t])
            out.append(y)
        hs = sl.stack(out)
    return sl.mean((hs - 0.5) ** 2)


def inner(a: dict, b: dict):
    return sum(sl.sum(a[k] * b[k]) for k in a)


def hvp(f, params, v):
    """H v, where H is the Hessian of scalar f at params: reverse-over-reverse."""
    return sl.grad(lambda p: inner(sl.grad(f)(p), v))(params)


def flat(tree: dict) -> np.ndarray:
    return np.concatenate([np.asarray(tree[k].numpy()).ravel() for k in sorted(tree)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=4)
    p.add_argument("--inputs", type=int, default=3)
    p.add_argument("--length", type=int, default=20, help="scan length T")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if min(args.hidden, args.inputs, args.length, args.batch) < 1:
        p.error("sizes must be at least 1")
    rng = np.random.default_rng(args.seed)
    H, D = args.hidden, args.inputs

    params = {"W": sl.tensor(rng.normal(0, 0.6, (H, H))),
              "U": sl.tensor(rng.normal(0, 0.6, (D, H))),
              "b": sl.tensor(rng.normal(0, 0.2, H))}
    v = {k: sl.tensor(rng.standard_normal(x.shape)) for k, x in params.items()}
    xs = sl.tensor(rng.standard_normal((args.length, args.batch, D)))
    n = sum(x.size for x in params.values())
    print(f"tanh RNN, hidden {H}, inputs {D}, T = {args.length}, batch {args.batch}: "
          f"{n} parameters, float64")

    def f(p):
        return rnn_loss(p, xs)

    Hv = hvp(f, params, v)
    eps = 1e-5
    plus = sl.grad(f)({k: params[k] + eps * v[k] for k in params})
    minus = sl.grad(f)({k: params[k] - eps * v[k] for k in params})
    fd = (flat(plus) - flat(minus)) / (2 * eps)
    err_fd = np.abs(flat(Hv) - fd).max() / np.abs(fd).max()
    print(f"|Hv| = {np.linalg.norm(flat(Hv)):.6f};  v'Hv = {float(inner(Hv, v)):.6f}")
    ok = _util.check(err_fd < 1e-6, f"H v through scan vs finite differences of the gradient: "
                                     f"relative error {err_fd:.1e}")

    Hv_loop = hvp(lambda p: rnn_loss(p, xs, use_scan=False), params, v)
    err_loop = np.abs(flat(Hv) - flat(Hv_loop)).max() / np.abs(flat(Hv_loop)).max()
    ok &= _util.check(err_loop < 1e-10, f"H v through scan vs the same loop on the tape: "
                                        f"relative difference {err_loop:.1e}")
    try:
        sl.testing.check_grads(f, (params,), order=2)
        ok &= _util.check(True, "scanlib.testing.check_grads(order=2) passes")
    except AssertionError as e:
        ok &= _util.check(False, f"check_grads(order=2): {e}")

    if n <= 64:
        keys, basis = sorted(params), np.eye(n)
        sizes = np.cumsum([0] + [params[k].size for k in keys])

        def unflat(vec):
            return {k: sl.tensor(vec[sizes[i]:sizes[i + 1]].reshape(params[k].shape))
                    for i, k in enumerate(keys)}

        hessian = np.stack([flat(hvp(f, params, unflat(e))) for e in basis])
        asym = np.abs(hessian - hessian.T).max() / np.abs(hessian).max()
        eig = np.linalg.eigvalsh((hessian + hessian.T) / 2)
        print(f"full {n}x{n} Hessian from {n} HVPs: eigenvalues from {eig[0]:.4f} to "
              f"{eig[-1]:.4f}")
        ok &= _util.check(asym < 1e-10, f"the Hessian is symmetric (asymmetry {asym:.1e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
