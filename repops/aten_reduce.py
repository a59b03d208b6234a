"""Reductions into targets chosen by an index (scatter_reduce, index_reduce), products, and
in-place view ops. A reduction into targets is a fold along the sources in increasing position
from a stated start, one fold for every target at once: the terms are select(idx[p] == t,
src[p], identity), so a source that does not name a target leaves its accumulator as it is
(x + -0 = x, x * 1 = x, max(x, -inf) = x: bit for bit), and the order is torch's CPU loop's
(sequential in source position). docs/NUMERICS.md §8, "Folds and reductions"."""
from __future__ import annotations

import numpy as np
import torch

from .aten import EXACT, _indices, _inplace, _result, _result_dtype, _scalar_as_vector, arr, np_, register, tt
from .aten_sort import check_block, placed_back, within
from .errors import UnsupportedOpError
from .reference import ordering as O
from .reference import prims as P
from .reference.fold import _dims, fold, fold_dims, sum_dims

aten = torch.ops.aten

# -- in-place view ops: a change of self's metadata (sizes, strides), exact as torch ------------------
# (swapdims_ / swapaxes_ are torch composites of transpose_)
EXACT.update({aten.squeeze_.default, aten.squeeze_.dim, aten.squeeze_.dims, aten.unsqueeze_.default,
              aten.transpose_.default, aten.t_.default, aten.as_strided_.default})


# -- scatter_reduce, index_reduce ---------------------------------------------------------------------
# reduce -> (prim, identity: prim(acc, identity) == acc bit for bit, torch's start where include_self=False)
_REDUCE = {"sum": (P.add, -0.0, 0.0), "mean": (P.add, -0.0, 0.0), "prod": (P.mul, 1.0, 1.0),
           "amax": (P.max_, -np.inf, -np.inf), "amin": (P.min_, np.inf, np.inf)}
MAX_TERMS = 1 << 24  # targets x sources per row beyond this: refused (the terms are materialised)


def scatter_fold(xm, im, sm, reduce: str, include_self: bool, op: str):
    """xm [R, n] f32 (each row's targets), im [R, m] int64 in [0, n), sm [R, m] f32 -> [R, n]:
    target t of row r = fold(prim) over the sources p with im[r, p] == t in increasing p, from
    xm[r, t] (include_self) or torch's start value (else; a target no source names keeps
    xm[r, t]). mean: that sum / max(count, 1), count the sources (+ 1 with self), exact in binary32."""
    prim, identity, start = _REDUCE[reduce]
    (R, n), m = xm.shape, im.shape[-1]
    if n * m > MAX_TERMS:
        raise UnsupportedOpError(f"aten.{op} of {m} sources into {n} targets a row: RepOps folds every "
                                 f"(target, source) pair (n*m terms); it is defined up to {MAX_TERMS} a row")
    match = O.K["eq.i64"](im[:, None, :], O.positions(n)[:, None])              # [R, n, m]: source p names t
    terms = P.select(match, np.broadcast_to(sm[:, None, :], match.shape), P.const(identity, ()))
    count = sum_dims(P.select(match, P.const(1.0, ()), P.const(0.0, ())), [-1])  # [R, n], exact
    if include_self:
        acc = fold(prim, P.place((R, n, m + 1), 2, [(0, 1, xm[..., None]), (1, 1, terms)]), -1, identity)
        count = P.add(count, P.const(1.0, ()))
    else:
        acc = P.select(P.lt(P.const(0.0, ()), count), fold(prim, terms, -1, start), xm)
    if reduce == "mean":
        acc = P.div(acc, P.max_(count, P.const(1.0, ())))
    return acc


def _rows(x, d):
    """x with dim d last as a [rows, n] kernel output (a copy: moving d is not a view otherwise)."""
    moved = np.moveaxis(x, d, -1)
    return P.copy(moved).reshape(int(np.prod(moved.shape[:-1])), moved.shape[-1]), moved.shape


def _check_reduce(op, reduce, allowed):
    if reduce not in allowed:
        raise UnsupportedOpError(f"aten.{op} with reduce={reduce!r}: torch defines {', '.join(allowed)}")


@_scalar_as_vector()
def _scatter_reduce(a, dim, index, src, reduce, include_self=True, op="scatter_reduce"):
    """x.scatter_reduce(dim, idx, src, reduce, include_self): src[p] reduced into x at p with its
    dim coordinate replaced by idx[p] (scatter_fold; an index smaller than x reduces into the
    block of x it covers, placed back into x)."""
    _check_reduce(op, reduce, ("sum", "prod", "mean", "amax", "amin"))
    x = np_(a, op)
    d = dim % x.ndim
    check_block("aten." + op, x.shape, index, tuple(src.shape), d)
    i = _indices(index, x.shape[d], op)
    if index.numel() == 0 or x.size == 0:
        return P.copy(x)
    xm, shape = _rows(within(x, index.shape, d), d)
    im = np.moveaxis(i, d, -1)
    im = O.K["copy.i64"](im).reshape(xm.shape[0], -1) if P.xp_of(im) is np else im.reshape(xm.shape[0], -1)
    sm, _ = _rows(np_(src, op)[tuple(slice(0, k) for k in index.shape)], d)
    out = scatter_fold(xm, im, sm, reduce, include_self, op).reshape(shape)
    return placed_back(np.moveaxis(out, -1, d), x)


register(aten.scatter_reduce.two)(
    lambda a, dim, index, src, reduce, *, include_self=True: _result(_scatter_reduce(a, dim, index, src, reduce,
                                                                                      include_self)))
register(aten.scatter_reduce_.two)(
    lambda a, dim, index, src, reduce, *, include_self=True: _inplace(a, _scatter_reduce(
        a, dim, index, src, reduce, include_self, op="scatter_reduce_")))


@_scalar_as_vector()
def _index_reduce(a, dim, index, source, reduce, include_self=True, op="index_reduce"):
    """x.index_reduce(dim, idx, source, reduce, include_self): source's slice i reduced into x's
    slice idx[i] along dim, i in increasing order (scatter_fold with idx the same in every row)."""
    _check_reduce(op, reduce, ("prod", "mean", "amax", "amin"))
    x = np_(a, op)
    d = dim % x.ndim
    if index.dim() > 1:
        raise IndexError(f"{op}: the index must be a vector, got shape {tuple(index.shape)} (torch refuses it too)")
    s = np_(source, op)
    s = s.reshape(1) if s.ndim == 0 else s
    if s.shape != x.shape[:d] + (index.numel(),) + x.shape[d + 1:]:
        raise IndexError(f"{op}: a source of shape {tuple(s.shape)} does not fit {tuple(x.shape)} with "
                         f"{index.numel()} indices along dim {d} (torch refuses it too)")
    i = _indices(index, x.shape[d], op).reshape(-1)
    if i.size == 0 or x.size == 0:
        return P.copy(x)
    xm, shape = _rows(x, d)
    sm, _ = _rows(s, d)
    out = scatter_fold(xm, np.broadcast_to(i.reshape(1, -1), sm.shape), sm, reduce, include_self, op)
    return np.moveaxis(out.reshape(shape), -1, d)


register(aten.index_reduce.default)(
    lambda a, dim, index, source, reduce, *, include_self=True: _result(_index_reduce(a, dim, index, source, reduce,
                                                                                     include_self)))
register(aten.index_reduce_.default)(
    lambda a, dim, index, source, reduce, *, include_self=True: _inplace(a, _index_reduce(
        a, dim, index, source, reduce, include_self, op="index_reduce_")))
