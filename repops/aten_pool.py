"""aten's resampling and pooling ops whose windows are not one strided view, on RepOps:
upsampling (nearest, nearest-exact, linear/bilinear/trilinear, bicubic, antialiased bilinear)
and its backward, adaptive average and max pooling of any sizes (+ backward), max pooling with
its int64 indices (+ the backward that takes them), replication padding (+ backward); each
the composition in repops/reference/resample.py or pooling.py (docs/NUMERICS.md §8,
"Upsampling, adaptive pooling, pooling indices, replication padding"). The forwards compute what torch's decompositions
(torch._decomp) did on RepOps' ops, kernel for kernel where there are float kernels, without
their arange nodes (which a job cannot settle on chain): positions are integer kernels,
gathers copies over CATs of views."""
from __future__ import annotations

import numpy as np
import torch

from .aten import _batched, _pool_args, _unbatched, arr, np_, register, tt
from .aten_sort import _ints
from .errors import UnsupportedOpError
from .reference import nn as N
from .reference import pooling as R
from .reference import resample as U

aten = torch.ops.aten


def _index(t, op):
    if t.dtype != torch.int64:
        raise UnsupportedOpError(f"{op}: indices must be int64 (what the forward returns), got {t.dtype}")
    return arr(t)


# -- upsampling backward --------------------------------------------------------------------------------------
def _nearest(nd, exact):
    def impl(x, output_size, *scales):
        op = f"upsample_nearest{nd}d"
        return tt(U.upsample_nearest(np_(x, op), list(output_size), list(scales) + [None] * (nd - len(scales)), exact))
    return impl


def _nearest_backward(nd, exact):
    def impl(grad, output_size, input_size, *scales):
        op = f"upsample_nearest{nd}d_backward"
        g = np_(grad, op)
        return tt(U.upsample_nearest_backward(g, list(input_size[-nd:]), list(scales) + [None] * (nd - len(scales)),
                                              exact))
    return impl


def _linear(nd):
    def impl(x, output_size, align_corners, *scales):
        op = f"upsample_linear{nd}d"
        return tt(U.upsample_linear(np_(x, op), list(output_size), bool(align_corners),
                                    list(scales) + [None] * (nd - len(scales))))
    return impl


def _linear_backward(nd):
    def impl(grad, output_size, input_size, align_corners, *scales):
        g = np_(grad, f"upsample_linear{nd}d_backward")
        return tt(U.upsample_linear_backward(g, list(input_size[-nd:]), bool(align_corners),
                                             list(scales) + [None] * (nd - len(scales))))
    return impl


for _nd, _lin in ((1, "upsample_linear1d"), (2, "upsample_bilinear2d"), (3, "upsample_trilinear3d")):
    register(getattr(aten, f"upsample_nearest{_nd}d").default)(_nearest(_nd, False))
    register(getattr(aten, f"_upsample_nearest_exact{_nd}d").default)(_nearest(_nd, True))
    register(getattr(aten, f"upsample_nearest{_nd}d_backward").default)(_nearest_backward(_nd, False))
    register(getattr(aten, f"_upsample_nearest_exact{_nd}d_backward").default)(_nearest_backward(_nd, True))
    register(getattr(aten, _lin).default)(_linear(_nd))
    register(getattr(aten, f"{_lin}_backward").default)(_linear_backward(_nd))


def _scales(scales):
    return list(scales) + [None] * (2 - len(scales))


register(aten.upsample_bicubic2d.default)(
    lambda x, output_size, align_corners, *scales: tt(U.upsample_bicubic(
        np_(x, "upsample_bicubic2d"), list(output_size), bool(align_corners), _scales(scales))))
register(aten.upsample_bicubic2d_backward.default)(
    lambda grad, output_size, input_size, align_corners, *scales: tt(U.upsample_bicubic_backward(
        np_(grad, "upsample_bicubic2d_backward"), list(input_size[-2:]), bool(align_corners), _scales(scales))))


register(aten._upsample_bilinear2d_aa.default)(
    lambda x, output_size, align_corners, *scales: tt(U.upsample_bilinear_aa(
        np_(x, "_upsample_bilinear2d_aa"), list(output_size), bool(align_corners), _scales(scales))))
register(aten._upsample_bilinear2d_aa_backward.default)(
    lambda grad, output_size, input_size, align_corners, *scales: tt(U.upsample_bilinear_aa_backward(
        np_(grad, "_upsample_bilinear2d_aa_backward"), list(input_size[-2:]), bool(align_corners), _scales(scales))))


# -- adaptive pooling ----------------------------------------------------------------------------------------------
def _sizes(op, nd, output_size, x):
    out = list(output_size)
    if len(out) != nd or any(o is None or o < 0 for o in out):
        raise UnsupportedOpError(f"aten.{op} to {out}: give {nd} sizes >= 0")
    if x.dim() not in (nd + 1, nd + 2) or (x.numel() and any(s == 0 for s in x.shape[-nd:])):
        raise UnsupportedOpError(f"aten.{op} of a {list(x.shape)} tensor: give [C, *S] or [N, C, *S] with non-empty S")
    return out


