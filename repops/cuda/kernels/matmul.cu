// matmul (docs/NUMERICS.md): for every output, acc = +0; acc = fma(a[i,k], b[k,j], acc) for
// k = 0..K-1 in order. Tiling changes only where operands are read from, never the k order:
//   - a block computes a BM x BN tile of C; BK-deep slices of A (transposed) and B go
//     through shared memory, double-buffered: slice t+1 is read into registers while slice t
//     is multiplied, so one barrier per slice;
//   - warps own WM x WN sub-tiles, lanes 8 x 8 outputs as 2 x 2 groups of 4 x 4 (rows
//     lm*4 + {0..3} and WM/2 + lm*4 + {0..3}; columns likewise), read from shared memory as
//     float4: a warp's reads are broadcasts, free of bank conflicts;
//   - the last slice stops at K (no padded k: fma(0, inf, acc) would be NaN and +0 * b
//     would turn an acc of -0 into +0); padded rows/columns are computed and never stored.
// A and B are read where they are, through their element strides (a transposed weight, a
// head-split view, a broadcast batch: never copied first); blockIdx.z indexes the batch, as
// two dims of strides (repops/cuda/ops.py collapses the batch to them); C is contiguous,
// [batch, rows, cols]. The tile shape is tuning (repops/cuda/kernels.py TUNING, passed as -D):
// any shape gives the same bits. With `bias` (matmul_add: addmm's bias, read through its
// strides, 0 along a broadcast dim) each stored output is add(rounded product, bias): the
// spec's separate add kernel, in the epilogue.
#include "common.cuh"

#ifndef MATMUL_BM
#define MATMUL_BM 128
#endif
#ifndef MATMUL_BN
#define MATMUL_BN 128
#endif
#ifndef MATMUL_BK
#define MATMUL_BK 16
#endif
#ifndef MATMUL_WM
#define MATMUL_WM 64
#endif
#ifndef MATMUL_WN
#define MATMUL_WN 32
#endif
// matmul_small_f32's tile (repops/cuda/kernels.py TUNING's MATMUL_SMALL_*): for products whose
// tuned tiles would leave SMs idle (n = 1024: 64 blocks of 128 x 128 on 132 SMs; 256 of 64 x 64)
#ifndef MATMUL_SMALL_BM
#define MATMUL_SMALL_BM 64
#endif
#ifndef MATMUL_SMALL_BN
#define MATMUL_SMALL_BN 64
#endif
#ifndef MATMUL_SMALL_BK
#define MATMUL_SMALL_BK 16
#endif
#ifndef MATMUL_SMALL_WM
#define MATMUL_SMALL_WM 32
#endif
#ifndef MATMUL_SMALL_WN
#define MATMUL_SMALL_WN 64
#endif
// a tile's derived shape (BM ... WN: the template parameters of repops_matmul below)
#define LM (WM / 8)                       // lanes along M in a warp (each 8 rows)
#define LN (WN / 8)                       // lanes along N (each 8 columns)
#define MM_THREADS_OF(bm, bn, wm, wn) (((bm) / (wm)) * ((bn) / (wn)) * 32)  // a warp per WM x WN of the tile
#define MM_THREADS MM_THREADS_OF(BM, BN, WM, WN)
#define APAD 4                            // As row padding: keeps float4 alignment, spreads stores
#define A_LOADS (BM * BK / 4 / MM_THREADS)  // float4 loads of A per thread per slice
#define B_LOADS (BK * BN / 4 / MM_THREADS)

// 4 consecutive elements of a rows x cols matrix with element strides (rs, cs), from (r, c)
// along its columns (along_c) or its rows: a float4 load when `vec` (unit stride that way,
// 16-byte aligned) and all 4 are inside, else element by element (0 outside; never read).
__device__ __forceinline__ float4 repops_load4(const float *__restrict__ X, long long r, long long c, long long rows,
                                                 long long cols, long long rs, long long cs, bool along_c, bool vec) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r >= rows || c >= cols) return v;
    const float *p = X + r * rs + c * cs;
    const long long left = along_c ? cols - c : rows - r, step = along_c ? cs : rs;
    if (vec && left > 3) return *reinterpret_cast<const float4 *>(p);
    v.x = p[0];
    if (left > 1) v.y = p[step];
    if (left > 2) v.z = p[2 * step];
    if (left > 3) v.w = p[3 * step];
    return v;
}

