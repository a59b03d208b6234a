"""grid_sample (grid_sampler_2d/3d, forward and backward) and masked_scatter, as compositions
of ops RepOps already defines, routed above autograd so that autograd records the pieces and
their backwards are RepOps' too (a gradient into the input is the index backward's scatter-add
in increasing output position, per corner, corners summed in torch's order). docs/NUMERICS.md
§8, "Grid sampling and masked scatter"."""
from __future__ import annotations

import builtins
import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F

from . import faults, integer
from .aten import _result, arr, np_, register
from .reference import integers as I
from .reference import ordering as O
from .reference import prims as P
from .reference.fold import fold_dims, sum_dims
from .errors import UnsupportedOpError
from torch._decomp.decompositions import _upsample_cubic_interp1d as _cubic  # torch's bicubic taps

aten = torch.ops.aten
F32 = np.float32
builtins_range = builtins.range  # (`range` is also histogram's keyword)
MAX_COUNT = 1 << 24  # counts are binary32 sums of ones: exact below 2^24
_LIMIT = 2.0 ** 24  # grid coordinates RepOps accepts: pixel coordinates stay far from overflow
_REFLECT_LIMIT = 2.0 ** 10  # with reflection padding: reflection amplifies the unnormalised coordinate's rounding
VF = torch._C._VariableFunctions
_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


# -- grid sampling ---------------------------------------------------------------------------------------------
def _clip(c, size: int):
    """clamp(c, 0, size - 1) with torch's native gradient (clip_coordinates_set_grad): 1 strictly
    inside, 0 at and beyond either bound (autograd's clamp would pass it at the bounds)."""
    inside = torch.logical_and(c > 0, c < size - 1)
    return torch.where(inside, c, torch.clamp(c, 0, size - 1).detach())


def _reflect(c, twice_low: int, twice_high: int):
    """torch's reflect_coordinates: c reflected between the bounds until it falls inside. The
    parity of the number of flips is fmod(floor(c2 / span), 2) (exact on an integer-valued
    binary32): torch's decomposition casts it to int8 (a cast RepOps does not define, §13, that
    wraps or saturates by device), its kernels to int64; the parity is the same."""
    if twice_low == twice_high:
        return torch.zeros_like(c)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    c2 = (c - low).abs()
    extra = torch.fmod(c2, span)
    even = torch.fmod((c2 / span).floor(), 2) == 0
    return torch.where(even, extra + low, span + low - extra)


def _coordinates(c, size: int, padding: int, align: bool):
    """The sample coordinate after the padding rule: itself (zeros), clipped (border), or
    reflected then clipped (reflection), as torch's compute_coordinates."""
    if padding == 0:
        return c
    if padding == 2:
        c = _reflect(c, 0, 2 * (size - 1)) if align else _reflect(c, -1, 2 * size - 1)
    return _clip(c, size)


def _positions(n: int, device):
    """0..n-1: an arange of the shapes alone, which a job's export folds into a constant
    (offchain/protocol/fold.py), as it would any composition of constants."""
    return torch.arange(n, device=device)


def _index(c, size: int):
    """An integer-valued coordinate c in [0, size) as int64: the number of positions 0..size-1
    (to_f32 of the integer positions) <= c, less one: comparisons and an integer sum (a
    float-to-integer cast is no kernel a chain settles). Outside [0, size) it is not c, and the
    caller masks it."""
    pos = _positions(size, c.device).to(torch.float32)
    return (pos <= c.unsqueeze(-1)).sum(-1) - 1


def _unnormalize(g, size: int, align: bool):
    """[-1, 1] to pixel coordinates, torch's decomposition's formula (its forward's rounding)."""
    mul = (size * 0.5 - 0.5) if align else (size * 0.5)
    return g * mul + (size * 0.5 - 0.5)


