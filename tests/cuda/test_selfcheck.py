"""A CUDA runtime is checked before RepOps computes on it: one that flushes subnormals or
loses -0.0 is refused with the op and the bits, and the emulator shows the GPU's traps."""
import numpy as np
import pytest

from repops.backends import checked
from repops.cuda.emulator import CupyLike, Emulator
from repops.cuda.ops import Ops
from repops.errors import BackendError


def test_the_emulated_device_passes():
    checked(Emulator())


def test_a_device_that_flushes_subnormals_is_refused():
    with pytest.raises(BackendError, match=r"self-check failed on .*subnormal.* is 0x[0-9A-F]{8}, the reference gives 0x"):
        checked(Emulator(ftz=True))


@pytest.mark.gpu
def test_a_gpu_build_with_ftz_is_refused():
    """A real flush-to-zero build: PTX compiled with -ftz=true (its instructions say .ftz),
    compiled for the GPU by the driver."""
    from repops.cuda.device import Device
    from repops.cuda.kernels import NVRTC_OPTIONS
    try:
        bad = Device(options=(*NVRTC_OPTIONS, "-ftz=true"))
    except BackendError as e:
        pytest.skip(str(e))
    with pytest.raises(BackendError, match="self-check failed on .*subnormal"):
        checked(bad)


_FTZ_FIRST = """
import numpy as np, cupy
from repops.backends import checked
from repops.cuda.compile import headers, nvrtc
from repops.cuda.device import Device
from repops.cuda.kernels import NVRTC_OPTIONS, SOURCES, TUNING, defines
from repops.cuda.nvrtc import NVRTC
arch = cupy.cuda.Device().compute_capability
# before RepOps compiles anything: CuPy's own kernels (-ftz=true), and a flush-to-zero cubin
# of RepOps' source compiled and loaded in this process
assert (cupy.arange(4, dtype=cupy.float32) * 2).get().tolist() == [0, 2, 4, 6]
blob = NVRTC(nvrtc().path).compile((SOURCES / "primitives.cu").read_text(), "primitives.cu", headers(),
                                   [*NVRTC_OPTIONS, "-ftz=true", *defines(TUNING), f"-arch=sm_{arch}", "-std=c++17"],
                                   "cubin")
open("ftz.cubin", "wb").write(blob)
cupy.RawModule(path="ftz.cubin").get_function("prim_map_f32")
checked(Device())
print("passed")
"""


@pytest.mark.gpu
def test_ftz_compiles_earlier_in_the_process_do_not_reach_repops_kernels(tmp_path):
    """On the H100, in a process where CUDA was up and a first compile asked for -ftz=true,
    a later compile with the numerics options gave FTZ machine code (FADD.FTZ) too: NVRTC's
    options did not reach it. RepOps compiles each source in a process of its own. A fresh
    process and an empty kernel cache, so RepOps really compiles after the FTZ ones."""
    import os
    import subprocess
    import sys
    from kernel_samples import backend_table
    backend_table("cuda")  # skips without a device
    env = dict(os.environ, REPOPS_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _FTZ_FIRST], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.split() == ["passed"], r.stdout + r.stderr


def test_the_emulator_has_cupys_value_transfer_trap():
    """What the glue must avoid, reproduced: a 0-d host value moved by value loses -0.0."""
    xp = CupyLike()
    assert xp.asarray(np.float32(-0.0)).view(np.uint32) == 0
    assert xp.asarray(np.array([-0.0], np.float32)).view(np.uint32)[0] == 0x80000000
    a = xp.empty(3, np.float32)
    a.fill(-0.0)
    assert (a.view(np.uint32) == 0).all()


class _ValueGlue(Ops):
    """The operand glue as it was on the H100: a broadcast constant moved as a 0-d value."""

    def _operand(self, v, shape, dtype=np.float32):
        if isinstance(v, np.ndarray) and v.size and not any(v.strides):
            v = np.asarray(v.flat[0], v.dtype)
        v = self.xp.asarray(v, dtype=dtype)
        if v.size == 1:
            return self.xp.ascontiguousarray(v.reshape(1)), 0
        return self.xp.ascontiguousarray(self.xp.broadcast_to(v, shape)), 1


def test_glue_that_moves_values_by_value_is_refused():
    rt = Emulator()
    with pytest.raises(BackendError, match=r"self-check failed on .*-0"):
        from repops.cuda.selfcheck import selfcheck
        selfcheck(rt, _ValueGlue(rt).table())
