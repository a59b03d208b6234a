"""The emulator's execution model (repops/cuda/emu/cuda_emu.h), on small kernels of its own:
__syncthreads() holds every live thread of the block, a thread that returns early does not
hold the others, a missing barrier gives wrong bits (threads run in ascending order in one
block and descending in the next), the kernel's arithmetic is IEEE without flush-to-zero
whatever the caller's MXCSR, and the caller's MXCSR is left as it was."""
import ctypes
import subprocess

import numpy as np
import pytest

from repops.cuda.emulator import CXX, EMU, FLAGS

SOURCE = r"""
#include "cuda_emu.h"

// each thread writes its slot, then reads its next (step 1) or previous (step -1) neighbour's:
// right only after a barrier
__global__ void shift(const float *x, float *y, int barrier, int step) {
    __shared__ float s[64];
    const int t = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    const int base = blockIdx.x * n;
    s[t] = x[base + t];
    if (barrier) __syncthreads();
    y[base + t] = t + step >= 0 && t + step < n ? s[t + step] : 0.0f;
}

// a tree sum over shared memory, with threads past `live` gone before the first barrier
__global__ void tree_sum(const float *x, float *out, unsigned live) {
    __shared__ float s[64];
    const unsigned t = threadIdx.x;
    if (t >= live) return;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned half = live / 2; half > 0; half /= 2) {
        if (t < half) s[t] = s[t] + s[t + half];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void product(const float *a, const float *b, float *y) { y[threadIdx.x] = a[threadIdx.x] * b[threadIdx.x]; }

extern "C" {
void run_shift(const float *x, float *y, unsigned blocks, unsigned bx, unsigned by, int barrier, int step) {
    emu::launch(dim3(blocks), dim3(bx, by), [=] { shift(x, y, barrier, step); });
}
void run_tree_sum(const float *x, float *out, unsigned blocks, unsigned threads, unsigned live) {
    emu::launch(dim3(blocks), dim3(threads), [=] { tree_sum(x, out, live); });
}
// the product under the caller's MXCSR `caller`; returns the MXCSR the caller has after it
unsigned run_product_under(const float *a, const float *b, float *y, unsigned n, unsigned caller) {
    _mm_setcsr(caller);
    emu::launch(dim3(1), dim3(n), [=] { product(a, b, y); });
    const unsigned after = _mm_getcsr();
    _mm_setcsr(caller & ~(0x8000u | 0x0040u));
    return after;
}
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("emu_model")
    (d / "model.cpp").write_text(SOURCE)
    so = d / "model.so"
    r = subprocess.run([CXX, *FLAGS, str(d / "model.cpp"), "-I", str(EMU), "-o", str(so)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return ctypes.CDLL(str(so))


def _ptr(a: np.ndarray):
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize("step", [1, -1], ids=["next", "previous"])
@pytest.mark.parametrize("bx,by", [(64, 1), (8, 8), (5, 3)])
def test_a_barrier_holds_every_thread_and_its_absence_gives_wrong_bits(lib, bx, by, step):
    """Without the barrier, ascending order reads the next slot too early and descending the
    previous one: either way some block of the launch has wrong bits."""
    n, blocks = bx * by, 2
    x = np.arange(blocks * n, dtype=np.float32) + 1
    want = np.zeros_like(x)
    for b in range(blocks):
        w, v = want[b * n:(b + 1) * n], x[b * n:(b + 1) * n]
        if step == 1:
            w[:-1] = v[1:]
        else:
            w[1:] = v[:-1]
    y = np.zeros_like(x)
    lib.run_shift(_ptr(x), _ptr(y), blocks, bx, by, 1, step)
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
    y[:] = 0
    lib.run_shift(_ptr(x), _ptr(y), blocks, bx, by, 0, step)
    assert not np.array_equal(y, want), "a missing barrier went unnoticed"


@pytest.mark.parametrize("threads,live", [(64, 64), (64, 16), (32, 1)])
def test_threads_that_return_early_do_not_hold_the_barrier(lib, threads, live):
    blocks = 3
    x = np.random.default_rng(threads + live).standard_normal(blocks * threads).astype(np.float32)
    out = np.zeros(blocks, np.float32)
    lib.run_tree_sum(_ptr(x), _ptr(out), blocks, threads, live)
    for b in range(blocks):  # the same tree, in numpy's float32
        s = x[b * threads:b * threads + live].copy()
        half = live // 2
        while half:
            s[:half] = s[:half] + s[half:2 * half]
            half //= 2
        assert out[b].view(np.uint32) == s[0].view(np.uint32)


def test_kernels_round_as_ieee_whatever_the_callers_mxcsr_and_leave_it_as_it_was(lib):
    lib.run_product_under.restype = ctypes.c_uint
    a = np.array([2.0**-70, 1.5 * 2.0**-75, -(2.0**-100)], np.float32)
    b = np.array([2.0**-70, 2.0**-60, 2.0**-40], np.float32)
    want = a * b  # numpy: subnormal products kept (an IEEE MXCSR)
    assert (want != 0).all() and (np.abs(want) < np.finfo(np.float32).tiny).all()
    flush = 0x1F80 | 0x8000 | 0x0040  # the default MXCSR with FTZ and DAZ set
    y = np.zeros_like(a)
    after = lib.run_product_under(_ptr(a), _ptr(b), _ptr(y), len(a), flush)
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))  # the kernel did not flush
    assert after == flush  # the caller's flush-to-zero MXCSR is back


def test_two_threads_launching_two_kernels_at_once_each_get_their_bits(lib):
    """Launches share the scheduler, the running fiber and the stacks, so the emulator runs one
    at a time whatever the kernel (a lock per kernel let a CUDA-graph test's two threads cross
    their fibers: a segfault about one run in 14). Two kernels with barriers, in two threads
    (ctypes lets go of the GIL), many times: each launch's bits as when run alone."""
    import threading
    bx, by, blocks, rounds = 8, 8, 4, 300
    n = bx * by
    x = np.arange(blocks * n, dtype=np.float32) + 1
    shifted = np.zeros_like(x)
    lib.run_shift(_ptr(x), _ptr(shifted), blocks, bx, by, 1, 1)
    sums = np.zeros(blocks, np.float32)
    lib.run_tree_sum(_ptr(x), _ptr(sums), blocks, n, n)
    bad, start = [], threading.Barrier(2)

    def shift():
        start.wait()
        y = np.zeros_like(x)
        for _ in range(rounds):
            y[:] = 0
            lib.run_shift(_ptr(x), _ptr(y), blocks, bx, by, 1, 1)
            if not np.array_equal(y.view(np.uint32), shifted.view(np.uint32)):
                bad.append("shift")

    def tree():
        start.wait()
        out = np.zeros(blocks, np.float32)
        for _ in range(rounds):
            out[:] = 0
            lib.run_tree_sum(_ptr(x), _ptr(out), blocks, n, n)
            if not np.array_equal(out.view(np.uint32), sums.view(np.uint32)):
                bad.append("tree_sum")
    threads = [threading.Thread(target=f) for f in (shift, tree)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, f"{len(bad)} launches of {2 * rounds} gave other bits: {sorted(set(bad))}"
