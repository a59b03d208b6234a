// matmul (docs/NUMERICS.md): for every output, acc = +0; acc = fma(a[i,k], b[k,j], acc) for
// k = 0..K-1 in order. Tiling changes only where operands are read from, never the k
// order: a block computes a BM x BN tile of C, staging BK-deep slices of A and B in shared
// memory; each thread owns TM x TN outputs (rows ty + 16 i, columns tx + 16 j) in
// registers. blockIdx.z indexes the batch (A, B, C contiguous, [batch, rows, cols]).
#include "common.cuh"

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define THREADS 256   // 16 x 16

extern "C" __global__ void matmul_f32(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                                      int M, int N, int K) {
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    A += (long long)blockIdx.z * M * K;
    B += (long long)blockIdx.z * K * N;
    C += (long long)blockIdx.z * M * N;

    float acc[TM][TN];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // stage: 1024 values of A (128 rows x 8 k) and of B (8 k x 128 columns), 4 per thread;
        // outside the matrix a slot holds 0 and is never read (kmax below).
        for (int l = 0; l < (BM * BK) / THREADS; l++) {
            int t = threadIdx.x + l * THREADS;
            int m = t / BK, k = t % BK;
            int gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? A[(long long)gm * K + gk] : 0.0f;
            int kb = t / BN, nb = t % BN;
            int gkb = k0 + kb, gn = col0 + nb;
            Bs[kb][nb] = (gkb < K && gn < N) ? B[(long long)gkb * N + gn] : 0.0f;
        }
        __syncthreads();
        const int kmax = K - k0 < BK ? K - k0 : BK;
        for (int k = 0; k < kmax; k++) {
            float a[TM], b[TN];
            for (int i = 0; i < TM; i++) a[i] = As[k][ty + 16 * i];
            for (int j = 0; j < TN; j++) b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; i++) {
        int gm = row0 + ty + 16 * i;
        for (int j = 0; j < TN; j++) {
            int gn = col0 + tx + 16 * j;
            if (gm < M && gn < N) C[(long long)gm * N + gn] = repops_canon(acc[i][j]);
        }
    }
}
