"""`verde` command line. `verde demo` is README command 1: the on-chain referee
arithmetic against the off-chain one, RepOps determinism, an off-chain dispute, and the
job settled on chain by trainer agents as processes (main_job.py). The other subcommands
work against a running node: node, deploy, post, status, watch, agent, withdraw."""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from repops.errors import RepOpsError

from .chain import ChainError
from .chain.anvil import MNEMONIC

console = Console()


def _step(msg: str):
    console.print(f"[bold cyan]==>[/] {msg}")


def cmd_compile(args) -> int:
    from .chain import compile_contracts
    t = time.time()
    arts = compile_contracts(use_cache=not args.force)
    console.print(f"compiled {len(arts)} contracts in {time.time() - t:.1f} s: {', '.join(sorted(arts))}")
    return 0


def cmd_node(args) -> int:
    """Run a local node in the foreground, for agents, `verde` commands or ape to connect to."""
    from .chain import AnvilProcess
    from .chain.embedded_node import EmbeddedNodeProcess
    if args.embedded:
        node = EmbeddedNodeProcess(port=args.port)
    else:
        node = AnvilProcess(port=args.port, extra_args=("--state", args.state) if args.state else ())
    with node:
        kept = f"; state kept in {args.state}" if args.state and not args.embedded else ""
        console.print(f"{node.name} listening on {node.url}{kept}; its funded keys are the test mnemonic's "
                      f"(`{MNEMONIC}`); Ctrl-C stops it")
        try:
            while node.proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        node.check_alive()
    return 0


def cmd_demo(args) -> int:
    import numpy as np

    from . import softfloat as sf
    from . import softfloat_check as chk
    from .chain import compile_contracts, connect

    t0 = time.time()
    _step("compiling contracts/ (solcjs through py-solc-x standard JSON; cached by source hash)")
    arts = compile_contracts()
    console.print(f"    {len(arts)} contracts: {', '.join(sorted(arts))}")

    _step(f"connecting to the {args.chain} chain")
    with connect(args.chain, arts) as chain:
        console.print(f"    chain id {chain.w3.eth.chain_id}, {len(chain.accounts)} funded accounts, "
                      f"block {chain.w3.eth.block_number}")
        _step("deploying the binary32 referee arithmetic (Float32.sol via the Primitives table)")
        harness = chain.deploy("Float32Harness")
        console.print(f"    Float32Harness at {harness.address} ({chain.gas_log[-1][1]:,} gas)")

        _step(f"checking every primitive on chain against the Python soft-float "
              f"({args.vectors} vectors each: edge cases + random bit patterns)")
        rng = np.random.default_rng(args.seed)
        table = Table("primitive", "opcode", "vectors", "mismatches", "gas median", "gas max")
        failures, medians = 0, []
        for name, (code, arity, _) in sorted(sf.PRIMITIVES.items(), key=lambda kv: kv[1][0]):
            a, b, c = chk.sample(name, args.vectors, rng)
            want = chk.softfloat_results(name, a, b, c)
            got, gas = chain.call(harness.functions.run(code, a.tolist(), b.tolist(), c.tolist()))
            bad = int((np.array(got, dtype=np.uint32) != want).sum())
            failures += bad
            medians.append(int(statistics.median(gas)))
            table.add_row(name, str(code), str(len(a)), ("[red]" if bad else "[green]") + str(bad),
                          f"{medians[-1]:,}", f"{max(gas):,}")
        console.print(table)

    from repops.models.quick_train import quick_train
    _step("RepOps determinism: the Llama-style model, 10 AdamW steps under repops.deterministic(), "
          "with 1 and with 2 threads")
    runs = [quick_train("llama", 10, t) for t in (1, 2)]
    same = runs[0][0] == runs[1][0]
    failures += 0 if same else 1
    for t, (digest, losses) in zip((1, 2), runs):
        console.print(f"    {t} thread(s): loss {losses[0]:.4f} -> {losses[-1]:.4f}, parameters sha256 {digest[:16]}…")
    console.print(f"    {'[green]identical bits[/]' if same else '[red]DIFFERENT bits[/]'}")
    with _workdir(args.workdir) as work:
        job_file, job, ctx, spec = _offchain_dispute(args, work)
        failures += job is None
        if job is not None:
            from . import main_job
            _step(f"the job on chain, with trainer agents as separate processes: two honest, one cheater "
                  f"(`{spec}`); agent state and logs in {work}")
            failures += main_job.run(args.chain, job_file, job, ctx, work, spec, Path(args.report), console,
                                     primitive_gas=max(medians))
    verdict = "[green]OK[/]" if failures == 0 else f"[red]{failures} FAILURES[/]"
    console.print(f"done in {time.time() - t0:.1f} s: on-chain vs off-chain soft-float, RepOps determinism, the "
                  f"off-chain dispute and the job settled on chain by agents {verdict}")
    return 0 if failures == 0 else 1


