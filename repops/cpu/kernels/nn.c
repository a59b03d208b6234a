/* Row operators of repops/reference/nn.py in one pass each: softmax, log_softmax and their
 * backwards, attention's rows (scale, mask, softmax; and back), layer norm and RMS norm
 * (forward, backward).
 *
 * A "row" is one reduction: n elements at a stride (a [outer, n, inner] layout; inner > 1 is
 * a reduction along a non-last axis). Rows are independent outputs, so they are computed
 * LANES at a time: packed into a panel [n][LANES] (an exact copy), every fold walks
 * j = 0..n-1 in order in each lane, exactly the reference's order, and gcc vectorizes across
 * the lanes. Threads split the rows. Column sums (a norm's weight and bias gradients) fold
 * over the rows in order, one accumulator per column. */
#include <math.h>
#include <stdlib.h>

#include "common.h"

#define LANES 16
#define LANE for (int l = 0; l < LANES; l++)
#define ROWS for (long j = 0; j < n; j++)
#define AT(P, j) ((P) + (j) * LANES)
/* the body compiled twice: once for AVX2+FMA, once for any x86-64 (chosen at run time) */
#define TWICE(name, params, args)                                                                  \
    __attribute__((target("avx2,fma"))) static void name##_avx2 params { name##_body args; }      \
    static void name##_base params { name##_body args; }                                           \
    static int name##_fast(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

/* Row r of a [outer, n, inner] array starts here; its element j is j * inner further. */
static inline long row_base(long r, long n, long inner) { return (r / inner) * n * inner + (r % inner); }

static void pack(const float *x, long r0, int L, long n, long inner, float *P) {
    for (int l = 0; l < L; l++) {
        const float *s = x + row_base(r0 + l, n, inner);
        ROWS AT(P, j)[l] = s[j * inner];
    }
    for (int l = L; l < LANES; l++) ROWS AT(P, j)[l] = 0.0f;
}

static void unpack(const float *P, long r0, int L, long n, long inner, float *y) {
    for (int l = 0; l < L; l++) {
        float *d = y + row_base(r0 + l, n, inner);
        ROWS d[j * inner] = rp_canon(AT(P, j)[l]);
    }
}

/* -- softmax family and attention rows -------------------------------------------------------------------
 * op: 0 softmax(a); 1 log_softmax(a); 2 softmax_backward(g = a, y = b); 3 log_softmax_backward(g = a, y = b);
 * 4 attention rows: softmax(mask ? -inf : a * scale), +0 on a row whose max is -inf; 5 attention rows back:
 *   (mask ? +0 : softmax_backward(a, b)) * scale. M: the mask panel (bytes as floats 0/1) or NULL. */
enum { SOFTMAX, LOG_SOFTMAX, SOFTMAX_BWD, LOG_SOFTMAX_BWD, ATT_ROWS, ATT_ROWS_BWD };

