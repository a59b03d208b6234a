"""RepOps fast CPU backend: compiled kernels equal to repops.reference bit for bit, one
module per family (elementwise, fold, linalg, nn) over one shared library (build.py)."""
from __future__ import annotations

from .build import default_threads, lib
from .fold import fold
from .linalg import matmul

__all__ = ["fold", "matmul", "default_threads", "lib", "table"]


def table() -> dict:
    """The CPU backend table (repops.backends): every entry equals the reference of its name."""
    from . import elementwise, nn, random
    return {**elementwise.table(), **nn.TABLE, **random.TABLE, "matmul": matmul, "fold": fold}
