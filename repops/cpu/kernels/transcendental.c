/* Fused transcendentals: per element, EXACTLY the primitive sequence of
 * repops/reference/math.py (same constants, same order, every step one IEEE operation:
 * SSE binary32 arithmetic, fmaf, rintf in round-to-nearest, ldexpf), so the bits equal the
 * reference's by construction; tests/repops check it. One pass instead of ~20. */
#include <math.h>

#include "common.h"

#define C(bits) repops_f32(bits##u)

static float exp_one(float x) {
    const float LOG2E = C(0x3FB8AA3B), LN2_HI = C(0x3F317200), LN2_LO = C(0x35BFBE8E);
    const float OVER = C(0x42B17218), UNDER = C(0xC2D00000);
    float xc = repops_min(repops_max(x, UNDER), OVER);
    float n = rintf(xc * LOG2E);
    float r = fmaf(-n, LN2_HI, xc);
    r = fmaf(-n, LN2_LO, r);
    float q = C(0x3950AF03);                  /* EXP_Q, highest degree first */
    q = fmaf(q, r, C(0x3AB6A7A0));
    q = fmaf(q, r, C(0x3C088860));
    q = fmaf(q, r, C(0x3D2AAA70));
    q = fmaf(q, r, C(0x3E2AAAAB));
    q = fmaf(q, r, C(0x3F000000));
    float p = fmaf(r * r, q, r) + 1.0f;
    int ni = (n != n) ? 0 : (int)n;           /* to_int32_rne of an integral value in range */
    float y = ldexpf(p, ni);
    if (OVER <= x) y = INFINITY;
    return repops_canon(y);
}

void repops_exp_f32(const float *x, float *out, long n, int nthreads) {
    long chunk = 1L << 15;
#pragma omp parallel for num_threads(nthreads) schedule(static) if (n > 4 * chunk)
    for (long lo = 0; lo < n; lo += chunk) {
        unsigned old = repops_ieee_enter();
        long hi = lo + chunk < n ? lo + chunk : n;
        for (long i = lo; i < hi; i++) out[i] = exp_one(x[i]);
        _mm_setcsr(old);
    }
}
