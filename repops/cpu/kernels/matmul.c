/* RepOps CPU matmul: C = A @ B with the spec's order for every output,
 *   acc = +0; for k in 0..K-1: acc = fma(A[i,k], B[k,j], acc)
 * so it equals repops.reference.linalg.matmul bit for bit.
 *
 * Speed comes only from things that keep each output's k order: a 6x16 register tile
 * (12 AVX2 accumulators, one per output lane), A and B packed into panels (exact copies, read
 * along whichever axis is contiguous in memory), K walked in blocks of KC in increasing
 * order with each block continuing from the partial sums stored in C (the last block stores
 * NaN canonicalised), and threads over independent (row block, column range) tasks; one
 * parallel region per call, B panels packed by all threads between barriers. Never: split-K
 * partial sums, implicit contraction (built with -ffp-contract=off), FTZ/DAZ (MXCSR is set
 * per thread).
 */
#include <math.h>
#include <stdlib.h>

#include "common.h"

#define MR 6
#define NR 16
#define KC 256
#define MC_MAX 144
#define NC 2048

/* Twelve named accumulators: an array of __m256 makes gcc spill them every k step. */
#define ROW_LOAD(i)                                                                        \
    __m256 c##i##0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(C + i * ldc);          \
    __m256 c##i##1 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(C + i * ldc + 8);
#ifdef REPOPS_FMA_PROBE /* tests: the spec's fma as a multiply and an add (see elementwise.h) */
#define FMA256(a, b, c) _mm256_add_ps(_mm256_mul_ps(a, b), c)
#else
#define FMA256(a, b, c) _mm256_fmadd_ps(a, b, c)
#endif
#define ROW_FMA(i)                                                                         \
    {                                                                                      \
        __m256 a = _mm256_broadcast_ss(Ap + k * MR + i);                                   \
        c##i##0 = FMA256(a, b0, c##i##0);                                                  \
        c##i##1 = FMA256(a, b1, c##i##1);                                                  \
    }
#define CANON(v) _mm256_blendv_ps(v, nanv, _mm256_cmp_ps(v, v, _CMP_UNORD_Q))
#define ROW_STORE(i)                                                                       \
    if (last) {                                                                            \
        c##i##0 = CANON(c##i##0);                                                          \
        c##i##1 = CANON(c##i##1);                                                          \
    }                                                                                      \
    _mm256_storeu_ps(C + i * ldc, c##i##0);                                                \
    _mm256_storeu_ps(C + i * ldc + 8, c##i##1);

__attribute__((target("avx2,fma")))
static void kernel_6x16(int kc, const float *Ap, const float *Bp, float *C, long ldc, int first, int last) {
    const __m256 nanv = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
    ROW_LOAD(0) ROW_LOAD(1) ROW_LOAD(2) ROW_LOAD(3) ROW_LOAD(4) ROW_LOAD(5)
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(Bp + k * NR);
        __m256 b1 = _mm256_loadu_ps(Bp + k * NR + 8);
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5)
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
}

/* Portable tile with the same order (for CPUs without AVX2+FMA). */
static void kernel_6x16_scalar(int kc, const float *Ap, const float *Bp, float *C, long ldc, int first, int last) {
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            float acc = first ? 0.0f : C[i * ldc + j];
            for (int k = 0; k < kc; k++) acc = RP_FMA(Ap[k * MR + i], Bp[k * NR + j], acc);
            C[i * ldc + j] = last ? rp_canon(acc) : acc;
        }
}

typedef void (*tile_fn)(int, const float *, const float *, float *, long, int, int);

/* Pack rows [r0, r0+mc) x cols [k0, k0+kc) of A (element strides sr, sc: any layout;
 * packing is an exact copy) into MR-row panels, zero-padded; reads along memory. */
static void pack_a(const float *A, long sr, long sc, int r0, int mc, int k0, int kc, int M, float *Ap) {
    int along_k = (sc < 0 ? -sc : sc) <= (sr < 0 ? -sr : sr);
    for (int p = 0; p < mc; p += MR, Ap += MR * kc) {
        int rows = mc - p < MR ? mc - p : MR;
        if (r0 + p + rows > M) rows = M - r0 - p;
        if (along_k) {
            for (int i = 0; i < MR; i++) {
                const float *row = A + (long)(r0 + p + i) * sr + (long)k0 * sc;
                if (i < rows)
                    for (int k = 0; k < kc; k++) Ap[k * MR + i] = row[(long)k * sc];
                else
                    for (int k = 0; k < kc; k++) Ap[k * MR + i] = 0.0f;
            }
        } else { /* a transposed view: the rows of one k are neighbours in memory */
            for (int k = 0; k < kc; k++) {
                const float *col = A + (long)(r0 + p) * sr + (long)(k0 + k) * sc;
                for (int i = 0; i < MR; i++) Ap[k * MR + i] = i < rows ? col[(long)i * sr] : 0.0f;
            }
        }
    }
}

/* Pack NR-column panel q (columns [c0 + q*NR, ...)) of rows [k0, k0+kc) of B (element
 * strides sr, sc) into Bp + q*NR*kc, zero-padded; reads along memory. */
