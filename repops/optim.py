"""The job's optimizers: every scalar a binary32 tensor computed by RepOps primitives, the
state fixed from the start (a Verde checkpoint is params + this state, and every step runs
the same graph). docs/NUMERICS.md §8.

AdamW, per parameter, in this order:
  p      = p * (1 - lr*wd)                      [1 - lr*wd: IEEE double +,*, rounded once]
  m      = m + (1 - b1) * (g - m)               (lerp)
  v      = v * b2 + (1 - b2) * (g * g)          (mul, addcmul)
  b1t    = b1t * b1 ; b2t = b2t * b2            (b1^t as a running binary32 product)
  step   = lr / (1 - b1t)
  denom  = sqrt(v) / sqrt(1 - b2t) + eps
  p      = p - (m / denom) * step
torch.optim.AdamW reads the step counter into Python and computes the bias corrections with
a double-precision `**` (libm pow): neither binary32 nor portable.
Adam is AdamW with wd = 0 on g + wd*p (L2, as torch.optim.Adam); SGD is torch.optim.SGD's
single-tensor arithmetic (dampening 0). Any of them may first clip the gradients' global norm
(torch.nn.utils.clip_grad_norm_, foreach=False: each gradient's 2-norm, the norm of those,
then every gradient times min(1, max_norm / (norm + 1e-6))).
"""
from __future__ import annotations

import torch

from .ops import adamw_


class _Fixed(torch.optim.Optimizer):
    """State made at construction, listed in a fixed order; optional gradient clipping."""
    STATE: tuple = ()

    def __init__(self, params, defaults: dict):
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p].update(self._init_state(p))

    def _init_state(self, p) -> dict:
        raise NotImplementedError

    def state_tensors(self) -> list:
        """Per parameter, the tensors named by STATE, in order."""
        return [self.state[p][k] for g in self.param_groups for p in g["params"] for k in self.STATE]

    def _clip(self, group) -> None:
        if group.get("max_grad_norm") is not None:
            grads = [p for p in group["params"] if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(grads, group["max_grad_norm"], foreach=False)

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            self._clip(group)
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, p.grad, self.state[p], group)
        return loss


class AdamW(_Fixed):
    STATE = ("m", "v", "b1t", "b2t")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, max_grad_norm=None):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      max_grad_norm=max_grad_norm))

    def _init_state(self, p):
        return dict(m=torch.zeros_like(p), v=torch.zeros_like(p), b1t=torch.ones((), dtype=torch.float32),
                    b2t=torch.ones((), dtype=torch.float32))

    def _update(self, p, g, st, group):
        (b1, b2), wd = group["betas"], group["weight_decay"]
        adamw_(p, g, st["m"], st["v"], st["b1t"], st["b2t"], group["lr"], b1, b2, group["eps"], wd)


class Adam(AdamW):
    """torch.optim.Adam's L2 weight decay (added to the gradient), then AdamW with wd = 0."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, max_grad_norm=None):
        super().__init__(params, lr, betas, eps, weight_decay, max_grad_norm)

    def _update(self, p, g, st, group):
        if group["weight_decay"]:
            g = g.add(p, alpha=group["weight_decay"])
        (b1, b2) = group["betas"]
        adamw_(p, g, st["m"], st["v"], st["b1t"], st["b2t"], group["lr"], b1, b2, group["eps"], 0.0)


class SGD(_Fixed):
    """torch.optim.SGD (momentum, nesterov, weight decay; dampening 0), its momentum buffer
    made at the start as +0: step 1 computes buf = momentum*0 + g where torch clones g (the
    same bits but for a -0.0 gradient element, which becomes +0.0 here)."""

    def __init__(self, params, lr, momentum=0.0, nesterov=False, weight_decay=0.0, max_grad_norm=None):
        if nesterov and not momentum:
            raise ValueError("nesterov SGD needs a momentum")
        self.STATE = ("buf",) if momentum else ()
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
                                      max_grad_norm=max_grad_norm))

    def _init_state(self, p):
        return dict(buf=torch.zeros_like(p)) if self.STATE else {}

    def _update(self, p, g, st, group):
        mu = group["momentum"]
        if group["weight_decay"]:
            g = g.add(p, alpha=group["weight_decay"])
        if mu:
            buf = st["buf"]
            buf.mul_(mu).add_(g)
            g = g.add(buf, alpha=mu) if group["nesterov"] else buf
        p.add_(g, alpha=-group["lr"])
