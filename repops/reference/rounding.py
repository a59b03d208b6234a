"""Rounding, remainders, IEEE bit-level functions and the base-2/base-10 logarithms and powers
as compositions of the binary32 primitives (docs/NUMERICS.md §8, "Rounding, remainders, IEEE
functions and logarithms"). The exact functions (floor, ceil, fmod, nextafter, frexp, ...) give torch's
bits; the others follow torch's CPU formula in its order. No new primitive: every step is
one of §4's, so each is settleable as it stands.
"""
from __future__ import annotations

import numpy as np

from . import math as M
from . import prims as P
from .math import LN2, signbit

F32 = np.float32
INF = F32(np.inf)
TINY = M.c(0x00000001)       # 2^-149, the least subnormal
FLT_MAX = M.c(0x7F7FFFFF)


def k(v) -> np.float32:
    """A Python number as a binary32 constant (rounded once)."""
    return F32(v)


ONE, ZERO = k(1.0), k(0.0)


def _all(*conds):
    """The conjunction of comparison results, by selects of 1/0 and one eq (bool operands are
    comparisons' outputs; select and eq are the primitives that combine them)."""
    flag = P.select(conds[-1], ONE, ZERO)
    for c in reversed(conds[:-1]):
        flag = P.select(c, flag, ZERO)
    return P.eq(flag, ONE)


def _signs_differ(m, y):
    """m != 0 and (m < 0) != (y < 0): torch's fix-up test (false for m = +-0)."""
    return P.eq(P.select(P.lt(m, ZERO), P.select(P.lt(y, ZERO), ZERO, ONE),
                         P.select(P.lt(ZERO, m), P.select(P.lt(y, ZERO), ONE, ZERO), ZERO)), ONE)


# -- rounding to an integral value (exact) ------------------------------------------------------------
def ceil(x):
    """-floor(-x): exact, and the sign of a zero result is ceil's (ceil(-0.5) = -0)."""
    return P.neg(P.floor(P.neg(x)))


def round_decimals(x, decimals: int):
    """torch's CPU kernel: d > 0: rint(x RN(10^d)) / RN(10^d); d < 0: rint(x / RN(10^-d)) RN(10^-d)
    (10^|d| rounded once to binary32: inf from 10^39 on, as torch's float cast)."""
    ten = F32(float(10 ** abs(decimals))) if abs(decimals) <= 38 else INF  # (10^39 rounds to inf)
    if decimals == 0:
        return P.rint(x)
    if decimals > 0:
        return P.div(P.rint(P.mul(x, ten)), ten)
    return P.mul(P.rint(P.div(x, ten)), ten)


# -- remainders (exact) ---------------------------------------------------------------------------------
# fmod(x, y) = x - trunc(x/y) y exactly (always a binary32). |x| is reduced modulo |y| 2^s for
# s = 264, 240, ..., 24, 0 (|x| / |y| < 2^277 for every finite pair, so before the step at s,
# |x| < |y| 2^(s+24)): where t = |y| 2^s <= |x| (else the step is skipped: t may be inf),
# q = trunc(|x| / t) < 2^24 is floor(|x|/t) or one more (RN is monotonic and both integers are
# binary32), and r = fma(-q, t, |x|) is exact: a multiple of ulp(t) <= ulp(|x|) with |r| < t;
# r < 0 (q one too many) is fixed by r + t, exact for the same reason. Afterwards |x| < |y|.
FMOD_STEPS = tuple(range(264, -1, -24))


def _mod_magnitude(ax, ay):
    """|x| mod |y| in [0, |y|) for finite |x|, nonzero |y| (other lanes compute garbage that
    fmod's selects replace)."""
    r = ax
    for s in FMOD_STEPS:
        t = P.ldexp(ay, P.const(s, np.shape(ay), np.int32)) if s else ay
        q = P.trunc(P.div(r, t))
        d = P.fma(P.neg(q), t, r)
        d = P.select(P.lt(d, k(0.0)), P.add(d, t), d)
        r = P.select(P.le(t, r), d, r)
    return r


def fmod(x, y):
    """C's fmod, exact: the sign of x (fmod(-0, y) = -0), NaN for y = 0, x = +-inf or NaN in
    either, x itself for y = +-inf."""
    x, y = np.broadcast_arrays(P.f32(x), P.f32(y))
    ax, ay = P.abs_(x), P.abs_(y)
    r = _mod_magnitude(ax, ay)
    r = P.select(P.lt(x, k(0.0)), P.neg(r), r)
    r = P.select(P.eq(ax, k(0.0)), x, r)                      # +-0 keeps its sign
    r = P.select(P.eq(ay, INF), x, r)                          # finite x mod inf = x
    r = P.select(P.eq(ay, ZERO), k(np.nan), P.select(P.eq(ax, INF), k(np.nan), r))
    return P.select(P.eq(x, x), P.select(P.eq(y, y), r, y), x)


