"""Margin losses and the shrink gradients as compositions of the primitives, the gather/onehot
kernels and the integer kernels (docs/NUMERICS.md §8, "Transposed convolution and losses
with classes"), in torch's CPU formulas. Rows: x [R, C] (an unbatched input is one row); a
loss per row is a fold(add, -0) over its terms in order, divided by C; the aten layer
(repops/aten_loss.py) reduces the rows (mean: div(sum, R), as torch divides by nframe)."""
from __future__ import annotations

import numpy as np

from . import integers as I
from . import prims as P
from .fold import fold_dims, sum_dims
from .ordering import K

F32 = np.float32


def shrink_backward(g, x, lambd):
    """hardshrink and softshrink: select(-λ ≤ x, select(x ≤ λ, +0, g), g) (a NaN x passes g, as torch)."""
    zero = P.const(0.0, g.shape)
    return P.select(P.le(P.const(-F32(lambd), x.shape), x), P.select(P.le(x, P.const(F32(lambd), x.shape)), zero, g), g)


def _pick(x, t, fill=0.0):
    """x[r, t_r] for int64 t [R] (fill where t_r is outside the classes) -> [R, 1]."""
    return P.gather(x.reshape(x.shape[0], x.shape[1], 1), t.reshape(-1, 1), P.const(fill, ())).reshape(-1, 1)


def _hot(t, classes):
    """[R, C] bool: column t_r of row r (onehot kernel of 1 over +0, compared with 1)."""
    return P.eq(P.onehot(t, P.const(1.0, t.shape), P.const(0.0, (classes,))), P.const(1.0, (t.shape[0], classes)))


def _multi_margin_h(x, t, margin, w, value):
    """h[r, d] = select(d = t_r, +0, select(0 < z, value(z), +0)) (times w[t_r] when weighted),
    z[r, d] = (RN(margin) - x[r, t_r]) + x[r, d]. -> (h, d = t_r as bool)."""
    xt = _pick(x, t)
    z = P.add(P.sub(P.const(F32(margin), xt.shape), xt), x)
    is_t, zero = _hot(t, x.shape[1]), P.const(0.0, z.shape)
    h = P.select(is_t, zero, P.select(P.lt(zero, z), value(z), zero))
    if w is not None:
        h = P.mul(h, P.gather(w.reshape(1, -1, 1), t.reshape(1, -1), P.const(0.0, ())).reshape(-1, 1))
    return h, is_t


def multi_margin(x, t, p, margin, w):
    """Per row: h[d] with value z (p = 1) or z z (p = 2); loss = fold(add, -0) over d of h, / C. -> [R]."""
    h, _ = _multi_margin_h(x, t, margin, w, (lambda z: z) if p == 1 else (lambda z: P.mul(z, z)))
    return P.div(sum_dims(h, [1]), P.const(x.shape[1], (x.shape[0],)))


def multi_margin_backward(go, x, t, p, margin, w, scale):
    """scale = RN(1/(R C)) (mean) or RN(1/C) (torch's g); h[d] with value g (p = 1) or RN(2 g) z
    (p = 2); dx[r, d] = h[d], dx[r, t_r] = fold(sub, +0) over d of h (torch's `grad_target -=
    h`); then times go ([R, 1] or 0-dim)."""
    g = F32(scale)
    value = (lambda z: P.const(g, z.shape)) if p == 1 else (lambda z: P.mul(P.const(F32(2) * g, z.shape), z))
    h, is_t = _multi_margin_h(x, t, margin, w, value)
    target = fold_dims(P.sub, h, [1], 0.0, True)
    return P.mul(P.select(is_t, P.xp_of(h).broadcast_to(target, h.shape), h), go)


def _label_columns(t):
    """The classes of each row up to its first negative entry (torch's list end): for column j,
    (valid_j, t'_j) with valid_j = and(valid_{j-1}, le(0, t_j)) and t'_j = select(valid_j, t_j,
    -1), by the integer kernels (ordering.K: on a device, the same arithmetic where the arrays live)."""
    valid = None
    for j in range(t.shape[1]):
        col = t[:, j]
        ok = K["le.i64"](I.const(0, "i64"), col)
        valid = ok if valid is None else K["and.bool"](valid, ok)
        yield valid, K["select.i64"](valid, col, I.const(-1, "i64"))


def is_target(t, classes):
    """[R, C] float: 1 where the class is one of the row's labels, else +0 (fold(max, +0) over
    the label columns of their onehot)."""
    acc = P.const(0.0, (t.shape[0], classes))
    for _, tj in _label_columns(t):
        acc = P.max_(acc, P.onehot(tj, P.const(1.0, tj.shape), P.const(0.0, (classes,))))
    return acc


def _multilabel_terms(x, t, tgt, value):
    """Per label column j: (t'_j, h_j) with z = (1 - x[r, t'_j]) + x[r, d] and h_j[r, d] =
    select(valid_j, select(d is a label, +0, select(0 < z, value(z), +0)), +0)."""
    label, zero = P.eq(tgt, P.const(1.0, tgt.shape)), P.const(0.0, x.shape)
    for valid, tj in _label_columns(t):
        xt = _pick(x, tj)
        z = P.add(P.sub(P.const(1.0, xt.shape), xt), x)
        h = P.select(label, zero, P.select(P.lt(zero, z), value(z), zero))
        yield tj, P.select(valid.reshape(-1, 1), h, zero)


def multilabel_margin(x, t, tgt):
    """loss = (fold(add, -0) over label columns j of (fold(add, -0) over d of h_j with value
    z)) / C. -> [R]."""
    acc = P.const(-0.0, (x.shape[0],))
    for _, h in _multilabel_terms(x, t, tgt, lambda z: z):
        acc = P.add(acc, sum_dims(h, [1]))
    return P.div(acc, P.const(x.shape[1], acc.shape))


def multilabel_margin_backward(go, x, t, tgt, scale):
    """Counts (exact in binary32), h_j with value 1: plus = fold(add, +0) over j of h_j;
    minus = fold(add, +0) over j of onehot(t'_j, sum over d of h_j); dx = ((plus - minus)
    RN(scale)) go. (torch adds and subtracts g once per pair: the same value to rounding.)"""
    plus = minus = P.const(0.0, x.shape)
    for tj, h in _multilabel_terms(x, t, tgt, lambda z: P.const(1.0, z.shape)):
        plus = P.add(plus, h)
        minus = P.add(minus, P.onehot(tj, sum_dims(h, [1]), P.const(0.0, (x.shape[1],))))
    return P.mul(P.mul(P.sub(plus, minus), P.const(F32(scale), x.shape)), go)
