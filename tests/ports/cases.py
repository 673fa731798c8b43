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
def ode(program, jax, jnp):
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
    W = jnp.asarray(0.5 * r.normal(size=(3, 3)))
    b, z0 = jnp.asarray(r.normal(size=3)), jnp.asarray(r.normal(size=3))
    node_loss, node_grads = jax.value_and_grad(program.neural_ode_loss, argnums=(0, 1, 2))(
        W, b, z0, ts[:4])
    return {"ys": ys, "loss": loss, "grads": grads, "rk_ys": rk_ys, "rk_loss": rk_loss,
            "rk_grads": rk_grads, "node_loss": node_loss, "node_grads": node_grads}


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
