/* RepOps CPU matmul: C = A @ B with the spec's order for every output,
 *   acc = +0; for k in 0..K-1: acc = fma(A[i,k], B[k,j], acc)
 * so it equals repops.reference.linalg.matmul bit for bit.
 *
 * Speed comes only from things that keep each output's k order: a 6x16 register tile
 * (12 AVX2 accumulators, one per output lane), A and B packed into panels (exact copies),
 * K walked in blocks of KC in increasing order with each block continuing from the partial
 * sums stored in C, and threads over independent row blocks. Never: split-K partial sums,
 * implicit contraction (built with -ffp-contract=off), FTZ/DAZ (MXCSR is set per thread).
 */
#include <math.h>
#include <stdlib.h>

#include "common.h"

#define MR 6
#define NR 16
#define KC 256
#define MC 72
#define NC 2048

/* Twelve named accumulators: an array of __m256 makes gcc spill them every k step. */
#define ROW_LOAD(i)                                                                        \
    __m256 c##i##0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(C + i * ldc);          \
    __m256 c##i##1 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(C + i * ldc + 8);
#define ROW_FMA(i)                                                                         \
    {                                                                                      \
        __m256 a = _mm256_broadcast_ss(Ap + k * MR + i);                                   \
        c##i##0 = _mm256_fmadd_ps(a, b0, c##i##0);                                         \
        c##i##1 = _mm256_fmadd_ps(a, b1, c##i##1);                                         \
    }
#define ROW_STORE(i)                                                                       \
    _mm256_storeu_ps(C + i * ldc, c##i##0);                                                \
    _mm256_storeu_ps(C + i * ldc + 8, c##i##1);

__attribute__((target("avx2,fma")))
static void kernel_6x16(int kc, const float *Ap, const float *Bp, float *C, long ldc, int first) {
    ROW_LOAD(0) ROW_LOAD(1) ROW_LOAD(2) ROW_LOAD(3) ROW_LOAD(4) ROW_LOAD(5)
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(Bp + k * NR);
        __m256 b1 = _mm256_loadu_ps(Bp + k * NR + 8);
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5)
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
}

/* Portable tile with the same order (for CPUs without AVX2+FMA). */
static void kernel_6x16_scalar(int kc, const float *Ap, const float *Bp, float *C, long ldc, int first) {
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            float acc = first ? 0.0f : C[i * ldc + j];
            for (int k = 0; k < kc; k++) acc = fmaf(Ap[k * MR + i], Bp[k * NR + j], acc);
            C[i * ldc + j] = acc;
        }
}

typedef void (*tile_fn)(int, const float *, const float *, float *, long, int);

/* Pack rows [r0, r0+mc) x cols [k0, k0+kc) of A (element strides sr, sc: any layout, a
 * transposed view included; packing is an exact copy) into MR-row panels, zero-padded. */
static void pack_a(const float *A, long sr, long sc, int r0, int mc, int k0, int kc, int M, float *Ap) {
    for (int p = 0; p < mc; p += MR, Ap += MR * kc)
        for (int i = 0; i < MR; i++) {  /* read along k (contiguous in a row-major A) */
            int r = r0 + p + i;
            const float *row = A + (long)r * sr + (long)k0 * sc;
            if (p + i < mc && r < M) {
                if (sc == 1)
                    for (int k = 0; k < kc; k++) Ap[k * MR + i] = row[k];
                else
                    for (int k = 0; k < kc; k++) Ap[k * MR + i] = row[(long)k * sc];
            } else {
                for (int k = 0; k < kc; k++) Ap[k * MR + i] = 0.0f;
            }
        }
}

/* Pack rows [k0, k0+kc) x cols [c0, c0+nc) of B (element strides sr, sc) into NR-column
 * panels, zero-padded. */
static void pack_b(const float *B, long sr, long sc, int k0, int kc, int c0, int nc, float *Bp) {
    int by_column = (sc < 0 ? -sc : sc) > (sr < 0 ? -sr : sr);  /* a transposed view: read down k */
    for (int q = 0; q < nc; q += NR, Bp += NR * kc) {
        if (!by_column) {
            for (int k = 0; k < kc; k++)
                for (int j = 0; j < NR; j++)
                    Bp[k * NR + j] = (q + j < nc) ? B[(long)(k0 + k) * sr + (long)(c0 + q + j) * sc] : 0.0f;
        } else {
            for (int j = 0; j < NR; j++) {
                const float *col = B + (long)k0 * sr + (long)(c0 + q + j) * sc;
                for (int k = 0; k < kc; k++) Bp[k * NR + j] = (q + j < nc) ? col[(long)k * sr] : 0.0f;
            }
        }
    }
}

