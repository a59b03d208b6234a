"""Gamma-family special functions as fixed sequences of the binary32 primitives (docs/NUMERICS.md
§8, "Special functions"): lgamma, digamma, polygamma(n >= 1). Polynomials are least-squares fits
in float64 against mpmath rounded to binary32 (benchmarks/repops_fit_special.py); reductions are
exact where they can be (x - n, x - floor(x), 0.5 - g by Sterbenz). Special values are torch's."""
from __future__ import annotations

import math

import numpy as np

from . import math as M
from . import prims as P
from .activations import log1p
from .math import c
from .trig import PI_HI, signbit

k = np.float32
NAN, INF = k(np.nan), k(np.inf)

# -- sin(pi x), cot(pi x) with exact reduction ------------------------------------------------------------------
# sin(pi h) = h S(h^2), cos(pi h) = C(h^2) on |h| <= 1/4 (fit errors 2.9e-8 / 6.7e-9 relative)
SINPI_S = [c(b) for b in (0x3DA5E43E, 0xBF19654F, 0x402335DD, 0xC0A55DE7, 0x40490FDB)]
COSPI_C = [c(b) for b in (0x3E6CE193, 0xBFAAE2BD, 0x4081E0EE, 0xC09DE9E6, 0x3F800000)]


def _frac_parts(x):
    """g = x - rint(x) in [-1/2, 1/2] (exact for every finite x: |g| <= 1/2 is a multiple of x's
    ulp, and g = x itself when |x| < 1/2), |g|, and h = 1/2 - |g| (exact, Sterbenz)."""
    g = P.sub(x, P.rint(x))
    a = P.abs_(g)
    return g, a, P.sub(k(0.5), a)


def _sc(v):
    """(sin(pi v), cos(pi v)) for |v| <= 1/4."""
    z = P.mul(v, v)
    return P.mul(v, M.horner(z, SINPI_S)), M.horner(z, COSPI_C)


def abs_sinpi(x):
    """|sin(pi x)| for finite x: 0 at integers exactly, relative accuracy near them."""
    _, a, h = _frac_parts(x)
    s_a, _ = _sc(a)
    _, c_h = _sc(h)
    return P.select(P.le(a, k(0.25)), s_a, c_h)


def cotpi(x):
    """cot(pi x) for finite non-integer x: cos/sin of the reduced argument (|g| <= 1/4), or
    sign(g) sin/cos of h = 1/2 - |g| (tan of the complement)."""
    g, a, h = _frac_parts(x)
    s_g, c_g = _sc(g)
    s_h, c_h = _sc(h)
    far = P.div(s_h, c_h)
    return P.select(P.le(a, k(0.25)), P.div(c_g, s_g), P.select(P.lt(g, k(0.0)), P.neg(far), far))


# -- lgamma ------------------------------------------------------------------------------------------------------
# lgamma(2 + t) = t (t + 1) H(t) on t in [-1.5, 1] (x in [0.5, 3]): both zeros (x = 1, 2) are
# factors, so the result keeps its relative accuracy next to them. Degree 18, fit error 2.8e-8.
LGAMMA_H = [c(b) for b in (0x378D6996, 0x383ECA90, 0xB81E8FFE, 0xB94FA54D, 0xB74EE9D1, 0x39B72DEB, 0x39095A95,
                           0xB9BC03CE, 0xB8F109DD, 0x38E405E9, 0x398E1412, 0xB9F5D91D, 0x3A692D1B, 0xBB0967C2,
                           0x3BA3E98A, 0xBC4AEB2D, 0x3D07061F, 0xBDCD7325, 0x3ED87730)]
# x >= 8: lgamma(x) = (x - 1/2)(log x - 1) + (LG_C + z W(z^2)), z = 1/x (Stirling; fit error 2.5e-9)
LGAMMA_W = [c(b) for b in (0xBA15779A, 0x3A4FFCD7, 0xBB360B5E, 0x3DAAAAAB)]
LG_C = c(0x3ED67F1D)         # log(2 pi)/2 - 1/2
LOG_PI = c(0x3F928682)       # log(pi)


def _lgamma_h(t, u):
    """t u H(t): lgamma(2 + t) where u = t + 1 is passed exactly."""
    return P.mul(P.mul(t, u), M.horner(t, LGAMMA_H))


