"""Where a dispute's gas goes (issue #21), from opcode-level traces of one whole dispute on
Anvil (--steps-tracing): per move type, the transaction's base cost, calldata, storage
(SSTORE/SLOAD), SHA-256 (the precompile: every Merkle and commitment hash), keccak, events,
calls between the contracts, memory and copying, and the rest (arithmetic, control flow):

  python benchmarks/gas_breakdown.py [--steps 16] [--cheat corrupt-value|kernel-cheat|tampered-input]

Writes benchmarks/results/gas_breakdown.{json,png}."""
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
from offchain.chain.backends import anvil  # noqa: E402
from offchain.chain.verde import Verde  # noqa: E402
from offchain.dispute.context import Context  # noqa: E402
from offchain.protocol.corpus import text_job  # noqa: E402
from offchain.protocol.jobfile import load  # noqa: E402
from offchain.trainer import Trainer  # noqa: E402
from offchain.trainer import adversaries as A  # noqa: E402

PAY, STAKE = 3 * 10**18, 10**18
CATEGORIES = ("base", "calldata", "storage", "sha256", "keccak", "events", "calls", "memory", "other")
PRECOMPILE_SHA256 = 2
OPCODE_CATEGORY = {"SSTORE": "storage", "SLOAD": "storage", "KECCAK256": "keccak", "SHA3": "keccak",
                   **{f"LOG{i}": "events" for i in range(5)},
                   **{op: "memory" for op in ("MSTORE", "MSTORE8", "MLOAD", "CALLDATACOPY", "CODECOPY",
                                              "RETURNDATACOPY", "MCOPY", "EXTCODECOPY", "CALLDATALOAD")}}
CALLS = ("CALL", "STATICCALL", "DELEGATECALL", "CALLCODE")


def calldata_gas(data: bytes) -> int:
    """EIP-2028: 16 gas a non-zero byte, 4 a zero byte."""
    return sum(16 if b else 4 for b in data)


