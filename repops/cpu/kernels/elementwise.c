/* Elementwise kernels: every map primitive (docs/NUMERICS.md §4, the hardware's IEEE operation)
 * and every fused activation (repops/kernels/elementwise.h: the reference's sequences), in one
 * pass with NaN canonicalised, over broadcast operands read in place with their strides.
 *
 * repops_map_f32(op, nin, ndim, shape, ins, strides, out, nthreads): out is contiguous with
 * `shape`; operand k is read at ins[k] + sum idx_d * strides[k * ndim + d] (elements; 0 on a
 * broadcast axis). Rows (all axes but the last) are split across threads, or the last axis
 * when there are few rows: each output is one independent element, so any split gives the
 * same bits. An inner stride other than 0 or 1 is gathered into a scratch row first. */
#include <math.h>
#include <stdlib.h>

#include "common.h"

enum {
    OP_ADD = 0, OP_SUB = 1, OP_MUL = 2, OP_FMA = 3, OP_DIV = 4, OP_SQRT = 5, OP_NEG = 6, OP_ABS = 7, OP_MIN = 8,
    OP_MAX = 9, OP_EQ = 10, OP_LT = 11, OP_LE = 12, OP_SELECT = 13, OP_RINT = 14, OP_FLOOR = 15, OP_TRUNC = 16,
    OP_COPY = 21,
    OP_EXP = 100, OP_LOG, OP_SIGMOID, OP_TANH, OP_ERF, OP_SIN, OP_COS, OP_SILU, OP_GELU, OP_GELU_TANH,
    OP_SILU_BWD = 120, OP_GELU_BWD, OP_GELU_TANH_BWD, OP_TANH_BWD, OP_SIGMOID_BWD, OP_POW,
};

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define RP_INNER map_inner_avx2
#include "map_inner.h"
#undef RP_INNER
#pragma GCC pop_options
#define RP_INNER map_inner_base
#include "map_inner.h"
#undef RP_INNER

typedef void (*inner_fn)(int, long, const void *, int, const void *, int, const void *, int, void *);

static size_t elem_size(int op, int k) { return (op == OP_SELECT && k == 0) ? 1 : 4; }
static size_t out_size(int op) { return (op == OP_EQ || op == OP_LT || op == OP_LE) ? 1 : 4; }

/* Outputs [r0, r1) rows x [c0, c1) columns of the last axis. */
static void run_block(inner_fn inner, int op, int nin, int ndim, const long *shape, const void *const *ins,
                      const long *strides, void *out, long r0, long r1, long c0, long c1, void *scratch) {
    const long n = shape[ndim - 1], w = c1 - c0;
    const size_t osz = out_size(op);
    for (long r = r0; r < r1; r++) {
        const void *p[3] = {ins[0], nin > 1 ? ins[1] : ins[0], nin > 2 ? ins[2] : ins[0]};
        int s[3] = {0, 0, 0};
        long rem = r;
        long off[3] = {0, 0, 0};
        for (int d = ndim - 2; d >= 0; d--) {   /* row index -> operand offsets */
            long i = rem % shape[d];
            rem /= shape[d];
            for (int k = 0; k < nin; k++) off[k] += i * strides[k * ndim + d];
        }
        for (int k = 0; k < nin; k++) {
            long st = strides[k * ndim + ndim - 1];
            size_t es = elem_size(op, k);
            const char *base = (const char *)ins[k] + (off[k] + c0 * st) * (long)es;
            if (st == 0 || st == 1) {
                p[k] = base;
                s[k] = st == 1;
            } else {                             /* gather the strided row (an exact copy) */
                char *buf = (char *)scratch + (size_t)k * (size_t)w * 4;
                for (long i = 0; i < w; i++) memcpy(buf + i * es, base + i * st * (long)es, es);
                p[k] = buf;
                s[k] = 1;
            }
        }
        inner(op, w, p[0], s[0], p[1], s[1], p[2], s[2], (char *)out + (r * n + c0) * osz);
    }
}

int repops_map_f32(int op, int nin, int ndim, const long *shape, const void *const *ins, const long *strides,
                   void *out, int nthreads) {
    if (ndim < 1 || nin < 1 || nin > 3) return -1;
    long rows = 1, total;
    for (int d = 0; d < ndim - 1; d++) rows *= shape[d];
    const long n = shape[ndim - 1];
    total = rows * n;
    if (total == 0) return 0;
    __builtin_cpu_init();
    inner_fn inner = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? map_inner_avx2 : map_inner_base;
    int nt = total < (1L << 15) ? 1 : nthreads;
    int by_rows = rows >= nt;
    int failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
    {
        unsigned old = repops_ieee_enter();
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        long r0 = by_rows ? rows * t / T : 0, r1 = by_rows ? rows * (t + 1) / T : rows;
        long c0 = by_rows ? 0 : n * t / T, c1 = by_rows ? n : n * (t + 1) / T;
        void *scratch = malloc((size_t)3 * (size_t)(c1 - c0 + 1) * 4);
        if (!scratch) failed = 1;
        else run_block(inner, op, nin, ndim, shape, ins, strides, out, r0, r1, c0, c1, scratch);
        free(scratch);
        _mm_setcsr(old);
    }
    return failed ? -1 : 0;
}
