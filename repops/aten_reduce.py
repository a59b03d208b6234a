"""Reductions into targets chosen by an index (scatter_reduce, index_reduce), products, and
in-place view ops. A reduction into targets is a fold along the sources in increasing position
from a stated start, one fold for every target at once: the terms are select(idx[p] == t,
src[p], identity), so a source that does not name a target leaves its accumulator as it is
(x + -0 = x, x * 1 = x, max(x, -inf) = x: bit for bit), and the order is torch's CPU loop's
(sequential in source position). docs/NUMERICS.md §8, "Folds and reductions"."""
from __future__ import annotations

import numpy as np
import torch

from .aten import EMPTY, EXACT, _indices, _inplace, _result, _result_dtype, _scalar_as_vector, np_, register, tt
from .aten_sort import check_block, placed_back, within
from .errors import UnsupportedOpError
from .reference import linalg as RL
from .reference import ordering as O
from .reference import prims as P
from .reference.activations import log1p
from .reference.fold import fold, fold_dims, sum_dims
from .reference.math import exp

aten = torch.ops.aten

# -- in-place view ops: a change of self's metadata (sizes, strides), exact as torch ------------------
# (swapdims_ / swapaxes_ are torch composites of transpose_)
EXACT.update({aten.squeeze_.default, aten.squeeze_.dim, aten.squeeze_.dims, aten.unsqueeze_.default,
              aten.transpose_.default, aten.t_.default, aten.as_strided_.default})


# -- scatter_reduce, index_reduce ---------------------------------------------------------------------
# reduce -> (prim, identity: prim(acc, identity) == acc bit for bit, torch's start where include_self=False)
_REDUCE = {"sum": (P.add, -0.0, 0.0), "mean": (P.add, -0.0, 0.0), "prod": (P.mul, 1.0, 1.0),
           "amax": (P.max_, -np.inf, -np.inf), "amin": (P.min_, np.inf, np.inf)}
MAX_TERMS = 1 << 26  # rows x targets x sources beyond this: refused (every term is materialised)


def scatter_fold(xm, im, sm, reduce: str, include_self: bool, op: str):
    """xm [R, n] f32 (each row's targets), im [R, m] int64 in [0, n), sm [R, m] f32 -> [R, n]:
    target t of row r = fold(prim) over the sources p with im[r, p] == t in increasing p, from
    xm[r, t] (include_self) or torch's start value (else; a target no source names keeps
    xm[r, t]). mean: that sum / max(count, 1), count the sources (+ 1 with self), exact in binary32."""
    prim, identity, start = _REDUCE[reduce]
    (R, n), m = xm.shape, im.shape[-1]
    if R * n * m > MAX_TERMS:
        raise UnsupportedOpError(f"aten.{op} of {m} sources into {n} targets in each of {R} rows: RepOps folds "
                                 f"every (row, target, source) term; it is defined up to {MAX_TERMS} terms (split "
                                 "the tensor, or reduce fewer sources at a time)")
    match = O.K["eq.i64"](im[:, None, :], O.positions(n)[:, None])              # [R, n, m]: source p names t
    terms = P.select(match, np.broadcast_to(sm[:, None, :], match.shape), P.const(identity, ()))
    if include_self:
        acc = fold(prim, P.place((R, n, m + 1), 2, [(0, 1, xm[..., None]), (1, 1, terms)]), -1, identity)
        if reduce != "mean":
            return acc
    count = sum_dims(P.select(match, P.const(1.0, ()), P.const(0.0, ())), [-1])  # [R, n], exact
    if include_self:
        count = P.add(count, P.const(1.0, ()))
    else:
        acc = P.select(P.lt(P.const(0.0, ()), count), fold(prim, terms, -1, start), xm)
    return P.div(acc, P.max_(count, P.const(1.0, ()))) if reduce == "mean" else acc


def _rows(x, d):
    """x with dim d last as [rows, n] (a copy kernel where moving d is not a view otherwise)."""
    moved = np.moveaxis(x, d, -1)
    flat = moved if moved.flags.c_contiguous else P.copy(moved)
    return flat.reshape(int(np.prod(moved.shape[:-1])), moved.shape[-1]), moved.shape


