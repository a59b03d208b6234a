"""Build the CPU kernels (repops/cpu/kernels/*.c) into one shared library with gcc, cached
by a hash of the sources, flags and compiler version.

Why gcc + ctypes rather than numba: the kernels need explicit AVX2 fma intrinsics, control
of MXCSR and `-ffp-contract=off` (numba's fastmath choices do not give all three), and a C
source is what the CUDA backend's emulation shares habits with. The flags are part of the
numerics contract: never -ffast-math/-Ofast; no implicit contraction.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ..errors import BackendError

KERNELS = Path(__file__).parent / "kernels"
SHARED = Path(__file__).parent.parent / "kernels"   # per-element code shared with the CUDA kernels
CACHE = Path(os.environ.get("REPOPS_CACHE", Path(__file__).resolve().parents[2] / ".cache" / "repops"))
CC = os.environ.get("REPOPS_CC", "gcc")
# -fno-trapping-math (no FP traps: lets gcc evaluate both arms of a select) and the if-conversion
# parameter let the branch-free per-element code vectorize; neither changes a value.
FLAGS = ["-O3", "-std=gnu11", "-fPIC", "-shared", "-fopenmp", "-ffp-contract=off", "-fno-fast-math",
         "-fno-math-errno", "-fno-trapping-math", "--param", "max-tree-if-conversion-phi-args=64", "-Wall", "-Werror"]

_lib = None

_AFFINITY = len(os.sched_getaffinity(0))


def default_threads() -> int:
    """REPOPS_NUM_THREADS, else the CPUs this process may use (never torch's setting:
    results do not depend on it, and RepOps does not share torch's pool)."""
    env = os.environ.get("REPOPS_NUM_THREADS")
    return int(env) if env else _AFFINITY



@functools.cache
def compiler_version() -> str:
    """Once per process: each C library's first use asked gcc (a process each)."""
    if shutil.which(CC) is None:
        raise BackendError(f"C compiler {CC!r} not found: RepOps' CPU kernels (and the fast tensor commitments) "
                           "are built with it. Install gcc (Debian: apt-get install gcc) or set REPOPS_CC.")
    return subprocess.run([CC, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


def cached_library(name: str, sources: list, flags: list, link: tuple = ()) -> Path:
    """A shared library built once from `sources` (.c compiled, .h hashed) with gcc, cached in
    CACHE under a hash of the sources, flags, link arguments and compiler version. Every C
    library of the project is built here (the RepOps kernels, offchain/protocol's chunk trees)."""
    h = hashlib.sha256(" ".join(list(flags) + list(link) + [compiler_version()]).encode())
    for s in sources:
        h.update(Path(s).name.encode() + Path(s).read_bytes())
    out = CACHE / f"lib{name}-{h.hexdigest()[:16]}.so"
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}.so")
    cmd = [CC, *flags, *[str(s) for s in sources if str(s).endswith(".c")], *link, "-o", str(tmp)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BackendError(f"building {name} failed:\n$ {' '.join(cmd)}\n{r.stderr}")
    tmp.replace(out)  # atomic: concurrent builders never load half a file
    return out


def _kernel_sources() -> list:
    return sorted(KERNELS.glob("*.[ch]")) + sorted(SHARED.glob("*.h"))


def build(extra: tuple = ()) -> Path:
    """The kernels' shared library (cached); extra: more gcc flags (tests build probes)."""
    return cached_library("repops", _kernel_sources(), [*FLAGS, *extra, f"-I{SHARED}"], ("-lm",))


def lib() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        L = ctypes.CDLL(str(build()))
        f32p = ctypes.POINTER(ctypes.c_float)
        L.repops_matmul_f32.argtypes = [f32p, f32p, f32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        L.repops_matmul_f32.restype = ctypes.c_int
        L.repops_matmul_batched_f32.argtypes = [f32p, f32p, f32p] + [ctypes.c_int] * 5
        L.repops_matmul_batched_f32.restype = ctypes.c_int
        L.repops_matmul_batched_strided_f32.argtypes = ([ctypes.c_void_p] + [ctypes.c_long] * 3 + [ctypes.c_void_p] +
                                                        [ctypes.c_long] * 3 + [f32p] + [ctypes.c_int] * 5)
        L.repops_matmul_batched_strided_f32.restype = ctypes.c_int
        L.repops_matmul_strided_f32.argtypes = ([ctypes.c_void_p] + [ctypes.c_long] * 2 + [ctypes.c_void_p] +
                                                [ctypes.c_long] * 2 + [f32p] + [ctypes.c_int] * 4)
        L.repops_matmul_strided_f32.restype = ctypes.c_int
        L.repops_test_set_ftz_daz.argtypes = [ctypes.c_int]
        L.repops_test_set_ftz_daz.restype = ctypes.c_uint
        L.repops_map_f32.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        L.repops_map_f32.restype = ctypes.c_int
        L.repops_fold_f32.argtypes = [ctypes.c_int, f32p, f32p, ctypes.c_long, ctypes.c_long, ctypes.c_float, ctypes.c_int]
        L.repops_fold_f32.restype = ctypes.c_int
        vp, lg, i, fl = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_float
        L.repops_softmax_f32.argtypes = [i, vp, vp, vp, fl, vp, lg, lg, lg, i]
        L.repops_softmax_f32.restype = i
        L.repops_norm_f32.argtypes = [i, vp, vp, vp, vp, fl, vp, vp, vp, vp, vp, lg, lg, i]
        L.repops_norm_f32.restype = i
        L.repops_adamw_f32.argtypes = [vp] * 7 + [lg, i]
        L.repops_adamw_f32.restype = None
        L.repops_rope_f32.argtypes = [i, vp, vp, vp, lg, vp, lg, i]
        L.repops_rope_f32.restype = None
        L.repops_embedding_backward_f32.argtypes = [vp, vp, vp, lg, lg, lg, i]
        L.repops_embedding_backward_f32.restype = i
        L.repops_philox_keep.argtypes = [ctypes.c_uint] * 4 + [vp, lg, i]
        L.repops_philox_keep.restype = None
        L.repops_mxcsr_get.restype = ctypes.c_uint
        L.repops_mxcsr_set.argtypes = [ctypes.c_uint]
        L.repops_mxcsr_ieee.restype = ctypes.c_uint
        _lib = L
    return _lib
