"""A job's untraced steps on N processes (repops.distributed.DataParallel), spawned on this
machine. Rank 0 writes the checkpoints the trainer asks for (atomically: a rank that dies
leaves only complete ones behind) and the losses; the trainer then traces the steps its
claims need in one process from those checkpoints, and checks that the traced step ends in
the N-process run's bits (docs/PROTOCOL.md §5)."""
from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from repops.errors import DistributedError

from ..protocol.job import Job


def faulted_at(workdir: Path) -> int | None:
    """The step at which a rank of the last N-process run met a fault, or None."""
    p = Path(workdir) / FAULTED
    return json.loads(p.read_text())["step"] if p.exists() else None

LOSSES = "losses-distributed.json"
FAULTED = "fault-distributed.json"  # the step a rank met a fault at (docs/NUMERICS.md §14)


@dataclass
class Run:
    losses: dict          # step -> loss
    seconds: list         # rank 0's wall time of each step (batch, gradient, exchange, optimizer)
    bytes_sent: int       # per rank and step: its shards of its partial sums, and its finished shard, to the others
    bytes_received: int = 0  # per rank and step: the others' partials of its shard and their finished shards


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_buffers(job: Job) -> None:
    """A buffer written during the step would follow only its rank's micro-batches."""
    from ..protocol.dataset import build_model
    from ..protocol.step import graph_of
    from ..protocol.trace import Ref, STATE
    g = graph_of(job)
    model = build_model(job, "meta")
    n_params, names = len(list(model.parameters())), [n for n, _ in model.named_buffers()]
    written = [n for i, n in enumerate(names) if g.state_refs[n_params + i] != Ref(STATE, n_params + i)]
    if written:
        raise DistributedError(f"the step writes buffers {written[:4]} (running statistics): each rank would see only "
                               "its micro-batches. Train with --world-size 1, or use a model without them "
                               "(GroupNorm/LayerNorm instead of BatchNorm)")


def train_steps(job: Job, workdir: Path, world: int, start: int, stop: int, keep: set[int], *, device: str = "cpu",
                threads: int | None = None, progress: bool = False, timeout_s: float = 600) -> Run:
    """Steps [start, stop) on `world` processes from the checkpoint at `start` (or the
    initial state); checkpoints after each step in `keep`. threads: per rank (default: the
    cores shared out)."""
    import torch.multiprocessing as mp
    from repops.distributed.tree import check_world
    check_world(job.spec.m, world)
    if world > 1:  # (one process sees every micro-batch in order)
        check_buffers(job)
    threads = threads or max(1, (os.cpu_count() or 1) // world)
    out = Path(workdir) / LOSSES
    out.unlink(missing_ok=True)
    (Path(workdir) / FAULTED).unlink(missing_ok=True)
    try:
        mp.start_processes(_rank, args=(job, str(workdir), world, _free_port(), device, start, stop, sorted(keep),
                                        threads, progress, timeout_s), nprocs=world, start_method="spawn", join=True)
    except mp.ProcessRaisedException as e:
        last = str(e).strip().splitlines()[-1]
        raise DistributedError(f"the {world}-process run stopped: {last.split(': ', 1)[-1]}") from None
    except mp.ProcessExitedException as e:
        raise DistributedError(f"the {world}-process run stopped: rank {e.error_index} exited with code {e.exit_code} "
                               "(killed?). Only complete checkpoints are kept: run again to resume") from None
    r = json.loads(out.read_text())
    return Run({int(k): v for k, v in r["losses"].items()}, r["seconds"], r["bytes_sent"], r["bytes_received"])


def _rank(rank, job, workdir, world, port, device, start, stop, keep, threads, progress, timeout_s):
    import torch
    import torch.distributed as dist

    import repops
    from repops.distributed import DataParallel, init

    from ..protocol.dataset import batch, dataset, initial_state
    from .store import CheckpointStore, _atomic
    os.environ["REPOPS_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    init(rank, world, port, device, timeout_s)
    try:
        store = CheckpointStore(workdir, clean=rank == 0)
        st = initial_state(job, device)
        if start:
            st.load(store.load(start))
        data = dataset(job)
        dp = DataParallel(st.model, job.spec.m, loss_fn=st.model.loss, fingerprint=job.job_id)
        losses, seconds = {}, []
        import time

        from .progress import steps as progress_steps
        for s in progress_steps(range(start, stop), f"training on {world} process{'es' * (world > 1)}",
                                bool(progress) and not rank, total=stop):
            t0 = time.perf_counter()
            b = tuple(t.to(device) for t in batch(job, s, data))
            st.optimizer.zero_grad(set_to_none=True)
            try:
                loss = dp.backward(*b)
                with repops.deterministic():
                    st.optimizer.step()
            except repops.Fault:  # the run ends here: the trainer finds the fault again in one process
                _atomic(Path(workdir) / FAULTED, lambda p: p.write_text(json.dumps({"step": s, "rank": rank})))
                raise
            losses[s] = float(loss.detach().cpu())
            seconds.append(time.perf_counter() - t0)
            if rank == 0 and s + 1 in keep:
                store.save(s + 1, st.state_dict())
        if rank == 0:
            text = json.dumps({"losses": losses, "seconds": seconds,
                               "bytes_sent": dp.bytes_sent // max(1, stop - start),
                               "bytes_received": dp.bytes_received // max(1, stop - start)})
            _atomic(Path(workdir) / LOSSES, lambda p: p.write_text(text))
        dist.barrier()
    finally:
        dist.destroy_process_group()
