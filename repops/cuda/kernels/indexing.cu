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

// The fault rules' checks (repops/faults.py, docs/NUMERICS.md §14) without CuPy's kernels or
// a read: slot b = 1 + the first (row-major) element that block b visits of the operand (n
// elements, read through its strides as RP_STRIDES says) that breaks the rule, 0 if none. Every
// block writes its slot, so slots need no zeroing; the smallest nonzero slot of a check is its
// first bad element. The host reads a block of ops' slots in one download when it settles.
#define RP_CHECK_THREADS 256  // blockDim.x at most, a power of two

// A block's slot: the least nonzero of its threads' `mine` (each thread's elements rise, so
// its first bad one is its least), by halves through `first` (RP_CHECK_THREADS entries).
__device__ __forceinline__ void repops_check_slot(long long mine, long long *first, long long *slots) {
    const int t = threadIdx.x;
    first[t] = mine;
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        __syncthreads();
        if (t < s) {
            const long long o = first[t + s];
            if (o && (!first[t] || o < first[t])) first[t] = o;
        }
    }
    if (t == 0) slots[blockIdx.x] = first[0];
}

// Rule `index`: an element outside [0, bound) and not `ignore` (when use_ignore).
extern "C" __global__ void index_check_i64(const long long *index, RP_STRIDES(si), long long n, long long d1,
                                           long long d2, long long d3, long long bound, long long ignore,
                                           int use_ignore, long long *slots) {
    __shared__ long long first[RP_CHECK_THREADS];
    long long mine = 0;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n && !mine;
         e += (long long)blockDim.x * gridDim.x) {
        const long long v = index[RP_AT(si, rp_coords(e, d1, d2, d3))];
        if ((v < 0 || v >= bound) && !(use_ignore && v == ignore)) mine = e + 1;
    }
    repops_check_slot(mine, first, slots);
}

// Rule `domain` as faults.finite states it: an element that is not finite (all exponent bits
// set: an infinity or a NaN, read as bits: no float compare).
extern "C" __global__ void finite_check_f32(const float *x, RP_STRIDES(sx), long long n, long long d1, long long d2,
                                            long long d3, long long *slots) {
    __shared__ long long first[RP_CHECK_THREADS];
    long long mine = 0;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n && !mine;
         e += (long long)blockDim.x * gridDim.x) {
        if ((__float_as_uint(x[RP_AT(sx, rp_coords(e, d1, d2, d3))]) & 0x7f800000u) == 0x7f800000u) mine = e + 1;
    }
    repops_check_slot(mine, first, slots);
}

// Embedding backward (repops/reference/nn.py; the CPU's kernels/indexing.c): out [V, D] =
// the sum of the rows g[p] with index[p] == w in increasing p, from +0. A non-finite g[p, d]
// poisons column d in every row but index[p] (the one-hot product's 0 * inf): S_d = the rows
// with a non-finite entry in column d; every row but w1 if S_d = {w1}, every row if |S_d| > 1.
// An index outside [0, V) (past a fault, which the caller reads later: repops/faults.py) is
// a one-hot row of zeros: it adds nothing, and its non-finite entry poisons every row; it is
// never a write outside `out`. Two launches:

// 1. S_d's summary per column: -1 (empty), w1 (one row), -2 (more, or an index outside the
// table). Exact in any order (the summary of a set union), so each block takes `cols`
// columns, its threads lanes over the positions, then a tree over the lanes.
__device__ __forceinline__ long long repops_poison_join(long long a, long long b) {
    return a == -1 ? b : (b == -1 || a == b ? a : -2);
}

extern "C" __global__ void embedding_poison_f32(const long long *index, const float *g, long long *poison,
                                                long long P, long long D, long long V, int cols) {
    __shared__ long long part[1024];  // blockDim.x <= 1024
    const int t = threadIdx.x, lanes = blockDim.x / cols, lane = t / cols;
    for (long long c0 = blockIdx.x * (long long)cols; c0 < D; c0 += (long long)gridDim.x * cols) {
        const long long c = c0 + t % cols;
        long long s = -1;
        if (lane < lanes && c < D)
            for (long long p = lane; p < P; p += lanes) {
                const float v = g[p * D + c];
                if (v - v != 0.0f) {  // not finite (inf - inf and NaN - NaN are NaN)
                    const long long w = index[p];
                    s = repops_poison_join(s, w >= 0 && w < V ? w : -2);
                }
            }
        __syncthreads();  // the previous group's part[] is read
        part[t] = s;
        __syncthreads();
        for (int k = 1; k < lanes; k *= 2) {
            if (lane % (2 * k) == 0 && lane + k < lanes) part[t] = repops_poison_join(part[t], part[t + k * cols]);
            __syncthreads();
        }
        if (t < cols && c < D) poison[c] = part[t];
    }
}

// 2. A block owns `per` rows of the table [w0, w0 + per): it writes them +0, then walks the
// positions in chunks of blockDim.x, the block marking the positions whose index falls in its
// rows and compacting them in order (a prefix sum of the marks in shared memory, exact
// integers), then adds those rows of g in increasing p, thread t owning columns t, t +
// blockDim.x, ...: each (w, d) chain is one thread's, in the spec's order. Last, the
// poisoned columns of its rows become NaN.
extern "C" __global__ void embedding_backward_f32(const long long *index, const float *g, const long long *poison,
                                                  float *out, long long P, long long D, long long V, long long per) {
    __shared__ int scan[1024];  // blockDim.x <= 1024
    __shared__ long long hit_p[1024], hit_w[1024];
    const int t = threadIdx.x, nt = blockDim.x;
    for (long long w0 = blockIdx.x * per; w0 < V; w0 += (long long)gridDim.x * per) {
        const long long w1 = w0 + per < V ? w0 + per : V;
        for (long long w = w0; w < w1; w++)
            for (long long d = t; d < D; d += nt) out[w * D + d] = 0.0f;
        for (long long p0 = 0; p0 < P; p0 += nt) {
            const long long p = p0 + t;
            const long long w = p < P ? index[p] : -1;
            const int mine = w >= w0 && w < w1;
            __syncthreads();  // the previous chunk's hits are read
            scan[t] = mine;
            __syncthreads();
            for (int k = 1; k < nt; k *= 2) {
                const int add = t >= k ? scan[t - k] : 0;
                __syncthreads();
                scan[t] += add;
                __syncthreads();
            }
            if (mine) {
                hit_p[scan[t] - 1] = p;
                hit_w[scan[t] - 1] = w;
            }
            __syncthreads();
            const int hits = scan[nt - 1];
            for (int h = 0; h < hits; h++) {
                const float *G = g + hit_p[h] * D;
                float *O = out + hit_w[h] * D;
                for (long long d = t; d < D; d += nt) O[d] = rp_canon(O[d] + G[d]);
            }
        }
        for (long long d = t; d < D; d += nt) {
            const long long s = poison[d];
            if (s != -1)
                for (long long w = w0; w < w1; w++)
                    if (w != s) out[w * D + d] = RP_NAN;
        }
    }
}