static inline __attribute__((always_inline)) void softmax_body(int op, long n, float *A, const float *B,
                                                                const float *M, float scale, float *O) {
    float acc[LANES], m[LANES];
    if (op == ATT_ROWS) {
        ROWS LANE {
            float s = AT(A, j)[l] * scale;
            AT(A, j)[l] = (M && AT(M, j)[l] != 0.0f) ? -RP_INF : s;
        }
    }
    if (op == SOFTMAX || op == LOG_SOFTMAX || op == ATT_ROWS) {
        LANE m[l] = -RP_INF;
        ROWS LANE m[l] = rp_max(m[l], AT(A, j)[l]);          /* fold(max) from -inf */
        LANE acc[l] = -0.0f;
        if (op == LOG_SOFTMAX) {
            ROWS LANE AT(O, j)[l] = AT(A, j)[l] - m[l];       /* sh = x - max */
            ROWS LANE acc[l] = acc[l] + rp_exp(AT(O, j)[l]);  /* fold(add) from -0 of exp(sh) */
            LANE acc[l] = rp_log(acc[l]);
            ROWS LANE AT(O, j)[l] = AT(O, j)[l] - acc[l];
        } else {
            ROWS LANE AT(O, j)[l] = rp_exp(AT(A, j)[l] - m[l]);
            ROWS LANE acc[l] = acc[l] + AT(O, j)[l];
            ROWS LANE AT(O, j)[l] = AT(O, j)[l] / acc[l];
            if (op == ATT_ROWS)                                /* select(max == -inf, +0, p): a fully masked row */
                ROWS LANE AT(O, j)[l] = m[l] == -RP_INF ? 0.0f : AT(O, j)[l];
        }
    } else if (op == SOFTMAX_BWD || op == ATT_ROWS_BWD) {      /* y (g - sum(g y)) */
        LANE acc[l] = -0.0f;
        ROWS LANE acc[l] = acc[l] + AT(A, j)[l] * AT(B, j)[l];
        ROWS LANE AT(O, j)[l] = AT(B, j)[l] * (AT(A, j)[l] - acc[l]);
        if (op == ATT_ROWS_BWD) ROWS LANE {
            float d = (M && AT(M, j)[l] != 0.0f) ? 0.0f : AT(O, j)[l];
            AT(O, j)[l] = d * scale;
        }
    } else {                                                    /* g - exp(y) sum(g) */
        LANE acc[l] = -0.0f;
        ROWS LANE acc[l] = acc[l] + AT(A, j)[l];
        ROWS LANE AT(O, j)[l] = AT(A, j)[l] - rp_exp(AT(B, j)[l]) * acc[l];
    }
}
TWICE(softmax, (int op, long n, float *A, const float *B, const float *M, float scale, float *O),
      (op, n, A, B, M, scale, O))

/* x, y (backwards), mask (attention; uint8, same layout) [outer, n, inner] contiguous -> out. */
int repops_softmax_f32(int op, const float *x, const float *y, const uint8_t *mask, float scale, float *out,
                       long outer, long n, long inner, int nthreads) {
    const long rows = outer * inner;
    if (rows == 0 || n == 0) return 0;
    __builtin_cpu_init();
    int fast = softmax_fast(), failed = 0;
    long groups = (rows + LANES - 1) / LANES;
#pragma omp parallel num_threads(rows * n < (1L << 14) ? 1 : nthreads) reduction(| : failed)
    {
        unsigned old = repops_ieee_enter();
        float *buf = aligned_alloc(64, sizeof(float) * (size_t)(4 * n) * LANES);
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (long g = 0; g < groups; g++) {
            if (!buf) continue;
            long r0 = g * LANES;
            int L = rows - r0 < LANES ? (int)(rows - r0) : LANES;
            float *A = buf, *B = buf + n * LANES, *M = buf + 2 * n * LANES, *O = buf + 3 * n * LANES;
            pack(x, r0, L, n, inner, A);
            if (y) pack(y, r0, L, n, inner, B);
            if (mask) {
                for (int l = 0; l < L; l++) {
                    const uint8_t *s = mask + row_base(r0 + l, n, inner);
                    ROWS AT(M, j)[l] = s[j * inner] ? 1.0f : 0.0f;
                }
                for (int l = L; l < LANES; l++) ROWS AT(M, j)[l] = 0.0f;
            }
            if (fast) softmax_avx2(op, n, A, B, mask ? M : NULL, scale, O);
            else softmax_base(op, n, A, B, mask ? M : NULL, scale, O);
            unpack(O, r0, L, n, inner, out);
        }
        free(buf);
        _mm_setcsr(old);
    }
    return failed ? -1 : 0;
}

/* -- layer norm and RMS norm over rows of n contiguous elements ------------------------------------------- */
enum { LAYER_NORM, LAYER_NORM_BWD, RMS_NORM, RMS_NORM_BWD };

/* Forward: A = x; out O = y; S0, S1 per lane: layer norm (mean, rstd), RMS norm (r, -).
 * Backward: A = go (g), B = x; S0, S1 in: (mean, rstd) / (r, -); out O = dx, and W = the
 * per-element term whose column sums are dw (go xhat / g (x r)). w: weight (n) or NULL;
 * b: bias (n) or NULL. */
