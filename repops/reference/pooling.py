"""Resampling and pooling over windows that are not one strided view (docs/NUMERICS.md §8,
"Upsampling, adaptive pooling, pooling indices, replication padding"): upsampling (nearest,
nearest-exact, linear, bicubic, antialiased bilinear) and its backward, adaptive average and
max pooling of any sizes, max pooling's int64 indices and the backward that takes them,
replication padding and its backward.

Each spatial axis has a TABLE, fixed by the sizes alone: a tuple of slots, each a tuple over
the positions of the axis being made of (role, j) or None, "read position j of source `role`
along this axis, or nothing". A forward reads one source (role 0): nearest and replication
pad one slot (the source position), linear two (the corners x0, x1), a pooling window one
per offset in it. Its transpose (`transpose`) lists, for each input position, the outputs
that read it, in increasing (output, slot) order: the order the backward sums them in.

`take` makes one slot of one axis as ONE copy kernel whose operand is a CAT of views (a
`prims.place`; a plain view when one arithmetic run covers the axis), and `staged` takes the
axes in turn; a window is then folded over its slots in row-major order. So every float
operand is a view, a constant or a CAT of views (levels 4-5 settle any element), and every
input element of a backward sums its contributions from +0 in increasing row-major output
order, as torch's CPU loops add them. Tables and their runs are cached by size (host work
once per shape, not per step)."""
from __future__ import annotations

import functools
import itertools

import numpy as np

from . import integers as I
from . import prims as P
from .fold import SUM_INIT
from .ordering import K, is_nan, positions

F32 = np.float32
NONE_I64 = -(2 ** 31)   # the position a padding slot reads in an index table (any flat index made from it is < 0)


# -- tables (host: they depend on sizes only) ---------------------------------------------------------------
@functools.cache
def transpose(table, n_in: int):
    """The backward's table of a forward table of role-0 entries: for input position j, slot p
    is its p-th reader (slot a of the forward, output o) in increasing (o, a) order, as (a, o)."""
    readers = [[] for _ in range(n_in)]
    n_out = len(table[0]) if table else 0
    for o in range(n_out):
        for a, slot in enumerate(table):
            if slot[o] is not None:
                readers[slot[o][1]].append((a, o))
    depth = max((len(r) for r in readers), default=0)
    return tuple(tuple(r[p] if p < len(r) else None for r in readers) for p in range(depth))


@functools.cache
def nearest_table(n_in: int, n_out: int, scale, exact: bool):
    """torch's decomposition (torch._decomp, _compute_upsample_nearest_indices) in binary32:
    j = trunc((o + offset) * RN(s)), offset 0.5 for nearest-exact, s = n_in / (n_in * scale)
    when a scale is given (> 0), else n_in / n_out (binary64, rounded once); kept below n_in."""
    s = n_in / (n_in * scale) if scale is not None and scale > 0 else n_in / n_out
    o = np.arange(n_out, dtype=F32)
    j = np.trunc((o + F32(0.5 if exact else 0.0)) * F32(s)).astype(np.int64)
    return (tuple((0, int(min(v, n_in - 1))) for v in j),)


def linear_scale(n_in: int, n_out: int, align_corners: bool, scale) -> float:
    """torch's _compute_scale (binary64; rounded once to binary32 where it multiplies)."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _source(o, s, align_corners: bool, prims):
    """max(RN(s) o, +0) or max((o + 0.5) RN(s) - 0.5, +0): torch's source coordinate, clamped."""
    add, mul, sub, mx = prims
    real = mul(o, F32(s)) if align_corners else sub(mul(add(o, F32(0.5)), F32(s)), F32(0.5))
    return mx(real, F32(0.0))


_HOST = (np.add, np.multiply, np.subtract, np.maximum)


@functools.cache
def linear_table(n_in: int, n_out: int, align_corners: bool, scale):
    """Corners x0 = trunc(source), x1 = min(x0 + 1, n_in - 1): slots 0 and 1."""
    real = _source(np.arange(n_out, dtype=F32), linear_scale(n_in, n_out, align_corners, scale), align_corners, _HOST)
    x0 = np.trunc(real).astype(np.int64)
    return tuple((0, int(v)) for v in x0), tuple((0, int(min(v + 1, n_in - 1))) for v in x0)


def linear_weights(n_in: int, n_out: int, align_corners: bool, scale):
    """(w0, w1) along the axis as kernel outputs, torch's decomposition's: t = source - trunc(source)
    clamped to [0, 1]; w1 = t, w0 = 1 - t (positions 0..n_out-1 as an integer kernel, to_f32)."""
    o = K["to_f32.i64"](positions(n_out))
    real = _source(o, linear_scale(n_in, n_out, align_corners, scale), align_corners, (P.add, P.mul, P.sub, P.max_))
    t = P.min_(P.max_(P.sub(real, P.trunc(real)), F32(0.0)), F32(1.0))
    return P.sub(F32(1.0), t), t


