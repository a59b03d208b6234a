"""Runs the unmodified CUDA sources on the CPU: g++ compiles them under emu/cuda_emu.h
(blocks one after another, a block's threads as fibers on the calling thread, switched at
__syncthreads())
with launchers generated from repops.cuda.kernels.KERNELS, called through ctypes on numpy
arrays. This is how CI checks the kernels' bits without a GPU.

The emulated device keeps its arrays apart from host ones (DeviceArray) and its array
module behaves as CuPy's where CuPy loses bits, so that the shared launch glue
(repops/cuda/ops.py) meets the GPU's traps here too: a 0-d host array moved by `asarray` is
a `fill`, and `fill` of a value equal to zero is a memset (-0.0 becomes +0.0).
`Emulator(ftz=True)` flushes subnormals as a kernel compiled with -ftz=true would: the
self-check (repops/cuda/selfcheck.py) must refuse it."""
from __future__ import annotations

import functools
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

from ..errors import BackendError
from .device import torch_dtype  # (the dtype mapping only: no CuPy)
from .kernels import KERNELS, SHARED, SOURCES, TUNING, defines, headers, sources

EMU = Path(__file__).parent / "emu"
CACHE = Path(os.environ.get("REPOPS_CACHE", Path(__file__).resolve().parents[2] / ".cache" / "repops"))
CXX = os.environ.get("REPOPS_CXX", "g++")
FLAGS = ["-std=c++20", "-O2", "-pthread", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math",
         "-fno-math-errno", "-fno-strict-aliasing", "-w", "-x", "c++"]  # float4 loads alias floats, as CUDA allows
_CTYPES = {"int": ctypes.c_int, "long long": ctypes.c_longlong, "float": ctypes.c_float, "unsigned": ctypes.c_uint}


def _launchers() -> str:
    lines = ['#include "cuda_emu.h"'] + [f'#include "{s.name}"' for s in sources()]
    for name, (_, params) in KERNELS.items():
        decl = ", ".join(f"{t} p{i}" for i, t in enumerate(params))
        call = ", ".join(f"p{i}" for i in range(len(params)))
        lines.append(f'extern "C" void emu_{name}(const unsigned *g, {decl}) {{\n'
                     f'    emu::launch(dim3(g[0], g[1], g[2]), dim3(g[3], g[4], g[5]), [=] {{ {name}({call}); }});\n}}')
    return "\n".join(lines) + "\n"


# Sees what the launch glue does on the emulated device: observer(kind, nbytes) for each
# device->host read ("sync"), host->device copy ("upload") and kernel of the array module's
# own, as CuPy runs them: "copy" (a contiguous copy, cast or fill) or "op" (an elementwise
# op or reduction: integer index checks), and each device array made over torch's memory
# ("view": an as_array on the GPU). None unless repops.cuda.counting is counting.
OBSERVER = None


def _seen(kind, nbytes=0):
    if OBSERVER is not None:
        OBSERVER(kind, nbytes)


def _host(x):
    return x.view(np.ndarray) if isinstance(x, DeviceArray) else x


def _no_host_arrays(where: str, values) -> None:
    """CuPy refuses a numpy array where it computes on the device (TypeError); the emulator
    must too, or glue that mixes a host table into device work passes CI and fails on a GPU.
    0-d arrays and scalars pass, as CuPy takes them as scalars."""
    for v in values:
        if isinstance(v, (list, tuple)):
            _no_host_arrays(where, v)
        elif isinstance(v, np.ndarray) and not isinstance(v, DeviceArray) and v.ndim:
            raise TypeError(f"{where}: a host numpy array {v.dtype}{list(v.shape)} among device operands "
                            "(CuPy refuses it: move it to the device first)")


