"""libnvrtc over ctypes, with nothing but the standard library: run as a script, it compiles
one program in a process of its own (repops.cuda.compile starts one per compile).

Why a process per compile: on the lent H100, machine code came out flushing subnormals
after flush-to-zero code had been compiled and loaded in the same process, whatever the
options of the later compile (docs/NUMERICS.md §9, trap 3). A process of its own gives each
compile exactly its options and none of the caller's state. That state includes CuPy's,
which compiles its own kernels with -ftz=true through the same library.

  python nvrtc.py OUT < job.json   # job: {library, source, name, headers, options, target}
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import json
import os
import sys


class NVRTCError(Exception):
    pass


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

    def __init__(self, path: str | None = None):
        """path: this library (the caller's, in a compile's own process); else the first found."""
        tried = []
        for path in [path] if path else _candidates():
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
            raise NVRTCError("NVRTC (libnvrtc.so) not found: RepOps compiles its CUDA kernels with it. "
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
            raise NVRTCError(f"NVRTC {what} failed: {msg}" + (f"\n{log}" if log else ""))

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


def main() -> int:
    job = json.load(sys.stdin)
    try:
        blob = NVRTC(job["library"]).compile(job["source"], job["name"], job["headers"], job["options"], job["target"])
    except NVRTCError as e:
        print(e, file=sys.stderr)
        return 2
    with open(sys.argv[1], "wb") as f:
        f.write(blob)
    return 0


if __name__ == "__main__":
    sys.exit(main())
