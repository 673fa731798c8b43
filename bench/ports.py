"""The ported JAX programs (tests/ports/programs) against JAX, forward + full backward.

Each program runs twice in one process: on scanlib with only its imports rewritten
(tests/ports/harness.translate), and, where JAX is installed, as written under
`jax.jit(jax.value_and_grad(...))` in float64. The call timed is a researcher's: the
program's loss and its gradient (or, for ppo_update, its jitted training run), at sizes
larger than the tests' (T in the hundreds to thousands). scanlib runs it four ways:

- eager: `value_and_grad(loss)` on the tape, every scan as its NumPy loop;
- jit: `scanlib.jit(value_and_grad(loss))`, traced once and replayed;
- numba: eager, with `set_loop_compiler("numba")` (each scan's step loop a numba kernel);
- jit+numba: jit with that default (a call of short scans may run as one fused kernel);
- auto and jit+auto: the default where numba is installed, each in a new process on an empty
  cache: its first call (the NumPy code, while the kernels compile in a background process),
  when every kernel is ready, and its calls after it has chosen between kernel and NumPy.

Every tier's value and gradients are compared with eager's, and eager's with JAX's
(max|g - r| / max|r| per array, bench/harness.rel_diff); the exit status is 1 when one
disagrees. First calls are timed apart: JAX's trace + compile, scanlib's tracing, and numba's
compiles on an empty cache (NUMBA_CACHE_DIR and SCANLIB_CACHE_DIR point at a fresh temporary
folder) and, in a second process on that cache, loading the kernels. After a warm-up call the
tiers are timed interleaved (the order alternating between rounds); the table shows medians
of wall time per call. NumbaFallbackWarnings of a first call are counted and their first
reason printed. One BLAS / OpenMP / XLA / numba thread, set before NumPy is imported.

    python -m bench.ports              # full sizes (numba's first compiles take minutes)
    python -m bench.ports quick        # tiny sizes
    python -m bench.ports full hmm ekf # some programs only

Imports the standard library at module level; NumPy, scanlib, JAX and the programs in main.
"""

from __future__ import annotations

if __name__ == "__main__":  # before NumPy is imported: BLAS, XLA and numba read these once
    import os

    from bench import env

    _THREADS_HOW = env.set_threads(1)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import contextlib
import os
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGET_S = {"full": 1.0, "quick": 0.01}  # seconds of timed calls per tier and program
MIN_REPS = {"full": 3, "quick": 1}
MAX_REPS = 50
# Agreement: scanlib's NumPy tiers run eager's operations; numba's exp and log are not NumPy's,
# and JAX's XLA reorders sums, amplified over thousands of steps of a recurrence.
TOLERANCE = {"jit": 1e-9, "numba": 1e-7, "jit+numba": 1e-7, "jax": 1e-6}
TIERS = {"eager": (False, "numpy"), "jit": (True, "numpy"), "numba": (False, "numba"),
         "jit+numba": (True, "numba")}
# The default where numba is installed, measured in new processes on an empty cache: its first
# call, when its kernels are ready, and its calls once it has chosen (auto_child).
AUTO_TIERS = {"auto": (False, "auto"), "jit+auto": (True, "auto")}
TOLERANCE.update({"auto": 1e-7, "jit+auto": 1e-7})

# --- the calls benchmarked: program -> builder(program, jax, jnp, d, r) -> Bench ---------------
SIZES = {
    "gae": ({"T": 12, "B": 3, "D": 4, "A": 3, "H": 8},
            {"T": 1024, "B": 8, "D": 16, "A": 4, "H": 64}),
    "gru": ({"T": 7, "B": 3, "D": 4, "H": 5}, {"T": 512, "B": 16, "D": 32, "H": 64}),
    "lru": ({"L": 9, "B": 3, "D_in": 2, "H": 4, "N": 5, "K": 3},
            {"L": 1024, "B": 4, "D_in": 8, "H": 32, "N": 32, "K": 10}),
    "s5": ({"L": 8, "H": 3, "P": 4}, {"L": 1024, "H": 32, "P": 32}),
    "mamba": ({"V": 7, "d_model": 4, "d_inner": 6, "d_state": 3, "dt_rank": 2, "k": 3,
               "B": 2, "L": 8},
              {"V": 64, "d_model": 32, "d_inner": 64, "d_state": 16, "dt_rank": 4, "k": 4,
               "B": 4, "L": 256}),
    "mingru": ({"T": 9, "d_in": 3, "d_h": 4, "V": 6, "B": 2},
               {"T": 512, "d_in": 32, "d_h": 64, "V": 64, "B": 8}),
    "vtrace": ({"T": 10, "B": 3, "D": 4, "A": 3, "H": 6},
               {"T": 1000, "B": 16, "D": 16, "A": 6, "H": 64}),
    "char_rnn": ({"V": 5, "H": 6, "B": 3, "T": 7}, {"V": 64, "H": 128, "B": 16, "T": 256}),
    "rwkv": ({"V": 7, "d": 4, "f": 6, "L": 2, "T": 8, "B": 2},
             {"V": 64, "d": 64, "f": 256, "L": 2, "T": 256, "B": 4}),
    "ctc": ({"B": 3, "T": 9, "K": 4, "N": 3, "F": 2, "H": 5},
            {"B": 8, "T": 256, "K": 32, "N": 40, "F": 16, "H": 64}),
    "ppo_update": ({"NUM_ENVS": 4, "NUM_STEPS": 8, "NUM_UPDATES": 2, "UPDATE_EPOCHS": 2,
                    "NUM_MINIBATCHES": 4, "H": 8},
                   {"NUM_ENVS": 8, "NUM_STEPS": 64, "NUM_UPDATES": 2, "UPDATE_EPOCHS": 2,
                    "NUM_MINIBATCHES": 4, "H": 64}),
    "q_lambda": ({"B": 3, "T": 7, "D": 3, "H": 6, "A": 3},
                 {"B": 16, "T": 500, "D": 16, "H": 64, "A": 6}),
    "kalman": ({"B": 3, "T": 9, "S": 3, "D": 2}, {"B": 4, "T": 1000, "S": 4, "D": 2}),
    "ekf": ({"T": 15, "iters": 2}, {"T": 500, "iters": 2}),
    "hmm": ({"B": 3, "T": 11, "K": 3, "D": 2, "V": 4}, {"B": 4, "T": 1000, "K": 8, "D": 4,
                                                         "V": 16}),
    "particle_filter": ({"T": 12, "N": 16, "chains": 2}, {"T": 100, "N": 1000, "chains": 4}),
    "hmc": ({"N": 20, "D": 3, "C": 3, "samples": 6, "leapfrog": 4},
            {"N": 500, "D": 10, "C": 4, "samples": 50, "leapfrog": 10}),
    "ode_dopri": ({"n": 7, "t1": 3.0}, {"n": 30, "t1": 10.0}),
    "ode_rk4": ({"n": 7, "t1": 3.0}, {"n": 200, "t1": 15.0}),
    "parallel_kalman": ({"T": 11, "S": 3, "D": 2}, {"T": 1000, "S": 4, "D": 2}),
    "holt_winters": ({"B": 3, "T": 28, "period": 4}, {"B": 16, "T": 500, "period": 12}),
}
PROGRAM = {"gru": "gru_lstm", "s5": "s5_mamba", "mamba": "s5_mamba", "ode_dopri": "ode",
           "ode_rk4": "ode"}  # else the program of that name