class DeviceArray(np.ndarray):
    """Memory of the emulated device. As CuPy's arrays: a reduction gives a 0-d device
    array (not a host scalar), and reading a value on the host (bool, int, float, item,
    tolist) is a device->host copy that waits for the device (a sync: counted)."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        _no_host_arrays(f"{ufunc.__name__}", inputs)
        if out is not None:
            kwargs["out"] = tuple(_host(o) for o in out)
        r = getattr(ufunc, method)(*(_host(i) for i in inputs), **kwargs)
        _seen("op")
        if out is not None:
            return out[0] if len(out) == 1 else out
        wrap = lambda a: np.asarray(a).view(DeviceArray) if isinstance(a, (np.ndarray, np.generic)) else a  # noqa: E731
        return tuple(map(wrap, r)) if isinstance(r, tuple) else wrap(r)

    def __array_function__(self, func, types, args, kwargs):
        """CuPy dispatches numpy's functions on its arrays to its own (np.pad of a device array
        is a device array); numpy's would hand back host arrays and hide the device paths."""
        _no_host_arrays(f"np.{func.__name__}", (*args, *kwargs.values()))
        r = super().__array_function__(func, types, args, kwargs)
        for a in r if isinstance(r, (tuple, list)) else (r,):
            if type(a) is np.ndarray and a.base is None and func.__name__ not in _ALLOCATE:
                _seen("copy", a.nbytes)  # a new array with values: one of CuPy's kernels made it
        wrap = lambda a: a.view(DeviceArray) if type(a) is np.ndarray else a  # noqa: E731
        return tuple(map(wrap, r)) if isinstance(r, tuple) else (list(map(wrap, r)) if isinstance(r, list) else wrap(r))

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        r = np.ndarray.astype(self, dtype, order, casting, subok, copy)
        if r is not self:
            _seen("copy", r.nbytes)
        return r

    def __setitem__(self, key, value):
        _seen("copy", getattr(value, "nbytes", 0))
        np.ndarray.__setitem__(self, key, value)

    def _read(self):
        _seen("sync", self.nbytes)
        return self.view(np.ndarray)

    def __bool__(self):
        return bool(self._read())

    def __int__(self):
        return int(self._read())

    def __float__(self):
        return float(self._read())

    def __index__(self):
        return self._read().__index__()

    def item(self, *args):
        return self._read().item(*args)

    def tolist(self):
        return self._read().tolist()

    def fill(self, value):
        """As CuPy's: a value equal to zero is a memset of the (contiguous) array."""
        _seen("copy", self.nbytes)
        if value == 0 and self.flags.c_contiguous:
            np.ndarray.fill(self.reshape(-1).view(np.uint8), 0)
        else:
            np.ndarray.fill(self, value)


_ALLOCATE = {"empty", "empty_like"}  # memory without values: no kernel


class CupyLike:
    """numpy as the emulated device's array module: results are DeviceArrays, and host data
    crosses as CuPy moves it (`asarray` of a 0-d host array fills)."""
    ndarray = DeviceArray

    def __init__(self, module=np):
        self._module = module

    def __getattr__(self, name):
        f = getattr(self._module, name)
        if isinstance(f, types.ModuleType):  # xp.lib.stride_tricks: CuPy's own, on the device
            return CupyLike(f)
        if not callable(f) or isinstance(f, type):
            return f

        def on_device(*args, **kwargs):
            _no_host_arrays(f"cupy.{name}", (*args, *kwargs.values()))
            r = f(*args, **kwargs)
            if isinstance(r, np.ndarray) and r.base is None and name not in _ALLOCATE \
                    and not any(r is a for a in args):
                _seen("copy", r.nbytes)  # a new array with values: one of CuPy's kernels made it
            return r.view(DeviceArray) if isinstance(r, np.ndarray) and not isinstance(r, DeviceArray) else r
        return on_device

    def asarray(self, a, dtype=None):
        if isinstance(a, DeviceArray):
            return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)
        host = np.asarray(a, dtype)
        _seen("upload", host.nbytes)
        out = np.empty(host.shape, host.dtype).view(DeviceArray)
        if host.ndim == 0:
            out.fill(host[()])  # cupy/_core: `if a_cpu.ndim == 0: a.fill(a_cpu)`
        else:
            np.copyto(_host(out), host)
        return out

    array = asarray


