"""What the CUDA launch glue does in a training step, counted on the CPU emulator: kernel
launches, host syncs (device->host reads), the array module's own kernels (contiguous copies,
casts, fills), DLPack conversions, host->device uploads, and launches too narrow for the
GPU (few blocks, each thread walking a long serial loop). No GPU is needed: the glue is the
GPU's (repops/cuda/ops.py, repops/aten.py), only the runtime is emulated.

`counting(rt, device=True)` runs the enclosed code as if its torch tensors were CUDA
tensors: a tensor's array is device memory (a DeviceArray view, as device.as_array gives),
so the glue takes its device paths (repops.reference.prims.xp_of says "device"), and every
value read on the host (an array's, or a tensor's: item, tolist, cpu, bool, int, float) is
counted where it is read. `stub=True` counts launches without running them (the op
sequence never depends on float values), so a d1024 Llama step is counted in seconds; its
float results are then garbage, never to be used.

Narrow launches are judged at the GPU's geometry (repops/cuda/kernels.py: THREADS, SMS),
not the emulator's: blocks = ceil(work items / THREADS) for a grid-stride kernel, one per row
for a row kernel, one per group of columns for a fold (repops/cuda/ops.py _row_grid,
_group_grid)."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections import Counter

import numpy as np
import torch

from . import emulator as E
from .device import _NUMPY, _TORCH
from .kernels import ROW_THREADS, SMS, THREADS

SERIAL = 64  # a per-thread loop at least this long in a launch of fewer than SMS blocks is narrow
# the serial loop each thread of a kernel walks, from its arguments (repops/cuda/kernels/*.cu)
LOOP = {
    "rows_f32": lambda a: a[8],  # the row (softmax, log_softmax, attention rows)
    "norm_f32": lambda a: a[13],  # the normalised row (layer / RMS norm)
    "colsum_f32": lambda a: a[6],  # the rows summed per column (norm weight / bias gradients)
    "fold_f32": lambda a: a[3],  # the folded axis
    "embedding_poison_f32": lambda a: -(-a[3] // (ROW_THREADS // a[6])),  # a lane's positions (a[6] columns a block)
    "embedding_backward_f32": lambda a: a[4],  # the positions of a block's rows: at most every position
}
# Reductions to fewer outputs than SMs (a scalar, a 10-class bias gradient): each output's
# fold is one sequential chain by the spec (a tree would change the bits) and already has a
# block of its own; the launch cannot be wider. Listed apart, not narrow.
ALLOWED = {"fold_f32 to fewer outputs than SMs": lambda a: a[4] < SMS,
           "colsum_f32 of fewer columns than SMs": lambda a: a[7] < SMS}

# torch's reads of a tensor's value on the host: on a CUDA tensor each waits for the device
_READS = ("item", "tolist", "cpu", "__bool__", "__int__", "__float__", "__index__")

# numpy's implicit conversions, which CuPy refuses for its arrays (TypeError)
_IMPLICIT = ("asarray", "array", "ascontiguousarray", "asanyarray")

_HERE = os.path.dirname(os.path.abspath(__file__))
# who may convert a device array: the emulated runtime, and numpy's own functions (CuPy's
# arrays dispatch those to CuPy: np.moveaxis of a device array stays on the device)
_TRUSTED = (_HERE + os.sep, os.path.dirname(np.__file__) + os.sep)
_REPOPS = os.path.dirname(_HERE)


@dataclasses.dataclass
class Counts:
    launches: int = 0
    syncs: int = 0
    copies: int = 0  # copy kernels of the array module itself (CuPy's): contiguous copies, casts, fills
    copy_bytes: int = 0
    cupy_ops: int = 0  # its other kernels: elementwise ops and reductions (integer index checks)
    dlpack: int = 0
    uploads: int = 0
    upload_bytes: int = 0
    narrow: int = 0
    allowed: int = 0
    views: int = 0  # device arrays made over torch tensors (device.as_array, Device.empty: a CuPy ndarray each)
    kernels: Counter = dataclasses.field(default_factory=Counter)
    sites: dict = dataclasses.field(default_factory=dict)  # kind -> Counter of "file:line"
    record_sites: bool = True

    def seen(self, kind, nbytes=0):
        if kind == "view":  # (the most frequent: every operand and output)
            self.views += 1
        elif kind == "sync":
            self.syncs += 1
        elif kind == "upload":
            self.uploads += 1
            self.upload_bytes += int(nbytes)
        elif kind == "copy":
            self.copies += 1
            self.copy_bytes += int(nbytes)
        elif kind == "op":
            self.cupy_ops += 1
        elif kind == "dlpack":
            self.dlpack += 1
        if self.record_sites:
            self.sites.setdefault(kind, Counter())[_site()] += 1

    def row(self) -> dict:
        return {"launches": self.launches, "syncs": self.syncs, "copies": self.copies,
                "copy_mb": round(self.copy_bytes / 1e6, 1), "cupy_ops": self.cupy_ops, "dlpack": self.dlpack, "uploads": self.uploads, "narrow_launches": self.narrow,
                "allowed_launches": self.allowed, "views": self.views}


def _site() -> str:
    """The first line of RepOps outside this module and the emulator that led here."""
    f = sys._getframe(2)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if path.startswith(_REPOPS) and os.path.dirname(path) != _HERE and not (
                f.f_code.co_name == "run" and path.endswith(os.path.join("reference", "prims.py"))):
            return f"{os.path.relpath(path, os.path.dirname(_REPOPS))}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back
    return "?"


def _device_array(t: torch.Tensor):
    return t.detach().numpy().view(E.DeviceArray)


def _torch_owner(a):
    """The torch tensor whose memory an emulated device array views (Emulator.empty, an
    input's as_array), or None (memory of the array module's own: CuPy's pool on a GPU)."""
    while a is not None and not isinstance(a, torch.Tensor):
        a = getattr(a, "base", None)
    return a


@contextlib.contextmanager
def counting(rt, device: bool = True, stub: bool = False, sites: bool = True):
    """Count what runs on the emulator `rt` inside; yields the Counts. device: treat torch
    tensors as device tensors (the CUDA path); stub: do not run kernels; sites: note where
    each sync, upload and copy comes from (Counts.sites; costs time)."""
    from .. import aten
    from ..reference import prims as P
    from .ops import Ops
    c = Counts(record_sites=sites)
    launch, grids, xp_of = rt.launch, (Ops._grid, Ops._row_grid, Ops._group_grid, Ops._table_rows), P.xp_of
    arr, tt, tensor, data, from_dlpack = aten.arr, aten.tt, aten.tensor, aten._data, torch.from_dlpack
    work = []

    def counted_grid(self, n):  # the GPU's blocks of each geometry
        work.append(-(-n // THREADS))
        return grids[0](self, n)

    def counted_row_grid(self, rows, n):
        work.append(rows)
        return grids[1](self, rows, n)

    def counted_group_grid(self, n, cols):
        work.append(-(-n // cols))
        return grids[2](self, n, cols)

    def counted_launch(name, g, block, *args):
        c.launches += 1
        c.kernels[name] += 1
        blocks = work.pop() if work else None
        work.clear()
        if name in LOOP and blocks is not None and blocks < SMS and LOOP[name](args) >= SERIAL:
            if any(test(args) for k, test in ALLOWED.items() if k.startswith(name)):
                c.allowed += 1
            else:
                c.narrow += 1
                c.sites.setdefault("narrow", Counter())[f"{name} (loop {LOOP[name](args)}, blocks {blocks})"] += 1
        if not stub:
            launch(name, g, block, *args)
        elif name in ("index_check_i64", "finite_check_f32"):  # the outputs the glue reads (at settle): no fault
            args[-1].view(np.ndarray)[:] = 0

    device_type = E.DeviceArray

    def device_arr(t):  # repops.cuda.device.as_array: a view of the tensor's memory
        if not t.is_cpu:
            return arr(t)
        c.seen("view")
        if t.dtype not in _NUMPY:
            c.seen("dlpack")  # (as_array's fallback: a dtype CuPy has no name for)
        return t.detach().numpy().view(device_type)  # (_device_array, inline: the harness's own time)

    def device_tensor(a):  # repops.cuda.device.as_tensor: a view where torch owns the memory, else DLPack
        if not isinstance(a, E.DeviceArray):
            return tensor(a)
        if _torch_owner(a) is None or a.dtype not in _TORCH:
            c.seen("dlpack")
        return torch.from_numpy(a.view(np.ndarray))  # (np.asarray's, without the refusing wrapper's frame check)

    def device_tt(a):
        if isinstance(a, E.DeviceArray):
            return device_tensor(a.astype(np.float32, copy=False))
        c.seen("upload", np.asarray(a).nbytes)  # a host result: it must be moved to the device
        c.seen("sync")  # (.to(device) from pageable memory waits)
        return tt(a)

    def counted_from_dlpack(a, *args, **kwargs):
        c.seen("dlpack")
        return from_dlpack(a, *args, **kwargs)

    def device_xp_of(x):
        return rt.xp if isinstance(x, E.DeviceArray) else xp_of(x)

    implicit = {n: getattr(np, n) for n in _IMPLICIT}
    trusted = {}  # caller's code object -> inside the emulator or numpy (decided once: the
    # glue_ratio times this path, and a path lookup per call is no cost of the GPU's)

    def refusing(name):
        native = implicit[name]

        def convert(a, *args, **kwargs):
            if not isinstance(a, E.DeviceArray):
                return native(a, *args, **kwargs)
            code = sys._getframe(1).f_code
            ok = trusted.get(code)
            if ok is None:
                ok = trusted[code] = os.path.abspath(code.co_filename).startswith(_TRUSTED)
            if not ok:
                raise TypeError(f"np.{name} of a device array: Implicit conversion to a NumPy array is not "
                                "allowed (CuPy; read it with an explicit download, or keep to the array's module)")
            return native(a, *args, **kwargs)
        return convert

    inside = []

    def reading(name):
        native = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            if not inside:  # (a torch function mode calls the method again: one read)
                c.seen("sync", self.element_size() * self.numel())  # a device tensor's value on the host
            inside.append(name)
            try:
                return native(self, *args, **kwargs)
            finally:
                inside.pop()
        return read

    rt.launch = counted_launch
    Ops._grid, Ops._row_grid, Ops._group_grid = counted_grid, counted_row_grid, counted_group_grid
    Ops._table_rows = lambda self, v: grids[3](self, v, 32 * SMS)  # the GPU's grid (repops/cuda/device.py)
    E.OBSERVER = c.seen
    reads = {}
    swapped = []  # (module, name, native): every module that imported the glue's converters by name
    if device:
        for native, fake in ((arr, device_arr), (tt, device_tt), (tensor, device_tensor), (xp_of, device_xp_of),
                             (data, lambda a: a.__array_interface__["data"][0])):
            for mod in [m for n, m in sys.modules.items() if n == "repops" or n.startswith("repops.")]:
                for name, v in list(vars(mod).items()):
                    if v is native:
                        swapped.append((mod, name, native))
                        setattr(mod, name, fake)
        torch.from_dlpack = counted_from_dlpack
        for name in _IMPLICIT:  # CuPy refuses numpy's conversions of its arrays: so must the device here
            setattr(np, name, refusing(name))
        for name in _READS:  # (the tensors are CUDA tensors here: any read of a value syncs)
            reads[name] = torch.Tensor.__dict__.get(name)
            setattr(torch.Tensor, name, reading(name))
    try:
        yield c
    finally:
        E.OBSERVER = None
        del rt.launch
        Ops._grid, Ops._row_grid, Ops._group_grid, Ops._table_rows = grids
        for mod, name, native in swapped:
            setattr(mod, name, native)
        torch.from_dlpack = from_dlpack
        for name, native in implicit.items():
            setattr(np, name, native)
        for name, had in reads.items():
            if had is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, had)