def _check_reduce(op, reduce, allowed):
    if reduce not in allowed:
        raise UnsupportedOpError(f"aten.{op} with reduce={reduce!r}: torch defines {', '.join(allowed)}")


@_scalar_as_vector()
def scatter_reduce(a, dim, index, src, reduce, include_self=True, op="scatter_reduce"):
    """x.scatter_reduce(dim, idx, src, reduce, include_self): src[p] reduced into x at p with its
    dim coordinate replaced by idx[p] (scatter_fold; an index smaller than x reduces into the
    block of x it covers, placed back into x). An empty index changes nothing (torch checks no
    shape then)."""
    _check_reduce(op, reduce, ("sum", "prod", "mean", "amax", "amin"))
    x = np_(a, op)
    if index.numel() == 0 or x.size == 0:
        return P.copy(x)
    d = dim % x.ndim
    check_block("aten." + op, x.shape, index, tuple(src.shape), d)
    i = _indices(index, x.shape[d], op)
    xm, shape = _rows(within(x, index.shape, d), d)
    im = np.moveaxis(i, d, -1)
    if not im.flags.c_contiguous and P.xp_of(im) is np:  # (as _scatter: a reshape that copies names nothing)
        im = O.K["copy.i64"](im)
    im = im.reshape(xm.shape[0], -1)
    sm, _ = _rows(np_(src, op)[tuple(slice(0, k) for k in index.shape)], d)
    out = scatter_fold(xm, im, sm, reduce, include_self, op).reshape(shape)
    return placed_back(np.moveaxis(out, -1, d), x)


def _register_reduce(fn, name, out_op, inplace_op):
    """fn(a, dim, index, src, reduce, include_self, op) as the op and its in-place form."""
    register(out_op)(lambda a, dim, index, src, reduce, *, include_self=True: _result(
        fn(a, dim, index, src, reduce, include_self, op=name)))
    register(inplace_op)(lambda a, dim, index, src, reduce, *, include_self=True: _inplace(a, fn(
        a, dim, index, src, reduce, include_self, op=name + "_")))


_register_reduce(scatter_reduce, "scatter_reduce", aten.scatter_reduce.two, aten.scatter_reduce_.two)


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


_register_reduce(_index_reduce, "index_reduce", aten.index_reduce.default, aten.index_reduce_.default)


# -- products ---------------------------------------------------------------------------------------------
def _prod(a, dims=None, keepdim=False, dtype=None):
    """prod over dims: fold(mul) from 1 over their elements in row-major order (torch's own CPU
    order is its vectorised reduction's: the same to rounding)."""
    _result_dtype("prod", dtype)
    return tt(fold_dims(P.mul, np_(a, "prod"), dims, 1.0, keepdim))


register(aten.prod.default)(lambda a, *, dtype=None: _prod(a, None, False, dtype))
register(aten.prod.dim_int)(lambda a, dim, keepdim=False, *, dtype=None: _prod(a, [dim], keepdim, dtype))


@register(aten.scatter_add.default)
def scatter_add(a, dim, index, src):
    """x.scatter_add(dim, idx, src) (gather's backward) = scatter_reduce(sum, include_self):
    src[p] added into x at p with its dim coordinate replaced by idx[p], onto each target in
    increasing p from x (torch's CPU loop). An empty index adds nothing."""
    return _result(scatter_reduce(a, dim, index, src, "sum", True, op="scatter_add"))


register(aten.scatter_add_.default)(
    lambda a, dim, index, src: _inplace(a, scatter_reduce(a, dim, index, src, "sum", True, op="scatter_add_")))


