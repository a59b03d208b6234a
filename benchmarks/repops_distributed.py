"""Data-parallel RepOps on CPU (gloo), measured in one run on this machine:

  python benchmarks/repops_distributed.py [--models mlp llama] [--steps 8] [--micro-batches 4]

Per model (benchmarks/repops_cpu.py's configurations, as a job with M micro-batches): seconds
per training step on 1 process with 1 thread, on 1 process with every core, and on 2
processes sharing the cores; the speedup and scaling efficiency t(1 process, 1 thread) /
(N * t(N processes, 1 thread each)); the bytes each rank puts on the wire per step; and
whether the checkpoints are the same bits (they must be). The path measured is `verde train
--world-size N`'s (offchain/trainer/distributed.py), without its traced steps. Writes
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
                           "bytes_sent": run.bytes_sent, "state": CheckpointStore(work, clean=False).load(steps)}
    states = [r.pop("state") for r in runs.values()]
    same = all(same_bits(a[k], b[k]) for a in states[1:] for b in states[:1] for k in b)
    one, two = runs["1 process, 1 thread"]["step_s"], list(runs.values())[2]["step_s"]
    return {"model": name, "micro_batches": m, "steps": steps, "runs": runs, "same_bits": same,
            "speedup_2": one / two, "efficiency_2": one / (2 * two)}


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
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "repops_distributed"))
    args = ap.parse_args()
    cores = os.cpu_count() or 1
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
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"cores": cores, "results": results}, indent=1))
    plot(results, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    if not all(r["same_bits"] for r in results):
        sys.exit("the runs did not end in the same bits")


if __name__ == "__main__":
    main()
