"""Inverse trigonometric, hyperbolic and tangent functions as fixed sequences of the binary32
primitives (docs/NUMERICS.md §8, "Inverse trigonometric and hyperbolic functions"). Each is a
classic argument reduction (fdlibm's structure) onto the transcendentals of math.py and the
building blocks expm1/log1p of activations.py, with least-squares polynomials fitted in float64
against mpmath and rounded to binary32 (benchmarks/repops_fit_special.py). Special values
(+-0, +-inf, NaN, out-of-domain -> NaN) are torch's (the C library's), each by a select."""
from __future__ import annotations

import numpy as np

from . import math as M
from . import prims as P
from .activations import expm1, log1p
from .math import LN2, c, signbit

k = np.float32
NAN = k(np.nan)
TINY = k(2.0 ** -12)         # below, asinh/atanh/sinh(x) round to x (the cubic term is < 2^-25 x)
HUGE = k(2.0 ** 28)          # above, asinh/acosh(x) = log(x) + ln 2 to binary32 (the 1/x term is gone)
PIO2_HI, PIO2_LO = c(0x3FC90FDB), c(0xB33BBD2E)   # pi/2 = hi + lo
PI_HI, PI_LO = c(0x40490FDB), c(0xB3BBBD2E)       # pi = hi + lo


def _odd(x, y):
    """y (computed from |x|) with x's sign, and x itself where x is +-0 or NaN."""
    y = P.select(P.lt(x, k(0.0)), P.neg(y), y)
    return P.select(P.eq(x, k(0.0)), x, P.select(P.eq(x, x), y, x))


# -- atan, atan2 -------------------------------------------------------------------------------------------------
# atan(t) = t + t^3 P(t^2) on |t| <= 7/16, degree 6 (fit error 2e-9 relative, after rounding)
ATAN_P = [c(b) for b in (0xBD11F5B4, 0x3D8C7199, 0xBDB7A22A, 0x3DE3573F, 0xBE1247E3, 0x3E4CCCC6, 0xBEAAAAAB)]
# fdlibm's reduction of |x| >= 7/16: (lower bound, atan(C) = hi + lo) for C = 1/2, 1, 3/2, +inf
ATAN_BASE = [(k(7 / 16), c(0x3EED6338), c(0x31AC376A)), (k(11 / 16), c(0x3F490FDB), c(0xB2BBBD2E)),
             (k(19 / 16), c(0x3F7B985F), c(0xB2D7E096)), (k(39 / 16), PIO2_HI, PIO2_LO)]


def _atan_pos(a):
    """atan(a) for a >= 0 (or NaN): a < 7/16: a + a^3 P(a^2); else atan(C) + atan(t) with the
    exact reductions t = (2a - 1)/(2 + a), (a - 1)/(a + 1), (a - 1.5)/(1 + 1.5a) (numerators
    exact by Sterbenz), -1/a; hi + ((t^3 P + lo) + t)."""
    ts = [P.div(P.sub(P.add(a, a), k(1.0)), P.add(k(2.0), a)),
          P.div(P.sub(a, k(1.0)), P.add(a, k(1.0))),
          P.div(P.sub(a, k(1.5)), P.fma(k(1.5), a, k(1.0))),
          P.div(k(-1.0), a)]
    z = P.mul(a, a)
    y = P.fma(P.mul(a, z), M.horner(z, ATAN_P), a)
    for (lower, hi, lo), t in zip(ATAN_BASE, ts):
        zt = P.mul(t, t)
        piece = P.add(hi, P.add(P.fma(P.mul(t, zt), M.horner(zt, ATAN_P), lo), t))
        y = P.select(P.le(lower, a), piece, y)
    return y


def atan(x):
    """atan: odd; |x| reduced as _atan_pos; atan(+-inf) = +-pi/2 (rounded)."""
    x = P.f32(x)
    return _odd(x, _atan_pos(P.abs_(x)))


def atan2(y, x):
    """atan2(y, x) (C's): q = min/max of |y|, |x| (1 where they are equal, infinities included;
    0 where both are 0), t = atan(q); |y| <= |x|: t, or pi - t where x < 0 or x = -0;
    |y| > |x|: pi/2 - t, or pi/2 + t where x < 0 (hi/lo constants, t added to lo first);
    then y's sign (-0 included). NaN in either -> NaN."""
    y, x = P.f32(y), P.f32(x)
    ay, ax = P.abs_(y), P.abs_(x)
    big, small = P.max_(ax, ay), P.min_(ax, ay)
    q = P.select(P.eq(ax, ay), k(1.0), P.div(small, big))
    q = P.select(P.eq(big, k(0.0)), k(0.0), q)
    t = _atan_pos(q)
    west = signbit(x)
    flat = P.select(west, P.sub(PI_HI, P.sub(t, PI_LO)), t)
    steep = P.select(west, P.add(PIO2_HI, P.add(t, PIO2_LO)), P.sub(PIO2_HI, P.sub(t, PIO2_LO)))
    t = P.select(P.lt(ax, ay), steep, flat)
    return P.select(signbit(y), P.neg(t), t)


