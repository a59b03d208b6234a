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

// Grid-stride loop over n independent outputs.
#define REPOPS_FOR_EACH(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)
#endif
