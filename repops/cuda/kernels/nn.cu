// Row operators of repops/reference/nn.py (and the CPU's kernels/nn.c, same opcodes): one
// block per row (block.cuh): loads, maps and the max on every thread, each sum one thread's
// fold over j = 0..n-1 in order, exactly the reference's order. A row is n elements at
// stride `inner` of a [outer, n, inner] array (inner > 1: a reduction along a non-last
// axis). Values that are not data (scale, eps) come from device memory, never as by-value
// floats.
#include "block.cuh"

#define ROW(r) ((r) / inner * n * inner + (r) % inner)
#define MASK_AT(r, j) ((r) / (mo1 * mo2) * ms0 + (r) / mo2 % mo1 * ms1 + (r) % mo2 * ms2 + (j) * ms)

// op: 0 softmax(x); 1 log_softmax(x); 2 softmax_backward(g = x, y); 3 log_softmax_backward(g = x, y);
// 4 attention rows: softmax(mask ? -inf : x scale), +0 on a row whose max is -inf; 5 attention rows back: (mask ? +0 : softmax_backward(x, y)) scale.
// The mask (ops 4, 5: rows along the last axis, inner = 1) is read through its strides: row r
// as 3 dims [outer / (mo1 mo2), mo1, mo2] of strides (ms0, ms1, ms2), ms along the row (a
// [T, T] or [B, 1, T, T] mask broadcast over batch and heads is never copied).
extern "C" __global__ void rows_f32(int op, const float *x, const float *y, int has_mask, const unsigned char *mask,
                                    const float *scale_p, float *out, long long outer, long long n, long long inner,
                                    long long mo1, long long mo2, long long ms0, long long ms1, long long ms2,
                                    long long ms) {
    __shared__ float stage[REPOPS_STAGE];
    const float scale = scale_p[0];
    REPOPS_FOR_EACH_ROW(r, outer * inner) {
        const long long b = ROW(r);
        float acc[1] = {-0.0f};
        if (op == 0 || op == 1 || op == 4) {
            auto s = [&](long long j) {
                float v = x[b + j * inner];
                return op == 4 ? ((has_mask && mask[MASK_AT(r, j)]) ? -RP_INF : v * scale) : v;
            };
            const float m = rp_block_max(n, s);
            rp_block_sums<1>(n, [&](long long j, float *v) {
                v[0] = rp_exp(s(j) - m);
                if (op != 1) out[b + j * inner] = v[0];
            }, acc, stage);
            if (op == 1) {
                const float l = rp_log(acc[0]);
                for (long long j = threadIdx.x; j < n; j += blockDim.x)
                    out[b + j * inner] = rp_canon((x[b + j * inner] - m) - l);
            } else {
                for (long long j = threadIdx.x; j < n; j += blockDim.x)  // (op 4: +0 on a fully masked row)
                    out[b + j * inner] = op == 4 && m == -RP_INF ? 0.0f : rp_canon(out[b + j * inner] / acc[0]);
            }
        } else if (op == 2 || op == 5) {
            rp_block_sums<1>(n, [&](long long j, float *v) { v[0] = x[b + j * inner] * y[b + j * inner]; }, acc, stage);
            for (long long j = threadIdx.x; j < n; j += blockDim.x) {
                float d = y[b + j * inner] * (x[b + j * inner] - acc[0]);
                if (op == 5) d = ((has_mask && mask[MASK_AT(r, j)]) ? 0.0f : d) * scale;
                out[b + j * inner] = rp_canon(d);
            }
        } else {
            rp_block_sums<1>(n, [&](long long j, float *v) { v[0] = x[b + j * inner]; }, acc, stage);
            for (long long j = threadIdx.x; j < n; j += blockDim.x)
                out[b + j * inner] = rp_canon(x[b + j * inner] - rp_exp(y[b + j * inner]) * acc[0]);
        }
    }
}

