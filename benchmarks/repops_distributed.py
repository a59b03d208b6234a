"""Data-parallel RepOps on CPU (gloo), measured in one run on this machine:

  python benchmarks/repops_distributed.py [--models mlp llama] [--steps 8] [--micro-batches 4]
                                          [--bytes-worlds 1 2 4 8] [--bytes-only]

Per model (benchmarks/repops_cpu.py's configurations, as a job with M micro-batches): seconds
per training step on 1 process with 1 thread, on 1 process with every core, and on 2
processes sharing the cores; the speedup and scaling efficiency t(1 process, 1 thread) /
(N * t(N processes, 1 thread each)); the bytes each rank puts on the wire per step; and
whether the checkpoints are the same bits (they must be). The path measured is `verde train
--world-size N`'s (offchain/trainer/distributed.py), without its traced steps.

`bytes_per_rank` {W: bytes rank 0 receives a step} at W = 1, 2, 4, 8 (the mlp, M = 8, 2 steps,
one thread a rank: only bytes are measured, so 8 ranks on 2 cores are fine), with the
checkpoints of every W compared bit for bit, and `bytes_per_rank_all_gather`: what the
exchange it replaced (an all_gather of every rank's whole cover) received, (W - 1) x cover x
gradient, computed. Bar (issue #40): bytes at W = 8 <= 1.25x those at W = 2. --bytes-only
measures just these and keeps the rest of the JSON. Writes
benchmarks/results/repops_distributed.{json,png}."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from repops_cpu import CONFIGS  # noqa: E402

from offchain.protocol.dataset import write_job  # noqa: E402
from offchain.protocol.jobfile import load  # noqa: E402
from offchain.trainer.distributed import train_steps  # noqa: E402
from offchain.trainer.trainer import same_bits  # noqa: E402
from offchain.trainer.store import CheckpointStore  # noqa: E402


def _job(d: Path, name: str, steps: int, m: int):
    kind, cfg, b = CONFIGS[name]
    g = torch.Generator().manual_seed(0)
    rows = 4 * b
    if kind == "llama":
        data = {"tokens": torch.randint(0, cfg["vocab"], (rows, cfg["max_seq"] + 1), generator=g)}
    else:
        data = {"x": torch.randn(rows, cfg["d_in"], generator=g), "y": torch.randint(0, cfg["n_classes"], (rows,), generator=g)}
    return load(write_job(d, kind, cfg, data, steps=steps, batch_size=b, micro_batches=m))


def measure(name: str, steps: int, m: int, cores: int) -> dict:
    runs = {}
    with tempfile.TemporaryDirectory(prefix="verde-dist-bench-") as tmp:
        job = _job(Path(tmp) / "job", name, steps, m)
        for label, world, threads in (("1 process, 1 thread", 1, 1), (f"1 process, {cores} threads", 1, cores),
                                      (f"2 processes, {cores // 2 or 1} thread(s) each", 2, cores // 2 or 1)):
            work = Path(tmp) / label.replace(" ", "_").replace(",", "")
            run = train_steps(job, work, world, 0, steps, {steps}, threads=threads, progress=True)
            warm = run.seconds[1:] or run.seconds  # the first step pays the warm-up
            runs[label] = {"world": world, "threads": threads, "step_s": sorted(warm)[len(warm) // 2],
                           "bytes_sent": run.bytes_sent, "bytes_received": run.bytes_received,
                           "state": CheckpointStore(work, clean=False).load(steps)}
    states = [r.pop("state") for r in runs.values()]
    same = all(same_bits(a[k], b[k]) for a in states[1:] for b in states[:1] for k in b)
    one, two = runs["1 process, 1 thread"]["step_s"], list(runs.values())[2]["step_s"]
    return {"model": name, "micro_batches": m, "steps": steps, "runs": runs, "same_bits": same,
            "speedup_2": one / two, "efficiency_2": one / (2 * two)}


def measure_bytes(worlds: list, name: str = "mlp", m: int = 8, steps: int = 2) -> dict:
    """Bytes received by rank 0 per step at each world size, and whether the checkpoints agree."""
    from repops.distributed.tree import block, cover
    received, states = {}, []
    with tempfile.TemporaryDirectory(prefix="verde-dist-bytes-") as tmp:
        job = _job(Path(tmp) / "job", name, steps, m)
        for w in worlds:
            work = Path(tmp) / f"w{w}"
            run = train_steps(job, work, w, 0, steps, {steps}, threads=1)
            received[w] = run.bytes_received
            states.append(CheckpointStore(work, clean=False).load(steps))
    gradient = 1 + sum(int(torch.tensor(s).prod()) for s in _param_shapes(job))  # the loss, then each gradient
    old = {w: (w - 1) * max(len(cover(m, *block(m, w, r))) for r in range(w)) * gradient * 4 for w in worlds}
    same = all(same_bits(a[k], states[0][k]) for a in states[1:] for k in states[0])
    return {"model": name, "micro_batches": m, "gradient_bytes": 4 * gradient, "bytes_per_rank": received,
            "bytes_per_rank_all_gather": old, "same_bits": same}


def _param_shapes(job) -> list:
    from offchain.protocol.dataset import build_model
    return [list(p.shape) for p in build_model(job, "meta").parameters() if p.requires_grad]


def plot(results: list, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, r in zip(axes[0], results):
        labels = list(r["runs"])
        ax.bar(range(len(labels)), [r["runs"][k]["step_s"] for k in labels], color=["#888", "#4a7", "#47a"])
        ax.set_xticks(range(len(labels)), [k.replace(", ", "\n") for k in labels], fontsize=8)
        ax.set_ylabel("seconds per step")
        ax.set_title(f"{r['model']} (M = {r['micro_batches']}): same bits {r['same_bits']}")
    fig.suptitle("RepOps data-parallel (gloo) on this machine")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "llama"], choices=sorted(CONFIGS))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--bytes-worlds", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--bytes-only", action="store_true", help="measure bytes_per_rank only, keep the other results")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "repops_distributed"))
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    out = Path(args.out)
    traffic = measure_bytes(args.bytes_worlds)
    t = Table(title=f"bytes received per rank and step ({traffic['model']}, M = {traffic['micro_batches']}, "
                    f"gradient {traffic['gradient_bytes']:,} bytes)")
    for c in ("world size", "sharded exchange", "x gradient", "all_gather of covers (replaced)"):
        t.add_column(c, justify="right")
    for w in args.bytes_worlds:
        got = traffic["bytes_per_rank"][w]
        t.add_row(str(w), f"{got:,}", f"{got / traffic['gradient_bytes']:.2f}", f"{traffic['bytes_per_rank_all_gather'][w]:,}")
    Console().print(t)
    if args.bytes_only:
        prev = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else {}
        out.with_suffix(".json").write_text(json.dumps({**prev, "traffic": traffic,
                                                        "bytes_per_rank": traffic["bytes_per_rank"]}, indent=1))
        print(f"wrote {out.with_suffix('.json')} (bytes_per_rank only)")
        if not traffic["same_bits"]:
            sys.exit("the world sizes did not end in the same bits")
        return
    results = [measure(n, args.steps, args.micro_batches, cores) for n in args.models]
    t = Table(title=f"RepOps data-parallel on CPU (gloo), {cores} cores, median of {args.steps - 1} steps")
    for c in ("model", "run", "s/step", "bytes sent/rank/step", "speedup vs 1x1", "same bits"):
        t.add_column(c)
    for r in results:
        base = r["runs"]["1 process, 1 thread"]["step_s"]
        for label, run in r["runs"].items():
            t.add_row(r["model"], label, f"{run['step_s']:.3f}", f"{run['bytes_sent']:,}", f"{base / run['step_s']:.2f}x",
                      str(r["same_bits"]))
        t.add_row(r["model"], "efficiency, 2 processes", f"{r['efficiency_2']:.0%}", "", "", "")
    Console().print(t)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"cores": cores, "results": results, "traffic": traffic,
                                                    "bytes_per_rank": traffic["bytes_per_rank"]}, indent=1))
    plot(results, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    if not all(r["same_bits"] for r in results) or not traffic["same_bits"]:
        sys.exit("the runs did not end in the same bits")


if __name__ == "__main__":
    main()
