"""Forward mode's rules: every primitive that declares a `tangent` rule, a `linear` fact or a
`multilinear` one agrees with the transpose of its VJP (the rule forward mode uses for a
primitive that declares nothing), on random float64 inputs with broadcasting, complex
inputs where the primitive takes them, integer inputs (no tangent) and absent tangents; and
jvp, jacfwd and hessian of whole programs (a Kalman likelihood, an RNN) against finite
differences, computed by the rules alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import scanlib as sl
from scanlib import pytree
from scanlib.interpreters import forward
from scanlib.ops import decompositions as dc
from scanlib.ops import elementwise as ew
from scanlib.ops import fft as ff
from scanlib.ops import linalg as la
from scanlib.ops import mathfuncs as mf
from scanlib.ops import expint, incomplete, normal, prng, prng_loops
from scanlib.ops import reductions as rd
from scanlib.ops import special as sp
from scanlib.ops import spectral as sv
from scanlib.ops import structural as st
from scanlib.ops.primitive import Primitive
from scanlib.tape import is_differentiable_dtype

T = sl.tensor


def _r(rng, *shape, low=-1.5, high=1.5):
    return T(rng.uniform(low, high, shape))


def _c(rng, *shape):
    return T(rng.standard_normal(shape) + 1j * rng.standard_normal(shape))


def _ties(rng):
    """Two [2, 3] tensors equal at two entries (maximum, minimum split ties)."""
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    y[0, 1], y[1, 2] = x[0, 1], x[1, 2]
    return T(x), T(y)


def _with_ties(rng):
    x = rng.standard_normal((3, 4))
    x[1, 3] = x[1, 0] = x[1].max() + 1.0  # a tie at the max of row 1
    x[2, 2] = x[2, 1] = x[2].min() - 1.0  # a tie at the min of row 2
    return T(x)


_INT = T(np.array([[1, -2, 3]]))  # an integer input: it has no tangent
_MASK = T(np.array([[True, False, True], [False, False, True]]))
_IDX = T(np.array([2, 0, 2]))  # repeats: scatter_add accumulates them

# prim -> cases, each rng -> (inputs, params). A Python number or an integer tensor among the
# inputs gets no tangent; every other input gets one, then each alone (the rest None).
CASES = {
    ew.add: [lambda r: ([_r(r, 2, 3), _r(r, 3)], {}),
             lambda r: ([_r(r, 3), _c(r, 2, 3)], {}),
             lambda r: ([T(r.standard_normal(3).astype(np.float32)), _r(r, 2, 3)], {}),
             lambda r: ([_INT, _r(r, 2, 3)], {}),
             lambda r: ([_r(r, 2, 1), 2.0], {})],
    ew.sub: [lambda r: ([_r(r, 2, 3), _r(r, 1, 3)], {}),
             lambda r: ([_c(r, 3), _r(r, 2, 3)], {}),
             lambda r: ([1.5, _r(r, 4)], {})],
    ew.neg: [lambda r: ([_r(r, 2, 3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.mul: [lambda r: ([_r(r, 2, 3), _r(r, 3)], {}),
             lambda r: ([_c(r, 3), _r(r, 2, 1)], {}),
             lambda r: ([_r(r, 2, 3), _INT], {}),
             lambda r: ([_r(r, 3), 0.5], {})],
    ew.div: [lambda r: ([_r(r, 2, 3), _r(r, 3, low=0.5, high=2)], {}),
             lambda r: ([_c(r, 2, 3), _c(r, 2, 1)], {}),
             lambda r: ([2.0, _r(r, 4, low=0.5, high=2)], {}),
             lambda r: ([_INT, _r(r, 2, 3, low=0.5)], {})],
    ew.power: [lambda r: ([_r(r, 2, 3, low=0.5, high=2), _r(r, 3)], {}),
               lambda r: ([_r(r, 3), 2], {}),
               lambda r: ([_r(r, 3), 3.0], {}),
               lambda r: ([2.0, _r(r, 2, 3)], {}),
               lambda r: ([_c(r, 3), _c(r, 3)], {})],
    ew.exp: [lambda r: ([_r(r, 2, 3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.log: [lambda r: ([_r(r, 2, 3, low=0.2, high=3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.log1p: [lambda r: ([_r(r, 2, 3, low=-0.5, high=3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.sqrt: [lambda r: ([_r(r, 2, 3, low=0.2, high=3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.sin: [lambda r: ([_r(r, 2, 3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.cos: [lambda r: ([_r(r, 2, 3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.tanh: [lambda r: ([_r(r, 2, 3)], {}), lambda r: ([_c(r, 3)], {})],
    ew.sigmoid: [lambda r: ([_r(r, 2, 3, low=-30, high=30)], {}), lambda r: ([_c(r, 3)], {})],
    ew.softplus_p: [lambda r: ([_r(r, 2, 3, low=-30, high=30)], {})],
    ew.softplus_grad_p: [lambda r: ([_r(r, 2, 3, low=-30, high=30)], {})],
    ew.relu_p: [lambda r: ([_r(r, 2, 3)], {})],
    ew.absolute: [lambda r: ([_r(r, 2, 3)], {}),
                  lambda r: ([T(np.array([0.0, 1 + 2j, -3j]))], {})],
    ew.real: [lambda r: ([_c(r, 2, 3)], {}), lambda r: ([_r(r, 3)], {})],
    ew.imag: [lambda r: ([_c(r, 2, 3)], {}), lambda r: ([_r(r, 3)], {})],
    ew.conj: [lambda r: ([_c(r, 2, 3)], {}), lambda r: ([_r(r, 3)], {})],
    ew.complex_p: [lambda r: ([_r(r, 2, 3), _r(r, 2, 3)], {}),
                   lambda r: ([_r(r, 3), _r(r, 2, 3)], {})],
    ew.maximum: [lambda r: (list(_ties(r)), {}),
                 lambda r: ([_r(r, 2, 3), 0.0], {}),
                 lambda r: ([_r(r, 3), _r(r, 2, 3)], {})],
    ew.minimum: [lambda r: (list(_ties(r)), {}),
                 lambda r: ([0.25, _r(r, 2, 3)], {}),
                 lambda r: ([_r(r, 2, 1), _r(r, 3)], {})],
    ew.where: [lambda r: ([_MASK, _r(r, 2, 3), _r(r, 3)], {}),
               lambda r: ([_MASK, _r(r, 1, 3), 0.0], {}),
               lambda r: ([_MASK, _INT, _c(r, 2, 3)], {})],
    ew.copy: [lambda r: ([_r(r, 2, 3)], {})],
    ew.checkpoint_name_p: [lambda r: ([_r(r, 2, 3)], {"name": "h"})],
    ew.scale_gradient_p: [lambda r: ([_r(r, 2, 3)], {"scale": -2.5})],
    ew.astype: [lambda r: ([_r(r, 2, 3)], {"dtype": np.dtype(np.float32)}),
                lambda r: ([_r(r, 3)], {"dtype": np.dtype(np.complex128)}),
                lambda r: ([_r(r, 3)], {"dtype": np.dtype(np.int64)})],
    ew.device_put: [lambda r: ([_r(r, 2, 3)], {"device": "cpu"})],
    st.reshape_p: [lambda r: ([_r(r, 2, 3)], {"shape": (3, 2)})],
    st.transpose_p: [lambda r: ([_r(r, 2, 3, 4)], {"axes": (2, 0, 1)})],
    st.broadcast_to_p: [lambda r: ([_c(r, 3)], {"shape": (2, 3)})],
    st.getitem_p: [lambda r: ([_r(r, 4, 3)], {"index": (slice(1, None), None)}),
                   lambda r: ([_r(r, 4, 3), _IDX], {"index": (st.Slot(0), 1)})],
    st.scatter_add_p: [lambda r: ([_r(r, 3, 2), _IDX], {"index": (st.Slot(0),),
                                                        "shape": (4, 2)})],
    st.scatter_set_p: [lambda r: ([_r(r, 4, 2), _r(r, 3, 2), _IDX],
                                  {"index": (st.Slot(0),), "unique": False}),
                       lambda r: ([_r(r, 4, 2), 0.0], {"index": (slice(1, 3),),
                                                       "unique": False})],
    st.concatenate_p: [lambda r: ([_r(r, 2, 3), _r(r, 1, 3), _c(r, 2, 3)], {"axis": 0})],
    st.split_p: [lambda r: ([_r(r, 2, 5)], {"sizes": (2, 3), "axis": 1})],
    st.stack_p: [lambda r: ([_r(r, 3), _r(r, 3)], {"axis": 1})],
    st.unstack_p: [lambda r: ([_r(r, 2, 3)], {"axis": 1})],
    st.sum_p: [lambda r: ([_r(r, 2, 3, 4)], {"axis": (0, 2), "keepdims": False}),
               lambda r: ([_c(r, 2, 3)], {"axis": None, "keepdims": True})],
    st.max_p: [lambda r: ([_with_ties(r)], {"axis": (1,), "keepdims": False}),
               lambda r: ([_with_ties(r)], {"axis": None, "keepdims": True})],
    st.min_p: [lambda r: ([_with_ties(r)], {"axis": (1,), "keepdims": True})],
    rd.cumsum_p: [lambda r: ([_r(r, 3, 4)], {"axis": 1, "reverse": True}),
                  lambda r: ([_c(r, 5)], {"axis": 0, "reverse": False})],
    la.matmul_p: [lambda r: ([_r(r, 2, 3, 4), _r(r, 4, 2)], {}),
                  lambda r: ([_c(r, 2, 3), _r(r, 3, 2)], {})],
    la.vdot_p: [lambda r: ([_r(r, 4), _r(r, 4)], {})],  # real data only (sl.vdot says so)
    la.einsum_p: [lambda r: ([_r(r, 2, 3), _r(r, 3, 4), _r(r, 4)], {"spec": "ij,jk,k->i"}),
                  lambda r: ([_c(r, 3, 4)], {"spec": "ij->j"})],
}



def _spd(rng, n):
    m = rng.standard_normal((n, n))
    return T(m @ m.T + n * np.eye(n))


def _square(rng, *shape, complex_=False):
    m = rng.standard_normal(shape) + np.eye(shape[-1]) * 3
    return T(m + 1j * rng.standard_normal(shape) if complex_ else m)


CASES.update({
    dc.inv_p: [lambda r: ([_square(r, 2, 3, 3)], {}),
               lambda r: ([_square(r, 3, 3, complex_=True)], {})],
    dc.solve_p: [lambda r: ([_square(r, 2, 3, 3), _r(r, 3, 2)], {}),
                 lambda r: ([_square(r, 3, 3, complex_=True), _c(r, 3, 1)], {})],
    dc.triangular_solve_p: [
        lambda r: ([_square(r, 3, 3), _r(r, 3, 2)], {"lower": True, "unit_diagonal": False}),
        lambda r: ([_square(r, 2, 3, 3), _r(r, 3, 1)], {"lower": False, "unit_diagonal": True}),
        lambda r: ([_square(r, 3, 3, complex_=True), _c(r, 3, 2)],
                   {"lower": True, "unit_diagonal": False})],
    dc.cholesky_p: [lambda r: ([_spd(r, 3)], {})],
    dc.lu_p: [lambda r: ([_square(r, 2, 3, 3)], {}), lambda r: ([_square(r, 4, 4)], {})],
    dc.polar_p: [lambda r: ([_square(r, 3, 3)], {}), lambda r: ([_r(r, 2, 4, 3)], {})],
    dc.slogdet_p: [lambda r: ([_square(r, 2, 3, 3)], {}),
                   lambda r: ([_square(r, 3, 3, complex_=True)], {})],
    dc.det_p: [lambda r: ([_square(r, 2, 3, 3)], {}),
               lambda r: ([_square(r, 3, 3, complex_=True)], {}),
               lambda r: ([T(np.array([[1.0, 2.0], [2.0, 4.0]]))], {})],  # singular
    sv.svd_p: [lambda r: ([_r(r, 4, 3)], {"full_matrices": False}),
               lambda r: ([_r(r, 2, 2, 3)], {"full_matrices": False}),
               lambda r: ([_r(r, 3, 3)], {"full_matrices": True})],
    sv.pinv_p: [lambda r: ([_r(r, 4, 3)], {"rtol": 1e-10}),
                lambda r: ([_r(r, 2, 2, 3)], {"rtol": 1e-10})],
    sv.eigvals_p: [lambda r: ([_square(r, 2, 3, 3)], {}),
                   lambda r: ([_square(r, 3, 3, complex_=True)], {})],
    ff.fft_p: [lambda r: ([_c(r, 3, 4)], {"inverse": False, "axes": (-1,)}),
               lambda r: ([_c(r, 3, 4)], {"inverse": True, "axes": (-2, -1)})],
    ff.rfft_p: [lambda r: ([_r(r, 3, 4)], {"axes": (-1,)}),
                lambda r: ([_r(r, 3, 5)], {"axes": (-1, -2)})],
    ff.irfft_p: [lambda r: ([_c(r, 3, 5)], {"axes": (-1,), "n": 8}),
                 lambda r: ([_c(r, 3, 5)], {"axes": (-2, -1), "n": 9})],
})

_UNIT = {"arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9), "arctanh": (-0.9, 0.9),
         "arccosh": (1.2, 3.0), "rsqrt": (0.3, 3.0), "reciprocal": (0.3, 3.0),
         "log2": (0.3, 3.0), "log10": (0.3, 3.0), "cbrt": (0.3, 3.0)}
_REAL_ONLY = {"cbrt", "erf", "erfc", "rsqrt"}
for _p in (sp.square_p, sp.expm1_p, sp.log2_p, sp.log10_p, sp.tan_p, sp.sinh_p, sp.cosh_p,
           sp.arcsin_p, sp.arccos_p, sp.arctan_p, sp.arcsinh_p, sp.arccosh_p, sp.arctanh_p,
           sp.reciprocal_p, sp.rsqrt_p, sp.cbrt_p, sp.erf_p, sp.erfc_p):
    _lo, _hi = _UNIT.get(_p.name, (-1.5, 1.5))
    CASES[_p] = [lambda r, lo=_lo, hi=_hi: ([_r(r, 2, 3, low=lo, high=hi)], {})]
    if _p.name not in _REAL_ONLY:
        CASES[_p].append(lambda r: ([T(r.uniform(0.2, 0.6, 3) + 0.3j)], {}))

# i0 and i1 (real only; 0 is where I1' is a limit), and sinc's Maclaurin terms at any order
CASES[mf.i0_p] = [lambda r: ([_r(r, 2, 3, low=-4.0, high=4.0)], {})]
CASES[mf.i1_p] = [lambda r: ([_r(r, 2, 3, low=-4.0, high=4.0)], {}),
                  lambda r: ([T(np.array([0.0, 1.0]))], {})]
CASES[mf.sinc_maclaurin_p] = [lambda r: ([_r(r, 3)], {"k": 0}), lambda r: ([_r(r, 3)], {"k": 3})]
# scanlib.random's differentiable primitives: erfinv (truncated_normal's) and the gamma draw
# (its implicit gradient in a; the key is an integer input, with no tangent)
CASES[prng.erfinv_p] = [lambda r: ([_r(r, 2, 3, low=-0.9, high=0.9)], {})]
# scipy.special's primitives; an input whose derivative is refused is mostly given as a plain
# array (no tangent: the refusals are tested in test_scipy_special_more)
_A = np.array([0.7, 2.5, 5.0])
CASES.update({
    normal.erf_inv_p: [lambda r: ([_r(r, 2, 3, low=-0.9, high=0.9)], {})],
    normal.ndtri_p: [lambda r: ([_r(r, 2, 3, low=0.05, high=0.95)], {})],
    normal.erfcx_p: [lambda r: ([_r(r, 2, 3, low=-3.0, high=5.0)], {})],
    mf.i0e_p: [lambda r: ([_r(r, 2, 3, low=-4.0, high=4.0)], {})],
    mf.i1e_p: [lambda r: ([_r(r, 2, 3, low=-4.0, high=4.0)], {}),
               lambda r: ([T(np.array([0.0, 1.0]))], {})],
    incomplete.igamma_p: [lambda r: ([_r(r, 3, low=0.5, high=4.0), _r(r, 3, low=0.2, high=5.0)],
                                     {})],
    incomplete.igammac_p: [lambda r: ([_r(r, 3, low=0.5, high=4.0), _r(r, 3, low=0.2, high=5.0)],
                                      {})],
    # no derivative: nan both ways (an error where the tape asks for it)
    incomplete.igamma_grad_a_p: [lambda r: ([T(_A), _r(r, 3, low=0.3, high=4.0)], {})],
    incomplete.betainc_p: [lambda r: ([_A, _A[::-1].copy(), _r(r, 3, low=0.1, high=0.9)], {})],
    incomplete.zeta_p: [lambda r: ([_A + 1.5, _r(r, 3, low=0.5, high=3.0)], {})],
    expint.expn_p: [lambda r: ([np.array([0.0, 1.0, 3.0]), _r(r, 3, low=0.3, high=3.0)], {})],
    expint.expi_p: [lambda r: ([_r(r, 2, 3, low=0.3, high=3.0)], {})],
})
CASES[prng_loops.gamma_p] = [
    lambda r: ([sl.random.key(3), _r(r, 2, 3, low=0.3, high=4.0)], {"log_space": False}),
    lambda r: ([sl.random.key(4), _r(r, 3, low=0.3, high=4.0)], {"log_space": True})]


def _with_rules():
    """Every primitive scanlib defines whose tangent forward mode builds from a declared
    rule or fact (not those with their own jvp: scan and custom rules are tested apart)."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "scanlib" or name.startswith("scanlib."):
            for value in vars(module).values():
                if isinstance(value, Primitive) and value.jvp is None and (
                        value.tangent is not None or value.linear or value.multilinear):
                    found[id(value)] = value
    return sorted(found.values(), key=lambda p: p.name)


