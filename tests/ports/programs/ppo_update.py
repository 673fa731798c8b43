"""A whole PPO training run jitted end to end in PureJaxRL's shape: a toy environment written
in JAX with automatic resets, rollouts by `lax.scan` over steps with the PRNG key split in the
runner state, actions sampled by `jax.random.categorical`, a `Transition` NamedTuple per step,
GAE by a reverse scan, then update epochs that shuffle the batch with `jax.random.permutation`,
cut it into minibatches with `tree_map` reshapes, and `lax.scan` an optax update over them;
the whole train is a `lax.scan` over updates under `jax.jit`.
Stands for: https://github.com/luchris429/purejaxrl/blob/main/purejaxrl/ppo.py (with the
network as plain parameters and the environment in place of gymnax)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

CONFIG = {"NUM_ENVS": 4, "NUM_STEPS": 8, "NUM_UPDATES": 3, "UPDATE_EPOCHS": 2,
          "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2,
          "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "LR": 3e-3,
          "MAX_EPISODE_STEPS": 6}


class EnvState(NamedTuple):
    position: jax.Array
    velocity: jax.Array
    time: jax.Array


class Transition(NamedTuple):
    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array


def env_reset(key):
    position = jax.random.uniform(key, minval=-1.0, maxval=1.0)
    state = EnvState(position, jnp.zeros(()), jnp.zeros((), dtype=jnp.int32))
    return env_obs(state), state


def env_obs(state):
    return jnp.stack([state.position, state.velocity])


def env_step(key, state, action):
    """Push left, nothing, right; the reward is for staying near 0; an episode ends after
    MAX_EPISODE_STEPS or when the point leaves [-2, 2], and the environment resets itself."""
    force = (action - 1).astype(jnp.float32) * 0.1
    velocity = 0.9 * state.velocity + force
    position = state.position + velocity
    reward = 1.0 - jnp.abs(position)
    time = state.time + 1
    done = (time >= CONFIG["MAX_EPISODE_STEPS"]) | (jnp.abs(position) > 2.0)
    stepped = EnvState(position, velocity, time)
    reset_obs, reset_state = env_reset(key)
    state = jax.tree_util.tree_map(lambda r, s: jax.lax.select(done, r, s), reset_state, stepped)
    obs = jax.lax.select(done, reset_obs, env_obs(stepped))
    return obs, state, reward, done


def network(params, obs):
    h = jnp.tanh(obs @ params["w1"] + params["b1"])
    h = jnp.tanh(h @ params["w2"] + params["b2"])
    logits = h @ params["w_pi"] + params["b_pi"]
    value = (h @ params["w_v"] + params["b_v"])[..., 0]
    return logits, value


def make_train(config):
    minibatch_size = config["NUM_ENVS"] * config["NUM_STEPS"] // config["NUM_MINIBATCHES"]
    tx = optax.chain(optax.clip_by_global_norm(config["MAX_GRAD_NORM"]),
                     optax.adam(config["LR"], eps=1e-5))

    def train(params, rng):
        opt_state = tx.init(params)
        rng, _rng = jax.random.split(rng)
        reset_rng = jax.random.split(_rng, config["NUM_ENVS"])
        obsv, env_state = jax.vmap(env_reset)(reset_rng)

        def _update_step(runner_state, unused):
            def _env_step(runner_state, unused):
                params, opt_state, env_state, last_obs, rng = runner_state
                rng, _rng = jax.random.split(rng)
                logits, value = network(params, last_obs)
                action = jax.random.categorical(_rng, logits)
                log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None],
                                               axis=-1)[:, 0]
                rng, _rng = jax.random.split(rng)
                rng_step = jax.random.split(_rng, config["NUM_ENVS"])
                obsv, env_state, reward, done = jax.vmap(env_step)(rng_step, env_state, action)
                transition = Transition(done, action, value, reward, log_prob, last_obs)
                return (params, opt_state, env_state, obsv, rng), transition

            runner_state, traj_batch = jax.lax.scan(_env_step, runner_state, None,
                                                    config["NUM_STEPS"])
            params, opt_state, env_state, last_obs, rng = runner_state
            _, last_val = network(params, last_obs)

            def _calculate_gae(traj_batch, last_val):
                def _get_advantages(gae_and_next_value, transition):
                    gae, next_value = gae_and_next_value
                    done, value, reward = transition.done, transition.value, transition.reward
                    delta = reward + config["GAMMA"] * next_value * (1 - done) - value
                    gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - done) * gae
                    return (gae, value), gae

                _, advantages = jax.lax.scan(_get_advantages,
                                             (jnp.zeros_like(last_val), last_val),
                                             traj_batch, reverse=True, unroll=4)
                return advantages, advantages + traj_batch.value

            advantages, targets = _calculate_gae(traj_batch, last_val)

            def _update_epoch(update_state, unused):
                def _update_minbatch(train_state, batch_info):
                    params, opt_state = train_state
                    traj_batch, advantages, targets = batch_info

                    def _loss_fn(params, traj_batch, gae, targets):
                        logits, value = network(params, traj_batch.obs)
                        logp_all = jax.nn.log_softmax(logits)
                        log_prob = jnp.take_along_axis(
                            logp_all, traj_batch.action[:, None], axis=-1)[:, 0]
                        value_pred_clipped = traj_batch.value + (
                            value - traj_batch.value).clip(-config["CLIP_EPS"],
                                                           config["CLIP_EPS"])
                        value_losses = jnp.square(value - targets)
                        value_losses_clipped = jnp.square(value_pred_clipped - targets)
                        value_loss = 0.5 * jnp.maximum(value_losses,
                                                       value_losses_clipped).mean()
                        ratio = jnp.exp(log_prob - traj_batch.log_prob)
                        gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                        loss_actor1 = ratio * gae
                        loss_actor2 = jnp.clip(ratio, 1.0 - config["CLIP_EPS"],
                                               1.0 + config["CLIP_EPS"]) * gae
                        loss_actor = -jnp.minimum(loss_actor1, loss_actor2).mean()
                        entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1).mean()
                        total_loss = (loss_actor + config["VF_COEF"] * value_loss
                                      - config["ENT_COEF"] * entropy)
                        return total_loss, (value_loss, loss_actor, entropy)

                    grad_fn = jax.value_and_grad(_loss_fn, has_aux=True)
                    total_loss, grads = grad_fn(params, traj_batch, advantages, targets)
                    updates, opt_state = tx.update(grads, opt_state, params)
                    params = optax.apply_updates(params, updates)
                    return (params, opt_state), total_loss

                train_state, traj_batch, advantages, targets, rng = update_state
                rng, _rng = jax.random.split(rng)
                batch_size = minibatch_size * config["NUM_MINIBATCHES"]
                permutation = jax.random.permutation(_rng, batch_size)
                batch = (traj_batch, advantages, targets)
                batch = jax.tree_util.tree_map(
                    lambda x: x.reshape((batch_size,) + x.shape[2:]), batch)
                shuffled_batch = jax.tree_util.tree_map(
                    lambda x: jnp.take(x, permutation, axis=0), batch)
                minibatches = jax.tree_util.tree_map(
                    lambda x: jnp.reshape(x, [config["NUM_MINIBATCHES"], -1]
                                          + list(x.shape[1:])), shuffled_batch)
                train_state, total_loss = jax.lax.scan(_update_minbatch, train_state,
                                                       minibatches)
                return (train_state, traj_batch, advantages, targets, rng), total_loss

            update_state = ((params, opt_state), traj_batch, advantages, targets, rng)
            update_state, loss_info = jax.lax.scan(_update_epoch, update_state, None,
                                                   config["UPDATE_EPOCHS"])
            (params, opt_state), rng = update_state[0], update_state[-1]
            metric = {"reward": traj_batch.reward.mean(), "done": traj_batch.done.sum()}
            runner_state = (params, opt_state, env_state, last_obs, rng)
            return runner_state, (metric, loss_info)

        runner_state = (params, opt_state, env_state, obsv, rng)
        runner_state, (metrics, losses) = jax.lax.scan(_update_step, runner_state, None,
                                                       config["NUM_UPDATES"])
        return runner_state[0], metrics, losses

    return train
