"""Order statistics beyond sort (aten_sort.py): kthvalue, median, nanmedian, mode, cummax /
cummin, searchsorted, from RepOps' stable sort and the NaN-aware comparisons of
repops/reference/ordering.py. Integer results are int64 kernel outputs. Where torch picks
among equal values by its selection algorithm (nth_element; its docs: "not necessarily the
first occurrence"), RepOps' rule is the stable sort's. docs/NUMERICS.md §8, "Ordering"."""
from __future__ import annotations

import numpy as np
import torch

from . import faults
from .aten import _indices, _result, np_, register, tt
from .aten_sort import _ints, _last
from .errors import UnsupportedOpError
from .reference import integers as I
from .reference import ordering as O
from .reference import prims as P
from .reference.fold import fold_dims, sum_dims

aten = torch.ops.aten


def _rows(x0, dim, op):
    """x0 with dim last as [rows, n] (a copy kernel: moving it is no view otherwise; a 0-dim x0
    as one element), the shape of the other dims, and the dim."""
    x, d = _last(x0, dim, op)
    return P.copy(x).reshape(int(np.prod(x.shape[:-1])), x.shape[-1]), x.shape[:-1], d


def _shaped(v, i, lead, x0, d, keepdim):
    """Per-row value and index [rows] as torch's results: the reduced dim dropped (kept as 1)."""
    v, i = v.reshape(lead), i.reshape(lead)
    if keepdim and x0.ndim:
        v, i = np.expand_dims(v, d), np.expand_dims(i, d)
    return _result(v), _ints(i)


def _pick(x, k):
    """(value, index) of each row's stable ascending sort (NaN last) at position k (an int64
    array [rows], or one int), by the gather kernel."""
    v, i = O.sort(x, False)
    rows, n = x.shape
    at = np.broadcast_to(np.asarray(k, np.int64).reshape(-1, 1), (rows, 1)) if np.ndim(k) == 0 else k.reshape(rows, 1)
    at = O.K["copy.i64"](at) if np.ndim(k) == 0 else at
    val = P.gather(v.reshape(rows, n, 1), at, P.const(0.0, ())).reshape(rows)
    data = i.reshape(rows, n, 1)
    idx = (I.KERNELS["gather.i64"](data, at, I.const(0, "i64")) if P.xp_of(data) is np else  # (a device: the same
           P.picked(data, at, 0, np.int64)).reshape(rows)                                      # movement, unobserved)
    return val, idx


@register(aten.kthvalue.default)
def kthvalue(a, k, dim=-1, keepdim=False):
    """The k-th smallest along dim (NaN greatest) and its position: the stable sort's k-th
    (among equal values, the one the stable order puts there)."""
    x0 = np_(a, "kthvalue")
    x, lead, d = _rows(x0, dim, "kthvalue")
    if not 1 <= k <= x.shape[-1]:
        raise IndexError(f"kthvalue: k={k} is outside [1, {x.shape[-1]}] (torch refuses it too)")
    return _shaped(*_pick(x, k - 1), lead, x0, d, keepdim)


