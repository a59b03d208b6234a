"""A pre-stake scan of a job's data for faults: a class label outside [0, classes) (and not the
ignore_index), an embedding index outside [0, num_embeddings), an index of x[i] outside
[-n, n) or of gather outside [0, n), a binary cross entropy target outside [0, 1], in a row a
later batch reads. One step on meta tensors and batch 0 miss it; the step that reads the row
faults.

A cheap heuristic in front of the real mechanism, which is the fault claim (a step the spec
cannot compute is settled like any other result, and pays the honest trainers for the steps
done): it finds only values the data file holds, read by the ops of RULES (or their backward)
directly or through exact views of a data tensor (view, reshape, slice, select, ...), never
one the step computes. It serves the client (`Verde.post` refuses to post) and the
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


@dataclass(frozen=True)
class Rule:
    """What an op needs of the data it reads: values in [low, high) ([low, high] if closed),
    or equal to `ignore`; `index` says they are indices (integers), else probabilities."""
    low: float
    high: float
    closed: bool = False
    ignore: int | None = None
    index: bool = True

    def holds(self, v: np.ndarray) -> np.ndarray:
        ok = (v >= self.low) & ((v <= self.high) if self.closed else (v < self.high))  # (NaN fails)
        return ok | (v == self.ignore) if self.ignore is not None else ok

    def says(self) -> str:
        return f"[{_n(self.low)}, {_n(self.high)}{']' if self.closed else ')'}"


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _nll(a):
    return [("target", Rule(0, _classes(a), ignore=int(a["ignore_index"])))]


def _index(a):  # x[i0, i1, ...]: index d in [-n, n) of dim d (torch wraps the negatives)
    return [(("indices", d), Rule(-a["self"].shape[d], a["self"].shape[d])) for d, t in enumerate(a["indices"])
            if t is not None and t.dtype in (torch.int64, torch.int32)]


def _gather(a):
    x = a["self"]
    return [("index", Rule(0, x.shape[a["dim"] % x.dim()] if x.dim() else 1))]


def _probability(a):  # torch refuses a binary cross entropy target outside [0, 1]
    return [("target", Rule(0.0, 1.0, closed=True, index=False))]


# op -> the data-reading arguments (a name, or (a list's name, its position)) and their rules
RULES = {
    "aten.nll_loss_forward.default": _nll, "aten.nll_loss_backward.default": _nll,
    "aten.nll_loss2d_forward.default": _nll, "aten.nll_loss2d_backward.default": _nll,
    "aten.embedding.default": lambda a: [("indices", Rule(0, a["weight"].shape[0]))],
    "aten.embedding_dense_backward.default": lambda a: [("indices", Rule(0, a["num_weights"]))],
    "aten.index.Tensor": _index,
    "aten.gather.default": _gather,
    "aten.binary_cross_entropy.default": _probability,
    "aten.binary_cross_entropy_backward.default": _probability,
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
    """Node `node` (op `op`) reads elements `columns` (of a row, row-major) of data tensor `data`,
    whose values must satisfy `rule`."""
    node: int
    op: str
    data: int
    columns: np.ndarray
    rule: Rule

    @property
    def ignore(self):
        return self.rule.ignore


def index_reads(job: Job, data: dict | None = None) -> list[IndexRead]:
    """The data elements the step uses as indices (or probabilities), from one step on meta tensors."""
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
        rules = RULES.get(node.op)
        if rules is None:
            continue
        named = {a.name: _arg(func, args, kwargs, a.name) for a in func._schema.arguments}
        ins = _tensors(args) + _tensors(kwargs)
        for name, rule in rules(named):
            t = named[name[0]][name[1]] if isinstance(name, tuple) else named[name]
            at = next((i for i, u in enumerate(ins) if u is t), None)
            found = None if at is None else source(node.refs[at], [])
            if found is None:
                continue
            d, moves = found
            columns = _columns(rec.data[d].shape, moves)
            if columns is not None:
                out.append(IndexRead(j, node.op, d, columns, rule))
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
        key = (r.data, r.columns.tobytes(), r.rule)  # a backward reads what its forward read
        if key in seen:
            continue
        seen.add(key)
        t = data[names[r.data]]
        v = t.reshape(t.shape[0], -1).numpy()
        if len(r.columns) < v.shape[1]:
            v = v[:, r.columns]
        bad = ~r.rule.holds(v) & (step >= 0)[:, None]
        if bad.any():
            row = int(bad.any(1).argmax())
            col = int(bad[row].argmax())
            where = f" (element {int(r.columns[col])} of the row)" if t[0].numel() > 1 else ""
            value = int(v[row, col]) if r.rule.index else float(v[row, col])
            raise DataOutOfRange(
                f"data tensor `{names[r.data]}` row {row}{where} holds {value}, outside {r.rule.says()} of "
                f"{r.op} (node {r.node} of the step){'' if r.ignore is None else f', and not its ignore_index {r.ignore}'}"
                f"; step {int(step[row])} reads it and cannot be computed; fix the data file")
