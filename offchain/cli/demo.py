"""`verde demo`, README command 1: the on-chain referee arithmetic against the off-chain one,
RepOps determinism, an off-chain dispute, and the job settled on chain by trainer agents as
processes (main_job.py)."""
from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

from .common import console, step


def cmd_demo(args) -> int:
    import numpy as np

    from ..softfloat import float32 as sf
    from ..softfloat import check as chk
    from ..chain import compile_contracts, connect
    from ..chain.harness import run as run_harness

    t0 = time.time()
    step("compiling contracts/ (solcjs through py-solc-x standard JSON; cached by source hash)")
    arts = compile_contracts()
    console.print(f"    {len(arts)} contracts: {', '.join(sorted(arts))}")

    step(f"connecting to the {args.chain} chain")
    with connect(args.chain, arts) as chain:
        console.print(f"    chain id {chain.w3.eth.chain_id}, {len(chain.accounts)} funded accounts, "
                      f"block {chain.w3.eth.block_number}")
        step("deploying the binary32 referee arithmetic (Float32.sol via the Primitives table)")
        harness = chain.deploy("Float32Harness")
        console.print(f"    Float32Harness at {harness.address} ({chain.gas_log[-1][1]:,} gas)")

        step(f"checking every primitive on chain against the Python soft-float "
              f"({args.vectors} vectors each: edge cases + random bit patterns)")
        rng = np.random.default_rng(args.seed)
        table = Table("primitive", "opcode", "vectors", "mismatches", "gas median", "gas max")
        failures, medians = 0, []
        for name, (code, arity, _) in sorted(sf.PRIMITIVES.items(), key=lambda kv: kv[1][0]):
            a, b, c = chk.sample(name, args.vectors, rng)
            want = chk.softfloat_results(name, a, b, c)
            got, gas = run_harness(chain, harness, code, a, b, c)
            bad = int((got != want).sum())
            failures += bad
            medians.append(int(statistics.median(gas)))
            table.add_row(name, str(code), str(len(a)), ("[red]" if bad else "[green]") + str(bad),
                          f"{medians[-1]:,}", f"{int(gas.max()):,}")
        console.print(table)

    from repops.models.quick_train import quick_train
    step("RepOps determinism: the Llama-style model, 10 AdamW steps under repops.deterministic(), "
          "with 1 and with 2 threads")
    runs = [quick_train("llama", 10, t) for t in (1, 2)]
    same = runs[0][0] == runs[1][0]
    failures += 0 if same else 1
    for t, (digest, losses) in zip((1, 2), runs):
        console.print(f"    {t} thread(s): loss {losses[0]:.4f} -> {losses[-1]:.4f}, parameters sha256 {digest[:16]}…")
    console.print(f"    {'[green]identical bits[/]' if same else '[red]DIFFERENT bits[/]'}")
    with _workdir(args.workdir) as (work, kept):
        job_file, job, ctx, spec = _offchain_dispute(args, work)
        failures += job is None
        if job is not None:
            from . import main_job
            step(f"the job on chain, with trainer agents as separate processes: two honest, one cheater "
                  f"(`{spec}`); agent state and logs in {work}{kept}")
            report = Path(args.report or (Path(args.workdir or ".") / "verde-report.png"))
            failures += main_job.run(args.chain, job_file, job, ctx, work, spec, report, console,
                                     primitive_gas=max(medians))
    verdict = "[green]OK[/]" if failures == 0 else f"[red]{failures} FAILURES[/]"
    console.print(f"done in {time.time() - t0:.1f} s: on-chain vs off-chain soft-float, RepOps determinism, the "
                  f"off-chain dispute and the job settled on chain by agents {verdict}")
    return 0 if failures == 0 else 1


TEMPORARY = " (temporary: removed when the demo ends; --workdir DIR keeps it)"


@contextlib.contextmanager
def _workdir(path):
    """--workdir DIR keeps the agents' checkpoints, state and logs; default: a temp dir, said
    to be one wherever it is named. -> (the directory, what to say after its name)."""
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path).resolve(), ""
    else:
        with tempfile.TemporaryDirectory(prefix="verde-demo-") as tmp:
            yield Path(tmp), TEMPORARY


def _offchain_dispute(args, work: Path):
    """A Llama-style job on the repository's own text: an honest trainer here, a cheating
    one in another process (pipe transport), the client as referee.
    -> (job file, job, context, cheat spec); job None when the dispute went wrong."""
    from ..dispute.context import Context
    from ..dispute.party import InProcess, Party
    from ..dispute.referee import dispute
    from ..dispute.transport import PipeEndpoint
    from ..protocol.corpus import text_job
    from ..protocol.jobfile import load
    from ..protocol.trace import decode_structure
    from ..trainer import Trainer

    job_file = text_job(work / "job", args.steps)
    job = load(job_file)
    step(f"off-chain dispute: a {args.steps}-step Llama-style job on the repository's own text "
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


def add(sub):
    d = sub.add_parser("demo", help="the main job, end to end on the embedded defaults")
    d.add_argument("--chain", default="embedded", help="embedded (default: py-evm, served to the agents by a child "
                   "process) | anvil | anvil:PORT")
    d.add_argument("--steps", type=int, default=12, help="steps of the off-chain dispute job (default 12)")
    d.add_argument("--vectors", type=int, default=40, help="vectors per primitive (default 40)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--report", help="where the report PNG goes (loss curves, the bisection's path, gas per level; "
                                    "default: verde-report.png in --workdir, else in the current directory)")
    d.add_argument("--workdir", help="keep the agents' checkpoints, state and logs here (default: a temp dir)")
    d.set_defaults(fn=cmd_demo)
