"""The off-chain dispute on the Llama-style job, measured (one run; ratios).

  python benchmarks/protocol_dispute.py [--steps 40] [--fanouts 2 4 8 20]

1. Referee work vs re-running the disputed step: bytes received from the trainers and
   binary32 operations executed (the dispute ends in ONE soft-float primitive) vs the
   state + batch bytes and the primitive element-operations of one step (counted on the
   reference backend).
2. Trainers' re-execution fraction vs fan-out N: steps re-run to answer a dispute at a
   random step, over the steps of the job (paper: N = 20 -> < 6 %).
3. Hashing (trace + commitments) per checkpointed step as a fraction of the step time.
Writes benchmarks/results/protocol_dispute.{json,png}.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from offchain.trainer import adversaries as A  # noqa: E402
from offchain.dispute.context import Context  # noqa: E402
from offchain.dispute.party import InProcess, Party  # noqa: E402
from offchain.dispute.referee import dispute  # noqa: E402
from offchain.protocol.corpus import TEXT_LLAMA, text_job  # noqa: E402
from offchain.protocol.jobfile import load  # noqa: E402
from offchain.trainer import Trainer  # noqa: E402



def make_job(d: Path, steps: int, fanout: int):
    return load(text_job(d, steps, fanout))


def ctx_nodes(ctx) -> list[str]:
    from offchain.protocol.trace import decode_structure
    return [decode_structure(x)[0] for x in ctx.graph.structures]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--fanouts", type=int, nargs="*", default=[2, 4, 8, 20])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "protocol_dispute")
    args = ap.parse_args()
    con, rng = Console(), random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in tqdm(args.fanouts, desc="fan-outs"):
            job = make_job(tmp / f"job{n}", args.steps, n)
            ctx = Context(job)
            step = rng.randrange(1, args.steps)
            hon = Trainer(job, tmp / f"h{n}", "honest")
            hon.train()
            node = next(j for j, nd in enumerate(ctx_nodes(ctx)) if nd == "repops.attention.default")
            bad = Trainer(job, tmp / f"b{n}", "cheater", behaviour=A.CorruptValue(step=step, node=node, element=5 * 32 + 3))
            bad.train()
            trained = hon.reexecuted
            v = dispute(ctx, Party("honest", InProcess(hon), final=hon.final_claim()),
                        Party("cheater", InProcess(bad), final=bad.final_claim()))
            assert v.winner == "honest", str(v)
            con.print(f"N={n}: {v}")
            rows.append({"fanout": n, "steps": args.steps, "disputed_step": step, "level": v.level,
                         "rounds": len(v.rounds), "answers": v.answers, "referee_bytes": v.bytes_received,
                         "referee_seconds": v.seconds, "reexecuted_steps": hon.reexecuted - trained,
                         "reexecution_fraction": (hon.reexecuted - trained) / args.steps})
        # the step's own cost, for the comparison
        st = hon._fresh_state()
        state_bytes = sum(t.numel() * t.element_size() for t in st.tensors())
        batch_bytes = sum(t.numel() * t.element_size() for t in hon._batch(0))
        flops = hon.primitive_ops()
        t0 = time.perf_counter()
        hon._run(st, 1)
        plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        hon._traced(st, 2)
        traced = time.perf_counter() - t0
    summary = {"config": TEXT_LLAMA, "step_state_bytes": state_bytes, "step_batch_bytes": batch_bytes,
               "step_primitive_element_ops": flops, "referee_primitive_ops": 1,
               "step_seconds": plain, "traced_step_seconds": traced, "hashing_fraction": (traced - plain) / plain,
               "disputes": rows}
    t = Table("N", "rounds", "answers", "referee bytes", "vs step data", "re-executed steps", "fraction", "level")
    for r in rows:
        t.add_row(str(r["fanout"]), str(r["rounds"]), str(r["answers"]), f"{r['referee_bytes']:,}",
                  f"{r['referee_bytes'] / (state_bytes + batch_bytes):.3f}x", str(r["reexecuted_steps"]),
                  f"{100 * r['reexecution_fraction']:.1f} %", str(r["level"]))
    con.print(t)
    con.print(f"one step: {state_bytes + batch_bytes:,} bytes of state + batch, {flops:,} primitive element-ops; "
              f"the referee executes 1 (ratio {flops:,}x). Tracing + hashing a step: {traced:.3f} s vs {plain:.3f} s "
              f"plain (+{100 * summary['hashing_fraction']:.0f} %).")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.plot([r["fanout"] for r in rows], [100 * r["reexecution_fraction"] for r in rows], "o-")
    a1.set_xlabel("fan-out N")
    a1.set_ylabel("steps re-executed by a trainer (%)")
    a1.set_title(f"{args.steps}-step Llama-style job")
    a2.bar(["step data", "referee received"], [state_bytes + batch_bytes, rows[-1]["referee_bytes"]])
    a2.set_yscale("log")
    a2.set_ylabel("bytes")
    a2.set_title("referee input vs re-running the step")
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