def _lgamma_pos(a):
    """lgamma(a) for a >= 1/2 (inf at +inf): a <= 3: (a - 2)(a - 1) H(a - 2) (a - 1 exact);
    3 < a < 8: y = a - n in [2, 3) (exact), lgamma(y) + log(y (y + 1) ... (y + n - 1)) with the
    n <= 5 factors masked; a >= 8: Stirling."""
    low = _lgamma_h(P.sub(a, k(2.0)), P.sub(a, k(1.0)))
    n = P.sub(P.floor(P.min_(a, k(8.0))), k(2.0))
    y = P.sub(a, n)
    prod = y
    for j in range(1, 5):
        prod = P.select(P.lt(k(j), n), P.mul(prod, P.add(y, k(j))), prod)
    mid = P.add(_lgamma_h(P.sub(y, k(2.0)), P.sub(y, k(1.0))), M.log(prod))
    z = P.div(k(1.0), a)
    big = P.fma(P.sub(a, k(0.5)), P.sub(M.log(a), k(1.0)), P.fma(z, M.horner(P.mul(z, z), LGAMMA_W), LG_C))
    low = P.add(low, k(0.0))                           # lgamma(1) = +0 ((-1)(+0)H is -0)
    return P.select(P.le(a, k(3.0)), low, P.select(P.lt(a, k(8.0)), mid, big))


def lgamma(x):
    """log|Gamma(x)|: |x| < 1/2: lgamma(1 + x) - log|x| = (x - 1) x H(x - 1) - log|x|;
    x >= 1/2: _lgamma_pos; x <= -1/2: log(pi / |x sin(pi x)|) - lgamma(-x) (reflection, with
    sin(pi x) from the exact fraction). Non-positive integers and +-inf -> +inf."""
    x = P.f32(x)
    a = P.abs_(x)
    finite = P.min_(a, k(2.0 ** 30))
    small = P.sub(_lgamma_h(P.sub(x, k(1.0)), x), M.log(a))
    pos = _lgamma_pos(a)
    sp = abs_sinpi(finite)
    refl = P.sub(P.sub(LOG_PI, M.log(P.mul(finite, sp))), pos)
    refl = P.select(P.eq(sp, k(0.0)), INF, refl)
    y = P.select(P.lt(a, k(0.5)), small, P.select(P.lt(x, k(0.0)), refl, pos))
    y = P.select(P.eq(a, INF), INF, y)
    return P.select(P.eq(x, x), y, x)


# -- digamma -----------------------------------------------------------------------------------------------------
# digamma(x) = t D(t), t = x - x0 (x0 = 1.4616... the positive root, in two parts), x in [1, 2];
# degree 10, fit error 2.4e-8 relative.
DIGAMMA_D = [c(b) for b in (0x3C30D076, 0xBCA7FC03, 0x3CC0EB46, 0xBD03191E, 0x3D46DF74, 0xBD941853, 0x3DDCDE67,
                            0xBE27DF6D, 0x3E845A00, 0xBEE2B1DC, 0x3F77B95E)]
X0_HI, X0_LO, X0M1_HI = c(0x3FBB16C3), c(0x3255AF90), c(0x3EEC5B0C)   # x0 = hi + lo; x0 - 1 = m1_hi + lo
# x >= 6: digamma(x) = log x - 1/(2x) - z A(z), z = 1/x^2 (Bernoulli: 1/12, -1/120, 1/252, -1/240, 1/132)
DIGAMMA_A = [k(1 / 132), k(-1 / 240), k(1 / 252), k(-1 / 120), k(1 / 12)]


def _digamma_pos(x):
    """digamma(x) for x > 0: x < 1: t D(t) - 1/x with t = (x - (x0 - 1)), the root of
    digamma(x + 1); x in [1, 2): t D(t); [2, 6): y = x - n in [1, 2) (exact), digamma(y) plus
    the n <= 4 reciprocals 1/(y + j), smallest first; x >= 6: the asymptotic series."""
    t0 = P.sub(P.sub(x, X0M1_HI), X0_LO)
    below = P.sub(P.mul(t0, M.horner(t0, DIGAMMA_D)), P.div(k(1.0), x))
    n = P.sub(P.floor(P.min_(P.max_(x, k(1.0)), k(6.0))), k(1.0))
    y = P.sub(x, n)
    t = P.sub(P.sub(y, X0_HI), X0_LO)
    root = P.mul(t, M.horner(t, DIGAMMA_D))
    s = P.select(P.lt(k(3.0), n), P.div(k(1.0), P.add(y, k(3.0))), k(0.0))
    for j in (2, 1, 0):
        s = P.select(P.lt(k(j), n), P.add(s, P.div(k(1.0), P.add(y, k(j)))), s)
    mid = P.add(root, s)
    xs = P.max_(x, k(6.0))
    z = P.div(k(1.0), P.mul(xs, xs))
    big = P.sub(P.sub(M.log(xs), P.div(k(0.5), xs)), P.mul(z, M.horner(z, DIGAMMA_A)))
    return P.select(P.lt(x, k(1.0)), below, P.select(P.lt(x, k(6.0)), mid, big))


