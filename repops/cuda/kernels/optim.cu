// The AdamW step of repops/reference/optim.py (and the CPU's kernels/optim.c) for one
// parameter: adamw_scalars (one thread) advances b1t, b2t and writes the step size and
// sqrt(1 - b2t) to scal; adamw_f32 then updates every element. c: the constants, already
// binary32: 1 - lr wd, 1 - b1, b2, 1 - b2, b1, lr, eps.
#include "common.cuh"

extern "C" __global__ void adamw_scalars(float *b1t, float *b2t, const float *c, float *scal) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float t1 = b1t[0] * c[4], t2 = b2t[0] * c[2];
        scal[0] = c[5] / (1.0f - t1);
        scal[1] = sqrtf(1.0f - t2);
        b1t[0] = rp_canon(t1);
        b2t[0] = rp_canon(t2);
    }
}

extern "C" __global__ void adamw_f32(float *p, const float *g, float *m, float *v, const float *c, const float *scal,
                                     long long n) {
    const float step = scal[0], s2 = scal[1];
    REPOPS_FOR_EACH(i, n) rp_adamw(p + i, g[i], m + i, v + i, c, step, s2);
}
