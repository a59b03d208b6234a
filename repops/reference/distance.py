"""Vector p-norms for every ord and the distances built on them (cdist, pdist and their
gradients) as compositions of the primitives, the folds and the general power
(docs/NUMERICS.md §8, "Transposed convolution and losses with classes"). Each norm folds in
row-major order over its dims; the distances take x1[i] - x2[j] elementwise, then the norm
along the last axis (torch's direct formula; its matmul shortcut for large p = 2 inputs is
only a rounding apart)."""
from __future__ import annotations

import numpy as np

from . import prims as P
from .activations import pow as _pow
from .activations import sign
from .fold import fold_dims, sum_dims

F32 = np.float32
INF = float("inf")


def _c(v, like):
    return P.const(v, np.shape(like))


def vector_norm(x, ord, dims, keepdim):
    """ord 2: sqrt(sum(x x)); 1: sum(|x|); inf: fold(max, -inf) of |x|; -inf: fold(min, +inf) of
    |x|; 0: sum(select(x = 0, +0, 1)) (a NaN counts, as torch's x != 0); any other p:
    pow(sum(pow(|x|, RN(p))), RN(1/p)) (sums from -0, the general power)."""
    if ord == 2:
        return P.sqrt(sum_dims(P.mul(x, x), dims, keepdim))
    a = P.abs_(x)
    if ord == 1:
        return sum_dims(a, dims, keepdim)
    if ord == INF:
        return fold_dims(P.max_, a, dims, -np.inf, keepdim)
    if ord == -INF:
        return fold_dims(P.min_, a, dims, np.inf, keepdim)
    if ord == 0:
        return sum_dims(P.select(P.eq(x, _c(0.0, x)), _c(0.0, x), _c(1.0, x)), dims, keepdim)
    s = sum_dims(_pow(a, _c(F32(ord), a)), dims, keepdim)
    return _pow(s, _c(F32(1.0 / ord), s))


def _pairs(x1, x2):
    """diff[..., i, j, :] = x1[..., i, :] - x2[..., j, :] (broadcast over the batch axes)."""
    return P.sub(np.expand_dims(x1, -2), np.expand_dims(x2, -3))


def cdist(x1, x2, p):
    """d[..., i, j] = vector_norm(x1[..., i, :] - x2[..., j, :], p) over the last axis; p = 0 counts
    the nonzero differences as torch's distance kernel, min(ceil|d|, 1): a NaN difference gives NaN
    (vector_norm's ord 0 counts a NaN as nonzero, as torch's x != 0)."""
    diff = _pairs(x1, x2)
    if p == 0:
        nz = P.select(P.eq(diff, _c(0.0, diff)), _c(0.0, diff), P.select(P.eq(diff, diff), _c(1.0, diff), diff))
        return sum_dims(nz, [-1], False)
    return vector_norm(diff, p, [-1], False)


def cdist_backward(g, x1, x2, p, d):
    """dx1[..., i, :] = fold(add, -0) over j of torch's per-pair term (_cdist_backward's CPU
    formulas), diff = x1_i - x2_j, G = g[..., i, j], D = d[..., i, j]:
    p = 0: +0; 1: G sign(diff); 2: select(D = 0, +0, (G diff) / D); inf: (G sign(diff))
    select(|diff| = D, 1, +0); p < 2: select(D = 0 or (diff = 0 and p < 1), +0, ((sign(diff)
    pow(|diff|, p - 1)) G) / pow(D, p - 1)); p > 2: select(D = 0, +0, ((diff pow(|diff|, p - 2))
    G) / pow(D, p - 1))."""
    diff = _pairs(x1, x2)
    G, D = np.expand_dims(g, -1), np.expand_dims(d, -1)
    zero, Dd = _c(0.0, diff), P.xp_of(diff).broadcast_to(D, diff.shape)  # (a view: D along diff's last axis)
    if p == 0:
        term = zero
    elif p == 1:
        term = P.mul(G, sign(diff))
    elif p == 2:
        term = P.select(P.eq(Dd, zero), zero, P.div(P.mul(G, diff), D))
    elif p == INF:
        a = P.abs_(diff)
        term = P.mul(P.mul(G, sign(diff)), P.select(P.eq(a, Dd), _c(1.0, a), zero))
    else:
        a = P.abs_(diff)
        dp = _pow(D, _c(F32(p - 1), D))
        if p < 2:
            num = P.mul(P.mul(sign(diff), _pow(a, _c(F32(p - 1), a))), G)
        else:
            num = P.mul(P.mul(diff, _pow(a, _c(F32(p - 2), a))), G)
        term = P.div(num, dp)
        if p < 1:
            term = P.select(P.eq(diff, zero), zero, term)
        term = P.select(P.eq(Dd, zero), zero, term)
    return sum_dims(P.xp_of(term).broadcast_to(term, diff.shape), [-2])