def remainder(x, y):
    """torch's remainder (Python's %): m = fmod(x, y); m + y where m != 0 and its sign differs
    from y's (one rounded add, as torch's CPU kernel); m's zero keeps x's sign."""
    m = fmod(x, y)
    return P.select(_signs_differ(m, y), P.add(m, y), m)


def div_trunc(x, y):
    """trunc(x / y)."""
    return P.trunc(P.div(x, y))


def div_floor(x, y):
    """torch's floor division (c10::div_floor_floating, Python's //): y = 0: x / y; else
    m = fmod(x, y); q = (x - m) / y, minus 1 where m != 0 and sign(m) != sign(y); f = floor(q),
    plus 1 where q - f > 0.5; a zero q takes the sign of x / y."""
    m = fmod(x, y)
    q = P.div(P.sub(x, m), y)
    q = P.select(_signs_differ(m, y), P.sub(q, k(1.0)), q)
    f = P.floor(q)
    f = P.select(P.lt(k(0.5), P.sub(q, f)), P.add(f, k(1.0)), f)
    quotient = P.div(x, y)
    f = P.select(P.eq(q, k(0.0)), P.select(signbit(quotient), k(-0.0), k(0.0)), f)
    return P.select(P.eq(y, k(0.0)), quotient, f)


# -- IEEE functions ------------------------------------------------------------------------------------
def fmax(a, b):
    """C's fmax as glibc computes it (torch's CPU kernel): (a >= b or b is NaN) ? a : b.
    NaN only when both are; fmax(-0, +0) = -0, fmax(+0, -0) = +0 (the first)."""
    return P.select(P.le(b, a), a, P.select(P.eq(b, b), b, a))


def fmin(a, b):
    """(a <= b or b is NaN) ? a : b (glibc's fmin)."""
    return P.select(P.le(a, b), a, P.select(P.eq(b, b), b, a))


def _exponent(a):
    """For finite a > 0: (m, e) with a = m 2^e, m in [1, 2), e an integral binary32 (frexp1);
    other lanes read 1."""
    safe = P.select(P.lt(k(0.0), a), P.select(P.lt(a, INF), a, k(1.0)), k(1.0))
    return M.frexp1(safe)


def _pow2(e):
    """2^e for an integral binary32 e in [-149, 127], exact (ldexp of 1)."""
    return P.ldexp(P.const(1.0, np.shape(e)), P.to_int32_rne(e))


def nextafter(x, y):
    """The binary32 after x toward y (exact): x = y: y; x = 0: +-2^-149 (y's side); |x| = inf:
    +-FLT_MAX; else |x| +- ulp, the ulp below a power of two being half the one above
    (2^(max(e, -126) - 23), from frexp1). NaN in either: NaN."""
    x, y = np.broadcast_arrays(P.f32(x), P.f32(y))
    a = P.abs_(x)
    m, e = _exponent(a)
    e = P.max_(e, k(-126.0))
    up = _pow2(P.sub(e, k(23.0)))
    down = P.select(_all(P.eq(m, ONE), P.lt(k(-126.0), e)), _pow2(P.sub(e, k(24.0))), up)  # a = 2^e > 2^-126
    away = P.select(P.lt(x, ZERO), P.select(P.lt(y, x), ONE, ZERO), P.select(P.lt(x, y), ONE, ZERO))
    mag = P.select(P.eq(away, ONE), P.add(a, up), P.sub(a, down))   # (away: toward a larger magnitude)
    mag = P.select(P.eq(a, INF), FLT_MAX, mag)
    r = P.select(P.lt(x, k(0.0)), P.neg(mag), mag)
    r = P.select(P.eq(a, k(0.0)), P.select(P.lt(x, y), TINY, -TINY), r)
    r = P.select(P.eq(x, y), y, r)
    return P.select(P.eq(x, x), P.select(P.eq(y, y), r, y), x)


def frexp(x):
    """(mantissa, exponent) with x = mantissa 2^exponent, |mantissa| in [0.5, 1) with x's sign,
    exponent an int32 (to_int32_rne of frexp1's e + 1); x = +-0, +-inf, NaN: (x, 0)."""
    x = P.f32(x)
    a = P.abs_(x)
    m, e = _exponent(a)
    half = P.mul(m, k(0.5))
    finite = _all(P.lt(ZERO, a), P.lt(a, INF))
    mant = P.select(finite, P.select(P.lt(x, k(0.0)), P.neg(half), half), x)
    return mant, P.to_int32_rne(P.select(finite, P.add(e, k(1.0)), k(0.0)))


