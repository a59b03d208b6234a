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
    _step("not built yet: the on-chain referee and the trainer agents (see `issues`); "
          "this command grows into the full delegated-training job")
    verdict = "[green]OK[/]" if failures == 0 else f"[red]{failures} MISMATCHES[/]"
    console.print(f"done in {time.time() - t0:.1f} s: on-chain vs off-chain soft-float, RepOps determinism and the "
                  f"off-chain dispute {verdict}")
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
        return 0 if v.winner == "honest" and v.level == 5 else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="verde", description="Verifiable delegated training (Verde + RepOps)")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="the main job, end to end on the embedded defaults")
    d.add_argument("--chain", default="embedded", help="embedded (default) | anvil | anvil:PORT | rpc:URL")
    d.add_argument("--steps", type=int, default=12, help="steps of the off-chain dispute job (default 12)")
    d.add_argument("--vectors", type=int, default=40, help="vectors per primitive (default 40)")
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(fn=cmd_demo)
    c = sub.add_parser("compile", help="compile contracts/ (cached)")
    c.add_argument("--force", action="store_true", help="ignore the artifact cache")
    c.set_defaults(fn=cmd_compile)
    n = sub.add_parser("node", help="run an Anvil node in the foreground")
    n.add_argument("--port", type=int, default=8545)
    n.set_defaults(fn=cmd_node)
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
