"""`verde` command line. `verde demo` is README command 1: today it shows what exists
(contracts compiled and deployed, the on-chain referee arithmetic agreeing bit for bit
with the off-chain one); it grows into the full delegated-training job."""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

from .chain import ChainError

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
    """Run an Anvil node in the foreground (for ape or agents to connect to)."""
    from .chain import AnvilProcess
    with AnvilProcess(port=args.port) as node:
        console.print(f"Anvil listening on {node.url} (chain id 31337); Ctrl-C stops it")
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
        failures = 0
        for name, (code, arity, _) in sorted(sf.PRIMITIVES.items(), key=lambda kv: kv[1][0]):
            a, b, c = chk.sample(name, args.vectors, rng)
            want = chk.softfloat_results(name, a, b, c)
            got, gas = chain.call(harness.functions.run(code, a.tolist(), b.tolist(), c.tolist()))
            bad = int((np.array(got, dtype=np.uint32) != want).sum())
            failures += bad
            table.add_row(name, str(code), str(len(a)), ("[red]" if bad else "[green]") + str(bad),
                          f"{statistics.median(gas):,.0f}", f"{max(gas):,}")
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
    failures += _offchain_dispute(args)
    _step("not built yet: trainer agents as separate processes with their own state (see `issues`)")
    verdict = "[green]OK[/]" if failures == 0 else f"[red]{failures} MISMATCHES[/]"
    console.print(f"done in {time.time() - t0:.1f} s: on-chain vs off-chain soft-float, RepOps determinism, the "
                  f"off-chain dispute and the job settled on chain {verdict}")
    return 0 if failures == 0 else 1


def _offchain_dispute(args) -> int:
    """A Llama-style job on the repository's own text: an honest trainer here, a cheating
    one in another process (pipe transport), the client as referee. -> failures."""
    import tempfile
    from pathlib import Path

    from .dispute.context import Context
    from .dispute.party import InProcess, Party
    from .dispute.referee import dispute
    from .dispute.transport import PipeEndpoint
    from .protocol.corpus import text_job
    from .protocol.job import load
    from .protocol.trace import decode_structure
    from .trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        job_file = text_job(tmp / "job", args.steps)
        job = load(job_file)
        _step(f"off-chain dispute: a {args.steps}-step Llama-style job on the repository's own text "
              f"(job id {job.job_id.hex()[:16]}…)")
        ctx = Context(job)
        ops = [decode_structure(x)[0] for x in ctx.graph.structures]
        node = ops.index("aten._softmax.default")
        step = args.steps // 2
        spec = f"corrupt-value:step={step},node={node},element=163"
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
        failures = 0 if v.winner == "honest" and v.level == 5 else 1
        from . import adversaries
        cheater = Trainer(job, tmp / "cheater-onchain", "cheater", behaviour=adversaries.from_spec(spec))
        return failures + _onchain_job(args, job, ctx, [honest, Trainer(job, tmp / "honest2", "honest-2"), cheater])


# which level each game move belongs to; postChildren is level 2 in DisputeGame, then 3
# (kernels) until postKernel, then 4 (chunks)
_LEVEL_OF = {"open": 1, "postClaims": 1, "openStep": 2, "postTop": 2, "postNode": 2, "resolveInput": 2,
             "postStateLeaf": 2, "resolveState": 2, "postKernelTop": 3, "postKernel": 3, "postTensorTop": 4,
             "postChunk": 4, "resolveOperand": 4, "resolveStep": 5}


def gas_by_level(log: list[tuple[str, int]]) -> dict[int, int]:
    out, level = {}, 2
    for what, gas in log:
        name = what.split("(")[0]
        if name == "postChildren":
            lv = level
        elif name in _LEVEL_OF:
            lv = _LEVEL_OF[name]
            level = {"postKernelTop": 3, "postTensorTop": 4}.get(name, level)
        else:
            continue
        out[lv] = out.get(lv, 0) + gas
    return out


