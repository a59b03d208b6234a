// The AdamW step of repops/reference/optim.py (and the CPU's kernels/optim.c). adamw_scalars
// (one thread) advances b1t, b2t and writes the step size and sqrt(1 - b2t) to scal;
// adamw_f32 then updates every element. c: the constants, already binary32: 1 - lr wd,
// 1 - b1, b2, 1 - b2, b1, lr, eps.
// The _foreach pair does the same for up to RP_ADAMW_SLOTS parameters of one group in two
// launches (repops.reference.optim.adamw_foreach): the parameters' pointers are kernel
// arguments (no pointer table to upload), blockIdx.y picks a parameter; unused slots have n = 0.
#include "common.cuh"

#define RP_ADAMW_SLOTS 32
#define RP_EACH_SLOT(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)
// a slot's kernel arguments (each with its leading comma), and its entry in a local table
#define RP_SCALAR_SLOT(i) , float *b1t##i, float *b2t##i
#define RP_ELEMENT_SLOT(i) , float *p##i, const float *g##i, float *m##i, float *v##i, long long n##i
#define RP_ADAMW_SCALAR_SLOTS RP_EACH_SLOT(RP_SCALAR_SLOT)
#define RP_ADAMW_ELEMENT_SLOTS RP_EACH_SLOT(RP_ELEMENT_SLOT)

__device__ __forceinline__ void rp_adamw_scalars(float *b1t, float *b2t, const float *c, float *scal) {
    float t1 = b1t[0] * c[4], t2 = b2t[0] * c[2];
    scal[0] = c[5] / (1.0f - t1);
    scal[1] = sqrtf(1.0f - t2);
    b1t[0] = rp_canon(t1);
    b2t[0] = rp_canon(t2);
}

extern "C" __global__ void adamw_scalars(float *b1t, float *b2t, const float *c, float *scal) {
    if (blockIdx.x == 0 && threadIdx.x == 0) rp_adamw_scalars(b1t, b2t, c, scal);
}

extern "C" __global__ void adamw_f32(float *p, const float *g, float *m, float *v, const float *c, const float *scal,
                                     long long n) {
    const float step = scal[0], s2 = scal[1];
    REPOPS_FOR_EACH(i, n) rp_adamw(p + i, g[i], m + i, v + i, c, step, s2);
}

// scal: 2 per slot. One thread: the scalars are a few operations per parameter.
extern "C" __global__ void adamw_foreach_scalars(const float *c, float *scal, int count RP_ADAMW_SCALAR_SLOTS) {
#define RP_B1(i) b1t##i,
#define RP_B2(i) b2t##i,
    float *b1[RP_ADAMW_SLOTS] = {RP_EACH_SLOT(RP_B1)}, *b2[RP_ADAMW_SLOTS] = {RP_EACH_SLOT(RP_B2)};
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int s = 0; s < count && s < RP_ADAMW_SLOTS; ++s) rp_adamw_scalars(b1[s], b2[s], c, scal + 2 * s);
}

// grid (blocks, slots used): blockIdx.y's parameter, grid-stride over its elements
extern "C" __global__ void adamw_foreach_f32(const float *c, const float *scal RP_ADAMW_ELEMENT_SLOTS) {
    float *p = 0, *m = 0, *v = 0;
    const float *g = 0;
    long long n = 0;
    switch (blockIdx.y) {
#define RP_PICK(i) case i: p = p##i; g = g##i; m = m##i; v = v##i; n = n##i; break;
        RP_EACH_SLOT(RP_PICK)
    }
    const float step = scal[2 * blockIdx.y], s2 = scal[2 * blockIdx.y + 1];
    REPOPS_FOR_EACH(i, n) rp_adamw(p + i, g[i], m + i, v + i, c, step, s2);
}
