"""How each ported program is driven: inputs built with NumPy, results (values and every
gradient leaf) returned as a pytree. A case calls the program only through `program`, `jax`
and `jnp`, so the same case runs on JAX and on scanlib."""

from __future__ import annotations

import numpy as np

# name -> (case(program, jax, jnp) -> pytree of arrays)
CASES = {}
# name -> (rtol, atol) where a program's results need a looser tolerance than the default
TOLERANCES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@case
def gae(program, jax, jnp):
    r = rng(1)
    T, B, D, A, H = 12, 3, 4, 3, 8
    params = {"w1": r.normal(size=(D, H)) * 0.5, "b1": r.normal(size=H) * 0.1,
              "w_pi": r.normal(size=(H, A)) * 0.5, "w_v": r.normal(size=(H, 1)) * 0.5}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    obs = jnp.asarray(r.normal(size=(T, B, D)))
    actions = jnp.asarray(r.integers(0, A, size=(T, B)))
    old_logp = jnp.asarray(np.log(r.uniform(0.2, 0.6, size=(T, B))))
    rewards = jnp.asarray(r.normal(size=(T, B)))
    dones = jnp.asarray((r.uniform(size=(T, B)) < 0.15).astype(np.float64))
    last_value = jnp.asarray(r.normal(size=B))
    batch = (obs, actions, old_logp, rewards, dones, last_value)
    advantages, targets = program.gae(rewards, obs[..., 0], dones, last_value)
    loss, grads = jax.value_and_grad(program.ppo_loss)(params, *batch)
    trained, losses = program.train(params, batch)
    return {"advantages": advantages, "targets": targets, "loss": loss, "grads": grads,
            "trained": trained, "losses": losses}


@case
def gru_lstm(program, jax, jnp):
    r = rng(2)
    T, B, D, H = 7, 3, 4, 5
    dones = r.uniform(size=(T, B)) < 0.25
    dones[3, 1] = True
    obs = jnp.asarray(r.normal(size=(T, B, D)))
    dones = jnp.asarray(dones)
    targets = jnp.asarray(r.normal(size=(T, B)))
    results = {}
    for kind, gates in (("gru", 3), ("lstm", 4)):
        params = {"rnn": {"w_x": r.normal(size=(D, gates * H)) * 0.4,
                          "w_h": r.normal(size=(H, gates * H)) * 0.4,
                          "b": r.normal(size=gates * H) * 0.1},
                  "head": {"w": r.normal(size=(H, 1)) * 0.5, "b": np.zeros(1)}}
        params = jax.tree_util.tree_map(jnp.asarray, params)
        carry = jax.tree_util.tree_map(
            lambda z: z + jnp.asarray(r.normal(size=(B, H))),
            program.initialize_carry(kind, B, H))
        final, hs = program.scanned_rnn(kind, params["rnn"], carry, (obs, dones))
        loss, grads = jax.value_and_grad(program.loss_fn)(params, kind, carry, obs, dones,
                                                           targets)
        carry_grad = jax.grad(program.loss_fn, argnums=2)(params, kind, carry, obs, dones,
                                                          targets)
        trained, losses = program.train(params, kind, carry, obs, dones, targets)
        results[kind] = {"final": tuple(jax.tree_util.tree_leaves(final)), "hs": hs,
                         "loss": loss, "grads": grads,
                         "carry_grad": tuple(jax.tree_util.tree_leaves(carry_grad)),
                         "trained": trained, "losses": losses}
    return results