def hypot(x, y):
    """sqrt(x^2 + y^2) without overflow or underflow: a = max(|x|, |y|) = m 2^e (frexp1),
    b = min; with a' = a 2^-e in [1, 2) and b' = b 2^-e: ldexp(sqrt(fma(a', a', b' b')), e).
    +-inf in either: +inf (even with NaN, C's rule); else NaN in either: NaN; 0 and 0: +0."""
    ax, ay = P.abs_(P.f32(x)), P.abs_(P.f32(y))
    a, b = P.max_(ax, ay), P.min_(ax, ay)
    _, e = _exponent(a)
    n = P.to_int32_rne(P.neg(e))
    a1, b1 = P.ldexp(a, n), P.ldexp(b, n)
    h = P.ldexp(P.sqrt(P.fma(a1, a1, P.mul(b1, b1))), P.to_int32_rne(e))
    h = P.select(P.eq(a, k(0.0)), k(0.0), h)
    h = P.select(P.eq(a, a), h, a)                             # NaN (max/min keep a NaN)
    return P.select(P.eq(ax, INF), INF, P.select(P.eq(ay, INF), INF, h))


# -- powers of 2 and logarithms in base 2 and 10 --------------------------------------------------------
LN2_TAIL = M.c(0xB102E308)   # RN(ln 2 - LN2)
INV_LN2_TAIL = M.c(0x32A57060)   # RN(1/ln 2 - LOG2E)
INV_LN10 = M.c(0x3EDE5BD9)   # RN(1/ln 10)
INV_LN10_TAIL = M.c(0xB22D91AF)  # RN(1/ln 10 - INV_LN10)
LG2_HI = M.c(0x3E9A2000)     # log10(2) to 11 bits: e LG2_HI is exact for |e| < 2^13
LG2_LO = M.c(0x369A84FC)     # RN(log10(2) - LG2_HI)


def exp2(x):
    """2^x: x clamped to [-160, 130]; n = rint(x); f = x - n (exact, |f| <= 1/2); f ln2 as
    hi + lo (hi = RN(f LN2), lo = fma(f, LN2, -hi) + f LN2_TAIL); p = exp(hi); p = fma(p, lo, p)
    (e^lo = 1 + lo to 2^-50); ldexp(p, n). Integers x give 2^x exactly; NaN -> NaN."""
    x = P.f32(x)
    xc = P.min_(P.max_(x, k(-160.0)), k(130.0))
    n = P.rint(xc)
    f = P.sub(xc, n)
    hi = P.mul(f, LN2)
    lo = P.fma(f, LN2_TAIL, P.fma(f, LN2, P.neg(hi)))
    p = M.exp(hi)
    return P.ldexp(P.fma(p, lo, p), P.to_int32_rne(n))


def _log_parts(x):
    """x > 0 finite as 2^e m' with m' in [sqrt2/2, sqrt2): (e, log(m')) with log(m') in
    [-0.35, 0.35] (math.log of m', where its own e is 0)."""
    m, e = _exponent(x)
    up = P.lt(M.SQRT2, m)
    m = P.select(up, P.mul(m, k(0.5)), m)
    e = P.select(up, P.add(e, k(1.0)), e)
    return e, M.log(m)


def _log_specials(x, y):
    """log's special values: +inf -> +inf, +-0 -> -inf, x < 0 -> NaN, NaN -> NaN."""
    y = P.select(P.eq(x, INF), INF, y)
    y = P.select(P.eq(x, k(0.0)), k(-np.inf), y)
    y = P.select(P.lt(x, k(0.0)), k(np.nan), y)
    return P.select(P.eq(x, x), y, x)


def log2(x):
    """e + log(m') (LOG2E + INV_LN2_TAIL) (the product in one fma, the sum one add): exact
    at powers of two."""
    x = P.f32(x)
    e, lm = _log_parts(x)
    t = P.fma(lm, M.LOG2E, P.mul(lm, INV_LN2_TAIL))
    return _log_specials(x, P.add(e, t))


def log10(x):
    """fma(e, LG2_HI, fma(e, LG2_LO, log(m') / ln 10)) (e LG2_HI exact; 1/ln 10 in two parts)."""
    x = P.f32(x)
    e, lm = _log_parts(x)
    t = P.fma(lm, INV_LN10, P.mul(lm, INV_LN10_TAIL))
    return _log_specials(x, P.fma(e, LG2_HI, P.fma(e, LG2_LO, t)))