@contextlib.contextmanager
def _workdir(path):
    """--workdir DIR keeps the agents' checkpoints, state and logs; default: a temp dir."""
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path).resolve()
    else:
        with tempfile.TemporaryDirectory(prefix="verde-demo-") as tmp:
            yield Path(tmp)


def _offchain_dispute(args, work: Path):
    """A Llama-style job on the repository's own text: an honest trainer here, a cheating
    one in another process (pipe transport), the client as referee.
    -> (job file, job, context, cheat spec); job None when the dispute went wrong."""
    from .dispute.context import Context
    from .dispute.party import InProcess, Party
    from .dispute.referee import dispute
    from .dispute.transport import PipeEndpoint
    from .protocol.corpus import text_job
    from .protocol.job import load
    from .protocol.trace import decode_structure
    from .trainer import Trainer

    job_file = text_job(work / "job", args.steps)
    job = load(job_file)
    _step(f"off-chain dispute: a {args.steps}-step Llama-style job on the repository's own text "
          f"(job id {job.job_id.hex()[:16]}…)")
    ctx = Context(job)
    ops = [decode_structure(x)[0] for x in ctx.graph.structures]
    node = ops.index("repops.attention.default")  # the first attention of the step
    spec = f"corrupt-value:step={args.steps // 2},node={node},element=163,ulps=64"  # 64 ulps: never absorbed
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        honest = Trainer(job, tmp / "honest", "honest", progress=True)
        honest.train()
        console.print(f"    honest trainer: {len(ops)} ops per step, loss {honest.losses[0]:.3f} -> "
                      f"{honest.losses[args.steps - 1]:.3f}, claim {honest.final_claim().hex()[:16]}…")
        ep = PipeEndpoint([sys.executable, "-m", "offchain.dispute.transport", "serve", "--job", str(job_file),
                           "--workdir", str(tmp / "cheater"), "--name", "cheater", "--behaviour", spec])
        try:
            console.print(f"    cheating trainer (another process, `{spec}`): claim {ep.final.hex()[:16]}…")
            v = dispute(ctx, Party("honest", InProcess(honest), final=honest.final_claim()),
                        Party("cheater", ep, final=ep.final))
        finally:
            ep.close()
    console.print(f"    verdict: {v}")
    console.print(f"    {len(v.rounds)} step rounds, {v.answers} answers, {v.bytes_received:,} bytes to the referee, "
                  f"one soft-float primitive executed, {v.seconds:.1f} s")
    ok = v.winner == "honest" and v.level == 5
    return job_file, (job if ok else None), ctx, spec


# -- chain-facing commands (a node that outlives the command: anvil via `verde node`, or any RPC) ------
STATUS = ("none", "open", "disputed", "settled")


def _verde(args):
    import json

    from .chain.verde import Verde
    chain = _connect(args)
    try:
        deployment = json.loads(Path(args.deployment).read_text())
    except OSError as e:
        chain.close()
        raise ChainError(f"cannot read the deployment file {args.deployment}: {e.strerror}",
                         "run `verde deploy --out FILE` first, or pass --deployment FILE") from None
    except ValueError as e:
        chain.close()
        raise ChainError(f"the deployment file {args.deployment} is not JSON: {e}", "re-run `verde deploy`") from None
    try:
        return chain, Verde.attach(chain, deployment)
    except BaseException:
        chain.close()
        raise


