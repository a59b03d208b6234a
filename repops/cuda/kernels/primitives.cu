// The binary32 primitives (offchain/softfloat.py PRIMITIVES; same opcodes) and the fused
// activations (opcodes 100+: repops/kernels/elementwise.h, the opcodes of the CPU kernel
// repops/cpu/kernels/elementwise.c), one output per thread. Operands are read where they
// are, through their strides (common.cuh RP_AT: a transposed, sliced or broadcast view is
// never copied first); the output is contiguous.
#include "common.cuh"

extern "C" __global__ void prim_map_f32(int op, const float *a, RP_STRIDES(sa), const float *b, RP_STRIDES(sb),
                                        const float *c, RP_STRIDES(sc), float *out, long long n, long long d1,
                                        long long d2, long long d3) {
    REPOPS_FOR_EACH(i, n) {
        const RpCoords at = rp_coords(i, d1, d2, d3);
        float x = a[RP_AT(sa, at)], y, r;
        switch (op) {
            case 0: y = b[RP_AT(sb, at)]; r = x + y; break;
            case 1: y = b[RP_AT(sb, at)]; r = x - y; break;
            case 2: y = b[RP_AT(sb, at)]; r = x * y; break;
            case 3: r = RP_FMA(x, b[RP_AT(sb, at)], c[RP_AT(sc, at)]); break;
            case 4: y = b[RP_AT(sb, at)]; r = x / y; break;
            case 5: r = sqrtf(x); break;
            case 6: r = __uint_as_float(__float_as_uint(x) ^ 0x80000000u); break;
            case 7: r = __uint_as_float(__float_as_uint(x) & 0x7FFFFFFFu); break;
            case 8: r = rp_min(x, b[RP_AT(sb, at)]); break;
            case 9: r = rp_max(x, b[RP_AT(sb, at)]); break;
            case 14: r = rintf(x); break;
            case 15: r = floorf(x); break;
            case 16: r = truncf(x); break;
            case 100: r = rp_exp(x); break;
            case 101: r = rp_log(x); break;
            case 102: r = rp_sigmoid(x); break;
            case 103: r = rp_tanh(x); break;
            case 104: r = rp_erf(x); break;
            case 105: r = rp_sin(x); break;
            case 106: r = rp_cos(x); break;
            case 107: r = rp_silu(x); break;
            case 108: r = rp_gelu(x); break;
            case 109: r = rp_gelu_tanh(x); break;
            case 120: r = rp_silu_backward(x, b[RP_AT(sb, at)]); break;
            case 121: r = rp_gelu_backward(x, b[RP_AT(sb, at)]); break;
            case 122: r = rp_gelu_tanh_backward(x, b[RP_AT(sb, at)]); break;
            case 123: r = rp_tanh_backward(x, b[RP_AT(sb, at)]); break;
            case 124: r = rp_sigmoid_backward(x, b[RP_AT(sb, at)]); break;
            case 125: r = rp_pow(x, b[RP_AT(sb, at)]); break;
            default: out[i] = x; continue;     // 21 copy: data movement, bits unchanged
        }
        out[i] = rp_canon(r);
    }
}

// eq (10), lt (11), le (12): IEEE comparisons, false on NaN.
extern "C" __global__ void prim_compare_f32(int op, const float *a, RP_STRIDES(sa), const float *b, RP_STRIDES(sb),
                                            unsigned char *out, long long n, long long d1, long long d2, long long d3) {
    REPOPS_FOR_EACH(i, n) {
        const RpCoords at = rp_coords(i, d1, d2, d3);
        float x = a[RP_AT(sa, at)], y = b[RP_AT(sb, at)];
        out[i] = op == 10 ? x == y : (op == 11 ? x < y : x <= y);
    }
}

// select (13): cond ? a : b.
extern "C" __global__ void prim_select_f32(const unsigned char *cond, RP_STRIDES(sk), const float *a, RP_STRIDES(sa),
                                           const float *b, RP_STRIDES(sb), float *out, long long n, long long d1,
                                           long long d2, long long d3) {
    REPOPS_FOR_EACH(i, n) {
        const RpCoords at = rp_coords(i, d1, d2, d3);
        out[i] = rp_canon(cond[RP_AT(sk, at)] ? a[RP_AT(sa, at)] : b[RP_AT(sb, at)]);
    }
}

// ldexp (17).
extern "C" __global__ void prim_ldexp_f32(const float *a, RP_STRIDES(sa), const int *e, RP_STRIDES(se), float *out,
                                          long long n, long long d1, long long d2, long long d3) {
    REPOPS_FOR_EACH(i, n) {
        const RpCoords at = rp_coords(i, d1, d2, d3);
        out[i] = repops_ldexp(a[RP_AT(sa, at)], e[RP_AT(se, at)]);
    }
}

// from_int32 (18): one RNE conversion.
extern "C" __global__ void prim_from_int32_f32(const int *a, RP_STRIDES(sa), float *out, long long n, long long d1,
                                               long long d2, long long d3) {
    REPOPS_FOR_EACH(i, n) out[i] = (float)a[RP_AT(sa, rp_coords(i, d1, d2, d3))];
}

// to_int32_trunc (19), to_int32_rne (20): saturating, NaN -> 0.
extern "C" __global__ void prim_to_int32_f32(int op, const float *a, RP_STRIDES(sa), int *out, long long n, long long d1,
                                             long long d2, long long d3) {
    REPOPS_FOR_EACH(i, n) {
        float x = a[RP_AT(sa, rp_coords(i, d1, d2, d3))];
        out[i] = repops_to_int32(op == 19 ? truncf(x) : rintf(x));
    }
}

// Rotary embedding of interleaved pairs (elementwise.h rp_rope): pair i of x is x[at], x[at + lane]
// (at through x's pair strides); cos and sin read through theirs; the output contiguous.
extern "C" __global__ void rope_f32(int backward, const float *x, RP_STRIDES(sx), long long lane, const float *c,
                                    RP_STRIDES(sc), const float *s, RP_STRIDES(ss), float *out, long long n,
                                    long long d1, long long d2, long long d3) {
    REPOPS_FOR_EACH(i, n) {
        const RpCoords at = rp_coords(i, d1, d2, d3);
        const long long xi = RP_AT(sx, at);
        rp_rope(backward, x[xi], x[xi + lane], c[RP_AT(sc, at)], s[RP_AT(ss, at)], out + 2 * i, out + 2 * i + 1);
    }
}
