"""matmul as the spec defines it (docs/NUMERICS.md, RepOps): for every output,
acc = +0; for k = 0..K-1: acc = fma(a[i, k], b[k, j], acc). One primitive at a time,
vectorised only across independent outputs."""
from __future__ import annotations

import numpy as np

from . import prims as P


@P.overridable("matmul")
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., M, K] @ b [..., K, N] (batch dims broadcast) -> [..., M, N]."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not chain")
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    acc = P.const(0.0, shape)  # +0
    for k in range(a.shape[-1]):
        acc = P.fma(a[..., :, k:k + 1], b[..., k:k + 1, :], acc)
    return acc
