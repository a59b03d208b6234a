"""Bessel functions as fixed sequences of the binary32 primitives (docs/NUMERICS.md §8, "Inverse
trigonometric, hyperbolic and special functions"): modified I0, I1, K0, K1 (and exponentially
scaled), J0, J1, Y0, Y1, spherical j0. Power series where all terms are positive, the log-series
forms of K and Y near 0, fitted asymptotic forms (Hankel's for J, Y) beyond; polynomials are
least-squares fits in float64 against mpmath rounded to binary32 (benchmarks/repops_fit_special.py).
Special values are torch's."""
from __future__ import annotations

import math

import numpy as np

from . import math as M
from . import prims as P
from .math import c
from .trig import PI_HI

k = np.float32
NAN, INF = k(np.nan), k(np.inf)


# -- modified Bessel functions I0, I1 (and exponentially scaled) --------------------------------------------------
# |x| <= 8: the power series in z = (x/2)^2 (all terms positive: no cancellation), 1/(k! (k+nu)!)
# rounded once from double, 20 terms (truncation < 1e-13 relative at z = 16);
# |x| > 8: sqrt(|x|) e^-|x| I_nu(|x|) = Q_nu(1/|x|), degree 7 (fit error 1.1e-8 absolute, values ~0.4)
BESSEL_TERMS = 20
I0_SERIES = [k(1 / (math.factorial(j) ** 2)) for j in range(BESSEL_TERMS - 1, -1, -1)]
I1_SERIES = [k(1 / (math.factorial(j) * math.factorial(j + 1))) for j in range(BESSEL_TERMS - 1, -1, -1)]
BESSEL_I0E = [c(b) for b in (0x4107CE66, 0xBFF1EF40, 0x3EAB6882, 0x3CF88B75, 0x3CF2FE6F, 0x3CE5BCBD, 0x3D4C4233,
                             0x3ECC422A)]
BESSEL_I1E = [c(b) for b in (0xC119A652, 0x40091AB3, 0xBEC869BC, 0xBD271479, 0xBD29B06E, 0xBD3F75DE, 0xBE1931A2,
                             0x3ECC422A)]
BESSEL_MID = k(8.0)


def _i_series(nu: int, a):
    """I_nu(a) for 0 <= a <= 8 (a clamped to 8): the power series in z = (a/2)^2."""
    h = P.mul(P.min_(a, BESSEL_MID), k(0.5))
    z = P.mul(h, h)
    return M.horner(z, I0_SERIES) if nu == 0 else P.mul(h, M.horner(z, I1_SERIES))


def _bessel(nu: int, scaled: bool, x):
    """I_nu(x) or e^-|x| I_nu(x): near: series (times exp(-|x|) when scaled); far: Q(1/|x|)/sqrt|x|
    (times exp(|x|) unscaled, as exp(|x|/2)^2 in two steps so results up to FLT_MAX stay finite).
    I1 is odd (but I1(-0) = +0, torch's); NaN -> NaN."""
    x = P.f32(x)
    a = P.abs_(x)
    near = _i_series(nu, a)
    far = M.horner(P.div(k(1.0), P.max_(a, BESSEL_MID)), BESSEL_I0E if nu == 0 else BESSEL_I1E)
    far = P.div(far, P.sqrt(a))
    if scaled:
        near = P.mul(near, M.exp(P.neg(a)))
    else:
        half = M.exp(P.mul(a, k(0.5)))
        far = P.mul(P.mul(far, half), half)
    y = P.select(P.le(a, BESSEL_MID), near, far)
    if nu == 1:
        y = P.select(P.lt(x, k(0.0)), P.neg(y), y)     # (I1(-0) = +0, as torch)
    return P.select(P.eq(x, x), y, x)


def i0(x):
    return _bessel(0, False, x)


def i0e(x):
    return _bessel(0, True, x)


def i1(x):
    return _bessel(1, False, x)


def i1e(x):
    return _bessel(1, True, x)


# -- spherical Bessel j0 ---------------------------------------------------------------------------------------------
J0_TAYLOR = [k(v) for v in (1 / 6227020800, -1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6)]


def spherical_bessel_j0(x):
    """sin(x)/x (torch's formula): |x| < 1/2: 1 + x^2 T(x^2) (Taylor to x^12, fma Horner);
    else sin(x)/x with math.py's sin (its accurate range); +-inf -> 0."""
    x = P.f32(x)
    z = P.mul(x, x)
    small = P.fma(z, M.horner(z, J0_TAYLOR), k(1.0))
    y = P.select(P.lt(P.abs_(x), k(0.5)), small, P.div(M.sin(x), x))
    y = P.select(P.eq(P.abs_(x), INF), k(0.0), y)
    return P.select(P.eq(x, x), y, x)


