/* Chunk trees of tensors (docs/PROTOCOL.md §2-3) in one call: every leaf H(0x00 || chunk) and
 * every inner node H(0x01 || left || right) of the padded tree, on T threads, with no Python
 * in between. SHA-256 is compressed with the CPU's SHA extensions where it has them, else by
 * OpenSSL's libcrypto (the library Python's hashlib already loads; its prototypes and context
 * are declared here so that no OpenSSL headers are needed). The layout of the output is the list of levels of merkle.Tree,
 * leaves first, concatenated: P + P/2 + ... + 1 nodes of 32 bytes, P = the leaves padded with
 * ZERO to a power of two (P = 1 for 0 or 1 leaves; no leaves: the one node is ZERO). */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {  /* OpenSSL's SHA256_CTX (openssl/sha.h, unchanged since 0.9.8) */
    unsigned int h[8];
    unsigned int Nl, Nh;
    unsigned int data[16];
    unsigned int num, md_len;
} sha256_ctx;
int SHA256_Init(sha256_ctx *c);
int SHA256_Update(sha256_ctx *c, const void *data, size_t len);
int SHA256_Final(unsigned char *md, sha256_ctx *c);

/* Levels with fewer nodes than this per thread are hashed by one thread (a barrier costs more). */
#define MIN_PER_THREAD 256

typedef struct {
    const uint8_t *data;
    uint64_t nbytes, csize, n, P;
    uint8_t *out;
    int T;                 /* threads that run: fixed before any of them starts work */
    pthread_barrier_t *bar;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int go;
    uint8_t zero[64][32];  /* zero[h]: a node of height h over padding only (hashed once, not per node) */
} job_t;

typedef struct {
    const job_t *job;
    int t;
} arg_t;

/* H(tag || data[0:len]) by OpenSSL: the portable path. */
static void tagged_openssl(uint8_t *md, uint8_t tag, const uint8_t *data, uint64_t len) {
    sha256_ctx c;
    SHA256_Init(&c);
    SHA256_Update(&c, &tag, 1);
    SHA256_Update(&c, data, len);
    SHA256_Final(md, &c);
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* The same SHA-256, its compression on the SHA extensions (SHA-NI), with no per-call API:
 * a 1 KB chunk costs 19 compressions (17 for its leaf, 2 for its share of the inner nodes)
 * and OpenSSL's Init/Update/Final around them cost ~15 % more on top. */
static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
static const uint32_t IV256[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

/* Two independent messages' blocks at once: one SHA-256 chain waits on sha256rnds2's latency,
 * two chains fill the unit (AMD Zen: latency 4, one every 2 cycles), so a core hashes two
 * chunks in about the time of one. */
__attribute__((target("sha,sse4.1,ssse3"), always_inline))
static inline void load_state(const uint32_t st[8], __m128i *s0, __m128i *s1) {
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&st[0]), 0xB1);  /* CDAB */
    __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&st[4]), 0x1B);  /* EFGH */
    *s0 = _mm_alignr_epi8(tmp, efgh, 8);   /* ABEF */
    *s1 = _mm_blend_epi16(efgh, tmp, 0xF0);  /* CDGH */
}

__attribute__((target("sha,sse4.1,ssse3"), always_inline))
static inline void store_state(uint32_t st[8], __m128i s0, __m128i s1) {
    __m128i tmp = _mm_shuffle_epi32(s0, 0x1B);  /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);           /* DCHG */
    _mm_storeu_si128((__m128i *)&st[0], _mm_blend_epi16(tmp, s1, 0xF0));  /* DCBA */
    _mm_storeu_si128((__m128i *)&st[4], _mm_alignr_epi8(s1, tmp, 8));     /* HGFE */
}

