"""fold on the CPU (kernels/fold.c): equals repops.reference.fold.fold bit for bit."""
from __future__ import annotations

import ctypes
import math

import numpy as np

from .build import default_threads, lib


def _ptr(x: np.ndarray):
    return x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def fold(prim, x, axis: int, init: float, keepdims: bool = False) -> np.ndarray:
    """repops.reference.fold.fold with compiled kernels for add and max (other primitives
    use the reference): same order, same bits."""
    from ..reference import prims as P
    from ..reference.fold import fold as ref_fold
    code = {P.add: 0, P.max_: 1}.get(prim)
    x = np.asarray(x, np.float32)
    if code is None or x.ndim == 0:
        return ref_fold.reference(prim, x, axis, init, keepdims)  # not the override: that is us
    axis = axis % x.ndim
    moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
    n = moved.shape[-1]
    rows = moved.size // n if n else math.prod(moved.shape[:-1])
    out = np.empty(moved.shape[:-1], np.float32)
    if n == 0:
        out.fill(init)
    elif rows:
        lib().repops_fold_f32(code, _ptr(moved), _ptr(out), rows, n, init, default_threads())
    return np.expand_dims(out, axis) if keepdims else out
