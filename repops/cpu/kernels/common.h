/* Shared by every RepOps CPU kernel: the numerics contract in C. The per-element arithmetic
 * (canonical NaN, IEEE-2019 min/max, the transcendentals) is repops/kernels/elementwise.h,
 * shared with the CUDA kernels. */
#ifndef REPOPS_COMMON_H
#define REPOPS_COMMON_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "elementwise.h"

/* Round-to-nearest, no flush-to-zero (bit 15), no denormals-are-zero (bit 6); returns the
 * previous MXCSR for _mm_setcsr. Called at the start of every thread's work. */
static inline unsigned repops_ieee_enter(void) {
    unsigned old = _mm_getcsr();
    _mm_setcsr(old & ~(0x8000u | 0x0040u | 0x6000u));
    return old;
}
#endif