def grid_sampler(a, grid, interpolation: int = 0, padding: int = 0, align_corners: bool = False):
    """torch.grid_sampler_2d / _3d of float32 as torch's decomposition composes it (a gather of
    every corner, torch.where out of bounds, weights as products of per-axis distances, x
    fastest), with the border clip's gradient as torch's kernels define it (0 at the bounds).
    Nearest rounds half to even (torch's nearbyint); bicubic is 2-d only (torch's rule)."""
    nd = a.dim() - 2
    if a.dim() not in (4, 5) or grid.dim() != a.dim() or grid.shape[-1] != nd or grid.shape[0] != a.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected a 4-D or 5-D input and a grid of the same rank, batch and a last "
                           f"dimension of {nd}, got input {list(a.shape)} and grid {list(grid.shape)} "
                           "(torch refuses it too)")
    if interpolation not in (0, 1, 2) or padding not in (0, 1, 2) or (interpolation == 2 and nd != 2):
        raise RuntimeError(f"grid_sampler(): interpolation {interpolation} with padding {padding} on a {nd}-d "
                           "input is not one torch defines (bicubic is 2-d only)")
    if any(s == 0 for s in a.shape[2:]):
        raise RuntimeError(f"grid_sampler(): expected an input with non-empty spatial dimensions, got {list(a.shape)} "
                           "(torch refuses it too)")
    limit = _REFLECT_LIMIT if padding == 2 else _LIMIT
    if grid.numel():  # (ops of the step: a fault claim where they fail, never an error mid-run)
        torch._assert_async(
            (grid.detach().abs() <= limit).all(),
            f"grid_sampler(): a grid coordinate is NaN, infinite or beyond +-{limit:g}"
            f"{' (reflection padding)' if padding == 2 else ''}: torch's kernels disagree there (its 2-d vectorised "
            "path propagates NaN where its scalar path clips it; an overflowing coordinate gives NaN; reflection "
            "amplifies the rounding of the unnormalised coordinate, which its kernels compute by different formulas), "
            f"so RepOps defines grids within +-{limit:g} only: clamp or replace them first, e.g. "
            f"torch.nan_to_num(grid, nan=-2.0).clamp({-limit:g}, {limit:g})")
    N, C, sizes = a.shape[0], a.shape[1], a.shape[:1:-1]  # sizes: W, H(, D), as the grid's x, y(, z)
    g = grid.unsqueeze(1)  # [N, 1, *out, nd]: broadcast over channels
    n_idx = _positions(N, a.device).view(N, *([1] * (nd + 1)))
    c_idx = _positions(C, a.device).view(1, C, *([1] * nd))

    def summand(cs, w):
        """input at integer coordinates cs (x, y, ...) times w, 0 outside the input."""
        inb = None
        for c, s in zip(cs, sizes):
            ok = torch.logical_and(c >= 0, c < s)
            inb = ok if inb is None else torch.logical_and(inb, ok)
        idx = [torch.where(inb, _index(c, s), 0) for c, s in zip(cs, sizes)]
        v = a[(n_idx, c_idx, *reversed(idx))]
        return torch.where(inb, v * w if not isinstance(w, int) else v, 0)  # (not v * 0: NaN for an inf pixel)

    comps = [g[..., i] for i in range(nd)]
    if interpolation == 2:
        ix, iy = (_unnormalize(c, s, align_corners) for c, s in zip(comps, sizes))
        x0, y0 = ix.floor(), iy.floor()
        tx, ty = ix - x0, iy - y0
        W, H = sizes
        rows = []
        for dy in range(4):
            yy = _coordinates(y0 + (dy - 1), H, padding, align_corners)
            taps = [summand((_coordinates(x0 + (dx - 1), W, padding, align_corners), yy), 1) for dx in range(4)]
            rows.append(_cubic(taps, tx))
        out = _cubic(rows, ty)
    else:
        cs = [_coordinates(_unnormalize(c, s, align_corners), s, padding, align_corners) for c, s in zip(comps, sizes)]
        if interpolation == 1:
            r = [c.round() for c in cs]  # half to even, torch's nearbyint
            one = (r[0] - r[0].detach()) + 1  # exactly 1 where in bounds: the grid's gradient is +0, not None
            out = summand(r, one)
        else:
            lo = [c.floor() for c in cs]
            out = None
            for corner in itertools.product((0, 1), repeat=nd):  # z slowest, x fastest: torch's corner order
                bits = corner[::-1]  # (x, y, z)
                w = None
                for c, f, b in zip(cs, lo, bits):
                    d = (c - f) if b else ((f + 1) - c)
                    w = d if w is None else w * d
                term = summand([f + 1 if b else f for f, b in zip(lo, bits)], w)
                out = term if out is None else out + term
    return out