@case
def lru(program, jax, jnp):
    r = rng(3)
    L, B, D_in, H, N, K = 9, 3, 2, 4, 5, 3

    def lru_params():
        draws = (r.uniform(size=N), r.uniform(size=N), r.normal(size=(N, H)),
                 r.normal(size=(N, H)), r.normal(size=(H, N)), r.normal(size=(H, N)),
                 r.normal(size=H))
        return program.init_lru(*map(jnp.asarray, draws))

    params = {"encoder": jnp.asarray(r.normal(size=(D_in, H)) * 0.5),
              "blocks": [{"lru": lru_params(),
                          "w_out": jnp.asarray(r.normal(size=(H, H)) * 0.5),
                          "w_gate": jnp.asarray(r.normal(size=(H, H)) * 0.5)}
                         for _ in range(2)],
              "decoder": jnp.asarray(r.normal(size=(H, K)) * 0.5)}
    inputs = jnp.asarray(r.normal(size=(B, L, D_in)))
    labels = jnp.asarray(r.integers(0, K, size=B))
    u = jnp.asarray(r.normal(size=(L, H)))
    single = params["blocks"][0]["lru"]
    grad_seq = jax.grad(lambda p: jnp.sum(jnp.sin(program.lru_sequential(p, u))))(single)
    grad_par = jax.grad(lambda p: jnp.sum(jnp.sin(program.lru(p, u))))(single)
    loss, grads = jax.value_and_grad(program.loss_fn)(params, inputs, labels, num_classes=K)
    return {"init": single, "parallel": program.lru(single, u),
            "sequential": program.lru_sequential(single, u), "grad_seq": grad_seq,
            "grad_par": grad_par, "logits": jax.vmap(program.model, in_axes=(None, 0))(
                params, inputs), "loss": loss, "grads": grads}


@case
def s5_mamba(program, jax, jnp):
    r = rng(4)
    L, H, P = 8, 3, 4
    s5 = {"Lambda_re": -np.exp(r.normal(size=P) * 0.3), "Lambda_im": r.normal(size=P),
          "B": r.normal(size=(P, H, 2)) * 0.5, "C": r.normal(size=(H, 2 * P, 2)) * 0.5,
          "D": r.normal(size=H), "log_step": np.log(r.uniform(0.01, 0.3, size=(P, 1))),
          "step_rescale": np.array(1.0)}
    s5 = jax.tree_util.tree_map(jnp.asarray, s5)
    u = jnp.asarray(r.normal(size=(L, H)))
    s5_out = program.s5_layer(s5, u)
    s5_grads = jax.grad(lambda p, u: jnp.sum(jnp.tanh(program.s5_layer(p, u))),
                        argnums=(0, 1))(s5, u)

    V, d_model, d_inner, d_state, dt_rank, k, B = 7, 4, 6, 3, 2, 3, 2

    def layer():
        return {"norm": 1.0 + 0.1 * r.normal(size=d_model),
                "in_proj": r.normal(size=(d_model, 2 * d_inner)) * 0.4,
                "conv_w": r.normal(size=(k, d_inner)) * 0.4, "conv_b": r.normal(size=d_inner) * .1,
                "x_proj": r.normal(size=(d_inner, dt_rank + 2 * d_state)) * 0.4,
                "dt_proj": r.normal(size=(dt_rank, d_inner)) * 0.4,
                "dt_bias": np.log(np.expm1(r.uniform(0.01, 0.2, size=d_inner))),
                "A_log": np.log(np.tile(np.arange(1.0, d_state + 1), (d_inner, 1))),
                "D": np.ones(d_inner), "out_proj": r.normal(size=(d_inner, d_model)) * 0.4}

    params = {"embed": r.normal(size=(V, d_model)) * 0.5, "layers": [layer(), layer()],
              "norm_f": np.ones(d_model)}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    tokens = jnp.asarray(r.integers(0, V, size=(B, L)))
    loss_par, grads_par = jax.value_and_grad(program.model_loss)(params, tokens)
    loss_seq, grads_seq = jax.value_and_grad(program.model_loss)(params, tokens, parallel=False)
    x = jnp.asarray(r.normal(size=(L, d_model)))
    block = program.mamba_block(params["layers"][0], x)
    return {"s5": s5_out, "s5_grads": s5_grads, "block": block, "loss_par": loss_par,
            "grads_par": grads_par, "loss_seq": loss_seq, "grads_seq": grads_seq}


