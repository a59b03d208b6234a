/* Per-element sequences of RepOps' transcendentals and activations, written ONCE for both
 * compiled backends: gcc (repops/cpu/kernels, auto-vectorized) and CUDA C (NVRTC and the
 * CPU emulator, repops/cuda/kernels, which define REPOPS_CUDA first).
 *
 * Each function is, step for step, the primitive sequence of the numpy reference
 * (repops/reference/math.py, repops/reference/nn.py: the spec): the same binary32
 * constants, the same operations in the same order, each one IEEE operation rounded once
 * (no contraction: gcc -ffp-contract=off, NVRTC --fmad=false; fma only as RP_FMA), so the
 * bits equal the reference's by construction, and the tests check it. Intermediate NaNs
 * may carry other payloads than the reference's canonical one; no step reads a NaN's sign
 * or payload, and every kernel canonicalises what it stores (rp_canon).
 *
 * Written branch-free (ternaries of side-effect-free operands) so gcc if-converts and
 * vectorizes the loops that call them (-fno-trapping-math lets it evaluate both arms). */
#ifndef REPOPS_ELEMENTWISE_H
#define REPOPS_ELEMENTWISE_H

#ifdef REPOPS_CUDA
#define RP_FN __device__ __forceinline__
#define RP_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define RP_F32(u) __uint_as_float(u)
#define RP_U32(f) __float_as_uint(f)
#define RP_INF __uint_as_float(0x7F800000u)
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define RP_FN static inline __attribute__((always_inline))
#ifdef REPOPS_FMA_PROBE /* tests: every spec fma a rounded multiply and add, so any fma left was made up */
#define RP_FMA(a, b, c) ((a) * (b) + (c))
#else
#define RP_FMA(a, b, c) fmaf((a), (b), (c))
#endif
RP_FN float rp_f32_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
RP_FN uint32_t rp_u32_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
#define RP_F32(u) rp_f32_of(u)
#define RP_U32(f) rp_u32_of(f)
#define RP_INF INFINITY
#endif
#define RP_C(bits) RP_F32(bits##u)
#define RP_NAN RP_C(0x7FC00000)

RP_FN float rp_canon(float x) { return x != x ? RP_NAN : x; }

/* IEEE 754-2019 maximum / minimum: NaN propagates, -0 < +0. */
RP_FN float rp_max(float a, float b) {
    float m = a > b ? a : b;
    m = a == b ? ((RP_U32(a) >> 31) ? b : a) : m;
    return ((a != a) | (b != b)) ? RP_NAN : m;
}
RP_FN float rp_min(float a, float b) {
    float m = a < b ? a : b;
    m = a == b ? ((RP_U32(a) >> 31) ? a : b) : m;
    return ((a != a) | (b != b)) ? RP_NAN : m;
}

/* 2^e for e in [-126, 127], exact. */
RP_FN float rp_pow2(int e) { return RP_F32((unsigned)(e + 127) << 23); }

/* exp's polynomial and scaling (math.exp_scaled): p = 1 + (r + r^2 Q(r)), then p 2^n as
 * (p 2^n1) 2^n2 with n1 = clamp(n, -100, 127): the first product is exact, the second rounds
 * once, which is ldexp's rounding. */
RP_FN float rp_exp_scaled(float r, int n) {
    float q = RP_FMA(RP_C(0x3950AF03), r, RP_C(0x3AB6A7A0));
    q = RP_FMA(q, r, RP_C(0x3C088860));
    q = RP_FMA(q, r, RP_C(0x3D2AAA70));
    q = RP_FMA(q, r, RP_C(0x3E2AAAAB));
    q = RP_FMA(q, r, RP_C(0x3F000000));
    float p = RP_FMA(r * r, q, r) + 1.0f;
    int n1 = n < -100 ? -100 : (n > 127 ? 127 : n);
    return (p * rp_pow2(n1)) * rp_pow2(n - n1);
}

