"""The GPU runtime: the kernel sources compiled by our own NVRTC path (repops.cuda.compile:
exactly the numerics contract's options, nothing appended) to a cubin for this device,
loaded by path, launched on CuPy arrays (torch CUDA tensors reach them zero-copy through
DLPack, repops.aten). CuPy is used for memory, copies and launches only, never to compile
or compute. Same interface as the emulator (xp, upload, is_device, download, launch)."""
from __future__ import annotations

import functools

import numpy as np

from ..errors import BackendError
from ..reference.prims import moved
from .compile import NOT_IEEE, compile_source
from .kernels import KERNELS, NVRTC_OPTIONS, ROW_THREADS, THREADS, TUNING, defines

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
    row_threads = ROW_THREADS

    def __init__(self, options=NVRTC_OPTIONS, tuning=None, target="ptx"):
        """options: NVRTC's; the numerics contract's unless a test compiles a bad device on
        purpose (the self-check must refuse it). tuning: the matmul tile shape (bits never
        depend on it; the benchmark's sweep tries others). target: "ptx", checked for
        flush-to-zero and approximate instructions and compiled by the driver (the PTX states
        each instruction's numerics), or "cubin" from NVRTC, whose machine code flushed
        subnormals on the H100 after FTZ compiles in the same process (docs/NUMERICS.md §9)."""
        cupy = _cupy()
        self.xp = cupy
        dev = cupy.cuda.Device()
        self.arch = dev.compute_capability  # "90" on an H100
        self.tuning = dict(TUNING, **(tuning or {}))
        self.name = "cuda" if tuple(options) == tuple(NVRTC_OPTIONS) else f"cuda[{' '.join(options)}]"
        self.gpu = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
        self._modules = {}
        for src in sorted({s for s, _ in KERNELS.values()}):
            built = compile_source(src, self.arch, target, (*options, *defines(self.tuning)))
            if target == "ptx" and self.name == "cuda" and (bad := NOT_IEEE.search(built.read_text())):
                raise BackendError(f"{built}: NVRTC wrote {bad.group()!r} with the numerics options "
                                   f"({' '.join(options)}); RepOps refuses to load it")
            self._modules[src] = cupy.RawModule(path=str(built))  # loaded, not compiled: no -ftz=true
        self._fns = {name: self._modules[src].get_function(name) for name, (src, _) in KERNELS.items()}
        self.max_blocks = 32 * dev.attributes["MultiProcessorCount"]  # fills the GPU; grid-stride beyond

    def upload(self, host):
        """Host bytes into device memory (prims.moved: never cupy.asarray of a value)."""
        return moved(self.xp, host)

    def is_device(self, x) -> bool:
        return isinstance(x, self.xp.ndarray)

    def download(self, x) -> np.ndarray:
        return self.xp.asnumpy(x)

    def launch(self, name, grid, block, *args):
        params = KERNELS[name][1]
        conv = tuple(a if t.endswith("*") else _SCALARS[t](a) for a, t in zip(args, params))
        self._fns[name](tuple(grid), tuple(block), conv)


_STREAMS: dict = {}


def torch_stream():
    """A context putting CuPy's work (launches, copies, uploads) on torch's current stream,
    where torch's own ops and a CUDA graph capture see it in order; nothing to do when CuPy
    is already there (both on the default stream, the common case)."""
    import contextlib

    import cupy
    import torch
    ptr = torch.cuda.current_stream().cuda_stream
    if cupy.cuda.get_current_stream().ptr == ptr:
        return contextlib.nullcontext()
    s = _STREAMS.get(ptr)
    if s is None:
        s = _STREAMS[ptr] = cupy.cuda.ExternalStream(ptr, torch.cuda.current_device())
    return s


@functools.cache
def device(options=NVRTC_OPTIONS) -> Device:
    """The process's device runtime (kernels compiled once per option set)."""
    return Device(options)
