"""Transcendentals as fixed sequences of binary32 primitives (docs/NUMERICS.md, RepOps).

Each function is range reduction + a polynomial evaluated with fma (Horner), then an
exact reconstruction. Coefficients are binary32 constants written as hex bit patterns so
no decimal->binary conversion is involved; their provenance is in NUMERICS.md. Accuracy is
measured over all 2^32 inputs by benchmarks/repops_ulp.py.
"""
from __future__ import annotations

import numpy as np

from . import prims as P


def c(bits: int) -> np.float32:
    return np.uint32(bits).view(np.float32)


def horner(x, coeffs):
    """coeffs from the highest degree down: ((c0*x + c1)*x + c2)... with fma."""
    acc = P.const(coeffs[0], np.shape(x))
    for k in coeffs[1:]:
        acc = P.fma(acc, x, np.float32(k))
    return acc


LN2 = c(0x3F317218)          # RN(ln 2)


def signbit(x):
    """x < 0, and True for -0 (1/-0 = -inf); False for NaN (the primitives' NaNs carry no sign:
    an op whose result is a NaN's sign bit faults instead, repops/faults.py not_nan)."""
    return P.lt(P.select(P.eq(x, np.float32(0.0)), P.div(np.float32(1.0), x), x), np.float32(0.0))


# -- exp ------------------------------------------------------------------------------------
LOG2E = c(0x3FB8AA3B)        # 1.44269502 = RN(1/ln 2)
LN2_HI = c(0x3F317200)       # 0.693145752: ln 2 to 15 bits, so n * LN2_HI is exact for |n| < 512
LN2_LO = c(0x35BFBE8E)       # RN(ln 2 - LN2_HI) = 1.42860677e-06
EXP_OVER = c(0x42B17218)     # 88.7228394: the least x whose exp rounds to +inf
EXP_UNDER = c(0xC2D00000)    # -104: exp(-104) < 2^-150 rounds to +0
# exp(r) = 1 + r + r^2 Q(r) on |r| <= ln2/2; Q: degree-5 least-squares fit of
# (e^r - 1 - r)/r^2 (benchmarks/repops_fit.py), max polynomial error 0.014 ulp.
EXP_Q = [c(b) for b in (0x3950AF03, 0x3AB6A7A0, 0x3C088860, 0x3D2AAA70, 0x3E2AAAAB, 0x3F000000)]


@P.overridable("exp")
def exp(x):
    """exp: x clamped to [-104, EXP_OVER]; n = rint(x log2 e); r = x - n ln2 with a two-part
    ln2 (Cody-Waite, both steps fma); p = 1 + (r + r^2 Q(r)); result ldexp(p, n), which
    rounds once more only for subnormal results. NaN -> NaN, +inf -> +inf, -inf -> +0."""
    x = P.f32(x)
    k = np.float32  # constants broadcast (0-d), no full-size arrays
    xc = P.min_(P.max_(x, k(EXP_UNDER)), k(EXP_OVER))
    n = P.rint(P.mul(xc, k(LOG2E)))
    r = P.fma(P.neg(n), k(LN2_HI), xc)
    r = P.fma(P.neg(n), k(LN2_LO), r)
    return P.select(P.le(k(EXP_OVER), x), k(np.inf), exp_scaled(r, n))


def exp_scaled(r, n):
    """exp's polynomial and scaling: ldexp(1 + (r + r^2 Q(r)), n) (exp and exp_hilo share it)."""
    p = P.add(P.fma(P.mul(r, r), horner(r, EXP_Q), r), np.float32(1.0))
    return P.ldexp(p, P.to_int32_rne(n))


# -- frexp (exact, primitives only) ---------------------------------------------------------------
def frexp1(x):
    """For finite x > 0: (m, k) with x == m * 2^k, m in [1, 2), k a float32 integer. A binary
    search over the exponent with compare/select/ldexp, every step exact."""
    x = P.f32(x)
    k = np.float32  # constants broadcast (0-d), no full-size arrays
    sub = P.lt(x, k(2.0 ** -126))
    m = P.select(sub, P.ldexp(x, P.const(64, x.shape, np.int32)), x)
    e = P.select(sub, k(-64.0), k(0.0))
    for j in (64, 32, 16, 8, 4, 2, 1):          # scale down while m >= 2
        big = P.le(k(2.0 ** j), m)
        m = P.select(big, P.ldexp(m, P.const(-j, x.shape, np.int32)), m)
        e = P.select(big, P.add(e, k(j)), e)
    for j in (64, 32, 16, 8, 4, 2, 1):          # scale up while m < 1
        small = P.lt(m, k(2.0 ** (1 - j)))
        m = P.select(small, P.ldexp(m, P.const(j, x.shape, np.int32)), m)
        e = P.select(small, P.sub(e, k(j)), e)
    return m, e


