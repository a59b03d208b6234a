"""Which RepOps CUDA build keeps IEEE subnormals after flush-to-zero code ran earlier in its
process (docs/NUMERICS.md §9, trap 3)? One fresh process per case, each with its own kernel
and driver caches: the driver's compute cache on or off; RepOps' kernels loaded as cubin
or PTX; and before them nothing, CuPy's own kernels (compiled with -ftz=true), or an FTZ
cubin of our source compiled and loaded in the process.

  python scripts/gpu_ftz_matrix.py   # on a GPU machine, from the repository root
"""
import itertools
import os
import subprocess
import sys
import tempfile

CASE = """
import sys
import cupy
from repops.backends import checked
from repops.cuda.compile import headers, nvrtc
from repops.cuda.device import Device
from repops.cuda.kernels import NVRTC_OPTIONS, SOURCES, TUNING, defines
from repops.cuda.nvrtc import NVRTC
target, before = sys.argv[1], sys.argv[2]
if before == "cupy":
    (cupy.arange(4, dtype=cupy.float32) * 2).get()
if before == "ftz-cubin":
    arch = cupy.cuda.Device().compute_capability
    blob = NVRTC(nvrtc().path).compile((SOURCES / "primitives.cu").read_text(), "primitives.cu", headers(),
                                       [*NVRTC_OPTIONS, "-ftz=true", *defines(TUNING), f"-arch=sm_{arch}",
                                        "-std=c++17"], "cubin")
    open("ftz.cubin", "wb").write(blob)
    cupy.RawModule(path="ftz.cubin").get_function("prim_map_f32")
try:
    checked(Device(target=target))
    print("IEEE (self-check passed)")
except Exception as e:
    print("REFUSED:", str(e)[:100])
"""

root = os.getcwd()
for cache, target, before in itertools.product(("on", "off"), ("cubin", "ptx"), ("nothing", "cupy", "ftz-cubin")):
    d = tempfile.mkdtemp()
    env = dict(os.environ, PYTHONPATH=root, REPOPS_CACHE=f"{d}/repops", CUDA_CACHE_PATH=f"{d}/nv",
               CUDA_CACHE_DISABLE="1" if cache == "off" else "0")
    r = subprocess.run([sys.executable, "-c", CASE, target, before], capture_output=True, text=True, env=env, cwd=d)
    print(f"driver cache {cache:3}  {target:5}  after {before:9}  {r.stdout.strip() or r.stderr[-300:]}")
