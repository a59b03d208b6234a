"""Mixture-of-experts routing, the ops Hugging Face's default `grouped_mm` experts path calls:
torch._grouped_mm (a matmul over groups of rows given by offsets; RepOps' one op
repops::grouped_mm above autograd), histc (token counts per expert), cumsum of those counts to
int32 offsets and bincount with a minlength (the router's auxiliary loss; the stable sort of
integer expert ids is repops/integer.py's), as compositions of the binary32 primitives, the
matmul and gather kernels and integer kernels, so a dispute follows every routed token to one
element.
Value-dependent group sizes never become kernel shapes: every expert's product is computed for
every row and each row keeps its own group's, so the committed graph is the same for every
routing. docs/NUMERICS.md §8, "Mixture of experts"."""
from __future__ import annotations

import functools
import math

import numpy as np
import torch

from . import aten_nn  # noqa: F401  (the float cumsum this module extends is registered first)
from . import faults, integer
from .aten import REGISTRY, _result, arr, np_, register, tensor, tt
from .aten_misc import bin_sums, countable, data_range  # (histc counts as histogram does)
from .errors import UnsupportedOpError
from .reference import linalg as RL
from .reference import ordering as O
from .reference import prims as P

aten = torch.ops.aten
F32 = np.float32


# -- _grouped_mm -----------------------------------------------------------------------------------------------
def groups(offs, n: int, op: str):
    """The group of each position 0..n-1 (int64 [n]) for int32 offsets [G] (group j: positions
    offs[j-1] <= p < offs[j], offs[-1] = 0 before the first): the number of offsets <= p, G for
    a position past the last offset (in no group). Offsets that are not non-decreasing within
    [0, n] are a fault (rule `offsets`): torch reads past its rows or leaves them unwritten."""
    if offs is None or offs.dtype != torch.int32 or offs.dim() != 1:
        raise UnsupportedOpError(f"{op}: offs must be a 1-d int32 tensor of group ends (torch's rule), got "
                                 f"{None if offs is None else f'{offs.dtype}{list(offs.shape)}'}")
    o = O.K["to_i64.i32"](arr(offs))
    faults.offsets_ordered(o, n, op)
    pos = O.positions(n, P.xp_of(o))
    return O._count(O.K["le.i64"](o[None, :], pos[:, None]))  # [n]: #{j: offs[j] <= p}


def _rows_by_group(x, w, g):
    """out[s] = x[s] @ w[g[s]] (+0 where g[s] is past the last group): x [S, K] @ w [E, K, N] as
    one matmul against every expert side by side ([K, E*N], each element the spec's fma chain
    over k), then one gather of each row's own expert."""
    S, K = x.shape
    E, _, N = w.shape
    side = P.copy(np.transpose(w, (1, 0, 2))).reshape(K, E * N)
    every = RL.matmul(x, side).reshape(S, E, N)
    return P.gather(every, g.reshape(S, 1), P.const(0.0, ())).reshape(S, N)


def _per_group(x, member, axis: int):
    """[G, *x.shape]: x once per group, every slice along `axis` outside the group +0 (one
    select: an inf there must not become NaN in the product). member: bool [G, x.shape[axis]]."""
    shape = [member.shape[0]] + [1] * x.ndim
    shape[axis + 1] = x.shape[axis]
    return P.select(member.reshape(shape), x[None], P.const(0.0, ()))