# -- log --------------------------------------------------------------------------------------------
SQRT2 = c(0x3FB504F3)
# log(1+f) = f - hfsq + s (hfsq + R), s = f/(2+f), z = s^2, R = z (L1 + z (L2 + z (L3 + z L4)))
# (fdlibm's structure: f stays exact as the leading term). L: least-squares fit, max error of
# the R term 1e-10 absolute (benchmarks/repops_fit.py).
LOG_R = [c(b) for b in (0x3E6F265F, 0x3E922CF4, 0x3ECCCCF8, 0x3F2AAAAB)]


def _log_mantissa(x):
    """(m, k) with x = m 2^k, m in [sqrt2/2, sqrt2), for finite x > 0 (1 stands in for the
    others): log's and log_hilo's reduction."""
    k = np.float32
    safe = P.select(P.lt(k(0.0), x), P.select(P.lt(x, k(np.inf)), x, k(1.0)), k(1.0))
    m, e = frexp1(safe)
    up = P.lt(k(SQRT2), m)
    return (P.select(up, P.ldexp(m, P.const(-1, np.shape(x), np.int32)), m),
            P.select(up, P.add(e, k(1.0)), e))


@P.overridable("log")
def log(x):
    """Natural log: x = m 2^k with m in [sqrt2/2, sqrt2); f = m - 1 (exact);
    k ln2_hi - ((hfsq - (s (hfsq + R) + k ln2_lo)) - f). x < 0 -> NaN, +-0 -> -inf."""
    x = P.f32(x)
    k = np.float32  # constants broadcast (0-d), no full-size arrays
    m, e = _log_mantissa(x)
    f = P.sub(m, k(1.0))
    s = P.div(f, P.add(k(2.0), f))
    z = P.mul(s, s)
    R = P.mul(z, horner(z, LOG_R))
    hfsq = P.mul(P.mul(k(0.5), f), f)
    t = P.fma(e, k(LN2_LO), P.mul(s, P.add(hfsq, R)))
    y = P.fma(e, k(LN2_HI), P.neg(P.sub(P.sub(hfsq, t), f)))
    y = P.select(P.eq(x, k(np.inf)), k(np.inf), y)
    y = P.select(P.eq(x, k(0.0)), k(-np.inf), y)
    y = P.select(P.lt(x, k(0.0)), k(np.nan), y)
    return P.select(P.eq(x, x), y, x)                  # NaN in, NaN out


# -- log and exp in two floats (the general power's y log x: repops/reference/activations.pow) ----------
# log(1 + f) = 2 atanh(s), s = f/(2 + f): 2s + 2s^3 (1/3 + s^2/5 + ... + s^12/15): the Taylor
# coefficients 2/(2k+1) rounded (|s| <= 0.1716: the first term left out is 2^-49 of 2s).
LOG_T = [c(b) for b in (0x3E088889, 0x3E1D89D9, 0x3E3A2E8C, 0x3E638E39, 0x3E924925, 0x3ECCCCCD, 0x3F2AAAAB)]
LOG_T_LO = c(0xB2AAAAAB)     # RN(2/3 - RN(2/3)): the lead coefficient in two floats


def two_sum(a, b):
    """(s, e) with s = RN(a + b) and s + e = a + b exactly (Knuth)."""
    s = P.add(a, b)
    bb = P.sub(s, a)
    return s, P.add(P.sub(a, P.sub(s, bb)), P.sub(b, bb))


def fast_two_sum(a, b):
    """(s, e) with s = RN(a + b), s + e = a + b, for |a| >= |b| (Dekker)."""
    s = P.add(a, b)
    return s, P.sub(b, P.sub(s, a))


