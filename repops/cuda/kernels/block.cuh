// Block-wide pieces of the row kernels (nn.cu, fold.cu): a block works on one row (or one
// group of columns) at a time. What is order-free runs on every thread: loads, elementwise
// maps, max (IEEE-2019 maximum selects one of its operands, NaN canonical: exact in any
// order). Every sum the spec (docs/NUMERICS.md) defines as a sequential fold stays one:
// the block stages the terms in shared memory with coalesced loads and ONE thread adds
// them in the spec's order. The bits never depend on the grid, the block size or
// REPOPS_STAGE (a compile-time tuning, repops/cuda/kernels.py TUNING).
#ifndef REPOPS_BLOCK_CUH
#define REPOPS_BLOCK_CUH
#include "common.cuh"

#ifndef REPOPS_STAGE
#define REPOPS_STAGE 1024  // floats staged per chain and block (any size >= 4: COLUMNS per tile row)
#endif

// Block-stride loop over rows: block b takes rows b, b + gridDim.x, ...
#define REPOPS_FOR_EACH_ROW(r, rows) for (long long r = blockIdx.x; r < (rows); r += gridDim.x)

// acc[k] = fold(add) of term k over j = 0..n-1 in order, for K chains at once: terms(j, v)
// writes v[0..K-1] for element j (it runs on the thread that stages j and may store other
// outputs of j). acc[] comes in as the initial values and leaves as the sums, the same in
// every thread. stage: the kernel's __shared__ float[K * REPOPS_STAGE] (one per kernel, so
// every call shares it). Call from every thread of the block.
template <int K, class Terms>
__device__ void rp_block_sums(long long n, Terms terms, float *acc, float *stage) {
    __shared__ float result[K];
    const int t = threadIdx.x;
    __syncthreads();  // the previous call's readers of result[] are done
    for (long long j0 = 0; j0 < n; j0 += REPOPS_STAGE) {
        const int len = (int)(n - j0 < REPOPS_STAGE ? n - j0 : REPOPS_STAGE);
        for (int i = t; i < len; i += blockDim.x) {
            float v[K];
            terms(j0 + i, v);
            for (int k = 0; k < K; k++) stage[k * REPOPS_STAGE + i] = v[k];
        }
        __syncthreads();
        if (t == 0)
            for (int i = 0; i < len; i++)
                for (int k = 0; k < K; k++) acc[k] = acc[k] + stage[k * REPOPS_STAGE + i];
        __syncthreads();  // the stage is free again
    }
    if (t == 0)
        for (int k = 0; k < K; k++) result[k] = acc[k];
    __syncthreads();
    for (int k = 0; k < K; k++) acc[k] = result[k];
}

// fold(max, -inf) of f(j) over j = 0..n-1: each thread over its elements, then a tree in
// shared memory (exact: rp_max is associative and commutative in the bits). Same value in
// every thread.
template <class F>
__device__ float rp_block_max(long long n, F f) {
    __shared__ float part[1024];  // blockDim.x <= 1024
    const int t = threadIdx.x, nt = blockDim.x;
    float m = -RP_INF;
    for (long long j = t; j < n; j += nt) m = rp_max(m, f(j));
    __syncthreads();  // the previous call's readers of part[0] are done
    part[t] = m;
    __syncthreads();
    for (int s = 1; s < nt; s *= 2) {
        if (t % (2 * s) == 0 && t + s < nt) part[t] = rp_max(part[t], part[t + s]);
        __syncthreads();
    }
    return part[0];
}

// Column folds of K matrices [L, C] (row-major): the block owns columns [c0, c0 + cb) and
// folds each over l = 0..L-1 in order (acc = step(k, acc, x)); thread t < cb holds column
// c0 + t's K accumulators in acc[] (initial values in, results out; other threads' acc is
// untouched). Tiles of rows x cb columns are staged by the whole block with coalesced loads:
// load(k, l, c) reads matrix k. cb <= REPOPS_STAGE; stage as rp_block_sums's.
template <int K, class Load, class Step>
__device__ void rp_column_folds(long long L, long long C, long long c0, int cb, Load load, Step step, float *acc,
                                float *stage) {
    const int t = threadIdx.x;
    const long long tile = REPOPS_STAGE / cb;
    for (long long l0 = 0; l0 < L; l0 += tile) {
        const int len = (int)(L - l0 < tile ? L - l0 : tile);
        for (int i = t; i < len * cb; i += blockDim.x) {
            const long long l = l0 + i / cb, c = c0 + i % cb;
            for (int k = 0; k < K; k++) stage[k * REPOPS_STAGE + i] = c < C ? load(k, l, c) : 0.0f;
        }
        __syncthreads();
        if (t < cb && c0 + t < C)
            for (int i = 0; i < len; i++)
                for (int k = 0; k < K; k++) acc[k] = step(k, acc[k], stage[k * REPOPS_STAGE + i * cb + t]);
        __syncthreads();
    }
}
#endif
