"""RepOps' own operators, as torch.library custom ops: RMSNorm, attention, rotary embedding and
the AdamW step, each ONE op (one trace node, one fused kernel per backend) where plain PyTorch
would run a dozen aten ops. Under repops.deterministic() each runs its definition in
repops.aten (the spec: repops/reference/nn.py, optim.py); outside it, plain torch computes the
same math (not the same bits), so models using these ops stay ordinary PyTorch models.

Their specs are what autograd computed for the compositions they replace, step for step
(repops/reference/nn.py), so a model moved onto them trains to the same bits."""
from __future__ import annotations

import contextvars
from typing import Optional

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from .errors import UnsupportedOpError
from .reference.nn import rope_pairs

# True while RepOps' function mode is entered in this context (repops.deterministic(), a job
# program's export: repops/mode.py RepOpsFunctions sets it; torch pops that mode while one of
# its handlers runs, so its stack cannot say).
ACTIVE: contextvars.ContextVar = contextvars.ContextVar("repops_active", default=False)


def _fused() -> bool:
    """Under RepOps (ACTIVE, or its dispatch mode on the stack, which torch carries to
    autograd's threads: a checkpoint's recomputation): the fused op, one node and one kernel.
    Elsewhere the wrappers below run the composition as plain torch ops: the same math without
    a custom op's dispatch, which costs more than the ops it fuses on a small model (native
    torch, the baseline benchmarks/repops_cuda.py measures against)."""
    return ACTIVE.get() or any(getattr(m, "fuses", False) for m in _get_current_dispatch_mode_stack())


# -- RMSNorm ---------------------------------------------------------------------------------------
@torch.library.custom_op("repops::rms_norm", mutates_args=())
def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    return _rms_plain(x, weight, eps)


def _rms_plain(x, weight, eps):
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * r * weight, r


# Fakes return fresh row-major tensors, as every RepOps kernel does: empty_like would keep a
# transposed input's strides, and a reshape of the result would then be a view on meta and
# a copy for real (a graph that is not the trace's: an honest trainer's level-2 loss).
@_rms_norm.register_fake
def _(x, weight, eps):
    return x.new_empty(x.shape), x.new_empty(x.shape[:-1] + (1,))