__attribute__((target("sha,sse4.1,ssse3")))
static void compress2(uint32_t sta[8], const uint8_t *a, uint32_t stb[8], const uint8_t *b, uint64_t blocks) {
    const __m128i MASK = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i a0, a1, b0, b1;
    load_state(sta, &a0, &a1);
    load_state(stb, &b0, &b1);
    for (; blocks; blocks--, a += 64, b += 64) {
        __m128i sa0 = a0, sa1 = a1, sb0 = b0, sb1 = b1, wa[4], wb[4];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            __m128i xa, xb;
            if (i < 4) {
                xa = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(a + 16 * i)), MASK);
                xb = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(b + 16 * i)), MASK);
            } else {  /* w[t] = s1(w[t-2]) + w[t-7] + s0(w[t-15]) + w[t-16], four at a time */
                xa = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(wa[i & 3], wa[(i + 1) & 3]),
                                                        _mm_alignr_epi8(wa[(i + 3) & 3], wa[(i + 2) & 3], 4)),
                                          wa[(i + 3) & 3]);
                xb = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(wb[i & 3], wb[(i + 1) & 3]),
                                                        _mm_alignr_epi8(wb[(i + 3) & 3], wb[(i + 2) & 3], 4)),
                                          wb[(i + 3) & 3]);
            }
            wa[i & 3] = xa;
            wb[i & 3] = xb;
            __m128i k = _mm_loadu_si128((const __m128i *)&K256[4 * i]);
            __m128i ma = _mm_add_epi32(xa, k), mb = _mm_add_epi32(xb, k);
            a1 = _mm_sha256rnds2_epu32(a1, a0, ma);
            b1 = _mm_sha256rnds2_epu32(b1, b0, mb);
            a0 = _mm_sha256rnds2_epu32(a0, a1, _mm_shuffle_epi32(ma, 0x0E));
            b0 = _mm_sha256rnds2_epu32(b0, b1, _mm_shuffle_epi32(mb, 0x0E));
        }
        a0 = _mm_add_epi32(a0, sa0), a1 = _mm_add_epi32(a1, sa1);
        b0 = _mm_add_epi32(b0, sb0), b1 = _mm_add_epi32(b1, sb1);
    }
    store_state(sta, a0, a1);
    store_state(stb, b0, b1);
}

static void digest(uint8_t *md, const uint32_t st[8]) {
    for (int i = 0; i < 8; i++) {
        md[4 * i] = (uint8_t)(st[i] >> 24), md[4 * i + 1] = (uint8_t)(st[i] >> 16);
        md[4 * i + 2] = (uint8_t)(st[i] >> 8), md[4 * i + 3] = (uint8_t)st[i];
    }
}

/* The message's tail (the bytes after its whole blocks) padded (FIPS 180-4 §5.1.1) into buf;
 * returns its blocks (1 or 2). */
static uint64_t pad(uint8_t buf[128], size_t head, const uint8_t *tail, uint64_t rem, uint64_t bits) {
    memcpy(buf + head, tail, rem);
    size_t used = head + rem;  /* < 64 */
    buf[used++] = 0x80;
    size_t total = used <= 56 ? 64 : 128;
    memset(buf + used, 0, total - 8 - used);
    for (int i = 0; i < 8; i++) buf[total - 1 - i] = (uint8_t)(bits >> (8 * i));
    return total / 64;
}

/* H(tag || a) and H(tag || b), len bytes each: the first block carries the tag, whole blocks
 * are read in place, the tail is padded in a local buffer. One message: a == b (md_b unused). */
static void tagged_shani2(uint8_t *md_a, uint8_t *md_b, uint8_t tag, const uint8_t *a, const uint8_t *b, uint64_t len) {
    uint32_t sa[8], sb[8];
    uint8_t bufa[128], bufb[128];
    memcpy(sa, IV256, sizeof sa);
    memcpy(sb, IV256, sizeof sb);
    uint64_t bits = (len + 1) * 8, rem = len, nb;
    size_t head = 1;
    bufa[0] = bufb[0] = tag;
    if (len >= 63) {
        memcpy(bufa + 1, a, 63);
        memcpy(bufb + 1, b, 63);
        compress2(sa, bufa, sb, bufb, 1);
        uint64_t whole = (len - 63) / 64;
        compress2(sa, a + 63, sb, b + 63, whole);
        a += 63 + 64 * whole, b += 63 + 64 * whole;
        rem = len - 63 - 64 * whole;
        head = 0;
    }
    nb = pad(bufa, head, a, rem, bits);
    pad(bufb, head, b, rem, bits);
    compress2(sa, bufa, sb, bufb, nb);
    digest(md_a, sa);
    if (md_b) digest(md_b, sb);
}

static void tagged_shani(uint8_t *md, uint8_t tag, const uint8_t *data, uint64_t len) {
    tagged_shani2(md, NULL, tag, data, data, len);
}

