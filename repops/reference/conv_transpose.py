"""Transposed convolution (ConvTranspose1d/2d/3d, aten.convolution with transposed=True) as
convolution's own kernels (docs/NUMERICS.md §8, "Transposed convolution"): a transposed
convolution IS the input gradient of the convolution with the same weight, stride, padding,
dilation and groups, so its forward is nn.conv_input_grad, its input gradient is nn.conv, and
its weight gradient is conv_backward's with the roles of input and gradient swapped. No new
kernel, and every order is the convolution's."""
from __future__ import annotations

from .fold import sum_dims
from . import prims as P
from .nn import conv, conv_backward, conv_input_grad


def output_size(S, K, stride, padding, output_padding, dilation) -> list[int]:
    """(s - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1 per spatial axis (torch's)."""
    return [(s - 1) * st - 2 * p + d * (k - 1) + op + 1
            for s, k, st, p, op, d in zip(S, K, stride, padding, output_padding, dilation)]


def conv_transpose(x, w, b, stride, padding, output_padding, dilation, groups):
    """x [N, Ci, *S], w [Ci, Co/groups, *K] -> [N, Co, *output_size]:
    y[n, co, s] = +0 + sum over kernel offsets k in row-major order of (fold(fma, +0) over the
    group's ci of w[ci, co, k] x[n, ci, i]) for the i with i*stride + k*dilation = s + padding
    (conv_input_grad with g = x); + bias[co] last. Output positions no window reaches
    (output_padding's) are +0 + bias."""
    S = output_size(x.shape[2:], w.shape[2:], stride, padding, output_padding, dilation)
    y = conv_input_grad(x, w, S, stride, padding, dilation, groups)
    if b is not None:
        y = P.add(y, b.reshape((b.shape[0],) + (1,) * len(S)))
    return y


def conv_transpose_backward(g, x, w, stride, padding, dilation, groups, mask):
    """-> (dx, dw, db), g [N, Co, *S_out]: dx = conv(g, w) at x's sizes (the window sum over
    (co, k) in row-major order, one fold(fma, +0); an output_padding >= stride would fit one
    more window); dw = conv_backward's weight gradient of conv(g, w) at output gradient x:
    dw[ci, co, k] = fold(fma, +0) over (n, i) in row-major order of x[n, ci, i]
    g_pad[n, co, i*stride + k*dilation]; db[co] = sum of g over (n, s...) in row-major order."""
    dx = conv(g, w, None, stride, padding, dilation, groups, list(x.shape[2:])) if mask[0] else None
    dw = conv_backward(x, g, w, stride, padding, dilation, groups, (False, True, False))[1] if mask[1] else None
    db = sum_dims(g, [0] + list(range(2, g.ndim))) if mask[2] else None
    return dx, dw, db