def _adaptive_avg(nd):
    def impl(x, output_size):
        op = f"_adaptive_avg_pool{nd}d"
        out = _sizes(op, nd, output_size, x)
        return _unbatched(R.adaptive_avg_pool(_batched(x, nd, op), out), x, nd)
    return impl


def _adaptive_avg_backward(nd):
    def impl(grad, x):
        op = f"_adaptive_avg_pool{nd}d_backward"
        return _unbatched(R.adaptive_avg_pool_backward(_batched(grad, nd, op), list(x.shape[-nd:])), x, nd)
    return impl


def _adaptive_max(nd):
    def impl(x, output_size):
        op = f"adaptive_max_pool{nd}d"
        out = _sizes(op, nd, output_size, x)
        y, i = R.adaptive_max_pool(_batched(x, nd, op), out)
        return _unbatched(y, x, nd), _ints(i.reshape(i.shape[1:]) if x.dim() == nd + 1 else i)
    return impl


def _adaptive_max_backward(nd):
    def impl(grad, x, indices):
        op = f"adaptive_max_pool{nd}d_backward"
        i = _index(indices, op)
        i = i.reshape((1,) + i.shape) if x.dim() == nd + 1 else i
        return _unbatched(R.adaptive_max_pool_backward(_batched(grad, nd, op), i, list(x.shape[-nd:])), x, nd)
    return impl


for _nd in (2, 3):
    register(getattr(aten, f"_adaptive_avg_pool{_nd}d").default)(_adaptive_avg(_nd))
    register(getattr(aten, f"_adaptive_avg_pool{_nd}d_backward").default)(_adaptive_avg_backward(_nd))
    register(getattr(aten, f"adaptive_max_pool{_nd}d").default)(_adaptive_max(_nd))
    register(getattr(aten, f"adaptive_max_pool{_nd}d_backward").default)(_adaptive_max_backward(_nd))


# -- max pooling with indices -----------------------------------------------------------------------------------
_FLAT_LIMIT = 2 ** 31


def _max_pool_args(nd, x, kernel, stride, padding, dilation):
    k, st, pad = _pool_args(nd, kernel, stride, padding)
    if int(np.prod(x.shape[-nd:])) >= _FLAT_LIMIT:
        raise UnsupportedOpError(f"max pooling with indices over {list(x.shape[-nd:])}: RepOps' flat indices are "
                                 "defined below 2^31 positions")
    return k, st, pad, N.per_axis(dilation, nd)


def _max_pool_with_indices(nd):
    def impl(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
        op = f"max_pool{nd}d_with_indices"
        k, st, pad, dil = _max_pool_args(nd, x, kernel, stride, padding, dilation)
        xb = _batched(x, nd, op)
        y = N.max_pool(xb, k, st, pad, dil, bool(ceil_mode))
        i = R.max_pool_indices(xb, k, st, pad, dil, bool(ceil_mode))
        return _unbatched(y, x, nd), _ints(i.reshape(i.shape[1:]) if x.dim() == nd + 1 else i)
    return impl


def _max_pool_with_indices_backward(nd):
    def impl(grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
        op = f"max_pool{nd}d_with_indices_backward"
        k, st, pad, dil = _max_pool_args(nd, x, kernel, stride, padding, dilation)
        i = _index(indices, op)
        i = i.reshape((1,) + i.shape) if x.dim() == nd + 1 else i
        gb, xb = _batched(grad, nd, op), _batched(x, nd, op)
        return _unbatched(R.max_pool_backward_indexed(gb, xb, i, k, st, pad, dil), x, nd)
    return impl


for _nd in (2, 3):
    register(getattr(aten, f"max_pool{_nd}d_with_indices").default)(_max_pool_with_indices(_nd))
    register(getattr(aten, f"max_pool{_nd}d_with_indices_backward").default)(_max_pool_with_indices_backward(_nd))


# -- replication padding ------------------------------------------------------------------------------------------
def _pads(nd, padding):
    return [(padding[2 * i], padding[2 * i + 1]) for i in range(nd)][::-1]  # (torch lists the last axis first)


def _replication_pad(nd):
    def impl(x, padding):
        return tt(R.replication_pad(np_(x, f"replication_pad{nd}d"), _pads(nd, padding)))
    return impl


def _replication_pad_backward(nd):
    def impl(grad, x, padding):
        return tt(R.replication_pad_backward(np_(grad, f"replication_pad{nd}d_backward"), list(x.shape[-nd:]),
                                             _pads(nd, padding)))
    return impl


for _nd in (1, 2, 3):
    register(getattr(aten, f"replication_pad{_nd}d").default)(_replication_pad(_nd))
    register(getattr(aten, f"replication_pad{_nd}d_backward").default)(_replication_pad_backward(_nd))
