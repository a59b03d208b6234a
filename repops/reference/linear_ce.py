"""F.linear_cross_entropy's chunked custom op (torch_nn::_linear_cross_entropy_batch_chunked):
the loss of cross_entropy(x Wᵀ + b, t) (class weights, ignore_index; mean or sum; torch takes
this path only without label smoothing) and, returned with it, its gradients for an upstream
gradient of 1 (docs/NUMERICS.md §8, "Transposed convolution and losses with classes"). RepOps
computes the whole batch at once: torch's chunks are a memory schedule, its sums meet these
to rounding."""
from __future__ import annotations

from . import nn as N
from . import prims as P
from .fold import sum_dims
from .linalg import matmul


def linear_cross_entropy(x, W, b, t, w, mean: bool):
    """x [R, F], W [C, F], t [R] int64 with ignored rows at -1 -> (loss, dlogits).
    logits = x Wᵀ (+ b); lsm = log_softmax; wr = w[t_r] (1 unweighted; +0 ignored);
    total = fold(add, -0) of wr; loss = fold(add, -0) of -(lsm[r, t_r] wr), / total (mean);
    dlogits = a_r (p - onehot(t_r)), p = softmax, a_r = wr / total (mean) or wr."""
    R, C = x.shape[0], W.shape[0]
    logits = matmul(x, W.T)
    if b is not None:
        logits = P.add(logits, b.reshape(1, C))
    lsm = N.log_softmax(logits, -1)
    cw = P.const(1.0, (C,)) if w is None else w
    wr = P.gather(cw.reshape(1, C, 1), t.reshape(1, R), P.const(0.0, ())).reshape(R)
    picked = P.gather(lsm.reshape(R, C, 1), t.reshape(R, 1), P.const(0.0, ())).reshape(R)
    total = sum_dims(wr, None)
    loss = sum_dims(P.neg(P.mul(picked, wr)), None)
    a = wr
    if mean:
        loss = P.div(loss, total)
        a = P.div(wr, P.xp_of(wr).broadcast_to(total, wr.shape))
    hot = P.onehot(t, P.const(1.0, (R,)), P.const(0.0, (C,)))
    return loss, P.mul(a.reshape(R, 1), P.sub(N.softmax(logits, -1), hot))


def grads(dlogits, x, W, want_x, want_w, want_b):
    """dx = dlogits @ W; dW = dlogitsᵀ @ x; db = fold(add, -0) over rows of dlogits (row order)."""
    dx = matmul(dlogits, W) if want_x else None
    dw = matmul(P.copy(dlogits.T), x) if want_w else None
    db = sum_dims(dlogits, [0]) if want_b else None
    return dx, dw, db
