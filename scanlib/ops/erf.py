"""The numerics of erf and erfc on raw arrays: the rational approximations of fdlibm's s_erf.c
(its coefficients, with Sun's notice) evaluated branch-free for whole arrays, and the scaled
erfcx(x) = exp(x*x) erfc(x) from the same tail. The primitives and their VJPs are in
ops.special and ops.normal.

Imports backends only.
"""

from __future__ import annotations

import numpy as np

from .. import backends


_xp = backends.xp_of  # the array namespace of the data (numpy or cupy)


# The rational approximations of FreeBSD's msun s_erf.c (fdlibm; Copyright (C) 1993 by Sun
# Microsystems, Inc.: "Permission to use, copy, modify, and distribute this software is freely
# granted, provided that this notice is preserved."), evaluated for whole arrays: every branch
# is computed on inputs clamped into its interval and the right one is selected. Error below
# 1 ulp in float64; other float dtypes are computed in float64 and rounded once.
_ERX = 8.45062911510467529297e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
       5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
       7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02,
       1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
       4.34565877475229228821e+02, 6.45387271733267880336e+02, 4.29008140027567833386e+02,
       1.08635005541779435134e+02, 6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
       1.53672958608443695994e+03, 3.19985821950859553908e+03, 2.55305040643316442583e+03,
       4.74528541206955367215e+02, -2.24409524465858183362e+01)


def horner(z, coeffs):
    """coeffs[0] + coeffs[1] z + ... by Horner's rule."""
    acc = coeffs[-1]
    for c in coeffs[-2::-1]:
        acc = acc * z + c
    return acc


def _small_ratio(x, xp):
    """R(x**2) / S(x**2) for |x| < 0.84375, where erf(x) = x + x * ratio."""
    x = xp.where(xp.abs(x) < 0.84375, x, 0.0)
    z = x * x
    return horner(z, _PP) / horner(z, _QQ)


def _middle(a, xp):
    """erf(a) - erx for a in [0.84375, 1.25)."""
    s = xp.clip(a, 0.84375, 1.25) - 1.0
    return horner(s, _PA) / horner(s, _QA)


def _tail_ratio(a, xp):
    """R/S of the tail, for a in [1.25, 28]: erfc(a) = exp(-a*a - 0.5625 + R/S) / a."""
    s = 1.0 / (a * a)
    return xp.where(a < 1 / 0.35, horner(s, _RA) / horner(s, _SA), horner(s, _RB) / horner(s, _SB))


def _tail(a, xp):
    """erfc(a) for a in [1.25, 28]: exp(-a*a - 0.5625 + R/S) / a, with -a*a split as
    -z*z + (z - a)(z + a) for a short z, so that the large part of the exponent is exact."""
    a = xp.clip(a, 1.25, 28.0)
    rs = _tail_ratio(a, xp)
    z = a.astype(np.float32).astype(np.float64)  # 24 bits: z * z is exact in float64
    return xp.exp(-z * z - 0.5625) * xp.exp((z - a) * (z + a) + rs) / a


def _as_float64(x):
    x = _xp(x).asarray(x)
    if x.dtype.kind == "c":  # the public functions refuse it first; a direct bind lands here
        raise TypeError(f"erf/erfc are defined for real input only, got {x.dtype}")
    return x.astype(np.float64)


def _result(out, x, xp):
    """out (float64) in the float dtype of x (float64 for integer and bool input)."""
    x = xp.asarray(x)
    return xp.asarray(out if x.dtype.kind != "f" else out.astype(x.dtype, copy=False))


def erf_impl(x):
    xp = _xp(x)
    v = _as_float64(x)
    a = xp.abs(v)
    with np.errstate(all="ignore"):  # branches not selected may overflow; their values unused
        small = v + v * _small_ratio(v, xp)
        large = xp.where(a < 1.25, _ERX + _middle(a, xp), xp.where(a < 6.0, 1.0 - _tail(a, xp),
                                                                    1.0))
        out = xp.where(a < 0.84375, small, xp.copysign(large, v))
    return _result(xp.where(xp.isnan(v), v, out), x, xp)


def erfc_impl(x):
    xp = _xp(x)
    v = _as_float64(x)
    a = xp.abs(v)
    with np.errstate(all="ignore"):
        xy = v * _small_ratio(v, xp)
        small = xp.where(v < 0.25, 1.0 - (v + xy), 0.5 - (xy + (v - 0.5)))
        mid = _middle(a, xp)
        mid = xp.where(v > 0, (1.0 - _ERX) - mid, 1.0 + (_ERX + mid))
        tail = xp.where(a < 28.0, _tail(a, xp), 0.0)
        tail = xp.where(v > 0, tail, 2.0 - tail)
        out = xp.where(a < 0.84375, small, xp.where(a < 1.25, mid, tail))
    return _result(xp.where(xp.isnan(v), v, out), x, xp)


# exp(x*x) erfc(x) for x >= 28: the asymptotic series 1 / (x sqrt(pi)) sum (-1)^k (2k-1)!! /
# (2 x*x)^k, whose eighth term is below 1e-16 there.
_ASYMPTOTIC = (1.0, -0.5, 0.75, -1.875, 6.5625, -29.53125, 162.421875, -1055.7421875)


def erfcx_impl(x):
    """exp(x*x) erfc(x), without overflow or underflow where the result is finite: in the
    tail erfc's own exponent, exp(-a*a - 0.5625 + R/S), meets exp(a*a) exactly."""
    xp = _xp(x)
    v = _as_float64(x)
    with np.errstate(all="ignore"):
        a = xp.clip(v, 1.25, 28.0)
        tail = xp.exp(_tail_ratio(a, xp) - 0.5625) / a
        w = xp.where(v >= 28.0, v, 28.0)
        far = horner(1.0 / (w * w), _ASYMPTOTIC) / (w * 1.7724538509055160273)
        near = xp.exp(v * v) * erfc_impl(xp.where(v < 1.25, v, 0.0))
        out = xp.where(v < 1.25, near, xp.where(v < 28.0, tail, far))
    return _result(xp.where(xp.isnan(v), v, out), x, xp)
