"""matmul on the CPU (kernels/matmul.c): equals repops.reference.linalg.matmul bit for bit."""
from __future__ import annotations

import ctypes
import math

import numpy as np

from ..errors import BackendError, DTypeError
from ..reference.linalg import matmul_shape
from .build import default_threads, lib


def _f32(x, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise DTypeError(f"{what}: RepOps v1 computes in float32, got {x.dtype}")
    return np.ascontiguousarray(x)  # an exact copy when strided: layout never changes bits


def _ptr(x: np.ndarray):
    return x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def _batch_stride(x: np.ndarray, nbatch: int):
    """(element stride of the batch, as one dim) or None when the batch dims do not
    collapse into one stride (then the caller copies)."""
    dims = [(d, st // 4) for d, st in zip(x.shape[:-2], x.strides[:-2]) if d != 1]
    if not dims:
        return 0
    stride = dims[-1][1]
    for (d_out, s_out), (d_in, s_in) in zip(dims[:-1], dims[1:]):
        if s_out != s_in * d_in:
            return None
    return stride


def matmul(a, b, threads: int | None = None) -> np.ndarray:
    """a [..., M, K] @ b [..., K, N]; equals repops.reference.linalg.matmul bit for bit.
    Operands are read in place with their strides (transposed views, broadcast batches):
    packing them is the exact copy the kernel makes anyway."""
    a, b = np.asarray(a), np.asarray(b)
    for x, what in ((a, "matmul a"), (b, "matmul b")):
        if x.dtype != np.float32:
            raise DTypeError(f"{what}: RepOps v1 computes in float32, got {x.dtype}")
    batch, M, K, N = matmul_shape(a.shape, b.shape)
    a = np.broadcast_to(a, batch + (M, K))
    b = np.broadcast_to(b, batch + (K, N))
    n = math.prod(batch) if batch else 1
    sa, sb = _batch_stride(a, n), _batch_stride(b, n)
    if sa is None or a.strides[-1] % 4 or a.strides[-2] % 4:
        a, sa = np.ascontiguousarray(a), M * K
    if sb is None or b.strides[-1] % 4 or b.strides[-2] % 4:
        b, sb = np.ascontiguousarray(b), K * N
    out = np.empty(batch + (M, N), np.float32)
    if out.size == 0:
        return out
    t = threads or default_threads()
    ptr = lambda x: x.__array_interface__["data"][0]  # noqa: E731 - strided: no ctypes copy
    # one product: threads across its rows; a batch: threads across entries (same bits)
    if n == 1:
        rc = _single(a.reshape(M, K), b.reshape(K, N), out, M, N, K, t)
    else:
        rc = lib().repops_matmul_batched_strided_f32(ptr(a), sa, a.strides[-2] // 4, a.strides[-1] // 4, ptr(b), sb,
                                                      b.strides[-2] // 4, b.strides[-1] // 4, _ptr(out), n, M, N, K, t)
    if rc != 0:
        raise BackendError(f"matmul: out of memory packing a {M}x{K}x{N} problem")
    return out


def _single(a, b, out, M, N, K, t):
    """One product with threads across its rows (the strided kernel, no copies)."""
    ptr = lambda x: x.__array_interface__["data"][0]  # noqa: E731
    return lib().repops_matmul_strided_f32(ptr(a), a.strides[-2] // 4, a.strides[-1] // 4, ptr(b), b.strides[-2] // 4,
                                           b.strides[-1] // 4, _ptr(out), M, N, K, t)
