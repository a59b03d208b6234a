"""One training step of a job (docs/PROTOCOL.md §5): what a trainer runs and traces, what the
referee traces on meta tensors, and what every rank of a data-parallel run computes a part
of. With M = 1 it is loss.backward(); with M > 1 the mean of M micro-batch gradients summed in
the fixed tree (repops.distributed). And the step's graph (one run on meta tensors): what the
job commits, the referee checks, and N-process training reads to refuse written buffers."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch

import repops
from repops.distributed.micro import single_process_step

from . import merkle
from . import dataset
from .job import Job
from .trace import StepRecorder


def run(st, batch: tuple, m: int = 1, loss_hook: Callable | None = None):
    """zero_grad, the gradient, the optimizer step (under repops.deterministic()); returns
    the loss tensor. An inference job's step is the program's forward alone (it writes the
    outputs into the state); it returns None."""
    if st.optimizer is None:
        with torch.no_grad():
            st.model.loss(*batch)
        return None
    st.optimizer.zero_grad(set_to_none=True)
    if m == 1:
        loss = st.model.loss(*batch)
        if loss_hook is not None:
            loss = loss_hook(loss)
        loss.backward()
    else:
        params = [p for p in st.model.parameters() if p.requires_grad]
        loss = single_process_step(st.model.loss, params, batch, m, loss_hook)
    st.optimizer.step()
    return loss


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