NAMES = tuple(SIZES)
BUILDERS = {}


class Bench:
    """One call to time: `fn(*args)` is differentiated in `argnums` (value_and_grad), or, where
    `grad` is False, is itself the whole program (it differentiates inside)."""

    def __init__(self, fn, args, argnums=0, has_aux=False, grad=True):
        self.fn, self.args, self.argnums, self.has_aux, self.grad = (fn, args, argnums,
                                                                     has_aux, grad)

    def call(self, jax):
        if not self.grad:
            return self.fn
        return jax.value_and_grad(self.fn, argnums=self.argnums, has_aux=self.has_aux)


def builder(name):
    def register(fn):
        BUILDERS[name] = fn
        return fn
    return register


def _tree(jax, jnp, tree):
    return jax.tree_util.tree_map(jnp.asarray, tree)


@builder("gae")
def _gae(P, jax, jnp, d, r):
    T, B, D, A, H = d["T"], d["B"], d["D"], d["A"], d["H"]
    params = _tree(jax, jnp, {"w1": r.normal(size=(D, H)) / D ** 0.5, "b1": r.normal(size=H) * .1,
                              "w_pi": r.normal(size=(H, A)) / H ** 0.5,
                              "w_v": r.normal(size=(H, 1)) / H ** 0.5})
    import numpy as np
    batch = (jnp.asarray(r.normal(size=(T, B, D))), jnp.asarray(r.integers(0, A, size=(T, B))),
             jnp.asarray(np.log(r.uniform(0.2, 0.6, size=(T, B)))),
             jnp.asarray(r.normal(size=(T, B))),
             jnp.asarray((r.uniform(size=(T, B)) < 0.02).astype(np.float64)),
             jnp.asarray(r.normal(size=B)))
    return Bench(P.ppo_loss, (params, *batch))


@builder("gru")
def _gru(P, jax, jnp, d, r):
    T, B, D, H = d["T"], d["B"], d["D"], d["H"]
    params = _tree(jax, jnp, {"rnn": {"w_x": r.normal(size=(D, 3 * H)) / D ** 0.5,
                                      "w_h": r.normal(size=(H, 3 * H)) / H ** 0.5,
                                      "b": r.normal(size=3 * H) * 0.1},
                              "head": {"w": r.normal(size=(H, 1)) / H ** 0.5,
                                       "b": r.normal(size=1) * 0.0}})
    carry = jax.tree_util.tree_map(lambda z: z + jnp.asarray(r.normal(size=(B, H))),
                                   P.initialize_carry("gru", B, H))
    obs, dones = jnp.asarray(r.normal(size=(T, B, D))), jnp.asarray(r.uniform(size=(T, B)) < .02)
    targets = jnp.asarray(r.normal(size=(T, B)))
    return Bench(lambda p, c, o, dn, tg: P.loss_fn(p, "gru", c, o, dn, tg),
                 (params, carry, obs, dones, targets))


@builder("lru")
def _lru(P, jax, jnp, d, r):
    L, B, D_in, H, N, K = d["L"], d["B"], d["D_in"], d["H"], d["N"], d["K"]

    def lru_params():
        draws = (r.uniform(size=N), r.uniform(size=N), r.normal(size=(N, H)),
                 r.normal(size=(N, H)), r.normal(size=(H, N)), r.normal(size=(H, N)),
                 r.normal(size=H))
        return P.init_lru(*map(jnp.asarray, draws))

    params = {"encoder": jnp.asarray(r.normal(size=(D_in, H)) / D_in ** 0.5),
              "blocks": [{"lru": lru_params(),
                          "w_out": jnp.asarray(r.normal(size=(H, H)) / H ** 0.5),
                          "w_gate": jnp.asarray(r.normal(size=(H, H)) / H ** 0.5)}
                         for _ in range(2)],
              "decoder": jnp.asarray(r.normal(size=(H, K)) / H ** 0.5)}
    inputs = jnp.asarray(r.normal(size=(B, L, D_in)))
    labels = jnp.asarray(r.integers(0, K, size=B))
    return Bench(lambda p, x, y: P.loss_fn(p, x, y, num_classes=K), (params, inputs, labels))


