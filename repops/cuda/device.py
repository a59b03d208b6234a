"""The GPU runtime: the kernel sources compiled by our own NVRTC path (repops.cuda.compile:
exactly the numerics contract's options, nothing appended) to a cubin for this device,
loaded by path, launched on CuPy arrays (torch CUDA tensors reach them zero-copy through
DLPack, repops.aten). CuPy is used for memory, copies and launches only, never to compile
or compute. Same interface as the emulator (xp, upload, is_device, download, launch)."""
from __future__ import annotations

import functools

import numpy as np

from ..errors import BackendError
from .compile import compile_source
from .kernels import KERNELS, NVRTC_OPTIONS, THREADS, TUNING, defines

_SCALARS = {"int": np.int32, "long long": np.int64, "unsigned": np.uint32}


def _cupy():
    try:
        import cupy
    except ImportError as e:
        raise BackendError("RepOps' CUDA backend needs CuPy: pip install 'verde[cuda]' (cupy-cuda13x) "
                           "on a machine with an NVIDIA driver") from e
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # cudaErrorInsufficientDriver, cudaErrorNoDevice, ...
        raise BackendError(f"CuPy is installed but finds no usable CUDA device ({e}); "
                           "run on a GPU machine or use the 'cpu' backend") from e
    if n == 0:
        raise BackendError("CuPy is installed but finds no CUDA device; use the 'cpu' backend")
    return cupy


class Device:
    elementwise_threads = THREADS

    def __init__(self, options=NVRTC_OPTIONS, tuning=None):
        """options: NVRTC's; the numerics contract's unless a test compiles a bad device on
        purpose (the self-check must refuse it). tuning: the matmul tile shape (bits never
        depend on it; the benchmark's sweep tries others)."""
        cupy = _cupy()
        self.xp = cupy
        dev = cupy.cuda.Device()
        self.arch = dev.compute_capability  # "90" on an H100
        self.tuning = dict(TUNING, **(tuning or {}))
        self.name = "cuda" if tuple(options) == tuple(NVRTC_OPTIONS) else f"cuda[{' '.join(options)}]"
        self.gpu = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
        self._modules = {}
        for src in sorted({s for s, _ in KERNELS.values()}):
            cubin = compile_source(src, self.arch, "cubin", (*options, *defines(self.tuning)))
            self._modules[src] = cupy.RawModule(path=str(cubin))  # loaded, not compiled: no -ftz=true
        self._fns = {name: self._modules[src].get_function(name) for name, (src, _) in KERNELS.items()}
        self.max_blocks = 32 * dev.attributes["MultiProcessorCount"]  # fills the GPU; grid-stride beyond

    def upload(self, host):
        """Host bytes into device memory: a memcpy of a 1-d byte array (never cupy.asarray of
        a value: a 0-d array goes through `fill`, which turns -0.0 into +0.0)."""
        host = np.asarray(host, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        raw = host.reshape(-1).view(np.uint8)
        return self.xp.asarray(raw).view(host.dtype).reshape(host.shape)

    def is_device(self, x) -> bool:
        return isinstance(x, self.xp.ndarray)

    def download(self, x) -> np.ndarray:
        return self.xp.asnumpy(x)

    def launch(self, name, grid, block, *args):
        params = KERNELS[name][1]
        conv = tuple(a if t.endswith("*") else _SCALARS[t](a) for a, t in zip(args, params))
        self._fns[name](tuple(grid), tuple(block), conv)


@functools.cache
def device(options=NVRTC_OPTIONS) -> Device:
    """The process's device runtime (kernels compiled once per option set)."""
    return Device(options)