/* exp (math.exp): clamp, n = rint(x log2e), two-part Cody-Waite, then rp_exp_scaled. */
RP_FN float rp_exp(float x) {
    const float OVER = RP_C(0x42B17218), UNDER = RP_C(0xC2D00000);
    /* = min(max(x, UNDER), OVER) for every non-NaN x (the bounds are not zeros); a NaN
     * gives UNDER here and NaN at the end, as in the reference */
    float xc = x > UNDER ? x : UNDER;
    xc = xc < OVER ? xc : OVER;
    float n = rintf(xc * RP_C(0x3FB8AA3B));
    float r = RP_FMA(-n, RP_C(0x3F317200), xc);
    r = RP_FMA(-n, RP_C(0x35BFBE8E), r);
    float y = rp_exp_scaled(r, (int)n); /* n integral, in [-150, 128] */
    y = OVER <= x ? RP_INF : y;
    return x != x ? RP_NAN : y;
}

/* log's reduction (math._log_mantissa): x = m 2^e exactly (m in [1, 2); what frexp1's exact
 * binary search gives), m halved above sqrt2; 1 stands in for x not finite and positive. */
RP_FN void rp_log_mantissa(float x, float *m_out, float *e_out) {
    float safe = (0.0f < x) ? (x < RP_INF ? x : 1.0f) : 1.0f;
    unsigned u = RP_U32(safe);
    int sub = u < 0x00800000u; /* subnormal: scale by 2^64 first (exact) */
    unsigned us = RP_U32(safe * RP_C(0x5F800000));
    unsigned v = sub ? us : u;
    float m = RP_F32((v & 0x007FFFFFu) | 0x3F800000u);
    float e = (float)((int)(v >> 23) - 127 - (sub ? 64 : 0));
    int up = RP_C(0x3FB504F3) < m;
    *m_out = up ? m * 0.5f : m;
    *e_out = up ? e + 1.0f : e;
}

/* log (math.log): rp_log_mantissa, f = m - 1, s = f/(2+f), degree-3 Horner in s^2, fdlibm's
 * recombination. */
RP_FN float rp_log(float x) {
    float m, e;
    rp_log_mantissa(x, &m, &e);
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float h = RP_FMA(RP_C(0x3E6F265F), z, RP_C(0x3E922CF4));
    h = RP_FMA(h, z, RP_C(0x3ECCCCF8));
    h = RP_FMA(h, z, RP_C(0x3F2AAAAB));
    float R = z * h;
    float hfsq = (0.5f * f) * f;
    float t = RP_FMA(e, RP_C(0x35BFBE8E), s * (hfsq + R));
    float y = RP_FMA(e, RP_C(0x3F317200), -((hfsq - t) - f));
    y = x == RP_INF ? RP_INF : y;
    y = x == 0.0f ? -RP_INF : y;
    y = x < 0.0f ? RP_NAN : y;
    return x == x ? y : RP_NAN;
}

/* sigmoid (math.sigmoid): e = exp(-|x|); 1/(1+e) or e/(1+e). */
RP_FN float rp_sigmoid(float x) {
    float e = rp_exp(-fabsf(x));
    float d = 1.0f + e;
    return x < 0.0f ? e / d : 1.0f / d;
}

/* erf (math.erf): x P(x^2) below 1; 1 - exp(-x^2) R(1/|x|) up to 3.92; 1 beyond; sign restored. */
RP_FN float rp_erf(float x) {
    float a = fabsf(x), z = x * x;
    float p = RP_FMA(RP_C(0x38A6609F), z, RP_C(0xBA52A0F1));
    p = RP_FMA(p, z, RP_C(0x3BAA1B19));
    p = RP_FMA(p, z, RP_C(0xBCDBFFDB));
    p = RP_FMA(p, z, RP_C(0x3DE716B2));
    p = RP_FMA(p, z, RP_C(0xBEC093A0));
    p = RP_FMA(p, z, RP_C(0x3F906EBB));
    float small = x * p;
    float w = 1.0f / rp_max(a, 1.0f);
    float q = RP_FMA(RP_C(0xBC02FDB5), w, RP_C(0x3CAD6637));
    q = RP_FMA(q, w, RP_C(0x3D22EF03));
    q = RP_FMA(q, w, RP_C(0xBE85C703));
    q = RP_FMA(q, w, RP_C(0x3F02DD89));
    q = RP_FMA(q, w, RP_C(0xBEF4CC16));
    q = RP_FMA(q, w, RP_C(0x3D3351B8));
    q = RP_FMA(q, w, RP_C(0x3F0F0C0C));
    q = RP_FMA(q, w, RP_C(0x3996715C));
    float tail = 1.0f - rp_exp(-z) * q;
    tail = a < RP_C(0x407AE148) ? tail : 1.0f;
    float big = x < 0.0f ? -tail : tail;
    float y = a < 1.0f ? small : big;
    return x == x ? y : RP_NAN;
}