@register(aten._grouped_mm.default, torch.ops.repops.grouped_mm.default)
def grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    """torch._grouped_mm for float32: 2d x 3d (rows of a in groups, group j times b[j]: MoE's
    experts), 2d x 2d (the reduction dim in groups -> one product per group [G, M, N]: the
    weights' gradient), 3d x 2d (columns of b in groups) and 3d x 3d (a batched matmul). Each
    output element is the spec's matmul fold over k in increasing order from +0; where the
    groups split the reduction (2d x 2d), positions outside group j enter group j's fold as
    +0 * +0 terms (so an empty group is +0). Rows or columns past the last offset are +0 (torch
    leaves them unwritten)."""
    op = "_grouped_mm"
    if bias is not None or out_dtype not in (None, torch.float32):
        raise UnsupportedOpError(f"{op} with bias or out_dtype={out_dtype}: RepOps defines it without a bias, in "
                                 "float32 (add the bias after the product)")
    x, w = np_(a, op), np_(b, op)
    if x.ndim in (2, 3) and w.ndim in (2, 3) and (x.ndim, w.ndim) != (2, 2) and x.shape[-1] != w.shape[-2]:
        raise RuntimeError(f"{op}: contraction dimension of mat_a and mat_b must match (torch refuses it too)")
    groups_of = {(2, 3): w.shape[0], (3, 2): x.shape[0]}.get((x.ndim, w.ndim))
    if groups_of is not None and offs is not None and offs.shape[0] != groups_of:
        raise RuntimeError(f"{op}: {offs.shape[0]} offsets for {groups_of} groups: matrix batch sizes have to match "
                           "(torch refuses it too)")
    if (x.ndim, w.ndim) == (3, 3):
        if offs is not None:
            raise UnsupportedOpError(f"{op}: a 3d x 3d product takes no offs (torch's rule)")
        return tt(RL.matmul(x, w))
    if (x.ndim, w.ndim) == (2, 3):
        return _result(_rows_by_group(x, w, groups(offs, x.shape[0], op)))
    if (x.ndim, w.ndim) == (3, 2):  # columns of b in groups: the transposed 2d x 3d
        out = _rows_by_group(np.transpose(w), np.transpose(x, (0, 2, 1)), groups(offs, w.shape[1], op))
        return _result(np.transpose(out))
    if (x.ndim, w.ndim) == (2, 2):
        g = groups(offs, x.shape[1], op)
        member = O.K["eq.i64"](O.positions(offs.shape[0], P.xp_of(g))[:, None], g[None, :])  # [G, K]
        return tt(RL.matmul(_per_group(x, member, 1), _per_group(w, member, 0)))
    raise UnsupportedOpError(f"{op} of a {x.ndim}d and a {w.ndim}d tensor: torch defines 2d and 3d operands only")


# -- histc -----------------------------------------------------------------------------------------------------
@register(aten.histc.default)
def histc(a, bins=100, min=0, max=0):
    """torch.histc of float32 data: how many elements fall in each of `bins` equal bins from
    min to max, as float32, by torch's CPU rule: x in [min, max] (NaN nowhere) goes to bin
    trunc(((x - min) * bins) / (max - min)) (a sub, mul and div in binary32, then
    to_int32_trunc), the last bin also taking x == max. Kernels: those maps, per bin the eq.i64
    of every element's bin, and per bin a binary32 sum of the hits (exact: fewer than 2^24
    elements). No bin edges enter: torch's kernel never reads them either. min == max (torch's
    default 0, 0): the range is the data's min and max (folds), each widened by 1 where they are
    equal (aten_misc.data_range: a NaN or infinite extreme is a fault claim)."""
    op = "histc"
    x = np_(a, op)
    if bins <= 0:
        raise RuntimeError(f"{op}: bins must be > 0, got {bins} (torch refuses it too)")
    lo, hi = float(min), float(max)
    from_data = lo == hi and x.size > 0
    if lo == hi and not from_data:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{op}: range of [{lo}, {hi}] is not finite (torch refuses it too)")
    if lo > hi:
        raise RuntimeError(f"{op}: max must be larger than min (torch refuses it too)")
    countable(x.size, op)
    flat = x.reshape(-1) if x.flags.c_contiguous else P.copy(x).reshape(-1)
    if flat.size == 0:
        return tt(P.copy(P.const(0.0, (bins,))))
    K, n = O.K, flat.shape[0]
    if from_data:  # min == max: the data's extremes, widened by 1 where equal
        lo0, hi0 = data_range(flat, 1.0, op)
        lo32, hi32 = P.add(P.const(-0.0, (n,)), lo0), P.add(P.const(-0.0, (n,)), hi0)  # (v + -0 = v on every row)
    else:
        lo32, hi32 = P.const(F32(lo), (n,)), P.const(F32(hi), (n,))
    q = P.div(P.mul(P.sub(flat, lo32), P.const(F32(bins), (n,))), P.sub(hi32, lo32))
    inside = K["and.bool"](P.le(lo32, flat), P.le(flat, hi32))
    b = K["min.i64"](K["to_i64.i32"](P.to_int32_trunc(q)), O.const(bins - 1))
    return tt(bin_sums(b, inside, bins))


