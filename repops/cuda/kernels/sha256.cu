// Chunk trees of tensor bytes on the device (docs/PROTOCOL.md §2-3; the CPU's is
// offchain/protocol/native/chunktree.c, the reference offchain/protocol/merkle.py): leaf i =
// SHA-256(0x00 || chunk i), a level padded with ZERO (32 zero bytes) to a power of two, inner
// node = SHA-256(0x01 || left || right). One thread per hash, integer arithmetic only: the
// same bytes for any geometry (a block hashes a subtree: any grid). A tensor is committed where it lives; the host downloads the
// tree's nodes (32 bytes each), never the tensor.
#include "common.cuh"

__constant__ unsigned RP_SHA_K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};

__device__ __forceinline__ unsigned rp_rotr(unsigned x, int n) { return (x >> n) | (x << (32 - n)); }

// FIPS 180-4's compression of one 64-byte block (w: its 16 big-endian words, overwritten by
// the rolling message schedule).
__device__ __forceinline__ void rp_sha256_block(unsigned h[8], unsigned w[16]) {
    unsigned a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
#pragma unroll
    for (int t = 0; t < 64; t++) {
        if (t >= 16) {
            unsigned x = w[(t + 1) & 15], y = w[(t + 14) & 15];
            w[t & 15] += (rp_rotr(x, 7) ^ rp_rotr(x, 18) ^ (x >> 3)) + w[(t + 9) & 15] +
                         (rp_rotr(y, 17) ^ rp_rotr(y, 19) ^ (y >> 10));
        }
        unsigned t1 = k + (rp_rotr(e, 6) ^ rp_rotr(e, 11) ^ rp_rotr(e, 25)) + ((e & f) ^ (~e & g)) + RP_SHA_K[t] +
                      w[t & 15];
        unsigned t2 = (rp_rotr(a, 2) ^ rp_rotr(a, 13) ^ rp_rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

// Byte j of the padded message prefix || m[0, len): the prefix, the data, 0x80, then zeros
// (the length words are set apart).
__device__ __forceinline__ unsigned rp_sha_byte(const unsigned char *m, long long len, unsigned prefix, long long j) {
    return j == 0 ? prefix : (j - 1 < len ? (unsigned)m[j - 1] : (j - 1 == len ? 0x80u : 0u));
}

// SHA-256(prefix || m[0, len)) written big-endian to out[0, 32).
__device__ void rp_sha256_prefixed(const unsigned char *m, long long len, unsigned prefix, unsigned char *out) {
    unsigned h[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                     0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    const long long total = len + 1, blocks = (total + 8) / 64 + 1;
    for (long long b = 0; b < blocks; b++) {
        unsigned w[16];
        const long long base = b * 64;
        if (base >= 1 && base + 64 <= total) {  // a block of data bytes only (the common case)
            const unsigned char *p = m + base - 1;
#pragma unroll
            for (int j = 0; j < 16; j++)
                w[j] = ((unsigned)p[4 * j] << 24) | ((unsigned)p[4 * j + 1] << 16) | ((unsigned)p[4 * j + 2] << 8) |
                       (unsigned)p[4 * j + 3];
        } else {
#pragma unroll
            for (int j = 0; j < 16; j++)
                w[j] = (rp_sha_byte(m, len, prefix, base + 4 * j) << 24) |
                       (rp_sha_byte(m, len, prefix, base + 4 * j + 1) << 16) |
                       (rp_sha_byte(m, len, prefix, base + 4 * j + 2) << 8) | rp_sha_byte(m, len, prefix, base + 4 * j + 3);
        }
        if (b == blocks - 1) {  // the message's length in bits, big-endian, in the last 8 bytes
            const unsigned long long bits = (unsigned long long)total * 8u;
            w[14] = (unsigned)(bits >> 32);
            w[15] = (unsigned)bits;
        }
        rp_sha256_block(h, w);
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(h[i] >> 8);
        out[4 * i + 3] = (unsigned char)h[i];
    }
}

// The leaf level: `padded` (a power of two >= the chunk count) hashes of csize-byte chunks of
// data[0, nbytes) (the last one may be shorter), ZERO past the last chunk.
extern "C" __global__ void sha256_leaves(const unsigned char *data, long long nbytes, long long csize,
                                         long long padded, unsigned char *out) {
    REPOPS_FOR_EACH(i, padded) {
        const long long start = i * csize;
        if (start < nbytes) {
            rp_sha256_prefixed(data + start, nbytes - start < csize ? nbytes - start : csize, 0x00u, out + 32 * i);
        } else {
            for (int j = 0; j < 32; j++) out[32 * i + j] = 0;
        }
    }
}

// Up to `levels` levels of the tree in one launch (a launch a level cost a tree of a 64 MB
// tensor 17 launches): group g of the current level, nodes level[g << levels, (g + 1) << levels),
// is hashed up to its common ancestor by one block of 2^(levels - 1) threads, in shared memory.
// Each level k = 1..levels it makes is written where nodes() keeps it: `out` is level 1 (right
// after the current level of `width` nodes, a power of two >= 2^levels), level k starts
// width - (width >> (k - 1)) nodes further.
#define RP_SHA_SUBTREE 256  // threads of a block at most: levels <= 9
extern "C" __global__ void sha256_subtrees(const unsigned char *level, long long width, int levels,
                                           unsigned char *out) {
    __shared__ unsigned char made[32 * RP_SHA_SUBTREE];
    const int t = threadIdx.x;
    for (long long g = blockIdx.x; g < (width >> levels); g += gridDim.x) {  // (uniform in the block)
        long long w = width >> 1, at = 0;  // level k's width and its start in out
        const long long first = (g << (levels - 1)) + t;
        rp_sha256_prefixed(level + 64 * first, 64, 0x01u, made + 32 * t);
        for (int j = 0; j < 32; j++) out[32 * first + j] = made[32 * t + j];
        for (int k = 2; k <= levels; k++) {
            at += w;
            w >>= 1;
            const int n = 1 << (levels - k);  // this level's nodes of the group
            unsigned char pair[64];
            __syncthreads();  // level k - 1 made
            if (t < n)
                for (int j = 0; j < 64; j++) pair[j] = made[64 * t + j];
            __syncthreads();  // read before overwritten
            if (t < n) {
                rp_sha256_prefixed(pair, 64, 0x01u, made + 32 * t);
                const long long node = at + (g << (levels - k)) + t;
                for (int j = 0; j < 32; j++) out[32 * node + j] = made[32 * t + j];
            }
        }
        __syncthreads();  // the group's readers of made[] are done before the next group's writes
    }
}
