"""Backends as tables: the few kernels that have a compiled implementation. Everything not
listed runs the reference (numpy, one primitive at a time across independent outputs)."""
from __future__ import annotations

from .aten import REFERENCE, Backend
from .errors import BackendError


def _cpu() -> Backend:
    from . import cpu
    return Backend("cpu", matmul=cpu.matmul, fold=cpu.fold, prims={"fma": cpu.fma, "exp": cpu.exp})


_TABLE = {"reference": lambda: REFERENCE, "cpu": _cpu}


def get(name: str) -> Backend:
    if name not in _TABLE:
        raise BackendError(f"unknown RepOps backend {name!r}; available: {', '.join(sorted(_TABLE))}")
    return _TABLE[name]()
