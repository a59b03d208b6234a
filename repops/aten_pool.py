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


def _index(t, x, nd, op):
    """A backward's int64 indices as [N, C, *out] (unbatched: a batch of one, as _batched)."""
    if t.dtype != torch.int64:
        raise UnsupportedOpError(f"{op}: indices must be int64 (what the forward returns), got {t.dtype}")
    i = arr(t)
    return i.reshape((1,) + i.shape) if x.dim() == nd + 1 else i


def _unbatched_index(i, x, nd):
    """A forward's int64 indices with x's batching (_unbatched's)."""
    return _ints(i.reshape(i.shape[1:]) if x.dim() == nd + 1 else i)


# -- upsampling ---------------------------------------------------------------------------------------------------
def _scales(scales, nd):
    return list(scales) + [None] * (nd - len(scales))


def _torch_disagrees(op, in_sizes, out_sizes, scales, twice=False):
    """A scale factor whose output size is the input size (nearest: or twice it) while 1/scale is
    not in/out: torch's CPU kernels disagree among themselves there (the 2-d nearest and the
    linear forwards take the sizes' shortcut, the 1-d nearest and bicubic forwards the scale,
    some backwards copy the gradient): refused rather than matched to one of them."""
    for n, m, sc in zip(in_sizes, out_sizes, scales):
        if sc is not None and sc > 0 and (m == n or (twice and m == 2 * n)) and np.float32(1.0 / sc) != np.float32(n / m):
            raise UnsupportedOpError(
                f"aten.{op}: scale_factor {sc} makes {m} positions of {n}, where torch's own kernels disagree (some "
                "use the sizes, some the scale); pass size= instead, or recompute_scale_factor=True")


def _nearest(nd, exact):
    def impl(x, output_size, *scales):
        op, sc = f"upsample_nearest{nd}d", _scales(scales, nd)
        if not exact:
            _torch_disagrees(op, x.shape[-nd:], output_size, sc, twice=True)
        return tt(U.upsample_nearest(np_(x, op), list(output_size), sc, exact))
    return impl


def _nearest_backward(nd, exact):
    def impl(grad, output_size, input_size, *scales):
        op, sc = f"upsample_nearest{nd}d_backward", _scales(scales, nd)
        if not exact:
            _torch_disagrees(op, input_size[-nd:], output_size, sc, twice=True)
        return tt(U.upsample_nearest_backward(np_(grad, op), list(input_size[-nd:]), sc, exact))
    return impl


def _linear(nd):
    def impl(x, output_size, align_corners, *scales):
        op, sc = f"upsample_linear{nd}d", _scales(scales, nd)
        if not align_corners:
            _torch_disagrees(op, x.shape[-nd:], output_size, sc)
        return tt(U.upsample_linear(np_(x, op), list(output_size), bool(align_corners), sc))
    return impl


def _linear_backward(nd):
    def impl(grad, output_size, input_size, align_corners, *scales):
        op, sc = f"upsample_linear{nd}d_backward", _scales(scales, nd)
        if not align_corners:
            _torch_disagrees(op, input_size[-nd:], output_size, sc)
        return tt(U.upsample_linear_backward(np_(grad, op), list(input_size[-nd:]), bool(align_corners), sc))
    return impl


for _nd, _lin in ((1, "upsample_linear1d"), (2, "upsample_bilinear2d"), (3, "upsample_trilinear3d")):
    register(getattr(aten, f"upsample_nearest{_nd}d").default)(_nearest(_nd, False))
    register(getattr(aten, f"_upsample_nearest_exact{_nd}d").default)(_nearest(_nd, True))
    register(getattr(aten, f"upsample_nearest{_nd}d_backward").default)(_nearest_backward(_nd, False))
    register(getattr(aten, f"_upsample_nearest_exact{_nd}d_backward").default)(_nearest_backward(_nd, True))
    register(getattr(aten, _lin).default)(_linear(_nd))
    register(getattr(aten, f"{_lin}_backward").default)(_linear_backward(_nd))


@register(aten.upsample_bicubic2d.default)
def upsample_bicubic2d(x, output_size, align_corners, *scales):
    sc = _scales(scales, 2)
    if not align_corners:
        _torch_disagrees("upsample_bicubic2d", x.shape[-2:], output_size, sc)
    return tt(U.upsample_bicubic(np_(x, "upsample_bicubic2d"), list(output_size), bool(align_corners), sc))


@register(aten.upsample_bicubic2d_backward.default)
def upsample_bicubic2d_backward(grad, output_size, input_size, align_corners, *scales):
    op, sc = "upsample_bicubic2d_backward", _scales(scales, 2)
    if not align_corners:
        _torch_disagrees(op, input_size[-2:], output_size, sc)
    return tt(U.upsample_bicubic_backward(np_(grad, op), list(input_size[-2:]), bool(align_corners), sc))


@register(aten._upsample_bilinear2d_aa.default)
def upsample_bilinear2d_aa(x, output_size, align_corners, *scales):
    """Refused where torch's CPU kernel is wrong (torch 2.13): resampling the height to a width
    of 1, it repeats the first row's value for every output row."""
    if output_size[1] == 1 and output_size[0] != x.shape[-2]:
        raise UnsupportedOpError(f"aten._upsample_bilinear2d_aa of {list(x.shape)} to {list(output_size)}: to a width "
                                 "of 1 while the height changes, torch's CPU kernel repeats the first row; resize the "
                                 "height and the width in two calls")
    return tt(U.upsample_bilinear_aa(np_(x, "_upsample_bilinear2d_aa"), list(output_size), bool(align_corners),
                                     _scales(scales, 2)))


@register(aten._upsample_bilinear2d_aa_backward.default)
def upsample_bilinear2d_aa_backward(grad, output_size, input_size, align_corners, *scales):
    op = "_upsample_bilinear2d_aa_backward"
    return tt(U.upsample_bilinear_aa_backward(np_(grad, op), list(input_size[-2:]), bool(align_corners),
                                              _scales(scales, 2)))


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
        return _unbatched(y, x, nd), _unbatched_index(i, x, nd)
    return impl


def _adaptive_max_backward(nd):
    def impl(grad, x, indices):
        op = f"adaptive_max_pool{nd}d_backward"
        i = _index(indices, x, nd, op)
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
        return _unbatched(y, x, nd), _unbatched_index(i, x, nd)
    return impl


def _max_pool_with_indices_backward(nd):
    def impl(grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
        op = f"max_pool{nd}d_with_indices_backward"
        k, st, pad, dil = _max_pool_args(nd, x, kernel, stride, padding, dilation)
        i = _index(indices, x, nd, op)
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
