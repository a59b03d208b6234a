// fold (docs/NUMERICS.md): acc = init; acc = op(acc, x[i]) for i = 0..n-1 in order, per
// output. x is laid out [n, rows]; a block per `cols` outputs (block.cuh rp_column_folds):
// tiles of x staged by the block with coalesced loads, one thread per output folding them
// in order. init comes from device memory like every other operand (never a by-value
// float: the launch glue moves values as bytes only, repops/cuda/ops.py).
#include "block.cuh"

extern "C" __global__ void fold_f32(int op, const float *x, float *out, long long n, long long rows, const float *init,
                                    int cols) {
    __shared__ float stage[REPOPS_STAGE];
    for (long long c0 = blockIdx.x * (long long)cols; c0 < rows; c0 += (long long)gridDim.x * cols) {
        float acc[1] = {init[0]};
        rp_column_folds<1>(n, rows, c0, cols, [&](int, long long i, long long r) { return x[i * rows + r]; },
                           [&](int, float a, float v) { return op == 0 ? rp_canon(a + v) : rp_max(a, v); }, acc, stage);
        const long long r = c0 + threadIdx.x;
        if (threadIdx.x < cols && r < rows) out[r] = acc[0];
    }
}