def digamma(x):
    """digamma (torch's rules): x < 0: digamma(1 - x) - pi cot(pi x) (1 - x rounded, as torch);
    +0 -> -inf, -0 -> +inf, negative integers and -inf -> NaN, +inf -> +inf."""
    x = P.f32(x)
    neg = P.lt(x, k(0.0))
    fin = P.max_(x, k(-(2.0 ** 30)))
    refl = P.sub(_digamma_pos(P.sub(k(1.0), fin)), P.mul(PI_HI, cotpi(fin)))
    y = P.select(neg, refl, _digamma_pos(P.select(neg, k(1.0), x)))
    y = P.select(P.eq(P.floor(x), x), P.select(neg, NAN, y), y)      # negative integers, -inf
    y = P.select(P.eq(x, k(0.0)), P.select(signbit(x), INF, k(-np.inf)), y)
    return P.select(P.eq(x, x), y, x)


# -- polygamma, n >= 1 -------------------------------------------------------------------------------------------
POLYGAMMA_MAX = 8            # beyond, P_n's coefficients leave binary32's integers and the tail's accuracy drops
POLY_SHIFT = 8               # x > 0: the first 8 terms of sum 1/(x + k)^(n+1) directly, then Euler-Maclaurin
BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730]


def _zeta_pos(s: int, x):
    """Hurwitz zeta(s, x) for x > 0: sum_{k < 8} (x + k)^-s (largest k first) + the
    Euler-Maclaurin tail at w = x + 8 >= 8: p^(s-1) (1/(s-1) + p (1/2 + sum_j B_2j/(2j)!
    (s)_(2j-1) p^(2j-1))), p = 1/w, its constants rounded once from double (p^(s-1), not p^s,
    leads: trigamma(1e30) = 1e-30 does not underflow)."""
    def power(r, m):
        out = r
        for _ in range(m - 1):
            out = P.mul(out, r)
        return out
    p = P.div(k(1.0), P.add(x, k(POLY_SHIFT)))
    coeffs = [k(b / math.factorial(2 * j) * math.prod(range(s, s + 2 * j - 1)))
              for j, b in enumerate(BERNOULLI, start=1)]
    inner = P.fma(p, M.horner(P.mul(p, p), coeffs[::-1]), k(0.5))
    inner = P.fma(p, inner, k(1 / (s - 1)))
    acc = P.mul(power(p, s - 1), inner)
    for j in range(POLY_SHIFT - 1, -1, -1):
        acc = P.add(acc, power(P.div(k(1.0), P.add(x, k(j))), s))
    return acc


def cot_derivative(n: int) -> list[int]:
    """Integer coefficients (highest degree first) of P_n with d^n/dx^n cot(pi x) = pi^n P_n(c),
    c = cot(pi x): P_0 = c, P_(k+1) = -(1 + c^2) P_k'(c)."""
    p = [0, 1]                                         # lowest degree first
    for _ in range(n):
        d = [i * p[i] for i in range(1, len(p))] or [0]
        out = [0] * (len(d) + 2)
        for i, v in enumerate(d):
            out[i] -= v
            out[i + 2] -= v
        p = out
    return p[::-1]


def _dcot(n: int, cot):
    """P_n(cot(pi x)) by Horner (its integer coefficients are exact in binary32 for n <= 8)."""
    return M.horner(cot, [k(v) for v in cot_derivative(n)])