def test_every_primitive_with_a_rule_has_cases():
    missing = [p.name for p in _with_rules() if p not in CASES]
    assert not missing, f"add cases to CASES for {missing}"
    assert len(_with_rules()) >= 60


def _tangent_like(x, rng):
    shape = tuple(x.shape)
    t = rng.standard_normal(shape)
    if x.dtype.kind == "c":
        t = t + 1j * rng.standard_normal(shape)
    return T(t.astype(x.dtype))


def _has_tangent(x):
    return isinstance(x, sl.Tensor) and is_differentiable_dtype(x.dtype)


def _tangent_sets(ins):
    """All inputs with tangents, then each alone (the others None)."""
    active = [i for i, x in enumerate(ins) if _has_tangent(x)]
    return [active] + ([[i] for i in active] if len(active) > 1 else [])


@pytest.mark.parametrize("prim", list(CASES), ids=lambda p: p.name)
def test_rule_agrees_with_the_transposed_vjp(prim):
    rng = np.random.default_rng(sum(map(ord, prim.name)))
    for n, case in enumerate(CASES[prim]):
        ins, params = case(rng)
        for given in _tangent_sets(ins):
            ts = [_tangent_like(x, rng) if i in given else None for i, x in enumerate(ins)]
            with np.errstate(all="ignore"):
                outs, got = forward.jvp_of(prim, ins, ts, params)
                want = forward.transposed_vjp(prim, ins, outs, ts, params)
            outs = outs if prim.multiple_results else [outs]
            assert len(got) == len(outs)
            for o, g, w in zip(outs, got, want):
                where = f"{prim.name} case {n}, tangents for inputs {given}"
                if not is_differentiable_dtype(o.dtype):
                    assert g is None, where
                    continue
                w = np.zeros(o.shape, o.dtype) if w is None else w.numpy()
                if g is None:  # a zero tangent (slogdet's real sign)
                    assert not w.any(), where
                    continue
                assert (g.shape, g.dtype) == (o.shape, o.dtype), where
                np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-12,
                                           err_msg=where)