static void pack_b_panel(const float *B, long sr, long sc, int k0, int kc, int c0, int nc, int q, float *Bp) {
    int by_column = (sc < 0 ? -sc : sc) > (sr < 0 ? -sr : sr);
    int cols = nc - q * NR < NR ? nc - q * NR : NR;
    Bp += (long)q * NR * kc;
    const float *base = B + (long)k0 * sr + (long)(c0 + q * NR) * sc;
    if (!by_column) {
        for (int k = 0; k < kc; k++)
            for (int j = 0; j < NR; j++) Bp[k * NR + j] = j < cols ? base[(long)k * sr + (long)j * sc] : 0.0f;
    } else {
        for (int j = 0; j < NR; j++) {
            const float *col = base + (long)j * sc;
            for (int k = 0; k < kc; k++) Bp[k * NR + j] = j < cols ? col[(long)k * sr] : 0.0f;
        }
    }
}

/* A [M,K] and B [K,N] with any element strides; C [M,N] row-major contiguous. Returns 0,
 * or -1 on allocation failure. */
int repops_matmul_strided_f32(const float *A, long sar, long sac, const float *B, long sbr, long sbc, float *C,
                              int M, int N, int K, int nthreads) {
    if (M == 0 || N == 0) return 0;
    if (K == 0) {
        memset(C, 0, sizeof(float) * (size_t)M * N); /* acc = +0 */
        return 0;
    }
    __builtin_cpu_init();
    tile_fn tile = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? kernel_6x16 : kernel_6x16_scalar;
    int ncmax = N < NC ? N : NC;
    float *Bp = aligned_alloc(64, sizeof(float) * (size_t)KC * ((ncmax + NR - 1) / NR * NR));
    if (!Bp) return -1;
    /* row blocks: as even as the threads allow, MR-aligned, at most MC_MAX rows (L2) */
    long panels = (M + MR - 1) / MR;
    long per = (panels + nthreads - 1) / nthreads;
    if (per * MR > MC_MAX) per = MC_MAX / MR;
    const int mc = (int)(per * MR), mblocks = (M + mc - 1) / mc;
    int nt = (long)M * N * K < (1L << 18) ? 1 : nthreads;
    int failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
    {
        unsigned old = repops_ieee_enter();
        float *Ap = aligned_alloc(64, sizeof(float) * (size_t)mc * KC);
        float edge[MR * NR];
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        if (!Ap) failed = 1;
        for (int jc = 0; jc < N; jc += NC) {
            int nc = N - jc < NC ? N - jc : NC;
            int npan = (nc + NR - 1) / NR;
            /* column ranges per row block: enough tasks for every thread */
            int nsplit = mblocks >= T ? 1 : (T + mblocks - 1) / mblocks;
            if (nsplit > npan) nsplit = npan;
            for (int pc = 0; pc < K; pc += KC) {  /* k blocks strictly in order */
                int kc = K - pc < KC ? K - pc : KC;
                for (int q = t; q < npan; q += T) pack_b_panel(B, sbr, sbc, pc, kc, jc, nc, q, Bp);
#pragma omp barrier
                for (int task = t; task < mblocks * nsplit; task += T) {
                    if (!Ap) break;
                    int ib = task / nsplit, s = task % nsplit;
                    int ic = ib * mc, m = M - ic < mc ? M - ic : mc;
                    int q0 = npan * s / nsplit, q1 = npan * (s + 1) / nsplit;
                    pack_a(A, sar, sac, ic, m, pc, kc, M, Ap);
                    for (int q = q0; q < q1; q++)
                        for (int ir = 0; ir < m; ir += MR) {
                            int jr = q * NR;
                            float *c = C + (long)(ic + ir) * N + jc + jr;
                            int mr = m - ir < MR ? m - ir : MR, nr = nc - jr < NR ? nc - jr : NR;
                            int first = pc == 0, last = pc + kc == K;
                            if (mr == MR && nr == NR) {
                                tile(kc, Ap + ir * kc, Bp + (long)jr * kc, c, N, first, last);
                            } else { /* edge tile through a scratch buffer */
                                for (int i = 0; i < mr; i++) memcpy(edge + i * NR, c + (long)i * N, sizeof(float) * nr);
                                tile(kc, Ap + ir * kc, Bp + (long)jr * kc, edge, NR, first, last);
                                for (int i = 0; i < mr; i++) memcpy(c + (long)i * N, edge + i * NR, sizeof(float) * nr);
                            }
                        }
                }
#pragma omp barrier
            }
        }
        free(Ap);
        _mm_setcsr(old);
    }
    free(Bp);
    return failed ? -1 : 0;
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
    /* one thread below the single product's threshold: a fork/join costs more than such a batch
     * computes (tiny attention products; worst on a busy machine, where a thread waits its turn) */
    int nt = (long)batch * M * N * K < (1L << 18) ? 1 : nthreads;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : failed)
    for (int b = 0; b < batch; b++)
        failed |= repops_matmul_strided_f32(A + (long)b * sab, sar, sac, B + (long)b * sbb, sbr, sbc,
                                            C + (long)b * M * N, M, N, K, 1) != 0;
    return failed ? -1 : 0;
}

int repops_matmul_batched_f32(const float *A, const float *B, float *C, int batch, int M, int N, int K,
                              int nthreads) {
    return repops_matmul_batched_strided_f32(A, (long)M * K, K, 1, B, (long)K * N, N, 1, C, batch, M, N, K, nthreads);
}
