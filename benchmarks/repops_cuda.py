"""RepOps CUDA vs native PyTorch CUDA, measured in one run on a GPU machine (ratios); or,
with --counts, what the launch glue does per training step, counted on the CPU emulator.

  python benchmarks/repops_cuda.py [--sizes 1024 2048 4096 8192] [--skip-steps]
                                   [--gpu-tests JUNIT.xml] [--sweep]
  python benchmarks/repops_cuda.py --counts [--models mlp llama llama-d1024]

1. matmul, n x n x n, and batched (attention-shaped) matmul: the RepOps kernel (fixed k
   order, fma, from +0) vs torch on cuBLAS with TF32 off. Bar: time ratio <= 1.3 at n >=
   2048, <= 1.6 at 1024.
2. one AdamW training step (configurations of benchmarks/repops_cpu.py: mlp, llama and
   llama-d1024, the d1024 / 8 layers / seq 512 / batch 4 / vocab 32,000 step) under
   repops.deterministic() with CUDA tensors vs native torch CUDA (TF32 off), with the RepOps
   kernel launches per step; and llama-1b, transformers' LlamaForCausalLM at Llama-1B's shape
   (hidden 2,048, 16 layers, 32 heads, vocab 32,000, seq 1,024, batch 4). Bars: llama-d1024
   <= 2x, mlp <= 3x.
3. --sweep: the matmul at n = 2048 and 4096 under other tile shapes (repops/cuda/kernels.py
   TUNING; the bits never depend on it), to pick the fastest for this GPU.
4. --counts (no GPU): one training step of each model at the benchmark's shapes, its torch
   tensors treated as CUDA tensors on the CUDA emulator (repops/cuda/counting.py), the second
   step counted (the first may fill caches) with the kernels stubbed (their values are never
   read by the glue): launches, host syncs, CuPy copy kernels (and MB), CuPy's other kernels
   (integer elementwise ops and reductions), DLPack conversions, host->device uploads and
   narrow launches (< 132 blocks at the GPU's geometry, a serial loop of 64+ per thread;
   folds to fewer outputs than SMs listed apart), views (CuPy arrays over torch's memory: as_array's
   calls on the GPU, the largest host cost there), and glue_ratio = host time of a RepOps step with the launches stubbed
   / native torch's CPU step, both on a tiny model with the same layers (TINY), interleaved
   (passthrough_ratio beside it: the native step under two Python modes that only call
   through, what torch charges any dispatch-mode system before it does anything). Native torch
   runs the models' plain compositions: outside RepOps, repops.ops' fused ops (rms_norm,
   attention, rope) are their plain torch ops, never a custom op's dispatch. Writes
   benchmarks/results/repops_cuda_counts.json.
Writes benchmarks/results/repops_cuda.{json,png}: device, gpu_tests {passed, failed} (from
the pytest JUnit file scripts/gpu-check.sh passes), matmul [{n, repops_tflops, cublas_tflops,
ratio, tuned_tile_ratio: the same product with the small tile off (Ops.small_below = 0), where
it is cheap to time}], bmm [...], steps [{model, native_s, repops_s, slowdown, launches,
graph_s (the step replayed as a CUDA graph: its GPU time, no host glue) or graph_error}],
sweep [...]. Needs CuPy and a CUDA device.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from repops.backends import get  # noqa: E402

SWEEP = [  # (BM, BN, BK, WM, WN): every one a valid tiling (matmul.cu's #error says why not)
    (128, 128, 16, 64, 32), (128, 128, 8, 64, 32), (128, 128, 16, 32, 64), (128, 64, 16, 64, 32),
    (64, 128, 16, 32, 64), (64, 64, 16, 32, 64), (64, 64, 8, 32, 64),
]


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


def _mm_row(shape, matmul):
    import cupy
    torch.backends.cuda.matmul.allow_tf32 = False
    *batch, m, k, n = shape
    g = torch.Generator(device="cuda").manual_seed(sum(shape))
    a = torch.randn(*batch, m, k, device="cuda", generator=g)
    b = torch.randn(*batch, k, n, device="cuda", generator=g)
    ca, cb = cupy.from_dlpack(a), cupy.from_dlpack(b)
    flop = 2.0 * m * k * n * (batch[0] if batch else 1)
    reps = 10 if flop < 2e11 else 3
    t_blas = gpu_time(lambda: torch.matmul(a, b), reps)
    t_rep = gpu_time(lambda: matmul(ca, cb), reps)
    row = {"cublas_s": t_blas, "repops_s": t_rep, "cublas_tflops": flop / t_blas / 1e12,
           "repops_tflops": flop / t_rep / 1e12, "ratio": t_rep / t_blas}
    ops = getattr(matmul, "__self__", None)
    if ops is not None and flop < 2e11:  # the same product on the tuned tile only: does the small tile pay here?
        saved, ops.small_below = ops.small_below, 0
        try:
            row["tuned_tile_ratio"] = gpu_time(lambda: matmul(ca, cb), reps) / t_blas
        finally:
            ops.small_below = saved
    return row


def bench_matmul(sizes, kernels):
    return [{"n": n, **_mm_row((n, n, n), kernels["matmul"])} for n in sizes]


def bench_bmm(kernels):
    """Attention's two products: scores = q @ k^T and out = p @ v (batch = batch x heads)."""
    return [{"shape": list(s), **_mm_row(s, kernels["matmul"])}
            for s in ((64, 512, 64, 512), (64, 512, 512, 64), (32, 1024, 128, 1024), (32, 1024, 1024, 128))]