@torch.library.custom_op("repops::rms_norm_backward", mutates_args=())
def _rms_norm_backward(grad: Tensor, x: Tensor, weight: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
    xr = x * r
    dw = (grad * xr).reshape(-1, x.shape[-1]).sum(0)
    gy = grad * weight
    gr = (gy * x).sum(-1, keepdim=True)
    dx = gy * r + (gr * -0.5 * r.pow(3)).expand(x.shape) / x.shape[-1] * (x * 2.0)
    return dx, dw


@_rms_norm_backward.register_fake
def _(grad, x, weight, r):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _rms_setup(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.set_materialize_grads(False)  # r's gradient is never used: no zeros op for it


def _rms_backward(ctx, grad, _grad_r):
    x, weight, r = ctx.saved_tensors
    dx, dw = torch.ops.repops.rms_norm_backward(grad, x, weight, r)
    return dx, dw, None


_rms_norm.register_autograd(_rms_backward, setup_context=_rms_setup)


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x / sqrt(mean(x^2, last axis) + eps) * weight, as one op under RepOps."""
    if not _fused():
        return _rms_plain(x, weight, eps)[0]
    return torch.ops.repops.rms_norm(x, weight, eps)[0]


# -- attention -------------------------------------------------------------------------------------
def _attention_plain(q, k, v, mask, scale, bias=None):
    s = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    p = torch.ops.aten._safe_softmax(s, -1)  # (a fully masked row attends to nothing: +0, as torch's SDPA)
    return p @ v, p


@torch.library.custom_op("repops::attention", mutates_args=())
def _attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float,
               bias: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    return _attention_plain(q, k, v, mask, scale, bias)


@_attention.register_fake
def _(q, k, v, mask, scale, bias=None):
    return q.new_empty(q.shape[:-1] + (v.shape[-1],)), q.new_empty(q.shape[:-1] + (k.shape[-2],))


@torch.library.custom_op("repops::attention_backward", mutates_args=())
def _attention_backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, p: Tensor, mask: Optional[Tensor],
                        scale: float) -> tuple[Tensor, Tensor, Tensor]:
    dv = p.transpose(-2, -1) @ grad
    dp = grad @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    if mask is not None:
        ds = ds.masked_fill(mask, 0.0)
    ds = ds * scale
    return ds @ k, ds.transpose(-2, -1) @ q, dv


@_attention_backward.register_fake
def _(grad, q, k, v, p, mask, scale):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _att_setup(ctx, inputs, output):
    q, k, v, mask, scale, bias = inputs
    ctx.save_for_backward(q, k, v, output[1], mask)
    ctx.scale, ctx.bias_shape = scale, None if bias is None else bias.shape
    ctx.set_materialize_grads(False)  # p's gradient is never used: no zeros op for it


def _att_backward(ctx, grad, _grad_p):
    q, k, v, p, mask = ctx.saved_tensors
    dq, dk, dv = torch.ops.repops.attention_backward(grad, q, k, v, p, mask, ctx.scale)
    dbias = None
    if len(ctx.needs_input_grad) > 5 and ctx.needs_input_grad[5]:
        # a trainable additive bias (ALiBi, relative positions): the scores' gradient, by the
        # aten ops of attention_backward's ds (a separate node: the fused op's outputs stay three)
        ds = torch._softmax_backward_data(grad @ v.transpose(-2, -1), p, -1, p.dtype)
        if mask is not None:
            ds = ds.masked_fill(mask, 0.0)
        dbias = ds.sum_to_size(ctx.bias_shape)
    return dq, dk, dv, None, None, dbias


_attention.register_autograd(_att_backward, setup_context=_att_setup)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float,
              bias: Optional[Tensor] = None) -> Tensor:
    """softmax((q k^T) scale + bias, masked entries (mask True) -inf) v, as one op (a row with
    every entry masked gives +0, as torch's SDPA: its _safe_softmax); q, k, v
    [..., T, d], mask bool broadcastable to [..., T, S] or None, bias float or None (one op
    under RepOps)."""
    if not _fused():
        return _attention_plain(q, k, v, mask, scale, bias)[0]
    return torch.ops.repops.attention(q, k, v, mask, scale, bias)[0]


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention on RepOps' attention: the same node on every device
    (torch decomposes SDPA differently on CPU and GPU); with dropout_p, aten ops and RepOps'
    dropout. A bool attn_mask keeps True entries,
    a float one is added; is_causal masks every key after its query (top-left aligned)."""
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(rep, dim=-3), value.repeat_interleave(rep, dim=-3)
    mask = bias = None
    if is_causal:
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).triu(1)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep_out = ~attn_mask
        mask = keep_out if mask is None else (mask | keep_out)
    elif attn_mask is not None:
        bias = attn_mask
    scale = 1.0 / E ** 0.5 if scale is None else scale
    if dropout_p:
        # the fused op has no dropout: the same scores and softmax as aten ops, then RepOps'
        # dropout on the probabilities (repops/random.py), the same on every device
        from .random import dropout
        s = (query @ key.transpose(-2, -1)) * scale
        if bias is not None:
            s = s + bias
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return dropout(torch.ops.aten._safe_softmax(s, -1), dropout_p,
                       what="scaled_dot_product_attention's dropout") @ value
    return attention(query, key, value, mask, scale, bias)


# -- rotary position embedding --------------------------------------------------------------------
def _rope_shapes(x: Tensor, cos: Tensor, sin: Tensor) -> None:
    rope_pairs(tuple(x.shape), tuple(cos.shape), tuple(sin.shape))


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The composition rope replaces: (x0 cos - x1 sin, x0 sin + x1 cos) per pair."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


@torch.library.custom_op("repops::rope", mutates_args=())
def _rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    _rope_shapes(x, cos, sin)
    return _rotate(x, cos, sin)


@_rope.register_fake
def _(x, cos, sin):
    _rope_shapes(x, cos, sin)
    return x.new_empty(x.shape)


@torch.library.custom_op("repops::rope_backward", mutates_args=())
def _rope_backward(grad: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    _rope_shapes(grad, cos, sin)
    return _rotate(grad, cos, -sin) + 0.0


@_rope_backward.register_fake
def _(grad, cos, sin):
    _rope_shapes(grad, cos, sin)
    return grad.new_empty(grad.shape)


def _rope_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1], inputs[2])


def _rope_grad(ctx, grad):
    if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:  # never a silent zero gradient
        raise UnsupportedOpError("repops::rope gives its cos/sin tables no gradient: call repops.ops.rope(), "
                                 "which runs the composition (its autograd reaches the tables) when they take one")
    cos, sin = ctx.saved_tensors
    return torch.ops.repops.rope_backward(grad, cos, sin), None, None


_rope.register_autograd(_rope_grad, setup_context=_rope_setup)


def rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary position embedding of interleaved pairs, as one op: pair (x[..., 2i], x[..., 2i+1])
    becomes (x0 cos_i - x1 sin_i, x0 sin_i + x1 cos_i); cos, sin [..., n/2] broadcast to x's pairs.
    One op under RepOps; tables that take a gradient (learned frequencies) run the
    composition, whose autograd reaches them."""
    if not _fused() or torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad):
        _rope_shapes(x, cos, sin)
        return _rotate(x, cos, sin)
    return torch.ops.repops.rope(x, cos, sin)  # (its kernels check the shapes, with the same words)


# -- max pooling -----------------------------------------------------------------------------------
# torch's max pooling returns int64 argmax indices for its backward: integers computed from
# floats by data movement. RepOps' max_pool returns the values only; its backward finds each
# window's first maximal position again with binary32 kernels (repops/reference/nn.py).
@torch.library.custom_op("repops::max_pool", mutates_args=())
def _max_pool(x: Tensor, kernel: list[int], stride: list[int], padding: list[int], dilation: list[int],
              ceil_mode: bool) -> Tensor:
    fn = (torch.nn.functional.max_pool1d, torch.nn.functional.max_pool2d, torch.nn.functional.max_pool3d)
    return fn[len(kernel) - 1](x, kernel, stride, padding, dilation, ceil_mode)


@_max_pool.register_fake
def _(x, kernel, stride, padding, dilation, ceil_mode):
    from .reference.nn import pool_geometry
    O, _ = pool_geometry(x.shape[2:], kernel, stride, padding, dilation, ceil_mode)
    return x.new_empty(tuple(x.shape[:2]) + tuple(O))


@torch.library.custom_op("repops::max_pool_backward", mutates_args=())
def _max_pool_backward(grad: Tensor, x: Tensor, out: Tensor, kernel: list[int], stride: list[int],
                       padding: list[int], dilation: list[int], ceil_mode: bool) -> Tensor:
    with torch.enable_grad():
        xx = x.detach().requires_grad_()
        y = _max_pool(xx, kernel, stride, padding, dilation, ceil_mode)
        return torch.autograd.grad(y, xx, grad)[0]


@_max_pool_backward.register_fake
def _(grad, x, out, kernel, stride, padding, dilation, ceil_mode):
    return x.new_empty(x.shape)


def _pool_setup(ctx, inputs, output):
    x, *ctx.geometry = inputs
    ctx.save_for_backward(x, output)


def _pool_backward(ctx, grad):
    x, out = ctx.saved_tensors
    return (torch.ops.repops.max_pool_backward(grad, x, out, *ctx.geometry),) + (None,) * 5


_max_pool.register_autograd(_pool_backward, setup_context=_pool_setup)


def max_pool(nd: int, x: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False) -> Tensor:
    """F.max_pool{nd}d (same arguments) as one RepOps op without indices; with return_indices,
    torch's own F.max_pool{nd}d, which reaches aten.max_pool2d/3d_with_indices (repops/aten_pool.py)
    and, under autograd, their backward that takes the indices: the same ops on every device."""
    if return_indices:
        fn = (torch.nn.functional.max_pool1d, torch.nn.functional.max_pool2d, torch.nn.functional.max_pool3d)[nd - 1]
        return fn(x, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    from .reference.nn import per_axis
    k = per_axis(kernel_size, nd)
    st = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else per_axis(stride, nd)
    y = torch.ops.repops.max_pool(x, k, st, per_axis(padding, nd), per_axis(dilation, nd), bool(ceil_mode))
    return y.squeeze(0) if unbatched else y


# -- the AdamW step --------------------------------------------------------------------------------
@torch.library.custom_op("repops::adamw_", mutates_args=("param", "m", "v", "b1t", "b2t"))
def _adamw_(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, b1t: Tensor, b2t: Tensor, lr: float, beta1: float,
            beta2: float, eps: float, weight_decay: float) -> None:
    param.mul_(1.0 - lr * weight_decay)
    m.lerp_(grad, 1.0 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    b1t.mul_(beta1)
    b2t.mul_(beta2)
    step = lr / (1.0 - b1t)
    param.sub_(m / (v.sqrt() / (1.0 - b2t).sqrt() + eps) * step)


@_adamw_.register_fake
def _(param, grad, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
    return None


def adamw_(param, grad, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay) -> None:
    """One AdamW step of one parameter, in place (repops/reference/optim.py)."""
    torch.ops.repops.adamw_(param, grad, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay)


# One group's AdamW step: adamw_ on each parameter in order. A trace records exactly those
# adamw_ nodes (repops/mode.py: a trace's graph is per parameter, as the protocol's nodes are);
# untraced, a backend runs the group in a few launches (the CUDA backend: 2 per 32 parameters
# instead of 2 per parameter), with adamw_'s bits.
@torch.library.custom_op("repops::adamw_foreach_", mutates_args=("params", "m", "v", "b1t", "b2t"))
def _adamw_foreach_(params: list[Tensor], grads: list[Tensor], m: list[Tensor], v: list[Tensor], b1t: list[Tensor],
                    b2t: list[Tensor], lr: float, beta1: float, beta2: float, eps: float, weight_decay: float) -> None:
    for a in zip(params, grads, m, v, b1t, b2t, strict=True):
        torch.ops.repops.adamw_(*a, lr, beta1, beta2, eps, weight_decay)


@_adamw_foreach_.register_fake
def _(params, grads, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
    return None


def adamw_foreach_(params, grads, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay) -> None:
    """adamw_ on each parameter of a group (lists of equal length), in place."""
    if not len(params) == len(grads) == len(m) == len(v) == len(b1t) == len(b2t):
        raise ValueError(f"adamw_foreach_: lists of {len(params)} parameters, {len(grads)} gradients, {len(m)} m, "
                         f"{len(v)} v, {len(b1t)} b1t, {len(b2t)} b2t: one of each per parameter")
    torch.ops.repops.adamw_foreach_(params, grads, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay)


# -- dropout ---------------------------------------------------------------------------------------
# torch draws dropout masks from a generator whose bits differ between CPU and CUDA and whose
# state is not part of the graph. RepOps' dropout is one op whose mask is a pure function of
# (seed, stream: the call's index within the step, step: a tensor, so a committed one-step
# graph draws a new mask every step, element index): docs/NUMERICS.md §12.
@torch.library.custom_op("repops::dropout", mutates_args=())
def _dropout(x: Tensor, step: Tensor, seed: int, stream: int, p: float) -> tuple[Tensor, Tensor]:
    # outside repops.deterministic(): the spec itself (numpy, on the host)
    from .reference import nn as N
    host = lambda t: t.detach().cpu().numpy()  # noqa: E731
    return tuple(torch.from_numpy(a).to(x.device) for a in N.dropout(host(x), host(step), seed, stream, p))


@_dropout.register_fake
def _(x, step, seed, stream, p):
    return x.new_empty(x.shape), x.new_empty(x.shape)


def _dropout_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])
    ctx.set_materialize_grads(False)  # m's gradient is never used


def _dropout_backward(ctx, grad, _grad_m):
    m, = ctx.saved_tensors
    return grad * m, None, None, None, None


_dropout.register_autograd(_dropout_backward, setup_context=_dropout_setup)


# -- grouped matmul (mixture of experts) ------------------------------------------------------------------
def _group_of(offs: Tensor, n: int) -> Tensor:
    """Each position 0..n-1's group: how many group ends (offs) are <= it (len(offs): none)."""
    return (offs[None, :] <= torch.arange(n, device=offs.device)[:, None]).sum(1)


def _by_group(x: Tensor, offs: Tensor, axis: int) -> Tensor:
    """[G, *x.shape]: x once per group, +0 outside the group along `axis`."""
    g = _group_of(offs, x.shape[axis])
    member = g[None, :] == torch.arange(offs.shape[0], device=x.device)[:, None]
    shape = [offs.shape[0]] + [1] * x.dim()
    shape[axis + 1] = x.shape[axis]
    return torch.where(member.reshape(shape), x[None], torch.zeros((), dtype=x.dtype, device=x.device))


@torch.library.custom_op("repops::grouped_mm", mutates_args=())
def _grouped_mm(a: Tensor, b: Tensor, offs: Tensor) -> Tensor:
    """torch._grouped_mm(a, b, offs=offs) (2d x 3d: row groups; 2d x 2d: reduction groups; 3d x
    2d: column groups), as one op whose fake works in float32 (torch's meta accepts bf16 only,
    so torch.export cannot capture a float32 MoE's aten._grouped_mm). Rows or columns past the
    last offset are 0. Outside RepOps: plain torch, the same math (repops.aten_moe: the spec)."""
    if a.dim() == 2 and b.dim() == 3:
        g = _group_of(offs, a.shape[0])
        every = torch.einsum("sk,ekn->sen", a, b)
        ok = (g < b.shape[0])[:, None]
        return torch.where(ok, every[torch.arange(a.shape[0], device=a.device), g.clamp(max=b.shape[0] - 1)], 0.0)
    if a.dim() == 2 and b.dim() == 2:
        return _by_group(a, offs, 1) @ _by_group(b, offs, 0)
    if a.dim() == 3 and b.dim() == 2:
        return _grouped_mm(b.t(), a.transpose(-2, -1), offs).t()
    raise ValueError(f"repops::grouped_mm of a {a.dim()}d and a {b.dim()}d tensor: 2d x 3d, 2d x 2d or 3d x 2d")


@_grouped_mm.register_fake
def _(a, b, offs):
    if a.dim() == 2 and b.dim() == 3:
        return a.new_empty((a.shape[0], b.shape[-1]))
    if a.dim() == 2 and b.dim() == 2:
        return a.new_empty((offs.shape[0], a.shape[0], b.shape[1]))
    return a.new_empty((a.shape[1], b.shape[1]))


def _gmm_setup(ctx, inputs, output):
    a, b, offs = inputs
    ctx.save_for_backward(a, b, offs)


def _gmm_backward(ctx, grad):
    """Each gradient is a grouped product of the same offsets (derived per mode, as torch's own
    _grouped_mm backward): row groups <-> reduction groups <-> column groups."""
    a, b, offs = ctx.saved_tensors
    gmm = torch.ops.repops.grouped_mm
    da = db = None
    if a.dim() == 2 and b.dim() == 3:    # out[s] = a[s] @ b[g(s)]
        da = gmm(grad, b.transpose(-2, -1), offs) if ctx.needs_input_grad[0] else None
        db = gmm(a.t(), grad, offs) if ctx.needs_input_grad[1] else None
    elif a.dim() == 2 and b.dim() == 2:  # out[e] = a[:, grp e] @ b[grp e]
        da = gmm(grad, b.t(), offs) if ctx.needs_input_grad[0] else None
        db = gmm(a.t(), grad, offs) if ctx.needs_input_grad[1] else None
    else:                                # out[:, n] = a[g(n)] @ b[:, n]
        da = gmm(grad, b.t(), offs) if ctx.needs_input_grad[0] else None
        db = gmm(a.transpose(-2, -1), grad, offs) if ctx.needs_input_grad[1] else None
    return da, db, None


_grouped_mm.register_autograd(_gmm_backward, setup_context=_gmm_setup)


def grouped_mm(a: Tensor, b: Tensor, offs: Tensor) -> Tensor:
    """torch._grouped_mm(a, b, offs=offs) as RepOps' one op (float32; see _grouped_mm)."""
    return torch.ops.repops.grouped_mm(a, b, offs)
