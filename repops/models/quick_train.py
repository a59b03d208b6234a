"""A few AdamW steps of a reference model on synthetic data under repops.deterministic():
the determinism check shared by the tests and `verde demo` (the real job schedule is the
protocol's job spec)."""
from __future__ import annotations

import contextlib
import hashlib
import os

import torch

from .. import deterministic
from ..optim import AdamW
from . import build


def synthetic_batches(name: str, steps: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    if name == "mlp":
        X = torch.randn(64, 32, generator=g)
        Y = (X @ torch.randn(32, 10, generator=g)).argmax(1)
        return [(X[i % 4 * 16:(i % 4 + 1) * 16], Y[i % 4 * 16:(i % 4 + 1) * 16]) for i in range(steps)]
    T = torch.randint(0, 256, (8, 33), generator=g)
    return [(T[i % 4 * 2:(i % 4 + 1) * 2],) for i in range(steps)]


@contextlib.contextmanager
def num_threads(n: int):
    """`n` threads for torch's own ops and for RepOps' kernels (REPOPS_NUM_THREADS), restored
    afterwards: what a determinism check varies."""
    old_t, old_env = torch.get_num_threads(), os.environ.get("REPOPS_NUM_THREADS")
    torch.set_num_threads(n)
    os.environ["REPOPS_NUM_THREADS"] = str(n)
    try:
        yield
    finally:
        torch.set_num_threads(old_t)
        if old_env is None:
            os.environ.pop("REPOPS_NUM_THREADS", None)
        else:
            os.environ["REPOPS_NUM_THREADS"] = old_env


def quick_train(name: str, steps: int, threads: int, backend: str = "cpu", seed: int = 0, device: str = "cpu"):
    """-> (SHA-256 of the final parameters, per-step losses), with `threads` for both torch
    and RepOps (restored afterwards). device "cuda" trains on the GPU (the CUDA backend)."""
    with num_threads(threads):
        torch.manual_seed(seed)
        model = build(name).to(device)
        opt = AdamW(model.parameters(), lr=3e-3)
        losses = []
        batches = [tuple(t.to(device) for t in b) for b in synthetic_batches(name, steps)]  # outside: RepOps refuses RNG ops
        with deterministic(backend):
            for batch in batches:
                opt.zero_grad(set_to_none=True)
                loss = model.loss(*batch)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())).hexdigest()
        return digest, losses
