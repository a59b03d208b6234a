"""Distances and bilinear forms on RepOps: cdist, pdist (repops/reference/distance.py) and
aten._trilinear (F.bilinear, nn.Bilinear) (docs/NUMERICS.md §8, "Transposed convolution and
losses with classes")."""
from __future__ import annotations

import numpy as np
import torch

from .aten import np_, register, tt
from .reference import distance as D
from .reference import prims as P
from .reference.fold import sum_dims
from .torch_checks import checked

aten = torch.ops.aten


# -- distances (repops/reference/distance.py) ------------------------------------------------------------------------
@register(aten._cdist_forward.default)
@checked(aten._cdist_forward.default)
def cdist_forward(x1, x2, p, compute_mode=None):
    """Always the direct formula (compute_mode's matmul shortcut is torch's speed choice)."""
    op = "_cdist_forward"
    return tt(D.cdist(np_(x1, op), np_(x2, op), float(p)))


@register(aten._cdist_backward.default)
def cdist_backward(grad, x1, x2, p, cdist):
    op = "_cdist_backward"
    return tt(D.cdist_backward(np_(grad, op), np_(x1, op), np_(x2, op), float(p), np_(cdist, op)))


def _pair_rows(n):
    """pdist's pairs i < j in row-major order: for each row i, (its first pair's place in the
    result, its pairs' place in a flat [n n] matrix: i n + i + 1, and their count n - 1 - i)."""
    start = 0
    for i in range(n - 1):
        yield start, i * n + i + 1, n - 1 - i
        start += n - 1 - i


@register(aten._pdist_forward.default)
@checked(aten._pdist_forward.default)
def pdist_forward(a, p=2):
    """cdist(x, x) above the diagonal, row after row: one place() copy of its row pieces."""
    op = "_pdist_forward"
    x = np_(a, op)
    n = x.shape[0]
    d = D.cdist(x, x, float(p)).reshape(n * n)
    pieces = [(start, 1, d[at:at + k]) for start, at, k in _pair_rows(n)]
    return tt(P.place((n * (n - 1) // 2,), 0, pieces) if pieces else P.copy(d[:0]))


@register(aten._pdist_backward.default)
def pdist_backward(grad, a, p, pdist):
    """G = the pair gradients placed at (i, j > i) of a +0 [n, n] (one place() copy), then cdist's
    gradient with x as x1 (G) plus with x as x2 (Gᵀ, cdist(x, x)ᵀ = cdist(x, x))."""
    op = "_pdist_backward"
    x, g = np_(a, op), np_(grad, op)
    n = x.shape[0]
    G = P.place((n * n,), 0, [(at, 1, g[start:start + k]) for start, at, k in _pair_rows(n)]).reshape(n, n)
    d = D.cdist(x, x, float(p))
    left = D.cdist_backward(G, x, x, float(p), d)
    right = D.cdist_backward(P.copy(G.T), x, x, float(p), d)
    return tt(P.add(left, right))


# -- bilinear (aten._trilinear) -------------------------------------------------------------------------------------
@register(aten._trilinear.default)
@checked(aten._trilinear.default)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """Each input with size-1 axes inserted at its expand dims (in increasing order, torch's);
    out = fold(add, -0) over the sumdim axes in row-major order of (i1 i2) i3, broadcast;
    no sumdim: the product. (F.bilinear: out[n, o] = sum over (i, j) of (x1[n, i] W[o, i, j])
    x2[n, j].) The summed axes are dropped, as torch does."""
    op = "_trilinear"
    arrays = []
    for t, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        a = np_(t, op)
        for d in sorted(expand):
            a = np.expand_dims(a, d)
        arrays.append(a)
    prod = P.mul(P.mul(arrays[0], arrays[1]), arrays[2])
    return tt(sum_dims(prod, sorted(sumdim)) if len(sumdim) else prod)
