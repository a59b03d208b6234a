/* Counter-based random bits (repops/kernels/philox.h): dropout's keep mask. Every element is
 * a pure function of its flat index, so threads split the range with no effect on the bits. */
#include "common.h"
#include "philox.h"

void repops_philox_keep(unsigned step, unsigned seed, unsigned stream, unsigned threshold, unsigned char *out,
                        long n, int nthreads) {
    int nt = n < (1L << 16) ? 1 : nthreads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long i = 0; i < n; i++) out[i] = rp_philox_keep((unsigned long long)i, step, seed, stream, threshold);
}
