"""fold: a left fold along one axis, in increasing index order, from a stated initial
value. The only reduction RepOps has: sum, mean, max, norms and matmul's k loop are folds."""
from __future__ import annotations

import numpy as np

from . import prims as P


@P.overridable("fold")
def fold(prim, x: np.ndarray, axis: int, init: float, keepdims: bool = False) -> np.ndarray:
    """acc = init; for i in 0..n-1: acc = prim(acc, x[..., i, ...]) (vectorised across the
    other axes, which are independent outputs)."""
    x = np.asarray(x, np.float32)
    axis = axis % x.ndim if x.ndim else 0
    moved = np.moveaxis(x, axis, -1)
    acc = P.const(init, moved.shape[:-1])
    for i in range(moved.shape[-1]):
        acc = prim(acc, moved[..., i])
    return np.expand_dims(acc, axis) if keepdims else acc