def test_rules_keep_float32_where_the_tangents_are_float32():
    x = T(np.linspace(0.1, 1.0, 6, dtype=np.float32).reshape(2, 3))
    for f in (sl.exp, sl.tanh, sl.sigmoid, lambda x: x / (1.0 + x), lambda x: x ** 2,
              lambda x: sl.max(x, axis=1), lambda x: sl.where(x > 0.5, x, 0.0)):
        out, t = sl.jvp(f, (x,), (sl.ones_like(x),))
        assert t.dtype == np.float32 and t.shape == out.shape


def test_add_of_a_tangent_and_a_constant_broadcasts_to_the_output():
    W = T(np.ones((4, 3)))
    out, t = sl.jvp(lambda b: b + W, (T(np.arange(3.0)),), (T(np.ones(3)),))
    assert t.shape == (4, 3)
    np.testing.assert_array_equal(t.numpy(), np.ones((4, 3)))


# --- whole programs, by the rules alone ----------------------------------------------------
@pytest.fixture
def kalman():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        import kalman  # noqa: PLC0415 (an example, not a package)
    finally:
        sys.path.pop(0)
    return kalman


@pytest.fixture
def rules_only(monkeypatch):
    """Forward mode with the transposed VJP switched off: each tangent comes from a rule."""
    def refuse(prim, *args):
        raise AssertionError(f"forward mode transposed the VJP of {prim.name}")
    monkeypatch.setattr(forward, "transposed_vjp", refuse)