def _library(flags: list[str]) -> Path:
    if shutil.which(CXX) is None:
        raise BackendError(f"C++ compiler {CXX!r} not found: the CUDA emulator builds the kernels with it "
                           "(g++ >= 11, for C++20; Debian: apt-get install g++) or set REPOPS_CXX")
    src = _launchers()
    h = hashlib.sha256((" ".join(flags) + src).encode())
    for f in sorted(EMU.glob("*")) + sources() + headers():
        h.update(f.name.encode() + f.read_bytes())
    out = CACHE / f"libcudaemu-{h.hexdigest()[:16]}.so"
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        cpp, so = Path(tmp) / "launchers.cpp", Path(tmp) / out.name
        cpp.write_text(src)
        r = subprocess.run([CXX, *flags, str(cpp), "-I", str(EMU), "-I", str(SOURCES), "-I", str(SHARED), "-o", str(so)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise BackendError(f"the CUDA emulator did not build:\n{r.stderr[-4000:]}")
        os.replace(so, out)  # atomic: a concurrent builder never sees half a library
    return out


class Emulator:
    """A runtime with the device runtime's interface (xp, empty, upload, is_device, download,
    launch, max_blocks) on the CPU."""
    xp = CupyLike()
    # the grid-stride kernels give the same bits for any grid and block size: small ones
    # keep the number of emulated threads down while still running every loop
    max_blocks = 2
    elementwise_threads = 32
    row_threads = 32  # a block of one warp: rows longer than the block take every path

    def __init__(self, ftz: bool = False, tuning=None):
        self.name = "cuda-emu" + ("-ftz" if ftz else "")
        self.tuning = dict(TUNING, **(tuning or {}))
        self.lib = ctypes.CDLL(str(_library(FLAGS + list(defines(self.tuning)) + (["-DEMU_FTZ"] if ftz else []))))
        for name, (_, params) in KERNELS.items():
            fn = getattr(self.lib, "emu_" + name)
            fn.argtypes = [ctypes.c_void_p] + [_CTYPES.get(t, ctypes.c_void_p) for t in params]
            fn.restype = None

    def empty(self, shape, dtype) -> DeviceArray:
        """A kernel output's memory from torch's allocator, as the GPU's (Device.empty): the
        result goes back to torch as a view of its own tensor (repops/cuda/counting.py)."""
        _seen("view")  # (Device.empty's as_array)
        return torch.empty(tuple(shape), dtype=torch_dtype(dtype)).numpy().view(DeviceArray)

    def upload(self, host) -> DeviceArray:
        """Host bytes into device memory (a memcpy: no value is looked at)."""
        host = np.array(host, order="C", copy=True)
        _seen("upload", host.nbytes)
        return host.view(DeviceArray)

    def is_device(self, x) -> bool:
        return isinstance(x, DeviceArray)

    def download(self, x) -> np.ndarray:
        _seen("sync", x.nbytes)
        return np.array(x, copy=True).view(np.ndarray)

    def launch(self, name, grid, block, *args):
        params = KERNELS[name][1]
        if len(args) != len(params):
            raise TypeError(f"{name} takes {len(params)} arguments, got {len(args)}")
        _no_host_arrays(f"kernel {name}", [a for a, t in zip(args, params) if t.endswith("*")])
        geom = np.array(tuple(grid) + tuple(block), np.uint32)
        conv = [a.ctypes.data if t.endswith("*") else a for a, t in zip(args, params)]
        getattr(self.lib, "emu_" + name)(geom.ctypes.data, *conv)


@functools.cache
def emulator(ftz: bool = False) -> Emulator:
    """The process's emulator (kernels compiled once)."""
    return Emulator(ftz)