def log_hilo(a):
    """log a as hi + lo to ~2^-45 of itself, for a >= 0 (+0 -> (-inf, 0), +inf -> (inf, 0)):
    a = m 2^k, f = m - 1 exact, s = f/(2 + f) as sh + sl (the quotient's residual by fma),
    k ln2_hi + 2 sh + sh^3 RN(2/3) (TwoSums) + (k ln2_lo + 2 sl + the rest of the tail), renormalised."""
    k = np.float32
    m, e = _log_mantissa(a)
    f = P.sub(m, k(1.0))
    dh, dl = two_sum(k(2.0), f)
    sh = P.div(f, dh)
    sl = P.div(P.fma(P.neg(sh), dl, P.fma(P.neg(sh), dh, f)), dh)
    zh = P.mul(sh, sh)                                         # s^2, s^3 = uh + ul (products' errors by fma)
    uh = P.mul(sh, zh)
    ul = P.fma(sh, P.fma(sh, sh, P.neg(zh)), P.fma(sh, zh, P.neg(uh)))
    th = P.mul(uh, k(LOG_T[-1]))                               # the tail's lead, s^3 RN(2/3), and its error
    rest = P.fma(uh, P.fma(zh, horner(zh, LOG_T[:-1]), k(LOG_T_LO)),
                 P.fma(ul, k(LOG_T[-1]), P.fma(uh, k(LOG_T[-1]), P.neg(th))))
    rest = P.fma(P.add(zh, zh), sl, rest)                      # the tail's slope at sh, 2 s^2, times sl
    hi, e1 = two_sum(P.mul(e, k(LN2_HI)), P.add(sh, sh))
    hi, e2 = two_sum(hi, th)
    lo = P.add(P.add(e1, e2), P.add(P.fma(e, k(LN2_LO), P.add(sl, sl)), rest))
    hi, lo = fast_two_sum(hi, lo)
    positive = P.lt(k(0.0), a)
    hi = P.select(positive, P.select(P.lt(a, k(np.inf)), hi, a), P.select(P.eq(a, k(0.0)), k(-np.inf), a))
    return hi, P.select(positive, P.select(P.lt(a, k(np.inf)), lo, k(0.0)), k(0.0))   # (NaN: hi NaN)


def exp_hilo(hi, lo):
    """exp(hi + lo), |lo| <= ~ulp(hi): exp's reduction of hi with lo added to r before the
    polynomial (hi clamped to [-104, 89]: the overflow boundary lies inside, lo decides it)."""
    k = np.float32
    xc = P.min_(P.max_(hi, k(EXP_UNDER)), k(89.0))
    n = P.rint(P.mul(xc, k(LOG2E)))
    r = P.fma(P.neg(n), k(LN2_HI), xc)
    r = P.add(P.fma(P.neg(n), k(LN2_LO), r), P.select(P.lt(P.abs_(hi), k(89.0)), lo, k(0.0)))
    return P.select(P.le(k(89.0), hi), k(np.inf), exp_scaled(r, n))


# -- erf, sigmoid ----------------------------------------------------------------------------------
# |x| < 1: erf(x) = x P(x^2), degree-6 least-squares fit of erf(x)/x.
ERF_P = [c(b) for b in (0x38A6609F, 0xBA52A0F1, 0x3BAA1B19, 0xBCDBFFDB, 0x3DE716B2, 0xBEC093A0, 0x3F906EBB)]
# 1 <= |x| < ERF_ONE: erf(|x|) = 1 - exp(-x^2) R(1/|x|), degree-8 fit of erfc(x) e^(x^2).
ERF_R = [c(b) for b in (0xBC02FDB5, 0x3CAD6637, 0x3D22EF03, 0xBE85C703, 0x3F02DD89, 0xBEF4CC16, 0x3D3351B8,
                        0x3F0F0C0C, 0x3996715C)]
ERF_ONE = c(0x407AE148)      # 3.92: above, erfc(x) < 2^-25 and erf rounds to 1


