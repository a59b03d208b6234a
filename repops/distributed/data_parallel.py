"""Data parallelism with the single-process bits: each rank computes the micro-batches of its
block and reduces its cover of the fixed tree; the covers cross the network by all_gather
(order-preserving: only bytes move), and every rank finishes the same tree with RepOps'
additions. torch's DistributedDataParallel all-reduces in an order set by the world size,
its buckets and NCCL's algorithm: a different sum, hence different bits."""
from __future__ import annotations

import functools
import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from ..errors import DistributedError
from . import micro
from .tree import TreeSum, block, cover


@functools.cache
def build_id() -> str:
    """SHA-256 of RepOps' sources (Python, C, CUDA): ranks running other kernels are refused."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".c", ".h", ".cu", ".cuh") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


class DataParallel:
    """A data-parallel training step whose gradients have the same bits for any world size
    that divides `micro_batches`. In a loop launched with torchrun (one process per rank, the
    process group initialised):

        dp = repops.distributed.DataParallel(model, micro_batches=8, fingerprint=job_id)
        for batch in batches:                  # the same global batch on every rank
            opt.zero_grad(set_to_none=True)
            loss = dp.backward(*batch)         # p.grad set on every rank; loss is the global one
            with repops.deterministic():
                opt.step()

    `loss_fn(*micro_batch)` defaults to model(*micro_batch) and must return the mean loss of
    its rows. Call backward outside repops.deterministic(): it enters it for its arithmetic
    and leaves it for the collectives. No rank may write a buffer during the step (BatchNorm's
    running statistics would follow only that rank's micro-batches)."""

    def __init__(self, model: torch.nn.Module, micro_batches: int, *, loss_fn: Callable | None = None,
                 backend: str = "cpu", group=None, fingerprint: bytes | str = b""):
        self.model, self.m, self.backend, self.group = model, int(micro_batches), backend, group
        self.loss_fn = loss_fn or model
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.world = dist.get_world_size(group) if dist.is_initialized() else 1
        self.rank = dist.get_rank(group) if dist.is_initialized() else 0
        if self.m < 1:
            raise DistributedError(f"micro_batches must be at least 1, got {self.m}")
        self.lo, self.hi = block(self.m, self.world, self.rank)
        self.covers = [cover(self.m, *block(self.m, self.world, r)) for r in range(self.world)]
        self.bytes_sent = 0
        if self.world > 1:
            self._agree(fingerprint)

    def _agree(self, fingerprint) -> None:
        """Every rank names the same job, micro-batches, parameter shapes and RepOps build."""
        fp = fingerprint.hex() if isinstance(fingerprint, bytes) else str(fingerprint)
        mine = {"job": fp, "micro_batches": self.m, "build": build_id(),
                "params": [list(p.shape) for p in self.params]}
        theirs = [None] * self.world
        self._collective(dist.all_gather_object, theirs, mine, group=self.group)
        for r, t in enumerate(theirs):
            diff = sorted(k for k in mine if t[k] != mine[k])
            if diff:
                what = ", ".join(f"{k} {t[k] if k != 'params' else '...'!s:.20}" for k in diff)
                raise DistributedError(f"rank {r} is not running the same step as rank {self.rank}: its {what} "
                                       f"differ (ours: {', '.join(str(mine[k])[:20] for k in diff)}); start every "
                                       "rank with the same job file and the same Verde/RepOps checkout")

    def _collective(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (RuntimeError, ValueError) as e:  # gloo/NCCL: a peer closed, a timeout
            raise DistributedError(f"rank {self.rank}: a collective failed ({str(e).splitlines()[0][:200]}); another "
                                   "rank has probably stopped. Nothing half-written is kept: restart every rank, "
                                   "training resumes from the last complete checkpoint") from None

    def backward(self, *batch: torch.Tensor) -> torch.Tensor:
        """This rank's micro-batches, the tree's top across ranks, the mean: sets p.grad on
        every rank and returns the step's loss."""
        import repops
        with repops.deterministic(self.backend):
            sums = micro.local_sums(self.loss_fn, self.params, batch, self.m, self.lo, self.hi)
        if self.world > 1:
            sums = self._exchange(sums)
        with repops.deterministic(self.backend):
            loss, *grads = micro.mean(sums.root(), self.m)
        micro.assign(self.params, grads)
        return loss

    def _exchange(self, sums: TreeSum) -> TreeSum:
        """all_gather of every rank's cover, flattened (loss first, then each gradient); one
        row per partial, padded to the longest cover."""
        parts = sums.items()
        if [k for k, _ in parts] != self.covers[self.rank]:
            raise DistributedError(f"rank {self.rank} reduced {[k for k, _ in parts]}, not its cover "
                                   f"{self.covers[self.rank]}")
        template = parts[0][1]
        shapes = [None if t is None else t.shape for t in template]
        rows = max(len(c) for c in self.covers)
        flat = [torch.cat([t.reshape(-1) for t in v if t is not None]) for _, v in parts]
        width = flat[0].numel()
        mine = torch.zeros(rows, width, dtype=torch.float32, device=flat[0].device)
        for i, f in enumerate(flat):
            mine[i] = f
        gathered = [torch.empty_like(mine) for _ in range(self.world)]
        self._collective(dist.all_gather, gathered, mine, group=self.group)
        self.bytes_sent += mine.numel() * 4
        total = TreeSum(self.m, micro.add)
        import repops
        with repops.deterministic(self.backend):
            for r, cov in enumerate(self.covers):
                for i, (lo, hi) in enumerate(cov):
                    total.put(lo, hi, _unflatten(gathered[r][i], shapes))
        return total


def _unflatten(row: torch.Tensor, shapes: list) -> list:
    out, o = [], 0
    for s in shapes:
        if s is None:
            out.append(None)
            continue
        n = s.numel()
        out.append(row[o:o + n].reshape(s).clone())
        o += n
    return out


def init(rank: int, world: int, port: int, device: str = "cpu", timeout_s: float = 600) -> None:
    """A process group on this machine: gloo for CPU tensors, NCCL for CUDA ones."""
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s))
