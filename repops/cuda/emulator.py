"""Runs the unmodified CUDA sources on the CPU: g++ compiles them under emu/cuda_emu.h
(blocks one after another, a block's threads as std::threads meeting at a std::barrier)
with launchers generated from repops.cuda.kernels.KERNELS, called through ctypes on numpy
arrays. This is how CI checks the kernels' bits without a GPU."""
from __future__ import annotations

import functools
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..errors import BackendError
from .kernels import KERNELS, SOURCES, sources

EMU = Path(__file__).parent / "emu"
CACHE = Path(os.environ.get("REPOPS_CACHE", Path(__file__).resolve().parents[2] / ".cache" / "repops"))
CXX = os.environ.get("REPOPS_CXX", "g++")
FLAGS = ["-std=c++20", "-O2", "-pthread", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math",
         "-fno-math-errno", "-w", "-x", "c++"]
_CTYPES = {"int": ctypes.c_int, "long long": ctypes.c_longlong, "float": ctypes.c_float}


def _launchers() -> str:
    lines = ['#include "cuda_emu.h"'] + [f'#include "{s.name}"' for s in sources()]
    for name, (_, params) in KERNELS.items():
        decl = ", ".join(f"{t} p{i}" for i, t in enumerate(params))
        call = ", ".join(f"p{i}" for i in range(len(params)))
        lines.append(f'extern "C" void emu_{name}(const unsigned *g, {decl}) {{\n'
                     f'    emu::launch(dim3(g[0], g[1], g[2]), dim3(g[3], g[4], g[5]), [=] {{ {name}({call}); }});\n}}')
    return "\n".join(lines) + "\n"


def _library() -> Path:
    if shutil.which(CXX) is None:
        raise BackendError(f"C++ compiler {CXX!r} not found: the CUDA emulator builds the kernels with it "
                           "(g++ >= 11 for std::barrier; Debian: apt-get install g++) or set REPOPS_CXX")
    src = _launchers()
    h = hashlib.sha256((" ".join(FLAGS) + src).encode())
    for f in sorted(EMU.glob("*")) + sorted(SOURCES.glob("*")):
        h.update(f.name.encode() + f.read_bytes())
    out = CACHE / f"libcudaemu-{h.hexdigest()[:16]}.so"
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        cpp, so = Path(tmp) / "launchers.cpp", Path(tmp) / out.name
        cpp.write_text(src)
        r = subprocess.run([CXX, *FLAGS, str(cpp), "-I", str(EMU), "-I", str(SOURCES), "-o", str(so)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise BackendError(f"the CUDA emulator did not build:\n{r.stderr[-4000:]}")
        os.replace(so, out)  # atomic: a concurrent builder never sees half a library
    return out


class Emulator:
    """A runtime with the device runtime's interface (xp, launch, max_blocks) on the CPU."""
    xp = np
    name = "cuda-emu"
    # the grid-stride kernels give the same bits for any grid and block size: small ones
    # keep the number of emulated threads down while still running every loop
    max_blocks = 2
    elementwise_threads = 32

    def __init__(self):
        self.lib = ctypes.CDLL(str(_library()))
        for name, (_, params) in KERNELS.items():
            fn = getattr(self.lib, "emu_" + name)
            fn.argtypes = [ctypes.c_void_p] + [_CTYPES.get(t, ctypes.c_void_p) for t in params]
            fn.restype = None

    def launch(self, name, grid, block, *args):
        params = KERNELS[name][1]
        if len(args) != len(params):
            raise TypeError(f"{name} takes {len(params)} arguments, got {len(args)}")
        geom = np.array(tuple(grid) + tuple(block), np.uint32)
        conv = [a.ctypes.data if t.endswith("*") else a for a, t in zip(args, params)]
        getattr(self.lib, "emu_" + name)(geom.ctypes.data, *conv)


@functools.cache
def emulator() -> Emulator:
    """The process's one emulator (kernels compiled once)."""
    return Emulator()
