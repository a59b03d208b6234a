/* Shared by every RepOps CPU kernel: the numerics contract in C. */
#ifndef REPOPS_COMMON_H
#define REPOPS_COMMON_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Round-to-nearest, no flush-to-zero (bit 15), no denormals-are-zero (bit 6); returns the
 * previous MXCSR for _mm_setcsr. Called at the start of every thread's work. */
static inline unsigned repops_ieee_enter(void) {
    unsigned old = _mm_getcsr();
    _mm_setcsr(old & ~(0x8000u | 0x0040u | 0x6000u));
    return old;
}

static inline uint32_t repops_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* NaN -> the canonical 0x7FC00000. */
static inline float repops_canon(float x) {
    uint32_t u = repops_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        u = 0x7FC00000u;
        memcpy(&x, &u, 4);
    }
    return x;
}

/* IEEE 754-2019 maximum / minimum: NaN propagates, -0 < +0. */
static inline float repops_max(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return (repops_bits(a) >> 31) ? b : a;
    return a > b ? a : b;
}

static inline float repops_min(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return (repops_bits(a) >> 31) ? a : b;
    return a < b ? a : b;
}

static inline float repops_f32(uint32_t bits) {
    float x;
    memcpy(&x, &bits, 4);
    return x;
}
#endif
