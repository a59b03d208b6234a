"""A job trained the rounding-log way (repops.baseline; Srivastava, Arora, Boneh): the job's
model, data schedule and AdamW, every op in float64 rounded to float32, the rounding
decisions logged per step and Merkle-committed like a checkpoint (one leaf per rounded
output: op name and its packed codes). A replayer follows those logs. RepOps' Trainer needs
none of this; it is here to be measured against (benchmarks/baseline_vs_repops.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from repops.baseline import RoundingLog, StepLog

from ..protocol import merkle, step
from ..protocol.dataset import batch, dataset, initial_state
from ..protocol.job import Job


@dataclass
class LoggedRun:
    state: dict  # the final float32 state, by name
    logs: list  # one StepLog per step
    roots: list  # per step: the Merkle root of its log
    corrections: int  # replay: roundings the logs changed
    seconds: float


def log_root(log: StepLog) -> bytes:
    return merkle.root_of([merkle.leaf_hash(e) for e in log.packed()])


def train_logged(job: Job, mode: str = "record", logs: list | None = None, steps: int | None = None,
                 tau: float = 0.25, split: int = 1, drift: float = 0.0, threads: int | None = None) -> LoggedRun:
    """mode: record (make the logs), replay (follow `logs`), or
    nearest (no log). split, drift, threads: another machine's float64 (repops.baseline.mode)."""
    steps = job.spec.steps if steps is None else steps
    if mode == "replay" and (logs is None or len(logs) < steps):
        raise ValueError(f"replaying {steps} steps needs {steps} logs, got {len(logs or [])}")
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        st, data = initial_state(job), dataset(job)
        out, roots, corrections, t0 = [], [], 0, time.perf_counter()
        for s in range(steps):
            b = batch(job, s, data)
            rl = RoundingLog(mode, tau, logs[s] if mode == "replay" else None, split, drift, seed=s)
            with rl:
                step.run(st, b, job.spec.m)
            rl.finished()
            out.append(rl.log)
            roots.append(log_root(rl.log))
            corrections += rl.corrections
        return LoggedRun(st.state_dict(), out, roots, corrections, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
