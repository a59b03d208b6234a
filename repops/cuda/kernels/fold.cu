// fold (docs/NUMERICS.md): acc = init; acc = op(acc, x[i]) for i = 0..n-1 in order, one
// output per thread. x is laid out [n, rows] so a warp's loads at step i are contiguous.
// init comes from device memory like every other operand (never a by-value float: the
// launch glue moves values as bytes only, repops/cuda/ops.py).
#include "common.cuh"

extern "C" __global__ void fold_f32(int op, const float *x, float *out, long long n, long long rows, const float *init) {
    REPOPS_FOR_EACH(r, rows) {
        float acc = init[0];
        for (long long i = 0; i < n; i++) {
            float v = x[i * rows + r];
            acc = op == 0 ? rp_canon(acc + v) : rp_max(acc, v);
        }
        out[r] = acc;
    }
}