def breakdown(logs: list[dict]) -> dict:
    """Execution gas by category from a struct-log trace. A step's total is its gas minus the
    gas at the next step of its frame (a frame's last step: its gasCost); a call's own cost is
    its total less its callee's top-level totals. A call to the SHA-256 precompile (no steps
    of its own) counts as sha256."""
    n = len(logs)
    total = [0] * n
    own = [0] * n
    for i, step in enumerate(logs):
        d, j = step["depth"], i + 1
        while j < n and logs[j]["depth"] > d:
            j += 1
        total[i] = step["gas"] - logs[j]["gas"] if j < n and logs[j]["depth"] == d else step.get("gasCost", 0)
        own[i] = total[i]
    for i, step in enumerate(logs):
        if i + 1 < n and logs[i + 1]["depth"] > step["depth"]:  # entered a call
            d, j, callee = step["depth"], i + 1, 0
            while j < n and logs[j]["depth"] > d:
                if logs[j]["depth"] == d + 1:
                    callee += total[j]
                j += 1
            own[i] = total[i] - callee
    out = defaultdict(int)
    for i, step in enumerate(logs):
        op = step["op"]
        if op in CALLS:
            target = int(step["stack"][-2], 16) if step.get("stack") else -1
            cat = "sha256" if target == PRECOMPILE_SHA256 else "calls"
        else:
            cat = OPCODE_CATEGORY.get(op, "other")
        out[cat] += own[i]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--cheat", default="corrupt-value", choices=("corrupt-value", "kernel-cheat", "tampered-input"))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gas_breakdown")
    args = ap.parse_args()
    con = Console(width=170)
    with tempfile.TemporaryDirectory() as tmp, anvil(extra_args=("--steps-tracing",)) as chain:
        tmp = Path(tmp)
        job = load(text_job(tmp / "job", args.steps))
        ctx = Context(job)
        from offchain.protocol.trace import decode_structure
        softmax = [decode_structure(x)[0] for x in ctx.graph.structures].index("repops.attention.default")
        beh = {"corrupt-value": A.CorruptValue(step=args.steps // 2, node=softmax, element=163, ulps=64),
               "kernel-cheat": A.KernelCheat(step=args.steps // 2),
               "tampered-input": A.TamperedInput(step=args.steps // 2, op="aten.mm.default", element=100)}[args.cheat]
        honest, bad = Trainer(job, tmp / "h", "honest"), Trainer(job, tmp / "b", "cheater", behaviour=beh)
        honest.train()
        bad.train()
        v = Verde.deploy(chain)
        c, ha, ba = chain.accounts[1], chain.accounts[2], chain.accounts[3]
        seats = [(ha, honest), (ba, bad)]
        jid, _ = v.deliver(job, ctx, seats, PAY, STAKE, c)
        first = chain.w3.eth.block_number + 1
        m = v.open_match(jid, ha.address, ba.address)
        v.play(m, seats, ctx, max_rounds=200)
        decided = v.decision(m)
        rows = _traced(chain, v, first)
    per_move = defaultdict(lambda: defaultdict(int))
    counts = defaultdict(int)
    for r in rows:
        counts[r["move"]] += 1
        for k in CATEGORIES:
            per_move[r["move"]][k] += r[k]
    total = {k: sum(r[k] for r in rows) for k in CATEGORIES}
    t = Table("move", "txs", "gas", *CATEGORIES, title=f"where the gas of one dispute goes ({args.cheat}, decided at "
                                                       f"level {decided['level'] if decided else '?'})")
    for mv in sorted(per_move, key=lambda k: -sum(per_move[k].values())):
        g = sum(per_move[mv].values())
        t.add_row(mv, str(counts[mv]), f"{g:,}", *[f"{100 * per_move[mv][k] / g:.0f}%" for k in CATEGORIES])
    g = sum(total.values())
    t.add_row("all", str(len(rows)), f"{g:,}", *[f"{100 * total[k] / g:.0f}%" for k in CATEGORIES])
    con.print(t)
    largest = max(rows, key=lambda r: r["gas"])
    con.print(f"largest transaction: {largest['move']} {largest['gas']:,} gas: " +
              ", ".join(f"{k} {largest[k]:,}" for k in CATEGORIES))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"cheat": args.cheat, "steps": args.steps, "level":
                                                         decided and decided["level"], "transactions": rows,
                                                         "total": total}, indent=1))
    _plot(per_move, args.out.with_suffix(".png"), t.title)
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


def _traced(chain, v, first: int) -> list[dict]:
    """Every game transaction from block `first` on (and the settle that follows the decision), with its gas by category (the receipt's
    gas = base + calldata + execution; what the trace does not place stays in `other`)."""
    from eth_utils import function_abi_to_4byte_selector
    w3 = chain.w3
    names = {}
    for contract in (v.game, v.operators, v.registry):  # the registry: the settle after the decision
        for f in contract.abi:
            if f["type"] == "function":
                names[(contract.address, function_abi_to_4byte_selector(f))] = f["name"]
    rows = []
    for n in range(first, w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            name = names.get((tx["to"], bytes(tx["input"][:4])))
            if name is None:
                continue
            gas = w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"]
            trace = w3.provider.make_request("debug_traceTransaction", [tx["hash"].to_0x_hex(), {
                "disableStorage": True, "disableMemory": True, "enableReturnData": False}])["result"]
            parts = breakdown(trace["structLogs"])
            row = {"move": name, "gas": gas, "base": 21_000, "calldata": calldata_gas(bytes(tx["input"])),
                   **{k: parts.get(k, 0) for k in CATEGORIES[2:]}}
            row["other"] += gas - sum(row[k] for k in CATEGORIES)  # refunds and what the trace missed
            rows.append(row)
    return rows


def _plot(per_move, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    moves = sorted(per_move, key=lambda k: sum(per_move[k].values()))
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(moves) + 1.5))
    left = [0] * len(moves)
    for k in CATEGORIES:
        vals = [per_move[mv][k] / 1e6 for mv in moves]
        ax.barh(moves, vals, left=left, label=k)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlabel("gas (millions), summed over the dispute's transactions of each move")
    ax.set_title(title)
    ax.legend(ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
