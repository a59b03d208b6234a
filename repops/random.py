"""Dropout that gives the same bits on every device (docs/NUMERICS.md §12). torch's dropout
draws from a generator whose bits differ between CPU and CUDA; inside `dropout_key(seed,
step)` RepOps draws each mask from Philox4x32-10 instead, keyed by the seed and the call's
index within the block (its stream), counted by the step and the element's index. So every
mask is a pure function of (seed, step, stream, element): any party, and the referee on chain,
recomputes one element alone.

    for t in range(1, steps + 1):
        with repops.deterministic(), repops.dropout_key(seed, t):
            loss = model(x); loss.backward()

A job's program carries its own key (offchain/protocol/program.py): the seed as a constant,
the step as a state counter."""
from __future__ import annotations

import contextlib
import contextvars

import torch

from .errors import UnsupportedOpError

_KEY: contextvars.ContextVar = contextvars.ContextVar("repops_dropout_key", default=None)
MAX_STEP = 1 << 24  # the step counter is binary32: exact below 2^24


class NeedsDropoutKey(UnsupportedOpError):
    """Active dropout with no key: torch's generator is not portable."""


class _Key:
    def __init__(self, seed: int, step: torch.Tensor):
        self.seed, self.step, self.streams = seed, step, 0

    def stream(self) -> int:
        self.streams += 1
        return self.streams - 1


@contextlib.contextmanager
def dropout_key(seed: int, step):
    """Dropout inside the block is RepOps' (repops::dropout). seed: an integer (its low 32
    bits key the generator); step: an integer in [0, 2^24) or a 0-d float32 tensor holding
    one (a state counter: a traced program reads it as data, so one committed graph draws a
    new mask each step). The n-th dropout call in the block is stream n."""
    if isinstance(step, bool) or not isinstance(step, (int, torch.Tensor)):
        raise TypeError(f"dropout_key: step must be an int or a 0-d float32 tensor, got {type(step).__name__}")
    if isinstance(step, int):
        if not 0 <= step < MAX_STEP:
            raise ValueError(f"dropout_key: step {step} is outside [0, 2^24): the step counter is binary32")
        step = torch.tensor(float(step), dtype=torch.float32)
    elif step.dtype != torch.float32 or step.dim() != 0:
        raise TypeError(f"dropout_key: a step tensor must be 0-d float32, got {step.dtype}{list(step.shape)}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"dropout_key: seed must be an int, got {type(seed).__name__}")
    token = _KEY.set(_Key(seed & 0xFFFFFFFF, step))
    try:
        yield
    finally:
        _KEY.reset(token)


def active() -> bool:
    return _KEY.get() is not None


def dropout(x: torch.Tensor, p: float, inplace: bool = False, what: str = "dropout") -> torch.Tensor:
    """F.dropout(x, p, training=True) with the block's key: x * m, m = scale where Philox
    keeps the element, else +0 (repops/reference/nn.py dropout)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    key = _KEY.get()
    if key is None:
        raise NeedsDropoutKey(
            f"{what} with p={p} in training inside repops.deterministic(): torch's random generator is not the "
            "same on every device. Draw the masks from RepOps' portable one: wrap the step in "
            "`with repops.dropout_key(seed, step):` (a job does this by itself), or set the probability to 0 "
            "(or call model.eval())")
    if p == 1.0:
        y = x * 0.0  # torch's p = 1: every element dropped
    else:
        # (a CPU 0-d step goes with a tensor on any device, as a wrapped scalar does: moving it
        # would be a node that a graph on another device has not)
        y = torch.ops.repops.dropout(x, key.step, key.seed, key.stream(), float(p))[0]
    return x.copy_(y) if inplace else y
