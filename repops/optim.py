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
then every gradient times min(1, max_norm / (norm + 1e-6))), and may follow a learning-rate
schedule (Schedule: warmup, then linear or cosine decay), its step counter in the state.
"""
from __future__ import annotations

import math

import torch

from .ops import adamw_, adamw_foreach_


class Schedule:
    """The learning rate of step t (1..total) as a binary32 tensor computed by RepOps ops
    from the state's step counter: lr * warm * decay, warm = min(t / warmup, 1) (1 without
    warmup), p = clamp((t - warmup) / (total - warmup), 0, 1), decay = 1 - p * (1 - floor)
    (linear) or floor + (1 - floor) * 0.5 * (1 + cos(pi * p)) (cosine), floor = min_lr_ratio."""

    def __init__(self, kind: str, total: int, warmup: int = 0, min_lr_ratio: float = 0.0):
        if kind not in ("linear", "cosine") or not 0 <= warmup < total or not 0 <= min_lr_ratio <= 1:
            raise ValueError(f"schedule {kind!r}: need linear|cosine, 0 <= warmup < total ({warmup}, {total}), "
                             f"0 <= min_lr_ratio <= 1 ({min_lr_ratio})")
        self.kind, self.total, self.warmup, self.floor = kind, total, warmup, min_lr_ratio

    def lr(self, lr: float, t: torch.Tensor) -> torch.Tensor:
        warm = torch.clamp(t / self.warmup, max=1.0) if self.warmup else torch.ones_like(t)
        p = torch.clamp((t - self.warmup) / (self.total - self.warmup), 0.0, 1.0)
        if self.kind == "linear":
            decay = 1.0 - p * (1.0 - self.floor)
        else:
            decay = self.floor + (1.0 - self.floor) * (0.5 * (1.0 + torch.cos(p * math.pi)))
        return lr * (warm * decay)


class _Fixed(torch.optim.Optimizer):
    """State made at construction, listed in a fixed order; optional gradient clipping and
    learning-rate schedule (its step counter is the last state tensor)."""
    STATE: tuple = ()

    def __init__(self, params, defaults: dict, schedule: Schedule | None = None):
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p].update(self._init_state(p))
        self.schedule = schedule
        first = next((p for g in self.param_groups for p in g["params"]), None)
        # binary32: exact to 2^24; where the parameters live (not the default device: a CPU
        # scalar beside CUDA parameters is uploaded and read back every step)
        self.steps = torch.zeros((), dtype=torch.float32, device=None if first is None else first.device) \
            if schedule else None

    def _init_state(self, p) -> dict:
        raise NotImplementedError

    @property
    def global_state(self) -> tuple:
        """Names of the state tensors not per parameter (after them)."""
        return ("step",) if self.schedule else ()

    def state_tensors(self) -> list:
        """Per parameter, the tensors named by STATE, in order; then global_state's."""
        return [self.state[p][k] for g in self.param_groups for p in g["params"] for k in self.STATE] + (
            [self.steps] if self.schedule else [])

    def _clip(self, group) -> None:
        if group.get("max_grad_norm") is not None:
            grads = [p for p in group["params"] if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(grads, group["max_grad_norm"], foreach=False)

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        if self.schedule:
            self.steps.add_(1.0)
        for group in self.param_groups:
            self._clip(group)
            lr = self.schedule.lr(group["lr"], self.steps) if self.schedule else group["lr"]
            self._update_group([p for p in group["params"] if p.grad is not None], dict(group, lr=lr))
        return loss

    def _update_group(self, params, group):
        for p in params:
            self._update(p, p.grad, self.state[p], group)


class AdamW(_Fixed):
    STATE = ("m", "v", "b1t", "b2t")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, max_grad_norm=None,
                 schedule=None):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      max_grad_norm=max_grad_norm), schedule)

    def _init_state(self, p):
        # b1^t, b2^t where the parameter lives: on the default device they would cost a CUDA
        # parameter an upload and a blocking read-back each, per step
        return dict(m=torch.zeros_like(p), v=torch.zeros_like(p), b1t=torch.ones((), dtype=torch.float32, device=p.device),
                    b2t=torch.ones((), dtype=torch.float32, device=p.device))

    def _update(self, p, g, st, group):
        _adamw(p, g, st, group, group["weight_decay"])

    def _update_group(self, params, group):
        """With a constant lr, the group's step is one op (adamw_foreach_: a trace still sees
        adamw_ per parameter; untraced, a GPU runs it in a few launches)."""
        if isinstance(group["lr"], torch.Tensor) or self._decay_in_gradient(group) or \
                len({p.device for p in params}) > 1:  # (a model split across devices: one op has one device)
            return super()._update_group(params, group)
        st = [self.state[p] for p in params]
        (b1, b2) = group["betas"]  # (Adam here: no decay at all)
        adamw_foreach_(params, [p.grad for p in params], *([s[k] for s in st] for k in self.STATE), group["lr"],
                       b1, b2, group["eps"], group["weight_decay"])

    def _decay_in_gradient(self, group) -> bool:
        """Adam's L2 decay adds to each gradient before its step (a node between steps in
        the graph, kept in that order)."""
        return False


def _adamw(p, g, st, group, wd):
    """The fused op for a constant lr; with a scheduled one (a tensor), the same steps as
    aten ops, 1 - lr*wd and lr / (1 - b1t) computed in binary32 from the tensor."""
    (b1, b2), lr, eps = group["betas"], group["lr"], group["eps"]
    if not isinstance(lr, torch.Tensor):
        adamw_(p, g, st["m"], st["v"], st["b1t"], st["b2t"], lr, b1, b2, eps, wd)
        return
    if wd:
        p.mul_(1.0 - lr * wd)
    st["m"].lerp_(g, 1.0 - b1)
    st["v"].mul_(b2).addcmul_(g, g, value=1.0 - b2)
    st["b1t"].mul_(b1)
    st["b2t"].mul_(b2)
    denom = st["v"].sqrt() / (1.0 - st["b2t"]).sqrt() + eps
    p.sub_(st["m"] / denom * (lr / (1.0 - st["b1t"])))


class Adam(AdamW):
    """torch.optim.Adam's L2 weight decay (added to the gradient), then AdamW with wd = 0."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, max_grad_norm=None,
                 schedule=None):
        super().__init__(params, lr, betas, eps, weight_decay, max_grad_norm, schedule)

    def _update(self, p, g, st, group):
        if group["weight_decay"]:
            g = g.add(p, alpha=group["weight_decay"])
        _adamw(p, g, st, group, 0.0)

    def _decay_in_gradient(self, group) -> bool:
        return bool(group["weight_decay"])


class SGD(_Fixed):
    """torch.optim.SGD (momentum, nesterov, weight decay; dampening 0), its momentum buffer
    made at the start as +0: step 1 computes buf = momentum*0 + g where torch clones g (the
    same bits but for a -0.0 gradient element, which becomes +0.0 here)."""

    def __init__(self, params, lr, momentum=0.0, nesterov=False, weight_decay=0.0, max_grad_norm=None,
                 schedule=None):
        if nesterov and not momentum:
            raise ValueError("nesterov SGD needs a momentum")
        self.STATE = ("buf",) if momentum else ()
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
                                      max_grad_norm=max_grad_norm), schedule)

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
        lr = group["lr"]
        if isinstance(lr, torch.Tensor):  # scheduled
            p.sub_(g * lr)
        else:
            p.add_(g, alpha=-lr)
