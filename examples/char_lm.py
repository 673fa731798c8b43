"""A character-level LSTM language model, written with scanlib.scan, trained on the docstrings
of Python's own standard library (gathered at run time: no download).

    python examples/char_lm.py                    # about a minute on 2 CPU cores
    python examples/char_lm.py --steps 2000 --hidden 256 --device cuda

What it does, in order: gathers the text; checks the model's gradient against finite
differences on a tiny float64 copy; trains with Adam (a progress bar shows the running loss);
reports validation loss as it falls; draws samples; writes examples/out/char_lm_loss.png.
Exit status: 0 when the gradient check passed and validation loss fell, 1 otherwise, 2 for
bad usage (such as --device cuda without CuPy).
"""

from __future__ import annotations

import os

# One BLAS thread: the products here are small (32x128 @ 128x512), so threads gain nothing on
# a quiet machine, and on a busy one they spin against each other (measured on 2 cores under
# load: 0.06-0.09 s a training step with one thread, 0.3-1.8 s with two). Set the variable
# yourself to override this.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import importlib
import inspect
import string
import sys
import time
import warnings

import _util  # examples/_util.py: the progress bar, PNG output
import numpy as np

import scanlib as sl

# A fixed list, so the corpus is the same on every run with the same Python.
MODULES = [
    "abc", "argparse", "ast", "asyncio", "base64", "bisect", "calendar", "collections",
    "concurrent.futures", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal",
    "difflib", "email.message", "enum", "fractions", "functools", "glob", "gzip", "hashlib",
    "heapq", "hmac", "html", "http.client", "imaplib", "inspect", "io", "ipaddress",
    "itertools", "json", "logging", "mailbox", "math", "operator", "optparse", "os",
    "pathlib", "pickle", "pprint", "queue", "random", "re", "sched", "shlex", "shutil",
    "smtplib", "socket", "statistics", "string", "subprocess", "tarfile", "tempfile",
    "textwrap", "threading", "time", "timeit", "tokenize", "typing", "unittest",
    "urllib.parse", "urllib.request", "uuid", "warnings", "weakref", "zipfile",
]
ALLOWED = set(string.ascii_letters + string.digits + string.punctuation + " \n")


# --- data ----------------------------------------------------------------------------------
def gather_docstrings(modules=MODULES) -> str:
    """The docstrings of the modules, their public classes, functions and methods, in a
    deterministic order, deduplicated, reduced to printable ASCII."""
    with warnings.catch_warnings():  # reading some attributes warns of their deprecation
        warnings.simplefilter("ignore")
        return _gather(modules)


def _gather(modules) -> str:
    seen, docs = set(), []

    def add(obj):
        doc = inspect.getdoc(obj)
        if doc and len(doc) > 40 and doc not in seen:
            seen.add(doc)
            docs.append("".join(ch for ch in doc.replace("\t", "    ") if ch in ALLOWED))

    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        add(module)
        for attr in sorted(vars(module)):
            obj = vars(module)[attr]
            if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isbuiltin(obj):
                add(obj)
            elif inspect.isclass(obj):
                add(obj)
                for meth_name in sorted(vars(obj)):
                    meth = vars(obj)[meth_name]
                    if not meth_name.startswith("_") and callable(meth):
                        add(meth)
    return "\n\n".join(docs)


def windows(data: np.ndarray, starts: np.ndarray, seq_len: int):
    """Inputs [T, B] and next-character targets [T, B] for windows starting at `starts`."""
    idx = starts[None, :] + np.arange(seq_len + 1)[:, None]
    chunk = data[idx]
    return chunk[:-1], chunk[1:]


# --- model ---------------------------------------------------------------------------------
def init_params(vocab: int, hidden: int, rng, dtype, device) -> dict:
    s = 1.0 / np.sqrt(hidden)
    b = np.zeros(4 * hidden)
    b[hidden:2 * hidden] = 1.0  # forget-gate bias 1: remember by default
    raw = {
        "E": rng.uniform(-s, s, (vocab, 4 * hidden)),   # input weights = embedding into gates
        "Wh": rng.uniform(-s, s, (hidden, 4 * hidden)),
        "b": b,
        "Wy": rng.uniform(-s, s, (hidden, vocab)),
        "by": np.zeros(vocab),
    }
    return {k: sl.tensor(v, dtype=dtype, device=device) for k, v in raw.items()}


