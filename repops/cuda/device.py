"""The GPU runtime: the kernel sources compiled by our own NVRTC path (repops.cuda.compile:
exactly the numerics contract's options, nothing appended) to a cubin for this device,
loaded by path, launched on CuPy arrays over torch's memory (as_array, as_tensor: views both
ways, no DLPack; outputs from torch's caching allocator, Device.empty, and CuPy's own few
copies too, _allocate_through_torch). CuPy is the launcher, never a compiler or a second allocator.
Same interface as the emulator (xp, empty, upload, is_device, download, launch)."""
from __future__ import annotations

import functools

import numpy as np
import torch

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
    _allocate_through_torch(cupy)
    return cupy


def _allocate_through_torch(cupy):
    """CuPy's own allocations (the few copies left, e.g. a reshape of a non-contiguous index
    view) from torch's caching allocator on torch's current stream, where CuPy's work runs
    (torch_stream): one allocator for the process, and one a CUDA graph capture sees (CuPy's
    pool calls cudaMalloc, which a capture refuses: an embedding of tokens[:, :-1] broke
    the capture of every Llama step on the H200)."""
    def alloc(size, device_id):
        return torch.cuda.caching_allocator_alloc(size, device_id, torch.cuda.current_stream(device_id))

    def free(ptr, device_id):
        torch.cuda.caching_allocator_delete(ptr)
    cupy.cuda.set_allocator(cupy.cuda.memory.PythonFunctionAllocator(alloc, free).malloc)


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

    def empty(self, shape, dtype):
        """Memory for a kernel's output from torch's caching allocator, on torch's current
        stream (no CuPy pool: a CUDA graph capture sees every allocation)."""
        return as_array(torch.empty(tuple(shape), dtype=torch_dtype(dtype), device=torch.cuda.current_device()))

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


# dtypes CuPy and torch both name (RepOps computes in float32; integers and bools move with it):
# torch's -> numpy's, and back (by numpy dtype or scalar type: no name lookups per op)
_NUMPY = {t: np.dtype(n) for t, n in ((torch.float32, "float32"), (torch.float64, "float64"), (torch.int64, "int64"),
                                      (torch.int32, "int32"), (torch.int16, "int16"), (torch.int8, "int8"),
                                      (torch.uint8, "uint8"), (torch.bool, "bool"))}
_TORCH = {**{n: t for t, n in _NUMPY.items()}, **{n.type: t for t, n in _NUMPY.items()}}


def as_array(t):
    """A CUDA tensor's memory as a CuPy array: a view that holds the tensor (UnownedMemory),
    no copy and no DLPack exchange (whose capsule and stream handshake cost more host time
    than many ops)."""
    import cupy
    t = t.detach()
    dtype = _NUMPY.get(t.dtype)
    if dtype is None:
        return cupy.from_dlpack(t)  # (a dtype CuPy has no name for: RepOps refuses it later, clearly)
    item = t.element_size()
    span = (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * item if t.numel() else 0
    mem = cupy.cuda.UnownedMemory(t.data_ptr(), span, t, t.device.index)
    return cupy.ndarray(tuple(t.shape), dtype, cupy.cuda.MemoryPointer(mem, 0), tuple(s * item for s in t.stride()))


def as_tensor(a):
    """A CuPy array as a torch tensor on the same memory: where torch allocated it (every
    kernel output, Device.empty; every input, as_array), a view of the storage; else DLPack."""
    owner, dtype = getattr(a.data.mem, "_owner", None), _TORCH.get(a.dtype)
    if not isinstance(owner, torch.Tensor) or dtype is None or any(s < 0 for s in a.strides):
        return torch.from_dlpack(a)
    item, storage = a.itemsize, owner.untyped_storage()
    offset = a.data.ptr - storage.data_ptr()
    if offset % item or any(s % item for s in a.strides):
        return torch.from_dlpack(a)
    # a new tensor on the storage, never the owner itself: an op's result must not be its input
    # object (an input returned unchanged would get the op's grad_fn), nor a view (no _base)
    return torch.empty(0, dtype=dtype, device=owner.device).set_(storage, offset // item, a.shape,
                                                                 [s // item for s in a.strides])


def torch_dtype(dtype):
    """torch's dtype for a numpy dtype (or scalar type) CuPy and torch share."""
    return _TORCH.get(dtype) or _TORCH[np.dtype(dtype)]


_STREAMS: dict = {}


def torch_stream():
    """A context putting CuPy's work (launches, copies, uploads) on torch's current stream,
    where torch's own ops and a CUDA graph capture see it in order; nothing to do when CuPy
    is already there (both on the default stream, the common case)."""
    import contextlib

    import cupy
    ptr = torch.cuda.current_stream().cuda_stream
    if cupy.cuda.get_current_stream().ptr == ptr:
        return contextlib.nullcontext()
    s = _STREAMS.get(ptr)
    if s is None:
        s = _STREAMS[ptr] = cupy.cuda.ExternalStream(ptr, torch.cuda.current_device())
    return s


def stream_for(xp):
    """torch_stream() for CuPy's arrays (xp: their array module); nothing to do for another
    module's (the emulator's, numpy's)."""
    import contextlib
    return torch_stream() if getattr(xp, "__name__", "") == "cupy" else contextlib.nullcontext()


@functools.cache
def device(options=NVRTC_OPTIONS) -> Device:
    """The process's device runtime (kernels compiled once per option set)."""
    return Device(options)