@case
def mingru(program, jax, jnp):
    r = rng(5)
    T, d_in, d_h, V, B = 9, 3, 4, 6, 2

    def layer(d_in, d_h):
        return {"w_z": r.normal(size=(d_in, d_h)) * 0.6, "b_z": r.normal(size=d_h) * 0.1,
                "w_h": r.normal(size=(d_in, d_h)) * 0.6, "b_h": r.normal(size=d_h) * 0.1,
                "w_out": r.normal(size=(d_h, d_in)) * 0.4}

    single = jax.tree_util.tree_map(jnp.asarray, layer(d_in, d_h))
    x = jnp.asarray(r.normal(size=(T, d_in)))
    h0 = jnp.asarray(r.uniform(0.2, 1.0, size=d_h))
    outs = {mode: program.min_gru(single, x, h0, mode) for mode in ("log", "assoc", "sequential")}
    grads = {mode: jax.grad(lambda p, x, h0, m: jnp.sum(jnp.sin(program.min_gru(p, x, h0, m))),
                            argnums=(0, 1, 2))(single, x, h0, mode)
             for mode in ("log", "assoc", "sequential")}
    params = {"embed": r.normal(size=(V, d_in)), "unembed": r.normal(size=(d_in, V)) * 0.5,
              "layers": [layer(d_in, d_h), layer(d_in, d_h)]}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    tokens = jnp.asarray(r.integers(0, V, size=(B, T)))
    loss, lm_grads = jax.value_and_grad(program.lm_loss)(params, tokens)
    trained, losses = program.train(params, tokens)
    return {"outs": outs, "grads": grads, "loss": loss, "lm_grads": lm_grads,
            "trained": trained, "losses": losses}


@case
def vtrace(program, jax, jnp):
    r = rng(6)
    T, B, D, A, H = 10, 3, 4, 3, 6
    v_tm1, v_t, r_t = (jnp.asarray(r.normal(size=T)) for _ in range(3))
    discount_t = jnp.asarray(0.9 * (r.uniform(size=T) > 0.2))
    rho_tm1 = jnp.asarray(np.exp(r.normal(size=T) * 0.7))
    single = program.vtrace_td_error_and_advantage(v_tm1, v_t, r_t, discount_t, rho_tm1, 0.9)
    plain = program.vtrace(v_tm1, v_t, r_t, discount_t, rho_tm1, 0.9,
                           stop_target_gradients=False)
    grad_stop, grad_plain = (
        jax.grad(lambda v, stop: jnp.sum(program.vtrace(v, v_t, r_t, discount_t, rho_tm1, 0.9,
                                                        stop_target_gradients=stop) ** 2))(
            v_tm1, stop) for stop in (True, False))
    params = {"w1": r.normal(size=(D, H)) * 0.5, "b1": r.normal(size=H) * 0.1,
              "w_pi": r.normal(size=(H, A)) * 0.5, "w_v": r.normal(size=(H, 1)) * 0.5}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    obs = jnp.asarray(r.normal(size=(T + 1, B, D)))
    actions = jnp.asarray(r.integers(0, A, size=(T, B)))
    behaviour_logits = jnp.asarray(r.normal(size=(T, B, A)))
    rewards = jnp.asarray(r.normal(size=(T, B)))
    dones = jnp.asarray((r.uniform(size=(T, B)) < 0.2).astype(np.float64))
    (loss, out), grads = jax.value_and_grad(program.impala_loss, has_aux=True)(
        params, obs, actions, behaviour_logits, rewards, dones)
    return {"single": tuple(single), "plain": plain, "grad_stop": grad_stop,
            "grad_plain": grad_plain, "loss": loss, "batched": tuple(out), "grads": grads}