def _eth(value: str) -> int:
    from decimal import Decimal, InvalidOperation
    try:
        wei = Decimal(value) * 10**18
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{value!r} is not an amount of ETH") from None
    if wei <= 0 or wei != wei.to_integral_value():
        raise argparse.ArgumentTypeError(f"{value!r}: amounts must be positive, at most 18 decimals")
    return int(wei)


def _connect(args):
    """--chain is a spec; the ape scripts (scripts/verde.py) pass a Chain built on ape's provider."""
    from .chain import Chain, connect
    return args.chain if isinstance(args.chain, Chain) else connect(args.chain)


def cmd_deploy(args) -> int:
    import json

    from .chain.verde import Verde
    with _connect(args) as chain:
        v = Verde.deploy(chain)
        Path(args.out).write_text(json.dumps(v.addresses(), indent=1))
        console.print(f"deployed JobRegistry {v.registry.address}, DisputeGame {v.game.address}, "
                      f"OperatorGame {v.operators.address}; wrote {args.out}")
    return 0


def cmd_post(args) -> int:
    from .dispute.context import Context
    from .protocol.job import JobError, load
    try:
        job = load(args.job)
    except JobError as e:
        console.print(f"[red]error:[/] {e}\n  Fix: correct the job file (every error names its field)")
        return 2
    chain, v = _verde(args)
    with chain:
        _step(f"committing to job {job.job_id.hex()[:16]}… (graph, data, kernel structures: one traced step)")
        jid = v.post(job, Context(job), args.payment, args.stake, max_trainers=args.max_trainers,
                     join_s=args.join_s, commit_s=args.join_s + args.train_s,
                     reveal_s=args.join_s + args.train_s + args.reveal_s, clock_s=args.clock_s,
                     client=chain.accounts[0])
        console.print(f"posted job {jid} (payment {args.payment / 1e18} ETH, stake {args.stake / 1e18} ETH)")
    return 0


def cmd_status(args) -> int:
    chain, v = _verde(args)
    with chain:
        j = _existing_job(v, args.job_id)
        console.print(f"job {args.job_id}: {STATUS[j[2]]}, payment {j[1] / 1e18} ETH, client {j[0]}, "
                      f"{len(j[5])} trainer(s): {', '.join(j[5]) or '-'}")
        for line in _dispute_status(v, args.job_id):
            console.print("  " + line)
    return 0


def _existing_job(v, job_id: int):
    j = v.status(job_id)
    if j[2] == 0:  # Status.None: never posted
        raise ChainError(f"no job {job_id} in this registry", "check the id (`verde post` printed it)")
    return j


def _dispute_status(v, job_id: int) -> list[str]:
    """One line per match of the job: its decision, or where it stands and whose move it is."""
    from .agent.watcher import Watcher
    from .chain.verde import OP_PHASE_NAMES, PHASE_NAMES, PHASE_OPERATOR
    w = Watcher(v, job_id)
    w.poll()
    out = []
    for m in sorted(w.matches):
        d = v.decision(m)
        if d is not None:
            out.append(f"match {m}: decided at level {d['level']}, {d['winner']} won, {d['loser']} lost: {d['reason']}")
            continue
        s = v.match_state(m)
        where = PHASE_NAMES[s["phase"]]
        if s["phase"] == PHASE_OPERATOR:
            where += ", " + OP_PHASE_NAMES[v.operator_state(m)["phase"]]
        out.append(f"match {m}: {where}; clocks left {s['clock_left'][0]} s / {s['clock_left'][1]} s")
    return out


def cmd_withdraw(args) -> int:
    chain, v = _verde(args)
    with chain:
        me = chain.accounts[0]
        owed = v.owed(me.address)
        if owed == 0:
            console.print(f"nothing owed to {me.address}")
            return 0
        chain.transact(v.registry.functions.withdraw(), sender=me)
        console.print(f"withdrew {owed / 1e18} ETH to {me.address}")
    return 0


def cmd_agent(args) -> int:
    """A trainer agent for one job until it is settled and paid (restartable at any point)."""
    import logging

    from . import adversaries
    from .agent.trainer_agent import TrainerAgent
    from .protocol.job import JobError, load
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
    chain, v = _verde(args)
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


