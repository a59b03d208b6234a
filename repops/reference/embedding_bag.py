"""EmbeddingBag (aten._embedding_bag, its dense and per-sample-weight gradients) as the
gather, onehot and matmul kernels (docs/NUMERICS.md §8, "Transposed convolution and losses
with classes"): a bag's sum is embedding backward's rule run forward, onehot(bag)ᵀ @ rows,
so each bag sums its rows in position order from +0 (torch's order); max mode is torch's
loop, position after position. The bag of each position is host integer arithmetic on the
offsets by the integer kernels, so every operand is a kernel output, a view or a constant."""
from __future__ import annotations

import numpy as np

from . import integers as I
from . import ordering as O
from . import prims as P
from .fold import sum_dims
from .nn import embedding_backward
from .ordering import K

SUM, MEAN, MAX = 0, 1, 2


def bag_of(offsets, positions: int, include_last_offset: bool):
    """-> (offset2bag [L] int64, B): position p is in bag b when offsets[b] <= p < offsets[b + 1]
    (the last bag runs to the end; with include_last_offset the last offset closes it and
    later positions are in no bag: B). Kernels: bag[p] = the count of later offsets <= p,
    fold(add) over them of select(le.i64(offsets[b], p), 1, +0) (exact), to_int32_rne, to_i64;
    p = ordering.positions(L)."""
    bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    starts = offsets[1:]
    if positions == 0 or starts.shape[0] == 0:  # every position in bag 0, where the offsets live
        xp = P.xp_of(offsets)
        zeros = I.const(0, "i64", (positions,)) if positions and xp is np else xp.zeros(positions, np.int64)
        return K["copy.i64"](zeros), bags
    le = K["le.i64"](starts.reshape(-1, 1), O.positions(positions).reshape(1, -1))
    one = P.const(1.0, le.shape)
    return O.to_index(sum_dims(P.select(le, one, P.const(0.0, le.shape)), [0])), bags


def kept(bag, indices, padding_idx: int, bags: int):
    """The bag of each position, -1 where its index is padding_idx or it is in no bag:
    select.i64(or(eq.i64(i, padding_idx), le.i64(B, bag)), -1, bag)."""
    drop = K["or.bool"](K["eq.i64"](indices, I.const(padding_idx, "i64")), K["le.i64"](I.const(bags, "i64"), bag))
    return K["select.i64"](drop, I.const(-1, "i64"), bag)


def _not_kept(bag):
    return K["lt.i64"](bag, I.const(0, "i64"))


def _rows(weight, indices):
    """weight[indices[p]] -> [L, D] (the embedding gather; +0 where the index is -1)."""
    return P.gather(weight.reshape(1, *weight.shape), indices.reshape(1, -1), P.const(0.0, ())).reshape(
        indices.shape[0], weight.shape[1])


def _weighted(rows, psw, finite):
    """rows[p] times per_sample_weights[p], then finite(product): finite factors can overflow,
    and the one-hot sum would spread that inf's NaN into the bags or rows it does not belong to."""
    out = P.mul(rows, psw.reshape(-1, 1))
    finite(out)
    return out


def _inverse_counts(bag, bags: int):
    """[B, 1]: div(1, max(count_b, 1)), mean mode's factor (an empty bag: 1)."""
    return P.div(P.const(1.0, (bags, 1)), P.max_(counts(bag, bags), P.const(1.0, (bags, 1))))


def bag_size(bag, bags: int):
    """[B] int64: counts, to_int32_rne, to_i64."""
    return O.to_index(counts(bag, bags).reshape(-1))


def counts(bag, bags: int):
    """[B, 1] float: the kept positions of each bag (exact below 2^24), onehot(bag)ᵀ @ 1."""
    return embedding_backward(bag, P.const(1.0, (bag.shape[0], 1)), bags)


def embedding_bag(weight, indices, bag, bags: int, mode: int, psw, finite):
    """-> (out [B, D], max_indices [B, D] int64 or None). sum: out[b] = fold(fma, +0) over
    positions p in increasing order of [bag_p = b] rows[p] (rows = weight[indices[p]], times
    per_sample_weights[p] first when given); mean: that times div(1, max(count_b, 1)) (an empty
    bag is +0); max: torch's loop, p after p: a kept position replaces the bag's value where
    the bag has none yet or the row's element is greater (lt; NaN never replaces), the
    index with it; an empty bag is +0 with index 0. finite: the check of a weighted product."""
    rows = _rows(weight, indices)
    if mode != MAX:
        if psw is not None:
            rows = _weighted(rows, psw, finite)
        out = embedding_backward(bag, rows, bags)
        if mode == MEAN:
            out = P.mul(out, _inverse_counts(bag, bags))
        return out, None
    shape = (bags, weight.shape[1])
    hot = P.onehot(bag, P.const(1.0, bag.shape), P.const(0.0, (bags,)))  # [L, B]
    member = P.eq(hot, P.const(1.0, hot.shape))  # (one compare for every position)
    one, zero = P.const(1.0, shape), P.const(0.0, shape)
    acc, have = zero, zero
    arg = I.const(0, "i64", shape)
    for p in range(indices.shape[0]):
        inbag = member[p].reshape(bags, 1)
        v = P.xp_of(rows).broadcast_to(rows[p], shape)
        first_or_more = P.select(P.eq(have, zero), one, P.select(P.lt(acc, v), one, zero))
        take = P.eq(P.select(inbag, first_or_more, zero), one)
        acc = P.select(take, v, acc)
        have = P.select(inbag, one, have)
        word = P.xp_of(indices).broadcast_to(indices[p], shape)
        arg = K["select.i64"](take, word, arg)
    return acc, (arg if indices.shape[0] else K["copy.i64"](arg))  # (no position: the constant, copied)


def embedding_bag_backward(grad, indices, bag, bags: int, num_weights: int, mode: int, psw, max_indices, finite):
    """dweight [V, D]. sum/mean: term[p] = grad[bag_p] times per_sample_weights[p] (sum) or
    div(1, count) (mean), then embedding backward (onto each row, positions in increasing
    order, from +0); kept positions only. max: per column d, embedding backward of grad[:, d]
    at max_indices[:, d] (bags with no kept position give nothing). finite: the check of a
    weighted product."""
    if mode != MAX:
        term = _rows(grad, bag)
        if mode == MEAN:
            term = P.mul(term, _rows(_inverse_counts(bag, bags), bag))
        elif psw is not None:
            term = _weighted(term, psw, finite)
        target = K["select.i64"](_not_kept(bag), I.const(-1, "i64"), indices)
        return embedding_backward(target, term, num_weights)
    empty = P.eq(counts(bag, bags), P.const(0.0, (bags, 1)))
    cols = []
    for d in range(grad.shape[1]):
        at = K["select.i64"](empty.reshape(-1), I.const(-1, "i64"), max_indices[:, d])
        cols.append((d, 1, embedding_backward(at, grad[:, d:d + 1], num_weights)))
    return P.place((num_weights, grad.shape[1]), 1, cols)


def per_sample_weights_backward(grad, weight, indices, bag):
    """d per_sample_weights[p] = fold(add, -0) over d of grad[bag_p, d] weight[indices[p], d];
    +0 where the position is not kept."""
    dot = sum_dims(P.mul(_rows(grad, bag), _rows(weight, indices)), [1])
    return P.select(_not_kept(bag), P.const(0.0, dot.shape), dot)
