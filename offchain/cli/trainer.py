"""`verde` commands of a trainer: the agent that trains a job and plays its disputes."""
from __future__ import annotations

from pathlib import Path

from repops.errors import RepOpsError

from .common import chain_args, console, verde_of


def cmd_agent(args) -> int:
    """A trainer agent for one job until it is settled and paid (restartable at any point)."""
    import logging

    from ..trainer import adversaries
    from ..agent.trainer_agent import TrainerAgent
    from ..protocol.job import JobError
    from ..protocol.jobfile import load
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonLines() if args.log_format == "json" else
                         logging.Formatter("%(asctime)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    try:
        job = load(args.job)
    except JobError as e:
        console.print(f"[red]error:[/] {e}\n  Fix: correct the job file (every error names its field)")
        return 2
    try:
        behaviour = adversaries.from_spec(args.behaviour)
    except (KeyError, ValueError, TypeError) as e:
        console.print(f"[red]error:[/] bad --behaviour {args.behaviour!r}: {e}\n  Fix: honest, or one of "
                      f"{', '.join(sorted(adversaries.BEHAVIOURS))} (name:key=value,...)")
        return 2
    chain, v = verde_of(args)
    with chain:
        device = args.device
        if device == "auto":
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            agent = TrainerAgent(v, chain.accounts[0], job, args.job_id, Path(args.workdir), behaviour, args.name,
                                 device=device)
        except RepOpsError as e:  # e.g. a GPU that fails RepOps' self-check: nothing was staked
            console.print(f"[red]error:[/] the {device} device cannot train this job: {e}\n"
                          "  Fix: train on another device (--device cpu gives the same bits, slower)")
            return 2
        agent.run(poll_s=args.poll_s, offline_s=args.offline_s)
    return 0


class _JsonLines:
    """--log-format json: one JSON object per line, for log collectors."""

    def format(self, record) -> str:
        import json
        return json.dumps({"t": round(record.created, 3), "logger": record.name, "level": record.levelname,
                           "msg": record.getMessage()})


def add(sub):
    q = sub.add_parser("agent", help="run a trainer agent for a job until it is settled")
    chain_args(q)
    q.add_argument("job", help="the job file (the same job as posted)")
    q.add_argument("job_id", type=int, nargs="?",
                   help="its id in the registry (default: wait for this job file's job to be posted)")
    q.add_argument("--workdir", required=True, help="checkpoints and the agent's state (survive restarts)")
    q.add_argument("--behaviour", default="honest", help="honest, or an adversary spec (demos and tests)")
    q.add_argument("--name", default="agent")
    q.add_argument("--poll-s", type=float, default=0.5)
    q.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="where to train: auto = the GPU (RepOps CUDA backend) when there is one")
    q.add_argument("--log-format", default="text", choices=("text", "json"))
    q.add_argument("--offline-s", type=float, default=600,
                   help="how long to wait for a node that went away before giving up (default 600)")
    q.set_defaults(fn=cmd_agent)
