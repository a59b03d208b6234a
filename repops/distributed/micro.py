"""One step's gradient from M micro-batches (docs/NUMERICS.md §11): each micro-batch's loss
and gradients on their own, summed over the fixed tree, divided by M. The same functions run
in one process (the traced step every dispute re-executes) and on every rank of a
data-parallel run, so both compute the same additions on the same values."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..errors import DistributedError
from .tree import TreeSum


def add(left: list, right: list) -> list:
    """Two partial sums (loss, then one gradient per parameter), element by element."""
    out = []
    for i, (a, b) in enumerate(zip(left, right)):
        if (a is None) != (b is None):
            raise DistributedError(f"parameter {i - 1} gets a gradient from some micro-batches and not from others: "
                                   "a model whose used parameters depend on the data cannot be summed in a fixed tree")
        out.append(None if a is None else torch.add(a, b))
    return out


def micro_batch(batch: Sequence[torch.Tensor], m: int, i: int) -> tuple:
    """Rows [i*B/M, (i+1)*B/M) of every batch tensor."""
    rows = {t.shape[0] if t.dim() else None for t in batch}
    if len(rows) != 1 or None in rows or next(iter(rows)) % m:
        raise DistributedError(f"a batch of {sorted(map(str, rows))} rows cannot be split into {m} equal micro-batches: "
                               "every batch tensor needs the same number of rows, a multiple of micro_batches")
    k = next(iter(rows)) // m
    return tuple(t[i * k:(i + 1) * k] for t in batch)


def local_sums(loss_fn: Callable, params: list, batch: Sequence[torch.Tensor], m: int, lo: int, hi: int,
               loss_hook: Callable | None = None) -> TreeSum:
    """Micro-batches [lo, hi) of the batch, each forward and backward on its own, merged in
    the tree as they come (O(log M) gradients held at once); call under repops.deterministic."""
    sums = TreeSum(m, add)
    for i in range(lo, hi):
        loss = loss_fn(*micro_batch(batch, m, i))
        if loss_hook is not None:
            loss = loss_hook(loss)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        sums.put(i, i + 1, [loss.detach(), *grads])
    return sums


def mean(total: list, m: int) -> list:
    """The tree's root divided by M (one correctly rounded binary32 division per element)."""
    return [None if t is None else torch.div(t, float(m)) for t in total]


def assign(params: list, grads: list) -> None:
    for p, g in zip(params, grads):
        p.grad = g


def single_process_step(loss_fn: Callable, params: list, batch: Sequence[torch.Tensor], m: int,
                        loss_hook: Callable | None = None) -> torch.Tensor:
    """The reference: every micro-batch in this process, the whole tree; sets p.grad and
    returns the step's loss (the mean of the micro-batch losses)."""
    loss, *grads = mean(local_sums(loss_fn, params, batch, m, 0, m, loss_hook).root(), m)
    assign(params, grads)
    return loss