def lstm_cell(params, h, c, gx):
    """One LSTM step; gx is the input's contribution to the four gates."""
    H = h.shape[-1]
    z = gx + h @ params["Wh"]
    i, f, g, o = (z[:, k * H:(k + 1) * H] for k in range(4))
    c = sl.sigmoid(f) * c + sl.sigmoid(i) * sl.tanh(g)
    h = sl.sigmoid(o) * sl.tanh(c)
    return h, c


def one_hot(tokens, vocab: int, dtype):
    """[..., vocab] rows of 0/1 for integer tokens, built on the tokens' own device."""
    return (tokens[..., None] == sl.arange(vocab, device=tokens.device)).astype(dtype)


def run_lstm(params, tokens, state):
    """The hidden states [T, B, H] for tokens [T, B], as one scan over time."""
    E = params["E"]
    T, B = tokens.shape
    # Every step's input projection at once, as one matrix product (the cuDNN trick); a
    # one-hot product also makes E's gradient a matrix product instead of a scatter.
    onehot = one_hot(tokens, E.shape[0], E.dtype).reshape(T * B, -1)
    gx = (onehot @ E).reshape(T, B, -1) + params["b"]

    def step(carry, gx_t):
        h, c = lstm_cell(params, *carry, gx_t)
        return (h, c), h

    return sl.scan(step, state, gx)


def loss_fn(params, tokens, targets):
    """Mean cross-entropy (nats per character) of predicting targets from tokens."""
    T, B = tokens.shape
    H, V = params["Wy"].shape
    zero = sl.zeros((B, H), dtype=params["Wh"].dtype, device=params["Wh"].device)
    _, hs = run_lstm(params, tokens, (zero, zero))
    logits = hs.reshape(T * B, H) @ params["Wy"] + params["by"]
    logp = logits - sl.logsumexp(logits, axis=-1, keepdims=True)
    return -sl.sum(logp * one_hot(targets, V, logp.dtype).reshape(T * B, V)) / (T * B)


def sample(params, prompts, vocab, length, temperature, rng, device):
    """Continue each prompt by `length` characters; the sampling loop is itself a scan whose
    xs are Gumbel noise (argmax of logits/temperature + Gumbel noise samples the softmax)."""
    stoi = {ch: i for i, ch in enumerate(vocab)}
    B, V, dtype = len(prompts), len(vocab), params["Wh"].dtype
    width = max(map(len, prompts))
    padded = np.array([[stoi.get(ch, stoi[" "]) for ch in p.rjust(width)] for p in prompts]).T
    with sl.no_grad():
        H = params["Wh"].shape[0]
        zero = sl.zeros((B, H), dtype=dtype, device=device)
        tokens = sl.tensor(padded[:-1], device=device)
        (h, c), _ = run_lstm(params, tokens, (zero, zero))
        last = np.eye(V)[padded[-1]]
        gumbel = -np.log(-np.log(rng.uniform(1e-12, 1.0, (length, B, V))))

        def step(carry, noise):
            h, c, onehot = carry
            h, c = lstm_cell(params, h, c, onehot @ params["E"] + params["b"])
            z = (h @ params["Wy"] + params["by"]) / temperature + noise
            onehot = (z == z.max(axis=-1, keepdims=True)).astype(dtype)
            return (h, c, onehot), onehot

        init = (h, c, sl.tensor(last, dtype=dtype, device=device))
        _, picks = sl.scan(step, init, sl.tensor(gumbel, dtype=dtype, device=device))
    chosen = picks.numpy().argmax(axis=-1).T  # [B, length]
    return [p + "".join(vocab[i] for i in row) for p, row in zip(prompts, chosen)]


