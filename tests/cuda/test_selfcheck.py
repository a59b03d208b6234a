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
    """The real compile path with -ftz=true on purpose (what CuPy's RawModule(code=) does)."""
    from repops.cuda.device import Device
    from repops.cuda.kernels import NVRTC_OPTIONS
    try:
        rt = Device(options=(*NVRTC_OPTIONS, "-ftz=true"))
    except BackendError as e:
        pytest.skip(str(e))
    with pytest.raises(BackendError, match="self-check failed"):
        checked(rt)


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
