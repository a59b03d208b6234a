"""RepOps' own operators, as torch.library custom ops: RMSNorm, attention and the AdamW step,
each ONE op (one trace node, one fused kernel per backend) where plain PyTorch would run a
dozen aten ops. Under repops.deterministic() each runs its definition in repops.aten (the
spec: repops/reference/nn.py, optim.py); outside it, plain torch computes the same math (not
the same bits), so models using these ops stay ordinary PyTorch models.

Their specs are what autograd computed for the compositions they replace, step for step
(repops/reference/nn.py), so a model moved onto them trains to the same bits."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

# -- RMSNorm ---------------------------------------------------------------------------------------
@torch.library.custom_op("repops::rms_norm", mutates_args=())
def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * r * weight, r


@_rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x), x.new_empty(x.shape[:-1] + (1,))


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
    return torch.empty_like(x), torch.empty_like(weight)


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
    """x / sqrt(mean(x^2, last axis) + eps) * weight, as one op."""
    return torch.ops.repops.rms_norm(x, weight, eps)[0]


# -- attention -------------------------------------------------------------------------------------
@torch.library.custom_op("repops::attention", mutates_args=())
def _attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float) -> tuple[Tensor, Tensor]:
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, -1)
    return p @ v, p


@_attention.register_fake
def _(q, k, v, mask, scale):
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
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _att_setup(ctx, inputs, output):
    q, k, v, mask, scale = inputs
    ctx.save_for_backward(q, k, v, output[1], mask)
    ctx.scale = scale
    ctx.set_materialize_grads(False)  # p's gradient is never used: no zeros op for it


def _att_backward(ctx, grad, _grad_p):
    q, k, v, p, mask = ctx.saved_tensors
    dq, dk, dv = torch.ops.repops.attention_backward(grad, q, k, v, p, mask, ctx.scale)
    return dq, dk, dv, None, None


_attention.register_autograd(_att_backward, setup_context=_att_setup)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float) -> Tensor:
    """softmax((q k^T) scale, masked entries (mask True) -inf) v, as one op; q, k, v
    [..., T, d], mask bool broadcastable to [..., T, T] or None."""
    return torch.ops.repops.attention(q, k, v, mask, scale)[0]


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