# -- cumsum of float counts to int32 (Hugging Face's expert offsets) ------------------------------------------------
_float_cumsum = REGISTRY[aten.cumsum.default]


@register(aten.cumsum.default)
def cumsum(a, dim, dtype=None):
    """cumsum(x, dim, dtype=torch.int32) of float32 x (offsets from histc's counts): torch casts
    x to int32 first (truncation: to_int32_trunc, which saturates where torch's cast is
    undefined, outside [-2^31, 2^31)), then sums exactly (the integer cumsum's kernels). Other
    integer dtypes: refused, naming the cast to write first; float32: the float scan."""
    if a.is_floating_point() and dtype is not None and not dtype.is_floating_point:
        if dtype != torch.int32:
            raise UnsupportedOpError(f"cumsum of a float tensor with dtype={dtype}: RepOps defines the cast inside "
                                     "cumsum for int32; write x.long().cumsum(dim) (an exact cast, then an integer "
                                     "cumsum)")
        return tensor(integer.cumsum_array(P.to_int32_trunc(np_(a, "cumsum")), dim, torch.int32))
    return _float_cumsum(a, dim, dtype)


# -- above autograd: every grouped matmul as RepOps' one op --------------------------------------------------------
def _routed(func):
    """torch._grouped_mm / F.grouped_mm with offsets as repops::grouped_mm (torch's meta accepts
    bf16 only: torch.export could not capture a float32 MoE's aten op); anything else as is."""
    def run(a, b, offs=None, bias=None, out_dtype=None):
        if offs is None or bias is not None or out_dtype not in (None, torch.float32):
            return func(a, b, offs=offs, bias=bias, out_dtype=out_dtype)
        return torch.ops.repops.grouped_mm(a, b, offs)
    return run


def _bincount(x, weights=None, minlength=0):
    """torch.bincount(ids, minlength=m) of 1-d integer ids (Mixtral's and Qwen2-MoE's router
    auxiliary loss: tokens per expert) as a fixed-length count: (ids == 0..m-1) summed over the
    ids, integer kernels. Its length would depend on the values if an id reached m, so ids are
    read through a gather on 0..m-1 first: an id outside [0, m) is a fault (rule `index`) where
    torch would return a longer vector. Weights, or no minlength: torch's own (a shape from
    the values: not a job's graph)."""
    if weights is not None or minlength <= 0 or x.dim() != 1 or x.is_floating_point() or x.dtype == torch.bool:
        return torch.bincount(x, weights, minlength)
    classes = torch.arange(minlength, device=x.device)
    checked = classes.gather(0, x.long())  # (= x, each id in range)
    return (checked[:, None] == classes[None, :]).sum(0)


def functions() -> dict:
    """RepOpsFunctions' routes for MoE: torch._grouped_mm, F.grouped_mm (and custom_route:
    transformers' own op) as repops::grouped_mm, so training and a job's graph hold the same
    node; torch.bincount with a minlength as a fixed-length count."""
    table = {torch._grouped_mm: _routed(torch._grouped_mm), torch.bincount: _bincount}
    if hasattr(torch.nn.functional, "grouped_mm"):
        table[torch.nn.functional.grouped_mm] = _routed(torch.nn.functional.grouped_mm)
    return table


def _transformers_grouped_mm(input, weight, offs):
    return torch.ops.repops.grouped_mm(input, weight, offs)


@functools.cache
def custom_route(func):
    """A custom op's route, looked up by name (its library may load after the routes were
    built): transformers' `grouped_mm_fallback` (what its grouped_mm experts path calls while
    torch.export traces a float32 model, or on a torch without a CPU grouped_mm; it leaves rows
    past the last offset 0, as this definition does) is repops::grouped_mm. Else None."""
    name = func._qualified_op_name if isinstance(func, torch._ops.OpOverloadPacket) else func._schema.name
    return _transformers_grouped_mm if name == "transformers::grouped_mm_fallback" else None
