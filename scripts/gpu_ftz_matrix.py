"""Which RepOps CUDA build keeps IEEE subnormals after flush-to-zero code ran earlier in its
process (docs/NUMERICS.md §9, trap 3)? Each case runs in a fresh process with its own kernel
and driver caches: the driver's compute cache on or off; RepOps' kernels loaded as cubin,
as PTX, or as the device builds them by default; and before them nothing, CuPy's own
kernels (compiled with -ftz=true), or an FTZ cubin of our source compiled and loaded.

  python scripts/gpu_ftz_matrix.py                   # the 12 cases (a GPU machine)
  python scripts/gpu_ftz_matrix.py TARGET BEFORE     # one case, in this process
"""
import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IEEE = "IEEE (self-check passed)"


def one(target: str, before: str) -> str:
    """target: cubin, ptx or default; before: nothing, cupy or ftz-cubin."""
    sys.path.insert(0, str(ROOT))
    import cupy
    from repops.backends import checked
    from repops.cuda.compile import headers, nvrtc
    from repops.cuda.device import Device
    from repops.cuda.kernels import NVRTC_OPTIONS, SOURCES, TUNING, defines
    from repops.cuda.nvrtc import NVRTC
    from repops.errors import BackendError
    if before == "cupy":
        assert (cupy.arange(4, dtype=cupy.float32) * 2).get().tolist() == [0, 2, 4, 6]
    elif before == "ftz-cubin":
        arch = cupy.cuda.Device().compute_capability
        blob = NVRTC(nvrtc().path).compile((SOURCES / "primitives.cu").read_text(), "primitives.cu", headers(),
                                           [*NVRTC_OPTIONS, "-ftz=true", *defines(TUNING), f"-arch=sm_{arch}",
                                            "-std=c++17"], "cubin")
        Path("ftz.cubin").write_bytes(blob)
        cupy.RawModule(path="ftz.cubin").get_function("prim_map_f32")
    try:
        checked(Device() if target == "default" else Device(target=target))
        return IEEE
    except BackendError as e:
        return f"REFUSED: {str(e)[:100]}"


def fresh(target: str, before: str, cache: str = "on") -> str:
    """one(target, before) in a fresh process, in an empty folder with empty caches."""
    d = tempfile.mkdtemp()
    env = dict(os.environ, REPOPS_CACHE=f"{d}/repops", CUDA_CACHE_PATH=f"{d}/nv",
               CUDA_CACHE_DISABLE="1" if cache == "off" else "0")
    r = subprocess.run([sys.executable, __file__, target, before], capture_output=True, text=True, env=env, cwd=d)
    return r.stdout.strip() or r.stderr[-300:]


if __name__ == "__main__":
    if len(sys.argv) == 3:
        print(one(*sys.argv[1:]))
    else:
        for cache, target, before in itertools.product(("on", "off"), ("cubin", "ptx"),
                                                       ("nothing", "cupy", "ftz-cubin")):
            print(f"driver cache {cache:3}  {target:5}  after {before:9}  {fresh(target, before, cache)}")