# -- modified Bessel functions K0, K1 (and exponentially scaled) -------------------------------------------------
# x <= 1: K0 = F0(x^2) - log(x/2) I0(x), K1 = 1/x + log(x/2) I1(x) + x F1(x^2) (F analytic in x^2:
# the series' harmonic-number parts; degrees 4 / 5, fit errors 6.9e-9 / 4.1e-10 absolute);
# x > 1: sqrt(x) e^x K_nu(x) = R_nu(1/x) (degree 10, 1.2e-8 relative)
BESSEL_K0F = [c(b) for b in (0x373046F5, 0x3A0ED9CE, 0x3C6C3BFB, 0x3DD8772F, 0xBF13C468)]
BESSEL_K1F = [c(b) for b in (0xB23123CA, 0xB5922994, 0xB89D2408, 0xBB39EED7, 0xBD2C3B98, 0x3D1E233F)]
BESSEL_K0E = [c(b) for b in (0x3C119E75, 0xBD565C0F, 0x3E0C8B3D, 0xBE5B2A98, 0x3E67C6CF, 0xBE38CBEB, 0x3DFE84B3,
                             0xBDB8A15A, 0x3DB44AA3, 0xBE206C11, 0x3FA06C99)]
BESSEL_K1E = [c(b) for b in (0xBC3935B4, 0x3D878C93, 0xBE30D42F, 0x3E8960D9, 0xBE915449, 0x3E69FBE4, 0xBE261CA1,
                             0x3E01B665, 0xBE164BB7, 0x3EF0A29D, 0x3FA06C99)]
BESSEL_K_MID = k(1.0)


def _bessel_k(nu: int, scaled: bool, x):
    """K_nu(x) or e^x K_nu(x), x >= 0 (torch's): x <= 1: the log-series form (times exp(x) when
    scaled); beyond: R(1/x)/sqrt(x) (times exp(-x) unscaled). +-0 -> +inf, x < 0 -> NaN, +inf -> 0."""
    x = P.f32(x)
    xs = P.min_(P.max_(x, k(2.0 ** -149)), BESSEL_K_MID)      # (the small-x form on (0, 1])
    i_near = _i_series(nu, xs)
    lg = M.log(P.mul(xs, k(0.5)))
    z = P.mul(xs, xs)
    if nu == 0:
        near = P.sub(M.horner(z, BESSEL_K0F), P.mul(lg, i_near))
    else:
        near = P.add(P.div(k(1.0), xs), P.fma(lg, i_near, P.mul(xs, M.horner(z, BESSEL_K1F))))
    xl = P.max_(x, BESSEL_K_MID)
    far = P.div(M.horner(P.div(k(1.0), xl), BESSEL_K0E if nu == 0 else BESSEL_K1E), P.sqrt(xl))
    if scaled:
        near = P.mul(near, M.exp(xs))
    else:
        far = P.mul(far, M.exp(P.neg(xl)))
    y = P.select(P.le(x, BESSEL_K_MID), near, far)
    y = P.select(P.eq(x, k(0.0)), INF, P.select(P.lt(x, k(0.0)), NAN, y))
    return P.select(P.eq(x, x), y, x)


def k0(x):
    return _bessel_k(0, False, x)


def k0e(x):
    return _bessel_k(0, True, x)


def k1(x):
    return _bessel_k(1, False, x)


def k1e(x):
    return _bessel_k(1, True, x)


# -- Bessel functions of the first and second kind, J0, J1, Y0, Y1 -------------------------------------------------
# |x| <= 5/2: J0 = (x - j01)(x + j01) RJ0(x^2), J1 = x (x - j11)(x + j11) RJ1(x^2) (j_nu1 the first
# zero in two parts, so the result keeps relative accuracy next to it; fit errors 1.3e-8 / 3.8e-8
# relative), Y0 = (2/pi) log(x) J0 + RY0(x^2), Y1 = (2/pi)(J1 log x - 1/x) + x RY1(x^2) (2.3e-8 /
# 5.5e-9 absolute); |x| > 5/2: Hankel's form with P(u), x Q(u), u = 25/x^2 (degree 10, <= 2.5e-8).
BESSEL_RJ = {0: [c(b) for b in (0xAC177844, 0x2FFA8027, 0xB38BF086, 0x36D6E887, 0xB9D022CA, 0x3C5A627E, 0xBE3110A6)],
             1: [c(b) for b in (0xAA14C47F, 0x2E0A51E2, 0xB1B24144, 0x352198A6, 0xB83E7C00, 0x3AFDEFD8, 0xBD0B7DA6)]}
BESSEL_RY = {0: [c(b) for b in (0xB03BDE72, 0x33DCE42D, 0xB71F3F9B, 0x3A0D3091, 0xBC83AD8A, 0x3E35DE5A, 0xBD9726B5)],
             1: [c(b) for b in (0xAE601C96, 0x3218A574, 0xB585353D, 0x38963EA5, 0xBB41ADCA, 0x3D5E9CBB, 0xBE48C331)]}
BESSEL_P = {0: [c(b) for b in (0x2F9AC3E2, 0xB1DF654E, 0x338EAB69, 0xB4D68C7A, 0x35D7968E, 0xB6A059B0, 0x374D0777,
                               0xB814A649, 0x393BE6CA, 0xBB385191, 0x3F800000)],
            1: [c(b) for b in (0xAFAC9A19, 0x31F935A9, 0xB39F4184, 0x34EFCFCD, 0xB5F1A762, 0x36B4DC44, 0xB76AA61F,
                               0x38301E15, 0xB971A319, 0x3B999968, 0x3F800000)]}