@case
def char_rnn(program, jax, jnp):
    r = rng(7)
    V, H, B, T = 5, 6, 3, 7
    text = "the cat sat on the mat, the rat ate the hat. "
    vocab = sorted(set(text))[:V]
    data = jnp.asarray(np.array([vocab.index(c) if c in vocab else 0 for c in text * 2]))
    key = jax.random.PRNGKey(42)
    params = program.init_params(key, V, H)
    h0 = jnp.asarray(r.normal(size=(B, H)) * 0.3)
    inputs = jnp.asarray(r.integers(0, V, size=(B, T)))
    targets = jnp.asarray(r.integers(0, V, size=(B, T)))
    loss, grads = jax.value_and_grad(program.loss_fn, argnums=(0, 1))(params, h0, inputs,
                                                                       targets)
    batch = program.get_batch(jax.random.PRNGKey(3), data, B, T)
    trained, losses = program.train(jax.random.PRNGKey(0), data, V)
    tokens = program.sample(trained, jax.random.PRNGKey(1), jnp.asarray(2), length=12,
                            temperature=0.8)
    return {"init": params, "loss": loss, "grads": grads, "batch": batch, "trained": trained,
            "losses": losses, "tokens": tokens}


@case
def rwkv(program, jax, jnp):
    r = rng(8)
    V, d, f, L, T, B = 7, 4, 6, 2, 8, 2

    def norm():
        return (jnp.asarray(1.0 + 0.1 * r.normal(size=d)), jnp.asarray(0.1 * r.normal(size=d)))

    def mat(*shape):
        return jnp.asarray(r.normal(size=shape) * 0.5)

    def mix():
        return jnp.asarray(r.uniform(size=d))

    blocks = [{"ln1": norm(), "ln2": norm(),
               "att": {"mix_k": mix(), "mix_v": mix(), "mix_r": mix(), "Wk": mat(d, d),
                       "Wv": mat(d, d), "Wr": mat(d, d), "Wout": mat(d, d),
                       "decay": mat(d), "bonus": mat(d)},
               "ffn": {"mix_k": mix(), "mix_r": mix(), "Wk": mat(f, d), "Wv": mat(d, f),
                       "Wr": mat(d, d)}}
              for _ in range(L)]
    params = {"emb": mat(V, d), "ln0": norm(), "blocks": blocks, "ln_out": norm(),
              "head": mat(V, d)}
    batch = jnp.asarray(r.integers(0, V, size=(B, T)))
    logits, states = program.rnn_forward(params, batch[0])
    loss, grads = jax.value_and_grad(program.loss_fn)(params, batch)
    return {"logits": logits, "states": [tuple(s) for s in states], "loss": loss,
            "grads": grads}


@case
def ctc(program, jax, jnp):
    r = rng(9)
    B, T, K, N, F, H = 3, 9, 4, 3, 2, 5
    logits = jnp.asarray(r.normal(size=(B, T, K)))
    frame_lengths, label_lengths = np.array([9, 7, 5]), np.array([3, 2, 0])
    logit_paddings = jnp.asarray((np.arange(T) >= frame_lengths[:, None]).astype(np.float64))
    label_paddings = jnp.asarray((np.arange(N) >= label_lengths[:, None]).astype(np.float64))
    labels = np.array([[1, 1, 2], [3, 2, 0], [0, 0, 0]])  # a repeated label needs a blank
    labels = jnp.asarray(labels)
    losses = program.ctc_loss(logits, logit_paddings, labels, label_paddings)
    grad = jax.grad(lambda z: jnp.sum(program.ctc_loss(z, logit_paddings, labels,
                                                       label_paddings)))(logits)
    params = {"W_in": r.normal(size=(F, H)) * 0.5, "W_h": r.normal(size=(H, H)) * 0.4,
              "b": np.zeros(H), "W_out": r.normal(size=(H, K)) * 0.5}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    frames = jnp.asarray(r.normal(size=(B, T, F)))
    batch = (frames, logit_paddings, labels, label_paddings)
    trained, train_losses = program.train(params, batch)
    return {"losses": losses, "grad": grad, "trained": trained, "train_losses": train_losses}


