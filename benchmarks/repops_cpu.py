"""RepOps CPU vs native PyTorch CPU, measured in one run (ratios; the machine is shared).

  python benchmarks/repops_cpu.py [--sizes 128 256 512 1024 2048] [--threads 2] [--skip-steps]
                                  [--skip-realistic]

1. matmul GFLOP/s, n x n x n: repops.cpu.matmul vs torch.mm (MKL/OpenBLAS), same threads.
2. one AdamW training step of each model: under repops.deterministic() vs native torch
   (the same model and data; native times interleaved with RepOps', best of several):
   - mlp: 256 -> 1024 -> 1024 -> 10, batch 256;
   - llama: d=256, 4 layers, 4 heads, SwiGLU 768, seq 128, batch 8, vocab 1024 (the
     baseline of ../shared/TOOLCHAIN.md);
   - llama-realistic: d=512, 4 layers, 8 heads, SwiGLU 1536, seq 256, batch 8, vocab 32,000.
   With each: aten ops dispatched and compiled kernel calls per step (the dispatch overhead
   the fused kernels cut). Bars (issue #16): <= 1.5x small, <= 1.3x realistic.
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


CONFIGS = {  # name -> (model, config, batch)
    "mlp": ("mlp", {"d_in": 256, "d_hidden": 1024, "n_classes": 10}, 256),
    "llama": ("llama", {"vocab": 1024, "d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 768, "max_seq": 128}, 8),
    "llama-realistic": ("llama", {"vocab": 32000, "d_model": 512, "n_layers": 4, "n_heads": 8, "d_ff": 1536,
                                  "max_seq": 256}, 8),
    # the GPU's (benchmarks/repops_cuda.py)
    "llama-d1024": ("llama", {"vocab": 32000, "d_model": 1024, "n_layers": 8, "n_heads": 16, "d_ff": 2816,
                              "max_seq": 512}, 4),
}


def _step_fn(name, native, deterministic=True):
    """One AdamW step of the model: native (torch's AdamW, no RepOps), under RepOps, or
    (deterministic=False) RepOps' AdamW outside RepOps' mode, for another mode to run."""
    torch.manual_seed(0)
    kind, cfg, batch = CONFIGS[name]
    model = build(kind, **cfg)
    if kind == "llama":
        data = (torch.randint(0, cfg["vocab"], (batch, cfg["max_seq"] + 1)),)
    else:
        data = (torch.randn(batch, cfg["d_in"]), torch.randint(0, cfg["n_classes"], (batch,)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if native else AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        model.loss(*data).backward()
        opt.step()
    if native or not deterministic:
        return step

    def rep_step():
        with repops.deterministic():
            step()
    return rep_step


def dispatch_counts(step) -> tuple[int, int]:
    """(aten ops dispatched, compiled kernel calls) in one step: the Python overhead the
    fused kernels remove (a reference numpy step, if any ran, counts as a kernel call)."""
    from repops import backends, mode
    from repops.reference import prims as P
    counts, record = [0, 0], P.record
    orig_get, orig_dispatch = backends.get, mode.RepOpsMode.__torch_dispatch__

    def counting_table(name):
        t = orig_get(name)
        return {k: (lambda *a, _f=f, **kw: counts.__setitem__(1, counts[1] + 1) or _f(*a, **kw)) for k, f in t.items()}

    def dispatch(self, func, types, args=(), kwargs=None):
        counts[0] += 1
        return orig_dispatch(self, func, types, args, kwargs)
    backends.get, mode.RepOpsMode.__torch_dispatch__ = counting_table, dispatch
    P.record = lambda *a: counts.__setitem__(1, counts[1] + 1) or record(*a)
    try:
        step()
    finally:
        backends.get, mode.RepOpsMode.__torch_dispatch__, P.record = orig_get, orig_dispatch, record
    return counts[0], counts[1]


def bench_steps(names, rounds):
    """Native and RepOps steps interleaved, best of `rounds` each (the machine is shared)."""
    from tqdm import tqdm
    rows = []
    for name in tqdm(names, desc="training steps"):
        native, rep = _step_fn(name, True), _step_fn(name, False)
        native(), rep()  # warm-up: allocations, kernel builds
        t_native = t_rep = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            native()
            t_native = min(t_native, time.perf_counter() - t)
            t = time.perf_counter()
            rep()
            t_rep = min(t_rep, time.perf_counter() - t)
        ops, kernels = dispatch_counts(rep)
        rows.append({"model": name, "native_s": t_native, "repops_s": t_rep, "slowdown": t_rep / t_native,
                     "aten_ops": ops, "kernel_calls": kernels})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 512, 1024, 2048])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--skip-realistic", action="store_true", help="only the small models (the realistic step takes ~1 min)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved native/RepOps rounds per model")
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
    names = ["mlp", "llama"] + ([] if args.skip_realistic else ["llama-realistic"])
    steps = [] if args.skip_steps else bench_steps(names, args.rounds)
    if steps:
        t = Table("model", "native step (s)", "RepOps step (s)", "slowdown", "aten ops / step", "kernel calls / step")
        for r in steps:
            t.add_row(r["model"], f"{r['native_s']:.3f}", f"{r['repops_s']:.3f}", f"{r['slowdown']:.2f}x",
                      f"{r['aten_ops']:,}", f"{r['kernel_calls']:,}")
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