BESSEL_Q = {0: [c(b) for b in (0xB0AEE2F8, 0x32FAC99D, 0xB49E91EA, 0x35EAA633, 0xB6E54CC0, 0x37A1D570, 0xB83A3108,
                               0x38DAB5DD, 0xB9BDD8C6, 0x3B3FFE33, 0xBE000000)],
            1: [c(b) for b in (0x30C2723A, 0xB30B6621, 0x34B04CCF, 0xB60285E0, 0x36FF8681, 0xB7B51740, 0x385273C1,
                               0xB8FD3AE9, 0x39E81FF0, 0xBB86656C, 0x3EC00000)]}
BESSEL_ZERO = {0: (c(0x4019E8A9), c(0x33E971B4)), 1: (c(0x40753AAC), c(0xB3A5090F))}
BESSEL_JY_MID = k(2.5)


def _bessel_j_near(nu: int, a):
    hi, lo = BESSEL_ZERO[nu]
    r = P.mul(P.mul(P.sub(P.sub(a, hi), lo), P.add(a, hi)), M.horner(P.mul(a, a), BESSEL_RJ[nu]))
    return P.mul(a, r) if nu else r


def _hankel(nu: int, a):
    """(J_nu(a), Y_nu(a)) for a > 5/2: chi = a - (2nu + 1) pi/4 expanded with sin a, cos a of
    the shared reduction, so J0 = ((P + Q) c + (P - Q) s)/sqrt(pi a), Y0 = ((P + Q) s - (P - Q) c)/..,
    J1 = ((P + Q) s - (P - Q) c)/.., Y1 = -((P - Q) s + (P + Q) c)/.."""
    u = P.div(k(25.0), P.mul(a, a))
    p = M.horner(u, BESSEL_P[nu])
    q = P.div(M.horner(u, BESSEL_Q[nu]), a)
    s, co = M.sin(a), M.cos(a)
    plus, minus = P.add(p, q), P.sub(p, q)
    root = P.sqrt(P.mul(PI_HI, a))
    if nu == 0:
        j = P.add(P.mul(plus, co), P.mul(minus, s))
        y = P.sub(P.mul(plus, s), P.mul(minus, co))
    else:
        j = P.sub(P.mul(plus, s), P.mul(minus, co))
        y = P.neg(P.add(P.mul(minus, s), P.mul(plus, co)))
    return P.div(j, root), P.div(y, root)


def bessel_j(nu: int, x):
    """J0 (even; 1 - x^2/4 below 1e-5, as torch) or J1 (odd; J1(-0) = -0); +-inf -> NaN (torch's)."""
    x = P.f32(x)
    a = P.abs_(x)
    near = _bessel_j_near(nu, P.min_(a, BESSEL_JY_MID))
    far, _ = _hankel(nu, P.max_(a, BESSEL_JY_MID))
    y = P.select(P.le(a, BESSEL_JY_MID), near, far)
    if nu == 0:                                        # torch's 1 - x^2/4 below 1e-5 (J0(0) = 1 exactly)
        y = P.select(P.lt(a, k(1e-5)), P.sub(k(1.0), P.mul(P.mul(x, x), k(0.25))), y)
    if nu == 1:
        y = P.select(P.lt(x, k(0.0)), P.neg(y), y)
        y = P.select(P.eq(x, k(0.0)), x, y)
    y = P.select(P.eq(a, INF), NAN, y)
    return P.select(P.eq(x, x), y, x)


def bessel_y(nu: int, x):
    """Y0 or Y1 for x > 0; +-0 -> -inf, x < 0 -> NaN, +inf -> NaN (torch's)."""
    x = P.f32(x)
    xs = P.min_(P.max_(x, k(2.0 ** -149)), BESSEL_JY_MID)
    z = P.mul(xs, xs)
    lg = P.mul(M.TWO_OVER_PI, M.log(xs))
    j = _bessel_j_near(nu, xs)
    if nu == 0:
        near = P.fma(lg, j, M.horner(z, BESSEL_RY[0]))
    else:
        near = P.fma(xs, M.horner(z, BESSEL_RY[1]), P.sub(P.mul(lg, j), P.div(M.TWO_OVER_PI, xs)))
    _, far = _hankel(nu, P.max_(x, BESSEL_JY_MID))
    y = P.select(P.le(x, BESSEL_JY_MID), near, far)
    y = P.select(P.eq(x, k(0.0)), k(-np.inf), P.select(P.lt(x, k(0.0)), NAN, y))
    y = P.select(P.eq(x, INF), NAN, y)
    return P.select(P.eq(x, x), y, x)


def j0(x):
    return bessel_j(0, x)


def j1(x):
    return bessel_j(1, x)


def y0(x):
    return bessel_y(0, x)


def y1(x):
    return bessel_y(1, x)
