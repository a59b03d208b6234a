"""RepOps against the rounding-log baseline (Srivastava, Arora, Boneh; repops.baseline), one
training step of each model, measured in one run on this machine:

  python benchmarks/baseline_vs_repops.py [--models mlp llama llama-realistic] [--steps 2] [--reorder-steps 20]

Per model (benchmarks/repops_cpu.py's configurations): seconds per AdamW step of native
float32 torch, RepOps (repops.deterministic), rounding-log training (float64 ops, rounded
and logged) and its replay; the log's bytes per step (one byte per entry, packed five
entries a byte, then zlib) against RepOps' zero; the fraction of elements the log must
carry a direction for at each threshold tau (in float32 spacings). And how often float64
reordering alone needs the log: two small jobs trained --reorder-steps steps, recorded on 1
thread and replayed with split-K = 3 products and sums on 2 threads (the roundings the log
changed). Writes benchmarks/results/baseline_vs_repops.{json,png}."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.progress import track
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from repops.baseline import RoundingLog  # noqa: E402
from repops.baseline.mode import BINS  # noqa: E402
from repops_cpu import CONFIGS, _step_fn  # noqa: E402

TAUS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.49)


def _timed(f, steps: int) -> float:
    f()  # warm up
    t = time.perf_counter()
    for _ in range(steps):
        f()
    return (time.perf_counter() - t) / steps


def measure(name: str, steps: int) -> dict:
    native, rep = _step_fn(name, True), _step_fn(name, False)
    plain = _step_fn(name, False, deterministic=False)  # RepOps' AdamW math, run under the baseline's modes
    t_native, t_repops = _timed(native, steps), _timed(rep, steps)
    sweep = RoundingLog("nearest")  # the distances to the boundary, for the tau sweep (untimed)
    sweep.distances = np.zeros(BINS)
    with sweep:
        _step_fn(name, False, deterministic=False)()
    rec = RoundingLog("record")
    t = time.perf_counter()
    with rec:
        plain()
    t_record = time.perf_counter() - t
    log = rec.log
    # replay the recorded step from the same starting point: a fresh copy of the model
    again = _step_fn(name, False, deterministic=False)
    rl = RoundingLog("replay", log=log)
    t = time.perf_counter()
    with rl:
        again()
    t_replay = time.perf_counter() - t
    rl.finished()
    n = log.elements()
    hist = sweep.distances / max(1, sweep.distances.sum())
    edges = np.linspace(0, 0.5, BINS + 1)
    logged_at = {tau: float(hist[edges[:-1] >= tau].sum()) for tau in TAUS}
    return {"model": name, "native_s": t_native, "repops_s": t_repops, "record_s": t_record, "replay_s": t_replay,
            "elements": n, "entries": len(log.entries), "logged": log.logged(), "raw_bytes": log.raw_bytes(),
            "packed_bytes": sum(len(p) for p in log.packed()), "compressed_bytes": log.compressed_bytes(),
            "repops_log_bytes": 0, "logged_fraction_at_tau": logged_at}


def reordering_alone(steps: int) -> list[dict]:
    """Roundings the log corrects when the other machine differs only in float64 order."""
    import tempfile

    from offchain.protocol.corpus import text_job
    from offchain.protocol.dataset import write_job
    from offchain.protocol.jobfile import load
    from offchain.trainer.rounding_log import train_logged
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1024, 64, generator=g)
        mlp = write_job(Path(tmp) / "mlp", "mlp", {"d_in": 64, "d_hidden": 256, "n_classes": 10},
                        {"x": x, "y": (x @ torch.randn(64, 10, generator=g)).argmax(1)}, steps=steps, batch_size=128)
        for name, f in (("mlp 64-256-10, batch 128", mlp), ("llama d64 text job, batch 4", text_job(Path(tmp) / "t",
                                                                                                     steps))):
            job = load(f)
            rec = train_logged(job, "record", threads=1)
            rep = train_logged(job, "replay", rec.logs, split=3, threads=2)
            same = all(torch.equal(a.view(torch.int32), b.view(torch.int32))
                       for a, b in zip(rec.state.values(), rep.state.values()))
            rows.append({"job": name, "steps": steps, "roundings": sum(log.elements() for log in rec.logs),
                         "corrections": rep.corrections, "same_bits": same})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", nargs="+", default=["mlp", "llama", "llama-realistic"], choices=sorted(CONFIGS))
    ap.add_argument("--steps", type=int, default=2, help="timed native and RepOps steps (the baseline: one each)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reorder-steps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "baseline_vs_repops")
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the JSON of the last run")
    args = ap.parse_args()
    if args.plot_only:
        _plot(json.loads(args.out.with_suffix(".json").read_text())["rows"], args.out.with_suffix(".png"))
        return
    torch.set_num_threads(args.threads)
    con = Console(width=170)
    rows = [measure(m, args.steps) for m in track(args.models, description="models", console=con)]
    reorder = reordering_alone(args.reorder_steps)
    t = Table("model", "native fp32 s", "RepOps s", "log train s", "log replay s", "elements rounded",
              "log raw MB", "packed MB", "zlib MB", "RepOps log", title="one AdamW step")
    for r in rows:
        t.add_row(r["model"], f"{r['native_s']:.3f}", f"{r['repops_s']:.3f} ({r['repops_s'] / r['native_s']:.1f}x)",
                  f"{r['record_s']:.2f} ({r['record_s'] / r['native_s']:.0f}x)",
                  f"{r['replay_s']:.2f} ({r['replay_s'] / r['native_s']:.0f}x)", f"{r['elements']:,}",
                  f"{r['raw_bytes'] / 1e6:.2f}", f"{r['packed_bytes'] / 1e6:.2f}", f"{r['compressed_bytes'] / 1e6:.2f}",
                  "0")
    con.print(t)
    t = Table("model", *[f"tau={tau}" for tau in TAUS], title="fraction of elements logged with a direction")
    for r in rows:
        t.add_row(r["model"], *[f"{r['logged_fraction_at_tau'][tau]:.3f}" for tau in TAUS])
    con.print(t)
    t = Table("job", "steps", "roundings", "corrections by the log", "same bits after replay",
              title="float64 reordering alone (split-K 3, 2 threads vs 1 thread)")
    for r in reorder:
        t.add_row(r["job"], str(r["steps"]), f"{r['roundings']:,}", str(r["corrections"]), str(r["same_bits"]))
    con.print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"threads": args.threads, "configs": {
        m: CONFIGS[m] for m in args.models}, "rows": rows, "reordering_alone": reorder}, indent=1))
    _plot(rows, args.out.with_suffix(".png"))
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


def _plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(16, 4.8))
    names = [r["model"] for r in rows]
    x = np.arange(len(rows))
    for i, (key, label) in enumerate((("native_s", "native fp32"), ("repops_s", "RepOps"), ("record_s", "log: train"),
                                      ("replay_s", "log: replay"))):
        ax.bar(x + (i - 1.5) * 0.2, [r[key] for r in rows], 0.2, label=label)
    ax.set_xticks(x, names)
    ax.set_yscale("log")
    ax.set_ylabel("seconds per step (log scale)")
    ax.set_title("time per AdamW step")
    ax.legend()
    for i, (key, label) in enumerate((("raw_bytes", "1 byte/entry"), ("packed_bytes", "packed 5/byte"),
                                      ("compressed_bytes", "packed + zlib"))):
        bx.bar(x + (i - 1) * 0.25, [r[key] / 1e6 for r in rows], 0.25, label=label)
    bx.set_xticks(x, names)
    bx.set_yscale("log")
    bx.set_ylabel("MB per step, log scale (RepOps: 0)")
    bx.set_title("rounding log per training step")
    bx.legend()
    for r in rows:
        at = {float(k): v for k, v in r["logged_fraction_at_tau"].items()}  # (JSON keys are strings)
        cx.plot(TAUS, [at[t] for t in TAUS], marker="o", label=r["model"])
    cx.set_xlabel("threshold tau (float32 spacings)")
    cx.set_ylabel("fraction of elements logged with a direction")
    cx.set_title("what the log must carry vs tau")
    cx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
