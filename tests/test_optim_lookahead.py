"""sl.optim.lookahead, as optax.lookahead: fast and slow parameters step as optax's, with and
without the reset of the fast optimiser's state; a plain parameter tree is refused."""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reset_state", [False, True])
def test_lookahead_follows_optax(dtype, reset_state):
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(2)
    p0 = {"w": rng.standard_normal((2, 3)).astype(dtype), "b": np.asarray(0.5, dtype)}
    grads = [{k: rng.standard_normal(np.shape(v)).astype(dtype) for k, v in p0.items()}
             for _ in range(8)]
    with jax.enable_x64(dtype == np.float64):
        opt = optax.lookahead(optax.adam(0.1), sync_period=3, slow_step_size=0.4,
                              reset_state=reset_state)
        p = optax.LookaheadParams.init_synced({k: jax.numpy.asarray(v) for k, v in p0.items()})
        state = opt.init(p)
        for g in grads:
            u, state = opt.update({k: jax.numpy.asarray(v) for k, v in g.items()}, state, p)
            p = optax.apply_updates(p, u)
        want = jax.tree.map(np.asarray, (p.fast, p.slow, state))
    opt = sl.optim.lookahead(sl.optim.adam(0.1), sync_period=3, slow_step_size=0.4,
                             reset_state=reset_state)
    q = sl.optim.LookaheadParams.init_synced({k: sl.tensor(v) for k, v in p0.items()})
    state = opt.init(q)
    for g in grads:
        q, state = opt.step({k: sl.tensor(v) for k, v in g.items()}, state, q)
    got_leaves = [x.numpy() for x in sl.pytree.leaves((q.fast, q.slow, state))]
    want_leaves = jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(g, w, rtol=4 * np.finfo(dtype).eps, atol=0)
    assert q.slow["w"].dtype == dtype


def test_lookahead_needs_lookahead_params_and_is_no_stage():
    opt = sl.optim.lookahead(sl.optim.sgd(0.1), sync_period=2, slow_step_size=0.5)
    w = sl.tensor([1.0])
    state = opt.init(w)  # the fast parameters alone, as optax allows
    with pytest.raises(TypeError, match=r"params must be LookaheadParams\(fast, slow\)"):
        opt.update(sl.tensor([1.0]), state, w)
    with pytest.raises(TypeError, match="cannot be a stage of chain"):
        sl.optim.chain(sl.optim.clip(1.0), opt).init(w)
    with pytest.raises(ValueError, match="sync_period must be an int >= 1"):
        sl.optim.lookahead(sl.optim.sgd(0.1), sync_period=0, slow_step_size=0.5)