static inline __attribute__((always_inline)) void norm_body(int op, long n, const float *A, const float *B,
                                                             const float *w, const float *b, float eps,
                                                             float *S0, float *S1, float *O, float *W) {
    const float nf = (float)n;
    float acc[LANES], acc2[LANES];
    if (op == LAYER_NORM) {
        LANE acc[l] = -0.0f;
        ROWS LANE acc[l] = acc[l] + AT(A, j)[l];
        LANE S0[l] = acc[l] / nf;                                    /* mean */
        ROWS LANE AT(O, j)[l] = AT(A, j)[l] - S0[l];                 /* d */
        LANE acc[l] = -0.0f;
        ROWS LANE acc[l] = acc[l] + AT(O, j)[l] * AT(O, j)[l];
        LANE S1[l] = 1.0f / sqrtf(acc[l] / nf + eps);                /* rstd */
        ROWS LANE {
            float y = AT(O, j)[l] * S1[l];
            if (w) y = y * w[j];
            if (b) y = y + b[j];
            AT(O, j)[l] = y;
        }
    } else if (op == RMS_NORM) {
        LANE acc[l] = -0.0f;
        ROWS LANE acc[l] = acc[l] + AT(A, j)[l] * AT(A, j)[l];
        LANE S0[l] = 1.0f / sqrtf(acc[l] / nf + eps);                /* r */
        ROWS LANE AT(O, j)[l] = (AT(A, j)[l] * S0[l]) * w[j];
    } else if (op == LAYER_NORM_BWD) {
        /* xhat = (x - mean) rstd; g = go w; dx = rstd ((g - mean(g)) - xhat mean(g xhat)) */
        LANE acc[l] = -0.0f;
        LANE acc2[l] = -0.0f;
        ROWS LANE {
            float xhat = (AT(B, j)[l] - S0[l]) * S1[l];
            float g = w ? AT(A, j)[l] * w[j] : AT(A, j)[l];
            acc[l] = acc[l] + g;
            acc2[l] = acc2[l] + g * xhat;
            AT(W, j)[l] = AT(A, j)[l] * xhat;
        }
        LANE acc[l] = acc[l] / nf;
        LANE acc2[l] = acc2[l] / nf;
        ROWS LANE {
            float xhat = (AT(B, j)[l] - S0[l]) * S1[l];
            float g = w ? AT(A, j)[l] * w[j] : AT(A, j)[l];
            AT(O, j)[l] = S1[l] * ((g - acc[l]) - xhat * acc2[l]);
        }
    } else { /* RMS_NORM_BWD: dx = gy r + (((sum(gy x) (-0.5)) r^3) / n) (x 2), gy = g w */
        LANE acc[l] = -0.0f;
        ROWS LANE {
            float gy = AT(A, j)[l] * w[j];
            acc[l] = acc[l] + gy * AT(B, j)[l];
            AT(W, j)[l] = AT(A, j)[l] * (AT(B, j)[l] * S0[l]);
        }
        LANE acc[l] = ((acc[l] * -0.5f) * ((S0[l] * S0[l]) * S0[l])) / nf;
        ROWS LANE {
            float gy = AT(A, j)[l] * w[j];
            AT(O, j)[l] = gy * S0[l] + acc[l] * (AT(B, j)[l] * 2.0f);
        }
    }
}
TWICE(norm, (int op, long n, const float *A, const float *B, const float *w, const float *b, float eps, float *S0,
             float *S1, float *O, float *W), (op, n, A, B, w, b, eps, S0, S1, O, W))

/* x (forward) or go and x (backward): [rows, n] contiguous. Forward writes y, s0 [rows],
 * s1 [rows] (layer norm: mean, rstd; RMS norm: r); backward reads s0, s1 and writes dx and,
 * when dw/db are given, the column sums over rows (in row order, from -0) of the weight term
 * and of go. */
