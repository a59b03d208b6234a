// CPU emulation of the CUDA C that RepOps kernels use, so g++ compiles the UNMODIFIED
// kernel sources and CI checks their bits without a GPU (repops/cuda/emulator.py).
//
// Model: blocks run one after another; the threads of a block are std::threads that meet
// at a std::barrier for __syncthreads(). __shared__ becomes `static`: one copy, seen by all
// threads of the (single) running block. Arithmetic is SSE binary32 under an IEEE MXCSR
// (round to nearest, no FTZ/DAZ) set in every thread, with -ffp-contract=off: each
// operator rounds once, exactly as PTX's .rn instructions with --fmad=false.
// Not emulated (no RepOps kernel uses them, so none may ship): warp shuffles, atomics.
#pragma once
#include <math.h>
#include <xmmintrin.h>

#include <barrier>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };

inline thread_local uint3 threadIdx;
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
inline thread_local std::barrier<> *block_barrier = nullptr;

template <class T, class U>
inline T bit_cast(U u) {
    static_assert(sizeof(T) == sizeof(U));
    T t;
    std::memcpy(&t, &u, sizeof t);
    return t;
}

#ifdef EMU_FTZ  // a device whose kernels flush subnormals (built with -ftz=true): for the self-check's tests
inline void ieee_mxcsr() { _mm_setcsr((_mm_getcsr() & ~0x6000u) | 0x8000u | 0x0040u); }
#else
inline void ieee_mxcsr() { _mm_setcsr((_mm_getcsr() & ~(0x8000u | 0x0040u | 0x6000u))); }
#endif

// Run `body` as the kernel over grid x block. One launch at a time per process.
template <class F>
void launch(dim3 grid, dim3 block, F body) {
    static std::mutex one_at_a_time;
    std::lock_guard<std::mutex> guard(one_at_a_time);
    gridDim = grid;
    blockDim = block;
    const unsigned nthreads = block.x * block.y * block.z;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = {bx, by, bz};
                std::barrier<> bar(nthreads);
                std::vector<std::thread> threads;
                threads.reserve(nthreads);
                for (unsigned t = 0; t < nthreads; t++)
                    threads.emplace_back([&, t] {
                        ieee_mxcsr();
                        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        block_barrier = &bar;
                        body();
                        bar.arrive_and_drop();  // a finished thread never blocks the others
                    });
                for (auto &th : threads) th.join();
            }
}
}  // namespace emu

inline void __syncthreads() { emu::block_barrier->arrive_and_wait(); }

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