// One tile shape's kernel body; the kernels below instantiate it.
template <int BM, int BN, int BK, int WM, int WN>
__device__ __forceinline__ void repops_matmul(
           const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K,
           long long sam, long long sak, long long sbk, long long sbn, long long nb1, long long sa0, long long sa1,
           long long sb0, long long sb1, const float *__restrict__ D, int bias, long long sdm, long long sdn,
           long long sd0, long long sd1) {
    static_assert(LM * LN == 32 && BM % WM == 0 && BN % WN == 0 && (BM * BK) % (4 * MM_THREADS) == 0 &&
                  (BK * BN) % (4 * MM_THREADS) == 0 && BK % 4 == 0,
                  "matmul tiling: a warp is 32 lanes of 8 x 8 outputs, and every thread loads whole float4s");
    __shared__ __align__(16) float As[2][BK][BM + APAD];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;  // the warp's sub-tile
    const int lm = (lane / LN) * 4, ln = (lane % LN) * 4;                  // the lane's first row/col in it
    const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
    const long long z0 = blockIdx.z / nb1, z1 = blockIdx.z % nb1;  // the batch, as 2 dims of strides
    A += z0 * sa0 + z1 * sa1;
    B += z0 * sb0 + z1 * sb1;
    C += (long long)blockIdx.z * M * N;
    D += z0 * sd0 + z1 * sd1;
    // A is read 4 along k per load, or 4 along m where its columns are contiguous (a transposed
    // view); B 4 along n, or 4 along k where its columns are contiguous (a transposed weight):
    // float4 loads where that stride is 1, the other a multiple of 4 and the base aligned
    const bool ta = sam == 1 && sak != 1, tb = sbk == 1 && sbn != 1;
    const bool veca = (ta ? sak % 4 == 0 : sak == 1 && sam % 4 == 0) && ((unsigned long long)A & 15) == 0;
    const bool vecb = (tb ? sbn % 4 == 0 : sbn == 1 && sbk % 4 == 0) && ((unsigned long long)B & 15) == 0;
    const bool vecc = N % 4 == 0 && ((unsigned long long)C & 15) == 0;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

    float4 ra[A_LOADS], rb[B_LOADS];
    // A slice: BM rows x BK k; along k, 4 lanes read 64 contiguous bytes; along m (ta), a warp
    // reads 512. B slice: BK rows x BN columns; along n a warp reads 512 bytes, along k (tb) 4
    // lanes read 64. Thread t's float4 is the same whichever way: stored back by the same rule.
#define A_AT(t, m, k) const int m = ta ? ((t) % (BM / 4)) * 4 : (t) / (BK / 4), k = ta ? (t) / (BM / 4) : ((t) % (BK / 4)) * 4
#define B_AT(t, k, n) const int k = tb ? ((t) % (BK / 4)) * 4 : (t) / (BN / 4), n = tb ? (t) / (BK / 4) : ((t) % (BN / 4)) * 4
#define LOAD_SLICE(k0)                                                                                  \
    _Pragma("unroll") for (int l = 0; l < A_LOADS; l++) {                                               \
        A_AT(tid + l * MM_THREADS, m, k);                                                               \
        ra[l] = repops_load4(A, row0 + m, (k0) + k, M, K, sam, sak, !ta, veca);                         \
    }                                                                                                   \
    _Pragma("unroll") for (int l = 0; l < B_LOADS; l++) {                                               \
        B_AT(tid + l * MM_THREADS, k, n);                                                               \
        rb[l] = repops_load4(B, (k0) + k, col0 + n, K, N, sbk, sbn, !tb, vecb);                         \
    }
#define STORE_SLICE(buf)                                                                                \
    _Pragma("unroll") for (int l = 0; l < A_LOADS; l++) {                                               \
        A_AT(tid + l * MM_THREADS, m, k);                                                               \
        if (ta) {                                                                                       \
            *reinterpret_cast<float4 *>(&As[buf][k][m]) = ra[l];                                        \
        } else {                                                                                        \
            As[buf][k][m] = ra[l].x;                                                                    \
            As[buf][k + 1][m] = ra[l].y;                                                                \
            As[buf][k + 2][m] = ra[l].z;                                                                \
            As[buf][k + 3][m] = ra[l].w;                                                                \
        }                                                                                               \
    }                                                                                                   \
    _Pragma("unroll") for (int l = 0; l < B_LOADS; l++) {                                               \
        B_AT(tid + l * MM_THREADS, k, n);                                                               \
        if (tb) {                                                                                       \
            Bs[buf][k][n] = rb[l].x;                                                                    \
            Bs[buf][k + 1][n] = rb[l].y;                                                                \
            Bs[buf][k + 2][n] = rb[l].z;                                                                \
            Bs[buf][k + 3][n] = rb[l].w;                                                                \
        } else {                                                                                        \
            *reinterpret_cast<float4 *>(&Bs[buf][k][n]) = rb[l];                                        \
        }                                                                                               \
    }

    const int slices = (K + BK - 1) / BK;
    LOAD_SLICE(0)
    STORE_SLICE(0)
    __syncthreads();
    for (int s = 0; s < slices; s++) {
        const int buf = s & 1;
        if (s + 1 < slices) {
            LOAD_SLICE((s + 1) * BK)  // in flight while this slice is multiplied
        }
        const int kmax = K - s * BK < BK ? K - s * BK : BK;
#pragma unroll
        for (int k = 0; k < BK; k++) {
            if (k < kmax) {
                float a[8], b[8];
                float4 a0 = *reinterpret_cast<const float4 *>(&As[buf][k][wm + lm]);
                float4 a1 = *reinterpret_cast<const float4 *>(&As[buf][k][wm + WM / 2 + lm]);
                float4 b0 = *reinterpret_cast<const float4 *>(&Bs[buf][k][wn + ln]);
                float4 b1 = *reinterpret_cast<const float4 *>(&Bs[buf][k][wn + WN / 2 + ln]);
                a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w;
                a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
                b[0] = b0.x; b[1] = b0.y; b[2] = b0.z; b[3] = b0.w;
                b[4] = b1.x; b[5] = b1.y; b[6] = b1.z; b[7] = b1.w;
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
            }
        }
        if (s + 1 < slices) {
            STORE_SLICE(buf ^ 1)  // the other buffer: last read before the previous barrier
        }
        __syncthreads();
    }
#undef LOAD_SLICE
#undef STORE_SLICE
#undef A_AT
#undef B_AT

#pragma unroll
    for (int i = 0; i < 8; i++) {
        const long long r = row0 + wm + (i < 4 ? lm + i : WM / 2 + lm + i - 4);
        if (r >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long long c = col0 + wn + h * (WN / 2) + ln;
            float *p = C + r * N + c;
            float4 v = make_float4(rp_canon(acc[i][4 * h]), rp_canon(acc[i][4 * h + 1]),
                                   rp_canon(acc[i][4 * h + 2]), rp_canon(acc[i][4 * h + 3]));
            if (bias) {  // (columns past N: never stored, never read)
                const float *d = D + r * sdm + c * sdn;
                if (c < N) v.x = rp_canon(v.x + d[0]);
                if (c + 1 < N) v.y = rp_canon(v.y + d[sdn]);
                if (c + 2 < N) v.z = rp_canon(v.z + d[2 * sdn]);
                if (c + 3 < N) v.w = rp_canon(v.w + d[3 * sdn]);
            }
            if (vecc && c + 3 < N) {
                *reinterpret_cast<float4 *>(p) = v;
            } else {
                if (c < N) p[0] = v.x;
                if (c + 1 < N) p[1] = v.y;
                if (c + 2 < N) p[2] = v.z;
                if (c + 3 < N) p[3] = v.w;
            }
        }
    }
}

