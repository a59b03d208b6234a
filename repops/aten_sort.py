"""aten's order statistics and order-resolved writes on float tensors: max/min (with index),
argmax/argmin, amax/amin, sort/argsort, topk, scatter (src, value), isnan/isinf/isfinite (x[idx]
= v: aten_index.py), by repops/reference/ordering.py (its rules: first index on ties, stable
sort, NaN greatest, the last write wins). Integer results are int64 kernel outputs.
docs/NUMERICS.md §8, "Ordering"."""
from __future__ import annotations

import numpy as np
import torch

from .aten import _indices, _inplace, _result, _scalar_as_vector, np_, register, tensor, tt
from .reference import ordering as O
from .reference import prims as P
from .reference.fold import fold_dims

aten = torch.ops.aten


def _ints(a) -> torch.Tensor:
    """An integer kernel output (int64, int32; or a view of one) as a result: a strided view by
    its dtype's copy kernel."""
    if P.xp_of(a) is not np:
        return tensor(a.copy() if not a.flags.c_contiguous else a)
    a = np.asarray(a)  # (ascontiguousarray would make a 0-d array 1-d)
    return torch.from_numpy(a if a.flags.c_contiguous and a.flags.writeable
                            else O.K["copy." + O.I.dtype_name(a)](a))


def _last(x, dim: int, op: str):
    """x with `dim` moved last (a 0-dim x as one element), its dim, and the size there."""
    if x.ndim == 0:
        x = x.reshape(1)
    d = dim % x.ndim
    if x.shape[d] == 0:
        raise IndexError(f"{op}: the reduced dim {dim} has no elements (torch refuses it too)")
    return np.moveaxis(x, d, -1), d


def _with_index(x0, dim, keepdim, largest, op):
    """(value, int64 index) of the max (min) along dim: first position on ties, NaN wins."""
    x, d = _last(x0, dim, op)
    if x.size == 0:  # no rows (the reduced dim is not empty: _last): empty results
        v, i = P.copy(x[..., 0]), O.K["copy.i64"](O.I.const(0, "i64", x.shape[:-1]))
    else:
        v, i = O.extreme(x, largest)
    if keepdim and x0.ndim:
        return np.expand_dims(v, d), np.expand_dims(i, d)
    shape = tuple(s for k, s in enumerate(x0.shape) if k != d)
    return v.reshape(shape), i.reshape(shape)


def _max_min_dim(largest, op):
    def impl(a, dim, keepdim=False):
        v, i = _with_index(np_(a, op), dim, keepdim, largest, op)
        return _result(v), _ints(i)
    return impl


register(aten.max.dim)(_max_min_dim(True, "max"))
register(aten.min.dim)(_max_min_dim(False, "min"))


def _arg(largest, op):
    def impl(a, dim=None, keepdim=False):
        x = np_(a, op)
        if dim is not None:
            return _ints(_with_index(x, dim, keepdim, largest, op)[1])
        flat = (x if x.flags.c_contiguous else P.copy(x)).reshape(-1)  # torch: the flattened tensor
        i = _with_index(flat, 0, False, largest, op)[1]
        return _ints(i.reshape([1] * x.ndim) if keepdim else i)
    return impl


register(aten.argmax.default)(_arg(True, "argmax"))
register(aten.argmin.default)(_arg(False, "argmin"))


def _extreme_dims(largest, op):
    """amax/amin (and max()/min() of everything): fold(max) from -inf over the dims in
    row-major order (NaN wins); the min as neg(fold(max)(neg x)) (ordering.fold_min)."""
    def impl(a, dims=(), keepdim=False):
        x = np_(a, op)
        if x.ndim == 0:  # (any dim of a 0-dim tensor is itself)
            return tt(P.copy(x))
        if x.size == 0 and (not dims or any(x.shape[d] == 0 for d in ([dims] if isinstance(dims, int) else dims))):
            raise IndexError(f"{op}: a reduction over no elements has no {'maximum' if largest else 'minimum'} "
                             "(torch refuses it too)")
        dims = list(dims) or None
        if x.size == 0:  # no rows: an empty result of the reduced shape
            shape = [1 if d in {k % x.ndim for k in dims} else n for d, n in enumerate(x.shape)] if keepdim else \
                [n for d, n in enumerate(x.shape) if d not in {k % x.ndim for k in dims}]
            return tt(P.copy(x.reshape(shape)))
        return tt(fold_dims(P.max_, x, dims, -np.inf, keepdim) if largest else O.fold_min(x, dims, keepdim))
    return impl


register(aten.amax.default)(_extreme_dims(True, "amax"))
register(aten.amin.default)(_extreme_dims(False, "amin"))
register(aten.max.default)(lambda a: _extreme_dims(True, "max")(a))
register(aten.min.default)(lambda a: _extreme_dims(False, "min")(a))


def _sorted(x0, dim, descending, op):
    if x0.ndim and x0.shape[dim % x0.ndim] == 0:  # nothing to order: empty values and indices
        d = dim % x0.ndim
        x = np.moveaxis(x0, d, -1)
        return P.copy(x), O.K["copy.i64"](O.I.const(0, "i64", x.shape)), d
    x, d = _last(x0, dim, op)
    v, i = O.sort(x, descending)
    return v, i, d


