// Counter-based random bits (repops/kernels/philox.h, shared with the CPU kernel): dropout's
// keep mask, one thread per element, each a pure function of its flat index. The step is read
// from device memory (a kernel's 0-d output), so a mask never waits on a copy to the host.
#include "common.cuh"
#include "philox.h"

extern "C" __global__ void philox_keep_u8(const int *step, unsigned seed, unsigned stream, unsigned threshold,
                                          unsigned char *out, long long n) {
    const unsigned s = (unsigned)step[0];
    REPOPS_FOR_EACH(i, n) { out[i] = rp_philox_keep((unsigned long long)i, s, seed, stream, threshold); }
}