def _grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """F.grid_sample: its argument rules, then grid_sampler."""
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if mode == "bicubic" and input.dim() != 4:
        raise ValueError("nn.functional.grid_sample(): bicubic interpolation only supports 4D input")
    return grid_sampler(input, grid, _MODES[mode], _PADDINGS[padding_mode], bool(align_corners))


# -- masked_scatter --------------------------------------------------------------------------------------------
def masked_scatter(self, mask, source):
    """self.masked_scatter(mask, source): self and mask broadcast together; where mask is true the
    k-th true position (row-major) takes source.flatten()[k]. Its source index is the integer
    cumsum of the mask less one (integer kernels), then one gather and one select; autograd's
    backward of those is torch's (the gradient of self where mask is false, each used source
    element's gradient from its one position, +0 for the unused rest)."""
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype} "
                           "(torch refuses it too)")
    if source.dtype != self.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got {self.dtype} and "
                           f"{source.dtype} (torch refuses it too)")
    shape = torch.broadcast_shapes(self.shape, mask.shape)
    torch._assert_async(mask.expand(shape).sum() <= source.numel(),
                        f"masked_scatter: the mask has more ones than the source's {source.numel()} elements (torch "
                        "refuses it too)")
    m = mask.expand(shape).reshape(-1)
    k = torch.cumsum(m.to(torch.int64), 0) - 1  # k-th true position -> source element k
    src = source.reshape(-1)
    if src.numel() == 0:
        return self.expand(shape).clone()  # no true position (checked above): nothing to take
    taken = src[torch.clamp(k, min=0)]  # a false position's index is clamped and unused
    return torch.where(m, taken, self.expand(shape).reshape(-1)).reshape(shape)


@register(aten.masked_scatter.default)
def masked_scatter_kernels(self, mask, source):
    """aten.masked_scatter below autograd (masked_select's backward, inference_mode): the same
    rule as masked_scatter above, in kernels: the mask broadcast (copy.bool), its integer
    cumsum (integer.py's exact prefix sum), one gather of source at cumsum - 1 and one select."""
    op = "masked_scatter"
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype} "
                           "(torch refuses it too)")
    x, src = np_(self, op), np_(source, op).reshape(-1)
    shape = tuple(torch.broadcast_shapes(self.shape, mask.shape))
    m = O.K["copy.bool"](np.broadcast_to(arr(mask), shape).reshape(-1))
    k = O.K["sub.i64"](integer.cumsum_array(O.K["to_i64.bool"](m), 0), I.const(1, "i64"))
    if k.size:  # (kernels of the step: a fault claim where it fails, never an error or a host read mid-run)
        faults.holds(O.K["lt.i64"](k[-1:], I.const(src.size, "i64")), op,
                     f"the mask has more ones than the source's {src.size} elements (torch refuses it too)")
    if src.size == 0:  # no true position (checked above): self, broadcast
        return _result(P.copy(np.broadcast_to(x, shape)))
    taken = P.gather(src.reshape(1, -1, 1), k.reshape(1, -1), P.const(0.0, ())).reshape(-1)
    return _result(P.select(m, taken, np.broadcast_to(x, shape).reshape(-1)).reshape(shape))


def _masked_scatter_(self, mask, source):
    out = masked_scatter(self, mask, source)
    if out.shape != self.shape:
        raise RuntimeError(f"masked_scatter_: mask of shape {list(mask.shape)} does not broadcast to self's "
                           f"{list(self.shape)} (torch refuses it too)")
    return self.copy_(out)