def polygamma(n: int, x):
    """psi^(n)(x), 1 <= n <= 8: x > 0: (-1)^(n+1) n! zeta(n + 1, x); x < 0: the reflection
    (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)) (1 - x rounded, as torch). Poles (x a
    non-positive integer, and -inf): (-1)^(n+1) inf; +inf: 0 for n = 1, NaN for n >= 2 (torch's)."""
    x = P.f32(x)
    sign = k((-1) ** (n + 1) * math.factorial(n))
    neg = P.lt(x, k(0.0))
    fin = P.max_(x, k(-(2.0 ** 30)))
    pos = P.mul(sign, _zeta_pos(n + 1, P.select(neg, k(1.0), x)))
    at = P.mul(sign, _zeta_pos(n + 1, P.sub(k(1.0), fin)))
    pin = k(math.pi ** (n + 1))
    refl = P.sub(at if n % 2 == 0 else P.neg(at), P.mul(pin, _dcot(n, cotpi(fin))))
    y = P.select(neg, refl, pos)
    pole = k((-1) ** (n + 1) * np.inf)
    y = P.select(P.le(x, k(0.0)), P.select(P.eq(P.floor(x), x), pole, y), y)
    y = P.select(P.eq(x, INF), k(0.0) if n == 1 else NAN, y)
    if n == 1:
        y = P.select(P.eq(x, k(-np.inf)), NAN, y)
    return P.select(P.eq(x, x), y, x)


# -- erfc, erfcx, log_ndtr -----------------------------------------------------------------------------------------
# |t| < 1/2: erf(t) = t E(t^2) (fit error 6e-8 relative: the rounded 2/sqrt(pi))
ERF_E = [c(b) for b in (0xBA49B8A4, 0x3BAA6881, 0xBCDC101C, 0x3DE71779, 0xBEC093A3, 0x3F906EBB)]
# erfcx(x) = e^(x^2) erfc(x): A(x - 5/4) on [1/2, 2]; x erfcx(x) = B(1/x^2) on [2, 4], C(1/x^2) beyond
ERFCX_A = [c(b) for b in (0xB5F96AB3, 0x36D7AB29, 0xB79090BB, 0x385F4D61, 0xB92AE15D, 0x39F8A942, 0xBAADC644,
                          0x3B68DA44, 0xBC14CB18, 0x3CB45130, 0xBD4DB1AD, 0x3DDAB7A3, 0xBE55D567, 0x3EBC5349)]
ERFCX_B = [c(b) for b in (0x413EC614, 0xC19C515C, 0x416EF211, 0xC0EA7BE9, 0x40320172, 0xBF7DAC1C, 0x3ED6F931,
                          0xBE906251, 0x3F106EA6)]
ERFCX_C = [c(b) for b in (0x41EAC720, 0xC14A8504, 0x40638156, 0xBF870656, 0x3ED8A23D, 0xBE906EB7, 0x3F106EBB)]
ERFC_ZERO = k(10.5)          # beyond, erfc(x) < 2^-160: +0 (also keeps x^2 and its fma residual finite)


def _erfcx_tail(a):
    """erfcx(a) for a >= 1/2 (0 at +inf): A on [1/2, 2), B(1/a^2)/a on [2, 4), C(1/a^2)/a beyond."""
    near = M.horner(P.sub(a, k(1.25)), ERFCX_A)
    u = P.div(k(1.0), P.mul(a, a))
    mid = P.div(M.horner(u, ERFCX_B), a)
    far = P.div(M.horner(u, ERFCX_C), a)
    return P.select(P.lt(a, k(2.0)), near, P.select(P.lt(a, k(4.0)), mid, far))


def _exp_sq(a, sign):
    """(exp(sign x2), e) with a^2 = x2 + e exactly (e = fma(a, a, -x2)): exp(sign a^2) is
    exp(sign x2) (1 + sign e) to 2^-48, so the square's rounding never reaches the result."""
    x2 = P.mul(a, a)
    e = P.fma(a, a, P.neg(x2))
    return M.exp(x2 if sign > 0 else P.neg(x2)), e


def erfc(x):
    """erfc, complement computed directly: |x| < 1/2: 1 - x E(x^2); x >= 1/2: p = exp(-x2) erfcx(x),
    p - e p (the square's residual, _exp_sq); x <= -1/2: 2 - erfc(|x|). +inf -> +0, -inf -> 2."""
    x = P.f32(x)
    a = P.abs_(x)
    small = P.sub(k(1.0), P.mul(x, M.horner(P.mul(x, x), ERF_E)))
    am = P.min_(P.max_(a, k(0.5)), ERFC_ZERO)
    ex, e = _exp_sq(am, -1)
    p = P.mul(ex, _erfcx_tail(am))
    tail = P.select(P.lt(a, ERFC_ZERO), P.fma(P.neg(e), p, p), k(0.0))
    y = P.select(P.lt(x, k(0.0)), P.sub(k(2.0), tail), tail)
    y = P.select(P.lt(a, k(0.5)), small, y)
    return P.select(P.eq(x, x), y, x)


