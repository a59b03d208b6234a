"""RepOps CPU vs native PyTorch CPU, measured in one run (ratios; the machine is shared).

  python benchmarks/repops_cpu.py [--sizes 128 256 512 1024 2048] [--threads 2] [--skip-steps]

1. matmul GFLOP/s, n x n x n: repops.cpu.matmul vs torch.mm (MKL/OpenBLAS), same threads.
2. one AdamW training step of each model: under repops.deterministic() vs native torch.
   Llama-style: d=256, 4 layers, 4 heads, SwiGLU 768, seq 128, batch 8, vocab 1024 (the
   baseline of ../shared/TOOLCHAIN.md). MLP: 256 -> 1024 -> 1024 -> 10, batch 256.
Writes benchmarks/results/repops_cpu.{json,png}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import repops  # noqa: E402
from repops import cpu  # noqa: E402
from repops.models import build  # noqa: E402
from repops.optim import AdamW  # noqa: E402


def best_time(f, reps, min_time=0.3):
    f()
    best = float("inf")
    t_end = time.perf_counter() + min_time
    n = 0
    while n < reps or time.perf_counter() < t_end:
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
        n += 1
    return best


def bench_matmul(sizes, threads):
    rows = []
    for n in sizes:
        a = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
        b = np.random.default_rng(n + 1).standard_normal((n, n)).astype(np.float32)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        reps = 5 if n <= 1024 else 2
        t_blas = best_time(lambda: torch.mm(ta, tb), reps)
        t_rep = best_time(lambda: cpu.matmul(a, b, threads=threads), reps)
        flop = 2.0 * n ** 3
        rows.append({"n": n, "blas_gflops": flop / t_blas / 1e9, "repops_gflops": flop / t_rep / 1e9,
                     "ratio": t_blas / t_rep})
    return rows


def _step_fn(name, native):
    torch.manual_seed(0)
    if name == "llama":
        model = build("llama", vocab=1024, d_model=256, n_layers=4, n_heads=4, d_ff=768, max_seq=128)
        data = (torch.randint(0, 1024, (8, 129)),)
    else:
        model = build("mlp", d_in=256, d_hidden=1024, n_classes=10)
        data = (torch.randn(256, 256), torch.randint(0, 10, (256,)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if native else AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        model.loss(*data).backward()
        opt.step()
    if native:
        return step

    def rep_step():
        with repops.deterministic():
            step()
    return rep_step


def primitive_calls(step) -> int:
    """Primitive kernels the reference layer dispatches in one step (each is one numpy pass
    or one compiled-kernel call): the Python overhead the fused kernels remove."""
    from repops.reference import prims as P
    count, record = [0], P._record

    def counting(*a):
        count[0] += 1
        return record(*a)
    P._record = counting
    try:
        step()
    finally:
        P._record = record
    return count[0]


def bench_steps(reps):
    rows = []
    for name in ("mlp", "llama"):
        t_native = best_time(_step_fn(name, True), reps, 1.0)
        rep_step = _step_fn(name, False)
        t_rep = best_time(rep_step, 1, 0.0)
        rows.append({"model": name, "native_s": t_native, "repops_s": t_rep, "slowdown": t_rep / t_native,
                     "primitive_calls": primitive_calls(rep_step)})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 512, 1024, 2048])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "repops_cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["REPOPS_NUM_THREADS"] = str(args.threads)
    con = Console()
    mm = bench_matmul(args.sizes, args.threads)
    t = Table("n", "torch GFLOP/s", "RepOps GFLOP/s", "RepOps / torch")
    for r in mm:
        t.add_row(str(r["n"]), f"{r['blas_gflops']:.1f}", f"{r['repops_gflops']:.1f}", f"{r['ratio']:.2f}")
    con.print(t)
    steps = [] if args.skip_steps else bench_steps(3)
    if steps:
        t = Table("model", "native step (s)", "RepOps step (s)", "slowdown", "primitive calls / step")
        for r in steps:
            t.add_row(r["model"], f"{r['native_s']:.3f}", f"{r['repops_s']:.3f}", f"{r['slowdown']:.1f}x",
                      f"{r['primitive_calls']:,}")
        con.print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cpu_name = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    args.out.with_suffix(".json").write_text(json.dumps({"threads": args.threads, "cpu": cpu_name,
                                                         "matmul": mm, "steps": steps}, indent=1))
    from plotting import throughput_plot
    throughput_plot(args.out.with_suffix(".png"), [r["n"] for r in mm],
                    {"torch (BLAS, any order)": [r["blas_gflops"] for r in mm],
                     "RepOps (fixed k order, fma)": [r["repops_gflops"] for r in mm]},
                    "GFLOP/s", f"fp32 matmul, {args.threads} threads")
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
