// Index moves (docs/NUMERICS.md §10): each output element is one operand element picked by
// an int64 index element, copied as bits (unsigned words: nothing float touches them).
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
