"""Gas and calldata of the on-chain game (DisputeGame levels 1-2, OperatorGame levels 3-5):
per move type, per full dispute (every level-2 case and levels 3, 4, 5 on the Llama-style job,
each decided), the one-step execution of each primitive (Executor.exec), the client's
delivery remedy (challenge, answer with the largest state tensor's chunk, close; and at the
largest chunk, every chunk of the state challenged and answered: the griefing ratio, trainer
gas per client gas), and the disputes of two small program jobs (a cheater flips one Philox
mask element; one miscounts an integer computed from the batch), one run:
python benchmarks/contracts_gas.py [--chain embedded|anvil] [--one-step-only | --delivery-only | --programs-only]
Writes benchmarks/results/contracts_gas.{json,png}."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from offchain.trainer import adversaries as A  # noqa: E402
from offchain.chain import connect  # noqa: E402
from offchain.chain.verde import PHASE_DONE, Delivery, Verde  # noqa: E402
from offchain.dispute.context import Context  # noqa: E402
from offchain.protocol.corpus import TEXT_LLAMA, text_job  # noqa: E402
from offchain.protocol.jobfile import load  # noqa: E402
from offchain.trainer import Trainer  # noqa: E402

PAY, STAKE = 3 * 10**18, 10**18


def dispute(chain, job, ctx, honest, bad):
    """-> ((what, gas, calldata bytes) of the job's transactions, game moves' gas, final phase,
    level, game moves' largest calldata)."""
    v = Verde.deploy(chain)
    start = len(chain.gas_log)
    c, ha, ba = chain.accounts[1], chain.accounts[2], chain.accounts[3]
    seats = [(ha, honest), (ba, bad)]
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, c)
    mark = len(chain.gas_log)
    m = v.open_match(jid, ha.address, ba.address)
    v.play(m, seats, ctx, max_rounds=200)  # and the settle after the decision (its own transaction)
    decided = v.decision(m)
    level = decided["level"] if decided else None
    moves = [(g, n) for (w, g), n in zip(chain.gas_log[mark:], chain.calldata_log[mark:])
             if w.split("(")[0] in GAME_MOVES]
    log = [(w, g, n) for (w, g), n in zip(chain.gas_log[start:], chain.calldata_log[start:])]
    return log, [g for g, _ in moves], v.match_state(m)["phase"], level, max(n for _, n in moves)


GAME_MOVES = ("open", "postClaims", "openStep", "postStateLeaf", "resolveState", "postTop", "postChildren", "postNode",
              "resolveInput", "timeout", "postKernelTop", "postKernel", "postTensorTop", "postChunk", "resolveOperand",
              "resolveStep", "settle")  # the settle after the decision: a dispute's last transaction


def one_step_gas(chain) -> list[dict]:
    """Executor.exec per primitive on ordinary operands, sent as a transaction: its gas less
    the 21,000 every transaction pays (calldata included; estimate_gas pads, so receipts)."""
    from offchain.softfloat.float32 import PRIMITIVES
    ex = chain.deploy("Executor")
    one, two = 0x3F800000, 0x40000000
    words = {"select": (1, one, two), "ldexp": (one, 5, 0), "from_int32": (12345, 0, 0)}
    out = []
    for name, (op, arity, _) in sorted(PRIMITIVES.items(), key=lambda kv: kv[1][0]):
        a, b, c = words.get(name, (0x40490FDB, 0x3F8CCCCD, two))  # pi, 1.1, 2: the arithmetic path
        chain.transact(ex.functions.exec(op, a, b, c))
        out.append({"primitive": name, "opcode": op, "gas": chain.gas_log[-1][1] - 21000})
    return out