def _kalman_ll(kalman):
    ys = T(kalman.simulate({"rho": 0.9, "omega": 0.3, "q": 0.5, "r": 1.0}, 12, 3,
                           np.random.default_rng(0)))
    theta = kalman.to_theta({"rho": 0.8, "omega": 0.5, "q": 0.7, "r": 0.6})
    return (lambda th: kalman.log_likelihood(th, ys)), theta


def _rnn_loss(p, h0, xs):
    def body(h, x):
        h = sl.tanh(h @ p["W"] + x @ p["U"] + p["b"])
        return h, sl.sigmoid(h) * h
    h, ys = sl.scan(body, h0, xs)
    return sl.sum(ys * ys) + sl.sum(sl.exp(-h))


def _rnn_args(rng):
    p = {"W": T(rng.standard_normal((4, 4)) * 0.5), "U": T(rng.standard_normal((3, 4)) * 0.5),
         "b": T(rng.standard_normal(4) * 0.1)}
    return p, T(rng.standard_normal((2, 4))), T(rng.standard_normal((6, 2, 3)))


def _fd(f, x, t, eps=1e-6):
    """Central difference of f at x (a pytree of Tensors) in direction t."""
    shift = (lambda s: pytree.tree_map(lambda a, b: T(a.numpy() + s * b.numpy()), x, t))
    return (np.asarray(f(shift(eps))) - np.asarray(f(shift(-eps)))) / (2 * eps)


