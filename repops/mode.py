"""`with repops.deterministic():` runs ordinary PyTorch code on RepOps kernels: every aten
op below autograd is either a RepOps definition (repops.aten.REGISTRY), an exact data
movement (EXACT), or an UnsupportedOpError. Never a silent fall-back."""
from __future__ import annotations

import contextlib

import torch
from torch._C import DispatchKey
from torch.utils._python_dispatch import TorchDispatchMode

from . import aten as A
from .errors import UnsupportedOpError


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


class RepOpsMode(TorchDispatchMode):
    def __init__(self, trace=None):
        super().__init__()
        self.trace = trace  # optional callback(func, args, kwargs, out): the Verde recorder hooks here

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        if devices - {"cpu", "meta"}:
            raise UnsupportedOpError(f"{func}: RepOps' CPU backend got tensors on {sorted(devices)}; "
                                     "the CUDA backend is not available in this build")
        impl = A.REGISTRY.get(func)
        if impl is not None:
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
        if self.trace is not None:
            self.trace(func, args, kwargs, out)
        return out


@contextlib.contextmanager
def deterministic(backend: str = "cpu", trace=None):
    """Run the enclosed PyTorch code with RepOps semantics. backend: "cpu" (compiled
    kernels) or "reference" (the numpy spec itself; slow)."""
    from .backends import get
    from .cpu.build import lib
    from .reference.prims import implementations
    table = get(backend)
    # numpy's elementwise kernels run in this thread under its MXCSR: force IEEE modes
    # (no FTZ/DAZ, round-to-nearest) for the block, whatever the process had set.
    csr = lib().repops_mxcsr_ieee()
    try:
        with implementations(table), RepOpsMode(trace):
            yield
    finally:
        lib().repops_mxcsr_set(csr)