def cmd_watch(args) -> int:
    """Print a job's events (joins, commitments, the dispute's narrowing, the decision) as
    they reach the chain; stop once it is settled unless --follow."""
    from .agent.watcher import Watcher
    chain, v = _verde(args)
    with chain:
        _existing_job(v, args.job_id)
        w = Watcher(v, args.job_id)
        while True:
            for line in w.poll():
                console.print(line)
            if not args.follow and any(name == "Settled" for _, name, _ in w.events):
                return 0
            time.sleep(args.poll_s)


def main(argv=None, chain=None) -> int:
    """`chain`: a connected Chain to use instead of --chain (the ape scripts pass ape's)."""
    p = argparse.ArgumentParser(prog="verde", description="Verifiable delegated training (Verde + RepOps)")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="the main job, end to end on the embedded defaults")
    d.add_argument("--chain", default="embedded", help="embedded (default: py-evm, served to the agents by a child "
                   "process) | anvil | anvil:PORT")
    d.add_argument("--steps", type=int, default=12, help="steps of the off-chain dispute job (default 12)")
    d.add_argument("--vectors", type=int, default=40, help="vectors per primitive (default 40)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--report", default="verde-report.png",
                   help="where the report PNG goes (loss curves, the bisection's path, gas per level)")
    d.add_argument("--workdir", help="keep the agents' checkpoints, state and logs here (default: a temp dir)")
    d.set_defaults(fn=cmd_demo)
    c = sub.add_parser("compile", help="compile contracts/ (cached)")
    c.add_argument("--force", action="store_true", help="ignore the artifact cache")
    c.set_defaults(fn=cmd_compile)
    n = sub.add_parser("node", help="run a local chain in the foreground (Anvil, or the embedded one)")
    n.add_argument("--port", type=int, default=8545)
    n.add_argument("--embedded", action="store_true", help="serve the embedded py-evm chain instead of Anvil")
    n.add_argument("--state", help="Anvil: load the chain from FILE and save it there on exit (survives restarts)")
    n.set_defaults(fn=cmd_node)
    for name, fn, what in (("deploy", cmd_deploy, "deploy the contracts; write their addresses"),
                           ("post", cmd_post, "post a job file with its payment"),
                           ("status", cmd_status, "show a job's state"),
                           ("withdraw", cmd_withdraw, "withdraw what the registry owes your key"),
                           ("agent", cmd_agent, "run a trainer agent for a job until it is settled"),
                           ("watch", cmd_watch, "follow a job's events until it is settled")):
        q = sub.add_parser(name, help=what)
        q.add_argument("--chain", required=True, help="rpc:URL (key: VERDE_PRIVATE_KEY or VERDE_KEYSTORE) or anvil:PORT")
        q.set_defaults(fn=fn)
        if name == "deploy":
            q.add_argument("--out", default="deployment.json")
            continue
        q.add_argument("--deployment", default="deployment.json", help="written by `verde deploy`")
        if name == "post":
            q.add_argument("job", help="the job file (YAML or JSON)")
            q.add_argument("--payment", type=_eth, required=True, help="ETH paid to the accepted trainers")
            q.add_argument("--stake", type=_eth, required=True, help="ETH each trainer stakes")
            q.add_argument("--max-trainers", type=int, default=3)
            q.add_argument("--join-s", type=int, default=600, help="seconds to join")
            q.add_argument("--train-s", type=int, default=3600, help="seconds after joining to commit a result")
            q.add_argument("--reveal-s", type=int, default=600, help="seconds after that to reveal it")
            q.add_argument("--clock-s", type=int, default=3600, help="each party's dispute clock")
        if name in ("status", "watch"):
            q.add_argument("job_id", type=int)
        if name == "watch":
            q.add_argument("--follow", action="store_true", help="keep watching after the job is settled")
            q.add_argument("--poll-s", type=float, default=1.0)
        if name == "agent":
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
    args = p.parse_args(argv)
    if chain is not None:
        args.chain = chain
    try:
        return args.fn(args)
    except ChainError as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