@case
def ppo_update(program, jax, jnp):
    r = rng(10)
    H, A = 8, 3
    params = {"w1": r.normal(size=(2, H)) * 0.7, "b1": np.zeros(H),
              "w2": r.normal(size=(H, H)) * 0.4, "b2": np.zeros(H),
              "w_pi": r.normal(size=(H, A)) * 0.1, "b_pi": np.zeros(A),
              "w_v": r.normal(size=(H, 1)) * 0.5, "b_v": np.zeros(1)}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    train = jax.jit(program.make_train(program.CONFIG))
    trained, metrics, (total_loss, (value_loss, actor_loss, entropy)) = train(
        params, jax.random.PRNGKey(30))
    return {"trained": trained, "metrics": metrics, "total_loss": total_loss,
            "value_loss": value_loss, "actor_loss": actor_loss, "entropy": entropy}


@case
def q_lambda(program, jax, jnp):
    r = rng(11)
    B, T, D, H, A = 3, 7, 3, 6, 3
    params = {"w1": r.normal(size=(D, H)) * 0.6, "b1": r.normal(size=H) * 0.1,
              "w2": r.normal(size=(H, A)) * 0.6, "b2": np.zeros(A)}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    target_params = jax.tree_util.tree_map(lambda p: p * 0.9, params)
    batch = (jnp.asarray(r.normal(size=(B, T + 1, D))), jnp.asarray(r.integers(0, A, (B, T))),
             jnp.asarray(r.normal(size=(B, T))),
             jnp.asarray(0.95 * (r.uniform(size=(B, T)) > 0.15)))
    results = {}
    for name, watkins in (("watkins", True), ("peng", False)):
        loss, grads = jax.value_and_grad(program.loss_fn)(params, target_params, batch, 0.8,
                                                          watkins)
        results[name] = {"loss": loss, "grads": grads}
    trained, target, losses = program.train(params, batch)
    results.update(trained=trained, target=target, losses=losses)
    return results
def _lgssm_params(program, jnp, r, state_dim, emission_dim):
    P = program
    return P.ParamsLGSSM(
        initial=P.ParamsLGSSMInitial(
            mean=jnp.asarray(r.normal(size=state_dim)),
            cov_chol=jnp.asarray(np.eye(state_dim) + 0.1 * r.normal(size=(state_dim,) * 2))),
        dynamics=P.ParamsLGSSMDynamics(
            weights=jnp.asarray(0.9 * np.eye(state_dim) + 0.1 * r.normal(size=(state_dim,) * 2)),
            bias=jnp.asarray(0.1 * r.normal(size=state_dim)),
            cov_chol=jnp.asarray(0.5 * np.eye(state_dim) + 0.1 * r.normal(size=(state_dim,) * 2))),
        emissions=P.ParamsLGSSMEmissions(
            weights=jnp.asarray(r.normal(size=(emission_dim, state_dim))),
            bias=jnp.asarray(0.1 * r.normal(size=emission_dim)),
            cov_chol=jnp.asarray(0.7 * np.eye(emission_dim)
                                 + 0.1 * r.normal(size=(emission_dim,) * 2))))


@case
def kalman(program, jax, jnp):
    r = rng(2)
    B, T, S, D = 3, 9, 3, 2
    params = _lgssm_params(program, jnp, r, S, D)
    emissions = jnp.asarray(r.normal(size=(B, T, D)))
    masks = jnp.asarray(r.uniform(size=(B, T)) > 0.2)
    loss, grads = jax.value_and_grad(program.batch_loss)(params, emissions, masks)
    post = program.lgssm_smoother(params, emissions[0], masks[0])
    moment, moment_grads = jax.value_and_grad(program.smoothed_second_moment)(
        params, emissions[1], masks[1])
    white = program.whitened_innovations(params, emissions[2])
    white_grads = jax.grad(lambda p: jnp.sum(program.whitened_innovations(p, emissions[2]) ** 2))(
        params)
    return {"loss": loss, "grads": grads, "posterior": tuple(post), "moment": moment,
            "moment_grads": moment_grads, "white": white, "white_grads": white_grads}