def _onchain_job(args, job, ctx, trainers) -> int:
    """The same job posted on chain: three trainers stake and commit, the registry finds the
    disagreement, the dispute is played on chain through all five levels, the honest ones
    are paid. -> failures. Writes the report PNG."""
    from pathlib import Path

    from .chain import connect
    from .chain.verde import Verde
    pay, stake = 3 * 10**18, 10**18
    _step(f"on-chain job on the {args.chain} chain: post, three trainers stake and commit, settle, dispute")
    t0 = time.time()
    for t in trainers[1:]:
        t.progress = True
        t.train()
    with connect(args.chain) as chain:
        v = Verde.deploy(chain)
        seats = list(zip(chain.accounts[2:5], trainers))
        start = len(chain.gas_log)
        jid, receipt = v.deliver(job, ctx, seats, pay, stake, chain.accounts[1])
        console.print(f"    job {jid} posted ({len(ctx.kernel_graph.structures)} nodes, "
                      f"{sum(map(len, ctx.kernel_graph.structures)):,} kernels committed in the kernel root)")
        name = {a.address: t.name for a, t in seats}
        matches = [(name[d["winner"]], name[d["loser"]], d["level"], d["reason"], gas_by_level(d["gas"]))
                   for d in v.settle_disputes(jid, receipt, seats, ctx)]
        owed = {t.name: v.owed(a.address) for a, t in seats}
        game_log = chain.gas_log[start:]
    table = Table("winner", "loser", "decided at level", "reason", "gas per level")
    for w, lo, level, reason, gl in matches:
        table.add_row(w, lo, str(level), reason, ", ".join(f"L{k}: {g:,}" for k, g in sorted(gl.items())))
    console.print(table)
    console.print("    owed (payment share + stakes): " + ", ".join(f"{n} {o / 1e18:.2f} ETH" for n, o in owed.items()))
    console.print(f"    largest transaction {max(g for _, g in game_log):,} gas; {time.time() - t0:.1f} s")
    out = Path(args.report)
    _report_png(out, trainers, matches)
    console.print(f"    wrote {out}")
    honest_paid = all(owed[t.name] > 0 for t in trainers if t.behaviour.name == "honest")
    return 0 if matches and honest_paid and all(owed[t.name] == 0 for t in trainers if t.behaviour.name != "honest") else 1


def _report_png(path, trainers, matches):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    for t in trainers:
        steps = sorted(t.losses)
        ax.plot(steps, [t.losses[s] for s in steps], marker=".", label=f"{t.name} ({t.behaviour.name})")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend()
    for i, (w, lo, level, _, gl) in enumerate(matches):
        bottom = 0
        for k in sorted(gl):
            bx.bar(i, gl[k], bottom=bottom, label=f"level {k}" if i == 0 else None)
            bottom += gl[k]
    bx.set_xticks(range(len(matches)), [f"{w} vs {lo}" for w, lo, *_ in matches])
    bx.set_ylabel("gas")
    bx.set_title("on-chain dispute: gas per level")
    bx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# -- chain-facing commands (a node that outlives the command: anvil via `verde node`, or any RPC) ------
STATUS = ("none", "open", "disputed", "settled")


def _verde(args):
    import json
    from pathlib import Path

    from .chain import connect
    from .chain.verde import Verde
    chain = connect(args.chain)
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


def cmd_deploy(args) -> int:
    import json
    from pathlib import Path

    from .chain import connect
    from .chain.verde import Verde
    with connect(args.chain) as chain:
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
        j = v.status(args.job_id)
        if j[0] == "0x" + "0" * 40 or j[2] == 0:
            console.print(f"[red]error:[/] no job {args.job_id} in this registry\n  Fix: check the id (`verde post` printed it)")
            return 2
        console.print(f"job {args.job_id}: {STATUS[j[2]]}, payment {j[1] / 1e18} ETH, client {j[0]}, "
                      f"{len(j[5])} trainer(s): {', '.join(j[5]) or '-'}")
    return 0


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
    from pathlib import Path

    from . import adversaries
    from .agent.trainer_agent import TrainerAgent
    from .protocol.job import JobError, load
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
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
        agent = TrainerAgent(v, chain.accounts[0], job, args.job_id, Path(args.workdir), behaviour, args.name)
        agent.run(poll_s=args.poll_s)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="verde", description="Verifiable delegated training (Verde + RepOps)")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="the main job, end to end on the embedded defaults")
    d.add_argument("--chain", default="embedded", help="embedded (default) | anvil | anvil:PORT | rpc:URL")
    d.add_argument("--steps", type=int, default=12, help="steps of the off-chain dispute job (default 12)")
    d.add_argument("--vectors", type=int, default=40, help="vectors per primitive (default 40)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--report", default="verde-report.png", help="where the report PNG goes (loss curves, gas per level)")
    d.set_defaults(fn=cmd_demo)
    c = sub.add_parser("compile", help="compile contracts/ (cached)")
    c.add_argument("--force", action="store_true", help="ignore the artifact cache")
    c.set_defaults(fn=cmd_compile)
    n = sub.add_parser("node", help="run an Anvil node in the foreground")
    n.add_argument("--port", type=int, default=8545)
    n.set_defaults(fn=cmd_node)
    for name, fn, what in (("deploy", cmd_deploy, "deploy the contracts; write their addresses"),
                           ("post", cmd_post, "post a job file with its payment"),
                           ("status", cmd_status, "show a job's state"),
                           ("withdraw", cmd_withdraw, "withdraw what the registry owes your key"),
                           ("agent", cmd_agent, "run a trainer agent for a job until it is settled")):
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
        if name == "status":
            q.add_argument("job_id", type=int)
        if name == "agent":
            q.add_argument("job", help="the job file (the same job as posted)")
            q.add_argument("job_id", type=int, help="its id in the registry")
            q.add_argument("--workdir", required=True, help="checkpoints and the agent's state (survive restarts)")
            q.add_argument("--behaviour", default="honest", help="honest, or an adversary spec (demos and tests)")
            q.add_argument("--name", default="agent")
            q.add_argument("--poll-s", type=float, default=0.5)
    args = p.parse_args(argv)
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