@P.overridable("erf")
def erf(x):
    """erf in three pieces (|x| < 1 polynomial; exp(-x^2)-scaled tail; +-1), sign restored
    exactly. Accuracy: see NUMERICS.md (measured, not the <= 1 ulp goal of exp/log)."""
    x = P.f32(x)
    k = np.float32  # constants broadcast (0-d), no full-size arrays
    a = P.abs_(x)
    z = P.mul(x, x)
    small = P.mul(x, horner(z, ERF_P))
    tail = P.sub(k(1.0), P.mul(exp(P.neg(z)), horner(P.div(k(1.0), P.max_(a, k(1.0))), ERF_R)))
    tail = P.select(P.lt(a, ERF_ONE), tail, k(1.0))
    big = P.select(P.lt(x, k(0.0)), P.neg(tail), tail)
    y = P.select(P.lt(a, k(1.0)), small, big)
    return P.select(P.eq(x, x), y, x)                  # NaN in, NaN out


@P.overridable("sigmoid")
def sigmoid(x):
    """e = exp(-|x|) (never overflows); 1/(1 + e) for x >= 0, e/(1 + e) for x < 0, so
    results down in the subnormal range (x > -104) are kept instead of flushed to 0."""
    x = P.f32(x)
    e = exp(P.neg(P.abs_(x)))
    d = P.add(np.float32(1.0), e)
    return P.select(P.lt(x, np.float32(0.0)), P.div(e, d), P.div(np.float32(1.0), d))


# -- tanh ------------------------------------------------------------------------------------------------
# Four pieces, each <= 0.77 ulp over every binary32 in its range (fits: NUMERICS.md §8):
#   |x| < 0.625:       x + x^3 T(x^2)                         (degree-6 T)
#   0.625 .. 1.4375:   three centred pieces c_hi + fma(t, P(t), c_lo), t = |x| - C0, with
#                      tanh(C0) = c_hi + c_lo in two parts so only the last add rounds at
#                      the result's scale (degree-9 P)
#   1.4375 .. 9.1:     1 - 2/(exp(2|x|) + 1): there q = 2/(e^2x+1) <= 0.107, so exp's error
#                      reaches the result damped 8x
#   beyond 9.1:        +-1
TANH_T = [c(b) for b in (0xBA53BB26, 0x3B540429, 0xBC0F7130, 0x3CB300F5, 0xBD5D0C09, 0x3E088884, 0xBEAAAAAB)]
TANH_MID = [  # (upper bound, C0, c_hi, c_lo, P highest degree first)
    (c(0x3F600000), c(0x3F400000), c(0x3F22991F), c(0x322A5E45),
     [c(b) for b in (0x3B9004A3, 0xBB0720F3, 0xBC2A570D, 0x3CB1554D, 0xBA82E12E, 0xBD83256F, 0x3DCC4AB3,
                     0x3D2B402C, 0xBEC201EA, 0x3F18B9D9)]),
    (c(0x3F900000), c(0x3F800000), c(0x3F42F7D6), c(0xB2AEB0C7),
     [c(b) for b in (0x39074DD7, 0x3B52E841, 0xBBE12F91, 0x3B1FD4F8, 0x3C9B0302, 0xBD3DACE2, 0x3CE3048B,
                     0x3DD42E91, 0xBEA3C361, 0x3ED706E0)]),
    (c(0x3FB80000), c(0x3FA40000), c(0x3F5B5866), c(0xB10976EB),
     [c(b) for b in (0xBA4F360E, 0x3ABEF0AD, 0xB9E23272, 0xBB9E83F1, 0x3C67D333, 0xBC86B314, 0xBC7BCFD7,
                     0x3DDA3B94, 0xBE694384, 0x3E881F46)]),
]
TANH_SMALL = c(0x3F200000)   # 0.625
TANH_ONE = c(0x4111999A)     # 9.1: beyond, 1 - tanh < 2^-26 and tanh rounds to +-1


@P.overridable("tanh")
def tanh(x):
    x = P.f32(x)
    k = np.float32
    a = P.abs_(x)
    z = P.mul(x, x)
    small = P.fma(P.mul(x, z), horner(z, TANH_T), x)
    e = exp(P.mul(k(2.0), P.min_(a, TANH_ONE)))
    y = P.sub(k(1.0), P.div(k(2.0), P.add(e, k(1.0))))
    y = P.select(P.lt(a, TANH_ONE), y, k(1.0))
    for upper, c0, hi, lo, coeffs in reversed(TANH_MID):
        t = P.sub(a, c0)
        y = P.select(P.lt(a, upper), P.add(P.fma(t, horner(t, coeffs), lo), hi), y)
    y = P.select(P.lt(x, k(0.0)), P.neg(y), y)
    y = P.select(P.lt(a, TANH_SMALL), small, y)
    y = P.select(P.eq(x, k(0.0)), x, y)                # tanh(+-0) = +-0
    return P.select(P.eq(x, x), y, x)


