"""`with repops.deterministic():` runs ordinary PyTorch code on RepOps kernels: every aten
op below autograd is either a RepOps definition (repops.aten.REGISTRY), an exact data
movement (EXACT), or an UnsupportedOpError. Never a silent fall-back."""
from __future__ import annotations

import contextlib
import functools

import torch
from torch._C import DispatchKey
from torch.utils._python_dispatch import TorchDispatchMode

from . import aten as A
from .errors import DeviceError, UnsupportedOpError


def _describe(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(f"{a.dtype}{list(a.shape)}@{a.device.type}")
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            parts.append("[" + ", ".join(f"{t.dtype}{list(t.shape)}" for t in a) + "]")
        else:
            parts.append(repr(a))
    return ", ".join(parts)


def _device(func, args) -> str:
    """The one device an op runs on; CPU 0-dim tensors (wrapped scalars) go with any."""
    if all(not isinstance(a, (list, tuple)) and (not isinstance(a, torch.Tensor) or a.device.type == "cpu")
           for a in args):
        return "cpu"  # the common case, decided without building sets
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    tensors += [t for a in args if isinstance(a, (list, tuple)) for t in a if isinstance(t, torch.Tensor)]
    devices = {t.device.type for t in tensors if not (t.device.type == "cpu" and t.dim() == 0)}
    if len(devices - {"meta"}) > 1:
        raise DeviceError(f"{func}: inputs on several devices ({_describe(args)}); move them to one "
                          "device first (RepOps never copies between devices behind your back)")
    if devices - {"cpu", "meta", "cuda"}:
        raise DeviceError(f"{func}: RepOps has no backend for device {sorted(devices)}; use cpu or cuda")
    if "cuda" in devices:
        return "cuda"
    return "meta" if devices == {"meta"} else "cpu"


class RepOpsMode(TorchDispatchMode):
    def __init__(self, trace=None, cuda_table=None):
        super().__init__()
        # optional callback(func, args, kwargs, out) after each op, and trace.before(func, args,
        # kwargs) before it if it has that attribute: the Verde recorder hooks here
        self.trace = trace
        self._cuda_table = cuda_table  # () -> the CUDA backend table, built on first CUDA op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        impl = A.REGISTRY.get(func)
        device = _device(func, args)
        traced = self.trace is not None and func.namespace != "profiler" and (
            impl is not None or func in A.EXACT)  # profiler marks compute nothing; composites decompose
        if traced and hasattr(self.trace, "before"):
            self.trace.before(func, args, kwargs)  # inputs as they are BEFORE an in-place op runs
        if impl is not None and device == "meta":
            out = func(*args, **kwargs)  # shapes only, no values: the graph of a step (Verde)
        elif impl is not None and device == "cuda":
            from .reference.prims import implementations
            with implementations(self._cuda_table()):
                out = impl(*args, **kwargs)
        elif impl is not None:
            out = impl(*args, **kwargs)
        elif func in A.EXACT or func.namespace == "profiler":
            out = func(*args, **kwargs)
        elif func.has_kernel_for_dispatch_key(DispatchKey.CompositeImplicitAutograd):
            # A composite op (linear, layer_norm, ...) reaching us whole (inference_mode skips
            # autograd's decomposition). Decompose it with this mode re-entered, so each piece
            # runs on RepOps in torch's fixed order, exactly as under autograd.
            with self:
                return func.decompose(*args, **kwargs)
        else:
            raise UnsupportedOpError(f"{func} is not implemented by RepOps (args: {_describe(args)}). "
                                     "Add a definition in repops/aten.py, or keep this op out of "
                                     "repops.deterministic().")
        if traced:
            self.trace(func, args, kwargs, out)
        return out


@contextlib.contextmanager
def deterministic(backend: str = "cpu", trace=None):
    """Run the enclosed PyTorch code with RepOps semantics. backend: the kernels for CPU
    tensors: "cpu" (compiled), "reference" (the numpy spec itself; slow) or "cuda-emu" (the
    CUDA sources emulated; slower). CUDA tensors always run the "cuda" backend (CuPy)."""
    from .backends import get
    from .cpu.build import lib
    from .reference.prims import implementations
    table = get(backend)
    cuda_table = functools.cache(lambda: get("cuda"))  # built on the first op on CUDA tensors
    # numpy's elementwise kernels run in this thread under its MXCSR: force IEEE modes
    # (no FTZ/DAZ, round-to-nearest) for the block, whatever the process had set.
    csr = lib().repops_mxcsr_ieee()
    try:
        with implementations(table), RepOpsMode(trace, cuda_table):
            yield
    finally:
        lib().repops_mxcsr_set(csr)
