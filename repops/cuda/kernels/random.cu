// Counter-based random bits (repops/kernels/philox.h, shared with the CPU kernel): dropout's
// keep mask, one thread per element, each a pure function of its flat index.
#include "common.cuh"
#include "philox.h"

extern "C" __global__ void philox_keep_u8(unsigned step, unsigned seed, unsigned stream, unsigned threshold,
                                          unsigned char *out, long long n) {
    REPOPS_FOR_EACH(i, n) { out[i] = rp_philox_keep((unsigned long long)i, step, seed, stream, threshold); }
}
