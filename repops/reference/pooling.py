"""Pooling over windows that are not one strided view, and replication padding (docs/NUMERICS.md
§8, "Upsampling, adaptive pooling, pooling indices, replication padding"): adaptive average and
max pooling of any sizes, max pooling's int64 indices (torch's loop: ties to the first
position, a NaN window to its last NaN) and the backward that takes them, replication padding
and its backward; over the tables of repops/reference/windows.py."""
from __future__ import annotations

import functools
import itertools

import numpy as np

from . import integers as I
from . import prims as P
from .fold import SUM_INIT
from .nn import _spatial_pad, _windows, pool_geometry
from .ordering import K, is_nan, positions
from .windows import _axes, _fold, gather, scatter_back, staged, take

F32 = np.float32
NONE_I64 = -(2 ** 31)   # the position a padding slot reads in an index table (any flat index made from it is < 0)


def adaptive_windows(n_in: int, n_out: int):
    """torch's adaptive windows: [floor(o n_in / n_out), ceil((o + 1) n_in / n_out))."""
    return [((o * n_in) // n_out, -(-((o + 1) * n_in) // n_out)) for o in range(n_out)]


@functools.cache
def adaptive_table(n_in: int, n_out: int):
    """Slot a reads position start + a of each adaptive window that long."""
    windows = adaptive_windows(n_in, n_out)
    depth = max((e - s for s, e in windows), default=0)
    return tuple(tuple((0, s + a) if s + a < e else None for s, e in windows) for a in range(depth))


@functools.cache
def strided_table(n_in: int, n_out: int, kernel: int, stride: int, pad: int, dilation: int):
    """Slot k reads position o stride + k dilation - pad when it lies inside the input (a fixed
    pooling window; ceil_mode's last window and the padding read nothing)."""
    return tuple(tuple((0, p) if 0 <= (p := o * stride + k * dilation - pad) < n_in else None for o in range(n_out))
                 for k in range(kernel))


@functools.cache
def replicate_table(n_in: int, pad_lo: int, pad_hi: int):
    """Position o of the padded axis reads min(max(o - pad_lo, 0), n_in - 1) (negative pads crop)."""
    return (tuple((0, min(max(o - pad_lo, 0), n_in - 1)) for o in range(n_in + pad_lo + pad_hi)),)


def _window_divisor(in_sizes, out_sizes, shape):
    """The number of elements of each adaptive window, [*out]: a constant when every axis's
    windows are equally long, else the product (in axis order) of each axis's lengths, each a
    CAT of constants."""
    nd = len(in_sizes)
    lengths = []
    for n, m in zip(in_sizes, out_sizes):
        sizes = [e - s for s, e in adaptive_windows(n, m)]
        if len(set(sizes)) <= 1:
            lengths.append(F32(sizes[0] if sizes else 1))
            continue
        values = sorted(set(sizes))
        consts = {r: P.const(F32(v), (1,)) for r, v in enumerate(values)}
        lengths.append(take(consts, 0, [(values.index(v), 0) for v in sizes], 0.0))
    if all(np.ndim(v) == 0 for v in lengths):
        return P.const(np.prod(lengths, dtype=np.float64), tuple(shape))
    div = None
    for a, v in enumerate(lengths):
        v = v.reshape((1,) * a + (out_sizes[a],) + (1,) * (nd - a - 1)) if np.ndim(v) else v
        div = v if div is None else P.mul(div, v)
    return div


def adaptive_avg_pool(x, out_sizes):
    """x [*lead, *in]: fold(add, -0) over each window in row-major order (an offset past a
    window's end reads -0), divided by the window's size (when the input is a multiple of the
    output: average pooling with kernel = stride = in / out, its very kernels)."""
    nd = len(out_sizes)
    in_sizes = x.shape[-nd:]
    tables = [adaptive_table(n, m) for n, m in zip(in_sizes, out_sizes)]
    terms = staged({(0,) * nd: x}, tables, _axes(x, nd), SUM_INIT)
    acc = _fold(P.add, terms, SUM_INIT, x.shape[:-nd] + tuple(out_sizes))
    return P.div(acc, _window_divisor(in_sizes, out_sizes, acc.shape))


def adaptive_avg_pool_backward(g, in_sizes):
    """share = g / the window's size; each input element sums the shares of the windows that
    hold it, from +0 in row-major output order."""
    nd = len(in_sizes)
    out = g.shape[-nd:]
    tables = [adaptive_table(n, m) for n, m in zip(in_sizes, out)]
    share = P.div(g, _window_divisor(in_sizes, out, g.shape))
    return scatter_back({roles: share for roles in itertools.product(*(range(len(t)) for t in tables))},
                        tables, in_sizes, g.shape[:-nd])


def _flat_positions(tables, in_sizes):
    """slot tuple -> int64 [*out]: the flat input position (row-major over the pooled axes) each
    slot of each window reads; < 0 where it reads nothing (NONE_I64 per axis)."""
    nd = len(tables)
    per_axis = []
    for table, n in zip(tables, in_sizes):
        pos = {0: positions(n)}
        per_axis.append([take(pos, 0, slot, np.int64(NONE_I64), K["copy.i64"]) for slot in table])
    flat = {}
    for slots in itertools.product(*(range(len(t)) for t in tables)):
        f = None
        for a, p in enumerate(slots):
            v = per_axis[a][p].reshape((1,) * a + (len(tables[a][0]),) + (1,) * (nd - a - 1))
            f = v if f is None else K["add.i64"](K["mul.i64"](f, I.const(in_sizes[a], "i64")), v)
        flat[slots] = f
    return flat


def max_indices(terms: dict, flat: dict, shape):
    """torch's CPU loop over each window in row-major order, as kernels: m = -inf, index = the
    first position inside the input; at each slot, if lt(m, v) or v is NaN: m = v, index = its
    position. So ties keep the first position (-0 and +0 tie) and a NaN the last NaN."""
    order = sorted(terms)
    if not order:
        return K["copy.i64"](I.const(0, "i64", shape))
    first = flat[order[-1]]
    for k in reversed(order[:-1]):  # the first slot that reads inside the input
        first = K["select.i64"](K["le.i64"](I.const(0, "i64"), flat[k]), flat[k], first)
    idx, m = P.xp_of(first).broadcast_to(first, shape), P.const(-np.inf, shape)  # (the tables live on the host)
    for k in order:
        v = terms[k]
        up = K["or.bool"](P.lt(m, v), is_nan(v))
        m, idx = P.select(up, v, m), K["select.i64"](up, flat[k], idx)
    return idx


def adaptive_max_pool(x, out_sizes):
    """(values, int64 indices): values fold(max, -inf) over each window in row-major order (NaN
    wins, -0 < +0; an offset past a window's end reads -inf); indices `max_indices`, flat over
    the pooled axes."""
    nd = len(out_sizes)
    in_sizes = x.shape[-nd:]
    tables = [adaptive_table(n, m) for n, m in zip(in_sizes, out_sizes)]
    terms = staged({(0,) * nd: x}, tables, _axes(x, nd), -np.inf)
    shape = x.shape[:-nd] + tuple(out_sizes)
    return _fold(P.max_, terms, -np.inf, shape), max_indices(terms, _flat_positions(tables, in_sizes), shape)


def indexed_backward(g, indices, tables, in_sizes, check: bool = True):
    """The backward of a max pooling given its indices: slot k of output o carries
    select(eq.i64(index, its position), g, -0); each input element sums them from +0 in
    row-major output order. An index that is no position of its window would be dropped: the
    step faults on it instead (rule `index`: torch would write it wherever it points)."""
    from .. import faults
    nd = len(tables)
    flat = _flat_positions(tables, in_sizes)
    sources, found = {}, None
    for slots, f in flat.items():
        hit = K["eq.i64"](indices, f)
        found = hit if found is None else K["or.bool"](found, hit)
        sources[slots] = P.select(hit, g, P.const(SUM_INIT, ()))
    if check and found is not None:
        faults.in_window(found, "max pooling backward")
    return scatter_back(sources, tables, in_sizes, g.shape[:-nd])


def max_pool_indices(x, kernel, stride, padding, dilation, ceil_mode, allow_empty: bool = False):
    """max pooling's int64 indices (flat over the pooled axes): `max_indices` over the windows
    (reference/nn.py max_pool: padding reads -inf)."""
    nd = len(kernel)
    S = x.shape[-nd:]
    O, right = pool_geometry(S, kernel, stride, padding, dilation, ceil_mode)
    view, _ = _windows(_spatial_pad(x, padding, right, -np.inf), kernel, stride, dilation, O)
    terms = {k: view[(slice(None), slice(None)) + k] for k in np.ndindex(*kernel)}
    tables = [strided_table(n, o, k, s, p, d) for n, o, k, s, p, d in zip(S, O, kernel, stride, padding, dilation)]
    for a, table in enumerate(tables):
        empty = [o for o in range(O[a]) if all(slot[o] is None for slot in table)]
        if empty and not allow_empty:
            from ..errors import UnsupportedOpError
            raise UnsupportedOpError(
                f"max pooling with indices of a {list(S)} input (kernel {list(kernel)}, stride {list(stride)}, padding "
                f"{list(padding)}, dilation {list(dilation)}): the window of output {empty[0]} along spatial axis {a} "
                "lies entirely in the padding, where torch returns an index outside the input (and its backward writes "
                "out of bounds); use less padding or dilation")
    return max_indices(terms, _flat_positions(tables, S), x.shape[:2] + tuple(O))


def max_pool_backward(g, x, out, kernel, stride, padding, dilation, ceil_mode):
    """repops.max_pool's backward (no indices asked for): each output's gradient goes to torch's
    index of its window (max_pool_indices: the first maximal position, -0 and +0 tied; a window
    with NaNs its last NaN; a window of -inf its first position inside the input), and each
    input element sums what it received from +0 in row-major output order (`out` is not
    needed: the values are compared again). A window wholly in the padding (dilation) has no
    position to send its gradient to: it is dropped (torch writes it out of bounds)."""
    idx = max_pool_indices(x, kernel, stride, padding, dilation, ceil_mode, allow_empty=True)
    return max_pool_backward_indexed(g, x, idx, kernel, stride, padding, dilation, check=False)


def max_pool_backward_indexed(g, x, indices, kernel, stride, padding, dilation, check: bool = True):
    nd = len(kernel)
    S = x.shape[-nd:]
    tables = [strided_table(n, o, k, s, p, d) for n, o, k, s, p, d in zip(S, g.shape[-nd:], kernel, stride, padding,
                                                                          dilation)]
    return indexed_backward(g, indices, tables, S, check)


def adaptive_max_pool_backward(g, indices, in_sizes):
    nd = len(in_sizes)
    tables = [adaptive_table(n, m) for n, m in zip(in_sizes, g.shape[-nd:])]
    return indexed_backward(g, indices, tables, in_sizes)


def replication_pad(x, pads):
    """pads: (lo, hi) per padded (trailing) axis, first axis first: one copy per axis over a CAT
    of views (torch's decomposition made index tensors from arange)."""
    return gather(x, [replicate_table(n, lo, hi) for n, (lo, hi) in zip(x.shape[-len(pads):], pads)])


def replication_pad_backward(g, in_sizes, pads):
    """pads: (lo, hi) per padded axis, first axis first. Each input element sums the gradients
    of the positions that replicated it, from +0 in row-major output order."""
    tables = [replicate_table(n, lo, hi) for n, (lo, hi) in zip(in_sizes, pads)]
    return scatter_back({(0,) * len(tables): g}, tables, in_sizes, g.shape[:-len(tables)])