def bench_sweep():
    from repops.cuda.device import Device
    from repops.cuda.ops import Ops
    rows = []
    for bm, bn, bk, wm, wn in SWEEP:
        tuning = {"MATMUL_BM": bm, "MATMUL_BN": bn, "MATMUL_BK": bk, "MATMUL_WM": wm, "MATMUL_WN": wn}
        try:
            ops = Ops(Device(tuning=tuning))
        except Exception as e:  # a shape this GPU cannot hold (registers, shared memory)
            rows.append({"tuning": tuning, "error": str(e)[:200]})
            continue
        rows.append({"tuning": tuning, **{f"ratio_{n}": _mm_row((n, n, n), ops.matmul)["ratio"] for n in (2048, 4096)}})
    return rows


class _Launches:
    """Counts kernel launches of the device runtime while active."""

    def __init__(self):
        from repops.cuda.device import device
        self.rt, self.n = device(), 0

    def __enter__(self):
        orig = self.rt.launch

        def counted(*a, **k):
            self.n += 1
            return orig(*a, **k)
        self.rt.launch = counted
        return self

    def __exit__(self, *exc):
        del self.rt.launch


# Llama-1B's shape as Hugging Face writes it (TinyLlama's widths); batch 4 of 1,024 tokens
LLAMA_1B = dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=32,
                intermediate_size=5632, vocab_size=32000, max_position_embeddings=1024, attn_implementation="sdpa")