/* tanh (math.tanh): four pieces, selected in the reference's order. A middle piece is
 * c_hi + fma(t, P(t), c_lo), t = |x| - C0, P of degree 9 (Horner from the highest). */
#define RP_TANH_PIECE(a, c0, hi, lo, k0, k1, k2, k3, k4, k5, k6, k7, k8, k9)                          \
    (RP_FMA((a) - RP_C(c0),                                                                           \
            RP_FMA(RP_FMA(RP_FMA(RP_FMA(RP_FMA(RP_FMA(RP_FMA(RP_FMA(RP_FMA(RP_C(k0), (a) - RP_C(c0), RP_C(k1)), \
                (a) - RP_C(c0), RP_C(k2)), (a) - RP_C(c0), RP_C(k3)), (a) - RP_C(c0), RP_C(k4)),        \
                (a) - RP_C(c0), RP_C(k5)), (a) - RP_C(c0), RP_C(k6)), (a) - RP_C(c0), RP_C(k7)),       \
                (a) - RP_C(c0), RP_C(k8)), (a) - RP_C(c0), RP_C(k9)),                                   \
            RP_C(lo)) + RP_C(hi))
RP_FN float rp_tanh(float x) {
    const float ONE = RP_C(0x4111999A);
    float a = fabsf(x), z = x * x;
    float p = RP_FMA(RP_C(0xBA53BB26), z, RP_C(0x3B540429));
    p = RP_FMA(p, z, RP_C(0xBC0F7130));
    p = RP_FMA(p, z, RP_C(0x3CB300F5));
    p = RP_FMA(p, z, RP_C(0xBD5D0C09));
    p = RP_FMA(p, z, RP_C(0x3E088884));
    p = RP_FMA(p, z, RP_C(0xBEAAAAAB));
    float small = RP_FMA(x * z, p, x);
    float e = rp_exp(2.0f * rp_min(a, ONE));
    float y = 1.0f - 2.0f / (e + 1.0f);
    y = a < ONE ? y : 1.0f;
    y = a < RP_C(0x3FB80000) ? RP_TANH_PIECE(a, 0x3FA40000, 0x3F5B5866, 0xB10976EB, 0xBA4F360E, 0x3ABEF0AD, 0xB9E23272,
                                              0xBB9E83F1, 0x3C67D333, 0xBC86B314, 0xBC7BCFD7, 0x3DDA3B94, 0xBE694384,
                                              0x3E881F46) : y;
    y = a < RP_C(0x3F900000) ? RP_TANH_PIECE(a, 0x3F800000, 0x3F42F7D6, 0xB2AEB0C7, 0x39074DD7, 0x3B52E841, 0xBBE12F91,
                                              0x3B1FD4F8, 0x3C9B0302, 0xBD3DACE2, 0x3CE3048B, 0x3DD42E91, 0xBEA3C361,
                                              0x3ED706E0) : y;
    y = a < RP_C(0x3F600000) ? RP_TANH_PIECE(a, 0x3F400000, 0x3F22991F, 0x322A5E45, 0x3B9004A3, 0xBB0720F3, 0xBC2A570D,
                                              0x3CB1554D, 0xBA82E12E, 0xBD83256F, 0x3DCC4AB3, 0x3D2B402C, 0xBEC201EA,
                                              0x3F18B9D9) : y;
    y = x < 0.0f ? -y : y;
    y = a < RP_C(0x3F200000) ? small : y;
    y = x == 0.0f ? x : y;
    return x == x ? y : RP_NAN;
}

/* sin and cos (math._sincos): above pi/4, r = x - n pi/2 by Payne-Hanek in exact float digits
 * (|x| = M 2^E times 2/pi to 192 bits in base 2^12, modulo 4) as rh + rl; below, r = x;
 * quadrant q = n mod 4, degree-3 polynomials with rl's correction, signs by quadrant and by x.
 * Every line is one step of the reference, in its order. */
