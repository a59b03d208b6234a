"""AdamW whose every scalar is a binary32 tensor computed by RepOps primitives.

torch.optim.AdamW reads the step counter into Python and computes the bias corrections
with a double-precision `**` (libm pow), so they are neither binary32 nor portable. Here,
per parameter, in this order (docs/NUMERICS.md, "AdamW"):
  p      = p * (1 - lr*wd)                      [1 - lr*wd: IEEE double +,*, rounded once]
  m      = m + (1 - b1) * (g - m)               (lerp)
  v      = v * b2 + (1 - b2) * (g * g)          (mul, addcmul)
  b1t    = b1t * b1 ; b2t = b2t * b2            (b1^t as a running binary32 product)
  step   = lr / (1 - b1t)
  denom  = sqrt(v) / sqrt(1 - b2t) + eps
  p      = p - (m / denom) * step
"""
from __future__ import annotations

import torch

from .ops import adamw_


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        # State exists from the start (not on the first step), so every step runs the same
        # graph and the state tensors are fixed: a Verde checkpoint is params + this state.
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p):
        st = self.state[p]
        st["m"] = torch.zeros_like(p)
        st["v"] = torch.zeros_like(p)
        st["b1t"] = torch.ones((), dtype=torch.float32)
        st["b2t"] = torch.ones((), dtype=torch.float32)

    def state_tensors(self) -> list:
        """The optimizer's state in a fixed order (per parameter: m, v, b1t, b2t)."""
        return [self.state[p][k] for g in self.param_groups for p in g["params"] for k in ("m", "v", "b1t", "b2t")]

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                adamw_(p, p.grad, st["m"], st["v"], st["b1t"], st["b2t"], lr, b1, b2, eps, wd)
        return loss
