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
