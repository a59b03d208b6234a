/* Fused transcendentals: per element, EXACTLY the primitive sequence of
 * repops/reference/math.py (same constants, same order, every step one IEEE operation), so
 * the bits equal the reference's by construction; tests/repops check it. One pass instead
 * of ~20, 8 lanes at a time where the CPU has AVX2+FMA.
 *
 * ldexp(p, n) without a libm call: p*2^n1 is exact (p in [0.7, 1.5), n1 in [-100, 127]
 * keeps it normal) and the second product by 2^n2 rounds once, as ldexp does. */
#include <math.h>

#include "common.h"

#define C(bits) repops_f32(bits##u)
#define EXP_CONSTS \
    const float LOG2E = C(0x3FB8AA3B), LN2_HI = C(0x3F317200), LN2_LO = C(0x35BFBE8E); \
    const float OVER = C(0x42B17218), UNDER = C(0xC2D00000); \
    const float Q0 = C(0x3950AF03), Q1 = C(0x3AB6A7A0), Q2 = C(0x3C088860), Q3 = C(0x3D2AAA70), \
                Q4 = C(0x3E2AAAAB), Q5 = C(0x3F000000);

static inline float pow2i(int e) { return repops_f32((uint32_t)(e + 127) << 23); }

static float exp_one(float x) {
    EXP_CONSTS
    float xc = repops_min(repops_max(x, UNDER), OVER);
    float n = rintf(xc * LOG2E);
    float r = fmaf(-n, LN2_HI, xc);
    r = fmaf(-n, LN2_LO, r);
    float q = fmaf(fmaf(fmaf(fmaf(fmaf(Q0, r, Q1), r, Q2), r, Q3), r, Q4), r, Q5);
    float p = fmaf(r * r, q, r) + 1.0f;
    if (x != x) return repops_canon(x);
    int ni = (int)n;                          /* integral, in [-150, 128] */
    int n1 = ni < -100 ? -100 : (ni > 127 ? 127 : ni);
    float y = (p * pow2i(n1)) * pow2i(ni - n1);
    return OVER <= x ? INFINITY : y;
}

__attribute__((target("avx2,fma")))
static void exp_avx2(const float *x, float *out, long n) {
    EXP_CONSTS
    long i = 0;
    const __m256 vover = _mm256_set1_ps(OVER), vunder = _mm256_set1_ps(UNDER), one = _mm256_set1_ps(1.0f);
    const __m256i lo = _mm256_set1_epi32(-100), hi = _mm256_set1_epi32(127), bias = _mm256_set1_epi32(127);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        /* clamp; a NaN lane is patched at the end, and the clamp bounds are not zeros,
         * so max/min's NaN and signed-zero rules do not arise */
        __m256 xc = _mm256_min_ps(_mm256_max_ps(v, vunder), vover);
        __m256 nf = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 neg = _mm256_xor_ps(nf, _mm256_set1_ps(-0.0f));
        __m256 r = _mm256_fmadd_ps(neg, _mm256_set1_ps(LN2_HI), xc);
        r = _mm256_fmadd_ps(neg, _mm256_set1_ps(LN2_LO), r);
        __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(Q0), r, _mm256_set1_ps(Q1));
        q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(Q2));
        q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(Q3));
        q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(Q4));
        q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(Q5));
        __m256 p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r), one);
        __m256i ni = _mm256_cvtps_epi32(nf);
        __m256i n1 = _mm256_min_epi32(_mm256_max_epi32(ni, lo), hi);
        __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
        __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, n1), bias), 23));
        __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
        y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(vover, v, _CMP_LE_OQ));
        y = _mm256_blendv_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(out + i, y);
    }
    for (; i < n; i++) out[i] = exp_one(x[i]);
}

void repops_exp_f32(const float *x, float *out, long n, int nthreads) {
    long chunk = 1L << 15;
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#pragma omp parallel for num_threads(nthreads) schedule(static) if (n > 4 * chunk)
    for (long lo = 0; lo < n; lo += chunk) {
        unsigned old = repops_ieee_enter();
        long hi = lo + chunk < n ? lo + chunk : n;
        if (avx2) exp_avx2(x + lo, out + lo, hi - lo);
        else for (long i = lo; i < hi; i++) out[i] = exp_one(x[i]);
        _mm_setcsr(old);
    }
}