#define MATMUL_ARGS                                                                                           \
    const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K,        \
        long long sam, long long sak, long long sbk, long long sbn, long long nb1, long long sa0, long long sa1, \
        long long sb0, long long sb1, const float *__restrict__ D, int bias, long long sdm, long long sdn,        \
        long long sd0, long long sd1
#define MATMUL_PASS A, B, C, M, N, K, sam, sak, sbk, sbn, nb1, sa0, sa1, sb0, sb1, D, bias, sdm, sdn, sd0, sd1

#define MATMUL_THREADS MM_THREADS_OF(MATMUL_BM, MATMUL_BN, MATMUL_WM, MATMUL_WN)
#define MATMUL_SMALL_THREADS MM_THREADS_OF(MATMUL_SMALL_BM, MATMUL_SMALL_BN, MATMUL_SMALL_WM, MATMUL_SMALL_WN)

extern "C" __global__ void __launch_bounds__(MATMUL_THREADS, 2) matmul_f32(MATMUL_ARGS) {
    repops_matmul<MATMUL_BM, MATMUL_BN, MATMUL_BK, MATMUL_WM, MATMUL_WN>(MATMUL_PASS);
}

extern "C" __global__ void __launch_bounds__(MATMUL_SMALL_THREADS, 8) matmul_small_f32(MATMUL_ARGS) {
    repops_matmul<MATMUL_SMALL_BM, MATMUL_SMALL_BN, MATMUL_SMALL_BK, MATMUL_SMALL_WM, MATMUL_SMALL_WN>(MATMUL_PASS);
}