# -- asin, acos --------------------------------------------------------------------------------------------------
# asin(t) = t + t^3 P(t^2) on |t| <= 1/2, degree 6 (fit error 1.2e-10 relative, after rounding)
ASIN_P = [c(b) for b in (0x3D0DC725, 0x3BF6ED08, 0x3CC97F37, 0x3CF6B0E0, 0x3D36ED4E, 0x3D999955, 0x3E2AAAAB)]


def _asin_parts(x):
    """(|x|, asin(x) for |x| <= 1/2, s, h): for |x| > 1/2, asin(s) = s + h with
    s = sqrt((1 - |x|)/2) (exact argument, Sterbenz) and h = s^3 P(s^2) + the sqrt's residual
    (z - s^2)/(2s), so 2(s + h) = acos(|x|) = pi/2 - asin(|x|) to ~2^-30 relative."""
    a = P.abs_(x)
    z = P.mul(x, x)
    small = P.fma(P.mul(x, z), M.horner(z, ASIN_P), x)
    zb = P.mul(P.sub(k(1.0), a), k(0.5))
    s = P.sqrt(zb)
    resid = P.select(P.eq(s, k(0.0)), k(0.0), P.div(P.fma(P.neg(s), s, zb), P.add(s, s)))
    h = P.fma(P.mul(s, zb), M.horner(zb, ASIN_P), resid)
    return a, small, s, h


def asin(x):
    """asin: |x| <= 1/2: x + x^3 P(x^2); else +-(pi/2 - 2(s + h)) as hi - (2s - (lo - 2h)).
    |x| > 1 -> NaN (the sqrt of a negative); asin(+-0) = +-0."""
    x = P.f32(x)
    a, small, s, h = _asin_parts(x)
    big = P.sub(PIO2_HI, P.sub(P.add(s, s), P.sub(PIO2_LO, P.add(h, h))))
    y = P.select(P.le(a, k(0.5)), small, P.select(P.lt(x, k(0.0)), P.neg(big), big))
    return P.select(P.eq(x, x), y, x)


def acos(x):
    """acos: |x| <= 1/2: pi/2 - asin(x) as hi - (x - (lo - x^3 P)); x > 1/2: 2(s + h);
    x < -1/2: pi - 2(s + h) as hi - (2s - (lo - 2h)). |x| > 1 -> NaN; acos(1) = +0."""
    x = P.f32(x)
    a, small, s, h = _asin_parts(x)
    mid = P.sub(PIO2_HI, P.sub(x, P.sub(PIO2_LO, P.sub(small, x))))
    pos = P.mul(k(2.0), P.add(s, h))
    neg = P.sub(PI_HI, P.sub(P.add(s, s), P.sub(PI_LO, P.add(h, h))))
    y = P.select(P.le(a, k(0.5)), mid, P.select(P.lt(x, k(0.0)), neg, pos))
    return P.select(P.eq(x, x), y, x)


# -- asinh, acosh, atanh -----------------------------------------------------------------------------------------
def asinh(x):
    """asinh (fdlibm): |x| < 2^-12: x; <= 2: log1p(a + a^2/(1 + sqrt(1 + a^2))); <= 2^28:
    log(2a + 1/(sqrt(a^2 + 1) + a)); beyond: log(a) + ln2. Odd; +-inf -> +-inf."""
    x = P.f32(x)
    a = P.abs_(x)
    am = P.min_(a, HUGE)                               # (a^2 stays finite)
    root = P.sqrt(P.fma(am, am, k(1.0)))
    small = log1p(P.add(am, P.div(P.mul(am, am), P.add(k(1.0), root))))
    mid = M.log(P.add(P.add(am, am), P.div(k(1.0), P.add(root, am))))
    big = P.add(M.log(a), LN2)
    y = P.select(P.le(a, k(2.0)), small, P.select(P.le(a, HUGE), mid, big))
    return _odd(x, P.select(P.lt(a, TINY), a, y))


