"""matmul as the spec defines it (docs/NUMERICS.md, RepOps): for every output,
acc = +0; for k = 0..K-1: acc = fma(a[i, k], b[k, j], acc). One primitive at a time,
vectorised only across independent outputs."""
from __future__ import annotations

import numpy as np

from . import prims as P


def matmul_shape(a_shape, b_shape) -> tuple[tuple, int, int, int]:
    """(batch, M, K, N) of a [..., M, K] @ b [..., K, N], batch dims broadcast: every backend's check."""
    if len(a_shape) < 2 or len(b_shape) < 2 or a_shape[-1] != b_shape[-2]:
        raise ValueError(f"matmul: shapes {tuple(a_shape)} and {tuple(b_shape)} do not chain")
    ba, bb = tuple(a_shape[:-2]), tuple(b_shape[:-2])
    batch = ba if ba == bb else np.broadcast_shapes(ba, bb)  # (equal batches, the common case: no numpy call)
    return batch, a_shape[-2], a_shape[-1], b_shape[-1]


@P.overridable("matmul")
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., M, K] @ b [..., K, N] (batch dims broadcast) -> [..., M, N]."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    batch, M, _, N = matmul_shape(a.shape, b.shape)
    acc = P.const(0.0, batch + (M, N))  # +0
    for k in range(a.shape[-1]):
        acc = P.fma(a[..., :, k:k + 1], b[..., k:k + 1, :], acc)
    return acc


@P.overridable("matmul_add")
def matmul_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """add(matmul(a, b), c), c broadcast to the product's shape (addmm's bias): two kernels of
    the spec, which a backend may run in one launch (the add in the product's epilogue: the
    same two roundings)."""
    return P.add(matmul(a, b), c)
