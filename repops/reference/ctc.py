"""CTC loss (docs/NUMERICS.md §8, "Transposed convolution and losses with classes"): torch's CPU
algorithm (aten/src/ATen/native/LossCTC.cpp) as kernels, vectorised over the batch and the
states s of the blank-extended target l' = (blank, l_0, blank, l_1, ..., blank), |l'| = L = 2S + 1:
one kernel per operation per time step (alpha forward, beta backward) and per state (the
gradient's per-class log-sums), never per element. Lengths are int64 kernel outputs and enter as
masks (select), so a sequence's length never steers Python; states past 2·target_length and
times past input_length are computed (from the padding) and never read.

Every log-sum is torch's: m = the largest term (left to right, `b > m` replaces m; m = 0 when it
is -inf), then log(Σ exp(term - m)) + m, the terms added left to right; exp and log are RepOps'
own (reference/math.py)."""
from __future__ import annotations

import numpy as np

from . import integers as I
from . import math as M
from . import prims as P
from .ordering import K, positions

F32 = np.float32
NEG_INF = F32(-np.inf)


def _i64(v):
    return I.const(v, "i64")


def _shift(x, by: int):
    """x [N, L] moved by `by` states along s (out[:, s] = x[:, s - by]), -inf where nothing
    lands: one place() copy (a CAT of a view and a constant)."""
    n, length = x.shape
    if abs(by) >= length:
        return P.const(NEG_INF, x.shape)
    piece = x[:, :length - by] if by > 0 else x[:, -by:]
    return P.place(x.shape, 1, [(max(by, 0), 1, piece)], NEG_INF)


def _logsum3(a1, a2, a3, lp):
    """torch's (t, s) step: m = a1; m = select(m < a2, a2, m); m = select(m < a3, a3, m);
    m = select(m = -inf, 0, m); ((exp(a1 - m) + exp(a2 - m)) + exp(a3 - m)), log, + m, + lp."""
    m = P.select(P.lt(a1, a2), a2, a1)
    m = P.select(P.lt(m, a3), a3, m)
    m = P.select(P.eq(m, NEG_INF), F32(0.0), m)
    e = P.add(P.add(M.exp(P.sub(a1, m)), M.exp(P.sub(a2, m))), M.exp(P.sub(a3, m)))
    return P.add(P.add(M.log(e), m), lp)


def _logplus(acc, v):
    """torch's lcab "log+=": acc = -inf takes v; else m = select(acc < v, v, acc),
    log(exp(acc - m) + exp(v - m)) + m."""
    m = P.select(P.lt(acc, v), v, acc)
    s = P.add(M.log(P.add(M.exp(P.sub(acc, m)), M.exp(P.sub(v, m)))), m)
    return P.select(P.eq(acc, NEG_INF), v, s)


class Layout:
    """The integer side of one call, all int64/bool kernel outputs: tp [N, L] the extended target
    (blank at even s; odd s = 2j + 1: target j of the row, blank past its length), the masks
    valid (s <= 2·tl), first (alpha's t = 0 states: s = 0, and s = 1 when tl > 0), end (beta's
    last states: s in {2·tl - 1, 2·tl}), skip_a (s >= 2 and l'[s-2] != l'[s]: alpha's third
    term), skip_b (s + 2 < L and l'[s+2] != l'[s]: beta's), and il, tl [N]."""

    def __init__(self, tgt, il, tl, blank: int, T: int):
        """tgt [N, S] int64: the targets padded (any value past a row's length), il, tl [N] int64."""
        n, S = tgt.shape
        L = 2 * S + 1
        self.il, self.tl, self.T, self.L, self.blank = il, tl, T, L, blank
        b = _i64(blank)
        if S:
            held = K["lt.i64"](positions(S)[None, :], tl[:, None])
            tgt = K["select.i64"](held, tgt, b)
            self.tp = P.place((n, L), 1, [(1, 2, tgt)], np.int64(blank), K["copy.i64"])
        else:
            self.tp = K["copy.i64"](I.const(blank, "i64", (n, 1)))
        s = positions(L)[None, :]
        two_tl = K["add.i64"](tl, tl)[:, None]
        self.s = s
        self.valid = K["le.i64"](s, two_tl)
        self.first = K["or.bool"](K["eq.i64"](s, _i64(0)),
                                  K["and.bool"](K["eq.i64"](s, _i64(1)), K["lt.i64"](_i64(0), tl)[:, None]))
        self.end = K["and.bool"](K["le.i64"](K["sub.i64"](two_tl, _i64(1)), s), self.valid)
        tp = self.tp
        if L > 2:
            before = P.place((n, L), 1, [(2, 1, tp[:, :L - 2])], np.int64(blank), K["copy.i64"])
            after = P.place((n, L), 1, [(0, 1, tp[:, 2:])], np.int64(blank), K["copy.i64"])
            differs_a, differs_b = K["not.bool"](K["eq.i64"](tp, before)), K["not.bool"](K["eq.i64"](tp, after))
            self.skip_a = K["and.bool"](K["le.i64"](_i64(2), s), differs_a)
            self.skip_b = K["and.bool"](K["lt.i64"](K["add.i64"](s, _i64(2)), _i64(L)), differs_b)
        else:
            self.skip_a = self.skip_b = K["copy.bool"](I.const(False, "bool", (n, L)))

    def picked(self, lp):
        """lp [T, N, C] (row-major) -> lpe [T, N, L]: lpe[t, b, s] = lp[t, b, l'_b[s]], one gather."""
        T, n, C = lp.shape
        index = K["copy.i64"](P.xp_of(self.tp).broadcast_to(self.tp[None], (T, n, self.L))).reshape(T * n, self.L)
        return P.gather(lp.reshape(T * n, C, 1), index, P.const(NEG_INF, ())).reshape(T, n, self.L)