def delivery_gas(chain, job, ctx, honest) -> list[dict]:
    """The remedy's transactions: settle (holding two shares), challenge a chunk of the
    largest state tensor (the deepest proofs), its answer, and the two closes."""
    from offchain.protocol.delivery import MANIFEST, publish
    v = Verde.deploy(chain, delivery=Delivery(3600, 600))
    c, a, b = chain.accounts[1], chain.accounts[2], chain.accounts[3]
    start = len(chain.gas_log)
    jid, _ = v.deliver(job, ctx, [(a, honest), (b, honest)], PAY, STAKE, c)
    with tempfile.TemporaryDirectory() as store:
        entry = publish(honest, Path(store))  # what the accepted agent answers from
        m = json.loads((entry / MANIFEST).read_text())
        state = honest.store.load(job.spec.steps)
        big = max(range(len(m["names"])), key=lambda i: state[m["names"][i]].numel())
        v.challenge(jid, a.address, big, 1, c)
        v.answer_challenges(jid, a.address, Path(store), honest.final_claim(), a)
    v.close(jid, a.address, c)
    v.close(jid, b.address, c)
    return [{"move": what.split("(")[0], "gas": gas, "calldata": n}
            for (what, gas), n in zip(chain.gas_log[start:], chain.calldata_log[start:])
            if what.split("(")[0] in ("settle", "challenge", "answer", "close")]


