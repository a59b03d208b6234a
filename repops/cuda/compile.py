"""The ONE compile path of every RepOps CUDA kernel: source -> NVRTC with exactly the numerics
contract's options -> cubin (the device loads it by path) or PTX (the checks read it),
cached by (source and headers, options, arch, NVRTC version).

Why not CuPy's compiler: `cupy.RawModule(code=..., options=...)`, RawKernel,
ElementwiseKernel and CuPy's own arithmetic compile through `_compile_with_cache_cuda`, which
appends `-ftz=true` AFTER the caller's options; NVRTC takes the last flag, so subnormals
flush to zero on the GPU while the CPU emulation (and nvcc -ptx) show nothing wrong
(docs/NUMERICS.md §9). NVRTC itself needs no GPU, so CI compiles here through this very
function (the `nvidia-cuda-nvrtc` wheel in requirements.lock) and checks the PTX.

  python -m repops.cuda.compile --ptx DIR [--arch 90]   # one .ptx per source
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import functools
import glob
import hashlib
import os
import sys
from pathlib import Path

from ..errors import BackendError
from .kernels import NVRTC_OPTIONS, SOURCES, headers as header_files, sources

CACHE = Path(os.environ.get("REPOPS_CACHE", Path(__file__).resolve().parents[2] / ".cache" / "repops")) / "cuda"


def _candidates() -> list[str]:
    """Where libnvrtc may be: REPOPS_NVRTC, the pip wheels (ours and CuPy's), the toolkit."""
    out = [os.environ["REPOPS_NVRTC"]] if os.environ.get("REPOPS_NVRTC") else []
    for base in sys.path:
        out += sorted(glob.glob(os.path.join(base, "nvidia", "cu*", "lib", "libnvrtc.so*")), reverse=True)
        out += sorted(glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*")), reverse=True)
    for home in filter(None, (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")):
        out += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")), reverse=True)
    found = ctypes.util.find_library("nvrtc")
    return out + ([found] if found else [])


class NVRTC:
    """The few NVRTC entry points RepOps needs, over ctypes (no CuPy involved)."""

    def __init__(self):
        tried = []
        for path in _candidates():
            if ".alt." in path or "builtins" in path:
                continue
            try:
                # libnvrtc dlopens its builtins by soname: load the ones beside it first
                for b in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*"))):
                    if ".alt." not in b:
                        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
                self.lib = ctypes.CDLL(path)
                self.path = path
                break
            except OSError as e:
                tried.append(f"{path}: {e}")
        else:
            raise BackendError("NVRTC (libnvrtc.so) not found: RepOps compiles its CUDA kernels with it. "
                               "Install the pinned wheel (pip install nvidia-cuda-nvrtc, in requirements.lock), "
                               "the CUDA toolkit, or set REPOPS_NVRTC=/path/to/libnvrtc.so"
                               + (f" (tried: {'; '.join(tried)})" if tried else ""))
        L = self.lib
        L.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(L.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = f"{major.value}.{minor.value}"

    def _check(self, rc: int, what: str, log: str = ""):
        if rc != 0:
            msg = self.lib.nvrtcGetErrorString(rc).decode()
            raise BackendError(f"NVRTC {what} failed: {msg}" + (f"\n{log}" if log else ""))

    def compile(self, source: str, name: str, headers: dict[str, str], options: list[str], target: str) -> bytes:
        """-> the PTX text (target "ptx") or the cubin (target "cubin") of one program."""
        L = self.lib
        prog = ctypes.c_void_p()
        names = [k.encode() for k in headers]
        bodies = [v.encode() for v in headers.values()]
        arr = ctypes.c_char_p * max(1, len(headers))
        self._check(L.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), len(headers),
                                         arr(*bodies), arr(*names)), "nvrtcCreateProgram")
        try:
            opts = [o.encode() for o in options]
            rc = L.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * max(1, len(opts)))(*opts))
            size = ctypes.c_size_t()
            L.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            L.nvrtcGetProgramLog(prog, log)
            self._check(rc, f"compiling {name} ({' '.join(options)})", log.value.decode(errors="replace"))
            get_size, get = ((L.nvrtcGetPTXSize, L.nvrtcGetPTX) if target == "ptx"
                             else (L.nvrtcGetCUBINSize, L.nvrtcGetCUBIN))
            self._check(get_size(prog, ctypes.byref(size)), f"getting the {target} size of {name}")
            buf = ctypes.create_string_buffer(size.value)
            self._check(get(prog, buf), f"getting the {target} of {name}")
            return buf.raw.rstrip(b"\0") if target == "ptx" else buf.raw
        finally:
            L.nvrtcDestroyProgram(ctypes.byref(prog))


@functools.cache
def nvrtc() -> NVRTC:
    return NVRTC()


def headers() -> dict[str, str]:
    return {p.name: p.read_text() for p in header_files()}


def compile_source(src: Path | str, arch: str, target: str = "cubin", options=NVRTC_OPTIONS,
                   prelude: str = "") -> Path:
    """Compile one kernel source (a file under repops/cuda/kernels, or its name) for compute
    capability `arch` ("90") into `target` ("cubin" or "ptx"); -> the cached file's path.
    options: the numerics contract's (a test passes others on purpose); prelude: text put
    before the source (a test's probe macros). Every flag is ours: nothing is appended."""
    if target not in ("cubin", "ptx"):
        raise ValueError(f"target must be 'cubin' or 'ptx', not {target!r}")
    src = SOURCES / src if isinstance(src, str) else src
    text = prelude + src.read_text()
    arch_flag = f"-arch={'sm' if target == 'cubin' else 'compute'}_{arch}"
    opts = [*options, arch_flag, "-std=c++17"]
    nv = nvrtc()
    key = hashlib.sha256("\0".join([text, *opts, nv.version, *(f"{k}\0{v}" for k, v in headers().items())]).encode())
    out = CACHE / f"{src.stem}-sm{arch}-{key.hexdigest()[:16]}.{target}"
    if out.exists():
        return out
    blob = nv.compile(text, src.name, headers(), opts, target)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(blob)
    os.replace(tmp, out)  # atomic: a concurrent process never loads half a file
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repops.cuda.compile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx", type=Path, required=True, metavar="DIR", help="write one .ptx per kernel source here")
    ap.add_argument("--arch", default="90", help="compute capability (default 90: H100/H200)")
    args = ap.parse_args(argv)
    args.ptx.mkdir(parents=True, exist_ok=True)
    try:
        for src in sources():
            out = args.ptx / f"{src.stem}.ptx"
            out.write_bytes(compile_source(src, args.arch, "ptx").read_bytes())
            print(f"{out}  ({out.stat().st_size:,} bytes)")
    except BackendError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"NVRTC {nvrtc().version} ({nvrtc().path}), options: {' '.join(NVRTC_OPTIONS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