RP_FN float rp_two_over_pi_digit(int j) { /* d_j of 2/pi = sum d_j 2^(-12 j), 0 outside 1..16 */
    return j == 1 ? 2607.0f : j == 2 ? 2435.0f : j == 3 ? 1764.0f : j == 4 ? 3652.0f : j == 5 ? 338.0f
         : j == 6 ? 2556.0f : j == 7 ? 629.0f : j == 8 ? 2001.0f : j == 9 ? 3923.0f : j == 10 ? 1245.0f
         : j == 11 ? 3085.0f : j == 12 ? 2914.0f : j == 13 ? 2393.0f : j == 14 ? 2364.0f : j == 15 ? 1081.0f
         : j == 16 ? 65.0f : 0.0f;
}
RP_FN float rp_mod4(float v) { return v - 4.0f * floorf(v * 0.25f); }
RP_FN float rp_hi12(float v) { return floorf(v * RP_C(0x39800000)); } /* v div 2^12 */
RP_FN float rp_lo12(float v, float hi) { return v - hi * 4096.0f; }
RP_FN void rp_two_sum(float a, float b, float *s, float *e) {
    float t = a + b, bb = t - a;
    *s = t;
    *e = (a - (t - bb)) + (b - bb);
}
RP_FN void rp_sincos(float x, float *sin_out, float *cos_out) {
    float a = fabsf(x);
    int small = a < RP_C(0x3F490FDB), finite = a < RP_INF;
    float ar = small ? 1.0f : (finite ? a : 1.0f);
    unsigned u = RP_U32(ar);
    float big = RP_F32((u & 0x7FFFFFu) | 0x4B000000u), ee = (float)((int)(u >> 23) - 150);
    float d = floorf(ee / 12.0f);
    float g = ee - 12.0f * d;
    float scale = rp_pow2((int)g);
    float mh = rp_hi12(big), ml = rp_lo12(big, mh);
    float dig[9], lh[8], ll[8], hh[8], hl[8], nd[7];
    for (int i = 0; i < 9; i++) dig[i] = rp_two_over_pi_digit((int)d + i);
    for (int i = 0; i < 8; i++) {
        float p = ml * dig[i], q = mh * dig[i + 1];
        lh[i] = rp_hi12(p); ll[i] = rp_lo12(p, lh[i]);
        hh[i] = rp_hi12(q); hl[i] = rp_lo12(q, hh[i]);
    }
    float carry = 0.0f;
    for (int i = 6; i >= 0; i--) {
        float t = ((ll[i] + hl[i]) + (lh[i + 1] + hh[i + 1])) + carry;
        carry = rp_hi12(t);
        nd[i] = rp_lo12(t, carry);
    }
    float z = rp_mod4(rp_mod4(nd[0] * scale) + rp_mod4((nd[1] * scale) * RP_C(0x39800000)));
    float n = rintf(z + (nd[2] * scale) * RP_C(0x33800000));
    float p2 = (RP_FMA(nd[2], 4096.0f, nd[3]) * scale) * RP_C(0x2D800000);   /* 2^-36 */
    float p4 = (RP_FMA(nd[4], 4096.0f, nd[5]) * scale) * RP_C(0x21800000);   /* 2^-60 */
    float s1, e1, s2, e2, fh, e3;
    rp_two_sum(z - n, p2, &s1, &e1);
    rp_two_sum(s1, p4, &s2, &e2);
    rp_two_sum(s2, (nd[6] * scale) * RP_C(0x1B800000), &fh, &e3);            /* 2^-72 */
    float fl = (e1 + e2) + e3;
    float rh = fh * RP_C(0x3FC90FDB);
    float rl = RP_FMA(fh, RP_C(0x3FC90FDB), -rh) + RP_FMA(fh, RP_C(0xB33BBD2E), fl * RP_C(0x3FC90FDB));
    rh = small ? a : rh;
    rl = small ? 0.0f : rl;
    n = small ? 0.0f : n;
    float zz = rh * rh, hz = 0.5f * zz;
    float sp = RP_FMA(RP_C(0x363665BB), zz, RP_C(0xB95007B0));
    sp = RP_FMA(sp, zz, RP_C(0x3C088884));
    sp = RP_FMA(sp, zz, RP_C(0xBE2AAAAB));
    float s = rh + RP_FMA(rh * zz, sp, RP_FMA(-hz, rl, rl));
    float cp = RP_FMA(RP_C(0xB4920B86), zz, RP_C(0x37D0085B));
    cp = RP_FMA(cp, zz, RP_C(0xBAB60B5C));
    cp = RP_FMA(cp, zz, RP_C(0x3D2AAAAB));
    float w = 1.0f - hz;
    float c = w + (((1.0f - w) - hz) + RP_FMA(zz * zz, cp, -(rh * rl)));
    float q = n - 4.0f * floorf(n * 0.25f);
    int odd = (q - 2.0f * floorf(q * 0.5f)) == 1.0f;
    float sv = odd ? c : s, cv = odd ? s : c;
    sv = 2.0f <= q ? -sv : sv;
    cv = (q == 1.0f) | (q == 2.0f) ? -cv : cv;
    sv = x < 0.0f ? -sv : (x == 0.0f ? x : sv);
    *sin_out = finite ? sv : RP_NAN;
    *cos_out = finite ? cv : RP_NAN;
}
RP_FN float rp_sin(float x) { float s, c; rp_sincos(x, &s, &c); return s; }
RP_FN float rp_cos(float x) { float s, c; rp_sincos(x, &s, &c); return c; }

