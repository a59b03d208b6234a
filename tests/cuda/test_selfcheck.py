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


@pytest.mark.gpu
@pytest.mark.parametrize("before", ["cupy", "ftz-cubin"])
def test_ftz_code_earlier_in_the_process_does_not_reach_repops_kernels(before):
    """On the H100, after an FTZ cubin of our source was compiled and loaded in a process, a
    cubin built with the numerics options flushed subnormals too (the driver's compute cache;
    scripts/gpu_ftz_matrix.py has the cases). The device's default build (PTX, compiled in a
    process of its own, checked, compiled by the driver) must keep them, after CuPy's own
    -ftz=true kernels as well: a fresh process and empty caches, so it really compiles after."""
    import importlib.util
    from pathlib import Path
    from kernel_samples import backend_table
    backend_table("cuda")  # skips without a device
    script = Path(__file__).parents[2] / "scripts" / "gpu_ftz_matrix.py"
    spec = importlib.util.spec_from_file_location("gpu_ftz_matrix", script)
    matrix = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(matrix)
    assert matrix.fresh("default", before) == matrix.IEEE


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
            return self.xp.ascontiguousarray(v.reshape(1)), (0,) * len(shape)
        v = self.xp.ascontiguousarray(self.xp.broadcast_to(v, shape))
        return v, tuple(s // v.itemsize for s in v.strides)


def test_glue_that_moves_values_by_value_is_refused():
    rt = Emulator()
    with pytest.raises(BackendError, match=r"self-check failed on .*-0"):
        from repops.cuda.selfcheck import selfcheck
        selfcheck(rt, _ValueGlue(rt).table())
