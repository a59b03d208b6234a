"""One training step of a job (docs/PROTOCOL.md §5): what a trainer runs and traces, what the
referee traces on meta tensors, and what every rank of a data-parallel run computes a part
of (its arithmetic, `run`: onestep.py). And the step's graph (one run on meta tensors): what the
job commits, the referee checks, and N-process training reads to refuse written buffers."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import repops

from . import merkle
from . import dataset
from .onestep import run  # noqa: F401  (step.run: what a trainer and the writer of a job run)
from .job import Job
from .trace import StepRecorder


@dataclass
class Graph:
    structures: list        # per node: structure bytes
    state_refs: list        # per state tensor: trace.Ref of its end-of-step producer

    @functools.cached_property
    def tree(self) -> merkle.Tree:
        return merkle.Tree(tuple(merkle.leaf_hash(s) for s in self.structures))

    @property
    def root(self) -> bytes:
        return self.tree.root


def meta_trace(job: Job, recorder: type = StepRecorder, data: dict | None = None):
    """One step on meta tensors under repops.deterministic(), traced by a `recorder` (a
    StepRecorder class): shapes and wiring, no arithmetic. -> (the recorder, the state)."""
    model = dataset.build_model(job, "meta")
    st = dataset.state_of(job, model)
    b = tuple(t.to("meta") for t in dataset.batch(job, 0, data))
    rec = recorder(st.tensors(), list(b), chunk=job.spec.chunk, values=False)
    with repops.deterministic(trace=rec):
        run(st, b, job.spec.m)
    return rec, st


def graph_of(job: Job) -> Graph:
    """The graph of a step, from one step on meta tensors."""
    rec, st = meta_trace(job)
    return Graph([n.structure() for n in rec.nodes], [rec.where(t) for t in st.tensors()])