def _median(x, ignore_nan):
    """Per row [rows, n]: the lower median (position (m - 1) // 2 of the stable sort, m the count
    of numbers with ignore_nan, else n). median: a row holding NaN gives NaN and its first NaN's
    position (torch's rule); nanmedian: a row of NaN only gives NaN at position 0 (torch: any)."""
    rows, n = x.shape
    nan = O.is_nan(x)
    if ignore_nan:
        count = O.to_index(sum_dims(P.select(nan, P.const(0.0, ()), P.const(1.0, ())), [-1]))   # numbers a row
        k = O.K["max.i64"](O.K["div_floor.i64"](O.K["sub.i64"](count, O.const(1)), O.const(2)), O.const(0))
        return _pick(x, k)
    v, i = _pick(x, (n - 1) // 2)
    first_nan = O.first_true(nan)
    has_nan = O.K["lt.i64"](first_nan, O.const(n))
    return P.select(has_nan, P.const(np.nan, ()), v), O.K["select.i64"](has_nan, first_nan, i)


def _median_dim(ignore_nan, op):
    def impl(a, dim, keepdim=False):
        x0 = np_(a, op)
        x, lead, d = _rows(x0, dim, op)
        return _shaped(*_median(x, ignore_nan), lead, x0, d, keepdim)
    return impl


def _median_all(ignore_nan, op):
    def impl(a):
        x0 = np_(a, op)
        if x0.size == 0:
            return tt(P.const(np.nan, ()))  # torch: the median of nothing is NaN
        flat = (x0 if x0.flags.c_contiguous else P.copy(x0)).reshape(1, -1)
        return _result(_median(flat, ignore_nan)[0].reshape(()))
    return impl


register(aten.median.dim)(_median_dim(False, "median"))
register(aten.nanmedian.dim)(_median_dim(True, "nanmedian"))
register(aten.median.default)(_median_all(False, "median"))
register(aten.nanmedian.default)(_median_all(True, "nanmedian"))


@register(aten.mode.default)
def mode(a, dim=-1, keepdim=False):
    """The most frequent value along dim (equal as IEEE ==: -0 and +0 one value) and a position
    of it, torch's CPU rule: among values as frequent, the smallest; the position is the last
    one holding it (torch's sort-then-scan: the last of the run, its insertion sort being stable
    up to 16 elements; longer, torch's position among equal values is its introsort's).
    count_i = #{j: x_j == x_i} (exact binary32 sums), O(n^2) comparisons. A tensor holding NaN
    is the fault rule `domain` (a claim, not an error mid-step): torch sorts it with `<`, which is
    no order with NaN, so its mode there (even the value) is whatever its sort left."""
    x0 = np_(a, "mode")
    x, lead, d = _rows(x0, dim, "mode")
    rows, n = x.shape
    if n > O.MAX_SORTED:
        raise UnsupportedOpError(f"aten.mode along a dim of {n}: RepOps counts every pair (O(n^2)); it is defined "
                                 f"up to {O.MAX_SORTED} elements along the dim")
    faults.not_nan(x, "aten.mode", "and torch sorts with `<`, which is no order with NaN, so its mode there (even the "
                   "value) depends on its sort's internals: replace the NaNs first (torch.nan_to_num)")
    count = sum_dims(P.select(P.eq(x[:, :, None], x[:, None, :]), P.const(1.0, ()), P.const(0.0, ())), [-1])
    best = fold_dims(P.max_, count, [-1], -np.inf, True)                                  # >= 1: x_i == x_i
    value = O.fold_min(P.select(P.eq(count, best), x, P.const(np.inf, ())), [-1], True)  # [rows, 1]
    idx = O.to_index(fold_dims(P.max_, O._as_f32(O.K["select.i64"](P.eq(x, value), O.positions(n), O.const(-1))),
                               [-1], -np.inf))
    val = P.gather(x.reshape(rows, n, 1), idx.reshape(rows, 1), P.const(0.0, ())).reshape(rows)
    return _shaped(val, idx, lead, x0, d, keepdim)


def _cumulative(largest, op):
    def impl(a, dim):
        """cummax / cummin (ordering.cumulative_extreme) along dim; an empty dim gives empty results."""
        x0 = np_(a, op)
        if x0.ndim and x0.shape[dim % x0.ndim] == 0:
            return _result(P.copy(x0)), _ints(O.K["copy.i64"](I.const(0, "i64", x0.shape)))
        x, d = _last(x0, dim, op)
        v, i = O.cumulative_extreme(x, largest)
        if x0.ndim == 0:
            return _result(v.reshape(())), _ints(i.reshape(()))
        return _result(np.moveaxis(v, -1, d)), _ints(np.moveaxis(i, -1, d))
    return impl


register(aten.cummax.default)(_cumulative(True, "cummax"))
register(aten.cummin.default)(_cumulative(False, "cummin"))


def _searchsorted(seq_t, values, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted's binary search (ordering.binary_search), for each value the boundary
    row it belongs to (a 1-D sequence: every value). sorter: the sequence gathered by it first."""
    op = "searchsorted"
    if side is not None:
        if side not in ("left", "right") or (side == "left" and right):
            raise ValueError(f"searchsorted: side={side!r} with right={right} (torch refuses it too)")
        right = side == "right"
    seq, v = np_(seq_t, op), np_(values, op)
    scalar = v.ndim == 0
    v = v.reshape(1) if scalar else v
    n = seq.shape[-1]
    if seq.ndim > 1 and seq.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"searchsorted: boundaries {list(seq.shape)} and values {list(v.shape)} differ in their "
                         "leading dims (torch refuses it too)")
    flat = lambda t: t if t.flags.c_contiguous else P.copy(t)  # noqa: E731  (a reshape that copies names nothing)
    R = int(np.prod(seq.shape[:-1]))
    s = flat(seq).reshape(R, n)
    vr = flat(v).reshape(1, v.size) if seq.ndim == 1 else flat(v).reshape(R, v.shape[-1])
    if sorter is not None:
        order = _indices(sorter, n, op)
        order = (order if order.flags.c_contiguous else O.K["copy.i64"](order)).reshape(R, n)
        s = P.gather(s.reshape(R, n, 1), order, P.const(0.0, ())).reshape(R, n)
    if vr.size == 0 or n == 0:
        out = O.K["copy.i64"](I.const(0, "i64", v.shape))
    else:
        out = O.binary_search(s, vr, right).reshape(v.shape)
    if out_int32:
        out = O.K["to_i32.i64"](out)
    out = out.reshape(()) if scalar else out
    return _ints(out)


register(aten.searchsorted.Tensor)(lambda seq, values, **kw: _searchsorted(seq, values, **kw))
register(aten.searchsorted.Scalar)(lambda seq, value, **kw: _searchsorted(seq, value, **kw))