def griefing(chain, tmp: Path) -> dict:
    """At the largest chunk (an MLP job whose 512 x 512 layer is 128 full chunks of MAX_CHUNK):
    the client challenges every chunk of that tensor (it got nothing of it off chain) and the
    trainer answers them all (Verde.answer_challenges: as many chunks a transaction as fit).
    -> the client's and the trainer's gas per chunk, their ratio (what a bond must make up),
    the largest answer's calldata, and the bond per chunk (wei) that pays the trainer."""
    sys.path.insert(0, str(ROOT / "tests" / "protocol"))
    from small_job import mlp_data
    from offchain.protocol.dataset import initial_state, write_job
    from offchain.protocol.delivery import publish
    from offchain.protocol.job import MAX_CHUNK
    from offchain.protocol.tensors import chunk_count
    job = load(write_job(tmp / "largest-job", "mlp", {"d_in": 16, "d_hidden": 512, "n_classes": 10}, mlp_data(n=64),
                         steps=2, batch_size=32, fanout=2, chunk=MAX_CHUNK))
    honest = Trainer(job, tmp / "largest-h", "honest")
    honest.train()
    v = Verde.deploy(chain, delivery=Delivery(3600, 600))
    c, a = chain.accounts[1], chain.accounts[2]
    jid, _ = v.deliver(job, Context(job), [(a, honest)], PAY, STAKE, c)
    shapes = [tuple(t.shape) for t in initial_state(job).tensors()]
    big = max(range(len(shapes)), key=lambda i: chunk_count(shapes[i], job.spec.chunk))
    chunks = chunk_count(shapes[big], job.spec.chunk)
    mark = len(chain.gas_log)
    challenges = v.challenge_chunks(jid, a.address, {big: list(range(chunks))}, c)
    client = sum(g for _, g in chain.gas_log[mark:])
    mark = len(chain.gas_log)
    store = tmp / "largest-store"
    publish(honest, store)
    v.answer_challenges(jid, a.address, store, honest.final_claim(), a)
    answers = chain.gas_log[mark:]
    trainer = sum(g for _, g in answers)
    bond = v.delivery().bond_wei
    return {"chunk": job.spec.chunk, "chunks": chunks, "challenges": challenges, "answers": len(answers),
            "client_gas": client, "trainer_gas": trainer, "client_gas_per_chunk": client // chunks,
            "trainer_gas_per_chunk": trainer // chunks, "griefing_ratio": round(trainer / client, 1),
            "max_answer_calldata": max(chain.calldata_log[mark:]), "max_answer_gas": max(g for _, g in answers),
            "bond_wei": bond, "bond_gas_at_10_gwei": bond // 10**10}


# program jobs of tests/protocol/small_job.py: name -> (its writer, the cheat, what the cheat is)
PROGRAM_DISPUTES = {
    "dropout": ("write_dropout_job", dict(step=2, op="repops.dropout.default", kernel=1, element=5),
                "mask flip (philox)"),
    "integers": ("write_integer_job", dict(step=2, op="aten.sum.dim_IntList", from_end=2, element=1),
                 "miscount (add.i64)"),
}


def program_gas(chain, tmp: Path, name: str) -> dict:
    """One small program job (the one its tests play) against a KernelCheat: the whole dispute,
    decided at level 5 (resolveStep on the cheated kernel)."""
    sys.path.insert(0, str(ROOT / "tests" / "protocol"))
    import small_job
    writer, cheat, what = PROGRAM_DISPUTES[name]
    job = load(getattr(small_job, writer)(tmp / f"{name}-job"))
    honest = Trainer(job, tmp / f"{name}-h", "honest")
    honest.train()
    bad = Trainer(job, tmp / f"{name}-bad", "cheater", behaviour=A.KernelCheat(**cheat))
    bad.train()
    log, game, phase, level, calldata = dispute(chain, job, Context(job), honest, bad)
    step = max(g for w, g, _ in log if w.startswith("resolveStep"))
    return {"adversary": what, "level": level, "transactions": len(game), "game_gas": sum(game),
            "max_tx_gas": max(game), "max_calldata": calldata, "resolveStep": step, "decided": phase == PHASE_DONE}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chain", default="embedded")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "contracts_gas")
    ap.add_argument("--one-step-only", action="store_true", help="re-measure only the Executor table (into the JSON)")
    ap.add_argument("--delivery-only", action="store_true", help="re-measure only the delivery remedy (into the JSON)")
    ap.add_argument("--programs-only", action="store_true",
                    help="re-measure only the program jobs' disputes (dropout, integers; into the JSON)")
    args = ap.parse_args()
    if args.programs_only:
        with tempfile.TemporaryDirectory() as tmp, connect(args.chain) as chain:
            rows = {name: program_gas(chain, Path(tmp), name) for name in PROGRAM_DISPUTES}
        res = json.loads(args.out.with_suffix(".json").read_text())
        res.update(rows)
        args.out.with_suffix(".json").write_text(json.dumps(res, indent=1))
        print(json.dumps(rows, indent=1))
        return
    if args.delivery_only or args.one_step_only:
        with tempfile.TemporaryDirectory() as tmp, connect(args.chain) as chain:
            res = json.loads(args.out.with_suffix(".json").read_text())  # the rest of the last full run stays
            if args.delivery_only:
                job = load(text_job(Path(tmp) / "job", args.steps))
                honest = Trainer(job, Path(tmp) / "h", "honest")
                honest.train()
                rows = res["delivery"] = delivery_gas(chain, job, Context(job), honest)
                res["delivery_griefing"] = griefing(chain, Path(tmp))
                print(json.dumps(res["delivery_griefing"], indent=1))
            else:
                rows = res["one_step"] = one_step_gas(chain)
        args.out.with_suffix(".json").write_text(json.dumps(res, indent=1))
        for r in rows:
            print(f"{r.get('move', r.get('primitive')):>15} {r['gas']:>9,}")
        return
    con = Console()
    with tempfile.TemporaryDirectory() as tmp, connect(args.chain) as chain:
        tmp = Path(tmp)
        job = load(text_job(tmp / "job", args.steps))
        ctx = Context(job)
        from offchain.protocol.trace import decode_structure
        softmax = [decode_structure(x)[0] for x in ctx.graph.structures].index("repops.attention.default")
        honest = Trainer(job, tmp / "h", "honest")
        honest.train()
        per_move, sizes, disputes = defaultdict(list), defaultdict(list), []
        last = args.steps - 1
        cheats = [A.TamperedInput(step=args.steps // 2, op="aten.mm.default", element=100),
                  A.ForgedCheckpoint(step=args.steps // 2), A.WrongHyperParameter(), A.PoisonedData(step=3),
                  A.NativeKernel(step=args.steps // 2), A.KernelCheat(step=args.steps // 2, ulps=64),
                  A.KernelCheat(step=args.steps // 2, after_commit=True, ulps=64), A.CorruptValue(step=args.steps // 2, node=softmax, element=163, ulps=64),
                  A.KernelCheat(step=last, op="aten.embedding.default", kernel=4, ulps=64)]  # (4: the gather, after the index rule)
        for i, beh in enumerate(track(cheats, description="disputes on chain", console=con)):
            bad = Trainer(job, tmp / f"{beh.name}-{i}", "cheater", behaviour=beh)
            if bad.train() == honest.final_claim():  # (one ulp of log_softmax can be absorbed by the loss)
                raise SystemExit(f"{beh}: the cheater's result equals the honest one, there is no dispute to "
                                 "measure: make it cheat more (ulps)")
            log, game, phase, level, calldata = dispute(chain, job, ctx, honest, bad)
            for what, gas, n in log:
                per_move[what].append(gas)
                sizes[what].append(n)
            label = beh.name + (" (after commit)" if getattr(beh, "after_commit", False) else "") + (
                f" ({beh.op.split('.')[1]})" if getattr(beh, "op", "").startswith("aten.embedding") else "")
            disputes.append({"adversary": label, "level": level, "transactions": len(game), "game_gas": sum(game),
                             "max_tx_gas": max(game), "max_calldata": calldata, "decided": phase == PHASE_DONE})
        steps_gas = one_step_gas(chain)
        deliv = delivery_gas(chain, job, ctx, honest)
        grief = griefing(chain, tmp)
        programs = {name: program_gas(chain, tmp, name) for name in PROGRAM_DISPUTES}
    t = Table("move", "count", "gas median", "gas max", "calldata max (bytes)")
    rows = []
    for what, gs in sorted(per_move.items()):
        gs = sorted(gs)
        rows.append({"move": what, "count": len(gs), "median": gs[len(gs) // 2], "max": gs[-1],
                     "max_calldata": max(sizes[what])})
        t.add_row(what, str(len(gs)), f"{gs[len(gs) // 2]:,}", f"{gs[-1]:,}", f"{max(sizes[what]):,}")
    con.print(t)
    t = Table("adversary", "decided at level", "game transactions", "game gas (whole dispute)", "largest tx",
              "largest calldata (bytes)")
    for d in disputes:
        t.add_row(d["adversary"], str(d["level"]), str(d["transactions"]), f"{d['game_gas']:,}", f"{d['max_tx_gas']:,}",
                  f"{d['max_calldata']:,}")
    con.print(t)
    overall = max([d["max_calldata"] for d in disputes] + [r["max_calldata"] for r in programs.values()])
    con.print(f"largest calldata of any dispute move: {overall:,} bytes")
    t = Table("primitive", "opcode", "one-step gas (Executor.exec)")
    for r in steps_gas:
        t.add_row(r["primitive"], str(r["opcode"]), f"{r['gas']:,}")
    con.print(t)
    t = Table("program job", "adversary", "decided at level", "game transactions", "game gas", "largest tx",
              "largest calldata", "resolveStep")
    for name, r in programs.items():
        t.add_row(name, r["adversary"], str(r["level"]), str(r["transactions"]), f"{r['game_gas']:,}",
                  f"{r['max_tx_gas']:,}", f"{r['max_calldata']:,}", f"{r['resolveStep']:,}")
    con.print(t)
    t = Table("delivery remedy (held pay, one chunk on chain)", "gas", "calldata (bytes)")
    for r in deliv:
        t.add_row(r["move"], f"{r['gas']:,}", f"{r['calldata']:,}")
    con.print(t)
    con.print(f"delivery at the largest chunk ({grief['chunk']}): every one of {grief['chunks']} chunks challenged "
              f"({grief['challenges']} challenges, {grief['client_gas_per_chunk']:,} client gas a chunk) and answered "
              f"({grief['answers']} answers, {grief['trainer_gas_per_chunk']:,} trainer gas a chunk, largest "
              f"{grief['max_answer_calldata']:,} bytes): griefing ratio {grief['griefing_ratio']}x, paid by a bond of "
              f"{grief['bond_wei'] / 1e18} ETH a chunk ({grief['bond_gas_at_10_gwei']:,} gas at 10 gwei)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"chain": args.chain, "config": TEXT_LLAMA, "steps": args.steps,
                                                         "moves": rows, "disputes": disputes,
                                                         "max_calldata": overall, "one_step": steps_gas,
                                                         "delivery": deliv, "delivery_griefing": grief,
                                                         **programs}, indent=1))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    ax.barh([r["move"] for r in rows], [r["max"] for r in rows])
    ax.axvline(500_000, color="red", linestyle="--", label="500k per-transaction goal")
    ax.set_xlabel("gas (largest of its kind)")
    ax.legend()
    bx.barh([f"{d['adversary']} (L{d['level']})" for d in disputes], [d["game_gas"] for d in disputes])
    bx.axvline(10_000_000, color="red", linestyle="--", label="10M per-dispute goal")
    bx.set_xlabel("gas of the whole dispute")
    bx.legend()
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
