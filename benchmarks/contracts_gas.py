"""Gas of the on-chain game so far (levels 1-2), per move type and per dispute, on the
Llama-style job, one run: python benchmarks/contracts_gas.py [--chain embedded|anvil]
Writes benchmarks/results/contracts_gas.{json,png}."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from offchain import adversaries as A  # noqa: E402
from offchain.chain import connect  # noqa: E402
from offchain.chain.verde import PHASE_DONE, PHASE_OPERATOR, Verde  # noqa: E402
from offchain.dispute.context import Context  # noqa: E402
from offchain.protocol.corpus import TEXT_LLAMA, text_job  # noqa: E402
from offchain.protocol.job import load  # noqa: E402
from offchain.trainer import Trainer  # noqa: E402

PAY, STAKE = 3 * 10**18, 10**18


def dispute(chain, job, ctx, honest, bad):
    v = Verde.deploy(chain)
    start = len(chain.gas_log)
    c, ha, ba = chain.accounts[1], chain.accounts[2], chain.accounts[3]
    seats = [(ha, honest), (ba, bad)]
    jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, c)
    m = v.open_match(jid, ha.address, ba.address)
    v.play(m, seats, ctx, until=(PHASE_DONE, PHASE_OPERATOR))
    return chain.gas_log[start:], v.match_state(m)["phase"]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chain", default="embedded")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "contracts_gas")
    args = ap.parse_args()
    con = Console()
    with tempfile.TemporaryDirectory() as tmp, connect(args.chain) as chain:
        tmp = Path(tmp)
        job = load(text_job(tmp / "job", args.steps))
        ctx = Context(job)
        honest = Trainer(job, tmp / "h", "honest")
        honest.train()
        per_move, disputes = defaultdict(list), []
        for beh in (A.TamperedInput(step=args.steps // 2, op="aten.mm.default", element=100),
                    A.ForgedCheckpoint(step=args.steps // 2), A.WrongHyperParameter(), A.PoisonedData(step=3)):
            bad = Trainer(job, tmp / beh.name, "cheater", behaviour=beh)
            bad.train()
            log, phase = dispute(chain, job, ctx, honest, bad)
            for what, gas in log:
                per_move[what].append(gas)
            game = [g for w, g in log if w.split("(")[0] in ("open", "postClaims", "openStep", "postStateLeaves",
                                                               "resolveState", "postTop", "postChildren", "postNode",
                                                               "resolveInput", "timeout")]
            disputes.append({"adversary": beh.name, "transactions": len(game), "game_gas": sum(game),
                             "max_tx_gas": max(game), "decided": phase == PHASE_DONE})
    t = Table("move", "count", "gas median", "gas max")
    rows = []
    for what, gs in sorted(per_move.items()):
        gs = sorted(gs)
        rows.append({"move": what, "count": len(gs), "median": gs[len(gs) // 2], "max": gs[-1]})
        t.add_row(what, str(len(gs)), f"{gs[len(gs) // 2]:,}", f"{gs[-1]:,}")
    con.print(t)
    t = Table("adversary", "game transactions", "game gas (levels 1-2)", "largest tx", "decided")
    for d in disputes:
        t.add_row(d["adversary"], str(d["transactions"]), f"{d['game_gas']:,}", f"{d['max_tx_gas']:,}", str(d["decided"]))
    con.print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"chain": args.chain, "config": TEXT_LLAMA, "steps": args.steps,
                                                         "moves": rows, "disputes": disputes}, indent=1))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh([r["move"] for r in rows], [r["median"] for r in rows])
    ax.axvline(500_000, color="red", linestyle="--", label="500k per-transaction goal")
    ax.set_xlabel("gas (median)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
