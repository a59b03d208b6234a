"""A pre-stake scan of a job's data for index faults: a class label outside [0, classes) (and
not the ignore_index) or an embedding index outside [0, num_embeddings), in a row a later
batch reads. One step on meta tensors and batch 0 miss it; the step that reads the row faults.

A cheap heuristic in front of the real mechanism, which is the fault claim (a step the spec
cannot compute is settled like any other result, and pays the honest trainers for the steps
done): it finds only indices the data file holds, read by nll_loss or embedding (or their
backward) directly or through exact views of a data tensor (view, reshape, slice, select, ...),
never one the step computes. It serves the client (`Verde.post` refuses to post) and the
trainer (the agent refuses to stake), so neither pays for a job that cannot end normally.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .dataset import dataset, keys_of
from .job import Job, JobError
from .schedule import permutation
from .trace import DATA, NODE_OUT, StepRecorder, _tensors, output_tensors


class DataOutOfRange(JobError):
    """A data row holds an index the step that reads it cannot use."""


def _classes(a) -> int:
    x = a["self"]
    return x.shape[1] if x.dim() >= 2 else x.shape[0]


_NLL = ("target", _classes, "ignore_index")
# op -> (its index argument, the valid range's end from its arguments, the argument naming a skipped value)
INDEXED = {
    "aten.nll_loss_forward.default": _NLL, "aten.nll_loss_backward.default": _NLL,
    "aten.nll_loss2d_forward.default": _NLL, "aten.nll_loss2d_backward.default": _NLL,
    "aten.embedding.default": ("indices", lambda a: a["weight"].shape[0], None),
    "aten.embedding_dense_backward.default": ("indices", lambda a: a["num_weights"], None),
}
# exact data movement of one tensor: an index read through these is still the data's
MOVES = {f"aten.{op}" for op in (
    "view.default", "_unsafe_view.default", "reshape.default", "flatten.using_ints", "unflatten.int",
    "slice.Tensor", "select.int", "narrow.default", "squeeze.default", "squeeze.dim", "squeeze.dims",
    "unsqueeze.default", "permute.default", "transpose.int", "t.default", "expand.default", "clone.default",
    "contiguous.default", "alias.default", "detach.default", "lift_fresh_copy.default", "unbind.int",
    "split.Tensor", "split_with_sizes.default")}


@dataclass
class _Calls(StepRecorder):
    """The recorder, also keeping each node's call (meta tensors: shapes, no values)."""
    calls: list = field(default_factory=list)

    def __call__(self, func, args, kwargs, out):
        super().__call__(func, args, kwargs, out)
        self.calls.append((func, args, kwargs))


def _arg(func, args, kwargs, name):
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            return args[i] if i < len(args) else kwargs.get(name, a.default_value)
    raise KeyError(name)


@dataclass(frozen=True)
class IndexRead:
    """Node `node` (op `op`) reads elements `columns` (of a row, row-major) of data tensor `data`
    as indices that must lie in [0, bound), unless equal to `ignore`."""
    node: int
    op: str
    data: int
    columns: np.ndarray
    bound: int
    ignore: int | None


def index_reads(job: Job, data: dict | None = None) -> list[IndexRead]:
    """The data elements the step uses as indices, from one step on meta tensors."""
    from .step import meta_trace
    rec, _ = meta_trace(job, _Calls, data)

    def source(ref, moves):
        """(data tensor, the moves from it, in order), or None: follows exact moves back."""
        while ref.kind == NODE_OUT:
            node = rec.nodes[ref.index]
            if node.op not in MOVES or len(node.refs) != 1:
                return None
            moves.append((rec.calls[ref.index], ref.slot))
            ref = node.refs[0]
        return (ref.index, moves[::-1]) if ref.kind == DATA else None

    out = []
    for j, ((func, args, kwargs), node) in enumerate(zip(rec.calls, rec.nodes)):
        rule = INDEXED.get(node.op)
        if rule is None:
            continue
        name, bound, skip = rule
        index = _arg(func, args, kwargs, name)
        ins = _tensors(args) + _tensors(kwargs)
        found = source(node.refs[next(i for i, t in enumerate(ins) if t is index)], [])
        if found is None:
            continue
        d, moves = found
        columns = _columns(rec.data[d].shape, moves)
        if columns is None:
            continue
        named = {a.name: _arg(func, args, kwargs, a.name) for a in func._schema.arguments}
        out.append(IndexRead(j, node.op, d, columns, int(bound(named)), None if skip is None else int(named[skip])))
    return out


def _columns(shape, moves) -> np.ndarray | None:
    """Which elements of a row (row-major) the moves from a batch tensor of `shape` reach: the
    moves replayed on the positions 0..numel-1; every row of the data may land in any row of
    a batch. None if a move cannot be replayed (the read is then not checked)."""
    pos = torch.arange(int(np.prod(shape)), dtype=torch.int64).reshape(tuple(shape))
    for (func, args, kwargs), slot in moves:
        try:
            args = (pos, *args[1:])
            pos = output_tensors(func, args, kwargs, func(*args, **kwargs))[slot]
        except (RuntimeError, TypeError, IndexError, ValueError):
            return None
    row = int(np.prod(shape[1:]))
    return np.unique(pos.reshape(-1).numpy() % row)


def first_reads(job: Job, n: int) -> np.ndarray:
    """Per data row, the step that first reads it (-1: never read), by the batch schedule."""
    spec = job.spec
    b, m = spec.data.batch_size, min(n, spec.steps * spec.data.batch_size)
    order = np.arange(n) if spec.inference else np.asarray(permutation(n, spec.data.seed, 0))
    step = np.full(n, -1, dtype=np.int64)
    step[order[:m]] = np.arange(m) // b  # positions past n are later epochs: every row was read before
    return step


def check(job: Job) -> None:
    """Raise DataOutOfRange naming the first data row (of those the job reads) that holds an
    index outside the range of the op reading it."""
    data = dataset(job)
    names = keys_of(job.spec)
    reads = index_reads(job, data)
    if not reads:
        return
    step = first_reads(job, data[names[0]].shape[0])
    seen = set()
    for r in reads:
        key = (r.data, r.columns.tobytes(), r.bound, r.ignore)  # a backward reads what its forward read
        if key in seen:
            continue
        seen.add(key)
        t = data[names[r.data]]
        v = t.reshape(t.shape[0], -1).numpy()
        if len(r.columns) < v.shape[1]:
            v = v[:, r.columns]
        bad = (v < 0) | (v >= r.bound)
        if r.ignore is not None:
            bad &= v != r.ignore
        bad &= (step >= 0)[:, None]
        if bad.any():
            row = int(bad.any(1).argmax())
            col = int(bad[row].argmax())
            where = f" (element {int(r.columns[col])} of the row)" if t[0].numel() > 1 else ""
            raise DataOutOfRange(
                f"data tensor `{names[r.data]}` row {row}{where} holds {int(v[row, col])}, outside [0, {r.bound}) of "
                f"{r.op} (node {r.node} of the step){'' if r.ignore is None else f', and not its ignore_index {r.ignore}'}"
                f"; step {int(step[row])} reads it and cannot be computed; fix the data file")
