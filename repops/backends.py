"""Backends as tables: name -> {kernel name: compiled kernel}. A listed kernel replaces the
reference function of that name (repops.reference.prims.overridable) and must give the same
bits (tests/repops compare every backend with the reference). Everything not listed runs
the reference: numpy, one primitive at a time across independent outputs."""
from __future__ import annotations

import threading

from .errors import BackendError


def _native_integers(table: dict) -> dict:
    """Integer ops run torch's own exact kernels (repops.integer.run's override)."""
    from .integer import native
    return _empty_by_reference({**table, "integer": native})


# Kernels that skip an empty input and would return what the allocator left for the outputs
# it still has (a layer norm on a [0, N] batch: its weight and bias gradients; on [N, 0]: its
# statistics): an empty operand runs the reference there, which defines them (-0 sums, NaN
# statistics of an empty row), on the backend's own primitives.
EMPTY_BY_REFERENCE = ("layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward")


def _empty_by_reference(table: dict) -> dict:
    from .reference.prims import OVERRIDABLE

    def guard(name, kernel):
        def run(*args):
            if any(getattr(a, "size", 1) == 0 and hasattr(a, "shape") for a in args):
                return OVERRIDABLE[name].reference(*args)
            return kernel(*args)
        return run
    return {k: guard(k, v) if k in EMPTY_BY_REFERENCE else v for k, v in table.items()}


# Tables built once per thread (every repops.deterministic() block asks for one: building the
# CUDA table, a closure per primitive, was half a block's enter/exit): the CPU's, and the CUDA
# table of each runtime (kept by the runtime: one a test made and dropped goes with its tables).
# Per thread, because the CUDA table's Ops fills its index checks' slots (repops/cuda/ops.py
# index_check): another thread's block must never write them. Each get() hands out a copy
# (a caller that edits its table edits its own) and starts the runtime's checks on new slots,
# as a new Ops did: a block's checks never share slots with an earlier block's.
_BUILT = threading.local()


def _cpu() -> dict:
    table = getattr(_BUILT, "cpu", None)
    if table is None:
        from . import cpu
        table = _BUILT.cpu = _native_integers(cpu.table())
    return dict(table)


def checked(rt) -> dict:
    """The CUDA table of runtime rt, once it has passed the self-check (once per runtime):
    a device that computes other bits is refused before it computes anything."""
    return _checked(rt)[1]


def _checked(rt) -> tuple:
    """(the Ops, its checked table) for runtime rt: a new one each call."""
    from .cuda.ops import Ops
    from .cuda.selfcheck import selfcheck
    ops = Ops(rt)
    table = _native_integers(ops.table())
    if not getattr(rt, "selfchecked", False):
        selfcheck(rt, table)
        rt.selfchecked = True
    return ops, table


def _cuda_table(rt) -> dict:
    """checked(rt), built once per runtime and thread: a copy of it, its index checks on new slots."""
    mine = rt.__dict__.get("_repops_tables")
    if mine is None:
        mine = rt.__dict__.setdefault("_repops_tables", threading.local())  # (atomic: one per runtime)
    entry = getattr(mine, "table", None)
    if entry is None:
        entry = mine.table = _checked(rt)
    ops, table = entry
    ops.new_checks()
    return dict(table)


def _cuda() -> dict:
    from .cuda.device import device
    return _cuda_table(device())


def _cuda_emu() -> dict:
    """The CUDA kernels' sources run on the CPU emulator: slow; for checking their bits."""
    from .cuda.emulator import emulator
    return _cuda_table(emulator())


_TABLE = {"reference": dict, "cpu": _cpu, "cuda": _cuda, "cuda-emu": _cuda_emu}


def get(name: str) -> dict:
    if name not in _TABLE:
        raise BackendError(f"unknown RepOps backend {name!r}; available: {', '.join(sorted(_TABLE))}")
    return _TABLE[name]()
