"""Data parallelism with the single-process bits: each rank computes the micro-batches of its
block and reduces its cover of the fixed tree. The flattened gradient (loss first, then every
parameter's) is cut into W element shards; an all_to_all gives each rank every rank's cover
partials of its own shard, the rank finishes the fixed tree on that shard with RepOps'
additions, and an all_gather hands every rank the finished shards. The tree is per element,
so sharding by element changes no sum: the bits depend on M only. Each rank receives about
twice the gradient a step whatever W (reduce-scatter + all-gather traffic), not W - 1 whole
covers. torch's DistributedDataParallel all-reduces in an order set by the world size, its
buckets and NCCL's algorithm: a different sum, hence different bits."""
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
        self.bytes_sent = self.bytes_received = 0  # payload to / from other ranks, all steps
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
        total = self._exchange(sums) if self.world > 1 else sums.root()
        with repops.deterministic(self.backend):
            loss, *grads = micro.mean(total, self.m)
        micro.assign(self.params, grads)
        return loss

    def _exchange(self, sums: TreeSum) -> list:
        """The tree's root from every rank's cover: all_to_all of each shard's partials, the
        tree finished on this rank's shard, all_gather of the finished shards (each with this
        rank's mask of parameters that have a gradient: ranks that disagree are refused)."""
        import repops
        parts = sums.items()
        if [k for k, _ in parts] != self.covers[self.rank]:
            raise DistributedError(f"rank {self.rank} reduced {[k for k, _ in parts]}, not its cover "
                                   f"{self.covers[self.rank]}")
        template = parts[0][1]
        shapes = [None if t is None else t.shape for t in template]
        flat = torch.stack([torch.cat([t.reshape(-1) for t in v if t is not None]) for _, v in parts])
        W, me, width = self.world, self.rank, flat.shape[1]
        bounds = [width * q // W for q in range(W + 1)]
        size = [bounds[q + 1] - bounds[q] for q in range(W)]
        send = torch.cat([flat[:, bounds[q]:bounds[q + 1]].reshape(-1) for q in range(W)])
        counts = [len(c) * size[me] for c in self.covers]
        recv = torch.empty(sum(counts), dtype=flat.dtype, device=flat.device)
        self._collective(dist.all_to_all_single, recv, send, counts, [len(parts) * size[q] for q in range(W)],
                         group=self.group)
        total, off = TreeSum(self.m, micro.add), 0
        with repops.deterministic(self.backend):
            for cov in self.covers:
                for lo, hi in cov:
                    total.put(lo, hi, [recv[off:off + size[me]]])
                    off += size[me]
            shard = total.root()[0]
        mask = torch.tensor([float(t is not None) for t in template], dtype=flat.dtype, device=flat.device)
        row = torch.zeros(max(size) + mask.numel(), dtype=flat.dtype, device=flat.device)
        row[:size[me]], row[max(size):] = shard, mask
        rows = [torch.empty_like(row) for _ in range(W)]
        self._collective(dist.all_gather, rows, row, group=self.group)
        for r in range(W):
            if not torch.equal(rows[r][max(size):], mask):
                raise DistributedError(f"rank {r} has gradients for other parameters than rank {me}: a model whose "
                                       "used parameters depend on the data cannot be summed in a fixed tree")
        self.bytes_sent += flat.element_size() * (len(parts) * (width - size[me]) + (W - 1) * row.numel())
        self.bytes_received += flat.element_size() * ((sum(counts) - counts[me]) + (W - 1) * row.numel())
        return _unflatten(torch.cat([rows[q][:size[q]] for q in range(W)]), shapes)


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
