"""The ONE compile path of every RepOps CUDA kernel: source -> NVRTC with exactly the numerics
contract's options -> PTX (checked, then loaded by path: the driver compiles it) or a cubin,
cached by (source and headers, options, arch, NVRTC version).

Why not CuPy's compiler: `cupy.RawModule(code=..., options=...)`, RawKernel,
ElementwiseKernel and CuPy's own arithmetic compile through `_compile_with_cache_cuda`, which
appends `-ftz=true` AFTER the caller's options; NVRTC takes the last flag, so subnormals
flush to zero on the GPU while the CPU emulation (and nvcc -ptx) show nothing wrong
(docs/NUMERICS.md §9). Each compile runs in a process of its own (repops/cuda/nvrtc.py: on
the H100, FTZ code compiled and loaded earlier in a process reached later cubins). NVRTC
itself needs no GPU, so CI compiles here through this very function (the
`nvidia-cuda-nvrtc` wheel in requirements.lock) and checks the PTX.

  python -m repops.cuda.compile --ptx DIR [--arch 90]   # one .ptx per source
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..errors import BackendError
from .kernels import NVRTC_OPTIONS, SOURCES, headers as header_files, sources
from .nvrtc import NVRTC, NVRTCError

# PTX instructions outside the numerics contract: flush-to-zero, approximations
NOT_IEEE = re.compile(r"\.ftz\b|\.approx\b|\bdiv\.full\b")
CACHE = Path(os.environ.get("REPOPS_CACHE", Path(__file__).resolve().parents[2] / ".cache" / "repops")) / "cuda"


@functools.cache
def nvrtc() -> NVRTC:
    """The library, loaded here for its version and path only: compiles run in a process of
    their own (repops/cuda/nvrtc.py says why)."""
    try:
        return NVRTC()
    except NVRTCError as e:
        raise BackendError(str(e)) from None


def headers() -> dict[str, str]:
    return {p.name: p.read_text() for p in header_files()}


def compile_source(src: Path | str, arch: str, target: str = "ptx", options=NVRTC_OPTIONS,
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
    nv, hdrs = nvrtc(), headers()
    # "own-process": no file from a compile that shared its process with others (docs/NUMERICS.md §9)
    key = hashlib.sha256("\0".join([text, *opts, nv.version, "own-process",
                                    *(f"{k}\0{v}" for k, v in hdrs.items())]).encode())
    out = CACHE / f"{src.stem}-sm{arch}-{key.hexdigest()[:16]}.{target}"
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    job = {"library": nv.path, "source": text, "name": src.name, "headers": hdrs, "options": opts, "target": target}
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("nvrtc.py")), str(tmp)], input=json.dumps(job),
                       capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BackendError(r.stderr.strip() or f"the NVRTC process for {src.name} exited with {r.returncode}")
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
