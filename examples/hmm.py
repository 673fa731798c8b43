"""A hidden Markov model's forward algorithm in log space, as a scan, fitted by gradient.

Sequences are simulated from a 3-state HMM with 4 output symbols. The forward recursion
log alpha[t+1] = logsumexp(log alpha[t] + log A, over the previous state) + log B[:, y]
runs as a scan whose ys are the per-step log normalisers; their sum is the log-likelihood.
Adam on the softmax logits of (pi, A, B) then maximises it from a random start. Hidden states
are only defined up to relabelling, so the fit is compared with the truth under the best
permutation of states.

    python examples/hmm.py                 # a few seconds
    python examples/hmm.py --sequences 4 --length 10 --steps 5 --gap 10

Exit status 0 when the gradient check passes, the log-likelihood rose and the fit is within
--gap (nats per observation) of the likelihood at the true parameters; 1 otherwise.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import _util
import numpy as np

import scanlib as sl

TRUE = {
    "pi": np.array([0.6, 0.3, 0.1]),
    "A": np.array([[0.90, 0.07, 0.03], [0.05, 0.90, 0.05], [0.10, 0.05, 0.85]]),
    "B": np.array([[0.70, 0.20, 0.05, 0.05], [0.05, 0.15, 0.70, 0.10],
                   [0.10, 0.10, 0.10, 0.70]]),
}


def log_softmax(z, axis=-1):
    return z - sl.logsumexp(z, axis=axis, keepdims=True)


def log_likelihood(logits, ys):
    """log p(ys) for integer observations ys [T, N], summed over the N sequences."""
    log_pi, log_A, log_B = (log_softmax(logits[k]) for k in ("pi", "A", "B"))
    emissions = log_B.T[ys]  # [T, N, K]: log p(y_t | state k), gathered for all steps at once

    def step(log_prior, log_e):
        joint = log_prior + log_e                          # log p(y_1..t, state_t), unscaled
        norm = sl.logsumexp(joint, axis=-1, keepdims=True)
        log_post = joint - norm                            # log p(state_t | y_1..t)
        log_next = sl.logsumexp(log_post[:, :, None] + log_A, axis=1)
        return log_next, norm[:, 0]

    N = ys.shape[1]
    init = log_pi + sl.zeros((N, log_pi.shape[0]))
    _, norms = sl.scan(step, init, emissions)
    return sl.sum(norms)


def simulate(params, length, sequences, rng):
    K, M = params["B"].shape
    ys = np.empty((length, sequences), dtype=np.int64)
    state = rng.choice(K, sequences, p=params["pi"])
    for t in range(length):
        ys[t] = [rng.choice(M, p=params["B"][s]) for s in state]
        state = np.array([rng.choice(K, p=params["A"][s]) for s in state])
    return ys


def probabilities(logits):
    out = {}
    for k, v in logits.items():
        z = v.numpy()
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        out[k] = e / e.sum(axis=-1, keepdims=True)
    return out


def best_permutation(fit, true):
    K = true["B"].shape[0]
    return min(itertools.permutations(range(K)),
               key=lambda perm: np.abs(fit["B"][list(perm)] - true["B"]).sum())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sequences", type=int, default=40)
    p.add_argument("--length", type=int, default=60)
    p.add_argument("--steps", type=int, default=200, help="Adam steps")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gap", type=float, default=0.01,
                   help="how far below the true parameters' log-likelihood (per observation) "
                        "the fit may end")
    args = p.parse_args(argv)
    if min(args.sequences, args.length, args.steps) < 1:
        p.error("--sequences, --length and --steps must be at least 1")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()

    data = simulate(TRUE, args.length, args.sequences, rng)
    n_obs = data.size
    print(f"simulated {args.sequences} sequences x {args.length} steps from a 3-state HMM "
          "with 4 symbols")

    def random_logits(scale=0.5):
        return {k: sl.tensor(rng.normal(0, scale, v.shape)) for k, v in TRUE.items()}

    print("gradient check of the forward algorithm (float64, finite differences):")
    small = simulate(TRUE, 6, 2, rng)
    try:
        sl.testing.check_grads(lambda lg: log_likelihood(lg, small), (random_logits(),))
        grad_ok = _util.check(True, "d loglik / d logits matches")
    except AssertionError as e:
        grad_ok = _util.check(False, f"d loglik / d logits: {e}")

    logits, opt = random_logits(), sl.optim.adam(args.lr)
    opt_state = opt.init(logits)
    objective = sl.value_and_grad(lambda lg: -log_likelihood(lg, data) / n_obs)
    ll_init = None
    for step in range(args.steps):
        loss, g = objective(logits)
        ll_init = -float(loss) if ll_init is None else ll_init
        logits, opt_state = opt.step(g, opt_state, logits)
        if step % max(1, args.steps // 5) == 0:
            print(f"  step {step:>4}  log-likelihood per observation {-float(loss):.4f}")
    ll_fit = float(log_likelihood(logits, data)) / n_obs
    true_logits = {k: sl.tensor(np.log(v)) for k, v in TRUE.items()}
    ll_true = float(log_likelihood(true_logits, data)) / n_obs

    fit = probabilities(logits)
    perm = list(best_permutation(fit, TRUE))
    A_fit = fit["A"][perm][:, perm]
    with np.printoptions(precision=3, suppress=True):
        print(f"\ntransition matrix, true:\n{TRUE['A']}\nfitted (states relabelled "
              f"{perm}):\n{A_fit}")
        print(f"emission matrix, true:\n{TRUE['B']}\nfitted:\n{fit['B'][perm]}")
    print(f"largest error: transitions {np.abs(A_fit - TRUE['A']).max():.3f}, emissions "
          f"{np.abs(fit['B'][perm] - TRUE['B']).max():.3f}")
    print(f"log-likelihood per observation: start {ll_init:.4f}, fitted {ll_fit:.4f}, "
          f"true parameters {ll_true:.4f}   ({time.perf_counter() - start:.1f}s)")
    ok = grad_ok
    ok &= _util.check(ll_fit > ll_init, "the log-likelihood rose")
    ok &= _util.check(ll_fit >= ll_true - args.gap,
                      f"the fit is within {args.gap} nats/observation of the true parameters")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
