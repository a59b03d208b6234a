/* The inner loops of repops_map_f32 (elementwise.c), included once per instruction set with
 * RP_INNER naming the function: one row of n outputs, each operand either contiguous (stride
 * 1) or one broadcast value (stride 0). Every variant is a plain loop gcc vectorizes. */

#define RP_LOOP for (long i = 0; i < n; i++)
/* one operand: x */
#define MAP1(EXPR)                                             \
    do {                                                       \
        if (sa) {                                              \
            RP_LOOP { float x = A[i]; o[i] = (EXPR); }         \
        } else {                                               \
            float x = A[0], v = (EXPR);                        \
            RP_LOOP o[i] = v;                                  \
        }                                                      \
    } while (0)
/* two operands: x, y */
#define MAP2(EXPR)                                                     \
    do {                                                               \
        if (sa && sb) {                                                \
            RP_LOOP { float x = A[i], y = B[i]; o[i] = (EXPR); }       \
        } else if (sa) {                                               \
            float y = B[0];                                            \
            RP_LOOP { float x = A[i]; o[i] = (EXPR); }                 \
        } else if (sb) {                                               \
            float x = A[0];                                            \
            RP_LOOP { float y = B[i]; o[i] = (EXPR); }                 \
        } else {                                                       \
            float x = A[0], y = B[0], v = (EXPR);                      \
            RP_LOOP o[i] = v;                                          \
        }                                                              \
    } while (0)
/* comparisons: byte results */
#define CMP2(EXPR)                                                     \
    do {                                                               \
        if (sa && sb) {                                                \
            RP_LOOP { float x = A[i], y = B[i]; ob[i] = (EXPR); }      \
        } else if (sa) {                                               \
            float y = B[0];                                            \
            RP_LOOP { float x = A[i]; ob[i] = (EXPR); }                \
        } else {                                                       \
            float x = A[0];                                            \
            RP_LOOP { float y = sb ? B[i] : B[0]; ob[i] = (EXPR); }    \
        }                                                              \
    } while (0)
/* three operands (fma, select): the common layouts vectorized, the rest element by element */
#define MAP3(TA, EXPR)                                                                         \
    do {                                                                                       \
        const TA *AA = (const TA *)a;                                                          \
        if (sa && sb && sc) {                                                                  \
            RP_LOOP { TA x = AA[i]; float y = B[i], z = C[i]; o[i] = (EXPR); }                 \
        } else if (sa && sb) {                                                                 \
            float z = C[0];                                                                    \
            RP_LOOP { TA x = AA[i]; float y = B[i]; o[i] = (EXPR); }                           \
        } else if (sa && sc) {                                                                 \
            float y = B[0];                                                                    \
            RP_LOOP { TA x = AA[i]; float z = C[i]; o[i] = (EXPR); }                           \
        } else if (sa) {                                                                       \
            float y = B[0], z = C[0];                                                          \
            RP_LOOP { TA x = AA[i]; o[i] = (EXPR); }                                           \
        } else {                                                                               \
            TA x = AA[0];                                                                      \
            RP_LOOP { float y = sb ? B[i] : B[0], z = sc ? C[i] : C[0]; o[i] = (EXPR); }       \
        }                                                                                      \
    } while (0)

static void RP_INNER(int op, long n, const void *a, int sa, const void *b, int sb, const void *c, int sc, void *out) {
    const float *A = (const float *)a, *B = (const float *)b, *C = (const float *)c;
    float *o = (float *)out;
    uint8_t *ob = (uint8_t *)out;
    switch (op) {
        case OP_ADD: MAP2(rp_canon(x + y)); break;
        case OP_SUB: MAP2(rp_canon(x - y)); break;
        case OP_MUL: MAP2(rp_canon(x * y)); break;
        case OP_FMA: MAP3(float, rp_canon(RP_FMA(x, y, z))); break;
        case OP_DIV: MAP2(rp_canon(x / y)); break;
        case OP_SQRT: MAP1(rp_canon(sqrtf(x))); break;
        case OP_NEG: MAP1(rp_canon(-x)); break;
        case OP_ABS: MAP1(rp_canon(fabsf(x))); break;
        case OP_MIN: MAP2(rp_min(x, y)); break;
        case OP_MAX: MAP2(rp_max(x, y)); break;
        case OP_EQ: CMP2(x == y); break;
        case OP_LT: CMP2(x < y); break;
        case OP_LE: CMP2(x <= y); break;
        case OP_SELECT: MAP3(uint8_t, rp_canon(x ? y : z)); break;
        case OP_RINT: MAP1(rp_canon(rintf(x))); break;
        case OP_FLOOR: MAP1(rp_canon(floorf(x))); break;
        case OP_TRUNC: MAP1(rp_canon(truncf(x))); break;
        case OP_COPY: { /* bits unchanged */
            const uint32_t *U = (const uint32_t *)a;
            uint32_t *ou = (uint32_t *)out;
            if (sa) RP_LOOP ou[i] = U[i];
            else RP_LOOP ou[i] = U[0];
            break;
        }
        case OP_EXP: MAP1(rp_exp(x)); break;
        case OP_LOG: MAP1(rp_log(x)); break;
        case OP_SIGMOID: MAP1(rp_canon(rp_sigmoid(x))); break;
        case OP_TANH: MAP1(rp_tanh(x)); break;
        case OP_ERF: MAP1(rp_erf(x)); break;
        case OP_SIN: MAP1(rp_canon(rp_sin(x))); break;
        case OP_COS: MAP1(rp_canon(rp_cos(x))); break;
        case OP_SILU: MAP1(rp_canon(rp_silu(x))); break;
        case OP_GELU: MAP1(rp_canon(rp_gelu(x))); break;
        case OP_GELU_TANH: MAP1(rp_canon(rp_gelu_tanh(x))); break;
        case OP_SILU_BWD: MAP2(rp_canon(rp_silu_backward(x, y))); break;
        case OP_GELU_BWD: MAP2(rp_canon(rp_gelu_backward(x, y))); break;
        case OP_GELU_TANH_BWD: MAP2(rp_canon(rp_gelu_tanh_backward(x, y))); break;
        case OP_TANH_BWD: MAP2(rp_canon(rp_tanh_backward(x, y))); break;
        case OP_SIGMOID_BWD: MAP2(rp_canon(rp_sigmoid_backward(x, y))); break;
        case OP_POW: MAP2(rp_canon(rp_pow(x, y))); break;
        default: break;
    }
}
#undef RP_LOOP
#undef MAP1
#undef MAP2
#undef CMP2
#undef MAP3