def _cubic_source(o, s, align_corners: bool, prims):
    """torch's source coordinate for cubic (not clamped): RN(s) o or (o + 0.5) RN(s) - 0.5."""
    add, mul, sub = prims
    return mul(o, F32(s)) if align_corners else sub(mul(add(o, F32(0.5)), F32(s)), F32(0.5))


@functools.cache
def cubic_table(n_in: int, n_out: int, align_corners: bool, scale):
    """Slot k reads min(max(floor(source) + k - 1, 0), n_in - 1), k = 0..3."""
    real = _cubic_source(np.arange(n_out, dtype=F32), linear_scale(n_in, n_out, align_corners, scale), align_corners,
                         _HOST[:3])
    x0 = np.floor(real).astype(np.int64)
    return tuple(tuple((0, int(min(max(v + k - 1, 0), n_in - 1))) for v in x0) for k in range(4))


_A = -0.75  # torch's cubic convolution constant


def _cc1(x):
    """((A + 2) x - (A + 3)) x x + 1 (torch's _upsample_cubic_convolution1, left to right)."""
    return P.add(P.mul(P.mul(P.sub(P.mul(x, F32(_A + 2)), F32(_A + 3)), x), x), F32(1.0))


def _cc2(x):
    """((A x - 5 A) x + 8 A) x - 4 A (torch's _upsample_cubic_convolution2)."""
    return P.sub(P.mul(P.add(P.mul(P.sub(P.mul(x, F32(_A)), F32(5 * _A)), x), F32(8 * _A)), x), F32(4 * _A))


def cubic_weights(n_in: int, n_out: int, align_corners: bool, scale):
    """(w0, w1, w2, w3) along the axis, torch's decomposition's: t = clamp(source - floor(source),
    0, 1); cc2(t + 1), cc1(t), cc1(1 - t), cc2(2 - t)."""
    o = K["to_f32.i64"](positions(n_out))
    real = _cubic_source(o, linear_scale(n_in, n_out, align_corners, scale), align_corners, (P.add, P.mul, P.sub))
    t = P.min_(P.max_(P.sub(real, P.floor(real)), F32(0.0)), F32(1.0))
    return _cc2(P.add(t, F32(1.0))), _cc1(t), _cc1(P.sub(F32(1.0), t)), _cc2(P.sub(F32(2.0), t))