@builder("s5")
def _s5(P, jax, jnp, d, r):
    import numpy as np
    L, H, Pn = d["L"], d["H"], d["P"]
    params = _tree(jax, jnp, {
        "Lambda_re": -np.exp(r.normal(size=Pn) * 0.3), "Lambda_im": r.normal(size=Pn),
        "B": r.normal(size=(Pn, H, 2)) / H ** 0.5, "C": r.normal(size=(H, 2 * Pn, 2)) / Pn ** .5,
        "D": r.normal(size=H), "log_step": np.log(r.uniform(0.01, 0.3, size=(Pn, 1))),
        "step_rescale": np.array(1.0)})
    u = jnp.asarray(r.normal(size=(L, H)))
    return Bench(lambda p, u: jnp.sum(jnp.tanh(P.s5_layer(p, u))), (params, u), argnums=(0, 1))


@builder("mamba")
def _mamba(P, jax, jnp, d, r):
    import numpy as np
    V, dm, di, ds, dr, k, B, L = (d[n] for n in ("V", "d_model", "d_inner", "d_state",
                                                  "dt_rank", "k", "B", "L"))

    def layer():
        return {"norm": 1.0 + 0.1 * r.normal(size=dm),
                "in_proj": r.normal(size=(dm, 2 * di)) / dm ** 0.5,
                "conv_w": r.normal(size=(k, di)) / k ** 0.5, "conv_b": r.normal(size=di) * .1,
                "x_proj": r.normal(size=(di, dr + 2 * ds)) / di ** 0.5,
                "dt_proj": r.normal(size=(dr, di)) / dr ** 0.5,
                "dt_bias": np.log(np.expm1(r.uniform(0.001, 0.1, size=di))),
                "A_log": np.log(np.tile(np.arange(1.0, ds + 1), (di, 1))),
                "D": np.ones(di), "out_proj": r.normal(size=(di, dm)) / di ** 0.5}

    params = _tree(jax, jnp, {"embed": r.normal(size=(V, dm)) * 0.5,
                              "layers": [layer(), layer()], "norm_f": np.ones(dm)})
    tokens = jnp.asarray(r.integers(0, V, size=(B, L)))
    # the selective scan as a scan (lax.scan over time), the recurrence this bench is about
    return Bench(lambda p, t: P.model_loss(p, t, parallel=False), (params, tokens))


@builder("mingru")
def _mingru(P, jax, jnp, d, r):
    T, d_in, d_h, V, B = d["T"], d["d_in"], d["d_h"], d["V"], d["B"]

    def layer():
        return {"w_z": r.normal(size=(d_in, d_h)) / d_in ** .5, "b_z": r.normal(size=d_h) * .1,
                "w_h": r.normal(size=(d_in, d_h)) / d_in ** .5, "b_h": r.normal(size=d_h) * .1,
                "w_out": r.normal(size=(d_h, d_in)) / d_h ** .5 * 0.5}

    params = _tree(jax, jnp, {"embed": r.normal(size=(V, d_in)),
                              "unembed": r.normal(size=(d_in, V)) / d_in ** 0.5,
                              "layers": [layer(), layer()]})
    return Bench(P.lm_loss, (params, jnp.asarray(r.integers(0, V, size=(B, T)))))


@builder("vtrace")
def _vtrace(P, jax, jnp, d, r):
    import numpy as np
    T, B, D, A, H = d["T"], d["B"], d["D"], d["A"], d["H"]
    params = _tree(jax, jnp, {"w1": r.normal(size=(D, H)) / D ** .5, "b1": r.normal(size=H) * .1,
                              "w_pi": r.normal(size=(H, A)) / H ** .5,
                              "w_v": r.normal(size=(H, 1)) / H ** .5})
    args = (params, jnp.asarray(r.normal(size=(T + 1, B, D))),
            jnp.asarray(r.integers(0, A, size=(T, B))), jnp.asarray(r.normal(size=(T, B, A))),
            jnp.asarray(r.normal(size=(T, B))),
            jnp.asarray((r.uniform(size=(T, B)) < 0.02).astype(np.float64)))
    return Bench(P.impala_loss, args, has_aux=True)


@builder("char_rnn")
def _char_rnn(P, jax, jnp, d, r):
    V, H, B, T = d["V"], d["H"], d["B"], d["T"]
    params = _tree(jax, jnp, {"W_xh": r.normal(size=(V, H)) * 0.1,
                              "W_hh": r.normal(size=(H, H)) / H ** 0.5,
                              "W_hy": r.normal(size=(H, V)) * 0.1,
                              "b_h": r.normal(size=H) * 0.01, "b_y": r.normal(size=V) * 0.01})
    args = (params, jnp.asarray(r.normal(size=(B, H)) * 0.3),
            jnp.asarray(r.integers(0, V, size=(B, T))), jnp.asarray(r.integers(0, V, size=(B, T))))
    return Bench(P.loss_fn, args, argnums=(0, 1))


@builder("rwkv")
def _rwkv(P, jax, jnp, d, r):
    V, dd, f, L, T, B = d["V"], d["d"], d["f"], d["L"], d["T"], d["B"]

    def norm():
        return (jnp.asarray(1.0 + 0.1 * r.normal(size=dd)), jnp.asarray(0.1 * r.normal(size=dd)))

    def mat(*shape):
        return jnp.asarray(r.normal(size=shape) / shape[-1] ** 0.5)

    def mix():
        return jnp.asarray(r.uniform(size=dd))

    blocks = [{"ln1": norm(), "ln2": norm(),
               "att": {"mix_k": mix(), "mix_v": mix(), "mix_r": mix(), "Wk": mat(dd, dd),
                       "Wv": mat(dd, dd), "Wr": mat(dd, dd), "Wout": mat(dd, dd),
                       "decay": mat(dd), "bonus": mat(dd)},
               "ffn": {"mix_k": mix(), "mix_r": mix(), "Wk": mat(f, dd), "Wv": mat(dd, f),
                       "Wr": mat(dd, dd)}}
              for _ in range(L)]
    params = {"emb": mat(V, dd), "ln0": norm(), "blocks": blocks, "ln_out": norm(),
              "head": mat(V, dd)}
    return Bench(P.loss_fn, (params, jnp.asarray(r.integers(0, V, size=(B, T)))))


