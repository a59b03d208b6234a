"""`verde` commands of a trainer: the agent that trains a job and plays its disputes."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from .common import bounded, chain_args, console, eth, load_job, verde_of


def cmd_agent(args) -> int:
    """A trainer agent for one job until it is settled and paid (restartable at any point)."""
    import logging

    from repops.errors import DistributedError, RepOpsError

    from ..trainer import adversaries
    from ..agent.trainer_agent import TrainerAgent
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonLines() if args.log_format == "json" else
                         logging.Formatter("%(asctime)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    job = load_job(args.job)
    try:
        from repops.distributed.tree import check_world
        check_world(job.spec.m, args.world_size)  # before any chain or stake
    except DistributedError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        return 2
    ctx = None
    try:
        behaviour = adversaries.from_spec(args.behaviour)
        if behaviour.name != "honest":  # a cheat aimed at what the job lacks would do nothing: refused now
            from ..dispute.context import Context
            from ..protocol.trace import decode_structure
            ctx = Context(job)
            adversaries.check_target(behaviour, job.spec.steps, [decode_structure(s)[0] for s in ctx.graph.structures])
    except (KeyError, ValueError, TypeError) as e:
        console.print(f"[red]error:[/] bad --behaviour {args.behaviour!r}: {e}\n  Fix: honest, or one of the "
                      "behaviours `verde agent --behaviour help` lists (name:key=value,...)", markup=False,
                      highlight=False)
        return 2
    chain, v = verde_of(args)
    with chain:
        device = args.device
        if device == "auto":
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            policy = _policy(args, chain)
            agent = TrainerAgent(v, chain.accounts[0], job, args.job_id, Path(args.workdir), behaviour, args.name,
                                 device=device, policy=policy, world_size=args.world_size, ctx=ctx)
        except DistributedError as e:
            console.print(f"[red]error:[/] {escape(str(e))}")
            return 2
        except RepOpsError as e:  # e.g. a GPU that fails RepOps' self-check: nothing was staked
            console.print(f"[red]error:[/] the {device} device cannot train this job: {escape(str(e))}\n"
                          "  Fix: train on another device (--device cpu gives the same bits, slower)")
            return 2
        server = None
        if args.serve:
            from ..protocol import http_store
            server = http_store.serve(agent.publish, *args.serve)
            host, port = server.server_address[:2]
            logging.getLogger("verde.agent").info("%s: serving its published results %s at http://%s:%d (verde fetch "
                                                  "ID JOB --from http://THIS-HOST:%d)", args.name, agent.publish, host,
                                                  port, port)
        try:
            from .profiles import profile_of
            agent.run(poll_s=profile_of(chain).poll_s if args.poll_s is None else args.poll_s, offline_s=args.offline_s)
        except KeyboardInterrupt:  # SIGTERM too (cli._sigterm_interrupts)
            _warn_at_risk(agent)
            raise
        finally:
            if server is not None:
                server.shutdown()
    return 0


def _warn_at_risk(agent) -> None:
    import logging
    log = logging.getLogger("verde.agent")
    try:
        risk = agent.at_risk()
    except Exception as e:  # noqa: BLE001 - the node may be what is gone
        risk = f"the chain cannot say what is at stake now ({type(e).__name__}); restart it with the same --workdir"
    if risk:
        log.error("%s: STOPPED WITH A STAKE AT RISK: %s", agent.name, risk)


def cmd_train(args) -> int:
    """Train a job file locally, no chain: the claim a trainer would commit, so a client or a
    trainer checks a setup (model, data, device) before any money moves."""
    import tempfile
    import time

    from repops.errors import DistributedError, RepOpsError

    from safetensors.torch import save_file

    from ..dispute.context import Context
    from ..protocol.delivery import model_tensors
    from ..protocol.program import OUTPUTS
    from ..trainer import Trainer
    job = load_job(args.job, "correct the job file or its model/data (every error names its field)")
    with tempfile.TemporaryDirectory(prefix="verde-train-") as tmp:
        workdir = Path(args.workdir or tmp)
        t0 = time.time()
        try:
            trainer = Trainer(job, workdir, "train", device=args.device, progress=True, world_size=args.world_size)
            claim = trainer.train()
        except DistributedError as e:
            console.print(f"[red]error:[/] {escape(str(e))}")
            return 2
        except Exception as e:  # noqa: BLE001 - what the client's model causes is said as the model's (exit 2)
            from repops.errors import DTypeError, UnsupportedOpError

            from ..protocol.model_errors import explain
            said = explain(e, "while training") if isinstance(e, (UnsupportedOpError, DTypeError)) or \
                not isinstance(e, RepOpsError) else None
            if said is not None:
                raise said from None
            if not isinstance(e, RepOpsError):
                raise
            fix = ("train on another device (--device cpu gives the same bits, slower)" if args.device != "cpu" else
                   "the op or dtype named above is not reproducible in RepOps: change the model (docs/NUMERICS.md "
                   "lists what is defined)")
            console.print(f"[red]error:[/] the {args.device} device cannot train this job: {e}\n  Fix: {fix}",
                          markup=False, highlight=False)
            return 2
        if trainer.fault_step is not None:  # a step the spec cannot compute: the run's result is its fault claim
            f = trainer.faulted()
            k, e = f.where
            console.print(f"job {job.job_id.hex()[:16]}: step {f.step} of {job.spec.steps} cannot be computed: node "
                          f"{f.node} ({f.nodes[-1].op}) faults (rule {f.rule}; kernel {k}, element {e}): "
                          f"{trainer.fault_message}\n"
                          f"  a trainer commits the fault claim {claim.hex()} and is paid for the {f.step} steps "
                          "before it (docs/PROTOCOL.md §6)\n  Fix: correct the data (or program) that step reads, "
                          "then post the job", markup=False, highlight=False)
            return 2
        seconds = time.time() - t0
        S, _ = trainer.opened[job.spec.steps]
        losses = [trainer.losses[k] for k in sorted(trainer.losses)]
        unsettled = Context(job).kernel_graph.unsettled
        final = model_tensors(job, trainer.store.load(job.spec.steps))
        if args.out:
            save_file(final, args.out)
    on = f"{args.world_size} processes ({job.spec.m} micro-batches)" if args.world_size > 1 else args.device
    if job.spec.inference:
        out = final[OUTPUTS]
        done = f"outputs {str(out.dtype).removeprefix('torch.')} {list(out.shape)} (tensor {OUTPUTS!r})"
    else:
        done = f"loss {losses[0]:.4f} -> {losses[-1]:.4f}"
    console.print(f"job {job.job_id.hex()[:16]}: {job.spec.steps} steps on {on} in {seconds:.1f} s; {done}")
    console.print(f"final claim C_T  {claim.hex()}")
    console.print(f"state root S_T   {S.hex()}")
    if unsettled:
        j, op = unsettled[0]
        console.print(f"[yellow]note:[/] {len(unsettled)} node(s) of a step (first: node {j}, {op}) compute integers "
                      "from the batch or weights; a dispute that reaches one cannot be settled on chain: `verde post` "
                      "refuses this job (ship such integers, e.g. labels, in the data file)")
    else:
        console.print("every node of a step can be settled on chain")
    if args.out:
        console.print(f"wrote the final {'outputs and weights' if job.spec.inference else 'weights'} "
                      f"({len(final)} tensors) to {args.out}")
    if args.workdir:
        console.print(f"checkpoints in {args.workdir}")
    return 0


def _policy(args, chain):
    """The agent's policy: the flags given, else the profile's (profiles.py), said in the log."""
    import dataclasses
    import logging

    from .profiles import applies, profile_of
    base = profile_of(chain).policy
    given = {k: v for k, v in (("min_clock_s", args.min_clock_s), ("min_reveal_window_s", args.min_reveal_window_s),
                               ("train_margin", args.train_margin), ("max_stake_wei", args.max_stake),
                               ("min_answer_window_s", args.min_answer_window_s), ("max_lock_s", args.max_lock_s),
                               ("gas_price_margin", args.gas_price_margin), ("disk_reserve_mb", args.disk_reserve_mb))
             if v is not None}
    policy = dataclasses.replace(base, **given)
    logging.getLogger("verde.agent").info(
        "%s: %s: stakes on a dispute clock >= %d s, a reveal window >= %d s, a commit deadline >= %gx its training "
        "time + %d s, at most %g ETH", args.name, applies(chain), policy.min_clock_s, policy.min_reveal_window_s,
        policy.train_margin, policy.commit_slack_s, policy.max_stake_wei / 1e18)
    return policy


class _JsonLines:
    """--log-format json: one JSON object per line, for log collectors."""

    def format(self, record) -> str:
        import json
        return json.dumps({"t": round(record.created, 3), "logger": record.name, "level": record.levelname,
                           "msg": record.getMessage()})


def _address(value: str):
    from ..protocol.http_store import parse_address
    try:
        return parse_address(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class _BehaviourHelp(argparse.Action):
    """--behaviour help: list the behaviours and exit, before the job and workdir are asked for."""

    def __call__(self, parser, namespace, values, option_string=None):
        if values == "help":
            from ..trainer.adversaries import summary
            print("behaviours (--behaviour NAME or NAME:key=value,...; the values shown are the defaults):")
            print("\n".join("  " + line for line in summary()))
            parser.exit(0)
        setattr(namespace, self.dest, values)


def add(sub):
    q = sub.add_parser("agent", help="run a trainer agent for a job until it is settled")
    chain_args(q)
    q.add_argument("job", help="the job file (the same job as posted)")
    q.add_argument("job_id", type=int, nargs="?",
                   help="its id in the registry (default: wait for this job file's job to be posted)")
    q.add_argument("--workdir", required=True, help="checkpoints and the agent's state (survive restarts)")
    q.add_argument("--behaviour", default="honest", action=_BehaviourHelp,
                   help="honest, or an adversary spec name:key=value,... (demos and tests); `help` lists them")
    q.add_argument("--name", default="agent")
    q.add_argument("--poll-s", type=float, default=None,
                   help="seconds between its reads of the chain while it waits (default: 0.5 on a local chain, 4 on "
                        "any other, whose blocks come every ~12 s)")
    q.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="where to train: auto = the GPU (RepOps CUDA backend) when there is one")
    q.add_argument("--log-format", default="text", choices=("text", "json"))
    q.add_argument("--serve", type=_address, metavar="HOST:PORT",
                   help="serve the published results over HTTP while it runs, for `verde fetch --from http://...` on "
                        "another machine (0.0.0.0:PORT: every interface); any static file server of WORKDIR/published "
                        "serves the same")
    q.add_argument("--world-size", type=bounded(1, 4096), default=1, metavar="N",
                   help="train on N processes (must divide the job's micro_batches; the same bits as 1)")
    q.add_argument("--offline-s", type=float, default=600,
                   help="how long to wait for a node that went away before giving up (default 600)")
    from ..agent.policy import Policy
    p = q.add_argument_group("policy", "the terms this agent stakes on (the commitments must match the job file "
                                       "in any case); a job outside them is refused before joining")
    from .profiles import LOCAL, PUBLIC
    p.add_argument("--min-clock-s", type=int, default=None, help="least dispute clock per party (default "
                   f"{PUBLIC.policy.min_clock_s}; on a local chain {LOCAL.policy.min_clock_s})")
    p.add_argument("--min-reveal-window-s", type=int, default=None, help="least reveal window (default "
                   f"{PUBLIC.policy.min_reveal_window_s}; on a local chain {LOCAL.policy.min_reveal_window_s})")
    p.add_argument("--train-margin", type=float, default=None,
                   help="the commit deadline must leave this many times the measured training time (default "
                        f"{Policy.train_margin:g})")
    p.add_argument("--max-stake", type=eth, default=None, help="most ETH it stakes on one job (default "
                   f"{Policy.max_stake_wei / 1e18:g})")
    p.add_argument("--min-answer-window-s", type=int, default=None, help="least time its registry gives to answer a "
                   f"delivery challenge on chain (default {PUBLIC.policy.min_answer_window_s}; on a local chain "
                   f"{LOCAL.policy.min_answer_window_s})")
    p.add_argument("--max-lock-s", type=int, default=None, help="longest its stake may be held: the reveal deadline, "
                   f"a match per other seat, the delivery window (default {Policy.max_lock_s})")
    p.add_argument("--gas-price-margin", type=float, default=None, help="its later moves' gas is budgeted at this "
                   "many times today's gas price: the key must hold it, a cheater's stake must cover a match, a seat's "
                   f"share of the payment its own moves, the registry's bond an answer (default {Policy.gas_price_margin:g})")
    p.add_argument("--disk-reserve-mb", type=int, default=None, help="free disk it keeps beyond the job's checkpoints "
                   f"(it refuses a job whose checkpoints would not fit on --workdir's disk; default {Policy.disk_reserve_mb})")
    q.set_defaults(fn=cmd_agent)
    q = sub.add_parser("train", help="train (or run an inference job) locally, no chain: print the claim a trainer commits")
    q.add_argument("job", help="the job file")
    q.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where to train (same bits on both)")
    q.add_argument("--workdir", help="keep the checkpoints here (default: a temporary directory)")
    q.add_argument("--out", help="write the final weights (an inference job: with its outputs) here, safetensors")
    q.add_argument("--world-size", type=bounded(1, 4096), default=1, metavar="N",
                   help="train on N processes (must divide the job's micro_batches; the same bits as 1)")
    q.set_defaults(fn=cmd_train)