ERFCX_INF = k(9.5)           # below -9.5, 2 e^(x^2) overflows binary32: +inf


def erfcx(x):
    """e^(x^2) erfc(x): x >= 1/2: _erfcx_tail; |x| < 1/2: exp(x2)(1 + e) erfc(x); x <= -1/2:
    2 exp(x2)(1 + e) - erfcx(|x|) (+inf below -9.5, where 2 e^(x^2) overflows)."""
    x = P.f32(x)
    a = P.abs_(x)
    am = P.min_(a, ERFCX_INF)
    ex, e = _exp_sq(am, +1)
    grown = P.fma(e, ex, ex)                                 # exp(x^2) to 2^-48 before its rounding
    small = P.mul(grown, erfc(P.select(P.lt(a, k(0.5)), x, k(0.0))))
    tail = _erfcx_tail(P.max_(a, k(0.5)))
    neg = P.sub(P.mul(k(2.0), grown), tail)
    y = P.select(P.lt(a, k(0.5)), small, P.select(P.lt(x, k(0.0)), neg, tail))
    y = P.select(P.lt(x, P.neg(ERFCX_INF)), INF, y)
    return P.select(P.eq(x, x), y, x)


SQRT1_2 = c(0x3F3504F3)      # RN(1/sqrt 2)


def log_ndtr(x):
    """log Phi(x), torch's formula: t = x RN(1/sqrt2); x < -1: log(erfcx(-t)/2) - t^2; else
    log1p(-erfc(t)/2)."""
    x = P.f32(x)
    t = P.mul(x, SQRT1_2)
    low = P.sub(M.log(P.mul(erfcx(P.neg(P.min_(t, k(0.0)))), k(0.5))), P.mul(t, t))
    high = log1p(P.mul(erfc(P.max_(t, k(-1.0))), k(-0.5)))
    y = P.select(P.lt(x, k(-1.0)), low, high)
    return P.select(P.eq(x, x), y, x)


# -- erfinv, ndtri ---------------------------------------------------------------------------------------------------
# erfinv(y) = y G(L), L = -log((1 - |y|)(1 + |y|)) (Giles' variable): G1(L - 5/2) for L < 5 (fit
# error 5.7e-8), G2(sqrt(L) - 3) for 5 <= L <= 104 (1.5e-6); one Newton step polishes either.
ERFINV_G1 = [c(b) for b in (0xB2199CC1, 0x32C7D7D6, 0x34FB661F, 0xB668677C, 0xB6A6DE58, 0x3964F3C7, 0xBAA4327C,
                            0xBB88E279, 0x3E7C8F45, 0x3FC02E2F)]
ERFINV_G2 = [c(b) for b in (0x308FB6FE, 0xB349E69E, 0x3579CCCF, 0xB7331B41, 0x38A4EE2F, 0xB9CC8751, 0x3AAECB55,
                            0xBB514BA8, 0x3BB5EB78, 0xBBFE1B18, 0x3C1BC1AA, 0x3F803738, 0x40354F71)]
SQRTPI_2 = c(0x3F62DFC5)     # RN(sqrt(pi)/2)
SQRT2 = c(0x3FB504F3)        # RN(sqrt 2)
NEWTON_MIN_W = k(2.0 ** -120)  # below, erfc(a) ~ w is subnormal: the step would not improve a


def _erfinv_abs(ya, w):
    """erfinv(ya) >= 0 for ya in [0, 1) given w = 1 - ya exactly (so tails keep their relative
    accuracy): Giles' initial guess, then one Newton step: ya <= 1/2: a - (erf(a) - ya) e^(a^2)
    sqrt(pi)/2; else on erfc(a) = w: a + (1 - w/erfc(a)) erfcx(a) sqrt(pi)/2 (exact Newton, no
    overflow of e^(a^2))."""
    L = P.neg(M.log(P.mul(w, P.add(k(1.0), ya))))
    g1 = M.horner(P.sub(L, k(2.5)), ERFINV_G1)
    g2 = M.horner(P.sub(P.sqrt(P.max_(L, k(5.0))), k(3.0)), ERFINV_G2)
    a = P.mul(ya, P.select(P.lt(L, k(5.0)), g1, g2))
    ex, e = _exp_sq(P.min_(a, k(1.0)), +1)
    near = P.sub(a, P.mul(P.mul(P.sub(M.erf(a), ya), P.fma(e, ex, ex)), SQRTPI_2))
    ratio = P.sub(k(1.0), P.div(w, erfc(a)))
    far = P.add(a, P.mul(P.mul(ratio, erfcx(a)), SQRTPI_2))
    far = P.select(P.lt(w, NEWTON_MIN_W), a, far)
    return P.select(P.le(ya, k(0.5)), near, far)