# --- the demo --------------------------------------------------------------------------------
def gradient_check(vocab_size: int, rng) -> bool:
    """The model's VJP against central finite differences on a tiny float64 copy."""
    params = init_params(vocab_size, 5, rng, np.float64, "cpu")
    tokens = rng.integers(0, vocab_size, (6, 3))
    targets = rng.integers(0, vocab_size, (6, 3))
    try:
        sl.testing.check_grads(lambda p: loss_fn(p, tokens, targets), (params,), order=1)
    except AssertionError as e:
        print(f"  {e}")
        return False
    return True


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=1500, help="training steps")
    p.add_argument("--hidden", type=int, default=128, help="LSTM hidden size")
    p.add_argument("--seq-len", type=int, default=64, help="characters per training window")
    p.add_argument("--batch", type=int, default=32, help="windows per step")
    p.add_argument("--lr", type=float, default=1.5e-2, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    p.add_argument("--sample-len", type=int, default=160, help="characters per sample")
    p.add_argument("--evals", type=int, default=10, help="validation evaluations during training")
    p.add_argument("--out-dir", default=None, help="where the PNG goes (None: examples/out)")
    args = p.parse_args(argv)
    for name in ("steps", "hidden", "seq_len", "batch", "sample_len", "evals"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if not args.lr > 0:
        p.error(f"--lr must be positive, got {args.lr}")
    if args.device != "cpu" and not args.device.startswith("cuda"):
        p.error(f"--device must be cpu or cuda, got {args.device!r}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    device = _util.device_or_exit(args.device)
    t_start = time.perf_counter()
    rng = np.random.default_rng(args.seed)

    if sys.flags.optimize >= 2:
        print("error: Python runs with -OO, which strips the docstrings this demo trains on; "
              "run it without -OO.", file=sys.stderr)
        return 2
    text = gather_docstrings()
    vocab = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(vocab)}
    data = np.array([stoi[ch] for ch in text], dtype=np.int64)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    if args.seq_len + 2 > len(val):
        print(f"error: --seq-len {args.seq_len} is longer than the validation text "
              f"({len(val):,} characters); choose a smaller one.", file=sys.stderr)
        return 2
    print(f"corpus: {len(text):,} characters of docstrings from {len(MODULES)} stdlib modules, "
          f"vocabulary {len(vocab)}; train {len(train):,} / validation {len(val):,}")
    print(f"model: LSTM, hidden {args.hidden}, {args.seq_len} steps per scan, batch "
          f"{args.batch}, float32 on {device}")

    print("gradient check (float64, hidden 5, 6 steps, against finite differences):")
    grad_ok = _util.check(gradient_check(len(vocab), rng), "loss gradient matches")

    params = init_params(len(vocab), args.hidden, rng, np.float32, device)
    val_starts = rng.integers(0, len(val) - args.seq_len - 1, 64)
    val_x, val_y = windows(val, val_starts, args.seq_len)
    val_x, val_y = sl.tensor(val_x, device=device), sl.tensor(val_y, device=device)

    def val_loss(p):
        with sl.no_grad():
            return float(loss_fn(p, val_x, val_y))

    value_and_grad = sl.value_and_grad(loss_fn)
    def learning_rate(step):  # constant, then decaying over the last half
        return args.lr * min(1.0, 2.0 * (1 - step / args.steps) + 0.1)

    opt = sl.optim.chain(sl.optim.clip_by_global_norm(1.0), sl.optim.adam(learning_rate))
    opt_state = opt.init(params)
    eval_at = set(np.linspace(0, args.steps, args.evals + 1).round().astype(int))
    history, val_history, running = [], [], None
    print(f"training {args.steps} steps (loss in nats per character; uniform guessing is "
          f"{np.log(len(vocab)):.2f}):")
    bar = _util.Progress(args.steps)
    for step in range(args.steps + 1):
        if step in eval_at:
            val_history.append((step, val_loss(params)))
            bar.note(f"  step {step:>5}  validation loss {val_history[-1][1]:.3f}")
        if step == args.steps:
            break
        x, y = windows(train, rng.integers(0, len(train) - args.seq_len - 1, args.batch),
                       args.seq_len)
        loss, grads = value_and_grad(params, sl.tensor(x, device=device),
                                     sl.tensor(y, device=device))
        params, opt_state = opt.step(grads, opt_state, params)
        loss = float(loss)
        history.append(loss)
        running = loss if running is None else 0.95 * running + 0.05 * loss
        bar.update(step + 1, f"loss {running:.3f}")
    bar.close()
    train_time = time.perf_counter() - t_start

    first, last = val_history[0][1], val_history[-1][1]
    print(f"validation loss {first:.3f} -> {last:.3f} nats/char "
          f"({last / np.log(2):.2f} bits/char)")
    print("samples (temperature 0.7):")
    prompts = ["Return the ", "The ", "If the "]
    for s in sample(params, prompts, vocab, args.sample_len, 0.7, rng, device):
        print("  | " + s.replace("\n", "\n  | "))

    plt = _util.pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(np.arange(1, len(history) + 1), history, lw=0.6, alpha=0.5, label="train (batch)")
        ax.plot(*zip(*val_history), "o-", label="validation")
        ax.set(xlabel="step", ylabel="cross-entropy (nats/char)",
               title=f"char-level LSTM via scanlib.scan (hidden {args.hidden})")
        ax.legend()
        print(f"loss curve: {_util.save_figure(fig, 'char_lm_loss.png', args.out_dir)}")
        plt.close(fig)

    print(f"total time {time.perf_counter() - t_start:.1f}s (training {train_time:.1f}s)")
    ok = grad_ok & _util.check(last < first, "validation loss fell")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        sys.exit(130)
