"""fold: a left fold along one axis, in increasing index order, from a stated initial
value. The only reduction RepOps has: sum, mean, max, norms and matmul's k loop are folds."""
from __future__ import annotations

import numpy as np

from . import prims as P


@P.overridable("fold")
def fold(prim, x: np.ndarray, axis: int, init: float, keepdims: bool = False) -> np.ndarray:
    """acc = init; for i in 0..n-1: acc = prim(acc, x[..., i, ...]) (vectorised across the
    other axes, which are independent outputs)."""
    x = P.f32(x)  # (a device array stays there: the primitives run on its device)
    axis = axis % x.ndim if x.ndim else 0
    moved = P.xp_of(x).moveaxis(x, axis, -1)
    acc = P.const(init, moved.shape[:-1])
    for i in range(moved.shape[-1]):
        acc = prim(acc, moved[..., i])
    return P.xp_of(acc).expand_dims(acc, axis) if keepdims else acc


def _dims(x, dims) -> tuple:
    """The reduced axes, sorted and non-negative. A 0-dim tensor has no axes: torch accepts
    dim 0 or -1 there and reduces over nothing (its one element is the row)."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(x.ndim))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted(d % x.ndim for d in dims)) if x.ndim else ()


def fold_dims(prim, x, dims, init, keepdim=False):
    """Fold over several dims = over their elements in row-major order (last dim fastest)."""
    dims = _dims(x, dims)
    if len(dims) == 1:  # (fold moves the one axis itself: the same view, the same primitives, fewer array calls)
        return fold(prim, x, dims[0], init, keepdim)
    if len(dims) == x.ndim and x.flags.c_contiguous:  # (every axis of a row-major array: its elements in order)
        out = fold(prim, x.reshape(x.size), -1, init)
        return out.reshape((1,) * x.ndim) if keepdim else out
    rest = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, rest + list(dims))
    # (explicit sizes: -1 is ambiguous when an axis is empty)
    flat = moved.reshape(moved.shape[:len(rest)] + (int(np.prod([x.shape[d] for d in dims])),))
    # a fresh copy never overlaps x, so the O(1) bounds test is exact here (shares_memory can be slow)
    if flat.size and not np.may_share_memory(flat, x):  # reshape had to copy: say so (a copy kernel)
        flat = P.copy(moved).reshape(flat.shape)
    out = fold(prim, flat, -1, init)
    if keepdim:
        out = out.reshape([1 if d in dims else x.shape[d] for d in range(x.ndim)])
    return out


SUM_INIT = -0.0   # the additive identity: sum([x]) == x bit for bit (-0 + -0 = -0)


def sum_dims(x, dims, keepdim=False):
    """sum: fold(add) from -0 over dims (docs/NUMERICS.md §8)."""
    return fold_dims(P.add, x, dims, SUM_INIT, keepdim)


def mean_dims(x, dims, keepdim=False):
    """mean: sum / n, n the element count as binary32."""
    n = int(np.prod([x.shape[d] for d in _dims(x, dims)]))
    s = sum_dims(x, dims, keepdim)
    return P.div(s, P.const(n, s.shape))


def max_dims(x, dims, keepdim=False):
    """max: fold(max) from -inf over dims (softmax's row maximum)."""
    return fold_dims(P.max_, x, dims, -np.inf, keepdim)
