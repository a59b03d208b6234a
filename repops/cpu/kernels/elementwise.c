/* Elementwise primitives with the hardware's IEEE operation (same bits as the reference),
 * NaN canonicalised in the same pass. Inputs are contiguous and already broadcast. */
#include <math.h>

#include "common.h"

__attribute__((target("avx2,fma")))
static void fma_avx2(const float *a, const float *b, const float *c, float *out, long lo, long hi) {
    const __m256 canon_nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
    long i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), _mm256_loadu_ps(c + i));
        __m256 nan = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
        _mm256_storeu_ps(out + i, _mm256_blendv_ps(r, canon_nan, nan));
    }
    for (; i < hi; i++) out[i] = repops_canon(fmaf(a[i], b[i], c[i]));
}

static void fma_scalar(const float *a, const float *b, const float *c, float *out, long lo, long hi) {
    for (long i = lo; i < hi; i++) out[i] = repops_canon(fmaf(a[i], b[i], c[i]));
}

void repops_fma_f32(const float *a, const float *b, const float *c, float *out, long n, int nthreads) {
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    long chunk = 1L << 16;
#pragma omp parallel for num_threads(nthreads) schedule(static) if (n > 4 * chunk)
    for (long lo = 0; lo < n; lo += chunk) {
        unsigned old = repops_ieee_enter();
        long hi = lo + chunk < n ? lo + chunk : n;
        if (avx2) fma_avx2(a, b, c, out, lo, hi); else fma_scalar(a, b, c, out, lo, hi);
        _mm_setcsr(old);
    }
}