@case
def ekf(program, jax, jnp):
    r = rng(3)
    T = 15
    params = program.PendulumParams(
        log_gravity=jnp.asarray(np.log(9.0)), log_damping=jnp.asarray(np.log(0.3)),
        log_q=jnp.asarray(np.log(0.5)), log_r=jnp.asarray(np.log(0.2)),
        init_mean=jnp.asarray([1.0, 0.0]))
    inputs = jnp.asarray(0.3 * np.sin(np.arange(T) / 3.0))
    angles = 1.0 * np.cos(np.sqrt(9.0) * program.DT * np.arange(T))
    emissions = jnp.asarray(np.stack([np.sin(angles), 0.1 * np.cos(angles)], axis=1)
                            + 0.2 * r.normal(size=(T, 2)))
    out = {}
    for num_iter in (1, 3):
        nll, grads = jax.value_and_grad(program.neg_log_likelihood)(params, emissions, inputs,
                                                                    num_iter)
        post = program.extended_kalman_filter(params, emissions, inputs, num_iter=num_iter)
        means, covs = program.extended_kalman_smoother(params, emissions, inputs, num_iter)
        out[f"iter{num_iter}"] = {"nll": nll, "grads": grads, "filtered": tuple(post),
                                  "smoothed": (means, covs)}
    smooth_grads = jax.grad(lambda p: jnp.sum(program.extended_kalman_smoother(
        p, emissions, inputs, 2)[0][:, 0] ** 2))(params)
    out["smooth_grads"] = smooth_grads
    return out



@case
def hmm(program, jax, jnp):
    r = rng(4)
    B, T, K, D, V = 3, 11, 3, 2, 4
    params = program.HMMParams(
        initial_logits=jnp.asarray(r.normal(size=K)),
        transition_logits=jnp.asarray(2.0 * np.eye(K) + 0.5 * r.normal(size=(K, K))),
        emission_means=jnp.asarray(2.0 * r.normal(size=(K, D))),
        emission_log_scales=jnp.asarray(0.2 * r.normal(size=(K, D))),
        symbol_logits=jnp.asarray(r.normal(size=(K, V))))
    obs = jnp.asarray(2.0 * r.normal(size=(B, T, D)))
    symbols = jnp.asarray(r.integers(0, V, size=(B, T)))
    nll, grads = jax.value_and_grad(program.batch_nll)(params, obs, symbols)
    log_pi, log_A = program.normalized(params)
    log_liks = program.emission_log_probs(params, obs[0], symbols[0])
    ll, smoothed, counts = program.hmm_smoother(log_pi, log_A, log_liks)
    by_grad = program.posterior_marginals_by_grad(params, obs[0], symbols[0])
    states, best = program.decode(params, obs, symbols)
    em, em_grads = jax.value_and_grad(program.em_objective)(params, obs[1], symbols[1])
    return {"nll": nll, "grads": grads, "smoother": (ll, smoothed, counts), "by_grad": by_grad,
            "viterbi": (states, best), "em": em, "em_grads": em_grads}


@case
def particle_filter(program, jax, jnp):
    params = program.SVParams(mu=jnp.asarray(-0.5), logit_phi=jnp.asarray(1.2),
                              log_sigma=jnp.asarray(np.log(0.4)))
    _, y = program.simulate(params, jax.random.PRNGKey(7), 12)
    logw = jnp.asarray(rng(5).normal(size=10))
    out = {"y": y, "systematic_indices": program.resample_systematic(jax.random.PRNGKey(1), logw),
           "multinomial_indices": program.resample_multinomial(jax.random.PRNGKey(1), logw)}
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    for method in ("systematic", "multinomial"):
        run = program.particle_filter(params, jax.random.PRNGKey(5), y, n_particles=16,
                                      method=method)
        value, grads = jax.value_and_grad(program.mean_loglik)(params, keys, y, method)
        out[method] = {"run": run, "means": program.filtered_means(run), "mean_loglik": value,
                       "grads": grads}
    return out