static void canonicalise_nan(float *C, long n, int nthreads) {
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (long i = 0; i < n; i++) C[i] = repops_canon(C[i]);
}

/* A [M,K] and B [K,N] with any element strides; C [M,N] row-major contiguous. Returns 0,
 * or -1 on allocation failure. */
int repops_matmul_strided_f32(const float *A, long sar, long sac, const float *B, long sbr, long sbc, float *C,
                              int M, int N, int K, int nthreads) {
    if (M == 0 || N == 0) return 0;
    if (K == 0) {
        memset(C, 0, sizeof(float) * (size_t)M * N);
        return 0;
    }
    __builtin_cpu_init();
    tile_fn tile = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? kernel_6x16 : kernel_6x16_scalar;
    int ncmax = N < NC ? N : NC;
    float *Bp = aligned_alloc(64, sizeof(float) * (size_t)KC * ((ncmax + NR - 1) / NR * NR));
    if (!Bp) return -1;
    int failed = 0;
    for (int jc = 0; jc < N; jc += NC) {
        int nc = N - jc < NC ? N - jc : NC;
        for (int pc = 0; pc < K; pc += KC) {          /* k blocks strictly in order */
            int kc = K - pc < KC ? K - pc : KC;
            pack_b(B, sbr, sbc, pc, kc, jc, nc, Bp);
#pragma omp parallel num_threads(nthreads) reduction(| : failed)
            {
                unsigned old = repops_ieee_enter();
                float *Ap = aligned_alloc(64, sizeof(float) * (size_t)MC * KC);
                float edge[MR * NR];
                if (!Ap) failed = 1;
#pragma omp for schedule(static)
                for (int ic = 0; ic < M; ic += MC) {
                    if (!Ap) continue;
                    int mc = M - ic < MC ? M - ic : MC;
                    pack_a(A, sar, sac, ic, mc, pc, kc, M, Ap);
                    for (int jr = 0; jr < nc; jr += NR)
                        for (int ir = 0; ir < mc; ir += MR) {
                            float *c = C + (long)(ic + ir) * N + jc + jr;
                            int mr = mc - ir < MR ? mc - ir : MR, nr = nc - jr < NR ? nc - jr : NR;
                            if (mr == MR && nr == NR) {
                                tile(kc, Ap + ir * kc, Bp + jr * kc, c, N, pc == 0);
                            } else {            /* edge tile through a scratch buffer */
                                for (int i = 0; i < mr; i++) memcpy(edge + i * NR, c + (long)i * N, sizeof(float) * nr);
                                tile(kc, Ap + ir * kc, Bp + jr * kc, edge, NR, pc == 0);
                                for (int i = 0; i < mr; i++) memcpy(c + (long)i * N, edge + i * NR, sizeof(float) * nr);
                            }
                        }
                }
                free(Ap);
                _mm_setcsr(old);
            }
            if (failed) break;
        }
        if (failed) break;
    }
    free(Bp);
    if (failed) return -1;
    canonicalise_nan(C, (long)M * N, nthreads);
    return 0;
}

/* For tests: set or clear FTZ|DAZ in the calling thread, return the previous MXCSR. */
unsigned repops_test_set_ftz_daz(int on) {
    unsigned old = _mm_getcsr();
    _mm_setcsr(on ? (old | 0x8040u) : (old & ~0x8040u));
    return old;
}

/* Row-major contiguous A [M,K], B [K,N], C [M,N]. */
int repops_matmul_f32(const float *A, const float *B, float *C, int M, int N, int K, int nthreads) {
    return repops_matmul_strided_f32(A, K, 1, B, N, 1, C, M, N, K, nthreads);
}

/* A batch of independent products (A [batch, M, K], B [batch, K, N] with any element
 * strides, stride 0 for a broadcast batch; C contiguous): threads go across batch entries,
 * each entry computed by the same single-threaded kernel as above, so every output has the
 * same bits as the unbatched call. */
int repops_matmul_batched_strided_f32(const float *A, long sab, long sar, long sac, const float *B, long sbb, long sbr,
                                      long sbc, float *C, int batch, int M, int N, int K, int nthreads) {
    int failed = 0;
#pragma omp parallel for num_threads(nthreads) schedule(static) reduction(| : failed)
    for (int b = 0; b < batch; b++)
        failed |= repops_matmul_strided_f32(A + (long)b * sab, sar, sac, B + (long)b * sbb, sbr, sbc,
                                            C + (long)b * M * N, M, N, K, 1) != 0;
    return failed ? -1 : 0;
}

int repops_matmul_batched_f32(const float *A, const float *B, float *C, int batch, int M, int N, int K,
                              int nthreads) {
    return repops_matmul_batched_strided_f32(A, (long)M * K, K, 1, B, (long)K * N, N, 1, C, batch, M, N, K, nthreads);
}
