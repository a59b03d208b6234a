// Row operators of repops/reference/nn.py (and the CPU's kernels/nn.c, same opcodes): one
// thread per row, folding j = 0..n-1 in order, exactly the reference's order. A row is n
// elements at stride `inner` of a [outer, n, inner] array (inner > 1: a reduction along a
// non-last axis; consecutive threads then read consecutive addresses). Values that are not
// data (scale, eps) come from device memory, never as by-value floats.
#include "common.cuh"

#define ROW(r) ((r) / inner * n * inner + (r) % inner)

// op: 0 softmax(x); 1 log_softmax(x); 2 softmax_backward(g = x, y); 3 log_softmax_backward(g = x, y);
// 4 attention rows: softmax(mask ? -inf : x scale); 5 attention rows back: (mask ? +0 : softmax_backward(x, y)) scale.
extern "C" __global__ void rows_f32(int op, const float *x, const float *y, int has_mask, const unsigned char *mask,
                                    const float *scale_p, float *out, long long outer, long long n, long long inner) {
    const float scale = scale_p[0];
    REPOPS_FOR_EACH(r, outer * inner) {
        const long long b = ROW(r);
        float acc = -0.0f;
        if (op == 0 || op == 1 || op == 4) {
            float m = -RP_INF;
            for (long long j = 0; j < n; j++) {
                float s = x[b + j * inner];
                if (op == 4) s = (has_mask && mask[b + j * inner]) ? -RP_INF : s * scale;
                m = rp_max(m, s);
            }
            for (long long j = 0; j < n; j++) {
                float s = x[b + j * inner];
                if (op == 4) s = (has_mask && mask[b + j * inner]) ? -RP_INF : s * scale;
                float e = rp_exp(s - m);
                acc = acc + e;
                if (op != 1) out[b + j * inner] = e;
            }
            if (op == 1) {
                float l = rp_log(acc);
                for (long long j = 0; j < n; j++) out[b + j * inner] = rp_canon((x[b + j * inner] - m) - l);
            } else {
                for (long long j = 0; j < n; j++) out[b + j * inner] = rp_canon(out[b + j * inner] / acc);
            }
        } else if (op == 2 || op == 5) {
            for (long long j = 0; j < n; j++) acc = acc + x[b + j * inner] * y[b + j * inner];
            for (long long j = 0; j < n; j++) {
                float d = y[b + j * inner] * (x[b + j * inner] - acc);
                if (op == 5) d = ((has_mask && mask[b + j * inner]) ? 0.0f : d) * scale;
                out[b + j * inner] = rp_canon(d);
            }
        } else {
            for (long long j = 0; j < n; j++) acc = acc + x[b + j * inner];
            for (long long j = 0; j < n; j++) out[b + j * inner] = rp_canon(x[b + j * inner] - rp_exp(y[b + j * inner]) * acc);
        }
    }
}

// Norms over rows of n contiguous elements (kernels/nn.c's opcodes): 0 layer norm: a = x ->
// out = y, s0 = mean, s1 = rstd; 1 its backward: a = go, xx = x, s0/s1 in -> out = dx, wterm =
// go xhat; 2 RMS norm: a = x -> out = y, s0 = r; 3 its backward: a = g, xx = x, s0 = r -> out =
// dx, wterm = g (x r). w (has_w), b (has_b): the affine weight and bias, n each.
extern "C" __global__ void norm_f32(int op, const float *a, const float *xx, int has_w, const float *w, int has_b,
                                    const float *bias, const float *eps_p, float *s0, float *s1, float *out,
                                    float *wterm, long long rows, long long n) {
    const float nf = (float)n, eps = eps_p[0];
    REPOPS_FOR_EACH(r, rows) {
        const float *A = a + r * n, *X = xx + r * n;
        float *O = out + r * n, *W = wterm + r * n;
        float acc = -0.0f, acc2 = -0.0f;
        if (op == 0) {
            for (long long j = 0; j < n; j++) acc = acc + A[j];
            const float mean = acc / nf;
            acc = -0.0f;
            for (long long j = 0; j < n; j++) acc = acc + (A[j] - mean) * (A[j] - mean);
            const float rstd = 1.0f / sqrtf(acc / nf + eps);
            for (long long j = 0; j < n; j++) {
                float v = (A[j] - mean) * rstd;
                if (has_w) v = v * w[j];
                if (has_b) v = v + bias[j];
                O[j] = rp_canon(v);
            }
            s0[r] = rp_canon(mean);
            s1[r] = rp_canon(rstd);
        } else if (op == 2) {
            for (long long j = 0; j < n; j++) acc = acc + A[j] * A[j];
            const float rr = 1.0f / sqrtf(acc / nf + eps);
            for (long long j = 0; j < n; j++) O[j] = rp_canon((A[j] * rr) * w[j]);
            s0[r] = rp_canon(rr);
        } else if (op == 1) {
            const float mean = s0[r], rstd = s1[r];
            for (long long j = 0; j < n; j++) {
                float xhat = (X[j] - mean) * rstd;
                float g = has_w ? A[j] * w[j] : A[j];
                acc = acc + g;
                acc2 = acc2 + g * xhat;
                W[j] = A[j] * xhat;
            }
            acc = acc / nf;
            acc2 = acc2 / nf;
            for (long long j = 0; j < n; j++) {
                float xhat = (X[j] - mean) * rstd;
                float g = has_w ? A[j] * w[j] : A[j];
                O[j] = rp_canon(rstd * ((g - acc) - xhat * acc2));
            }
        } else {
            const float rr = s0[r];
            for (long long j = 0; j < n; j++) {
                acc = acc + (A[j] * w[j]) * X[j];
                W[j] = A[j] * (X[j] * rr);
            }
            acc = ((acc * -0.5f) * ((rr * rr) * rr)) / nf;
            for (long long j = 0; j < n; j++) O[j] = rp_canon((A[j] * w[j]) * rr + acc * (X[j] * 2.0f));
        }
    }
}

// Column sums over rows in order, from -0: dw[c] of wterm (has_dw), db[c] of go (has_db).
extern "C" __global__ void colsum_f32(const float *wterm, const float *go, int has_dw, float *dw, int has_db, float *db,
                                      long long rows, long long n) {
    REPOPS_FOR_EACH(c, n) {
        float sw = -0.0f, sb = -0.0f;
        for (long long r = 0; r < rows; r++) {
            if (has_dw) sw = sw + wterm[r * n + c];
            if (has_db) sb = sb + go[r * n + c];
        }
        if (has_dw) dw[c] = rp_canon(sw);
        if (has_db) db[c] = rp_canon(sb);
    }
}
