"""Gamma and error-function families as fixed sequences of the binary32 primitives (docs/NUMERICS.md
§8, "Inverse trigonometric, hyperbolic and special functions"): lgamma, digamma, polygamma(n >= 1),
erfc, erfcx, log_ndtr, erfinv, ndtri (Bessel functions: bessel.py). Polynomials are least-squares fits
in float64 against mpmath rounded to binary32 (benchmarks/repops_fit_special.py); reductions are
exact where they can be (x - n, x - floor(x), 0.5 - g by Sterbenz). Special values are torch's."""
from __future__ import annotations

import math

import numpy as np

from . import math as M
from . import prims as P
from .activations import log1p
from .math import c
from .nn import SQRT1_2
from .math import signbit
from .trig import PI_HI

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


def _erfc_near(x):
    """erfc(x) = 1 - x E(x^2) for |x| < 1/2."""
    return P.sub(k(1.0), P.mul(x, M.horner(P.mul(x, x), ERF_E)))


def erfc(x):
    """erfc, complement computed directly: |x| < 1/2: 1 - x E(x^2); x >= 1/2: p = exp(-x2) erfcx(x),
    p - e p (the square's residual, _exp_sq); x <= -1/2: 2 - erfc(|x|). +inf -> +0, -inf -> 2."""
    x = P.f32(x)
    a = P.abs_(x)
    small = _erfc_near(x)
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
    small = P.mul(grown, _erfc_near(P.select(P.lt(a, k(0.5)), x, k(0.0))))
    tail = _erfcx_tail(P.max_(a, k(0.5)))
    neg = P.sub(P.mul(k(2.0), grown), tail)
    y = P.select(P.lt(a, k(0.5)), small, P.select(P.lt(x, k(0.0)), neg, tail))
    y = P.select(P.lt(x, P.neg(ERFCX_INF)), INF, y)
    return P.select(P.eq(x, x), y, x)


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
    a = P.mul(M.SQRT2, _erfinv_abs(ya, w))
    r = P.select(lower, P.neg(a), a)
    r = P.select(P.eq(p, k(0.5)), k(0.0), r)
    r = P.select(P.eq(p, k(0.0)), k(-np.inf), P.select(P.eq(p, k(1.0)), INF, r))
    r = P.select(P.lt(p, k(0.0)), NAN, P.select(P.lt(k(1.0), p), NAN, r))
    return P.select(P.eq(p, p), r, p)