/* the general power (activations.pow): y log|x| in two floats (math.log_hilo, the product's
 * error by fma, math.exp_hilo), then C99's special cases; step for step the reference. */
RP_FN float rp_pow(float x, float y) {
    float a = fabsf(x), m, e;
    rp_log_mantissa(a, &m, &e);
    float f = m - 1.0f, dh, dl;
    rp_two_sum(2.0f, f, &dh, &dl);
    float sh = f / dh;
    float sl = RP_FMA(-sh, dl, RP_FMA(-sh, dh, f)) / dh;
    float zh = sh * sh, uh = sh * zh;
    float ul = RP_FMA(sh, RP_FMA(sh, sh, -zh), RP_FMA(sh, zh, -uh));
    const float T_HI = RP_C(0x3F2AAAAB);
    float th = uh * T_HI;
    float t = RP_FMA(RP_C(0x3E088889), zh, RP_C(0x3E1D89D9));
    t = RP_FMA(t, zh, RP_C(0x3E3A2E8C));
    t = RP_FMA(t, zh, RP_C(0x3E638E39));
    t = RP_FMA(t, zh, RP_C(0x3E924925));
    t = RP_FMA(t, zh, RP_C(0x3ECCCCCD));
    float rest = RP_FMA(uh, RP_FMA(zh, t, RP_C(0xB2AAAAAB)), RP_FMA(ul, T_HI, RP_FMA(uh, T_HI, -th)));
    rest = RP_FMA(zh + zh, sl, rest);
    float hi, e1, e2;
    rp_two_sum(e * RP_C(0x3F317200), sh + sh, &hi, &e1);
    rp_two_sum(hi, th, &hi, &e2);
    float lo = (e1 + e2) + (RP_FMA(e, RP_C(0x35BFBE8E), sl + sl) + rest);
    float s = hi + lo;
    lo = lo - (s - hi);
    hi = s;
    int positive = 0.0f < a;
    hi = positive ? (a < RP_INF ? hi : a) : (a == 0.0f ? -RP_INF : a);
    lo = positive ? (a < RP_INF ? lo : 0.0f) : 0.0f;
    /* exp_hilo(ph, pl) */
    float ph = y * hi;
    float pl = RP_FMA(y, lo, RP_FMA(y, hi, -ph));
    float xc = rp_min(rp_max(ph, RP_C(0xC2D00000)), 89.0f);
    float n = rintf(xc * RP_C(0x3FB8AA3B));
    float r = RP_FMA(-n, RP_C(0x3F317200), xc);
    r = RP_FMA(-n, RP_C(0x35BFBE8E), r) + (fabsf(ph) < 89.0f ? pl : 0.0f);
    float res = rp_exp_scaled(r, n == n ? (int)n : 0); /* integral, in [-150, 128]; to_int32 of a NaN is 0 */
    res = 89.0f <= ph ? RP_INF : res;
    /* C99's special cases */
    int integral = truncf(y) == y;
    int even = truncf(y * 0.5f) * 2.0f == y;
    float odd_r = even ? res : -res;
    float negative = integral ? odd_r : (x == -RP_INF ? res : RP_NAN);
    float minus_zero = (1.0f / x < 0.0f) ? (integral ? odd_r : res) : res;
    res = x < 0.0f ? negative : minus_zero;
    res = fabsf(y) == RP_INF ? (fabsf(x) == 1.0f ? 1.0f : res) : res;
    return y == 0.0f ? 1.0f : (x == 1.0f ? 1.0f : res);
}

