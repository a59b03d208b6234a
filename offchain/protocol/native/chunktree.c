/* Chunk trees of tensors (docs/PROTOCOL.md §2-3) in one call: every leaf H(0x00 || chunk) and
 * every inner node H(0x01 || left || right) of the padded tree, on T threads, with no Python
 * in between. SHA-256 is OpenSSL's libcrypto (the library Python's hashlib already loads:
 * SHA-NI/AVX2 code, ~2 GB/s a core); its prototypes and context are declared here so that no
 * OpenSSL headers are needed. The layout of the output is the list of levels of merkle.Tree,
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

static void leaf(uint8_t *md, const uint8_t *data, uint64_t len) {
    static const uint8_t tag = 0x00;
    sha256_ctx c;
    SHA256_Init(&c);
    SHA256_Update(&c, &tag, 1);
    SHA256_Update(&c, data, len);
    SHA256_Final(md, &c);
}

static void inner(uint8_t *md, const uint8_t *pair) {
    uint8_t buf[65];
    buf[0] = 0x01;
    memcpy(buf + 1, pair, 64);
    sha256_ctx c;
    SHA256_Init(&c);
    SHA256_Update(&c, buf, 65);
    SHA256_Final(md, &c);
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
        if (i < j->n) {
            uint64_t off = i * j->csize, len = j->nbytes - off < j->csize ? j->nbytes - off : j->csize;
            leaf(j->out + 32 * i, j->data + off, len);
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
            if (i < live) inner(dst + 32 * i, src + 64 * i);
            else memcpy(dst + 32 * i, j->zero[h], 32);
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
        inner(job.zero[h], pair);
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