static int shani_available(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1)) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 29) & 1;  /* CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29] */
}
#else
static void tagged_shani(uint8_t *md, uint8_t tag, const uint8_t *data, uint64_t len) {
    tagged_openssl(md, tag, data, len);
}
static int shani_available(void) { return 0; }
#endif

/* Which compression runs: -1 not chosen yet, 0 OpenSSL, 1 SHA-NI. */
static int impl = -1;

/* force: 0 OpenSSL, 1 SHA-NI where the CPU has it (tests run each), -2 the CPU's choice again,
 * -1 keep; returns the one that runs. */
int verde_sha_impl(int force) {
    if (force == 0 || force == 1) impl = force == 1 && shani_available();
    else if (impl < 0 || force == -2) impl = shani_available();
    return impl;
}

static inline void tagged(uint8_t *md, uint8_t tag, const uint8_t *data, uint64_t len) {
    if (impl == 1) tagged_shani(md, tag, data, len);
    else tagged_openssl(md, tag, data, len);
}

/* Two messages of one length (two chunks, two pairs of nodes): in one pass on SHA-NI. */
static inline void tagged2(uint8_t *ma, uint8_t *mb, uint8_t tag, const uint8_t *a, const uint8_t *b, uint64_t len) {
#if defined(__x86_64__)
    if (impl == 1) {
        tagged_shani2(ma, mb, tag, a, b, len);
        return;
    }
#endif
    tagged_openssl(ma, tag, a, len);
    tagged_openssl(mb, tag, b, len);
}

static void span(uint64_t m, int t, int T, uint64_t *lo, uint64_t *hi) {
    *lo = m * (uint64_t)t / (uint64_t)T;
    *hi = m * (uint64_t)(t + 1) / (uint64_t)T;
}

static void *work(void *p) {
    const arg_t *a = p;
    job_t *j = (job_t *)a->job;
    if (a->t != 0) {  /* wait until the caller knows how many threads started */
        pthread_mutex_lock(j->mu);
        while (!j->go) pthread_cond_wait(j->cv, j->mu);
        pthread_mutex_unlock(j->mu);
        if (a->t >= j->T) return NULL;
    }
    int t = a->t, T = j->T;
    uint64_t lo, hi;
    span(j->P, t, T, &lo, &hi);  /* leaves and their ZERO padding */
    for (uint64_t i = lo; i < hi; i++) {
        uint64_t off = i * j->csize;
        if (i + 1 < hi && i + 1 < j->n && j->nbytes - off >= 2 * j->csize) {  /* two whole chunks */
            tagged2(j->out + 32 * i, j->out + 32 * (i + 1), 0x00, j->data + off, j->data + off + j->csize, j->csize);
            i++;
        } else if (i < j->n) {
            tagged(j->out + 32 * i, 0x00, j->data + off, j->nbytes - off < j->csize ? j->nbytes - off : j->csize);
        } else {
            memset(j->out + 32 * i, 0, 32);
        }
    }
    uint64_t base = 0, m = j->P;
    int h = 0;
    while (m > 1) {
        h++;
        uint64_t live = (j->n + ((uint64_t)1 << h) - 1) >> h;  /* nodes of this level over some real leaf */
        uint64_t half = m / 2;
        int par = T > 1 && half >= (uint64_t)T * MIN_PER_THREAD;  /* the same choice on every thread */
        if (par) {
            pthread_barrier_wait(j->bar);
            span(half, t, T, &lo, &hi);
        } else {
            if (T > 1) pthread_barrier_wait(j->bar);  /* the last barrier: then thread 0 alone */
            if (t != 0) return NULL;
            T = 1;
            lo = 0;
            hi = half;
        }
        const uint8_t *src = j->out + 32 * base;
        uint8_t *dst = j->out + 32 * (base + m);
        for (uint64_t i = lo; i < hi; i++) {
            if (i + 1 < hi && i + 1 < live) {
                tagged2(dst + 32 * i, dst + 32 * (i + 1), 0x01, src + 64 * i, src + 64 * (i + 1), 64);
                i++;
            } else if (i < live) {
                tagged(dst + 32 * i, 0x01, src + 64 * i, 64);
            } else {
                memcpy(dst + 32 * i, j->zero[h], 32);
            }
        }
        base += m;
        m = half;
    }
    return NULL;
}

