"""scanlib.tree_util's key paths and registrations: paths, their key types' str and repr,
keystr, register_dataclass / register_pytree_with_keys / register_static (which every
transformation then opens), transpose, broadcast and the treedef helpers, as JAX's (compared
with jax.tree_util where JAX is installed).
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

import scanlib as sl
from scanlib import tree_util as tu

NT = collections.namedtuple("NT", "x y")


def _tree():
    return {"a": [1.0, (2.0, 3.0)], "b": NT(4.0, 5.0), "c": tu.Partial(max, 6.0), "d": None}


def test_paths_and_keystr():
    pairs, treedef = tu.tree_flatten_with_path(_tree())
    paths = [p for p, _ in pairs]
    assert [leaf for _, leaf in pairs] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert paths[0] == (tu.DictKey("a"), tu.SequenceKey(0))
    assert paths[3] == (tu.DictKey("b"), tu.GetAttrKey("x"))
    assert [tu.keystr(p) for p in paths] == [
        "['a'][0]", "['a'][1][0]", "['a'][1][1]", "['b'].x", "['b'].y",
        "['c'][<flat index 0>][0]"]
    assert tu.keystr(paths[2], simple=True, separator="/") == "a/1/1"
    assert repr(tu.SequenceKey(0)) == "SequenceKey(idx=0)"
    assert repr(tu.DictKey("a")) == "DictKey(key='a')"
    assert repr(tu.GetAttrKey("x")) == "GetAttrKey(name='x')"
    assert repr(tu.FlattenedIndexKey(1)) == "FlattenedIndexKey(key=1)"
    assert tu.tree_leaves_with_path(_tree()) == pairs
    assert sl.tree.flatten_with_path(_tree()) == (pairs, treedef)
    out = sl.tree.map_with_path(lambda p, x, y: tu.keystr(p) + str(x + y), [1, {"k": 2}],
                                [10, {"k": 20}])
    assert out == ["[0]11", {"k": "[1]['k']22"}]
    with pytest.raises(NotImplementedError, match="is_leaf_takes_path"):
        tu.tree_flatten_with_path([1], is_leaf_takes_path=True)


def test_paths_and_structures_equal_jax():
    jax = pytest.importorskip("jax")
    jtu = jax.tree_util
    tree = {"a": [1.0, (2.0, 3.0)], "b": NT(4.0, 5.0), "c": jtu.Partial(max, 6.0)}
    ours = tu.tree_flatten_with_path({**tree, "c": tu.Partial(max, 6.0)})[0]
    theirs = jtu.tree_flatten_with_path(tree)[0]
    assert [tu.keystr(p) for p, _ in ours] == [jtu.keystr(p) for p, _ in theirs]
    assert [repr(p) for p, _ in ours] == [repr(p) for p, _ in theirs]
    assert [tu.keystr(p, simple=True, separator=".") for p, _ in ours] == [
        jtu.keystr(p, simple=True, separator=".") for p, _ in theirs]
    for items in ([1, 2], [(1,), 2], [None], []):
        assert tu.all_leaves(items) == jtu.all_leaves(items)
    assert sl.tree.broadcast([1, 2], [[3, 4], (5,)]) == jax.tree.broadcast([1, 2], [[3, 4], (5,)])
    x = [(1, 2, 3), (4, 5, 6)]
    assert tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0, 0)), x) == (
        jtu.tree_transpose(jtu.tree_structure([0, 0]), jtu.tree_structure((0, 0, 0)), x))


def test_register_dataclass_works_under_grad_scan_and_jit():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Cell:
        w: object
        b: object
        name: str = sl.tree.static(default="cell")

    p = Cell(sl.tensor([1.0, 2.0]), sl.tensor(0.5))
    assert tu.tree_leaves(p) == [p.w, p.b]
    assert [tu.keystr(k) for k, _ in tu.tree_flatten_with_path(p)[0]] == [".w", ".b"]

    def loss(p):
        def step(h, x):
            h = sl.tanh(p.w * h + p.b * x)
            return h, h
        h, _ = sl.scan(step, sl.zeros(2), sl.tensor([1.0, -1.0, 0.5]))
        return sl.sum(h)

    g = sl.grad(loss)(p)
    assert isinstance(g, Cell) and g.name == "cell"
    eps = 1e-6
    numeric = (loss(Cell(p.w, p.b + eps)) - loss(Cell(p.w, p.b - eps))).item() / (2 * eps)
    np.testing.assert_allclose(g.b.item(), numeric, rtol=1e-6)
    np.testing.assert_allclose(sl.jit(loss)(p).item(), loss(p).item())
    out = tu.tree_map(lambda x: x * 2, p)
    assert isinstance(out, Cell) and out.name == "cell"

    with pytest.raises(TypeError, match=r"init\.w is f64\[2\] and the returned carry\.w is "
                                         r"f64\[3\]"):
        sl.scan(lambda c, x: (Cell(sl.zeros(3), c.b), x), Cell(sl.zeros(2), p.b), sl.ones(2))

    @dataclasses.dataclass
    class Two:
        a: object
        b: object

    with pytest.raises(ValueError, match=r"\['b'\]"):
        tu.register_dataclass(Two, data_fields=["a"], meta_fields=[])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(int)


def test_register_pytree_with_keys_and_static():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tu.register_pytree_with_keys(
        Pair, lambda p: (((tu.GetAttrKey("a"), p.a), (tu.DictKey("bee"), p.b)), None),
        lambda aux, children: Pair(*children))
    pairs, _ = tu.tree_flatten_with_path([Pair(1.0, 2.0)])
    assert [tu.keystr(p) for p, _ in pairs] == ["[0].a", "[0]['bee']"]
    g = sl.grad(lambda p: p.a * p.b)(Pair(sl.tensor(2.0), sl.tensor(3.0)))
    assert (g.a.item(), g.b.item()) == (3.0, 2.0)

    @tu.register_pytree_with_keys_class
    class Box:
        def __init__(self, v):
            self.v = v

        def tree_flatten_with_keys(self):
            return ((tu.GetAttrKey("v"), self.v),), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert tu.keystr(tu.tree_flatten_with_path(Box(1.0))[0][0][0]) == ".v"

    @tu.register_static
    class Name(str):
        pass

    assert tu.tree_leaves([Name("n"), 1.0]) == [1.0]
    out = sl.jit(lambda t: t[1] * 2 if t[0] == "n" else t[1])((Name("n"), sl.tensor(2.0)))
    assert out.item() == 4.0


def test_treedef_helpers():
    td = tu.tree_structure((1.0, [2.0, 3.0]))
    assert isinstance(td, tu.PyTreeDef)
    children = tu.treedef_children(td)
    assert [c.num_leaves for c in children] == [1, 2]
    assert tu.treedef_is_leaf(children[0]) and not tu.treedef_is_leaf(td)
    assert tu.treedef_tuple(children) == td
    assert tu.tree_transpose(tu.tree_structure([0, 0]), None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tu.all_leaves([1.0, sl.zeros(2)]) and not tu.all_leaves([None])