@builder("ctc")
def _ctc(P, jax, jnp, d, r):
    import numpy as np
    B, T, K, N, F, H = d["B"], d["T"], d["K"], d["N"], d["F"], d["H"]
    frame_lengths = r.integers(T // 2, T + 1, size=B)
    label_lengths = r.integers(0, min(N, T // 4) + 1, size=B)
    params = _tree(jax, jnp, {"W_in": r.normal(size=(F, H)) / F ** .5,
                              "W_h": r.normal(size=(H, H)) / H ** .5 * 0.8,
                              "b": np.zeros(H), "W_out": r.normal(size=(H, K)) / H ** .5})
    args = (params, jnp.asarray(r.normal(size=(B, T, F))),
            jnp.asarray((np.arange(T) >= frame_lengths[:, None]).astype(np.float64)),
            jnp.asarray(r.integers(1, K, size=(B, N))),
            jnp.asarray((np.arange(N) >= label_lengths[:, None]).astype(np.float64)))
    return Bench(P.loss_fn, args)


@builder("ppo_update")
def _ppo_update(P, jax, jnp, d, r):
    import numpy as np
    H, A = d["H"], 3
    params = _tree(jax, jnp, {"w1": r.normal(size=(2, H)) * 0.7, "b1": np.zeros(H),
                              "w2": r.normal(size=(H, H)) / H ** .5, "b2": np.zeros(H),
                              "w_pi": r.normal(size=(H, A)) * 0.1, "b_pi": np.zeros(A),
                              "w_v": r.normal(size=(H, 1)) / H ** .5, "b_v": np.zeros(1)})
    config = dict(P.CONFIG, **{k: v for k, v in d.items() if k != "H"})
    return Bench(P.make_train(config), (params, jax.random.PRNGKey(30)), grad=False)


@builder("q_lambda")
def _q_lambda(P, jax, jnp, d, r):
    import numpy as np
    B, T, D, H, A = d["B"], d["T"], d["D"], d["H"], d["A"]
    params = _tree(jax, jnp, {"w1": r.normal(size=(D, H)) / D ** .5, "b1": r.normal(size=H) * .1,
                              "w2": r.normal(size=(H, A)) / H ** .5, "b2": np.zeros(A)})
    target = jax.tree_util.tree_map(lambda p: p * 0.9, params)
    batch = (jnp.asarray(r.normal(size=(B, T + 1, D))), jnp.asarray(r.integers(0, A, (B, T))),
             jnp.asarray(r.normal(size=(B, T))),
             jnp.asarray(0.99 * (r.uniform(size=(B, T)) > 0.02)))
    return Bench(lambda p, tp, b: P.loss_fn(p, tp, b, 0.8, True), (params, target, batch))


def _lgssm(P, jnp, r, S, D):
    import numpy as np

    def a(x):
        return jnp.asarray(x)

    return P.ParamsLGSSM(
        initial=P.ParamsLGSSMInitial(mean=a(r.normal(size=S)),
                                     cov_chol=a(np.eye(S) + 0.1 * r.normal(size=(S, S)))),
        dynamics=P.ParamsLGSSMDynamics(
            weights=a(0.9 * np.eye(S) + 0.05 * r.normal(size=(S, S))),
            bias=a(0.1 * r.normal(size=S)),
            cov_chol=a(0.5 * np.eye(S) + 0.1 * r.normal(size=(S, S)))),
        emissions=P.ParamsLGSSMEmissions(
            weights=a(r.normal(size=(D, S))), bias=a(0.1 * r.normal(size=D)),
            cov_chol=a(0.7 * np.eye(D) + 0.1 * r.normal(size=(D, D)))))


@builder("kalman")
def _kalman(P, jax, jnp, d, r):
    B, T, S, D = d["B"], d["T"], d["S"], d["D"]
    params = _lgssm(P, jnp, r, S, D)
    return Bench(P.batch_loss, (params, jnp.asarray(r.normal(size=(B, T, D))),
                                jnp.asarray(r.uniform(size=(B, T)) > 0.2)))


@builder("ekf")
def _ekf(P, jax, jnp, d, r):
    import numpy as np
    T, iters = d["T"], d["iters"]
    params = P.PendulumParams(
        log_gravity=jnp.asarray(np.log(9.0)), log_damping=jnp.asarray(np.log(0.3)),
        log_q=jnp.asarray(np.log(0.5)), log_r=jnp.asarray(np.log(0.2)),
        init_mean=jnp.asarray([1.0, 0.0]))
    inputs = jnp.asarray(0.3 * np.sin(np.arange(T) / 3.0))
    angles = 1.0 * np.cos(np.sqrt(9.0) * P.DT * np.arange(T))
    emissions = jnp.asarray(np.stack([np.sin(angles), 0.1 * np.cos(angles)], axis=1)
                            + 0.2 * r.normal(size=(T, 2)))
    return Bench(lambda p, e, u: P.neg_log_likelihood(p, e, u, iters), (params, emissions, inputs))


@builder("hmm")
def _hmm(P, jax, jnp, d, r):
    import numpy as np
    B, T, K, D, V = d["B"], d["T"], d["K"], d["D"], d["V"]
    params = P.HMMParams(
        initial_logits=jnp.asarray(r.normal(size=K)),
        transition_logits=jnp.asarray(2.0 * np.eye(K) + 0.5 * r.normal(size=(K, K))),
        emission_means=jnp.asarray(2.0 * r.normal(size=(K, D))),
        emission_log_scales=jnp.asarray(0.2 * r.normal(size=(K, D))),
        symbol_logits=jnp.asarray(r.normal(size=(K, V))))
    return Bench(P.batch_nll, (params, jnp.asarray(2.0 * r.normal(size=(B, T, D))),
                               jnp.asarray(r.integers(0, V, size=(B, T)))))


@builder("particle_filter")
def _particle_filter(P, jax, jnp, d, r):
    import numpy as np
    params = P.SVParams(mu=jnp.asarray(-0.5), logit_phi=jnp.asarray(1.2),
                        log_sigma=jnp.asarray(np.log(0.4)))
    _, y = P.simulate(params, jax.random.PRNGKey(7), d["T"])
    y = jnp.asarray(np.asarray(y))  # data, not a result of the call timed
    keys = jax.random.split(jax.random.PRNGKey(3), d["chains"])

    def mean_loglik(params, keys, y):  # the program's mean_loglik, at N particles
        run = jax.vmap(lambda k: P.particle_filter(params, k, y, n_particles=d["N"],
                                                   method="systematic")["loglik"])
        return jnp.mean(run(keys))

    return Bench(mean_loglik, (params, keys, y))


@builder("hmc")
def _hmc(P, jax, jnp, d, r):
    import numpy as np
    N, D, C = d["N"], d["D"], d["C"]
    X = jnp.asarray(r.normal(size=(N, D)))
    y = jnp.asarray((r.uniform(size=N) < 0.5).astype(np.float64))
    positions = {"w": jnp.asarray(0.3 * r.normal(size=(C, D))),
                 "b": jnp.asarray(0.3 * r.normal(size=C))}

    def mean_acceptance(step_size, key, positions, X, y, prior_scale):  # the program's, longer
        _, infos = P.run_chains(key, positions, X, y, prior_scale, step_size,
                                num_samples=d["samples"], num_integration_steps=d["leapfrog"])
        return jnp.mean(infos.acceptance_rate)

    return Bench(mean_acceptance, (jnp.asarray(0.05), jax.random.PRNGKey(11), positions, X, y,
                                   jnp.asarray(1.5)))


def _ode_inputs(jnp, d, r):
    import numpy as np
    ts = jnp.asarray(np.linspace(0.0, d["t1"], d["n"]))
    y0 = {"prey": jnp.asarray(2.0), "predator": jnp.asarray(1.0)}
    observed = jnp.asarray(np.abs(r.normal(size=(d["n"], 2))) + 1.0)
    return jnp.asarray([1.1, 0.4, 0.9, 0.3]), y0, ts, observed


@builder("ode_dopri")
def _ode_dopri(P, jax, jnp, d, r):
    return Bench(P.fit_loss, _ode_inputs(jnp, d, r), argnums=(0, 1))


@builder("ode_rk4")
def _ode_rk4(P, jax, jnp, d, r):
    return Bench(P.rk4_loss, _ode_inputs(jnp, d, r), argnums=(0, 1))


@builder("parallel_kalman")
def _parallel_kalman(P, jax, jnp, d, r):
    import numpy as np
    T, S, D = d["T"], d["S"], d["D"]
    params = _tree(jax, jnp, {"m0": r.normal(size=S), "L0": np.eye(S) + .1 * r.normal(size=(S, S)),
                              "F": 0.9 * np.eye(S) + 0.05 * r.normal(size=(S, S)),
                              "LQ": 0.5 * np.eye(S) + 0.1 * r.normal(size=(S, S)),
                              "H": r.normal(size=(D, S)),
                              "LR": 0.7 * np.eye(D) + 0.1 * r.normal(size=(D, D))})
    return Bench(P.loss, (params, jnp.asarray(r.normal(size=(T, D)))))


@builder("holt_winters")
def _holt_winters(P, jax, jnp, d, r):
    import numpy as np
    B, T, period = d["B"], d["T"], d["period"]
    t = np.arange(T)
    ys = jnp.asarray(10.0 + 0.3 * t + 2.0 * np.sin(2 * np.pi * t / period)[None]
                     + 0.5 * r.normal(size=(B, T)))
    params = {"alpha": jnp.asarray(0.0), "beta": jnp.asarray(-1.0), "gamma": jnp.asarray(-0.5)}
    return Bench(lambda p, y: P.loss(p, y, period), (params, ys))


# --- running ------------------------------------------------------------------------------------
def jax_missing():
    try:
        import jax  # noqa: F401
        import optax  # noqa: F401
    except ImportError as e:
        return f"JAX or optax is not installed ({type(e).__name__}: {e})"
    return None


def numba_missing():
    """None when numba is installed (found, not imported: NUMBA_CACHE_DIR is set first)."""
    import importlib.util

    if importlib.util.find_spec("numba") is None:
        return "numba is not installed (pip install 'scanlib-autodiff[jit]')"
    return None


def _program(name, backend):
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tests.ports import harness as ports

    return ports.load(PROGRAM.get(name, name), backend)


def _flat(out):
    import numpy as np

    from tests.ports import harness as ports

    return {k: np.asarray(v, np.float64) for k, v in ports.flatten(out).items()
            if np.issubdtype(np.asarray(v).dtype, np.inexact)}


@contextlib.contextmanager
def _compiler(name):
    import scanlib

    old = scanlib.set_loop_compiler(name)
    try:
        yield
    finally:
        scanlib.set_loop_compiler(old)


def scanlib_runs(name, size, tiers):
    """{tier: run()} for the scanlib port, each run one call of the tier."""
    import numpy as np

    import scanlib as sl
    import scanlib.numpy as snp

    program = _program(name, "scanlib")
    b = BUILDERS[name](program, sl, snp, SIZES[name][size == "full"], np.random.default_rng(0))
    runs = {}
    for tier in tiers:
        jitted, compiler = {**TIERS, **AUTO_TIERS}[tier]
        with _compiler(compiler):  # jit's cache key holds the compiler default
            call = b.call(sl)
            call = sl.jit(call) if jitted else call

        def run(call=call, compiler=compiler, tier=tier, jitted=jitted):
            if tier in KERNEL_DIRS:
                os.environ["SCANLIB_CACHE_DIR"] = KERNEL_DIRS[tier]
            with _compiler(compiler), warnings.catch_warnings():
                if not jitted:  # value_and_grad of a program's own jit runs it on the tape
                    warnings.simplefilter("ignore", sl.JitFallbackWarning)
                return call(*b.args)

        runs[tier] = run
    return runs


def jax_run(name, size):
    """(run(), JAX's trace + compile seconds) for the program as written, float64."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    program = _program(name, "jax")
    b = BUILDERS[name](program, jax, jnp, SIZES[name][size == "full"], np.random.default_rng(0))
    call = jax.jit(b.call(jax))
    t0 = time.perf_counter()
    compiled = call.lower(*b.args).compile()
    compile_s = time.perf_counter() - t0
    return (lambda: jax.block_until_ready(compiled(*b.args))), compile_s


def first_call(run):
    """(seconds, result, NumbaFallbackWarning messages) of one call."""
    from .harness import _timed

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t, out = _timed(run)
    reasons = [str(w.message) for w in caught if w.category.__name__ == "NumbaFallbackWarning"]
    return t, out, reasons


def time_interleaved(runs, size):
    """{name: median wall seconds per call}: a warm-up call each, then rounds of one call of
    every contender (the order alternating) until each has its share of the budget."""
    import numpy as np

    from .harness import _timed

    est = {n: _timed(run)[0] for n, run in runs.items()}
    reps = {n: int(min(MAX_REPS, max(MIN_REPS[size], BUDGET_S[size] / max(t, 1e-9))))
            for n, t in est.items()}
    samples = {n: [] for n in runs}
    order, rnd = list(runs), 0
    while any(len(samples[n]) < reps[n] for n in order):
        for n in (order if rnd % 2 == 0 else order[::-1]):
            if len(samples[n]) < reps[n]:
                samples[n].append(_timed(runs[n])[0])
        rnd += 1
    return {n: float(np.median(s)) for n, s in samples.items()}


def measure(name, size, with_jax, with_numba, cache=None):
    from .harness import _timed, rel_diff

    tiers = [t for t in TIERS if with_numba or TIERS[t][1] != "numba"]
    rec = {"program": name, "dims": SIZES[name][size == "full"], "first_s": {}, "diff": {},
           "fallbacks": {}}
    if with_numba and cache:
        firsts = numba_first_calls(name, size, cache)
        rec["empty_first_s"] = {t: f[0] for t, f in firsts.items()}
        rec["warm_first_s"] = {t: f[1] for t, f in firsts.items()}
        rec["fallbacks"] = {t: f[2] for t, f in firsts.items()}
    if with_numba and cache:
        rec["auto"] = auto_runs(name, size, cache)
        for tier, a in rec["auto"].items():
            rec["diff"][tier] = (a["diff"], "in its own process")
    runs = scanlib_runs(name, size, tiers)
    ref = None
    for tier, run in runs.items():
        rec["first_s"][tier], out, reasons = first_call(run)
        rec["fallbacks"][tier] = rec["fallbacks"].get(tier) or reasons
        got = _flat(out)
        if ref is None:
            ref = got
        else:
            rec["diff"][tier] = rel_diff(got, ref)
    if with_jax:
        jrun, rec["jax_compile_s"] = jax_run(name, size)
        rec["first_s"]["jax"], out = _timed(jrun)
        rec["first_s"]["jax"] += rec["jax_compile_s"]
        rec["diff"]["jax"] = rel_diff(ref, _flat(out))
        runs["jax"] = jrun
    rec["median_s"] = time_interleaved(runs, size)
    return rec


def child_first_call(name, size, tier):
    """In a child process: the first call of one tier, on the SCANLIB_CACHE_DIR it was given."""
    t, _, reasons = first_call(scanlib_runs(name, size, [tier])[tier])
    return {"first_s": t, "fallbacks": reasons}


def auto_child(name, size, tier, settle_calls=10, timed_calls=5, timeout_s=600.0):
    """In a child process on an empty cache: the first call of an "auto" tier; the seconds
    from its start until the background process has answered every kernel it was sent (None
    past timeout_s); the median of timed_calls calls after settle_calls more (each body's
    choice of kernel or NumPy is made by then); the largest difference from eager's values."""
    from scanlib.scan.loop import native_background

    from .harness import rel_diff

    runs = scanlib_runs(name, size, [tier, "eager"])
    start = time.perf_counter()
    first, out, _ = first_call(runs[tier])
    idle = native_background.wait_idle(max(0.0, timeout_s - (time.perf_counter() - start)))
    ready = time.perf_counter() - start if idle else None
    for _ in range(settle_calls):
        runs[tier]()
    diff, _ = rel_diff(_flat(runs[tier]()), _flat(runs["eager"]()))
    # Settled, against the tiers it chooses between, interleaved in this process (a busy
    # machine slows processes unevenly): NumPy's and numba's, with jit where it has it.
    jitted = AUTO_TIERS[tier][0]
    rivals = ["jit", "jit+numba"] if jitted else ["eager", "numba"]
    runs.update(scanlib_runs(name, size, [r for r in rivals if r not in runs]))
    medians = time_interleaved({t: runs[t] for t in [tier, *rivals]}, size)
    return {"first_s": first, "ready_s": ready, "settled_s": medians[tier], "diff": diff,
            "rivals_s": {t: medians[t] for t in rivals}}


def auto_runs(name, size, cache):
    """{tier: auto_child's record} for each "auto" tier, each in a new process on an empty
    cache of its own."""
    import json
    import subprocess

    out = {}
    for tier in AUTO_TIERS:
        directory = os.path.join(cache, f"auto-{name}-{tier.replace('+', '-')}")
        env = dict(os.environ, SCANLIB_CACHE_DIR=os.path.join(directory, "scanlib"),
                   NUMBA_CACHE_DIR=os.path.join(directory, "numba"))
        proc = subprocess.run([sys.executable, "-m", "bench.ports", "--auto-child", size, name,
                               tier], cwd=ROOT, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            print(f"{name} {tier}: the auto process failed:\n{proc.stderr[-3000:]}")
            continue
        out[tier] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def numba_first_calls(name, size, cache):
    """{tier: (empty-cache seconds, warm-cache seconds, NumbaFallbackWarnings)} of each numba
    tier, each in a new process: the first on a new SCANLIB_CACHE_DIR, the second on the cache
    the first filled. The kernels stay there for this process's runs of that tier
    (KERNEL_DIRS)."""
    import json
    import subprocess

    out = {}
    for tier in (t for t in TIERS if TIERS[t][1] == "numba"):
        directory = os.path.join(cache, f"scanlib-{name}-{tier.replace('+', '-')}")
        env = dict(os.environ, SCANLIB_CACHE_DIR=directory)
        times, reasons = [], []
        for _ in range(2):
            proc = subprocess.run([sys.executable, "-m", "bench.ports", "--first-child", size,
                                   name, tier], cwd=ROOT, capture_output=True, text=True,
                                  env=env)
            if proc.returncode != 0:
                print(f"{name} {tier}: the first-call process failed:\n{proc.stderr[-3000:]}")
                times.append(None)
                continue
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            times.append(result["first_s"])
            reasons = reasons or result["fallbacks"]
        out[tier] = (*times, reasons)
        KERNEL_DIRS[tier] = directory
    return out


KERNEL_DIRS = {}  # numba tier -> the SCANLIB_CACHE_DIR its runs in this process use


def _category(filename, func):
    """Where a profiled function's own time goes, by its file."""
    f = filename.replace(os.sep, "/")
    if "scanlib_kernel_" in f:
        return "numba kernels"
    if f.startswith("<scanlib-generated"):
        return "generated code (scan loops, jit's replay): its Python lines"
    if "/numba/" in f:
        return "numba's dispatcher and typing"
    if f == "~" and ("numpy" in func or "ufunc" in func) or "/numpy/" in f or "/scipy/" in f:
        return "NumPy / BLAS / LAPACK"
    rules = (("scanlib/tape/", "per-op dispatch (tape, ops, wrappers)"),
             ("scanlib/ops/", "per-op dispatch (tape, ops, wrappers)"),
             ("scanlib/numpy/", "per-op dispatch (tape, ops, wrappers)"),
             ("scanlib/lax", "per-op dispatch (tape, ops, wrappers)"),
             ("scanlib/tracing", "tracing, linearization, transformations"),
             ("scanlib/jit", "tracing, linearization, transformations"),
             ("scanlib/interpreters/", "tracing, linearization, transformations"),
             ("scanlib/autodiff", "tracing, linearization, transformations"),
             ("scanlib/transforms", "tracing, linearization, transformations"),
             ("scanlib/vmap", "tracing, linearization, transformations"),
             ("scanlib/scan/linearize", "tracing, linearization, transformations"),
             ("scanlib/scan/", "scan's machinery (plans, executors, caches)"),
             ("scanlib/control", "control flow (while_loop, cond) machinery"),
             ("scanlib/pytree", "pytrees"), ("scanlib/tree", "pytrees"),
             ("scanlib/", "scanlib, other"))
    for prefix, what in rules:
        if prefix in f:
            return what
    return "Python built-ins and other"


def profile(name, size, tier, calls=5):
    """cProfile of `calls` calls of one tier after its first, by category and by function;
    and what the `scanlib` logger and NumbaFallbackWarnings said during the first call.
    Where numba is installed the PRNG's threefry kernel is on from the start: the timed
    calls of a bench run have it after their first 0.5 s of NumPy threefry (prng.SWITCH_S),
    which a few profiled calls would not reach."""
    import cProfile
    import io
    import logging
    import pstats

    from scanlib.ops import prng

    if numba_missing() is None:
        prng.use_kernel(True)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("scanlib")
    old_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        run = scanlib_runs(name, size, [tier])[tier]
        first, _, reasons = first_call(run)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    run()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(calls):
        run()
    prof.disable()
    wall = (time.perf_counter() - t0) / calls
    stats = pstats.Stats(prof)
    shares, total = {}, 0.0
    for (filename, _, func), (_, _, tottime, _, _) in stats.stats.items():
        what = _category(filename, func)
        shares[what] = shares.get(what, 0.0) + tottime
        total += tottime
    print(f"{name} {tier} ({size}): first call {_s(first)}; {wall * 1e3:.1f} ms per call "
          f"under cProfile ({calls} calls)")
    for what, t in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {100 * t / total:5.1f} %  {what}")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue().split("\n", 4)[-1][:6000])
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    print(out.getvalue().split("\n", 4)[-1][:6000])
    print("scanlib log during the first call:\n" + (stream.getvalue()[:4000] or "(nothing)"))
    for reason in sorted(set(reasons)):
        print(f"NumbaFallbackWarning x{reasons.count(reason)}: {reason[:600]}")


# --- output -------------------------------------------------------------------------------------
def _s(x):
    return "-" if x is None else (f"{x:.2f} s" if x >= 0.095 else f"{x * 1e3:.0f} ms")


def _r(x):
    return "-" if x is None else f"{x:.2f}"


def detail_table(records, with_jax):
    cols = [t for t in (*TIERS, "jax") if any(t in r["median_s"] for r in records)]
    head = "| program | " + " | ".join(f"{c} ms" for c in cols) + " |"
    lines = [head, "|---" * (len(cols) + 1) + "|"]
    for r in records:
        lines.append(f"| {r['program']} | " + " | ".join(
            f"{r['median_s'][c] * 1e3:.2f}" if c in r["median_s"] else "-" for c in cols) + " |")
    return "\n".join(lines)


def ratio_table(records, with_jax):
    """Against JAX: default / JAX, best tier / JAX, the best tier's first calls."""
    lines = ["| program | default / JAX | best scanlib tier / JAX | its first call, empty cache "
             "(warm cache) (JAX's) |", "|---|---:|---:|---:|"]
    for r in records:
        med = r["median_s"]
        sl_tiers = {t: s for t, s in med.items() if t != "jax"}
        best = min(sl_tiers, key=sl_tiers.get)
        jx = med.get("jax")
        default = f"{med['eager'] / jx:.2f}" if jx else f"{med['eager'] * 1e3:.1f} ms"
        best_s = (f"{sl_tiers[best] / jx:.2f} ({best})" if jx
                  else f"{sl_tiers[best] * 1e3:.1f} ms ({best})")
        warm = r.get("warm_first_s", {}).get(best)
        empty = r.get("empty_first_s", {}).get(best, r["first_s"][best])
        first = _s(empty) + (f" ({_s(warm)} warm)" if warm is not None else "")
        first += f" ({_s(r['first_s']['jax'])})" if "jax" in r["first_s"] else ""
        lines.append(f"| {r['program']} | {default} | {best_s} | {first} |")
    return "\n".join(lines)


def auto_table(records):
    """The default where numba is installed ("auto"), each tier in a new process on an empty
    cache: its first call (against JAX's), when its kernels were all ready, and its calls
    once settled against the faster of the two tiers it chooses between, timed interleaved
    in that process."""
    lines = ["| program | auto first call (JAX's first) | its kernels ready after | auto / best "
             "of eager and numba, settled | jit+auto first call | ready after | jit+auto / "
             "best of jit and jit+numba, settled |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        cells = []
        for tier in AUTO_TIERS:
            a = r.get("auto", {}).get(tier)
            if a is None:
                cells += ["-"] * 3
                continue
            first = _s(a["first_s"])
            if tier == "auto" and "jax" in r["first_s"]:
                first += f" ({_s(r['first_s']['jax'])})"
            best = min(a["rivals_s"].values())  # the faster of its two rivals, same process
            settled = f"{a['settled_s'] / best:.2f}"
            cells += [first, _s(a["ready_s"]), settled]
        lines.append(f"| {r['program']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def progress_line(rec):
    """One program's numbers as they come, and the distinct NumbaFallbackWarnings."""
    parts = [", ".join(f"{t} {s * 1e3:.2f}" for t, s in rec["median_s"].items()),
             ", ".join(f"{t} {_s(s)}" for t, s in rec["first_s"].items())]
    line = f"{rec['program']} {rec['dims']}: median ms {parts[0]}; first {parts[1]}"
    for t, s in rec.get("empty_first_s", {}).items():
        line += (f"; {t} first in a new process {_s(s)} on an empty cache, "
                 f"{_s(rec['warm_first_s'][t])} warm")
    for t, a in rec.get("auto", {}).items():
        line += (f"; {t}: first {_s(a['first_s'])}, kernels ready after {_s(a['ready_s'])}, "
                 f"settled {a['settled_s'] * 1e3:.2f} ms ("
                 + ", ".join(f"{r} {s * 1e3:.2f}" for r, s in a["rivals_s"].items()) + ")")
    line += "; max rel diff " + ", ".join(f"{t} {d:.1e}" for t, (d, _) in rec["diff"].items())
    for tier, reasons in rec["fallbacks"].items():
        for reason in sorted(set(reasons)):
            line += f"\n  {tier}: NumbaFallbackWarning x{reasons.count(reason)}: {reason[:400]}"
    return line


def problems(records):
    bad = []
    for r in records:
        for tier, (d, where) in r["diff"].items():
            if not d <= TOLERANCE[tier]:
                what = ("scanlib eager differs from JAX" if tier == "jax"
                        else f"{tier} differs from scanlib eager")
                bad.append(f"{r['program']}: {what} by {d:.2e} ({where})")
    return bad


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    command = " ".join(["python -m bench.ports", *argv])
    if argv[:1] == ["--profile"]:  # --profile quick|full NAME TIER [CALLS]
        _, size, name, tier, *calls = argv
        profile(name, size, tier, *map(int, calls))
        return 0
    child = argv[0] if argv[:1] in (["--first-child"], ["--auto-child"]) else None
    if child:
        argv = argv[1:]
        tier = argv.pop()
    size = argv.pop(0) if argv and argv[0] in ("quick", "full") else "full"
    names = argv or list(NAMES)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise SystemExit(f"unknown programs {unknown}; choose from {', '.join(NAMES)}")
    from . import env

    how = globals().get("_THREADS_HOW", "not set: bench.ports was imported, not run")
    if child:
        import json

        work = child_first_call if child == "--first-child" else auto_child
        print(json.dumps(work(names[0], size, tier)))
        return 0
    with_jax = jax_missing() is None
    with_numba = numba_missing() is None
    cache = None
    if with_numba:  # numba reads NUMBA_CACHE_DIR when it is first imported
        cache = tempfile.mkdtemp(prefix="bench-ports-cache-")
        os.environ["NUMBA_CACHE_DIR"] = os.path.join(cache, "numba")
        os.environ["SCANLIB_CACHE_DIR"] = os.path.join(cache, "scanlib")
    machine = env.machine_info()
    print(env.describe(machine, env.thread_info(1, how)), flush=True)
    for why in (jax_missing(), numba_missing()):
        if why:
            print(f"{why}: its columns are left out")
    if cache:
        print(f"numba and scanlib kernel caches: {cache} (empty at the start)")
    records = []
    t0 = time.perf_counter()
    for name in names:
        rec = measure(name, size, with_jax, with_numba, cache)
        records.append(rec)
        print(progress_line(rec), flush=True)
    load = env.load_average()
    print("\nmedian ms per call (forward + full backward):\n" + detail_table(records, with_jax))
    print("\n" + ratio_table(records, with_jax))
    if any(r.get("auto") for r in records):
        print("\n" + auto_table(records))
    print(f"\nload average at the end {load}; total {time.perf_counter() - t0:.0f} s; "
          f"command: {command}")
    bad = problems(records)
    for line in bad:
        print("PROBLEM: " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