@case
def hmc(program, jax, jnp):
    r = rng(6)
    N, D, C = 20, 3, 3
    X = jnp.asarray(r.normal(size=(N, D)))
    y = jnp.asarray((r.uniform(size=N) < 0.5).astype(np.float64))
    positions = {"w": jnp.asarray(0.3 * r.normal(size=(C, D))),
                 "b": jnp.asarray(0.3 * r.normal(size=C))}
    key = jax.random.PRNGKey(11)
    prior_scale, step_size = jnp.asarray(1.5), jnp.asarray(0.6)
    states, infos = program.run_chains(key, positions, X, y, prior_scale, step_size)
    acc, d_step = jax.value_and_grad(program.mean_acceptance)(step_size, key, positions, X, y,
                                                               prior_scale)
    jac_prior = jax.jacrev(program.posterior_mean_w)(prior_scale, key, positions, X, y, step_size)
    return {"states": tuple(states), "acceptance": infos.acceptance_rate,
            "accepted": infos.is_accepted, "energy": infos.energy, "momentum": infos.momentum,
            "mean_acceptance": acc, "d_step": d_step, "jac_prior": jac_prior}


@case
def ode(program, jax, jnp, neural_ode=True):
    """neural_ode=False: the Lotka-Volterra results alone (the results named node_* left out)."""
    r = rng(7)
    ts = jnp.asarray(np.linspace(0.0, 3.0, 7))
    params = jnp.asarray([1.1, 0.4, 0.9, 0.3])
    y0 = {"prey": jnp.asarray(2.0), "predator": jnp.asarray(1.0)}
    observed = jnp.asarray(np.abs(r.normal(size=(7, 2))) + 1.0)
    ys = program.odeint(program.lotka_volterra, y0, ts, params, rtol=1e-10, atol=1e-10)
    loss, grads = jax.value_and_grad(program.fit_loss, argnums=(0, 1, 2))(params, y0, ts,
                                                                          observed)
    rk_ys = program.rk4(program.lotka_volterra, y0, ts, params)
    rk_loss, rk_grads = jax.value_and_grad(program.rk4_loss, argnums=(0, 1))(params, y0, ts,
                                                                             observed)
    out = {"ys": ys, "loss": loss, "grads": grads, "rk_ys": rk_ys, "rk_loss": rk_loss,
           "rk_grads": rk_grads}
    if neural_ode:
        W = jnp.asarray(0.5 * r.normal(size=(3, 3)))
        b, z0 = jnp.asarray(r.normal(size=3)), jnp.asarray(r.normal(size=3))
        out["node_loss"], out["node_grads"] = jax.value_and_grad(
            program.neural_ode_loss, argnums=(0, 1, 2))(W, b, z0, ts[:4])
    return out


@case
def parallel_kalman(program, jax, jnp):
    r = rng(8)
    T, S, D = 11, 3, 2
    params = {"m0": r.normal(size=S), "L0": np.eye(S) + 0.1 * r.normal(size=(S, S)),
              "F": 0.9 * np.eye(S) + 0.1 * r.normal(size=(S, S)),
              "LQ": 0.5 * np.eye(S) + 0.1 * r.normal(size=(S, S)),
              "H": r.normal(size=(D, S)), "LR": 0.7 * np.eye(D) + 0.1 * r.normal(size=(D, D))}
    params = jax.tree_util.tree_map(jnp.asarray, params)
    emissions = jnp.asarray(r.normal(size=(T, D)))
    model = program.make_model(params)
    smoothed = program.parallel_smoother(model, emissions)
    value, grads = jax.value_and_grad(program.loss)(params, emissions)
    return {"smoothed": smoothed, "loss": value, "grads": grads}


@case
def holt_winters(program, jax, jnp):
    r = rng(9)
    B, T, period = 3, 28, 4
    t = np.arange(T)
    ys = jnp.asarray(10.0 + 0.3 * t + 2.0 * np.sin(2 * np.pi * t / period)[None]
                     + 0.5 * r.normal(size=(B, T)))
    params = {"alpha": jnp.asarray(0.0), "beta": jnp.asarray(-1.0), "gamma": jnp.asarray(-0.5)}
    value, grads = jax.value_and_grad(program.loss)(params, ys, period)
    fitted, losses = program.fit(params, ys, period)
    return {"loss": value, "grads": grads, "fitted": fitted, "losses": losses,
            "forecast": program.predict(fitted, ys, period, 6)}
