"""sl.optim.tree, optax.tree's names: the arithmetic is optim.tree_utils' (tested there);
get and set find values as optax's do, by dict key, NamedTuple field or class name."""

from __future__ import annotations

import numpy as np
import pytest

import scanlib as sl

T = sl.optim.tree


def test_the_short_names_are_tree_utils_functions():
    for name in ("add", "sub", "mul", "div", "scale", "add_scale", "vdot", "sum", "max", "min",
                 "size", "conj", "real", "norm", "zeros_like", "ones_like", "full_like",
                 "where", "clip", "cast", "update_moment", "update_moment_per_elem_norm",
                 "update_infinity_moment", "bias_correction"):
        assert getattr(T, name) is getattr(sl.optim.tree_utils, "tree_" + name), name


def test_get_and_set_find_what_optax_finds():
    optax = pytest.importorskip("optax")
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    ours = sl.optim.inject_hyperparams(sl.optim.adam)(learning_rate=0.1).init(
        {"w": sl.ones(2)})
    theirs = optax.inject_hyperparams(optax.adam)(learning_rate=0.1).init({"w": jnp.ones(2)})
    for key in ("learning_rate", "b1", "mu", "ScaleByAdamState", "missing"):
        want = optax.tree.get(theirs, key, default="none")
        got = T.get(ours, key, default="none")
        if isinstance(want, str):
            assert got == "none", key
        else:
            got_leaves = [np.asarray(x.numpy()) for x in sl.pytree.leaves(got)]
            want_leaves = [np.asarray(x) for x in jax.tree.leaves(want)]
            assert len(got_leaves) == len(want_leaves), key
            for g, w in zip(got_leaves, want_leaves):
                np.testing.assert_allclose(g, w, err_msg=key)
    with pytest.raises(KeyError, match="found 2 values for 'count'"):
        T.get(ours, "count")  # the outer state's count and adam's, as optax raises
    with pytest.raises(KeyError):
        optax.tree.get(theirs, "count")
    new = T.set(ours, learning_rate=sl.tensor(0.5))
    assert float(T.get(new, "learning_rate")) == 0.5 and type(new) is type(ours)
    with pytest.raises(KeyError, match="no value for 'nope'"):
        T.set(ours, nope=1)


def test_cast_like_dtype_and_allclose():
    a = {"w": sl.ones(2), "b": sl.zeros(1)}
    like = {"w": sl.zeros(2, dtype="float32"), "b": sl.zeros(1, dtype="float64")}
    cast = T.cast_like(a, like)
    assert cast["w"].dtype == np.float32 and cast["b"].dtype == np.float64
    assert T.dtype(a) == np.float64
    with pytest.raises(ValueError, match="several dtypes"):
        T.dtype(cast)
    assert T.dtype(cast, "promote") == np.float64
    assert T.allclose(a, {"w": sl.ones(2) + 1e-12, "b": sl.zeros(1)})
    assert not T.allclose(a, {"w": sl.ones(2)})