/* -- activations (repops/reference/nn.py) and their gradients ------------------------------------ */
#define RP_SQRT1_2 RP_C(0x3F3504F3)      /* RN(1/sqrt 2) */
#define RP_INV_SQRT_2PI RP_C(0x3ECC422A) /* RN(1/sqrt(2 pi)) */
#define RP_SQRT_2_OVER_PI RP_C(0x3F4C422A) /* RN(sqrt(2/pi)) */
#define RP_GELU_KAPPA RP_C(0x3D372713)   /* RN(0.044715) */
#define RP_GELU_3KAPPA RP_C(0x3E095D4F)  /* RN(3 * 0.044715) */

RP_FN float rp_silu(float x) { return x * rp_sigmoid(x); }
RP_FN float rp_silu_backward(float g, float x) {
    float s = rp_sigmoid(x);
    return g * (s * (1.0f + x * (1.0f - s)));
}
RP_FN float rp_gelu(float x) { return (0.5f * x) * (1.0f + rp_erf(x * RP_SQRT1_2)); }
RP_FN float rp_gelu_backward(float g, float x) {
    float cdf = 0.5f * (1.0f + rp_erf(x * RP_SQRT1_2));
    float pdf = rp_exp(-0.5f * (x * x)) * RP_INV_SQRT_2PI;
    return g * (cdf + x * pdf);
}
RP_FN float rp_gelu_tanh(float x) {
    float u = RP_SQRT_2_OVER_PI * (x + RP_GELU_KAPPA * ((x * x) * x));
    return (0.5f * x) * (1.0f + rp_tanh(u));
}
RP_FN float rp_gelu_tanh_backward(float g, float x) {
    float x2 = x * x;
    float t = rp_tanh(RP_SQRT_2_OVER_PI * (x + RP_GELU_KAPPA * (x2 * x)));
    float left = 0.5f * (1.0f + t);
    float right = (((0.5f * x) * (1.0f - t * t)) * RP_SQRT_2_OVER_PI) * (1.0f + RP_GELU_3KAPPA * x2);
    return g * (left + right);
}
/* One element of the AdamW step (repops/reference/optim.py): c = the binary32 constants
 * 1 - lr wd, 1 - b1, b2, 1 - b2, b1, lr, eps; step = lr / (1 - b1t), s2 = sqrt(1 - b2t) of this step. */
RP_FN void rp_adamw(float *p, float g, float *m, float *v, const float *c, float step, float s2) {
    float pi = *p * c[0];
    float mi = *m + c[1] * (g - *m);
    float vi = *v * c[2];
    vi = vi + c[3] * (g * g);
    pi = pi - (mi / (sqrtf(vi) / s2 + c[6])) * step;
    *p = rp_canon(pi);
    *m = rp_canon(mi);
    *v = rp_canon(vi);
}

/* One interleaved pair of the rotary embedding (repops/reference/nn.py rope, rope_backward):
 * r0 = x0 c + x1 t0, r1 = x1 c + x0 t1, (t0, t1) = (-s, s) forward, (s, -s) backward, and then
 * + z: +0 backward (the composition's slice_backward hands a -0 gradient on as +0), -0 forward
 * (x + -0 is x for every x: no step). */
RP_FN void rp_rope(int backward, float x0, float x1, float c, float s, float *r0, float *r1) {
    const float t0 = backward ? s : -s, t1 = backward ? -s : s, z = backward ? 0.0f : -0.0f;
    *r0 = rp_canon((x0 * c + x1 * t0) + z);
    *r1 = rp_canon((x1 * c + x0 * t1) + z);
}

RP_FN float rp_tanh_backward(float g, float y) { return g * (1.0f - y * y); }
RP_FN float rp_sigmoid_backward(float g, float y) { return g * (y * (1.0f - y)); }
#endif