def acosh(x):
    """acosh (fdlibm): x < 1 -> NaN; t = x - 1 (exact) for x <= 2: log1p(t + sqrt(2t + t^2));
    <= 2^28: log(2x - 1/(x + sqrt(x^2 - 1))); beyond: log(x) + ln2. acosh(1) = +0."""
    x = P.f32(x)
    xm = P.min_(x, HUGE)
    t = P.sub(xm, k(1.0))
    small = log1p(P.add(t, P.sqrt(P.fma(t, t, P.add(t, t)))))
    mid = M.log(P.sub(P.add(xm, xm), P.div(k(1.0), P.add(xm, P.sqrt(P.fma(xm, xm, k(-1.0)))))))
    big = P.add(M.log(x), LN2)
    y = P.select(P.le(x, k(2.0)), small, P.select(P.le(x, HUGE), mid, big))
    y = P.select(P.lt(x, k(1.0)), NAN, y)
    return P.select(P.eq(x, x), y, x)


def atanh(x):
    """atanh (fdlibm): |x| < 2^-12: x; < 1/2: log1p(2a + 2a a/(1 - a))/2; else
    log1p(2a/(1 - a))/2. Odd; +-1 -> +-inf; |x| > 1 -> NaN."""
    x = P.f32(x)
    a = P.abs_(x)
    two_a = P.add(a, a)
    one_minus = P.sub(k(1.0), a)
    small = log1p(P.fma(two_a, P.div(a, one_minus), two_a))
    big = log1p(P.div(two_a, one_minus))
    y = P.mul(k(0.5), P.select(P.lt(a, k(0.5)), small, big))
    y = P.select(P.lt(k(1.0), a), NAN, y)
    return _odd(x, P.select(P.lt(a, TINY), a, y))


# -- sinh, cosh, tan ---------------------------------------------------------------------------------------------
HYP_MID = k(22.0)            # beyond, e^-|x| < 2^-63 e^|x|: sinh = cosh = exp(|x|)/2 to binary32
HALF_LN2 = c(0x3EB17218)     # ln2 / 2


def _exp_half(a):
    """exp(a)/2 for a >= 22: exp(a)/2 below M.EXP_OVER (where exp overflows), (exp(a/2)/2) exp(a/2)
    beyond (a/2 exact), so results up to FLT_MAX stay finite."""
    w = M.exp(P.mul(a, k(0.5)))
    return P.select(P.lt(a, M.EXP_OVER), P.mul(k(0.5), M.exp(P.min_(a, M.EXP_OVER))), P.mul(P.mul(k(0.5), w), w))


def sinh(x):
    """sinh (fdlibm): t = expm1(a), a = |x|: a < 2^-12: x; a < 1: (2t - t^2/(t + 1))/2;
    a < 22: (t + t/(t + 1))/2; beyond: exp(a)/2 (_exp_half). Odd; +-inf -> +-inf."""
    x = P.f32(x)
    a = P.abs_(x)
    t = expm1(P.min_(a, HYP_MID))
    t1 = P.add(t, k(1.0))
    small = P.mul(k(0.5), P.sub(P.add(t, t), P.div(P.mul(t, t), t1)))
    mid = P.mul(k(0.5), P.add(t, P.div(t, t1)))
    y = P.select(P.lt(a, k(1.0)), small, P.select(P.lt(a, HYP_MID), mid, _exp_half(a)))
    return _odd(x, P.select(P.lt(a, TINY), a, y))


def cosh(x):
    """cosh (fdlibm): a = |x| < ln2/2: 1 + t^2/(2(1 + t)), t = expm1(a); < 22: e/2 + (1/2)/e,
    e = exp(a); beyond: exp(a)/2 (_exp_half). Even; +-inf -> +inf."""
    x = P.f32(x)
    a = P.abs_(x)
    t = expm1(P.min_(a, HALF_LN2))
    w = P.add(k(1.0), t)
    small = P.add(k(1.0), P.div(P.mul(t, t), P.add(w, w)))
    e = M.exp(P.min_(a, HYP_MID))
    mid = P.add(P.mul(k(0.5), e), P.div(k(0.5), e))
    y = P.select(P.lt(a, HALF_LN2), small, P.select(P.lt(a, HYP_MID), mid, _exp_half(a)))
    return P.select(P.eq(x, x), y, x)


def tan(x):
    """tan = sin/cos (math.py: accurate for every finite x);
    tan(+-0) = +-0, tan(+-inf) = NaN."""
    x = P.f32(x)
    s, co = M.sin(x), M.cos(x)                         # (each one fused kernel on a backend)
    return P.select(P.eq(x, k(0.0)), x, P.div(s, co))
