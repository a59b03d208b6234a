"""An honest trainer's untraced steps on a GPU as one CUDA graph (issue #37): every step of a
job runs the same ops on the same shapes, so the step is captured once and replayed, and
the host's work per step (RepOps' dispatch and launch glue, most of a small model's step)
runs once instead of every step. Traced steps, the ones a dispute asks for, stay eager.

Replay gives the eager step's bits: the same kernels, on the same memory, in the same order,
none of them reading anything the host decides per step (the optimizer's scalars, the lr
schedule and dropout's step counter live on the device). The index checks are RepOps' own
kernel (repops/cuda/ops.py index_check), their slots read after each replay
(repops.faults.captured / replayed): a bad index is the same fault claim. A step that cannot
be captured (a check through CuPy's arrays, a host read) runs eagerly, with one warning.
tests/cuda/test_graphs_gpu.py: replay = eager = the CPU's claim."""
from __future__ import annotations

import logging
import os

import torch

from repops import faults

log = logging.getLogger("verde.trainer")


def enabled(flag: bool | None) -> bool:
    """Trainer(graphs=None) follows VERDE_CUDA_GRAPHS=1: off by default until a GPU machine
    has run tests/cuda/test_graphs_gpu.py green (scripts/gpu-check.sh)."""
    return flag if flag is not None else os.environ.get("VERDE_CUDA_GRAPHS", "0") == "1"


class StepGraph:
    """One captured step: static batch tensors the next batch is copied into, the graph, the
    loss tensor it writes, and its index checks."""

    def __init__(self, run_step, batch: tuple, key):
        self.key = key
        self.static = tuple(t.clone() for t in batch)
        self.graph = torch.cuda.CUDAGraph()
        with faults.captured() as self.checks, torch.cuda.graph(self.graph):
            self.loss = run_step(self.static)
        self.replays = 0

    def replay(self, batch: tuple):
        for s, b in zip(self.static, batch):
            s.copy_(b)
        self.graph.replay()
        self.replays += 1
        faults.replayed(self.checks)  # (one read; a fault raises here, as the eager block's end does)
        return self.loss


class GraphRunner:
    """A trainer's graph of its untraced step: the first step runs eagerly on a side stream
    (lazy initialisations, the device constants' uploads), the second is captured, then
    replayed; recaptured when the state's tensors or the batch's shapes change."""

    def __init__(self):
        self.graph: StepGraph | None = None
        self.warm: set = set()
        self.failed = ""  # why the capture was given up (then every step runs eagerly)

    @staticmethod
    def _key(st, batch):
        return (tuple(t.data_ptr() for t in st.tensors()),
                tuple((tuple(t.shape), t.dtype, t.device) for t in batch))

    def run(self, st, batch: tuple, run_step):
        """The step's loss tensor (run_step(batch) under repops.deterministic, eager or replayed)."""
        key = self._key(st, batch)
        if self.failed:
            return run_step(batch)
        if self.graph is not None and self.graph.key == key:
            return self.graph.replay(batch)
        if key not in self.warm:
            self.warm.add(key)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                loss = run_step(batch)
            torch.cuda.current_stream().wait_stream(side)
            return loss
        try:
            self.graph = StepGraph(run_step, batch, key)
        except Exception as e:  # noqa: BLE001 - a capture failure costs speed, never a step
            self.failed, self.graph = f"{type(e).__name__}: {str(e)[:500]}", None
            log.warning("the training step cannot be captured as a CUDA graph (%s); it runs eagerly", self.failed)
            torch.cuda.synchronize()
            return run_step(batch)  # (nothing captured ran: the step is still to do)
        return self.graph.replay(batch)