def _direction(x, rng):
    return pytree.tree_map(lambda a: T(rng.standard_normal(a.shape)), x)


def test_kalman_jvp_and_jacfwd_by_rules_match_finite_differences(kalman, rules_only):
    ll, theta = _kalman_ll(kalman)
    t = _direction(theta, np.random.default_rng(1))
    _, dll = sl.jvp(ll, (theta,), (t,))
    np.testing.assert_allclose(float(dll), _fd(lambda th: float(ll(th)), theta, t),
                               rtol=1e-6)
    jac = sl.jacfwd(ll)(theta)
    for k in theta:
        unit = {j: T(np.float64(j == k)) for j in theta}
        np.testing.assert_allclose(float(jac[k]), _fd(lambda th: float(ll(th)), theta, unit),
                                   rtol=1e-6, err_msg=k)


def test_kalman_hessian_matches_finite_differences_of_its_gradient(kalman):
    ll, theta = _kalman_ll(kalman)
    H = sl.hessian(ll)(theta)
    g = sl.grad(ll)
    for k in theta:
        unit = {j: T(np.float64(j == k)) for j in theta}
        column = _fd(lambda th: np.array([float(v) for v in g(th).values()]), theta, unit)
        np.testing.assert_allclose([float(H[j][k]) for j in theta], column, rtol=1e-5,
                                   atol=1e-6, err_msg=k)


