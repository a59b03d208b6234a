/* The AdamW step of repops/reference/optim.py for one parameter, in one pass: the per-step
 * scalars (b1t, b2t, the step size, sqrt(1 - b2t)) by the same binary32 operations, then
 * every element independently. Constants arrive already rounded to binary32:
 * c[0] = 1 - lr wd, c[1] = 1 - b1, c[2] = b2, c[3] = 1 - b2, c[4] = b1, c[5] = lr, c[6] = eps. */
#include <math.h>

#include "common.h"

static inline __attribute__((always_inline)) void adamw_body(float *p, const float *g, float *m, float *v, long lo,
                                                              long hi, const float *c, float step, float s2) {
    for (long i = lo; i < hi; i++) rp_adamw(p + i, g[i], m + i, v + i, c, step, s2);
}
__attribute__((target("avx2,fma"))) static void adamw_avx2(float *p, const float *g, float *m, float *v, long lo,
                                                            long hi, const float *c, float step, float s2) {
    adamw_body(p, g, m, v, lo, hi, c, step, s2);
}
static void adamw_base(float *p, const float *g, float *m, float *v, long lo, long hi, const float *c, float step,
                       float s2) {
    adamw_body(p, g, m, v, lo, hi, c, step, s2);
}

void repops_adamw_f32(float *p, const float *g, float *m, float *v, float *b1t, float *b2t, const float *c, long n,
                      int nthreads) {
    unsigned old = repops_ieee_enter();
    float t1 = rp_canon(*b1t * c[4]), t2 = rp_canon(*b2t * c[2]);
    float step = rp_canon(c[5] / (1.0f - t1)), s2 = rp_canon(sqrtf(1.0f - t2));
    *b1t = t1;
    *b2t = t2;
    _mm_setcsr(old);
    __builtin_cpu_init();
    int fast = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    long chunk = 1L << 14;
#pragma omp parallel for num_threads(nthreads) schedule(static) if (n > 4 * chunk)
    for (long lo = 0; lo < n; lo += chunk) {
        unsigned o = repops_ieee_enter();
        long hi = lo + chunk < n ? lo + chunk : n;
        if (fast) adamw_avx2(p, g, m, v, lo, hi, c, step, s2);
        else adamw_base(p, g, m, v, lo, hi, c, step, s2);
        _mm_setcsr(o);
    }
}