// Norms over rows of n contiguous elements (kernels/nn.c's opcodes), one block per row as
// rows_f32: 0 layer norm: a = x -> out = y, s0 = mean, s1 = rstd; 1 its backward: a = go,
// xx = x, s0/s1 in -> out = dx, wterm = go xhat; 2 RMS norm: a = x -> out = y, s0 = r; 3 its
// backward: a = g, xx = x, s0 = r -> out = dx, wterm = g (x r). w (has_w), b (has_b): the
// affine weight and bias, n each.
extern "C" __global__ void norm_f32(int op, const float *a, const float *xx, int has_w, const float *w, int has_b,
                                    const float *bias, const float *eps_p, float *s0, float *s1, float *out,
                                    float *wterm, long long rows, long long n) {
    __shared__ float stage[2 * REPOPS_STAGE];
    const float nf = (float)n, eps = eps_p[0];
    const long long t0 = threadIdx.x, nt = blockDim.x;
    REPOPS_FOR_EACH_ROW(r, rows) {
        const float *A = a + r * n, *X = xx + r * n;
        float *O = out + r * n, *W = wterm + r * n;
        if (op == 0) {
            float acc[1] = {-0.0f};
            rp_block_sums<1>(n, [&](long long j, float *v) { v[0] = A[j]; }, acc, stage);
            const float mean = acc[0] / nf;
            acc[0] = -0.0f;
            rp_block_sums<1>(n, [&](long long j, float *v) { v[0] = (A[j] - mean) * (A[j] - mean); }, acc, stage);
            const float rstd = 1.0f / sqrtf(acc[0] / nf + eps);
            for (long long j = t0; j < n; j += nt) {
                float v = (A[j] - mean) * rstd;
                if (has_w) v = v * w[j];
                if (has_b) v = v + bias[j];
                O[j] = rp_canon(v);
            }
            if (t0 == 0) {
                s0[r] = rp_canon(mean);
                s1[r] = rp_canon(rstd);
            }
        } else if (op == 2) {
            float acc[1] = {-0.0f};
            rp_block_sums<1>(n, [&](long long j, float *v) { v[0] = A[j] * A[j]; }, acc, stage);
            const float rr = 1.0f / sqrtf(acc[0] / nf + eps);
            for (long long j = t0; j < n; j += nt) O[j] = rp_canon((A[j] * rr) * w[j]);
            if (t0 == 0) s0[r] = rp_canon(rr);
        } else if (op == 1) {
            const float mean = s0[r], rstd = s1[r];
            float acc[2] = {-0.0f, -0.0f};
            rp_block_sums<2>(n, [&](long long j, float *v) {
                float xhat = (X[j] - mean) * rstd;
                float g = has_w ? A[j] * w[j] : A[j];
                v[0] = g;
                v[1] = g * xhat;
                W[j] = A[j] * xhat;
            }, acc, stage);
            const float m1 = acc[0] / nf, m2 = acc[1] / nf;
            for (long long j = t0; j < n; j += nt) {
                float xhat = (X[j] - mean) * rstd;
                float g = has_w ? A[j] * w[j] : A[j];
                O[j] = rp_canon(rstd * ((g - m1) - xhat * m2));
            }
        } else {
            const float rr = s0[r];
            float acc[1] = {-0.0f};
            rp_block_sums<1>(n, [&](long long j, float *v) {
                v[0] = (A[j] * w[j]) * X[j];
                W[j] = A[j] * (X[j] * rr);
            }, acc, stage);
            const float c = ((acc[0] * -0.5f) * ((rr * rr) * rr)) / nf;
            for (long long j = t0; j < n; j += nt) O[j] = rp_canon((A[j] * w[j]) * rr + c * (X[j] * 2.0f));
        }
    }
}

// Column sums over rows in order, from -0: dw[c] of wterm (has_dw), db[c] of go (has_db).
// A block per `cols` columns (block.cuh rp_column_folds): rows staged by the block, one
// thread per column adding them in order.
extern "C" __global__ void colsum_f32(const float *wterm, const float *go, int has_dw, float *dw, int has_db, float *db,
                                      long long rows, long long n, int cols) {
    __shared__ float stage[2 * REPOPS_STAGE];
    for (long long c0 = blockIdx.x * (long long)cols; c0 < n; c0 += (long long)gridDim.x * cols) {
        float acc[2] = {-0.0f, -0.0f};
        rp_column_folds<2>(rows, n, c0, cols, [&](int k, long long r, long long c) {
            return k == 0 ? (has_dw ? wterm[r * n + c] : 0.0f) : (has_db ? go[r * n + c] : 0.0f);
        }, [](int, float s, float v) { return s + v; }, acc, stage);
        const long long c = c0 + threadIdx.x;
        if (threadIdx.x < cols && c < n) {
            if (has_dw) dw[c] = rp_canon(acc[0]);
            if (has_db) db[c] = rp_canon(acc[1]);
        }
    }
}
