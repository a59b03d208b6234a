"""The binary32 AdamW step (docs/NUMERICS.md §8, repops/optim.py): the spec of the fused
`repops::adamw_` operator, one primitive at a time. Hyper-parameter constants arrive as
binary32 (each rounded once from its IEEE double value)."""
from __future__ import annotations

import numpy as np

from . import prims as P

F32 = np.float32


@P.overridable("adamw")
def adamw(p, g, m, v, b1t, b2t, lr, beta1, beta2, eps, weight_decay):
    """-> new (p, m, v, b1t, b2t):
    p = p (1 - lr wd); m = m + (1 - b1)(g - m); v = v b2 + (1 - b2)(g g); b1t = b1t b1;
    b2t = b2t b2; step = lr / (1 - b1t); p = p - (m / (sqrt(v) / sqrt(1 - b2t) + eps)) step."""
    c = lambda x: np.asarray(x, F32)  # noqa: E731  (a Python double rounded once)
    p = P.mul(p, c(1.0 - lr * weight_decay))
    m = P.add(m, P.mul(c(1.0 - beta1), P.sub(g, m)))
    v = P.mul(v, c(beta2))
    v = P.add(v, P.mul(c(1.0 - beta2), P.mul(g, g)))
    b1t = P.mul(b1t, c(beta1))
    b2t = P.mul(b2t, c(beta2))
    step = P.div(c(lr), P.sub(c(1.0), b1t))
    denom = P.add(P.div(P.sqrt(v), P.sqrt(P.sub(c(1.0), b2t))), c(eps))
    p = P.sub(p, P.mul(P.div(m, denom), step))
    return p, m, v, b1t, b2t


@P.overridable("adamw_foreach")
def adamw_foreach(ps, gs, ms, vs, b1ts, b2ts, lr, beta1, beta2, eps, weight_decay):
    """adamw of each parameter of one group (lists, one entry a parameter) -> a tuple of
    adamw's results, one per parameter. Each parameter's step is its own: a backend may run
    the group in fewer launches, never with other bits (repops.ops.adamw_foreach_)."""
    return tuple(adamw(*a, lr, beta1, beta2, eps, weight_decay) for a in zip(ps, gs, ms, vs, b1ts, b2ts))
