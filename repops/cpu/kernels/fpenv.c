/* The calling thread's SSE floating-point state (MXCSR): RepOps needs round-to-nearest,
 * no flush-to-zero (bit 15), no denormals-are-zero (bit 6), whatever the process set. */
#include "common.h"

unsigned repops_mxcsr_get(void) { return _mm_getcsr(); }

void repops_mxcsr_set(unsigned v) { _mm_setcsr(v); }

/* Force the IEEE default modes and return the previous MXCSR for restoring. */
unsigned repops_mxcsr_ieee(void) { return repops_ieee_enter(); }