/* Nodes of the chunk tree of nbytes bytes cut into chunks of csize bytes. */
uint64_t verde_tree_nodes(uint64_t nbytes, uint64_t csize) {
    uint64_t n = (nbytes + csize - 1) / csize, P = 1;
    while (P < n) P <<= 1;
    return 2 * P - 1;
}

/* Every node of that tree into out (verde_tree_nodes * 32 bytes), on up to `threads` threads,
 * one for each min_bytes of data at most (starting a thread costs ~0.05 ms: the many small
 * tensors of a traced step are hashed on the caller's), fewer if the OS refuses some: the
 * bytes never depend on how many. Returns 0. */
int verde_chunk_tree(const uint8_t *data, uint64_t nbytes, uint64_t csize, uint8_t *out, int threads,
                     uint64_t min_bytes) {
    uint64_t n = (nbytes + csize - 1) / csize, P = 1;
    while (P < n) P <<= 1;
    verde_sha_impl(-1);
    int T = threads < 1 ? 1 : threads > 256 ? 256 : threads;
    if ((uint64_t)T > P) T = (int)P;
    uint64_t most = nbytes / (min_bytes ? min_bytes : 1);  /* threads worth starting */
    if ((uint64_t)T > most) T = most > 1 ? (int)most : 1;
    pthread_barrier_t bar;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    job_t job;
    memset(&job, 0, sizeof job);
    job.data = data, job.nbytes = nbytes, job.csize = csize, job.n = n, job.P = P, job.out = out, job.T = 1;
    job.bar = &bar, job.mu = &mu, job.cv = &cv;
    for (int h = 1; h < 64 && ((uint64_t)1 << (h - 1)) < P; h++) {
        uint8_t pair[64];
        memcpy(pair, job.zero[h - 1], 32);
        memcpy(pair + 32, job.zero[h - 1], 32);
        tagged(job.zero[h], 0x01, pair, 64);
    }
    arg_t args[256];
    pthread_t tids[256];
    int started = 1;
    for (int t = 1; t < T; t++, started++) {
        args[t] = (arg_t){&job, t};
        if (pthread_create(&tids[t], NULL, work, &args[t]) != 0) break;  /* fewer threads, same bytes */
    }
    job.T = started;
    if (started > 1 && pthread_barrier_init(&bar, NULL, (unsigned)started) != 0) job.T = 1;
    pthread_mutex_lock(&mu);
    job.go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    args[0] = (arg_t){&job, 0};
    work(&args[0]);
    for (int t = 1; t < started; t++) pthread_join(tids[t], NULL);
    if (job.T > 1) pthread_barrier_destroy(&bar);
    return 0;
}

/* Many trees at once (a model's state: hundreds of tensors, most far below a thread's share of
 * one tree): the arrays claimed one at a time by up to `threads` threads, each tree hashed by
 * one thread as verde_chunk_tree(..., 1, ...) writes it; which thread hashes which never
 * changes a byte. Returns 0. */
typedef struct {
    const uint8_t *const *datas;
    const uint64_t *nbytes;
    uint8_t *const *outs;
    int count;
    uint64_t csize;
    int next;  /* the next array to claim (atomic) */
} many_t;

static void *many_work(void *p) {
    many_t *m = p;
    for (int i; (i = __atomic_fetch_add(&m->next, 1, __ATOMIC_RELAXED)) < m->count;)
        verde_chunk_tree(m->datas[i], m->nbytes[i], m->csize, m->outs[i], 1, 1);
    return NULL;
}

int verde_chunk_trees(int count, const uint8_t *const *datas, const uint64_t *nbytes, uint64_t csize,
                      uint8_t *const *outs, int threads) {
    verde_sha_impl(-1);  /* chosen before any thread reads it */
    many_t m = {datas, nbytes, outs, count, csize, 0};
    int T = threads < 1 ? 1 : threads > 256 ? 256 : threads;
    if (T > count) T = count > 1 ? count : 1;
    pthread_t tids[256];
    int started = 1;
    for (int t = 1; t < T; t++, started++)
        if (pthread_create(&tids[t], NULL, many_work, &m) != 0) break;  /* fewer threads, same bytes */
    many_work(&m);
    for (int t = 1; t < started; t++) pthread_join(tids[t], NULL);
    return 0;
}