# -- sin, cos --------------------------------------------------------------------------------------------
# Payne-Hanek reduction in exact float arithmetic: |x| = M 2^E (M a 24-bit integer) times 2/pi,
# modulo 4, as base-2^12 digits. Every product is of two 12-bit integers, every digit sum < 2^15,
# so each step is exact until the last three TwoSums; the fraction f = x 2/pi - n comes out as
# fh + fl to ~2^-47 of |f| for every finite x (the closest binary32 gets to a multiple of pi/2 is
# 2^-29.2, at 16367173 2^72: 2^-55 absolute suffices, the truncation of 2/pi is 2^-70).
TWO_OVER_PI_DIGITS = (0xA2F, 0x983, 0x6E4, 0xE44, 0x152, 0x9FC, 0x275, 0x7D1,   # 2/pi = sum d_j 2^(-12 j),
                      0xF53, 0x4DD, 0xC0D, 0xB62, 0x959, 0x93C, 0x439, 0x041)   # j = 1..16 (192 bits)
SINCOS_DIGITS = 7            # n_0 .. n_6 of x 2/pi below 2^g (digit i weighs 2^(g - 12 i))
D_RANGE = range(-2, 9)       # floor(E / 12) for |x| in [1/2, 2^128)
PIO2_HI = c(0x3FC90FDB)      # RN(pi/2)
TWO_OVER_PI = c(0x3F22F983)  # RN(2/pi) (bessel.py)
PIO2_LO = c(0xB33BBD2E)      # RN(pi/2 - PIO2_HI)
PIO4 = c(0x3F490FDB)         # RN(pi/4): below, r = x
SIN_S = [c(b) for b in (0x363665BB, 0xB95007B0, 0x3C088884, 0xBE2AAAAB)]   # sin r = r + r^3 S(r^2)
COS_C = [c(b) for b in (0xB4920B86, 0x37D0085B, 0xBAB60B5C, 0x3D2AAAAB)]   # cos r = 1 - r^2/2 + r^4 C(r^2)


def _mod4(v):
    """v - 4 floor(v/4): exact for any float v >= 0."""
    k = np.float32
    return P.sub(v, P.mul(k(4.0), P.floor(P.mul(v, k(0.25)))))


def _split12(v):
    """(v div 2^12, v mod 2^12) of an integer-valued v < 2^24, both exact."""
    k = np.float32
    hi = P.floor(P.mul(v, k(2.0 ** -12)))
    return hi, P.sub(v, P.mul(hi, k(4096.0)))


def _digit(d, i):
    """The 2/pi digit d_(D + i) for each element's D (a float), 0 outside 1..16."""
    k = np.float32
    v = k(0.0)
    for dd in D_RANGE:
        j = dd + i
        if 1 <= j <= len(TWO_OVER_PI_DIGITS):
            v = P.select(P.eq(d, k(dd)), k(TWO_OVER_PI_DIGITS[j - 1]), v)
    return v