# -- histogram ---------------------------------------------------------------------------------------------------
def _edges_between(lo, hi, bins: int):
    """bins + 1 edges from 0-d lo to hi, torch's CPU linspace for float32: step = (hi - lo) / bins,
    edge i = fma(step, i, lo) below the halfway point steps // 2, else fma(-step, steps - 1 - i,
    hi) (torch's kernel, its multiply-add contracted: verified against it bit for bit)."""
    steps = bins + 1
    K, i = O.K, O.positions(steps, P.xp_of(lo))
    step = P.div(P.sub(hi, lo), P.const(F32(bins), ()))
    row = lambda v: P.add(P.const(-0.0, (steps,)), v)  # noqa: E731  (a 0-d value on every edge: v + -0 = v)
    low = P.fma(row(step), K["to_f32.i64"](i), row(lo))
    high = P.fma(P.neg(row(step)), K["to_f32.i64"](K["sub.i64"](O.const(steps - 1), i)), row(hi))
    return P.select(K["lt.i64"](i, O.const(steps // 2)), low, high)


def _upper_bound(edges, v):
    """std::upper_bound(edges, v) for each v (int64 [n]), torch's bin search, step for step: first
    = 0, count = E; while count > 0: step = count // 2, it = first + step; if not v < edges[it]:
    first = it + 1, count -= step + 1; else count = step. A fixed number of rounds (E's bit
    length), each a gather of edges[it] and integer kernels; for increasing edges this is the
    number of edges <= v, and for edges that are not (torch accepts them) it is torch's answer."""
    K, n, E = O.K, v.shape[0], edges.shape[0]
    first, count = K["copy.i64"](I.const(0, "i64", (n,))), K["copy.i64"](I.const(E, "i64", (n,)))
    for _ in builtins_range(E.bit_length()):
        live = K["lt.i64"](O.const(0), count)
        step = K["div_floor.i64"](count, O.const(2))
        it = K["add.i64"](first, step)
        probe = P.gather(edges.reshape(1, E, 1), it.reshape(1, n), P.const(0.0, ())).reshape(n)
        right = K["and.bool"](live, K["not.bool"](P.lt(v, probe)))
        first = K["select.i64"](right, K["add.i64"](it, O.const(1)), first)
        count = K["select.i64"](live, K["select.i64"](right, K["sub.i64"](count, K["add.i64"](step, O.const(1))),
                                                         step), count)
    return first


def countable(n: int, op: str) -> None:
    """Counts are binary32 sums of ones, exact below 2^24: more elements are refused."""
    if n >= MAX_COUNT:
        raise UnsupportedOpError(f"{op} of {n} elements: its counts are binary32 sums, exact below 2^24 elements; "
                                 "count fewer at a time")


def data_range(col, widen: float, op: str):
    """(min, max) of the float32 1-d col as 0-d arrays (folds of min / max kernels), each widened
    by `widen` where they are equal (histogram: 0.5, histc: 1). A NaN or infinite extreme is a
    fault claim (rule `domain`; torch refuses it), never a host read or an error mid-run."""
    lo, hi = fold_dims(P.min_, col, [0], np.inf), fold_dims(P.max_, col, [0], -np.inf)
    for end, v in (("min", lo), ("max", hi)):
        faults.finite(v.reshape(1), op, f"the data's {end}: a range that is not finite (torch refuses it too)")
    same, w = P.eq(lo, hi), P.const(F32(widen), ())
    return P.select(same, P.sub(lo, w), lo), P.select(same, P.add(hi, w), hi)


def bin_sums(b, inside, bins: int, weight=None):
    """[bins]: per bin c the binary32 sum in row order of select(inside and b == c, weight, +0)
    over the rows (int64 bins b [n], bool inside [n]); without weights of to_f32 of the hits (a
    count: exact, by countable)."""
    K = O.K
    hit = K["and.bool"](inside[None, :], K["eq.i64"](b[None, :], O.positions(bins, P.xp_of(b))[:, None]))
    terms = K["to_f32.bool"](hit) if weight is None else P.select(hit, weight[None, :], P.const(0.0, ()))
    return sum_dims(terms, [-1])


def _histogram(x, edges, weight, density: bool, op: str):
    """Counts (or weight sums) per bin of the float32 rows x [n, D] for D lists of increasing
    edges [B_d + 1]: along dim d value v falls in bin upper_bound(edges, v) - 1 (for increasing
    edges: #edges <= v, minus 1), the last bin also taking
    v == edges[-1]; a row with a value outside [edges[0], edges[-1]] or NaN in none (torch's CPU
    rule); bin (b_0, ..., b_D-1) row-major. Per bin a binary32 sum in row order of select(hit,
    weight, +0) (a count: of to_f32(hit), exact below 2^24 rows). density: hist / sum(hist),
    then / (edges[b + 1] - edges[b]) per dim in dim order (torch's)."""
    K = O.K
    bins = [e.shape[0] - 1 for e in edges]
    n, total_bins = x.shape[0], int(np.prod(bins))
    countable(n, op)
    if n == 0 or total_bins == 0:
        hist = P.copy(P.const(0.0, (total_bins,)))
    else:
        inside, flat = None, O.const(0)
        for d, e in enumerate(edges):
            v = x[:, d]
            ok = K["and.bool"](P.le(e[:1], v), P.le(v, e[-1:]))
            b = K["min.i64"](K["sub.i64"](_upper_bound(e, v), O.const(1)), O.const(bins[d] - 1))
            inside = ok if inside is None else K["and.bool"](inside, ok)
            flat = K["add.i64"](K["mul.i64"](flat, O.const(bins[d])), b)
        hist = bin_sums(flat, inside, total_bins, weight)
    hist = hist.reshape(bins)
    if density:
        every = lambda v: P.add(P.const(-0.0, hist.shape), v)  # noqa: E731  (on every bin by a kernel: v + -0 = v)
        hist = P.div(hist, every(sum_dims(hist, None)))
        for d, e in enumerate(edges):
            shape = [1] * len(bins)
            shape[d] = bins[d]
            hist = P.div(hist, every(P.sub(e[1:], e[:-1]).reshape(shape)))
    return hist


def _range_edges(cols, bins, range, op):
    """Per column of cols [n, D]: bins[d] + 1 edges over range[2d:2d+2], or over the column's
    [min, max] (fold of min / max kernels; [v - 0.5, v + 0.5] where they are equal, [0, 1] when
    there are no rows), by torch's linspace (_edges_between)."""
    D = cols.shape[1]
    if any(b <= 0 for b in bins):
        raise RuntimeError(f"{op}: bins must be > 0, but got {list(bins)} (torch refuses it too)")
    out = []
    for d in builtins_range(D):
        if range is not None:
            lo, hi = float(range[2 * d]), float(range[2 * d + 1])
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise RuntimeError(f"{op}: range of [{lo}, {hi}] is not finite (torch refuses it too)")
            if lo > hi:
                raise RuntimeError(f"{op}: min should not exceed max, but got min {lo} max {hi} (torch refuses it "
                                   "too)")
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            lo32, hi32 = P.const(F32(lo), ()), P.const(F32(hi), ())
        elif cols.shape[0] == 0:
            lo32, hi32 = P.const(0.0, ()), P.const(1.0, ())  # torch's default range
        else:
            lo32, hi32 = data_range(P.copy(cols[:, d]), 0.5, op)
        out.append(_edges_between(lo32, hi32, int(bins[d])))
    return out


def _weights(weight, a, op):
    if weight is None:
        return None
    if tuple(weight.shape) != tuple(a.shape):
        raise RuntimeError(f"{op}: if weight tensor is provided it should have the same shape as the input tensor "
                           "(torch refuses it too)")
    w = np_(weight, op)
    return (w if w.flags.c_contiguous else P.copy(w)).reshape(-1)


def _flat(a, op):
    x = np_(a, op)
    return (x if x.flags.c_contiguous else P.copy(x)).reshape(-1)


@register(aten.histogram.bin_ct)
def histogram_bin_ct(a, bins=100, *, range=None, weight=None, density=False):
    """torch.histogram(x, bins: int): _range_edges and _histogram of x flattened (one column)."""
    op = "histogram"
    x = _flat(a, op).reshape(-1, 1)
    edges = _range_edges(x, [int(bins)], range, op)
    return _result(_histogram(x, edges, _weights(weight, a, op), density, op)), _result(edges[0])


def _given_edges(bins, op):
    e = np_(bins, op)
    if bins.dim() != 1 or bins.numel() < 2:
        raise RuntimeError(f"{op}: bins must be a 1-d tensor of at least 2 edges (bins > 0), got {list(bins.shape)} "
                           "(torch refuses it too)")
    return P.copy(e)


@register(aten.histogram.bins_tensor)
def histogram_bins_tensor(a, bins, *, weight=None, density=False):
    """torch.histogram(x, bins: Tensor): the given edges (returned as a copy)."""
    op = "histogram"
    edges = _given_edges(bins, op)
    return _result(_histogram(_flat(a, op).reshape(-1, 1), [edges], _weights(weight, a, op), density, op)), \
        _result(edges)


def _rows(a, op):
    x = np_(a, op)
    if x.ndim < 1:
        raise RuntimeError(f"{op}: input tensor should have at least 1 dimension (torch refuses it too)")
    x = x if x.flags.c_contiguous else P.copy(x)
    return x.reshape(-1, x.shape[-1])


def _dd_weights(weight, a, op):
    if weight is None:
        return None
    if tuple(weight.shape) != tuple(a.shape[:-1]):
        raise RuntimeError(f"{op}: if weight tensor is provided, it should have the same shape as the input tensor "
                           "excluding its innermost dimension (torch refuses it too)")
    w = np_(weight, op)
    return (w if w.flags.c_contiguous else P.copy(w)).reshape(-1)


def _dd_check(a, n_bins, op):
    if a.dim() < 1 or n_bins != a.shape[-1]:
        raise RuntimeError(f"{op}: The size of bins must be equal to the innermost dimension of the input. "
                           "(torch refuses it too)")


@register(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(a, bins, *, range=None, weight=None, density=False):
    op = "histogramdd"
    _dd_check(a, len(bins), op)
    return [_result(e) for e in _range_edges(_rows(a, op), list(bins), range, op)]


@register(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(a, bins, *, range=None, weight=None, density=False):
    """torch.histogramdd(x, bins: ints): per innermost column, _range_edges; then _histogram."""
    op = "histogramdd"
    _dd_check(a, len(bins), op)
    x = _rows(a, op)
    return _result(_histogram(x, _range_edges(x, list(bins), range, op), _dd_weights(weight, a, op), density, op))


@register(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(a, bins, *, weight=None, density=False):
    """torch.histogramdd(x, bins: tensors): the given edges per innermost column."""
    op = "histogramdd"
    _dd_check(a, len(bins), op)
    edges = [_given_edges(b, op) for b in bins]
    return _result(_histogram(_rows(a, op), edges, _dd_weights(weight, a, op), density, op))


# -- segment_reduce ----------------------------------------------------------------------------------------------
_REDUCTIONS = ("max", "mean", "min", "sum", "prod")
_PROD_BACKWARD_MAX = 256


def _segments(data, lengths, offsets, axis: int, unsafe: bool, op: str):
    """(x [B, N, I], member bool [B, S, N], length int64 [B, S], out shape): segment s of outer
    row b covers positions start <= k < end along axis (start, end from offsets, or from the
    integer cumsum of lengths). Segments outside [0, N] or out of order are a fault claim (torch
    reads out of bounds or writes a position twice)."""
    x = np_(data, op)
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expected data with at least one dimension (torch refuses it too)")
    axis = axis % x.ndim
    B, N = int(np.prod(x.shape[:axis])), x.shape[axis]
    x = (x if x.flags.c_contiguous else P.copy(x)).reshape(B, N, -1)
    given = lengths if lengths is not None else offsets
    if given is None or given.dtype not in (torch.int64, torch.int32) or given.dim() != axis + 1 or \
            tuple(given.shape[:axis]) != tuple(data.shape[:axis]):
        raise RuntimeError(f"{op}: expected lengths or offsets of int64 or int32 shaped data.shape[:axis] + "
                           "[segments] (torch refuses it too)")
    g = O.K[f"to_i64.{integer.DT[given.dtype]}"](arr(given).reshape(B, -1))  # (a kernel, not a native cast)
    K, zero = O.K, I.const(0, "i64")
    if lengths is not None:
        ends = integer.cumsum_array(g, 1)
        starts, length = K["sub.i64"](ends, g), g
    else:
        starts, ends = g[:, :-1], g[:, 1:]
        length = K["sub.i64"](ends, starts)
    # (kernels of the step: a fault claim where they fail, never an error mid-run)
    faults.holds(K["and.bool"](K["and.bool"](K["le.i64"](zero, starts), K["le.i64"](ends, I.const(N, "i64"))),
                               K["le.i64"](zero, length)), op,
                 f"segments must be in order within [0, {N}] (lengths >= 0, non-decreasing offsets): torch reads out "
                 "of bounds or overwrites there")
    if lengths is not None and not unsafe and g.shape[1]:
        faults.holds(K["eq.i64"](ends[:, -1], I.const(N, "i64")), op,
                     f"each row's lengths must sum to data.size(axis) = {N} when !unsafe (torch refuses it too)")
    k = O.positions(N, P.xp_of(starts))[None, None, :]
    member = O.K["and.bool"](O.K["le.i64"](starts[..., None], k), O.K["lt.i64"](k, ends[..., None]))
    shape = tuple(data.shape[:axis]) + (length.shape[1],) + tuple(data.shape[axis + 1:])
    return x, member, length, shape


@register(aten.segment_reduce.default)
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """torch's CPU loop as kernels: per segment acc = initial (or -inf, +inf, 0, 1 by reduction);
    for every position k of the axis in increasing order acc = select(k in segment, op(acc, v),
    acc) with op: max select(isnan(v), v, select(lt(acc, v), v, acc)) (std::max), min the same
    with lt(v, acc), sum/mean add, prod mul; mean then divides by to_f32(length) where length > 0
    and acc is not NaN, and is NaN for an empty segment without an initial value."""
    op = "segment_reduce"
    if reduce not in _REDUCTIONS or indices is not None:
        raise RuntimeError(f"{op}: reduce must be one of {_REDUCTIONS}, with lengths or offsets (torch's rule)")
    x, member, length, shape = _segments(data, lengths, offsets, axis, unsafe, op)
    B, S, I_ = x.shape[0], member.shape[1], x.shape[2]
    start = float(initial) if initial is not None else \
        {"max": -np.inf, "min": np.inf, "sum": 0.0, "mean": 0.0, "prod": 1.0}[reduce]
    acc = P.const(F32(start), (B, S, I_))
    for k in builtins_range(x.shape[1]):
        v = P.xp_of(x).broadcast_to(x[:, None, k, :], (B, S, I_))
        if reduce == "max":
            new = P.select(O.is_nan(v), v, P.select(P.lt(acc, v), v, acc))
        elif reduce == "min":
            new = P.select(O.is_nan(v), v, P.select(P.lt(v, acc), v, acc))
        elif reduce == "prod":
            new = P.mul(acc, v)
        else:
            new = P.add(acc, v)
        acc = P.select(member[:, :, k, None], new, acc)
    if reduce == "mean":
        xp = P.xp_of(acc)
        n = xp.broadcast_to(O.K["to_f32.i64"](length)[..., None], acc.shape)
        has = xp.broadcast_to(O.K["lt.i64"](O.const(0), length)[..., None], acc.shape)
        number = O.K["not.bool"](O.is_nan(acc))
        divided = P.select(O.K["and.bool"](has, number), P.div(acc, P.select(has, n, 1.0)), acc)
        acc = divided if initial is not None else P.select(has, divided, P.const(np.nan, ()))
    return _result(P.copy(acc).reshape(shape))


@register(aten._segment_reduce_backward.default)
def segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    """torch's CPU backward as kernels, from +0 (each position in at most one segment): sum: the
    segment's gradient; mean: it / to_f32(length); max/min: the gradient to every position whose
    value is NaN or equals the output, then where the segment has c >= 2 of them and that
    gradient is > 0 (torch's test), divided by c; prod: grad * output / v, or where v is 0 or
    NaN grad * the product (from initial, else 1) of the segment's other values in order."""
    op = "segment_reduce backward"
    x, member, length, shape = _segments(data, lengths, offsets, axis, True, op)
    B, S, N, I_ = x.shape[0], member.shape[1], x.shape[1], x.shape[2]
    if reduce == "prod" and N > _PROD_BACKWARD_MAX:
        raise UnsupportedOpError(f"{op}: prod over an axis of {N} > {_PROD_BACKWARD_MAX} positions: its backward "
                                 "recomputes each zero's exclusive product in torch's order (N^2 products); reduce "
                                 "shorter segments, or take the gradient of a sum of logs")
    g = np_(grad, op).reshape(B, S, I_)
    out = np_(output, op).reshape(B, S, I_)
    zero = P.const(0.0, ())
    cols = []
    if reduce in ("max", "min"):
        hits = []
        for k in builtins_range(N):
            v = x[:, None, k, :]
            hits.append(O.K["and.bool"](member[:, :, k, None], O.K["or.bool"](O.is_nan(v), P.eq(v, out))))
        count = P.const(0.0, (B, S, I_))
        for h in hits:
            count = P.add(count, O.K["to_f32.bool"](h))
    for k in builtins_range(N):
        v = x[:, None, k, :]
        m = member[:, :, k, None]
        if reduce == "sum":
            per = P.select(m, g, zero)
        elif reduce == "mean":
            per = P.select(m, P.div(g, O.K["to_f32.i64"](length)[..., None]), zero)
        elif reduce in ("max", "min"):
            per = P.select(hits[k], g, zero)
            split = O.K["and.bool"](P.le(P.const(2.0, ()), count), P.lt(zero, per))
            per = P.select(split, P.div(per, count), per)
        elif reduce == "prod":
            special = O.K["or.bool"](O.is_nan(v), P.eq(v, zero))
            ex = P.const(F32(float(initial) if initial is not None else 1.0), (B, S, I_))
            for j in builtins_range(N):
                if j != k:
                    ex = P.select(member[:, :, j, None], P.mul(ex, x[:, None, j, :]), ex)
            per = P.select(m, P.select(special, P.mul(g, ex), P.div(P.mul(g, out), v)), zero)
        else:
            raise RuntimeError(f"{op}: reduce must be one of {_REDUCTIONS} (torch's rule)")
        # each position is in at most one segment: the sum over segments is that one (+0 elsewhere)
        cols.append(fold_dims(P.add, per, [1], 0.0))
    gi = P.place((B, N, I_), 1, [(k, 1, c[:, None, :]) for k, c in enumerate(cols)])  # one CAT of the columns
    return _result(gi.reshape(tuple(data.shape)))


def _weight_norm(v, g, dim=0):
    """torch._weight_norm (nn.utils weight_norm, both APIs: wav2vec2/HuBERT's positional conv) as
    the composition torch itself runs for a dim other than the first or last. Its fused path's
    backward, aten._weight_norm_interface_backward, has no definition or decomposition; autograd
    differentiates these pieces, each RepOps'."""
    return v * (g / torch.norm_except_dim(v, 2, dim))


def functions() -> dict:
    """RepOpsFunctions' routes: grid sampling (F.grid_sample, torch.grid_sampler and its 2-d/3-d
    ops), masked_scatter and weight norm above autograd, as compositions autograd differentiates
    piece by piece."""
    aten = torch.ops.aten
    route = lambda a, g, i, p, ac: grid_sampler(a, g, i, p, ac)  # noqa: E731
    table = {F.grid_sample: _grid_sample, torch.masked_scatter: masked_scatter,
             torch.Tensor.masked_scatter: masked_scatter, torch.Tensor.masked_scatter_: _masked_scatter_,
             torch._weight_norm: _weight_norm, VF._weight_norm: _weight_norm, aten._weight_norm.default: _weight_norm}
    for f in (VF.grid_sampler, VF.grid_sampler_2d, VF.grid_sampler_3d, aten.grid_sampler.default,
              aten.grid_sampler_2d.default, aten.grid_sampler_3d.default):
        table[f] = route
    if hasattr(torch, "grid_sampler"):
        table[torch.grid_sampler] = route
    return table

