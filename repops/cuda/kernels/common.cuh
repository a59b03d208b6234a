// The numerics contract in CUDA C, shared by every RepOps kernel (docs/NUMERICS.md).
// Compiled by NVRTC with --fmad=false --ftz=false --prec-div=true --prec-sqrt=true, and by
// g++ under repops/cuda/emu/cuda_emu.h for CI: only IEEE operations, each rounded once.
#ifndef REPOPS_COMMON_CUH
#define REPOPS_COMMON_CUH

// The per-element arithmetic (canonical NaN, IEEE-2019 min/max, the transcendentals and
// activations) is repops/kernels/elementwise.h, shared with the CPU kernels.
#define REPOPS_CUDA 1
#include "elementwise.h"

// x * 2^n rounded once: exact in binary64 for |n| <= 400, then one RNE conversion.
__device__ __forceinline__ float repops_ldexp(float x, int n) {
    n = n < -400 ? -400 : (n > 400 ? 400 : n);
    double s = __longlong_as_double((long long)(n + 1023) << 52);
    return rp_canon(__double2float_rn((double)x * s));
}

// Saturating conversions; NaN -> 0 (the soft-float's to_int32_*).
__device__ __forceinline__ int repops_to_int32(float r) {
    if (r != r) return 0;
    if (r >= 2147483648.0f) return 2147483647;
    if (r < -2147483648.0f) return (int)0x80000000u;
    return (int)r;
}

// Operands read through their strides: the output (contiguous, n elements) as up to 4 dims
// [n / (d1 d2 d3), d1, d2, d3] (repops/cuda/ops.py collapses any shape to them), an operand as
// its 4 element strides there (0 along a broadcast dim). Its element for output i:
#define RP_STRIDES(p) long long p##0, long long p##1, long long p##2, long long p##3
#define RP_AT(p, c) ((c).i0 * p##0 + (c).i1 * p##1 + (c).i2 * p##2 + (c).i3 * p##3)
struct RpCoords { long long i0, i1, i2, i3; };
__device__ __forceinline__ RpCoords rp_coords(long long i, long long d1, long long d2, long long d3) {
    RpCoords c;
    if (d1 == 1 && d2 == 1 && d3 == 1) {  // one dim (contiguous or broadcast operands): no division
        c.i0 = i; c.i1 = c.i2 = c.i3 = 0;
        return c;
    }
    c.i3 = i % d3; i /= d3;
    c.i2 = i % d2; i /= d2;
    c.i1 = i % d1; c.i0 = i / d1;
    return c;
}

// Grid-stride loop over n independent outputs.
#define REPOPS_FOR_EACH(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)
#endif
