/* fold along the LAST axis of a contiguous [rows, n] array, one accumulator per row:
 *   acc = init; for i in 0..n-1: acc = op(acc, x[r, i])
 * in increasing i, exactly the reference's order. Work is spread across rows only (each
 * row is an independent output); NaN canonicalised at the end (add and IEEE-2019 max
 * propagate NaN, so this equals canonicalising every step). */
#include "common.h"

enum { FOLD_ADD = 0, FOLD_MAX = 1 };

int repops_fold_f32(int op, const float *x, float *out, long rows, long n, float init, int nthreads) {
    if (op != FOLD_ADD && op != FOLD_MAX) return -1;
    const long block = 256;       /* rows per task: the row accumulators stay in L1 */
#pragma omp parallel for num_threads(nthreads) schedule(static) if (rows * n > (1L << 18))
    for (long r0 = 0; r0 < rows; r0 += block) {
        unsigned old = repops_ieee_enter();
        long r1 = r0 + block < rows ? r0 + block : rows;
        float acc[256];
        for (long r = r0; r < r1; r++) acc[r - r0] = init;
        for (long i = 0; i < n; i++) {
            if (op == FOLD_ADD)
                for (long r = r0; r < r1; r++) acc[r - r0] = acc[r - r0] + x[r * n + i];
            else
                for (long r = r0; r < r1; r++) acc[r - r0] = rp_max(acc[r - r0], x[r * n + i]);
        }
        for (long r = r0; r < r1; r++) out[r] = rp_canon(acc[r - r0]);
        _mm_setcsr(old);
    }
    return 0;
}
