"""RepOps CUDA vs native PyTorch CUDA, measured in one run on a GPU machine (ratios).

  python benchmarks/repops_cuda.py [--sizes 1024 2048 4096 8192] [--skip-steps]

1. matmul time, n x n x n: the RepOps kernel (fixed k order, fma) vs torch.mm on cuBLAS
   with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False). Goal <= 1.3x at 4096.
2. one AdamW training step of each model (the configurations of benchmarks/repops_cpu.py)
   under repops.deterministic() with CUDA tensors vs native torch CUDA.
Writes benchmarks/results/repops_cuda.{json,png}. Needs CuPy and a CUDA device.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from repops.backends import get  # noqa: E402


def gpu_time(f, reps):
    """Best of reps, each timed with CUDA events around the launch."""
    f()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) / 1e3)
    return best


def bench_matmul(sizes, kernels):
    import cupy
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for n in sizes:
        g = torch.Generator(device="cuda").manual_seed(n)
        a = torch.randn(n, n, device="cuda", generator=g)
        b = torch.randn(n, n, device="cuda", generator=g)
        ca, cb = cupy.from_dlpack(a), cupy.from_dlpack(b)
        reps = 10 if n <= 4096 else 3
        t_blas = gpu_time(lambda: torch.mm(a, b), reps)
        t_rep = gpu_time(lambda: kernels["matmul"](ca, cb), reps)
        flop = 2.0 * n ** 3
        rows.append({"n": n, "cublas_s": t_blas, "repops_s": t_rep, "cublas_tflops": flop / t_blas / 1e12,
                     "repops_tflops": flop / t_rep / 1e12, "time_ratio": t_rep / t_blas})
    return rows


def bench_steps():
    from repops_cpu import _step_fn  # the same models, data and optimizer as the CPU benchmark
    rows = []
    for name in ("mlp", "llama"):
        times = {}
        for native in (True, False):
            torch.set_default_device("cuda")
            try:
                step = _step_fn(name, native)
            finally:
                torch.set_default_device(None)
            times[native] = gpu_time(step, 5)
        rows.append({"model": name, "native_s": times[True], "repops_s": times[False],
                     "slowdown": times[False] / times[True]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "repops_cuda")
    args = ap.parse_args()
    con = Console()
    kernels = get("cuda")  # a clear error without CuPy or a device
    mm = bench_matmul(args.sizes, kernels)
    t = Table("n", "cuBLAS TFLOP/s", "RepOps TFLOP/s", "RepOps time / cuBLAS time")
    for r in mm:
        t.add_row(str(r["n"]), f"{r['cublas_tflops']:.1f}", f"{r['repops_tflops']:.1f}", f"{r['time_ratio']:.2f}")
    con.print(t)
    steps = [] if args.skip_steps else bench_steps()
    if steps:
        t = Table("model", "native CUDA step (s)", "RepOps CUDA step (s)", "slowdown")
        for r in steps:
            t.add_row(r["model"], f"{r['native_s']:.4f}", f"{r['repops_s']:.4f}", f"{r['slowdown']:.1f}x")
        con.print(t)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "matmul": mm,
                                                         "steps": steps}, indent=1))
    from plotting import throughput_plot
    throughput_plot(args.out.with_suffix(".png"), [r["n"] for r in mm],
                    {"cuBLAS fp32 (TF32 off)": [r["cublas_tflops"] for r in mm],
                     "RepOps (fixed k order, fma)": [r["repops_tflops"] for r in mm]},
                    "TFLOP/s", torch.cuda.get_device_name())
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