int repops_norm_f32(int op, const float *a, const float *x, const float *w, const float *b, float eps, float *s0,
                    float *s1, float *out, float *dw, float *db, long rows, long n, int nthreads) {
    if (rows == 0 || n == 0) return 0;
    __builtin_cpu_init();
    int fast = norm_fast(), failed = 0, bwd = op == LAYER_NORM_BWD || op == RMS_NORM_BWD;
    long groups = (rows + LANES - 1) / LANES;
    float *wterm = NULL;
    if (bwd && dw) {
        wterm = malloc(sizeof(float) * (size_t)rows * n);
        if (!wterm) return -1;
    }
    int nt = rows * n < (1L << 14) ? 1 : nthreads;
#pragma omp parallel num_threads(nt) reduction(| : failed)
    {
        unsigned old = repops_ieee_enter();
        float *buf = aligned_alloc(64, sizeof(float) * ((size_t)4 * n + 2) * LANES);
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (long g = 0; g < groups; g++) {
            if (!buf) continue;
            long r0 = g * LANES;
            int L = rows - r0 < LANES ? (int)(rows - r0) : LANES;
            float *A = buf, *B = buf + n * LANES, *O = buf + 2 * n * LANES, *W = buf + 3 * n * LANES;
            float *S0 = buf + 4 * n * LANES, *S1 = S0 + LANES;
            pack(a, r0, L, n, 1, A);
            if (bwd) {
                pack(x, r0, L, n, 1, B);
                for (int l = 0; l < LANES; l++) {
                    S0[l] = l < L ? s0[r0 + l] : 0.0f;
                    S1[l] = l < L && s1 ? s1[r0 + l] : 0.0f;
                }
            }
            if (fast) norm_avx2(op, n, A, B, w, b, eps, S0, S1, O, W);
            else norm_base(op, n, A, B, w, b, eps, S0, S1, O, W);
            unpack(O, r0, L, n, 1, out);
            if (!bwd)
                for (int l = 0; l < L; l++) {
                    s0[r0 + l] = rp_canon(S0[l]);
                    if (s1) s1[r0 + l] = rp_canon(S1[l]);
                }
            else if (wterm)
                for (int l = 0; l < L; l++)
                    for (long j = 0; j < n; j++) wterm[(r0 + l) * n + j] = AT(W, j)[l];
        }
        free(buf);
        /* column sums: columns split across threads, rows in order */
        if (bwd && (dw || db)) {
#pragma omp barrier
#pragma omp for schedule(static)
            for (long c0 = 0; c0 < n; c0 += 64) {
                long c1 = c0 + 64 < n ? c0 + 64 : n;
                float sw[64], sb[64];
                for (long c = c0; c < c1; c++) sw[c - c0] = sb[c - c0] = -0.0f;
                for (long r = 0; r < rows; r++)
                    for (long c = c0; c < c1; c++) {
                        if (wterm) sw[c - c0] = sw[c - c0] + wterm[r * n + c];
                        if (db) sb[c - c0] = sb[c - c0] + a[r * n + c];
                    }
                for (long c = c0; c < c1; c++) {
                    if (dw) dw[c] = rp_canon(sw[c - c0]);
                    if (db) db[c] = rp_canon(sb[c - c0]);
                }
            }
        }
        _mm_setcsr(old);
    }
    free(wterm);
    return failed ? -1 : 0;
}

/* Rotary embedding of interleaved pairs (elementwise.h rp_rope): x and out contiguous
 * [n pairs][2]; pair i reads c[i % period] and s[i % period] (tables that repeat along x's
 * leading axes). Pairs are independent: threads split them. */
static void rope_run(int backward, const float *x, const float *c, const float *s, long period, float *out, long lo,
                     long hi) {
    long k = lo % period;
    for (long i = lo; i < hi; i++) {
        rp_rope(backward, x[2 * i], x[2 * i + 1], c[k], s[k], out + 2 * i, out + 2 * i + 1);
        if (++k == period) k = 0;
    }
}

void repops_rope_f32(int backward, const float *x, const float *c, const float *s, long period, float *out, long n,
                     int nthreads) {
    const long chunk = 1L << 14;
#pragma omp parallel for num_threads(nthreads) schedule(static) if (n > 4 * chunk)
    for (long lo = 0; lo < n; lo += chunk) {
        unsigned o = repops_ieee_enter();
        rope_run(backward, x, c, s, period, out, lo, lo + chunk < n ? lo + chunk : n);
        _mm_setcsr(o);
    }
}