def alpha(lpe, lay: Layout):
    """log_alpha [N, T, L]: t = 0: select(first, lpe[0], -inf); t >= 1: _logsum3(a[t-1][s],
    a[t-1][s-1], select(skip_a, a[t-1][s-2], -inf), lpe[t]) (-inf for a state before 0). The
    rows are stacked by one place() copy."""
    T, n, L = lpe.shape
    rows = [P.select(lay.first, lpe[0], NEG_INF)]
    for t in range(1, T):
        prev = rows[-1]
        rows.append(_logsum3(prev, _shift(prev, 1), P.select(lay.skip_a, _shift(prev, 2), NEG_INF), lpe[t]))
    return P.place((n, T, L), 1, [(t, 1, r[:, None, :]) for t, r in enumerate(rows)], NEG_INF)


def neg_log_likelihood(log_alpha, lay: Layout):
    """l1 = log_alpha[il - 1, 2·tl], l2 = log_alpha[il - 1, 2·tl - 1] (one gather; il = 0 reads
    the fill -inf); tl = 0: -l1; else -(log(exp(l1 - m) + exp(l2 - m)) + m), m = select(l1 < l2,
    l2, l1), 0 where -inf."""
    n, T, L = log_alpha.shape
    il, tl = lay.il, lay.tl
    base = K["add.i64"](K["mul.i64"](K["sub.i64"](il, _i64(1)), _i64(L)), K["add.i64"](tl, tl))
    index = K["sub.i64"](base[:, None], positions(2)[None, :])
    ends = P.gather(log_alpha.reshape(n, T * L, 1), index, P.const(NEG_INF, ())).reshape(n, 2)
    l1, l2 = ends[:, 0], ends[:, 1]
    m = P.select(P.lt(l1, l2), l2, l1)
    m = P.select(P.eq(m, NEG_INF), F32(0.0), m)
    ll = P.add(M.log(P.add(M.exp(P.sub(l1, m)), M.exp(P.sub(l2, m)))), m)
    return P.neg(P.select(K["lt.i64"](_i64(0), tl), ll, l1))


def gradient(lp, lpe, log_alpha, nll, grad_out, lay: Layout, zero_infinity: bool):
    """d loss / d log_probs [T, N, C], torch's CPU formula:
    beta, t from T-1 down: t = il - 1: select(end, lpe[t], -inf); t < il - 1: select(valid,
    _logsum3(b[t+1][s], b[t+1][s+1], select(skip_b, b[t+1][s+2], -inf), lpe[t]), -inf); -inf after.
    lcab[b, c, t] from -inf, for s from L-1 down to 0: where active (t < il - 1 and s valid, or
    t = il - 1 and s an end state) and c = l'[s]: _logplus(lcab, alpha[t, s] + beta[t, s]).
    grad = (exp(lp) - exp((lcab + nll) - lp))·grad_out for t < il, +0 after; zero_infinity:
    +0 for a sequence whose nll = +inf."""
    T, n, C = lp.shape
    L = lay.L
    xp = P.xp_of(lp)
    tpos = positions(T)
    last = K["sub.i64"](lay.il, _i64(1))
    is_last = K["eq.i64"](tpos[:, None], last[None, :])       # [T, N]
    before = K["lt.i64"](tpos[:, None], last[None, :])        # [T, N]
    rows = [None] * T
    nxt = None
    for t in range(T - 1, -1, -1):
        init = P.select(lay.end, lpe[t], NEG_INF)
        if nxt is None:
            rec = P.const(NEG_INF, (n, L))
        else:
            third = P.select(lay.skip_b, _shift(nxt, -2), NEG_INF)
            rec = P.select(lay.valid, _logsum3(nxt, _shift(nxt, -1), third, lpe[t]), NEG_INF)
        nxt = P.select(is_last[t][:, None], init, P.select(before[t][:, None], rec, NEG_INF))
        rows[t] = nxt
    log_beta = P.place((n, T, L), 1, [(t, 1, r[:, None, :]) for t, r in enumerate(rows)], NEG_INF)
    ab = P.add(log_alpha, log_beta)                              # [N, T, L]
    active = K["or.bool"](K["and.bool"](before.T[:, :, None], lay.valid[:, None, :]),
                          K["and.bool"](is_last.T[:, :, None], lay.end[:, None, :]))   # [N, T, L]
    classes = positions(C)
    acc = P.const(NEG_INF, (n, C, T))
    for s in range(L - 1, -1, -1):
        cls = lay.tp[:, s:s + 1]                                 # [N, 1]
        cur = P.gather(acc, cls, P.const(NEG_INF, ()))            # [N, 1, T]
        new = _logplus(cur, ab[:, None, :, s])
        hit = K["and.bool"](K["eq.i64"](classes[None, :, None], cls[:, :, None]), active[:, None, :, s])
        acc = P.select(hit, xp.broadcast_to(new, (n, C, T)), acc)
    lpt = P.copy(xp.moveaxis(lp, 0, -1))                         # [N, C, T]
    r = P.mul(P.sub(M.exp(lpt), M.exp(P.sub(P.add(acc, nll[:, None, None]), lpt))), grad_out[:, None, None])
    r = P.select(K["lt.i64"](tpos[None, None, :], lay.il[:, None, None]), r, F32(0.0))
    if zero_infinity:
        r = P.select(P.eq(nll, F32(np.inf))[:, None, None], F32(0.0), r)
    return P.copy(xp.moveaxis(r, -1, 0))                         # [T, N, C]
