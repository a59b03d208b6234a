"""Upsampling and its backward (docs/NUMERICS.md §8, "Upsampling, adaptive pooling, pooling
indices, replication padding"): nearest, nearest-exact, linear/bilinear/trilinear, bicubic and
antialiased bilinear, each torch's index and weight rule over the tables of
repops/reference/windows.py (weights computed by kernels from integer positions)."""
from __future__ import annotations

import functools
import itertools

import numpy as np

from . import prims as P
from .ordering import K, positions
from .windows import _axes, gather, scatter_back, staged, take

F32 = np.float32


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


def linear_lambda(n_in: int, n_out: int, align_corners: bool, scale):
    """w1 along the axis as a kernel output, torch's decomposition's: t = source - trunc(source)
    clamped to [0, 1] (positions 0..n_out-1 as an integer kernel, to_f32)."""
    o = K["to_f32.i64"](positions(n_out))
    real = _source(o, linear_scale(n_in, n_out, align_corners, scale), align_corners, (P.add, P.mul, P.sub, P.max_))
    return P.min_(P.max_(P.sub(real, P.trunc(real)), F32(0.0)), F32(1.0))


def linear_weights(n_in: int, n_out: int, align_corners: bool, scale):
    """(w0, w1) = (1 - t, t), t = linear_lambda (the backward's; the forward needs w1 only)."""
    t = linear_lambda(n_in, n_out, align_corners, scale)
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


def upsample_nearest(x, out_sizes, scales, exact: bool):
    """x [*lead, *in] -> [*lead, *out]: output o copies input nearest_table(o) along each axis
    (torch's decomposition's indices): one copy kernel per axis, each over a CAT of views."""
    nd = len(out_sizes)
    return gather(x, [nearest_table(n, m, s, exact) for n, m, s in zip(x.shape[-nd:], out_sizes, scales)])


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
        w = linear_lambda(in_sizes[a], out_sizes[a], align_corners, scales[a])
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
