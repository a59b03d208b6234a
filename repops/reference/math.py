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
    p = P.add(P.fma(P.mul(r, r), horner(r, EXP_Q), r), k(1.0))
    y = P.ldexp(p, P.to_int32_rne(n))
    return P.select(P.le(k(EXP_OVER), x), k(np.inf), y)


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


@P.overridable("log")
def log(x):
    """Natural log: x = m 2^k with m in [sqrt2/2, sqrt2); f = m - 1 (exact);
    k ln2_hi - ((hfsq - (s (hfsq + R) + k ln2_lo)) - f). x < 0 -> NaN, +-0 -> -inf."""
    x = P.f32(x)
    k = np.float32  # constants broadcast (0-d), no full-size arrays
    safe = P.select(P.lt(k(0.0), x), P.select(P.lt(x, k(np.inf)), x, k(1.0)), k(1.0))
    m, e = frexp1(safe)
    up = P.lt(k(SQRT2), m)
    m = P.select(up, P.ldexp(m, P.const(-1, x.shape, np.int32)), m)
    e = P.select(up, P.add(e, k(1.0)), e)
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
TWO_OVER_PI = c(0x3F22F983)
PIO2 = [c(0x3FC90000), c(0x39FDA000), c(0x33A22169)]  # pi/2 in three parts of <= 12 bits
SIN_S = [c(b) for b in (0x363665BB, 0xB95007B0, 0x3C088884, 0xBE2AAAAB)]   # sin r = r + r^3 S(r^2)
COS_C = [c(b) for b in (0xB4920B86, 0x37D0085B, 0xBAB60B5C, 0x3D2AAAAB)]   # cos r = 1 - r^2/2 + r^4 C(r^2)
R_CLAMP = c(0x3F4A3D71)      # 0.79 > pi/4


def _sincos(x):
    """Shared reduction: n = rint(x 2/pi), r = x - n pi/2 (three fma steps), quadrant
    q = n - 4 floor(n/4) in {0,1,2,3}; returns (sin, cos). Accurate while |n| < 2^12
    (|x| < ~6400); beyond, deterministic and in [-1, 1] but inaccurate (no Payne-Hanek yet)."""
    x = P.f32(x)
    k = np.float32  # constants broadcast (0-d), no full-size arrays
    n = P.rint(P.mul(x, k(TWO_OVER_PI)))
    r = x
    for part in PIO2:
        r = P.fma(P.neg(n), k(part), r)
    # Beyond the accurate range the reduction can leave a huge r; clamping keeps the result
    # finite and in [-1, 1] (inaccurate there, but deterministic). No effect below ~6400.
    r = P.min_(P.max_(r, k(-R_CLAMP)), k(R_CLAMP))
    q = P.sub(n, P.mul(k(4.0), P.floor(P.mul(n, k(0.25)))))
    z = P.mul(r, r)
    s = P.fma(P.mul(r, z), horner(z, SIN_S), r)
    cz = P.sub(k(1.0), P.mul(k(0.5), z))
    co = P.fma(P.mul(z, z), horner(z, COS_C), cz)
    # quadrant: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s) for q = 0, 1, 2, 3
    odd = P.eq(P.sub(q, P.mul(k(2.0), P.floor(P.mul(q, k(0.5))))), k(1.0))
    neg_sin = P.le(k(2.0), q)
    neg_cos = P.select(P.eq(q, k(1.0)), k(1.0), P.select(P.eq(q, k(2.0)), k(1.0), k(0.0)))
    sin_v = P.select(odd, co, s)
    cos_v = P.select(odd, s, co)
    sin_v = P.select(neg_sin, P.neg(sin_v), sin_v)
    cos_v = P.select(P.eq(neg_cos, k(1.0)), P.neg(cos_v), cos_v)
    return sin_v, cos_v


@P.overridable("sin")
def sin(x):
    return _sincos(x)[0]


@P.overridable("cos")
def cos(x):
    return _sincos(x)[1]
