"""Gas of the on-chain game (DisputeGame levels 1-2, OperatorGame levels 3-5): per move
type, per full dispute (every level-2 case and levels 3, 4, 5 on the Llama-style job,
each decided), the one-step execution of each primitive (Executor.exec), and the client's
delivery remedy (challenge, answer with the largest state tensor's chunk, close), and the
disputes of two small program jobs (a cheater flips one Philox mask element; one miscounts
an integer computed from the batch), one run:
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
    game = [g for w, g in chain.gas_log[mark:] if w.split("(")[0] in GAME_MOVES]
    return chain.gas_log[start:], game, v.match_state(m)["phase"], level


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
    from offchain.protocol.delivery import MANIFEST, prove_from_store, publish
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
        v.answer(jid, a.address, prove_from_store(Path(store), honest.final_claim(), big, 1), a)
    v.close(jid, a.address, c)
    v.close(jid, b.address, c)
    return [{"move": what.split("(")[0], "gas": gas} for what, gas in chain.gas_log[start:]
            if what.split("(")[0] in ("settle", "challenge", "answer", "close")]


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
    log, game, phase, level = dispute(chain, job, Context(job), honest, bad)
    step = max(g for w, g in log if w.startswith("resolveStep"))
    return {"adversary": what, "level": level, "transactions": len(game), "game_gas": sum(game),
            "max_tx_gas": max(game), "resolveStep": step, "decided": phase == PHASE_DONE}


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
            if args.delivery_only:
                job = load(text_job(Path(tmp) / "job", args.steps))
                honest = Trainer(job, Path(tmp) / "h", "honest")
                honest.train()
                key, rows = "delivery", delivery_gas(chain, job, Context(job), honest)
            else:
                key, rows = "one_step", one_step_gas(chain)
        res = json.loads(args.out.with_suffix(".json").read_text())  # the rest of the last full run stays
        res[key] = rows
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
        per_move, disputes = defaultdict(list), []
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
            log, game, phase, level = dispute(chain, job, ctx, honest, bad)
            for what, gas in log:
                per_move[what].append(gas)
            label = beh.name + (" (after commit)" if getattr(beh, "after_commit", False) else "") + (
                f" ({beh.op.split('.')[1]})" if getattr(beh, "op", "").startswith("aten.embedding") else "")
            disputes.append({"adversary": label, "level": level, "transactions": len(game), "game_gas": sum(game),
                             "max_tx_gas": max(game), "decided": phase == PHASE_DONE})
        steps_gas = one_step_gas(chain)
        deliv = delivery_gas(chain, job, ctx, honest)
        programs = {name: program_gas(chain, tmp, name) for name in PROGRAM_DISPUTES}
    t = Table("move", "count", "gas median", "gas max")
    rows = []
    for what, gs in sorted(per_move.items()):
        gs = sorted(gs)
        rows.append({"move": what, "count": len(gs), "median": gs[len(gs) // 2], "max": gs[-1]})
        t.add_row(what, str(len(gs)), f"{gs[len(gs) // 2]:,}", f"{gs[-1]:,}")
    con.print(t)
    t = Table("adversary", "decided at level", "game transactions", "game gas (whole dispute)", "largest tx")
    for d in disputes:
        t.add_row(d["adversary"], str(d["level"]), str(d["transactions"]), f"{d['game_gas']:,}", f"{d['max_tx_gas']:,}")
    con.print(t)
    t = Table("primitive", "opcode", "one-step gas (Executor.exec)")
    for r in steps_gas:
        t.add_row(r["primitive"], str(r["opcode"]), f"{r['gas']:,}")
    con.print(t)
    t = Table("program job", "adversary", "decided at level", "game transactions", "game gas", "largest tx", "resolveStep")
    for name, r in programs.items():
        t.add_row(name, r["adversary"], str(r["level"]), str(r["transactions"]), f"{r['game_gas']:,}",
                  f"{r['max_tx_gas']:,}", f"{r['resolveStep']:,}")
    con.print(t)
    t = Table("delivery remedy (held pay, one chunk on chain)", "gas")
    for r in deliv:
        t.add_row(r["move"], f"{r['gas']:,}")
    con.print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"chain": args.chain, "config": TEXT_LLAMA, "steps": args.steps,
                                                         "moves": rows, "disputes": disputes,
                                                         "one_step": steps_gas, "delivery": deliv,
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
