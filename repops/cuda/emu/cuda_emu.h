// CPU emulation of the CUDA C that RepOps kernels use, so g++ compiles the UNMODIFIED
// kernel sources and CI checks their bits without a GPU (repops/cuda/emulator.py).
//
// Model: blocks run one after another; the threads of a block are fibers (ucontext) on the
// calling thread, each run until it finishes or reaches __syncthreads(); when every live
// thread waits there, the next round starts (a finished thread never blocks the others, as
// an exited GPU thread). A thread that never waits runs on the stack the last finished one
// left, so a kernel without barriers costs one context switch per thread, not one OS thread
// (it was a std::thread per GPU thread and a std::barrier: 20x the CPU backend's time).
// Threads run in ascending order in one block and descending in the next, so a missing
// barrier shows as wrong bits in one of the two.
// __shared__ becomes `static`: one copy, seen by all threads of the (single) running block.
// Arithmetic is SSE binary32 under an IEEE MXCSR (round to nearest, no FTZ/DAZ), set for the
// launch and restored after it, with -ffp-contract=off: each operator rounds once, exactly as
// PTX's .rn instructions with --fmad=false.
// Not emulated (no RepOps kernel uses them, so none may ship): warp shuffles, atomics.
#pragma once
#include <math.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <xmmintrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };

inline uint3 threadIdx;  // the running fiber's (set at every switch)
inline uint3 blockIdx;
inline dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
#define __constant__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

namespace emu {
template <class T, class U>
inline T bit_cast(U u) {
    static_assert(sizeof(T) == sizeof(U));
    T t;
    std::memcpy(&t, &u, sizeof t);
    return t;
}

#ifdef EMU_FTZ  // a device whose kernels flush subnormals (built with -ftz=true): for the self-check's tests
inline unsigned device_mxcsr(unsigned m) { return (m & ~0x6000u) | 0x8000u | 0x0040u; }
#else
inline unsigned device_mxcsr(unsigned m) { return m & ~(0x8000u | 0x0040u | 0x6000u); }
#endif

constexpr size_t STACK = 256 * 1024;  // per fiber; a kernel's locals are a few hundred bytes

struct Fiber {
    ucontext_t ctx;
    char *stack = nullptr;
    uint3 idx;
    bool done;
};

inline ucontext_t scheduler;
inline Fiber *running = nullptr;
inline void (*body_fn)(void *) = nullptr;
inline void *body_arg = nullptr;
inline std::vector<char *> free_stacks;  // kept for the process: a launch maps none after the first

inline char *take_stack() {
    if (!free_stacks.empty()) {
        char *s = free_stacks.back();
        free_stacks.pop_back();
        return s;
    }
    void *s = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s == MAP_FAILED) {
        std::fprintf(stderr, "cuda_emu: cannot map a %zu-byte fiber stack\n", STACK);
        std::abort();
    }
    return static_cast<char *>(s);
}

inline void fiber_main() {
    body_fn(body_arg);
    running->done = true;  // uc_link returns to the scheduler
}

inline void start(Fiber &f, uint3 idx) {
    f.idx = idx;
    f.done = false;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = STACK;
    f.ctx.uc_link = &scheduler;
    makecontext(&f.ctx, fiber_main, 0);
}

inline void resume(Fiber &f) {
    running = &f;
    threadIdx = f.idx;
    swapcontext(&scheduler, &f.ctx);
}

template <class F>
void call_body(void *f) { (*static_cast<F *>(f))(); }

// One launch at a time per process, whatever the kernel: every launch shares the scheduler
// context, the running fiber, the stacks and the __shared__ statics above. (A static inside
// launch<F> was one mutex per kernel: two threads launching two kernels at once crossed
// their fibers and crashed the process, ~1 run in 14 of test_launch_glue's two-thread test.)
inline std::mutex one_at_a_time;

// Run `body` as the kernel over grid x block.
template <class F>
void launch(dim3 grid, dim3 block, F body) {
    std::lock_guard<std::mutex> guard(one_at_a_time);
    const unsigned caller_mxcsr = _mm_getcsr();
    _mm_setcsr(device_mxcsr(caller_mxcsr));  // getcontext copies it into every fiber
    gridDim = grid;
    blockDim = block;
    body_fn = call_body<F>;
    body_arg = &body;
    const unsigned nthreads = block.x * block.y * block.z;
    static std::vector<Fiber> fibers;  // (kept across launches, as the stacks: under the lock)
    static std::vector<Fiber *> waiting;
    if (fibers.size() < nthreads) fibers.resize(nthreads);
    waiting.reserve(nthreads);
    static unsigned launches = 0;
    unsigned order = launches++;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = {bx, by, bz};
                // threads in ascending order in one block and descending in the next (and the next
                // launch starts the other way): a kernel that reads what another thread writes
                // without a barrier between them reads it too early in one of the two
                const bool down = order++ & 1;
                char *spare = nullptr;  // the stack of the last thread that finished without waiting
                waiting.clear();
                for (unsigned i = 0; i < nthreads; i++) {
                    const unsigned t = down ? nthreads - 1 - i : i;
                    Fiber &f = fibers[t];
                    f.stack = spare ? spare : take_stack();
                    spare = nullptr;
                    start(f, {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)});
                    resume(f);
                    if (f.done)
                        spare = f.stack;
                    else
                        waiting.push_back(&f);  // at a barrier: its stack stays its own
                }
                if (spare) free_stacks.push_back(spare);
                // every thread has reached the first barrier or finished: release them, round by round
                while (!waiting.empty()) {
                    size_t live = 0;
                    for (Fiber *f : waiting) {
                        resume(*f);
                        if (f->done)
                            free_stacks.push_back(f->stack);
                        else
                            waiting[live++] = f;
                    }
                    waiting.resize(live);
                }
            }
    _mm_setcsr(caller_mxcsr);
}
}  // namespace emu

inline void __syncthreads() { swapcontext(&emu::running->ctx, &emu::scheduler); }

// Intrinsics: each is one IEEE operation rounded to nearest-even.
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __double2float_rn(double d) { return (float)d; }
inline float __uint_as_float(unsigned u) { return emu::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return emu::bit_cast<unsigned>(f); }
inline float __int_as_float(int i) { return emu::bit_cast<float>(i); }
inline int __float_as_int(float f) { return emu::bit_cast<int>(f); }
inline double __longlong_as_double(long long v) { return emu::bit_cast<double>(v); }