def erfinv(y):
    """erfinv: odd; +-1 -> +-inf, |y| > 1 -> NaN, +-0 -> +-0."""
    y = P.f32(y)
    ya = P.min_(P.abs_(y), k(0.99999994))                 # (|y| = 1 is selected below)
    a = _erfinv_abs(ya, P.sub(k(1.0), ya))
    r = P.select(P.lt(y, k(0.0)), P.neg(a), a)
    r = P.select(P.eq(P.abs_(y), k(1.0)), P.select(P.lt(y, k(0.0)), k(-np.inf), INF), r)
    r = P.select(P.lt(k(1.0), P.abs_(y)), NAN, r)
    r = P.select(P.eq(y, k(0.0)), y, r)
    return P.select(P.eq(y, y), r, y)


def ndtri(p):
    """Phi^-1(p) = sqrt2 erfinv(2p - 1), with w = 2p (p < 1/2) or 2 - 2p (exact) passed on, so the
    tails keep relative accuracy; 0 -> -inf, 1 -> +inf, outside [0, 1] -> NaN."""
    p = P.f32(p)
    lower = P.lt(p, k(0.5))
    pc = P.min_(P.max_(p, k(2.0 ** -149)), k(0.99999994))
    w = P.select(lower, P.add(pc, pc), P.sub(k(2.0), P.add(pc, pc)))
    ya = P.select(lower, P.sub(k(1.0), P.add(pc, pc)), P.sub(P.add(pc, pc), k(1.0)))
    a = P.mul(SQRT2, _erfinv_abs(ya, w))
    r = P.select(lower, P.neg(a), a)
    r = P.select(P.eq(p, k(0.5)), k(0.0), r)
    r = P.select(P.eq(p, k(0.0)), k(-np.inf), P.select(P.eq(p, k(1.0)), INF, r))
    r = P.select(P.lt(p, k(0.0)), NAN, P.select(P.lt(k(1.0), p), NAN, r))
    return P.select(P.eq(p, p), r, p)


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


def _bessel_parts(nu: int, x):
    """(|x|, I_nu(|x|) for |x| <= 8, sqrt(|x|) e^-|x| I_nu(|x|) for |x| > 8)."""
    a = P.abs_(x)
    am = P.min_(a, BESSEL_MID)
    h = P.mul(am, k(0.5))
    z = P.mul(h, h)
    near = M.horner(z, I0_SERIES) if nu == 0 else P.mul(h, M.horner(z, I1_SERIES))
    far = M.horner(P.div(k(1.0), P.max_(a, BESSEL_MID)), BESSEL_I0E if nu == 0 else BESSEL_I1E)
    return a, near, far


def _bessel(nu: int, scaled: bool, x):
    """I_nu(x) or e^-|x| I_nu(x): near: series (times exp(-|x|) when scaled); far: Q(1/|x|)/sqrt|x|
    (times exp(|x|) unscaled, as exp(|x|/2)^2 in two steps so results up to FLT_MAX stay finite).
    I1 is odd (but I1(-0) = +0, torch's); NaN -> NaN."""
    x = P.f32(x)
    a, near, far = _bessel_parts(nu, x)
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
    _, i_near, _ = _bessel_parts(nu, xs)
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
TWO_OVER_PI = c(0x3F22F983)


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
    s, co = M._sincos(a)
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
    lg = P.mul(TWO_OVER_PI, M.log(xs))
    j = _bessel_j_near(nu, xs)
    if nu == 0:
        near = P.fma(lg, j, M.horner(z, BESSEL_RY[0]))
    else:
        near = P.fma(xs, M.horner(z, BESSEL_RY[1]), P.sub(P.mul(lg, j), P.div(TWO_OVER_PI, xs)))
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
