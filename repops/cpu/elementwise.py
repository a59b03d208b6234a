"""Elementwise kernels of the CPU backend: one C entry point (kernels/elementwise.c) for every
map primitive and fused activation, reading broadcast operands in place with their strides.
Each returns exactly what the reference function of the same name returns."""
from __future__ import annotations

import ctypes
import math

import numpy as np

from .build import default_threads, lib

F32 = np.float32
from ..kernels import MAP_OPS as OPS

_BOOL_OUT = {"eq", "lt", "le"}


def _collapse(shape, strides):
    """Merge adjacent axes that every operand walks as one (fewer, longer rows)."""
    dims = [[d, [s[i] for s in strides]] for i, d in enumerate(shape) if d != 1]
    out = []
    for d, st in dims:
        if out and all(ps == s * d for ps, s in zip(out[-1][1], st)):
            out[-1][0] *= d
            out[-1][1] = st
        else:
            out.append([d, st])
    return out or [[1, [0] * len(strides)]]


def _strides(arrs, shape, nin):
    """(ndim, shape, strides) in elements with broadcast axes at stride 0, axes merged where
    every operand walks them as one. Fast path: each operand contiguous at the output shape,
    or a single value (the common case: one axis)."""
    size = math.prod(shape) if shape else 1
    if all(a.size == 1 or (a.shape == shape and a.flags.c_contiguous) for a in arrs):
        return 1, [size], [1 if a.size != 1 else 0 for a in arrs]
    strides = [[s // a.itemsize for s in np.broadcast_to(a, shape).strides] for a in arrs]
    dims = _collapse(shape, strides)
    return len(dims), [d for d, _ in dims], [dims[i][1][k] for k in range(nin) for i in range(len(dims))]


def kernel(name: str):
    op, nin = OPS[name]
    dtype_out = np.bool_ if name in _BOOL_OUT else F32
    call = lib().repops_map_f32
    types = [np.uint8 if (name == "select" and i == 0) else F32 for i in range(nin)]

    def run(*xs):
        if len(xs) != nin:
            raise TypeError(f"{name} takes {nin} operands, got {len(xs)}")
        arrs = []
        for x, t in zip(xs, types):
            a = x if isinstance(x, np.ndarray) and x.dtype == t else np.asarray(x, t if t is F32 else np.bool_)
            arrs.append(a.view(np.uint8) if a.dtype == np.bool_ else a)
        shape = arrs[0].shape if nin == 1 else np.broadcast_shapes(*(a.shape for a in arrs))
        out = np.empty(shape, dtype_out)
        if out.size == 0:
            return out
        nd, dims, st = _strides(arrs, shape, nin)
        rc = call(op, nin, nd, (ctypes.c_long * nd)(*dims), (ctypes.c_void_p * nin)(*[a.ctypes.data for a in arrs]),
                  (ctypes.c_long * len(st))(*st), out.ctypes.data, default_threads())
        if rc != 0:
            raise MemoryError(f"{name}: out of memory")
        return out
    run.__name__ = name
    return run


def table() -> dict:
    return {name: kernel(name) for name in OPS}