def _hf_llama_step(native):
    """One AdamW step of transformers' LlamaForCausalLM at LLAMA_1B (the issue's llama-1b)."""
    import transformers as T
    from repops.optim import AdamW
    torch.manual_seed(0)
    model = T.LlamaForCausalLM(T.LlamaConfig(**LLAMA_1B)).float()
    ids = torch.randint(0, LLAMA_1B["vocab_size"], (4, LLAMA_1B["max_position_embeddings"]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if native else AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    if native:
        return step

    def rep_step():
        import repops
        with repops.deterministic():
            step()
    return rep_step


def host_profile(step, reps=5, top=25) -> list[dict]:
    """Where a RepOps step's host time goes on the GPU machine (cProfile, per step, the
    functions of most own time): the step is host-bound, and the emulator's stubbed step
    misses what only the device path does (CuPy's launches, torch's allocator, streams)."""
    import cProfile
    import pstats
    def steps():
        for _ in range(reps):
            step()
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # (the step's one sync is inside it; this waits for the last)
    pr = cProfile.Profile()
    pr.runcall(steps)
    rows = sorted(pstats.Stats(pr).stats.items(), key=lambda kv: -kv[1][2])[:top]
    here = str(ROOT) + os.sep
    return [{"function": f"{f.replace(here, '')}:{line}({name})", "calls": nc // reps,
             "own_ms": round(tt / reps * 1e3, 3), "cumulative_ms": round(ct / reps * 1e3, 3)}
            for (f, line, name), (_, nc, tt, ct, _) in rows]


def _graph_time(step, reps) -> dict:
    """The RepOps step captured once as a CUDA graph and replayed (offchain/trainer/graphs.py,
    what an honest trainer's untraced steps do with graphs on): CUDA events around a replay are
    the step's GPU time, with no host glue in it. {graph_s} or {graph_error}."""
    from offchain.trainer.graphs import StepGraph
    try:
        g = StepGraph(lambda _: step(), (), None)
        return {"graph_s": gpu_time(lambda: g.replay(()), reps)}
    except Exception as e:  # noqa: BLE001 - recorded: what the next session fixes
        return {"graph_error": f"{type(e).__name__}: {str(e)[:300]}"}


def bench_steps(models=("mlp", "llama", "llama-d1024", "llama-1b"), profiled=("mlp", "llama")):
    from repops_cpu import _step_fn  # the same models, data and optimizer as the CPU benchmark
    rows = []
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name in models:
        times, reps = {}, 2 if name == "llama-1b" else 5
        try:
            for native in (True, False):
                torch.set_default_device("cuda")
                try:
                    step = _hf_llama_step(native) if name == "llama-1b" else _step_fn(name, native)
                finally:
                    torch.set_default_device(None)
                times[native] = gpu_time(step, reps)
                if native:
                    del step
                    torch.cuda.empty_cache()
            with _Launches() as count:
                step()
                torch.cuda.synchronize()
            graphed = _graph_time(step, reps)
            profile = host_profile(step) if name in profiled else None
        except (RuntimeError, ImportError) as e:  # out of memory on a smaller card, no transformers
            rows.append({"model": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
            continue
        finally:
            step = None
            torch.cuda.empty_cache()
        rows.append({"model": name, "native_s": times[True], "repops_s": times[False],
                     "slowdown": times[False] / times[True], "launches": count.n, **graphed,
                     "peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 1)}
                    | ({"host_profile": profile} if profile else {}))
    return rows


TINY = {  # glue_ratio's models: the benchmark's layers at tiny widths (host time, not kernels)
    "mlp": ("mlp", {"d_in": 16, "d_hidden": 32, "n_classes": 10}, 8),
    "llama": ("llama", {"vocab": 64, "d_model": 32, "n_layers": 4, "n_heads": 4, "d_ff": 64, "max_seq": 16}, 2),
    "llama-d1024": ("llama", {"vocab": 64, "d_model": 64, "n_layers": 8, "n_heads": 16, "d_ff": 128, "max_seq": 16}, 2),
}


def _emulated_step(name, configs=None):
    """(step under repops.deterministic("cuda-emu"), native torch step) of model `name`."""
    import repops
    import repops_cpu
    saved = dict(repops_cpu.CONFIGS)
    repops_cpu.CONFIGS.update(configs or {})
    try:
        step, native = repops_cpu._step_fn(name, False, deterministic=False), repops_cpu._step_fn(name, True)
    finally:
        repops_cpu.CONFIGS.clear()
        repops_cpu.CONFIGS.update(saved)

    def emulated():
        with repops.deterministic("cuda-emu"):
            step()
    return emulated, native


def count_step(name, configs=None, sites=True):
    """The Counts of one step of `name` (the second: caches filled), kernels stubbed."""
    from repops.cuda.counting import counting
    from repops.cuda.emulator import emulator
    get("cuda-emu")  # built and self-checked before counting
    step, _ = _emulated_step(name, configs)
    with counting(emulator(), stub=True, sites=False):
        step()
    with counting(emulator(), stub=True, sites=sites) as c:
        step()
    return c


def glue_ratio(name, reps=40):
    """Host time of a RepOps step (launches stubbed) / native torch's CPU step, best of reps
    each, the two interleaved (a shared machine's slow spells then slow both), one torch thread
    (a shared machine's other threads only add noise at these sizes)."""
    import time
    from repops.cuda.counting import counting
    from repops.cuda.emulator import emulator
    get("cuda-emu")
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def passthrough():  # the native step under two Python modes that do nothing: what any such mode costs
        with Functions(), Dispatch():
            native()
    step, native = _emulated_step(name, TINY)
    steps = (("native", native), ("repops", step), ("passthrough", passthrough))
    best, threads = {label: math.inf for label, _ in steps}, torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with counting(emulator(), stub=True, sites=False):
            for _, f in steps:
                f()
            for _ in range(reps):
                for label, f in steps:
                    t = time.perf_counter()
                    f()
                    best[label] = min(best[label], time.perf_counter() - t)
    finally:
        torch.set_num_threads(threads)
    return best["repops"] / best["native"], best


def bench_counts(models, out: Path, con):
    rows = []
    for name in models:
        c = count_step(name)
        ratio, times = glue_ratio(name)
        rows.append({"model": name, **c.row(), "glue_ratio": round(ratio, 2),
                     "passthrough_ratio": round(times["passthrough"] / times["native"], 2),
                     "glue_s": {k: round(v, 5) for k, v in times.items()},
                     "sites": {k: dict(v.most_common()) for k, v in sorted(c.sites.items())},
                     "kernels": dict(c.kernels.most_common())})
    cols = ("launches", "syncs", "copies", "copy_mb", "cupy_ops", "dlpack", "uploads", "narrow_launches",
            "allowed_launches", "views", "glue_ratio", "passthrough_ratio")
    t = Table("per step", *(r["model"] for r in rows), title="CUDA launch glue per training step (CUDA emulator)")
    for k in cols:
        t.add_row(k, *(str(r[k]) for r in rows))
    con.print(t)
    from repops.cuda.counting import ALLOWED, LOOP, SERIAL, SMS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "device": "CUDA emulator (CPU): the GPU's launch glue, kernels stubbed",
        "command": "python benchmarks/repops_cuda.py --counts",
        "narrow": f"< {SMS} blocks (of 256 threads for a grid-stride kernel; one per row or column group for the "
                  f"row kernels) and a per-thread serial loop >= {SERIAL}: {sorted(LOOP)}",
        "allow_list": sorted(ALLOWED), "tiny_models": TINY,
        "notes": "syncs: the one read of the deferred index checks when the repops.deterministic() block ends "
                 "(repops/faults.py settle); copies: CuPy copy kernels (contiguous copies, casts, fills), cupy_ops: "
                 "its other kernels (the index checks were, before index_check_i64); views: CuPy arrays made over torch's memory "
                 "(device.as_array, Device.empty's), the H200 host profile's as_array calls of the same steps (131 / 781), "
                 "~16 us of host each there: what launches with raw pointers would remove; glue_ratio: best of 40 each, native and RepOps steps interleaved, on a shared 2-core CPU, numpy "
                 "standing in for CuPy's host calls (CuPy's cost more): a lower bound, noisy; native: torch running "
                 "the models' plain compositions (repops.ops' fused ops are plain torch outside RepOps); passthrough_ratio: that "
                 "native step under a TorchFunctionMode and a TorchDispatchMode that only call through (torch's own cost "
                 "of a Python mode, with native torch's own, larger op count: its AdamW's per-parameter ops)",
        "models": rows}, indent=1))
    con.print(f"wrote {out}")


def gpu_tests(junit: Path | None) -> dict | None:
    if junit is None or not junit.exists():
        return None
    suites = ET.parse(junit).getroot()
    suites = [suites] if suites.tag == "testsuite" else list(suites)
    total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    return {"passed": total["tests"] - total["failures"] - total["errors"] - total["skipped"],
            "failed": total["failures"] + total["errors"], "skipped": total["skipped"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="also time other matmul tile shapes")
    ap.add_argument("--gpu-tests", type=Path, help="pytest JUnit XML of the gpu tests, recorded in the JSON")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "repops_cuda")
    ap.add_argument("--counts", action="store_true", help="count the launch glue per step on the CUDA emulator (no GPU)")
    ap.add_argument("--models", nargs="*", default=["mlp", "llama", "llama-d1024"], help="with --counts")
    args = ap.parse_args()
    con = Console()
    if args.counts:
        bench_counts(args.models, args.out.with_name(args.out.name + "_counts.json"), con)
        return
    kernels = get("cuda")  # a clear error without CuPy or a device; the self-check runs here
    mm, bmm = bench_matmul(args.sizes, kernels), bench_bmm(kernels)
    t = Table("shape", "cuBLAS TFLOP/s", "RepOps TFLOP/s", "RepOps time / cuBLAS time", "tuned tile only",
              title="matmul (TF32 off)")
    for r in mm + bmm:
        t.add_row(f"{r['n']}^3" if "n" in r else "x".join(map(str, r["shape"])), f"{r['cublas_tflops']:.1f}",
                  f"{r['repops_tflops']:.1f}", f"{r['ratio']:.2f}",
                  f"{r['tuned_tile_ratio']:.2f}" if "tuned_tile_ratio" in r else "-")
    con.print(t)
    sweep = bench_sweep() if args.sweep else []
    if sweep:
        t = Table("BM", "BN", "BK", "WM", "WN", "ratio 2048", "ratio 4096", title="matmul tile shapes")
        for r in sweep:
            tu = r["tuning"]
            cells = [str(tu[k]) for k in ("MATMUL_BM", "MATMUL_BN", "MATMUL_BK", "MATMUL_WM", "MATMUL_WN")]
            t.add_row(*cells, *((f"{r['ratio_2048']:.2f}", f"{r['ratio_4096']:.2f}") if "error" not in r
                                else (r["error"][:40], "")))
        con.print(t)
    steps = [] if args.skip_steps else bench_steps()
    if steps:
        t = Table("model", "native CUDA step (s)", "RepOps CUDA step (s)", "slowdown", "launches",
                  "RepOps graph replay (s)", "replay slowdown")
        for r in steps:
            graph = (f"{r['graph_s']:.4f}", f"{r['graph_s'] / r['native_s']:.1f}x") if "graph_s" in r else \
                (r.get("graph_error", "")[:40], "")
            t.add_row(*((r["model"], f"{r['native_s']:.4f}", f"{r['repops_s']:.4f}", f"{r['slowdown']:.1f}x",
                         str(r["launches"]), *graph) if "error" not in r else (r["model"], r["error"][:60], "", "", "",
                                                                                "", "")))
        con.print(t)
    tests = gpu_tests(args.gpu_tests)
    if tests:
        con.print(f"gpu tests: {tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "gpu_tests": tests, "matmul": mm, "bmm": bmm, "steps": steps,
         "sweep": sweep}, indent=1))
    from plotting import throughput_plot
    throughput_plot(args.out.with_suffix(".png"), [r["n"] for r in mm],
                    {"cuBLAS fp32 (TF32 off)": [r["cublas_tflops"] for r in mm],
                     "RepOps (fixed k order, fma)": [r["repops_tflops"] for r in mm]},
                    "TFLOP/s", torch.cuda.get_device_name())
    con.print(f"wrote {args.out.with_suffix('.json')} and .png")


if __name__ == "__main__":
    main()
