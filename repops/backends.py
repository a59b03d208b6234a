"""Backends as tables: name -> {kernel name: compiled kernel}. A listed kernel replaces the
reference function of that name (repops.reference.prims.overridable) and must give the same
bits (tests/repops compare every backend with the reference). Everything not listed runs
the reference: numpy, one primitive at a time across independent outputs."""
from __future__ import annotations

from .errors import BackendError


def _cpu() -> dict:
    from . import cpu
    return {"matmul": cpu.matmul, "fold": cpu.fold, "fma": cpu.fma, "exp": cpu.exp}


_TABLE = {"reference": dict, "cpu": _cpu}


def get(name: str) -> dict:
    if name not in _TABLE:
        raise BackendError(f"unknown RepOps backend {name!r}; available: {', '.join(sorted(_TABLE))}")
    return _TABLE[name]()
