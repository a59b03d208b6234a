/* Philox4x32-10, word 0 (docs/NUMERICS.md §12; the spec is repops/reference/prims.py philox),
 * written ONCE for both compiled backends (gcc: repops/cpu/kernels/random.c; CUDA C:
 * repops/cuda/kernels/random.cu, NVRTC and the CPU emulator). Integer arithmetic only: a
 * 32 x 32 -> 64-bit product per multiplier, xor and key bumps mod 2^32, the same on every
 * machine by construction. */
#ifndef REPOPS_PHILOX_H
#define REPOPS_PHILOX_H

#ifdef REPOPS_CUDA
#define RP_PHILOX_FN __device__ __forceinline__
#else
#define RP_PHILOX_FN static inline __attribute__((always_inline))
#endif

/* counter (c0, c1, c2, c3), key (k0, k1) -> output word 0 */
RP_PHILOX_FN unsigned rp_philox_word0(unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0, unsigned k1) {
    for (int r = 0; r < 10; r++) {
        if (r) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const unsigned long long p0 = (unsigned long long)0xD2511F53u * c0;
        const unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c2;
        const unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
        c1 = (unsigned)p1;
        c3 = (unsigned)p0;
        c0 = n0;
        c2 = n2;
    }
    return c0;
}

/* dropout's keep mask (prims.philox): element i keeps when word 0 of counter
 * (i mod 2^32, i div 2^32, step, 0) under key (seed, stream) is >= threshold (unsigned). */
RP_PHILOX_FN unsigned char rp_philox_keep(unsigned long long i, unsigned step, unsigned seed, unsigned stream,
                                          unsigned threshold) {
    return rp_philox_word0((unsigned)i, (unsigned)(i >> 32), step, 0u, seed, stream) >= threshold;
}
#endif
