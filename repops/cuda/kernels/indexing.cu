// Indexing kernels. Index moves (docs/NUMERICS.md §10): each output element is one operand
// element picked by an int64 index element, copied as bits (unsigned words: nothing float
// touches them). And embedding backward, the one index op with arithmetic.
#include "common.cuh"

// data [R, N, D], index [R, M], fill [1] -> out [R, M, D]:
// out[r, m, d] = data[r, I, d] if 0 <= I < N else fill, I = index[r, m].
extern "C" __global__ void gather_u32(const unsigned *data, const long long *index, const unsigned *fill,
                                      unsigned *out, long long R, long long N, long long M, long long D) {
    REPOPS_FOR_EACH(o, R * M * D) {
        long long d = o % D, rm = o / D, r = rm / M;
        long long i = index[rm];
        out[o] = (i >= 0 && i < N) ? data[(r * N + i) * D + d] : fill[0];
    }
}

// index [R], value [R] (stride sv: 0 broadcasts one value), fill [N] (stride sf) -> out [R, N]:
// out[r, c] = value[r] if c == index[r] else fill[c].
extern "C" __global__ void onehot_u32(const long long *index, const unsigned *value, long long sv, const unsigned *fill,
                                      long long sf, unsigned *out, long long R, long long N) {
    REPOPS_FOR_EACH(o, R * N) {
        long long r = o / N, c = o % N;
        out[o] = c == index[r] ? value[r * sv] : fill[c * sf];
    }
}

// Embedding backward (repops/reference/nn.py; the CPU's kernels/indexing.c): out [V, D] = +0 is
// written by the caller; one thread per column d walks the positions p in order:
// out[index[p], d] += g[p, d]. A non-finite g[p, d] poisons column d in every row but index[p]
// (the one-hot product's 0 * inf): S_d = the rows with a non-finite entry; every row but w1 if
// S_d = {w1}, every row if |S_d| > 1. An index outside [0, V) (past a fault, which the caller
// reads later: repops/faults.py) is a one-hot row of zeros: it adds nothing, and its
// non-finite entry poisons every row; it is never a write outside `out`.
extern "C" __global__ void embedding_backward_f32(const long long *index, const float *g, float *out, long long P,
                                                  long long D, long long V) {
    REPOPS_FOR_EACH(d, D) {
        long long w1 = -1;
        int multi = 0;
        for (long long p = 0; p < P; p++) {
            const float v = g[p * D + d];
            const long long w = index[p];
            const int in = w >= 0 && w < V;
            if (in) out[w * D + d] = out[w * D + d] + v;
            if (v - v != 0.0f) {  // not finite (inf - inf and NaN - NaN are NaN)
                if (!in) multi = 1;
                else if (w1 < 0) w1 = w;
                else if (w1 != w) multi = 1;
            }
        }
        for (long long p = 0; p < P; p++)
            if (index[p] >= 0 && index[p] < V) out[index[p] * D + d] = rp_canon(out[index[p] * D + d]);
        if (multi) w1 = V;  // (every row)
        if (w1 >= 0)
            for (long long w = 0; w < V; w++)
                if (multi || w != w1) out[w * D + d] = RP_NAN;
    }
}
