"""The GPU runtime: the kernel sources compiled by NVRTC through CuPy with the numerics
contract's options, launched on CuPy arrays (torch CUDA tensors reach them zero-copy
through DLPack, repops.aten). Same interface as the emulator (xp, launch, max_blocks)."""
from __future__ import annotations

import functools

import numpy as np

from ..errors import BackendError
from .kernels import KERNELS, NVRTC_OPTIONS, SOURCES, THREADS

_SCALARS = {"int": np.int32, "long long": np.int64, "float": np.float32}


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
    name = "cuda"
    max_blocks = 65535
    elementwise_threads = THREADS

    def __init__(self):
        cupy = _cupy()
        self.xp = cupy
        opts = NVRTC_OPTIONS + (f"--include-path={SOURCES}",)
        self._modules = {}
        for name, (src, _) in KERNELS.items():
            if src not in self._modules:
                self._modules[src] = cupy.RawModule(code=(SOURCES / src).read_text(), options=opts)
        self._fns = {name: self._modules[src].get_function(name) for name, (src, _) in KERNELS.items()}
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.max_blocks = 32 * sms  # enough resident blocks to fill the GPU; grid-stride beyond

    def launch(self, name, grid, block, *args):
        params = KERNELS[name][1]
        conv = tuple(a if t.endswith("*") else _SCALARS[t](a) for a, t in zip(args, params))
        self._fns[name](tuple(grid), tuple(block), conv)


@functools.cache
def device() -> Device:
    """The process's one device (kernels compiled once)."""
    return Device()