def _reduce(a):
    """For a = |x| >= pi/4, finite: (n, fh, fl) with a 2/pi = n + fh + fl (mod 4), n in 0..4."""
    k = np.float32
    m, e = frexp1(a)
    big = P.mul(m, k(2.0 ** 23))                         # a = big 2^E, big an integer in [2^23, 2^24)
    ee = P.sub(e, k(23.0))
    d = P.floor(P.div(ee, k(12.0)))                      # E = 12 D + g, g in 0..11
    g = P.sub(ee, P.mul(k(12.0), d))
    scale = P.ldexp(P.const(1.0, a.shape), P.to_int32_rne(g))   # 2^g
    mh, ml = _split12(big)
    digits = [_digit(d, i) for i in range(SINCOS_DIGITS + 2)]
    # digit i of a 2/pi (weight 2^(g - 12 i)): ml d_(D+i) + mh d_(D+i+1), each product < 2^24
    lo = [_split12(P.mul(ml, digits[i])) for i in range(SINCOS_DIGITS + 1)]
    hi = [_split12(P.mul(mh, digits[i + 1])) for i in range(SINCOS_DIGITS + 1)]
    carry, n_ = k(0.0), [None] * SINCOS_DIGITS
    for i in reversed(range(SINCOS_DIGITS)):             # normalise to digits < 2^12 (digit -1 is 0 mod 4)
        t = P.add(P.add(P.add(lo[i][1], hi[i][1]), P.add(lo[i + 1][0], hi[i + 1][0])), carry)
        carry, n_[i] = _split12(t)
    z = _mod4(P.add(_mod4(P.mul(n_[0], scale)), _mod4(P.mul(P.mul(n_[1], scale), k(2.0 ** -12)))))
    n = P.rint(P.add(z, P.mul(P.mul(n_[2], scale), k(2.0 ** -24))))
    pair = [P.mul(P.mul(P.fma(n_[i], k(4096.0), n_[i + 1]), scale), k(2.0 ** (-12 * i - 12))) for i in (2, 4)]
    s1, e1 = two_sum(P.sub(z, n), pair[0])
    s2, e2 = two_sum(s1, pair[1])
    fh, e3 = two_sum(s2, P.mul(P.mul(n_[6], scale), k(2.0 ** -72)))
    return n, fh, P.add(P.add(e1, e2), e3)


def _sincos(x):
    """(sin x, cos x): r = x - n pi/2 as rh + rl (Payne-Hanek above, r = x below pi/4), quadrant
    q = n mod 4, sin r = rh + (rh^3 S + rl (1 - rh^2/2)), cos r = w + ((1 - w) - rh^2/2 + (rh^4 C -
    rh rl)) with w = 1 - rh^2/2 (degree 3 each); the quadrant picks +-sin/+-cos, x < 0 negates sin.
    About 1 ulp for every finite x (benchmarks/repops_ulp.py); sin(+-0) = +-0, non-finite -> NaN."""
    x = P.f32(x)
    k = np.float32  # constants broadcast (0-d), no full-size arrays
    a = P.abs_(x)
    small = P.lt(a, k(PIO4))
    n, fh, fl = _reduce(P.select(small, k(1.0), P.select(P.lt(a, k(np.inf)), a, k(1.0))))
    rh = P.mul(fh, k(PIO2_HI))
    rl = P.add(P.fma(fh, k(PIO2_HI), P.neg(rh)), P.fma(fh, k(PIO2_LO), P.mul(fl, k(PIO2_HI))))
    rh, rl = P.select(small, a, rh), P.select(small, k(0.0), rl)
    n = P.select(small, k(0.0), n)
    z = P.mul(rh, rh)
    hz = P.mul(k(0.5), z)
    s = P.add(rh, P.fma(P.mul(rh, z), horner(z, SIN_S), P.fma(P.neg(hz), rl, rl)))
    w = P.sub(k(1.0), hz)
    co = P.add(w, P.add(P.sub(P.sub(k(1.0), w), hz), P.fma(P.mul(z, z), horner(z, COS_C), P.neg(P.mul(rh, rl)))))
    q = P.sub(n, P.mul(k(4.0), P.floor(P.mul(n, k(0.25)))))
    # quadrant: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s) for q = 0, 1, 2, 3
    odd = P.eq(P.sub(q, P.mul(k(2.0), P.floor(P.mul(q, k(0.5))))), k(1.0))
    neg_sin = P.le(k(2.0), q)
    neg_cos = P.select(P.eq(q, k(1.0)), k(1.0), P.select(P.eq(q, k(2.0)), k(1.0), k(0.0)))
    sin_v = P.select(odd, co, s)
    cos_v = P.select(odd, s, co)
    sin_v = P.select(neg_sin, P.neg(sin_v), sin_v)
    cos_v = P.select(P.eq(neg_cos, k(1.0)), P.neg(cos_v), cos_v)
    sin_v = P.select(P.lt(x, k(0.0)), P.neg(sin_v), P.select(P.eq(x, k(0.0)), x, sin_v))
    finite = P.lt(a, k(np.inf))
    return P.select(finite, sin_v, k(np.nan)), P.select(finite, cos_v, k(np.nan))


@P.overridable("sin")
def sin(x):
    return _sincos(x)[0]


@P.overridable("cos")
def cos(x):
    return _sincos(x)[1]