@register(aten.addbmm.default)
def addbmm(bias, b1, b2, *, beta=1, alpha=1):
    """beta bias + alpha sum_b b1[b] @ b2[b], torch's CPU loop: acc = addmm(bias, b1[0], b2[0],
    beta, alpha), then acc = addmm(acc, b1[b], b2[b], 1, alpha) for b = 1, 2, ... (addmm: the
    product times alpha, plus the bias (times beta); beta = 0 ignores the bias, NaN included)."""
    op = "addbmm"
    x, y = np_(b1, op), np_(b2, op)
    if x.ndim != 3 or y.ndim != 3 or x.shape[0] != y.shape[0] or x.shape[2] != y.shape[1]:
        raise ValueError(f"addbmm: batches {list(x.shape)} and {list(y.shape)} do not chain (torch refuses it too)")
    shape = (x.shape[1], y.shape[2])
    acc = None if beta == 0 else np.broadcast_to(np_(bias, op), shape)
    if acc is not None and beta != 1:
        acc = P.mul(acc, np.float32(beta))
    for b in range(x.shape[0]):
        mm = RL.matmul(x[b], y[b])
        mm = mm if alpha == 1 else P.mul(mm, np.float32(alpha))
        acc = mm if acc is None else P.add(mm, acc)
    return _result(P.const(0.0, shape) if acc is None else acc)


@register(aten.logcumsumexp.default)
def logcumsumexp(a, dim):
    """y_i = lae(x_i, y_{i-1}) from y_{-1} = -inf, one step a position in increasing order
    (torch's CPU loop, which keeps y in binary64: the same to rounding): lae(x, y) = x where
    min(x, y) = max(x, y) is infinite, else log1p(exp(min - max)) + max (NaN wins in min/max)."""
    x = np_(a, "logcumsumexp")
    x = x if x.ndim else x.reshape(1)
    d = dim % x.ndim
    at = lambda i: x[(slice(None),) * d + (slice(i, i + 1),)]  # noqa: E731
    acc, steps = P.const(-np.inf, at(0).shape) if x.shape[d] else None, []
    for i in range(x.shape[d]):
        xi = at(i)
        lo, hi = P.min_(xi, acc), P.max_(xi, acc)
        both_inf = O.K["and.bool"](P.eq(lo, hi), O.K["not.bool"](P.eq(P.sub(lo, lo), P.const(0.0, ()))))
        acc = P.select(both_inf, xi, P.add(log1p(exp(P.sub(lo, hi))), hi))
        steps.append(acc)
    out = P.place(x.shape, d, [(i, 1, s) for i, s in enumerate(steps)]) if steps else P.copy(x)
    return tt(out.reshape(a.shape))


# -- comparisons of whole tensors (Python bools) ---------------------------------------------------------------
@register(aten.equal.default)
def equal(a, b):
    """torch.equal: the same shape and every element IEEE-equal (NaN is not; -0 == +0)."""
    x, y = np_(a, "equal"), np_(b, "equal")
    return x.shape == y.shape and bool(P.eq(x, y).all())


@register(aten.allclose.default)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """torch.isclose's float32 formula, then all: a == b (or both NaN, with equal_nan), or
    |a - b| finite and <= atol + |rtol b| (rtol, atol rounded to binary32 once)."""
    x, y = np_(a, "allclose"), np_(b, "allclose")
    close = P.eq(x, y)
    if equal_nan:
        close = O.K["or.bool"](close, O.K["and.bool"](O.is_nan(x), O.is_nan(y)))
    err = P.abs_(P.sub(x, y))
    near = O.K["and.bool"](P.eq(P.sub(err, err), P.const(0.0, ())),
                           P.le(err, P.add(np.float32(atol), P.abs_(P.mul(y, np.float32(rtol))))))
    return bool(O.K["or.bool"](close, near).all())


# -- allocation -----------------------------------------------------------------------------------------------
EXACT.add(aten.empty_permuted.default)
EMPTY.add(aten.empty_permuted.default)  # (+0, as every creation without values)


@register(aten.resize_as_.default)
def resize_as_(a, template, *, memory_format=None):
    """Metadata only, as torch, while the template fits self's memory; growing it would hand
    out uninitialised memory (different on every run): refused."""
    need = template.numel() * a.element_size()
    if need > a.untyped_storage().nbytes() - a.storage_offset() * a.element_size():
        raise UnsupportedOpError(f"aten.resize_as_ of a {list(a.shape)} tensor to {list(template.shape)}: it grows "
                                 "the tensor, whose new elements would be uninitialised memory; make a new tensor "
                                 "(torch.zeros) instead")
    return a.resize_as_(template, memory_format=memory_format)