@register(aten.sort.default)
def sort(a, dim=-1, descending=False):
    x0 = np_(a, "sort")
    v, i, d = _sorted(x0, dim, descending, "sort")
    if x0.ndim == 0:
        return _result(v.reshape(())), _ints(i.reshape(()))
    return _result(np.moveaxis(v, -1, d)), _ints(np.moveaxis(i, -1, d))


@register(aten.sort.stable)
def sort_stable(a, *, stable=None, dim=-1, descending=False):
    return sort(a, dim, descending)  # (RepOps' sort is always stable)


@register(aten.topk.default)
def topk(a, k, dim=-1, largest=True, sorted=True):
    """The first k of the stable sort (descending for largest): among equal values the lower
    index first, NaN first for largest, as sort's rule."""
    x0 = np_(a, "topk")
    if x0.ndim == 0:
        return sort(a)
    v, i, d = _sorted(x0, dim, largest, "topk")
    if not 0 <= k <= v.shape[-1]:
        raise IndexError(f"topk: k={k} is outside [0, {v.shape[-1]}] for dim {dim} (torch refuses it too)")
    return _result(np.moveaxis(v[..., :k], -1, d)), _ints(np.moveaxis(i[..., :k], -1, d))


# -- writes where duplicates resolve by order: the last source wins -------------------------------------------
def check_block(op: str, x_shape, index, src_shape, d: int):
    """torch's shape rule for an index of scatter-like ops: as many dims as x, at most x's size in
    every dim but d and at most src's in every dim (an IndexError, as torch refuses it)."""
    ok = index.dim() == len(x_shape) and all(index.shape[k] <= x_shape[k] for k in range(len(x_shape)) if k != d)
    if not ok or (src_shape is not None and (len(src_shape) != index.dim() or
                                             any(i > s for i, s in zip(index.shape, src_shape)))):
        raise IndexError(f"{op}: an index of shape {tuple(index.shape)} does not fit a tensor of shape "
                         f"{tuple(x_shape)} along dim {d}" + ("" if src_shape is None else
                                                              f" with a source of shape {tuple(src_shape)}")
                         + " (torch refuses it too)")


def within(x, shape, d: int):
    """The block of x that an index of `shape` addresses: [:shape[k]] in every dim k but d (a view)."""
    return x[tuple(slice(None) if k == d else slice(0, shape[k]) for k in range(x.ndim))]


def placed_back(y, x):
    """A result y over a block of x (within) in x's place, x's values elsewhere: one place()
    copy per dim where the block is smaller than x (y first, so it counts where they overlap)."""
    for k in range(x.ndim):
        if y.shape[k] < x.shape[k]:
            rest = x[tuple(slice(None) if j <= k else slice(0, y.shape[j]) for j in range(x.ndim))]
            y = P.place(rest.shape, k, [(0, 1, y), (0, 1, rest)])
    return y


@_scalar_as_vector()
def _scatter(a, dim, index, src, op, value=None):
    """x.scatter(dim, idx, src or value): target position along dim idx[q] for each index
    position q; the last q (row-major along dim) writing a target wins; untouched targets keep
    x. An index smaller than x (torch allows it in every dim) writes x's block it covers
    (within), placed back into x."""
    x = np_(a, op)
    if index.numel() == 0 or x.size == 0:  # nothing written (torch checks no shape then)
        return P.copy(x)
    d = dim % x.ndim
    check_block("aten." + op, x.shape, index, None if src is None else tuple(src.shape), d)
    i = _indices(index, x.shape[d], op)
    target = np.moveaxis(i, d, -1)
    if not target.flags.c_contiguous and P.xp_of(target) is np:
        target = O.K["copy.i64"](target)
    n = x.shape[d]
    src_pos = O.last_source(target, n)                        # [.., n], -1 where none
    written = O.K["le.i64"](O.const(0), src_pos)
    xm = np.moveaxis(within(x, index.shape, d), d, -1)
    if value is not None:
        out = P.select(written, np_(value, op), xm)
    else:
        s = np_(src, op)[tuple(slice(0, m) for m in index.shape)]
        sm = P.copy(np.moveaxis(s, d, -1))
        rows, m = int(np.prod(sm.shape[:-1])), sm.shape[-1]
        got = P.gather(sm.reshape(rows, m, 1), src_pos.reshape(rows, n), P.const(0.0, ())).reshape(xm.shape)
        out = P.select(written, got, xm)
    return placed_back(np.moveaxis(out, -1, d), x)


register(aten.scatter.src)(lambda a, dim, index, src: _result(_scatter(a, dim, index, src, "scatter")))
register(aten.scatter.value)(lambda a, dim, index, value: _result(_scatter(a, dim, index, None, "scatter", value)))
register(aten.scatter_.src)(lambda a, dim, index, src: _inplace(a, _scatter(a, dim, index, src, "scatter_")))
register(aten.scatter_.value)(lambda a, dim, index, value: _inplace(a, _scatter(a, dim, index, None, "scatter_",
                                                                                 value)))


# -- classification of values (bool results; max()/min()'s backward asks isnan) -----------------------------
register(aten.isnan.default)(lambda a: tensor(O.is_nan(np_(a, "isnan"))))
register(aten.isinf.default)(lambda a: tensor(P.eq(P.abs_(np_(a, "isinf")), np.float32(np.inf))))
register(aten.isfinite.default)(lambda a: tensor(P.eq(P.sub(np_(a, "isfinite"), np_(a, "isfinite")), np.float32(0))))
