/* Embedding backward (repops/reference/nn.py embedding_backward): the one-hot matmul's bits
 * by a sparse accumulation. out = +0; for p in increasing order: out[index[p]] += g[p] (each
 * column an independent output: threads split the columns, every column walks p in order).
 * The one-hot product's only other effect: a non-finite g[p, d] poisons column d (0 * inf =
 * NaN) in every row w != index[p]. With S_d = the rows holding a non-finite entry of column
 * d: no row is poisoned if S_d is empty, every row but w1 if S_d = {w1}, every row if |S_d| > 1.
 * An index outside [0, V) (past a noted or deferred fault: repops/faults.py) is a one-hot row
 * of zeros: it adds nothing and its non-finite entry poisons every row; never a write outside. */
#include <math.h>
#include <stdlib.h>

#include "common.h"

int repops_embedding_backward_f32(const int64_t *index, const float *g, float *out, long P, long D, long V,
                                  int nthreads) {
    memset(out, 0, sizeof(float) * (size_t)V * D); /* +0 */
    const long block = 64;
    int nt = P * D < (1L << 15) ? 1 : nthreads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long d0 = 0; d0 < D; d0 += block) {
        unsigned old = repops_ieee_enter();
        long d1 = d0 + block < D ? d0 + block : D;
        long w1[64];
        int multi[64];
        for (long d = d0; d < d1; d++) w1[d - d0] = -1, multi[d - d0] = 0;
        for (long p = 0; p < P; p++) {
            const int in = index[p] >= 0 && index[p] < V;
            float *o = out + index[p] * D;
            const float *gp = g + p * D;
            if (in)
                for (long d = d0; d < d1; d++) o[d] = o[d] + gp[d];
            for (long d = d0; d < d1; d++)
                if (!isfinite(gp[d])) {
                    if (!in) multi[d - d0] = 1;
                    else if (w1[d - d0] < 0) w1[d - d0] = index[p];
                    else if (w1[d - d0] != index[p]) multi[d - d0] = 1;
                }
        }
        for (long p = 0; p < P; p++) /* a NaN can only be in a touched row, or poisoned below */
            if (index[p] >= 0 && index[p] < V)
                for (long d = d0; d < d1; d++) out[index[p] * D + d] = rp_canon(out[index[p] * D + d]);
        for (long d = d0; d < d1; d++)
            if (multi[d - d0] || w1[d - d0] >= 0)
                for (long w = 0; w < V; w++)
                    if (multi[d - d0] || w != w1[d - d0]) out[w * D + d] = RP_NAN;
        _mm_setcsr(old);
    }
    return 0;
}