def _aa_geometry(n_in: int, n_out: int, align_corners: bool, scale):
    """torch's antialiased bilinear windows (_compute_indices_min_size_weights_aa, binary32
    scale): (scale, support, invscale) and per output (xmin, xsize)."""
    s = F32((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0) if align_corners else \
        F32(1.0 / scale) if scale is not None and scale > 0 else F32(n_in) / F32(n_out)
    support = s if s >= 1 else F32(1.0)
    inv = F32(1.0 / np.float64(s)) if s >= 1 else F32(1.0)
    width = int(np.ceil(support)) * 2 + 1
    center = (np.arange(n_out, dtype=F32) + F32(0.5)) * s
    lo = np.maximum(np.trunc((center - support).astype(np.float64) + 0.5), 0).astype(np.int64)
    hi = np.minimum(np.trunc((center + support).astype(np.float64) + 0.5).astype(np.int64), n_in)
    return s, support, inv, [(int(a), int(min(max(b - a, 0), width))) for a, b in zip(lo, hi)]


@functools.cache
def aa_table(n_in: int, n_out: int, align_corners: bool, scale):
    """Slot j reads xmin + j of each window with j < xsize."""
    *_, windows = _aa_geometry(n_in, n_out, align_corners, scale)
    depth = max((n for _, n in windows), default=0)
    return tuple(tuple((0, a + j) if j < n else None for a, n in windows) for j in range(depth))


def aa_weights(n_in: int, n_out: int, align_corners: bool, scale):
    """The normalised triangle weights per slot, torch's: center = RN(s) (o + 0.5);
    x = RN(((xmin + j) - center + 0.5) invscale) (one fma); w = 1 - |x| where |x| < 1, else 0;
    a slot past the window is +0; total = sum of w from +0 in slot order; w / total (w where
    total is 0)."""
    s, support, inv, windows = _aa_geometry(n_in, n_out, align_corners, scale)
    table = aa_table(n_in, n_out, align_corners, scale)
    center = P.mul(P.add(K["to_f32.i64"](positions(n_out)), F32(0.5)), s)
    xmin = take({0: K["to_f32.i64"](positions(n_in))}, 0, tuple((0, a) for a, _ in windows), 0.0)
    ws = []
    for j, slot in enumerate(table):
        x = P.abs_(P.fma(P.sub(P.add(xmin, F32(j)), center), inv, F32(0.5) * inv))
        w = P.select(P.lt(x, F32(1.0)), P.sub(F32(1.0), x), F32(0.0))
        ws.append(take({0: w}, 0, tuple(None if e is None else (0, o) for o, e in enumerate(slot)), 0.0))
    total = P.const(0.0, (n_out,))
    for w in ws:
        total = P.add(total, w)
    zero = P.eq(total, F32(0.0))
    return [P.select(zero, w, P.div(w, total)) for w in ws]


def upsample_bilinear_aa(x, out_sizes, align_corners: bool, scales):
    """x [N, C, H, W]: torch's separable antialiased resampling, the last axis first, an axis
    whose size does not change skipped: out = sum over slots j of mul(value, w_j), from the
    first product (no initial value)."""
    y = x
    for a in (1, 0):
        n, m = x.shape[2 + a], out_sizes[a]
        if n == m:
            continue
        terms = staged({(0,): y}, [aa_table(n, m, align_corners, scales[a])], [2 + a], 0.0)
        ws = [w.reshape((m,) + (1,) * (1 - a)) for w in aa_weights(n, m, align_corners, scales[a])]
        out = None
        for (j,), w in zip(sorted(terms), ws):
            c = P.mul(terms[(j,)], w)
            out = c if out is None else P.add(out, c)
        y = out
    return P.copy(y) if y is x else y


def upsample_bilinear_aa_backward(g, in_sizes, align_corners: bool, scales):
    """Slot (ky, kx) of output o carries mul(mul(g, wy), wx) (every axis weighted, as torch's
    backward); each input element sums them from +0 in row-major output order."""
    (oh, ow), (ih, iw) = g.shape[-2:], in_sizes
    tables = [aa_table(ih, oh, align_corners, scales[0]), aa_table(iw, ow, align_corners, scales[1])]
    wy = [w.reshape(oh, 1) for w in aa_weights(ih, oh, align_corners, scales[0])]
    wx = aa_weights(iw, ow, align_corners, scales[1])
    sources = {(ky, kx): P.mul(P.mul(g, a), b) for ky, a in enumerate(wy) for kx, b in enumerate(wx)}
    return scatter_back(sources, tables, in_sizes, g.shape[:-2])


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


# -- the kernels ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _runs(entries: tuple):
    """Pieces (start, step, width, role, j0, dj) covering the defined entries: from the first
    position not yet covered, the longest arithmetic run (in position and in j, one role) among
    the next few candidates for its second element."""
    left = {i: e for i, e in enumerate(entries) if e is not None}
    order = sorted(left)
    pieces = []
    for n, i0 in enumerate(order):
        if i0 not in left:
            continue
        r, j0 = left.pop(i0)
        best = (1, 1, 0)
        for i1 in list(itertools.islice((i for i in itertools.islice(order, n + 1, None) if i in left), 8)):
            if left[i1][0] != r:
                continue
            step, dj, w = i1 - i0, left[i1][1] - j0, 1
            while left.get(i0 + w * step) == (r, j0 + w * dj):
                w += 1
            if w > best[0]:
                best = (w, step, dj)
        w, step, dj = best
        for t in range(1, w):
            del left[i0 + t * step]
        pieces.append((i0, step, w, r, j0, dj))
    return tuple(pieces)


def _along(a, axis: int, j0: int, dj: int, width: int):
    """Positions j0, j0 + dj, ... (width of them) of `a` along axis, as a view."""
    at = [slice(None)] * a.ndim
    if dj == 0 or width == 1:
        at[axis] = slice(j0, j0 + 1)
        v = a[tuple(at)]
        shape = list(v.shape)
        shape[axis] = width
        return v if width == 1 else P.xp_of(a).broadcast_to(v, tuple(shape))
    stop = j0 + dj * (width - 1) + (1 if dj > 0 else -1)
    at[axis] = slice(j0, stop if stop >= 0 else None, dj)
    return a[tuple(at)]


def take(sources: dict, axis: int, entries, background, kernel=None):
    """sources: role -> array. The array whose position i along `axis` is sources[r]'s position
    j for entries[i] = (r, j), else `background`: one copy kernel (`kernel`: of another dtype)
    over a CAT of views, or the view itself when one run covers every position."""
    first = next(iter(sources.values()))
    shape = list(first.shape)
    shape[axis] = len(entries)
    pieces = _runs(tuple(entries))
    if len(pieces) == 1 and pieces[0][:3] == (0, 1, len(entries)):
        _, _, w, r, j0, dj = pieces[0]
        return _along(sources[r], axis, j0, dj, w)
    if not pieces:
        return P.const(background, shape, first.dtype)
    return P.place(shape, axis, [(s, st, _along(sources[r], axis, j0, dj, w)) for s, st, w, r, j0, dj in pieces],
                   background, kernel)


def staged(sources: dict, tables, axes, background, kernel=None) -> dict:
    """sources: role tuple (one role per axis) -> array. Takes the axes in turn (`take`), each
    slot of each: -> slot tuple -> array with every axis made."""
    cur = {((), roles): a for roles, a in sources.items()}
    for table, axis in zip(tables, axes):
        nxt = {}
        groups: dict = {}
        for (slots, roles), a in cur.items():
            groups.setdefault((slots, roles[1:]), {})[roles[0]] = a
        for (slots, rest), by_role in groups.items():
            for p, entries in enumerate(table):
                nxt[(slots + (p,), rest)] = take(by_role, axis, entries, background, kernel)
        cur = nxt
    return {slots: a for (slots, _), a in cur.items()}


def _fold(prim, terms: dict, init, shape):
    acc = P.const(init, shape)
    for key in sorted(terms):
        acc = prim(acc, terms[key])
    return acc if terms else P.copy(acc)


def _axes(x, nd: int):
    return list(range(x.ndim - nd, x.ndim))


def scatter_back(sources: dict, tables, in_sizes, lead) -> np.ndarray:
    """The backward of a gather by these forward tables: sources maps each forward role tuple
    (slot per axis) to the gradient it carries, [*lead, *out]; each input element sums what it
    received from +0, in increasing row-major (output, slot) order (missing slots read -0)."""
    nd = len(tables)
    back = [transpose(t, n) for t, n in zip(tables, in_sizes)]
    any_src = next(iter(sources.values()))
    terms = staged(sources, back, _axes(any_src, nd), SUM_INIT)
    return _fold(P.add, terms, 0.0, tuple(lead) + tuple(in_sizes))


# -- operators -------------------------------------------------------------------------------------------------
def upsample_nearest(x, out_sizes, scales, exact: bool):
    """x [*lead, *in] -> [*lead, *out]: output o copies input nearest_table(o) along each axis
    (torch's decomposition's indices): one copy kernel per axis, each over a CAT of views."""
    nd = len(out_sizes)
    tables = [nearest_table(n, m, s, exact) for n, m, s in zip(x.shape[-nd:], out_sizes, scales)]
    (y,) = staged({(0,) * nd: x}, tables, _axes(x, nd), 0.0).values()
    return P.copy(y) if y.base is not None or y is x else y


def upsample_nearest_backward(g, in_sizes, scales, exact: bool):
    """g [*lead, *out] -> [*lead, *in]: each input element sums the gradients of the outputs
    that copied it, from +0 in row-major output order (torch's CPU loop)."""
    nd = len(in_sizes)
    tables = [nearest_table(n, m, s, exact) for n, m, s in zip(in_sizes, g.shape[-nd:], scales)]
    return scatter_back({(0,) * nd: g}, tables, in_sizes, g.shape[:-nd])


def upsample_linear(x, out_sizes, align_corners: bool, scales):
    """torch's decomposition (torch._decomp _upsample_linear), kernel for kernel but with no
    arange node: the 2^d corner values (tables' slots: copies over CATs of views), then along
    each axis from the last, v0 + (v1 - v0) w1 for corner pairs that differ on that axis."""
    nd = len(out_sizes)
    in_sizes = x.shape[-nd:]
    tables = [linear_table(n, m, align_corners, s) for n, m, s in zip(in_sizes, out_sizes, scales)]
    vs = staged({(0,) * nd: x}, tables, _axes(x, nd), 0.0)
    vs = [vs[c] for c in itertools.product((0, 1), repeat=nd)]
    for a in reversed(range(nd)):
        _, w = linear_weights(in_sizes[a], out_sizes[a], align_corners, scales[a])
        w = w.reshape((out_sizes[a],) + (1,) * (nd - a - 1))
        vs = [P.add(v0, P.mul(P.sub(v1, v0), w)) for v0, v1 in zip(vs[::2], vs[1::2])]
    return vs[0]


def upsample_linear_backward(g, in_sizes, align_corners: bool, scales):
    """Corner (r_1..r_d) of output o carries mul(W, g), W = the product of the axes' corner
    weights in axis order (torch's (h_lambda w_lambda) g); each input element sums them from +0
    in increasing (output, corner) order."""
    nd = len(in_sizes)
    out = g.shape[-nd:]
    tables = [linear_table(n, m, align_corners, s) for n, m, s in zip(in_sizes, out, scales)]
    weights = [linear_weights(n, m, align_corners, s) for n, m, s in zip(in_sizes, out, scales)]
    sources = {}
    for corner in itertools.product((0, 1), repeat=nd):
        w = None
        for a, r in enumerate(corner):
            v = weights[a][r].reshape((1,) * a + (out[a],) + (1,) * (nd - a - 1))
            w = v if w is None else P.mul(w, v)
        sources[corner] = P.mul(w, g)
    return scatter_back(sources, tables, in_sizes, g.shape[:-nd])


def upsample_bicubic(x, out_sizes, align_corners: bool, scales):
    """x [N, C, H, W]: torch's decomposition (upsample_bicubic2d_default) kernel for kernel: the
    4 x 4 neighbours (the tables' copies), each row sum(value wx) over kx left to right (no
    initial value), then sum(row wy) over ky."""
    (oh, ow), (ih, iw) = out_sizes, x.shape[-2:]
    tables = [cubic_table(ih, oh, align_corners, scales[0]), cubic_table(iw, ow, align_corners, scales[1])]
    terms = staged({(0, 0): x}, tables, _axes(x, 2), 0.0)
    wy = [w.reshape(oh, 1) for w in cubic_weights(ih, oh, align_corners, scales[0])]
    wx = cubic_weights(iw, ow, align_corners, scales[1])
    rows = []
    for ky in range(4):
        row = None
        for kx in range(4):
            c = P.mul(terms[(ky, kx)], wx[kx])
            row = c if row is None else P.add(row, c)
        rows.append(P.mul(row, wy[ky]))
    out = rows[0]
    for r in rows[1:]:
        out = P.add(out, r)
    return out


def upsample_bicubic_backward(g, in_sizes, align_corners: bool, scales):
    """Neighbour (ky, kx) of output o carries (g wy) wx (torch's CPU backward's product); each
    input element sums them from +0 in increasing (output, neighbour) order."""
    (oh, ow), (ih, iw) = g.shape[-2:], in_sizes
    tables = [cubic_table(ih, oh, align_corners, scales[0]), cubic_table(iw, ow, align_corners, scales[1])]
    wy = [w.reshape(oh, 1) for w in cubic_weights(ih, oh, align_corners, scales[0])]
    wx = cubic_weights(iw, ow, align_corners, scales[1])
    sources = {(ky, kx): P.mul(P.mul(g, wy[ky]), wx[kx]) for ky in range(4) for kx in range(4)}
    return scatter_back(sources, tables, in_sizes, g.shape[:-2])


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
    xp = P.xp_of(next(iter(terms.values())))
    idx, m = xp.broadcast_to(first, shape), P.const(-np.inf, shape)
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


def max_pool_indices(x, kernel, stride, padding, dilation, ceil_mode):
    """max pooling's int64 indices (flat over the pooled axes): `max_indices` over the windows
    (reference/nn.py max_pool: padding reads -inf)."""
    from .nn import _spatial_pad, _windows, pool_geometry
    nd = len(kernel)
    S = x.shape[-nd:]
    O, right = pool_geometry(S, kernel, stride, padding, dilation, ceil_mode)
    view, _ = _windows(_spatial_pad(x, padding, right, -np.inf), kernel, stride, dilation, O)
    terms = {k: view[(slice(None), slice(None)) + k] for k in np.ndindex(*kernel)}
    tables = [strided_table(n, o, k, s, p, d) for n, o, k, s, p, d in zip(S, O, kernel, stride, padding, dilation)]
    return max_indices(terms, _flat_positions(tables, S), x.shape[:2] + tuple(O))


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
    nd = len(pads)
    tables = [replicate_table(n, lo, hi) for n, (lo, hi) in zip(x.shape[-nd:], pads)]
    (y,) = staged({(0,) * nd: x}, tables, _axes(x, nd), 0.0).values()
    return P.copy(y) if y.base is not None or y is x else y


def replication_pad_backward(g, in_sizes, pads):
    """pads: (lo, hi) per padded axis, first axis first. Each input element sums the gradients
    of the positions that replicated it, from +0 in row-major output order."""
    tables = [replicate_table(n, lo, hi) for n, (lo, hi) in zip(in_sizes, pads)]
    return scatter_back({(0,) * len(tables): g}, tables, in_sizes, g.shape[:-len(tables)])
