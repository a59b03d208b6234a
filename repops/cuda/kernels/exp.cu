// exp fused: per element EXACTLY the primitive sequence of repops/reference/math.py (and
// of the CPU kernel transcendental.c). ldexp(p, n) as two products by powers of two: the
// first is exact (p in [0.7, 1.5), n1 in [-100, 127]), the second rounds once.
#include "common.cuh"

extern "C" __global__ void exp_f32(const float *x, float *out, long long n) {
    const float LOG2E = repops_f32(0x3FB8AA3Bu), LN2_HI = repops_f32(0x3F317200u), LN2_LO = repops_f32(0x35BFBE8Eu);
    const float OVER = repops_f32(0x42B17218u), UNDER = repops_f32(0xC2D00000u);
    REPOPS_FOR_EACH(i, n) {
        float v = x[i];
        float xc = repops_min(repops_max(v, UNDER), OVER);
        float k = rintf(xc * LOG2E);
        float r = __fmaf_rn(-k, LN2_HI, xc);
        r = __fmaf_rn(-k, LN2_LO, r);
        float q = __fmaf_rn(repops_f32(0x3950AF03u), r, repops_f32(0x3AB6A7A0u));
        q = __fmaf_rn(q, r, repops_f32(0x3C088860u));
        q = __fmaf_rn(q, r, repops_f32(0x3D2AAA70u));
        q = __fmaf_rn(q, r, repops_f32(0x3E2AAAABu));
        q = __fmaf_rn(q, r, repops_f32(0x3F000000u));
        float p = __fmaf_rn(r * r, q, r) + 1.0f;
        int ki = v != v ? 0 : (int)k;                  // integral, in [-150, 128]
        int k1 = ki < -100 ? -100 : (ki > 127 ? 127 : ki);
        float y = (p * __uint_as_float((unsigned)(k1 + 127) << 23)) * __uint_as_float((unsigned)(ki - k1 + 127) << 23);
        out[i] = v != v ? repops_canon(v) : (OVER <= v ? __uint_as_float(0x7F800000u) : y);
    }
}