def test_rnn_jvp_by_rules_matches_finite_differences(rules_only):
    rng = np.random.default_rng(2)
    args = _rnn_args(rng)
    ts = tuple(_direction(a, rng) for a in args)
    _, dl = sl.jvp(_rnn_loss, args, ts)
    want = _fd(lambda a: float(_rnn_loss(*a)), args, ts)
    np.testing.assert_allclose(float(dl), want, rtol=1e-6)


def test_rnn_jacfwd_and_hessian_match_jacrev_and_finite_differences(rules_only):
    rng = np.random.default_rng(3)
    p, h0, xs = _rnn_args(rng)
    f = lambda b: _rnn_loss({**p, "b": b}, h0, xs)  # noqa: E731
    np.testing.assert_allclose(sl.jacfwd(f)(p["b"]).numpy(), sl.jacrev(f)(p["b"]).numpy(),
                               rtol=1e-10)
    H = sl.hessian(f)(p["b"]).numpy()
    g = lambda b: sl.grad(f)(b).numpy()  # noqa: E731
    for i in range(4):
        e = T(np.eye(4)[i])
        np.testing.assert_allclose(H[:, i], _fd(g, p["b"], e), rtol=1e-5, atol=1e-7)


def _many_rules(x):
    """A scalar of x through most rules above (each twice differentiable at the point)."""
    y = sl.sigmoid(x) * sl.tanh(x) / (1.5 + sl.cos(x)) + sl.sqrt(sl.exp(x) + 1.0)
    z = sl.log1p(y ** 2) - sl.maximum(x, 0.3 * x[::-1]) + sl.where(x > 0, sl.sin(x), x ** 3)
    m = sl.stack([z, y]).reshape(2, 2, 2).transpose(1, 0, 2)
    return sl.sum(sl.cumsum(m, axis=2) * sl.max(m, axis=0)) + sl.sum(sl.abs(z[1:]) ** 1.5)


def test_many_rules_jacfwd_and_hessian_match_reverse_mode_and_finite_differences(rules_only):
    """jacfwd by the rules against finite differences; hessian (forward mode over the
    recorded reverse pass) and jacfwd of jacfwd against jacrev of jacrev."""
    x = T(np.array([0.3, -0.7, 1.1, 0.5]))
    np.testing.assert_allclose(sl.jacfwd(_many_rules)(x).numpy(),
                               _fd_grad(lambda a: float(_many_rules(T(a))), x.numpy()),
                               rtol=1e-6)
    H_rr = sl.jacrev(sl.jacrev(_many_rules))(x).numpy()
    np.testing.assert_allclose(sl.hessian(_many_rules)(x).numpy(), H_rr, rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(sl.jacfwd(sl.jacfwd(_many_rules))(x).numpy(), H_rr,
                               rtol=1e-10, atol=1e-12)


def _fd_grad(f, x, eps=1e-6):
    return np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))])


def test_a_named_value_has_an_unnamed_tangent():
    """checkpoint_name marks the primal for a saving policy, not its tangent (as JAX)."""
    x = T(np.array([0.5, 1.0]))
    outs, (t,) = forward.jvp_of(ew.checkpoint_name_p, [x], [T(np.ones(2))], {"name": "h"})
    graph = sl.make_graph(lambda x, t: forward.jvp_of(ew.checkpoint_name_p, [x], [t],
                                                      {"name": "h"})[1][0])(x, x)
    names = [e.prim.name for e in graph.eqns]
    assert names.count("checkpoint_name") == 1, names  # the primal's alone
    np.testing.assert_array_equal(t.numpy(), np.ones(2))
